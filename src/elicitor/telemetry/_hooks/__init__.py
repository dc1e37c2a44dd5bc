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

This package is the hooks alone, by what they observe (``_requests``, ``_arrival``, ``_forwarding``, ``_questions``,
``_calls``); what they share stands beside it: ``_attributes`` (what a span says),
``_propagation`` (trace context in ``_meta``, and a task's origin), ``_instruments`` (the metrics, and turning on).
"""

from .._propagation import in_task_origin, task_origin, with_task_origin
from ._arrival import handed_over, header_context, posted, refused
from ._calls import Call, Following, calling, following, outbox_messages, store_operation, task_status
from ._forwarding import Forwarded, forwarded_answer, forwarded_request, forwarding, received_forwarded
from ._questions import (
    CompletingUrl,
    answered_elsewhere,
    asked_in,
    completing_url,
    current_traceparent,
    elicitation,
    first_round,
    invalid_answer,
    round_served,
    rounds,
    serving_round,
    tool_failed,
)
from ._requests import (
    annotate,
    cancelling,
    http_responded,
    send_notification,
    send_request,
    serve_notification,
    serve_request,
)

__all__ = [
    "Call",
    "CompletingUrl",
    "Following",
    "Forwarded",
    "annotate",
    "answered_elsewhere",
    "asked_in",
    "calling",
    "cancelling",
    "completing_url",
    "current_traceparent",
    "elicitation",
    "first_round",
    "following",
    "forwarded_answer",
    "forwarded_request",
    "forwarding",
    "handed_over",
    "header_context",
    "http_responded",
    "in_task_origin",
    "invalid_answer",
    "outbox_messages",
    "posted",
    "received_forwarded",
    "refused",
    "round_served",
    "rounds",
    "send_notification",
    "send_request",
    "serve_notification",
    "serve_request",
    "serving_round",
    "store_operation",
    "task_origin",
    "task_status",
    "tool_failed",
    "with_task_origin",
]
