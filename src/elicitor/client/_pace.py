"""The person's pace: the deadlines a client keeps for a server stop while a person signs in.

A protected server answers a request with 401 (or 403 ``insufficient_scope`` in the middle of a session), and the
request then waits while a person approves the sign-in in their browser (basic/authorization.mdx, 2025-11-25 and
2026-07-28): seconds for some, minutes for others. That wait says nothing about the server, so none of the
client's clocks about the server may run during it: not the ``server/discover`` probe (or a slow person would
land on the handshake era instead of 2026-07-28), not ``handshake_timeout``, not ``request_timeout``. The sign-in
has its own bound (the authorizer's: five minutes for :class:`~elicitor.client.auth.LoopbackAuthorizer`).

:class:`Pace` holds a client's deadlines; :meth:`Pace.person` stops them all, keeping what each had left, until
the person is done, and then lets each run on with exactly that time. Sign-ins of one :class:`~elicitor.OAuth`
are one at a time, so a second request that meets a 401 meanwhile waits for the same person, under the same pause.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

import anyio

from ._quiet import QuietClock


class Pace:
    """One client's deadlines for its server, stopped while a person is busy (see the module's docstring)."""

    __slots__ = ("_busy", "_left", "_running", "quiet")

    def __init__(self, quiet: QuietClock | None = None) -> None:
        self.quiet = quiet
        """The client's ``request_timeout`` clock, stopped too."""
        self._busy = 0
        self._running: set[anyio.CancelScope] = set()
        self._left: dict[anyio.CancelScope, float] = {}

    @property
    def paused(self) -> bool:
        """Whether a person is busy now (no deadline runs)."""
        return self._busy > 0

    @contextmanager
    def deadline(self, seconds: float | None) -> Iterator[anyio.CancelScope]:
        """A scope cancelled after ``seconds`` (``None``: never) of the server's time: time a person spends
        signing in meanwhile is not counted. Check ``scope.cancelled_caught`` after the block, as with
        ``anyio.move_on_after``."""
        scope = anyio.CancelScope()
        if seconds is not None:
            self._running.add(scope)
            if self._busy:
                self._left[scope] = seconds
            else:
                scope.deadline = anyio.current_time() + seconds
        try:
            with scope:
                yield scope
        finally:
            self._running.discard(scope)
            self._left.pop(scope, None)

    @contextmanager
    def person(self) -> Iterator[None]:
        """While the block runs a person is busy (signing in): every deadline stops, and runs on afterwards with
        the time it had left. Nested and concurrent uses count: the clocks restart when the last one ends."""
        if self._busy == 0:
            now = anyio.current_time()
            for scope in self._running:
                self._left[scope] = max(scope.deadline - now, 0.0)
                scope.deadline = math.inf
            if self.quiet is not None:
                self.quiet.answering += 1
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1
            if self._busy == 0:
                now = anyio.current_time()
                for scope, left in self._left.items():
                    scope.deadline = now + left
                self._left.clear()
                if self.quiet is not None:
                    self.quiet.answering -= 1
                    self.quiet.heard_from_server()  # the request clocks start afresh from the person's return


@runtime_checkable
class PersonPaced(Protocol):
    """An ``httpx.Auth`` in which a person may take their time (:class:`~elicitor.OAuth`): a client tells it its
    :class:`Pace`, and the auth holds ``pace.person()`` while a person signs in."""

    def pace_with(self, pace: Pace) -> Callable[[], None]:
        """Hold ``pace.person()`` during every sign-in from now on; returns the function that stops it."""
        ...
