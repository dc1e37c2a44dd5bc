"""A browser handler: each question becomes a page on 127.0.0.1, answered in the person's browser.

The page is served from a random loopback port under an unguessable per-question token, with no external assets
(a strict Content-Security-Policy: nothing loads from anywhere, forms post only to the page itself). It names the
server that asks, marks required fields, pre-fills defaults, uses the browser's native inputs (email, URL, date,
number bounds, checkboxes for multi-select), validates the answer with the same validator the server uses and shows
the errors on the page, and offers Submit, Decline and Cancel. The answer goes back to the waiting handler.
"""

from __future__ import annotations

import html
import secrets
import socket
import sys
import webbrowser
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import anyio
import anyio.abc

from .._exceptions import InvalidAnswer
from .._outcomes import Accepted, Cancelled, Declined
from ..forms import BooleanField, EnumField, FormField, MultiEnumField, NumberField, StringField
from ._handlers import ElicitationOutcome, ElicitationRequest

_INPUT_TYPES = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime-local"}
_MAX_BODY = 64 * 1024


@dataclass
class _Pending:
    request: ElicitationRequest
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: ElicitationOutcome | None = None


class BrowserHandler:
    """Ask the person in their web browser. Use it as an async context manager (it runs a loopback web server)::

        async with BrowserHandler() as browser, Client.stdio(command, elicitation=browser) as client: ...

    Args:
        open_url: opens a page, returning whether it could (default :func:`webbrowser.open`); when it cannot, the
            link is printed (``write``) for the person to open.
        write: where to print links (default: stderr).
    """

    modes = frozenset({"form"})

    def __init__(
        self, open_url: Callable[[str], bool] | None = None, write: Callable[[str], None] | None = None
    ) -> None:
        self._open = open_url or webbrowser.open
        self._write = write or (lambda text: print(text, file=sys.stderr, flush=True))
        self._pending: dict[str, _Pending] = {}
        self.base = ""

    @asynccontextmanager
    async def _serving(self) -> AsyncIterator[None]:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
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
                for pending in self._pending.values():
                    pending.outcome = Cancelled()
                    pending.done.set()
        sock.close()

    async def __aenter__(self) -> BrowserHandler:
        self._cm = self._serving()
        await self._cm.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._cm.__aexit__(None, None, None)

    async def __call__(self, request: ElicitationRequest) -> ElicitationOutcome:
        if not self.base:
            raise RuntimeError("enter the BrowserHandler (async with) before a client uses it")
        token = secrets.token_urlsafe(24)
        pending = self._pending[token] = _Pending(request)
        url = f"{self.base}/form/{token}"
        try:
            opened = False
            try:
                opened = self._open(url)
            except Exception:  # a broken opener must not lose the question
                opened = False
            label = request.server_label
            self._write(
                f"{label} asks a question: " + (f"answer it in your browser ({url})" if opened else f"open {url}")
            )
            await pending.done.wait()
            return pending.outcome or Cancelled()
        finally:
            del self._pending[token]

    # ---- the web side ------------------------------------------------------------------------------------------

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path = str(scope["path"])
        pending = self._pending.get(path.removeprefix("/form/")) if path.startswith("/form/") else None
        if pending is None or pending.done.is_set():
            await _respond(send, 404, _page("Not found", "<p>This question is not waiting for an answer.</p>"))
            return
        if scope["method"] == "GET":
            await _respond(send, 200, _render(pending.request, pending.request.form.with_defaults({}), []))
            return
        if scope["method"] != "POST":
            await _respond(send, 405, _page("Not allowed", "<p>Use the form.</p>"))
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
        action = (posted.get("_action") or ["submit"])[0]
        if action in ("decline", "cancel"):
            pending.outcome = Declined() if action == "decline" else Cancelled()
            pending.done.set()
            word = "declined" if action == "decline" else "cancelled"
            await _respond(send, 200, _page("Done", f"<p>You {word}. You can close this tab.</p>"))
            return
        values, errors = _read_answer(pending.request, posted)
        if not errors:
            try:
                data = pending.request.form.validate(pending.request.form.with_defaults(values))
            except InvalidAnswer as exc:
                errors = [str(error) for error in exc.errors]
            else:
                pending.outcome = Accepted(data)
                pending.done.set()
                await _respond(send, 200, _page("Sent", "<p>Your answer was sent. You can close this tab.</p>"))
                return
        await _respond(send, 422, _render(pending.request, values, errors))


def _read_answer(request: ElicitationRequest, posted: dict[str, list[str]]) -> tuple[dict[str, Any], list[str]]:
    """The posted form as typed values (what cannot be read becomes an error naming the field)."""
    values: dict[str, Any] = {}
    errors: list[str] = []
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
                errors.append(f"{f.label}: {raw[0]!r} is not a number")
        elif isinstance(f, StringField) and f.format == "date-time" and len(raw[0]) == 16:
            values[f.name] = raw[0] + ":00Z"  # the browser's local date-time has no seconds or zone
        else:
            values[f.name] = raw[0]
    return values, errors


def _render(request: ElicitationRequest, values: dict[str, Any], errors: list[str]) -> bytes:
    e = html.escape
    parts = [f"<p class=who>{e(request.server_label)} asks:</p><p class=message>{e(request.message)}</p>"]
    if errors:
        items = "".join(f"<li>{e(error)}</li>" for error in errors)
        parts.append(f"<div class=errors role=alert><p>Please check:</p><ul>{items}</ul></div>")
    parts.append('<form method="post">')
    for f in request.form.fields:
        parts.append(_field(f, values.get(f.name)))
    parts.append(
        '<p class=actions><button name="_action" value="submit">Submit</button> '
        '<button name="_action" value="decline" formnovalidate>Decline</button> '
        '<button name="_action" value="cancel" formnovalidate>Cancel</button></p></form>'
    )
    return _page(f"{request.server_label} asks", "".join(parts))


def _field(f: FormField, value: Any) -> str:
    e = html.escape
    name = e(f.name)
    mark = " <span class=req>(required)</span>" if f.required else ""
    help_text = f"<small>{e(f.description)}</small>" if f.description else ""
    required = " required" if f.required else ""
    if isinstance(f, BooleanField):
        checked = " checked" if value else ""
        return (
            f'<p><label><input type=checkbox name="{name}" value="true"{checked}> {e(f.label)}</label>{help_text}</p>'
        )
    if isinstance(f, EnumField | MultiEnumField):
        chosen = set(value or []) if isinstance(f, MultiEnumField) else {value}
        kind = "checkbox" if isinstance(f, MultiEnumField) else "radio"
        limits = ""
        if isinstance(f, MultiEnumField) and (f.min_items or f.max_items):
            limits = f"<small>choose {f.min_items or 0} to {f.max_items if f.max_items is not None else 'any'}</small>"
        options = "".join(
            f'<label><input type={kind} name="{name}" value="{e(o.value)}"'
            f"{' checked' if o.value in chosen else ''}{required if kind == 'radio' else ''}> {e(o.label)}</label><br>"
            for o in f.options
        )
        return f"<fieldset><legend>{e(f.label)}{mark}</legend>{help_text}{limits}{options}</fieldset>"
    attrs = f' name="{name}" id="f-{name}"{required}'
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
    if isinstance(f, StringField) and f.format == "date-time" and shown:
        shown = shown[:16]
    return f'<p><label for="f-{name}">{e(f.label)}{mark}</label>{help_text}<input{attrs} value="{e(shown)}"></p>'


_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:34em;margin:1.5em auto;padding:0 1em;line-height:1.4}"
    "label{display:block}input:not([type=checkbox]):not([type=radio]){width:100%;padding:.4em;font-size:1em}"
    "small{display:block;color:#555}.req{color:#a00;font-size:.85em}.errors{border:2px solid #a00;padding:0 1em}"
    ".who{font-weight:bold}.message{font-size:1.15em}fieldset{margin:1em 0}button{font-size:1em;padding:.5em 1em}"
    "button:focus,input:focus{outline:3px solid #36c}"
)


def _page(title: str, body: str) -> bytes:
    return (
        '<!doctype html><html lang="en"><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style><body>{body}</body></html>"
    ).encode()


async def _respond(send: Any, status: int, body: bytes) -> None:
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"content-security-policy", b"default-src 'none'; style-src 'unsafe-inline'; form-action 'self'"),
        (b"cache-control", b"no-store"),
        (b"referrer-policy", b"no-referrer"),
        (b"x-frame-options", b"DENY"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
