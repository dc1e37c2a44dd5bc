"""Streamable HTTP: an ASGI application serving a :class:`~elicitor.server.Server` on both eras at one endpoint.

Spec: https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#streamable-http (handshake era,
:mod:`._handshake`) and https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http
(:mod:`._stateless`). What every request passes first is here: the path, Host and Origin against an allow-list
(localhost by default: DNS-rebinding protection), the method, media type, ``Accept``, body size and JSON; then
the era is decided per POST (a body whose ``_meta`` names a protocol version, or a stateless ``MCP-Protocol-Version``
header, is 2026-07-28).

Sessions and parked multi-round-trip calls live in a task group opened by the application's lifespan: when the
app runs under an ASGI server directly this happens by itself; when mounted inside another app (Starlette,
FastAPI), enter :meth:`HttpApp.lifespan` from that app's lifespan.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio
import anyio.abc
import msgspec

from ...protocol import Connection, InvalidMessage, RequestReceived, error_reply
from ...state import EventStore, StoreUnavailable, Subscription
from ...telemetry import _state as _telemetry
from ...types import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    META_PROTOCOL_VERSION,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    JSONObject,
)
from .._context import current_access_token
from .._hold import StoreHold
from .._pages import answering_unavailable
from .._rounds import ParkedRuns
from ._asgi import (
    RETRY_AFTER,
    ASGIApp,
    Headers,
    Receive,
    Scope,
    Send,
    decode_json,
    encode_json,
    hostname,
    read_body,
    refuse,
    respond_empty,
    respond_json,
)
from ._auth import Protection
from ._handshake import DRAIN_MARGIN, HANDSHAKE_HEADER_VERSIONS, HandshakeSessions, Respond
from ._stateless import StatelessExchange, check_headers

if TYPE_CHECKING:
    from .._server import Server

logger = logging.getLogger("elicitor.http")

HEALTH_PROBE = 1.0
"""Seconds ``/healthz`` waits for the shared state to answer before it reports the replica unavailable (503): a
load balancer learns of a paused or unreachable Redis in about a second, not after the store's own timeout (3 s by
default, longer than many balancers wait for a health check). A healthy Redis answers a ``PING`` in well under a
millisecond, so a second leaves room for a loaded machine."""

DEFAULT_MAX_BODY = 4 << 20
"""The largest POST body accepted (4 MiB); larger ones get 413."""

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
"""Hosts accepted by default: a server bound to loopback answers only requests addressed to loopback."""


class HttpApp:
    """An ASGI application serving ``server`` over Streamable HTTP at ``path``, both protocol eras.

    Example — mounted in Starlette::

        app = server.http_app()
        starlette = Starlette(routes=[Mount("/", app=app)], lifespan=lambda _: app.lifespan())

    Args:
        server: what to serve.
        path: the MCP endpoint.
        allowed_hosts: ``Host`` values accepted (any port); default loopback only. ``["*"]`` turns the check off.
        allowed_origins: ``Origin`` values accepted besides those on an allowed host (``scheme://host[:port]``).
        max_body: the largest request body, in bytes.
        event_store: where SSE events wait for a resuming client (default: the server's store, which is bounded
            and in memory unless the server shares state in Redis).
        retry_ms: the ``retry`` sent in priming events, telling clients how soon to reconnect.
        max_sessions: the most handshake sessions at once; beyond it ``initialize`` gets 503.
        session_idle_timeout: seconds after which a session with nothing in flight and no message from its client
            is ended (a client may vanish without DELETE); a request waiting on a person keeps it alive while a
            connection follows it (a request nobody follows counts as idle: its answer cannot come).
        fallback: an ASGI app for every other path (a callback route, say); default: the server's pages
            (:meth:`Server.serve_pages`, what URL-mode elicitations link to); without either, other paths get 404.
            Host and Origin checks apply to the MCP endpoint only.
        principal: who made a request, as the authentication in front of this app established it (for example
            ``lambda scope: scope["user"].identity`` under Starlette's ``AuthenticationMiddleware``). A session
            belongs to the user who created it (another user's request for it gets 404, as for an unknown
            session); sealed ``requestState`` and URL-mode elicitations are bound to the user.
        health_path: where a load balancer or orchestrator asks whether this replica is ready: ``GET`` answers
            200 when the shared state answers within :data:`HEALTH_PROBE` (a second) and this replica listens to
            the others, else 503 with the reason (``None`` turns it off).
        auth: protect the endpoint with OAuth access tokens (:class:`~elicitor.server.Protection`): serve the
            protected resource metadata, answer 401/403 with the spec's challenges, check each tool's ``scopes``;
            the token's subject becomes the principal (basic/authorization.mdx).
    """

    def __init__(
        self,
        server: Server,
        *,
        path: str = "/mcp",
        allowed_hosts: Sequence[str] = LOCAL_HOSTS,
        allowed_origins: Sequence[str] = (),
        max_body: int = DEFAULT_MAX_BODY,
        event_store: EventStore | None = None,
        retry_ms: int | None = 1000,
        max_sessions: int = 10_000,
        session_idle_timeout: float = 1800.0,
        fallback: ASGIApp | None = None,
        principal: Callable[[Scope], str | None] | None = None,
        health_path: str | None = "/healthz",
        auth: Protection | None = None,
    ) -> None:
        self.server = server
        self.path = path.rstrip("/") or "/"
        self._hosts = {h.lower().strip("[]") for h in allowed_hosts}
        self._origins = {o.lower().rstrip("/") for o in allowed_origins}
        self._max_body = max_body
        self._store = server.store
        self._fallback = answering_unavailable(fallback) if fallback is not None else None
        """The fallback as served: failing while the shared state is away, it answers 503 (as the pages do)."""
        self._principal = principal
        self._health = health_path
        self._auth = auth
        self._metadata_path = auth.metadata_path(self.path) if auth is not None else None
        self._metadata_url = ""
        if auth is not None:
            resource = urlsplit(auth.resource)
            self._metadata_url = f"{resource.scheme}://{resource.netloc}{auth.metadata_path(resource.path or '/')}"
        self._hold = StoreHold()
        """This replica's requests waiting for an unreachable store, both eras' under one bound."""
        self._handshake = HandshakeSessions(
            server,
            event_store if event_store is not None else self._store.events,
            retry_ms=retry_ms,
            max_sessions=max_sessions,
            idle_timeout=session_idle_timeout,
            hold=self._hold,
        )
        self._tg: anyio.abc.TaskGroup | None = None
        self._failed: str | None = None
        """Why the lifespan stopped on an error (then every request is refused with 503 and says so)."""
        self._stateless = server.connection()
        self._listens: set[anyio.CancelScope] = set()
        """The 2026-07-28 ``subscriptions/listen`` streams open here (see :meth:`drain`)."""
        self._draining = False
        self._stateless.hold = self._hold  # its task requests and task creations wait within the same bound

    # ---- lifespan --------------------------------------------------------------------------------------------

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Run the task group that holds sessions and parked calls; everything in it ends with the block.

        Raises:
            RuntimeError: the state is shared (Redis) but ``requestState`` keys are this process's own random
                key: another replica could not open them, so every retry that lands elsewhere would fail.
        """
        problem = self.server.misconfiguration()
        if problem is not None:
            raise RuntimeError(problem)
        async with self._store.running(), anyio.create_task_group() as tg:
            self._tg = tg
            self._stateless.parked = ParkedRuns(tg, limit=self.server.max_parked_runs, ttl=self.server.parked_run_ttl)
            self._handshake.start(tg)
            if self._store.shared:
                tg.start_soon(self.server.relay_changes)
                tg.start_soon(self.server.tasks.listen, self._stateless, tg)
            self.server._serving += 1
            self.server.url_elicitations.leave(False)
            try:
                yield
            finally:
                self.server._serving -= 1
                self._stateless.parked = None
                self._tg = None
                self.server.url_elicitations.leave()  # the sessions closed now go on elsewhere: see leave
                if self._handshake.draining:  # the calls in flight here get their grace (see drain)
                    await self._handshake.drained.wait()
                await self._handshake.close()
                tg.cancel_scope.cancel()

    def drain(self, grace: float | None) -> None:
        """The ASGI server stopped taking connections (SIGTERM) and gives the requests in flight ``grace`` seconds
        (``None``: as long as they take): :meth:`Server.run` calls this as its shutdown begins.

        The 2026-07-28 ``subscriptions/listen`` streams open here end now, without the graceful close (the client
        learns its subscription was lost, listens again on another replica and refetches); a new one is refused
        (503). What this replica relays for another replica's sessions ends now, cleanly: nothing of it runs here,
        and the client resumes it (``Last-Event-ID``) on another replica at once instead of waiting out the grace
        and then meeting a response cut mid-stream. The sessions this replica runs keep their calls in flight for
        the grace whichever replica the client's POST landed on (a call relayed by another replica is in flight
        here too); just before the grace is up, or once no client follows a call of theirs, they end (their
        clients start again elsewhere), so the ASGI server need not cut a response. Served by another ASGI server,
        call it as that server's graceful shutdown begins, with its grace; without it, the sessions end when the
        lifespan does.
        """
        self._draining = True
        if grace is not None:  # requests waiting for the store are refused (503) before the grace is up, not cut
            stops_at = anyio.current_time() + max(0.0, grace - min(DRAIN_MARGIN, grace / 4))
            self._hold.stop_by(stops_at)
            self.server.url_elicitations.hold.stop_by(stops_at)  # a page completing a URL elicitation too
        self.server.url_elicitations.leave()
        for listen in list(self._listens):  # nothing to finish: the client listens again on another replica
            listen.cancel()
        if self._tg is not None:
            self._tg.start_soon(self._handshake.drain, grace)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        started = False
        try:
            async with self.lifespan():
                started = True
                await send({"type": "lifespan.startup.complete"})
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
        except Exception as exc:
            # Said, never swallowed: an ASGI server in lifespan="auto" mode takes a raised exception for "this app
            # has no lifespan" and serves on without one (every request then fails). startup.failed stops it. Once
            # started, background work is supervised and should never get here; if it does, the replica says so
            # (ERROR here, 503 "failed" on /healthz and every request) instead of serving 500s.
            self._failed = f"{type(exc).__name__}: {exc}"
            logger.error("the HTTP app's lifespan failed: %s", exc, exc_info=not isinstance(exc, RuntimeError))
            phase = "shutdown" if started else "startup"
            await send({"type": f"lifespan.{phase}.failed", "message": self._failed})
            return
        await send({"type": "lifespan.shutdown.complete"})

    # ---- ASGI ------------------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = Headers(scope)
        if self._principal is not None:
            headers.principal = self._principal(scope)
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):  # mounted (Starlette keeps the prefix in path and sets root_path)
            path = path[len(root) :]
        if path == self._health and scope["method"] in ("GET", "HEAD"):
            await self._report_health(send)
            return
        if path == self._metadata_path and self._auth is not None and scope["method"] == "GET":
            extra = [(b"access-control-allow-origin", b"*")]  # public, and read by browser-based clients
            await respond_json(send, 200, encode_json(self._auth.metadata()), extra=extra)
            return
        pages = self.server._pages
        pages.learn(scope)  # the links of URL-mode pages start where this app listens (see Server.serve_pages)
        if (path.rstrip("/") or "/") != self.path:
            fallback = self._fallback if self._fallback is not None else pages.answering
            if fallback is not None:
                await fallback(scope, receive, send)
                return
            await refuse(send, 404, None, METHOD_NOT_FOUND, f"Not found: the MCP endpoint is {self.path}")
            return
        refusal = self._check_origin(headers)
        if refusal is not None:
            status, text = refusal
            await refuse(send, status, None, INVALID_REQUEST, text)
            return
        if self._auth is not None and not await self._authorize(headers, send):
            return
        if self._failed is not None:
            await refuse(
                send,
                503,
                None,
                INTERNAL_ERROR,
                "Service unavailable: this replica failed; its log and /healthz say why",
            )
            return
        method = scope["method"]
        if method == "POST":
            if _telemetry.state.on:  # who sent it: client.address, client.port on the span serving its request
                from ...telemetry import _peer

                _peer.arrived(scope)
            respond = await self._post(headers, receive, send)
            if respond is not None:  # answered from its stream: no frame of the POST's handling waits with it
                del headers
                responding = respond(receive, send)
                del respond
                rest = await responding  # an SSE answer opened: what delivers it, awaited here (no frame between)
                del responding
                if rest is not None:
                    await rest
        elif method == "GET":
            await self._handshake.get(headers, receive, send)
        elif method == "DELETE":
            await self._handshake.delete(headers, send)
        else:
            await refuse(send, 405, None, INVALID_REQUEST, f"Method not allowed: {method}", allow=True)

    async def _authorize(self, headers: Headers, send: Send) -> bool:
        """Check the bearer token (basic/authorization.mdx, "Token Handling"); False: refused with 401 or 403."""
        assert self._auth is not None
        verdict = await self._auth.check(headers.get("authorization"))
        if isinstance(verdict, str):
            await self._challenge(send, verdict)
            return False
        headers.token = verdict
        headers.principal = verdict.subject
        current_access_token.set(verdict)  # this request's context: what its tool calls see as ctx.access_token
        return True

    async def _challenge(self, send: Send, error: str, scopes: Sequence[str] = ()) -> None:
        assert self._auth is not None
        status = 403 if error == "insufficient_scope" else 401
        challenge = self._auth.challenge(self._metadata_url, error=error or None, scopes=scopes)
        if not error:  # RFC 6750 §3.1: a request without credentials gets no error code, only the challenge
            body = encode_json({"message": "this server needs an access token: sign in as WWW-Authenticate says"})
        else:
            described = {
                "invalid_token": "the access token is not valid here (expired, revoked, or issued elsewhere)",
                "insufficient_scope": "the access token lacks a scope this request needs",
            }
            body = encode_json({"error": error, "error_description": described.get(error, error)})
        await respond_json(send, status, body, extra=[(b"www-authenticate", challenge.encode())])

    def subscriptions(self) -> list[Subscription]:
        """The channels this replica listens to (replicas sharing a store), each reported by ``/healthz``."""
        if not self._store.shared:
            return []
        return [self._handshake.subscription, self.server._changes.subscription, self.server.tasks.subscription]

    async def _report_health(self, send: Send) -> None:
        report: JSONObject = {"status": "ok", "replica": self._store.replica, "sessions": len(self._handshake)}
        status = 200
        subscriptions = self.subscriptions()
        if subscriptions:
            report["channels"] = {subscription.name: subscription.report() for subscription in subscriptions}
        if self._failed is not None:
            report["status"], report["reason"], status = "failed", f"the lifespan stopped: {self._failed}", 503
        elif self._tg is None:
            report["status"], status = "starting", 503
        else:
            try:
                with anyio.fail_after(HEALTH_PROBE):
                    await self._store.check()
                deaf = [subscription.name for subscription in subscriptions if not subscription.listening]
                if deaf:
                    raise StoreUnavailable(f"not listening to the other replicas yet (channels: {', '.join(deaf)})")
            except TimeoutError:
                reason = f"the shared state did not answer within {HEALTH_PROBE:g} s"
                report["status"], report["reason"], status = "unavailable", reason, 503
            except StoreUnavailable as exc:
                report["status"], report["reason"], status = "unavailable", str(exc), 503
        extra = RETRY_AFTER if status == 503 else None
        await respond_json(send, status, encode_json(report), extra=extra)

    def _check_origin(self, headers: Headers) -> tuple[int, str] | None:
        if "*" not in self._hosts:
            host = hostname(headers.get("host") or "")
            if host not in self._hosts:
                return 421, f"Misdirected request: host {host!r} is not served here (DNS-rebinding protection)"
        origin = headers.get("origin")
        if origin is None or "*" in self._hosts or origin.lower().rstrip("/") in self._origins:
            return None
        try:
            netloc = urlsplit(origin).netloc
        except ValueError:  # "http://[::1" and kin: not an origin any browser sends
            return 403, f"Forbidden: origin {origin!r} is not a valid URL"
        if hostname(netloc) not in self._hosts:
            return 403, f"Forbidden: origin {origin!r} is not allowed"
        return None

    # ---- POST ------------------------------------------------------------------------------------------------

    async def _post(self, headers: Headers, receive: Receive, send: Send) -> Respond | None:
        """Answer a POST, or return what answers it from its stream (a handshake-era request: that may take hours,
        and what waits then is only what it needs)."""
        content_type = (headers.get("content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            await refuse(send, 415, None, INVALID_REQUEST, "Unsupported media type: POST a JSON-RPC message as JSON")
            return None
        accept = (headers.get("accept") or "").lower()
        if not ("application/json" in accept or "*/*" in accept) or not (
            "text/event-stream" in accept or "*/*" in accept
        ):
            await refuse(
                send,
                406,
                None,
                INVALID_REQUEST,
                "Not acceptable: Accept must list application/json and text/event-stream",
            )
            return None
        body = await read_body(receive, self._max_body)
        if body is None:
            await refuse(send, 413, None, INVALID_REQUEST, f"Request body over {self._max_body} bytes")
            return None
        try:
            message = decode_json(body)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            await refuse(send, 400, None, PARSE_ERROR, f"Parse error: {exc}")
            return None
        if not isinstance(message, dict):
            text = "batches are not supported" if isinstance(message, list) else "a message must be a JSON object"
            await refuse(send, 400, None, INVALID_REQUEST, f"Invalid request: {text}")
            return None
        if _telemetry.state.on:
            from ...telemetry import _hooks

            traceparent = headers.get("traceparent")
            if traceparent is not None:  # a trace named in the HTTP header only: into _meta, where the spans look
                traced = _hooks.header_context(message, traceparent, headers.get("tracestate"))
                if traced is not None:
                    message, body = traced, encode_json(traced)
            _hooks.posted(message)  # a span for it, should it be refused before anything serves it
        if headers.token is not None and message.get("method") == "tools/call":
            needed = self.server.tool_scopes(_tool_name(message))
            if needed and not set(needed) <= headers.token.scopes:
                if _telemetry.state.on:  # refused: still a span, error.type = insufficient_scope
                    from ...telemetry import _hooks

                    _hooks.refused(
                        None, 403, "insufficient_scope", "Forbidden: the token lacks a scope this tool needs"
                    )
                await self._challenge(send, "insufficient_scope", needed)
                return None
        version = headers.get("mcp-protocol-version")
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        body_version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
        if body_version is not None or (version is not None and version not in HANDSHAKE_HEADER_VERSIONS):
            await self._post_stateless(headers, message, receive, send)
            return None
        return await self._handshake.post(headers, message, body, send)

    # -- 2026-07-28 ---------------------------------------------------------------------------------------------

    async def _post_stateless(self, headers: Headers, message: JSONObject, receive: Receive, send: Send) -> None:
        connection = Connection()
        event = connection.receive_decoded(message)
        if isinstance(event, InvalidMessage):
            await respond_json(send, 400, event.reply or error_reply(None, INVALID_REQUEST, str(event.error)))
            return
        if not isinstance(event, RequestReceived):
            if "method" in message:  # a notification: nothing to do on this transport (no session)
                if _telemetry.state.on and isinstance(message["method"], str):  # still a SERVER span, in its trace
                    from ...telemetry import _hooks

                    _hooks.handed_over()
                    params = message.get("params")
                    await _hooks.serve_notification(
                        _nothing, message["method"], params if isinstance(params, dict) else None, "http"
                    )
                await respond_empty(send, 202)
            else:
                await refuse(send, 400, None, INVALID_REQUEST, "Invalid request: clients must not POST responses")
            return
        mismatch = check_headers(headers, event, self.server)
        if mismatch is not None:
            await refuse(send, 400, event.id, HEADER_MISMATCH, f"Header mismatch: {mismatch}")
            return
        if self._draining and event.method == "subscriptions/listen":  # it would only be ended: listen elsewhere
            await refuse(send, 503, event.id, INTERNAL_ERROR, "Service unavailable: this replica is shutting down")
            return
        exchange = StatelessExchange(
            self._stateless, connection, event, receive, send, headers.principal, listens=self._listens
        )
        await exchange.run()

    # -- 2025-06-18 / 2025-11-25 --------------------------------------------------------------------------------


async def _nothing() -> None:
    """What a 2026-07-28 server does with a notification POSTed to it (there is no session to tell)."""


def _tool_name(message: JSONObject) -> str:
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return name if isinstance(name, str) else ""
