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

A person may also be signing in *beyond* the server: a proxy in front of a protected server waits for its own
person before it can answer the client's handshake. Its client cannot see that sign-in, so the handshake's own
deadline is a quiet one (``deadline(..., quiet=True)``): anything heard from the server (a log message, a ping)
starts it afresh (:meth:`Pace.heard`), and a server that says it is waiting on a person keeps the handshake alive.
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

    __slots__ = ("_busy", "_left", "_quiet_ones", "_running", "quiet")

    def __init__(self, quiet: QuietClock | None = None) -> None:
        self.quiet = quiet
        """The client's ``request_timeout`` clock, stopped too."""
        self._busy = 0
        self._running: set[anyio.CancelScope] = set()
        self._left: dict[anyio.CancelScope, float] = {}
        self._quiet_ones: dict[anyio.CancelScope, float] = {}
        """The deadlines anything heard from the server starts afresh, with their full length."""

    @property
    def paused(self) -> bool:
        """Whether a person is busy now (no deadline runs)."""
        return self._busy > 0

    @contextmanager
    def deadline(self, seconds: float | None, *, quiet: bool = False) -> Iterator[anyio.CancelScope]:
        """A scope cancelled after ``seconds`` (``None``: never) of the server's time: time a person spends
        signing in meanwhile is not counted. ``quiet``: after ``seconds`` of the server's *silence* (see
        :meth:`heard`). Check ``scope.cancelled_caught`` after the block, as with ``anyio.move_on_after``."""
        scope = anyio.CancelScope()
        if seconds is not None:
            self._running.add(scope)
            if quiet:
                self._quiet_ones[scope] = seconds
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
            self._quiet_ones.pop(scope, None)

    def heard(self) -> None:
        """Something arrived from the server: each quiet deadline runs its full length again from now. Cheap when
        none runs (it is called for every message the server sends)."""
        if not self._quiet_ones:
            return
        if self._busy:
            self._left.update(self._quiet_ones)
            return
        now = anyio.current_time()
        for scope, seconds in self._quiet_ones.items():
            scope.deadline = max(scope.deadline, now + seconds)

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
