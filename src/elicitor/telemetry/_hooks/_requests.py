"""The request layer's hooks: a span around each request a peer sends or serves, and each notification."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from functools import partial
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from ...types import JSONObject, RequestId
from .._attributes import (
    add_network,
    fail,
    metric_attributes,
    request_attributes,
    settle_result,
    span_name,
)
from .._propagation import TRACEPARENT, context_of, extract, inject, span_context
from .._state import state

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram
    from opentelemetry.trace import Span

    from ._forwarding import Forwarded


_T = TypeVar("_T")
_P = ParamSpec("_P")


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
    if peer is not None and "network.protocol.version" in peer:  # bounded: a label too (the port is not)
        attributes["network.protocol.version"] = peer["network.protocol.version"]
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
    version = attributes.get("network.protocol.version")
    over = _answering_over.set(version) if version is not None else None
    try:
        result = await _measured(span, token, attributes, settle_result, ended, True, handle, request)
    finally:
        if over is not None:
            _answering_over.reset(over)
    if span is not None and method in _ANSWERED_BY_POST:
        meta = result.get("_meta")
        if not isinstance(meta, dict) or TRACEPARENT not in meta:
            carrier = context_of(span)
            if carrier is not None:  # the answer names its trace, as elicitor's client's does (see forwarding)
                result = {**result, "_meta": {**(meta if isinstance(meta, dict) else {}), **carrier}}
    return result


_answering_over: ContextVar[str | None] = ContextVar("elicitor_answering_over", default=None)
"""The HTTP version of the POST whose request this task serves (:func:`serve_request`, from its ``peer``): what a
server sends while serving it (a question, a progress report) goes on that POST's response stream, so its
``CLIENT`` span and metric say that version (:func:`_pushed_over`)."""


def _pushed_over(attributes: dict[str, Any], transport: str, url: str | None) -> None:
    """A message a server sends (no endpoint ``url``: it is written into a response stream) while serving a
    request that came over HTTP: ``network.protocol.version`` of the POST whose stream carries it. A client's
    request (``url``: it is an HTTP request of its own) says the version of its own answer instead
    (:func:`http_responded`)."""
    if url is None and transport != "pipe":
        version = _answering_over.get()
        if version is not None:
            attributes["network.protocol.version"] = version


_ANSWERED_BY_POST = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
"""The requests a server sends a client: over HTTP the answer is POSTed, and may land on a replica that forwards
it to the one that asked. An answer that names no trace in ``result._meta`` (the proxy's to a handshake-era
server when its own client is on 2026-07-28, whose answers come in the next round's ``inputResponses`` with no
context) gets the context of the span that served the request, so the hop is in the call's trace
(:func:`forwarding`); never the baggage, never anything of the answer."""


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
    _pushed_over(attributes, transport, url)
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
    carried = _on_the_wire.set((span, attributes))
    try:
        return await _measured(span, token, attributes, settle_result, ended, False, send, params, sent)
    finally:
        _on_the_wire.reset(carried)
        _requesting.reset(requesting)
        if waiting is not None and sent_id is not None:
            waiting.pop(sent_id, None)


_requesting: ContextVar[Span | None] = ContextVar("elicitor_requesting", default=None)
"""The ``CLIENT`` span of the request this task waits on (:func:`send_request`): the parent of the
``notifications/cancelled`` sent when it is given up (:func:`cancelling`)."""

_on_the_wire: ContextVar[tuple[Span | None, dict[str, Any]] | None] = ContextVar("elicitor_on_the_wire", default=None)
"""The ``CLIENT`` span (if traced) and the attributes (the metric's labels) of the request or notification this
task is sending (:func:`send_request`, :func:`send_notification`): what an HTTP response to it describes
(:func:`http_responded`). The HTTP transport POSTs a request in a task of its own, which starts with a copy of
this context."""


def http_responded(response: object) -> str | None:
    """The HTTP server answered the POST (or the GET resuming its stream) that carries the request or notification
    being sent: its ``CLIENT`` span says the HTTP version the answer came in, ``network.protocol.version`` (``1.1``,
    ``2``), as the conventions' "Recording MCP transport" table has it for Streamable HTTP and the HTTP+SSE
    transport. The version is the connection's, known only once the server answered: the client's HTTP library
    picks it (``httpx`` with ``http2=True`` speaks HTTP/2 to a server that offers it, elicitor's own connections
    HTTP/1.1). ``mcp.client.operation.duration`` is labelled with it too, as the conventions recommend. A span
    already ended (a stream read on after its answer) is left alone.

    Returns the version (``1.1``), or ``None`` when the response does not say. Called only when ``state.on``."""
    version = getattr(response, "http_version", None)
    if not isinstance(version, str) or not version.upper().startswith("HTTP/"):
        return None
    said = version[5:]
    sending = _on_the_wire.get()
    if sending is not None:
        span, attributes = sending
        attributes["network.protocol.version"] = said
        if span is not None and span.is_recording():
            span.set_attribute("network.protocol.version", said)
    return said


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
    _pushed_over(attributes, transport, url)
    span: Span | None = None
    if tracer is not None:
        span = tracer.start_span(span_name(method, attributes), kind=SpanKind.CLIENT, attributes=attributes)
        params = inject(params, trace.set_span_in_context(span))
    elif trace.get_current_span().get_span_context().is_valid:
        params = inject(params, None)
    ended = None if instruments is None else partial(_record, instruments.client_duration, attributes)
    carried = _on_the_wire.set((span, attributes))
    try:
        await _measured(span, None, attributes, _nothing, ended, False, _sent, send, params)
    finally:
        _on_the_wire.reset(carried)


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
    peer: Mapping[str, Any] | None = None,
) -> None:
    """Handle a peer's notification inside a ``SERVER`` span whose parent is the context in its ``_meta`` (the
    sender's ``CLIENT`` span for it, :func:`send_notification`), counted in ``mcp.server.operation.duration``.
    ``peer``: over HTTP, what it came over (``network.protocol.version``), as for a request.

    Called only when ``state.on``."""

    async def handled(_request: None) -> JSONObject:
        await handle()
        return {}

    await serve_request(handled, None, method, params, None, transport, session_id, peer=peer)


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


def annotate(**attributes: Any) -> None:
    """Add attributes to the span being served (the dispatch knows the revision, the session...)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes({k: v for k, v in attributes.items() if v is not None})
