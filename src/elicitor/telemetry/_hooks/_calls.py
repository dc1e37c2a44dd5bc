"""The hooks of what outlives one request: a client's whole call and the task it follows, task status changes,
and operations on the shared store."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from ...types import JSONObject
from .._attributes import (
    fail,
    request_attributes,
    span_name,
)
from .._propagation import span_context
from .._state import state

if TYPE_CHECKING:
    from opentelemetry.trace import Span


_T = TypeVar("_T")
_P = ParamSpec("_P")


def task_status(status: str) -> None:
    """A task entered ``status`` (``working``, ``input_required``, ``completed``, ``failed``, ``cancelled``)."""
    instruments = state.instruments
    if instruments is not None:
        instruments.tasks.add(1, {"elicitor.task.status": status})


def outbox_messages(outcome: str, reason: str | None, messages: int) -> None:
    """``messages`` messages kept for another replica's session had ``outcome`` (``kept``, ``relayed``,
    ``dropped`` for ``reason``: ``full``, ``gone``, ``expired``, ``failed``, ``stopped``)."""
    instruments = state.instruments
    if instruments is not None:
        attributes = {"elicitor.outbox.outcome": outcome}
        if reason is not None:
            attributes["elicitor.outbox.reason"] = reason
        instruments.outbox.add(messages, attributes)


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
