"""The body mirrored into HTTP headers (2026-07-28, SEP-2243): ``Mcp-Method``, ``Mcp-Name``, and the tool
parameters a schema marks with ``x-mcp-header`` (read and checked here).

Spec: https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http#custom-headers-from-tool-parameters
— the annotation names an HTTP token, unique (case-insensitively) within the schema, on a string, integer or
boolean property reachable from the root through ``properties`` only. A tool that breaks these rules is excluded
by an HTTP client.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from ..types import META_PROTOCOL_VERSION

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_ALLOWED_TYPES = {"string", "integer", "boolean"}
_NAMED = {
    "tools/call": "name", "prompts/get": "name", "resources/read": "uri",
    "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",  # ext-tasks "Routing Headers"
}  # fmt: skip


def header_params(schema: Any) -> dict[tuple[str, ...], str] | str:
    """The mirrored parameters of an input schema: property path to header name, or why the schema is invalid."""
    found: dict[tuple[str, ...], str] = {}
    seen: set[str] = set()

    def walk(node: Any, path: tuple[str, ...], reachable: bool) -> str | None:
        if isinstance(node, dict):
            if "x-mcp-header" in node:
                name = node["x-mcp-header"]
                if not reachable or not path:
                    return f"x-mcp-header at {'/'.join(path) or 'the root'} is not reachable through properties"
                if not isinstance(name, str) or not _TOKEN.match(name):
                    return f"x-mcp-header {name!r} on {'.'.join(path)} is not an HTTP token"
                if name.lower() in seen:
                    return f"x-mcp-header {name!r} is used twice"
                if node.get("type") not in _ALLOWED_TYPES:
                    return f"x-mcp-header on {'.'.join(path)} needs type string, integer or boolean"
                seen.add(name.lower())
                found[path] = name
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    for prop, sub in value.items():
                        problem = walk(sub, (*path, str(prop)), reachable)
                        if problem:
                            return problem
                elif key != "x-mcp-header":
                    problem = walk(value, path, False)
                    if problem:
                        return problem
        elif isinstance(node, list):
            for item in node:
                problem = walk(item, path, False)
                if problem:
                    return problem
        return None

    problem = walk(schema, (), True)
    return problem if problem is not None else found


def header_value(value: Any) -> str | None:
    """The string a mirrored argument becomes (``None``: omit the header)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    return None


def message_headers(
    headers: dict[str, str], message: dict[str, Any], tool_headers: Mapping[str, Mapping[tuple[str, ...], str]]
) -> dict[str, str]:
    """``headers`` (the transport's own) with what the message's body puts in them: its method and name, and on
    2026-07-28 its revision and the tool's mirrored parameters (``tool_headers``: per tool, path to header name)."""
    method = message.get("method")
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    if isinstance(method, str):
        # Mcp-Method and Mcp-Name on every POST, as 2026-07-28 requires (SEP-2243) and the handshake era
        # ignores: an ``initialize`` sent to a server whose era is not known yet (the fallback after
        # ``server/discover``, a proxy trying the handshake first) satisfies a server of either era.
        headers["mcp-method"] = method
        field = _NAMED.get(method)
        if field is not None and isinstance(params, dict) and isinstance(params.get(field), str):
            headers["mcp-name"] = encode_header(params[field])
    if isinstance(version, str):  # 2026-07-28: mirror the body into the headers (SEP-2243)
        headers["mcp-protocol-version"] = version
        headers.pop("mcp-session-id", None)
        if method == "tools/call" and isinstance(params, dict):
            headers.update(_param_headers(tool_headers.get(str(params.get("name")), {}), params))
    return headers


def _param_headers(mirrored: Mapping[tuple[str, ...], str], params: dict[str, Any]) -> dict[str, str]:
    arguments = params.get("arguments")
    out: dict[str, str] = {}
    for path, name in mirrored.items():
        value: Any = arguments
        for step in path:
            value = value.get(step) if isinstance(value, dict) else None
        text = header_value(value)
        if text is not None:
            out[f"mcp-param-{name.lower()}"] = encode_header(text)
    return out


def encode_header(value: str) -> str:
    """A value fit for an ``Mcp-Name``/``Mcp-Param-*`` header: as is if plain ASCII, else the Base64 sentinel."""
    plain = value == value.strip() and all(0x20 <= ord(c) <= 0x7E for c in value)
    if plain and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="
