"""The pages themselves: HTML for a form, a yes/no question, a review, a URL consent, and the responses that carry
them with their security headers (a strict Content-Security-Policy, no referrer, no framing, no caching).

Everything a server wrote is escaped for the markup and its invisible or direction-changing characters shown as
visible escapes (:func:`~elicitor.client._present.printable`), so it reads as text and never acts. It is shown as
sent (never translated) with its direction isolated: ``<bdi>`` inline, ``dir="auto"`` for blocks, so a
right-to-left title cannot reorder elicitor's words and a left-to-right one keeps its order on an Arabic page.
Elicitor's own words come from the catalogs in the page's language (``<html lang dir>``), which the person can
switch on every page.

WCAG 2.2 AA, by construction: every control has a label (the server's title) and a description tied with
``aria-describedby`` (required, description, hints, errors); errors are listed in an alert (announced) with the
first invalid field focused; everything works from the keyboard with a visible focus ring; nothing is said by
colour alone (✗ and words for errors, "(required)" in words); contrasts are at least 4.5:1; the layout reflows
at 320 CSS pixels (400 % zoom) and nothing moves.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from ..._exceptions import FieldError
from ...forms import BooleanField, EnumField, FormField, MultiEnumField, NumberField, StringField
from ...i18n import ENGLISH, Language, available, language
from .._handlers import ElicitationRequest
from .._present import asker, error_text, hint, identity_warnings, printable, server_name, show, spaced, yes_no
from .._url import UrlElicitationRequest
from ._pages import State

_INPUT_TYPES = {"email": 'text" inputmode="email', "uri": "url", "date": "date", "date-time": "datetime-local"}
"""The input for each string format. An email address is a text input with the email keyboard: Chromium's
``type=email`` refuses a local part in Chinese (``李雷@例子.中国``), which the shared validator and the terminal
accept, and sends a Chinese domain as Punycode (``xn--fiqs8s``), which the review would show the person instead
of what they typed."""
_HOST_SOURCE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)$")


def origin(url: str) -> str | None:
    """The URL's origin as a CSP source (a form may redirect there), or ``None`` if it is no web address. A host
    written in Chinese (``銀行.台灣``) is a web address: its source is its ASCII (IDNA) form, as the redirect's."""
    sent = web_address(url)
    if sent is None:
        return None
    parts = urlsplit(sent)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if not _HOST_SOURCE.match(host):
        return None
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port is not None else "")


def web_address(url: str) -> str | None:
    """``url`` as a browser sends it (``None`` if it is no http(s) address): the host in ASCII (IDNA, Punycode),
    what else is outside ASCII percent-encoded as UTF-8, what is already escaped kept. A ``Location`` header and a
    CSP source are ASCII; ``https://銀行.台灣/付款`` is the address ``https://xn--...`` a browser would open."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host:
        return None
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
        user, at, _ = parts.netloc.rpartition("@")
        netloc = f"{quote(user, safe=_URL_SAFE)}{at}{host}" + (f":{port}" if port is not None else "")
    else:
        netloc = quote(parts.netloc, safe=_URL_SAFE)
    path, query, fragment = (quote(part, safe=_URL_SAFE) for part in (parts.path, parts.query, parts.fragment))
    return urlunsplit((parts.scheme, netloc, path, query, fragment))


_URL_SAFE = "!#$%&'()*+,/:;=?@[]~"
"""What a URL already holds that stays as it is when the rest is percent-encoded (reserved signs, escapes)."""


def _text(text: str, *, newlines: bool = False) -> str:
    """Text from a server as HTML: escaped for the markup, and with what would act instead of being read (bidi
    overrides and isolates, zero-width and other invisible characters, controls) shown as visible escapes
    (:func:`printable`), so a name or label cannot reorder or hide what the page shows."""
    return html.escape(printable(text, newlines=newlines))


def _bidi(text: str) -> str:
    """A server's words inline: escaped, shown as sent, in a ``<bdi>`` (isolated, direction from its own letters)."""
    return f"<bdi>{_text(text)}</bdi>"


def _who(request: ElicitationRequest | UrlElicitationRequest, lang: Language, *, url: bool = False) -> str:
    """Who asks (client/elicitation "User Interaction Model": make clear which server requests the information),
    with a warning when the name the server gives itself could pass for another's (:func:`identity_warnings`).
    The name sits in ``<bdi>``: right-to-left letters in it cannot reorder the words around it; the message is a
    block of its own with ``dir="auto"``."""
    t = lang._
    name = server_name(request.server)
    named = "<small>" + t("server name: {name}", name=_bidi(name)) + "</small>" if name else ""
    warned = "".join(f"<li>{html.escape(lang.text(w))}.</li>" for w in identity_warnings(request.server))
    careful = html.escape(t("⚠ Careful:"))
    warning = f"<div class=errors role=alert><p>{careful}</p><ul>{warned}</ul></div>" if warned else ""
    who = _bidi(asker(request.server, lang))
    says = t("{server} asks you to open a web page:", server=who) if url else t("{server} asks:", server=who)
    return (
        f"<p class=who>{says}</p>{named}{warning}"
        f'<p class=message dir="auto">{_text(request.message, newlines=True)}</p>'
    )


def _closed(lang: Language) -> str:
    words = lang._("This question is no longer waiting for an answer. You can close this tab.")
    return f'<div data-when="finished" hidden role=status><p class=closed>{html.escape(words)}</p></div>'


def _button(action: str, words: str, extra: str = "") -> str:
    return f'<button name="_action" value="{action}"{extra}>{html.escape(words)}</button> '


def _errors(items: list[str], lang: Language) -> str:
    """The errors of an answer, announced when the page shows them (``role=alert``), each with its field."""
    listed = "".join(f"<li>{item}</li>" for item in items)
    check = html.escape(lang._("Please check:"))
    return f"<div class=errors role=alert><p>✗ {check}</p><ul>{listed}</ul></div>"


def form_page(
    request: ElicitationRequest, values: dict[str, Any], errors: tuple[FieldError, ...], lang: Language = ENGLISH
) -> str:
    t = lang._
    parts = [_who(request, lang), _closed(lang), '<div data-when="asking reviewing">']
    labels = {f.name: f.label for f in request.form.fields}
    colon = html.escape(t(": "))
    if errors:
        items = [
            (f"{_bidi(labels.get(error.field, error.field))}{colon}" if error.field else "")
            + html.escape(error_text(error, lang))
            for error in errors
        ]
        parts.append(_errors(items, lang))
    # novalidate: the browser's own checks speak its interface's language in bubbles of its own; the shared
    # validator says the same things in the person's language, in the page, next to each field.
    parts.append('<form method="post" novalidate>')
    first_bad = next((f.name for f in request.form.fields if any(x.field == f.name for x in errors)), None)
    for i, f in enumerate(request.form.fields):
        mine = [error_text(x, lang) for x in errors if x.field == f.name]
        focus = f.name == first_bad if first_bad is not None else i == 0
        parts.append(_field(f, values.get(f.name), lang, autofocus=focus, errors=mine))
    parts.append(
        "<p class=actions>"
        + _button("review", t("Review"))
        + _button("decline", t("Decline"), " formnovalidate")
        + _button("cancel", t("Cancel"), " formnovalidate")
        + "</p></form></div>"
    )
    return "".join(parts)


def yes_no_page(request: ElicitationRequest, lang: Language = ENGLISH) -> str:
    """A yes/no question (:func:`yes_no`) on one page: Yes, No (focused, so Enter answers No), Decline, Cancel."""
    t = lang._
    field = yes_no(request.form)
    assert field is not None
    about = f'<small dir="auto">{_text(field.description, newlines=True)}</small>' if field.description else ""
    items = [html.escape(error_text(error, lang)) for error in request.errors]
    shown = _errors(items, lang) if items else ""
    return (
        f'{_who(request, lang)}{_closed(lang)}<div data-when="asking reviewing">{shown}'
        f'<form method="post"><p class=question dir="auto">{_text(field.label.rstrip("?"))}?</p>{about}'
        "<p class=actions>"
        + _button("yes", t("Yes"))
        + _button("no", t("No"), " autofocus")
        + _button("decline", t("Decline"))
        + _button("cancel", t("Cancel"))
        + "</p></form></div>"
    )


def review_page(request: ElicitationRequest, draft: dict[str, Any], lang: Language = ENGLISH) -> str:
    t = lang._
    rows = "".join(
        f'<dt dir="auto">{_text(f.label)}</dt><dd dir="auto">{html.escape(show(f, draft.get(f.name), lang))}</dd>'
        for f in request.form.fields
    )
    return (
        f'{_who(request, lang)}{_closed(lang)}<div data-when="asking reviewing">'
        "<h1>" + html.escape(t("Review your answer")) + "</h1>"
        f'<dl>{rows}</dl><form method="post"><p class=actions>'
        + _button("send", t("Send"), " autofocus")
        + _button("edit", t("Edit"))
        + _button("decline", t("Decline"))
        + _button("cancel", t("Cancel"))
        + "</p></form></div>"
    )


def url_page(request: UrlElicitationRequest, state: State, lang: Language = ENGLISH) -> str:
    e, t = _text, lang._
    url, host, span = request.url, request.host, request.host_span
    shown = (
        e(url) if span is None else f"{e(url[: span[0]])}<mark>{e(url[span[0] : span[1]])}</mark>{e(url[span[1] :])}"
    )
    warnings = "".join(f"<li>{html.escape(lang.text(w))}</li>" for w in request.warnings)
    host_is, careful, none = html.escape(t("Host:")), html.escape(t("⚠ Careful:")), html.escape(t("(none)"))
    nothing = html.escape(t("Nothing has been opened or fetched."))
    parts = [
        _who(request, lang, url=True),
        f'<div data-when="asking"{"" if state == "asking" else " hidden"}>'
        f'<p class=url dir="ltr"><code>{shown}</code></p>',
        f'<p>{spaced(host_is)}<mark dir="ltr">{e(host) if host else none}</mark></p>',
        f"<div class=errors role=alert><p>{careful}</p><ul>{warnings}</ul></div>" if warnings else "",
        f"<p>{nothing}</p><form method=post>",
    ]
    if origin(url) is not None:
        parts.append(_button("open", t("Open the page in a new tab"), ' formtarget="_blank"'))
    else:
        parts.append("<p>" + html.escape(t("This is not a web address, so it cannot be opened from here.")) + "</p>")
    parts.append(_button("decline", t("Decline"), " autofocus") + _button("cancel", t("Cancel")) + "</form></div>")
    hidden = "" if state == "opened" else " hidden"
    finished, done = html.escape(t("When you have finished on that page:")), _button("done", t("I'm done"))
    parts.append(f'<div data-when="opened"{hidden}><p>{finished}</p><form method=post>{done}</form></div>')
    parts.append(_closed(lang))
    return "".join(parts)


def _field(
    f: FormField, value: Any, lang: Language, *, autofocus: bool = False, errors: list[str] | None = None
) -> str:
    """One field: label, required mark, description and hints, its errors (linked for screen readers), input."""
    e = html.escape
    name = e(f.name)
    required = lang._("(required)")
    mark = spaced("", required) + "<span class=req>" + e(required) + "</span>" if f.required else ""
    words = lang._("; ").join(_browser_hint(f, lang))
    notes = f'<small dir="auto">{_text(f.description)}</small>' if f.description else ""
    if isinstance(f, StringField) and f.format == "date-time":
        local = lang._("a date and time, in your time zone (UTC{offset})", offset="{offset}")
        utc = lang._("a date and time, in UTC (your own time zone when the page's script runs)")
        notes += f'<small data-zone="{e(local)}">{e(utc)}</small>'
    if words:
        notes += f"<small>{e(words)}</small>"
    notes = f'<span id="h-{name}">{notes}</span>' if notes else ""
    if errors:
        listed = e(lang._("; ").join(errors))
        notes += f'<small class=error id="e-{name}">✗ {listed}</small>'
    described = " ".join(x for x in (f"h-{name}" if words or f.description else "", f"e-{name}" if errors else "") if x)
    required = " required" if f.required else ""
    focus = " autofocus" if autofocus else ""
    focus += f' aria-describedby="{described}"' if described else ""
    focus += ' aria-invalid="true"' if errors else ""
    if isinstance(f, BooleanField):
        checked = " checked" if value else ""
        return (
            f'<p><label><input type=checkbox name="{name}" value="true"{checked}{focus}> {_bidi(f.label)}</label>'
            f"{notes}</p>"
        )
    if isinstance(f, EnumField | MultiEnumField):
        chosen = set(value or []) if isinstance(f, MultiEnumField) else {value}
        kind = "checkbox" if isinstance(f, MultiEnumField) else "radio"
        options = "".join(
            f'<label><input type={kind} name="{name}" value="{e(o.value)}"'
            f"{' checked' if o.value in chosen else ''}{required if kind == 'radio' else ''}"
            f"{focus if i == 0 else ''}> {_bidi(o.label)}</label>"
            for i, o in enumerate(f.options)
        )
        described_by = f' aria-describedby="{described}"' if described else ""
        return f"<fieldset{described_by}><legend>{_bidi(f.label)}{mark}</legend>{notes}{options}</fieldset>"
    attrs = f' name="{name}" id="f-{name}"{required}{focus}'
    if isinstance(f, NumberField):
        # Text with a number keyboard, not type=number: that input turns what it cannot read ("十三", a region's
        # "1.000,5") into an empty value without a word, so the person would hear "required" or nothing at all;
        # read as text, the number is read as the terminal reads it, or the validator says what is wrong.
        attrs += f' type=text inputmode="{"numeric" if f.integer else "decimal"}"'
    elif isinstance(f, StringField):
        attrs += f' type="{_INPUT_TYPES.get(f.format or "", "text")}"'
        # minlength, never maxlength: the browser counts UTF-16 units, the schema characters, so maxlength="3"
        # would stop "𠮷野家" (three characters, one outside the BMP) at its second; the validator says too long.
        attrs += f' minlength="{f.min_length}"' if f.min_length else ""
    shown = "" if value is None else str(value)
    zone = ""
    if isinstance(f, StringField) and f.format == "date-time":
        shown = shown[:19] if shown else ""
        attrs += ' step="1" data-local-time'  # the script adds the person's offset; see _read_answer
        zone = f'<input type=hidden name="_zone.{name}" value="">'
    return f'<p><label for="f-{name}">{_bidi(f.label)}{mark}</label>{notes}<input{attrs} value="{e(shown)}">{zone}</p>'


def _browser_hint(f: FormField, lang: Language) -> list[str]:
    """The schema's hints, less what the browser's own date pickers show; date-times are read as UTC (the page's
    script puts the person's own zone in their place: ``data-zone`` holds those words, ``{offset}`` left open)."""
    words = hint(f, lang)
    if isinstance(f, StringField) and f.format == "date":
        return words[2:]
    if isinstance(f, StringField) and f.format == "date-time":
        return words[1:]  # the zone's own note says it
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
  for (const note of document.querySelectorAll("#h-" + CSS.escape(input.name) + " small[data-zone]")) {
    note.textContent = note.dataset.zone.replace("{offset}", offset(input.value || Date.now()));
  }
}
})();"""

_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:34em;margin:1.5em auto;padding:0 1em;line-height:1.5;"
    "color:#1a1a1a;background:#fff;overflow-wrap:anywhere}"
    "label{display:block;margin:.2em 0}input:not([type=checkbox]):not([type=radio]){width:100%;padding:.4em;"
    "font-size:1em;box-sizing:border-box;border:1px solid #767676}small{display:block;color:#555}"
    ".req{color:#a00;font-size:.85em}.errors{border:2px solid #a00;padding:0 1em;margin:1em 0}"
    ".error{color:#a00;font-weight:bold}.who{font-weight:bold}.question{font-weight:bold;margin-bottom:.2em}"
    ".message{font-size:1.15em;white-space:pre-line}fieldset{margin:1em 0}"
    "button{font-size:1em;padding:.5em 1em;margin:.2em 0;min-height:44px}"
    "a:focus-visible,button:focus-visible,input:focus-visible{outline:3px solid #1a56c4;outline-offset:2px}"
    "h1{font-size:1.2em}dt{font-weight:bold}dd{margin:0 0 .6em}"
    ".url code{word-break:break-all;font-size:1.05em}.queue{font-style:italic;color:#555}"
    "mark{background:#fe6;color:#000;font-weight:bold;text-decoration:underline}"
    "nav.lang{font-size:.9em;text-align:end}nav.lang ul{list-style:none;margin:0;padding:0}"
    "nav.lang li{display:inline-block;margin-inline-start:.8em}nav.lang a{color:#1a56c4}"
    "nav.lang a[aria-current]{color:#1a1a1a;font-weight:bold;text-decoration:none}"
    "@media (prefers-reduced-motion:reduce){*{animation:none!important;transition:none!important;"
    "scroll-behavior:auto!important}}"
    "@media (forced-colors:active){.errors,mark{border:2px solid CanvasText}}"
)

_NATIVE = {"en": "English", "zh-Hans": "简体中文", "zh-Hant": "繁體中文", "ar": "العربية"}
"""Each language's name in itself, as a switch lists them (a person finds their own language by its look)."""


def language_switch(lang: Language, here: str = "") -> str:
    """Links to this page in each language elicitor speaks (``?lang=``), the current one marked."""
    items = []
    for tag in available():
        current = ' aria-current="true"' if tag == lang.tag else ""
        name = _NATIVE.get(tag, tag)
        items.append(
            f'<li><a href="{html.escape(here)}?lang={tag}" lang="{tag}" hreflang="{tag}"{current}>{name}</a></li>'
        )
    label = html.escape(lang._("Language"))
    return f'<nav class=lang aria-label="{label}"><ul>{"".join(items)}</ul></nav>'


def document(title: str, body: str, lang: Language = ENGLISH, switch: bool = False) -> bytes:
    """A whole page: ``lang`` and ``dir`` from the person's language, the title, the language switch, the body in
    a ``<main>`` landmark."""
    nav = language_switch(lang) if switch else ""
    return (
        f'<!doctype html><html lang="{lang.tag}" dir="{lang.direction}"><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style><body>{nav}<main>{body}</main></body></html>"
    ).encode()


def page_language(query: dict[str, list[str]], headers: dict[bytes, bytes], chosen: Language | None) -> Language:
    """The language of a page: the page's switch (``?lang=``), else the handler's own, else the browser's
    ``Accept-Language`` (English when it names none elicitor speaks)."""
    wanted = (query.get("lang") or [""])[0]
    if wanted in available():
        return language(wanted)
    if chosen is not None:
        return chosen
    from ...i18n import negotiate

    return negotiate(headers.get(b"accept-language", b"").decode("latin-1"))


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
    """Send the new tab on to the URL the person agreed to open (no referrer: the token stays here), written as a
    browser sends it (:func:`web_address`)."""
    headers = [(b"location", (web_address(location) or location).encode()), (b"content-length", b"0")]
    headers += _security_headers()
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
