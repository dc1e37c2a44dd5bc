"""Trace context carried between peers: read from and written into a request's ``params._meta`` under the
unprefixed W3C keys (SEP-414), and kept with a task so its later requests link to the one that created it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from ..types import JSONObject
from ._state import TASK_ORIGIN

TRACEPARENT = "traceparent"


TRACESTATE = "tracestate"


BAGGAGE = "baggage"


_CARRIED = (TRACEPARENT, TRACESTATE, BAGGAGE)


def extract(params: JSONObject | None) -> otel_context.Context | None:
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


def inject(params: JSONObject | None, ctx: otel_context.Context | None) -> JSONObject | None:
    """``params`` with the context in ``_meta`` (a copy: the caller's dicts are never changed)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=ctx)
    if TRACEPARENT not in carrier:
        return params
    params = dict(params or {})
    meta = params.get("_meta")
    params["_meta"] = {**(meta if isinstance(meta, dict) else {}), **carrier}
    return params


def span_context(carrier: object) -> trace.SpanContext | None:
    """The span context a W3C trace context carrier names (``traceparent``, ``tracestate``), or ``None``."""
    if not isinstance(carrier, dict) or not isinstance(carrier.get(TRACEPARENT), str):
        return None
    kept = {key: value for key in (TRACEPARENT, TRACESTATE) if isinstance(value := carrier.get(key), str)}
    ctx = propagate.extract(kept)
    context = trace.get_current_span(ctx).get_span_context()
    return context if context.is_valid else None


# ---- tasks: where they were created --------------------------------------------------------------------------


def traceparent(context: trace.SpanContext) -> str:
    """``context`` as a W3C ``traceparent`` header value."""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def task_origin() -> dict[str, str] | None:
    """The current span's context, kept with a task when it is created (``traceparent``, ``tracestate``; never the
    baggage, which may hold anything the application put there), or ``None`` outside a trace."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    kept = {key: carrier[key] for key in (TRACEPARENT, TRACESTATE) if key in carrier}
    return kept or None


def context_of(span: trace.Span) -> dict[str, str] | None:
    """``span``'s context as a W3C carrier (``traceparent``, ``tracestate``; never the baggage), or ``None``."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    kept = {key: carrier[key] for key in (TRACEPARENT, TRACESTATE) if key in carrier}
    return kept or None


def with_task_origin(result: JSONObject, origin: object) -> JSONObject:
    """``result`` (a ``tasks/*`` response) naming the request that created its task in ``_meta`` (a copy)."""
    if span_context(origin) is None:
        return result
    meta = result.get("_meta")
    return {**result, "_meta": {**(meta if isinstance(meta, dict) else {}), TASK_ORIGIN: origin}}


@contextmanager
def in_task_origin(origin: object, *, elsewhere: bool = False) -> Iterator[None]:
    """Within: the context of the request that created the task, so a run started here (a takeover, a replay on
    another replica) asks its questions in the task's own trace, not in the trace of the poll that woke it.

    ``elsewhere``: only outside that trace (a client answering a task it picked up later; one still inside the
    call that created the task is in its trace already, under its own call span)."""
    created = span_context(origin)
    current = trace.get_current_span().get_span_context()
    if created is None or (elsewhere and current.is_valid and current.trace_id == created.trace_id):
        yield
        return
    token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(created)))
    try:
        yield
    finally:
        otel_context.detach(token)
