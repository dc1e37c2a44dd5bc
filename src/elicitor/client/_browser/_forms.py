"""Reading a posted form back into typed values, before the shared validator checks them."""

from __future__ import annotations

import re
from typing import Any

from ..._exceptions import FieldError
from ...forms import BooleanField, MultiEnumField, NumberField, StringField
from ...i18n import ENGLISH, N_, Language
from .._handlers import ElicitationRequest
from .._present import ascii_typed, typed_number

_LOCAL = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$")
_ZONE = re.compile(r"^[+-]\d{2}:\d{2}$")


def read_answer(
    request: ElicitationRequest, posted: dict[str, list[str]], lang: Language = ENGLISH
) -> tuple[dict[str, Any], list[FieldError]]:
    """The posted form as typed values (what cannot be read becomes an error naming the field, said in ``lang``).

    A number is read as the terminal reads it: fullwidth digits from an input method, the region's grouping and
    decimal signs (``1,000`` in ``lang``'s region); "十三" is an error the person can read, not a silent blank."""
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
            number = typed_number(f, ascii_typed(f, raw[0].strip()), lang)
            if number is None:
                said = N_("expected a whole number") if f.integer else N_("expected a number")
                errors.append(FieldError(f.name, str(said), said))
            else:
                values[f.name] = number
        elif isinstance(f, StringField) and f.format == "date-time" and _LOCAL.match(raw[0]):
            # The browser's local date-time has no zone: the page's script sends the person's offset for that
            # moment; without it (no JavaScript) the time is read as UTC, as the hint says.
            zone = (posted.get(f"_zone.{f.name}") or [""])[0]
            seconds = raw[0] if len(raw[0]) > 16 else raw[0] + ":00"
            values[f.name] = seconds + (zone if _ZONE.match(zone) else "Z")
        else:
            values[f.name] = ascii_typed(f, raw[0])  # an email address typed in full-width mode
    return values, errors
