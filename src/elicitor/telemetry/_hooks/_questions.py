"""The hooks of questions and the person: an ``elicitation`` span per question, the rounds of a 2026-07-28 call
that asked it, and a failing tool."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar
from weakref import WeakKeyDictionary

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from ..._outcomes import wire_action
from ...types import JSONObject
from .._attributes import (
    exception_event,
    fail,
    metric_attributes,
)
from .._propagation import context_of, span_context, traceparent
from .._state import state
from ._requests import _measured, annotate

if TYPE_CHECKING:
    from opentelemetry.trace import Span


_T = TypeVar("_T")
_P = ParamSpec("_P")


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
    attributes["elicitor.elicitation.outcome"] = wire_action(answer) or "_OTHER"
    if span is not None:
        span.set_attribute("elicitor.elicitation.outcome", attributes["elicitor.elicitation.outcome"])


def current_traceparent() -> str | None:
    """The current span's ``traceparent``, or ``None`` outside a trace (kept with a URL-mode elicitation)."""
    context = trace.get_current_span().get_span_context()
    return traceparent(context) if context.is_valid else None


class CompletingUrl:
    """What :func:`completing_url` gives: told the record completed (:meth:`settle`), it starts the span and makes
    it current, so that the notice telling the client (``notifications/elicitation/complete``) is its child; told
    the completion is refused (:meth:`refuse`), the same, so that the log line saying why names the span."""

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

    def refuse(self) -> None:
        """The completion is refused (unknown, expired, already completed, another user's; or the store is away):
        the span starts now and is current while the refusal is logged, so the log line names it."""
        if self._span is None:
            self._span = self._open(None, None)
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
    attributes = {
        "elicitor.elicitation.mode": raw_mode if raw_mode in ("form", "url") else "form",
        "elicitor.side": "server",
        "elicitor.elicitation.outcome": wire_action(answer) or "_OTHER",
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
        kept["q"] = traceparent(here)
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
    instruments.elicitations.add(1, {
        "elicitor.elicitation.mode": raw_mode if raw_mode in ("form", "url") else "form",
        "elicitor.side": "server",
        "elicitor.elicitation.outcome": wire_action(answer) or "_OTHER",
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
        return {"traceparent": traceparent(here)} if here.is_valid else None
    if here.trace_id != first.trace_id and current.is_recording():
        current.add_link(first, {"elicitor.link": "first_round"})
    return {"traceparent": traceparent(first)}
