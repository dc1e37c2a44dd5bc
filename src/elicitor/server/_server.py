"""``Server``: what a server offers (tools that elicit, resources, prompts) and how it is run, on every revision."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar, overload

import anyio

from .._loop import event_loop, run_on
from ..i18n._message import N_, Message
from ..session import MAX_INCOMING
from ..state import REDIS_URL_ENV, MemoryStore, Store, open_store
from ..transports import StdioServerTransport, Transport, stdout_kept_for_protocol
from ..types import (
    JSONObject,
)
from ._changes import ChangeBus
from ._context import Context
from ._dispatch import ServerSession
from ._features import PromptDef, ResourceDef, make_prompt, make_resource
from ._hold import StoreHold
from ._pages import PagesApp, PageSite
from ._rounds import PARKED_RUN_TTL
from ._sealing import GENERATE_KEY, StateSealer
from ._task_wire import TaskSupport
from ._tasks import TaskEngine
from ._tools import ToolDef, make_tool
from ._url import UrlElicitations

if TYPE_CHECKING:
    from .http import HttpApp

logger = logging.getLogger("elicitor.server")

Completer: TypeAlias = "Callable[[JSONObject, JSONObject, JSONObject | None], Awaitable[Sequence[str]]]"
"""The ``completion/complete`` handler: ``(ref, argument, context)`` to suggested values."""

F = TypeVar("F", bound=Callable[..., Any])
P = TypeVar("P", bound=PagesApp)

DEFAULT_ELICITATION_TIMEOUT = 3600.0
"""Seconds a tool waits for the client's answer to a request sent mid-call (handshake revisions): one hour."""

DEFAULT_PARKED_RUN_TTL = PARKED_RUN_TTL
"""Seconds a 2026-07-28 call waits parked between rounds (ten minutes)."""

DEFAULT_MAX_IN_FLIGHT = MAX_INCOMING
KEEP_ALIVE = 5
"""Seconds :meth:`Server.run` keeps an idle HTTP connection open (uvicorn's own default). A balancer that keeps
idle connections to the replicas must close them sooner (deploy/nginx.conf: 4 s): a request it sends on a connection
the replica is closing is reset, and a reset POST cannot safely be retried, so the client gets a 502."""
"""Requests one connection may have in flight at once."""


class Server:
    """An MCP server whose tools can ask the person at the client for input.

    Example::

        server = Server("booking-desk", version="1.0.0")

        @server.tool()
        async def book(ctx: Context, restaurant: str) -> str:
            match await ctx.elicit(f"Book a table at {restaurant}?", Booking):
                case Accepted(data=booking):
                    return f"Booked for {booking.party}"
                case Declined() | Cancelled():
                    return "Nothing booked"

        server.run()  # stdio

    Args:
        name: the server's name, shown to the person next to every question.
        version: the server's version, shown with its name.
        title: a display name, shown in place of the name (which then follows it).
        instructions: guidance for the model using this server.
        state: seals ``requestState`` on 2026-07-28; default keys come from ``ELICITOR_STATE_KEYS`` or are
            random per process (replicas must share keys: see :class:`StateSealer`).
        max_parked_runs: how many 2026-07-28 calls may wait between rounds in memory per connection (a cache:
            beyond it, or after a restart, a retry replays the tool from the sealed state). ``0`` parks none, so
            every round replays the tool: what happens on another replica, and how to test ``ctx.once``.
        store: the shared state (sessions, SSE history, URL elicitations, change notices): a
            :class:`~elicitor.state.Store` or a ``redis://`` URL. Default: in this process, or the Redis named by
            ``ELICITOR_REDIS_URL`` when :meth:`run` serves HTTP.
        allow_http_urls: let URL-mode elicitations use plain http to hosts other than loopback (development).
        elicitation_timeout: seconds a tool waits for the client's answer to a request it sends mid-call on
            2025-06-18 and 2025-11-25 (``elicitation/create``, ``sampling/createMessage``, ``roots/list``). A
            person may think for a long time, so the default is an hour; it exists so that a client that never
            answers cannot hold a tool forever. On expiry the client gets ``notifications/cancelled``;
            ``ctx.elicit`` returns ``Cancelled()`` and ``ctx.sample``/``ctx.list_roots`` raise ``TimeoutError``.
            ``None`` waits as long as the connection lasts. (2026-07-28 calls wait between rounds instead, bounded
            by ``parked_run_ttl``.)
        parked_run_ttl: seconds a 2026-07-28 call may wait parked for the client's next round; then its task is
            cancelled (a later retry replays the tool from its sealed state while that is valid, an hour).
        max_in_flight: how many requests one connection may have in flight at once; beyond it a request is
            refused with -32603 "Too many requests in flight" (the client may retry).
        task_ttl: seconds a task (``@server.tool(task=...)``) is kept from its creation, its result included;
            its run is cancelled then (``ttlMs``).
        task_poll_interval: seconds between polls suggested to clients following a task (``pollIntervalMs``).
        max_parked_tasks: task runs kept in this process while they wait for a person; beyond it the oldest
            waiting run is dropped and its task resumes by replaying the tool from its record when answered
            (``ctx.once`` keeps side effects from running twice). 0 keeps none.
    """

    def __init__(
        self,
        name: str,
        version: str = "0.0.0",
        *,
        title: str | None = None,
        instructions: str | None = None,
        state: StateSealer | None = None,
        max_parked_runs: int = 1024,
        allow_http_urls: bool = False,
        store: Store | str | None = None,
        elicitation_timeout: float | None = DEFAULT_ELICITATION_TIMEOUT,
        parked_run_ttl: float = DEFAULT_PARKED_RUN_TTL,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        task_ttl: float = 3600.0,
        task_poll_interval: float = 0.5,
        max_parked_tasks: int = 1024,
    ) -> None:
        self.info: JSONObject = {"name": name, "version": version}
        if title:
            self.info["title"] = title
        self.instructions = instructions
        self.sealer = state if state is not None else StateSealer()
        self.max_parked_runs = max_parked_runs
        self.allow_http_urls = allow_http_urls
        self.elicitation_timeout = elicitation_timeout
        self.parked_run_ttl = parked_run_ttl
        self.max_in_flight = max_in_flight
        self._serving = 0
        """How many HTTP apps of this server are running their lifespan (registry changes are refused then, with
        a shared store)."""
        self.share(store if store is not None else MemoryStore())
        self._tools: dict[str, ToolDef] = {}
        self._resources: dict[str, ResourceDef] = {}
        self._templates: list[ResourceDef] = []
        self._prompts: dict[str, PromptDef] = {}
        self._completion: Completer | None = None
        if not task_ttl > 0 or not task_poll_interval > 0:
            raise ValueError("task_ttl and task_poll_interval must be positive")
        self.tasks = TaskEngine(self, ttl=task_ttl, poll_interval=task_poll_interval, max_parked=max_parked_tasks)
        """Tool calls running as tasks (2026-07-28 tasks extension), kept in :attr:`store`."""
        self._pages = PageSite()

    def share(self, store: Store | str) -> None:
        """Keep this server's shared state in ``store`` (a :class:`~elicitor.state.Store` or a ``redis://`` URL).

        Call it before serving: replicas that share a Redis serve each other's sessions, URL elicitations and
        change notices. :meth:`run` calls it with ``ELICITOR_REDIS_URL`` when that is set.
        """
        self.store: Store = open_store(store) if isinstance(store, str) else store
        """Where state that outlives a request is kept (see :mod:`elicitor.state`)."""
        self.url_elicitations = UrlElicitations(self.store)
        """Open URL-mode elicitations, by id (see :meth:`complete_url_elicitation`)."""
        self._changes = ChangeBus(self.store)
        if not self.sealer.ephemeral:  # a process's own random key could not open what other replicas sealed
            self.store.seal_with(self.sealer)  # tasks and kept calls at rest, messages between replicas

    def misconfiguration(self) -> str | None:
        """What in this server's configuration would make it fail once serving, said before it starts; ``None``
        when nothing does. Today: state shared in Redis with ``requestState`` sealed by this process's own random
        key (another replica could not open it, so every 2026-07-28 retry that lands elsewhere would fail)."""
        problem = self._misconfigured()
        return None if problem is None else str(problem)

    def _misconfigured(self) -> Message | None:
        """:meth:`misconfiguration` as a deferred sentence, which ``elicitor serve`` says in the person's language."""
        if self.store.shared and self.sealer.ephemeral:
            return N_(
                "this server shares its state in Redis, so every replica must seal requestState with the same keys: "
                "set ELICITOR_STATE_KEYS ({command}) on all",
                command=GENERATE_KEY,
            )
        return None

    # ---- registration ----------------------------------------------------------------------------------------

    @overload
    def tool(self, fn: F, /) -> F: ...
    @overload
    def tool(
        self,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: JSONObject | None = None,
        input_schema: JSONObject | None = None,
        task: TaskSupport = "never",
        defer_task: bool = False,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: JSONObject | None = None,
        input_schema: JSONObject | None = None,
        task: TaskSupport = "never",
        defer_task: bool = False,
        scopes: Sequence[str] = (),
    ) -> Any:
        """Register a function as a tool. Its typed parameters become the input schema; a parameter annotated
        :class:`Context` receives the call's context. The docstring is the description unless one is given.

        ``input_schema`` replaces the advertised schema (for JSON Schema features a signature cannot say, such
        as ``if``/``then``); the signature still validates the arguments.

        ``task`` makes calls run as tasks on 2026-07-28 (the ``io.modelcontextprotocol/tasks`` extension): the
        client gets a task id at once and follows the task (``tasks/get``), answering its questions
        (``tasks/update``) while it runs. ``"optional"``: a task when the client declared the extension, else an
        ordinary call; ``"required"``: a client without the extension gets -32021. The tool's code is the same
        either way. With ``defer_task=True`` the call first asks in ordinary rounds and becomes a task at
        ``await ctx.run_as_task()`` (questions that decide whether to start at all, then the long work). On
        2025-11-25 the same tool runs as that revision's task when the client asks for one (``execution.taskSupport``
        in ``tools/list`` says it may or must; its questions come through ``tasks/result``); 2025-06-18 has no tasks
        and runs it as an ordinary call. See docs/concepts/tasks.md.

        ``scopes``: over HTTP with ``auth=`` (:class:`~elicitor.server.Protection`), a caller whose token lacks one
        of them gets 403 ``insufficient_scope`` naming them, so that its client can ask for more (the spec's
        "Scope Challenge Handling"). Over stdio there is no token: the person who started the server is the user.

        Raises:
            TypeError: the signature cannot be described (``*args``), or the name is taken.
            ValueError: ``task`` is not one of the three values, or ``defer_task`` without a task.
        """

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            tool = make_tool(
                func,
                name=name,
                title=title,
                description=description,
                annotations=annotations,
                context_type=Context,
            )
            if task not in ("never", "optional", "required"):
                raise ValueError(f"task must be 'never', 'optional' or 'required', not {task!r}")
            if defer_task and task == "never":
                raise ValueError("defer_task needs task='optional' or task='required'")
            tool = dataclasses.replace(tool, task=task, defer_task=defer_task, scopes=tuple(scopes))
            if input_schema is not None:
                tool = dataclasses.replace(tool, input_schema=input_schema)
            if tool.name in self._tools:
                raise TypeError(f"a tool named {tool.name!r} is already registered")
            self._check_registry_change(f"registering tool {tool.name!r}")
            self._tools[tool.name] = tool
            return func

        return register(fn) if fn is not None else register

    @property
    def tools(self) -> dict[str, ToolDef]:
        """The registered tools by name (a copy: register with :meth:`tool`)."""
        return dict(self._tools)

    def tool_scopes(self, tool: str) -> tuple[str, ...]:
        """The scopes a token needs to call tool ``tool`` (``@server.tool(scopes=...)``; empty: none, or no tool)."""
        found = self._tools.get(tool)
        return found.scopes if found is not None else ()

    def mirrored_headers(self, tool: str) -> dict[str, str] | None:
        """The parameters tool ``tool`` mirrors into ``Mcp-Param-*`` headers, by name (``None``: no such tool);
        what the HTTP app checks a 2026-07-28 call's headers against (SEP-2243)."""
        found = self._tools.get(tool)
        return found.header_params if found is not None else None

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> Callable[[F], F]:
        """Register a resource at ``uri``, or a template when ``uri`` has ``{variables}`` (the function's arguments).

        The function returns ``str`` (text), ``bytes`` (blob), a contents dict, or a list of those; it may take a
        :class:`Context` and ask the person things like a tool.
        """

        def register(func: F) -> F:
            made = make_resource(
                func, uri, name=name, title=title, description=description, mime_type=mime_type, context_type=Context
            )
            self._check_registry_change(f"registering resource {uri!r}")
            if made.is_template:
                self._templates.append(made)
            elif uri in self._resources:
                raise TypeError(f"a resource at {uri!r} is already registered")
            else:
                self._resources[uri] = made
            return func

        return register

    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        arguments: Mapping[str, str] | None = None,
    ) -> Callable[[F], F]:
        """Register a prompt. Its parameters are its (string) arguments, required unless they have a default;
        ``arguments`` describes them. It returns text, content blocks, ``{"role", "content"}`` messages, or a list.
        """

        def register(func: F) -> F:
            made = make_prompt(
                func, name=name, title=title, description=description, argument_descriptions=arguments,
                context_type=Context,
            )  # fmt: skip
            if made.name in self._prompts:
                raise TypeError(f"a prompt named {made.name!r} is already registered")
            self._check_registry_change(f"registering prompt {made.name!r}")
            self._prompts[made.name] = made
            return func

        return register

    def completion(self, func: Completer) -> Completer:
        """Register the ``completion/complete`` handler: ``(ref, argument, context) -> list[str]``.

        ``ref`` is ``{"type": "ref/prompt", "name": ...}`` or ``{"type": "ref/resource", "uri": ...}``,
        ``argument`` is ``{"name": ..., "value": ...}``; ``context`` holds already-resolved arguments, if any.
        """
        self._completion = func
        return func

    async def complete_url_elicitation(self, elicitation_id: str, *, principal: str | None = None) -> bool:
        """Say that the out-of-band interaction of a URL-mode elicitation is done (2025-11-25).

        Call it from wherever you learn it (the route a third party redirects the person back to), with who is
        signed in there as ``principal``: the initiating client, and only it, gets
        ``notifications/elicitation/complete``. Returns ``False`` for an unknown, expired or already completed id,
        or another user's elicitation — a forged, replayed or phished completion.

        Replicas sharing a store: while it cannot be reached (a restart, a failover), this waits for it, up to
        15 s, and the completion counts once it is back; a try whose answer was lost is not counted twice.

        Raises:
            StoreUnavailable: the store could not be reached within those 15 s: the completion did not count.
                Answer the page with 503 and ``Retry-After`` (the person reloads it) or try again; a 500 would
                tell the person the link is broken.
        """
        return await self.url_elicitations.complete(elicitation_id, principal=principal)

    def serve_pages(self, app: P, *, url: str | None = None) -> P:
        """Serve ``app`` (ASGI) as the pages URL-mode elicitations send people to, on whichever transport serves.

        Over Streamable HTTP the server's :meth:`http_app` answers every path other than the MCP endpoint (and
        ``/healthz``) with ``app``, and links start with the address it listens on. Over stdio,
        :meth:`serve_stdio` (so :meth:`run` and ``elicitor serve``) also serves ``app`` on a free loopback port,
        logging to stderr only. ``url`` is the address a browser reaches them at when it is not the server's own
        (behind a proxy). Usable as a decorator; returns ``app``. Link to a page with :meth:`page_url`.
        """
        self._pages.serve(app, url)
        return app

    @property
    def pages(self) -> PagesApp | None:
        """What :meth:`serve_pages` serves, if anything."""
        return self._pages.app

    def page_url(self, path: str) -> str:
        """The absolute link to ``path`` on the pages of :meth:`serve_pages`, for ``ctx.url_elicitation``.

        Keep ``{elicitation_id}`` in ``path`` (``"/sign-in/{elicitation_id}"``): the registry puts the
        elicitation's id there, which is how the page knows what to complete.

        Raises:
            PagesNotServed: no pages, or the address is not known yet (nothing serves the server yet).
        """
        return self._pages.url(path)

    def remove_tool(self, name: str) -> None:
        """Unregister a tool (call :meth:`notify_tools_changed` to tell clients).

        Raises:
            RuntimeError: the server is serving replicas that share a store (see :meth:`_check_registry_change`).
        """
        self._check_registry_change(f"removing tool {name!r}")
        del self._tools[name]

    def _check_registry_change(self, change: str) -> None:
        """Refuse a change of the tools, resources or prompts while this server serves replicas sharing a store.

        The registry is code, in each replica's process: a change made in one would exist in that one only, and
        through the balancer ``tools/list`` would flip between the sets. Register everything before serving
        (every replica runs the same code); to change what a deployment offers, deploy the change.
        """
        if self.store.shared and self._serving:
            raise RuntimeError(
                f"{change} while serving: this server shares its state with other replicas, which would not see the "
                "change; register tools, resources and prompts before serving, on every replica"
            )

    def notify_tools_changed(self) -> None:
        """Tell connected clients the tool list changed (``notifications/tools/list_changed``)."""
        self._changes.publish("notifications/tools/list_changed", {})

    def notify_prompts_changed(self) -> None:
        """Tell connected clients the prompt list changed."""
        self._changes.publish("notifications/prompts/list_changed", {})

    def notify_resources_changed(self) -> None:
        """Tell connected clients the resource list changed."""
        self._changes.publish("notifications/resources/list_changed", {})

    def notify_resource_updated(self, uri: str) -> None:
        """Tell the clients that subscribed to ``uri`` that it changed (``notifications/resources/updated``)."""
        self._changes.publish("notifications/resources/updated", {"uri": uri})

    def capabilities(self) -> JSONObject:
        """What this server offers, from what is registered (and nothing it cannot serve)."""
        capabilities: JSONObject = {"tools": {"listChanged": True}, "logging": {}}
        if self._resources or self._templates:
            capabilities["resources"] = {"subscribe": True, "listChanged": True}
        if self._prompts:
            capabilities["prompts"] = {"listChanged": True}
        if self._completion is not None or self._prompts or self._templates:
            capabilities["completions"] = {}
        return capabilities

    # ---- serving ---------------------------------------------------------------------------------------------

    def connection(self, *, principal: str | None = None) -> ServerSession:
        """A dispatcher for one connection (what :meth:`serve` runs; HTTP's stateless requests share one)."""
        return ServerSession(self, principal=principal)

    async def serve(self, transport: Transport, *, principal: str | None = None) -> None:
        """Serve one connection until the peer closes it."""
        await self.connection(principal=principal).run(transport)

    async def relay_changes(self) -> None:
        """Carry change notices between this replica and the others sharing its state, until cancelled."""
        await self._changes.relay()

    @property
    def relaying_changes(self) -> bool:
        """Whether change notices from other replicas reach this one now (always true with a store of its own)."""
        return self._changes.listening

    async def serve_stdio(self) -> None:
        """Serve on this process's stdin/stdout until stdin closes (with the pages of :meth:`serve_pages`, if any,
        on a loopback port for as long).

        Meanwhile stdout carries the protocol only: anything else written to it (``print()`` in a tool, a library,
        a child process) goes to stderr instead (:func:`~elicitor.transports.stdout_kept_for_protocol`), as the
        spec requires of a stdio server (basic/transports, stdio: nothing but MCP messages on stdout).
        """
        await self._serve_stdio(self.connection())

    async def _serve_stdio(self, connection: ServerSession) -> None:
        """:meth:`serve_stdio` on ``connection``."""
        if self.store.shared:  # its requests that may be tried again wait for a store away, as over HTTP
            connection.hold = StoreHold()
        with stdout_kept_for_protocol() as out:
            if self._pages.app is None:
                await connection.run(StdioServerTransport(stdout=out))
                return
            async with self._pages.on_loopback():
                await connection.run(StdioServerTransport(stdout=out))

    async def _serve_stdio_until_stopped(self) -> None:
        """:meth:`serve_stdio` until stdin closes or a stopping signal comes (SIGTERM, as a host sends after closing
        stdin, or Ctrl-C): either is a requested end, and :meth:`run` returns (exit status 0) instead of the process
        dying of the signal (SIGTERM's default) or with a ``KeyboardInterrupt`` traceback. One client, who asked
        for the end: the requests still in flight end at once, said in the log."""
        connection = self.connection()
        if sys.platform == "win32":  # no signal receivers there: Ctrl-C stays a KeyboardInterrupt (run keeps it quiet)
            await self._serve_stdio(connection)
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signal, tg.cancel_scope, connection)
            await self._serve_stdio(connection)
            tg.cancel_scope.cancel()

    def http_app(self, path: str = "/mcp", **options: Any) -> HttpApp:
        """An ASGI application serving this server over Streamable HTTP at ``path`` (both protocol eras).

        Options are those of :class:`~elicitor.server.HttpApp` (allowed hosts and origins, body limit, event
        store...). Mount it anywhere; see ``HttpApp`` for the lifespan when mounted inside another application.
        """
        from .http import HttpApp

        return HttpApp(self, path=path, **options)

    def run(
        self,
        transport: Literal["stdio", "http"] = "stdio",
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        path: str = "/mcp",
        backend: str = "asyncio",
        redis: str | None = None,
        shutdown_grace: int = 30,
        loop: Literal["auto", "uvloop", "asyncio"] = "auto",
        http: Literal["auto", "httptools", "h11"] = "auto",
        keep_alive: int = KEEP_ALIVE,
        forwarded_allow_ips: str | Sequence[str] | None = None,
        **options: Any,
    ) -> None:
        """Blocking entry point: serve over stdio, or over Streamable HTTP with uvicorn at ``host:port/path``.

        Both transports run on the fastest stack installed unless ``loop``/``http`` say otherwise: uvloop's event
        loop (``pip install 'elicitor[speed]'``; not on Windows), else asyncio's, and for HTTP httptools' parser
        (installed with elicitor), else h11. Over HTTP the line printed at start names the stack in use. See
        docs/deploying.md for what each is worth.

        HTTP binds to loopback by default; serving another interface needs ``allowed_hosts`` for it too
        (DNS-rebinding protection rejects requests addressed to any other host). ``redis`` (default:
        ``ELICITOR_REDIS_URL``) shares the state with every replica using the same Redis; they must also share
        ``ELICITOR_STATE_KEYS``: without them it raises ``RuntimeError`` saying so before listening (see
        :meth:`misconfiguration`), and a lifespan that fails stops the server with its reason. On SIGTERM,
        the streams this replica relays for other replicas' sessions end at once (their clients resume them
        elsewhere), and the calls of its own sessions, wherever their clients are connected, get ``shutdown_grace``
        seconds to finish; then the calls still waiting on a person are cancelled (their clients resume elsewhere or
        start again), and the replica gives up its sessions at once (see :meth:`HttpApp.drain`); a warning says how
        many calls that cut. Then ``run`` returns (a stop that was asked for and done: ``elicitor serve`` exits 0),
        after SIGTERM as after Ctrl-C. On stdio, SIGTERM (what a host sends after closing stdin) or Ctrl-C ends the
        connection at once, its requests in flight with it (a warning says how many), and ``run`` returns.
        ``backend`` is the async library for stdio (``"asyncio"``, on ``loop``, or ``"trio"``). ``keep_alive`` is
        how long, in seconds, an idle HTTP connection stays open; behind a balancer, keep it longer than the
        balancer keeps its idle connections to the replicas (see :data:`KEEP_ALIVE`).

        ``forwarded_allow_ips``: the balancers whose ``X-Forwarded-For`` and ``X-Forwarded-Proto`` headers are
        believed (uvicorn's setting of that name: addresses or networks, comma-separated or a sequence, ``"*"``
        for any peer), so that spans name the person's address as ``client.address`` rather than the
        balancer's. Default: ``FORWARDED_ALLOW_IPS`` from the environment (uvicorn's variable), else nobody's:
        anyone can write those headers, so a server believes them only from peers it is told to.

        On stdio, stdout is the protocol channel: ``print()`` output goes to stderr while serving (see
        :meth:`serve_stdio`), and if the application has not configured logging, Python logging is set up to write
        to stderr at level INFO, so ``logging.info(...)`` shows there and never reaches the client as a stray line.
        """
        if transport == "stdio":
            chosen = event_loop(loop)  # a named loop that is not installed: said before anything starts
            log_to_stderr()
            with contextlib.suppress(KeyboardInterrupt):  # a Ctrl-C before the signal receiver is up
                if backend == "asyncio":
                    run_on(self._serve_stdio_until_stopped, loop=chosen)
                else:
                    anyio.run(self._serve_stdio_until_stopped, backend=backend)
        elif transport == "http":
            import uvicorn

            if redis is None and not self.store.shared:  # a store given to share() before run() stands
                redis = os.environ.get(REDIS_URL_ENV, "").strip() or None
            if redis is not None:
                self.share(redis)
            problem = self.misconfiguration()
            if problem is not None:
                raise RuntimeError(problem)  # before anything listens: a replica that cannot work never starts
            on_loop, parser = http_stack(loop, http)
            from .._net import sockets_for
            from ..i18n import language

            sockets, port = sockets_for(host, port)  # port 0: a free one, which the line below names
            shown = f"[{host}]" if ":" in host else host
            says = {"name": self.info["name"], "url": f"http://{shown}:{port}{path}", "parser": parser, "loop": on_loop}
            if self.store.shared:  # the line the operator reads first: in their language, as the rest of the CLI
                line = language()._("elicitor: {name} at {url} ({parser}, {loop}, state shared in Redis)", **says)
            else:
                line = language()._("elicitor: {name} at {url} ({parser}, {loop})", **says)
            print(line, file=sys.stderr, flush=True)
            from .http._drain import DrainingServer
            from .http._keepalive import http_protocol

            app = self.http_app(path, **options)
            config = uvicorn.Config(
                app,
                host=host,
                port=port,
                loop=on_loop,
                http=http_protocol(parser),  # a stall does not close a connection with a request in it
                log_level="warning",
                lifespan="on",  # a lifespan that fails stops the server with its reason ("auto" would serve on)
                timeout_graceful_shutdown=shutdown_grace,
                timeout_keep_alive=keep_alive,
                **forwarding(forwarded_allow_ips),
            )
            served = DrainingServer(config, app)  # the app hears of a SIGTERM as its shutdown begins
            with contextlib.suppress(KeyboardInterrupt):
                served.run(sockets=sockets)
            if not served.started:  # as uvicorn.run: a lifespan that failed (its reason logged) is a failed start
                sys.exit(3)
        else:
            raise ValueError(f"unknown transport {transport!r}: use 'stdio' or 'http'")


async def _stop_on_signal(scope: anyio.CancelScope, connection: ServerSession) -> None:
    """Cancel ``scope`` (a stdio connection's) at the first SIGTERM or SIGINT, saying what it ends."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for sig in signals:
            session = connection.session
            ended = session.connection.answering if session is not None else 0
            if ended:
                logger.warning("stopping on %s: %d request(s) in flight are ended", signal.Signals(sig).name, ended)
            scope.cancel()
            return


FORWARDED_ALLOW_IPS_ENV = "FORWARDED_ALLOW_IPS"
"""uvicorn's environment variable naming the peers whose forwarding headers it believes (:func:`forwarding`)."""


def forwarding(allowed: str | Sequence[str] | None) -> dict[str, Any]:
    """uvicorn's settings for believing forwarding headers (``X-Forwarded-For``, ``X-Forwarded-Proto``): from the
    peers ``allowed`` names, else those of ``FORWARDED_ALLOW_IPS``, else from nobody.

    uvicorn itself believes them from loopback unless told otherwise, so any local process (a browser's page
    fetching from 127.0.0.1 included) could name any client address and scheme; behind a balancer on another
    host it never believed them, and spans named the balancer. Nothing is believed unless the operator says
    whose headers to believe (an empty string too: nobody's, whatever the environment says)."""
    if allowed is None:
        allowed = os.environ.get(FORWARDED_ALLOW_IPS_ENV, "")
    peers = [part.strip() for part in allowed.split(",")] if isinstance(allowed, str) else [*allowed]
    peers = [peer for peer in peers if peer]
    if not peers:
        return {"proxy_headers": False}
    return {"proxy_headers": True, "forwarded_allow_ips": peers}


def http_stack(loop: str = "auto", http: str = "auto") -> tuple[str, str]:
    """The event loop and HTTP parser uvicorn runs on: the fastest installed for ``"auto"``, else as named.

    Raises:
        ValueError: an unknown name, or a named one that is not installed (with what to install).
    """
    loop = event_loop(loop)
    if http not in ("auto", "httptools", "h11"):
        raise ValueError(N_("unknown HTTP parser {http}: use 'auto', 'httptools' or 'h11'", http=repr(http)))
    if http == "auto":
        http = "httptools" if _installed("httptools") else "h11"
    elif http == "httptools" and not _installed("httptools"):
        raise ValueError(N_("http='httptools' needs httptools: {install}", install="pip install httptools"))
    return loop, http


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def log_to_stderr() -> None:
    """Python logging to stderr at INFO, unless the application configured logging itself (the root logger has a
    handler): a stdio server's stdout belongs to the protocol (basic/transports, stdio), its logs on stderr."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    if root.level == logging.WARNING:  # the default: the application did not choose a level either
        root.setLevel(logging.INFO)
