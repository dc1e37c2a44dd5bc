"""Who sent an HTTP request, for the ``SERVER`` span serving it: the conventions' ``client.address`` and
``client.port`` (recommended on MCP ``SERVER`` spans) and ``network.protocol.version`` (the HTTP version).

They come from the ASGI scope of the POST that carried the request: the address the ASGI server gives, which is
the client's behind a balancer only when the ASGI server is told whose forwarding headers to believe
(``Server.run(forwarded_allow_ips=)``, ``elicitor serve --forwarded-allow-ips``), otherwise the balancer's; from
``X-Forwarded-For`` it has no port. A POST another replica forwarded to a session's owner brings the peer it had
there (``_peer_wire.Open.peer``). On spans only, never as a metric label: a client's port is a new value on every
connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

_arrived: ContextVar[dict[str, Any] | None] = ContextVar("elicitor_peer", default=None)
"""The peer of the POST this task answers (:func:`arrived`)."""


def arrived(scope: Mapping[str, Any]) -> None:
    """A POST arrived: keep its peer for the rest of the POST's task (:func:`current`).

    Called only when ``state.on``."""
    peer: dict[str, Any] = {}
    client = scope.get("client")
    if client:
        host, port = client[0], client[1]
        if isinstance(host, str) and host:
            peer["client.address"] = host
        if type(port) is int and port > 0:  # a Unix socket's peer has no port
            peer["client.port"] = port
    version = scope.get("http_version")
    if isinstance(version, str) and version:
        peer["network.protocol.version"] = version
    _arrived.set(peer or None)


def current() -> dict[str, Any] | None:
    """The attributes of this task's POST's peer (:func:`arrived`), or ``None`` outside one."""
    return _arrived.get()
