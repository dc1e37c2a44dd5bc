"""Reading a posted form back into typed values, before the shared validator checks them."""

from __future__ import annotations

import re
from typing import Any

from ..._exceptions import FieldError
from ...forms import BooleanField, MultiEnumField, NumberField, StringField
from .._handlers import ElicitationRequest
from .._present import ascii_typed

_LOCAL = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$")
_ZONE = re.compile(r"^[+-]\d{2}:\d{2}$")


def read_answer(request: ElicitationRequest, posted: dict[str, list[str]]) -> tuple[dict[str, Any], list[FieldError]]:
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
            values[f.name] = ascii_typed(f, raw[0])  # an email address typed in full-width mode
    return values, errors
