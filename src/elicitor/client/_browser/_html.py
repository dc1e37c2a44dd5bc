"""The pages themselves: HTML for a form, a yes/no question, a review, a URL consent, and the responses that carry
them with their security headers (a strict Content-Security-Policy, no referrer, no framing, no caching).

Everything a server wrote is escaped for the markup and its invisible or direction-changing characters shown as
visible escapes (:func:`~elicitor.client._present.printable`), so it reads as text and never acts.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any
from urllib.parse import urlsplit

from ..._exceptions import FieldError
from ...forms import BooleanField, EnumField, FormField, MultiEnumField, NumberField, StringField
from .._handlers import ElicitationRequest
from .._present import hint, identity_warnings, printable, server_name, show, yes_no
from .._url import UrlElicitationRequest
from ._pages import State

_INPUT_TYPES = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime-local"}
_HOST_SOURCE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)$")


def origin(url: str) -> str | None:
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


def form_page(request: ElicitationRequest, values: dict[str, Any], errors: tuple[FieldError, ...]) -> str:
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


def yes_no_page(request: ElicitationRequest) -> str:
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


def review_page(request: ElicitationRequest, draft: dict[str, Any]) -> str:
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


def url_page(request: UrlElicitationRequest, state: State) -> str:
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
    if origin(url) is not None:
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
SCRIPT = """(() => {
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


def document(title: str, body: str) -> bytes:
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


async def respond(
    send: Any, status: int, body: bytes, nonce: str | None = None, form_target: str | None = None
) -> None:
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *_security_headers(nonce, form_target),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def respond_json(send: Any, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + _security_headers()})
    await send({"type": "http.response.body", "body": body})


async def redirect(send: Any, location: str) -> None:
    """Send the new tab on to the URL the person agreed to open (no referrer: the token stays here)."""
    headers = [(b"location", location.encode("utf-8")), (b"content-length", b"0"), *_security_headers()]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
