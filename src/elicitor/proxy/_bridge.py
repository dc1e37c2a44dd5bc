"""One downstream connection (an MCP client: we are its server) joined to one upstream connection (an MCP server:
we are its client), forwarding faithfully and translating only what the two sides cannot say to each other.

Both sides are plain :mod:`elicitor.session` sessions: each request from one side becomes a request on the other
(the sessions give it a fresh id there, so ids never collide), its result or error (code and data kept) goes back,
a cancellation cancels the forwarded request (the other side is told), and notifications pass through. Then, by
the two sides' protocol eras (docs/architecture.md, "The proxy"):

* **same era**: nothing else to do; on 2026-07-28 ``input_required`` results and their ``requestState`` pass
  through untouched.
* **2026-07-28 client, handshake-era server** (:meth:`Bridge._over_handshake`): the server pushes
  ``elicitation/create`` while it serves the call; the proxy holds the upstream call open and ends the client's
  request with ``input_required`` (the pushed requests as input requests, and a ``requestState`` of its own,
  sealed, naming the held call). The client's retry answers the pushed requests upstream and the call goes on.
  A held call the client never comes back for is cancelled upstream after ``held_call_ttl``.
* **handshake-era client, 2026-07-28 server** (:meth:`Bridge._over_modern`): each ``input_required`` result is
  turned into requests pushed to the client in the middle of its call; the answers go back upstream with the
  server's ``requestState`` untouched, until the final result.
* **a client that cannot elicit** (``ui``): the proxy declares elicitation upstream for the modes the client did
  not declare, and answers those requests itself through ``ui`` (the same checks as any elicitor client, see
  :func:`~elicitor.client._answer.answer_elicitation`). What the client declared stays the client's.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

import anyio
import anyio.abc

from .._exceptions import ConnectionClosed, JSONRPCError
from ..client._answer import answer_elicitation
from ..client._handlers import ElicitationHandler
from ..client._headers import header_params
from ..protocol import NotificationReceived, RequestReceived, is_modern_request
from ..server._sealing import StateSealer, request_binding
from ..session import Session, open_session
from ..transports import Transport
from ..types import (
    HANDSHAKE_REVISIONS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    METHOD_NOT_FOUND,
    MODERN_REVISIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
    URL_ELICITATION_REQUIRED,
    Implementation,
    JSONObject,
    JSONValue,
    RequestId,
    is_modern,
)

logger = logging.getLogger("elicitor.proxy")

Connect = Callable[[], "Awaitable[Transport] | AbstractAsyncContextManager[Transport]"]
"""Opens the upstream connection (a stdio server started as a child process, or an HTTP endpoint)."""

HELD_CALL_TTL = 600.0
"""Seconds a call held for a 2026-07-28 client's next round waits before it is cancelled upstream."""
QUESTION_TIMEOUT = 3600.0
"""Seconds a question relayed to the client waits for its answer (a person may think for long; a client that never
answers must not hold the call forever): then the client is told and the server gets a dismissal (cancel)."""
MAX_HELD_CALLS = 256
"""Calls held at once per connection; beyond it the oldest is cancelled upstream."""
MAX_ROUNDS = 64
"""Rounds of ``input_required`` followed for a handshake-era client before the call fails."""
URL_COMPLETION_WAIT = 60.0
"""Seconds a held call waits for the server to say the URL elicitations a -32042 listed are complete before it
calls again (the server answers -32042 once more if they are not, and the client is asked again)."""
SETTLE = 0.05
"""Seconds without a new pushed question before a held call's round is complete (questions asked together go
out together)."""

_PROXY_INFO: JSONObject = {"name": "elicitor-proxy", "version": "1"}
_CACHEABLE = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"})
"""2026-07-28 results that carry ``ttlMs`` and ``cacheScope``."""
_PER_REQUEST_META = (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL)
_HANDSHAKE_ONLY_NOTES = frozenset({"notifications/initialized"})


@dataclass
class _Pushed:
    """A request the upstream server pushed mid-call, waiting for the downstream client's answer."""

    method: str
    params: JSONObject
    answer: JSONObject | None = None
    error: JSONRPCError | None = None
    done: anyio.Event = field(default_factory=anyio.Event)


class _Held:
    """An upstream call kept open across a 2026-07-28 client's rounds."""

    def __init__(self, method: str, params: JSONObject) -> None:
        self.id = secrets.token_urlsafe(12)
        self.method = method
        self.params = params
        self.url_required: list[JSONObject] = []
        """-32042: the URL elicitations the server needs before it can run the call (asked as input requests)."""
        self.round = 0
        self.result: JSONObject | None = None
        self.error: BaseException | None = None
        self.finished = anyio.Event()
        self.asked: dict[str, _Pushed] = {}
        """Questions of the current round, by input-request key."""
        self.arrived = anyio.Event()
        self.scope = anyio.CancelScope()
        self.since = time.monotonic()
        self._keys = itertools.count(1)

    def push(self, pushed: _Pushed) -> None:
        self.asked[f"q{next(self._keys)}"] = pushed
        self.arrived.set()


class Bridge:
    """Serves one downstream connection by forwarding to one upstream connection (see the module docstring).

    Args:
        connect: opens the upstream connection.
        ui: answers elicitations the downstream client cannot (``None``: forward capabilities as declared).
        upstream_protocol: ``auto`` (whatever the server speaks), or a revision to insist on.
        held_call_ttl: see :data:`HELD_CALL_TTL`.
        question_timeout: seconds a question relayed to the client may wait for its answer (see
            :data:`QUESTION_TIMEOUT`); ``None``: as long as the connection lasts.
    """

    def __init__(
        self,
        connect: Connect,
        *,
        ui: ElicitationHandler | None = None,
        upstream_protocol: str = "auto",
        held_call_ttl: float = HELD_CALL_TTL,
        mirrored: dict[str, dict[str, str]] | None = None,
        question_timeout: float | None = QUESTION_TIMEOUT,
    ) -> None:
        self._connect = connect
        self._question_timeout = question_timeout
        self.mirrored = mirrored if mirrored is not None else {}
        """Tools that mirror parameters into headers (SEP-2243), learnt from the ``tools/list`` results forwarded:
        tool name to parameter name to header name."""
        self._ui = ui
        self._wanted = upstream_protocol
        self._ttl = held_call_ttl
        self._sealer = StateSealer()  # this connection's own: held calls live in this process only
        self.down: Session | None = None
        self.up: Session | None = None
        self._up_transport: Transport | None = None
        self.down_revision: str | None = None
        self.up_revision: str | None = None
        self.down_capabilities: JSONObject = {}
        self.down_client: JSONValue = None
        self.up_capabilities: JSONObject = {}
        self.up_server: JSONValue = None
        self.up_instructions: JSONValue = None
        self._up_ready = anyio.Lock()
        self._held: dict[str, _Held] = {}
        self._waiting: list[_Held] = []
        """Held calls whose upstream request is in flight, oldest first: a pushed request goes to the first."""
        self._tg: anyio.abc.TaskGroup | None = None
        self._notifiers: dict[str | int, Callable[[str, JSONObject], Awaitable[None]]] = {}
        self._completed: dict[str, anyio.Event] = {}
        """URL elicitations the upstream server said are complete (or that a held call waits to hear about)."""
        self._listens: dict[RequestId, RequestId] = {}
        """Open ``subscriptions/listen`` requests: the id upstream saw, to the client's own."""
        self._listen_notifiers: dict[RequestId, Callable[[str, JSONObject], Awaitable[None]]] = {}
        """Stateless listen requests: the client's id, to where its stream's notifications go."""
        """Stateless requests in flight, by progress token: where the server's progress for each goes."""

    # ---- running ---------------------------------------------------------------------------------------------

    async def serve(self, downstream: Transport) -> None:
        """Forward between ``downstream`` and a new upstream connection until either side closes."""
        async with self.upstream(), open_session(downstream, self._from_downstream, self._downstream_note) as down:
            self.down = down
            async with anyio.create_task_group() as watch:

                async def ended(session: Session) -> None:
                    await session.wait_closed()
                    watch.cancel_scope.cancel()

                watch.start_soon(ended, self._up())
                watch.start_soon(ended, down)

    @asynccontextmanager
    async def upstream(self) -> AsyncIterator[Bridge]:
        """The upstream connection, open for the block (what :meth:`serve` and :meth:`serve_request` forward to)."""
        async with AsyncExitStack() as stack:
            made = self._connect()
            if isinstance(made, AbstractAsyncContextManager):
                transport = await stack.enter_async_context(made)
            else:
                transport = await made
            self._up_transport = transport
            self.up = await stack.enter_async_context(open_session(transport, self._from_upstream, self._upstream_note))
            self._tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(self._tg.cancel_scope.cancel)
            yield self

    async def up_closed(self) -> None:
        """Wait until the upstream connection has ended."""
        await self._up().wait_closed()

    async def serve_request(
        self, request: RequestReceived, notify: Callable[[str, JSONObject], Awaitable[None]] | None
    ) -> JSONObject:
        """Serve one 2026-07-28 request that has no connection of its own (Streamable HTTP, stateless): the
        server's notifications carrying its progress token go to ``notify`` (its response stream)."""
        meta = (request.params or {}).get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if notify is not None and isinstance(token, str | int):
            self._notifiers[token] = notify
        if notify is not None and request.method == "subscriptions/listen":
            self._listen_notifiers[request.id] = notify
        try:
            return await self._from_downstream(request)
        finally:
            if isinstance(token, str | int):
                self._notifiers.pop(token, None)
            self._listen_notifiers.pop(request.id, None)

    # ---- downstream: the client ------------------------------------------------------------------------------

    async def _from_downstream(self, request: RequestReceived) -> JSONObject:
        result = await self._serve_downstream(request)
        return self._learn_tools(result) if request.method == "tools/list" else result

    async def _serve_downstream(self, request: RequestReceived) -> JSONObject:
        method, params = request.method, dict(request.params or {})
        if method == "initialize":
            return await self._initialize(params)
        if is_modern_request(params):
            meta = params["_meta"]
            self.down_revision = str(meta.get(META_PROTOCOL_VERSION))
            caps, info = meta.get(META_CLIENT_CAPABILITIES), meta.get(META_CLIENT_INFO)
            self.down_capabilities = caps if isinstance(caps, dict) else {}
            self.down_client = info
            await self._ensure_upstream(modern_hint=True, first=request)
            if self.up_revision is not None and is_modern(self.up_revision):
                return await self._forward_modern(method, params, request.id)
            if method == "server/discover":
                return self._discovered()
            return await self._over_handshake(method, params)
        await self._ensure_upstream(modern_hint=False, first=request)
        assert self.up_revision is not None
        if is_modern(self.up_revision):
            return await self._over_modern(request.id, method, params)
        return await self._up().request(method, params or None)

    async def _downstream_note(self, note: NotificationReceived) -> None:
        if note.method in _HANDSHAKE_ONLY_NOTES and (self.up_revision is None or is_modern(self.up_revision)):
            return  # the proxy completed the upstream handshake itself, or there is none
        await self._notify_up(note.method, note.params)
        if note.method == "notifications/initialized":
            self._handshake_done()

    def _handshake_done(self) -> None:
        """The upstream session is initialized: an HTTP transport opens its standalone stream now."""
        start = getattr(self._up_transport, "start_listening", None)
        if start is not None:
            start()

    def _learn_tools(self, result: JSONObject) -> JSONObject:
        """Tools that mirror parameters into headers (SEP-2243): tell an HTTP upstream transport, as a Client
        does, so the forwarded calls carry the headers the server checks."""
        headers = getattr(self._up_transport, "tool_headers", None)
        tools = result.get("tools")
        if not isinstance(tools, list):
            return result
        for tool in tools:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                mirrored = header_params(tool.get("inputSchema"))
                if isinstance(mirrored, dict):
                    self.mirrored[tool["name"]] = {path[0]: name for path, name in mirrored.items() if len(path) == 1}
                    if headers is not None and mirrored:
                        headers[tool["name"]] = mirrored
        return result

    async def _initialize(self, params: JSONObject) -> JSONObject:
        """A handshake-era client: forward its ``initialize`` (declaring what the proxy renders itself), or, for a
        2026-07-28 server, answer it from the server's ``server/discover``."""
        requested = params.get("protocolVersion")
        self.down_revision = requested if requested in HANDSHAKE_REVISIONS else HANDSHAKE_REVISIONS[0]
        caps = params.get("capabilities")
        self.down_capabilities = caps if isinstance(caps, dict) else {}
        self.down_client = params.get("clientInfo")
        async with self._up_ready:
            if self._wanted == "auto" or self._wanted in HANDSHAKE_REVISIONS:
                forwarded = {**params, "capabilities": self._upstream_capabilities(self.down_capabilities)}
                try:
                    result = await self._up().request("initialize", forwarded)
                except JSONRPCError as exc:
                    if self._wanted != "auto":
                        raise
                    logger.info("the server refused initialize (%s); trying 2026-07-28", exc.message)
                else:
                    self._adopt(
                        str(result.get("protocolVersion")), result.get("capabilities"), result.get("serverInfo")
                    )
                    return result
            discovered = await self._discover()
        capabilities = {k: v for k, v in (discovered.get("capabilities") or {}).items() if k != "extensions"}
        result = {"protocolVersion": self.down_revision, "capabilities": capabilities, "serverInfo": self.up_server}
        if isinstance(discovered.get("instructions"), str):
            result["instructions"] = discovered["instructions"]
        return result

    async def _ensure_upstream(self, *, modern_hint: bool, first: RequestReceived) -> None:
        """Learn (once) which era the upstream server speaks, completing its handshake when the client is modern."""
        if self.up_revision is not None:
            return
        async with self._up_ready:
            if self.up_revision is not None:
                return
            if not modern_hint:
                raise JSONRPCError(INVALID_PARAMS, "Invalid request: initialize first")
            if self._wanted == "auto" or self._wanted in MODERN_REVISIONS:
                try:
                    await self._discover()
                    return
                except JSONRPCError as exc:
                    if exc.code == UNSUPPORTED_PROTOCOL_VERSION:
                        # A 2026-07-28 server that wants another version: the client's own requests (forwarded
                        # as they are) get the same answer and retry with one it lists.
                        self._adopt(MODERN_REVISIONS[0], {}, None)
                        return
                    if self._wanted != "auto":
                        raise
                    logger.info("the server does not speak 2026-07-28 (%s); using the handshake", exc.message)
            version = self._wanted if self._wanted in HANDSHAKE_REVISIONS else HANDSHAKE_REVISIONS[0]
            info = (
                self.down_client if isinstance(self.down_client, dict) else {"name": "elicitor-proxy", "version": "0"}
            )
            result = await self._up().request(
                "initialize",
                {
                    "protocolVersion": version,
                    "capabilities": self._upstream_capabilities(self.down_capabilities),
                    "clientInfo": info,
                },
            )
            self._adopt(str(result.get("protocolVersion")), result.get("capabilities"), result.get("serverInfo"))
            self.up_instructions = result.get("instructions")
            await self._up().notify("notifications/initialized")
            self._handshake_done()

    def _discovered(self) -> JSONObject:
        """``server/discover`` for a 2026-07-28 client, answered from the handshake-era server's ``initialize``."""
        result: JSONObject = {
            "supportedVersions": list(MODERN_REVISIONS),
            "capabilities": dict(self.up_capabilities),
            "ttlMs": 0,
            "cacheScope": "public",
            "resultType": "complete",
        }
        if isinstance(self.up_instructions, str):
            result["instructions"] = self.up_instructions
        if isinstance(self.up_server, dict):
            result["_meta"] = {META_SERVER_INFO: self.up_server}
        return result

    async def _discover(self) -> JSONObject:
        version: str = self._wanted if self._wanted in MODERN_REVISIONS else MODERN_REVISIONS[0]
        if self._wanted == "auto" and self.down_revision is not None and is_modern(self.down_revision):
            version = self.down_revision  # the client's own version: the server judges it, not ours
        result = await self._up().request("server/discover", self._with_meta({}, version))
        meta = result.get("_meta")
        server = meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None
        self._adopt(version, result.get("capabilities"), server)
        return result

    def _adopt(self, revision: str, capabilities: object, server: object) -> None:
        self.up_revision = revision
        self.up_capabilities = capabilities if isinstance(capabilities, dict) else {}
        self.up_server = server if isinstance(server, dict) else None
        if hasattr(self._up_transport, "protocol_version"):
            self._up_transport.protocol_version = revision  # type: ignore[union-attr]

    # ---- capabilities ------------------------------------------------------------------------------------------

    def _down_modes(self) -> set[str]:
        elicitation = self.down_capabilities.get("elicitation")
        if not isinstance(elicitation, dict):
            return set()
        return {m for m in ("form", "url") if isinstance(elicitation.get(m), dict)} or {"form"}

    def _ui_modes(self) -> set[str]:
        """Modes the proxy answers itself: those the client did not declare, when a ``ui`` is set."""
        if self._ui is None:
            return set()
        modes = {"form"} | ({"url"} if hasattr(self._ui, "url") else set())
        return modes - self._down_modes()

    def _upstream_capabilities(self, declared: JSONObject) -> JSONObject:
        """What the client declared, plus the elicitation modes the proxy renders itself."""
        extra = self._ui_modes()
        if not extra:
            return dict(declared)
        modes = self._down_modes() | extra
        return {**declared, "elicitation": {mode: {} for mode in sorted(modes)}}

    def _with_meta(self, params: JSONObject, version: str | None = None) -> JSONObject:
        """``params`` with the 2026-07-28 per-request fields, for the upstream server, from the client's."""
        version = version or self.up_revision or MODERN_REVISIONS[0]
        own = params.get("_meta")
        meta = dict(own) if isinstance(own, dict) else {}
        meta[META_PROTOCOL_VERSION] = version
        meta[META_CLIENT_CAPABILITIES] = self._upstream_capabilities(self.down_capabilities)
        meta[META_CLIENT_INFO] = self.down_client if isinstance(self.down_client, dict) else _PROXY_INFO
        return {**params, "_meta": meta}

    # ---- same era, 2026-07-28 ----------------------------------------------------------------------------------

    async def _forward_modern(self, method: str, params: JSONObject, request_id: RequestId | None = None) -> JSONObject:
        """2026-07-28 on both sides: as is, unless the proxy answers some input requests itself (``ui``)."""
        if method == "subscriptions/listen" and request_id is not None:
            return await self._listen(params, request_id)
        if not self._ui_modes():
            return await self._up().request(method, params)
        params = self._with_meta(params)
        for _ in range(MAX_ROUNDS):
            result = await self._up().request(method, params)
            requests = result.get("inputRequests")
            if result.get("resultType") != "input_required" or not isinstance(requests, dict):
                return result
            mine = {k: v for k, v in requests.items() if self._renders(v)}
            if len(mine) != len(requests):
                return result  # the client must answer some of them: it gets them all, as the server sent them
            answers = {key: await self._render(request) for key, request in mine.items()}
            params = {**params, "inputResponses": answers, "requestState": result.get("requestState")}
            if params["requestState"] is None:
                del params["requestState"]
        raise JSONRPCError(
            INTERNAL_ERROR, f"Internal error: the server still asked for input after {MAX_ROUNDS} rounds"
        )

    async def _listen(self, params: JSONObject, request_id: RequestId) -> JSONObject:
        """``subscriptions/listen``: the server tags the stream's notifications with the id it saw (ours); the client
        must see its own, so they are retagged on the way down."""
        upstream_id: list[RequestId] = []
        mapped = self._listens

        def sent(up_id: RequestId) -> None:
            upstream_id.append(up_id)
            mapped[up_id] = request_id

        try:
            result = await self._up().request("subscriptions/listen", params, sent=sent)
        finally:
            for up_id in upstream_id:
                mapped.pop(up_id, None)
        return _retag(result, upstream_id[0] if upstream_id else None, request_id)

    def _renders(self, request: object) -> bool:
        if not isinstance(request, dict) or request.get("method") != "elicitation/create":
            return False
        params = request.get("params")
        mode = params.get("mode", "form") if isinstance(params, dict) else None
        return mode in self._ui_modes()

    async def _render(self, request: JSONObject) -> JSONObject:
        assert self._ui is not None
        params = request.get("params")
        server = _implementation(self.up_server)
        return await answer_elicitation(
            self._ui, params if isinstance(params, dict) else {}, server, modes=self._ui_modes(),
            modern=self.up_revision is not None and is_modern(self.up_revision),
        )  # fmt: skip

    # ---- handshake-era client, 2026-07-28 server ----------------------------------------------------------------

    async def _over_modern(self, request_id: RequestId, method: str, params: JSONObject) -> JSONObject:
        """Follow ``input_required`` rounds upstream, pushing each question to the client mid-call."""
        params = self._with_meta(params)
        for _ in range(MAX_ROUNDS):
            result = await self._up().request(method, params)
            requests = result.get("inputRequests")
            if result.get("resultType") != "input_required":
                result.pop("resultType", None)
                return result
            if not isinstance(requests, dict):
                raise JSONRPCError(INTERNAL_ERROR, "Internal error: the server sent a malformed input_required result")
            answers = await self._answer_all(request_id, requests)
            params = {**params, "inputResponses": answers}
            state = result.get("requestState")
            if isinstance(state, str):
                params["requestState"] = state
            else:
                params.pop("requestState", None)
        raise JSONRPCError(
            INTERNAL_ERROR, f"Internal error: the server still asked for input after {MAX_ROUNDS} rounds"
        )

    async def _answer_all(self, request_id: RequestId, requests: JSONObject) -> JSONObject:
        """Every input request of a round, asked of the client at once (it may show them together)."""
        answers: JSONObject = {}

        async def answer(key: str, question: JSONObject) -> None:
            answers[key] = await self._answer_for_client(request_id, question)

        async with anyio.create_task_group() as tg:
            for key, question in requests.items():
                if isinstance(question, dict):
                    tg.start_soon(answer, key, question)
        return answers

    async def _answer_for_client(self, request_id: RequestId, question: JSONObject) -> JSONObject:
        """One input request of a 2026-07-28 server, asked of a handshake-era client as a request mid-call."""
        method, params = question.get("method"), question.get("params")
        if not isinstance(method, str) or not isinstance(params, dict):
            return {"action": "cancel"}
        if method == "elicitation/create" and self._renders(question):
            return await self._render(question)
        if method == "elicitation/create" and params.get("mode") == "url" and "elicitationId" not in params:
            # 2025-11-25 requires an id on a URL request; 2026-07-28 has none. The retry that follows the
            # answer is the server's way to learn whether the person finished (it asks again if not).
            params = {**params, "elicitationId": secrets.token_urlsafe(16)}
        try:
            return await self._down().request(method, params, related=request_id, timeout=self._question_timeout)
        except JSONRPCError as exc:
            logger.info("the client refused %s: %s", method, exc.message)
            return {"action": "cancel"} if method == "elicitation/create" else {}
        except TimeoutError:  # the client was told (notifications/cancelled); the server hears a dismissal
            logger.info("the client did not answer %s within %s s", method, self._question_timeout)
            return {"action": "cancel"} if method == "elicitation/create" else {}

    # ---- 2026-07-28 client, handshake-era server ----------------------------------------------------------------

    async def _over_handshake(self, method: str, params: JSONObject) -> JSONObject:
        """Hold the upstream call open across the client's rounds (see the module docstring)."""
        binding = request_binding(method, params, None)
        held: _Held | None = None
        if "requestState" in params:
            state = self._sealer.open(params["requestState"], binding)
            held = self._held.get(str(state.get("h")))
            if held is None or held.round != state.get("n"):
                raise JSONRPCError(
                    INVALID_PARAMS, "Invalid params: this call's state has expired or was already used; call again"
                )
            responses = params.get("inputResponses")
            responses = responses if isinstance(responses, dict) else {}
            if held.url_required:
                return await self._after_url_required(held, responses, binding)
            for key, pushed in held.asked.items():
                answer = responses.get(key)
                pushed.answer = answer if isinstance(answer, dict) else {"action": "cancel"}
                pushed.done.set()
            held.asked = {}
            held.arrived = anyio.Event()
        else:
            held = self._hold(method, self._strip_meta(params))
        return await self._round(held, binding)

    async def _after_url_required(self, held: _Held, responses: JSONObject, binding: bytes) -> JSONObject:
        """The client answered the URL elicitations a -32042 listed: when the person finished them (the server's
        completion notices, waited for a bounded time), call again; a declined one ends the call as the server's
        own 2026-07-28 path would end it: a tool error."""
        self._held.pop(held.id, None)
        answers = [responses.get(f"u{index}") for index in range(1, len(held.url_required) + 1)]
        if not all(isinstance(a, dict) and a.get("action") == "accept" for a in answers):
            steps = "; ".join(str(e.get("message", "")) for e in held.url_required)
            text = f"The call needs a step the person declined or cancelled: {steps}"
            return {"content": [{"type": "text", "text": text}], "isError": True, "resultType": "complete"}
        ids = [str(e.get("elicitationId")) for e in held.url_required]
        with anyio.move_on_after(URL_COMPLETION_WAIT):
            for elicitation_id in ids:
                await self._completed.setdefault(elicitation_id, anyio.Event()).wait()
        for elicitation_id in ids:
            self._completed.pop(elicitation_id, None)
        return await self._round(self._hold(held.method, held.params), binding)

    def _hold(self, method: str, params: JSONObject) -> _Held:
        held = _Held(method, params)
        while len(self._held) >= MAX_HELD_CALLS:
            oldest = next(iter(self._held.values()))
            oldest.scope.cancel()
            self._held.pop(oldest.id, None)
        self._held[held.id] = held
        assert self._tg is not None

        async def call() -> None:
            self._waiting.append(held)
            try:
                with held.scope, anyio.fail_after(self._ttl):
                    held.result = await self._up().request(method, params or None)
            except BaseException as exc:
                held.error = exc if isinstance(exc, Exception) else ConnectionClosed("the call was cancelled")
                if not isinstance(exc, Exception):
                    raise
            finally:
                if held in self._waiting:
                    self._waiting.remove(held)
                held.finished.set()
                held.arrived.set()

        self._tg.start_soon(call)
        return held

    async def _round(self, held: _Held, binding: bytes) -> JSONObject:
        """Wait for the held call's result, or for its next questions (gathered while more keep coming)."""
        await held.arrived.wait()
        while not held.finished.is_set():
            seen = len(held.asked)
            with anyio.move_on_after(SETTLE):
                await held.finished.wait()
            if len(held.asked) == seen:
                break
        if held.finished.is_set() and not held.asked:
            self._held.pop(held.id, None)
            required = _url_required(held.error)
            if required:
                # -32042 on the handshake era is a URL input request on 2026-07-28: ask it in a round.
                held.url_required = required
                self._held[held.id] = held
                held.round += 1
                token = self._sealer.seal({"h": held.id, "n": held.round}, binding)
                requests = {
                    f"u{index}": {"method": "elicitation/create", "params": elicitation}
                    for index, elicitation in enumerate(required, 1)
                }
                return {"resultType": "input_required", "inputRequests": requests, "requestState": token}
            if held.error is not None:
                if isinstance(held.error, JSONRPCError):
                    raise held.error
                if isinstance(held.error, TimeoutError):
                    raise JSONRPCError(INTERNAL_ERROR, "Internal error: the call was not answered in time upstream")
                raise JSONRPCError(INTERNAL_ERROR, f"Internal error: {held.error}")
            assert held.result is not None
            result: JSONObject = {**held.result, "resultType": "complete"}
            if held.method in _CACHEABLE:
                # 2026-07-28 requires caching hints on these results; a handshake-era server gives none: do not
                # cache, and never share between users what it said to one.
                result.setdefault("ttlMs", 0)
                result.setdefault("cacheScope", "private")
            return result
        held.round += 1
        token = self._sealer.seal({"h": held.id, "n": held.round}, binding)
        requests = {key: {"method": p.method, "params": p.params} for key, p in held.asked.items()}
        return {"resultType": "input_required", "inputRequests": requests, "requestState": token}

    def _strip_meta(self, params: JSONObject) -> JSONObject:
        """A 2026-07-28 request as a handshake-era server reads it: without the per-request protocol fields."""
        meta = params.get("_meta")
        if not isinstance(meta, dict):
            return params
        kept = {k: v for k, v in meta.items() if k not in _PER_REQUEST_META}
        stripped = {k: v for k, v in params.items() if k != "_meta"}
        if kept:
            stripped["_meta"] = kept
        return stripped

    # ---- upstream: the server ----------------------------------------------------------------------------------

    async def _from_upstream(self, request: RequestReceived) -> JSONObject:
        """A request the server sends mid-call (elicitation, sampling, roots, ping)."""
        method, params = request.method, dict(request.params or {})
        if method == "ping":
            return {}
        if method == "elicitation/create" and self._renders({"method": method, "params": params}):
            return await self._render({"method": method, "params": params})
        if self.down_revision is not None and is_modern(self.down_revision):
            if not self._waiting:
                raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: {method} (no call of the client waits)")
            held = self._waiting[0]
            pushed = _Pushed(method, params)
            held.push(pushed)
            await pushed.done.wait()
            assert pushed.answer is not None
            return pushed.answer
        try:
            return await self._down().request(method, params or None, timeout=self._question_timeout)
        except TimeoutError:  # the client was told (notifications/cancelled)
            if method == "elicitation/create":
                return {"action": "cancel"}
            raise JSONRPCError(INTERNAL_ERROR, f"Internal error: the client did not answer {method} in time") from None

    async def _upstream_note(self, note: NotificationReceived) -> None:
        params = note.params or {}
        if note.method == "notifications/elicitation/complete" and isinstance(params.get("elicitationId"), str):
            self._completed.setdefault(params["elicitationId"], anyio.Event()).set()
            if len(self._completed) > MAX_HELD_CALLS:  # nobody waited for the oldest: forget it
                self._completed.pop(next(iter(self._completed)))
        meta = params.get("_meta")
        subscription = meta.get(SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        if isinstance(subscription, str | int) and subscription in self._listens:
            mine = self._listens[subscription]
            retagged = _retag(params, subscription, mine)
            listener = self._listen_notifiers.get(mine)
            if listener is not None:
                await listener(note.method, retagged)
            elif self.down is not None and not self.down.closed:
                await self.down.notify(note.method, retagged)
            return
        token = params.get("progressToken")
        notify = self._notifiers.get(token) if isinstance(token, str | int) else None
        if notify is not None:
            await notify(note.method, params)
        elif self.down is not None and not self.down.closed:
            await self.down.notify(note.method, note.params)

    async def _notify_up(self, method: str, params: JSONObject | None) -> None:
        if self.up is not None and not self.up.closed:
            if params is not None and self.up_revision is not None and is_modern(self.up_revision):
                params = self._with_meta(params) if is_modern_request(params) else params
            await self.up.notify(method, params)

    def _up(self) -> Session:
        if self.up is None:
            raise ConnectionClosed("the upstream server is not connected")
        return self.up

    def _down(self) -> Session:
        if self.down is None:
            raise ConnectionClosed("the client is not connected")
        return self.down


SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


def _url_required(error: BaseException | None) -> list[JSONObject]:
    """The URL elicitations a -32042 error lists (empty for any other error)."""
    if (
        not isinstance(error, JSONRPCError)
        or error.code != URL_ELICITATION_REQUIRED
        or not isinstance(error.data, dict)
    ):
        return []
    listed = error.data.get("elicitations")
    if not isinstance(listed, list):
        return []
    return [e for e in listed if isinstance(e, dict) and e.get("mode") == "url"]


def _retag(params: JSONObject, theirs: RequestId | None, mine: RequestId) -> JSONObject:
    """``params`` whose ``_meta`` subscription id names ``mine`` where the server wrote ``theirs``."""
    meta = params.get("_meta")
    if not isinstance(meta, dict) or meta.get(SUBSCRIPTION_ID) != theirs:
        return params
    return {**params, "_meta": {**meta, SUBSCRIPTION_ID: mine}}


def _implementation(raw: JSONValue) -> Implementation | None:
    import msgspec

    if not isinstance(raw, dict):
        return None
    try:
        return msgspec.convert(raw, Implementation)
    except msgspec.ValidationError:
        return None


@asynccontextmanager
async def _opened(transport: Transport) -> AsyncIterator[Transport]:
    yield transport


def static(transport: Transport) -> Connect:
    """A :data:`Connect` for a transport already open (tests, in-process servers)."""
    return lambda: _opened(transport)
