"""Serve one 2026-07-28 request that may need input: run the handler, end the round when it blocks.

Design (docs/architecture.md, "One ctx.elicit, every revision"): the handler is re-run from the top on every
retry. Answers of earlier rounds travel in the sealed ``requestState``; the current round's answers arrive in
``inputResponses``. Each ``ctx.elicit`` whose answer is known returns at once; an unknown one parks its task.
Once some task is parked, the driver lets the handler's other branches run until no new question has appeared
for a few scheduler ticks (so questions awaited together — ``asyncio.gather``, a task group — go out in one
round), then cancels the run and returns ``input_required`` with every question collected. Branches that wait on
real I/O before asking are asked in the next round. No server memory survives between rounds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import anyio
import anyio.lowlevel

from ..types import JSONObject
from ._askers import ReplayAsker

R = TypeVar("R")

SETTLE_TICKS = 4
"""Scheduler ticks without a new question before a round is considered complete."""


@dataclass(slots=True)
class Finished(Generic[R]):
    value: R


@dataclass(slots=True)
class NeedsInput:
    input_requests: dict[str, JSONObject]


async def run_round(run: Callable[[], Awaitable[R]], asker: ReplayAsker) -> Finished[R] | NeedsInput:
    """Run ``run`` until it finishes (``Finished``) or blocks on unknown questions (``NeedsInput``).

    Exceptions raised by ``run`` propagate unchanged (not wrapped in an exception group).
    """
    outcome: list[Finished[R]] = []
    failure: list[BaseException] = []

    async with anyio.create_task_group() as tg:

        async def runner() -> None:
            try:
                outcome.append(Finished(await run()))
            except Exception as exc:
                failure.append(exc)
            tg.cancel_scope.cancel()

        tg.start_soon(runner)
        await asker.blocked.wait()
        seen = -1
        while seen != len(asker.asks):
            seen = len(asker.asks)
            for _ in range(SETTLE_TICKS):
                await anyio.lowlevel.checkpoint()
        tg.cancel_scope.cancel()

    if failure:
        raise failure[0]
    if outcome:
        return outcome[0]
    return NeedsInput(dict(asker.asks))
