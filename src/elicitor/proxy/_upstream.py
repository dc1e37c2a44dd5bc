"""One connection to the upstream server (the proxy is its client): what it learnt of the server, and where what
the server sends back goes.

Everything the server sends back is routed by the upstream call it belongs to, never by arrival order:

* **progress**: a forwarded request that asks for progress goes out with a token of this connection's own
  (``~1``, ``~2``...), so two clients that both chose ``p1`` cannot collide; the notifications carrying it go to
  the one client request it belongs to (its :class:`Route`), with that request's own token put back.
* **``subscriptions/listen`` streams**: by the id the upstream saw (the proxy's own, unique on this connection),
  retagged with the client's.
* **requests the server pushes mid-call** (``elicitation/create``, sampling, roots): on stdio nothing in such a
  request says which call it belongs to, so a connection on which the server may push carries one client's calls
  only (a handshake-era client's own connection) or one call at a time (see :mod:`._lanes`): they go to
  :attr:`Upstream.on_push`, set by whoever holds the connection, and are refused when nobody does.
* **notifications on a request's own response stream** (Streamable HTTP, 2026-07-28: a call's log messages): to
  that request's :class:`Route`, whoever else shares the connection (the transport says which stream carried
  them: ``notes_to``).
* **anything else** (logs over stdio, list changes): to :attr:`Upstream.on_note` when one client owns the
  connection; else a log message to :attr:`Upstream.logs_to`, the one call on a shared 2026-07-28 connection that
  may hear log messages now (see :mod:`._stateless`); else nowhere: a notification that names no call is never
  shown to a client it may not belong to.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import anyio
import msgspec

from .._exceptions import ConnectionClosed, JSONRPCError
from ..client._era import PROBE_TIMEOUT
from ..client._headers import header_params
from ..client._pace import Pace
from ..client._transport import SIGN_IN_FAILED
from ..protocol import NotificationReceived, RequestReceived, decode_json
from ..session import Session, open_session
from ..telemetry import _state as _telemetry
from ..transports import StdioClientTransport, Transport
from ..types import (
    ACCEPTED_OLDER_REVISIONS,
    ALL_REVISIONS,
    HANDSHAKE_REVISIONS,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    META_SERVER_INFO,
    METHOD_NOT_FOUND,
    STATELESS_REVISIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
    JSONObject,
    JSONValue,
    RequestId,
    has_elicitation,
    is_stateless,
)
from ._downstream import Downstream

logger = logging.getLogger("elicitor.proxy")

Connect = Callable[[], "Awaitable[Transport] | AbstractAsyncContextManager[Transport]"]
"""Opens an upstream connection (a stdio server started as a child process, or an HTTP endpoint)."""
Notify = Callable[[str, JSONObject], Awaitable[None]]
"""Where a notification for one client request goes (its response stream, or its connection)."""
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
HANDSHAKE_TIMEOUT = 30.0
"""Seconds of the upstream server's silence after which its ``initialize`` (or a ``server/discover`` that is no
probe) is given up: nothing but the machine stands between that request and its answer. A client's default
``handshake_timeout``. Time a person spends signing in upstream meanwhile is not counted."""


def upstream_ended(how: str) -> JSONRPCError:
    """The error of a call in flight when the server ended (``how``: :attr:`Upstream.gone`). The call is not made
    again on a server started anew: it may have done part of its work, and asked a person, already."""
    return JSONRPCError(
        INTERNAL_ERROR,
        f"Internal error: the upstream server ended before it answered: it {how}; the proxy starts it again (or "
        "connects again, over HTTP) for the next request",
        {"upstreamEnded": how},
    )


class Silent(JSONRPCError):
    """The upstream server said nothing to a request of the proxy's own handshake within its limit (a server that
    accepted the connection and stopped: SIGSTOP, a hung event loop, a dead link that never resets)."""

    def __init__(self, method: str, seconds: float) -> None:
        super().__init__(
            INTERNAL_ERROR,
            f"Internal error: the upstream server did not answer {method} within {seconds:g} s of silence (time a "
            "person spent signing in upstream not counted): it accepted the connection but is stopped, hung or "
            "overloaded",
            {"upstreamSilentFor": seconds, "method": method},
        )


@dataclass(slots=True)
class Route:
    """Where the server's notifications about one forwarded call go: ``notify``, with the client's ``token`` (its
    progress token, or its ``subscriptions/listen`` request id) in place of the proxy's. A call held across a
    2026-07-28 client's rounds points its route at each round's request in turn."""

    notify: Notify | None
    token: RequestId | None
    touched: Callable[[], None] | None = None
    """Called on each progress notification (progress keeps a held call alive)."""


class Upstream:
    """One upstream connection: open it with :meth:`run` (or :meth:`open`), then forward with :meth:`request`.

    Args:
        connect: opens the connection.
        wanted: ``auto``, or the revision to insist on (``--upstream-protocol``).
        mirrored: tool name to parameter to header (SEP-2243), learnt from ``tools/list`` and shared by every
            connection of the proxy.
        pace: the proxy's clocks for the server, stopped while a person signs in upstream (the sign-in's
            :class:`~elicitor.client._pace.Pace`): the limits of the handshake count the server's time only.
    """

    def __init__(
        self, connect: Connect, *, wanted: str = "auto", mirrored: dict[str, dict[str, str]], pace: Pace | None = None
    ) -> None:
        self._connect = connect
        self._pace = pace if pace is not None else Pace()
        self.wanted = wanted
        self.mirrored = mirrored
        self.session: Session | None = None
        self.transport: Transport | None = None
        self.revision: str | None = None
        self.capabilities: JSONObject = {}
        self.server: JSONValue = None
        self.instructions: JSONValue = None
        self.on_push: Callable[[RequestReceived], Awaitable[JSONObject]] | None = None
        """Who answers the requests the server pushes (the holder of this connection)."""
        self.on_note: Callable[[str, JSONObject | None], Awaitable[None]] | None = None
        """Where notifications that name no call go (only when one client owns the connection)."""
        self.logs_to: Callable[[JSONObject], Awaitable[None]] | None = None
        """Where the log messages that name no call go when nobody owns the connection: the one call on it that
        asked for them, while it runs (set by :class:`~._stateless.Stateless`)."""
        self.lists_to: Callable[[str], Awaitable[None]] | None = None
        """Told of each list change the server says on this connection, whoever holds it (see :mod:`._lanes`)."""
        self.callers: Counter[str | None] = Counter()
        """Whose 2026-07-28 calls are in flight here through :class:`~._stateless.Stateless` (the principal; ``None``
        for each anonymous caller), while it forwards them (:meth:`calling`)."""
        self.logs_unsure = False
        """A call that asked for log messages was given up before its answer, and the server may not have read its
        cancellation yet: nobody else may ask for log messages here until it has."""
        self.task_support: dict[str, str] = {}
        """Tool name to its ``execution.taskSupport`` (2025-11-25), learnt from ``tools/list``; shared by a proxy's
        connections to one server."""
        self.log_level: str | None = None
        """The level this (handshake-era) connection was last given with ``logging/setLevel``."""
        self._progress: dict[RequestId, Route] = {}
        self._listens: dict[RequestId, Route] = {}
        self._streams: dict[RequestId, Route] = {}
        """Upstream request id to its route, while the request is in flight (see :meth:`_on_stream`)."""
        self._tokens = itertools.count(1)
        self._stop = anyio.CancelScope()
        self._restartable = False
        """While :meth:`learn` probes a stdio server: if the server ends the connection now, :meth:`run` starts it
        again (see :meth:`learn`)."""
        self._reopened = anyio.Event()
        """Set once :meth:`run` has started the server again, or has ended."""
        self.gone: str | None = None
        """How the server ended the connection by itself, once it has (a stdio server: its exit status and last
        lines on stderr, from the connect's ``ended``; see :class:`~._command.ServerCommand`)."""
        self.done = anyio.Event()
        """Set once :meth:`run` has ended, :attr:`gone` said."""

    @contextlib.contextmanager
    def calling(self, principal: str | None) -> Iterator[None]:
        """While a call of ``principal`` is forwarded here (see :attr:`callers`)."""
        self.callers[principal] += 1
        try:
            yield
        finally:
            self.callers[principal] -= 1
            if not self.callers[principal]:
                del self.callers[principal]

    def only_calls_of(self, principal: str | None) -> bool:
        """Whether every call in flight here (:attr:`callers`) but one is also ``principal``'s: a signed-in person's
        own calls, or a single call. Anonymous callers cannot be told apart: two of them are two people."""
        total = self.callers.total()
        return total <= 1 or (principal is not None and self.callers[principal] == total)

    # ---- lifetime -------------------------------------------------------------------------------------------

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Upstream]:
        """The connection, open for the block."""
        started = time.monotonic_ns()
        async with AsyncExitStack() as stack:
            if _telemetry.state.on:  # mcp.client.session.duration: a handshake-era server's session, once it ends
                stack.callback(self._session_ended, started)
            made = self._connect()
            if isinstance(made, AbstractAsyncContextManager):
                self.transport = await stack.enter_async_context(made)
            else:
                self.transport = await made
            notes_to = getattr(self.transport, "notes_to", None)
            if notes_to is not None:
                notes_to(self._on_stream)
            heard_by = getattr(self.transport, "heard_by", None)
            if heard_by is not None:  # an SSE comment: a proxy beyond says it is waiting on a person
                heard_by(self._pace.heard)
            self.session = await stack.enter_async_context(open_session(self.transport, self._pushed, self._note))
            yield self

    def _session_ended(self, started: int) -> None:
        from ..telemetry import _sessions

        if self.revision is not None and not is_stateless(self.revision):  # 2026-07-28: no session
            error = _sessions.why_ended("client", self.session, self.transport)
            network, version = getattr(self.transport, "network", "pipe"), _sessions.http_version(self.transport)
            _sessions.session_ended("client", started, self.revision, network, error, version)

    async def run(self, ready: Callable[[], None]) -> None:
        """Open the connection, call ``ready``, and keep it until the server closes it or :meth:`close`."""
        try:
            with self._stop:
                while True:
                    self.gone = None
                    async with self.open():
                        ready()
                        await self._up().wait_closed()
                    # The server ended it (the proxy's close() cancels the wait): say how, once it has exited; a
                    # stdio server is counted towards starting it again at a bounded pace (see _command).
                    ended = getattr(self._connect, "ended", None)
                    if ended is not None and self.transport is not None:
                        self.gone = await ended(self.transport, served=self.revision is not None)
                    else:
                        self.gone = "closed the connection"
                    if not self._restartable:
                        return
                    self._restartable = False  # once: a server that stops on initialize too is gone
                    logger.info("the server stopped on server/discover; starting it again with initialize")
                    ready = self._reopened.set
        finally:
            self._reopened.set()
            self.done.set()

    async def ended_under(self) -> bool:
        """Whether the connection ended, after a request on it failed with ``ConnectionClosed`` (a moment is left
        for the session to say so: a request may hear of the end just before the session is marked closed)."""
        if self.session is not None and not self.session.closed:
            with anyio.move_on_after(1):
                await self.session.wait_closed()
        return self.closed

    async def why_gone(self) -> str:
        """How the server ended the connection (waiting a moment for :meth:`run` to say it)."""
        with anyio.move_on_after(5):
            await self.done.wait()
        return self.gone or "closed the connection"

    def close(self) -> None:
        self._stop.cancel()

    @property
    def closed(self) -> bool:
        return self.session is None or self.session.closed

    @property
    def stateless(self) -> bool:
        return self.revision is not None and is_stateless(self.revision)

    @property
    def by_stream(self) -> bool:
        """Whether what the server says about a call comes on that call's own response stream (Streamable HTTP),
        rather than on the one channel every call shares (stdio)."""
        return getattr(self.transport, "notes_to", None) is not None

    def _up(self) -> Session:
        if self.session is None:
            raise ConnectionClosed("the upstream server is not connected")
        return self.session

    # ---- forwarding -----------------------------------------------------------------------------------------

    async def request(self, method: str, params: JSONObject | None, *, route: Route | None = None) -> JSONObject:
        """Forward one request; the server's progress about it goes to ``route``. A server that ends before it
        answers fails it with :func:`upstream_ended`, saying how it ended."""
        token: str | None = None
        if route is not None and params is not None:
            params, token = self._follow(params, route)
        seen: list[RequestId] = []

        def sent(upstream_id: RequestId) -> None:
            if route is not None:
                seen.append(upstream_id)
                self._streams[upstream_id] = route

        try:
            result = await self._up().request(method, params or None, sent=sent if route is not None else None)
        except ConnectionClosed:
            if self.session is None or not await self.ended_under():
                raise
            # The server ended with the request in flight: whoever forwarded it tells its client how, and does not
            # send it again (a 2026-07-28 server's shared connection, a held call, a handshake-era client's own).
            raise upstream_ended(await self.why_gone()) from None
        finally:
            if token is not None:
                self._progress.pop(token, None)
            for upstream_id in seen:
                self._streams.pop(upstream_id, None)
        if method == "tools/list":
            self._learn_tools(result)
        return result

    async def call_tool(self, params: JSONObject, route: Route, *, ttl_ms: int) -> JSONObject:
        """``tools/call`` on a handshake-era server, as a task when the tool requires one (2025-11-25 tasks: the
        proxy creates the task and follows it with ``tasks/result``, during which the server asks its questions).
        A tool not yet known is learnt from ``tools/list`` when the plain call is refused: a server refuses a call
        of a task-required tool before running it, so calling again as a task runs it once."""
        name = str(params.get("name"))
        if name not in self.task_support:
            try:
                result = await self.request("tools/call", params, route=route)
            except JSONRPCError:
                if not await self._requires_task(name):
                    raise
            else:
                # The TypeScript SDK refuses with an isError result ("requires task augmentation").
                if not result.get("isError") or not await self._requires_task(name):
                    return result
        if self.task_support.get(name) != "required":
            return await self.request("tools/call", params, route=route)
        created = await self.request("tools/call", {**params, "task": {"ttl": ttl_ms}}, route=route)
        task = created.get("task")
        task_id = task.get("taskId") if isinstance(task, dict) else None
        if not isinstance(task_id, str):
            raise JSONRPCError(INTERNAL_ERROR, "Internal error: the server created no task for a task-required tool")
        try:
            return await self.request("tasks/result", {"taskId": task_id}, route=route)
        except BaseException:
            with anyio.move_on_after(5, shield=True):  # the call was given up: so is its task
                with contextlib.suppress(Exception):
                    await self.request("tasks/cancel", {"taskId": task_id})
            raise

    async def _requires_task(self, name: str) -> bool:
        """Whether the server lists ``name`` as requiring a task (learnt once, from ``tools/list``)."""
        self.task_support.setdefault(name, "unknown")
        with contextlib.suppress(JSONRPCError):
            await self.request("tools/list", None)
        return self.task_support.get(name) == "required"

    async def listen(self, params: JSONObject, route: Route) -> JSONObject:
        """``subscriptions/listen``: the server tags the stream's notifications with the id it saw (ours); the
        client must see its own (``route.token``)."""
        seen: list[RequestId] = []

        def sent(upstream_id: RequestId) -> None:
            seen.append(upstream_id)
            self._listens[upstream_id] = route

        try:
            result = await self._up().request("subscriptions/listen", params, sent=sent)
        except ConnectionClosed:
            if self.session is None or not await self.ended_under():
                raise
            raise upstream_ended(await self.why_gone()) from None  # the listener is told, not left waiting
        finally:
            for upstream_id in seen:
                self._listens.pop(upstream_id, None)
        return _retag(result, seen[0] if seen else None, route.token)

    async def set_log_level(self, level: str | None) -> None:
        """``logging/setLevel`` on a handshake-era connection, when ``level`` is not the one it has: a call that
        asks for its logs gets them whoever used the connection before. A server that refuses it sends none."""
        if level is None or level == self.log_level or self.stateless:
            return
        try:
            await self.request("logging/setLevel", {"level": level})
        except JSONRPCError as exc:
            logger.info("the server refused logging/setLevel: %s", exc.message)
        self.log_level = level

    async def notify(self, method: str, params: JSONObject | None) -> None:
        if not self.closed:
            await self._up().notify(method, params)

    def _follow(self, params: JSONObject, route: Route) -> tuple[JSONObject, str | None]:
        """``params`` asking for progress under a token of ours: when the client asked for progress, and always
        for a call that progress keeps alive (``route.touched``: the proxy watches it even if the client does not)."""
        meta = params.get("_meta")
        theirs = meta.get("progressToken") if isinstance(meta, dict) else None
        if not isinstance(theirs, str | int) and route.touched is None:
            return params, None
        if isinstance(theirs, str | int) and route.token is None:
            route.token = theirs
        ours = f"~{next(self._tokens)}"
        self._progress[ours] = route
        return {**params, "_meta": {**(meta if isinstance(meta, dict) else {}), "progressToken": ours}}, ours

    def _learn_tools(self, result: JSONObject) -> None:
        """Tools that mirror parameters into headers (SEP-2243): tell an HTTP upstream transport, as a Client
        does, so the forwarded calls carry the headers the server checks."""
        headers = getattr(self.transport, "tool_headers", None)
        tools = result.get("tools")
        if not isinstance(tools, list):
            return
        for tool in tools:  # forwarded as it is: an entry that is not a tool is passed on, not learnt from
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            execution = tool.get("execution")
            if isinstance(execution, dict) and isinstance(execution.get("taskSupport"), str):
                self.task_support[tool["name"]] = execution["taskSupport"]
            mirrored = header_params(tool.get("inputSchema"))
            if isinstance(mirrored, dict):
                self.mirrored[tool["name"]] = {path[0]: name for path, name in mirrored.items() if len(path) == 1}
                if isinstance(headers, dict):
                    headers[tool["name"]] = mirrored

    # ---- what the server sends --------------------------------------------------------------------------------

    async def _pushed(self, request: RequestReceived) -> JSONObject:
        self._pace.heard()
        if request.method == "ping":
            return {}
        if request.method == "elicitation/create" and self.revision is not None and not has_elicitation(self.revision):
            # The server chose a revision without elicitation (2025-03-26, 2024-11-05): the method does not exist
            # on this connection, whatever the client declared, and nobody is asked (as elicitor's client answers).
            logger.warning("the server sent elicitation/create on %s, which has no elicitation", self.revision)
            raise JSONRPCError(
                METHOD_NOT_FOUND,
                f"Method not found: elicitation/create is not part of protocol revision {self.revision}, "
                "which the server chose in initialize",
            )
        if self.on_push is None:
            raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: {request.method} (no call of a client waits)")
        return await self.on_push(request)

    async def _on_stream(self, data: bytes, upstream_id: RequestId) -> bool:
        """A message a 2026-07-28 server sent on the response stream of one of our requests (Streamable HTTP): a
        notification there is about that request, whoever else shares the connection, and goes to its route.
        Anything else (the answer, a message on a stream we do not route) takes the ordinary way."""
        route = self._streams.get(upstream_id)
        if route is None or not self.stateless:
            return False
        try:
            message = decode_json(data)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return False
        if not isinstance(message, dict) or "id" in message or not isinstance(message.get("method"), str):
            return False
        params = message.get("params")
        note = NotificationReceived(message["method"], params if isinstance(params, dict) else None)
        try:
            await self._note(note, route)
        except Exception as exc:  # the client went away, say: its call's stream is read on, the message dropped
            logger.info("a notification for a call was not passed on: %r", exc)
        return True

    async def _note(self, note: NotificationReceived, stream: Route | None = None) -> None:
        """A notification of the server's, routed by what names its call (a subscription id, a progress token of
        ours), else by the response stream it came on (``stream``), else to :attr:`on_note`."""
        self._pace.heard()  # the server is there (a proxy beyond telling of a person signing in, say)
        params = note.params or {}
        meta = params.get("_meta")
        subscription = meta.get(SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        if isinstance(subscription, str | int) and subscription in self._listens:
            route = self._listens[subscription]
            if route.notify is not None and route.token is not None:
                await route.notify(note.method, _retag(params, subscription, route.token))
            return
        token = params.get("progressToken")
        progress = self._progress.get(token) if isinstance(token, str | int) else None
        if progress is not None:
            route = progress
            if route.touched is not None:
                route.touched()
            if route.notify is not None and route.token is not None:
                await route.notify(note.method, {**params, "progressToken": route.token})
            return
        if stream is not None:
            # On the stream of one call: a log message about it (the client asked for a level), say. Progress
            # under a token that is not ours names nothing the client knows.
            if stream.notify is not None and note.method != "notifications/progress":
                await stream.notify(note.method, params)
            return
        if self.lists_to is not None and note.method.endswith("/list_changed"):
            await self.lists_to(note.method)
        if self.on_note is not None:
            await self.on_note(note.method, note.params)
        elif self.logs_to is not None and note.method == "notifications/message":
            await self.logs_to(params)

    # ---- the server's era -------------------------------------------------------------------------------------

    async def initialize(self, params: JSONObject) -> JSONObject:
        """Forward a handshake-era ``initialize`` (the client's own, its capabilities already widened by ``--ui``),
        within :data:`HANDSHAKE_TIMEOUT` of the server's silence (:class:`Silent` when it runs out)."""
        result = await self._limited("initialize", params, HANDSHAKE_TIMEOUT)
        offered = result.get("protocolVersion")
        if isinstance(offered, str) and is_stateless(offered):
            # A server of 2026-07-28 only that answers initialize anyway (leniently) does not speak the handshake
            # era: what follows must go on 2026-07-28, as if it had refused.
            raise JSONRPCError(
                INVALID_REQUEST, f"Invalid request: the server answered initialize with {offered}, not a handshake"
            )
        self._adopt(str(result.get("protocolVersion")), result.get("capabilities"), result.get("serverInfo"))
        self.instructions = result.get("instructions")
        return result

    async def handshake(self, down: Downstream) -> None:
        """Complete a handshake of the proxy's own, for a client that has none (2026-07-28): its capabilities and
        ``clientInfo`` declared, ``notifications/initialized`` sent, an HTTP transport's stream opened."""
        version = self.wanted if self.wanted in HANDSHAKE_REVISIONS else HANDSHAKE_REVISIONS[0]
        params = {
            "protocolVersion": version,
            "capabilities": down.upstream_capabilities(),
            "clientInfo": down.client_info(),
        }
        result = await self.initialize(params)
        chosen = result.get("protocolVersion")
        if chosen not in HANDSHAKE_REVISIONS + ACCEPTED_OLDER_REVISIONS:
            # The proxy is the client here: a revision it does not speak is refused, as elicitor's client refuses
            # it, rather than forwarded on as if it had been negotiated.
            self.close()
            raise JSONRPCError(
                INTERNAL_ERROR,
                f"Internal error: the upstream server chose protocol version {chosen!r} in initialize; the proxy "
                f"speaks {', '.join(ALL_REVISIONS)} (and accepts {', '.join(ACCEPTED_OLDER_REVISIONS)}, without "
                "elicitation)",
            )
        await self._up().notify("notifications/initialized")
        self.started()

    def started(self) -> None:
        """The upstream session is initialized: an HTTP transport opens its standalone stream now."""
        start = getattr(self.transport, "start_listening", None)
        if start is not None:
            start()

    async def _limited(self, method: str, params: JSONObject, seconds: float) -> JSONObject:
        """``method``, given up after ``seconds`` of the server's silence (a person signing in upstream meanwhile
        stops the clock: :class:`~elicitor.client._pace.Pace`), with :class:`Silent`. A server that ends meanwhile
        fails it saying how it ended (:func:`upstream_ended`), unless :meth:`learn` starts it again."""
        result: JSONObject = {}
        with self._pace.deadline(seconds, quiet=True) as scope:
            try:
                result = await self._up().request(method, params)
            except ConnectionClosed:
                if self._restartable or not await self.ended_under():
                    raise
                raise upstream_ended(await self.why_gone()) from None
        if scope.cancelled_caught:
            raise Silent(method, seconds)
        return result

    async def discover(self, down: Downstream | None, *, limit: float | None = None) -> JSONObject:
        """``server/discover`` on 2026-07-28, with the client's own version when it is stateless (the server judges
        it, not the proxy); :class:`Silent` after ``limit`` seconds of the server's silence (by default
        :data:`HANDSHAKE_TIMEOUT`)."""
        version: str = self.wanted if self.wanted in STATELESS_REVISIONS else STATELESS_REVISIONS[0]
        if self.wanted == "auto" and down is not None and down.stateless and down.revision is not None:
            version = down.revision
        params = down.with_meta({}, version) if down is not None else Downstream().with_meta({}, version)
        result = await self._limited("server/discover", params, HANDSHAKE_TIMEOUT if limit is None else limit)
        versions = result.get("supportedVersions")
        if not isinstance(versions, list) or version not in versions:
            # A server of the handshake era may answer any method it does not know with an empty result (the
            # conformance harness's mock servers do): only a listed revision says the server speaks it.
            raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: the server's server/discover lists no {version}")
        meta = result.get("_meta")
        server = meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None
        self._adopt(version, result.get("capabilities"), server)
        if isinstance(result.get("instructions"), str):
            self.instructions = result["instructions"]
        return result

    async def learn(self, down: Downstream) -> None:
        """Learn which era the server speaks, for a 2026-07-28 client: ``server/discover`` first, the handshake
        when the server does not know it (or when pinned to a handshake revision).

        On ``auto`` the probe is bounded as a client's is (:data:`~elicitor.client._era.PROBE_TIMEOUT`), on every
        transport: a server of the handshake era may never answer a method it does not know (or answer with an
        error that names no request), and the handshake follows on the same connection, within
        :data:`HANDSHAKE_TIMEOUT`. A stdio server that ends the connection instead (the official Python SDK before
        1.7 stops serving on such a method, and exits on the next line it reads) is started again, and its first
        line is ``initialize``, as elicitor's client does. Both limits count the server's silence only: a person
        signing in upstream meanwhile stops them, and anything the server says (a proxy beyond telling of its own
        person) starts them afresh. A server that accepted the connection and then says nothing (stopped, hung)
        fails the client's request with :class:`Silent`, never holds it for ever."""
        try:
            self._restartable = self.wanted == "auto" and isinstance(self.transport, StdioClientTransport)
            await self._learn(down)
        finally:
            self._restartable = False

    async def _learn(self, down: Downstream) -> None:
        if self.wanted == "auto" or self.wanted in STATELESS_REVISIONS:
            try:
                await self.discover(down, limit=PROBE_TIMEOUT if self.wanted == "auto" else HANDSHAKE_TIMEOUT)
                return
            except Silent:
                if self.wanted != "auto":
                    raise
                logger.info("the server did not answer server/discover in %g s; using the handshake", PROBE_TIMEOUT)
            except ConnectionClosed:
                if not self._restartable:
                    raise
            except JSONRPCError as exc:
                if exc.code == UNSUPPORTED_PROTOCOL_VERSION:
                    # A 2026-07-28 server that wants another version: the client's own requests (forwarded as
                    # they are) get the same answer and retry with one it lists.
                    self._adopt(STATELESS_REVISIONS[0], {}, None)
                    return
                if self.wanted != "auto" or exc.data == SIGN_IN_FAILED:
                    raise  # a sign-in that failed says nothing of the server's era
                logger.info("the server does not speak 2026-07-28 (%s); using the handshake", exc.message)
        try:
            await self.handshake(down)
        except ConnectionClosed:
            if not self._restartable:
                raise
            await self._reopened.wait()  # run() starts the server again: initialize is the first line it reads
            if self.closed:
                raise upstream_ended(await self.why_gone()) from None
            await self.handshake(down)

    def _adopt(self, revision: str, capabilities: object, server: object) -> None:
        self.revision = revision
        self.capabilities = capabilities if isinstance(capabilities, dict) else {}
        self.server = server if isinstance(server, dict) else None
        if self.session is not None:  # 2025-03-26 said both sides must take JSON-RPC batches (see split_batch)
            self.session.batches = revision in ACCEPTED_OLDER_REVISIONS
            if not is_stateless(revision):  # the requests forwarded say it (mcp.protocol.version)
                self.session.revision = revision
        if hasattr(self.transport, "protocol_version"):
            self.transport.protocol_version = revision  # type: ignore[union-attr]


def _retag(params: JSONObject, theirs: RequestId | None, mine: RequestId | None) -> JSONObject:
    """``params`` whose ``_meta`` subscription id names ``mine`` where the server wrote ``theirs``."""
    meta = params.get("_meta")
    if mine is None or not isinstance(meta, dict) or meta.get(SUBSCRIPTION_ID) != theirs:
        return params
    return {**params, "_meta": {**meta, SUBSCRIPTION_ID: mine}}
