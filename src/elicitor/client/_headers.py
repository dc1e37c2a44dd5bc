"""Tool parameters mirrored into HTTP headers (2026-07-28, SEP-2243): reading and checking ``x-mcp-header``.

Spec: https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http#custom-headers-from-tool-parameters
— the annotation names an HTTP token, unique (case-insensitively) within the schema, on a string, integer or
boolean property reachable from the root through ``properties`` only. A tool that breaks these rules is excluded
by an HTTP client.
"""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_ALLOWED_TYPES = {"string", "integer", "boolean"}


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
