"""A browser handler: each question becomes a page on 127.0.0.1, answered in the person's browser.

The page is served from a random loopback port under an unguessable per-question token (``/q/<token>``), with no
external assets: a strict Content-Security-Policy lets nothing load from anywhere, forms post only to the page
itself, and the one inline script carries a per-response nonce. Requests naming another Host are refused (DNS
rebinding).

A form page names the server that asks, marks required fields, pre-fills defaults, uses the browser's native
inputs (email, URL, date, number bounds, radio buttons and checkboxes showing titles), and offers Review, Decline
and Cancel; Review validates with the same validator the server uses and shows either the errors on the form or the
answer to check, with Send and Edit (client/elicitation "User Interaction Model": review before sending, decline and
cancel at any time).

A yes/no question (a form whose only field is a boolean, as ``ctx.confirm`` sends) is one page instead: Yes, No
(focused: Enter answers No), Decline and Cancel; the answer is the reply, with no review.

A URL page (client/elicitation "Safe URL Handling") shows the full URL with its host marked, every warning, and
nothing is fetched; "Open" posts the person's consent and only then redirects a new tab to the URL (no referrer).
The page then offers "I'm done" for the wait that follows.

Concurrent questions are shown one at a time; each page says how many more wait behind it.

The page's small script reports that it is still open. A page the person closes (or navigates away from) becomes
Cancel after a grace period, so the server does not wait for an answer nobody will give; a reload within the grace
period keeps the question. When the question ends elsewhere (the server cancelled it), the page says so. Without
JavaScript everything still works except those two signals.
"""

from __future__ import annotations

import html
import json
import re
import secrets
import socket
import sys
import time
import webbrowser
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc

from .._exceptions import FieldError, InvalidAnswer
from .._outcomes import Accepted, Cancelled, Declined
from ..forms import BooleanField, EnumField, FormField, MultiEnumField, NumberField, StringField
from ._handlers import ElicitationOutcome, ElicitationRequest, OneAtATime
from ._present import hint, identity_warnings, printable, queue_text, server_name, show, yes_no
from ._url import UrlElicitationRequest

_INPUT_TYPES = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime-local"}
_MAX_BODY = 64 * 1024
_MAX_PAGES = 64  # URL pages kept for the "I'm done" wait; the oldest go first
_STALE = 120.0  # a page whose script stops reporting for this long (a crashed or killed browser) is gone
_LOCAL = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$")
_ZONE = re.compile(r"^[+-]\d{2}:\d{2}$")
_HOST_SOURCE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)$")

State = Literal["asking", "reviewing", "opened", "finished"]


@dataclass(eq=False)
class _Page:
    kind: Literal["form", "url"]
    request: ElicitationRequest | UrlElicitationRequest
    token: str
    state: State = "asking"
    done: anyio.Event = field(default_factory=anyio.Event)  # the person answered (or the page is gone)
    finished: anyio.Event = field(default_factory=anyio.Event)  # URL: the person said they are done
    outcome: ElicitationOutcome | None = None
    draft: dict[str, Any] = field(default_factory=dict)  # a form answer under review
    latest: str = ""  # the newest page instance that reported in
    beat: float | None = None  # when it last did
    left: float | None = None  # when that instance said it was going away

    def settle(self, outcome: ElicitationOutcome) -> None:
        if not self.done.is_set():
            self.outcome = outcome
            self.done.set()

    def gone(self, now: float, grace: float) -> bool:
        """Has the person closed the page (or lost it) for longer than the grace period?"""
        if self.left is not None and now - self.left > grace:
            return True
        return self.beat is not None and now - self.beat > max(grace, _STALE)


class BrowserHandler:
    """Ask the person in their web browser. Use it as an async context manager (it runs a loopback web server)::

        async with BrowserHandler() as browser, Client.stdio(command, elicitation=browser) as client: ...

    Args:
        open_url: opens a page, returning whether it could (default :func:`webbrowser.open`); when it cannot, the
            link is printed (``write``) for the person to open.
        write: where to print links (default: stderr).
        grace: seconds a closed page has to come back (a reload) before its question becomes Cancel.
        url_mode: offer URL mode to servers (default ``True``): consent on a page, then the URL in a new tab.
    """

    def __init__(
        self,
        open_url: Callable[[str], bool] | None = None,
        write: Callable[[str], None] | None = None,
        *,
        grace: float = 10.0,
        url_mode: bool = True,
    ) -> None:
        self._open = open_url or webbrowser.open
        self._write = write or (lambda text: print(text, file=sys.stderr, flush=True))
        self._grace = grace
        self._pages: dict[str, _Page] = {}
        self._turns = OneAtATime()
        self.base = ""
        self.modes = frozenset({"form", "url"}) if url_mode else frozenset({"form"})

    @asynccontextmanager
    async def _serving(self) -> AsyncIterator[None]:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
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
                    page.finished.set()
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
            await self._show(page, "asks a question")
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
            await self._show(page, "asks you to open a web page")
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

    def _add(self, kind: Literal["form", "url"], request: ElicitationRequest | UrlElicitationRequest) -> _Page:
        if not self.base:
            raise RuntimeError("enter the BrowserHandler (async with) before a client uses it")
        while len(self._pages) >= _MAX_PAGES:
            oldest = next(iter(self._pages.values()))
            oldest.settle(Cancelled())
            oldest.finished.set()
            del self._pages[oldest.token]
        page = _Page(kind, request, secrets.token_urlsafe(24))
        self._pages[page.token] = page
        return page

    async def _show(self, page: _Page, what: str) -> None:
        url = f"{self.base}/q/{page.token}"
        try:  # in a thread: some openers wait for the browser they start (a text browser, say)
            opened = bool(await anyio.to_thread.run_sync(self._open, url, abandon_on_cancel=True))
        except Exception:  # a broken opener must not lose the question
            opened = False
        label = page.request.server_label
        self._write(f"{label} {what}: " + (f"answer it in your browser ({url})" if opened else f"open {url}"))

    async def _until(self, event: anyio.Event, page: _Page) -> None:
        """Wait for ``event``; a page gone for longer than the grace period ends the wait as Cancel."""
        tick = min(0.5, max(self._grace / 4, 0.05))
        while not event.is_set():
            with anyio.move_on_after(tick):
                await event.wait()
            if not event.is_set() and page.gone(time.monotonic(), self._grace):
                page.settle(Cancelled())
                page.finished.set()
                return

    # ---- the web side ------------------------------------------------------------------------------------------

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope.get("headers") or [])
        if headers.get(b"host", b"").decode("latin-1") != self._host:
            await _respond(send, 421, _page("Wrong host", "<p>This page is served for 127.0.0.1 only.</p>"))
            return
        token, _, action = str(scope["path"]).removeprefix("/q/").partition("/")
        page = self._pages.get(token) if str(scope["path"]).startswith("/q/") else None
        if action in ("beat", "gone") and scope["method"] == "POST":
            await self._signal(page, action, parse_qs(scope.get("query_string", b"").decode()), send)
            return
        if page is None or action or page.state == "finished" or (page.kind == "form" and page.done.is_set()):
            await _respond(send, 404, _page("Not found", "<p>This question is not waiting for an answer.</p>"))
            return
        page.left = None  # it is being looked at
        if scope["method"] == "GET":
            await self._render(send, 200, page)
            return
        if scope["method"] != "POST":
            await _respond(send, 405, _page("Not allowed", "<p>Use the buttons on the page.</p>"))
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > _MAX_BODY:
                await _respond(send, 413, _page("Too large", "<p>That answer is too large.</p>"))
                return
            if not message.get("more_body"):
                break
        posted = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        action = (posted.get("_action") or [""])[0]
        if action in ("decline", "cancel") and not page.done.is_set():  # from either kind of page, at any step
            page.settle(Declined() if action == "decline" else Cancelled())
            word = "declined" if action == "decline" else "cancelled"
            opened = "; nothing was opened" if page.kind == "url" else ""
            await _respond(send, 200, _page("Done", f"<p>You {word}{opened}. You can close this tab.</p>"))
            return
        if page.kind == "url":
            await self._url_action(page, action, send)
        else:
            await self._form_action(page, action, posted, send)

    async def _signal(self, page: _Page | None, action: str, query: dict[str, list[str]], send: Any) -> None:
        """The page's script: ``beat`` (still open; answers the page's state) or ``gone`` (closing)."""
        instance = (query.get("page") or [""])[0][:64]
        if page is None:
            await _respond_json(send, 404, {"state": "finished"})
            return
        now = time.monotonic()
        if action == "beat":
            page.latest, page.beat, page.left = instance, now, None
        elif instance == page.latest:  # a late goodbye from a page already replaced (a reload) does not count
            page.left = now
        await _respond_json(send, 200, {"state": page.state, "waiting": queue_text(self._turns.waiting)})

    async def _form_action(self, page: _Page, action: str, posted: dict[str, list[str]], send: Any) -> None:
        request = page.request
        assert isinstance(request, ElicitationRequest)
        question = yes_no(request.form)
        if question is not None and action in ("yes", "no"):  # the answer is the reply: nothing to review
            page.settle(Accepted({question.name: action == "yes"}))
            word = "Yes" if action == "yes" else "No"
            await _respond(send, 200, _page("Sent", f"<p>You answered {word}. You can close this tab.</p>"))
            return
        if action == "send" and page.state == "reviewing":
            page.settle(Accepted(page.draft))
            await _respond(send, 200, _page("Sent", "<p>Your answer was sent. You can close this tab.</p>"))
            return
        if action == "edit":
            page.state = "asking"
            await self._render(send, 200, page, page.draft)
            return
        values, errors = _read_answer(request, posted)
        if not errors:
            try:
                page.draft = request.form.validate(request.form.with_defaults(values))
            except InvalidAnswer as exc:
                errors = list(exc.errors)
            else:
                page.state = "reviewing"
                await self._render(send, 200, page)
                return
        page.state = "asking"
        await self._render(send, 422, page, values, tuple(errors))  # the errors, on the form as it was sent

    async def _url_action(self, page: _Page, action: str, send: Any) -> None:
        request = page.request
        assert isinstance(request, UrlElicitationRequest)
        if action == "open" and _origin(request.url) is not None:
            page.settle(Accepted(None))
            page.state = "opened"
            await _redirect(send, request.url)
            return
        if action == "done" and page.state == "opened":
            page.finished.set()
            await _respond(send, 200, _page("Thank you", "<p>Thank you. You can close this tab.</p>"))
            return
        await self._render(send, 200, page)

    async def _render(
        self,
        send: Any,
        status: int,
        page: _Page,
        values: dict[str, Any] | None = None,
        errors: tuple[FieldError, ...] = (),
    ) -> None:
        nonce = secrets.token_urlsafe(16)
        script = (
            f'<script nonce="{nonce}" data-base="/q/{page.token}" data-every="{_beat_every(self._grace)}">'
            f"{_SCRIPT}</script>"
        )
        request = page.request
        if isinstance(request, UrlElicitationRequest):
            body, extra = _url_page(request, page.state), _origin(request.url)
        elif page.state == "reviewing":
            body, extra = _review_page(request, page.draft), None
        elif yes_no(request.form) is not None:
            body, extra = _yes_no_page(request), None
        else:
            if values is None:  # first sight: an earlier answer the client refused (with why), else the defaults
                values, errors = request.form.with_defaults(request.previous or {}), request.errors
            body, extra = _form_page(request, values, errors), None
        queue = f"<p class=queue data-waiting>{html.escape(queue_text(self._turns.waiting))}</p>"
        await _respond(send, status, _page(f"{request.server_label} asks", queue + body + script), nonce, extra)


def _beat_every(grace: float) -> int:
    """How often the page reports in (ms): a few times within the grace period, at most every 5 seconds."""
    return int(min(5.0, max(grace / 3, 0.1)) * 1000)


def _origin(url: str) -> str | None:
    """The URL's origin as a CSP source (a form may redirect there), or ``None`` if it is no web address."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host:
        return None
    if ":" in host:
        host = f"[{host}]"
    if not _HOST_SOURCE.match(host):
        return None
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def _read_answer(request: ElicitationRequest, posted: dict[str, list[str]]) -> tuple[dict[str, Any], list[FieldError]]:
    """The posted form as typed values (what cannot be read becomes an error naming the field)."""
    values: dict[str, Any] = {}
    errors: list[FieldError] = []
    for f in request.form.fields:
        raw = [v for v in posted.get(f.name, []) if v != ""]
        if isinstance(f, MultiEnumField):
            if raw or f.required:
                values[f.name] = raw
        elif isinstance(f, BooleanField):
            values[f.name] = bool(raw)
        elif not raw:
            continue
        elif isinstance(f, NumberField):
            try:
                number = float(raw[0])
                values[f.name] = int(number) if f.integer and number.is_integer() else number
            except ValueError:
                errors.append(FieldError(f.name, f"{raw[0]!r} is not a number"))
        elif isinstance(f, StringField) and f.format == "date-time" and _LOCAL.match(raw[0]):
            # The browser's local date-time has no zone: the page's script sends the person's offset for that
            # moment; without it (no JavaScript) the time is read as UTC, as the hint says.
            zone = (posted.get(f"_zone.{f.name}") or [""])[0]
            seconds = raw[0] if len(raw[0]) > 16 else raw[0] + ":00"
            values[f.name] = seconds + (zone if _ZONE.match(zone) else "Z")
        else:
            values[f.name] = raw[0]
    return values, errors


def _text(text: str, *, newlines: bool = False) -> str:
    """Text from a server as HTML: escaped for the markup, and with what would act instead of being read (bidi
    overrides and isolates, zero-width and other invisible characters, controls) shown as visible escapes
    (:func:`printable`), so a name or label cannot reorder or hide what the page shows."""
    return html.escape(printable(text, newlines=newlines))


def _who(request: ElicitationRequest | UrlElicitationRequest, what: str) -> str:
    """Who asks (client/elicitation "User Interaction Model": make clear which server requests the information),
    with a warning when the name the server gives itself could pass for another's (:func:`identity_warnings`).
    The name sits in ``<bdi>``: right-to-left letters in it cannot reorder the words around it."""
    name = server_name(request.server)
    named = f"<small>server name: <bdi>{_text(name)}</bdi></small>" if name else ""
    warned = "".join(f"<li>{_text(w)}.</li>" for w in identity_warnings(request.server))
    warning = f"<div class=errors role=alert><p>⚠ Careful:</p><ul>{warned}</ul></div>" if warned else ""
    return (
        f"<p class=who><bdi>{_text(request.server_label)}</bdi> {what}</p>{named}{warning}"
        f"<p class=message>{_text(request.message, newlines=True)}</p>"
    )


_CLOSED = (
    '<div data-when="finished" hidden role=status><p class=closed>This question is no longer waiting for an answer. '
    "You can close this tab.</p></div>"
)


def _form_page(request: ElicitationRequest, values: dict[str, Any], errors: tuple[FieldError, ...]) -> str:
    parts = [_who(request, "asks:"), _CLOSED, '<div data-when="asking reviewing">']
    labels = {f.name: f.label for f in request.form.fields}
    if errors:
        items = "".join(
            f"<li>{_text(labels.get(error.field, error.field) + ': ' if error.field else '')}"
            f"{_text(error.message)}</li>"
            for error in errors
        )  # fmt: skip
        parts.append(f"<div class=errors role=alert><p>Please check:</p><ul>{items}</ul></div>")
    parts.append('<form method="post">')
    first_bad = next((f.name for f in request.form.fields if any(x.field == f.name for x in errors)), None)
    for i, f in enumerate(request.form.fields):
        mine = [x.message for x in errors if x.field == f.name]
        focus = f.name == first_bad if first_bad is not None else i == 0
        parts.append(_field(f, values.get(f.name), autofocus=focus, errors=mine))
    parts.append(
        '<p class=actions><button name="_action" value="review">Review</button> '
        '<button name="_action" value="decline" formnovalidate>Decline</button> '
        '<button name="_action" value="cancel" formnovalidate>Cancel</button></p></form></div>'
    )
    return "".join(parts)


def _yes_no_page(request: ElicitationRequest) -> str:
    """A yes/no question (:func:`yes_no`) on one page: Yes, No (focused, so Enter answers No), Decline, Cancel."""
    field = yes_no(request.form)
    assert field is not None
    about = f"<small>{_text(field.description, newlines=True)}</small>" if field.description else ""
    errors = "".join(f"<li>{_text(str(error))}</li>" for error in request.errors)
    shown = f"<div class=errors role=alert><p>Please check:</p><ul>{errors}</ul></div>" if errors else ""
    return (
        f'{_who(request, "asks:")}{_CLOSED}<div data-when="asking reviewing">{shown}'
        f'<form method="post"><p class=question>{_text(field.label.rstrip("?"))}?</p>{about}<p class=actions>'
        '<button name="_action" value="yes">Yes</button> '
        '<button name="_action" value="no" autofocus>No</button> '
        '<button name="_action" value="decline">Decline</button> '
        '<button name="_action" value="cancel">Cancel</button></p></form></div>'
    )


def _review_page(request: ElicitationRequest, draft: dict[str, Any]) -> str:
    rows = "".join(
        f"<dt>{_text(f.label)}</dt><dd>{_text(show(f, draft.get(f.name)))}</dd>" for f in request.form.fields
    )  # fmt: skip
    return (
        f'{_who(request, "asks:")}{_CLOSED}<div data-when="asking reviewing"><h1>Review your answer</h1>'
        f'<dl>{rows}</dl><form method="post"><p class=actions>'
        '<button name="_action" value="send" autofocus>Send</button> '
        '<button name="_action" value="edit">Edit</button> '
        '<button name="_action" value="decline">Decline</button> '
        '<button name="_action" value="cancel">Cancel</button></p></form></div>'
    )


def _url_page(request: UrlElicitationRequest, state: State) -> str:
    e = _text
    url, host, span = request.url, request.host, request.host_span
    shown = (
        e(url) if span is None else f"{e(url[: span[0]])}<mark>{e(url[span[0] : span[1]])}</mark>{e(url[span[1] :])}"
    )
    warnings = "".join(f"<li>{e(w)}</li>" for w in request.warnings)
    parts = [
        _who(request, "asks you to open a web page:"),
        f'<div data-when="asking"{"" if state == "asking" else " hidden"}><p class=url><code>{shown}</code></p>',
        f"<p>Host: <mark>{e(host or '(none)')}</mark></p>",
        f"<div class=errors role=alert><p>Careful:</p><ul>{warnings}</ul></div>" if warnings else "",
        "<p>Nothing has been opened or fetched.</p><form method=post>",
    ]
    if _origin(url) is not None:
        parts.append('<button name="_action" value="open" formtarget="_blank">Open the page in a new tab</button> ')
    else:
        parts.append("<p>This is not a web address, so it cannot be opened from here.</p>")
    parts.append(
        '<button name="_action" value="decline" autofocus>Decline</button> '
        '<button name="_action" value="cancel">Cancel</button></form></div>'
    )
    hidden = "" if state == "opened" else " hidden"
    parts.append(
        f'<div data-when="opened"{hidden}><p>When you have finished on that page:</p><form method=post>'
        '<button name="_action" value="done">I\'m done</button></form></div>'
    )
    parts.append(_CLOSED)
    return "".join(parts)


def _field(f: FormField, value: Any, *, autofocus: bool = False, errors: list[str] | None = None) -> str:
    """One field: label, required mark, description and hints, its errors (linked for screen readers), input."""
    e = html.escape
    name = e(f.name)
    mark = " <span class=req>(required)</span>" if f.required else ""
    words = "; ".join(_browser_hint(f))
    notes = "".join(f"<small>{_text(text)}</small>" for text in (f.description, words) if text)
    notes = f'<span id="h-{name}">{notes}</span>' if notes else ""
    if errors:
        notes += f'<small class=error id="e-{name}">✗ {_text("; ".join(errors))}</small>'
    described = " ".join(x for x in (f"h-{name}" if words or f.description else "", f"e-{name}" if errors else "") if x)
    required = " required" if f.required else ""
    focus = " autofocus" if autofocus else ""
    focus += f' aria-describedby="{described}"' if described else ""
    focus += ' aria-invalid="true"' if errors else ""
    if isinstance(f, BooleanField):
        checked = " checked" if value else ""
        return (
            f'<p><label><input type=checkbox name="{name}" value="true"{checked}{focus}> {_text(f.label)}</label>'
            f"{notes}</p>"
        )
    if isinstance(f, EnumField | MultiEnumField):
        chosen = set(value or []) if isinstance(f, MultiEnumField) else {value}
        kind = "checkbox" if isinstance(f, MultiEnumField) else "radio"
        options = "".join(
            f'<label><input type={kind} name="{name}" value="{e(o.value)}"'
            f"{' checked' if o.value in chosen else ''}{required if kind == 'radio' else ''}"
            f"{focus if i == 0 else ''}> {_text(o.label)}</label>"
            for i, o in enumerate(f.options)
        )
        described_by = f' aria-describedby="{described}"' if described else ""
        return f"<fieldset{described_by}><legend>{_text(f.label)}{mark}</legend>{notes}{options}</fieldset>"
    attrs = f' name="{name}" id="f-{name}"{required}{focus}'
    if isinstance(f, NumberField):
        step = "1" if f.integer else "any"
        attrs += f' type=number step="{step}"'
        attrs += f' min="{f.minimum:g}"' if f.minimum is not None else ""
        attrs += f' max="{f.maximum:g}"' if f.maximum is not None else ""
    elif isinstance(f, StringField):
        attrs += f' type="{_INPUT_TYPES.get(f.format or "", "text")}"'
        attrs += f' minlength="{f.min_length}"' if f.min_length else ""
        attrs += f' maxlength="{f.max_length}"' if f.max_length is not None else ""
    shown = "" if value is None else str(value)
    zone = ""
    if isinstance(f, StringField) and f.format == "date-time":
        shown = shown[:19] if shown else ""
        attrs += ' step="1" data-local-time'  # the script adds the person's offset; see _read_answer
        zone = f'<input type=hidden name="_zone.{name}" value="">'
    return f'<p><label for="f-{name}">{_text(f.label)}{mark}</label>{notes}<input{attrs} value="{e(shown)}">{zone}</p>'


def _browser_hint(f: FormField) -> list[str]:
    """The schema's hints, less what the browser's own date pickers show; date-times are read as UTC."""
    words = hint(f)
    if isinstance(f, StringField) and f.format == "date":
        return words[1:]
    if isinstance(f, StringField) and f.format == "date-time":
        return ["a date and time, in UTC (your own time zone when the page's script runs)", *words[1:]]
    return words


# Reports that the page is open, shows what the handler says of the question, and says goodbye when it goes.
_SCRIPT = """(() => {
const s = document.currentScript, base = s.dataset.base, every = +s.dataset.every;
const id = Math.random().toString(36).slice(2) + Date.now().toString(36);
const show = (state) => {
  for (const el of document.querySelectorAll("[data-when]")) el.hidden = !el.dataset.when.split(" ").includes(state);
  if (state === "finished") clearInterval(timer);
};
const queue = document.querySelector("[data-waiting]");
const beat = () => fetch(base + "/beat?page=" + id, {method: "POST", cache: "no-store"})
  .then((r) => r.json()).then((j) => { show(j.state); if (queue) queue.textContent = j.waiting || ""; })
  .catch(() => {});
const timer = setInterval(beat, every);
beat();
addEventListener("pagehide", () => navigator.sendBeacon(base + "/gone?page=" + id));
const two = (n) => String(n).padStart(2, "0");
const offset = (value) => {
  const minutes = -new Date(value).getTimezoneOffset(), a = Math.abs(minutes);
  return (minutes < 0 ? "-" : "+") + two(Math.floor(a / 60)) + ":" + two(a % 60);
};
for (const input of document.querySelectorAll("[data-local-time]")) {
  const zone = input.form.elements["_zone." + input.name];
  const update = () => { zone.value = input.value ? offset(input.value) : ""; };
  input.addEventListener("input", update);
  update();
  for (const note of document.querySelectorAll("#h-" + CSS.escape(input.name) + " small")) {
    note.textContent = note.textContent.replace("in UTC (your own time zone when the page's script runs)",
      "in your time zone (UTC" + offset(input.value || Date.now()) + ")");
  }
}
})();"""

_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:34em;margin:1.5em auto;padding:0 1em;line-height:1.4}"
    "label{display:block;margin:.2em 0}input:not([type=checkbox]):not([type=radio]){width:100%;padding:.4em;"
    "font-size:1em;box-sizing:border-box}small{display:block;color:#555}.req{color:#a00;font-size:.85em}"
    ".errors{border:2px solid #a00;padding:0 1em;margin:1em 0}.error{color:#a00;font-weight:bold}"
    ".who{font-weight:bold}.question{font-weight:bold;margin-bottom:.2em}.message{font-size:1.15em;white-space:pre-line}"
    "fieldset{margin:1em 0}button{font-size:1em;padding:.5em 1em;margin:.2em 0}"
    "button:focus,input:focus{outline:3px solid #36c}h1{font-size:1.2em}dt{font-weight:bold}dd{margin:0 0 .6em}"
    ".url code{word-break:break-all;font-size:1.05em}.queue{font-style:italic;color:#555}"
    "mark{background:#fe6;font-weight:bold}"
)


def _page(title: str, body: str) -> bytes:
    return (
        '<!doctype html><html lang="en"><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style><body>{body}</body></html>"
    ).encode()


def _security_headers(nonce: str | None = None, form_target: str | None = None) -> list[tuple[bytes, bytes]]:
    script = f"; script-src 'nonce-{nonce}'; connect-src 'self'" if nonce else ""
    forms = "'self'" + (f" {form_target}" if form_target else "")
    csp = f"default-src 'none'; style-src 'unsafe-inline'; form-action {forms}{script}; base-uri 'none'"
    return [
        (b"content-security-policy", csp.encode()),
        (b"cache-control", b"no-store"),
        (b"referrer-policy", b"no-referrer"),
        (b"x-frame-options", b"DENY"),
        (b"x-content-type-options", b"nosniff"),
    ]


async def _respond(
    send: Any, status: int, body: bytes, nonce: str | None = None, form_target: str | None = None
) -> None:
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *_security_headers(nonce, form_target),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _respond_json(send: Any, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + _security_headers()})
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Any, location: str) -> None:
    """Send the new tab on to the URL the person agreed to open (no referrer: the token stays here)."""
    headers = [(b"location", location.encode("utf-8")), (b"content-length", b"0"), *_security_headers()]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
