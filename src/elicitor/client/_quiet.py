"""The client's ``request_timeout``: a request gives up when the server has been silent too long.

"Silent" means nothing at all arrived (no answer, progress, log message or request of the server's own) for
``timeout`` seconds since the later of the request's start and the last thing heard; the clock stops while a
handler answers a request from the server (a person filling a form takes their time). On expiry the request's
scope is cancelled, which sends ``notifications/cancelled`` (2025-11-25 basic/lifecycle, "Timeouts").

Hearing from the server must cost O(1) whatever the number of waiting requests (a client may have thousands
pending), so it only records a time. One watchdog task looks at the oldest waiting request alone: requests are
kept in the order they started, and the last-heard time is shared, so the oldest always expires first.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import anyio


class QuietClock:
    """Deadlines for the requests of one client, pushed back by anything heard from the server."""

    __slots__ = ("_added", "_waiting", "answering", "heard", "timeout")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.heard = -math.inf
        self.answering = 0
        """Server requests a handler is answering now; while any is, no clock runs."""
        self._waiting: dict[anyio.CancelScope, float] = {}
        self._added = anyio.Event()

    def heard_from_server(self) -> None:
        self.heard = anyio.current_time()

    @contextmanager
    def request(self) -> Iterator[anyio.CancelScope]:
        """A scope to wait for one request in; the watchdog cancels it when the server is silent too long."""
        scope = anyio.CancelScope()
        self._waiting[scope] = anyio.current_time()
        self._added.set()
        try:
            with scope:
                yield scope
        finally:
            self._waiting.pop(scope, None)

    async def watch(self) -> None:
        """The watchdog: runs for the client's lifetime."""
        while True:
            if not self._waiting:
                self._added = anyio.Event()
                await self._added.wait()
                continue
            if self.answering:
                # When the handler finishes it marks the server as heard, so no deadline can fall before then.
                await anyio.sleep(self.timeout)
                continue
            now = anyio.current_time()
            oldest = next(iter(self._waiting.values()))
            deadline = max(oldest, self.heard) + self.timeout
            if deadline > now:
                await anyio.sleep(deadline - now)  # deadlines only move later meanwhile: never late
                continue
            expired = []
            for scope, started in self._waiting.items():
                if max(started, self.heard) + self.timeout > now:
                    break
                expired.append(scope)
            for scope in expired:
                del self._waiting[scope]
                scope.cancel()
