"""The proxy's client side over Streamable HTTP: elicitor's own HTTP app, dispatching by forwarding.

:class:`ProxyServer` is a :class:`~elicitor.Server` whose connections forward instead of running tools, so the
proxy gets everything the HTTP app already does (Host and Origin checks, handshake-era sessions with their SSE
streams and resumption, 2026-07-28 stateless requests, limits) without a second copy:

* a handshake-era session (``initialize``) is served by a :class:`~elicitor.proxy.Bridge` of its own, with its own
  upstream connection, for as long as the session lives: the upstream server sees one client per client;
* 2026-07-28 requests, which belong to no connection, share one bridge and its upstream connection, opened on the
  first such request and kept for the application's lifetime (a failure to connect is reported to that request,
  and the next one tries again).
"""

from __future__ import annotations

from typing import Any

import anyio

from .._exceptions import JSONRPCError
from ..client._handlers import ElicitationHandler
from ..protocol import RequestReceived, parse_request_meta
from ..server import Server
from ..server._dispatch import Notify, ServerSession
from ..transports import Transport
from ..types import INTERNAL_ERROR, METHOD_NOT_FOUND, MODERN_REVISIONS, JSONObject
from ._bridge import Bridge, Connect


class ProxyServer(Server):
    """A Server that forwards everything to ``connect``'s upstream (see the module docstring).

    Args:
        connect: opens a connection to the upstream server.
        ui: answers the elicitations a client cannot (see :class:`Bridge`).
        upstream_protocol: the era to speak upstream (``auto``: the server's).
    """

    def __init__(
        self,
        connect: Connect,
        *,
        ui: ElicitationHandler | None = None,
        upstream_protocol: str = "auto",
        **options: Any,
    ) -> None:
        super().__init__("elicitor-proxy", "1", **options)
        self.connect = connect
        self.ui = ui
        self.upstream_protocol = upstream_protocol
        self._mirrored: dict[str, dict[str, str]] = {}

    def bridge(self) -> Bridge:
        """A new :class:`Bridge` for one client connection, with this proxy's upstream and options."""
        return Bridge(self.connect, ui=self.ui, upstream_protocol=self.upstream_protocol, mirrored=self._mirrored)

    def mirrored_headers(self, tool: str) -> dict[str, str] | None:
        """The upstream tool's mirrored headers, as its forwarded ``tools/list`` said (checked like ours)."""
        return self._mirrored.get(tool)

    def connection(self, *, principal: str | None = None) -> ServerSession:
        return _Forwarding(self, principal=principal)

    async def serve(self, transport: Transport, *, principal: str | None = None) -> None:
        """A handshake-era session: a bridge of its own to a new upstream connection."""
        await self.bridge().serve(transport)


class _Forwarding(ServerSession):
    """The HTTP app's dispatcher for 2026-07-28 requests: one shared bridge."""

    def __init__(self, server: ProxyServer, *, principal: str | None = None) -> None:
        super().__init__(server, principal=principal)
        self._proxy = server
        self._bridge: Bridge | None = None
        self._ready: anyio.Event | None = None
        self._failure: BaseException | None = None

    async def serve_modern(
        self, request: RequestReceived, notify: Notify | None = None, principal: str | None = None
    ) -> JSONObject:
        """A 2026-07-28 request: checked as any elicitor server checks one (its ``_meta``: -32602 or -32022; a
        removed method: -32601), then forwarded."""
        parse_request_meta(request.params, MODERN_REVISIONS)
        if request.method in ("initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"):
            raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: {request.method} (removed in 2026-07-28)")
        bridge = await self._connected()
        return await bridge.serve_request(request, notify)

    async def _connected(self) -> Bridge:
        if self._ready is None:
            if self.parked is None:
                raise JSONRPCError(INTERNAL_ERROR, "Internal error: the proxy's application has not started")
            self._ready = anyio.Event()
            self._failure = None
            self.parked.task_group.start_soon(self._hold_upstream, self._ready)
        await self._ready.wait()
        if self._failure is not None or self._bridge is None:
            self._ready = None  # the next request tries again
            raise JSONRPCError(INTERNAL_ERROR, f"Internal error: the upstream server is unavailable: {self._failure}")
        return self._bridge

    async def _hold_upstream(self, ready: anyio.Event) -> None:
        bridge = self._proxy.bridge()
        try:
            async with bridge.upstream():
                self._bridge = bridge
                ready.set()
                await bridge.up_closed()
        except Exception as exc:
            self._failure = exc
        finally:
            self._bridge = None
            if self._ready is ready:
                self._ready = None
            ready.set()
