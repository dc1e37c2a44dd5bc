"""Background work that outlives faults: one reconnect-with-backoff rule for every subscription, and loops that
log their failures and start again instead of ending the task group they run in.

A replica's background work — the readers of its queues (from the other replicas, about its tasks), the change
relay, the sweep of idle sessions — runs in the HTTP app's lifespan task group. An exception escaping any of them
would cancel that group, and with it every session and parked call of the replica, which then answers 503 until
somebody restarts it. So none may escape: a store that is away is waited out (backing off, each subscription
reporting whether it listens now, which ``/healthz`` shows), and anything unexpected is logged at ERROR with its
traceback and the loop started again.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

import anyio

from ._ports import StoreUnavailable

logger = logging.getLogger("elicitor.state")
_Item = TypeVar("_Item")


class Backoff:
    """Pauses that grow from ``first`` to ``most`` seconds (doubling, with jitter so replicas do not reconnect in
    step), and start over after :meth:`reset`."""

    def __init__(self, first: float = 0.05, most: float = 2.0) -> None:
        self._first = first
        self._most = most
        self._next = first

    def reset(self) -> None:
        """Start over from the shortest pause (the last attempt worked)."""
        self._next = self._first

    async def pause(self) -> None:
        """Sleep for the next pause, and make the one after it longer."""
        delay = self._next * random.uniform(0.5, 1.0)  # jitter, not a secret
        self._next = min(self._most, self._next * 2)
        await anyio.sleep(delay)


class Subscription:
    """One channel a replica listens to, kept open through outages, and what ``/healthz`` says about it.

    :meth:`run` subscribes, hands each message to the handler in order, and when the subscription ends (its
    connection lost) or cannot be made, calls ``lost`` and subscribes again after a pause from :class:`Backoff`.
    A handler that raises is logged and the next message handled: one bad message never stops a channel.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.listening = False
        """Whether the subscription is live now."""
        self.since = time.time()
        """When ``listening`` last changed (Unix time)."""
        self.failures = 0
        """Subscriptions lost or refused since the last one that worked."""
        self.error: str | None = None
        """Why the last attempt failed, while not listening."""

    def report(self) -> dict[str, object]:
        """The subscription's state as ``/healthz`` shows it."""
        report: dict[str, object] = {"listening": self.listening, "since": round(self.since, 3)}
        if not self.listening:
            report["failures"] = self.failures
            if self.error:
                report["error"] = self.error
        return report

    def _set(self, listening: bool, error: str | None = None) -> None:
        if listening != self.listening:
            self.since = time.time()
        self.listening = listening
        self.error = error

    async def run(
        self,
        subscribe: Callable[[], AbstractAsyncContextManager[AsyncIterator[_Item]]],
        handle: Callable[[_Item], Awaitable[None]],
        *,
        lost: Callable[[], None] | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        """Listen until cancelled, through every outage of the store; never raises anything else."""
        backoff = backoff or Backoff()
        while True:
            try:
                async with subscribe() as messages:
                    self._set(True)
                    self.failures = 0
                    backoff.reset()
                    try:
                        async for message in messages:
                            try:
                                await handle(message)
                            except Exception:
                                logger.exception("%s: a message could not be handled", self.name)
                    finally:
                        self._set(False, "the connection to the store was lost")
                        if lost is not None:
                            lost()
            except StoreUnavailable as exc:
                self._set(False, str(exc))
            except Exception as exc:
                logger.exception("%s: the subscription failed", self.name)
                self._set(False, f"{type(exc).__name__}: {exc}")
            self.failures += 1
            if self.failures == 3:
                logger.warning("%s: not listening (%s); retrying", self.name, self.error)
            await backoff.pause()


async def supervised(name: str, loop: Callable[[], Awaitable[None]], *, backoff: Backoff | None = None) -> None:
    """Run ``loop`` until cancelled; if it ever returns or raises, log it (ERROR, with the traceback) and start it
    again after a pause, so that a background loop never ends the task group it runs in."""
    backoff = backoff or Backoff(first=0.5, most=10.0)
    while True:
        try:
            await loop()
        except Exception:
            logger.exception("%s stopped on an error; starting it again", name)
        else:
            logger.error("%s returned; starting it again", name)
        await backoff.pause()
