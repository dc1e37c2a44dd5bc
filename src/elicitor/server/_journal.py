"""Fenced records: what a run of a call writes to the shared store, and why a stalled run cannot write twice.

A task (``_tasks.py``) and a handshake-era call kept under its idempotency key (``_calls.py``) are both a
:class:`~elicitor.state.TaskRecord` that one run at a time acts for. Which run is the record's ``epoch`` (a fencing
token, Kleppmann, "How to do distributed locking"): every claim raises it, a run holds the epoch it claimed
(:class:`Claim`), and every write of a run checks it inside the same compare-and-swap (:func:`act`). A run that
stalled past its claim (a GC pause, a SIGSTOP, a replica whose lease lapsed) and wakes after another run took over
cannot write: it is cancelled instead (:meth:`Claim.lose`).

``ctx.once`` steps go through :class:`OnceSteps`: a step is recorded as *started* (with the epoch) before it runs and
its value after, merged by name into the record, never replacing the others. A fenced run cannot start a step; a step
that an earlier run started and never finished (its replica stopped mid-step) is never run again: its outcome is
unknown, and the call fails saying so. Hence the promise: a ``ctx.once`` step runs at most once per name per call,
whatever replicas stall, die or restart, as long as the store keeps its data.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable

import anyio

from .._exceptions import JSONRPCError
from ..state import StoreUnavailable, TaskRecord, TaskRegistry
from ..types import INTERNAL_ERROR, JSONValue

logger = logging.getLogger("elicitor.server")

Apply = Callable[[TaskRecord], "TaskRecord | None"]
"""A change to a record: the record to store instead, or ``None`` to change nothing."""
Change = Callable[[str, Apply], Awaitable["TaskRecord | None"]]
"""Compare-and-swap ``apply`` onto a record until it sticks (see :func:`change`)."""


class Fenced(Exception):
    """Raised inside a compare-and-swap: the run's claim is no longer the record's (see :meth:`Claim.lose`)."""


class Claim:
    """A run's hold on a record as of ``epoch``; ``scope`` is the run's own cancel scope, cancelled when it loses."""

    __slots__ = ("epoch", "gone", "lost", "record_id", "scope")

    def __init__(self, record_id: str, epoch: int) -> None:
        self.record_id = record_id
        self.epoch = epoch
        self.scope = anyio.CancelScope()
        self.lost = False
        self.gone = False
        """Lost because the record is no longer there (it expired, or the store lost its data), not to a newer run:
        no other run goes on with it, which is what the caller must be told."""

    def lose(self, *, gone: bool = False) -> None:
        """The record ended, expired or was claimed by a newer run (``gone``: it is not there any more): this run
        stops and writes nothing more."""
        if not self.lost:
            self.lost, self.gone = True, gone
            if gone:
                logger.warning(
                    "%.8s...: its record is gone (expired, or the store lost its data): this run stops", self.record_id
                )
            else:
                logger.info(
                    "%.8s...: ended or claimed by a newer run (epoch > %d): this run stops", self.record_id, self.epoch
                )
        self.scope.cancel()


async def change(
    registry: TaskRegistry, record_id: str, apply: Apply, *, known: TaskRecord | None = None
) -> TaskRecord | None:
    """Compare-and-swap ``apply`` onto the record until it sticks; ``None`` if it declined or the record is gone.

    ``known``: the record as the caller last stored or read it, tried first without reading it again (one round
    trip instead of two when nobody else wrote meanwhile). Only a swap of ``apply(known)`` that sticks counts: the
    swap is checked against the stored version, so it sticks only if ``known`` is still the record; anything else
    (the swap refused, ``apply`` declining or raising on it) is decided again on the record read afresh."""
    if known is not None:
        try:
            guess = apply(known)
        except Exception:
            guess = None
        if guess is not None:
            stored = await registry.swap(guess)
            if stored is not None:
                return stored
    for _ in range(64):
        current = await registry.get(record_id)
        if current is None:
            return None
        changed = apply(current)
        if changed is None:
            return None
        stored = await registry.swap(changed)
        if stored is not None:
            return stored
    raise JSONRPCError(INTERNAL_ERROR, f"Internal error: {record_id} changes too often to update")


PATIENCE = 60.0
"""Seconds a run's write waits for the store to come back (a restart, a failover, a pause) before it fails."""


def patient(write: Change) -> Change:
    """``write``, retried with backoff while the store is unavailable, for up to :data:`PATIENCE` seconds: a run's
    write (an answer, a step, the result) must not be lost to a Redis hiccup the deployment rides out."""

    async def patiently(record_id: str, apply: Apply) -> TaskRecord | None:
        give_up_at = anyio.current_time() + PATIENCE
        delay = 0.1
        while True:
            try:
                return await write(record_id, apply)
            except StoreUnavailable:
                if anyio.current_time() + delay > give_up_at:
                    raise
                logger.info("%.8s...: the shared state is unavailable; trying again in %.1f s", record_id, delay)
                await anyio.sleep(delay)
                delay = min(delay * 2, 5.0)

    return patiently


async def act(write: Change, claim: Claim, apply: Apply) -> TaskRecord | None:
    """``write`` ``apply`` for a run, fenced: it applies only while the record's epoch is the run's own, checked in
    the same compare-and-swap; a run that finds a newer epoch is cancelled (it lost the record)."""

    def fenced(current: TaskRecord) -> TaskRecord | None:
        if current.epoch != claim.epoch:
            raise Fenced
        return apply(current)

    try:
        return await write(claim.record_id, fenced)
    except Fenced:
        claim.lose()
        return None


def table(raw: object) -> dict[str, JSONValue]:
    """A mapping kept in a record (``ctx.once`` values, started steps), or empty."""
    return dict(raw) if isinstance(raw, dict) else {}


class OnceSteps:
    """The ``ctx.once`` steps of one run, kept in its record (``m``: values, ``p``: started steps and the epoch of
    the run that started each). See :class:`~._askers.OnceJournal` for the promise."""

    __slots__ = ("_claim", "_write")

    def __init__(self, write: Change, claim: Claim) -> None:
        self._write = patient(write)
        self._claim = claim

    async def begin(self, name: str) -> tuple[bool, JSONValue]:
        claim, found = self._claim, []

        def apply(current: TaskRecord) -> TaskRecord | None:
            if current.epoch != claim.epoch or current.terminal:
                raise Fenced
            memo = table(current.answers.get("m"))
            if name in memo:
                found.append(memo[name])
                return None
            started = table(current.answers.get("p"))
            if name in started:
                raise JSONRPCError(
                    INTERNAL_ERROR,
                    f"Internal error: the outcome of step {name!r} is unknown: an earlier run of this call started "
                    "it and stopped before recording its end, so it is not run again",
                )
            return dataclasses.replace(current, answers={**current.answers, "p": {**started, name: claim.epoch}})

        await self._fenced(apply, found)
        return (True, found[0]) if found else (False, None)

    async def keep(self, name: str, value: JSONValue) -> JSONValue:
        """Record ``value`` under ``name`` in one write, unless a value is recorded: then that one is returned.

        For a value whose making did nothing outside this process (a random id): written as a step's start and
        end at once, there is no moment at which the record says "started" without the value, so a replica that
        dies around it leaves either nothing (the next run makes another, which nobody has seen) or the value (the
        next run uses it). A start recorded without a value (by :meth:`begin`) is replaced: nothing ran that a
        second value could repeat."""
        claim, found = self._claim, []

        def apply(current: TaskRecord) -> TaskRecord | None:
            if current.epoch != claim.epoch or current.terminal:
                raise Fenced
            memo = table(current.answers.get("m"))
            if name in memo:
                found.append(memo[name])
                return None
            started = {key: epoch for key, epoch in table(current.answers.get("p")).items() if key != name}
            return dataclasses.replace(current, answers={**current.answers, "m": {**memo, name: value}, "p": started})

        await self._fenced(apply, found)
        return found[0] if found else value

    async def _fenced(self, apply: Apply, found: list[JSONValue]) -> None:
        """Write ``apply`` to this run's record; ``apply`` raises :class:`Fenced` if another run holds it, or puts a
        value already recorded in ``found`` and writes nothing. A run that may not go on (fenced, its record ended
        or gone) loses its claim and waits here for the cancellation that follows."""
        claim = self._claim
        fenced = False
        try:
            written = await self._write(claim.record_id, apply)
        except Fenced:
            written, fenced = None, True
        if written is None and not found:
            claim.lose(gone=not fenced)
            await anyio.sleep_forever()

    async def commit(self, name: str, value: JSONValue) -> None:
        """Record the value of a step that ran, whatever run holds the record now (merged by name)."""

        def apply(current: TaskRecord) -> TaskRecord | None:
            memo = table(current.answers.get("m"))
            if name in memo:
                return None
            started = {key: epoch for key, epoch in table(current.answers.get("p")).items() if key != name}
            return dataclasses.replace(current, answers={**current.answers, "m": {**memo, name: value}, "p": started})

        try:  # patient: a store away for up to a minute (a restart, a failover) still gets the value
            await self._write(self._claim.record_id, apply)
            return
        except StoreUnavailable:
            pass
        logger.error(
            "%.8s...: could not record the end of step %r: its outcome reads as unknown", self._claim.record_id, name
        )

    async def abandon(self, name: str) -> None:
        """The step raised: forget that it started (it may be tried again by a later run)."""
        epoch = self._claim.epoch

        def apply(current: TaskRecord) -> TaskRecord | None:
            started = table(current.answers.get("p"))
            if started.get(name) != epoch:
                return None
            kept = {key: value for key, value in started.items() if key != name}
            return dataclasses.replace(current, answers={**current.answers, "p": kept})

        try:
            await self._write(self._claim.record_id, apply)
        except StoreUnavailable:
            logger.warning("%.8s...: step %r failed and its start stays recorded", self._claim.record_id, name)
