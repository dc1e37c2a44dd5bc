"""The hooks of a POST's arrival (``server/http``): the trace its headers name, and a span for a message refused
before anything took it."""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from ...types import INTERNAL_ERROR, JSONObject, RequestId
from .._attributes import (
    add_network,
    exception_event,
    metric_attributes,
    request_attributes,
    span_name,
)
from .._propagation import TRACEPARENT, TRACESTATE, extract, span_context
from .._state import state

if TYPE_CHECKING:
    pass


_T = TypeVar("_T")
_P = ParamSpec("_P")


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
