"""What the client tells a transport that cares about the protocol, and what such a transport tells it back.

A byte stream (stdio) needs nothing from the client. Streamable HTTP does: the revision decides its headers and
whether there is a session; the handshake era opens a standalone GET stream once initialized; tools whose
parameters are mirrored into ``Mcp-Param-*`` headers must be known to it (SEP-2243). :class:`HttpAware` names
those calls, so the client asks ``isinstance(transport, HttpAware)`` once instead of probing attributes.

A transport reports that the server forgot the session (HTTP 404 for our ``Mcp-Session-Id``, 2025-11-25
"Session Management") by failing the request with :data:`SESSION_EXPIRED` as the error's data: the one channel
from a transport into a waiting request is a JSON-RPC reply, and this value cannot come from a server (the key
is ours, and the transport makes the reply itself). The client then initializes again and retries once.

:data:`SESSION_LOST` says more: the session ended while the request was under way (its stream could not be resumed,
or the session was replaced meanwhile), so the server may have acted on it. A request that is not safe to repeat
(``tools/call``) is then not sent again: its outcome is unknown, and the caller is told so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ..types import JSONValue

SESSION_EXPIRED: JSONValue = {"elicitor/local": "session-expired"}
"""The ``data`` of the local error a transport answers a request with when the server no longer knows the session."""

SESSION_LOST: JSONValue = {"elicitor/local": "session-lost"}
"""The ``data`` of the local error for a request under way when its session ended: the server may have acted on it."""

UNANSWERED: JSONValue = {"elicitor/local": "unanswered"}
"""The ``data`` of the local error for a request a gateway answered 502 or 504 in its server's place (its replica
died, or stalled, with the request under way): the server may have acted on it, and its session may live on."""

SIGN_IN_FAILED: JSONValue = {"elicitor/local": "sign-in-failed"}
"""The ``data`` of the local error for a request whose sign-in failed (the person gave up, the authorizer's time ran
out, the authorization server refused): the server never saw the request, so its answer says nothing about the
server, and another request would only ask the person again."""


@runtime_checkable
class HttpAware(Protocol):
    """A transport whose behaviour depends on the revision and the tools (Streamable HTTP)."""

    def adopt(self, version: str) -> None:
        """The revision is negotiated: use its headers and session rules from now on."""
        ...

    def start_listening(self) -> None:
        """The handshake is done: open the standalone stream for server-initiated messages, if the era has one."""
        ...

    def mirror(self, tool: str, params: dict[tuple[str, ...], str]) -> None:
        """Tool ``tool`` mirrors these parameters (by path) into ``Mcp-Param-*`` headers (SEP-2243)."""
        ...

    def heard_by(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the server sends bytes that carry no message (an SSE comment, say): the server
        is there, and the client's clocks about its silence start again."""
        ...
