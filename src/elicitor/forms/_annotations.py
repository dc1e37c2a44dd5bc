"""What a form author writes: ``Field(...)`` inside ``Annotated`` and ``Choices`` for titled enums."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Annotated, Any

from ._fields import StringFormat


@dataclass(frozen=True, slots=True, kw_only=True)
class Field:
    """Describe a form field beyond its type, inside ``Annotated``::

        party: Annotated[int, Field(title="Party size", minimum=1, maximum=12)] = 2

    Every argument maps to the spec's keyword of the same meaning. ``enum_names=True`` sends a titled enum in the
    legacy ``enum``/``enumNames`` shape. ``not_secret=True`` overrides the form-mode secret rule for this field
    when its name merely looks like a secret (a "token count", say). ``msgspec.Meta``, ``annotated_types`` and
    pydantic ``Field`` constraints are understood too.
    """

    title: str | None = None
    description: str | None = None
    min_length: int | None = None
    max_length: int | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_items: int | None = None
    max_items: int | None = None
    format: StringFormat | None = None
    enum_names: bool = False
    not_secret: bool = False


Email = Annotated[str, Field(format="email")]
"""A string field that must hold an email address (``format: email``)."""

Uri = Annotated[str, Field(format="uri")]
"""A string field that must hold an absolute URI (``format: uri``)."""


class Choices(enum.Enum):
    """An Enum whose members carry a title for people, sent as a titled enum (``oneOf`` const/title)::

        class Seating(Choices):
            INDOOR = "indoor", "Indoor dining room"
            PATIO = "patio", "Heated patio"

    The first item is the wire value, the second the title. ``list[Seating]`` is a titled multi-select.
    """

    title: str | None

    def __new__(cls, value: str, title: str | None = None) -> Choices:
        member = object.__new__(cls)
        member._value_ = value
        member.title = title
        return member

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
