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
* ``server/http``: the 2026-07-28 exchange calls :func:`serve_request` too (it has no session); a replica
  forwarding a POST to the one running its session opens a span for the hop (:func:`forwarding`); for an
  answer the owner records its side of the hop in the question's trace (:func:`received_forwarded`), for a
  request the owner's ``SERVER`` span links to the hop (:func:`serve_request`'s ``forwarded``).
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
them, no URL-mode URL, no resource URI's query and no argument is recorded unless
:func:`elicitor.telemetry.configure` is told ``record_content=True``.

This module is the hooks alone; what they share stands beside it: ``_attributes`` (what a span says),
``_propagation`` (trace context in ``_meta``, and a task's origin), ``_instruments`` (the metrics, and turning on).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar, Token
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, ParamSpec, TypeVar
from weakref import WeakKeyDictionary

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from ..types import INTERNAL_ERROR, JSONObject, RequestId
from ._attributes import (
    add_network,
    exception_event,
    fail,
    metric_attributes,
    request_attributes,
    settle_result,
    span_name,
)
from ._propagation import TRACEPARENT, TRACESTATE, context_of, extract, inject, span_context
from ._propagation import in_task_origin as in_task_origin
from ._propagation import task_origin as task_origin
from ._propagation import with_task_origin as with_task_origin
from ._state import state

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram
    from opentelemetry.trace import Span


_T = TypeVar("_T")
_P = ParamSpec("_P")


# ---- the request layer ---------------------------------------------------------------------------------------


class Forwarded(NamedTuple):
    """What the owner of a session learnt of a request another replica forwarded to it (:func:`forwarding`), kept
    until the request is served (:func:`serve_request`): that replica's ``forward`` span (a ``traceparent``), its
    id, and the seconds the request waited in the store (0 if the two replicas' wall clocks disagree)."""

    span: str
    by: str
    wait: float


async def serve_request(
    handle: Callable[[_T], Awaitable[JSONObject]],
    request: _T,
    method: str,
    params: JSONObject | None,
    request_id: RequestId | None,
    transport: str = "pipe",
    session_id: str | None = None,
    forwarded: dict[RequestId, Forwarded] | None = None,
    peer: Mapping[str, Any] | None = None,
) -> JSONObject:
    """Answer a peer's request inside a ``SERVER`` span whose parent is the context in its ``_meta``.

    Called only when ``state.on``. Without a tracer the extracted context is still made current, so requests
    made while serving it carry the trace on. ``forwarded`` (a handshake-era HTTP session's): what the envelope of
    each request another replica forwarded here told of its hop, by id; this request's entry is taken out, and its
    span links to that replica's ``forward`` span (``elicitor.link = forwarded``), which is the root of a trace of
    its own when the client named no trace, and says which replica it was (``elicitor.forwarded_by``) and the
    seconds the request waited in the store (``elicitor.store.wait``). ``peer``: over HTTP, who sent the POST that
    carried it (``client.address``, ``client.port``, ``network.protocol.version``: see ``_peer``), on the span only.
    """
    hop = forwarded.pop(request_id, None) if forwarded and request_id is not None else None
    parent = extract(params)
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
    add_network(attributes, transport, session_id)
    span: Span | None = None
    token: object = None
    if tracer is not None:
        links = None
        ambient = trace.get_current_span().get_span_context()
        if parent is not None and ambient.is_valid:  # semconv: parent from _meta, link the ambient context
            links = [trace.Link(ambient)]
        named = attributes if peer is None else {**attributes, **peer}  # on the span alone: no label per port
        if hop is not None:  # on the span alone: the metrics' labels stay what they are
            origin = span_context({"traceparent": hop.span})
            if origin is not None:
                links = [*(links or ()), trace.Link(origin, {"elicitor.link": "forwarded"})]
            named = {**named, "elicitor.forwarded_by": hop.by, "elicitor.store.wait": hop.wait}
        span = tracer.start_span(
            span_name(method, attributes), context=parent, kind=SpanKind.SERVER, attributes=named, links=links
        )
        token = otel_context.attach(trace.set_span_in_context(span, parent))
    elif parent is not None:
        token = otel_context.attach(parent)
    ended = None if instruments is None else partial(_record, instruments.server_duration, attributes)
    result = await _measured(span, token, attributes, settle_result, ended, True, handle, request)
    if span is not None and method in _ANSWERED_BY_POST:
        meta = result.get("_meta")
        if not isinstance(meta, dict) or TRACEPARENT not in meta:
            carrier = context_of(span)
            if carrier is not None:  # the answer names its trace, as elicitor's client's does (see forwarding)
                result = {**result, "_meta": {**(meta if isinstance(meta, dict) else {}), **carrier}}
    return result


_ANSWERED_BY_POST = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
"""The requests a server sends a client: over HTTP the answer is POSTed, and may land on a replica that forwards
it to the one that asked. An answer that names no trace in ``result._meta`` (the proxy's to a handshake-era
server when its own client is on 2026-07-28, whose answers come in the next round's ``inputResponses`` with no
context) gets the context of the span that served the request, so the hop is in the call's trace
(:func:`forwarding`); never the baggage, never anything of the answer."""


def header_context(message: JSONObject, traceparent: str, tracestate: str | None) -> JSONObject | None:
    """An HTTP request's ``traceparent`` header, for an MCP request that names no trace in ``params._meta``: that
    message with the header's context written there (a copy), or ``None`` to leave it as it came.

    The conventions take a request's parent from ``_meta`` and otherwise from the ambient context, which an HTTP
    server instrumentation makes from this header. Without one in the process, a client that traces its HTTP
    requests but puts nothing in ``_meta`` (an instrumented HTTP library under a client that knows nothing of
    MCP's trace context) would start a new trace at every request; written into ``_meta`` as the message arrives,
    the context reaches the span that serves it wherever it is served (a session's task, another replica). Left
    alone: a message that names a trace itself (``_meta`` wins, as the conventions say), a header that is not a
    valid W3C ``traceparent``, and a request arriving inside a span already (an HTTP instrumentation made the
    header the parent of its own span, which is then the ambient context). The baggage header is not carried: it
    may hold anything a client put there.

    Called only when ``state.on``.
    """
    if "id" not in message or not isinstance(message.get("method"), str):
        return None
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return None
    meta = params.get("_meta") if params is not None else None
    if meta is not None and (not isinstance(meta, dict) or TRACEPARENT in meta):
        return None
    if trace.get_current_span().get_span_context().is_valid:
        return None
    carrier = {TRACEPARENT: traceparent} if tracestate is None else {TRACEPARENT: traceparent, TRACESTATE: tracestate}
    if span_context(carrier) is None:
        return None
    return {**message, "params": {**(params or {}), "_meta": {**(meta or {}), **carrier}}}


def posted(message: JSONObject) -> None:
    """A message arrived in an HTTP POST: what a span for it needs if it is refused before anything takes it
    (:func:`refused`), kept for the rest of the POST's task: a request's or a notification's method, id, tool or
    prompt name and trace context; an answer's id and the trace context elicitor's client puts in its
    ``result._meta``; and when it arrived. Nothing else of its params, and nothing of an answer.

    Called only when ``state.on``."""
    method = message.get("method")
    request_id = message.get("id")
    known = request_id if type(request_id) is int or type(request_id) is str else None
    if isinstance(method, str):
        params = message.get("params")
    elif known is not None and ("result" in message or "error" in message):
        method, params = None, message.get("result")
    else:
        return
    kept: JSONObject = {}
    if isinstance(params, dict):
        if method is not None and isinstance(params.get("name"), str):
            kept["name"] = params["name"]
        meta = params.get("_meta")
        if isinstance(meta, dict):
            carried = {key: meta[key] for key in _KEPT_META if isinstance(meta.get(key), str)}
            if carried:
                kept["_meta"] = carried
    _posted.set((method, known, kept, time.time_ns()))


_KEPT_META = (TRACEPARENT, TRACESTATE, "io.modelcontextprotocol/protocolVersion")

_posted: ContextVar[tuple[str | None, RequestId | None, JSONObject, int] | None] = ContextVar(
    "elicitor_posted", default=None
)
"""The message of the POST this task answers (:func:`posted`): its method (``None`` for an answer), id, the little
kept of its params, and when it arrived; ``None`` once it is handed over (:func:`handed_over`)."""


def handed_over() -> None:
    """The POST's message reached its session, here or on the replica running it: its spans are that session's
    now, and a refusal after this (the session ended before answering) is not one of :func:`refused`."""
    _posted.set(None)


def refused(exc: BaseException | None, status: int, code: int | str, description: str) -> None:
    """The message of this task's POST (:func:`posted`) is refused with HTTP ``status`` and the JSON-RPC error
    ``code`` before anything took it (an unknown session: 404; the shared store cannot be reached: 503; a header
    that contradicts the body: 400...): a span for it from its arrival, in the trace it names, so that no refused
    message leaves nothing behind.

    A request or a notification is a ``SERVER`` span named as if it had been served, with ``error.type`` and
    ``rpc.response.status_code`` (``code``), ``http.response.status_code``, and status ``ERROR`` with
    ``description`` (the refusal's message; a 503's names the reference of its log line and nothing of the store)
    when the refusal is the server's (a 5xx, or -32603 and the server errors), not when it is the caller's mistake,
    as :func:`fail` decides for a served request; it is counted in ``mcp.server.operation.duration``. An answer
    (a person's, to a question) is a ``response`` span, ``INTERNAL``, under the context its ``result._meta`` names
    (elicitor's client puts its ``elicitation`` span there), else the root of a trace of its own with
    ``elicitor.trace_context = absent`` as a ``forward`` span is; it carries the answer's id and nothing of it,
    and is not counted (it is no operation of the conventions'). ``exc``: what made the refusal (the store's
    error), an ``exception`` event of its type and frames, never its text (it names the store's address).

    Once per POST; nothing for a GET or a DELETE. Called only when ``state.on``."""
    request = _posted.get()
    if request is None:
        return
    _posted.set(None)
    method, request_id, params, arrived = request
    attributes: dict[str, Any]
    if method is None:
        attributes = {"jsonrpc.request.id": str(request_id)}
    else:
        attributes = request_attributes(method, params, request_id)
    add_network(attributes, "http", None)
    attributes["error.type"] = str(code)
    if method is not None and isinstance(code, int):  # a str: no JSON-RPC error answers it (an OAuth refusal)
        attributes["rpc.response.status_code"] = str(code)
    now = time.time_ns()
    tracer = state.tracer
    if tracer is not None:
        parent = extract(params)
        named = {**attributes, "http.response.status_code": status}
        if method is None and parent is None:
            parent = otel_context.Context()  # a root: the ambient context is this POST's, not the call's
            named["elicitor.trace_context"] = "absent"
        span = tracer.start_span(
            span_name(method, attributes) if method is not None else "response", context=parent,
            kind=SpanKind.SERVER if method is not None else SpanKind.INTERNAL, attributes=named, start_time=arrived,
        )  # fmt: skip
        if status >= 500 or code == INTERNAL_ERROR or code in _SERVER_FAULTS:
            span.set_status(StatusCode.ERROR, description)
        if exc is not None:
            exception_event(span, exc)
        span.end(end_time=now)
    instruments = state.instruments
    if instruments is not None and method is not None:
        instruments.server_duration.record(max(now - arrived, 0) / 1e9, metric_attributes(attributes))


_SERVER_FAULTS = range(-32099, -31999)
"""JSON-RPC's "Server error" codes: with -32603, a refusal that is the server's, not the caller's."""


async def send_request(
    send: Callable[[JSONObject | None, Callable[[RequestId], None]], Awaitable[JSONObject]],
    method: str,
    params: JSONObject | None,
    transport: str = "pipe",
    session_id: str | None = None,
    url: str | None = None,
    waiting: dict[RequestId, trace.SpanContext] | None = None,
    revision: str | None = None,
) -> JSONObject:
    """Send a request inside a ``CLIENT`` span, its context written into ``params._meta`` and current until the
    answer comes: a log line written meanwhile (a retry after a 503, say) carries its ids.

    Called only when ``state.on``. ``send(params, sent)`` puts ``params`` on the wire and tells ``sent`` the id;
    ``url``: the HTTP endpoint it goes to (``server.address``, ``server.port``). ``waiting`` (a handshake-era
    HTTP session's): holds the span's context under the request's id until the answer comes, so that an answer
    forwarded by another replica joins this trace (:func:`received_forwarded`). ``revision``: the one the
    session's handshake agreed, ``mcp.protocol.version`` unless the request names its own (2026-07-28).
    """
    tracer = state.tracer
    instruments = state.instruments
    if tracer is None and instruments is None:
        # Propagation only: carry on whatever context is current (a peer's, or the application's own).
        if trace.get_current_span().get_span_context().is_valid:
            params = inject(params, None)
        return await send(params, _ignore)
    attributes = request_attributes(method, params, None)
    if revision is not None:
        attributes.setdefault("mcp.protocol.version", revision)
    add_network(attributes, transport, session_id, url)
    span: Span | None = None
    token: object = None
    if tracer is not None:
        span = tracer.start_span(span_name(method, attributes), kind=SpanKind.CLIENT, attributes=attributes)
        current = trace.set_span_in_context(span)
        params = inject(params, current)
        token = otel_context.attach(current)  # what is logged (or traced) while it is sent and waits is under it
    elif trace.get_current_span().get_span_context().is_valid:
        params = inject(params, None)

    sent_id: RequestId | None = None

    def sent(request_id: RequestId) -> None:
        nonlocal sent_id
        if span is not None:
            span.set_attribute("jsonrpc.request.id", str(request_id))
            if waiting is not None:
                waiting[request_id] = span.get_span_context()
                sent_id = request_id

    ended = None if instruments is None else partial(_record, instruments.client_duration, attributes)
    requesting = _requesting.set(span)
    try:
        return await _measured(span, token, attributes, settle_result, ended, False, send, params, sent)
    finally:
        _requesting.reset(requesting)
        if waiting is not None and sent_id is not None:
            waiting.pop(sent_id, None)


_requesting: ContextVar[Span | None] = ContextVar("elicitor_requesting", default=None)
"""The ``CLIENT`` span of the request this task waits on (:func:`send_request`): the parent of the
``notifications/cancelled`` sent when it is given up (:func:`cancelling`)."""


async def cancelling(
    send: Callable[[JSONObject | None], Awaitable[None]],
    params: JSONObject,
    transport: str = "pipe",
    session_id: str | None = None,
    url: str | None = None,
) -> None:
    """Send the ``notifications/cancelled`` of a request given up (timed out, or its caller cancelled), as
    :func:`send_notification` does, under that request's ``CLIENT`` span: the trace shows what was cancelled, and
    the peer's ``SERVER`` span for the notice is its child (the request's own ``SERVER`` span there ends with
    ``error.type = cancelled``).

    Called only when ``state.on``."""
    request = _requesting.get()
    token = otel_context.attach(trace.set_span_in_context(request)) if request is not None else None
    try:
        await send_notification(send, "notifications/cancelled", params, transport, session_id, url)
    finally:
        if token is not None:
            otel_context.detach(token)


async def send_notification(
    send: Callable[[JSONObject | None], Awaitable[None]],
    method: str,
    params: JSONObject | None,
    transport: str = "pipe",
    session_id: str | None = None,
    url: str | None = None,
) -> None:
    """Send a notification inside a ``CLIENT`` span, its context written into ``params._meta``, as a request is
    (the conventions for MCP: a notification is a span on either side, ``mcp.method.name`` and no
    ``jsonrpc.request.id``, timed until it is handed to the transport, and counted in
    ``mcp.client.operation.duration``). So a URL-mode completion, a progress report, a log message, a task's
    status and a cancellation are each in the trace they were sent in, and the peer's ``SERVER`` span for it is
    that span's child (:func:`serve_notification`).

    Called only when ``state.on``. ``send(params)`` puts the notification on the wire."""
    tracer = state.tracer
    instruments = state.instruments
    if tracer is None and instruments is None:
        if trace.get_current_span().get_span_context().is_valid:
            params = inject(params, None)
        await send(params)
        return
    attributes = request_attributes(method, params, None)
    add_network(attributes, transport, session_id, url)
    span: Span | None = None
    if tracer is not None:
        span = tracer.start_span(span_name(method, attributes), kind=SpanKind.CLIENT, attributes=attributes)
        params = inject(params, trace.set_span_in_context(span))
    elif trace.get_current_span().get_span_context().is_valid:
        params = inject(params, None)
    ended = None if instruments is None else partial(_record, instruments.client_duration, attributes)
    await _measured(span, None, attributes, _nothing, ended, False, _sent, send, params)


async def _sent(send: Callable[[JSONObject | None], Awaitable[None]], params: JSONObject | None) -> JSONObject:
    await send(params)
    return {}


def _nothing(_span: Span | None, _attributes: dict[str, Any], _result: JSONObject) -> None:
    pass


async def serve_notification(
    handle: Callable[[], Awaitable[None]],
    method: str,
    params: JSONObject | None,
    transport: str = "pipe",
    session_id: str | None = None,
) -> None:
    """Handle a peer's notification inside a ``SERVER`` span whose parent is the context in its ``_meta`` (the
    sender's ``CLIENT`` span for it, :func:`send_notification`), counted in ``mcp.server.operation.duration``.

    Called only when ``state.on``."""

    async def handled(_request: None) -> JSONObject:
        await handle()
        return {}

    await serve_request(handled, None, method, params, None, transport, session_id)


async def _measured(
    span: Span | None,
    token: object,
    attributes: dict[str, Any],
    settle: Callable[[Span | None, dict[str, Any], JSONObject], None],
    ended: Callable[[float], None] | None,
    served: bool,
    work: Callable[_P, Awaitable[JSONObject]],
    *args: _P.args,
    **kwargs: _P.kwargs,
) -> JSONObject:
    """Await ``work(*args, **kwargs)`` and close what was opened for it: every hook that times a request or a
    question ends here (``work`` is called inside, since a dispatch may refuse a request before returning an awaitable).

    A failure sets ``error.type`` (and the span's status) through :func:`fail` (``served``: the span is a
    ``SERVER`` span, which a JSON-RPC error of the caller's making leaves without an error status); a result is
    read by ``settle``; then, whatever happened, ``ended`` is told the seconds it took (the metrics), the context
    attached for it (``token``) is detached and the span ended.
    """
    start = time.perf_counter()
    try:
        result = await work(*args, **kwargs)
    except BaseException as exc:
        fail(span, attributes, exc, served=served)
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
    histogram.record(seconds, metric_attributes(attributes))


def _ignore(_request_id: RequestId) -> None:
    pass


def serving_round(*run: object) -> None:
    """2026-07-28: the current span (a round's ``SERVER`` span) serves the run ``run`` names (its context, its
    asker) now, so that what the run does meanwhile is recorded under it: the questions its tool asks
    (:func:`elicitation`'s ``within``) and a failure of its tool (:func:`tool_failed`). A run parked by an earlier
    round goes on in that round's context, whose span has ended: without this, every question of a call would be
    under its first round, asked after that round ended, and the round that asked it would show none."""
    span = trace.get_current_span()
    for part in run:
        _round_spans[part] = span


_round_spans: WeakKeyDictionary[object, Span] = WeakKeyDictionary()
"""The span of the round serving each 2026-07-28 run now, by the run's context and asker (:func:`serving_round`)."""


def tool_failed(exc: BaseException, run: object) -> None:
    """A tool raised ``exc``, which its call returns as an ``isError`` result: an ``exception`` event (its type
    and frames, never its message) on the span serving the call: the round's, for a 2026-07-28 run (``run``, its
    context), else the current one."""
    span = _round_spans.get(run) or trace.get_current_span()
    if span.is_recording():
        exception_event(span, exc)


def annotate(**attributes: Any) -> None:
    """Add attributes to the span being served (the dispatch knows the revision, the session...)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes({k: v for k, v in attributes.items() if v is not None})


def forwarding(message: JSONObject, session_id: str, owner: str) -> AbstractContextManager[object]:
    """A ``forward`` span around a message this replica passes to the replica that runs its session (a POST that
    landed here, handshake era), in the trace the message names: a request's ``params._meta``, an answer's
    ``result._meta`` (where an elicitor client puts the context of the question it answers). So the hop through
    the shared store, and how long it took, is in the call's trace. A message that names no trace (an answer from
    a client that does not put one there, as most do not) still gets its span, as the root of a trace of its own
    with ``elicitor.trace_context = absent``: an operator sees every hop through the store, and which ones a
    client left untraced. Its attributes are bounded as the others (the message's id, the session, the owner),
    and nothing of the answer is read but its id. For an answer, the owner then puts the hop in the question's
    trace however the client answered (:func:`forwarded_answer`, :func:`received_forwarded`); for a request, the
    owner's span for it links to this one however the client sent it (:func:`forwarded_request`).

    Called only when ``state.on``.
    """
    tracer = state.tracer
    if tracer is None:
        return nullcontext()
    method = message.get("method")
    if isinstance(method, str):
        params = message.get("params")
        parent = extract(params if isinstance(params, dict) else None)
        attributes = request_attributes(method, params if isinstance(params, dict) else None, message.get("id"))
        name = f"forward {span_name(method, attributes)}"
    else:
        result = message.get("result")
        parent = extract(result if isinstance(result, dict) else None)
        request_id = message.get("id")
        attributes = {"jsonrpc.request.id": str(request_id)} if isinstance(request_id, int | str) else {}
        name = "forward response"
    if parent is None:
        parent = otel_context.Context()  # a root: not the ambient context, which is this POST's, not the call's
        attributes["elicitor.trace_context"] = "absent"
    attributes.update({"mcp.session.id": session_id, "elicitor.forwarded_to": owner})
    span = tracer.start_span(name, context=parent, kind=SpanKind.INTERNAL, attributes=attributes)
    message_id = message.get("id")
    known = message_id if type(message_id) is int or type(message_id) is str else None
    return _Forwarding(span, known, answer=not isinstance(method, str))


class _Forwarding:
    """The span :func:`forwarding` opened: ended when the message is handed over (and, for a request, its answer
    relayed back), with ``error.type`` if that failed. While it is open, the hop of an answer or a request is
    what :func:`forwarded_answer` or :func:`forwarded_request` says (the envelope to the owner carries it)."""

    __slots__ = ("_answer", "_id", "_span", "_token")

    def __init__(self, span: Span, message_id: RequestId | None, *, answer: bool) -> None:
        self._span = span
        self._id = message_id
        self._answer = answer
        self._token: Token[tuple[str, RequestId, bool] | None] | None = None

    def __enter__(self) -> _Forwarding:
        if self._id is not None:  # an answer or a request (a notification has no hop to tell)
            context = self._span.get_span_context()
            if context.is_valid:
                self._token = _forwarding_hop.set((_traceparent(context), self._id, self._answer))
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        if self._token is not None:
            _forwarding_hop.reset(self._token)
        if exc is not None:
            fail(self._span, {}, exc)
        self._span.end()


_forwarding_hop: ContextVar[tuple[str, RequestId, bool] | None] = ContextVar("elicitor_forwarding", default=None)
"""While a POST is forwarded (:class:`_Forwarding`): its span's ``traceparent``, the message's id, and whether it is
an answer (else a request)."""


def forwarded_answer() -> tuple[str, RequestId] | None:
    """While this task forwards an answer to the replica that asked (:func:`forwarding`): the ``traceparent`` of
    the ``forward response`` span and the id of the request answered, for the envelope to carry to the owner,
    which knows the question and puts the hop in its trace (:func:`received_forwarded`). ``None`` otherwise."""
    hop = _forwarding_hop.get()
    return (hop[0], hop[1]) if hop is not None and hop[2] else None


def forwarded_request() -> str | None:
    """While this task forwards a request to the replica that runs its session (:func:`forwarding`): the
    ``traceparent`` of the ``forward {method}`` span, for the envelope to carry to the owner, whose ``SERVER`` span
    for the request then links to it (:func:`serve_request`'s ``forwarded``). ``None`` otherwise."""
    hop = _forwarding_hop.get()
    return hop[0] if hop is not None and not hop[2] else None


def received_forwarded(
    question: trace.SpanContext | None,
    forwarder: str,
    answered: RequestId,
    sent_ns: int,
    by: str,
    session_id: str,
) -> None:
    """The owner of a session took an answer another replica forwarded (:func:`forwarding`): a ``forwarded
    response`` span from when that replica put it in the store (``sent_ns``, its wall clock) to now, when it is
    handed to the session.

    Its parent is ``question``, the ``CLIENT`` span of the request it answers (this replica sent it, so it knows it
    whatever the client put in the answer): the hop through the store, and its time, are in the call's trace for
    any client. It links to the forwarding replica's span (``forwarder``, a ``traceparent``; ``elicitor.link =
    forwarded``), which is the root of a trace of its own when the client named no trace. A question no longer
    waiting here (answered late) leaves the span in the forwarder's trace, under its span. Attributes: the request
    answered, the session, the replica that forwarded it (``elicitor.forwarded_by``) and the seconds the answer
    waited in the store (``elicitor.store.wait``; 0 if the clocks disagree); nothing of the answer.

    Called only when ``state.on``.
    """
    tracer = state.tracer
    if tracer is None:
        return
    origin = span_context({"traceparent": forwarder})
    now = time.time_ns()
    start = min(sent_ns, now)
    attributes: dict[str, Any] = {
        "jsonrpc.request.id": str(answered),
        "mcp.session.id": session_id,
        "elicitor.forwarded_by": by,
        "elicitor.store.wait": (now - start) / 1e9,
    }
    links = None
    if question is not None:
        parent = trace.set_span_in_context(trace.NonRecordingSpan(question), otel_context.Context())
        if origin is not None:
            links = [trace.Link(origin, {"elicitor.link": "forwarded"})]
    elif origin is not None:
        parent = trace.set_span_in_context(trace.NonRecordingSpan(origin), otel_context.Context())
    else:
        return
    span = tracer.start_span(
        "forwarded response", context=parent, kind=SpanKind.INTERNAL, attributes=attributes, links=links,
        start_time=start,
    )  # fmt: skip
    span.end(end_time=now)


# ---- questions and the person ------------------------------------------------------------------------------


async def elicitation(
    side: Literal["server", "client"],
    params: JSONObject,
    ask: Awaitable[JSONObject],
    carry: bool = False,
    within: object = None,
) -> JSONObject:
    """Await ``ask`` (one question's answer) inside an ``elicitation`` span: its mode, its outcome, how long the
    person took; ``elicitor.elicitation.duration`` and ``elicitor.elicitations`` by outcome.

    Called only when ``state.on``. Records the outcome (``accept``, ``decline``, ``cancel``), never the answer.
    ``carry`` (a client answering a handshake-era request): the answer carries this span's context in its
    ``_meta`` (``traceparent``, ``tracestate``; never the baggage), so a replica that forwards it to the one that
    asked can put that hop in the trace (:func:`forwarding`). ``within`` (a 2026-07-28 run's asker): the span is
    a child of the round serving that run now (:func:`serving_round`), whose response carries the question.
    """
    tracer = state.tracer
    instruments = state.instruments
    if tracer is None and instruments is None:
        return await ask
    if within is not None:
        return await _asked_in_rounds(params, ask, within)
    raw_mode = params.get("mode", "form")
    mode = raw_mode if raw_mode in ("form", "url") else "form"
    attributes: dict[str, Any] = {"elicitor.elicitation.mode": mode, "elicitor.side": side}
    span: Span | None = None
    token = None
    if tracer is not None:
        round_span = _round_spans.get(within) if within is not None else None
        parent = trace.set_span_in_context(round_span) if round_span is not None else None
        span = tracer.start_span("elicitation", context=parent, kind=SpanKind.INTERNAL, attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span))
    ended: Callable[[float], None] | None = None
    if instruments is not None:
        instruments.pending.add(1, attributes)
        asked = {"elicitor.elicitation.mode": mode, "elicitor.side": side}

        def ended(elapsed: float) -> None:
            instruments.pending.add(-1, asked)
            # A wait cancelled is no outcome: the call ended, or (2026-07-28) the round did and the answer comes to
            # whichever run the next round finds; it is counted there.
            error = attributes.get("error.type")
            if error != "cancelled":
                # Labels from bounded sets only: an error answered by the peer has the code the peer chose.
                labels = {**asked, **metric_attributes({"error.type": error} if error is not None else {})}
                if "elicitor.elicitation.outcome" in attributes:
                    labels["elicitor.elicitation.outcome"] = attributes["elicitor.elicitation.outcome"]
                instruments.elicitation_duration.record(elapsed, labels)
                instruments.elicitations.add(1, labels)

    answer = await _measured(span, token, attributes, _outcome, ended, False, _given, ask)
    if carry and span is not None:
        carrier = context_of(span)
        if carrier is not None:
            meta = answer.get("_meta")
            answer = {**answer, "_meta": {**(meta if isinstance(meta, dict) else {}), **carrier}}
    return answer


def _given(ask: Awaitable[JSONObject]) -> Awaitable[JSONObject]:
    return ask


def _outcome(span: Span | None, attributes: dict[str, Any], answer: JSONObject) -> None:
    action = answer.get("action")
    attributes["elicitor.elicitation.outcome"] = action if action in ("accept", "decline", "cancel") else "_OTHER"
    if span is not None:
        span.set_attribute("elicitor.elicitation.outcome", attributes["elicitor.elicitation.outcome"])


def current_traceparent() -> str | None:
    """The current span's ``traceparent``, or ``None`` outside a trace (kept with a URL-mode elicitation)."""
    context = trace.get_current_span().get_span_context()
    return _traceparent(context) if context.is_valid else None


class CompletingUrl:
    """What :func:`completing_url` gives: told the record completed (:meth:`settle`), it starts the span and makes
    it current, so that the notice telling the client (``notifications/elicitation/complete``) is its child."""

    __slots__ = ("_span", "_start", "_token")

    def __init__(self) -> None:
        self._start = time.time_ns()
        self._span: Span | None = None
        self._token: object = None

    def settle(self, asked: str | None, told: str) -> None:
        """The elicitation completed: ``asked`` is the ``traceparent`` it was registered in, ``told`` how its client
        is told (``connection``, ``replica``, ``none``). Not called: the completion was refused."""
        self._span = self._open(asked, told)
        if self._span is not None:
            self._token = otel_context.attach(trace.set_span_in_context(self._span))

    def _open(self, asked: str | None, told: str | None) -> Span | None:
        tracer = state.tracer
        if tracer is None:
            return None
        attributes: dict[str, Any] = {
            "elicitor.elicitation.mode": "url",
            "elicitor.elicitation.completed": told is not None,
        }
        if told is not None:
            attributes["elicitor.elicitation.notified"] = told
        origin = span_context({"traceparent": asked}) if asked else None
        ambient = trace.get_current_span().get_span_context()
        parent, links = None, None
        if origin is not None and ambient.is_valid:  # the page's own request is the parent: link the question
            links = [trace.Link(origin, {"elicitor.link": "url_elicitation"})]
        elif origin is not None:  # nothing else to hang it on: under the span that asked for it
            parent = trace.set_span_in_context(trace.NonRecordingSpan(origin), otel_context.Context())
        return tracer.start_span(
            "elicitation complete", context=parent, kind=SpanKind.INTERNAL, attributes=attributes, links=links,
            start_time=self._start,
        )  # fmt: skip

    def __enter__(self) -> CompletingUrl:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        span = self._span if self._span is not None else self._open(None, None)
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]
        if span is None:
            return
        if exc is not None:
            fail(span, {}, exc)
        span.end()


def completing_url() -> CompletingUrl:
    """``with completing_url() as completing:`` around completing a URL-mode elicitation (the application's
    callback page calling ``server.complete_url_elicitation``): an ``elicitation complete`` span, whether it
    completed (``elicitor.elicitation.completed``; refused: unknown, expired, already completed or another
    user's) and how its client is told (``elicitor.elicitation.notified``: ``connection`` on this replica,
    ``replica`` through the store to the one holding the connection, ``none`` on 2026-07-28, where the client
    learns at its next round). Its parent is the span current where the page is served (an HTTP server
    instrumentation's), linked to the span that asked for the elicitation (``elicitor.link = url_elicitation``);
    with no span current, that span is the parent, so the completion is in the call's trace. Nothing of the
    elicitation's id, URL or message is recorded (the id is what completes it).

    Called only when ``state.on``."""
    return CompletingUrl()


async def _asked_in_rounds(params: JSONObject, ask: Awaitable[JSONObject], within: object) -> JSONObject:
    """2026-07-28, server side: a question a run asks, answered by a later round. Its ``elicitation`` span is made
    when the answer comes, from when it was asked, under the round that asked it: the round's answer may land on
    another replica, which replays the tool and records the question there (:func:`answered_elsewhere`), while
    this run waits parked until it is dropped. A span opened at the question would then end only when the parked
    run is dropped (ten minutes later by default), cancelled, beside the replica's record of the same question:
    a trace that looks unfinished for minutes and a question told twice. So a question whose run is dropped
    unanswered here leaves no span (its round says ``elicitor.input_requests``), and is not counted as answered."""
    instruments = state.instruments
    raw_mode = params.get("mode", "form")
    mode = raw_mode if raw_mode in ("form", "url") else "form"
    asked = {"elicitor.elicitation.mode": mode, "elicitor.side": "server"}
    round_span = _round_spans.get(within)
    context = round_span.get_span_context() if round_span is not None else trace.get_current_span().get_span_context()
    start = time.time_ns()
    if instruments is not None:
        instruments.pending.add(1, asked)
    try:
        answer = await ask
    finally:
        if instruments is not None:
            instruments.pending.add(-1, asked)
    _answered(params, answer, context if context.is_valid else None, start)
    return answer


def _answered(params: JSONObject, answer: JSONObject, round_: trace.SpanContext | None, asked_ns: int) -> None:
    """A 2026-07-28 question answered: an ``elicitation`` span (server side) from ``asked_ns`` to now under the
    round that asked it (``round_``), with its outcome; the person's time and the outcome in the metrics."""
    now = time.time_ns()
    start = min(asked_ns, now)  # two replicas' wall clocks may disagree: never a negative wait
    raw_mode = params.get("mode", "form")
    action = answer.get("action")
    attributes = {
        "elicitor.elicitation.mode": raw_mode if raw_mode in ("form", "url") else "form",
        "elicitor.side": "server",
        "elicitor.elicitation.outcome": action if action in ("accept", "decline", "cancel") else "_OTHER",
    }
    tracer = state.tracer
    if tracer is not None:
        parent = trace.set_span_in_context(trace.NonRecordingSpan(round_), otel_context.Context()) if round_ else None
        span = tracer.start_span("elicitation", context=parent, kind=SpanKind.INTERNAL, attributes=attributes,
                                 start_time=start)  # fmt: skip
        span.end(end_time=now)
    instruments = state.instruments
    if instruments is not None:
        instruments.elicitation_duration.record((now - start) / 1e9, attributes)
        instruments.elicitations.add(1, attributes)


def asked_in() -> dict[str, object] | None:
    """2026-07-28: what a round's sealed state keeps of when its questions were asked (the round ends asking
    them now): the round's ``SERVER`` span (``traceparent``) and the wall clock in nanoseconds, so that the round
    that brings their answers, on whichever replica, records each question from then (:func:`answered_elsewhere`).
    ``None`` outside a trace and without telemetry."""
    if not state.on:
        return None
    here = trace.get_current_span().get_span_context()
    if not here.is_valid and state.instruments is None:
        return None
    kept: dict[str, object] = {"t": time.time_ns()}
    if here.is_valid:
        kept["q"] = _traceparent(here)
    return kept


def answered_elsewhere(params: JSONObject, answer: JSONObject, asked: object = None) -> None:
    """2026-07-28: an answer to a question asked in an earlier round by a run that is not here (another replica,
    or replayed). With ``asked`` (what :func:`asked_in` sealed into the state of the round that last asked it):
    an ``elicitation`` span under that round, from then to now, and the person's time in the metrics; without
    (a state sealed with telemetry off): counted by outcome alone, its time unknown here."""
    if isinstance(asked, dict) and type(asked.get("t")) is int:
        round_ = span_context({"traceparent": asked["q"]}) if isinstance(asked.get("q"), str) else None
        _answered(params, answer, round_, asked["t"])
        return
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


def first_round(origin: object) -> dict[str, str] | None:
    """2026-07-28: the span of a call's first round, to seal into ``requestState`` (``traceparent`` only: a
    round's state is bounded) and link every later round to (``elicitor.link = first_round``).

    ``origin`` is what the round's sealed state carries, ``None`` on the first round (whose own ``SERVER`` span,
    the current one, is then the origin). elicitor's client keeps the rounds of a call in one trace already; a
    client that sends each round in a trace of its own still has every round linked to the first, whichever
    replica serves it. A link is added only across traces."""
    current = trace.get_current_span()
    here = current.get_span_context()
    first = span_context(origin)
    if first is None:
        return {"traceparent": _traceparent(here)} if here.is_valid else None
    if here.trace_id != first.trace_id and current.is_recording():
        current.add_link(first, {"elicitor.link": "first_round"})
    return {"traceparent": _traceparent(first)}


def _traceparent(context: trace.SpanContext) -> str:
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


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
            self._span = tracer.start_span(span_name(method, attributes), kind=SpanKind.INTERNAL, attributes=attributes)
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
            fail(span, {}, exc)
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


class Following:
    """A context manager: one ``follow task`` span around following a task outside the call that created it
    (``TaskHandle.wait`` on a handle from ``client.task(id)``, or after ``start_tool`` returned), so its polls,
    updates and ``tasks/result`` are one trace instead of one trace each: a task that waits four minutes for a
    person at one poll a second would otherwise leave hundreds of one-span traces and no trace of the wait.

    The span names the task (``elicitor.task.id``) and, once a response has said which call created the task,
    links to it (``elicitor.link = task_created``), as each request's span does.
    """

    __slots__ = ("_origin", "_span", "_token")

    def __init__(self, span: Span, origin: Callable[[], object]) -> None:
        self._span = span
        self._origin = origin
        self._token = otel_context.attach(trace.set_span_in_context(span))

    def __enter__(self) -> Following:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        span = self._span
        created = span_context(self._origin())
        if created is not None:
            span.add_link(created, {"elicitor.link": "task_created"})
        if exc is not None:
            fail(span, {}, exc)
        otel_context.detach(self._token)
        span.end()


def following(task_id: str | None, origin: Callable[[], object]) -> AbstractContextManager[object]:
    """``with following(handle.id, origin):`` around following a task; ``origin()`` gives, at the end, what the
    server said of the call that created it (``_meta`` under ``dev.elicitor/taskOrigin``). Inside a call already
    traced (``call_tool`` following its own task) or without a tracer it adds nothing."""
    tracer = state.tracer
    if tracer is None or _current_call.get() is not None:
        return nullcontext()
    attributes = {"elicitor.task.id": task_id} if task_id is not None else {}
    return Following(tracer.start_span("follow task", kind=SpanKind.INTERNAL, attributes=attributes), origin)


def calling(method: str, params: JSONObject | None) -> Call | _Within:
    """``with calling("tools/call", params) as call:`` around a client's whole call (all its rounds, and the task
    it may become); a call inside one already traced adds nothing."""
    outer = _current_call.get()
    if outer is not None:
        return _Within(outer)
    return Call(method, params)
