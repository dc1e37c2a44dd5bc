"""Streamable HTTP: an ASGI application serving a :class:`Server` on both eras at one endpoint.

Spec: https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#streamable-http (handshake era)
and https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http (modern).

* **2025-06-18 / 2025-11-25.** ``initialize`` creates a session (``Mcp-Session-Id``, 32 random bytes) run by a
  :class:`ServerSession` over an :class:`_HttpSession` transport. Each POSTed request gets a logical stream: every
  message the server sends *related* to that request (notifications, ``elicitation/create``) and finally its answer
  go there. The POST answers with JSON when the answer is the first thing ready, else with SSE (priming event
  first, SEP-1699). The client's answers to server requests, and notifications, are POSTs answered 202. A GET opens
  the standalone stream (messages related to no request), or resumes a stream with ``Last-Event-ID`` from the
  :class:`EventStore`. DELETE ends the session and cancels what it was waiting for. Unknown session → 404.
* **2026-07-28.** POST only, no sessions: each request is validated against its headers (``MCP-Protocol-Version``,
  ``Mcp-Method``, ``Mcp-Name``: -32020 with HTTP 400), served from its own ``_meta``, answered with JSON, or with SSE
  once it emits a notification. Closing the response stream cancels the request. GET and DELETE → 405.
* **Both.** Host and Origin are checked against an allow-list (localhost by default: DNS-rebinding protection),
  bodies are limited in size, and every refusal is a specific 4xx with a JSON-RPC error body.

Sessions and parked multi-round-trip calls live in a task group opened by the application's lifespan: when the
app runs under an ASGI server directly this happens by itself; when mounted inside another app (Starlette,
FastAPI), enter :meth:`HttpApp.lifespan` from that app's lifespan.
"""

from __future__ import annotations

import base64
import binascii
import functools
import logging
import math
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._exceptions import JSONRPCError
from ..protocol import Connection, InvalidMessage, Oversized, RequestReceived, error_reply
from ..state import BackendUnavailable, EventStore
from ..transports._sse import encode_event, parse_event_id, priming_event
from ..types import (
    HANDSHAKE_REVISIONS,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    META_PROTOCOL_VERSION,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    MODERN_REVISIONS,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    JSONObject,
    RequestId,
)
from ._peers import Attach, Open, Peers, RemoteStream
from ._rounds import ParkedRuns
from ._server import Server, ServerSession

logger = logging.getLogger("elicitor.http")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

DEFAULT_MAX_BODY = 4 << 20
"""The largest POST body accepted (4 MiB); larger ones get 413."""

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
"""Hosts accepted by default: a server bound to loopback answers only requests addressed to loopback."""

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_HANDSHAKE_HEADER_VERSIONS = (*HANDSHAKE_REVISIONS, "2025-03-26")
"""MCP-Protocol-Version values a handshake-era session accepts (2025-03-26 is what an absent header means)."""
_NAMED_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_BAD_REQUEST_CODES = {
    PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
}  # fmt: skip


class _Stream:
    """One logical SSE stream of a handshake session: what the server sends about one request (or none).

    Messages are numbered and kept in the event store, so a client whose connection dropped can resume it; the
    connection currently delivering the stream reads them from a queue and skips what it already delivered.
    """

    def __init__(self, key: str, events: EventStore) -> None:
        self.key = key
        self.sequence = 0
        self.done = False
        self._events = events
        self._in: MemoryObjectSendStream[tuple[int, bytes, bool]]
        self.out: MemoryObjectReceiveStream[tuple[int, bytes, bool]]
        self._in, self.out = anyio.create_memory_object_stream[tuple[int, bytes, bool]](math.inf)
        self.attached = False

    async def put(self, message: bytes, final: bool) -> None:
        self.sequence += 1
        try:
            await self._events.store(self.key, self.sequence, message)
        except BackendUnavailable as exc:  # delivered live all the same; only a resume could miss it
            logger.warning("event %s.%d not kept for resumption: %s", self.key, self.sequence, exc)
        self._in.send_nowait((self.sequence, message, final))
        if final:
            self.done = True

    def event_id(self, sequence: int) -> str:
        return f"{self.key}.{sequence}"

    def close(self) -> None:
        self._in.close()
        self.out.close()


class _HttpSession:
    """A handshake-era session: the :class:`Transport` a :class:`ServerSession` runs over, fed by HTTP requests."""

    def __init__(self, session_id: str, events: EventStore, principal: str | None = None) -> None:
        self.id = session_id
        self.principal = principal
        """The user who created the session; only their requests find it."""
        self.events = events
        self._inbox_in, self._inbox_out = anyio.create_memory_object_stream[bytes](256)
        self.streams: dict[RequestId, _Stream] = {}
        self.by_key: dict[str, _Stream] = {}
        self.standalone = self._new_stream()
        self.ended = anyio.Event()
        self.last_seen = time.monotonic()

    def idle_for(self, now: float) -> float:
        """Seconds since the client last sent anything; 0 while a request is in flight or it listens (GET)."""
        return 0.0 if self.streams or self.standalone.attached else now - self.last_seen

    def _new_stream(self) -> _Stream:
        stream = _Stream(secrets.token_hex(8), self.events)
        self.by_key[stream.key] = stream
        return stream

    def open(self, request_id: RequestId) -> _Stream:
        stream = self.streams[request_id] = self._new_stream()
        return stream

    # -- Transport ---------------------------------------------------------------------------------------------

    async def receive(self) -> bytes | Oversized:
        return await self._inbox_out.receive()

    async def send(self, message: bytes, related: RequestId | None = None, *, final: bool = False) -> None:
        stream = self.streams.get(related) if related is not None else None
        if stream is None:
            stream = self.standalone
        elif final:
            del self.streams[related]  # type: ignore[arg-type]  # related is not None here
        await stream.put(message, final)

    async def aclose(self) -> None:
        self._inbox_in.close()

    # -- fed by the app ----------------------------------------------------------------------------------------

    async def deliver(self, message: bytes) -> None:
        self.last_seen = time.monotonic()
        await self._inbox_in.send(message)

    async def end(self) -> None:
        self._inbox_in.close()
        self._inbox_out.close()
        for stream in self.by_key.values():
            stream.close()
            await self.events.discard(stream.key)
        self.ended.set()


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
        event_store: where SSE events wait for a resuming client (default: the server's backend, which is bounded
            and in memory unless the server shares state in Redis).
        retry_ms: the ``retry`` sent in priming events, telling clients how soon to reconnect.
        max_sessions: the most handshake sessions at once; beyond it ``initialize`` gets 503.
        session_idle_timeout: seconds after which a session with nothing in flight and no message from its client
            is ended (a client may vanish without DELETE); a request waiting on a person keeps it alive.
        fallback: an ASGI app for every other path (the page a URL-mode elicitation sends people to, a callback
            route); without it, other paths get 404. Host and Origin checks apply to the MCP endpoint only.
        principal: who made a request, as the authentication in front of this app established it (for example
            ``lambda scope: scope["user"].identity`` under Starlette's ``AuthenticationMiddleware``). A session
            belongs to the user who created it (another user's request for it gets 404, as for an unknown
            session); sealed ``requestState`` and URL-mode elicitations are bound to the user.
        health_path: where a load balancer or orchestrator asks whether this replica is ready: ``GET`` answers
            200 when the shared state is reachable, else 503 (``None`` turns it off).
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
        fallback: Callable[[Scope, Receive, Send], Awaitable[None]] | None = None,
        principal: Callable[[Scope], str | None] | None = None,
        health_path: str | None = "/healthz",
    ) -> None:
        self.server = server
        self.path = path.rstrip("/") or "/"
        self._hosts = {h.lower().strip("[]") for h in allowed_hosts}
        self._origins = {o.lower().rstrip("/") for o in allowed_origins}
        self._max_body = max_body
        self._backend = server.backend
        self._events = event_store if event_store is not None else self._backend.events
        self._retry = retry_ms
        self._max_sessions = max_sessions
        self._idle_timeout = session_idle_timeout
        self._fallback = fallback
        self._principal = principal
        self._health = health_path
        self._sessions: dict[str, _HttpSession] = {}
        """The handshake sessions this replica runs; others' are found in the backend's directory."""
        self._peers = Peers(self._backend, self._sessions, server.url_elicitations, self._events.replay)
        self._tg: anyio.abc.TaskGroup | None = None
        self._stateless = ServerSession(server)

    # ---- lifespan --------------------------------------------------------------------------------------------

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Run the task group that holds sessions and parked calls; everything in it ends with the block.

        Raises:
            RuntimeError: the state is shared (Redis) but ``requestState`` keys are this process's own random
                key: another replica could not open them, so every retry that lands elsewhere would fail.
        """
        if self._backend.shared and self.server.sealer.ephemeral:
            raise RuntimeError(
                "this server shares its state in Redis, so every replica must seal requestState with the same keys: "
                "set ELICITOR_STATE_KEYS (python -c 'import elicitor.server as s; print(s.generate_key())') on all"
            )
        async with self._backend.running(), anyio.create_task_group() as tg:
            self._tg = tg
            self._stateless.parked = ParkedRuns(tg, limit=self.server.max_parked_runs)
            tg.start_soon(self._expire_idle_sessions)
            if self._backend.shared:
                tg.start_soon(self._peers.listen)
                tg.start_soon(self.server._changes.relay)
            try:
                yield
            finally:
                self._stateless.parked = None
                self._tg = None
                with anyio.CancelScope(shield=True):
                    for session in list(self._sessions.values()):
                        await self._end(session)
                tg.cancel_scope.cancel()

    async def _end(self, session: _HttpSession) -> None:
        """End a session this replica runs, and take it out of the directory."""
        self._sessions.pop(session.id, None)
        with suppress(BackendUnavailable), anyio.move_on_after(2):
            await self._backend.sessions.release(session.id)
        await session.end()

    async def _expire_idle_sessions(self) -> None:
        while True:
            await anyio.sleep(min(60.0, self._idle_timeout / 4))
            now = time.monotonic()
            for session in list(self._sessions.values()):
                if session.idle_for(now) > self._idle_timeout:
                    logger.info("ending session %.8s... idle for %.0f s", session.id, session.idle_for(now))
                    await self._end(session)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        async with self.lifespan():
            await send({"type": "lifespan.startup.complete"})
            while (await receive())["type"] != "lifespan.shutdown":
                pass
        await send({"type": "lifespan.shutdown.complete"})

    # ---- ASGI ------------------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = _Headers(scope)
        if self._principal is not None:
            headers.principal = self._principal(scope)
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):  # mounted (Starlette keeps the prefix in path and sets root_path)
            path = path[len(root) :]
        if path == self._health and scope["method"] in ("GET", "HEAD"):
            await self._report_health(send)
            return
        if (path.rstrip("/") or "/") != self.path:
            if self._fallback is not None:
                await self._fallback(scope, receive, send)
                return
            await _error(send, 404, None, METHOD_NOT_FOUND, f"Not found: the MCP endpoint is {self.path}")
            return
        refusal = self._check_origin(headers)
        if refusal is not None:
            status, text = refusal
            await _error(send, status, None, INVALID_REQUEST, text)
            return
        method = scope["method"]
        if method == "POST":
            await self._post(headers, receive, send)
        elif method == "GET":
            await self._get(headers, receive, send)
        elif method == "DELETE":
            await self._delete(headers, send)
        else:
            await _error(send, 405, None, INVALID_REQUEST, f"Method not allowed: {method}", allow=True)

    async def _report_health(self, send: Send) -> None:
        report: JSONObject = {"status": "ok", "replica": self._backend.replica, "sessions": len(self._sessions)}
        status = 200
        if self._tg is None:
            report["status"], status = "starting", 503
        else:
            try:
                with anyio.fail_after(5):
                    await self._backend.check()
            except (BackendUnavailable, TimeoutError) as exc:
                report["status"], report["reason"], status = "unavailable", str(exc) or "timed out", 503
        await _raw(send, status, _encode(report))

    def _check_origin(self, headers: _Headers) -> tuple[int, str] | None:
        if "*" not in self._hosts:
            host = _hostname(headers.get("host") or "")
            if host not in self._hosts:
                return 421, f"Misdirected request: host {host!r} is not served here (DNS-rebinding protection)"
        origin = headers.get("origin")
        if origin is None or "*" in self._hosts or origin.lower().rstrip("/") in self._origins:
            return None
        if _hostname(urlsplit(origin).netloc) not in self._hosts:
            return 403, f"Forbidden: origin {origin!r} is not allowed"
        return None

    # ---- POST ------------------------------------------------------------------------------------------------

    async def _post(self, headers: _Headers, receive: Receive, send: Send) -> None:
        content_type = (headers.get("content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            await _error(send, 415, None, INVALID_REQUEST, "Unsupported media type: POST a JSON-RPC message as JSON")
            return
        accept = (headers.get("accept") or "").lower()
        if not ("application/json" in accept or "*/*" in accept) or not (
            "text/event-stream" in accept or "*/*" in accept
        ):
            await _error(
                send,
                406,
                None,
                INVALID_REQUEST,
                "Not acceptable: Accept must list application/json and text/event-stream",
            )
            return
        body = await _read_body(receive, self._max_body)
        if body is None:
            await _error(send, 413, None, INVALID_REQUEST, f"Request body over {self._max_body} bytes")
            return
        try:
            message = _decode(body)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            await _error(send, 400, None, PARSE_ERROR, f"Parse error: {exc}")
            return
        if not isinstance(message, dict):
            text = "batches are not supported" if isinstance(message, list) else "a message must be a JSON object"
            await _error(send, 400, None, INVALID_REQUEST, f"Invalid request: {text}")
            return
        version = headers.get("mcp-protocol-version")
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        body_version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
        if body_version is not None or (version is not None and version not in _HANDSHAKE_HEADER_VERSIONS):
            await self._post_modern(headers, message, receive, send)
        else:
            await self._post_handshake(headers, message, body, receive, send)

    # -- 2026-07-28 ---------------------------------------------------------------------------------------------

    async def _post_modern(self, headers: _Headers, message: JSONObject, receive: Receive, send: Send) -> None:
        connection = Connection()
        event = connection.receive_decoded(message)
        if isinstance(event, InvalidMessage):
            await _raw(send, 400, event.reply or error_reply(None, INVALID_REQUEST, str(event.error)))
            return
        if not isinstance(event, RequestReceived):
            if "method" in message:  # a notification: nothing to do on this transport (no session)
                await _empty(send, 202)
            else:
                await _error(send, 400, None, INVALID_REQUEST, "Invalid request: clients must not POST responses")
            return
        mismatch = _check_headers(headers, event, self.server)
        if mismatch is not None:
            await _error(send, 400, event.id, HEADER_MISMATCH, f"Header mismatch: {mismatch}")
            return
        await _ModernExchange(self._stateless, connection, event, receive, send, headers.principal).run()

    # -- 2025-06-18 / 2025-11-25 --------------------------------------------------------------------------------

    async def _post_handshake(
        self, headers: _Headers, message: JSONObject, body: bytes, receive: Receive, send: Send
    ) -> None:
        session_id = headers.get("mcp-session-id")
        is_request = "method" in message and "id" in message
        version = headers.get("mcp-protocol-version")
        if session_id is None:
            if not (is_request and message.get("method") == "initialize"):
                await _error(send, 400, _id(message), INVALID_REQUEST, "Bad request: Mcp-Session-Id header is required")
                return
            try:
                session = await self._create_session(headers.principal)
            except BackendUnavailable as exc:
                await _error(send, 503, _id(message), INTERNAL_ERROR, f"Service unavailable: {exc}")
                return
            if session is None:
                await _error(send, 503, _id(message), INVALID_REQUEST, "Too many sessions; try again later")
                return
        else:
            found = await self._find(session_id, headers, send, _id(message))
            if found is None:
                return
            if version is not None and version not in _HANDSHAKE_HEADER_VERSIONS:
                await _error(send, 400, _id(message), INVALID_REQUEST, f"Unsupported MCP-Protocol-Version {version!r}")
                return
            if isinstance(found, _Elsewhere):
                await self._forward_post(found, message, body, receive, send)
                return
            session = found
        if not is_request:
            await session.deliver(body)
            await _empty(send, 202)
            return
        request_id = message.get("id")
        if not (type(request_id) is int or type(request_id) is str):
            await _error(send, 400, None, INVALID_REQUEST, 'Invalid request: "id" must be a string or an integer')
            return
        if request_id in session.streams:
            await _error(send, 400, None, INVALID_REQUEST, f"Invalid request: id {request_id!r} is already in flight")
            return
        stream = session.open(request_id)
        await session.deliver(body)
        await self._respond_from(stream, session.id, receive, send)

    async def _forward_post(
        self, owner: _Elsewhere, message: JSONObject, body: bytes, receive: Receive, send: Send
    ) -> None:
        """A POST for a session another replica runs: forward it there, and relay the answer stream back."""
        if "method" not in message or "id" not in message:
            if await self._peers.deliver(owner.replica, owner.session, body):
                await _empty(send, 202)
            else:
                await _error(send, 404, None, INVALID_REQUEST, "Session not found: initialize a new session")
            return
        request_id = message.get("id")
        if not (type(request_id) is int or type(request_id) is str):
            await _error(send, 400, None, INVALID_REQUEST, 'Invalid request: "id" must be a string or an integer')
            return
        opening = functools.partial(Open, owner.session, request_id, body)
        async with self._peers.relay(owner.replica, owner.session, opening) as stream:
            if stream is None:
                await _error(send, 404, request_id, INVALID_REQUEST, "Session not found: initialize a new session")
                return
            await self._respond_from(stream, owner.session, receive, send)

    async def _find(
        self, session_id: str, headers: _Headers, send: Send, request_id: RequestId | None
    ) -> _HttpSession | _Elsewhere | None:
        """The session with this id if it belongs to the user making the request: run here, or by another replica.

        Answers the request itself (404, or 503 when the shared state cannot be reached) and returns ``None`` if
        there is no such session for this user.
        """
        session = self._sessions.get(session_id)
        if session is not None:
            if session.principal == headers.principal:
                return session
        elif self._backend.shared:
            try:
                record = await self._backend.sessions.lookup(session_id)
            except BackendUnavailable as exc:
                await _error(send, 503, request_id, INTERNAL_ERROR, f"Service unavailable: {exc}")
                return None
            if record is not None and record.principal == headers.principal:
                if record.alive and record.owner != self._backend.replica:
                    return _Elsewhere(record.owner, session_id)
                with suppress(BackendUnavailable):  # its replica died (or this one restarted): it is gone
                    await self._backend.sessions.release(session_id)
        await _error(send, 404, request_id, INVALID_REQUEST, "Session not found: initialize a new session")
        return None

    async def _create_session(self, principal: str | None) -> _HttpSession | None:
        if self._tg is None:
            raise RuntimeError(
                "the HTTP app's lifespan is not running: serve it with an ASGI server, or enter app.lifespan() from "
                "the lifespan of the application it is mounted in"
            )
        if len(self._sessions) >= self._max_sessions:
            return None
        session = _HttpSession(secrets.token_urlsafe(32), self._events, principal)
        await self._backend.sessions.claim(session.id, principal)
        self._sessions[session.id] = session

        async def run() -> None:
            try:
                await ServerSession(self.server, principal=principal).run(session)
            finally:
                with anyio.CancelScope(shield=True):
                    await self._end(session)

        self._tg.start_soon(run)
        return session

    async def _respond_from(
        self, stream: _Stream | RemoteStream, session_id: str, receive: Receive, send: Send
    ) -> None:
        """Answer a POST from its request's stream: JSON if the answer comes first, else SSE."""
        session_header = [(b"mcp-session-id", session_id.encode())]
        try:
            sequence, first, final = await stream.out.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            status, reason = (stream.status, stream.reason) if isinstance(stream, RemoteStream) else (0, "")
            await _error(send, status or 404, None, INVALID_REQUEST, reason or "Session ended")
            return
        if final:
            await _raw(send, 200, first, extra=session_header)
            return
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS + session_header})
        await send(
            {"type": "http.response.body", "body": priming_event(stream.event_id(0), self._retry), "more_body": True}
        )
        await self._pump(stream, sequence - 1, receive, send, first=(sequence, first, final))

    async def _pump(
        self,
        stream: _Stream | RemoteStream,
        delivered: int,
        receive: Receive,
        send: Send,
        first: tuple[int, bytes, bool] | None = None,
    ) -> None:
        """Deliver ``stream`` over an open SSE response until its final message, or until the client goes away.

        A client going away is not a cancellation (2025-11-25): the request goes on, its events are kept, and the
        client may resume the stream with ``Last-Event-ID``.
        """
        stream.attached = True
        try:
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                item = first
                while True:
                    if item is None:
                        try:
                            item = await stream.out.receive()
                        except (anyio.EndOfStream, anyio.ClosedResourceError):
                            break
                    sequence, message, final = item
                    item = None
                    if sequence <= delivered:
                        continue
                    delivered = sequence
                    chunk = encode_event(message, event_id=stream.event_id(sequence))
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    if final:
                        break
                tg.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass
        finally:
            stream.attached = False

    # ---- GET / DELETE ------------------------------------------------------------------------------------------

    async def _get(self, headers: _Headers, receive: Receive, send: Send) -> None:
        session_id = headers.get("mcp-session-id")
        version = headers.get("mcp-protocol-version")
        if session_id is None or (version is not None and version in MODERN_REVISIONS):
            await _error(send, 405, None, INVALID_REQUEST, "Method not allowed: GET needs a session (2025-11-25)")
            return
        if "text/event-stream" not in (headers.get("accept") or ""):
            await _error(send, 406, None, INVALID_REQUEST, "Not acceptable: Accept must list text/event-stream")
            return
        found = await self._find(session_id, headers, send, None)
        if found is None:
            return
        last = headers.get("last-event-id")
        parsed = parse_event_id(last) if last is not None else None
        if last is not None and parsed is None:
            await _error(send, 404, None, INVALID_REQUEST, "Unknown Last-Event-ID: that stream cannot be resumed")
            return
        if isinstance(found, _Elsewhere):
            key, after = parsed if parsed is not None else (None, 0)
            attaching = functools.partial(Attach, found.session, key, after)
            async with self._peers.relay(found.replica, found.session, attaching) as remote:
                if remote is None:
                    await _error(send, 404, None, INVALID_REQUEST, "Session not found: initialize a new session")
                    return
                try:
                    await remote.out.receive()  # Opened, or Closed with the owner's refusal
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    await _error(send, remote.status or 404, None, INVALID_REQUEST, remote.reason or "Session ended")
                    return
                await self._open_sse(send, found.session, remote.event_id(after) if last is None else None)
                await self._pump(remote, after, receive, send)
            return
        session = found
        stream = session.standalone
        delivered = 0
        if parsed is not None:
            resumed = session.by_key.get(parsed[0])
            if resumed is None:
                await _error(send, 404, None, INVALID_REQUEST, "Unknown Last-Event-ID: that stream cannot be resumed")
                return
            stream, delivered = resumed, parsed[1]
        if stream.attached:
            await _error(send, 409, None, INVALID_REQUEST, "Conflict: that stream is already being delivered")
            return
        await self._open_sse(send, session.id, stream.event_id(delivered) if last is None else None)
        for sequence, message in await self._events.replay(stream.key, delivered):
            chunk = encode_event(message, event_id=stream.event_id(sequence))
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            delivered = sequence
        if stream.done and delivered >= stream.sequence:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await self._pump(stream, delivered, receive, send)

    async def _open_sse(self, send: Send, session_id: str, priming: str | None) -> None:
        """Start an SSE response; a new stream (not a resume) begins with a priming event carrying ``priming``."""
        header = [(b"mcp-session-id", session_id.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS + header})
        opening = priming_event(priming, self._retry) if priming is not None else b""
        await send({"type": "http.response.body", "body": opening, "more_body": True})

    async def _delete(self, headers: _Headers, send: Send) -> None:
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            await _error(send, 405, None, INVALID_REQUEST, "Method not allowed: DELETE needs a session (2025-11-25)")
            return
        found = await self._find(session_id, headers, send, None)
        if found is None:
            return
        if isinstance(found, _Elsewhere):
            if not await self._peers.end(found.replica, found.session):
                await _error(send, 404, None, INVALID_REQUEST, "Session not found")
                return
        else:
            await self._end(found)
        await _empty(send, 200)


@dataclass(frozen=True, slots=True)
class _Elsewhere:
    """A session another replica runs."""

    replica: str
    session: str


class _ModernExchange:
    """One 2026-07-28 POST: serve the request, stream its notifications if any, stop when the client leaves."""

    def __init__(
        self,
        session: ServerSession,
        connection: Connection,
        request: RequestReceived,
        receive: Receive,
        send: Send,
        principal: str | None,
    ) -> None:
        self._session = session
        self._principal = principal
        self._connection = connection
        self._request = request
        self._receive = receive
        self._send = send
        self._streaming = False

    async def notify(self, method: str, params: JSONObject) -> None:
        data = self._connection.send_notification(method, params)
        if not self._streaming:
            self._streaming = True
            await self._send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        await self._send({"type": "http.response.body", "body": encode_event(data), "more_body": True})

    async def run(self) -> None:
        request = self._request
        reply: bytes | None = None
        status = 200
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                while (await self._receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()  # closing the response stream cancels the request (2026-07-28)

            tg.start_soon(watch)
            try:
                result = await self._session.serve_modern(request, self.notify, self._principal)
            except JSONRPCError as exc:
                reply = self._connection.send_error(request.id, exc)
                status = 404 if exc.code == METHOD_NOT_FOUND else 400 if exc.code in _BAD_REQUEST_CODES else 200
            except Exception as exc:
                logger.exception("handler for %s failed", request.method)
                reply = self._connection.send_error(request.id, JSONRPCError(-32603, f"Internal error: {exc}"))
            else:
                reply = self._connection.send_result(request.id, result)
            tg.cancel_scope.cancel()
        if reply is None:
            return
        if self._streaming:
            await self._send({"type": "http.response.body", "body": encode_event(reply), "more_body": False})
        else:
            await _raw(self._send, status, reply)


def _check_headers(headers: _Headers, request: RequestReceived, server: Server) -> str | None:
    """What is wrong with a 2026-07-28 request's mirrored headers, if anything (SEP-2243)."""
    params = request.params or {}
    meta = params.get("_meta")
    body_version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    version = headers.get("mcp-protocol-version")
    if version is None:
        return "the MCP-Protocol-Version header is required"
    if body_version is not None and version != body_version:
        return f"MCP-Protocol-Version {version!r} does not match _meta protocolVersion {body_version!r}"
    method = headers.get("mcp-method")
    if method is None:
        return "the Mcp-Method header is required"
    if method != request.method:
        return f"Mcp-Method {method!r} does not match the body's method {request.method!r}"
    field = _NAMED_METHODS.get(request.method)
    if field is not None:
        name = headers.get("mcp-name")
        if name is None:
            return f"the Mcp-Name header is required for {request.method}"
        decoded = _decode_header(name)
        if decoded is None:
            return "Mcp-Name is not a valid header value"
        if decoded != params.get(field):
            return f"Mcp-Name {decoded!r} does not match the body's {field} {params.get(field)!r}"
    if request.method == "tools/call":
        tool = server.tools.get(str(params.get("name")))
        arguments = params.get("arguments")
        if tool is not None and isinstance(arguments, dict):
            return _check_param_headers(headers, tool.header_params, arguments)
    return None


def _check_param_headers(headers: _Headers, mirrored: dict[str, str], arguments: JSONObject) -> str | None:
    """Each argument mirrored into ``Mcp-Param-{name}`` must be there, decodable, and equal to the body's."""
    for parameter, name in mirrored.items():
        value = arguments.get(parameter)
        header = headers.get(f"mcp-param-{name.lower()}")
        if value is None:
            continue  # absent or null in the body: the client omits the header, and nothing is expected
        if header is None:
            return f"the Mcp-Param-{name} header is required: {parameter!r} is in the body"
        decoded = _decode_header(header)
        if decoded is None:
            return f"Mcp-Param-{name} is not a valid header value"
        if isinstance(value, bool):
            expected = "true" if value else "false"
        elif isinstance(value, int):
            try:
                same = float(decoded) == value
            except ValueError:
                same = False
            if not same:
                return f"Mcp-Param-{name} {decoded!r} does not match the body's {parameter} {value!r}"
            continue
        else:
            expected = str(value)
        if decoded != expected:
            return f"Mcp-Param-{name} {decoded!r} does not match the body's {parameter} {value!r}"
    return None


def _decode_header(value: str) -> str | None:
    """A mirrored header value, Base64 sentinel (``=?base64?...?=``) decoded; ``None`` if malformed."""
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
    if any(not (0x20 <= ord(c) <= 0x7E or c == "\t") for c in value):
        return None
    return value


class _Headers:
    """Request headers by lowercase name (the last one wins).

    Leading and trailing spaces and tabs are not part of a field value (RFC 9110, section 5.5); some HTTP parsers
    (httptools) leave them in, so they are stripped here.
    """

    __slots__ = ("_values", "principal")

    def __init__(self, scope: Scope) -> None:
        self._values = {
            k.decode("latin-1").lower(): v.decode("latin-1").strip(" \t") for k, v in scope.get("headers", ())
        }
        self.principal: str | None = None

    def get(self, name: str) -> str | None:
        return self._values.get(name)


def _hostname(netloc: str) -> str:
    netloc = netloc.rsplit("@", 1)[-1].strip().lower()
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")] if "]" in netloc else netloc
    return netloc.split(":", 1)[0]


def _id(message: JSONObject) -> RequestId | None:
    value = message.get("id")
    return value if type(value) is int or type(value) is str else None


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _raw(send: Send, status: int, body: bytes, *, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


async def _error(
    send: Send, status: int, request_id: RequestId | None, code: int, message: str, *, allow: bool = False
) -> None:
    extra = [(b"allow", b"GET, POST, DELETE")] if allow else None
    await _raw(send, status, error_reply(request_id, code, message), extra=extra)


async def _empty(send: Send, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})
