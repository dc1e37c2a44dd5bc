"""``Client``: connect to an MCP server on any revision, call its tools, answer its elicitations."""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import replace
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._exceptions import (
    ElicitorError,
    InvalidAnswer,
    JSONRPCError,
    RemoteProtocolError,
    TooManyRounds,
)
from .._outcomes import Accepted, Cancelled, url_refused_text
from .._version import __version__
from ..protocol import NotificationReceived, RequestReceived, parse_implementation
from ..session import Session, open_session
from ..transports import StdioClientTransport, Transport
from ..types import (
    ACCEPTED_OLDER_REVISIONS,
    ALL_REVISIONS,
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
    REV_2025_06_18,
    REV_2025_11_25,
    TASKS_EXTENSION,
    UNSUPPORTED_PROTOCOL_VERSION,
    URL_ELICITATION_REQUIRED,
    CallToolResult,
    Implementation,
    JSONObject,
    JSONValue,
    LoggingLevel,
    Tool,
    is_modern,
)
from ._answer import answer_elicitation
from ._handlers import ElicitationHandler, ElicitationOutcome, ElicitationRequest
from ._headers import header_params
from ._quiet import QuietClock
from ._tasks import TaskHandle
from ._transport import SESSION_EXPIRED, HttpAware
from ._url import UrlElicitationRequest

if TYPE_CHECKING:
    import httpx2 as httpx

logger = logging.getLogger("elicitor.client")

"""The ``data`` of the local error that answers a request whose HTTP session the server no longer knows."""

DEFAULT_MAX_ROUNDS = 16
"""How many ``input_required`` rounds a call may take before :class:`TooManyRounds`."""

DEFAULT_REQUEST_TIMEOUT = 300.0
"""Seconds a request may wait while nothing at all arrives from the server (``Client(request_timeout=...)``)."""

MAX_ANSWER_ATTEMPTS = 5
"""How often a handler is asked again after an invalid answer before the client cancels the elicitation."""

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]
SamplingHandler = Callable[[JSONObject], Awaitable[JSONObject]]
"""Answers ``sampling/createMessage``: receives its params, returns a ``CreateMessageResult``."""
LogCallback = Callable[[LoggingLevel, JSONValue, str | None], Awaitable[None]]


MAX_PENDING_URL_ELICITATIONS = 1024
"""URL elicitations whose completion the client remembers at once (the oldest are forgotten first)."""


async def ask_until_valid(handler: ElicitationHandler, request: ElicitationRequest) -> ElicitationOutcome:
    """Ask ``handler``; fill defaults into an acceptance and validate it, asking again with the errors if invalid.

    After ``MAX_ANSWER_ATTEMPTS`` invalid answers the request is cancelled: nothing invalid is ever sent.
    """
    for _ in range(MAX_ANSWER_ATTEMPTS):
        outcome = await handler(request)
        if not isinstance(outcome, Accepted):
            return outcome
        content = request.form.with_defaults(outcome.data or {})
        try:
            return Accepted(request.form.validate(content))
        except InvalidAnswer as exc:
            request = replace(request, errors=exc.errors, previous=content)
    logger.warning("no valid answer after %d attempts; cancelling the elicitation", MAX_ANSWER_ATTEMPTS)
    return Cancelled()


class Client:
    """An MCP client that answers elicitations.

    Example::

        async with Client.stdio(["python", "server.py"], elicitation=TerminalHandler()) as client:
            for tool in await client.list_tools():
                print(tool.name)
            result = await client.call_tool("book", {"restaurant": "Chez Nous"})
            print(result.text)

    Args:
        connect: a transport, or a function returning one (awaitable) or an async context manager that yields one,
            called on entry.
        elicitation: answers the server's elicitations; ``None`` declares no elicitation capability.
        protocol: ``"auto"`` (probe with ``server/discover``, fall back to ``initialize``) or a revision to use.
        client_info: how this client introduces itself.
        max_rounds: the cap on ``input_required`` rounds per call (2026-07-28).
        on_log: receives the server's log messages (default: Python logging, logger ``elicitor.server_log``).
        probe_timeout: how long the ``server/discover`` probe waits before assuming a handshake-era server.
        sampling: answers the server's ``sampling/createMessage`` (declares the ``sampling`` capability).
        roots: the roots to report for ``roots/list`` (declares the ``roots`` capability).
        elicitation_limit: ``(count, seconds)``: at most ``count`` elicitations from this server in any
            ``seconds``; the excess is declined without reaching the person, with a warning logged saying why
            (a server that asks in a loop cannot flood them). Default: no limit.
        handshake_timeout: seconds the server has to complete the handshake (``server/discover`` or
            ``initialize``) on entry; then ``TimeoutError``. ``None`` waits as long as it takes.
        url_timeout: seconds to wait for a URL-mode elicitation's completion notice when the handler has no
            ``wait_done`` (no person to say "I'm done": scripts, ``ScriptedHandler``); then the call goes on and the
            server says whether the interaction is complete. The spec forbids waiting for that notice
            indefinitely; a handler with ``wait_done`` leaves the person in charge instead.
        request_timeout: seconds a request (``call_tool`` and every other) may wait while nothing arrives from the
            server: no answer, no progress or log message, no request of its own. Anything the server sends
            starts the clock again, and it stops while a handler answers the server (a person may be filling a
            form: that time is theirs). On expiry the server is sent ``notifications/cancelled`` and the call
            raises ``TimeoutError`` (2025-11-25 basic/lifecycle, "Timeouts"). ``None`` waits as long as the
            connection lasts; bound a call's total time yourself with ``anyio.fail_after``.
        tasks: declare the tasks extension on 2026-07-28 (``io.modelcontextprotocol/tasks``), so a server may run
            a long tool call as a task; ``call_tool`` follows it to its result either way (see :meth:`start_tool`).

    Once connected, :attr:`protocol_version`, :attr:`server_info`, :attr:`server_capabilities` and
    :attr:`instructions` say what the server told; ``client_info`` and ``elicitation_modes`` are what this client
    says of itself.
    """

    def __init__(
        self,
        connect: Transport | Callable[[], Awaitable[Transport]] | Callable[[], AbstractAsyncContextManager[Transport]],
        *,
        elicitation: ElicitationHandler | None = None,
        protocol: str = "auto",
        client_info: Implementation | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        on_log: LogCallback | None = None,
        log_level: LoggingLevel | None = None,
        probe_timeout: float = 10.0,
        sampling: SamplingHandler | None = None,
        roots: Sequence[JSONObject] | None = None,
        elicitation_limit: tuple[int, float] | None = None,
        handshake_timeout: float | None = 30.0,
        url_timeout: float | None = 600.0,
        request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
        tasks: bool = True,
    ) -> None:
        if protocol != "auto" and protocol not in ALL_REVISIONS:
            raise ValueError(f"protocol must be 'auto' or one of {', '.join(ALL_REVISIONS)}, not {protocol!r}")
        self._connect = connect
        self._handler = elicitation
        self.elicitation_modes: frozenset[str] = (
            frozenset(getattr(elicitation, "modes", frozenset({"form"}))) if elicitation is not None else frozenset()
        )
        self._protocol = protocol
        self._sampling = sampling
        self._roots = list(roots) if roots is not None else None
        self.client_info = client_info or Implementation(name="elicitor", version=__version__)
        self._max_rounds = max_rounds
        self._on_log = on_log
        self._log_level = log_level
        self._probe_timeout = probe_timeout
        self._stack: AsyncExitStack | None = None
        self._transport: Transport | None = None
        self._session: Session | None = None
        self._progress: dict[str, ProgressCallback] = {}
        self._callbacks = CallbackQueue()
        self._meta_cache: dict[str, JSONObject] = {}
        self._url_pending: dict[str, anyio.Event] = {}
        self._handshake_timeout = handshake_timeout
        self._url_timeout = url_timeout
        self._request_timeout = request_timeout
        self._quiet = QuietClock(request_timeout) if request_timeout is not None else None
        self._tasks = tasks
        if elicitation_limit is not None and (elicitation_limit[0] < 1 or elicitation_limit[1] <= 0):
            raise ValueError("elicitation_limit must be (count >= 1, seconds > 0)")
        self._limit = elicitation_limit
        self._recent: deque[float] = deque()
        self._waiting: list[list[Exception]] = []  # handshake era: each call waiting on the server, its failures
        self._next_token = 0
        self._protocol_version: str | None = None
        self._server_info: Implementation | None = None
        self._server_capabilities: JSONObject = {}
        self._instructions: str | None = None

    # ---- what the handshake (or server/discover) told us -----------------------------------------------------

    @property
    def protocol_version(self) -> str | None:
        """The protocol revision in use (``"2025-11-25"``, ``"2026-07-28"``...), ``None`` until connected.

        With ``protocol="auto"`` it is the newest both sides speak: ``server/discover`` first, ``initialize`` if
        the server does not know it (2026-07-28 basic/lifecycle).
        """
        return self._protocol_version

    @property
    def server_info(self) -> Implementation | None:
        """The server's name, title and version as it reports them: for display only, never for trust decisions
        (``Implementation.display()`` gives a printable form)."""
        return self._server_info

    @property
    def server_capabilities(self) -> JSONObject:
        """The capabilities the server declared (``tools``, ``resources``, ``tasks``...), as sent."""
        return self._server_capabilities

    @property
    def instructions(self) -> str | None:
        """The server's ``instructions`` for using it, if it sent any."""
        return self._instructions

    @classmethod
    def stdio(
        cls,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: int | IO[bytes] | None = None,
        **kwargs: Any,
    ) -> Client:
        """A client for a server started as ``command`` with its stdin/stdout as the connection.

        ``stderr`` receives the server's stderr (default: ours). Other arguments are as for :class:`Client`.
        """

        async def connect() -> Transport:
            return await StdioClientTransport.start(command, env=env, cwd=cwd, stderr=stderr)

        return cls(connect, **kwargs)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        limits: httpx.Limits | None = None,
        http: httpx.AsyncClient | None = None,
        auth: httpx.Auth | None = None,
        **kwargs: Any,
    ) -> Client:
        """A client for the Streamable HTTP endpoint at ``url``; ``headers`` go on every request.

        Each call that waits on the server holds a connection (its response stream), so ``limits``
        (``httpx.Limits``) bounds how many calls can wait at once: ``max_connections`` in all (default 4,096;
        beyond it, requests queue for a connection), ``max_keepalive_connections`` idle ones kept per server for
        reuse (32) for ``keepalive_expiry`` seconds (4). The client's own requests take a lean HTTP/1.1 path
        (``client/_pool.py``: llhttp parsing, no per-request ``httpx`` models), so answering the thousandth
        waiting call costs what answering the first does; with ``auth``, a proxy from the environment or a server
        that sets cookies they go through ``httpx`` on the same connections. ``http`` is an
        ``httpx.AsyncClient`` of your own to send everything through instead (HTTP/2, your proxies, certificates,
        transport and limits; ``headers`` still go on every request, and your client is not closed here).

        ``auth`` signs in to a protected server: :class:`~elicitor.OAuth` runs the spec's Authorization flow
        when the server answers 401 (and again, for more scope, on 403 ``insufficient_scope``);
        :class:`~elicitor.BearerToken` sends a token you already have. Any ``httpx.Auth`` works.

        Other arguments are as for :class:`Client`.
        """
        from ._http import HttpClientTransport

        if http is not None and limits is not None:
            raise ValueError("limits= sizes the client's own connection pools; set limits on the http= client instead")
        if http is not None and auth is not None:
            raise ValueError("auth= applies to the client's own connections; set auth on the http= client instead")
        return cls(
            lambda: HttpClientTransport.connect(url, headers=headers, http=http, limits=limits, auth=auth), **kwargs
        )

    # ---- lifecycle -------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Client:
        if self._stack is not None:
            raise RuntimeError("a Client can be entered once")
        self._stack = AsyncExitStack()
        try:
            transport = await self._open_transport(self._stack)
            self._transport = transport
            self._callbacks.open()
            self._stack.callback(self._callbacks.close)
            deliveries = await self._stack.enter_async_context(anyio.create_task_group())
            deliveries.start_soon(self._callbacks.run)
            self._stack.callback(deliveries.cancel_scope.cancel)
            self._session = await self._stack.enter_async_context(
                open_session(transport, self._on_request, self._on_notification)
            )
            if self._quiet is not None:
                watchdog = await self._stack.enter_async_context(anyio.create_task_group())
                watchdog.start_soon(self._quiet.watch)
                self._stack.callback(watchdog.cancel_scope.cancel)
            with anyio.move_on_after(self._handshake_timeout) as deadline:
                await self._negotiate()
            if deadline.cancelled_caught:
                raise TimeoutError(f"the server did not complete the handshake in {self._handshake_timeout} s")
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._stack is not None
        await self._stack.aclose()

    async def _open_transport(self, stack: AsyncExitStack) -> Transport:
        if not callable(self._connect):
            return self._connect
        made = self._connect()
        if isinstance(made, AbstractAsyncContextManager):
            return await stack.enter_async_context(made)
        return await made

    def _adopt(self, version: str) -> None:
        """The revision is known: tell the transport (HTTP headers, sessions depend on it)."""
        self._protocol_version = version
        if isinstance(self._transport, HttpAware):
            self._transport.adopt(version)

    @property
    def modern(self) -> bool:
        """Whether the revision in use is of the stateless era (2026-07-28: multi-round-trip calls, no session)."""
        return self.protocol_version is not None and is_modern(self.protocol_version)

    async def _negotiate(self) -> None:
        wanted = self._protocol
        if wanted == "auto" or is_modern(wanted):
            version = MODERN_REVISIONS[0] if wanted == "auto" else wanted
            try:
                with anyio.fail_after(self._probe_timeout):
                    result = await self._discover(version)
            except JSONRPCError as exc:
                if exc.code == UNSUPPORTED_PROTOCOL_VERSION and isinstance(exc.data, dict):
                    supported = exc.data.get("supported")
                    common = [v for v in MODERN_REVISIONS if isinstance(supported, list) and v in supported]
                    if common:
                        await self._discover(common[0])
                        return
                if wanted != "auto":
                    raise
                logger.debug("server/discover failed (%s); falling back to initialize", exc)
            except TimeoutError:
                if wanted != "auto":
                    raise
                logger.debug("server/discover timed out; falling back to initialize")
            else:
                if result:
                    return
            await self._initialize(HANDSHAKE_REVISIONS[0])
        else:
            await self._initialize(wanted)

    async def _discover(self, version: str) -> bool:
        session = self._require()
        result = await session.request("server/discover", self._with_meta({}, version))
        versions = result.get("supportedVersions")
        if not isinstance(versions, list) or version not in versions:
            return False
        self._adopt(version)
        self._server_capabilities = _dict(result.get("capabilities"))
        self._server_info = parse_implementation(_dict(result.get("_meta")).get(META_SERVER_INFO))
        instructions = result.get("instructions")
        self._instructions = instructions if isinstance(instructions, str) else None
        return True

    async def _initialize(self, version: str) -> None:
        session = self._require()
        result = await session.request(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": self._capabilities(version),
                "clientInfo": self._info(),
            },
        )
        offered = result.get("protocolVersion")
        if offered not in HANDSHAKE_REVISIONS + ACCEPTED_OLDER_REVISIONS:
            raise ElicitorError(
                f"the server offered protocol version {offered!r}; elicitor speaks {', '.join(ALL_REVISIONS)}"
            )
        self._adopt(str(offered))
        self._server_capabilities = _dict(result.get("capabilities"))
        self._server_info = parse_implementation(result.get("serverInfo"))
        instructions = result.get("instructions")
        self._instructions = instructions if isinstance(instructions, str) else None
        await session.notify("notifications/initialized")
        if isinstance(self._transport, HttpAware):
            self._transport.start_listening()

    def _capabilities(self, version: str) -> JSONObject:
        """Exactly what this client can do: nothing is declared without a handler for it."""
        capabilities: JSONObject = {}
        if self.elicitation_modes:
            if version == REV_2025_06_18:
                capabilities["elicitation"] = {}
            else:
                capabilities["elicitation"] = {mode: {} for mode in sorted(self.elicitation_modes)}
        if self._sampling is not None:
            capabilities["sampling"] = {}
        if self._roots is not None:
            capabilities["roots"] = {}
        if self._tasks and is_modern(version):
            capabilities["extensions"] = {TASKS_EXTENSION: {}}
        return capabilities

    def _info(self) -> JSONObject:
        return msgspec.to_builtins(self.client_info)  # type: ignore[no-any-return]

    def _with_meta(self, params: JSONObject, version: str | None = None) -> JSONObject:
        """``params`` with the 2026-07-28 per-request ``_meta`` (built once per version: it goes on every request)."""
        version = version or self.protocol_version
        assert version is not None
        base = self._meta_cache.get(version)
        if base is None:
            base = self._meta_cache[version] = {
                META_PROTOCOL_VERSION: version,
                META_CLIENT_CAPABILITIES: self._capabilities(version),
                META_CLIENT_INFO: self._info(),
            }
        own = params.get("_meta")
        meta = {**own, **base} if isinstance(own, dict) else dict(base)
        if self._log_level is not None:
            meta[META_LOG_LEVEL] = self._log_level
        return {**params, "_meta": meta}

    def _require(self) -> Session:
        if self._session is None:
            raise RuntimeError("the Client is not connected: use `async with Client(...) as client`")
        return self._session

    # ---- requests --------------------------------------------------------------------------------------------

    async def request(self, method: str, params: JSONObject | None = None) -> JSONObject:
        """Send any request (with the per-request ``_meta`` on 2026-07-28) and return its raw result.

        Raises:
            JSONRPCError: the server answered with an error.
            ConnectionClosed: the connection ended first.
            TimeoutError: nothing came from the server for ``request_timeout`` seconds.
        """
        params = dict(params or {})
        if self.modern:
            params = self._with_meta(params)
        try:
            return await self._send_request(method, params or None)
        except JSONRPCError as exc:
            if exc.data != SESSION_EXPIRED or self.protocol_version is None:
                raise
        # The server forgot our session (HTTP 404): start a new one, as the spec requires, and retry once.
        logger.info("the server ended the session; initializing a new one")
        with anyio.fail_after(self._handshake_timeout):
            await self._initialize(self.protocol_version)
        return await self._send_request(method, params or None)

    async def _send_request(self, method: str, params: JSONObject | None) -> JSONObject:
        """One request under ``request_timeout`` (see :mod:`elicitor.client._quiet`)."""
        session = self._require()
        if self._quiet is None:
            return await session.request(method, params)
        with self._quiet.request():
            return await session.request(method, params)  # cancelled: the server is told (notifications/cancelled)
        raise TimeoutError(f"the server sent nothing for {self._request_timeout:g} s while {method} waited")

    def _heard_from_server(self) -> None:
        if self._quiet is not None:
            self._quiet.heard_from_server()

    async def ping(self) -> None:
        """Check the server answers (handshake revisions; 2026-07-28 has no ping, so this sends discover)."""
        if self.modern:
            await self.request("server/discover")
        else:
            await self.request("ping")

    async def set_logging_level(self, level: LoggingLevel) -> None:
        """Ask for log messages at ``level`` and above (``logging/setLevel``; per request on 2026-07-28)."""
        self._log_level = level
        if not self.modern:
            await self.request("logging/setLevel", {"level": level})

    async def list_tools(self) -> list[Tool]:
        """Every tool the server offers (all pages).

        Over HTTP, a tool whose ``x-mcp-header`` annotations break the rules of SEP-2243 is left out (with a
        warning): one malformed definition must not make the others unusable.
        """
        tools: list[Tool] = []
        for raw in await self._list_all("tools/list", "tools"):
            try:
                tool = msgspec.convert(raw, Tool)
            except msgspec.ValidationError as exc:
                raise RemoteProtocolError(f"the server sent an invalid tools/list result: {exc}") from None
            mirrored = header_params(tool.input_schema)
            if isinstance(mirrored, str):
                logger.warning("leaving out tool %r: %s", tool.name, mirrored)
                continue
            if mirrored and isinstance(self._transport, HttpAware):
                self._transport.mirror(tool.name, mirrored)
            tools.append(tool)
        return tools

    async def list_resources(self) -> list[JSONObject]:
        """Every resource the server lists (all pages), as the wire describes them."""
        return await self._list_all("resources/list", "resources")

    async def list_resource_templates(self) -> list[JSONObject]:
        """Every resource template the server lists (all pages)."""
        return await self._list_all("resources/templates/list", "resourceTemplates")

    async def read_resource(self, uri: str) -> JSONObject:
        """Read a resource (answering any elicitation on the way); the ``ReadResourceResult`` as sent."""
        return await self._drive("resources/read", {"uri": uri})

    async def list_prompts(self) -> list[JSONObject]:
        """Every prompt the server lists (all pages)."""
        return await self._list_all("prompts/list", "prompts")

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> JSONObject:
        """Get a prompt (answering any elicitation on the way); the ``GetPromptResult`` as sent."""
        return await self._drive("prompts/get", {"name": name, "arguments": dict(arguments or {})})

    async def complete(self, ref: JSONObject, argument: str, value: str) -> list[str]:
        """Ask the server to complete ``argument`` of a prompt or resource template from what was typed."""
        result = await self.request("completion/complete", {"ref": ref, "argument": {"name": argument, "value": value}})
        completion = result.get("completion")
        values = completion.get("values") if isinstance(completion, dict) else None
        return [str(v) for v in values] if isinstance(values, list) else []

    async def _list_all(self, method: str, key: str) -> list[JSONObject]:
        items: list[JSONObject] = []
        cursor: str | None = None
        while True:
            result = await self.request(method, {"cursor": cursor} if cursor else {})
            page = result.get(key, [])
            if not isinstance(page, list):
                raise RemoteProtocolError(f"the server sent an invalid {method} result: {key} is not a list")
            items.extend(item for item in page if isinstance(item, dict))
            next_cursor = result.get("nextCursor")
            if not isinstance(next_cursor, str) or not next_cursor:
                return items
            cursor = next_cursor

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: ProgressCallback | None = None,
    ) -> CallToolResult:
        """Call a tool and return its final result, answering any elicitation along the way.

        On 2026-07-28 this runs the multi-round-trip loop: each ``input_required`` result is answered through the
        elicitation handler and the call is retried with a new id, the answers and the server's ``requestState``
        (echoed byte-exact, never reused for another call).

        What the tool decides is a result, ``is_error`` set when it failed or could not go on, including when the
        person declined or cancelled a URL step the tool required (-32042 on 2025-11-25: the client ends the call
        with the result the server itself returns on 2026-07-28). docs/testing.md tabulates every case.

        Raises:
            JSONRPCError: the server answered with an error (unknown tool: -32602; missing capability: -32021).
            TooManyRounds: the server still wanted input after ``max_rounds`` rounds.
            RemoteProtocolError: the server's result is malformed.
            TimeoutError: nothing came from the server for ``request_timeout`` seconds.
            ConnectionClosed: the connection ended first.
            Exception: whatever the elicitation handler raised while answering this call's questions (e.g.
                :class:`~elicitor.InvalidScriptedAnswer`), on every revision.
        """
        params: JSONObject = {"name": name, "arguments": dict(arguments or {})}
        token = None
        if progress is not None:
            self._next_token += 1
            token = f"p{self._next_token}"
            self._progress[token] = progress
            params["_meta"] = {"progressToken": token}
        try:
            try:
                result = await self._drive("tools/call", params)
            except JSONRPCError as exc:
                if exc.code != METHOD_NOT_FOUND or not self._legacy_tasks():
                    raise
                # 2025-11-25: -32601 from a server with task-augmented tools/call: this tool runs only as a task.
                result = await self._drive("tools/call", {**params, "task": {}})
            handle = self._task_of(result)
            if handle is not None:
                return await handle.wait()
        finally:
            if token is not None:
                self._progress.pop(token, None)
                self._callbacks.forget(token)
        try:
            return msgspec.convert(result, CallToolResult)
        except msgspec.ValidationError as exc:
            raise RemoteProtocolError(f"the server sent an invalid tools/call result: {exc}") from None

    async def start_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, progress: ProgressCallback | None = None
    ) -> TaskHandle:
        """Call a tool and return at once with its task, when the server runs the call as one (2026-07-28 tasks
        extension); questions asked before the task exists are answered first, as in :meth:`call_tool`.

        Keep ``handle.id`` to find the task again later (:meth:`task`), ``await handle.wait()`` for the result,
        ``await handle.cancel()`` to stop it. A call the server answered at once gives a handle already completed.
        ``progress`` gets the call's progress notifications while this request lasts (a task reports its progress
        as ``handle.status_message``; on 2025-11-25 its progress notifications keep coming here).
        """
        params: JSONObject = {"name": name, "arguments": dict(arguments or {})}
        token = None
        if progress is not None:
            self._next_token += 1
            token = f"p{self._next_token}"
            self._progress[token] = progress
            params["_meta"] = {"progressToken": token}
        if self._legacy_tasks():
            try:  # 2025-11-25: the client asks for the task; a tool that does not run as one says -32601
                result = await self._drive("tools/call", {**params, "task": {}})
            except JSONRPCError as exc:
                if exc.code != METHOD_NOT_FOUND:
                    raise
                result = await self._drive("tools/call", params)
        else:
            result = await self._drive("tools/call", params)
        handle = self._task_of(result)
        if token is not None:
            if handle is None:
                self._progress.pop(token, None)
                self._callbacks.forget(token)
            else:
                handle._progress_token = token  # forgotten when its wait ends
        return handle or TaskHandle.finished(self, result)

    def _legacy_tasks(self) -> bool:
        """2025-11-25 with a server that runs tools/call as tasks when asked (its ``tasks`` capability)."""
        tasks = self.server_capabilities.get("tasks")
        requests = tasks.get("requests") if isinstance(tasks, dict) else None
        tools = requests.get("tools") if isinstance(requests, dict) else None
        return (
            self._tasks and self.protocol_version == REV_2025_11_25 and isinstance(tools, dict)
            and isinstance(tools.get("call"), dict)
        )  # fmt: skip

    def _task_of(self, result: JSONObject) -> TaskHandle | None:
        """The task a ``tools/call`` result created, if it did (either era's shape)."""
        if result.get("resultType") == "task":
            return TaskHandle(self, result)
        task = result.get("task")
        if not self.modern and isinstance(task, dict) and "content" not in result:
            return TaskHandle(self, task, legacy=True)
        return None

    async def task(self, task_id: str) -> TaskHandle:
        """A task started earlier (by this client or an earlier run of it, for the same user), as it is now.

        Raises:
            JSONRPCError: -32602 if the server does not know the task (or it belongs to someone else, or expired).
        """
        handle = TaskHandle(self, {"taskId": task_id, "status": "working"}, legacy=not self.modern)
        await handle.refresh()
        return handle

    async def _drive(self, method: str, params: JSONObject) -> JSONObject:
        """Send ``method`` and follow ``input_required`` rounds until a complete result arrives.

        If the elicitation handler raised while this call waited, the call raises that exception, on every
        revision: on 2026-07-28 the handler runs here, in the call's own rounds; on the handshake revisions it runs
        when the server's ``elicitation/create`` arrives, which answers the server with an error (so the tool
        stops) and hands the exception to the call waiting on that server, here (see :meth:`_answer_request`).
        """
        if self.modern:
            result = await self._rounds(method, params)
            await self._callbacks.caught_up(_progress_key(params))
            return result
        failures: list[Exception] = []
        self._waiting.append(failures)
        try:
            result = await self._rounds(method, params)
        except Exception:
            if failures:
                raise failures[0] from None  # what the server answered is a consequence of it
            raise
        finally:
            self._waiting.remove(failures)
        if failures:
            raise failures[0]
        await self._callbacks.caught_up(_progress_key(params))  # its progress and logs before its result
        return result

    async def _rounds(self, method: str, params: JSONObject) -> JSONObject:
        """The request, and its ``input_required`` rounds (2026-07-28) or -32042 retries (2025-11-25)."""
        responses: JSONObject | None = None
        state: JSONValue = None
        seen: set[str] = set()
        for _ in range(self._max_rounds + 1):
            attempt = dict(params)
            if responses is not None:
                attempt["inputResponses"] = responses
            if state is not None:
                attempt["requestState"] = state
            try:
                result = await self.request(method, attempt)
            except JSONRPCError as exc:
                if exc.code != URL_ELICITATION_REQUIRED or self.modern:
                    raise
                refused = await self._url_required(exc, seen)
                if refused is not None:
                    if method != "tools/call":
                        raise  # no tool error to end with: the caller gets the server's -32042
                    # The person declined or cancelled: end as the server ends it on 2026-07-28.
                    text = url_refused_text(str(params.get("name")), [refused])
                    return {"content": [{"type": "text", "text": text}], "isError": True}
                responses, state = None, None
                continue
            kind = result.get("resultType", "complete")
            if kind == "complete" or (kind == "task" and method == "tools/call" and self._tasks):
                return result  # a task is followed by the caller (TaskHandle)
            if kind != "input_required":
                raise RemoteProtocolError(f"the server sent an unknown resultType {kind!r}")
            requests = result.get("inputRequests") or {}
            state = result.get("requestState")
            if not isinstance(requests, dict) or (state is not None and not isinstance(state, str)):
                raise RemoteProtocolError("the server sent a malformed input_required result")
            responses = {}
            for key, request in requests.items():
                responses[key] = await self._answer_input(request)
        raise TooManyRounds(f"{method} still asked for input after {self._max_rounds} rounds")

    async def _url_required(self, error: JSONRPCError, seen: set[str]) -> str | None:
        """-32042 (2025-11-25): have the person open each URL, wait until they are done, then the call is retried.

        Returns ``None`` when every step was accepted, else the message of the step the person declined or
        cancelled (the call cannot go on; later steps are not shown). An id seen before means the server asks
        again for something already done: a loop, reported as the error.
        """
        data = error.data if isinstance(error.data, dict) else {}
        listed = data.get("elicitations")
        if not isinstance(listed, list) or not listed:
            raise error
        for params in listed:
            if not isinstance(params, dict) or params.get("mode") != "url":
                raise error
            elicitation_id = str(params.get("elicitationId"))
            if elicitation_id in seen:
                raise TooManyRounds(f"the server asked again for URL elicitation {elicitation_id} (a loop)") from error
            seen.add(elicitation_id)
            try:
                answer = await self._answer_elicitation(params)  # the same checks as a URL request mid-call
            except JSONRPCError:
                raise error from None  # this client cannot take it: the caller gets the server's error
            if answer["action"] != "accept":
                return str(params.get("message", ""))  # declined or cancelled: the call cannot go on
            await self._wait_done(UrlElicitationRequest.from_params(params, self.server_info))
        return None

    async def _wait_done(self, request: UrlElicitationRequest) -> None:
        """Until the server says the interaction is complete, or the person says so (if the handler can ask)."""
        elicitation_id = str(request.elicitation_id)
        if self._url_pending.setdefault(elicitation_id, anyio.Event()).is_set():
            self._forget_url(elicitation_id)
            return
        wait_done = getattr(self._handler, "wait_done", None)
        limit = self._url_timeout if wait_done is None else None
        with anyio.move_on_after(limit):
            await self._first_done(request, elicitation_id, wait_done)
        self._forget_url(elicitation_id)

    async def _first_done(
        self, request: UrlElicitationRequest, elicitation_id: str, wait_done: Callable[..., Awaitable[None]] | None
    ) -> None:
        async with anyio.create_task_group() as tg:

            async def notified() -> None:
                await self.wait_url_completion(elicitation_id)
                tg.cancel_scope.cancel()

            async def person() -> None:
                assert wait_done is not None
                await wait_done(request)
                tg.cancel_scope.cancel()

            tg.start_soon(notified)
            if wait_done is not None:
                tg.start_soon(person)

    async def _answer_input(self, request: object) -> JSONObject:
        method = request.get("method") if isinstance(request, dict) else None
        params = request.get("params") if isinstance(request, dict) else None
        if method == "elicitation/create" and isinstance(params, dict):
            try:
                answer = await self._answer_elicitation(params)
            except JSONRPCError as exc:
                # An input response cannot carry an error: tell the server the request was dismissed.
                logger.warning("cancelling an input request the client cannot answer: %s", exc.message)
                return {"action": "cancel"}
            wait_done = getattr(self._handler, "wait_done", None)
            if params.get("mode") == "url" and answer.get("action") == "accept" and wait_done is not None:
                # 2026-07-28 has no completion notification: retry once the person says they are done, so
                # the server sees the finished interaction instead of asking again at once.
                await wait_done(UrlElicitationRequest.from_params(params, self.server_info, modern=True))
            return answer
        if method in ("sampling/createMessage", "roots/list") and isinstance(params, dict):
            return await self._answer_other(method, params)
        raise RemoteProtocolError(f"the server asked for input this client did not declare: {method!r}")

    async def _answer_other(self, method: str, params: JSONObject) -> JSONObject:
        if method == "sampling/createMessage" and self._sampling is not None:
            return await self._sampling(params)
        if method == "roots/list" and self._roots is not None:
            return {"roots": self._roots}
        raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: {method} (this client did not declare it)")

    # ---- the server's requests ---------------------------------------------------------------------------------

    async def _on_request(self, request: RequestReceived) -> JSONObject:
        quiet = self._quiet
        if quiet is None:
            return await self._answer_request(request)
        quiet.answering += 1  # a person may be answering: the time is theirs, no request's clock runs
        try:
            return await self._answer_request(request)
        finally:
            quiet.answering -= 1
            quiet.heard_from_server()

    async def _answer_request(self, request: RequestReceived) -> JSONObject:
        if request.method == "elicitation/create":
            try:
                return await self._answer_elicitation(request.params or {})
            except JSONRPCError:
                raise
            except Exception as exc:
                if not self._waiting:
                    raise  # no call to report it to (a raw request, a task): logged, and -32603 to the server
                # The handler failed (a script ran out of answers, a renderer broke): the call waiting on the
                # server raises it, as on 2026-07-28 where the handler runs inside the call; the server gets an
                # error answer, so its tool stops. With several calls waiting, the oldest is told.
                self._waiting[0].append(exc)
                failed = JSONRPCError(INTERNAL_ERROR, "Internal error: the client could not answer this elicitation")
                raise failed from None
        if request.method == "ping":
            return {}
        if request.method in ("sampling/createMessage", "roots/list"):
            return await self._answer_other(request.method, request.params or {})
        raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: {request.method}")

    async def _answer_elicitation(self, params: JSONObject) -> JSONObject:
        """Validate the request, ask the handler (again, while its answer is invalid), return the ElicitResult.

        Raises:
            JSONRPCError: -32602 for a request outside the subset or in a mode this client did not declare.
        """
        handler = self._handler
        mode = params.get("mode", "form")
        if handler is None or not isinstance(mode, str) or mode not in self.elicitation_modes:
            raise JSONRPCError(INVALID_PARAMS, f"Invalid params: this client did not declare elicitation mode {mode!r}")
        if self._over_limit():
            return {"action": "decline"}
        message = params.get("message")
        if not isinstance(message, str):
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: elicitation message must be a string")
        if mode == "url":
            return await self._answer_url(handler, params)
        return await answer_elicitation(
            handler, params, self.server_info, modes=self.elicitation_modes, modern=self.modern
        )  # the same checks a proxy's renderer applies (client/_answer.py)

    async def _answer_url(self, handler: ElicitationHandler, params: JSONObject) -> JSONObject:
        """A URL-mode request: check it, show it to the person, remember its id while the interaction runs."""
        request = UrlElicitationRequest.from_params(params, self.server_info, modern=self.modern)
        if not request.url:
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: a URL-mode elicitation needs a url")
        if not self.modern and request.elicitation_id is None:
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: a URL-mode elicitation needs an elicitationId")
        url_handler = getattr(handler, "url", None)
        if url_handler is None:
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: this client's handler does not take URL-mode requests")
        # Listen for the completion before the person opens the page: it may end before the handler returns.
        if request.elicitation_id is not None:
            if len(self._url_pending) >= MAX_PENDING_URL_ELICITATIONS:  # nobody waited for the oldest: drop it
                self._url_pending.pop(next(iter(self._url_pending)))
            self._url_pending.setdefault(request.elicitation_id, anyio.Event())
        try:
            outcome = await url_handler(request)
        except BaseException:
            self._forget_url(request.elicitation_id)
            raise
        if not isinstance(outcome, Accepted):
            self._forget_url(request.elicitation_id)
        return {"action": outcome.action}

    def _over_limit(self) -> bool:
        """Whether this elicitation exceeds ``elicitation_limit`` (a sliding window); logs why when it does."""
        if self._limit is None:
            return False
        count, seconds = self._limit
        now = anyio.current_time()
        recent = self._recent
        while recent and recent[0] <= now - seconds:
            recent.popleft()
        if len(recent) >= count:
            who = self.server_info.display() if self.server_info else "the server"
            logger.warning("declined an elicitation from %s: more than %d in %g s", who, count, seconds)
            return True
        recent.append(now)
        return False

    def _forget_url(self, elicitation_id: str | None) -> None:
        if elicitation_id is not None:
            self._url_pending.pop(elicitation_id, None)

    async def wait_url_completion(self, elicitation_id: str) -> None:
        """Wait for the server's ``notifications/elicitation/complete`` for ``elicitation_id`` (2025-11-25).

        The notification is optional for servers: bound the wait (``anyio.fail_after``) and offer the person a
        way to say they are done.
        """
        await self._url_pending.setdefault(elicitation_id, anyio.Event()).wait()

    async def _on_notification(self, note: NotificationReceived) -> None:
        self._heard_from_server()
        params = note.params or {}
        if note.method == "notifications/message":
            level = params.get("level", "info")
            data = params.get("data")
            source = params.get("logger")
            if self._on_log is not None:
                self._callbacks.put(None, self._on_log, level, data, source if isinstance(source, str) else None)
            else:
                logging.getLogger("elicitor.server_log").info("%s: %s", level, data)
        elif note.method == "notifications/elicitation/complete":
            # Unknown or already completed ids are ignored (2025-11-25).
            done = self._url_pending.get(str(params.get("elicitationId")))
            if done is not None:
                done.set()
        elif note.method == "notifications/progress":
            key = str(params.get("progressToken"))
            callback = self._progress.get(key)
            progress = params.get("progress")
            if callback is not None and isinstance(progress, int | float):
                total = params.get("total")
                text = params.get("message")
                self._callbacks.put(
                    key,
                    callback,
                    progress,
                    total if isinstance(total, int | float) else None,
                    text if isinstance(text, str) else None,
                )


def _progress_key(params: JSONObject) -> str | None:
    """The progress token a request carries, as the callbacks are keyed (``None`` without one)."""
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return None if token is None else str(token)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


MAX_QUEUED_CALLBACKS = 4096
"""How many progress and log callbacks may wait for delivery before new ones are dropped (with a warning)."""


class CallbackQueue:
    """Delivers the application's progress and log callbacks in order, off the connection's read loop.

    A callback that takes its time (a slow terminal, a callback that awaits I/O) must not hold up the messages
    behind it: run inline, it would keep the client from reading the server's next request, and the server would
    give up on an elicitation the person already answered. Here one task delivers them in arrival order. A call
    waits for its own progress callbacks and the log callbacks that arrived before its result
    (:meth:`caught_up`), so they still come before its return, and no other call waits on them. If callbacks fall
    :data:`MAX_QUEUED_CALLBACKS` behind, new ones are dropped with a warning: progress and logs are informational,
    and memory stays bounded whatever the server sends.
    """

    __slots__ = ("_delivered", "_dropping", "_finished", "_queued", "_receive", "_send", "_wake")

    def __init__(self) -> None:
        self._send: MemoryObjectSendStream[tuple[str | None, Any, tuple[Any, ...]]] | None = None
        self._receive: MemoryObjectReceiveStream[tuple[str | None, Any, tuple[Any, ...]]] | None = None
        self._queued: dict[str | None, int] = {}  # per progress token (None: logs), how many were queued
        self._delivered: dict[str | None, int] = {}
        self._finished: set[str] = set()  # tokens of calls that ended with callbacks still queued
        self._dropping = False
        self._wake: anyio.Event | None = None  # made in the event loop, by the first waiter

    def open(self) -> None:
        """Make the queue (when the client connects: streams left open would be reported unclosed)."""
        self._send, self._receive = anyio.create_memory_object_stream[tuple[str | None, Any, tuple[Any, ...]]](
            MAX_QUEUED_CALLBACKS
        )

    def close(self) -> None:
        """Drop what is still queued (the client is leaving)."""
        if self._send is not None and self._receive is not None:
            self._send.close()
            self._receive.close()

    def put(self, key: str | None, callback: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Queue ``callback(*args)`` for ``key`` (a progress token, or ``None`` for logs); dropped (and said once
        per backlog) when the queue is full."""
        if self._send is None:
            return
        try:
            self._send.send_nowait((key, callback, args))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        except anyio.WouldBlock:
            if not self._dropping:
                self._dropping = True
                logger.warning(
                    "progress and log callbacks are %d behind: dropping new ones until they catch up",
                    MAX_QUEUED_CALLBACKS,
                )
            return
        self._queued[key] = self._queued.get(key, 0) + 1

    async def run(self) -> None:
        """Deliver queued callbacks until cancelled (the client's exit); a failing callback is logged."""
        assert self._receive is not None, "open() first"
        async for key, callback, args in self._receive:
            try:
                await callback(*args)
            except Exception:
                logger.exception("a progress or log callback failed")
            delivered = self._delivered[key] = self._delivered.get(key, 0) + 1
            if delivered == self._queued.get(key):
                self._dropping = False
                if key in self._finished:  # its call has ended: nothing more will come for it
                    self._finished.discard(key)
                    del self._queued[key], self._delivered[key]
            wake, self._wake = self._wake, None
            if wake is not None:
                wake.set()

    def forget(self, token: str) -> None:
        """The call with progress ``token`` has ended: drop its counts once its queued callbacks are delivered."""
        if self._queued.get(token, 0) == self._delivered.get(token, 0):
            self._queued.pop(token, None)
            self._delivered.pop(token, None)
        else:
            self._finished.add(token)

    async def caught_up(self, token: str | None) -> None:
        """Wait until the callbacks for ``token`` and the log callbacks queued so far have been delivered."""
        keys = (None,) if token is None else (None, token)
        marks = [(key, self._queued.get(key, 0)) for key in keys]
        while any(self._delivered.get(key, 0) < mark for key, mark in marks):
            if self._wake is None:
                self._wake = anyio.Event()
            await self._wake.wait()
