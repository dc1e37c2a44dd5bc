"""A JSON-RPC session on anyio: the I/O shell around the sans-I/O :class:`~elicitor.protocol.Connection`.

One task reads; every peer request runs in its own task (a slow handler — a person filling a form — never blocks
the read loop, and a handler may itself send requests); every request we send waits on an :class:`anyio.Event`.
All tasks live in the session's task group, whose lifetime is one ``async with``.

When the peer goes away, requests we await fail with :class:`~elicitor.ConnectionClosed` and the handlers of its
requests are cancelled. When a task awaiting our request is cancelled, the peer is told with
``notifications/cancelled`` from a shielded ``finally``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager, nullcontext, suppress
from typing import Any, Protocol

import anyio
import anyio.abc
from anyio import TaskHandle

from .._exceptions import ConnectionClosed, JSONRPCError
from .._loop import Carrier, EagerStarter, running_asyncio_loop
from .._sentences import CLOSED, CLOSED_UNANSWERED, PEER_ENDED
from ..protocol import (
    Connection,
    ErrorReceived,
    Event,
    InvalidMessage,
    NotificationReceived,
    Oversized,
    RequestCancelled,
    RequestReceived,
    ResultReceived,
    split_batch,
)
from ..telemetry import _state as _telemetry
from ..transports import Transport
from ..types import JSONObject, RequestId
from ._deadlines import Deadlines
from ._errors import internal_error, stray_excerpt
from ._waiter import Waiter

logger = logging.getLogger("elicitor.session")

RequestHandler = Callable[[RequestReceived], Awaitable[JSONObject]]
"""Answers one peer request: return the result, or raise :class:`JSONRPCError` to answer with an error."""

NotificationHandler = Callable[[NotificationReceived], Awaitable[None]]

MAX_INCOMING = 65536
"""Peer requests a session serves at once by default; beyond it new ones are refused (-32603, "retry later")."""

_UNSCOPED = nullcontext()
"""The scope of a request's task where its task is its scope (an anyio task group's task)."""

_CANCEL_GRACE = 5.0
"""How long a shielded cleanup may try to tell the peer that a request was cancelled."""

INPUT_ENDED_GRACE = 2.0
"""How long a session whose transport answers after its input ends (a stdio server's: the client closed its
stdin) lets the requests it read finish and be answered before it closes: what was sent before the end is
answered (``printf '...' | server``), and a client that closes stdin and waits for the server to exit, as the spec
says, waits no longer than this for requests it left running."""


class Taken(Protocol):
    """A peer request :attr:`Session.take` took: answered through :meth:`Session.answer` by whoever took it."""

    def cancel(self) -> None:
        """Stop serving it (the peer cancelled it, or the session ended): it is not answered."""
        ...


class _Pending(Waiter):
    """A request we sent, waiting for its answer: the :class:`Waiter` itself (one object less per waiting call)."""

    __slots__ = ("carrier", "error", "expired", "result")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        super().__init__(loop)
        self.result: JSONObject | None = None
        self.error: BaseException | None = None
        self.expired = False
        self.carrier: Carrier | None = None
        """The requester's carrier if an :class:`~elicitor._loop.EagerStarter` started it: woken in the reading
        callback that reads the answer (see :meth:`Session._answered`)."""

    def expire(self) -> None:
        """The deadline passed before the peer answered: wake the requester, which gives up."""
        if not self.is_set():
            self.expired = True
            self.set()


class Session:
    """A live JSON-RPC peer. Use :func:`open_session`; do not construct directly.

    Args:
        on_request: called in a new task for each peer request.
        on_notification: called inline for each notification (keep it quick).
    """

    def __init__(
        self,
        transport: Transport,
        task_group: anyio.abc.TaskGroup,
        on_request: RequestHandler,
        on_notification: NotificationHandler,
        *,
        max_incoming: int,
        eager: bool = False,
    ) -> None:
        self.transport = transport
        self.connection = Connection(max_incoming=max_incoming)
        self._tg = task_group
        self._on_request = on_request
        self._on_notification = on_notification
        self._pending: dict[RequestId, _Pending] = {}
        self._inflight: dict[RequestId, TaskHandle[None] | anyio.CancelScope | Taken] = {}
        self.take: Callable[[RequestReceived], Taken | None] | None = None
        """Offered each peer request before a task is started for it: what it takes (it returns what cancels it)
        is answered with :meth:`answer` by whoever took it, with no task of its own; ``None`` leaves the request
        to ``on_request`` in a task, as usual. (A 2026-07-28 round whose run waits here is answered by the run.)"""
        self._tasks: dict[anyio.CancelScope, asyncio.Task[None]] = {}
        """On asyncio, the scopes of the tasks answering peer requests, and those tasks (see :meth:`_spawn`)."""
        self._closed = False
        self._input_ended = False
        """The peer's side ended (see :meth:`_drain`): nothing more can be asked of it."""
        self.peer_ended: str | None = None
        """How the connection ended from the peer's side before this side closed it, for telemetry (the session
        metrics' ``error.type``): ``idle`` (its input ended with nothing under way: how a stdio client ends a
        session), ``busy`` (it ended while we waited on the peer or served a request of its), ``broken`` (the
        transport failed); ``None`` while it lasts, or when this side closed it."""
        self._closed_event = anyio.Event()
        self._loop = running_asyncio_loop()
        self._scope_type: Callable[[], anyio.CancelScope] = (
            type(anyio.CancelScope()) if self._loop else anyio.CancelScope
        )
        """What makes a request's cancel scope: on asyncio the backend's class itself (``anyio.CancelScope()`` looks
        the backend up on every call, a third of the cost of starting a request's task)."""
        self._deadlines = Deadlines(self._loop) if self._loop is not None else None
        self._starter = EagerStarter(self._loop) if eager and self._loop is not None else None
        """Starts the requests the reading callback reads with their first step taken there (see :meth:`_spawn`),
        in tasks it can wake when it reads the answer to a request they wait on (see :meth:`_answered`)."""
        """When the requests we wait on with a timeout give up (asyncio): one timer for all of them."""
        self._held: tuple[bytes, Event] | None = None
        """A message :meth:`_dispatch_now` classified but left to the read loop, with what it was classified as."""
        self.revision: str | None = None
        """The revision the handshake agreed (handshake era), for telemetry: the ``mcp.protocol.version`` of the
        requests this side sends, which, unlike a 2026-07-28 request's, do not say it themselves."""
        self.batches = False
        """Take a JSON-RPC batch from the peer as its messages one by one (a client speaking 2025-03-26 or
        2024-11-05 with its server, which may send them: see :func:`~elicitor.protocol.split_batch`); otherwise a
        batch is refused like any message that is not an object."""
        deliver_to: Callable[[Callable[[bytes | Oversized], bool]], None] | None = getattr(
            transport, "deliver_to", None
        )
        if deliver_to is not None and self._loop is not None:
            deliver_to(self._dispatch_now)
        _telemetry.refresh()

    @property
    def closed(self) -> bool:
        return self._closed

    def start_soon(self, func: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``func`` in the session's task group (cancelled when the session ends)."""
        self._tg.start_soon(func)

    async def wait_closed(self) -> None:
        """Wait until the connection has ended (the peer closed it, or the session was closed)."""
        await self._closed_event.wait()

    # ---- sending -------------------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        params: JSONObject | None = None,
        *,
        related: RequestId | None = None,
        timeout: float | None = None,
        sent: Callable[[RequestId], None] | None = None,
    ) -> Awaitable[JSONObject]:
        """Send a request and wait for its result, at most ``timeout`` seconds if given.

        ``sent`` is told the id the request goes out with (a proxy maps what the peer says about it back).

        A request that times out is treated like a cancelled one: the peer is told with ``notifications/cancelled``
        and a late answer is ignored (2025-11-25 basic/lifecycle, "Timeouts").

        Raises:
            JSONRPCError: the peer answered with an error.
            ConnectionClosed: the connection ended first.
            TimeoutError: no answer within ``timeout`` seconds.
        """
        if _telemetry.state.on:  # a CLIENT span, its context in params._meta (telemetry/_hooks.py)
            return self._traced_request(method, params, related, timeout, sent)
        return self._request(method, params, related, timeout, sent)

    async def _traced_request(
        self,
        method: str,
        params: JSONObject | None,
        related: RequestId | None,
        timeout: float | None,
        sent: Callable[[RequestId], None] | None,
    ) -> JSONObject:
        from ..telemetry import _hooks

        def send(params: JSONObject | None, traced: Callable[[RequestId], None]) -> Awaitable[JSONObject]:
            def both(request_id: RequestId) -> None:
                traced(request_id)
                if sent is not None:
                    sent(request_id)

            return self._request(method, params, related, timeout, both)

        transport = self.transport
        network = getattr(transport, "network", "pipe")  # "http" on the HTTP transports
        return await _hooks.send_request(
            send,
            method,
            params,
            network,
            getattr(transport, "session_id", None),
            getattr(transport, "url", None),
            getattr(transport, "waiting_spans", None),  # a replica's session: see SessionTransport
            self.revision,
        )

    async def _request(
        self,
        method: str,
        params: JSONObject | None,
        related: RequestId | None,
        timeout: float | None,
        sent: Callable[[RequestId], None] | None,
    ) -> JSONObject:
        if self._closed or self._input_ended:
            raise ConnectionClosed(str(CLOSED))
        request_id, data = self.connection.send_request(method, params)
        if sent is not None:
            sent(request_id)
        pending = self._pending[request_id] = _Pending(self._loop)
        if self._starter is not None:
            pending.carrier = self._starter.carrier()
        deadlines = self._deadlines if timeout is not None else None
        try:
            await self._send(data, related)
            del data  # not kept alive while the peer (perhaps a person) takes its time
            if timeout is None:
                await pending.wait()
            elif deadlines is not None:  # an entry in the session's deadlines: no timer or cancel scope per request
                deadlines.add(pending, timeout)
                await pending.wait()
            else:
                with anyio.move_on_after(timeout):
                    await pending.wait()
                pending.expire()
            if pending.expired:
                raise TimeoutError(f"the peer did not answer {method} within {timeout:g} s")
        except BaseException:
            if not pending.is_set() or pending.expired:
                self._pending.pop(request_id, None)
                reason = "the requester no longer waits for it"
                if _telemetry.state.on and not self._closed and self.connection.awaits(request_id):
                    with anyio.move_on_after(_CANCEL_GRACE, shield=True):
                        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                            await self._traced_cancel(request_id, reason, related)
                    raise
                notice = self.connection.cancel_request(request_id, reason)
                if notice is not None and not self._closed:
                    with anyio.move_on_after(_CANCEL_GRACE, shield=True):
                        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                            await self._send(notice, related)
            raise
        finally:
            if deadlines is not None:
                deadlines.discard(pending)
        if pending.error is not None:
            raise pending.error
        assert pending.result is not None
        return pending.result

    async def notify(self, method: str, params: JSONObject | None = None, *, related: RequestId | None = None) -> None:
        """Send a notification; silently dropped if the connection is already closed. With telemetry on, a
        ``CLIENT`` span, its context in ``params._meta`` (as a request's)."""
        if self._closed:
            return
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            if _telemetry.state.on:
                from ..telemetry import _hooks

                async def send(params: JSONObject | None) -> None:
                    await self._send(self.connection.send_notification(method, params), related)

                await _hooks.send_notification(send, method, params, *self._network())
                return
            await self._send(self.connection.send_notification(method, params), related)

    async def _traced_cancel(self, request_id: RequestId, reason: str, related: RequestId | None) -> None:
        """Send the ``notifications/cancelled`` of our request ``request_id`` under its span, the trace context in
        its ``_meta`` (telemetry/_hooks.py, ``cancelling``)."""
        from ..telemetry import _hooks

        async def send(params: JSONObject | None) -> None:
            meta = (params or {}).get("_meta")
            notice = self.connection.cancel_request(request_id, reason, meta if isinstance(meta, dict) else None)
            if notice is not None:
                await self._send(notice, related)

        await _hooks.cancelling(send, {"requestId": request_id, "reason": reason}, *self._network())

    def _network(self) -> tuple[str, str | None, str | None]:
        """For telemetry: the transport (``pipe``, or ``http`` on the HTTP transports), the HTTP session's id and
        the endpoint's URL, as the spans of this session's messages say them."""
        transport = self.transport
        return (
            getattr(transport, "network", "pipe"),
            getattr(transport, "session_id", None),
            getattr(transport, "url", None),
        )

    async def _send(self, data: bytes, related: RequestId | None, *, final: bool = False) -> None:
        await self.transport.send(data, related, final=final)

    # ---- receiving -----------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Read until the peer closes the connection, dispatching as we go."""
        try:
            while True:
                try:
                    message = await self.transport.receive()
                except anyio.EndOfStream:
                    if not self._closed:
                        self.peer_ended = "busy" if self._pending or self._inflight else "idle"
                    if getattr(self.transport, "answers_after_input_ends", False):
                        await self._drain()
                    return
                except anyio.BrokenResourceError:
                    if not self._closed:
                        self.peer_ended = "broken"
                    return
                except anyio.ClosedResourceError:
                    return
                if isinstance(message, Oversized):
                    await self._oversized(message)
                    continue
                await self.dispatch(message)
        finally:
            self._close()

    async def _drain(self) -> None:
        """The peer's input ended (it closed our stdin) but it may still read: answer the requests read before the
        end that finish within :data:`INPUT_ENDED_GRACE`, then close. Nothing can be asked of the peer any more:
        what waits on it fails with :class:`~elicitor.ConnectionClosed` now (an elicitation ends the tool's wait
        at once), and so does anything asked later."""
        self._input_ended = True
        for pending in self._pending.values():
            pending.error = ConnectionClosed(str(PEER_ENDED))
            self._answered(pending)
        self._pending.clear()
        with anyio.move_on_after(INPUT_ENDED_GRACE):
            while self._inflight:
                await anyio.sleep(0.01)

    async def _oversized(self, message: Oversized) -> None:
        """A message dropped for its size: the request of ours it answered fails with
        :class:`~elicitor.MessageTooLarge`, a request of the peer's is refused under its id (see
        :meth:`Connection.receive_oversized`)."""
        event = self.connection.receive_oversized(message)
        if isinstance(event, InvalidMessage):
            logger.warning("dropped a %d-byte message from the peer: %s", message.size, event.error)
            if event.reply is not None:
                await self._reply(event.reply, None)
            return
        logger.warning(
            "dropped a %d-byte answer from the peer: over the limit of %d bytes", message.size, message.limit
        )
        self._act_now(event)

    def _dispatch_now(self, message: bytes | Oversized) -> bool:
        """Act on ``message`` at once, from the transport's reading callback, if nothing in it waits: a request
        (its task started), a result or an error (its requester woken). Anything else is left to the read loop
        (``False``), which gets the same message next and everything after it in order.

        The read loop's own task need not wake for the messages of a busy exchange (a 2026-07-28 retry, a result):
        one pass of the event loop fewer per message on either side.
        """
        if self._closed or type(message) is not bytes:
            return False
        event = self.connection.receive(message)
        if not self._act_now(event):
            self._held = (message, event)
            return False
        return True

    def _act_now(self, event: Event) -> bool:
        """Act on ``event`` if nothing in it waits (see :meth:`_dispatch_now`); ``False`` if it needs the loop."""
        if isinstance(event, RequestReceived):
            taken = self.take(event) if self.take is not None else None
            handle = taken if taken is not None else self._spawn(event)
            if handle is not None:  # None: answered already, in the step that started its task
                self._inflight[event.id] = handle
        elif isinstance(event, ResultReceived):
            pending = self._pending.pop(event.id, None)
            if pending is not None:
                pending.result = event.result
                self._answered(pending)
        elif isinstance(event, ErrorReceived):
            pending = self._pending.pop(event.id, None)
            if pending is not None:
                pending.error = event.error
                self._answered(pending)
        else:
            return False
        return True

    def _answered(self, pending: _Pending) -> None:
        """Wake the requester of ``pending``: at once, in the reading callback, if this session's starter started
        it (its answer is acted on in the pass that read it, one pass of the event loop fewer per answer)."""
        pending.set()
        if pending.carrier is not None and self._starter is not None and pending._future is not None:
            self._starter.wake(pending.carrier, pending._future)

    async def dispatch(self, message: bytes) -> None:
        """Act on one framed message from the peer."""
        held = self._held
        if held is not None and held[0] is message:  # classified already, by _dispatch_now
            self._held = None
            event = held[1]
        else:
            event = self.connection.receive(message)
        if self._act_now(event):
            return
        if isinstance(event, NotificationReceived):
            try:
                if _telemetry.state.on:  # a SERVER span, parented by the context in params._meta
                    from ..telemetry import _hooks

                    network, session_id, _url = self._network()
                    handle = functools.partial(self._on_notification, event)
                    await _hooks.serve_notification(
                        handle, event.method, event.params, network, session_id, self._heard_over()
                    )
                else:
                    await self._on_notification(event)
            except Exception:
                logger.exception("notification handler failed for %s", event.method)
        elif isinstance(event, RequestCancelled):
            running = self._inflight.pop(event.id, None)
            if _telemetry.state.on:  # notifications/cancelled is a span too, in the trace its sender names
                from ..telemetry import _hooks

                async def cancel() -> None:
                    if running is not None:
                        running.cancel()

                network, session_id, _url = self._network()
                await _hooks.serve_notification(
                    cancel, "notifications/cancelled", event.params, network, session_id, self._heard_over()
                )
            elif running is not None:
                running.cancel()
        else:
            assert isinstance(event, InvalidMessage)
            batch = split_batch(message) if self.batches and message[:1] != b"{" else None
            if batch is not None:
                for one in batch:
                    await self.dispatch(one)
                return
            if getattr(self.transport, "reads_peer_stdout", False) and str(event.error).startswith("Parse error"):
                # Not JSON at all on a stdio server's stdout: almost always a stray print() or a log handler
                # writing there. Say what it was and where it belongs; a -32700 reply would only puzzle the server.
                logger.warning(
                    "the server wrote a line that is not an MCP message to its stdout, ignored: %s; stdout is the "
                    "protocol channel (basic/transports, stdio): a server's prints and logs belong on stderr",
                    stray_excerpt(message),
                )
                return
            logger.warning("invalid message from peer: %s", event.error)
            if event.reply is not None:
                await self._reply(event.reply, None)

    def _spawn(self, request: RequestReceived) -> TaskHandle[None] | anyio.CancelScope | None:
        """Start answering ``request`` in a task of its own; what is returned cancels it, ``None`` if it is
        answered already.

        On asyncio that is a bare task whose handler runs in an anyio cancel scope of its own (cancelling the scope
        honours the shielded cleanups inside, as cancelling an anyio task does), kept in ``_tasks`` and awaited
        when the session ends (:meth:`_finish`). An anyio task group's ``start_soon`` does the same for about
        twice the CPU (``bench/``: a request per 2026-07-28 round) and 3.9 KiB instead of 2.0 per waiting call.
        The task takes itself out of ``_tasks`` as it ends (a done callback would cost the event loop one more
        pass per request).

        In an ``eager`` session, a request read by the transport's reading callback (:meth:`_dispatch_now`) takes
        its first step there (:class:`~elicitor._loop.EagerStarter`): a handler that answers without waiting (a
        script, a cached answer, ``ping``) answers in the pass of the event loop that read the request, with no
        task made for it (``bench/``, scenario (a): the answer leaves one pass earlier).
        """
        if self._loop is None:
            return self._tg.start_soon(self._serve, request)
        scope = self._scope_type()
        if self._starter is not None:
            task = self._starter.start(self._serve(request, scope))
            if task is None:
                return None
        else:
            task = self._loop.create_task(self._serve(request, scope))
        self._tasks[scope] = task
        return scope

    async def _finish(self) -> None:
        """Cancel the request tasks still running (one may be writing its answer) and wait for them, as leaving a
        task group would; their shielded cleanups are bounded."""
        for scope in self._tasks:
            scope.cancel()
        while self._tasks:
            await asyncio.wait(list(self._tasks.values()))
            for scope, task in list(self._tasks.items()):
                if task.done():  # one cancelled before its first step never ran the code that takes it out
                    del self._tasks[scope]

    async def _serve(self, request: RequestReceived, scope: anyio.CancelScope | None = None) -> None:
        """Answer one peer request, in ``scope`` if given (see :meth:`_spawn`). Cancelled through its task handle
        or scope when the peer cancels it."""
        request_id, method = request.id, request.method
        try:
            with scope if scope is not None else _UNSCOPED:
                data: bytes | None = None
                try:
                    # With telemetry on, a SERVER span parented by the context in params._meta.
                    answer = self._traced(request) if _telemetry.state.on else self._on_request(request)
                    # The decoded request is not held while the handler waits (on a person, perhaps for minutes): what
                    # the handler needs of it, it took when called (0.7 KiB per waiting call over HTTP, tracemalloc).
                    del request
                    result = await answer
                except JSONRPCError as exc:
                    data = self.connection.send_error(request_id, exc)
                except ConnectionClosed:
                    pass  # the peer went away while the handler waited on it: nobody is left to answer
                except Exception as exc:
                    data = self.connection.send_error(request_id, internal_error(exc, f"handler for {method}"))
                else:
                    data = self.connection.send_result(request_id, result)
                finally:
                    # Answered, failed or cancelled (by the peer, or as the connection closed): no longer in flight.
                    self._inflight.pop(request_id, None)
                    self.connection.forget_incoming(request_id)
                if data is not None:
                    await self._reply(data, request_id, final=True)
        finally:
            if scope is not None:
                self._tasks.pop(scope, None)  # ended: see _spawn

    async def answer(self, request_id: RequestId, method: str, outcome: JSONObject | Exception) -> None:
        """Answer a request :attr:`take` took, as the request's own task answers the others: ``outcome`` is its
        result or what serving it raised. Nothing is sent for one cancelled meanwhile."""
        if self._inflight.pop(request_id, None) is None:
            return
        data: bytes | None = None
        if isinstance(outcome, JSONRPCError):
            data = self.connection.send_error(request_id, outcome)
        elif isinstance(outcome, Exception):
            if not isinstance(outcome, ConnectionClosed):  # the peer went away meanwhile: nobody is left to answer
                data = self.connection.send_error(request_id, internal_error(outcome, f"handler for {method}"))
        else:
            data = self.connection.send_result(request_id, outcome)
        self.connection.forget_incoming(request_id)
        if data is not None:
            await self._reply(data, request_id, final=True)

    def _traced(self, request: RequestReceived) -> Awaitable[JSONObject]:
        from ..telemetry import _hooks

        transport = self.transport
        network = getattr(transport, "network", "pipe")  # "http" on the HTTP transports
        peers = getattr(transport, "peers", None)  # who POSTed each request, over HTTP: see SessionTransport
        peer = peers.pop(request.id, None) if peers else None
        return _hooks.serve_request(
            self._on_request, request, request.method, request.params, request.id, network,
            getattr(transport, "session_id", None),
            getattr(transport, "forwarded", None),  # a replica's session: see SessionTransport
            peer if peer is not None else self._heard_over(),
        )  # fmt: skip

    def _heard_over(self) -> dict[str, str] | None:
        """For telemetry, what a message from the peer that names no POST of its own came over: the HTTP version
        the transport noted for the connection (a client's: of the server's last answer, whose streams carry the
        server's messages; a server's: of the POST that opened the session), ``None`` on stdio."""
        version = getattr(self.transport, "http_version", None)
        return {"network.protocol.version": version} if isinstance(version, str) else None

    async def _reply(self, data: bytes, related: RequestId | None, *, final: bool = False) -> None:
        if self._closed:
            return
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._send(data, related, final=final)

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._closed_event.set()
        if self._starter is not None:
            self._starter.close()
        if self._deadlines is not None:
            self._deadlines.close()
        for pending in self._pending.values():
            pending.error = ConnectionClosed(str(CLOSED_UNANSWERED))
            pending.set()
        self._pending.clear()
        for task in self._inflight.values():
            task.cancel()
        self._inflight.clear()


@asynccontextmanager
async def open_session(
    transport: Transport,
    on_request: RequestHandler,
    on_notification: NotificationHandler,
    *,
    max_incoming: int = MAX_INCOMING,
    eager: bool = False,
) -> AsyncIterator[Session]:
    """Run a session over ``transport`` for the duration of the block; the read loop starts at once.

    Leaving the block closes the transport and cancels everything still running in the session.

    ``eager``: requests read by the transport's reading callback take their first step there, and an answer it
    reads to a request a task waits on wakes that task there (see :meth:`Session._spawn` and
    :meth:`Session._answered`): one pass of the event loop fewer per message.
    """
    async with anyio.create_task_group() as tg:
        session = Session(transport, tg, on_request, on_notification, max_incoming=max_incoming, eager=eager)
        tg.start_soon(session.run)
        try:
            yield session
        finally:
            session._close()
            tg.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):
                await session._finish()
                await transport.aclose()
