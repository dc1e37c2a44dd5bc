"""A person approves the sign-in in their browser; the code comes back to a loopback listener (RFC 8252 §7.3).

:class:`LoopbackAuthorizer` listens on 127.0.0.1 (the ``redirect_uri``), shows the authorization URL the way
URL-mode elicitations are shown (the full URL, the host it leads to, anything suspicious about it), opens the
browser unless told not to, and waits for the redirect. Only a request to the callback path carrying the expected
``state`` ends the wait; anything else on the port gets a 4xx page and is otherwise ignored, so a stray or hostile
request can neither end nor break the sign-in. HTTP is parsed with h11.
"""

from __future__ import annotations

import html
import logging
import sys
import weakref
import webbrowser
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
import anyio.to_thread
import h11

from ..._exceptions import AuthError
from ...i18n import Language, language
from .._local import NO_SIGN_IN, said
from .._present import printable
from .._url import url_warnings
from ._types import AuthorizationResponse

logger = logging.getLogger("elicitor.auth")

_MAX_REQUEST = 16 * 1024
_PAGE = """<!doctype html><html lang="{lang}" dir="{dir}"><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>{title}</title>
<body style="font-family:system-ui,sans-serif;max-width:36em;margin:4em auto;padding:0 1em;color:#1a1a1a">
<main><h1>{title}</h1><p role="status">{text}</p></main></body></html>
"""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class LoopbackAuthorizer:
    """An :class:`~elicitor.client.auth.Authorizer` for a person at this machine.

    Args:
        write: where the URL and instructions go (default: standard error).
        open_browser: open the URL in the default browser (``webbrowser``); the URL is shown either way.
        timeout: seconds to wait for the person (default five minutes).
        path: the callback path on the loopback listener.
        on_wait: called when the wait for the person begins (a caller's own deadline can stop running then).
        lang: the language of the instructions and of the page the browser comes back to (default: the
            process's, :func:`elicitor.i18n.language`); what the authorization server says is shown as sent.
    """

    def __init__(
        self,
        *,
        write: Callable[[str], None] = _stderr,
        open_browser: bool = True,
        timeout: float = 300.0,
        path: str = "/callback",
        on_wait: Callable[[], None] | None = None,
        lang: str | Language | None = None,
    ) -> None:
        self._lang = language(lang)
        self._write = write
        self._open_browser = open_browser
        self._timeout = timeout
        self._path = path
        self.on_wait = on_wait
        self._port = 0  # the port of the last sign-in, tried first: the registration names it
        self._listener: anyio.abc.Listener[anyio.abc.SocketStream] | None = None
        self._waiting: str | None = None
        """The ``state`` of a wait interrupted part-way: its listener stays open for the sign-in's next attempt."""
        self._closer: weakref.finalize[[], LoopbackAuthorizer] | None = None
        """Closes a listener kept for a sign-in that is never resumed, when this authorizer goes."""

    @property
    def redirect_uri(self) -> str:
        """``http://127.0.0.1:PORT/PATH`` on the port this authorizer listens on (enter it first)."""
        if self._listener is None:
            raise RuntimeError("enter the authorizer (async with) before asking for its redirect_uri")
        return f"http://127.0.0.1:{self._port}{self._path}"

    async def __aenter__(self) -> LoopbackAuthorizer:
        if self._listener is not None:  # kept by an interrupted wait: the same port, the same redirect
            return self
        try:
            listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=self._port)
        except OSError:  # the last port is taken now: any port will do (RFC 8252 §7.3 lets the port vary)
            listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self._listener = listener
        self._port = int(listener.extra(anyio.abc.SocketAttribute.local_port))
        self._closer = weakref.finalize(self, listener.extra(anyio.abc.SocketAttribute.raw_socket).close)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._listener is not None and self._waiting is None:
            await self._listener.aclose()
            self._listener = None
            if self._closer is not None:
                self._closer.detach()

    async def authorize(self, url: str, state: str) -> AuthorizationResponse:
        """Show ``url`` with its host and warnings, open the browser (unless told not to), and wait for the redirect
        carrying ``state`` on the loopback listener (:class:`~elicitor.AuthError` on an error or a timeout).

        A wait cancelled part-way keeps the listener open (the person's browser may be on its way back: the
        redirect waits in the listener's queue), and a call with the same ``state`` resumes it: the link is shown
        again, the browser is not opened a second time, and a redirect that arrived meanwhile ends the wait."""
        if self._listener is None:
            raise RuntimeError("enter the authorizer (async with) before authorize()")
        try:
            host = urlsplit(url).hostname or "?"
        except ValueError:
            raise AuthError(f"the authorization URL is not valid: {url[:200]!r}") from None
        t = self._lang._
        self._write(t("Sign in to continue, at {host}:", host=host))
        self._write(f"  {url}")
        for warning in url_warnings(url):
            self._write(f"  ! {self._lang.text(warning)}")
        again, self._waiting = self._waiting == state, state
        if self._open_browser and not again:
            opened = await anyio.to_thread.run_sync(webbrowser.open, url)
            self._write(t("Your browser should be open at that page.") if opened else t("Open that link in a browser."))
        else:
            self._write(t("Open that link in a browser."))
        if self.on_wait is not None:
            self.on_wait()
        outcome: list[AuthorizationResponse | AuthError] = []
        done = anyio.Event()

        async def handle(stream: anyio.abc.SocketStream) -> None:
            async with stream:
                with anyio.move_on_after(10):
                    result = await self._exchange(stream, state)
                    if result is not None and not done.is_set():
                        outcome.append(result)
                        done.set()

        try:
            with anyio.fail_after(self._timeout):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._listener.serve, handle)
                    await done.wait()
                    tg.cancel_scope.cancel()
        except TimeoutError:
            self._waiting = None
            raise AuthError(said(NO_SIGN_IN, seconds=f"{self._timeout:g}")) from None
        except Exception:
            self._waiting = None  # anything but a cancellation ends this sign-in
            raise
        self._waiting = None
        if isinstance(outcome[0], AuthError):
            raise outcome[0]
        self._write(self._lang._("You are signed in."))
        return outcome[0]

    async def _exchange(self, stream: anyio.abc.SocketStream, state: str) -> AuthorizationResponse | AuthError | None:
        """Read one request and answer it; the sign-in's result if it was the redirect, else ``None``."""
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_REQUEST)
        try:
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive(4096)
                    connection.receive_data(data)
                    continue
                break
        except (h11.RemoteProtocolError, anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            return None
        if not isinstance(event, h11.Request):
            return None
        target = event.target.decode("latin-1")
        try:
            parts = urlsplit(target)
        except ValueError:
            parts = urlsplit("/")  # not a path this listener answers: a 404 below
        query = {k: v[0] for k, v in parse_qs(parts.query).items() if v}
        result: AuthorizationResponse | AuthError | None = None
        t, e = self._lang._, html.escape
        if event.method != b"GET" or parts.path != self._path:
            status, title, text = 404, t("Not found"), e(t("This address only receives the sign-in."))
        elif query.get("state") != state:
            status, title = 400, t("Not this sign-in")
            text = e(t("This answer is not for the sign-in that is waiting."))
        elif "error" in query:
            detail = query.get("error_description", "")
            said = f"{query['error']} {detail}".strip()  # the authorization server's words, as sent
            status, title, text = 200, t("Sign-in refused"), f'<bdi dir="auto">{e(printable(said))}</bdi>'
            message = f"authorization refused: {query['error']}" + (f" ({detail})" if detail else "")
            result = AuthError(message, query["error"])
        elif not query.get("code"):
            status, title, text = 400, t("No code"), e(t("The answer has no authorization code."))
        else:
            status, title = 200, t("Signed in")
            text = e(t("You are signed in.") + " " + t("You can close this tab."))
            result = AuthorizationResponse(code=query["code"], state=state, iss=query.get("iss"))
        lang = self._lang
        body = _PAGE.format(lang=lang.tag, dir=lang.direction, title=e(title), text=text).encode()
        headers = [
            ("content-type", "text/html; charset=utf-8"),
            ("content-length", str(len(body))),
            ("cache-control", "no-store"),
            ("referrer-policy", "no-referrer"),
            ("connection", "close"),
        ]
        try:
            await stream.send(connection.send(h11.Response(status_code=status, headers=headers)) or b"")
            await stream.send(connection.send(h11.Data(data=body)) or b"")
            await stream.send(connection.send(h11.EndOfMessage()) or b"")
        except (anyio.BrokenResourceError, OSError, h11.LocalProtocolError):
            pass
        return result
