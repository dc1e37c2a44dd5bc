"""How a field and its value read to a person, shared by the terminal renderers (line-based and full-screen).

Hints come from the schema (format, length, bounds, item counts) so a person knows what fits before typing;
parsing turns typed text into the value a field's shared validator (:meth:`check`) accepts.
"""

from __future__ import annotations

from typing import Any

from ..forms import BooleanField, EnumField, FormField, MultiEnumField, NumberField, StringField
from ..forms._fields import Problem
from ..types import Implementation

_FORMATS = {
    "email": "an email address",
    "uri": "a URL",
    "date": "a date, YYYY-MM-DD",
    "date-time": "a date and time, YYYY-MM-DDTHH:MM:SSZ",
}


def server_name(server: Implementation | None) -> str:
    """The server's own name when its title hides it (``"booking-desk"`` behind "Chez Elicitor booking desk").

    Titles are free text any server can choose; the name beside it helps a person tell two servers apart.
    """
    if server is None or not server.title or server.title == server.name:
        return ""
    return server.name


def queue_text(waiting: int) -> str:
    """How many questions wait behind the one shown ("" when none)."""
    return f"{waiting} more question{'s' if waiting != 1 else ''} waiting after this one" if waiting else ""


def hint(f: FormField) -> list[str]:
    """What fits the field, in words ("an email address", "from 1 to 10", "choose 1 to 2")."""
    parts: list[str] = []
    if isinstance(f, StringField):
        if f.format:
            parts.append(_FORMATS[f.format])
        if f.min_length is not None or f.max_length is not None:
            parts.append(f"{f.min_length or 0}–{f.max_length if f.max_length is not None else '∞'} characters")
    elif isinstance(f, NumberField):
        parts.append("a whole number" if f.integer else "a number")
        if f.minimum is not None or f.maximum is not None:
            low = "−∞" if f.minimum is None else f"{f.minimum:g}"
            high = "∞" if f.maximum is None else f"{f.maximum:g}"
            parts.append(f"from {low} to {high}")
    elif isinstance(f, MultiEnumField) and (f.min_items is not None or f.max_items is not None):
        parts.append(f"choose {f.min_items or 0}–{f.max_items if f.max_items is not None else 'any'}")
    return parts


def show(f: FormField, value: Any) -> str:
    """A value as the person chose it: titles, not wire values; yes/no; "—" for nothing."""
    if value is None:
        return "—"
    if isinstance(f, BooleanField):
        return "yes" if value else "no"
    if isinstance(f, EnumField):
        return next((o.label for o in f.options if o.value == value), str(value))
    if isinstance(f, MultiEnumField):
        labels = {o.value: o.label for o in f.options}
        return ", ".join(labels.get(v, v) for v in value) or "none"
    return str(value)


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
    raise Problem("pick one of the numbers shown")
