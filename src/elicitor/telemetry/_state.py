"""What is live, decided without importing OpenTelemetry when nobody uses it.

Every hook on the request path reads :data:`state` ``.on`` first and does nothing else when it is false, so a
process without an OpenTelemetry SDK pays one attribute check per hook and never imports the API (a fifth of a
second at start on a busy machine). :func:`refresh` decides: it runs when a connection or an app starts and when
:func:`elicitor.telemetry.configure` is called, never per request. A provider can be set only once, so the answer
only ever goes from "nothing" to "something".
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Sized
from typing import TYPE_CHECKING, Literal, Protocol

from ..i18n._message import N_

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Tracer, TracerProvider

    from ._instruments import Instruments

Mode = Literal["native", "propagation_only", "off"]
"""``native``: spans, metrics and trace context in ``_meta``; ``propagation_only``: carry trace context, make no
spans or metrics of our own (another layer owns them); ``off``: touch nothing. The same three as FastMCP's
``FASTMCP_TELEMETRY_MODE``."""

MODES: tuple[Mode, ...] = ("native", "propagation_only", "off")
ENV_MODE = "ELICITOR_TELEMETRY_MODE"
"""The environment variable read at import for the mode (``native`` when unset)."""
TASK_ORIGIN = "dev.elicitor/taskOrigin"
"""``_meta`` key of every ``tasks/*`` response: the W3C trace context (``traceparent``, ``tracestate``) of the request
that created the task, so that its later polls, updates and result link to it on both sides, whichever process,
client object or replica serves or sends them (``_propagation.task_origin``)."""


class State:
    """What is live. Read ``on`` first: when it is false no hook does anything else."""

    __slots__ = (
        "instruments",
        "meter_provider",
        "mode",
        "on",
        "propagate",
        "record_content",
        "tracer",
        "tracer_provider",
    )

    def __init__(self) -> None:
        self.mode: Mode = "native"
        self.on = False
        """Something to do: a tracer, instruments, or trace context to carry."""
        self.tracer: Tracer | None = None
        self.instruments: Instruments | None = None
        self.propagate = False
        """Carry trace context without spans of our own (``propagation_only``)."""
        self.record_content = False
        self.tracer_provider: TracerProvider | None = None
        """The provider given to ``configure`` (else the global one)."""
        self.meter_provider: MeterProvider | None = None


state = State()
parked_tables: weakref.WeakSet[Sized] = weakref.WeakSet()
"""Every live table of parked runs, summed when metrics are collected (``elicitor.runs.parked``)."""


class Holding(Sized, Protocol):
    """What an outbox shows the metrics: the messages it holds (``len``) and their bytes (``size``)."""

    @property
    def size(self) -> int: ...


outboxes: weakref.WeakSet[Holding] = weakref.WeakSet()
"""Every live outbox of messages kept for the store to come back, summed when metrics are collected
(``elicitor.outbox.held``, ``elicitor.outbox.held.size``)."""


def mode_from_env() -> Mode:
    value = os.environ.get(ENV_MODE, "native").strip().lower() or "native"
    for known in MODES:
        if value == known:
            return known
    raise ValueError(
        N_("{name} must be one of {modes}, not {value}", name=ENV_MODE, modes=", ".join(MODES), value=repr(value))
    )


def set_mode(
    mode: Mode | None,
    record_content: bool | None,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
) -> None:
    if mode is not None and mode not in MODES:
        raise ValueError(f"telemetry mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode is not None or tracer_provider is not None or meter_provider is not None:
        # Start over: what was made from the previous mode or providers no longer applies.
        state.mode = mode or state.mode
        state.tracer_provider, state.meter_provider = tracer_provider, meter_provider
        state.tracer = None
        state.instruments = None
        state.propagate = False
    if record_content is not None:
        state.record_content = record_content
    refresh()


def _api_in_use() -> bool:
    """Could an SDK be configured? Not unless someone imported the API (or names a provider in the environment)."""
    return (
        "opentelemetry.trace" in sys.modules
        or "opentelemetry.metrics" in sys.modules
        or "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
        or "OTEL_PYTHON_METER_PROVIDER" in os.environ
    )


def refresh() -> None:
    """Look again for an SDK (cheap; called when a connection or an app starts, never on each request)."""
    if state.mode == "off":
        state.on = False
        return
    if state.mode == "native" and not _api_in_use() and state.tracer_provider is None and state.meter_provider is None:
        state.on = False
        return
    if state.mode == "native" and state.tracer is not None and state.instruments is not None:
        return
    from ._instruments import activate

    activate(state)
    state.on = state.tracer is not None or state.instruments is not None or state.propagate


def track_parked(table: Sized) -> None:
    """Count ``len(table)`` in ``elicitor.runs.parked`` for as long as ``table`` lives (once per connection)."""
    parked_tables.add(table)


def track_outbox(outbox: Holding) -> None:
    """Count what ``outbox`` holds in ``elicitor.outbox.held`` (and its bytes) for as long as it lives."""
    outboxes.add(outbox)
