"""The browser handler itself: the loopback web server's lifecycle, its routes, and the handler interface the
client calls (``__call__`` for forms, ``url`` and ``wait_done`` for URL mode)."""

from __future__ import annotations

import html
import secrets
import sys
import time
import webbrowser
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal
from urllib.parse import parse_qs

import anyio
import anyio.abc

from ..._exceptions import FieldError, InvalidAnswer
from ..._net import loopback_socket
from ..._outcomes import Accepted, Cancelled, Declined
from ...i18n import Language, available, chosen, language
from .._handlers import ElicitationOutcome, ElicitationRequest, OneAtATime
from .._present import asker, queue_text, spaced, yes_no
from .._url import UrlElicitationRequest
from ._forms import read_answer
from ._html import (
    SCRIPT,
    document,
    form_page,
    origin,
    page_language,
    redirect,
    respond,
    respond_json,
    review_page,
    url_page,
    yes_no_page,
)
from ._pages import MAX_PAGES, Page, beat_every

_MAX_BODY = 64 * 1024


class BrowserHandler:
    """Ask the person in their web browser. Use it as an async context manager (it runs a loopback web server)::

        async with BrowserHandler() as browser, Client.stdio(command, elicitation=browser) as client: ...

    Args:
        open_url: opens a page, returning whether it could (default :func:`webbrowser.open`); when it cannot, the
            link is printed (``write``) for the person to open.
        write: where to print links (default: stderr).
        grace: seconds a closed page has to come back (a reload) before its question becomes Cancel.
        url_mode: offer URL mode to servers (default ``True``): consent on a page, then the URL in a new tab.
        lang: the language of elicitor's words on the pages (``"zh"``, ``"ar"``, a
            :class:`~elicitor.i18n.Language`). By default each page follows the browser's ``Accept-Language``;
            either way every page has a switch to the others, and what the server wrote is shown as sent.
    """

    def __init__(
        self,
        open_url: Callable[[str], bool] | None = None,
        write: Callable[[str], None] | None = None,
        *,
        grace: float = 10.0,
        url_mode: bool = True,
        lang: str | Language | None = None,
    ) -> None:
        self._lang = language(lang) if lang is not None else chosen()  # else each page its browser's
        self._voice = self._lang or language()  # the terminal's lines ("open this page") in the environment's
        self._open = open_url or webbrowser.open
        self._write = write or (lambda text: print(text, file=sys.stderr, flush=True))
        self._grace = grace
        self._pages: dict[str, Page] = {}
        self._turns = OneAtATime()
        self.base = ""
        self.modes = frozenset({"form", "url"}) if url_mode else frozenset({"form"})

    @asynccontextmanager
    async def _serving(self) -> AsyncIterator[None]:
        import uvicorn

        sock = loopback_socket()
        self._host = f"127.0.0.1:{sock.getsockname()[1]}"
        self.base = f"http://{self._host}"
        server = uvicorn.Server(
            uvicorn.Config(self._app, log_level="warning", access_log=False, lifespan="off", interface="asgi3")
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: server.serve([sock]))
            while not server.started:
                await anyio.sleep(0.01)
            try:
                yield
            finally:
                server.should_exit = True
                for page in self._pages.values():
                    page.settle(Cancelled())
                    page.finish()
        sock.close()

    async def __aenter__(self) -> BrowserHandler:
        self._cm = self._serving()
        await self._cm.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._cm.__aexit__(None, None, None)

    # ---- the handler side --------------------------------------------------------------------------------------

    @property
    def waiting(self) -> int:
        """Questions queued behind the one on screen (each page shows the count)."""
        return self._turns.waiting

    async def __call__(self, request: ElicitationRequest) -> ElicitationOutcome:
        async with self._turns.turn():
            return await self._ask(request)

    async def _ask(self, request: ElicitationRequest) -> ElicitationOutcome:
        page = self._add("form", request)
        try:
            await self._show(page, url=False)
            await self._until(page.done, page)
            return page.outcome or Cancelled()
        finally:
            page.state = "finished"
            self._pages.pop(page.token, None)

    async def url(self, request: UrlElicitationRequest) -> ElicitationOutcome:
        """Show the URL on a consent page; ``Accepted(None)`` once the person chose to open it (in a new tab)."""
        async with self._turns.turn():
            return await self._ask_url(request)

    async def _ask_url(self, request: UrlElicitationRequest) -> ElicitationOutcome:
        page = self._add("url", request)
        kept = False
        try:
            await self._show(page, url=True)
            await self._until(page.done, page)
            outcome = page.outcome or Cancelled()
            kept = isinstance(outcome, Accepted)  # the same page carries "I'm done" for wait_done
            return outcome
        finally:
            if not kept:
                page.state = "finished"
                self._pages.pop(page.token, None)

    async def wait_done(self, request: UrlElicitationRequest) -> None:
        """Return when the person presses "I'm done" on the URL's page (or closes it)."""
        page = next((p for p in self._pages.values() if p.kind == "url" and p.request == request), None)
        if page is None:
            return
        try:
            await self._until(page.finished, page)
        finally:
            page.state = "finished"
            self._pages.pop(page.token, None)

    def _add(self, kind: Literal["form", "url"], request: ElicitationRequest | UrlElicitationRequest) -> Page:
        if not self.base:
            raise RuntimeError("enter the BrowserHandler (async with) before a client uses it")
        while len(self._pages) >= MAX_PAGES:
            oldest = next(iter(self._pages.values()))
            oldest.settle(Cancelled())
            oldest.finish()
            del self._pages[oldest.token]
        page = Page(kind, request, secrets.token_urlsafe(24))
        self._pages[page.token] = page
        return page

    async def _show(self, page: Page, *, url: bool) -> None:
        link = f"{self.base}/q/{page.token}"
        try:  # in a thread: some openers wait for the browser they start (a text browser, say)
            opened = bool(await anyio.to_thread.run_sync(self._open, link, abandon_on_cancel=True))
        except Exception:  # a broken opener must not lose the question
            opened = False
        t, server = self._voice._, asker(page.request.server, self._voice)
        if url:
            what = t("{server} asks you to open a web page", server=server)
        else:
            what = t("{server} asks a question", server=server)
        where = t("answer it in your browser ({url})", url=link) if opened else t("open {url}", url=link)
        self._write(f"{what}{t(': ')}{where}")

    async def _until(self, event: anyio.Event, page: Page) -> None:
        """Wait for ``event``; a page gone for longer than the grace period ends the wait as Cancel.

        No polling: the page's reports poke it, and between reports the wait sleeps until the moment the page
        would count as gone (for ever while it has not reported at all).
        """
        while not event.is_set():
            news = page.news
            gone_at = page.gone_at(self._grace)
            if gone_at is not None and time.monotonic() >= gone_at:
                page.settle(Cancelled())
                page.finish()
                return
            with anyio.move_on_after(gone_at - time.monotonic() if gone_at is not None else float("inf")):
                await news.wait()

    # ---- the web side ------------------------------------------------------------------------------------------

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope.get("headers") or [])
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        token, _, action = str(scope["path"]).removeprefix("/q/").partition("/")
        page = self._pages.get(token) if str(scope["path"]).startswith("/q/") else None
        wanted = (query.get("lang") or [""])[0]
        if page is not None and wanted in available():
            page.lang = language(wanted)  # the page's switch: kept for every later view of this question
        lang = page_language(query, headers, (page.lang if page is not None else None) or self._lang)
        t = lang._
        if headers.get(b"host", b"").decode("latin-1") != self._host:
            words = t("This page is served for 127.0.0.1 only.")
            await respond(send, 421, document(t("Wrong host"), _para(words), lang))
            return
        if action in ("beat", "gone") and scope["method"] == "POST":
            await self._signal(page, action, query, send, lang)
            return
        if page is None or action or page.state == "finished" or (page.kind == "form" and page.done.is_set()):
            words = t("This question is not waiting for an answer.")
            await respond(send, 404, document(t("Not found"), _para(words), lang))
            return
        page.left = None  # it is being looked at
        if scope["method"] == "GET":
            await self._render(send, 200, page, lang)
            return
        if scope["method"] != "POST":
            await respond(send, 405, document(t("Not allowed"), _para(t("Use the buttons on the page.")), lang))
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > _MAX_BODY:
                await respond(send, 413, document(t("Too large"), _para(t("That answer is too large.")), lang))
                return
            if not message.get("more_body"):
                break
        posted = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        action = (posted.get("_action") or [""])[0]
        if action in ("decline", "cancel") and not page.done.is_set():  # from either kind of page, at any step
            page.settle(Declined() if action == "decline" else Cancelled())
            if page.kind == "url":
                words = (
                    t("You declined; nothing was opened.")
                    if action == "decline"
                    else t("You cancelled; nothing was opened.")
                )
            else:
                words = t("You declined.") if action == "decline" else t("You cancelled.")
            await respond(send, 200, _finished(t("Done"), words, lang))
            return
        if page.kind == "url":
            await self._url_action(page, action, send, lang)
        else:
            await self._form_action(page, action, posted, send, lang)

    async def _signal(
        self, page: Page | None, action: str, query: dict[str, list[str]], send: Any, lang: Language
    ) -> None:
        """The page's script: ``beat`` (still open; answers the page's state) or ``gone`` (closing)."""
        instance = (query.get("page") or [""])[0][:64]
        if page is None:
            await respond_json(send, 404, {"state": "finished"})
            return
        now = time.monotonic()
        if action == "beat":
            page.latest, page.beat, page.left = instance, now, None
        elif instance == page.latest:  # a late goodbye from a page already replaced (a reload) does not count
            page.left = now
        page.poke()  # a wait re-reads when the page would count as gone
        await respond_json(send, 200, {"state": page.state, "waiting": queue_text(self._turns.waiting, lang)})

    async def _form_action(
        self, page: Page, action: str, posted: dict[str, list[str]], send: Any, lang: Language
    ) -> None:
        t = lang._
        request = page.request
        assert isinstance(request, ElicitationRequest)
        question = yes_no(request.form)
        if question is not None and action in ("yes", "no"):  # the answer is the reply: nothing to review
            page.settle(Accepted({question.name: action == "yes"}))
            words = t("You answered Yes.") if action == "yes" else t("You answered No.")
            await respond(send, 200, _finished(t("Sent"), words, lang))
            return
        if action == "send" and page.state == "reviewing":
            page.settle(Accepted(page.draft))
            await respond(send, 200, _finished(t("Sent"), t("Your answer was sent."), lang))
            return
        if action == "edit":
            page.state = "asking"
            await self._render(send, 200, page, lang, page.draft)
            return
        values, errors = read_answer(request, posted, lang)
        unread = {error.field for error in errors}
        try:
            draft = request.form.validate(request.form.with_defaults(values))
        except InvalidAnswer as exc:  # every field's problem at once, an unreadable one's said once
            errors += [error for error in exc.errors if error.field not in unread]
            order = {f.name: place for place, f in enumerate(request.form.fields)}
            errors.sort(key=lambda error: order.get(error.field or "", -1))  # listed as the fields stand on the page
        else:
            if not errors:
                page.draft = draft
                page.state = "reviewing"
                await self._render(send, 200, page, lang)
                return
        page.state = "asking"
        shown = {**values, **{name: posted[name][0] for name in unread if name and posted.get(name)}}
        await self._render(send, 422, page, lang, shown, tuple(errors))  # the errors, on the form as it was sent

    async def _url_action(self, page: Page, action: str, send: Any, lang: Language) -> None:
        request = page.request
        assert isinstance(request, UrlElicitationRequest)
        if action == "open" and origin(request.url) is not None:
            page.settle(Accepted(None))
            page.state = "opened"
            await redirect(send, request.url)
            return
        if action == "done" and page.state == "opened":
            page.finish()
            await respond(send, 200, _finished(lang._("Thank you"), lang._("Thank you."), lang))
            return
        await self._render(send, 200, page, lang)

    async def _render(
        self,
        send: Any,
        status: int,
        page: Page,
        lang: Language,
        values: dict[str, Any] | None = None,
        errors: tuple[FieldError, ...] = (),
    ) -> None:
        nonce = secrets.token_urlsafe(16)
        script = (
            f'<script nonce="{nonce}" data-base="/q/{page.token}" data-every="{beat_every(self._grace)}">'
            f"{SCRIPT}</script>"
        )
        request = page.request
        if isinstance(request, UrlElicitationRequest):
            body, extra = url_page(request, page.state, lang), origin(request.url)
        elif page.state == "reviewing":
            body, extra = review_page(request, page.draft, lang), None
        elif yes_no(request.form) is not None:
            body, extra = yes_no_page(request, lang), None
        else:
            if values is None:  # first sight: an earlier answer the client refused (with why), else the defaults
                values, errors = request.form.with_defaults(request.previous or {}), request.errors
            body, extra = form_page(request, values, errors, lang), None
        waiting = html.escape(queue_text(self._turns.waiting, lang))
        queue = f'<p class=queue data-waiting aria-live="polite">{waiting}</p>'
        title = lang._("{server} asks", server=asker(request.server, lang))
        page_html = document(title, queue + body + script, lang, switch=True)
        await respond(send, status, page_html, nonce, extra)


def _para(text: str) -> str:
    return f"<p>{html.escape(text)}</p>"


def _finished(title: str, words: str, lang: Language) -> bytes:
    """The page after the last step: what happened, and that the tab may close (announced as a status)."""
    closing = lang._("You can close this tab.")
    return document(title, f"<div role=status><p>{html.escape(spaced(words) + closing)}</p></div>", lang)
