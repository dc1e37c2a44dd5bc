"""Requests that wait for the shared state while it is away for a moment, on both eras and every transport.

A Redis restart, failover or pause lasts seconds. A request that needs the store meanwhile could be refused at once
(503, or a retryable JSON-RPC error), but clients that do not send a request again on such an answer (the official
SDKs do not) would then fail the person's call, lose the person's answer, or fail to connect. So a request that
may be tried again without acting twice waits for the store instead, within one bound per replica: each waits up
to :data:`STORE_HOLD`, at most :data:`MAX_WAITING` wait at once, and past either it is refused as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from ..state import StoreUnavailable

_T = TypeVar("_T")

STORE_HOLD = 15.0
"""Seconds a request waits for an unreachable store before it is refused: rides out a Redis restart, failover or
pause (``docs/deploying.md`` promises up to 10 s), and the client only sees a slower answer."""

HOLD_RETRY = 0.5
"""Seconds between two attempts of a held request (a refused connection fails at once; a paused Redis takes the
store's timeout per attempt)."""

MAX_WAITING = 256
"""Requests a replica holds at once for an unreachable store; past it a request is refused at once. Each held
request keeps its connection and its body, so an outage under heavy traffic must not pile up without bound: the
excess gets the prompt refusal a client may retry."""


class StoreHold:
    """The requests of one replica waiting for the store, both eras together (one count, one bound)."""

    __slots__ = ("_scopes", "max_waiting", "stops_at", "waiting")

    def __init__(self, max_waiting: int = MAX_WAITING) -> None:
        self.waiting = 0
        """Requests waiting for the store now."""
        self.max_waiting = max_waiting
        self.stops_at: float | None = None
        """The clock reading by which the replica's shutdown needs every request answered (see :meth:`stop_by`)."""
        self._scopes: set[anyio.CancelScope] = set()

    def stop_by(self, deadline: float) -> None:
        """The replica is shutting down and its ASGI server cancels what is still running at ``deadline``: a
        request waiting for the store stops waiting by then and is refused as one that waited its whole bound
        (503 with ``Retry-After``, the retryable error), not cut by the server's cancellation (a 500 without a
        word, a traceback in the log); a request that begins waiting after this does not wait past it."""
        self.stops_at = deadline if self.stops_at is None else min(self.stops_at, deadline)
        for scope in self._scopes:
            scope.deadline = min(scope.deadline, deadline)

    @staticmethod
    def deadline() -> float:
        """The clock reading until which a request arriving now may wait (see :data:`STORE_HOLD`)."""
        return anyio.current_time() + STORE_HOLD

    async def patiently(self, attempt: Callable[[], Awaitable[_T]], until: float | None) -> _T:
        """``attempt()``, tried again while the store cannot be reached, until the clock reads ``until`` (``None``:
        once), and only while fewer than ``max_waiting`` requests wait so; then its :class:`StoreUnavailable` is
        raised. ``attempt`` must be safe to run again after a try that failed so (it acted at most once in all)."""
        waiting = False
        failure: StoreUnavailable | None = None
        scope = anyio.CancelScope()  # bounded by the shutdown's deadline once it waits (see stop_by)
        try:
            with scope:
                while True:
                    try:
                        return await attempt()
                    except StoreUnavailable as exc:
                        failure = exc
                        if until is None or anyio.current_time() + HOLD_RETRY >= until:
                            raise
                        if not waiting:
                            if self.waiting >= self.max_waiting:
                                raise
                            self.waiting += 1
                            waiting = True
                            self._scopes.add(scope)
                            if self.stops_at is not None:
                                scope.deadline = self.stops_at
                    await anyio.sleep(HOLD_RETRY)
        finally:
            self._scopes.discard(scope)
            if waiting:
                self.waiting -= 1
        # The shutdown's deadline (stop_by) came while it waited: refused as one that waited its whole bound.
        raise StoreUnavailable(f"{failure} (this replica is shutting down)") from failure
