"""``elicitor proxy UPSTREAM``: serve a client on stdio through a :class:`~elicitor.proxy.Bridge` to UPSTREAM.

UPSTREAM is a command (a stdio server, started as a child process whose stderr goes to ours) or an ``http(s)://``
endpoint. The client is whoever started the proxy: a host launches ``elicitor proxy python server.py`` in place of
``python server.py``. Our stdout is the protocol; everything the proxy says goes to stderr.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Literal

import anyio

from ..client import BrowserHandler, TerminalHandler
from ..client._handlers import ElicitationHandler
from ..transports import StdioClientTransport, StdioServerTransport, Transport
from ._bridge import Bridge
from ._upstream import Connect

UI = Literal["browser", "terminal", "none"]


def upstream(target: Sequence[str]) -> Connect:
    """How to reach UPSTREAM: an HTTP endpoint, or a command to start as a stdio server."""
    if len(target) == 1 and target[0].startswith(("http://", "https://")):
        from ..client._http import HttpClientTransport
        from ..client.auth import LoopbackAuthorizer, OAuth, default_token_store

        url = target[0]
        # A protected upstream (401): the person at the proxy signs in through the link on stderr (stdout may be
        # the protocol), once; the tokens are kept as elicitor connect keeps them.
        auth = OAuth(LoopbackAuthorizer(), store=default_token_store(), client_name="elicitor proxy")
        return lambda: HttpClientTransport.connect(url, auth=auth)
    command = list(target)

    async def start() -> Transport:
        return await StdioClientTransport.start(command, stderr=sys.stderr.fileno())

    return start


def _tty_line(prompt: str) -> str:
    """The terminal renderer's reader when stdin is the protocol: the controlling terminal itself."""
    with open("/dev/tty") as tty, open("/dev/tty", "w") as out:
        out.write(prompt)
        out.flush()
        line = tty.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


@asynccontextmanager
async def renderer(ui: UI) -> AsyncIterator[ElicitationHandler | None]:
    """What answers the elicitations a client cannot (``--ui``): pages in the browser, the controlling terminal,
    or nothing."""
    if ui == "browser":
        async with BrowserHandler() as browser:
            yield browser
    elif ui == "terminal":
        yield TerminalHandler(read_line=_tty_line, screen=False)
    else:
        yield None


async def serve_stdio(target: Sequence[str], *, ui: UI = "browser", upstream_protocol: str = "auto") -> None:
    """Serve the client on our stdin/stdout, forwarding to ``target``, until either side closes."""
    handler_context: AbstractAsyncContextManager[ElicitationHandler | None] = renderer(ui)
    async with handler_context as handler:
        bridge = Bridge(upstream(target), ui=handler, upstream_protocol=upstream_protocol)
        await bridge.serve(StdioServerTransport())


async def serve_http(
    target: Sequence[str], host: str, port: int, *, ui: UI = "browser", upstream_protocol: str = "auto"
) -> None:
    """Serve clients over Streamable HTTP at ``http://host:port/mcp`` (elicitor's HTTP app: Host and Origin checks,
    sessions, both eras), forwarding to ``target``."""
    import uvicorn

    from ._http import ProxyServer

    async with renderer(ui) as handler:
        proxy = ProxyServer(upstream(target), ui=handler, upstream_protocol=upstream_protocol)
        shown = f"[{host}]" if ":" in host else host
        print(f"elicitor proxy: at http://{shown}:{port}/mcp, forwarding to {' '.join(target)}", file=sys.stderr)
        config = uvicorn.Config(proxy.http_app(), host=host, port=port, log_level="warning", lifespan="on")
        await uvicorn.Server(config).serve()


def main(target: Sequence[str], ui: UI = "browser", upstream_protocol: str = "auto", listen: str | None = None) -> int:
    try:
        if listen is None:
            anyio.run(lambda: serve_stdio(target, ui=ui, upstream_protocol=upstream_protocol))
        else:
            host, _, port = listen.rpartition(":")
            if not host or not port.isdigit():
                print(f"elicitor proxy: --listen takes HOST:PORT, not {listen!r}", file=sys.stderr)
                return 2
            anyio.run(
                lambda: serve_http(target, host.strip("[]"), int(port), ui=ui, upstream_protocol=upstream_protocol)
            )
    except KeyboardInterrupt:
        return 130
    return 0
