"""The deadlines of a session's waiting requests, on one timer instead of one per request (asyncio).

A server may wait on thousands of questions at once, each bounded by ``elicitation_timeout`` (an hour by
default). A timer per request (``loop.call_later``: a handle, its copy of the context, a bound method and a place
in the loop's heap) cost about 0.6 KiB per waiting call (tracemalloc, ``bench/http_memory.py``); here a waiting
request costs one entry in a dict.

Requests with the same timeout expire in the order they were sent (the loop's clock only moves forward), so the
requests of one timeout are kept in a dict in insertion order, and the earliest deadline of all is at the front of
one of those dicts. One timer, set for that deadline, expires what is due and sets itself for the next one. An
answer removes its entry at once (O(1)); a timer set for an entry that was answered meanwhile finds nothing due
and moves on.
"""

from __future__ import annotations

import asyncio
from typing import Protocol


class Expiring(Protocol):
    def expire(self) -> None: ...


class Deadlines:
    """When each waiting request of one session gives up, on one timer of the session's loop."""

    __slots__ = ("_at", "_by_timeout", "_loop", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._by_timeout: dict[float, dict[Expiring, float]] = {}
        """Per timeout, the waiting requests and their deadlines (the loop's clock), earliest first."""
        self._timer: asyncio.TimerHandle | None = None
        self._at = 0.0

    def add(self, waiting: Expiring, timeout: float) -> None:
        """Call ``waiting.expire()`` in ``timeout`` seconds unless :meth:`discard` is called first."""
        deadline = self._loop.time() + timeout
        group = self._by_timeout.get(timeout)
        if group is None:
            group = self._by_timeout[timeout] = {}
        group[waiting] = deadline
        if self._timer is None or deadline < self._at:
            self._schedule(deadline)

    def discard(self, waiting: Expiring) -> None:
        """``waiting`` no longer waits (answered, failed or cancelled). A session has a timeout or two, rarely more."""
        for group in self._by_timeout.values():
            if group.pop(waiting, None) is not None:
                return

    def close(self) -> None:
        """The session ended: nothing expires any more."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._by_timeout.clear()

    def _schedule(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._at = deadline
        self._timer = self._loop.call_at(deadline, self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = self._loop.time()
        earliest: float | None = None
        due: list[tuple[float, Expiring]] = []
        for timeout, group in list(self._by_timeout.items()):
            while group:
                waiting, deadline = next(iter(group.items()))
                if deadline > now:
                    if earliest is None or deadline < earliest:
                        earliest = deadline
                    break
                del group[waiting]
                due.append((deadline, waiting))
            if not group:
                del self._by_timeout[timeout]
        if earliest is not None:
            self._schedule(earliest)
        due.sort(key=lambda entry: entry[0])  # several timeouts due at once (a loop that was busy): in deadline order
        for _, waiting in due:
            waiting.expire()
