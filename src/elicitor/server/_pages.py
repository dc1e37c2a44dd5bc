"""The web pages a URL-mode elicitation sends a person to, served with the server on either transport.

A URL-mode elicitation (spec ``client/elicitation``, "URL Mode Elicitation Requests") hands the person a link to
a page outside the MCP channel — a sign-in, a payment — and the server learns from that page when the step is done
(``Server.complete_url_elicitation``). The page has to be served somewhere, and its link must carry an address the
person's browser reaches. :class:`PageSite` is the one place that knows both:

- over Streamable HTTP the server's own ASGI app serves the pages on every path other than the MCP endpoint, and the
  links start with the address the server listens on (learnt from the first request's ASGI scope, so ``port=0``
  and mounted apps work) unless ``url=`` names a public address (behind a proxy);
- over stdio there is no web server, so :meth:`PageSite.on_loopback` starts a small one on a free loopback port
  next to the MCP connection, its address fixed before the first message is read. Its log goes to stderr only:
  stdout is the MCP channel (spec ``basic/transports``, stdio: "The server MUST NOT write anything to its stdout
  that is not a valid MCP message").
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import sniffio

from .._exceptions import ElicitorError
from .._net import loopback_socket

PagesApp = Callable[[Any, Any, Any], Awaitable[None]]
"""An ASGI application (``async def app(scope, receive, send)``), Starlette's or a plain function."""


class PagesNotServed(ElicitorError, RuntimeError):
    """A page link was asked for before anything serves the pages (or before their address is known).

    An :class:`~elicitor.ElicitorError`, and a ``RuntimeError`` as well (what it was first), so existing
    ``except RuntimeError`` clauses still catch it.
    """


class PageSite:
    """The pages of one server, and the address their links start with."""

    def __init__(self) -> None:
        self.app: PagesApp | None = None
        self._base: str | None = None
        self._fixed = False

    def serve(self, app: PagesApp, url: str | None) -> None:
        """Serve ``app``; ``url`` is its public address when the server's own is not what a browser reaches."""
        self.app = app
        self._fixed = url is not None
        self._base = url.rstrip("/") if url is not None else None

    @property
    def base(self) -> str | None:
        """Where the pages are reached (``scheme://host:port[/prefix]``), once known."""
        return self._base

    def url(self, path: str) -> str:
        """The absolute link to ``path`` on the pages (keep ``{elicitation_id}`` in it for the registry to fill)."""
        if self.app is None:
            raise PagesNotServed("this server serves no pages: call server.serve_pages(app) first")
        if self._base is None:
            raise PagesNotServed(
                "the pages' address is not known yet: serve the server (server.run, its http_app, serve_stdio) "
                "or give serve_pages(app, url=...)"
            )
        return self._base + ("" if path.startswith("/") else "/") + path

    def learn(self, scope: MutableMapping[str, Any]) -> None:
        """Take the address from an HTTP request's scope (where the server listens), unless one was given."""
        if self._fixed or self._base is not None:
            return
        listening = scope.get("server")
        if not listening or listening[1] is None:
            return  # a Unix socket: nothing a browser could open; serve_pages(url=...) is needed there
        host, port = listening
        shown = f"[{host}]" if ":" in host else host
        self._base = f"{scope.get('scheme', 'http')}://{shown}:{port}{scope.get('root_path', '')}".rstrip("/")

    @asynccontextmanager
    async def on_loopback(self) -> AsyncIterator[str]:
        """Serve the pages on a free loopback port for the block; yields their address, known at once.

        The socket is bound and listening before the block starts, so a link handed out at the first elicitation
        already works. uvicorn logs to stderr only, without the access log.
        """
        import uvicorn
        import uvicorn.config

        if self.app is None:
            raise PagesNotServed("this server serves no pages")
        if sniffio.current_async_library() != "asyncio":
            raise RuntimeError("serving pages next to stdio needs the asyncio backend (uvicorn runs on asyncio)")
        sock = loopback_socket()
        sock.listen(128)
        if not self._fixed:
            self._base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        logging = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
        for handler in logging["handlers"].values():
            handler["stream"] = "ext://sys.stderr"  # uvicorn's default sends its access log to stdout
        config = uvicorn.Config(self.app, log_config=logging, log_level="warning", access_log=False, lifespan="auto")
        web = uvicorn.Server(config)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: web.serve(sockets=[sock]))
                try:
                    yield self._base or ""
                finally:
                    web.should_exit = True
        finally:
            sock.close()
