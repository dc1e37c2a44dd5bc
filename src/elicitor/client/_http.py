"""The client's Streamable HTTP transport (httpx), for both protocol eras.

Every outgoing message is its own POST with ``Accept: application/json, text/event-stream``. The answer is JSON (one
message) or an SSE stream (messages related to the request, then its answer); either way the messages are queued
for the session's read loop. Handshake era: the ``Mcp-Session-Id`` from ``initialize`` goes on every later request
with ``MCP-Protocol-Version``; after the handshake a GET opens the standalone stream; an SSE stream that ends before
its answer is resumed with GET and ``Last-Event-ID`` after the server's ``retry`` delay; DELETE ends the session on
close. 2026-07-28: the ``Mcp-Method``/``Mcp-Name`` headers mirror the body, there is no session and no GET.

A server that refuses the first POST as a server of the 2024-11-05 HTTP+SSE transport would (400, 404 or 405 and
no JSON-RPC error) is spoken to with that transport from then on, if a GET of its URL opens the stream it names
its message URL on (``_legacy``; the spec's "Backwards Compatibility"); ``transport="sse"`` goes there at once.

How a request reaches the server (the lean path or ``httpx``, a proxy, cookies) is ``_endpoint``'s; what the body
puts in the headers is ``_headers``'. This module is what to send and what an answer means.
"""

from __future__ import annotations

import contextvars
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing, asynccontextmanager, suppress
from typing import Any

import anyio
import anyio.abc
import httpx2 as httpx
import msgspec

from .._exceptions import AuthError, LegacyRefused
from .._version import __version__
from ..protocol import Oversized, decode_json, error_reply
from ..telemetry import _state as _telemetry
from ..transports._sse import SSEDecoder
from ..types import INTERNAL_ERROR, JSONValue, RequestId, is_stateless
from . import _local as local
from ._connection import check_header
from ._endpoint import Endpoint, Response, environment_proxies
from ._headers import message_headers
from ._legacy import FALLBACK_STATUSES, OldTransport, falls_back
from ._local import said
from ._pace import Pace, PersonPaced
from ._pool import DEFAULT_LIMITS, PooledTransport
from ._transport import SESSION_EXPIRED, SESSION_LOST, SIGN_IN_FAILED, UNANSWERED
from .auth._challenge import Challenge, parse_challenge

logger = logging.getLogger("elicitor.http_client")

_decode = msgspec.json.Decoder().decode
_ACCEPT = "application/json, text/event-stream"
_RECONNECTS = 5
_OPENING = frozenset({"initialize", "server/discover"})
"""Requests that open a conversation: sending one again changes nothing on the server."""
_UNAVAILABLE_FOR = 30.0
"""Seconds a resume keeps trying while the server answers 502/503/504."""
_SENDING = 32
"""Answers and notifications in flight at once, per transport (see :meth:`HttpClientTransport.send`)."""
_USER_AGENT = f"elicitor/{__version__}"
_TRANSPORTS = ("auto", "streamable-http", "sse")


class SessionExpired(Exception):
    """The server no longer knows this session (404): the client must initialize again."""


class HttpClientTransport:
    """One MCP endpoint over HTTP. Open it with :meth:`connect`.

    ``protocol_version`` is set by the client once the revision is known; it decides the headers and whether
    there is a session.
    """

    network = "http"
    """For telemetry: the spans of this transport's requests say ``network.protocol.name = http``."""

    def __init__(
        self,
        url: str,
        http: httpx.AsyncClient,
        tg: anyio.abc.TaskGroup,
        headers: Mapping[str, str] | None = None,
        *,
        lean: PooledTransport | None = None,
        fixed: Mapping[str, str] | None = None,
        transport: str = "auto",
    ) -> None:
        if transport not in _TRANSPORTS:
            raise ValueError(f"transport must be one of {', '.join(_TRANSPORTS)}, not {transport!r}")
        self._endpoint = Endpoint(url, http, lean, fixed)
        self._transport = transport
        """``auto`` (Streamable HTTP, falling back to the old transport as the spec says), ``streamable-http`` or
        ``sse`` (the 2024-11-05 HTTP+SSE transport only)."""
        self._old: OldTransport | None = None
        """The 2024-11-05 HTTP+SSE transport, once the server turned out to speak it (see ``_legacy``)."""
        self._old_refused: str | None = None
        """Why the server's GET did not open the old transport, once tried: it is not tried again."""
        self._ended = False
        """The old transport's stream ended: :meth:`receive` ends the connection once it reaches that point."""
        self._extra_headers = dict(headers or {})
        """Headers for every request that ``http`` does not already carry (it is the caller's client)."""
        self._tg = tg
        self.protocol_version: str | None = None
        self.session_id: str | None = None
        self.tool_headers: dict[str, dict[tuple[str, ...], str]] = {}
        """Per tool, the arguments mirrored into ``Mcp-Param-*`` headers (filled in by ``Client.list_tools``)."""
        self._inbox_in, self._inbox_out = anyio.create_memory_object_stream[bytes | Oversized | None](math.inf)
        """What arrived, for :meth:`receive` (``None``: wake up and raise ``_failure``)."""
        self._dispatch: Callable[[bytes | Oversized], bool] | None = None
        self._stream_notes: Callable[[bytes, RequestId], Awaitable[bool]] | None = None
        """See :meth:`notes_to` (a proxy's upstream connection sets it)."""
        self._heard: Callable[[], None] | None = None
        """See :meth:`heard_by` (the client sets it)."""
        self._waiting: contextvars.Context | None = None
        """While :meth:`receive` waits on an empty inbox, a copy of the receiving task's context (see
        :meth:`deliver_to`)."""
        self._failure: Exception | None = None
        self._listening = False
        self._closed = False
        self._sending = anyio.Semaphore(_SENDING)
        self._in_flight: dict[RequestId, anyio.CancelScope] = {}
        """Requests whose answer stream is being read, with the scope that closes it when the request is cancelled."""
        self._had_session = False
        """A session was open once (handshake era): without one now, it ended and a new one is not open yet."""
        self.pace = Pace()
        """The transport's own clocks for the server (the old transport's wait for its ``endpoint`` event),
        stopped while a person signs in through ``connect``'s ``auth``."""
        self.http_version: str | None = None
        """For telemetry, the HTTP version of the server's last answer (``1.1``, ``2``): the session metric's
        ``network.protocol.version``."""
        self.lost: str | None = None
        """For telemetry, how the handshake-era session ended badly (the session metrics' ``error.type``; see
        ``telemetry/_sessions.py``): ``session_expired`` (the server no longer knew it: 404), ``connection_lost``
        (the server could not be reached to end it, or the old transport's stream ended), ``timeout`` (the server
        did not answer the request ending it); ``None``: it ended well, or has not ended."""

    @property
    def url(self) -> str:
        """The endpoint's URL (for telemetry: ``server.address``, ``server.port``)."""
        return self._endpoint.url

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        http: httpx.AsyncClient | None = None,
        limits: httpx.Limits | None = None,
        auth: httpx.Auth | None = None,
        transport: str = "auto",
    ) -> AsyncIterator[HttpClientTransport]:
        """Open a transport to ``url``; ``headers`` go on every request (authorization, say).

        ``transport``: ``auto`` speaks Streamable HTTP and falls back to the 2024-11-05 HTTP+SSE transport when the
        server refuses its first POST as a server of that transport would (a ``url`` whose path ends in ``/sse``
        tries the old transport's GET first); ``streamable-http`` never falls back;
        ``sse`` opens the old transport's stream at once (:class:`LegacyRefused` if the server does not open it).

        ``http`` is an ``httpx.AsyncClient`` of the caller's, used as it is and not closed here. Without it, the
        transport makes its own, its connections kept per server by :class:`PooledTransport` and bounded by
        ``limits`` (default :data:`DEFAULT_LIMITS`), and with no ``auth`` and no credentials in ``url`` requests
        take the lean path (``Endpoint.open``). When the environment names a proxy (``HTTPS_PROXY``, ``ALL_PROXY``,
        the system's settings...) and ``url`` is not on this machine, the own client is ``httpx``'s as it comes,
        so that it mounts the proxies and honours ``NO_PROXY`` exactly as ``httpx`` does.
        """
        timeout = httpx.Timeout(30.0, read=None)
        for name, value in (headers or {}).items():
            check_header(name, value)  # here, not inside the task group below: a malformed header is the caller's
            if name.lower() in ("content-length", "transfer-encoding"):
                raise ValueError(f"headers= cannot set {name}: each request's body sets it")
        given = httpx.Headers({"user-agent": _USER_AGENT})
        given.update(headers or {})  # case-insensitively: the caller's User-Agent replaces ours
        refused: Exception | None = None  # why the old transport did not open (sse): raised outside the task group
        async with anyio.create_task_group() as tg:
            pool: PooledTransport | None = None
            client = http
            if client is None and environment_proxies(url):
                client = httpx.AsyncClient(
                    timeout=timeout, headers=given, auth=auth, limits=limits if limits is not None else DEFAULT_LIMITS
                )
            elif client is None:
                pool = PooledTransport(limits if limits is not None else DEFAULT_LIMITS)
                client = httpx.AsyncClient(timeout=timeout, headers=given, transport=pool, auth=auth)
            own = http is None
            lean = pool if pool is not None and auth is None and not httpx.URL(url).userinfo else None
            made = cls(
                url, client, tg, headers=None if own else headers, lean=lean, fixed=dict(given.items()),
                transport=transport,
            )  # fmt: skip
            unfollow = auth.pace_with(made.pace) if isinstance(auth, PersonPaced) else None
            try:
                if transport == "sse":
                    try:
                        await made._open_old()
                    except (LegacyRefused, AuthError, httpx.HTTPError) as exc:
                        refused = exc
                elif transport == "auto" and _names_old_stream(url):
                    # ``.../sse`` is where servers of the old transport put their stream: its GET goes first, and
                    # a server that does not open it there is spoken to with Streamable HTTP as usual.
                    try:
                        await made._open_old()
                    except (LegacyRefused, AuthError, httpx.HTTPError) as exc:
                        made._old_refused = str(exc) or type(exc).__name__
                        logger.info("%s did not open the HTTP+SSE transport (%s); trying Streamable HTTP", url, exc)
                if refused is None:
                    yield made
            finally:
                if unfollow is not None:
                    unfollow()
                with anyio.CancelScope(shield=True):
                    await made.aclose()
                    if own:
                        await client.aclose()
                tg.cancel_scope.cancel()
        if refused is not None:
            raise refused

    # ---- Transport -------------------------------------------------------------------------------------------

    async def receive(self) -> bytes | Oversized:
        inbox = self._inbox_out
        while True:
            if self._failure is not None:
                failure, self._failure = self._failure, None
                raise failure
            if self._dispatch is not None and not inbox.statistics().current_buffer_used:
                self._waiting = contextvars.copy_context()
            try:
                message = await inbox.receive()
            finally:
                self._waiting = None
            if message is not None:
                return message
            if self._ended:
                raise anyio.EndOfStream  # the old transport's stream ended, after what it had delivered

    def deliver_to(self, handler: Callable[[bytes | Oversized], bool]) -> None:
        """Offer each message that arrives while :meth:`receive` waits on an empty inbox to ``handler`` first,
        from the task that read it: ``True`` means it took the message, ``False`` leaves it to ``receive``.

        A result or an error (a 2026-07-28 round's answer, say) then wakes its requester directly, without the hop
        through the inbox and a wake-up of the receiving task: a pass of the event loop fewer per answer. The
        handler runs in a copy of the receiving task's context, as if that task had received the message, and an
        exception from it is raised by the waiting ``receive``.
        """
        self._dispatch = handler

    def notes_to(self, handler: Callable[[bytes, RequestId], Awaitable[bool]]) -> None:
        """Offer each message read on a request's own response stream to ``handler`` first, with the id of that
        request: ``True`` means it took the message, ``False`` leaves it to :meth:`receive`.

        Over Streamable HTTP a server sends what it says about a request (its log messages, its progress) on that
        request's response stream; once the messages are in the one inbox, nothing says which stream they came on.
        A proxy forwarding many people's requests over one connection routes them by it. The handler is awaited
        before the next message of the stream is read, so what it takes keeps its place before the answer.
        """
        self._stream_notes = handler

    def heard_by(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` for each chunk of an event stream that completes no message: an SSE comment (a proxy
        waiting on a person says so with one), a priming event, part of a long message. Each is the server being
        there, which a client that counts the server's silence must know; a message is counted where it is read."""
        self._heard = callback

    async def send(self, message: bytes, related: RequestId | None = None, *, final: bool = False) -> None:
        if self._closed:
            raise anyio.BrokenResourceError
        if self._old is not None:
            async with self._sending:
                await self._send_old(message)
            return
        decoded = _decode(message)
        is_request = "method" in decoded and "id" in decoded
        headers = self._headers(decoded)
        orphan = self._had_session and self.session_id is None and "mcp-session-id" not in headers
        if is_request:
            opening = decoded.get("method") in _OPENING
            if orphan and not opening:
                # The session ended (404) and no new one is open yet: the server would refuse this POST (400).
                self._fail(decoded["id"], said(local.SESSION_ENDED), SESSION_EXPIRED)
                return
            # The answer may take long (a person is filling a form): read it in the background.
            self._tg.start_soon(self._exchange, message, headers, decoded["id"], opening)
            return
        if decoded.get("method") == "notifications/cancelled" and self._stop_reading(decoded.get("params")):
            return
        if orphan:
            logger.info("a message for a session that ended was not sent")
            return
        # An answer or a notification: acknowledged at once. At most _SENDING at a time, so that a person (or a
        # program) answering a thousand waiting questions at once reuses a few idle connections instead of opening
        # a thousand more beside the thousand response streams still open (the server would hold them all).
        # Refused with 502/503/504 (a replica restarting, the shared state away), it is sent again, after the
        # server's Retry-After, for up to _UNAVAILABLE_FOR seconds: an answer or a notification is safe to repeat
        # (the server takes the first answer to a request and ignores the rest), and a dropped answer would leave
        # its call waiting for nothing. Never into another session than the one it belongs to.
        # So is one whose acknowledgement did not come in time (30 s) or whose connection failed: the replica it
        # reached may be stopped, and may take it when it wakes, which makes a second copy harmless; a try that
        # failed so is always followed by one more, since one timed-out try alone outlasts the window.
        session = headers.get("mcp-session-id")
        give_up_at = time.monotonic() + _UNAVAILABLE_FOR
        delay = 0.2
        tries = 0
        while True:
            tries += 1
            failed: httpx.HTTPError | None = None
            try:
                async with self._sending:
                    response = await self._endpoint.open("POST", headers, message, brief=True)
                    if _telemetry.state.on:
                        self._responded(response)
                    try:
                        body = await response.aread()
                    finally:
                        await response.aclose()
            except AuthError as exc:
                logger.warning("a message was not sent: signing in to the server failed: %s", exc)
                return
            except httpx.HTTPError as exc:
                failed = exc
            if failed is not None:
                if time.monotonic() >= give_up_at and tries > 1:
                    logger.warning("a message was not sent: %s", said(local.HTTP_FAILED, detail=failed))
                    return
            elif response.status_code not in (502, 503, 504) or time.monotonic() >= give_up_at:
                break
            if session is not None and self.session_id != session:
                logger.info("a message for a session that ended was not sent again")
                return
            if failed is not None:
                logger.info("a message was not acknowledged (%s); sending it again in %.1f s", failed, delay)
                await anyio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            wait = _retry_after(response.headers.get("retry-after"), delay)
            logger.info(
                "the server answered HTTP %d to a message; sending it again in %.1f s", response.status_code, wait
            )
            await anyio.sleep(min(wait, max(give_up_at - time.monotonic(), 0.0)))
            delay = min(delay * 2, 5.0)
        if response.status_code == 404 and session is not None and self.session_id == session:
            # The session is gone (its server stopped): what we were waiting for will never come, and the
            # requests under way may have been acted on.
            for request_id in list(self._in_flight):
                self._session_gone(request_id, session, ran=True)
            raise anyio.BrokenResourceError from SessionExpired("the server ended this session")
        if response.status_code >= 400:
            text = body[:200].decode("utf-8", "replace")
            logger.warning("the server refused a message with HTTP %d: %s", response.status_code, text)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._inbox_in.close()
        self._inbox_out.close()
        if self.session_id is not None and not is_stateless(self.protocol_version or ""):
            try:
                with anyio.move_on_after(2) as waited:
                    response = await self._endpoint.open("DELETE", self._base_headers())
                    await response.aclose()
                    if response.status_code == 404:
                        self.lost = self.lost or "session_expired"
                if waited.cancelled_caught:
                    self.lost = self.lost or "timeout"
            except httpx.HTTPError:
                self.lost = self.lost or "connection_lost"  # the server is gone: the session went with it
            except AuthError:
                pass

    # ---- after the handshake ----------------------------------------------------------------------------------

    def adopt(self, version: str) -> None:
        """The client negotiated ``version``: it decides the headers and whether there is a session."""
        self.protocol_version = version

    def mirror(self, tool: str, params: dict[tuple[str, ...], str]) -> None:
        """Mirror ``tool``'s parameters into ``Mcp-Param-*`` headers on its calls (SEP-2243)."""
        self.tool_headers[tool] = params

    def start_listening(self) -> None:
        """Open the standalone GET stream (handshake era, once there is a session)."""
        if self._old is not None:
            return  # the old transport's one stream is open already
        if self._listening or self.session_id is None or is_stateless(self.protocol_version or ""):
            return
        self._listening = True
        self._tg.start_soon(self._listen)

    # ---- internals -------------------------------------------------------------------------------------------

    def _headers(self, message: dict[str, Any]) -> dict[str, str]:
        return message_headers(self._base_headers(), message, self.tool_headers)

    def _base_headers(self) -> dict[str, str]:
        headers = {**self._extra_headers, "accept": _ACCEPT, "content-type": "application/json"}
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version is not None:
            headers["mcp-protocol-version"] = self.protocol_version
        return headers

    async def _exchange(
        self, message: bytes, headers: dict[str, str], request_id: RequestId, opening: bool = False
    ) -> None:
        with anyio.CancelScope() as scope:
            self._in_flight[request_id] = scope
            try:
                await self._post_request(message, headers, request_id, opening)
            finally:
                self._in_flight.pop(request_id, None)

    def _stop_reading(self, params: object) -> bool:
        """The client gave up on a request (cancelled, or ``request_timeout``): close its answer stream.

        Whether the notice itself still has to be sent: on 2026-07-28 closing the stream *is* the cancellation
        and no ``notifications/cancelled`` is expected; on the handshake era a disconnect is not a cancellation, so
        the notice goes too (2026-07-28 and 2025-11-25 basic cancellation, "Transport-Specific Cancellation"). Either
        way the stream is closed: nothing on it is wanted any more, and a stream the server keeps silent would
        otherwise stay open for the life of the client. Before the revision is known the request is the opening
        one (``initialize``, which a client must not cancel, or ``server/discover``): closing its stream is all,
        and no notice goes (it would meet the same 401 as the request it is about, and start a sign-in again
        while the caller is leaving).
        """
        request_id = params.get("requestId") if isinstance(params, dict) else None
        scope = self._in_flight.get(request_id) if isinstance(request_id, str | int) else None
        if scope is not None:
            scope.cancel()
        return scope is not None and (self.protocol_version is None or is_stateless(self.protocol_version))

    async def _post_request(
        self, message: bytes, headers: dict[str, str], request_id: RequestId, opening: bool = False
    ) -> None:
        """POST one request and deliver its answer (JSON or SSE), resuming an SSE stream cut short.

        ``opening`` (``initialize``, ``server/discover``): a gateway's 502/503/504 is retried for up to
        ``_UNAVAILABLE_FOR`` seconds, since a balancer may still send it to a replica that just died and sending
        it again changes nothing on the server. Other requests are never sent twice.
        """
        refused: int | None = None
        try:
            response = await self._open_post(message, headers, opening)
            if _telemetry.state.on:
                self._responded(response)
            try:
                body: bytes | None = None
                if opening and response.status_code in FALLBACK_STATUSES and self._may_fall_back(headers, response):
                    body = await response.aread()
                    if falls_back(response.status_code, body):
                        refused = response.status_code
                        return
                offered = response.headers.get("mcp-session-id")
                if offered and self.session_id is None:
                    if not _valid_session_id(offered):
                        self._fail(request_id, said(local.INVALID_SESSION_ID, value=repr(offered[:64])))
                        return
                    self.session_id = offered
                    self.lost = None  # a new session (one renewed after a 404): it has not ended
                if response.status_code == 404 and "mcp-session-id" in headers:
                    self._session_gone(request_id, headers["mcp-session-id"], ran=False)  # refused: it never ran
                    return
                if offered:
                    self._had_session = True
                kind = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
                if kind == "text/event-stream":
                    done, last_id, retry = await self._read_events(response, request_id)
                else:
                    body = await response.aread() if body is None else body
                    if response.status_code >= 400 and kind != "application/json":  # a gateway's page, say
                        status = response.status_code
                        why = said(local.ANSWERED_KIND, status=status, kind=kind) if kind else None
                        # 502/504: the balancer's answer for a replica that died (or stalled) with it under way.
                        unanswered = UNANSWERED if status in (502, 504) and not opening else None
                        self._fail(request_id, why or said(local.ANSWERED_UNTYPED, status=status), unanswered)
                    elif body and response.status_code >= 400 and not _is_jsonrpc(body):
                        # Refused at the HTTP level with a JSON body of its own: OAuth's {"error": "insufficient_scope"}
                        # for a token that lacks a scope (RFC 6750), a gateway's. Say what it said, not an empty error.
                        detail = _refusal(response.headers.get("www-authenticate"), body)
                        self._fail(request_id, said(local.REFUSED, status=response.status_code, detail=detail))
                    elif body:
                        await self._deliver(_addressed(body, request_id))
                    else:
                        self._fail(request_id, said(local.ANSWERED_EMPTY, status=response.status_code))
                    return
            finally:
                await response.aclose()
                if refused is not None:
                    await self._fall_back(message, request_id, refused)
        except httpx.HTTPError as exc:
            self._fail(request_id, said(local.HTTP_FAILED, detail=exc))
            return
        except AuthError as exc:
            self._fail(request_id, said(local.SIGNING_IN_FAILED, detail=exc), SIGN_IN_FAILED)
            return
        if not done:
            await self._resume(request_id, last_id, retry, headers.get("mcp-session-id") or self.session_id)

    def _may_fall_back(self, headers: Mapping[str, str], response: Response) -> bool:
        """Whether a refusal of this opening POST may mean the old transport (then its body says): ``auto`` only,
        before any session, and not after a GET that opened no stream."""
        return (
            self._transport == "auto"
            and self._old is None
            and "mcp-session-id" not in headers
            and not response.headers.get("mcp-session-id")
        )

    async def _fall_back(self, message: bytes, request_id: RequestId, status: int) -> None:
        """The server refused the opening POST as a server of the old transport would: GET its stream, and send the
        request again there. If no stream opens, the request fails saying what each step met."""
        if self._old_refused is None:
            try:
                await self._open_old()
            except (LegacyRefused, AuthError, httpx.HTTPError) as exc:
                self._old_refused = str(exc) or type(exc).__name__
        if self._old is None:
            self._fail(request_id, said(local.NO_OLD_TRANSPORT, status=status, detail=self._old_refused))
            return
        logger.info("the server speaks the HTTP+SSE transport of 2024-11-05; using it")
        await self._send_old(message)

    async def _open_old(self) -> None:
        """Open the old transport's stream and wait for the URL it names for our messages (see ``_legacy``)."""
        old = OldTransport(
            self._endpoint, dict(self._extra_headers), put=self._put, fail=self._fail, ended=self._old_ended,
            heard=lambda: self._heard, pace=self.pace,
        )  # fmt: skip
        await old.start(self._tg)
        self._old = old

    async def _send_old(self, message: bytes) -> None:
        """Send ``message`` over the old transport. It has no ``server/discover`` (a 2026-07-28 request): that
        fails here, without a word to the server, and the client goes on with ``initialize``."""
        assert self._old is not None
        decoded = _decode(message)
        request_id = decoded.get("id") if "method" in decoded else None
        if not isinstance(request_id, str | int):
            request_id = None
        if request_id is not None and decoded.get("method") == "server/discover":
            self._fail(request_id, "the server speaks the HTTP+SSE transport of 2024-11-05: no server/discover there")
            return
        await self._old.send(message, request_id)

    def _old_ended(self) -> None:
        """The old transport's stream ended: nothing more can come, so the connection ends after what it brought."""
        self._ended = True
        if not self._closed:
            self.lost = "connection_lost"
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._inbox_in.send_nowait(None)

    async def _open_post(self, message: bytes, headers: dict[str, str], opening: bool) -> Response:
        """Send the POST and return its response, unread. ``opening``: 502/503/504 is retried (see above)."""
        give_up_at = time.monotonic() + _UNAVAILABLE_FOR
        delay = 0.1
        while True:
            response = await self._endpoint.open("POST", headers, message)
            if not (opening and response.status_code in (502, 503, 504) and time.monotonic() < give_up_at):
                return response
            await response.aclose()
            logger.info("the server answered HTTP %d to the first request; sending it again", response.status_code)
            await anyio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _read_events(
        self, response: Response, request_id: RequestId | None
    ) -> tuple[bool, str | None, int | None]:
        """Deliver a stream's messages; returns whether the answer to ``request_id`` came, the last id, retry."""
        decoder = SSEDecoder()
        done = False
        try:
            async for chunk in response.aiter_raw():
                events = decoder.feed(chunk)
                if not events and self._heard is not None:
                    self._heard()
                for event in events:
                    if event.event != "message" or not event.data:
                        continue
                    data = event.data.encode()
                    taker = self._stream_notes
                    if request_id is not None and taker is not None and await taker(data, request_id):
                        continue
                    await self._deliver(data)
                    if request_id is not None and _answers(data, request_id):
                        done = True
        except (httpx.HTTPError, ValueError) as exc:
            logger.debug("SSE stream interrupted: %s", exc)
        last_id = decoder.last_event_id
        if last_id is not None and not _header_safe(last_id):
            # SSE allows any id without NUL, but it goes back as Last-Event-ID, and a header carries visible ASCII:
            # an id that cannot be sent back cannot resume the stream (it would fail in httpx, outside our errors).
            logger.debug("the server's event id %r cannot be sent back; the stream cannot be resumed", last_id[:64])
            last_id = None
        return done, last_id, decoder.retry

    async def _resume(
        self, request_id: RequestId, last_id: str | None, retry: int | None, session: str | None = None
    ) -> None:
        """The stream ended before the answer: reconnect with GET and ``Last-Event-ID`` (SEP-1699 polling).

        At most ``_RECONNECTS`` streams that end again or fail, and up to ``_UNAVAILABLE_FOR`` seconds of 502/503/504
        (a replica restarting, or reconnecting to the store: the session may come back, or be reported gone).
        Event ids belong to their session (``session``): once another session has replaced it, the stream cannot be
        resumed, and the request, which may have been acted on, fails with :data:`SESSION_LOST`.
        """
        attempts = 0
        unavailable_until: float | None = None
        while attempts < _RECONNECTS:
            if last_id is None or self._closed:
                break
            await anyio.sleep((retry if retry is not None else 1000) / 1000)
            if session is not None and self.session_id != session:
                self._session_gone(request_id, session, ran=True)
                return
            attempts += 1
            headers = self._base_headers()
            headers["accept"] = "text/event-stream"
            headers["last-event-id"] = last_id
            try:
                async with aclosing(await self._endpoint.open("GET", headers)) as response:
                    if _telemetry.state.on:
                        self._responded(response)
                    if response.status_code == 404 and "mcp-session-id" in headers:
                        # Its server stopped: initialize again (2025-11-25); the request may have been acted on.
                        self._session_gone(request_id, headers["mcp-session-id"], ran=True)
                        return
                    if response.status_code in (502, 503, 504):
                        now = anyio.current_time()
                        unavailable_until = unavailable_until or now + _UNAVAILABLE_FOR
                        if now < unavailable_until:
                            attempts -= 1  # not a failed stream: the same attempt, later
                        continue
                    if response.status_code != 200:
                        break
                    done, new_last, new_retry = await self._read_events(response, request_id)
            except AuthError as exc:
                self._fail(request_id, said(local.SIGNING_IN_FAILED, detail=exc), SIGN_IN_FAILED)
                return
            except httpx.HTTPError:
                continue
            if done:
                return
            last_id = new_last or last_id
            retry = new_retry if new_retry is not None else retry
        self._fail(request_id, said(local.STREAM_ENDED))

    async def _listen(self) -> None:
        last_id: str | None = None
        retry: int | None = None
        session = self.session_id
        for _ in range(_RECONNECTS):
            if self.session_id != session:
                return  # that session ended; the new one opens its own stream (start_listening)
            headers = self._base_headers()
            headers["accept"] = "text/event-stream"
            if last_id is not None:
                headers["last-event-id"] = last_id
            try:
                async with aclosing(await self._endpoint.open("GET", headers)) as response:
                    if response.status_code != 200:
                        return  # 405: the server offers no standalone stream
                    _, new_last, new_retry = await self._read_events(response, None)
            except AuthError as exc:
                logger.warning("the standalone stream stays closed: signing in failed: %s", exc)
                return
            except httpx.HTTPError:
                pass
            else:
                last_id = new_last or last_id
                retry = new_retry if new_retry is not None else retry
            if self._closed:
                return
            await anyio.sleep((retry if retry is not None else 1000) / 1000)

    def _responded(self, response: Response) -> None:
        """Telemetry: the server answered in ``response.http_version``: the span (and metric) of the request or
        notification it answers say so, and the session's duration will (:attr:`http_version`)."""
        from ..telemetry import _hooks

        self.http_version = _hooks.http_responded(response) or self.http_version

    def _session_gone(self, request_id: RequestId, session: str | None, *, ran: bool) -> None:
        """The server no longer knows ``session``: the client must initialize again (2025-11-25). ``ran``: the
        request was under way (its POST accepted), so the server may have acted on it (:data:`SESSION_LOST`)."""
        if session is None or self.session_id == session:
            self.session_id = None
            self._listening = False
            self.lost = "session_expired"
        if ran:
            self._fail(request_id, said(local.SESSION_ENDED_MIDWAY), SESSION_LOST)
        else:
            self._fail(request_id, said(local.SESSION_ENDED), SESSION_EXPIRED)

    async def _deliver(self, message: bytes) -> None:
        self._put(message)

    def _put(self, message: bytes) -> None:
        """Hand ``message`` to the waiting :meth:`receive`'s handler (see :meth:`deliver_to`), else to the inbox."""
        item: bytes | None = message
        waiting, dispatch = self._waiting, self._dispatch
        if waiting is not None and dispatch is not None and not self._closed and self._failure is None:
            self._waiting = None  # from here on, until receive waits again, messages queue behind this one
            try:
                if waiting.run(dispatch, message):
                    self._waiting = waiting
                    return
            except Exception as exc:
                self._failure = exc
                item = None  # wakes receive, which raises it
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._inbox_in.send_nowait(item)

    def _fail(self, request_id: RequestId, reason: str, data: JSONValue = None) -> None:
        """Answer ``request_id`` locally with an error, so the caller does not wait forever."""
        message = LOCAL_FAILURE + reason
        self._put(error_reply(request_id, INTERNAL_ERROR, message, data))


def _names_old_stream(url: str) -> bool:
    """Whether ``url``'s path ends in ``/sse`` (or ``/sse/``), where servers of the 2024-11-05 HTTP+SSE transport
    put their stream (the official SDKs and FastMCP all do)."""
    return httpx.URL(url).path.rstrip("/").endswith("/sse")


LOCAL_FAILURE = "Transport error (local, not from the server): "
"""How an error this transport answers a request with itself begins (the request failed on this side of the wire,
the server never answered it): ``elicitor connect`` says this frame in the person's language, the rest as it is."""

NOT_JSON = "Transport error (local): the server's answer is not JSON"
"""The error a request gets when the server answered it with something that is not JSON."""


def _retry_after(value: str | None, default: float) -> float:
    """Seconds to wait from a ``Retry-After`` header (RFC 9110 §10.2.3: delay-seconds; a date is not worth
    parsing here), within [0.1, 10] s; ``default`` without one."""
    if value is not None and value.strip().isdigit():
        return min(max(float(value.strip()), 0.1), 10.0)
    return default


def _valid_session_id(value: str) -> bool:
    """Whether ``value`` may be a session id: visible ASCII only (0x21-0x7E), as the spec says it MUST be
    (2025-11-25, basic/transports, "Session Management"). Anything else could not even be sent back in a header."""
    return all("!" <= c <= "~" for c in value)


def _header_safe(value: str) -> bool:
    """Whether ``value`` can go back in a header as is: visible ASCII, spaces and tabs (RFC 9110, section 5.5)."""
    return all(" " <= c <= "~" or c == "\t" for c in value)


def _addressed(body: bytes, request_id: RequestId) -> bytes:
    """An error a server sent in answer to our POST without our request's id still answers it: without an id (it
    could not read one), or with one of its own (the official Python SDK before 2.0 says ``"server-error"`` when it
    refuses a request's headers, a ``server/discover`` at 2026-07-28 among them). A JSON body answers the one request
    the POST carried; left unanswered, that request would wait for its deadline."""
    try:
        message = decode_json(body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return error_reply(request_id, INTERNAL_ERROR, NOT_JSON)
    if isinstance(message, dict) and "error" in message and message.get("id") != request_id:
        error = message["error"] if isinstance(message["error"], dict) else {}
        return error_reply(
            request_id, error.get("code", INTERNAL_ERROR), str(error.get("message", "")), error.get("data")
        )
    return body


def _is_jsonrpc(body: bytes) -> bool:
    """Whether ``body`` reads as a JSON-RPC message (or a batch of them), the answer :func:`_addressed` passes on."""
    try:
        message = decode_json(body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return True  # not JSON at all: _addressed says so
    if isinstance(message, list):
        return True
    return isinstance(message, dict) and ("jsonrpc" in message or isinstance(message.get("error"), dict))


def _refusal(challenge: str | None, body: bytes) -> str:
    """What a refusal that is not a JSON-RPC message says, for a person: the bearer challenge's error and the
    scopes it names (a 403 ``insufficient_scope``, RFC 6750 section 3.1), and the body's own description; else the
    start of the body. A peer's words: cut short, and control characters dropped."""
    bearer = parse_challenge([challenge]) if challenge else Challenge()
    try:
        message = decode_json(body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        message = None
    fields = message if isinstance(message, dict) else {}
    error = bearer.error or fields.get("error")
    description = bearer.error_description or fields.get("error_description") or fields.get("message")
    parts = [part for part in (error, description) if isinstance(part, str) and part]
    text = ": ".join(parts) if parts else body[:200].decode("utf-8", "replace")
    if bearer.scope:
        text += f" (scope needed: {bearer.scope})"
    return "".join(c for c in text[:300] if c.isprintable())


def _answers(data: bytes, request_id: RequestId) -> bool:
    """Whether ``data`` answers ``request_id``: the message itself, or one in a batch (2025-03-26)."""
    try:
        message = decode_json(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return False
    messages = message if isinstance(message, list) else [message]
    return any(isinstance(one, dict) and one.get("id") == request_id and "method" not in one for one in messages)
