"""The three outcomes of an elicitation, shared by both sides.

A server's ``await ctx.elicit(...)`` returns one; a client's handler returns one. They mirror the spec's
``ElicitResult.action`` (accept, decline, cancel) and are meant for ``match``::

    match await ctx.elicit("Book it?", Booking):
        case Accepted(data=booking): ...
        case Declined(): ...
        case Cancelled(): ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeAlias, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Accepted(Generic[T]):
    """The person submitted the form; ``data`` is the validated answer, converted to the form's type.

    In URL mode, ``data`` is ``None`` and acceptance means only that the person agreed to open the URL.
    """

    data: T
    action: Literal["accept"] = "accept"


@dataclass(frozen=True, slots=True)
class Declined:
    """The person explicitly said no."""

    action: Literal["decline"] = "decline"


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The person dismissed the request without choosing (closed it, pressed Esc), or it was cancelled."""

    action: Literal["cancel"] = "cancel"


Outcome: TypeAlias = Accepted[T] | Declined | Cancelled
"""What an elicitation ends with."""


def outcome_to_wire(outcome: Accepted[Any] | Declined | Cancelled) -> dict[str, Any]:
    """The ``ElicitResult`` for an outcome (content only for an accepted form)."""
    if isinstance(outcome, Accepted):
        if outcome.data is None:
            return {"action": "accept"}
        return {"action": "accept", "content": outcome.data}
    return {"action": outcome.action}
