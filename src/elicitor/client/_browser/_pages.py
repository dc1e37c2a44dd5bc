"""The state of one question's page, and how the page's own reports tell that the person has left it.

A page's script reports in every few seconds (``beat``) and says when it is being closed (``gone``). The handler
waits for the person's answer or for the page to count as gone, whichever comes first, without polling: every
report pokes the page, and the wait sleeps exactly until the moment the page would count as gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from ...i18n import Language
from .._handlers import ElicitationOutcome, ElicitationRequest
from .._url import UrlElicitationRequest

MAX_PAGES = 64
"""URL pages kept for the "I'm done" wait; the oldest go first."""
STALE = 120.0
"""A page whose script stops reporting for this long (a crashed or killed browser) is gone."""

State = Literal["asking", "reviewing", "opened", "finished"]


@dataclass(eq=False)
class Page:
    """One question on a page: what is asked, where the person is in answering it, and what the page reported."""

    kind: Literal["form", "url"]
    request: ElicitationRequest | UrlElicitationRequest
    token: str
    state: State = "asking"
    done: anyio.Event = field(default_factory=anyio.Event)  # the person answered (or the page is gone)
    finished: anyio.Event = field(default_factory=anyio.Event)  # URL: the person said they are done
    outcome: ElicitationOutcome | None = None
    draft: dict[str, Any] = field(default_factory=dict)  # a form answer under review
    latest: str = ""  # the newest page instance that reported in
    beat: float | None = None  # when it last did
    left: float | None = None  # when that instance said it was going away
    news: anyio.Event = field(default_factory=anyio.Event)  # set (and replaced) at every change a wait cares for
    lang: Language | None = None  # the language the person chose with the page's switch

    def settle(self, outcome: ElicitationOutcome) -> None:
        """The question's outcome, the first one only."""
        if not self.done.is_set():
            self.outcome = outcome
            self.done.set()
        self.poke()

    def finish(self) -> None:
        """URL mode: the person is done with the page they opened (or can no longer say so)."""
        self.finished.set()
        self.poke()

    def poke(self) -> None:
        """Wake whoever waits on this page: something changed."""
        news, self.news = self.news, anyio.Event()
        news.set()

    def gone_at(self, grace: float) -> float | None:
        """When (``time.monotonic()``) the page counts as closed or lost if nothing more is heard from it; ``None``
        while it has never reported (a browser without JavaScript: the page cannot tell, so it never counts)."""
        moments = []
        if self.left is not None:
            moments.append(self.left + grace)
        if self.beat is not None:
            moments.append(self.beat + max(grace, STALE))
        return min(moments) if moments else None


def beat_every(grace: float) -> int:
    """How often the page reports in (ms): a few times within the grace period, at most every 5 seconds."""
    return int(min(5.0, max(grace / 3, 0.1)) * 1000)
