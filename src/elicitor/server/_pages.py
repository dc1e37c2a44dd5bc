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
import html
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import sniffio

from .._exceptions import ElicitorError, TemporarilyUnavailable
from .._net import loopback_socket
from ..i18n import N_

logger = logging.getLogger("elicitor.server")

PagesApp = Callable[[Any, Any, Any], Awaitable[None]]
"""An ASGI application (``async def app(scope, receive, send)``), Starlette's or a plain function."""


class PagesNotServed(ElicitorError, RuntimeError):
    """A page link was asked for before anything serves the pages (or before their address is known).

    An :class:`~elicitor.ElicitorError`, and a ``RuntimeError`` as well (what it was first), so existing
    ``except RuntimeError`` clauses still catch it.
    """


UNAVAILABLE_TITLE = N_("Please try again in a moment")
UNAVAILABLE_TEXT = N_(
    "This page cannot be shown right now: the service is briefly unavailable. Reload it in a few seconds."
)
UNAVAILABLE_RETRY = 5
"""Seconds a browser (or a person) is told to wait before loading a page again (``Retry-After``)."""


def answering_unavailable(app: PagesApp) -> PagesApp:
    """``app``, with a page that failed because the shared state is away for a moment answered 503.

    A page that reads a URL-mode elicitation (``server.url_elicitations.get``) or completes one needs the store: a
    person opening it while Redis restarts or fails over would otherwise get a 500 or the server's traceback,
    which reads as a broken link. Before the page started its answer, :class:`TemporarilyUnavailable` becomes a
    short page in the person's language (``Accept-Language``, or the one ``elicitor --lang`` chose) saying to
    reload in a moment, with ``Retry-After``; a page that already started answering is left as it was (its answer
    cannot change status any more)."""

    async def answering(scope: Any, receive: Any, send: Any) -> None:
        started = False

        async def sending(message: Any) -> None:
            nonlocal started
            if message.get("type") == "http.response.start":
                started = True
            await send(message)

        try:
            await app(scope, receive, sending)
        except TemporarilyUnavailable as exc:
            if scope.get("type") != "http" or started:
                raise
            logger.warning("page %s answered 503: %s", scope.get("path", "?"), exc)
            await unavailable_page(scope, send)

    return answering


async def unavailable_page(scope: Any, send: Any) -> None:
    """503, ``Retry-After``, and a page saying to reload in a moment, in the person's language."""
    from ..i18n import chosen, negotiate

    lang = chosen()
    if lang is None:
        said = b",".join(value for name, value in scope.get("headers") or () if name.lower() == b"accept-language")
        lang = negotiate(said.decode("latin-1"))
    title, text = html.escape(lang.text(UNAVAILABLE_TITLE)), html.escape(lang.text(UNAVAILABLE_TEXT))
    body = (
        f"<!doctype html><html lang={lang.tag} dir={lang.direction}><meta charset=utf-8><title>{title}</title>"
        "<body style='font-family:system-ui,sans-serif;max-width:40em;margin:3em auto'>"
        f"<h1>{title}</h1><p>{text}</p></body></html>"
    ).encode()
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(UNAVAILABLE_RETRY).encode()),
        (b"cache-control", b"no-store"),
        (b"content-security-policy", b"default-src 'none'; style-src 'unsafe-inline'"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class PageSite:
    """The pages of one server, and the address their links start with."""

    def __init__(self) -> None:
        self.app: PagesApp | None = None
        self.answering: PagesApp | None = None
        """:attr:`app` as served: a page failing while the shared state is away answers 503 (see
        :func:`answering_unavailable`)."""
        self._base: str | None = None
        self._fixed = False

    def serve(self, app: PagesApp, url: str | None) -> None:
        """Serve ``app``; ``url`` is its public address when the server's own is not what a browser reaches."""
        self.app = app
        self.answering = answering_unavailable(app)
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

        if self.app is None or self.answering is None:
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
        config = uvicorn.Config(
            self.answering, log_config=logging, log_level="warning", access_log=False, lifespan="auto"
        )
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
