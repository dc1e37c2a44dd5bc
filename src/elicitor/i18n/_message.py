"""A sentence elicitor says to a person, kept as its English text and its values until someone shows it.

The validator (``forms``) runs on both sides; on the server its messages go on the wire in English, in a renderer
they are shown in the person's language. So the fields raise a :class:`Message` (``N_("must be at least {n}
characters long", n=3)``): ``str()`` of it is the English sentence, :meth:`~elicitor.i18n.Language.text` the
translated one. Pure: no catalogs are read here, so the forms stay free of I/O.

The English text is the message id (gettext's convention): the catalogs (``elicitor/i18n/locales/``) are made from
every ``_``, ``n_``, ``N_`` and ``NP_`` call in the source by ``scripts/catalogs.py``.
"""

from __future__ import annotations

from typing import Any


class Message:
    """A sentence with ``{name}`` placeholders and their ``args``; a ``plural`` when it counts ``args["n"]``."""

    __slots__ = ("args", "msgid", "plural")

    def __init__(self, msgid: str, plural: str | None, args: dict[str, Any]) -> None:
        self.msgid = msgid
        self.plural = plural
        self.args = args

    def __str__(self) -> str:
        """The sentence in English."""
        template = self.msgid if self.plural is None or self.args.get("n") == 1 else self.plural
        return template.format(**{name: english(value) for name, value in self.args.items()})

    def __repr__(self) -> str:
        return f"Message({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Message):
            return (self.msgid, self.plural, self.args) == (other.msgid, other.plural, other.args)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.msgid, self.plural))


def english(value: object) -> object:
    """A value of a message as English writes it: a nested message as its sentence, ``3.0`` as ``3``."""
    if isinstance(value, Message):
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def N_(msgid: str, /, **args: Any) -> Message:
    """Mark ``msgid`` for the catalogs and keep it, with ``args``, to be translated where it is shown."""
    return Message(msgid, None, args)


def NP_(singular: str, plural: str, n: int, /, **args: Any) -> Message:
    """A deferred message that counts ``n`` (``{n}`` in the text): each language picks its own plural form."""
    return Message(singular, plural, {**args, "n": n})
