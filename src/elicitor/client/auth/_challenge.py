"""Reading a server's ``WWW-Authenticate`` challenge (RFC 9110 §11.6.1, RFC 6750 §3, RFC 9728 §5.1). Sans-I/O.

A protected MCP server answers 401 with ``Bearer resource_metadata="…", scope="…"`` (where to discover its
authorization server, which scopes to ask for) and 403 with ``error="insufficient_scope"`` when a token lacks a
scope (the spec's "Scope Selection Strategy" and "Scope Challenge Handling"). The header comes from the peer, so
the parser accepts any text: what it cannot read it leaves out, it never raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_PARAM = re.compile(rf"\s*({_TOKEN})\s*=\s*(?:\"((?:[^\"\\]|\\.)*)\"|({_TOKEN}))\s*(?:,|$)")
_SCHEME = re.compile(rf"\s*({_TOKEN})(?:\s+|$)")
_MAX_HEADER = 8192


@dataclass(frozen=True, slots=True)
class Challenge:
    """The parameters of a ``Bearer`` challenge; each ``None`` when the server did not send it."""

    resource_metadata: str | None = None
    scope: str | None = None
    error: str | None = None
    error_description: str | None = None

    @property
    def scopes(self) -> list[str]:
        """``scope`` split into its space-separated scopes."""
        return self.scope.split() if self.scope else []


def parse_challenge(headers: Iterable[str]) -> Challenge:
    """The first ``Bearer`` challenge among ``WWW-Authenticate`` header values (an empty one if none)."""
    for header in headers:
        for scheme, params in _challenges(header[:_MAX_HEADER]):
            if scheme.lower() == "bearer":
                return Challenge(
                    resource_metadata=params.get("resource_metadata"),
                    scope=params.get("scope"),
                    error=params.get("error"),
                    error_description=params.get("error_description"),
                )
    return Challenge()


def _challenges(header: str) -> Iterable[tuple[str, dict[str, str]]]:
    """Each ``scheme param=value, …`` challenge of one header value (several may share a header)."""
    position = 0
    while position < len(header):
        scheme = _SCHEME.match(header, position)
        if scheme is None:
            return
        position = scheme.end()
        params: dict[str, str] = {}
        while position < len(header):
            param = _PARAM.match(header, position)
            if param is None:
                break
            name, quoted, bare = param.groups()
            value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
            params.setdefault(name.lower(), value)
            position = param.end()
        yield scheme.group(1), params
        if position < len(header) and _PARAM.match(header, position) is None:
            # Not a parameter: either the next challenge's scheme, or junk to skip up to the next comma.
            comma = header.find(",", position)
            next_scheme = _SCHEME.match(header, position)
            if next_scheme is None or (comma != -1 and comma < next_scheme.end()):
                if comma == -1:
                    return
                position = comma + 1
