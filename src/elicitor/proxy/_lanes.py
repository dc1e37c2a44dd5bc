"""The upstream connections 2026-07-28 clients are served over.

A 2026-07-28 request belongs to no connection, so the proxy chooses the upstream connection it goes on:

* **a 2026-07-28 server** takes every request on one shared connection: each request says who asks in its own
  ``_meta``, the server cannot push anything mid-call, and what it sends back names its call (a progress token,
  a subscription id, both the proxy's own per connection: see :mod:`._upstream`).
* **a handshake-era server** may push a question in the middle of any call, and on stdio nothing in that request
  says which call it belongs to. So a call holds an upstream connection (a *lane*) of its own for as long as it
  runs upstream: a question arriving on a lane belongs to the one call on it, by construction. An idle lane is
  kept for the next call of the same principal declaring the same capabilities and client (the server decided
  what to ask by what the connection declared), up to :data:`MAX_IDLE`, only when the server answered the call
  on it (a server may go on with a call the proxy gave up, and ask its next question there); at most
  :data:`MAX_LANES` are open at once. A principal is a signed-in person, or the one client of a stdio proxy: a
  server keeps state per connection (what it was told, a session's memory, a log level), and a lane never
  carries it from one person to another. Anonymous callers of a proxy serving several people cannot be told
  apart between calls, so each of their calls gets a connection never used before, which serves no other call
  and closes :data:`LINGER` seconds after it (what the server says just after its answer is still heard); one
  is opened ahead for the next such call, so that it does not wait for the server to start.

The first connection learns the server's era (``server/discover``, else the handshake) and answers
``server/discover`` for a handshake-era server from its ``initialize``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.abc

from .._exceptions import ConnectionClosed, JSONRPCError
from ..client._pace import Pace
from ..client._transport import SIGN_IN_FAILED
from ..types import INTERNAL_ERROR, META_SERVER_INFO, STATELESS_REVISIONS, JSONObject
from ._downstream import Downstream
from ._upstream import Connect, Silent, Upstream

logger = logging.getLogger("elicitor.proxy")

MAX_LANES = 256
"""Upstream connections open at once for 2026-07-28 calls to a handshake-era server (one per call in flight)."""
LINGER = 10.0
"""Seconds a connection that served its one call stays open after the server's answer (see :meth:`Lanes._linger`)."""
MAX_IDLE = 8
"""Idle upstream connections kept for the next call (per proxy)."""


async def start(
    upstream: Upstream, task_group: anyio.abc.TaskGroup, ended: Callable[[], None] | None = None
) -> Upstream:
    """Open ``upstream`` in a task of ``task_group``: it lives until the server closes it or it is closed, then
    ``ended`` is called."""
    ready = anyio.Event()
    failure: list[BaseException] = []

    async def run() -> None:
        try:
            await upstream.run(ready.set)
        except Exception as exc:
            failure.append(exc)
        finally:
            ready.set()
            if ended is not None:
                ended()

    task_group.start_soon(run)
    await ready.wait()
    if failure and isinstance(failure[0], JSONRPCError):
        raise failure[0]  # it says why (a server being started again only later: see _command)
    if failure or upstream.closed:
        reason = failure[0] if failure else f"it {await upstream.why_gone()}"
        raise JSONRPCError(INTERNAL_ERROR, f"Internal error: the upstream server is unavailable: {reason}")
    return upstream


class Lanes:
    """The upstream connections of 2026-07-28 clients (see the module docstring).

    Args:
        connect: opens one upstream connection.
        task_group: where the connections live.
        wanted: ``auto`` or the revision to insist on.
        mirrored: shared by every connection (see :class:`Upstream`).
        first: gives the first connection, already opened (a stdio proxy opens it while its client starts; its
            end is the proxy's); by default the first connection is opened on first use like the others.
        on_note: where a 2026-07-28 server's notifications that name no call go (its logs, on stdio): given only
            when one client sends every request (a stdio proxy's); without it they go nowhere, since on a
            connection shared by several people nothing says whose they are, but the log messages of the one call
            that may ask for them there (see :mod:`._stateless`).
        pace: the clocks of every connection's handshake, stopped while a person signs in upstream (see
            :class:`Upstream`).
    """

    def __init__(
        self,
        connect: Connect,
        task_group: anyio.abc.TaskGroup,
        *,
        wanted: str = "auto",
        mirrored: dict[str, dict[str, str]],
        first: Callable[[], Awaitable[Upstream]] | None = None,
        on_note: Callable[[str, JSONObject | None], Awaitable[None]] | None = None,
        pace: Pace | None = None,
    ) -> None:
        self._connect = connect
        self._pace = pace
        self._on_note = on_note
        self._one_client = on_note is not None
        """Every call comes from one client (see :meth:`_keeps`)."""
        self._opened_first = first
        self._tg = task_group
        self._wanted = wanted
        self._mirrored = mirrored
        self._first: Upstream | None = None
        self._learned: tuple[anyio.Event, list[BaseException]] | None = None
        """The learning under way (see :meth:`first`): set when it ends, with its failure if it failed."""
        self._idle: dict[str, list[Upstream]] = {}
        self._lingering: list[Upstream] = []
        """Connections that served their one call, still open for a while (:meth:`_linger`)."""
        self._readying: dict[str, anyio.Event] = {}
        """Kinds of callers (:func:`_key`) a connection is being opened ahead for (:meth:`_ready_ahead`)."""
        self._open = 0
        self.task_support: dict[str, str] = {}
        """What the connections learnt of the tools' task support, shared (see :class:`Upstream`)."""
        self.on_list_change: Callable[[str], Awaitable[None]] | None = None
        """Told of each ``notifications/*/list_changed`` the server sends on a lane, whenever it comes (a call
        changed a list there: others than its client may listen for that; see :class:`~._stateless.Stateless`)."""
        self.no_handshake = False
        """The server refused ``initialize`` on a new connection: it speaks 2026-07-28 only."""
        self.ended = anyio.Event()
        """Set when the first connection ends (the next request learns the era again, on a new one)."""

    def _new(self) -> Upstream:
        upstream = Upstream(self._connect, wanted=self._wanted, mirrored=self._mirrored, pace=self._pace)
        upstream.task_support = self.task_support

        async def list_changed(method: str) -> None:
            if self.on_list_change is not None and upstream is not self._first:
                await self.on_list_change(method)

        upstream.lists_to = list_changed
        return upstream

    async def _start(self) -> Upstream:
        if self._open >= MAX_LANES:
            raise JSONRPCError(INTERNAL_ERROR, f"Internal error: {MAX_LANES} calls are in flight through the proxy")
        self._open += 1
        upstream = self._new()

        def ended() -> None:
            self._open -= 1
            if upstream is self._first:
                self._first = None
                self.ended.set()

        return await start(upstream, self._tg, ended)

    async def first(self, down: Downstream) -> Upstream:
        """The connection that learnt the server's era (opened, and the era learnt, on first use).

        The learning runs in the proxy's task group, not in the request that needed it: a client that gives up
        on that request (its probe's time ran out while the server started, or while a person signed in to it)
        leaves the learning to go on, and its next request waits for the same one. Cancelling the learning
        instead would close the first connection, whose end is a stdio proxy's, and could leave the server a
        half-made handshake or a sign-in to begin again."""
        while True:
            first = self._first
            if first is not None and first.revision is not None and not first.closed:
                return first
            if self._learned is None:
                self._learned = (anyio.Event(), [])
                self._tg.start_soon(self._learn, down, self._learned)
            done, failure = self._learned
            await done.wait()
            if failure:
                raise failure[0]

    async def _learn(self, down: Downstream, learned: tuple[anyio.Event, list[BaseException]]) -> None:
        """Open the first connection and learn the server's era on it (see :meth:`first`)."""
        done, failure = learned
        try:
            opened_first = self._opened_first is not None
            if self._opened_first is not None:
                opened, self._opened_first = self._opened_first, None
                upstream = await opened()
                upstream.task_support = self.task_support
            else:
                upstream = await self._start()
            self._first = upstream
            try:
                await upstream.learn(down)
            except BaseException:
                self._first = None
                if not opened_first:  # a stdio proxy's own ends with it: the client must get the error first
                    upstream.close()
                raise
            if not upstream.stateless and self._keeps(down):
                self._idle.setdefault(_key(down), []).append(upstream)
            else:
                upstream.on_note = self._on_note
        except Exception as exc:
            failure.append(exc)
        finally:
            if self._first is None and not failure:
                failure.append(ConnectionClosed("the proxy is closing"))
            self._learned = None
            done.set()

    @asynccontextmanager
    async def lane(self, down: Downstream) -> AsyncIterator[Upstream]:
        """A handshake-era connection for one call alone, for the block."""
        await self.first(down)
        key = _key(down)
        upstream = self._idle_one(key)
        if upstream is None and key in self._readying:
            await self._readying[key].wait()  # a connection opened ahead for such a call: sooner than a new one
            upstream = self._idle_one(key)
        if upstream is None:
            upstream = await self._start()
            try:
                await upstream.handshake(down)
            except BaseException as exc:
                upstream.close()
                if isinstance(exc, JSONRPCError) and exc.data != SIGN_IN_FAILED and not isinstance(exc, Silent):
                    self.no_handshake = True  # refused: silence says nothing of the server's era
                raise
        if not self._keeps(down):
            self._ready_ahead(down, key)  # once this call's own is open: it never waits on the next one's
        answered = False
        try:
            yield upstream
            answered = True
        except JSONRPCError:
            answered = True  # the server answered the call with an error: it is over there too
            raise
        finally:
            upstream.on_push = None
            upstream.on_note = None
            if upstream.closed:
                pass
            elif not answered:
                # The call was given up (its time without progress, a cancellation, too many held calls) before
                # the server answered: the server may still be running it and push its next question, which the
                # next call on this connection would take for its own. Never reused; closed unless it is the
                # connection whose end is the proxy's (it then serves server/discover and no call).
                if upstream is not self._first:
                    upstream.close()
            elif not self._keeps(down):
                # An anonymous caller of a proxy serving several people: the next anonymous call may be another
                # person's, and a server keeps state per connection (what it was told, what it remembers of the
                # session, the log level set on it). A connection serves one such call, then closes.
                if upstream is not self._first:
                    self._tg.start_soon(self._linger, upstream)
            elif sum(len(v) for v in self._idle.values()) < MAX_IDLE:
                self._idle.setdefault(key, []).append(upstream)
            elif upstream is not self._first:
                upstream.close()

    async def _linger(self, upstream: Upstream) -> None:
        """Close a connection that served its one call, :data:`LINGER` seconds after the server's answer (or when
        :data:`MAX_IDLE` others linger, the oldest first): what the server says just after answering (a list the
        call changed: see :attr:`on_list_change`) is still heard, while nothing else is taken from it."""
        self._lingering.append(upstream)
        while len(self._lingering) > MAX_IDLE:
            self._lingering.pop(0).close()
        try:
            with anyio.move_on_after(LINGER):
                if upstream.session is not None:
                    await upstream.session.wait_closed()
        finally:
            if upstream in self._lingering:
                self._lingering.remove(upstream)
            upstream.close()

    def _idle_one(self, key: str) -> Upstream | None:
        """An idle connection for calls of the kind ``key`` names, if one is open."""
        idle = self._idle.setdefault(key, [])
        while idle:
            candidate = idle.pop()
            if not candidate.closed:
                return candidate
        return None

    def _ready_ahead(self, down: Downstream, key: str) -> None:
        """For callers whose connection serves one call: a new connection opened ahead for the next call declaring
        what ``down`` declares, so that it does not wait for the server to start. Never used, it carries nothing
        of anyone's; one per kind of caller, within :data:`MAX_IDLE`."""
        if (
            key in self._readying
            or self._idle.get(key)
            or sum(len(v) for v in self._idle.values()) + len(self._readying) >= MAX_IDLE
            or self._open >= MAX_LANES
        ):
            return
        self._readying[key] = anyio.Event()

        async def ready() -> None:
            try:
                upstream = await self._start()
                try:
                    await upstream.handshake(down)
                except BaseException:
                    upstream.close()
                    raise
                self._idle.setdefault(key, []).append(upstream)
            except Exception as exc:  # the next call opens its own, and meets what went wrong itself
                logger.info("a connection opened ahead failed: %r", exc)
            finally:
                self._readying.pop(key).set()

        self._tg.start_soon(ready)

    def _keeps(self, down: Downstream) -> bool:
        """Whether a connection that served a call of ``down`` may serve another call (of the same principal,
        declaring the same capabilities and client): when every call comes from one client (a stdio proxy's), or
        ``down`` is signed in. Without a sign-in, the clients of a proxy serving several people cannot be told
        apart between calls (a 2026-07-28 request belongs to no session), so each call is its own person."""
        return self._one_client or down.principal is not None

    @property
    def current(self) -> Upstream | None:
        """The connection that learnt the server's era, if it is open (the shared one of a 2026-07-28 server)."""
        return self._first

    def discovered(self) -> JSONObject:
        """``server/discover`` for a 2026-07-28 client, answered from the handshake-era server's ``initialize``."""
        first = self._first
        assert first is not None
        result: JSONObject = {
            "supportedVersions": list(STATELESS_REVISIONS),
            "capabilities": dict(first.capabilities),
            "ttlMs": 0,
            "cacheScope": "public",
            "resultType": "complete",
        }
        if isinstance(first.instructions, str):
            result["instructions"] = first.instructions
        if isinstance(first.server, dict):
            result["_meta"] = {META_SERVER_INFO: first.server}
        return result


def _key(down: Downstream) -> str:
    """Which idle connections a call may take: the same principal, declaring the same capabilities and client."""
    return json.dumps([down.principal, down.upstream_capabilities(), down.client_info()], sort_keys=True)
