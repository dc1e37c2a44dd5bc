"""What a span and a metric say about a request: the semantic conventions' attributes for MCP (its method, tool or
prompt, revision, transport and server address), the span's name, and how a failure or a result is recorded.
Nothing a person typed is recorded unless telemetry is configured with ``record_content=True``."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import StatusCode

from ..types import ALL_REVISIONS, INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, JSONObject, RequestId
from ._propagation import span_context
from ._state import TASK_ORIGIN, state

if TYPE_CHECKING:
    from opentelemetry.trace import Span


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
        elif (method.startswith("resources/") or method == "notifications/resources/updated") and isinstance(
            params.get("uri"), str
        ):
            uri = params["uri"]  # conditionally required: its query may carry a code or a token, unless opted in
            attributes["mcp.resource.uri"] = uri if state.record_content else without_query(uri)
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


@lru_cache(maxsize=256)
def without_query(uri: str) -> str:
    """``uri`` without what may make it a credential: its query and fragment, and a user and password before its
    host (``?code=…``, ``#access_token=…``, ``user:secret@``), each left as its delimiter alone (``?``, ``#``) so
    that a reader sees that something was there."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(uri)
    except ValueError:
        return uri.split("?", 1)[0].split("#", 1)[0]
    netloc = parts.netloc.rpartition("@")[2]
    kept = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return kept + ("?" if parts.query or "?" in uri else "") + ("#" if parts.fragment else "")


def add_network(attributes: dict[str, Any], transport: str, session_id: str | None, url: str | None = None) -> None:
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


def span_name(method: str, attributes: Mapping[str, Any]) -> str:
    target = attributes.get("gen_ai.tool.name") or attributes.get("gen_ai.prompt.name")
    return f"{method} {target}" if target else method


def _error_code(exc: BaseException) -> str | None:
    code = getattr(exc, "code", None)
    return str(code) if isinstance(code, int) and not isinstance(code, bool) else None


_SAID = frozenset({"cancelled", "timeout"})
"""What ``error.type`` says in full: no ``exception`` event repeats it (a wait cancelled, or that ran out of time)."""

_SERVER_FAULTS = range(-32099, -31999)
"""JSON-RPC's "Server error" codes (-32099 to -32000): with -32603, the codes that make a ``SERVER`` span an error."""


def fail(span: Span | None, attributes: dict[str, Any], exc: BaseException, *, served: bool = False) -> None:
    """Record that the work of ``span`` ended with ``exc``: ``error.type`` in ``attributes`` (the metrics' labels)
    and on the span, the span's status, and an ``exception`` event for an exception nobody handled.

    The conventions for MCP (spans, "Span status"): every JSON-RPC error makes a ``CLIENT`` span an error, while a
    ``SERVER`` span (``served``) is one only for -32603 and the server errors -32000 to -32099; the others (an
    unknown tool, invalid params) are the caller's mistake, so that span keeps ``error.type`` and the code but no
    error status. The status description is the JSON-RPC error's message (the conventions ask for it; ours never
    quote an answer, a peer's are the peer's), and nothing for any other exception, whose text may quote anything.

    The ``exception`` event is recorded where an exception escaped code that is not elicitor's and nothing handled
    it: one raised here, or the cause of an internal error a handler's exception became (the "recording errors"
    guidance: an unhandled exception is recorded by the instrumentation around it). It carries the exception's
    type and where it was raised (the frames of ``exception.stacktrace``), never ``exception.message``: the text
    of an application's exception may quote a person's answer or a secret. A JSON-RPC error raised on purpose (an
    unknown tool), a cancellation and a timeout get none: their code or ``error.type`` says all there is.
    """
    code = _error_code(exc)
    if code is not None:  # a JSON-RPC error: its code is both (semconv, "error.type" note [1])
        attributes["error.type"] = attributes["rpc.response.status_code"] = code
    else:
        attributes["error.type"] = _qualname(exc)
    if span is None:
        return
    span.set_attributes({k: attributes[k] for k in ("error.type", "rpc.response.status_code") if k in attributes})
    if code is not None and served and int(code) != INTERNAL_ERROR and int(code) not in _SERVER_FAULTS:
        return
    span.set_status(StatusCode.ERROR, _description(exc) if code is not None else None)
    unhandled = exc.__cause__ if code is not None else None if attributes["error.type"] in _SAID else exc
    if unhandled is not None and _error_code(unhandled) is None:
        exception_event(span, unhandled)


def _description(exc: BaseException) -> str:
    """A JSON-RPC error's message, for the span's status: a resource URI it quotes (one its ``data`` names, as
    "Resource not found" does) without its query, as ``mcp.resource.uri`` is recorded, unless content is."""
    text = str(exc)
    data = getattr(exc, "data", None)
    if not state.record_content and isinstance(data, dict) and isinstance(uri := data.get("uri"), str) and uri:
        text = text.replace(uri, without_query(uri))
    return text


def exception_event(span: Span, exc: BaseException) -> None:
    """An ``exception`` event on ``span``: ``exception.type`` (the class's module and name) and
    ``exception.stacktrace`` — the frames alone, then the type; never the exception's message (see :func:`fail`)."""
    import traceback

    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    frames = "".join(traceback.format_list(traceback.extract_tb(exc.__traceback__)))
    span.add_event(
        "exception",
        {"exception.type": name, "exception.stacktrace": f"Traceback (most recent call last):\n{frames}{name}"},
    )


def _qualname(exc: BaseException) -> str:
    import anyio

    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return "cancelled"
    if isinstance(exc, TimeoutError):
        return "timeout"
    return type(exc).__qualname__


def settle_result(span: Span | None, attributes: dict[str, Any], result: JSONObject) -> None:
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
    if task is None and isinstance(result.get("taskId"), str) and "status" in result:
        task = result  # tasks/get, tasks/cancel: the Task itself
    if span is not None and isinstance(task, dict) and isinstance(task.get("taskId"), str):
        span.set_attribute("elicitor.task.id", task["taskId"])  # 2025-11-25 {"task": Task}; 2026-07-28 a Task
        status = task.get("status")  # where the task stood when this response was sent: its life, poll by poll
        span.set_attribute("elicitor.task.status", status if status in TASK_STATUSES else "_OTHER")
    meta = result.get("_meta")
    if span is not None and isinstance(meta, dict) and TASK_ORIGIN in meta:
        created = span_context(meta[TASK_ORIGIN])
        if created is not None:  # a tasks/* response: link to the span that created the task (same on both sides)
            span.add_link(created, {"elicitor.link": "task_created"})


TASK_STATUSES = frozenset({"working", "input_required", "completed", "failed", "cancelled"})
"""The task statuses the tasks extension defines."""

_METHODS = frozenset({
    "initialize", "ping", "server/discover", "subscriptions/listen", "logging/setLevel", "completion/complete",
    "tools/list", "tools/call", "prompts/list", "prompts/get", "resources/list", "resources/templates/list",
    "resources/read", "resources/subscribe", "resources/unsubscribe", "elicitation/create",
    "sampling/createMessage", "roots/list", "tasks/get", "tasks/result", "tasks/list", "tasks/cancel",
    "tasks/update", "notifications/cancelled", "notifications/initialized", "notifications/message",
    "notifications/progress", "notifications/prompts/list_changed", "notifications/resources/list_changed",
    "notifications/resources/updated", "notifications/roots/list_changed", "notifications/tools/list_changed",
    "notifications/elicitation/complete", "notifications/tasks/status", "notifications/subscriptions/acknowledged",
})  # fmt: skip
"""The requests and notifications MCP defines (every revision elicitor speaks): any other method is counted as
``_OTHER``."""

_RESERVED_CODES = range(-32768, -31999)
"""JSON-RPC 2.0's reserved error codes (§5.1: its own, MCP's and a server's pre-defined errors): a bounded set."""


def _bounded_error(error: object) -> bool:
    """Whether an ``error.type`` can be a label: a name our code gives (a tool error, a timeout, an exception's
    class), or a JSON-RPC code in the reserved range. A peer picks any other integer it likes for an error's code,
    one per request if it wants."""
    if not isinstance(error, str) or not error.lstrip("-").isdigit():
        return True
    return int(error) in _RESERVED_CODES


_NOT_ITS_NAME = frozenset({str(METHOD_NOT_FOUND), str(INVALID_PARAMS)})
"""Errors that may mean the tool or prompt named does not exist: counted without the name."""


def metric_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """A request's attributes as a metric's labels, each from a bounded set whatever a peer sends.

    Method names, tool and prompt names and the protocol version arrive in the request, so a caller could invent
    a new one each time and grow every replica's series without bound (the SDK's cardinality limit would then
    fold the real ones into its overflow series). A method MCP does not define and a revision elicitor does not
    speak become ``_OTHER`` (as the HTTP conventions count an unknown method), and so does an error code outside
    JSON-RPC's reserved range (a peer's to invent), in ``error.type`` and ``rpc.response.status_code``; a tool or
    prompt name is kept unless the request failed with ``-32601``/``-32602`` (an unknown tool or prompt is one of
    those). The span keeps every value: it is one event, not a series.
    """
    out: dict[str, Any] = {}
    method = attributes.get("mcp.method.name")
    if method is not None:
        out["mcp.method.name"] = method if method in _METHODS else "_OTHER"
    error = attributes.get("error.type")
    if error is not None:
        out["error.type"] = error if _bounded_error(error) else "_OTHER"
    code = attributes.get("rpc.response.status_code")  # conditionally required: the same code, bounded the same
    if code is not None:
        out["rpc.response.status_code"] = code if _bounded_error(code) else "_OTHER"
    if error not in _NOT_ITS_NAME:
        for key in ("gen_ai.tool.name", "gen_ai.prompt.name"):
            if key in attributes:
                out[key] = attributes[key]
    if "gen_ai.operation.name" in attributes:  # execute_tool, ours alone
        out["gen_ai.operation.name"] = attributes["gen_ai.operation.name"]
    version = attributes.get("mcp.protocol.version")
    if version is not None:
        out["mcp.protocol.version"] = version if version in ALL_REVISIONS else "_OTHER"
    for key in _NETWORK_LABELS:  # set by :func:`add_network` from our own transports, never from a peer
        if key in attributes:
            out[key] = attributes[key]
    http_version = attributes.get("network.protocol.version")  # what an HTTP library or ASGI server said
    if http_version is not None:
        out["network.protocol.version"] = http_version if http_version in _HTTP_VERSIONS else "_OTHER"
    return out


_NETWORK_LABELS = ("network.transport", "network.protocol.name")
"""The conventions' network attributes of the operation duration metrics: ``pipe`` or ``tcp``, and ``http``."""

_HTTP_VERSIONS = frozenset({"1.0", "1.1", "2", "3"})
"""The HTTP versions a ``network.protocol.version`` label may say; any other is counted as ``_OTHER``."""
