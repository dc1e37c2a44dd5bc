"""How a field and its value read to a person, shared by the renderers (line-based, full-screen, browser).

Hints come from the schema (format, length, bounds, item counts) so a person knows what fits before typing;
parsing turns typed text into the value a field's shared validator (:meth:`check`) accepts.

Everything a server writes (its name, messages, titles, descriptions, URLs, logs, errors) passes through
:func:`printable` before it reaches a terminal or a page, and :func:`identity_warnings` says when the name a server
gives itself could pass for another's. The spec asks clients to show which server asks (client/elicitation
"User Interaction Model") and to warn about ambiguous URLs ("Safe URL Handling"); a name that can rewrite the
screen, or imitate another name, would defeat both.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from ..forms import BooleanField, EnumField, Form, FormField, MultiEnumField, NumberField, StringField
from ..forms._fields import Problem
from ..types import Implementation

_FORMATS = {
    "email": "an email address",
    "uri": "a URL",
    "date": "a date, YYYY-MM-DD",
    "date-time": "a date and time, YYYY-MM-DDTHH:MM:SSZ",
}


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SHOWN_AS_ESCAPE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})  # controls, format (bidi, zero-width), surrogates, breaks
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")  # Hangul fillers: letters that draw nothing


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` from a server as it may be shown to a person: what would act on the terminal or the page instead
    of being read is shown escaped (``\\x1b``, ``\\x07``, ``\\r``, ``\\u202e``, ``\\u200b``).

    That is every control character (C0 and C1: escape sequences, bell, backspace, carriage return, tab), every
    invisible format character (bidi embeddings, overrides and isolates U+202A to U+202E and U+2066 to U+2069, marks,
    zero-width characters, soft hyphens, tags), line and paragraph separators, lone surrogates and letters that
    draw nothing. So a server cannot clear or move over what is already on screen, retitle the window, plant a
    hyperlink whose target differs from its text, ring the bell, hide words or reorder them. With ``newlines`` a
    line feed (or CR LF) stays a line break, for text a renderer shows on several lines (a message); a carriage
    return alone never does. Everything else (any script, emoji, ordinary spaces, backslashes) is left as it is,
    and the result is stable: ``printable(printable(t)) == printable(t)``.
    """
    if text.isprintable() and _BLANK_LETTERS.isdisjoint(text):
        return text
    if newlines:
        text = text.replace("\r\n", "\n")
    out: list[str] = []
    for ch in text:
        if ch == "\n" and newlines:
            out.append(ch)
        elif ch in _BLANK_LETTERS or unicodedata.category(ch) in _SHOWN_AS_ESCAPE:
            out.append(_escape(ch))
        else:
            out.append(ch)
    return "".join(out)


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


# Scripts that are written together in one name without any trick (UTS #39, "Highly Restrictive").
_TOGETHER = (
    frozenset({"Latin", "Han", "Hiragana", "Katakana"}),
    frozenset({"Latin", "Han", "Bopomofo"}),
    frozenset({"Latin", "Han", "Hangul"}),
)
_SCRIPT_WORDS = {"CJK": "Han", "IDEOGRAPHIC": "Han", "KATAKANA-HIRAGANA": "Katakana"}
# Cyrillic and Greek letters that pass for Latin ones: a name made only of them reads as a Latin name.
_LATIN_LOOKALIKES = frozenset("аеіјорсхуѕԁһԛԝӏАВЕІЈКМНОРСТХУЅԌԚԜΑΒΕΖΗΙΚΜΝΟΡΤΥΧοικνρυ")


def _script(ch: str) -> str | None:
    """The script of a letter, from its Unicode name (``"Latin"``, ``"Cyrillic"``, ``"Han"``...); ``None`` if
    ``ch`` is no letter. Compatibility forms count as what they imitate (fullwidth Latin letters are Latin)."""
    plain = unicodedata.normalize("NFKC", ch)[:1] or ch
    if not plain.isalpha():
        return None
    word = unicodedata.name(plain, "").partition(" ")[0]
    if not word or word == "MODIFIER":
        return None
    return _SCRIPT_WORDS.get(word, word.capitalize())


def _name_warnings(text: str) -> list[str]:
    warnings: list[str] = []
    scripts = sorted({s for s in map(_script, text) if s is not None})
    if len(scripts) > 1 and not any(together.issuperset(scripts) for together in _TOGETHER):
        warnings.append(f"the server's name mixes letters of different scripts ({', '.join(scripts)}), a way to "
                        "imitate another name")  # fmt: skip
    elif scripts in (["Cyrillic"], ["Greek"]) and all(c in _LATIN_LOOKALIKES for c in text if c.isalpha()):
        warnings.append(f"the server's name is written in {scripts[0]} letters that look like Latin ones")
    if any(unicodedata.normalize("NFKC", c) != c and unicodedata.normalize("NFKC", c).isascii() for c in text):
        warnings.append("the server's name uses characters that imitate ordinary letters or digits")
    return warnings


def identity_warnings(server: Implementation | None) -> list[str]:
    """What a person should know about the name a server gives itself before trusting it (empty: nothing).

    A server names itself, so a hostile one may borrow a name a person trusts: with characters that do not show
    or that reverse what follows (bidi controls), with letters of another script that look the same (a Cyrillic
    letter a in a Latin name), or with compatibility forms of ordinary letters (fullwidth, mathematical).
    """
    if server is None:
        return []
    texts = [t for t in (server.title, server.name, server.version) if t]
    warnings: list[str] = []
    if any(printable(t) != t for t in texts):
        warnings.append("the server's name contains invisible or direction-changing characters (shown escaped)")
    for text in dict.fromkeys(t for t in (server.title, server.name) if t):
        warnings += [w for w in _name_warnings(text) if w not in warnings]
    return warnings


def server_name(server: Implementation | None) -> str:
    """The server's own name when its title hides it (``"booking-desk"`` behind "Chez Elicitor booking desk").

    Titles are free text any server can choose; the name beside it helps a person tell two servers apart. Shown
    escaped (:func:`printable`), on one line.
    """
    if server is None or not server.title or server.title == server.name:
        return ""
    return printable(server.name)


def server_label(server: Implementation | None) -> str:
    """Who asks, as a person reads it: the server's title (or name) and version on one line, escaped."""
    return printable(server.display()) if server is not None else "an unnamed server"


def queue_text(waiting: int) -> str:
    """How many questions wait behind the one shown ("" when none)."""
    return f"{waiting} more question{'s' if waiting != 1 else ''} waiting after this one" if waiting else ""


def yes_no(form: Form[Any]) -> BooleanField | None:
    """The one field of a yes/no question, or ``None`` when the form asks more than that.

    A form whose only field is a boolean (what ``ctx.confirm`` sends) is a question with two answers: the renderers
    show it on one screen with Yes and No (plus decline and cancel, client/elicitation "User Interaction Model"),
    instead of a checkbox, a review and a submit. No, the answer that changes nothing, is what Enter or the first
    focus gives, whatever the field's default: a stray key must not agree to anything.
    """
    fields = form.fields
    return fields[0] if len(fields) == 1 and isinstance(fields[0], BooleanField) else None


def hint(f: FormField) -> list[str]:
    """What fits the field, in words ("an email address", "from 1 to 10", "at least 2 characters", "choose up to 3")."""
    parts: list[str] = []
    if isinstance(f, StringField):
        if f.format:
            parts.append(_FORMATS[f.format])
        if f.min_length or f.max_length is not None:
            parts.append(f"{_range(f.min_length or None, f.max_length, exactly=True)} characters")
    elif isinstance(f, NumberField):
        parts.append("a whole number" if f.integer else "a number")
        if f.minimum is not None or f.maximum is not None:
            parts.append(_range(f.minimum, f.maximum))
    elif isinstance(f, MultiEnumField) and (f.min_items or f.max_items is not None):
        parts.append(f"choose {_range(f.min_items or None, f.max_items, exactly=True)}")
    return parts


def _range(low: float | None, high: float | None, *, exactly: bool = False) -> str:
    """A range as a person says it: "from 1 to 10", "at least 0", "at most 5", "up to 200", "exactly 3"."""
    if low is not None and high is not None:
        if low == high and exactly:
            return f"exactly {low:g}"
        return f"{low:g}–{high:g}" if exactly else f"from {low:g} to {high:g}"
    if low is not None:
        return f"at least {low:g}"
    assert high is not None
    return f"up to {high:g}" if exactly else f"at most {high:g}"


def show(f: FormField, value: Any) -> str:
    """A value as the person chose it: titles, not wire values; yes/no; "—" for nothing; one line, escaped."""
    if value is None:
        return "—"
    if isinstance(f, BooleanField):
        return "yes" if value else "no"
    if isinstance(f, EnumField):
        return printable(next((o.label for o in f.options if o.value == value), str(value)))
    if isinstance(f, MultiEnumField):
        labels = {o.value: o.label for o in f.options}
        return printable(", ".join(labels.get(v, v) for v in value) or "none")
    return printable(str(value))


def parse_text(f: FormField, text: str) -> Any:
    """Typed text as the field's value, checked by the field's shared validator; raises ``Problem`` if it is not."""
    if isinstance(f, BooleanField):
        lowered = text.lower()
        if lowered in ("y", "yes", "true", "1"):
            return True
        if lowered in ("n", "no", "false", "0"):
            return False
        raise Problem("answer y or n")
    if isinstance(f, NumberField):
        try:
            number: Any = int(text) if f.integer else float(text)
        except ValueError:
            raise Problem("expected a whole number" if f.integer else "expected a number") from None
        return f.check(number)
    if isinstance(f, EnumField):
        return f.check(_pick(f.options, text))
    if isinstance(f, MultiEnumField):
        return f.check([_pick(f.options, part.strip()) for part in text.split(",") if part.strip()])
    return f.check(text)


def _pick(options: tuple[Any, ...], text: str) -> str:
    if text.isdigit() and 1 <= int(text) <= len(options):
        return str(options[int(text) - 1].value)
    for option in options:
        if text in (option.value, option.title):
            return str(option.value)
    raise Problem("pick one of the choices shown, by its number or its name")
