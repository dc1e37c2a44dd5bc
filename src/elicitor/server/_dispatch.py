"""``ServerSession``: one connection's dispatch — the handshake, the method table, and both eras' calls.

A request whose ``_meta`` names a protocol version is served statelessly from that ``_meta`` (2026-07-28, rounds
driven by :mod:`._round_driver`); anything else goes through the connection's handshake (2025-06-18, 2025-11-25).
Dispatch functions return the awaitable that answers instead of awaiting it, so no pass-through frame lives while a
person thinks.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import secrets
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from .._exceptions import (
    JSONRPCError,
)
from .._sentences import INVALID_ARGUMENTS, said
from ..protocol import (
    Handshake,
    NotificationReceived,
    RequestMeta,
    RequestReceived,
    is_stateless_request,
    parse_request_meta,
)
from ..session import Session, open_session
from ..telemetry import _state as _telemetry
from ..transports import Transport
from ..types import (
    IDEMPOTENT_CALLS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LOGGING_LEVELS,
    META_SERVER_INFO,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    REV_2025_11_25,
    STATELESS_REVISIONS,
    TASKS_EXTENSION,
    JSONObject,
    JSONValue,
    LoggingLevel,
    RequestId,
)
from ._askers import PushAsker
from ._calls import call_key, keep_call, kept_task_id
from ._context import Context
from ._features import completion_result
from ._invoke import invoke_handler, invoke_tool
from ._round_driver import Escalation, RoundDriver
from ._rounds import ParkedRuns, RoundAsker
from ._subscriptions import listen
from ._task_wire import capabilities_2025, declares_tasks, is_task_method, missing_tasks_extension
from ._tools import ToolDef, error_result

if TYPE_CHECKING:
    from ._server import Server
    from ._tasks import Hold

logger = logging.getLogger("elicitor.server")

Notify = Callable[[str, JSONObject], Awaitable[None]]
"""Sends a notification (method, params) about the request being served, wherever that request's messages go."""
Keepalive = Callable[[str], Awaitable[None]]
"""Sends a line the client's parsers ignore about the request being served (an SSE comment on its response
stream): it tells nothing, but a client's read timeout starts again, and elicitor's client counts it as hearing
from the server. Only a transport with such a line offers one (Streamable HTTP)."""

_HANDSHAKE_ONLY = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
"""Methods that 2026-07-28 removed: a stateless request for one gets -32601."""


class ServerSession:
    """Dispatch for one connection: the handshake era's state, and stateless 2026-07-28 requests beside it."""

    def __init__(self, server: Server, *, principal: str | None = None) -> None:
        self.server = server
        self.principal = principal
        self.handshake = Handshake()
        self.log_level: LoggingLevel | None = "info"
        self.subscriptions: set[str] = set()
        """Resource URIs this connection subscribed to (handshake revisions)."""
        self.session: Session | None = None
        self.parked: ParkedRuns | None = None
        self.id = secrets.token_hex(12)
        """This connection's id in the shared state (URL elicitations it started name it)."""
        self.rounds = RoundDriver(self)
        """Its 2026-07-28 calls, round by round."""
        self.hold: Hold | None = None
        """Where this connection's requests that may be tried again wait for a store away for a moment: the task
        requests of both eras (``TaskEngine.serve_handshake``, ``TaskEngine.serve``) and the creation of a task.
        Over HTTP, the app's bound shared by both eras (a handshake session's from its transport); over stdio with a
        shared store, one of its own (``Server.serve_stdio``); ``None``: they fail at once with the retryable
        error (a task's creation still waits, up to ``_tasks.CREATE_PATIENCE``)."""
        _telemetry.refresh()

    async def run(self, transport: Transport) -> None:
        """Serve this connection over ``transport`` until it closes; its parked runs end with it."""
        if self.hold is None:  # a replica's HTTP session carries the app's (see SessionTransport)
            self.hold = getattr(transport, "hold", None)
        self.server.url_elicitations.attach(self.id, self.notifier(None))
        started = time.monotonic_ns()
        failure: BaseException | None = None
        try:
            async with anyio.create_task_group() as runs:
                self.parked = ParkedRuns(runs, limit=self.server.max_parked_runs, ttl=self.server.parked_run_ttl)
                async with open_session(
                    transport,
                    self.on_request,
                    self.on_notification,
                    max_incoming=self.server.max_in_flight,
                    eager=True,
                ) as session:
                    self.session = session
                    session.take = self.rounds.take
                    runs.start_soon(self._forward_changes, session)
                    await session.wait_closed()
                runs.cancel_scope.cancel()
        except BaseException as exc:
            failure = exc
            raise
        finally:
            if _telemetry.state.on:  # mcp.server.session.duration: a handshake-era session only
                from ..telemetry import _sessions

                network = getattr(transport, "network", "pipe")
                error = _sessions.why_ended("server", self.session, transport, failure)
                version = _sessions.http_version(transport)
                _sessions.session_ended("server", started, self.handshake.revision, network, error, version)
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self.server.url_elicitations.detach(self.id)

    async def _forward_changes(self, session: Session) -> None:
        """Handshake era: list changes go to the connection, resource updates only if it subscribed."""
        with self.server._changes.listen() as changes:
            async for method, params in changes:
                if self.handshake.revision is None:
                    continue  # a 2026-07-28 client listens with subscriptions/listen instead
                if method == "notifications/resources/updated" and params.get("uri") not in self.subscriptions:
                    continue
                await session.notify(method, params or None)

    def notifier(self, related: RequestId | None) -> Notify:
        """Where notifications about request ``related`` go on this connection (its session, related to it)."""
        return _Notifier(self, related)

    # ---- dispatch --------------------------------------------------------------------------------------------

    async def on_notification(self, note: NotificationReceived) -> None:
        """Handle a notification from the client (``notifications/initialized`` completes the handshake)."""
        if note.method == "notifications/initialized":
            self.handshake.initialized()

    # The dispatch functions below are plain functions returning the awaitable that answers the request, rather
    # than coroutines awaiting one: a tool call may wait minutes for a person, and every coroutine frame on that
    # path is memory held per pending elicitation.

    def on_request(self, request: RequestReceived, notify: Notify | None = None) -> Awaitable[JSONObject]:
        """The awaitable answering ``request``; ``notify`` overrides where its notifications go."""
        method, params = request.method, request.params
        if is_stateless_request(params):
            return self.serve_stateless(request, notify)
        self.handshake.check(method)
        if method == "initialize":
            return _ready(self._initialize(params))
        if method == "ping":
            return _ready({})  # allowed before initialize too (basic/lifecycle: ping may come at any time)
        handshake = self.handshake
        assert handshake.revision is not None
        if _telemetry.state.on:  # the revision is the connection's, so only this layer can name it
            from ..telemetry import _hooks

            _hooks.annotate(**{"mcp.protocol.version": handshake.revision})
        meta = RequestMeta(handshake.revision, handshake.capabilities, handshake.client_info, principal=self.principal)
        return self._route(request, meta, notify, stateless=False)

    async def serve_stateless(
        self,
        request: RequestReceived,
        notify: Notify | None = None,
        principal: str | None = None,
        *,
        keepalive: Keepalive | None = None,
    ) -> JSONObject:
        """Serve a 2026-07-28 request from its own ``_meta`` alone.

        ``principal`` is the user the transport authenticated for this request (default: the connection's).
        ``keepalive``: where a line the client ignores may go while the request waits (the proxy's, while a person
        signs in upstream); a server's own tools have nothing to wait on that the client cannot hear about.
        """
        meta = parse_request_meta(request.params, STATELESS_REVISIONS)
        principal = principal if principal is not None else self.principal
        if principal is not None:
            meta = dataclasses.replace(meta, principal=principal)
        if request.method in _HANDSHAKE_ONLY:
            raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: {request.method} (removed in {meta.revision})")
        return self.stamp(await self._route(request, meta, notify, stateless=True))

    def stamp(self, result: JSONObject) -> JSONObject:
        """A 2026-07-28 result as sent: its ``resultType`` (``complete`` unless said) and the server's info."""
        result.setdefault("resultType", "complete")
        result_meta = result.get("_meta")
        if not isinstance(result_meta, dict):
            result_meta = result["_meta"] = {}
        result_meta[META_SERVER_INFO] = self.server.info
        return result

    async def serve_modern(
        self, request: RequestReceived, notify: Notify | None = None, principal: str | None = None
    ) -> JSONObject:
        """Deprecated: the former name of :meth:`serve_stateless`."""
        warnings.warn("ServerSession.serve_modern is deprecated: use serve_stateless", DeprecationWarning, stacklevel=2)
        return await self.serve_stateless(request, notify, principal)

    def _route(
        self, request: RequestReceived, meta: RequestMeta, notify: Notify | None, *, stateless: bool
    ) -> Awaitable[JSONObject]:
        method = request.method
        if method == "tools/call":
            return self._call_tool(request, meta, notify or self.notifier(request.id), stateless=stateless)
        if method == "prompts/get" and self.server._prompts:
            return self._get_prompt(request, meta, notify or self.notifier(request.id), stateless=stateless)
        if method == "resources/read" and (self.server._resources or self.server._templates):
            return self._read_resource(request, meta, notify or self.notifier(request.id), stateless=stateless)
        if method == "completion/complete" and "completions" in self.server.capabilities():
            return self._complete(request)
        if stateless and is_task_method(method):
            assert self.parked is not None
            serve = functools.partial(
                self.server.tasks.serve, self, method, request.params or {}, meta, self.parked.task_group
            )
            # Held while the store is away for a moment (``self.hold``): clients that send a request once (the
            # official SDKs) would show the person the retryable error for a Redis restart of two seconds. A try
            # acts once in all: it reads the record and changes it by compare-and-swap, which a second try finds
            # done (a takeover is claimed again by this replica, an answer recorded or a cancel made changes
            # nothing more).
            return serve() if self.hold is None else self.hold.patiently(serve, self.hold.deadline())
        if meta.revision == REV_2025_11_25 and is_task_method(method, handshake=True) and self._has_task_tools():
            assert self.parked is not None
            return self.server.tasks.serve_handshake(
                self, request.id, method, request.params or {}, meta, self.parked.task_group
            )
        if method == "subscriptions/listen" and stateless:
            return listen(self.server, request, notify or self.notifier(request.id))
        return _ready(self._answer(request, meta, stateless=stateless))

    def _answer(self, request: RequestReceived, meta: RequestMeta, *, stateless: bool) -> JSONObject:
        method = request.method
        if method == "tools/list":
            result: JSONObject = {"tools": [t.describe() for t in self.server._tools.values()]}
            if stateless:
                result.update(ttlMs=0, cacheScope="public")
            elif meta.revision == REV_2025_11_25:
                for described, tool in zip(result["tools"], self.server._tools.values(), strict=True):
                    if tool.task != "never":  # absent means "forbidden" (basic/utilities/tasks, "Tool-Level")
                        described["execution"] = {"taskSupport": tool.task}
            return result
        if method == "ping":
            return {}
        listed = self._list(method)
        if listed is not None:
            if stateless:
                listed.update(ttlMs=0, cacheScope="public")
            return listed
        if method in ("resources/subscribe", "resources/unsubscribe") and self.server._resources:
            uri = (request.params or {}).get("uri")
            if not isinstance(uri, str):
                raise JSONRPCError(INVALID_PARAMS, "Invalid params: uri must be a string")
            if method == "resources/subscribe":
                self.subscriptions.add(uri)
            else:
                self.subscriptions.discard(uri)
            return {}
        if method == "server/discover" and stateless:
            capabilities = self.server.capabilities()
            if any(tool.task != "never" for tool in self.server._tools.values()):
                capabilities["extensions"] = {TASKS_EXTENSION: {}}
            result = {"supportedVersions": list(STATELESS_REVISIONS), "capabilities": capabilities}
            if self.server.instructions:
                result["instructions"] = self.server.instructions
            result.update(ttlMs=0, cacheScope="public")
            return result
        if method == "logging/setLevel":
            level = (request.params or {}).get("level")
            if level not in LOGGING_LEVELS:
                raise JSONRPCError(INVALID_PARAMS, f"Invalid params: unknown logging level {level!r}")
            self.log_level = level
            return {}
        raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _list(self, method: str) -> JSONObject | None:
        server = self.server
        if method == "prompts/list" and server._prompts:
            return {"prompts": [p.describe() for p in server._prompts.values()]}
        if method == "resources/list" and (server._resources or server._templates):
            return {"resources": [r.describe() for r in server._resources.values()]}
        if method == "resources/templates/list" and (server._resources or server._templates):
            return {"resourceTemplates": [t.describe() for t in server._templates]}
        return None

    async def _complete(self, request: RequestReceived) -> JSONObject:
        params = request.params or {}
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict) or not isinstance(argument.get("name"), str):
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: completion needs ref and argument {name, value}")
        if self.server._completion is None:
            return completion_result([])
        context = params.get("context")
        values = await self.server._completion(ref, argument, context if isinstance(context, dict) else None)
        return completion_result([str(v) for v in values])

    def _has_task_tools(self) -> bool:
        return any(tool.task != "never" for tool in self.server._tools.values())

    def _initialize(self, params: JSONObject | None) -> JSONObject:
        revision = self.handshake.initialize(params)
        if self.session is not None:  # the questions it pushes say it (mcp.protocol.version)
            self.session.revision = revision
        capabilities = self.server.capabilities()
        if revision == REV_2025_11_25 and self._has_task_tools():
            capabilities["tasks"] = capabilities_2025()
        if self.server.store.shared:  # calls are kept under their idempotency key: a retry goes on (see _calls)
            capabilities["experimental"] = {IDEMPOTENT_CALLS: {}}
        result: JSONObject = {
            "protocolVersion": revision,
            "capabilities": capabilities,
            "serverInfo": self.server.info,
        }
        if self.server.instructions:
            result["instructions"] = self.server.instructions
        return result

    # ---- tools -------------------------------------------------------------------------------------------------

    def _call_tool(
        self, request: RequestReceived, meta: RequestMeta, notify: Notify, *, stateless: bool
    ) -> Awaitable[JSONObject]:
        params = request.params or {}
        name = params.get("name")
        tool = self.server._tools.get(name) if isinstance(name, str) else None
        if tool is None:
            raise JSONRPCError(INVALID_PARAMS, f"Invalid params: unknown tool {name!r}")
        if stateless and tool.task != "never" and not declares_tasks(meta.capabilities) and tool.task == "required":
            raise missing_tasks_extension(f"tool {tool.name!r}")
        try:
            kwargs = tool.bind(params.get("arguments"))
        except ValueError as exc:
            return _ready(error_result(said(INVALID_ARGUMENTS, tool=repr(tool.name), why=str(exc))))
        augmented = params.get("task")
        if not stateless and meta.revision == REV_2025_11_25 and self._has_task_tools():
            # 2025-11-25: the client asks for a task ("task" in the params); the tool must allow it, and a
            # "required" tool must be asked that way (-32601 either way, basic/utilities/tasks "Tool-Level").
            if augmented is not None and tool.task == "never":
                raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: tool {tool.name!r} does not run as a task")
            if augmented is None and tool.task == "required":
                raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: tool {tool.name!r} runs only as a task")
            if isinstance(augmented, dict):
                assert self.parked is not None
                ttl = augmented.get("ttl")
                seconds = ttl / 1000 if isinstance(ttl, int | float) and not isinstance(ttl, bool) else None
                request_meta = params.get("_meta")
                token = request_meta.get("progressToken") if isinstance(request_meta, dict) else None
                return self.server.tasks.create(
                    self, tool, params.get("arguments"), meta, self.parked.task_group, ttl=seconds, notify=notify,
                    progress_token=token, task_id=kept_task_id(self.server, params, tool.name, meta.principal),
                )  # fmt: skip
        escalate: Escalation | None = None
        if stateless and tool.task != "never" and declares_tasks(meta.capabilities):
            assert self.parked is not None
            tasks, tg, arguments = self.server.tasks, self.parked.task_group, params.get("arguments")
            if not tool.defer_task:
                return tasks.create(self, tool, arguments, meta, tg)

            def escalate(answers: JSONObject, memo: dict[str, JSONValue] | None) -> Awaitable[JSONObject]:
                return tasks.create(self, tool, arguments, meta, tg, answers=answers, memo=memo)

        if not stateless and self.server.store.shared and call_key(params) is not None:
            return self._kept_call(request, meta, notify, tool, kwargs)
        return self._with_context(
            request, meta, notify, lambda ctx: invoke_tool(tool, ctx, kwargs, stateless=stateless),
            stateless=stateless, escalate=escalate,
        )  # fmt: skip

    async def _kept_call(
        self, request: RequestReceived, meta: RequestMeta, notify: Notify, tool: ToolDef, kwargs: dict[str, Any]
    ) -> JSONObject:
        """A handshake-era call kept in the shared store under its idempotency key (see ``_calls``): a retry after
        a lost session goes on where the first attempt was, and a superseded attempt stops."""
        params = request.params or {}
        kept = await keep_call(self.server, params, tool.name, params.get("arguments"), meta.principal)
        if kept is None:  # the store cannot be reached: the call runs as it is
            return await self._with_context(
                request, meta, notify, lambda ctx: invoke_tool(tool, ctx, kwargs, stateless=False), stateless=False
            )
        if kept.result is not None:
            return kept.result  # an earlier attempt finished it
        assert self.session is not None
        asker = kept.asker(self.session, request.id, self.server.elicitation_timeout)
        request_meta = params.get("_meta")
        token: JSONValue = request_meta.get("progressToken") if isinstance(request_meta, dict) else None
        ctx = self.context(request, meta, notify, token, asker)
        with kept.claim.scope:
            result = await invoke_tool(tool, ctx, kwargs, stateless=False)
            await kept.finish(result)
            return result
        if kept.claim.gone:  # no other attempt has it: say what happened, not that it goes on elsewhere
            raise JSONRPCError(
                INTERNAL_ERROR,
                "Internal error: this call's record in the shared state is gone (it expired, or the store restarted "
                "without its data), so it stopped before a step it could not record; call again",
            )
        raise JSONRPCError(INTERNAL_ERROR, "Internal error: this call was sent again; it goes on in the new attempt")

    def run_tool(
        self,
        name: str,
        arguments: JSONValue,
        meta: RequestMeta,
        asker: RoundAsker,
        notify: Notify,
        *,
        task_id: str,
        progress_token: JSONValue,
    ) -> tuple[Callable[[], Awaitable[JSONObject]], Context]:
        """The task port (``_task_runs.ToolRunner``): how a task's run calls its tool, bound again from the recorded
        arguments on whichever replica, and the Context it gets (its notifications go to the task's record)."""
        tool = self.server._tools.get(name)
        ctx = Context(
            self, notify, task_id, meta.revision, meta.capabilities, meta.client_info, asker,
            progress_token=progress_token, log_level=None, principal=meta.principal,
        )  # fmt: skip

        async def invoke() -> JSONObject:
            if tool is None:
                raise JSONRPCError(INTERNAL_ERROR, "Internal error: the task's tool is not registered on this server")
            try:
                kwargs = tool.bind(arguments)
            except ValueError as exc:
                return error_result(said(INVALID_ARGUMENTS, tool=repr(tool.name), why=str(exc)))
            return await invoke_tool(tool, ctx, kwargs, stateless=True)

        return invoke, ctx

    def _get_prompt(
        self, request: RequestReceived, meta: RequestMeta, notify: Notify, *, stateless: bool
    ) -> Awaitable[JSONObject]:
        params = request.params or {}
        prompt = self.server._prompts.get(str(params.get("name")))
        if prompt is None:
            raise JSONRPCError(INVALID_PARAMS, f"Invalid params: unknown prompt {params.get('name')!r}")
        try:
            kwargs = prompt.bind(params.get("arguments"))
        except ValueError as exc:
            raise JSONRPCError(INVALID_PARAMS, f"Invalid params: {exc}") from None

        def invoke(ctx: Context) -> Awaitable[JSONObject]:
            return invoke_handler(prompt.fn, prompt.context_param, ctx, kwargs, prompt.result, stateless=stateless)

        return self._with_context(request, meta, notify, invoke, stateless=stateless)

    def _read_resource(
        self, request: RequestReceived, meta: RequestMeta, notify: Notify, *, stateless: bool
    ) -> Awaitable[JSONObject]:
        uri = (request.params or {}).get("uri")
        if not isinstance(uri, str):
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: uri must be a string")
        found = self.server._resources.get(uri)
        variables: dict[str, str] | None = {} if found is not None else None
        for template in self.server._templates if found is None else ():
            variables = template.match(uri)
            if variables is not None:
                found = template
                break
        if found is None or variables is None:
            # 2026-07-28 replaced -32002 with -32602 (SEP-2164); earlier revisions keep -32002.
            code = INVALID_PARAMS if stateless else RESOURCE_NOT_FOUND
            raise JSONRPCError(code, f"Resource not found: {uri}", {"uri": uri})
        resource = found

        def convert(value: Any) -> JSONObject:
            result = resource.contents(uri, value)
            if stateless:
                result.update(ttlMs=0, cacheScope="public")
            return result

        def invoke(ctx: Context) -> Awaitable[JSONObject]:
            return invoke_handler(resource.fn, resource.context_param, ctx, variables, convert, stateless=stateless)

        return self._with_context(request, meta, notify, invoke, stateless=stateless)

    def _with_context(
        self,
        request: RequestReceived,
        meta: RequestMeta,
        notify: Notify,
        invoke: Callable[[Context], Awaitable[JSONObject]],
        *,
        stateless: bool,
        escalate: Escalation | None = None,
    ) -> Awaitable[JSONObject]:
        """Run a handler with a Context: asking in place on handshake revisions, in rounds on 2026-07-28
        (``escalate``: how the call becomes a task at ``ctx.run_as_task()``)."""
        request_meta = (request.params or {}).get("_meta")
        token: JSONValue = request_meta.get("progressToken") if isinstance(request_meta, dict) else None
        if stateless:
            return self.rounds.serve(request, meta, notify, invoke, token, escalate)
        assert self.session is not None
        asker = PushAsker(self.session, request.id, self.server.elicitation_timeout)
        return invoke(self.context(request, meta, notify, token, asker))

    def context(
        self,
        request: RequestReceived,
        meta: RequestMeta,
        notify: Notify,
        token: JSONValue,
        asker: PushAsker | RoundAsker,
    ) -> Context:
        """The Context a handler serving ``request`` gets: its questions go through ``asker`` (pushed on the
        connection on handshake revisions, asked in rounds on 2026-07-28), its notifications to ``notify``."""
        return Context(
            self, notify, request.id, meta.revision, meta.capabilities, meta.client_info, asker,
            progress_token=token, log_level=meta.log_level, principal=meta.principal,
        )  # fmt: skip


class _Notifier:
    """:meth:`ServerSession.notifier`: a slotted callable rather than a closure, since every call holds one for as
    long as it runs, a person's answer included (a closure and its cell took 0.2 KiB per waiting call)."""

    __slots__ = ("_owner", "_related")

    def __init__(self, owner: ServerSession, related: RequestId | None) -> None:
        self._owner = owner
        self._related = related

    async def __call__(self, method: str, params: JSONObject) -> None:
        session = self._owner.session
        if session is not None:
            await session.notify(method, params, related=self._related)


async def _ready(value: JSONObject) -> JSONObject:
    return value
