"""The metric instruments and what turns telemetry on: the tracer and the instruments are made here, once, when
:func:`._state.refresh` finds a real provider; until then nothing of OpenTelemetry is called."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, Observation

from ._state import State, outboxes, parked_tables

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram, Meter, UpDownCounter


SCOPE = "elicitor"
"""The instrumentation scope name of every span and instrument."""


DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""The semantic conventions' advice for ``mcp.*.operation.duration``."""


PERSON_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
"""A person answering takes seconds to an hour."""


class Instruments:
    """The metric instruments, made once a real meter provider is set."""

    __slots__ = (
        "client_duration",
        "client_session",
        "elicitation_duration",
        "elicitations",
        "outbox",
        "pending",
        "round_paths",
        "rounds",
        "server_duration",
        "server_session",
        "store_duration",
        "tasks",
    )

    def __init__(self, meter: Meter) -> None:
        self.server_duration: Histogram = meter.create_histogram(
            "mcp.server.operation.duration", unit="s",
            description="MCP request duration as observed on the receiver, until the result is sent.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )  # fmt: skip
        self.client_duration: Histogram = meter.create_histogram(
            "mcp.client.operation.duration", unit="s",
            description="MCP request duration as observed on the sender, until the response is received.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )  # fmt: skip
        self.server_session: Histogram = meter.create_histogram(
            "mcp.server.session.duration", unit="s",
            description="How long an MCP session lasted, as observed on the server.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )  # fmt: skip
        self.client_session: Histogram = meter.create_histogram(
            "mcp.client.session.duration", unit="s",
            description="How long an MCP session lasted, as observed on the client.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )  # fmt: skip
        self.elicitation_duration: Histogram = meter.create_histogram(
            "elicitor.elicitation.duration", unit="s",
            description="Time from a question being asked to its answer (the person's time), by outcome.",
            explicit_bucket_boundaries_advisory=PERSON_BUCKETS,
        )  # fmt: skip
        self.elicitations = meter.create_counter(
            "elicitor.elicitations", unit="{elicitation}", description="Questions answered, by mode and outcome."
        )
        self.pending: UpDownCounter = meter.create_up_down_counter(
            "elicitor.elicitation.pending", unit="{elicitation}", description="Questions waiting for a person."
        )
        self.rounds: Histogram = meter.create_histogram(
            "elicitor.call.rounds", unit="{round}",
            description="Rounds a 2026-07-28 call took until its result (1: no question asked).",
            explicit_bucket_boundaries_advisory=(1, 2, 3, 4, 5, 8, 13, 21, 34),
        )  # fmt: skip
        self.store_duration: Histogram = meter.create_histogram(
            "elicitor.store.operation.duration", unit="s",
            description="Operations on the shared store (Redis), by operation, and error.type when one failed.",
            explicit_bucket_boundaries_advisory=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
        )  # fmt: skip
        self.round_paths = meter.create_counter(
            "elicitor.rounds",
            unit="{round}",
            description="2026-07-28 rounds served, by path (first, parked, replayed).",
        )
        self.tasks = meter.create_counter(
            "elicitor.tasks", unit="{task}", description="Task status changes, by the status entered."
        )
        self.outbox = meter.create_counter(
            "elicitor.outbox.messages", unit="{message}",
            description="Messages for other replicas' sessions taken while the store was away past the hold: kept, "
            "relayed once it was back, or dropped (elicitor.outbox.reason: full, gone, expired, failed, stopped).",
        )  # fmt: skip


def activate(live: State) -> None:
    """Make what the configured providers allow (see :func:`._state.refresh`)."""
    if live.mode == "propagation_only":
        live.propagate = True
        return
    tracer_provider = live.tracer_provider or trace.get_tracer_provider()
    if live.tracer is None and not isinstance(tracer_provider, trace.ProxyTracerProvider):
        live.tracer = tracer_provider.get_tracer(SCOPE, _version())
    meter_provider = live.meter_provider
    if meter_provider is None and meter_configured():
        meter_provider = metrics.get_meter_provider()
    if live.instruments is None and meter_provider is not None:
        meter = meter_provider.get_meter(SCOPE, _version())
        live.instruments = Instruments(meter)
        meter.create_observable_up_down_counter(
            "elicitor.runs.parked", callbacks=[_observe_parked], unit="{run}",
            description="2026-07-28 runs waiting in this replica for their next round (a cache).",
        )  # fmt: skip
        meter.create_observable_up_down_counter(
            "elicitor.outbox.held", callbacks=[_observe_held], unit="{message}",
            description="Messages this replica keeps for other replicas' sessions until the store is back.",
        )  # fmt: skip
        meter.create_observable_up_down_counter(
            "elicitor.outbox.held.size", callbacks=[_observe_held_size], unit="By",
            description="Bytes of the messages this replica keeps for other replicas' sessions.",
        )  # fmt: skip


def meter_configured() -> bool:
    """Whether a real meter provider is set (the API's own is a proxy until then)."""
    return not type(metrics.get_meter_provider()).__name__.startswith(("_Proxy", "NoOp"))


def _version() -> str:
    from .._version import __version__

    return __version__


def _observe_parked(_options: CallbackOptions) -> Iterable[Observation]:
    yield Observation(sum(len(table) for table in list(parked_tables)))


def _observe_held(_options: CallbackOptions) -> Iterable[Observation]:
    yield Observation(sum(len(outbox) for outbox in list(outboxes)))


def _observe_held_size(_options: CallbackOptions) -> Iterable[Observation]:
    yield Observation(sum(outbox.size for outbox in list(outboxes)))
