"""The words elicitor itself shows a person, in their language (gettext catalogs, Babel's numbers and dates).

English, Simplified and Traditional Chinese and Arabic are complete. Pick one with ``TerminalHandler(lang="zh")``,
``BrowserHandler(lang=...)`` (the browser otherwise follows ``Accept-Language`` and the page's switch) or
``elicitor --lang``; by default the environment's (``LANGUAGE``, ``LC_ALL``, ``LC_MESSAGES``, ``LANG``). What a
server writes is never translated.

The catalogs and Babel load on first use: a server, which only raises deferred :class:`Message` s, never pays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._message import N_, NP_, Message

if TYPE_CHECKING:
    from ._language import ENGLISH, Language, available, chosen, from_environment, language, negotiate, use

__all__ = [
    "ENGLISH",
    "NP_",
    "N_",
    "Language",
    "Message",
    "available",
    "chosen",
    "from_environment",
    "language",
    "negotiate",
    "use",
]

_LAZY = frozenset({"ENGLISH", "Language", "available", "chosen", "from_environment", "language", "negotiate", "use"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import _language

        return getattr(_language, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
