"""Calls kept waiting on purpose, for the memory scenarios: a handler that holds each question until released.

The memory benchmarks (``run.py``'s (d) and (dh), ``http_memory.py``, ``replicas.py``) warm the server up with
answers given at once, then arm a :class:`Holding`: from then on every question that reaches the client's handler
is counted and held, so that ``count`` calls are pending at once while the server's memory is read, until
``release`` lets them all go.
"""

from __future__ import annotations

from typing import Any

import anyio

from elicitor import Accepted, ElicitationRequest

ANSWER = {"name": "x", "age": 1}
"""What the workload's client answers (docs/benchmarks.md)."""


class Holding:
    """Counts the questions that arrive once armed and holds each one until :attr:`release` is set."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.armed = False
        self.arrived = 0
        self.all_in = anyio.Event()
        """Set when ``count`` questions are held."""
        self.release = anyio.Event()

    async def hold(self) -> None:
        """Return at once before :attr:`armed`; after, count this question and wait for :attr:`release`."""
        if not self.armed:
            return
        self.arrived += 1
        if self.arrived == self.count:
            self.all_in.set()
        await self.release.wait()

    async def handler(self, request: ElicitationRequest) -> Accepted[dict[str, Any]]:
        """elicitor's elicitation handler: the workload's answer, once held."""
        await self.hold()
        return Accepted(ANSWER)
