"""JSON-RPC 2.0 as MCP uses it: ids, JSON values and the error codes.

Spec: https://modelcontextprotocol.io/specification/2026-07-28/basic/index#messages and
https://www.jsonrpc.org/specification. From 2025-06-18 on there are no batches: one message per line or POST.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
"""Any value JSON can carry, as msgspec decodes it."""

JSONObject: TypeAlias = "dict[str, Any]"
"""A JSON object (values typed loosely: peers send arbitrary nested JSON, and indexing it must stay ergonomic)."""

RequestId: TypeAlias = int | str
"""A request id: a string or an integer, never null and never a boolean (``True`` would alias id 1)."""

JSONRPC_VERSION: Final = "2.0"

PARSE_ERROR: Final = -32700
"""The bytes were not JSON (or not UTF-8). The reply's id is null."""

INVALID_REQUEST: Final = -32600
"""JSON, but not a JSON-RPC message: wrong shape, bad id, a batch, or over the size limit."""

METHOD_NOT_FOUND: Final = -32601
"""No handler for the method (on 2026-07-28 HTTP, status 404)."""

INVALID_PARAMS: Final = -32602
"""The params do not fit the method: missing fields, unknown tool, tampered ``requestState``."""

INTERNAL_ERROR: Final = -32603
"""The receiver failed while handling a valid request."""

RESOURCE_NOT_FOUND: Final = -32002
"""Resource not found, 2025-11-25 and earlier only (2026-07-28 uses -32602)."""

HEADER_MISMATCH: Final = -32020
"""2026-07-28: an HTTP ``Mcp-*`` header disagrees with the body."""

MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
"""2026-07-28: the request needs a capability the client did not declare; ``data.requiredCapabilities``."""

UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
"""2026-07-28: the requested revision is not served; ``data.supported`` and ``data.requested``."""

URL_ELICITATION_REQUIRED: Final = -32042
"""2025-11-25 only: the request needs URL-mode elicitation first; ``data.elicitations``."""
