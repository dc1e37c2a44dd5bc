"""The closed set of field kinds an elicitation form may hold, and how each checks a value.

Spec: the restricted ``PrimitiveSchemaDefinition`` subset —
https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#requested-schema — string (with
``minLength``/``maxLength``/``format``), number/integer (``minimum``/``maximum``), boolean, and the enum variants
of SEP-1330: untitled single (``enum``), titled single (``oneOf`` const/title), legacy titled (``enum`` +
``enumNames``), untitled multi (``items.enum``) and titled multi (``items.anyOf``). ``default`` on every kind from
2025-11-25 (SEP-1034); 2025-06-18 allowed it on booleans only.

A renderer walks these classes; the validator is their :meth:`check` methods, shared by server and client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, ClassVar, Final, Literal, TypeAlias
from urllib.parse import urlsplit

from ..i18n._message import N_, Message
from ..types import supports_rich_enums

StringFormat: TypeAlias = Literal["email", "uri", "date", "date-time"]
STRING_FORMATS: Final[frozenset[str]] = frozenset({"email", "uri", "date", "date-time"})

_EMAIL = re.compile(r"^[^@\s]+@[^@\s.]+(\.[^@\s.]+)+$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


class Problem(Exception):
    """Why one value does not fit its field (turned into a ``FieldError`` by the form).

    ``message`` keeps the sentence deferred (:class:`~elicitor.i18n.Message`): ``str()`` is English, for the wire
    and logs; a renderer shows it in the person's language.
    """

    def __init__(self, message: Message | str) -> None:
        super().__init__(str(message))
        self.message = message


@dataclass(frozen=True, slots=True)
class Option:
    """One choice of an enum field: the ``value`` sent on the wire and an optional ``title`` shown to people."""

    value: str
    title: str | None = None

    @property
    def label(self) -> str:
        """What a person sees for this choice: its title, else its value."""
        return self.title if self.title is not None else self.value


@dataclass(frozen=True, slots=True, kw_only=True)
class _Field:
    name: str
    title: str | None = None
    description: str | None = None
    required: bool = True

    @property
    def label(self) -> str:
        """What to call the field in front of a person: its title, else its name."""
        return self.title or self.name

    def to_schema(self, revision: str) -> dict[str, Any]:
        """This field as a property of ``requestedSchema`` at ``revision`` (2025-06-18's subset is smaller)."""
        raise NotImplementedError

    def check(self, value: object) -> Any:
        """``value`` as this field accepts it (numbers as numbers, choices as their values).

        Raises:
            Problem: the value does not fit, with a message for the person.
        """
        raise NotImplementedError

    def _annotations(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.title is not None:
            out["title"] = self.title
        if self.description is not None:
            out["description"] = self.description
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class StringField(_Field):
    """Free text, optionally bounded in length and constrained to a format."""

    min_length: int | None = None
    max_length: int | None = None
    format: StringFormat | None = None
    default: str | None = None

    kind: ClassVar[Literal["string"]] = "string"

    def to_schema(self, revision: str) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "string", **self._annotations()}
        if self.min_length is not None:
            out["minLength"] = self.min_length
        if self.max_length is not None:
            out["maxLength"] = self.max_length
        if self.format is not None:
            out["format"] = self.format
        if self.default is not None and supports_rich_enums(revision):
            out["default"] = self.default
        return out

    def check(self, value: object) -> str:
        if not isinstance(value, str):
            raise Problem(N_("expected text, got {what}", what=_describe(value)))
        # Characters are code points, as JSON Schema counts them (not bytes, not UTF-16 units, not what a person
        # sees as one: 👨‍👩‍👧 is five), so the sentence says how many this has, the count a person cannot guess.
        if self.min_length is not None and len(value) < self.min_length:
            raise Problem(
                N_("must be at least {n} characters long (this has {count})", n=self.min_length, count=len(value))
            )
        if self.max_length is not None and len(value) > self.max_length:
            raise Problem(
                N_("must be at most {n} characters long (this has {count})", n=self.max_length, count=len(value))
            )
        if self.format is not None:
            _check_format(self.format, value)
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class NumberField(_Field):
    """A number; ``integer`` fields accept only whole numbers (``3.0`` counts as whole)."""

    integer: bool = False
    minimum: float | None = None
    maximum: float | None = None
    default: float | None = None

    @property
    def kind(self) -> Literal["integer", "number"]:
        """The schema type: ``integer`` for whole numbers, else ``number``."""
        return "integer" if self.integer else "number"

    def to_schema(self, revision: str) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind, **self._annotations()}
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.default is not None and supports_rich_enums(revision):
            out["default"] = self.default
        return out

    def check(self, value: object) -> int | float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Problem(N_("expected a number, got {what}", what=_describe(value)))
        if self.integer and not isinstance(value, int):
            if not value.is_integer():
                raise Problem(N_("expected a whole number, got {value}", value=value))
            value = int(value)
        if self.minimum is not None and value < self.minimum:
            raise Problem(N_("must be at least {n}", n=self.minimum))
        if self.maximum is not None and value > self.maximum:
            raise Problem(N_("must be at most {n}", n=self.maximum))
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class BooleanField(_Field):
    """Yes or no."""

    default: bool | None = None

    kind: ClassVar[Literal["boolean"]] = "boolean"

    def to_schema(self, revision: str) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "boolean", **self._annotations()}
        if self.default is not None:
            out["default"] = self.default
        return out

    def check(self, value: object) -> bool:
        if not isinstance(value, bool):
            raise Problem(N_("expected true or false, got {what}", what=_describe(value)))
        return value


EnumStyle: TypeAlias = Literal["untitled", "titled", "legacy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EnumField(_Field):
    """Pick one of ``options``.

    ``style`` is how it goes on the wire: ``untitled`` (``enum``), ``titled`` (``oneOf`` of const/title) or
    ``legacy`` (``enum`` + ``enumNames``). On 2025-06-18, which has no ``oneOf`` enums, titled fields are sent in
    the legacy form so that their titles survive.
    """

    options: tuple[Option, ...]
    style: EnumStyle = "untitled"
    default: str | None = None

    kind: ClassVar[Literal["enum"]] = "enum"

    @property
    def values(self) -> tuple[str, ...]:
        """The wire values of the choices, in order."""
        return tuple(o.value for o in self.options)

    def to_schema(self, revision: str) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "string", **self._annotations()}
        style = self.style
        if style == "titled" and not supports_rich_enums(revision):
            style = "legacy"
        if style == "titled":
            out["oneOf"] = [{"const": o.value, "title": o.label} for o in self.options]
        else:
            out["enum"] = list(self.values)
            if style == "legacy":
                out["enumNames"] = [o.label for o in self.options]
        if self.default is not None and supports_rich_enums(revision):
            out["default"] = self.default
        return out

    def check(self, value: object) -> str:
        if not isinstance(value, str):
            raise Problem(
                N_("expected one of {choices}, got {what}", choices=_choices(self.values), what=_describe(value))
            )
        if value not in self.values:
            raise Problem(N_("{value} is not one of {choices}", value=repr(value), choices=_choices(self.values)))
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class MultiEnumField(_Field):
    """Pick any number of ``options`` (between ``min_items`` and ``max_items``); sent as a list of strings."""

    options: tuple[Option, ...]
    titled: bool = False
    min_items: int | None = None
    max_items: int | None = None
    default: tuple[str, ...] | None = None

    kind: ClassVar[Literal["multi-enum"]] = "multi-enum"

    @property
    def values(self) -> tuple[str, ...]:
        """The wire values of the choices, in order."""
        return tuple(o.value for o in self.options)

    def to_schema(self, revision: str) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "array", **self._annotations()}
        if self.min_items is not None:
            out["minItems"] = self.min_items
        if self.max_items is not None:
            out["maxItems"] = self.max_items
        if self.titled:
            out["items"] = {"anyOf": [{"const": o.value, "title": o.label} for o in self.options]}
        else:
            out["items"] = {"type": "string", "enum": list(self.values)}
        if self.default is not None:
            out["default"] = list(self.default)
        return out

    def check(self, value: object) -> list[str]:
        if not isinstance(value, list):
            raise Problem(N_("expected a list of choices, got {what}", what=_describe(value)))
        for item in value:
            if not isinstance(item, str) or item not in self.values:
                raise Problem(N_("{value} is not one of {choices}", value=repr(item), choices=_choices(self.values)))
        if self.min_items is not None and len(value) < self.min_items:
            raise Problem(N_("choose at least {n}", n=self.min_items))
        if self.max_items is not None and len(value) > self.max_items:
            raise Problem(N_("choose at most {n}", n=self.max_items))
        return value


FormField: TypeAlias = StringField | NumberField | BooleanField | EnumField | MultiEnumField
"""Any field of a form. Match on the class (or ``field.kind``) to render it."""


def _check_format(fmt: str, value: str) -> None:
    if fmt == "email":
        if not _EMAIL.match(value):
            raise Problem(N_("expected an email address such as name@example.com"))
    elif fmt == "uri":
        scheme, _, rest = value.partition(":")
        if not _SCHEME.match(scheme) or not rest or any(c.isspace() for c in value):
            raise Problem(N_("expected an absolute URI such as https://example.com/"))
        try:
            urlsplit(value)
        except ValueError as exc:
            raise Problem(N_("expected an absolute URI: {reason}", reason=str(exc))) from None
    elif fmt == "date":
        try:
            if not _DATE.match(value):
                raise ValueError
            date.fromisoformat(value)
        except ValueError:
            raise Problem(N_("expected a date as YYYY-MM-DD")) from None
    elif fmt == "date-time":
        try:
            if not _DATE_TIME.match(value):
                raise ValueError
            datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
        except ValueError:
            raise Problem(
                N_("expected a date and time as YYYY-MM-DDTHH:MM:SS with a time zone (Z or +HH:MM)")
            ) from None


def _describe(value: object) -> Message:
    if value is None:
        return N_("null")
    if isinstance(value, bool):
        return N_("a boolean")
    if isinstance(value, int | float):
        return N_("a number")
    if isinstance(value, str):
        return N_("text")
    if isinstance(value, list):
        return N_("a list")
    return N_("an object")


def _choices(values: tuple[str, ...]) -> str:
    shown = ", ".join(repr(v) for v in values[:8])
    return shown + (", ..." if len(values) > 8 else "")


def _num(value: float) -> str:
    if isinstance(value, int):  # float() of a huge integer from the wire would overflow
        return str(value)
    return str(int(value)) if value.is_integer() else str(value)
