"""``Client``: connect to an MCP server on any revision, call its tools, answer its elicitations.

``Client`` is a façade over the parts of a connection, each in its own module:

- ``_era.py``: revision negotiation (``server/discover``, ``initialize``), what each side declared, ``_meta``;
- ``_requests.py``: the request layer (``request_timeout``'s quiet clock, a new session when the server forgot ours,
  pagination);
- ``_rounds.py``: one call to its complete result (2026-07-28 rounds, 2025-11-25 -32042 retries);
- ``_tools.py``: listing and calling tools, and when a call runs as a task (``_tasks.py`` follows the task);
- ``_inbound.py``: the server's requests (elicitation through ``_answer.py``'s one path, sampling, roots) and
  ``elicitation_limit``;
- ``_url_flow.py``: URL-mode interactions under way and their completion;
- ``_notifications.py``: logs, progress and completion notices, delivered through ``CallbackQueue``.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

import anyio

from .._exceptions import ConnectionClosed
from .._sentences import NO_HANDSHAKE, said
from .._version import __version__
from ..session import Session, open_session
from ..telemetry import _state as _telemetry
from ..transports import CLIENT_MAX_MESSAGE_SIZE, StdioClientTransport, Transport
from ..types import (
    ACCEPTED_OLDER_REVISIONS,
    ALL_REVISIONS,
    CallToolResult,
    Implementation,
    JSONObject,
    LoggingLevel,
    Tool,
)
from ._era import PROBE_TIMEOUT, Declared, Era
from ._handlers import ElicitationHandler
from ._inbound import Inbound, RateLimit, SamplingHandler
from ._notifications import CallbackQueue, LogCallback, Notifications, Progress, ProgressCallback
from ._pace import Pace, PersonPaced
from ._requests import Requests
from ._rounds import DEFAULT_MAX_ROUNDS, Rounds
from ._tasks import TaskHandle
from ._tools import Tools
from ._transport import HttpAware
from ._url_flow import UrlFlow

logger = logging.getLogger("elicitor.client")

if TYPE_CHECKING:
    import httpx2 as httpx

DEFAULT_REQUEST_TIMEOUT = 300.0
"""Seconds a request may wait while nothing at all arrives from the server (``Client(request_timeout=...)``)."""


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
        probe_timeout: with ``protocol="auto"``, how long the server may stay silent on the ``server/discover``
            probe before the client assumes a handshake-era server (anything heard starts it afresh: a proxy waiting
            on a person beyond it says so); a revision asked for by name has nothing to fall back to: only
            ``handshake_timeout`` bounds it.
        sampling: answers the server's ``sampling/createMessage`` (declares the ``sampling`` capability).
        roots: the roots to report for ``roots/list`` (declares the ``roots`` capability).
        elicitation_limit: ``(count, seconds)``: at most ``count`` elicitations from this server in any
            ``seconds``; the excess is declined without reaching the person, with a warning logged saying why
            (a server that asks in a loop cannot flood them). Default: no limit.
        handshake_timeout: seconds the server may stay silent while it completes the handshake
            (``server/discover`` or ``initialize``) on entry; then ``TimeoutError``. Anything it sends meanwhile (a
            log message, a ping: a proxy waiting for a person to sign in upstream says so) starts the time afresh.
            ``None`` waits as long as it takes.
        url_timeout: seconds to wait for a URL-mode elicitation's completion notice (2025-11-25, -32042) when the
            handler has no ``wait_done`` (nobody to say "I'm done"); then the call goes on and the server says
            whether the interaction is complete. The spec forbids waiting for that notice indefinitely; a handler
            with ``wait_done`` leaves the person in charge instead, and an automated one (``ScriptedHandler``,
            ``automated = True``) does not wait at all: its acceptance is final.
        request_timeout: seconds a request (``call_tool`` and every other) may wait while nothing arrives from the
            server: no answer, no progress or log message, no request of its own. Anything the server sends
            starts the clock again, and it stops while a handler answers the server (a person may be filling a
            form: that time is theirs). On expiry the server is sent ``notifications/cancelled`` and the call
            raises ``TimeoutError`` (2025-11-25 basic/lifecycle, "Timeouts"). ``None`` waits as long as the
            connection lasts; bound a call's total time yourself with ``anyio.fail_after``.
        tasks: follow a server's tasks: declare the tasks extension on 2026-07-28 (``io.modelcontextprotocol/tasks``),
            so a server may run a long tool call as a task; on 2025-11-25 call a tool as a task when its
            ``execution.taskSupport`` requires it, and declare ``tasks.requests.elicitation.create`` so the server
            may ask its questions as tasks. ``call_tool`` follows a task to its result (see :meth:`start_tool`).

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
        probe_timeout: float = PROBE_TIMEOUT,
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
        self.elicitation_modes: frozenset[str] = (
            frozenset(getattr(elicitation, "modes", frozenset({"form"}))) if elicitation is not None else frozenset()
        )
        self.client_info = client_info or Implementation(name="elicitor", version=__version__)
        declared = Declared(self.elicitation_modes, sampling is not None, roots is not None, tasks)
        self._pace = pace = Pace()
        self._paced: list[PersonPaced] = []
        self._era = era = Era(declared, self.client_info, protocol=protocol, probe_timeout=probe_timeout, pace=pace)
        era.log_level = log_level
        self._handshake_timeout = handshake_timeout
        self._session_open = False
        """A handshake-era session is open: its duration is recorded when the connection closes (telemetry)."""
        self._requests = requests = Requests(
            era, request_timeout=request_timeout, handshake_timeout=handshake_timeout, pace=pace
        )
        pace.quiet = requests.quiet
        self._callbacks = callbacks = CallbackQueue()
        self._urls = urls = UrlFlow(url_timeout)
        progress = Progress(callbacks)
        limit = RateLimit(*elicitation_limit, era) if elicitation_limit is not None else None
        self._inbound = inbound = Inbound(
            era, urls, requests.quiet, pace=pace, handler=elicitation, sampling=sampling, roots=roots, limit=limit
        )
        self._rounds = rounds = Rounds(
            era, requests, inbound, urls, callbacks, handler=elicitation, max_rounds=max_rounds
        )
        self._tools = tools = Tools(era, requests, rounds, inbound, progress)
        self._notifications = Notifications(
            callbacks=callbacks,
            progress=progress,
            urls=urls,
            quiet=requests.quiet,
            pace=pace,
            on_log=on_log,
            tools_changed=tools.list_changed,
        )
        self._stack: AsyncExitStack | None = None

    # ---- what the handshake (or server/discover) told us -----------------------------------------------------

    @property
    def protocol_version(self) -> str | None:
        """The protocol revision in use (``"2025-11-25"``, ``"2026-07-28"``...), ``None`` until connected.

        With ``protocol="auto"`` it is the newest both sides speak: ``server/discover`` first, ``initialize`` if
        the server does not know it (2026-07-28 basic/lifecycle).
        """
        return self._era.protocol_version

    @property
    def server_info(self) -> Implementation | None:
        """The server's name, title and version as it reports them: for display only, never for trust decisions
        (``Implementation.display()`` gives a printable form)."""
        return self._era.server_info

    @property
    def server_capabilities(self) -> JSONObject:
        """The capabilities the server declared (``tools``, ``resources``, ``tasks``...), as sent."""
        return self._era.server_capabilities

    @property
    def instructions(self) -> str | None:
        """The server's ``instructions`` for using it, if it sent any."""
        return self._era.instructions

    @classmethod
    def stdio(
        cls,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: int | IO[bytes] | None = None,
        max_message_size: int = CLIENT_MAX_MESSAGE_SIZE,
        **kwargs: Any,
    ) -> Client:
        """A client for a server started as ``command`` with its stdin/stdout as the connection.

        ``stderr`` receives the server's stderr (default: ours). ``max_message_size`` bounds one message from the
        server (16 MiB): a larger answer is dropped unread and its request fails with
        :class:`~elicitor.MessageTooLarge`. Other arguments are as for :class:`Client`.
        """

        async def connect() -> Transport:
            return await StdioClientTransport.start(
                command, env=env, cwd=cwd, stderr=stderr, max_message_size=max_message_size
            )

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
        transport: str = "auto",
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

        ``transport``: a server that still runs the HTTP+SSE transport of 2024-11-05 (a GET opens its event
        stream, which names the URL to POST messages to) is found as the spec says: it refuses the first POST with
        400, 404 or 405, and the client then GETs ``url`` and speaks the old transport if the stream opens
        (``"auto"``, the default: ``url`` is the stream's, ``.../sse`` for most such servers, and a ``url`` whose
        path ends in ``/sse`` gets that GET first). ``"sse"`` goes to the old transport at once (one request
        fewer); ``"streamable-http"`` never falls back. Either way ``headers`` and ``auth`` go on the stream's GET
        and on every POST, which go to the server's own origin only.

        Other arguments are as for :class:`Client`.
        """
        from ._http import HttpClientTransport

        if http is not None and limits is not None:
            raise ValueError("limits= sizes the client's own connection pools; set limits on the http= client instead")
        if http is not None and auth is not None:
            raise ValueError("auth= applies to the client's own connections; set auth on the http= client instead")
        if transport not in ("auto", "streamable-http", "sse"):
            raise ValueError(f"transport must be 'auto', 'streamable-http' or 'sse', not {transport!r}")
        client = cls(
            lambda: HttpClientTransport.connect(
                url, headers=headers, http=http, limits=limits, auth=auth, transport=transport
            ),
            **kwargs,
        )
        if isinstance(auth, PersonPaced):
            client._paced.append(auth)  # a person signing in stops the client's clocks (client/_pace.py)
        return client

    # ---- lifecycle -------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Client:
        if self._stack is not None:
            raise RuntimeError("a Client can be entered once")
        try:
            return await self._enter()
        except ConnectionClosed:
            transport = self._era.transport
            if not (self._era.probe_lost and callable(self._connect) and getattr(transport, "network", "") != "http"):
                raise
        # server/discover got no answer and then the connection ended, as servers of the official Python SDK 1.6 do
        # on any method they do not know (they stop serving, and exit on the next line they read): the server is
        # started again and spoken to with initialize from the first line.
        logger.info("the server stopped on server/discover; starting it again with initialize")
        self._stack = None
        self._era.probe_lost = False
        self._era.skip_probe = True
        return await self._enter()

    async def _enter(self) -> Client:
        self._stack = stack = AsyncExitStack()
        started = time.monotonic_ns()
        try:
            for auth in self._paced:
                stack.callback(auth.pace_with(self._pace))
            if _telemetry.state.on:  # mcp.client.session.duration, once the transport has closed (see below)
                stack.callback(self._session_ended, started)
            self._era.transport = transport = await self._open_transport(stack)
            if isinstance(transport, HttpAware):
                transport.heard_by(self._heard)  # a proxy waiting on a person says so in SSE comments
            self._callbacks.open()
            stack.callback(self._callbacks.close)
            deliveries = await stack.enter_async_context(anyio.create_task_group())
            deliveries.start_soon(self._callbacks.run)
            stack.callback(deliveries.cancel_scope.cancel)
            session = await stack.enter_async_context(
                open_session(transport, self._inbound, self._notifications, eager=True)
            )
            self._requests.session = session
            asked = await stack.enter_async_context(anyio.create_task_group())  # elicitations asked as tasks
            self._inbound.tasks.group = asked
            stack.callback(asked.cancel_scope.cancel)
            quiet = self._requests.quiet
            if quiet is not None:
                watchdog = await stack.enter_async_context(anyio.create_task_group())
                watchdog.start_soon(quiet.watch)
                stack.callback(watchdog.cancel_scope.cancel)
            # A person signing in here is not counted; one signing in beyond a proxy, which keeps us posted, neither.
            with self._pace.deadline(self._handshake_timeout, quiet=True) as deadline:
                await self._era.negotiate(session)
            if deadline.cancelled_caught:
                raise TimeoutError(said(NO_HANDSHAKE, seconds=f"{self._handshake_timeout:g}"))
            # 2025-03-26 said both sides must take JSON-RPC batches (2024-11-05 is JSON-RPC 2.0, which has them).
            session.batches = self._era.protocol_version in ACCEPTED_OLDER_REVISIONS
            if not self._era.stateless:  # its requests say it (mcp.protocol.version); a 2026-07-28 one says its own
                session.revision = self._era.protocol_version
            self._session_open = not self._era.stateless  # a handshake-era session: counted when it ends
        except BaseException:
            await _closed(stack)
            raise
        return self

    def _session_ended(self, started: int) -> None:
        """The connection closed: a handshake-era session's duration, from the connection's start, for the
        conventions' ``mcp.client.session.duration`` (``telemetry/_sessions.py``), with ``error.type`` if it ended
        badly. Called after the transport closed (an HTTP session's end is asked of the server then); nothing for
        a connection whose handshake failed, or a 2026-07-28 one."""
        if not self._session_open:
            return
        self._session_open = False
        from ..telemetry import _sessions

        transport = self._era.transport
        error = _sessions.why_ended("client", self._requests.session, transport)
        network = getattr(transport, "network", "pipe")
        version = _sessions.http_version(transport)
        _sessions.session_ended("client", started, self._era.protocol_version, network, error, version)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._stack is not None
        await _closed(self._stack)

    async def _open_transport(self, stack: AsyncExitStack) -> Transport:
        if not callable(self._connect):
            return self._connect
        made = self._connect()
        if isinstance(made, AbstractAsyncContextManager):
            return await stack.enter_async_context(made)
        return await made

    def _heard(self) -> None:
        """The server sent something that is no message: its silence ends (the handshake's clock, the probe's,
        ``request_timeout``'s start again)."""
        self._pace.heard()
        quiet = self._requests.quiet
        if quiet is not None:
            quiet.heard_from_server()

    @property
    def _session(self) -> Session | None:
        """The connection's session once entered (for tests and diagnostics)."""
        return self._requests.session

    @property
    def _transport(self) -> Transport | None:
        return self._era.transport

    @property
    def stateless(self) -> bool:
        """Whether the revision in use is of the stateless era (2026-07-28: multi-round-trip calls, no session)."""
        return self._era.stateless

    @property
    def modern(self) -> bool:
        """Deprecated: the former name of :attr:`stateless` (the era the docs call stateless)."""
        warnings.warn("Client.modern is deprecated: use Client.stateless", DeprecationWarning, stacklevel=2)
        return self._era.stateless

    # ---- requests --------------------------------------------------------------------------------------------

    async def request(self, method: str, params: JSONObject | None = None) -> JSONObject:
        """Send any request (with the per-request ``_meta`` on 2026-07-28) and return its raw result.

        Raises:
            JSONRPCError: the server answered with an error.
            ConnectionClosed: the connection ended first.
            TimeoutError: nothing came from the server for ``request_timeout`` seconds.
        """
        return await self._requests.request(method, params)

    async def ping(self) -> None:
        """Check the server answers (handshake revisions; 2026-07-28 has no ping, so this sends discover)."""
        if self.stateless:
            await self.request("server/discover")
        else:
            await self.request("ping")

    async def set_logging_level(self, level: LoggingLevel) -> None:
        """Ask for log messages at ``level`` and above (``logging/setLevel``; per request on 2026-07-28)."""
        self._era.log_level = level
        if not self.stateless:
            await self.request("logging/setLevel", {"level": level})

    async def list_tools(self) -> list[Tool]:
        """Every tool the server offers (all pages).

        Over HTTP, a tool whose ``x-mcp-header`` annotations break the rules of SEP-2243 is left out (with a
        warning): one malformed definition must not make the others unusable. :attr:`tools_left_out` says
        what this listing left out.
        """
        return await self._tools.list()

    @property
    def tools_left_out(self) -> tuple[str, ...]:
        """What the last :meth:`list_tools` left out, one reason per entry (a tool without ``name`` or
        ``inputSchema``, an entry that is not an object, a pagination cursor that would loop), in the words of the
        warning logged for it; empty when the list is complete. A person shown the list should be told it is
        not all the server offers."""
        return self._tools.left_out

    async def list_resources(self) -> list[JSONObject]:
        """Every resource the server lists (all pages), as the wire describes them."""
        return await self._requests.list_all("resources/list", "resources")

    async def list_resource_templates(self) -> list[JSONObject]:
        """Every resource template the server lists (all pages)."""
        return await self._requests.list_all("resources/templates/list", "resourceTemplates")

    async def read_resource(self, uri: str) -> JSONObject:
        """Read a resource (answering any elicitation on the way); the ``ReadResourceResult`` as sent."""
        return await self._rounds.drive("resources/read", {"uri": uri})

    async def list_prompts(self) -> list[JSONObject]:
        """Every prompt the server lists (all pages)."""
        return await self._requests.list_all("prompts/list", "prompts")

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> JSONObject:
        """Get a prompt (answering any elicitation on the way); the ``GetPromptResult`` as sent."""
        return await self._rounds.drive("prompts/get", {"name": name, "arguments": dict(arguments or {})})

    async def complete(self, ref: JSONObject, argument: str, value: str) -> list[str]:
        """Ask the server to complete ``argument`` of a prompt or resource template from what was typed."""
        result = await self.request("completion/complete", {"ref": ref, "argument": {"name": argument, "value": value}})
        completion = result.get("completion")
        values = completion.get("values") if isinstance(completion, dict) else None
        return [str(v) for v in values] if isinstance(values, list) else []

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
        return await self._tools.call(name, arguments, progress)

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
        return await self._tools.start(name, arguments, progress)

    async def task(self, task_id: str) -> TaskHandle:
        """A task started earlier (by this client or an earlier run of it, for the same user), as it is now.

        Raises:
            JSONRPCError: -32602 if the server does not know the task (or it belongs to someone else, or expired).
        """
        return await self._tools.task(task_id)

    async def wait_url_completion(self, elicitation_id: str) -> None:
        """Wait for the server's ``notifications/elicitation/complete`` for ``elicitation_id`` (2025-11-25).

        The notification is optional for servers: bound the wait (``anyio.fail_after``) and offer the person a
        way to say they are done.
        """
        await self._urls.wait_completion(elicitation_id)


async def _closed(stack: AsyncExitStack) -> None:
    """``stack.aclose()``, and what it raises without a loop in its chain of contexts.

    When two of the stack's exits raise the same exception (two task groups re-raising a cancellation that came
    from outside them, as when the caller's task group cancels the task the client runs in), ``AsyncExitStack``
    points that exception's context at itself. anyio's task group follows a cancellation's chain of contexts when
    the task ends, and would follow that one for ever, the event loop spinning at full CPU: the loop is cut.
    """
    try:
        await stack.aclose()
    except BaseException as exc:
        seen = {id(exc)}
        current: BaseException = exc
        while (context := current.__context__) is not None:
            if id(context) in seen:
                current.__context__ = None
                break
            seen.add(id(context))
            current = context
        raise
