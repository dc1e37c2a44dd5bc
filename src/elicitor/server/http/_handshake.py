"""The handshake era over Streamable HTTP: sessions, their streams, and serving sessions other replicas run.

Spec: https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#streamable-http — ``initialize``
creates a session (``Mcp-Session-Id``, 32 random bytes) run by a :class:`~elicitor.server.ServerSession` over a
:class:`SessionTransport`. Each POSTed request gets a logical stream: every message the server sends *related* to
that request (notifications, ``elicitation/create``) and finally its answer go there. The POST answers with JSON
when the answer is the first thing ready, else with SSE (priming event first, SEP-1699). The client's answers to
server requests, and notifications, are POSTs answered 202. A GET opens the standalone stream (messages related to
no request), or resumes a stream with ``Last-Event-ID`` from the event store. DELETE ends the session and cancels
what it was waiting for. Unknown session → 404.

A session runs on the replica that created it. A request for it that lands on another replica is served there
anyway: forwarded to the owner and its answer relayed back (:mod:`._peers`), so that a plain round-robin balancer
needs no affinity.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractContextManager, nullcontext, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.abc

from ..._loop import running_asyncio_loop
from ...protocol import Connection, InvalidMessage, Oversized
from ...state import EventStore, SessionRecord, Store, StoreUnavailable, Subscription, supervised
from ...telemetry import _state as _telemetry
from ...transports._sse import encode_event, parse_event_id, priming_event
from ...types import (
    ACCEPTED_OLDER_REVISIONS,
    HANDSHAKE_REVISIONS,
    INVALID_REQUEST,
    STATELESS_REVISIONS,
    JSONObject,
    RequestId,
)
from .._hold import StoreHold
from ._asgi import (
    SSE_HEADERS,
    Headers,
    Listening,
    Receive,
    Send,
    refuse,
    refuse_unavailable,
    request_id_of,
    respond_empty,
    respond_json,
    until_gone,
)
from ._outbox import Outbox
from ._peer_wire import Attach, Moved, Open, RemoteStream
from ._peers import Peers
from ._streams import Claim, Stream

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext

    from ...telemetry._hooks import Forwarded
    from .._server import Server

Respond = Callable[[Receive, Send], Awaitable[Awaitable[None] | None]]
"""What answers a POST once its message is delivered (its answer stream, or a relay from another replica); what it
returns, if anything, delivers the rest of the answer and is awaited by the caller (see :meth:`_respond_from`)."""

logger = logging.getLogger("elicitor.http")
_T = TypeVar("_T")

MAX_BACKLOG = 4096
"""Messages from other replicas a session may be behind on, past its inbox, before it is ended."""

OWNERS_KEPT = 10_000
"""Owners of other replicas' sessions a replica remembers (the most recently used; each entry about 0.3 KiB)."""

HANDSHAKE_HEADER_VERSIONS = (*HANDSHAKE_REVISIONS, *ACCEPTED_OLDER_REVISIONS)
"""MCP-Protocol-Version values a handshake-era session accepts: 2025-03-26 is what an absent header means, and a
session through ``elicitor proxy`` is on whatever revision its server chose, 2024-11-05 included (a client then
sends that header; taking it for 2026-07-28 would refuse every request after ``initialize``)."""


def gone_after(store: Store) -> float:
    """Seconds a session owner's lease must stay lapsed before its sessions are taken as gone: one more lease and
    one check (7 s with the 5 s lease). The lease lapses a lease after the owner's last renewal (renewed every
    third of one), so an owner is declared gone only once it has said nothing for about two leases: a replica
    that dies is known gone within 12 s, and one that stalls for up to 10 s (a SIGSTOP, a long GC pause) keeps its
    live sessions. A store without leases (this process only) gets the same for the default lease."""
    lease = getattr(store, "lease", DEFAULT_LEASE)
    return (lease if isinstance(lease, float | int) else DEFAULT_LEASE) + CHECK_EVERY


DRAIN_MARGIN = 0.5
"""Seconds before a shutdown's grace is up at which the sessions still running calls end (see
:meth:`HandshakeSessions.drain`): their responses end cleanly before the ASGI server would cancel them."""

CLOSE_WITHIN = 2.0
"""Seconds a replica shutting down gives the store to forget its sessions, all of them together (see
:meth:`HandshakeSessions.close`): a Redis that answers does it in milliseconds, and one that is away would not
by waiting longer."""

DEFAULT_LEASE = 5.0
CHECK_EVERY = 2.0
"""Seconds between two looks at a relayed stream's owner."""


class SessionTransport:
    """A handshake-era session: the :class:`Transport` a :class:`ServerSession` runs over, fed by HTTP requests."""

    network = "http"
    """For telemetry: the spans of this session's requests say ``network.protocol.name = http``."""

    @property
    def session_id(self) -> str:
        """The ``Mcp-Session-Id`` (``mcp.session.id`` on this session's spans)."""
        return self.id

    def __init__(
        self, session_id: str, events: EventStore, principal: str | None = None, hold: StoreHold | None = None
    ) -> None:
        self.id = session_id
        self.principal = principal
        """The user who created the session; only their requests find it."""
        self.http_version: str | None = None
        """For telemetry, the HTTP version of the POST that opened the session (the session metric's
        ``network.protocol.version``)."""
        self.lost: str | None = None
        """For telemetry, how the session ended badly (the session metrics' ``error.type``): ``timeout``, expired
        after the idle timeout because its client left without ending it; ``None``: ended by its client (DELETE)
        or by this replica (shutting down)."""
        self.hold = hold
        """Where this session's requests that read the store wait for it while it is away (the app's bound, shared
        by both eras); the :class:`ServerSession` running over this transport takes it (its task requests)."""
        self.events = events
        self._inbox_in, self._inbox_out = anyio.create_memory_object_stream[bytes](256)
        self._backlog: deque[bytes] | None = None
        self.streams: dict[RequestId, Stream] = {}
        self._tag = secrets.token_hex(4)
        """What begins the key of every stream of this session: a resume names a stream of this session only."""
        self.by_key: dict[str, Stream] = {}
        """The streams still going (and the standalone one); a finished one is dropped once it is all kept."""
        self.standalone = self._new_stream()
        self.ended = anyio.Event()
        self.last_seen = time.monotonic()
        self._unfollowed: float | None = None
        """When a sweep first found a request in flight that no connection follows (see :meth:`idle_for`)."""
        self.waiting_spans: dict[RequestId, SpanContext] = {}
        """With a tracer: the span of each request this session sent and still waits on, by id, so that an answer
        another replica forwards here joins the request's trace whatever the client put in it (see ``_peers``)."""
        self.peers: dict[RequestId, dict[str, Any]] = {}
        """With telemetry on: who POSTed each request this replica took for this session (``client.address``,
        ``client.port``, ``network.protocol.version``: ``telemetry/_peer.py``), by id, until it is served."""
        self.forwarded: dict[RequestId, Forwarded] = {}
        """With a tracer: what the envelope of each request another replica forwarded here told of its hop, by id,
        until the request is served (its span links to that replica's; see ``_peers``) or answered otherwise."""

    def idle_for(self, now: float) -> float:
        """Seconds since the client last sent anything or followed this session; 0 while a connection follows it.

        A connection delivering a request's stream (here, or relayed by another replica) or the standalone stream
        keeps the session however long its person takes. A request in flight that no connection has followed
        since the last sweep counts from then: its client is gone (or its answer was lost with a replica that
        kept it), and the session would otherwise be kept until the call's ``elicitation_timeout`` (for ever with
        ``None``) for a question nobody can answer any more; a client
        that comes back within the idle timeout (a resume) finds it as it was."""
        if self.standalone.attached or any(stream.attached for stream in self.streams.values()):
            self._unfollowed = None
            return 0.0
        if not self.streams:
            self._unfollowed = None
            return now - self.last_seen
        if self._unfollowed is None:
            self._unfollowed = now
        return now - max(self.last_seen, self._unfollowed)

    def _new_stream(self) -> Stream:
        stream = Stream(self._tag + secrets.token_hex(8), self.events, self._forget_stream)
        self.by_key[stream.key] = stream
        return stream

    def _forget_stream(self, key: str) -> None:
        """A request's stream ended and all of it is in the event store: this session need not hold it any more
        (a long session would otherwise hold every request it ever served)."""
        self.by_key.pop(key, None)

    def stream(self, key: str) -> Stream | None:
        """The stream ``key`` of this session (for a resume): live, or finished and served from the event store."""
        stream = self.by_key.get(key)
        if stream is None and key.startswith(self._tag) and not self.ended.is_set():
            stream = Stream.finished(key, self.events)
        return stream

    def open(self, request_id: RequestId) -> Stream:
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
            if self.forwarded:  # answered without being served (refused by the dispatch): nothing more to link
                self.forwarded.pop(related, None)  # type: ignore[arg-type]  # related is not None here
            if self.peers:  # the same
                self.peers.pop(related, None)  # type: ignore[arg-type]  # related is not None here
        await stream.put(message, final)

    async def aclose(self) -> None:
        self._inbox_in.close()

    # -- fed by the app ----------------------------------------------------------------------------------------

    async def deliver(self, message: bytes) -> None:
        self.last_seen = time.monotonic()
        await self._inbox_in.send(message)

    def deliver_soon(self, message: bytes, start: Callable[[Callable[[], Coroutine[Any, Any, None]]], None]) -> None:
        """Deliver ``message`` without waiting, in order with every other message delivered this way.

        What the listener on the replicas' queue uses: a session whose inbox is full (its dispatch is behind) must
        not hold up the messages of every other session. Past the inbox, messages wait in a backlog drained by a
        task ``start`` runs; a session more than ``MAX_BACKLOG`` messages behind its client is ended (its client
        gets 404 and starts again) rather than holding memory without bound.
        """
        self.last_seen = time.monotonic()
        if self._backlog is None:
            try:
                self._inbox_in.send_nowait(message)
                return
            except anyio.WouldBlock:
                self._backlog = deque()
                start(self._drain)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
        if len(self._backlog) >= MAX_BACKLOG:
            logger.warning("session %.8s... is %d messages behind: ending it", self.id, len(self._backlog))
            self._inbox_in.close()
            self._backlog.clear()
            return
        self._backlog.append(message)

    async def _drain(self) -> None:
        backlog = self._backlog
        try:
            while backlog:
                await self._inbox_in.send(backlog[0])
                backlog.popleft()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            self._backlog = None

    def close(self) -> list[Stream]:
        """End the session here, without waiting: its inbox and streams closed (their responses end); returns the
        streams whose history is still to be forgotten (none if it was closed already)."""
        self._inbox_in.close()
        self._inbox_out.close()
        streams = list(self.by_key.values())
        self.by_key.clear()
        self.ended.set()
        for stream in streams:
            stream.close()
        return streams

    async def end(self) -> None:
        """End the session: close its streams, then forget their history — best-effort, as all cleanup is.

        A store that cannot forget now (Redis away) is no reason to fail: the history expires with its TTL.
        """
        streams = self.close()
        for stream in streams:
            try:
                with anyio.fail_after(2):
                    await self.events.discard(stream.key)
            except (StoreUnavailable, TimeoutError) as exc:
                logger.info("the history of session %.8s... is left to expire: %s", self.id, exc)
                return
            except Exception:
                logger.exception("the history of session %.8s... could not be discarded", self.id)
                return


@dataclass(frozen=True, slots=True)
class _Elsewhere:
    """A session another replica runs, as just looked up (``remembered`` is ``None``), or as remembered from an
    earlier lookup (``remembered`` is that record: what is sent there is checked against the directory)."""

    replica: str
    session: str
    principal: str | None
    remembered: SessionRecord | None = None


class HandshakeSessions:
    """The handshake-era sessions this replica runs, and the endpoint's POST/GET/DELETE for any session.

    Sessions this replica runs are in a table here; the shared directory says which replica runs the others.
    """

    def __init__(
        self,
        server: Server,
        events: EventStore,
        *,
        retry_ms: int | None,
        max_sessions: int,
        idle_timeout: float,
        hold: StoreHold | None = None,
    ) -> None:
        self.server = server
        self._store: Store = server.store
        self._events = events
        self._retry = retry_ms
        self._max_sessions = max_sessions
        self._idle_timeout = idle_timeout
        self._sessions: dict[str, SessionTransport] = {}
        self._owners: dict[str, SessionRecord] = {}
        """Other replicas' sessions this replica forwarded to, by id, the most recently used last: a POST for one
        is sent to its owner without looking it up first, checked against the directory in the same round trip
        (:meth:`~elicitor.state.Store.forward`), so an entry gone stale costs one lookup and is never trusted."""
        self._hold = hold if hold is not None else StoreHold()
        """The requests of this replica waiting for an unreachable store, of both eras (see :meth:`_patiently`)."""
        self._peers = Peers(
            self._store,
            self._sessions,
            server.url_elicitations,
            self._end,
            check_every=CHECK_EVERY,
            gone_after=gone_after(self._store),
        )
        self._outbox = Outbox(self._relay_kept)
        """Answers and notifications for other replicas' sessions taken while the store stayed away past the hold,
        passed on once it is back (see :mod:`._outbox`)."""
        self._tg: anyio.abc.TaskGroup | None = None
        self.draining = False
        """The replica is shutting down (:meth:`drain`): a new session is refused (503), to be made elsewhere."""
        self.drained = anyio.Event()
        """Set once :meth:`drain` ended this replica's sessions: the app's lifespan ends after it."""
        self.cut = 0
        """Calls a client still followed when the shutdown's grace ran out (:meth:`drain` ended them; logged)."""

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def connected(self) -> bool:
        """Whether this replica can serve the sessions other replicas run (always, with a store of its own)."""
        return not self._store.shared or self._peers.listening

    @property
    def subscription(self) -> Subscription:
        """This replica's channel from the others."""
        return self._peers.subscription

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def start(self, tg: anyio.abc.TaskGroup) -> None:
        """Run sessions in ``tg``; expire idle ones; with shared state, serve other replicas' forwarded requests."""
        self._tg = tg
        tg.start_soon(supervised, "the sweep of idle sessions", self._expire_idle_sessions)
        if self._store.shared:
            tg.start_soon(self._peers.listen)
            tg.start_soon(supervised, "the outbox", self._outbox.run)
            self._store.sessions.on_gone(self._declared_gone)

    def _declared_gone(self, session_ids: list[str]) -> None:
        """Sessions the other replicas declared gone (404) while this one was stalled past its lease: their clients
        have started new ones, so they end here too (a tool still running in one is cancelled, its streams close)
        instead of answering again under an id already said to be gone."""
        tg = self._tg
        for session_id in session_ids:
            session = self._sessions.get(session_id)
            if session is not None and tg is not None:
                tg.start_soon(self._end, session)

    async def drain(self, grace: float | None) -> None:
        """The replica is shutting down (see :meth:`HttpApp.drain`): relayed streams end now; this replica's
        sessions end once none has a request in flight that a client follows (here, or through another replica's
        relay), or :data:`DRAIN_MARGIN` before ``grace`` is up. A call whose client left is not waited for: its
        client, back, resumes it to a 404 and starts again, as it would at the end of the grace. Answers the outbox
        keeps for other replicas' sessions (the store away) are waited for likewise, to be passed on if the store
        comes back within the grace: past it they are lost with the replica."""
        self.draining = True
        self._peers.drain()
        ends_at = None if grace is None else anyio.current_time() + grace
        within = None if grace is None else max(0.0, grace - min(DRAIN_MARGIN, grace / 4))
        try:
            with anyio.move_on_after(within) as waited:
                while len(self._outbox) or any(self._followed(session) for session in self._sessions.values()):
                    await anyio.sleep(0.1)
            if waited.cancelled_caught:  # the operator reads what the bounded grace cost, and nothing when nothing
                self.cut = sum(
                    stream.attached for session in self._sessions.values() for stream in session.streams.values()
                )
                if self.cut:
                    logger.warning(
                        "shutting down: %d call(s) still in flight at the end of the %g s grace are ended now "
                        "(their clients start them again, on another replica if there is one)", self.cut, grace,
                    )  # fmt: skip
            # The store is given what is left of the grace, halved, to forget the sessions (never more than it
            # would be given anyway): the responses still open must end before the ASGI server cuts them.
            left = CLOSE_WITHIN if ends_at is None else (ends_at - anyio.current_time()) / 2
            await self.close(within=max(0.0, min(CLOSE_WITHIN, left)))
        finally:
            self.drained.set()

    @staticmethod
    def _followed(session: SessionTransport) -> bool:
        """Whether a request of ``session`` is in flight and a connection delivers its stream (here or relayed)."""
        return any(stream.attached for stream in session.streams.values())

    async def close(self, within: float = CLOSE_WITHIN) -> None:
        """End every session this replica runs (the app is shutting down) and stop taking new ones.

        All together, within ``within`` seconds (:data:`CLOSE_WITHIN`; less at the end of a shutdown's grace)
        however many there are: one after the other, a store away
        (Redis paused or restarting) cost each its own timeouts, and a replica with many sessions outlasted any
        orchestrator's grace period. What the store did not forget by then stays there: the sessions read as gone
        once this replica's lease lapses (it is dropped as the replica stops, or expires), and their history and
        records expire with their TTLs. Every session's streams are closed here either way."""
        self._tg = None
        self._outbox.lost()
        sessions = list(self._sessions.values())
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(within) as bounded:
                async with anyio.create_task_group() as tg:
                    for session in sessions:
                        tg.start_soon(self._end, session)
            if bounded.cancelled_caught:
                left = sum(not session.ended.is_set() for session in sessions)
                logger.warning(
                    "the store did not forget this replica's %d sessions within %.1f s: they are left to expire "
                    "(%d still open are closed now)", len(sessions), within, left,
                )  # fmt: skip
            for session in sessions:
                session.close()

    def forget(self, session_id: str) -> SessionTransport | None:
        """Drop a session from this replica's table without ending it (tests simulate a restart with it)."""
        return self._sessions.pop(session_id, None)

    async def _end(self, session: SessionTransport) -> None:
        """End a session this replica runs, and take it out of the directory: best-effort, never raises (what the
        store could not forget now expires with its TTL). A session already ended (by :meth:`close`, or another
        call) is left as it is: its store's records were forgotten then, or left to expire."""
        if self._sessions.pop(session.id, None) is None and session.ended.is_set():
            return
        try:
            with anyio.move_on_after(2):
                await self._store.sessions.release(session.id)
        except StoreUnavailable as exc:
            logger.info("session %.8s... is left to expire in the store: %s", session.id, exc)
        except Exception:
            logger.exception("session %.8s... could not be released", session.id)
        await session.end()

    async def _expire_idle_sessions(self) -> None:
        while True:
            await anyio.sleep(min(60.0, self._idle_timeout / 4))
            now = time.monotonic()
            for session in list(self._sessions.values()):
                if session.idle_for(now) > self._idle_timeout:
                    logger.info("ending session %.8s... idle for %.0f s", session.id, session.idle_for(now))
                    session.lost = "timeout"  # its client left without ending it
                    await self._end(session)

    async def post(self, headers: Headers, message: JSONObject, body: bytes, send: Send) -> Respond | None:
        """Take a POSTed message: refuse it, or deliver it to its session and return what answers the POST.

        The answer is left to the caller (``respond(receive, send)``) so that nothing of the request is held while
        it runs: a call may wait on a person for hours, and its decoded body held here cost about 0.5 KiB per
        waiting call (the session keeps its own).
        """
        session_id = headers.get("mcp-session-id")
        is_request = "method" in message and "id" in message
        until = self._hold.deadline()  # for an unreachable store (see StoreHold)
        version = headers.get("mcp-protocol-version")
        request_id = message.get("id")
        if is_request and not (type(request_id) is int or type(request_id) is str):
            # Checked first: an initialize that cannot be answered must not leave a session behind.
            await refuse(send, 400, None, INVALID_REQUEST, 'Invalid request: "id" must be a string or an integer')
            return None
        invalid = Connection().receive_decoded(message)
        if isinstance(invalid, InvalidMessage) and invalid.reply is not None:
            # Answered here with 400 (basic/transports: input the server cannot accept gets an HTTP error status):
            # the session would send this error unrelated to any request, so the POST would wait for an answer
            # that goes to the standalone stream instead.
            await respond_json(send, 400, invalid.reply)
            return None
        if session_id is None:
            if not (is_request and message.get("method") == "initialize"):
                await refuse(
                    send, 400, request_id_of(message), INVALID_REQUEST, "Bad request: Mcp-Session-Id header is required"
                )
                return None
            try:
                session = await self._patiently(functools.partial(self._create_session, headers.principal), until)
            except StoreUnavailable as exc:
                await refuse_unavailable(send, request_id_of(message), exc, "POST")
                return None
            if session is None:
                why = "this replica is shutting down" if self.draining else "Too many sessions; try again later"
                await refuse(send, 503, request_id_of(message), INVALID_REQUEST, why)
                return None
        else:
            supported = version is None or version in HANDSHAKE_HEADER_VERSIONS
            # A remembered owner is checked only when the message is sent: with a version to refuse, look the
            # session up, so that a session that is gone is still a 404 first.
            found = await self._find(
                session_id,
                headers.principal,
                send,
                request_id_of(message),
                remembered=supported,
                until=until,
                keep=None if is_request or not supported else body,
            )
            if found is None:
                return None
            if not supported:
                await refuse(
                    send, 400, request_id_of(message), INVALID_REQUEST, f"Unsupported MCP-Protocol-Version {version!r}"
                )
                return None
            if isinstance(found, _Elsewhere):
                return functools.partial(self._forward_post, found, message, body, until)
            session = found
        if not is_request:
            await session.deliver(body)
            await respond_empty(send, 202)
            return None
        assert type(request_id) is int or type(request_id) is str
        if request_id in session.streams:
            await refuse(send, 400, None, INVALID_REQUEST, f"Invalid request: id {request_id!r} is already in flight")
            return None
        stream = session.open(request_id)
        if _telemetry.state.on:  # who POSTed it, for the span serving it
            from ...telemetry import _peer

            peer = _peer.current()
            if peer is not None:
                session.peers[request_id] = peer
                if session.http_version is None:  # the session metric's network.protocol.version: its first POST's
                    session.http_version = peer.get("network.protocol.version")
        await session.deliver(body)
        return functools.partial(self._respond_from, stream, session.id)

    async def _forward_post(
        self,
        owner: _Elsewhere,
        message: JSONObject,
        body: bytes,
        until: float | None,
        receive: Receive,
        send: Send,
    ) -> None:
        """A POST for a session another replica runs: forward it there, and relay the answer stream back.

        To an owner remembered rather than just looked up, the message goes only if the directory still says so
        (checked as it is sent); if not, the session is looked up again (then 404 if it is gone, as ever). A
        message waits for an unreachable store until ``until`` (see :class:`StoreHold`). A request is sent to its
        owner under one token however many times it is tried, and the owner serves a token once, so a try that
        timed out but reached the owner later never runs it twice (see :class:`~._peers.Peers`).
        """
        span: AbstractContextManager[object] = nullcontext()
        if _telemetry.state.on:  # a span in the message's trace, if it names one
            from ...telemetry import _hooks

            span = _hooks.forwarding(message, owner.session, owner.replica)
        request_id = request_id_of(message)
        keep = None if "method" in message and "id" in message else body  # no answer stream: may be kept
        with span:
            try:
                try:
                    await self._forward_to(owner, message, body, until, receive, send)
                except Moved:
                    self._owners.pop(owner.session, None)
                    found = await self._find(
                        owner.session, owner.principal, send, request_id, remembered=False, until=until, keep=keep
                    )
                    if found is None:
                        return
                    if not isinstance(found, _Elsewhere):  # session ids are never reused: it cannot have come here
                        await refuse(
                            send, 404, request_id, INVALID_REQUEST, "Session not found: initialize a new session"
                        )
                        return
                    await self._forward_to(found, message, body, until, receive, send)
            except StoreUnavailable as exc:
                if keep is not None and self._outbox.put(owner.session, owner.principal, keep):
                    await respond_empty(send, 202)  # passed on once the store is back
                    return
                await refuse_unavailable(send, request_id, exc, "forwarding a POST")

    async def _forward_to(
        self,
        owner: _Elsewhere,
        message: JSONObject,
        body: bytes,
        until: float | None,
        receive: Receive,
        send: Send,
    ) -> None:
        """:meth:`_forward_post` once: raises :class:`Moved` (nothing sent) if a remembered owner is not the
        session's any more, :class:`StoreUnavailable` if the message could not be sent (by ``until``)."""
        if "method" not in message or "id" not in message:
            deliver = functools.partial(self._peers.deliver, owner.replica, owner.session, body, owner.remembered)
            await self._patiently(deliver, until)
            await respond_empty(send, 202)  # durably in the owner's queue
            return
        request_id = request_id_of(message)
        if request_id is None:
            await refuse(send, 400, None, INVALID_REQUEST, 'Invalid request: "id" must be a string or an integer')
            return
        peer = None
        if _telemetry.state.on:  # who POSTed it here, for the owner's span serving it
            from ...telemetry import _peer

            peer = _peer.current()
        opening = functools.partial(Open, owner.session, request_id, body, peer=peer)
        patiently = functools.partial(self._patiently, until=until)
        async with self._peers.relay(owner.replica, owner.session, opening, owner.remembered, patiently) as stream:
            rest = await self._respond_from(stream, owner.session, receive, send)
            if rest is not None:
                await rest

    async def _patiently(self, attempt: Callable[[], Awaitable[_T]], until: float | None) -> _T:
        """``attempt()``, held while the store cannot be reached, until ``until`` (:meth:`StoreHold.patiently`)."""
        return await self._hold.patiently(attempt, until)

    async def _find(
        self,
        session_id: str,
        principal: str | None,
        send: Send,
        request_id: RequestId | None,
        *,
        remembered: bool = False,
        until: float | None = None,
        keep: bytes | None = None,
    ) -> SessionTransport | _Elsewhere | None:
        """The session with this id if it belongs to ``principal`` (the user making the request): run here, or by
        another replica — with ``remembered``, as remembered from an earlier lookup if it was (see ``_owners``).

        Answers the request itself (404, or 503 when the shared state cannot be reached, by ``until`` if given)
        and returns ``None`` if there is no such session for this user. ``keep`` (a message that needs no answer
        stream) goes to the outbox instead of a 503, answered 202, to be passed on once the store is back.
        """
        session = self._sessions.get(session_id)
        if session is not None:
            if session.principal == principal:
                return session
        elif self._store.shared:
            known = self._owners.get(session_id) if remembered else None
            if known is not None and known.principal == principal:
                self._remember(session_id, known)  # the most recently used last
                return _Elsewhere(known.owner, session_id, principal, known)

            async def look_up() -> SessionRecord | None:
                record = await self._store.sessions.lookup(session_id)
                if record is not None and record.owner != self._store.replica and not record.alive:
                    record = await self._look_again(session_id, record.owner)
                return record

            try:
                record = await self._patiently(look_up, until)
            except StoreUnavailable as exc:
                if keep is not None and self._outbox.put(session_id, principal, keep):
                    await respond_empty(send, 202)  # passed on once the store is back
                    return None
                await refuse_unavailable(send, request_id, exc, "finding a session")
                return None
            if record is not None and record.principal == principal:
                if record.owner != self._store.replica:
                    if record.alive:
                        self._remember(session_id, record)
                    return _Elsewhere(record.owner, session_id, principal)
                with suppress(StoreUnavailable):  # this replica does not run it any more: it is gone
                    await self._store.sessions.release(session_id)
        await refuse(send, 404, request_id, INVALID_REQUEST, "Session not found: initialize a new session")
        return None

    def _remember(self, session_id: str, record: SessionRecord) -> None:
        """Remember the owner of another replica's session (the least recently used is forgotten past a bound)."""
        self._owners.pop(session_id, None)
        self._owners[session_id] = record
        if len(self._owners) > OWNERS_KEPT:
            del self._owners[next(iter(self._owners))]

    async def _relay_kept(self, session_id: str, principal: str | None, body: bytes) -> bool:
        """Pass on a message the outbox kept for ``session_id``: to its owner, found afresh (an owner known before
        the outage may have changed meanwhile). ``False`` if the session is gone meanwhile, or not ``principal``'s
        (the message is dropped).

        Raises:
            StoreUnavailable: the store is still away (the outbox tries again).
        """
        session = self._sessions.get(session_id)
        if session is not None:
            if session.principal != principal:
                return False
            await session.deliver(body)
            return True
        record = await self._store.sessions.lookup(session_id)
        if record is not None and record.owner != self._store.replica and not record.alive:
            record = await self._look_again(session_id, record.owner)
        if record is None or record.principal != principal or record.owner == self._store.replica:
            logger.warning("a kept message for session %.8s... is dropped: the session is gone", session_id)
            return False
        await self._peers.deliver(record.owner, session_id, body)
        logger.info("a kept message for session %.8s... reached it once the store was back", session_id)
        return True

    async def _look_again(self, session_id: str, owner: str) -> SessionRecord | None:
        """The owner's lease had lapsed: look once more after ``gone_after`` (the rule everywhere: lapsed on two
        looks that far apart, since one can be a Redis restart the owner has not renewed its lease after yet, or an
        owner that stalled for a few seconds). ``None``, with the record released, if the owner is still gone; the
        record as it is now otherwise.

        Raises:
            StoreUnavailable: the store cannot be reached (the caller answers 503, never 404).
        """
        await anyio.sleep(self._peers.gone_after)
        record = await self._store.sessions.lookup(session_id)
        if record is not None and record.owner == owner and not record.alive:
            with suppress(StoreUnavailable):
                await self._store.sessions.release(session_id)
            return None
        return record

    async def _create_session(self, principal: str | None) -> SessionTransport | None:
        if self._tg is None:
            raise RuntimeError(
                "the HTTP app's lifespan is not running: serve it with an ASGI server, or enter app.lifespan() from "
                "the lifespan of the application it is mounted in"
            )
        if len(self._sessions) >= self._max_sessions or self.draining:
            return None
        session_id = secrets.token_urlsafe(32)
        await self._store.sessions.claim(session_id, principal)  # first: a claim the store refused leaves nothing
        session = SessionTransport(session_id, self._events, principal, self._hold)
        self._sessions[session.id] = session

        async def run() -> None:
            try:
                await self.server.serve(session, principal=principal)
            except Exception:  # a session's failure ends that session, never the replica's task group
                logger.exception("session %.8s... stopped on an error", session.id)
            finally:
                with anyio.CancelScope(shield=True):
                    await self._end(session)

        self._tg.start_soon(run)
        return session

    async def _respond_from(
        self, stream: Stream | RemoteStream, session_id: str, receive: Receive, send: Send
    ) -> Awaitable[None] | None:
        """Answer a POST from its request's stream: JSON if the answer comes first, else SSE.

        An SSE answer is opened here and the pump delivering the rest is returned, for the caller to await: this
        frame is not held while the call waits (on a person, perhaps for hours: 0.3 KiB per waiting call).
        """
        session_header = [(b"mcp-session-id", session_id.encode())]
        if _telemetry.state.on:  # the request reached its session: a refusal now is not one before it did
            from ...telemetry import _hooks

            _hooks.handed_over()
        try:
            sequence, first, final = await stream.out.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            status, reason = (stream.status, stream.reason) if isinstance(stream, RemoteStream) else (0, "")
            await refuse(send, status or 404, None, INVALID_REQUEST, reason or "Session ended")
            return None
        if final:
            await respond_json(send, 200, first, extra=session_header)
            return None
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + session_header})
        await send(
            {"type": "http.response.body", "body": priming_event(stream.event_id(0), self._retry), "more_body": True}
        )
        del session_header  # not held while the call waits (on a person: 0.2 KiB each)
        if isinstance(stream, RemoteStream):  # the owner holds its stream for this relay
            return self._pump(stream, sequence - 1, receive, send, first=(sequence, first, final))
        claim = stream.claim(supersede=True)
        assert claim is not None  # released by the pump, which runs from here on: nothing awaits in between
        return self._pump(stream, sequence - 1, receive, send, first=(sequence, first, final), claim=claim)

    def _pump(
        self,
        stream: Stream | RemoteStream,
        delivered: int,
        receive: Receive,
        send: Send,
        first: tuple[int, bytes, bool] | None = None,
        claim: Claim | None = None,
    ) -> Awaitable[None]:
        """Deliver ``stream`` over an open SSE response until its final message, the client goes away, or a resume
        supersedes ``claim`` (then the response ends, and the resuming connection delivers the rest); ``claim`` is
        released on the way out.

        A client going away is not a cancellation (2025-11-25): the request goes on, its events are kept, and the
        client may resume the stream with ``Last-Event-ID``.

        On asyncio a stream of this replica is delivered by the response's task alone (:meth:`_deliver`); a relay
        from another replica, or another event loop, has a second task watch the client (:meth:`_watched_pump`).
        """
        if isinstance(stream, Stream) and running_asyncio_loop() is not None:
            return self._deliver(stream, delivered, receive, send, first, claim)
        return self._watched_pump(stream, delivered, receive, send, first, claim)

    async def _deliver(
        self,
        stream: Stream,
        delivered: int,
        receive: Receive,
        send: Send,
        first: tuple[int, bytes, bool] | None,
        claim: Claim | None,
    ) -> None:
        """:meth:`_pump` in one task: with nothing to deliver, it awaits the client's ``receive()`` itself, and the
        stream's next event interrupts that wait (:class:`Listening`). A call waiting on a person holds no second
        task, no future of its own and no watcher: 0.9 KiB less per waiting call than :meth:`_watched_pump`
        (tracemalloc, ``bench/http_memory.py``), for a cancellation per event that finds the task waiting."""
        listening = Listening()
        nudge = listening.wake
        if claim is not None:
            claim.bind(listening)
        item, first = first, None
        try:
            try:
                while True:
                    if item is None:
                        try:
                            item = stream.poll(nudge)
                        except anyio.ClosedResourceError:
                            break
                        if item is None:  # nothing to deliver: listen to the client until the next event
                            listening.waiting = True
                            try:
                                gone = (await receive())["type"] == "http.disconnect"
                            except asyncio.CancelledError:
                                if listening.woken():
                                    continue
                                raise
                            except Exception:  # the server cannot tell us any more: as if the client left
                                gone = True
                            finally:
                                listening.waiting = False
                            if gone:
                                break
                            continue
                    delivered, done = await _send_event(stream, item, delivered, send)
                    if done:
                        break
                    item = None  # nothing of it is held while the next one is awaited
            except asyncio.CancelledError:
                if not listening.settle():
                    raise
            finally:
                stream.unpoll(nudge)
            with anyio.CancelScope(shield=True):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass
        finally:
            if claim is not None:
                stream.release(claim)

    async def _watched_pump(
        self,
        stream: Stream | RemoteStream,
        delivered: int,
        receive: Receive,
        send: Send,
        first: tuple[int, bytes, bool] | None,
        claim: Claim | None,
    ) -> None:
        """:meth:`_pump` with a second task watching the client (:func:`until_gone`)."""
        try:
            async with until_gone(receive) as scope:
                if claim is not None:
                    claim.bind(scope)
                item, first = first, None
                while True:
                    if item is None:
                        try:
                            item = await stream.take()
                        except (anyio.EndOfStream, anyio.ClosedResourceError):
                            break
                    delivered, done = await _send_event(stream, item, delivered, send)
                    if done:
                        break
                    item = None  # nothing of it is held while the next one is awaited
            with anyio.CancelScope(shield=True):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass
        finally:
            if claim is not None:
                assert isinstance(stream, Stream)
                stream.release(claim)

    async def get(self, headers: Headers, receive: Receive, send: Send) -> None:
        """Open the standalone stream, or resume one (``Last-Event-ID``). A store that cannot be reached is waited
        for as a POST waits (:class:`StoreHold`): finding the session, asking its owner to pump the stream here,
        reading its history are all safe to try again."""
        session_id = headers.get("mcp-session-id")
        version = headers.get("mcp-protocol-version")
        if session_id is None or (version is not None and version in STATELESS_REVISIONS):
            await refuse(send, 405, None, INVALID_REQUEST, "Method not allowed: GET needs a session (2025-11-25)")
            return
        if "text/event-stream" not in (headers.get("accept") or ""):
            await refuse(send, 406, None, INVALID_REQUEST, "Not acceptable: Accept must list text/event-stream")
            return
        until = self._hold.deadline()
        found = await self._find(session_id, headers.principal, send, None, until=until)
        if found is None:
            return
        last = headers.get("last-event-id")
        parsed = parse_event_id(last) if last is not None else None
        if last is not None and parsed is None:
            await refuse(send, 404, None, INVALID_REQUEST, "Unknown Last-Event-ID: that stream cannot be resumed")
            return
        if isinstance(found, _Elsewhere):
            key, after = parsed if parsed is not None else (None, 0)
            attaching = functools.partial(Attach, found.session, key, after)
            try:
                await self._relay_get(found, attaching, after, last, until, receive, send)
            except StoreUnavailable as exc:
                await refuse_unavailable(send, None, exc, "GET")
            return
        await self._serve_get(found, parsed, last, until, receive, send)

    async def _relay_get(
        self,
        found: _Elsewhere,
        attaching: Callable[[str, str], Attach],
        after: int,
        last: str | None,
        until: float,
        receive: Receive,
        send: Send,
    ) -> None:
        """A GET for a session another replica runs: have the owner pump the stream here (the request is sent
        under one token however often it is tried until ``until``, and the owner serves a token once)."""
        patiently = functools.partial(self._patiently, until=until)
        async with self._peers.relay(found.replica, found.session, attaching, patiently=patiently) as remote:
            try:
                await remote.out.receive()  # Opened, or Closed with the owner's refusal
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                await refuse(send, remote.status or 404, None, INVALID_REQUEST, remote.reason or "Session ended")
                return
            await self._open_sse(send, found.session, remote.event_id(after) if last is None else None)
            await self._pump(remote, after, receive, send)

    async def _serve_get(
        self,
        session: SessionTransport,
        parsed: tuple[str, int] | None,
        last: str | None,
        until: float,
        receive: Receive,
        send: Send,
    ) -> None:
        """A GET for a session this replica runs: the standalone stream, or a resumed one from its history (read
        by ``until`` if the store cannot be reached at first)."""
        stream = session.standalone
        delivered = 0
        if parsed is not None:
            resumed = session.stream(parsed[0])
            if resumed is None:
                await refuse(send, 404, None, INVALID_REQUEST, "Unknown Last-Event-ID: that stream cannot be resumed")
                return
            stream, delivered = resumed, parsed[1]
        claim = stream.claim(supersede=parsed is not None)  # before the first await: see _streams
        if claim is None:
            await refuse(send, 409, None, INVALID_REQUEST, "Conflict: that stream is already being delivered")
            return
        try:
            await claim.settle()
            try:
                history = await self._patiently(functools.partial(stream.replay, delivered), until)
            except StoreUnavailable as exc:
                await refuse_unavailable(send, None, exc, "resuming a stream")
                return
            if claim.superseded:  # a newer resume came while this one read the history: that one delivers
                await refuse(send, 409, None, INVALID_REQUEST, "Conflict: a newer resume of that stream delivers it")
                return
            await self._open_sse(send, session.id, stream.event_id(delivered) if last is None else None)
            for sequence, message in history:
                chunk = encode_event(message, event_id=stream.event_id(sequence))
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                delivered = sequence
            if stream.done and delivered >= stream.sequence:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await self._pump(stream, delivered, receive, send, claim=claim)
        finally:
            stream.release(claim)

    async def _open_sse(self, send: Send, session_id: str, priming: str | None) -> None:
        """Start an SSE response; a new stream (not a resume) begins with a priming event carrying ``priming``."""
        header = [(b"mcp-session-id", session_id.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + header})
        opening = priming_event(priming, self._retry) if priming is not None else b""
        await send({"type": "http.response.body", "body": opening, "more_body": True})

    async def delete(self, headers: Headers, send: Send) -> None:
        """End a session. Another replica's is ended by a message in its owner's queue: a store that cannot be
        reached is waited for as a POST waits (:class:`StoreHold`), so the DELETE takes effect once the store is
        back, or is refused with 503 (ending a session twice ends it once)."""
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            await refuse(send, 405, None, INVALID_REQUEST, "Method not allowed: DELETE needs a session (2025-11-25)")
            return
        until = self._hold.deadline()
        found = await self._find(session_id, headers.principal, send, None, until=until)
        if found is None:
            return
        if isinstance(found, _Elsewhere):
            self._owners.pop(found.session, None)
            try:
                await self._patiently(functools.partial(self._peers.end, found.replica, found.session), until)
            except StoreUnavailable as exc:
                await refuse_unavailable(send, None, exc, "DELETE")
                return
        else:
            await self._end(found)
        await respond_empty(send, 200)


async def _send_event(
    stream: Stream | RemoteStream, item: tuple[int, bytes, bool], delivered: int, send: Send
) -> tuple[int, bool]:
    """Write one of ``stream``'s events to the SSE response unless it was delivered already; returns the sequence
    delivered so far and whether the response ends (the final event went out, or the client read too slowly and
    resumes from the event store). An event that could not be written is given back for a resume."""
    sequence, message, final = item
    if sequence <= delivered:
        return delivered, False
    if delivered < stream.dropped:  # the client read too slowly: what it missed is in the store
        stream.give_back(item)
        return delivered, True  # it resumes from its Last-Event-ID, served from the event store
    chunk = encode_event(message, event_id=stream.event_id(sequence))
    try:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    except BaseException:
        stream.give_back(item)  # the client left: a resume starts with it
        raise
    return sequence, final
