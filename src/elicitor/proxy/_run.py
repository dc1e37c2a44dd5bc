"""``elicitor proxy UPSTREAM``: serve a client on stdio through a :class:`~elicitor.proxy.Bridge` to UPSTREAM.

UPSTREAM is a command (a stdio server, started as a child process whose stderr goes to ours, and started again
after it ends: :class:`~._command.ServerCommand`) or an ``http(s)://`` endpoint. The client is whoever started the
proxy: a host launches ``elicitor proxy python server.py`` in place of ``python server.py``. Our stdout is the
protocol; everything the proxy says goes to stderr.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Literal, TextIO

import anyio

from .._loop import run_on
from ..client import BrowserHandler, TerminalHandler
from ..client._handlers import ElicitationHandler
from ..client._pace import PersonPaced
from ..i18n import language
from ..transports import StdioServerTransport
from ._bridge import Bridge
from ._command import ServerCommand
from ._upstream import Connect

UI = Literal["browser", "terminal", "none"]


UPSTREAM_GRACE = 1.0
"""Seconds a stdio server behind the proxy has to exit once its input is closed, and again after SIGTERM. A second,
not two: the proxy's own client gives it two after closing its stdin before SIGTERM (elicitor's does), and the
proxy must have stopped its server by then, or a server that does not exit when its input ends (the official
Python SDK 1.6) outlives the proxy."""


def upstream(target: Sequence[str], transport: str = "auto") -> tuple[Connect, PersonPaced | None]:
    """How to reach UPSTREAM: an HTTP endpoint (over ``transport``: see ``HttpClientTransport.connect``), or a
    command to start as a stdio server; and its sign-in, if a person may have to sign in there."""
    if len(target) == 1 and target[0].startswith(("http://", "https://")):
        from ..client._http import HttpClientTransport
        from ..client.auth import LoopbackAuthorizer, OAuth, default_token_store

        url = target[0]
        # A protected upstream (401): the person at the proxy signs in through the link on stderr (stdout may be
        # the protocol), once; the tokens are kept as elicitor connect keeps them.
        auth = OAuth(LoopbackAuthorizer(), store=default_token_store(), client_name="elicitor proxy")
        return (lambda: HttpClientTransport.connect(url, auth=auth, transport=transport)), auth
    return ServerCommand(target, grace=UPSTREAM_GRACE), None


def controlling_terminal() -> tuple[TextIO, TextIO] | None:
    """The person's terminal, opened for reading and writing: stdin and stdout are the protocol, so the terminal
    renderer reaches the person through ``/dev/tty``. ``None`` when the proxy has no controlling terminal: a host
    that starts servers in a new session (the official SDK does) or a service manager leaves it none."""
    try:
        reading = open("/dev/tty", encoding="utf-8", errors="replace")  # noqa: SIM115 (closed by renderer())
    except OSError:
        return None
    try:
        writing = open("/dev/tty", "w", encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError:
        reading.close()
        return None
    return reading, writing


def _terminal_handler(reading: TextIO, writing: TextIO) -> TerminalHandler:
    """The terminal renderer entirely on the controlling terminal: the prompts, and everything it shows before
    them (who asks, the message, the fields, a URL's host, warnings)."""

    def write(text: str) -> None:
        writing.write(text + "\n")
        writing.flush()

    if os.environ.get("TERM", "") not in ("", "dumb"):
        from prompt_toolkit.input import create_input
        from prompt_toolkit.output import create_output

        return TerminalHandler(
            write=write, screen=True, input=create_input(stdin=reading), output=create_output(stdout=writing)
        )

    def read_line(prompt: str) -> str:
        writing.write(prompt)
        writing.flush()
        line = reading.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n").removesuffix("\r")

    return TerminalHandler(read_line, write, screen=False)


@asynccontextmanager
async def renderer(ui: UI) -> AsyncIterator[ElicitationHandler | None]:
    """What answers the elicitations a client cannot (``--ui``): pages in the browser, the controlling terminal,
    or nothing. Without a controlling terminal, ``terminal`` says so and asks in the browser instead."""
    if ui == "terminal":
        terminal = controlling_terminal()
        if terminal is not None:
            reading, writing = terminal
            try:
                yield _terminal_handler(reading, writing)
            finally:
                reading.close()
                writing.close()
            return
        problem = language()._(
            "this process has no controlling terminal (its host started it in a new session, or as a service), so "
            "questions cannot reach a person there; asking in the browser instead (each question's link is printed "
            "here and opened in the default browser)"
        )
        _says("--ui terminal" + language()._(": ") + problem)
        ui = "browser"
    if ui == "browser":
        async with BrowserHandler() as browser:
            yield browser
    else:
        yield None


async def serve_stdio(
    target: Sequence[str], *, ui: UI = "browser", upstream_protocol: str = "auto", transport: str = "auto"
) -> None:
    """Serve the client on our stdin/stdout, forwarding to ``target``, until either side closes."""
    handler_context: AbstractAsyncContextManager[ElicitationHandler | None] = renderer(ui)
    async with handler_context as handler:
        connect, sign_in = upstream(target, transport)
        bridge = Bridge(connect, ui=handler, upstream_protocol=upstream_protocol, sign_in=sign_in)
        await bridge.serve(StdioServerTransport())


async def serve_http(
    target: Sequence[str],
    host: str,
    port: int,
    *,
    ui: UI = "browser",
    upstream_protocol: str = "auto",
    stack: tuple[str, str] = ("asyncio", "h11"),
    transport: str = "auto",
    shutdown_grace: int = 30,
    forwarded_allow_ips: str | None = None,
) -> None:
    """Serve clients over Streamable HTTP at ``http://host:port/mcp`` (elicitor's HTTP app: Host and Origin checks,
    sessions, both eras), forwarding to ``target``.

    A SIGTERM (or Ctrl-C) shuts it down as it does ``Server.run("http")``: it stops listening, the calls in flight
    get ``shutdown_grace`` seconds, and then what is left (a call waiting on a person who does not answer) ends and
    this returns (the process exits 0: a stop asked for and done); without the bound, one person who never answers
    kept the proxy alive for ever.

    ``stack`` names the event loop this runs on and the HTTP parser to use (``http_stack()``), as ``elicitor serve``
    chooses them; the parser's protocol keeps a connection with a request in it open across a stall of the process
    (``server.http._keepalive``), so what a balancer sent on it meanwhile is read, not reset.
    ``forwarded_allow_ips``: the balancers whose forwarding headers are believed, as for ``Server.run``."""
    import uvicorn

    from ..server._server import KEEP_ALIVE, forwarding
    from ..server.http._drain import DrainingServer
    from ..server.http._keepalive import http_protocol
    from ._http import ProxyServer

    event_loop, parser = stack
    async with renderer(ui) as handler:
        connect, sign_in = upstream(target, transport)
        proxy = ProxyServer(connect, ui=handler, upstream_protocol=upstream_protocol, sign_in=sign_in)
        from .._net import sockets_for

        sockets, port = sockets_for(host, port)  # port 0: a free one, which the line below names
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{port}/mcp"  # outside the call: Babel's extractor skips a call holding an f-string
        at = language()._(
            "at {url}, forwarding to {target} ({parser}, {loop})",
            url=url, target=" ".join(target), parser=parser, loop=event_loop,
        )  # fmt: skip
        _says(at)
        app = proxy.http_app()
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            http=http_protocol(parser),
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=shutdown_grace,
            timeout_keep_alive=KEEP_ALIVE,
            **forwarding(forwarded_allow_ips),
        )
        # The app hears of the shutdown as it begins (its sessions end).
        await DrainingServer(config, app).serve(sockets=sockets)


def _says(text: str) -> None:
    """One line of ``elicitor proxy`` to the person on standard error, after the command's name and the colon of
    their language (full-width in Chinese, with no space after it), as ``elicitor serve`` says its own."""
    print("elicitor proxy" + language()._(": ") + text, file=sys.stderr)


async def until_terminated(serve: Callable[[], Awaitable[None]]) -> None:
    """``serve()`` until it returns or SIGTERM comes (what a host sends once it has closed stdin, if the proxy has
    not gone): then it is cancelled, its upstream server stopped as when the client leaves, and this returns, so
    the process exits 0 instead of dying of the signal with its server left to notice by itself. Ctrl-C is left
    as it was: the person at the terminal interrupted the proxy (status 130)."""
    if sys.platform == "win32":  # no signal receivers there
        await serve()
        return
    async with anyio.create_task_group() as tg:

        async def stop() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(stop)
        await serve()
        tg.cancel_scope.cancel()


def main(
    target: Sequence[str],
    ui: UI = "browser",
    upstream_protocol: str = "auto",
    listen: str | None = None,
    *,
    transport: str = "auto",
    shutdown_grace: int = 30,
    forwarded_allow_ips: str | None = None,
) -> int:
    """``elicitor proxy``: serve on stdio, or over Streamable HTTP with ``listen`` (``HOST:PORT``; a SIGTERM then
    leaves the calls in flight ``shutdown_grace`` seconds, see :func:`serve_http`); the process's exit status."""
    try:
        if listen is None:
            run_on(
                lambda: until_terminated(
                    lambda: serve_stdio(target, ui=ui, upstream_protocol=upstream_protocol, transport=transport)
                )
            )
        else:
            host, _, port = listen.rpartition(":")
            if not host or not port.isdigit():
                wrong = language()._("--listen takes HOST:PORT, not {value}", value=repr(listen))
                _says(wrong)
                return 2
            from ..server._server import http_stack

            # The fastest stack installed, as elicitor serve chooses it: uvloop's event loop, httptools' parser.
            stack = http_stack()
            run_on(
                lambda: serve_http(
                    target,
                    host.strip("[]"),
                    int(port),
                    ui=ui,
                    upstream_protocol=upstream_protocol,
                    stack=stack,
                    transport=transport,
                    shutdown_grace=shutdown_grace,
                    forwarded_allow_ips=forwarded_allow_ips,
                ),
                loop=stack[0],
            )
    except KeyboardInterrupt:
        return 130
    return 0
