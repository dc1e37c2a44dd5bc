"""The three outcomes of an elicitation, shared by both sides.

A server's ``await ctx.elicit(...)`` returns one; a client's handler returns one. They mirror the spec's
``ElicitResult.action`` (accept, decline, cancel) and are meant for ``match``::

    match await ctx.elicit("Book it?", Booking):
        case Accepted(data=booking): ...
        case Declined(): ...
        case Cancelled(): ...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeAlias, TypeVar

from .i18n._message import N_, Message

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


def wire_action(answer: dict[str, Any]) -> str | None:
    """The action of an ``ElicitResult`` as received: ``accept``, ``decline``, ``cancel``, or ``None`` for any other.

    ``reject`` reads as ``decline``: it is the name 2025-06-18 gave a refusal in draft, before the revision was
    published with ``decline``, and clients built on the TypeScript SDK up to 1.13 still send it. A person who
    said no must not fail the tool that asked (2025-06-18 client/elicitation, "Response Actions").
    """
    action = answer.get("action")
    if isinstance(action, str) and action in _ACTIONS:
        return action
    return "decline" if action == DRAFT_DECLINE else None


_ACTIONS = frozenset({"accept", "decline", "cancel"})
DRAFT_DECLINE = "reject"
"""2025-06-18's draft name for ``decline`` (see :func:`wire_action`)."""


def url_refused_text(tool: str, steps: Sequence[str]) -> str:
    """What a tool call says when the person declined or cancelled a URL-mode step the tool required first.

    A tool that raises ``UrlElicitationRequired`` cannot go on without that step. On 2026-07-28 the server asks for
    the URL in a round and ends the call with a tool error (``isError``) carrying this text; on 2025-11-25 the
    server only sent -32042 and never hears of the refusal, so the client ends the call with the same result
    itself. ``steps`` are the refused elicitations' messages.
    """
    return str(Message(URL_REFUSED.msgid, None, {"tool": repr(tool), "steps": "; ".join(steps)}))


URL_REFUSED = N_("Tool {tool} needs a step the person declined or cancelled: {steps}")
"""The sentence of :func:`url_refused_text`: elicitor's own, which ``elicitor connect`` says in the person's
language when a tool's error is exactly it (the steps, the server's words, as sent)."""
