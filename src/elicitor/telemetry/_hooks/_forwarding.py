"""The hooks of a message passed between replicas: the ``forward`` span of the hop through the shared store, what
the envelope carries of it, and the owner's side of it."""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, NamedTuple, ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from ...types import JSONObject, RequestId
from .._attributes import (
    fail,
    request_attributes,
    span_name,
)
from .._propagation import extract, span_context, traceparent
from .._state import state

if TYPE_CHECKING:
    from opentelemetry.trace import Span


_T = TypeVar("_T")
_P = ParamSpec("_P")


class Forwarded(NamedTuple):
    """What the owner of a session learnt of a request another replica forwarded to it (:func:`forwarding`), kept
    until the request is served (:func:`serve_request`): that replica's ``forward`` span (a ``traceparent``), its
    id, and the seconds the request waited in the store (0 if the two replicas' wall clocks disagree)."""

    span: str
    by: str
    wait: float


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
                self._token = _forwarding_hop.set((traceparent(context), self._id, self._answer))
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
