"""One downstream connection (an MCP client: we are its server) joined to the upstream server (we are its client),
forwarding faithfully and translating only what the two sides cannot say to each other.

Both sides are plain :mod:`elicitor.session` sessions: each request from one side becomes a request on the other
(the sessions give it a fresh id there, so ids never collide), its result or error (code and data kept) goes back,
a cancellation cancels the forwarded request (the other side is told), and notifications pass through. By the
client's era (learnt from its first message):

* **a handshake-era client** (``initialize``) gets an upstream connection of its own (:class:`~._upstream.Upstream`)
  for as long as it stays: the server sees one client per client, and whatever it pushes or notifies on that
  connection is this client's. On a 2026-07-28 server (:meth:`Bridge._over_stateless`) each ``input_required`` result
  is turned into requests pushed to the client in the middle of its call; the answers go back upstream with the
  server's ``requestState`` untouched, until the final result.
* **a 2026-07-28 client** is served request by request (:class:`~._stateless.Stateless`), exactly as the clients
  of a ``--listen`` proxy are: in front of a handshake-era server each call is held open upstream across the
  client's rounds (:mod:`._held`).
* **a server that ends** (crashed, killed, exited) does not end the client's connection: the calls in flight get
  an error saying how it ended, and the next request opens a new upstream connection (a stdio server started
  again, at a bounded pace: :mod:`._command`), on which a handshake-era client's ``initialize`` (and log level)
  is sent again. Nothing the person answered is asked again: no call is sent twice.
* **a client that cannot elicit** (``ui``): the proxy declares elicitation upstream for the modes the client did
  not declare, and answers those requests itself through ``ui`` (the same checks as any elicitor client, see
  :func:`~elicitor.client._answer.answer_elicitation`). What the client declared stays the client's.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace

import anyio
import anyio.abc

from .._exceptions import ConnectionClosed, JSONRPCError, TaskCancelled
from .._outcomes import DRAFT_DECLINE
from ..client._handlers import ElicitationHandler
from ..client._pace import PersonPaced
from ..client._tasks import TaskHandle, TaskPort
from ..client._transport import SIGN_IN_FAILED
from ..protocol import NotificationReceived, RequestReceived, is_stateless_request
from ..server._server import DEFAULT_ELICITATION_TIMEOUT
from ..session import Session, open_session
from ..telemetry import _state as _telemetry
from ..transports import Transport
from ..types import (
    HANDSHAKE_REVISIONS,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    STATELESS_REVISIONS,
    TASKS_EXTENSION,
    JSONObject,
    RequestId,
)
from ._downstream import Downstream
from ._held import declined, url_required
from ._lanes import start
from ._owners import TaskOwners, own_key
from ._render import render
from ._signing import SIGNING_IN as SIGNING_IN
from ._signing import SignInWait, asks_for_notices
from ._stateless import MAX_ROUNDS, Stateless, asks_in_rounds
from ._upstream import SUBSCRIPTION_ID, Connect, Notify, Route, Silent, Upstream, upstream_ended

logger = logging.getLogger("elicitor.proxy")

_HANDSHAKE_ONLY_NOTES = frozenset({"notifications/initialized"})
_LIST_FLAGS = {"toolsListChanged": "tools", "promptsListChanged": "prompts", "resourcesListChanged": "resources"}
"""The ``subscriptions/listen`` flag for each list a 2026-07-28 server may declare ``listChanged`` for."""


class Bridge:
    """Serves one downstream connection by forwarding to the upstream server (see the module docstring).

    Args:
        connect: opens an upstream connection.
        ui: answers elicitations the downstream client cannot (``None``: forward capabilities as declared).
        upstream_protocol: ``auto`` (whatever the server speaks), or a revision to insist on.
        elicitation_timeout: seconds a question may wait for the person's answer, and a call held for a 2026-07-28
            client may go without progress, before it is cancelled (the client is told, the server hears a
            dismissal); as ``Server(elicitation_timeout=...)``, an hour by default. ``None``: no limit.
        mirrored: tool name to mirrored headers (SEP-2243), shared by the proxy's connections.
        principal: who the client authenticated as (the proxy's HTTP app with ``auth``), or ``None``.
        owners: whose task is whose on 2026-07-28 servers (:class:`~._owners.TaskOwners`), shared by the proxy's
            connections.
        sign_in: the upstream's sign-in (:class:`~elicitor.OAuth`), when a person may have to sign in there: while
            they do, a handshake-era client's ``initialize`` waits, and the client hears a log message every
            ``keepalive`` seconds saying so (the messages a server may send before ``initialize`` is answered), which
            keeps a client that counts the server's silence (elicitor's) from giving up on a person taking minutes.
            So do its later requests when the server declared ``logging`` (a sign-in mid-session, for more scope).
            A 2026-07-28 request hears one only if it asked for log messages (see :mod:`._signing`).
        keepalive: seconds between those messages (below the client's handshake limit: 30 s for elicitor's).
        on_list_change: also told of each list change the server says on this client's connection (a
            :class:`ProxyServer` tells its 2026-07-28 listeners, who are on another connection).
    """

    def __init__(
        self,
        connect: Connect,
        *,
        ui: ElicitationHandler | None = None,
        upstream_protocol: str = "auto",
        elicitation_timeout: float | None = DEFAULT_ELICITATION_TIMEOUT,
        mirrored: dict[str, dict[str, str]] | None = None,
        principal: str | None = None,
        owners: TaskOwners | None = None,
        sign_in: PersonPaced | None = None,
        keepalive: float = 10.0,
        on_list_change: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self._connect = connect
        self._on_list_change = on_list_change
        self._signing = SignInWait(sign_in, keepalive)
        self._principal = principal
        self._owners = owners if owners is not None else TaskOwners()
        self._ui = ui
        self._wanted = upstream_protocol
        self._timeout = elicitation_timeout
        self.mirrored = mirrored if mirrored is not None else {}
        self.down: Session | None = None
        self.down_info = Downstream(ui=ui)
        self.up: Upstream | None = None
        self._stateless: Stateless | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._ready = anyio.Lock()
        self._end = anyio.Event()
        self._spare: Upstream | JSONRPCError | None = None
        self._spare_ready = anyio.Event()
        self._in_rounds: set[str] = set()
        """Tools found to ask in rounds (see :func:`~._stateless.asks_in_rounds`): called on 2026-07-28."""
        self._in_flight: list[RequestId] = []
        """The client's requests forwarded upstream and not yet answered: while there is one, what the server
        pushes or notifies on the client's connection is about it (see :meth:`_related`)."""
        self._hello: JSONObject | None = None
        """The ``initialize`` params sent upstream for a handshake-era client, sent again to a server started anew."""
        self._level: str | None = None
        """The level the client last set with ``logging/setLevel``, set again on a server started anew."""
        self._as_tasks: set[str] = set()
        """Tools of a 2026-07-28 server that run only as tasks (it answered -32021): called declaring the tasks
        extension, and followed (:meth:`_as_task`)."""

    async def serve(self, downstream: Transport) -> None:
        """Forward between ``downstream`` and the upstream server until either side closes."""
        stop = self._signing.follow()
        try:
            await self._serve(downstream)
        finally:
            stop()

    async def _serve(self, downstream: Transport) -> None:
        started = time.monotonic_ns()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                async with open_session(downstream, self._from_downstream, self._downstream_note) as down:
                    self.down = down

                    async def ended() -> None:
                        await down.wait_closed()
                        self._end.set()

                    tg.start_soon(ended)
                    tg.start_soon(self._prepare)
                    await self._end.wait()
                tg.cancel_scope.cancel()
        finally:
            if _telemetry.state.on and self.down is not None:  # mcp.server.session.duration: the client's session
                from ..telemetry import _sessions

                network = getattr(downstream, "network", "pipe")
                error = _sessions.why_ended("server", self.down, downstream)
                version = _sessions.http_version(downstream)
                _sessions.session_ended("server", started, self.down.revision, network, error, version)

    async def _prepare(self) -> None:
        """Open the upstream connection while the client starts (a stdio server may take seconds to start; the
        client's first request has a deadline): it becomes the client's own connection, or the first one its
        2026-07-28 requests go on. When it ends, the next request opens another one (see :meth:`_again`)."""
        assert self._tg is not None
        upstream = self._new_upstream()
        try:
            self._spare = await start(upstream, self._tg)
        except JSONRPCError as exc:
            self._spare = exc
        finally:
            self._spare_ready.set()

    def _new_upstream(self) -> Upstream:
        """A connection to the server, not yet open; its handshake's clocks stop while a person signs in there."""
        return Upstream(self._connect, wanted=self._wanted, mirrored=self.mirrored, pace=self._signing.pace)

    async def _prepared(self) -> Upstream:
        """The connection :meth:`_prepare` opened, the first time; a new one after that.

        Only a client that probed with a 2026-07-28 request before its ``initialize`` asks twice (its
        ``server/discover`` went unanswered in its time, or was answered with nothing it speaks): the first
        connection went to that probe (:class:`~._stateless.Stateless`), which may have completed a handshake of
        the proxy's own on it. The client's ``initialize`` then gets a connection of its own rather than an answer
        made up from the proxy's handshake: a server must never see ``initialize`` twice on one connection, and
        what the proxy declared there (the probe's capabilities, the proxy's choice of revision) is not what this
        client declares now (its own capabilities, at the revision it asks for), while the server decides what
        to ask, and how, by what its connection declared."""
        await self._spare_ready.wait()
        spare, self._spare = self._spare, None
        if isinstance(spare, JSONRPCError):
            raise spare
        if spare is None:
            assert self._tg is not None
            return await start(self._new_upstream(), self._tg)
        return spare

    # ---- the client ------------------------------------------------------------------------------------------

    async def _from_downstream(self, request: RequestReceived) -> JSONObject:
        self._in_flight.append(request.id)
        up = self.up
        try:
            return await self._forward_downstream(request)
        except ConnectionClosed as exc:
            up = self.up if self.up is not None else up
            if up is not None and await up.ended_under():
                # The server ended while the call was in flight: the call is not sent again (the server may have
                # done part of it, and asked the person), the client is told how it ended.
                raise upstream_ended(await up.why_gone()) from None
            if self.down is not None and not self.down.closed:
                # The client is still there, so what closed is on the server's side: it is answered (a handler's
                # ConnectionClosed leaves its request unanswered, for a peer that went away).
                raise JSONRPCError(INTERNAL_ERROR, f"Internal error: the upstream connection closed: {exc}") from None
            raise
        finally:
            self._in_flight.remove(request.id)

    def _related(self) -> RequestId | None:
        """The client's request a message the server sends on the client's own connection belongs to, when it can
        be told: on stdio nothing in a pushed request or a log message says which call it is about, but while the
        client has one request in flight it can only be that one. Sent there, on Streamable HTTP it goes on that
        request's own stream, as the server would send it without the proxy (the spec's SHOULD), and reaches a
        client that never opens the optional standalone GET stream; with several in flight, it goes on that
        stream."""
        return self._in_flight[0] if len(self._in_flight) == 1 else None

    async def _forward_downstream(self, request: RequestReceived) -> JSONObject:
        method, params = request.method, dict(request.params or {})
        if method == "tools/call":
            params = own_key(params, self._principal)
        if method == "initialize":
            async with self._signing.told(self._related_notify(request.id)):
                result = await self._initialize(params)
            agreed = result.get("protocolVersion")
            if self.down is not None and isinstance(agreed, str) and agreed in HANDSHAKE_REVISIONS:
                self.down.revision = agreed  # the questions passed on to the client say it (mcp.protocol.version)
            return result
        if is_stateless_request(params):
            stateless = self._stateless_proxy()
            notify = self._related_notify(request.id)
            if not asks_for_notices(params):
                return await stateless.serve(request, notify, self._principal)
            # A 2026-07-28 request that asked for log messages may hear them (that era has no ping, and a server
            # sends none to a request that did not ask): while a person signs in upstream, it hears why it waits.
            # One that did not hears nothing on stdio (see _signing).
            async with self._signing.told(notify):
                return await stateless.serve(request, notify, self._principal)
        up = self.up
        if up is None:
            raise JSONRPCError(INVALID_REQUEST, "Invalid request: initialize first")
        if up.closed:
            up = await self._again(up)
        if self._signing.sign_in is None or not isinstance(up.capabilities.get("logging"), dict):
            return await self._forward_handshake(up, request.id, method, params)
        # A person may have to sign in again mid-session (more scope for a tool, a token that could not be
        # refreshed): the client hears why its request waits, as a log message, which a server that declared
        # logging may send at any time after initialize (one that did not is not made to seem to).
        async with self._signing.told(self._related_notify(request.id)):
            return await self._forward_handshake(up, request.id, method, params)

    async def _forward_handshake(
        self, up: Upstream, request_id: RequestId, method: str, params: JSONObject
    ) -> JSONObject:
        """A handshake-era client's request after ``initialize``, on its own connection."""
        if method == "logging/setLevel" and isinstance(params.get("level"), str):
            # Kept for what goes on 2026-07-28, where each request carries its level (that era has no setLevel),
            # and for a server started anew.
            self.down_info = replace(self.down_info, log_level=params["level"])
            self._level = params["level"]
            if up.stateless:
                return {}
        if up.stateless:
            return await self._over_stateless(up, request_id, method, params)
        in_rounds = method == "tools/call" and self._wanted == "auto" and str(params.get("name")) in self._in_rounds
        stateless_up = await self._stateless_upstream() if in_rounds else None
        if stateless_up is not None:
            return await self._over_stateless(stateless_up, request_id, method, params)
        self._owners.check(method, params, self._principal)
        try:
            result = await self._call(up, request_id, method, params)
        except JSONRPCError as exc:
            # A tool of a server that speaks both eras, asking in rounds (2026-07-28 only): called there instead,
            # which is safe (see asks_in_rounds) and remembered.
            if method != "tools/call" or self._wanted != "auto" or not asks_in_rounds(exc):
                raise
            stateless_up = await self._stateless_upstream()
            if stateless_up is None:
                raise
            self._in_rounds.add(str(params.get("name")))
            return await self._over_stateless(stateless_up, request_id, method, params)
        # The server may bind a task to the one client it sees (the proxy) rather than to this session: whose
        # it is, the proxy keeps (see _owners).
        if method == "tools/call":
            self._owners.created(result, self._principal)
        elif method == "tasks/list":
            result = self._owners.listed(result, self._principal)
        return result

    async def _call(self, up: Upstream, request_id: RequestId, method: str, params: JSONObject) -> JSONObject:
        """Forward on the client's own connection. A -32042 (URL required) for a client that did not declare URL
        mode is asked of the person by ``--ui``, and the call made again as soon as they say they are done (the
        server answers -32042 again if the step is not finished, up to :data:`MAX_ROUNDS` times)."""
        route = Route(self._related_notify(request_id), None)
        for _ in range(MAX_ROUNDS):
            try:
                return await up.request(method, params or None, route=route)
            except JSONRPCError as exc:
                required = url_required(exc)
                questions = [{"method": "elicitation/create", "params": e} for e in required]
                if not questions or not all(self.down_info.renders(q) for q in questions):
                    raise
                for question in questions:
                    answer = await render(self.down_info, up, question)
                    if answer.get("action") != "accept":
                        return declined(required)
        raise JSONRPCError(
            INTERNAL_ERROR, f"Internal error: the server still needed a URL step after {MAX_ROUNDS} tries"
        )

    async def _stateless_upstream(self) -> Upstream | None:
        """A 2026-07-28 connection to the server, if it speaks that era too (for a handshake-era client)."""
        down = replace(self.down_info, revision=STATELESS_REVISIONS[0], principal=None, ui=self._ui)
        try:
            first = await self._stateless_proxy().lanes.first(down)
        except JSONRPCError:
            return None
        return first if first.stateless else None

    def _related_notify(self, request_id: RequestId) -> Notify:
        """Notifications about one of the client's requests: on its own stream (Streamable HTTP)."""
        down = self._down()

        async def notify(method: str, params: JSONObject) -> None:
            await down.notify(method, params, related=request_id)

        return notify

    def _stateless_proxy(self) -> Stateless:
        if self._stateless is None:
            assert self._tg is not None
            self._stateless = Stateless(
                self._connect, self._tg, ui=self._ui, upstream_protocol=self._wanted,
                elicitation_timeout=self._timeout, mirrored=self.mirrored,
                first=self._prepared if self.up is None else None, on_note=self._upstream_note, owners=self._owners,
                pace=self._signing.pace,
            )  # fmt: skip
        return self._stateless

    async def _initialize(self, params: JSONObject) -> JSONObject:
        """The client's ``initialize``: forwarded on a connection of its own (its capabilities widened by the modes
        the proxy renders itself); for a 2026-07-28 server, answered from the server's ``server/discover``."""
        requested = params.get("protocolVersion")
        caps = params.get("capabilities")
        self.down_info = Downstream(
            requested if isinstance(requested, str) and requested in HANDSHAKE_REVISIONS else HANDSHAKE_REVISIONS[0],
            caps if isinstance(caps, dict) else {},
            params.get("clientInfo"),
            None,
            self._ui,
            # No logging/setLevel yet: a handshake-era server sends its logs anyway (elicitor's from info up);
            # on 2026-07-28 a request without a level gets none, so the proxy asks for the same on its behalf.
            "info",
        )
        async with self._ready:
            if self.up is not None:
                raise JSONRPCError(INVALID_REQUEST, "Invalid request: already initialized")
            up = await self._prepared()
            up.on_push = self._from_upstream
            up.on_note = self._upstream_note
            self.up = up
            if self._wanted == "auto" or self._wanted in HANDSHAKE_REVISIONS:
                try:
                    self._hello = {**params, "capabilities": self.down_info.upstream_capabilities()}
                    return await up.initialize(self._hello)
                except JSONRPCError as exc:
                    if self._wanted != "auto" or exc.data == SIGN_IN_FAILED or isinstance(exc, Silent) or up.closed:
                        # A sign-in that failed, silence, or a server that ended is not the server refusing:
                        # nothing is tried again on this connection. One that ended leaves the client free to
                        # initialize again, on a server started anew.
                        if up.closed:
                            self.up = None
                        raise
                    logger.info("the server refused initialize (%s); trying 2026-07-28", exc.message)
            discovered = await up.discover(None)
        capabilities = {k: v for k, v in (discovered.get("capabilities") or {}).items() if k != "extensions"}
        result: JSONObject = {
            "protocolVersion": self.down_info.revision,
            "capabilities": capabilities,
            "serverInfo": up.server,
        }
        if isinstance(discovered.get("instructions"), str):
            result["instructions"] = discovered["instructions"]
        return result

    async def _again(self, gone: Upstream) -> Upstream:
        """A new connection in place of ``gone``, which the server ended: the server started again (or told again,
        over HTTP) what the client's session told it: its ``initialize`` (answered with the same revision, or the
        client is told it changed), ``notifications/initialized``, its log level. Requests that come meanwhile
        wait for the same one. What the server kept of the session besides (subscriptions, roots it asked for,
        its own memory) is not restored: the server starts afresh."""
        async with self._ready:
            if self.up is not gone and self.up is not None and not self.up.closed:
                return self.up
            logger.info("the upstream server %s; connecting again for the client's next request", await gone.why_gone())
            assert self._tg is not None
            up = await start(self._new_upstream(), self._tg)
            up.on_push = self._from_upstream
            up.on_note = self._upstream_note
            if gone.stateless:
                await up.discover(None)
            else:
                assert self._hello is not None
                result = await up.initialize(self._hello)  # a server that dies at once says how (upstream_ended)
                if result.get("protocolVersion") != gone.revision:
                    up.close()
                    raise JSONRPCError(
                        INTERNAL_ERROR,
                        f"Internal error: the upstream server, started again, chose protocol version "
                        f"{result.get('protocolVersion')!r} where it had chosen {gone.revision!r}: connect again",
                    )
                await up.notify("notifications/initialized", None)
                up.started()
                await up.set_log_level(self._level)
            self.up = up
            return up

    async def _downstream_note(self, note: NotificationReceived) -> None:
        up = self.up
        if up is None:
            return  # a 2026-07-28 client's notifications name no call upstream
        if note.method in _HANDSHAKE_ONLY_NOTES and up.stateless:
            if note.method == "notifications/initialized":
                self._listen_for_changes(up)
            return  # the proxy completed the upstream handshake itself, or there is none
        params = note.params
        if params is not None and up.stateless and is_stateless_request(params):
            assert up.revision is not None
            params = self.down_info.with_meta(params, up.revision)
        await up.notify(note.method, params)
        if note.method == "notifications/initialized":
            up.started()

    # ---- handshake-era client, 2026-07-28 server ----------------------------------------------------------------

    async def _over_stateless(self, up: Upstream, request_id: RequestId, method: str, params: JSONObject) -> JSONObject:
        """Follow ``input_required`` rounds upstream, pushing each question to the client mid-call; a tool the
        server runs only as a task (2026-07-28 tasks extension) is followed to its end (:meth:`_as_task`)."""
        assert up.revision is not None
        # This client never receives a 2026-07-28 task id (a task the server creates, the proxy follows itself):
        # any other person's task is refused here, as the server would refuse it without the proxy between.
        self._owners.check(method, params, self._principal)
        as_task = method == "tools/call" and str(params.get("name")) in self._as_tasks
        down = _with_tasks(self.down_info) if as_task else self.down_info
        route = Route(self._related_notify(request_id), None)
        original, params = params, down.with_meta(params, up.revision)
        cannot: dict[str, str] = {}
        """Input requests of the last round the client could not answer (as JSON), and why."""
        for _ in range(MAX_ROUNDS):
            try:
                result = await up.request(method, params, route=route)
            except JSONRPCError as exc:
                if method != "tools/call" or as_task or not _needs_tasks(exc):
                    raise
                # The tool runs only as a task, refused before it ran: called again declaring the extension.
                self._as_tasks.add(str(original.get("name")))
                as_task, down = True, _with_tasks(self.down_info)
                params = down.with_meta(original, up.revision)
                continue
            requests = result.get("inputRequests")
            if result.get("resultType") == "task" and as_task:
                return await self._as_task(up, down, request_id, result, route)
            if result.get("resultType") != "input_required":
                result.pop("resultType", None)
                return result
            if not isinstance(requests, dict):
                raise JSONRPCError(INTERNAL_ERROR, "Internal error: the server sent a malformed input_required result")
            for question in requests.values():
                again = cannot.get(_as_key(question))
                if again is not None:
                    # Refused (cancel) last round and asked again as it was: a server doing so would ask until
                    # MAX_ROUNDS, the client refusing each time. Say what it asks for instead.
                    raise JSONRPCError(
                        INTERNAL_ERROR,
                        f"Internal error: the server asked again for input the client refused (as cancel): {again}",
                    )
            cannot = {}
            answers = await self._answer_all(up, request_id, requests, cannot)
            params = {**params, "inputResponses": answers}
            state = result.get("requestState")
            if isinstance(state, str):
                params["requestState"] = state
            else:
                params.pop("requestState", None)
        raise JSONRPCError(
            INTERNAL_ERROR, f"Internal error: the server still asked for input after {MAX_ROUNDS} rounds"
        )

    async def _as_task(
        self, up: Upstream, down: Downstream, request_id: RequestId, created: JSONObject, route: Route
    ) -> JSONObject:
        """A task the server created for a tool that runs only as one, for a handshake-era client: the client's
        call stays open while the proxy follows the task (``tasks/get`` at the server's pace, each input request
        asked of the client mid-call once and sent with ``tasks/update``: :class:`~elicitor.client._tasks.TaskHandle`,
        as elicitor's client follows one) and ends with the task's result or error. A 2025-11-25 client is not
        offered a task of its own to follow instead: the proxy lists no ``taskSupport`` and declares no ``tasks``
        to it (the 2026-07-28 listing has none to pass on), so it never asks for one, and waiting is all it needs.
        If the client cancels the call, the task is cancelled upstream."""
        assert up.revision is not None
        revision = up.revision
        last: list[JSONObject] = [created]

        async def request(method: str, params: JSONObject) -> JSONObject:
            answer = await up.request(method, down.with_meta(params, revision), route=route)
            if method == "tasks/get":
                last.append(answer)
            return answer

        async def answer_input(question: object) -> JSONObject:
            if not isinstance(question, dict):
                return {"action": "cancel"}
            return await self._answer_for_client(up, request_id, question, {})

        handle = TaskHandle(TaskPort(request, answer_input, lambda token: None), created)
        try:
            await handle.wait()
        except TaskCancelled as exc:
            raise JSONRPCError(INTERNAL_ERROR, f"Internal error: the server cancelled the task ({exc})") from None
        result = last[-1].get("result")
        if not isinstance(result, dict):
            raise JSONRPCError(INTERNAL_ERROR, "Internal error: the server's completed task has no result")
        return {k: v for k, v in result.items() if k != "resultType"}

    async def _answer_all(
        self, up: Upstream, request_id: RequestId, requests: JSONObject, cannot: dict[str, str]
    ) -> JSONObject:
        """Every input request of a round, asked of the client at once (it may show them together); those the
        client cannot answer are answered ``cancel`` and put in ``cannot`` with the reason."""
        answers: JSONObject = {}

        async def answer(key: str, question: JSONObject) -> None:
            answers[key] = await self._answer_for_client(up, request_id, question, cannot)

        async with anyio.create_task_group() as tg:
            for key, question in requests.items():
                if isinstance(question, dict):
                    tg.start_soon(answer, key, question)
        return answers

    async def _answer_for_client(
        self, up: Upstream, request_id: RequestId, question: JSONObject, cannot: dict[str, str]
    ) -> JSONObject:
        """One input request of a 2026-07-28 server, asked of a handshake-era client as a request mid-call; one
        the client cannot answer is answered ``cancel`` (an input response cannot be an error), and why is put in
        ``cannot``."""
        method, params = question.get("method"), question.get("params")
        if not isinstance(method, str) or not isinstance(params, dict):
            cannot[_as_key(question)] = "an input request that is not a request"
            return {"action": "cancel"}
        if self.down_info.renders(question):
            try:
                return await render(self.down_info, up, question)
            except JSONRPCError as exc:
                cannot[_as_key(question)] = exc.message
                return {"action": "cancel"}
        if method == "elicitation/create" and params.get("mode", "form") not in self.down_info.modes():
            # Never sent to a client that did not declare the mode.
            cannot[_as_key(question)] = f"the client did not declare elicitation mode {params.get('mode', 'form')!r}"
            return {"action": "cancel"}
        if method == "elicitation/create" and params.get("mode") == "url" and "elicitationId" not in params:
            # 2025-11-25 requires an id on a URL request; 2026-07-28 has none. The retry that follows the
            # answer is the server's way to learn whether the person finished (it asks again if not).
            params = {**params, "elicitationId": secrets.token_urlsafe(16)}
        try:
            return await self._ask_client(method, params, request_id, refusal_as_cancel=True)
        except _Refused as refused:
            cannot[_as_key(question)] = refused.reason
            return {"action": "cancel"}

    # ---- the server ------------------------------------------------------------------------------------------

    async def _from_upstream(self, request: RequestReceived) -> JSONObject:
        """A request the server pushes mid-call on this client's own connection (elicitation, sampling, roots)."""
        method, params = request.method, dict(request.params or {})
        question: JSONObject = {"method": method, "params": params}
        if self.down_info.renders(question):
            assert self.up is not None
            return await render(self.down_info, self.up, question)
        return await self._ask_client(method, params, self._related())

    async def _ask_client(
        self, method: str, params: JSONObject, related: RequestId | None, *, refusal_as_cancel: bool = False
    ) -> JSONObject:
        """Ask the client what the server asks. The client's error answer goes to the server as it is (its code and
        its reason: a form outside the spec's subset, a mode it did not declare), as it would without the proxy;
        only an input request of a 2026-07-28 server (``refusal_as_cancel``), whose answer cannot be an error, is
        answered ``cancel`` instead (:class:`_Refused` says why)."""
        try:
            answer = await self._down().request(method, params or None, related=related, timeout=self._timeout)
        except JSONRPCError as exc:
            if method != "elicitation/create" or not refusal_as_cancel:
                raise
            logger.info("the client refused %s: %s", method, exc.message)
            raise _Refused(exc.message) from None
        except TimeoutError:  # the client was told (notifications/cancelled); the server hears a dismissal
            logger.info("the client did not answer %s within %s s", method, self._timeout)
            if method == "elicitation/create":
                return {"action": "cancel"}
            raise JSONRPCError(INTERNAL_ERROR, f"Internal error: the client did not answer {method} in time") from None
        if method == "elicitation/create" and answer.get("action") == DRAFT_DECLINE:
            # A client of 2025-06-18's draft (the TypeScript SDK up to 1.13) refuses with "reject": the server
            # hears "decline", the word it knows (an official SDK's server would fail the call on "reject").
            answer = {**answer, "action": "decline"}
        return answer

    def _listen_for_changes(self, up: Upstream) -> None:
        """A handshake-era client in front of a 2026-07-28 server: the server tells of list changes only on a
        ``subscriptions/listen`` stream, while the client, told ``listChanged`` in its ``initialize`` answer,
        expects ``notifications/*/list_changed`` on its session. The proxy listens for the lists the server
        declares it for, for as long as the client's session lasts, and tells the client of each change."""
        wanted: JSONObject = {}
        for flag, kind in _LIST_FLAGS.items():
            declared = up.capabilities.get(kind)
            if isinstance(declared, dict) and declared.get("listChanged") is True:
                wanted[flag] = True
        if not wanted or self._tg is None or up.revision is None:
            return
        params = self.down_info.with_meta({"notifications": wanted}, up.revision)

        async def tell(method: str, params: JSONObject) -> None:
            if method == "notifications/subscriptions/acknowledged":
                return  # the proxy's own subscription, not the client's
            meta = params.get("_meta")
            if isinstance(meta, dict) and SUBSCRIPTION_ID in meta:
                rest = {k: v for k, v in meta.items() if k != SUBSCRIPTION_ID}
                params = {k: v for k, v in params.items() if k != "_meta"} | ({"_meta": rest} if rest else {})
            await self._upstream_note(method, params)

        async def listen() -> None:
            try:
                await up.listen(params, Route(tell, "list-changes"))
            except (JSONRPCError, ConnectionClosed) as exc:
                logger.info("the server's list changes cannot be followed: %s", exc)

        self._tg.start_soon(listen)

    async def _upstream_note(self, method: str, params: JSONObject | None) -> None:
        if self._on_list_change is not None and method.endswith("/list_changed"):
            await self._on_list_change(method)
        if not self._owners.tells(method, params, self._principal):
            logger.debug("a task's status was not passed on: the task is another person's")
            return
        if self.down is not None and not self.down.closed:
            await self.down.notify(method, params, related=self._related())

    def _down(self) -> Session:
        if self.down is None:
            raise ConnectionClosed("the client is not connected")
        return self.down


class _Refused(Exception):
    """The client refused an input request (the answer becomes ``cancel``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _as_key(question: object) -> str:
    """An input request as a key: the same request asked again has the same key."""
    return json.dumps(question, sort_keys=True)


def _needs_tasks(error: JSONRPCError) -> bool:
    """Whether a 2026-07-28 server refused a call because the client did not declare the tasks extension (-32021
    naming it): a refusal before the tool runs (ext-tasks "Capability Negotiation"), so calling again is safe."""
    data = error.data if isinstance(error.data, dict) else {}
    required = data.get("requiredCapabilities")
    extensions = required.get("extensions") if isinstance(required, dict) else None
    return (
        error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
        and isinstance(extensions, dict)
        and TASKS_EXTENSION in extensions
    )


def _with_tasks(down: Downstream) -> Downstream:
    """``down`` declaring the tasks extension upstream: the proxy follows the tasks, not the client."""
    extensions = down.capabilities.get("extensions")
    extensions = {**(extensions if isinstance(extensions, dict) else {}), TASKS_EXTENSION: {}}
    return replace(down, capabilities={**down.capabilities, "extensions": extensions})


@asynccontextmanager
async def _opened(transport: Transport) -> AsyncIterator[Transport]:
    yield transport


def static(transport: Transport) -> Connect:
    """A :data:`Connect` for a transport already open (tests, in-process servers): it can be opened once."""
    return lambda: _opened(transport)
