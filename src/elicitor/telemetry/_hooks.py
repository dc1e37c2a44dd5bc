"""The hooks the layers call: spans, trace context in ``_meta``, metrics — all behind one cheap check.

Theory of operation. elicitor depends on ``opentelemetry-api`` alone. Until the application installs an SDK
(``trace.set_tracer_provider``, ``metrics.set_meter_provider``), the API hands out proxies that record nothing but
still cost a few microseconds per span; so elicitor does not call them at all. :data:`state` says what is live:
a tracer once a real tracer provider is set, instruments once a real meter provider is set, and whether trace
context is carried. It is worked out again (:func:`refresh`) when a connection or app starts, and it only ever goes
from "nothing" to "something" (a provider can be set once), so every hook on the request path begins with one
attribute check, ``state.on``, and does nothing else when it is false.

Where the hooks sit (one place per layer, nothing sprinkled):

* ``session/``: :func:`send_request` wraps every request a peer sends (the client's calls, the server's
  ``elicitation/create`` pushes, the proxy's forwarded requests): a ``CLIENT`` span, and the span's context
  written into ``params._meta`` as ``traceparent``/``tracestate``. :func:`serve_request` wraps every request a peer
  receives (stdio, HTTP's handshake era): a ``SERVER`` span whose parent is the context in ``params._meta``.
* ``server/http``: the 2026-07-28 exchange calls :func:`serve_request` too (it has no session).
* ``server/``: the askers open an ``elicitation`` span per question (:func:`asking`); the round driver reports
  how many rounds a call took; the task engine reports status changes.
* ``client/``: one span around a whole call (:func:`calling`) so every round of a 2026-07-28 call, whichever
  replica serves it, is one trace; one ``elicitation`` span per question answered (:func:`answering`).

Names and attributes follow the OpenTelemetry semantic conventions for MCP (development status;
https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/): span name ``{mcp.method.name} {target}``, kind
``CLIENT``/``SERVER``, ``mcp.method.name``, ``jsonrpc.request.id``, ``gen_ai.tool.name``, ``gen_ai.prompt.name``,
``gen_ai.operation.name = execute_tool``, ``mcp.protocol.version``, ``error.type`` and ``rpc.response.status_code``
(the JSON-RPC code; ``tool_error`` for an ``isError`` result), status ``ERROR`` with the error's message; trace
context in ``params._meta`` under the unprefixed W3C keys (SEP-414). Nothing a person typed, no message shown to
them, no URL and no argument is recorded unless :func:`elicitor.telemetry.configure` is told ``record_content=True``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.trace import SpanKind, StatusCode

from ..types import JSONObject, RequestId
from ._state import TASK_ORIGIN, State, parked_tables, state

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram, Meter, UpDownCounter
    from opentelemetry.trace import Span

SCOPE = "elicitor"
"""The instrumentation scope name of every span and instrument."""

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
BAGGAGE = "baggage"
_CARRIED = (TRACEPARENT, TRACESTATE, BAGGAGE)

DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""The semantic conventions' advice for ``mcp.*.operation.duration``."""
PERSON_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
"""A person answering takes seconds to an hour."""

_T = TypeVar("_T")
_P = ParamSpec("_P")


class Instruments:
    """The metric instruments, made once a real meter provider is set."""

    __slots__ = (
        "client_duration",
        "elicitation_duration",
        "elicitations",
        "pending",
        "round_paths",
        "rounds",
        "server_duration",
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


def meter_configured() -> bool:
    """Whether a real meter provider is set (the API's own is a proxy until then)."""
    return not type(metrics.get_meter_provider()).__name__.startswith(("_Proxy", "NoOp"))


def _version() -> str:
    from .._version import __version__

    return __version__


def _observe_parked(_options: CallbackOptions) -> Iterable[Observation]:
    yield Observation(sum(len(table) for table in list(parked_tables)))


# ---- attributes ----------------------------------------------------------------------------------------------


def request_attributes(method: str, params: JSONObject | None, request_id: RequestId | None) -> dict[str, Any]:
    """The semantic conventions' attributes of a request, and its span name's target (first item)."""
    attributes: dict[str, Any] = {"mcp.method.name": method}
    if request_id is not None:
        attributes["jsonrpc.request.id"] = str(request_id)
    if params:
        name = params.get("name")
        if method == "tools/call" and isinstance(name, str):
            attributes["gen_ai.tool.name"] = name
            attributes["gen_ai.operation.name"] = "execute_tool"
        elif method == "prompts/get" and isinstance(name, str):
            attributes["gen_ai.prompt.name"] = name
        elif method == "elicitation/create":
            mode = params.get("mode", "form")
            attributes["elicitor.elicitation.mode"] = mode if mode in ("form", "url") else "form"
        elif state.record_content and method.startswith("resources/") and isinstance(params.get("uri"), str):
            attributes["mcp.resource.uri"] = params["uri"]
        task = params.get("taskId")
        if isinstance(task, str) and method.startswith("tasks/"):
            attributes["elicitor.task.id"] = task
        meta = params.get("_meta")
        if isinstance(meta, dict):
            version = meta.get("io.modelcontextprotocol/protocolVersion")
            if isinstance(version, str):
                attributes["mcp.protocol.version"] = version
        if state.record_content and method == "tools/call" and "arguments" in params:
            import json

            attributes["gen_ai.tool.call.arguments"] = json.dumps(params["arguments"], default=str)
    return attributes


def _network(attributes: dict[str, Any], transport: str, session_id: str | None, url: str | None = None) -> None:
    """The connection's attributes: ``network.transport`` (``pipe`` for stdio, ``tcp`` for HTTP) and
    ``network.protocol.name``, per the conventions' "Recording MCP transport"; the HTTP session's ``mcp.session.id``;
    on a client's span over HTTP, ``server.address`` and ``server.port`` from the endpoint's URL (a stdio server
    has no address: the conventions' stdio examples carry ``network.transport = pipe`` alone)."""
    attributes["network.transport"] = "pipe" if transport == "pipe" else "tcp"
    if transport != "pipe":
        attributes["network.protocol.name"] = transport
    if session_id is not None:
        attributes["mcp.session.id"] = session_id
    if url is not None:
        address = server_address(url)
        if address is not None:
            attributes["server.address"], attributes["server.port"] = address


@lru_cache(maxsize=64)
def server_address(url: str) -> tuple[str, int] | None:
    """``server.address`` and ``server.port`` of an endpoint URL: its host as written (no DNS lookup; an IPv6
    address without brackets) and its port, or the scheme's (the conventions' general attributes, "Server
    attributes": the port is recommended whenever the address is set)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    if port is None:
        port = 443 if parts.scheme == "https" else 80 if parts.scheme == "http" else None
    return None if port is None else (parts.hostname, port)


def _span_name(method: str, attributes: Mapping[str, Any]) -> str:
    target = attributes.get("gen_ai.tool.name") or attributes.get("gen_ai.prompt.name")
    return f"{method} {target}" if target else method


def _error_code(exc: BaseException) -> str | None:
    code = getattr(exc, "code", None)
    return str(code) if isinstance(code, int) and not isinstance(code, bool) else None


def _fail(span: Span | None, attributes: dict[str, Any], exc: BaseException) -> None:
    code = _error_code(exc)
    if code is not None:  # a JSON-RPC error: its code is both (semconv, "error.type" note [1])
        attributes["error.type"] = attributes["rpc.response.status_code"] = code
    else:
        attributes["error.type"] = _qualname(exc)
    if span is not None:
        span.set_attributes({k: attributes[k] for k in ("error.type", "rpc.response.status_code") if k in attributes})
        # The message of a JSON-RPC error is the peer's or ours, never a person's answer; other exceptions are
        # named, not described (their text may quote anything).
        span.set_status(StatusCode.ERROR, str(exc) if code is not None else None)


def _qualname(exc: BaseException) -> str:
    import anyio

    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return "cancelled"
    if isinstance(exc, TimeoutError):
        return "timeout"
    return type(exc).__qualname__


def _result(span: Span | None, attributes: dict[str, Any], result: JSONObject) -> None:
    if result.get("isError") is True:
        attributes["error.type"] = "tool_error"
        if span is not None:
            span.set_attribute("error.type", "tool_error")
            span.set_status(StatusCode.ERROR)
    result_type = result.get("resultType")
    if result_type == "input_required" and span is not None:
        span.set_attribute("elicitor.result_type", "input_required")
        requests = result.get("inputRequests")
        if isinstance(requests, dict):
            span.set_attribute("elicitor.input_requests", len(requests))
    task = result.get("task") if result_type is None else result if result_type == "task" else None
    if span is not None and isinstance(task, dict) and isinstance(task.get("taskId"), str):
        span.set_attribute("elicitor.task.id", task["taskId"])  # 2025-11-25 {"task": Task}; 2026-07-28 a Task
    meta = result.get("_meta")
    if span is not None and isinstance(meta, dict) and TASK_ORIGIN in meta:
        created = _span_context(meta[TASK_ORIGIN])
        if created is not None:  # a tasks/* response: link to the span that created the task (same on both sides)
            span.add_link(created, {"elicitor.link": "task_created"})


def _metric_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("mcp.method.name", "gen_ai.tool.name", "gen_ai.prompt.name", "error.type", "mcp.protocol.version")
    return {k: attributes[k] for k in keep if k in attributes}


# ---- trace context in _meta ----------------------------------------------------------------------------------


def _extract(params: JSONObject | None) -> otel_context.Context | None:
    """The context a peer put in ``params._meta`` (SEP-414), or ``None``."""
    if not params:
        return None
    meta = params.get("_meta")
    if not isinstance(meta, dict) or TRACEPARENT not in meta:
        return None
    carrier = {key: value for key in _CARRIED if isinstance(value := meta.get(key), str)}
    ctx = propagate.extract(carrier)
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return None
    return ctx


def _inject(params: JSONObject | None, ctx: otel_context.Context | None) -> JSONObject | None:
    """``params`` with the context in ``_meta`` (a copy: the caller's dicts are never changed)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=ctx)
    if TRACEPARENT not in carrier:
        return params
    params = dict(params or {})
    meta = params.get("_meta")
    params["_meta"] = {**(meta if isinstance(meta, dict) else {}), **carrier}
    return params


def _span_context(carrier: object) -> trace.SpanContext | None:
    """The span context a W3C trace context carrier names (``traceparent``, ``tracestate``), or ``None``."""
    if not isinstance(carrier, dict) or not isinstance(carrier.get(TRACEPARENT), str):
        return None
    kept = {key: value for key in (TRACEPARENT, TRACESTATE) if isinstance(value := carrier.get(key), str)}
    ctx = propagate.extract(kept)
    context = trace.get_current_span(ctx).get_span_context()
    return context if context.is_valid else None


# ---- tasks: where they were created --------------------------------------------------------------------------


def task_origin() -> dict[str, str] | None:
    """The current span's context, kept with a task when it is created (``traceparent``, ``tracestate``; never the
    baggage, which may hold anything the application put there), or ``None`` outside a trace."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    kept = {key: carrier[key] for key in (TRACEPARENT, TRACESTATE) if key in carrier}
    return kept or None


def with_task_origin(result: JSONObject, origin: object) -> JSONObject:
    """``result`` (a ``tasks/*`` response) naming the request that created its task in ``_meta`` (a copy)."""
    if _span_context(origin) is None:
        return result
    meta = result.get("_meta")
    return {**result, "_meta": {**(meta if isinstance(meta, dict) else {}), TASK_ORIGIN: origin}}


@contextmanager
def in_task_origin(origin: object, *, elsewhere: bool = False) -> Iterator[None]:
    """Within: the context of the request that created the task, so a run started here (a takeover, a replay on
    another replica) asks its questions in the task's own trace, not in the trace of the poll that woke it.

    ``elsewhere``: only outside that trace (a client answering a task it picked up later; one still inside the
    call that created the task is in its trace already, under its own call span)."""
    created = _span_context(origin)
    current = trace.get_current_span().get_span_context()
    if created is None or (elsewhere and current.is_valid and current.trace_id == created.trace_id):
        yield
        return
    token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(created)))
    try:
        yield
    finally:
        otel_context.detach(token)


# ---- the request layer ---------------------------------------------------------------------------------------


async def serve_request(
    handle: Callable[[_T], Awaitable[JSONObject]],
    request: _T,
    method: str,
    params: JSONObject | None,
    request_id: RequestId | None,
    transport: str = "pipe",
    session_id: str | None = None,
) -> JSONObject:
    """Answer a peer's request inside a ``SERVER`` span whose parent is the context in its ``_meta``.

    Called only when ``state.on``. Without a tracer the extracted context is still made current, so requests
    made while serving it carry the trace on.
    """
    parent = _extract(params)
    tracer = state.tracer
    instruments = state.instruments
    if tracer is None and instruments is None:
        if parent is None:
            return await handle(request)
        carried = otel_context.attach(parent)
        try:
            return await handle(request)
        finally:
            otel_context.detach(carried)
    attributes = request_attributes(method, params, request_id)
    _network(attributes, transport, session_id)
    span: Span | None = None
    token: object = None
    if tracer is not None:
        links = None
        ambient = trace.get_current_span().get_span_context()
        if parent is not None and ambient.is_valid:  # semconv: parent from _meta, link the ambient context
            links = [trace.Link(ambient)]
        span = tracer.start_span(
            _span_name(method, attributes), context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links
        )
        token = otel_context.attach(trace.set_span_in_context(span, parent))
    elif parent is not None:
        token = otel_context.attach(parent)
    ended = None if instruments is None else partial(_record, instruments.server_duration, attributes)
    return await _measured(span, token, attributes, _result, ended, handle, request)


async def send_request(
    send: Callable[[JSONObject | None, Callable[[RequestId], None]], Awaitable[JSONObject]],
    method: str,
    params: JSONObject | None,
    transport: str = "pipe",
    session_id: str | None = None,
    url: str | None = None,
) -> JSONObject:
    """Send a request inside a ``CLIENT`` span, its context written into ``params._meta``.

    Called only when ``state.on``. ``send(params, sent)`` puts ``params`` on the wire and tells ``sent`` the id;
    ``url``: the HTTP endpoint it goes to (``server.address``, ``server.port``).
    """
    tracer = state.tracer
    instruments = state.instruments
    if tracer is None and instruments is None:
        # Propagation only: carry on whatever context is current (a peer's, or the application's own).
        if trace.get_current_span().get_span_context().is_valid:
            params = _inject(params, None)
        return await send(params, _ignore)
    attributes = request_attributes(method, params, None)
    _network(attributes, transport, session_id, url)
    span: Span | None = None
    if tracer is not None:
        span = tracer.start_span(_span_name(method, attributes), kind=SpanKind.CLIENT, attributes=attributes)
        params = _inject(params, trace.set_span_in_context(span))
    elif trace.get_current_span().get_span_context().is_valid:
        params = _inject(params, None)

    def sent(request_id: RequestId) -> None:
        if span is not None:
            span.set_attribute("jsonrpc.request.id", str(request_id))

    ended = None if instruments is None else partial(_record, instruments.client_duration, attributes)
    return await _measured(span, None, attributes, _result, ended, send, params, sent)


async def _measured(
    span: Span | None,
    token: object,
    attributes: dict[str, Any],
    settle: Callable[[Span | None, dict[str, Any], JSONObject], None],
    ended: Callable[[float], None] | None,
    work: Callable[_P, Awaitable[JSONObject]],
    *args: _P.args,
    **kwargs: _P.kwargs,
) -> JSONObject:
    """Await ``work(*args, **kwargs)`` and close what was opened for it: every hook that times a request or a
    question ends here (``work`` is called inside, since a dispatch may refuse a request before returning an awaitable).

    A failure sets ``error.type`` (and the span's status) through :func:`_fail`; a result is read by ``settle``;
    then, whatever happened, ``ended`` is told the seconds it took (the metrics), the context attached for it
    (``token``) is detached and the span ended.
    """
    start = time.perf_counter()
    try:
        result = await work(*args, **kwargs)
    except BaseException as exc:
        _fail(span, attributes, exc)
        raise
    else:
        settle(span, attributes, result)
        return result
    finally:
        if ended is not None:
            ended(time.perf_counter() - start)
        if token is not None:
            otel_context.detach(token)  # type: ignore[arg-type]
        if span is not None:
            span.end()


def _record(histogram: Histogram, attributes: dict[str, Any], seconds: float) -> None:
    histogram.record(seconds, _metric_attributes(attributes))


def _ignore(_request_id: RequestId) -> None:
    pass


def annotate(**attributes: Any) -> None:
    """Add attributes to the span being served (the dispatch knows the revision, the session...)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes({k: v for k, v in attributes.items() if v is not None})


# ---- questions and the person ------------------------------------------------------------------------------


async def elicitation(side: Literal["server", "client"], params: JSONObject, ask: Awaitable[JSONObject]) -> JSONObject:
    """Await ``ask`` (one question's answer) inside an ``elicitation`` span: its mode, its outcome, how long the
    person took; ``elicitor.elicitation.duration`` and ``elicitor.elicitations`` by outcome.

    Called only when ``state.on``. Records the outcome (``accept``, ``decline``, ``cancel``), never the answer.
    """
    tracer = state.tracer
    instruments = state.instruments
    if tracer is None and instruments is None:
        return await ask
    raw_mode = params.get("mode", "form")
    mode = raw_mode if raw_mode in ("form", "url") else "form"
    attributes: dict[str, Any] = {"elicitor.elicitation.mode": mode, "elicitor.side": side}
    span: Span | None = None
    token = None
    if tracer is not None:
        span = tracer.start_span("elicitation", kind=SpanKind.INTERNAL, attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span))
    ended: Callable[[float], None] | None = None
    if instruments is not None:
        instruments.pending.add(1, attributes)
        asked = {"elicitor.elicitation.mode": mode, "elicitor.side": side}

        def ended(elapsed: float) -> None:
            instruments.pending.add(-1, asked)
            # A wait cancelled is no outcome: the call ended, or (2026-07-28) the round did and the answer comes to
            # whichever run the next round finds; it is counted there.
            if attributes.get("error.type") != "cancelled":
                instruments.elicitation_duration.record(elapsed, attributes)
                instruments.elicitations.add(1, attributes)

    return await _measured(span, token, attributes, _outcome, ended, _given, ask)


def _given(ask: Awaitable[JSONObject]) -> Awaitable[JSONObject]:
    return ask


def _outcome(span: Span | None, attributes: dict[str, Any], answer: JSONObject) -> None:
    action = answer.get("action")
    attributes["elicitor.elicitation.outcome"] = action if action in ("accept", "decline", "cancel") else "_OTHER"
    if span is not None:
        span.set_attribute("elicitor.elicitation.outcome", attributes["elicitor.elicitation.outcome"])


def answered_elsewhere(params: JSONObject, answer: JSONObject) -> None:
    """2026-07-28: an answer to a question asked in an earlier round by a run that is not here (another replica,
    or replayed): counted by outcome, its time unknown here."""
    instruments = state.instruments
    if instruments is None:
        return
    raw_mode = params.get("mode", "form")
    action = answer.get("action")
    instruments.elicitations.add(1, {
        "elicitor.elicitation.mode": raw_mode if raw_mode in ("form", "url") else "form",
        "elicitor.side": "server",
        "elicitor.elicitation.outcome": action if action in ("accept", "decline", "cancel") else "_OTHER",
    })  # fmt: skip


def invalid_answer() -> None:
    """The person's answer failed validation and they are asked again: counted on the ``elicitation`` span."""
    span = trace.get_current_span()
    if span.is_recording():
        count = getattr(span, "attributes", {}).get("elicitor.elicitation.validation_failures", 0)
        span.set_attribute("elicitor.elicitation.validation_failures", count + 1)


def rounds(count: int, tool: str | None) -> None:
    """A 2026-07-28 call ended after ``count`` rounds (counted by the client, which sees them all)."""
    instruments = state.instruments
    if instruments is not None:
        instruments.rounds.record(count, {"gen_ai.tool.name": tool} if tool else {})


def round_served(retry: bool, parked: bool) -> None:
    """A 2026-07-28 round: the first, a retry continuing the run parked here, or a retry replaying the tool (its
    run is on another replica, or gone). Replays are what the parked-run cache saves; a high share means rounds
    land away from their runs."""
    path = "parked" if parked else "replayed" if retry else "first"
    instruments = state.instruments
    if instruments is not None:
        instruments.round_paths.add(1, {"elicitor.round.path": path})
    annotate(**{"elicitor.round.path": path})


def task_status(status: str) -> None:
    """A task entered ``status`` (``working``, ``input_required``, ``completed``, ``failed``, ``cancelled``)."""
    instruments = state.instruments
    if instruments is not None:
        instruments.tasks.add(1, {"elicitor.task.status": status})


def store_operation(operation: str, seconds: float, error: BaseException | None) -> None:
    """One operation on the shared store took ``seconds`` (and failed with ``error``)."""
    instruments = state.instruments
    if instruments is not None:
        attributes = {"elicitor.store.operation": operation}
        if error is not None:
            attributes["error.type"] = type(error).__qualname__
        instruments.store_duration.record(seconds, attributes)


class Call:
    """A context manager: one span around a whole call on the client, whatever rounds and retries it takes."""

    __slots__ = ("_entered", "_span", "_token", "_tool", "rounds")

    def __init__(self, method: str, params: JSONObject | None) -> None:
        tracer = state.tracer
        self._span: Span | None = None
        self._token: object = None
        self.rounds = 0
        self._entered: Token[Call | None] | None = None
        name = (params or {}).get("name")
        self._tool = name if method == "tools/call" and isinstance(name, str) else None
        if tracer is not None:
            attributes = request_attributes(method, params, None)
            self._span = tracer.start_span(
                _span_name(method, attributes), kind=SpanKind.INTERNAL, attributes=attributes
            )
            self._token = otel_context.attach(trace.set_span_in_context(self._span))

    def __enter__(self) -> Call:
        self._entered = _current_call.set(self)
        return self

    def round(self, number: int) -> None:
        """The call's ``number``-th request is going out (2026-07-28 rounds, -32042 retries)."""
        self.rounds = number
        if self._span is not None:
            self._span.set_attribute("elicitor.rounds", number)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        if self._entered is not None:
            _current_call.reset(self._entered)
        if exc is None and self.rounds and state.instruments is not None:
            tool = self._tool
            state.instruments.rounds.record(self.rounds, {"gen_ai.tool.name": tool} if tool else {})
        span = self._span
        if span is None:
            return
        if exc is not None:
            _fail(span, {}, exc)
        otel_context.detach(self._token)  # type: ignore[arg-type]
        span.end()


class _Within:
    """A call inside a call already traced (a task followed after its ``tools/call``): the outer span stays."""

    __slots__ = ("_outer",)

    def __init__(self, outer: Call) -> None:
        self._outer = outer

    def __enter__(self) -> Call:
        return self._outer

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        pass


_current_call: ContextVar[Call | None] = ContextVar("elicitor_call", default=None)


def calling(method: str, params: JSONObject | None) -> Call | _Within:
    """``with calling("tools/call", params) as call:`` around a client's whole call (all its rounds, and the task
    it may become); a call inside one already traced adds nothing."""
    outer = _current_call.get()
    if outer is not None:
        return _Within(outer)
    return Call(method, params)
