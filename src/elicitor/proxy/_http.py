"""The proxy's client side over Streamable HTTP: elicitor's own HTTP app, dispatching by forwarding.

:class:`ProxyServer` is a :class:`~elicitor.Server` whose connections forward instead of running tools, so the
proxy gets everything the HTTP app already does (Host and Origin checks, handshake-era sessions with their SSE
streams and resumption, 2026-07-28 stateless requests, authentication, limits) without a second copy:

* a handshake-era session (``initialize``) is served by a :class:`~elicitor.proxy.Bridge` of its own, with its own
  upstream connection, for as long as the session lives: the upstream server sees one client per client;
* 2026-07-28 requests, which belong to no connection, are served one by one by the proxy's
  :class:`~._stateless.Stateless`, each with who sent it (its ``_meta`` and the principal the app authenticated):
  on a handshake-era server each call runs on an upstream connection of its own while it runs, so what the
  server pushes or reports about it reaches that request and no other. While a person signs in upstream, each
  hears that the proxy is still there (:mod:`._signing`): a log message if it asked for them, else an SSE comment.
"""

from __future__ import annotations

from typing import Any

import anyio

from .._exceptions import JSONRPCError
from ..client._handlers import ElicitationHandler
from ..client._pace import PersonPaced
from ..protocol import NotificationReceived, RequestReceived, parse_request_meta
from ..server import Server
from ..server._dispatch import Keepalive, Notify, ServerSession
from ..server._server import DEFAULT_ELICITATION_TIMEOUT
from ..session import open_session
from ..transports import Transport
from ..types import INTERNAL_ERROR, METHOD_NOT_FOUND, STATELESS_REVISIONS, JSONObject
from ._bridge import Bridge
from ._owners import TaskOwners
from ._signing import SignInWait, asks_for_notices
from ._stateless import Stateless
from ._upstream import Connect

MAX_SESSIONS_PER_PERSON = 32
"""Handshake-era sessions one signed-in person may have open through the proxy at once (each holds an upstream
connection of its own), so that one person never holds them all."""
REFUSED_LINGER = 5.0
"""Seconds a refused session waits for its client to close it, after its answer."""


class ProxyServer(Server):
    """A Server that forwards everything to ``connect``'s upstream (see the module docstring).

    Args:
        connect: opens a connection to the upstream server (called once per handshake-era client, and for each
            upstream connection 2026-07-28 calls need).
        ui: answers the elicitations a client cannot (see :class:`Bridge`).
        upstream_protocol: the era to speak upstream (``auto``: the server's).
        elicitation_timeout: see :class:`Bridge`.
        sign_in: the upstream's sign-in, if a person may have to sign in there (see :class:`Bridge`).
        keepalive: see :class:`Bridge`.
        options: as :class:`~elicitor.Server` (``auth`` is given to :meth:`http_app`).
    """

    def __init__(
        self,
        connect: Connect,
        *,
        ui: ElicitationHandler | None = None,
        upstream_protocol: str = "auto",
        elicitation_timeout: float | None = DEFAULT_ELICITATION_TIMEOUT,
        sign_in: PersonPaced | None = None,
        keepalive: float = 10.0,
        **options: Any,
    ) -> None:
        super().__init__("elicitor-proxy", "1", elicitation_timeout=elicitation_timeout, **options)
        self.connect = connect
        self.ui = ui
        self.upstream_protocol = upstream_protocol
        self.sign_in = sign_in
        self.keepalive = keepalive
        self.signing = SignInWait(sign_in, keepalive)
        """The upstream sign-in as the 2026-07-28 requests wait on it, followed for as long as the proxy lives."""
        self.signing.follow()
        self._mirrored: dict[str, dict[str, str]] = {}
        self.owners = TaskOwners()
        """Whose task is whose on a 2026-07-28 server, for every client of this proxy."""
        self._sessions: dict[str | None, int] = {}
        """Handshake-era sessions open now, by principal."""
        self._stateless: Stateless | None = None
        """What serves the 2026-07-28 requests, once the first has come (:class:`_Forwarding`)."""

    def bridge(self, principal: str | None = None) -> Bridge:
        """A new :class:`Bridge` for one client connection, with this proxy's upstream and options."""
        return Bridge(
            self.connect, ui=self.ui, upstream_protocol=self.upstream_protocol,
            elicitation_timeout=self.elicitation_timeout, mirrored=self._mirrored, principal=principal,
            owners=self.owners, sign_in=self.sign_in, keepalive=self.keepalive, on_list_change=self._list_changed,
        )  # fmt: skip

    async def _list_changed(self, method: str) -> None:
        """A handshake-era session's server said a list changed: the 2026-07-28 people listening on the shared
        connection are told too (see :meth:`Stateless.list_changed`)."""
        if self._stateless is not None:
            await self._stateless.list_changed(method)

    def mirrored_headers(self, tool: str) -> dict[str, str] | None:
        """The upstream tool's mirrored headers, as its forwarded ``tools/list`` said (checked like ours)."""
        return self._mirrored.get(tool)

    def connection(self, *, principal: str | None = None) -> ServerSession:
        return _Forwarding(self, principal=principal)

    async def serve(self, transport: Transport, *, principal: str | None = None) -> None:
        """A handshake-era session: a bridge of its own to a new upstream connection. A signed-in person may have
        :data:`MAX_SESSIONS_PER_PERSON` at once (each holds an upstream connection): beyond that, the session's
        ``initialize`` is refused, saying so, and no upstream connection is opened for it. (Without a sign-in each
        session is the only thing that tells people apart, and holds one connection: nothing to share out.)"""
        if principal is not None and self._sessions.get(principal, 0) >= MAX_SESSIONS_PER_PERSON:
            await _refuse(
                transport,
                JSONRPCError(
                    INTERNAL_ERROR,
                    f"Internal error: you have {MAX_SESSIONS_PER_PERSON} sessions open through the proxy, the most "
                    "one person may have at once; close one (end its client) and connect again",
                    {"sessions": self._sessions[principal], "maxPerPerson": MAX_SESSIONS_PER_PERSON},
                ),
            )
            return
        self._sessions[principal] = self._sessions.get(principal, 0) + 1
        try:
            await self.bridge(principal).serve(transport)
        finally:
            self._sessions[principal] -= 1
            if not self._sessions[principal]:
                del self._sessions[principal]


async def _refuse(transport: Transport, error: JSONRPCError) -> None:
    """Answer the session's requests with ``error`` until its client closes it (or for a few seconds after the
    first answer: the session then ends, and with it the client's)."""
    answered = anyio.Event()

    async def refuse(request: RequestReceived) -> JSONObject:
        answered.set()
        raise error

    async def ignore(note: NotificationReceived) -> None:
        return None

    async with open_session(transport, refuse, ignore) as session:
        with anyio.move_on_after(REFUSED_LINGER):
            await answered.wait()
            await session.wait_closed()


class _Forwarding(ServerSession):
    """The HTTP app's dispatcher for 2026-07-28 requests: checked, then forwarded by the proxy's ``Stateless``."""

    def __init__(self, server: ProxyServer, *, principal: str | None = None) -> None:
        super().__init__(server, principal=principal)
        self._proxy = server
        self._stateless: Stateless | None = None

    async def serve_stateless(
        self,
        request: RequestReceived,
        notify: Notify | None = None,
        principal: str | None = None,
        *,
        keepalive: Keepalive | None = None,
    ) -> JSONObject:
        """A 2026-07-28 request: checked as any elicitor server checks one (its ``_meta``: -32602 or -32022; a
        removed method: -32601), then forwarded for ``principal``. While a person signs in upstream meanwhile, it
        hears so if it asked for log messages, else gets SSE comments (``keepalive``): see :mod:`._signing`."""
        parse_request_meta(request.params, STATELESS_REVISIONS)
        if request.method in ("initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"):
            raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: {request.method} (removed in 2026-07-28)")
        signing = self._proxy.signing
        if signing.sign_in is None:  # nobody ever signs in upstream: nothing to tell
            return await self._forwarder().serve(request, notify, principal)
        told = notify if notify is not None and asks_for_notices(request.params or {}) else None
        async with signing.told(told, keepalive):
            return await self._forwarder().serve(request, notify, principal)

    async def run(self, transport: Transport) -> None:
        """A handshake-era session's connection (the HTTP app runs one per session): a bridge of its own, as
        :meth:`ProxyServer.serve` makes it, never the proxy answering for itself (it has no tools of its own)."""
        await self._proxy.serve(transport, principal=self.principal)

    def _forwarder(self) -> Stateless:
        """What serves 2026-07-28 requests, made on the first one in the application's task group."""
        if self._stateless is None:
            if self.parked is None:
                raise JSONRPCError(INTERNAL_ERROR, "Internal error: the proxy's application has not started")
            proxy = self._proxy
            self._stateless = Stateless(
                proxy.connect, self.parked.task_group, ui=proxy.ui, upstream_protocol=proxy.upstream_protocol,
                elicitation_timeout=proxy.elicitation_timeout, mirrored=proxy._mirrored, owners=proxy.owners,
                pace=proxy.signing.pace,
            )  # fmt: skip
            proxy._stateless = self._stateless
        return self._stateless
