"""Replicas serving each other's handshake-era sessions: messages on the bus, and both ends of a relayed stream.

A 2025-06-18/2025-11-25 session lives in one process (its tool calls are tasks there, waiting on a person), but a
round-robin balancer sends each of the client's HTTP requests to any replica. The replica a request lands on looks
the session up in the shared :class:`~elicitor.state.SessionDirectory`; if another replica — the *owner* — runs
it, the request is forwarded over the :class:`~elicitor.state.Bus` on the owner's channel ``replica:<id>``:

* a POSTed notification or answer (the reply to ``elicitation/create``) is a :class:`Deliver`; the owner feeds it
  to the session, and the landing replica answers 202 once the bus says the owner received it (with a tracer, an
  answer's :class:`Hop` lets the owner put the hop in the trace of the question it answers);
* a POSTed request is an :class:`Open`; a GET (standalone stream or ``Last-Event-ID`` resume) an :class:`Attach`.
  The owner then *pumps* that stream back to the landing replica's channel as :class:`Opened`, :class:`Item` and
  :class:`Closed` messages, and the landing replica writes them to its HTTP response exactly as the owner would
  have (JSON or SSE, the owner's event ids, so a resume can land anywhere again);
* the landing replica's client going away is a :class:`Detach` (the stream stays for a resume); DELETE is an
  :class:`End`.

Nothing waits on a dead owner: the landing replica checks the owner's lease while it relays, and ends the response
when the lease lapses (the client then gets 404 for the session and initializes again, as the spec prescribes).
Nothing waits on a pump that stopped either: while the store is away, what an owner's pump sends (and the history a
resume replays) waits for it, however long it stays away, so a relayed stream ends only with its final message, a
refusal, a detach or a newer resume, and its next event arrives once the store is back.
URL completions reach the connection that started them the same way (:class:`UrlComplete`).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import msgspec

from ...state import Backoff, SessionRecord, Store, StoreUnavailable, Subscription, replica_channel
from ...telemetry import _state as _telemetry
from .._url import UrlComplete
from ._peer_wire import (
    Attach,
    Closed,
    Deliver,
    Detach,
    End,
    Hop,
    Item,
    Moved,
    Open,
    Opened,
    PeerMessage,
    RemoteStream,
    decode_peer_message,
    encode_peer_message,
)

if TYPE_CHECKING:
    from .._url import UrlElicitations
    from ._handshake import SessionTransport
    from ._streams import Claim, Stream

logger = logging.getLogger("elicitor.http")
_Job = TypeVar("_Job")


OPENED_KEPT = 4096
"""Forwarded requests and GETs whose tokens an owner remembers, to serve each once: a copy sent again during an
outage arrives within seconds of the first, among far fewer requests than this (each entry about 0.1 KiB)."""


class Peers:
    """One replica's part in serving sessions across replicas: the listener on its channel, and both stream ends.

    ``sessions`` is the app's table of the handshake sessions this replica runs (by id).
    """

    def __init__(
        self,
        store: Store,
        sessions: dict[str, SessionTransport],
        urls: UrlElicitations,
        end_session: Callable[[SessionTransport], Coroutine[Any, Any, None]],
        *,
        check_every: float = 2.0,
        gone_after: float = 7.0,
    ) -> None:
        self._store = store
        self._sessions = sessions
        self._urls = urls
        self._end_session = end_session
        self._relays: dict[str, RemoteStream] = {}
        self._pumps: dict[str, anyio.CancelScope] = {}
        self._opened: dict[str, None] = {}
        """The tokens of the last ``OPENED_KEPT`` requests forwarded here, oldest first (see :meth:`_serve_open`)."""
        self._detached: dict[str, None] = {}
        """Tokens of relays that left before their pump here started (the last ``OPENED_KEPT``): the relay hears
        that its stream opened before the pump starts, and may leave at once; the pump then stops as it starts."""
        self._recalls: dict[str, str] = {}
        """Owners by the tokens of requests that could not be sent to them, oldest first (see :meth:`_recall`)."""
        self._recalling = False
        self.draining = False
        """This replica is shutting down: the streams it relays end as they open (see :meth:`drain`)."""
        self.check_every = check_every
        self.gone_after = gone_after
        """Seconds an owner's lease must stay lapsed before its sessions are gone: long enough that an owner that
        stalls (stopped, a long pause) for a lease and more keeps them (see ``gone_after`` in :mod:`._handshake`)."""
        self._tg: anyio.abc.TaskGroup | None = None
        self.subscription = Subscription("peers")
        """This replica's own queue (``replica:<id>``), as ``/healthz`` reports it."""
        self._offset = "0"
        """The offset of the last message handled from this replica's queue (its id is new: start at the start)."""
        self.send_for = 10.0
        """Seconds an owner tries to send a stream's message to the replica relaying it before it logs that it cannot
        (it goes on trying: see :meth:`_send`)."""

    @property
    def me(self) -> str:
        return self._store.replica

    def drain(self) -> None:
        """This replica is shutting down: every stream it relays that has opened ends now (each relay then tells
        its owner to stop pumping, the stream kept there for a resume), and so will those that open from now on.
        A stream not opened yet opens first: its request was sent to its owner, and a refusal now could have the
        client send it again, running it twice."""
        self.draining = True
        for relay in list(self._relays.values()):
            if relay.key:
                relay.end()

    # ---- the listener --------------------------------------------------------------------------------------

    async def listen(self) -> None:
        """Serve this replica's queue until cancelled, reading again from the last offset handled whenever the
        connection is lost: nothing sent to this replica meanwhile is missed."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                await self.subscription.run(
                    lambda: self._store.bus.read(replica_channel(self.me), self._offset), self._handle
                )
            finally:
                self._tg = None  # nothing more is started there (a relay ending after this detaches on its own)

    @property
    def listening(self) -> bool:
        """Whether this replica reads its queue now (it cannot relay streams otherwise: not ready)."""
        return self.subscription.listening

    async def _handle(self, item: tuple[str, bytes]) -> None:
        self._offset, payload = item
        try:
            message = decode_peer_message(payload)
        except (msgspec.DecodeError, msgspec.ValidationError):
            logger.warning("ignored a malformed message from another replica")
            return
        self._on(message)

    def _on(self, message: PeerMessage) -> None:
        """Hand ``message`` on without waiting for anything: whatever takes time (a session that is slow to read,
        a store write) runs in a task of its own, so one slow session never holds up the others' messages."""
        if isinstance(message, Opened | Item | Closed):
            relay = self._relays.get(message.token)
            if relay is not None:
                relay.push(message)
                if self.draining:
                    relay.end()
        elif isinstance(message, Deliver):
            session = self._sessions.get(message.session)
            if session is not None:
                hop = message.hop
                if hop is not None and _telemetry.state.on:  # the hop, in the trace of the request it answers
                    from ...telemetry import _hooks

                    question = session.waiting_spans.get(hop.answered)
                    _hooks.received_forwarded(question, hop.span, hop.answered, hop.sent, hop.by, session.id)
                session.deliver_soon(message.body, self._start_task)
        elif isinstance(message, Open):
            self._serve_open(message)
        elif isinstance(message, Attach):
            if self._first(message.token):
                self._start(self._serve_attach, message)
        elif isinstance(message, Detach):
            scope = self._pumps.get(message.token)
            if scope is not None:
                scope.cancel()
            else:  # its pump has not started yet (it tells the relay the stream opened first), or has ended
                self._detached[message.token] = None
                if len(self._detached) > OPENED_KEPT:
                    del self._detached[next(iter(self._detached))]
        elif isinstance(message, End):
            session = self._sessions.get(message.session)
            if session is not None:
                self._start(self._end_session, session)
        elif isinstance(message, UrlComplete):
            self._start(self._notify_url, message)

    async def _notify_url(self, message: UrlComplete) -> None:
        if message.trace is not None and _telemetry.state.on:  # the notice, in the trace of the completion
            from ...telemetry import _hooks

            with _hooks.in_task_origin({"traceparent": message.trace}):
                await self._urls.notify_local(message.connection, message.elicitation)
            return
        await self._urls.notify_local(message.connection, message.elicitation)

    def _start_task(self, job: Callable[[], Coroutine[Any, Any, None]]) -> None:
        assert self._tg is not None
        self._tg.start_soon(job)

    def _start(self, serve: Callable[[_Job], Coroutine[Any, Any, None]], job: _Job) -> None:
        assert self._tg is not None
        self._tg.start_soon(self._guarded, serve, job)

    async def _guarded(self, serve: Callable[[_Job], Coroutine[Any, Any, None]], job: _Job) -> None:
        """Run one job off the listener; nothing it raises may end the listener (and the replica with it)."""
        try:
            await serve(job)
        except StoreUnavailable as exc:
            logger.warning("a message between replicas was not served: %s", exc)
        except Exception:
            logger.exception("a message between replicas was not served")

    # ---- the owner's end -----------------------------------------------------------------------------------

    async def _publish(self, replica: str, message: PeerMessage) -> None:
        """Put ``message`` in ``replica``'s queue (durably: it is read from there, however late)."""
        await self._store.bus.append(replica_channel(replica), encode_peer_message(message))

    async def _send(self, replica: str, message: PeerMessage) -> None:
        """:meth:`_publish`, tried again until it is sent (a Redis restart, failover or pause), logged once it has
        failed for ``send_for`` seconds.

        Why not give up after a while: a message fails to go only while the store is away (a replica's queue takes
        messages whether or not anyone reads it), and the relay waiting for it has no other way to learn that its
        pump stopped. A pump that gave up left a client's stream open with nothing to feed it until the client
        left; trying on until the store is back costs one attempt a second, and a detach or a newer resume still
        stops the pump (it is cancelled, and gives back what it held).
        """
        backoff = Backoff(first=0.1, most=1.0)
        since = anyio.current_time()
        logged = False
        while True:
            try:
                await self._publish(replica, message)
                return
            except StoreUnavailable as exc:
                if not logged and anyio.current_time() - since >= self.send_for:
                    logger.warning("cannot reach replica %s yet, still trying: %s", replica, exc)
                    logged = True
            await backoff.pause()

    async def _replayed(self, stream: Stream, after: int) -> list[tuple[int, bytes]]:
        """``stream``'s kept events after ``after``, read again until the store answers (as :meth:`_send`): the
        relay was told its stream opened, and must not wait on a pump that stopped."""
        backoff = Backoff(first=0.1, most=1.0)
        while True:
            try:
                return await stream.replay(after)
            except StoreUnavailable:
                await backoff.pause()

    def _first(self, token: str) -> bool:
        """Whether a request forwarded here under ``token`` (an :class:`Open` or :class:`Attach`) is new: one sent
        again after a try that timed out, yet arrived, is served once."""
        if token in self._opened:
            logger.debug("ignored a request forwarded again (token %s)", token)
            return False
        self._opened[token] = None
        if len(self._opened) > OPENED_KEPT:
            del self._opened[next(iter(self._opened))]
        return True

    def _serve_open(self, message: Open) -> None:
        if not self._first(message.token):
            return
        session = self._sessions.get(message.session)
        if session is None:
            self._start(
                self._refuse, (message.reply, Closed(message.token, 404, "Session not found: initialize a new session"))
            )
            return
        if message.request in session.streams:
            reason = f"Invalid request: id {message.request!r} is already in flight"
            self._start(self._refuse, (message.reply, Closed(message.token, 400, reason)))
            return
        stream = session.open(message.request)
        hop = message.hop
        if hop is not None and _telemetry.state.on:  # the request's span links to the hop (telemetry/_hooks/)
            from ...telemetry import _hooks

            wait = max(0, time.time_ns() - hop.sent) / 1e9
            session.forwarded[message.request] = _hooks.Forwarded(hop.span, hop.by, wait)
        if message.peer is not None and _telemetry.state.on:  # who sent it, as if it had been POSTed here
            session.peers[message.request] = dict(message.peer)
        session.deliver_soon(message.body, self._start_task)  # in order with the Delivers that follow it
        self._start(self._pump_new, (stream, message.reply, message.token))

    async def _refuse(self, job: tuple[str, Closed]) -> None:
        await self._send(*job)

    async def _pump_new(self, job: tuple[Stream, str, str]) -> None:
        stream, reply, token = job
        claim = stream.claim(supersede=True)  # a new stream: nobody holds it
        assert claim is not None
        try:
            await self._pump(stream, 0, reply, token, claim, replay=False)
        finally:
            stream.release(claim)

    async def _serve_attach(self, message: Attach) -> None:
        session = self._sessions.get(message.session)
        if session is None:
            await self._send(message.reply, Closed(message.token, 404, "Session not found: initialize a new session"))
            return
        stream = session.standalone if message.stream is None else session.stream(message.stream)
        if stream is None:
            reason = "Unknown Last-Event-ID: that stream cannot be resumed"
            await self._send(message.reply, Closed(message.token, 404, reason))
            return
        claim = stream.claim(supersede=message.stream is not None)  # a resume supersedes (see _streams)
        if claim is None:
            reason = "Conflict: that stream is already being delivered"
            await self._send(message.reply, Closed(message.token, 409, reason))
            return
        try:
            await claim.settle()
            await self._send(message.reply, Opened(message.token, stream.key))
            await self._pump(stream, message.after, message.reply, message.token, claim, replay=True)
        finally:
            stream.release(claim)

    async def _pump(
        self, stream: Stream, delivered: int, reply: str, token: str, claim: Claim, *, replay: bool
    ) -> None:
        """Send ``stream``'s events after ``delivered`` to ``reply`` until its final one, a detach, a newer resume
        (``claim`` superseded: the relay is closed with 409 so that its response ends), or the stream's end."""
        try:
            with anyio.CancelScope() as scope:
                self._pumps[token] = scope
                if token in self._detached:  # its relay left already
                    del self._detached[token]
                    scope.cancel()
                claim.bind(scope)
                if replay:
                    for sequence, message in await self._replayed(stream, delivered):
                        await self._send(reply, Item(token, stream.key, sequence, message, False))
                        delivered = sequence
                    if stream.done and delivered >= stream.sequence:
                        await self._send(reply, Closed(token, 0, ""))
                        return
                while True:
                    try:
                        item = await stream.take()
                    except (anyio.EndOfStream, anyio.ClosedResourceError):
                        await self._send(reply, Closed(token, 404, "Session ended"))
                        return
                    sequence, message, final = item
                    if sequence <= delivered:
                        continue
                    if delivered < stream.dropped:  # the relay fell behind: its client resumes from the store
                        stream.give_back(item)
                        await self._send(reply, Closed(token, 503, "Service unavailable: resume the stream"))
                        return
                    try:
                        await self._send(reply, Item(token, stream.key, sequence, message, final))
                    except BaseException:
                        stream.give_back(item)  # detached or superseded meanwhile: the next pump starts with it
                        raise
                    delivered = sequence
                    if final:
                        return
        finally:
            self._pumps.pop(token, None)
        if claim.superseded:  # sent until it is: the relay would wait on this pump otherwise
            await self._send(reply, Closed(token, 409, "Conflict: a newer resume of that stream delivers it"))

    # ---- the landing replica's end -------------------------------------------------------------------------

    async def _forward(self, owner: str, session_id: str, message: PeerMessage, expected: SessionRecord | None) -> None:
        """Put ``message`` in ``owner``'s queue; with ``expected`` (an owner remembered, not just looked up), only
        if the directory still says so, checked in the same round trip.

        Raises:
            Moved: ``expected`` is no longer true (nothing was sent).
            StoreUnavailable: the message could not be sent.
        """
        if expected is None:
            await self._publish(owner, message)
        elif not await self._store.forward(session_id, expected, encode_peer_message(message)):
            raise Moved(session_id)

    async def deliver(self, owner: str, session_id: str, body: bytes, expected: SessionRecord | None = None) -> None:
        """Forward a message that needs no answer stream: once this returns it is in the owner's queue.

        Raises:
            Moved: ``expected`` is no longer true (see :meth:`_forward`; it was not delivered).
            StoreUnavailable: the message could not be sent (a try that timed out may still arrive: Redis ran it late).
        """
        hop = None
        if _telemetry.state.on:
            from ...telemetry import _hooks

            answer = _hooks.forwarded_answer()  # an answer, forwarded inside a span (see ``forwarding``)
            if answer is not None:
                hop = Hop(answer[0], answer[1], time.time_ns(), self.me)
        await self._forward(owner, session_id, Deliver(session_id, body, hop), expected)

    async def end(self, owner: str, session_id: str) -> None:
        """Ask ``owner`` to end a session (in its queue once this returns; sent twice, it ends the session once).

        Raises:
            StoreUnavailable: the message could not be sent (it may still arrive, if the store ran it late).
        """
        await self._publish(owner, End(session_id))

    @asynccontextmanager
    async def relay(
        self,
        owner: str,
        session_id: str,
        request: Callable[[str, str], Open | Attach],
        expected: SessionRecord | None = None,
        patiently: Callable[[Callable[[], Awaitable[None]]], Awaitable[None]] | None = None,
    ) -> AsyncIterator[RemoteStream]:
        """Ask ``owner`` to pump a stream here; yields it.

        ``patiently`` (given a POST's hold) sends the request again while the store cannot be reached, under the
        same token: a try that timed out may still reach the owner later, which then serves the first copy it reads
        and ignores the others (see :meth:`_serve_open`), and pumps to this same relay.

        While the block runs, the owner's lease is checked every few seconds: a dead owner ends the stream.
        Leaving the block before the stream finished tells the owner to stop (the stream stays for a resume).

        Raises:
            Moved: ``expected`` is no longer true (see :meth:`_forward`; nothing was sent, the block did not run).
            StoreUnavailable: the request could not be sent to the owner (a try that still reaches it later has its
                pump stopped there: a detach follows it once the store takes it).
        """
        token = secrets.token_hex(12)
        message = request(self.me, token)
        hop = None
        if _telemetry.state.on and isinstance(message, Open):
            from ...telemetry import _hooks

            hop = _hooks.forwarded_request()  # a request, forwarded inside a span (see ``forwarding``)
        opened = message if hop is not None and isinstance(message, Open) else None

        async def send() -> None:
            if not self.listening:  # the owner's answer could not be read: not sent
                raise StoreUnavailable("this replica is not connected to the other replicas yet")
            sent = message
            if opened is not None and hop is not None:  # stamped as each try is sent
                sent = msgspec.structs.replace(opened, hop=Hop(hop, opened.request, time.time_ns(), self.me))
            await self._forward(owner, session_id, sent, expected)

        stream = self._relays[token] = RemoteStream(token)
        try:
            try:
                await (send() if patiently is None else patiently(send))
            except StoreUnavailable:
                # A try that timed out may still reach the owner (Redis ran it late): what it starts there must
                # stop, or it pumps to nobody (and holds the standalone stream, every later GET answered 409).
                self._recall(owner, token)
                raise
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch, owner, session_id, stream)
                yield stream
                tg.cancel_scope.cancel()
            if not stream.finished:  # sent once the store lets it (the owner's pump would feed nobody meanwhile)
                if self._tg is not None:
                    self._recall(owner, token)
                else:
                    with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                        await self._send(owner, Detach(token))
        finally:
            self._relays.pop(token, None)
            stream.close()

    def _recall(self, owner: str, token: str) -> None:
        """Detach ``token`` at ``owner`` once the store takes it: its relay left before the stream's end, or a
        request under it could not be sent, yet a try may still reach the owner. One task sends them all, in order,
        however many relays left or requests were refused (a long outage under heavy traffic); past ``OPENED_KEPT``
        the oldest is let go."""
        self._recalls[token] = owner
        if len(self._recalls) > OPENED_KEPT:
            del self._recalls[next(iter(self._recalls))]
        if not self._recalling and self._tg is not None:
            self._recalling = True
            self._start(self._send_recalls, None)

    async def _send_recalls(self, _: None) -> None:
        try:
            while self._recalls:
                token, owner = next(iter(self._recalls.items()))
                await self._send(owner, Detach(token))
                self._recalls.pop(token, None)
        finally:
            self._recalling = False

    async def _watch(self, owner: str, session_id: str, stream: RemoteStream) -> None:
        """End ``stream`` when its owner is gone: its lease found lapsed on every check for ``gone_after`` seconds
        (a single miss can be a Redis restart that the owner has not yet renewed its lease after, or the owner
        stalled a few seconds).

        While the store is away nothing is decided: the owner's pump waits for the store as this replica does (see
        :meth:`_send`), so the stream's next event arrives once it is back, and ending the stream meanwhile would
        only send the client to resume it from a store that cannot answer yet (the official SDK's client tries
        that twice, then fails the call)."""
        lapsed_since: float | None = None
        while not stream.finished:
            await anyio.sleep(self.check_every)
            try:
                record = await self._store.sessions.lookup(session_id)
            except StoreUnavailable:
                continue
            if record is not None and record.alive and record.owner == owner:
                lapsed_since = None
                continue
            now = anyio.current_time()
            lapsed_since = now if lapsed_since is None else lapsed_since
            if now - lapsed_since >= self.gone_after or (record is not None and record.owner != owner):
                stream.lost()
                return
