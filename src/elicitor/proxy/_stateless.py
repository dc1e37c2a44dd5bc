"""2026-07-28 clients: every request on its own, carrying who asks.

One :class:`Stateless` serves every 2026-07-28 request a proxy receives, whoever sends it: a stdio client, or any
number of clients of one ``--listen`` proxy. Nothing in it belongs to a client: each request brings its
:class:`~._downstream.Downstream` (its ``_meta`` and its principal), its upstream connection comes from
:class:`~._lanes.Lanes`, and what the server sends back about it reaches its own response (:class:`~._upstream.Route`).

**Log messages on a shared stdio connection.** A 2026-07-28 server sends a call's log messages only to a request
that asked for them (``io.modelcontextprotocol/logLevel`` in its ``_meta``), and over Streamable HTTP on that
request's own response stream, which says whose they are. Over stdio nothing in a log message does (2026-07-28
basic/transports/stdio: one channel, no per-request streams), while the calls of every person of a ``--listen``
proxy share the one upstream connection (a stdio server is a process: another connection would be another server,
without the tasks and round states of the first). So on such a connection **one call at a time may ask for log
messages**: it is forwarded with its level, and every log message the server sends meanwhile is that call's, since
the server sends none to a request that did not ask (the spec's MUST NOT), and none below the level asked for
(those are dropped). Not every server keeps that rule (many log whether or not a request asked), so a log message
that arrives while another person's call is in flight there too (another principal, or any other anonymous
caller, who cannot be told apart) reaches nobody: what names no call is never shown to someone it may not be
about. A call that asks while another one hears is forwarded without its level: it runs at once, and
the server sends it no log messages (they are a MAY). When a call that asked is given up before its answer (the
client cancelled it, say), the server may still be writing its log messages: nobody else asks until the server has
answered a ``server/discover`` sent after the cancellation, which it reads after it (stdio keeps the order), and
after reading a cancellation a server sends nothing more about that call. A stdio proxy with one client passes it
every log message instead (``on_note``): whichever of its calls one is about, it is that person's.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._exceptions import JSONRPCError
from ..client._handlers import ElicitationHandler
from ..client._pace import Pace
from ..protocol import RequestReceived
from ..types import INTERNAL_ERROR, LOGGING_LEVELS, META_LOG_LEVEL, TASKS_EXTENSION, JSONObject
from ._downstream import Downstream
from ._held import HeldCalls, is_held
from ._lanes import Lanes
from ._owners import RoundStates, TaskOwners, own_key
from ._render import render
from ._upstream import SUBSCRIPTION_ID, Connect, Notify, Route, Upstream

LIST_CHANGES = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}
"""Each list change, and the ``subscriptions/listen`` flag that asks for it."""
BACKLOG = 1024
"""Notifications about one request waiting for its client to take them (see :func:`unblocking`)."""
MAX_ROUNDS = 64
"""Rounds of ``input_required`` the proxy follows itself (answering through ``--ui``) before the call fails."""
SETTLE_WITHIN = 60.0
"""Seconds the server has to answer the ``server/discover`` that follows a given-up call that asked for log
messages; without an answer, no call asks for log messages on that connection again."""

logger = logging.getLogger("elicitor.proxy")


class Stateless:
    """Serves 2026-07-28 requests by forwarding (see the module docstring).

    Args:
        connect: opens an upstream connection.
        task_group: where upstream connections and held calls live.
        ui: answers what a client cannot (``None``: nothing).
        upstream_protocol: ``auto`` or a revision to insist on.
        elicitation_timeout: see :class:`~._held.HeldCalls`.
        mirrored: see :class:`~._upstream.Upstream`.
        first: the first upstream connection, opened already (see :class:`~._lanes.Lanes`).
        on_note: see :class:`~._lanes.Lanes`.
        owners: whose task is whose (:class:`~._owners.TaskOwners`), shared by the proxy's connections.
    """

    def __init__(
        self,
        connect: Connect,
        task_group: anyio.abc.TaskGroup,
        *,
        ui: ElicitationHandler | None,
        upstream_protocol: str,
        elicitation_timeout: float | None,
        mirrored: dict[str, dict[str, str]],
        first: Callable[[], Awaitable[Upstream]] | None = None,
        on_note: Callable[[str, JSONObject | None], Awaitable[None]] | None = None,
        owners: TaskOwners | None = None,
        pace: Pace | None = None,
    ) -> None:
        self.ui = ui
        self.wanted = upstream_protocol
        self._one_client = on_note is not None
        """Every request comes from one client (a stdio proxy's): the server's log messages are all theirs."""
        self._tg = task_group
        self.in_rounds: set[str] = set()
        """Tools of a server that speaks both eras found to ask in rounds (2026-07-28 only): called there."""
        self.lanes = Lanes(
            connect, task_group, wanted=upstream_protocol, mirrored=mirrored, first=first, on_note=on_note, pace=pace
        )
        self.lanes.on_list_change = self.list_changed
        self.held = HeldCalls(self.lanes, task_group, elicitation_timeout=elicitation_timeout)
        self._listeners: dict[int, tuple[Route, JSONObject]] = {}
        """The ``subscriptions/listen`` streams open on the shared connection, with the notifications each asked
        for (see :meth:`list_changed`)."""
        self.owners = owners if owners is not None else TaskOwners()
        self.states = RoundStates()
        """The server's round states, bound to who they were given to."""

    async def serve(self, request: RequestReceived, notify: Notify | None, principal: str | None) -> JSONObject:
        """Serve one request; the server's notifications about it go to ``notify`` (its response stream), never
        holding up a connection other people's calls share (:func:`unblocking`)."""
        if self._one_client:  # nobody else's calls to hold up: a client that reads slowly slows its server
            return await self._serve(request, notify, principal)
        async with unblocking(notify, self._tg) as notify:
            return await self._serve(request, notify, principal)

    async def _serve(self, request: RequestReceived, notify: Notify | None, principal: str | None) -> JSONObject:
        params = dict(request.params or {})
        if request.method == "tools/call":
            params = own_key(params, principal)
        down = Downstream.of_request(params, principal, self.ui)
        # A task is its creator's whatever the server's era: the server sees one client, the proxy (see _owners).
        self.owners.check(request.method, params, down.principal)
        first = await self.lanes.first(down)
        if first.stateless:
            if request.method == "subscriptions/listen":
                return await self._listen(first, params, Route(notify, request.id))
            if self._handshake_first(first, request.method, params):
                try:
                    return await self.held.serve(down, request.method, params, notify)
                except JSONRPCError as exc:
                    if "requestState" in params or not (self.lanes.no_handshake or asks_in_rounds(exc)):
                        raise
                    if asks_in_rounds(exc):
                        self.in_rounds.add(str(params.get("name")))
            result = await self._forward(first, down, request.method, params, notify)
            self.owners.created(result, down.principal)
            return result
        if request.method == "server/discover":
            return self.lanes.discovered()
        result = await self.held.serve(down, request.method, params, notify)
        if request.method == "tasks/list":
            # 2026-07-28 has no tasks/list, but the request is forwarded as any other: the server lists the tasks of
            # the one client it sees, everybody's through the proxy; the asker gets their own (see _owners).
            result = self.owners.listed(result, down.principal)
        return result

    async def _listen(self, first: Upstream, params: JSONObject, route: Route) -> JSONObject:
        """``subscriptions/listen`` on the shared connection, known while it lasts (see :meth:`list_changed`)."""
        wanted = params.get("notifications")
        self._listeners[id(route)] = (route, wanted if isinstance(wanted, dict) else {})
        try:
            return await first.listen(params, route)
        finally:
            del self._listeners[id(route)]

    async def list_changed(self, method: str) -> None:
        """A server that speaks both eras said a list changed on a connection of the proxy's other than the shared
        one: a held call's (the call that changed it), or a handshake-era person's session's. On stdio that
        connection is a process of its own, which no 2026-07-28 person listens to: the listeners of the shared
        connection, another process, that asked for that list's changes are told, tagged with their own
        subscription. (Over Streamable HTTP every connection reaches the one server, which tells
        its own listeners.) Whether the other process's list changed too is the server's to say when asked:
        a list kept in the process changes in that process only, one kept elsewhere (a file, a database)
        everywhere; a list change is a hint to list again, never wrong to pass on."""
        flag = LIST_CHANGES.get(method)
        first = self.lanes.current
        if flag is None or first is None or not first.stateless or first.by_stream:
            return
        for route, wanted in list(self._listeners.values()):
            if wanted.get(flag) is not True or route.notify is None or route.token is None:
                continue
            try:
                await route.notify(method, {"_meta": {SUBSCRIPTION_ID: route.token}})
            except Exception as exc:  # the listener went away: its stream is ending
                logger.info("a list change was not passed on to a listener: %r", exc)

    def _handshake_first(self, first: Upstream, method: str, params: JSONObject) -> bool:
        """Whether a call to a server that speaks both eras goes on the handshake era first: a tool call not pinned
        (``--upstream-protocol``), to a tool not known to ask in rounds, that is not a round of a call the server
        holds itself (its own ``requestState``), to a server that does not declare the tasks extension. See
        :func:`asks_in_rounds` for why that order.

        The route is chosen from what the server says, never from what the client declares (elicitor's own client
        always declares the tasks extension, to servers whose tools ask by pushing). A server that declares the
        2026-07-28 tasks extension (``io.modelcontextprotocol/tasks`` in ``server/discover``) is built for that
        era: its tasks ask through input requests (the multi-round-trip shape), and what it does only there (a
        ``CreateTaskResult``, -32021 for a capability or extension the client did not declare, input requests
        under keys of its own, results streamed on the request's response) the handshake era would take away
        from the client. All its calls go on 2026-07-28. A server that pushes and declares the extension too
        loses its pushing tools for 2026-07-28 clients; ``--upstream-protocol 2025-11-25`` pins it.
        """
        if method != "tools/call" or self.wanted != "auto" or self.lanes.no_handshake:
            return False
        extensions = first.capabilities.get("extensions")
        if isinstance(extensions, dict) and TASKS_EXTENSION in extensions:
            return False
        if str(params.get("name")) in self.in_rounds:
            return False
        return "requestState" not in params or is_held(params["requestState"])

    async def _forward(
        self, upstream: Upstream, down: Downstream, method: str, params: JSONObject, notify: Notify | None
    ) -> JSONObject:
        """2026-07-28 on both sides: as is (the client's own ``_meta``), unless the proxy answers some input
        requests itself (``--ui``): then it declares those modes upstream and follows those rounds. The server's
        ``requestState`` reaches the client bound to its principal (:class:`~._owners.RoundStates`)."""
        route = Route(notify, None)
        params = self.states.take(params, down.principal)
        if self._one_client or upstream.by_stream:  # what it hears names its call
            return await self._forward_rounds(upstream, down, method, params, route)
        with upstream.calling(down.principal):
            if down.log_level is None:
                return await self._forward_rounds(upstream, down, method, params, route)
            async with self._hearing(upstream, down, params, notify) as (down, params):
                return await self._forward_rounds(upstream, down, method, params, route)

    async def _forward_rounds(
        self, upstream: Upstream, down: Downstream, method: str, params: JSONObject, route: Route
    ) -> JSONObject:
        if not down.ui_modes():
            return self.states.give(await upstream.request(method, params, route=route), down.principal)
        assert upstream.revision is not None
        params = down.with_meta(params, upstream.revision)
        for _ in range(MAX_ROUNDS):
            result = await upstream.request(method, params, route=route)
            requests = result.get("inputRequests")
            if result.get("resultType") != "input_required" or not isinstance(requests, dict):
                return self.states.give(result, down.principal)
            if not all(down.renders(r) for r in requests.values()):
                # The client must answer some of them: it gets them all, as the server sent them.
                return self.states.give(result, down.principal)
            answers = {key: await render(down, upstream, r) for key, r in requests.items() if isinstance(r, dict)}
            params = {**params, "inputResponses": answers, "requestState": result.get("requestState")}
            if params["requestState"] is None:
                del params["requestState"]
        raise JSONRPCError(
            INTERNAL_ERROR, f"Internal error: the server still asked for input after {MAX_ROUNDS} rounds"
        )

    @asynccontextmanager
    async def _hearing(
        self, upstream: Upstream, down: Downstream, params: JSONObject, notify: Notify | None
    ) -> AsyncIterator[tuple[Downstream, JSONObject]]:
        """A call that asks for log messages on a connection shared by several people, where nothing says whose a
        log message is, as it goes there: it hears them alone, or is forwarded without its level (see the module
        docstring)."""
        level = down.log_level
        if level is None or notify is None or upstream.logs_to is not None or upstream.logs_unsure:
            yield replace(down, log_level=None), _without_level(params)
            return
        upstream.logs_to = _Hearing(notify, level, upstream, down.principal).hear
        answered = False
        try:
            yield down, params
            answered = True
        except JSONRPCError:
            answered = True  # the server answered: it sends nothing more about the call
            raise
        finally:
            upstream.logs_to = None
            if not answered:
                upstream.logs_unsure = True
                self._tg.start_soon(_settle, upstream)


class _Hearing:
    """The call that may hear a shared connection's log messages: at its level or above, on its response, and only
    while no other person's call is in flight there (see the module docstring)."""

    def __init__(self, notify: Notify, level: str, upstream: Upstream, principal: str | None) -> None:
        self._notify = notify
        self._least = LOGGING_LEVELS.index(level) if level in LOGGING_LEVELS else 0
        self._upstream = upstream
        self._principal = principal

    async def hear(self, params: JSONObject) -> None:
        level = params.get("level")
        if level not in LOGGING_LEVELS or LOGGING_LEVELS.index(level) < self._least:
            return  # not what this call asked for: the server would not send it to this call
        if not self._upstream.only_calls_of(self._principal):
            # A server that logs whether or not a request asked (against the spec, and common) may be telling of
            # another person's call: a log message that cannot be placed reaches nobody.
            logger.debug("a log message on a shared connection was not passed on: other people's calls were in flight")
            return
        try:
            await self._notify("notifications/message", params)
        except Exception as exc:  # the client went away: the call is being given up
            logger.info("a log message for a call was not passed on: %r", exc)


async def _settle(upstream: Upstream) -> None:
    """After a call that asked for log messages was given up: once the server answers a ``server/discover`` sent
    after the cancellation, it has read the cancellation, and sends nothing more about that call (see the module
    docstring). Until then, or if it never answers, nobody asks for log messages on ``upstream``."""
    assert upstream.revision is not None
    with anyio.move_on_after(SETTLE_WITHIN):
        try:
            await upstream.request("server/discover", Downstream().with_meta({}, upstream.revision))
        except JSONRPCError:
            pass  # an answer all the same
        except Exception as exc:
            logger.info("the server did not answer after a call was given up: %r", exc)
            return
        upstream.logs_unsure = False


@asynccontextmanager
async def unblocking(notify: Notify | None, task_group: anyio.abc.TaskGroup) -> AsyncIterator[Notify | None]:
    """``notify`` for the block, made never to wait for the client: what it is given waits in a queue of
    :data:`BACKLOG` notifications that a task of ``task_group`` sends on, in order, and the block's end waits until
    they are sent (the answer comes after them, as it would). Beyond the queue's room a notification is dropped.
    The queue and its task are made with the first notification: most requests have none.

    The server's notifications are read by one reader per upstream connection, and on a shared one (stdio: one
    channel for every person's calls) a reader waiting for one person's client to take its notification (their
    client stopped reading: stalled, suspended, on a dead link) would hold up every other person's answers. So a
    client that does not read loses its own progress and log messages, and nobody else waits for it."""
    if notify is None:
        yield None
        return
    queue: list[MemoryObjectSendStream[tuple[str, JSONObject]]] = []
    sent = anyio.Event()
    scope = anyio.CancelScope()
    dropped = 0

    async def pump(waiting: MemoryObjectReceiveStream[tuple[str, JSONObject]]) -> None:
        try:
            with scope, waiting:
                async for method, params in waiting:
                    try:
                        await notify(method, params)
                    except Exception as exc:  # the client went away: its request is ending
                        logger.info("a notification for a call was not passed on: %r", exc)
                        return
        finally:
            sent.set()

    async def put(method: str, params: JSONObject) -> None:
        nonlocal dropped
        if answered is not None:
            return  # told after the answer: nowhere to send it
        if not queue:
            sending, waiting = anyio.create_memory_object_stream[tuple[str, JSONObject]](BACKLOG)
            queue.append(sending)
            task_group.start_soon(pump, waiting)
        try:
            queue[0].send_nowait((method, params))
        except anyio.WouldBlock:
            dropped += 1
            if dropped == 1:
                logger.info("a client is not taking its notifications: %s and later ones dropped", method)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # answered, or its client gone: nowhere to send it

    answered: bool | None = None  # whether the block ended with its answer (None while it runs)
    try:
        yield put
        answered = True
    finally:
        if answered is None:
            answered = False
            scope.cancel()
        if queue:
            queue[0].close()
    if queue:
        try:
            await sent.wait()
        except BaseException:
            scope.cancel()
            raise


def _without_level(params: JSONObject) -> JSONObject:
    """``params`` without ``io.modelcontextprotocol/logLevel`` in ``_meta``."""
    meta = params.get("_meta")
    if not isinstance(meta, dict) or META_LOG_LEVEL not in meta:
        return params
    return {**params, "_meta": {k: v for k, v in meta.items() if k != META_LOG_LEVEL}}


def asks_in_rounds(error: JSONRPCError) -> bool:
    """Whether a handshake-era call failed because the tool asked in rounds: it returned ``input_required``, which
    that era cannot carry (the official SDKs answer -32603 "Handler returned an invalid result").

    Why a server that speaks both eras gets a tool call on the handshake era first, and on 2026-07-28 only when
    this says so: a tool that asks by pushing (``ctx.elicit`` in the official SDK) fails on 2026-07-28 *when it
    asks*, after running up to that point, so calling it again on the other era could repeat what it did before
    asking. A tool that asks in rounds stops when it needs input and returns; on 2026-07-28 it is called again from
    the top on every round by design, so one more call from the top is what that era does anyway. So the only
    retry is the safe one, and a tool is never run twice with a side effect because of it.
    """
    if isinstance(error.data, dict) and "upstreamEnded" in error.data:
        return False  # the server ended mid-call (its last stderr lines, in the message, may say anything)
    return error.code == INTERNAL_ERROR and "invalid result" in error.message.lower()
