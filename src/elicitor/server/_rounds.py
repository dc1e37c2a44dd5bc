"""Serve a 2026-07-28 request that may need input, round by round.

Design (docs/architecture.md, "One ctx.elicit, every revision"):

* **Stateless by construction.** Every answer known so far travels in the sealed ``requestState``; a retry that
  reaches a process that knows nothing of the call *replays* the handler from the top with those answers, each
  ``ctx.elicit`` whose answer is known returning at once. No replica needs memory of an earlier round.
* **Fast when the retry comes back.** Between rounds the run is *parked*: its task keeps waiting at the questions
  it asked, in a bounded, expiring table keyed by a random run id sealed into the state. A retry that carries that
  id and the expected round number resumes the run in place — each round costs O(1) instead of a replay of every
  earlier question. Parking is a cache, never a requirement: evicted, expired, restarted or on another replica,
  the retry replays.
* **One parked run per call.** A retry that lands on another replica replays the call there and parks the new run;
  the one it left behind would wait out its time to live, and a long call whose rounds go round three replicas
  would leave one per round. Every run of a call carries the call's id (sealed into the state from its first round
  on), and parking a run replaces whatever run of the same call was parked before it: a replica keeps at most one.
* **One round for questions asked together.** Once some question is pending, the driver lets the handler's other
  branches run until no new question has appeared for a few scheduler ticks, so questions awaited concurrently
  (``asyncio.gather``, a task group) go out in the same ``input_required`` result. A branch that waits on real
  I/O before asking is asked in the next round.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc
import anyio.lowlevel
import msgspec

from .._loop import running_asyncio_loop
from .._outcomes import wire_action
from ..session import Waiter
from ..telemetry import _state as _telemetry
from ..types import JSONObject, JSONValue

if TYPE_CHECKING:
    from ._askers import OnceJournal

_canonical = msgspec.json.Encoder(order="sorted").encode

_MAX_OCCURRENCE = 100_000

SETTLE_TICKS = 4
"""Scheduler ticks without a new question before a round is complete, once the handler asks from several tasks."""

PARKED_RUN_TTL = 600.0
"""Seconds a run stays parked by default (``Server(parked_run_ttl=...)``)."""

SOLO_TICKS = 0
"""The same while every question so far came from the handler's own task, which is now blocked in that question.
(A task it started earlier that asks later is asked in the next round: correct, one round more.)"""


def usable_response(method: str, response: object) -> bool:
    """Whether ``response`` can stand as the answer to an input request of ``method``.

    A malformed answer is treated as no answer: the question is asked again rather than failing the call
    (mrtr.mdx: if responses are missing, re-send an ``InputRequiredResult``).
    """
    if not isinstance(response, dict):
        return False
    if method == "elicitation/create":
        return wire_action(response) is not None  # a list or an object as the action: a malformed answer
    if method == "roots/list":
        return isinstance(response.get("roots"), list)
    if method == "sampling/createMessage":
        return "content" in response
    return True


def _current_task_id(loop: asyncio.AbstractEventLoop | None) -> int:
    """Which task is running: ``id()`` of asyncio's task on asyncio (anyio's ``get_current_task`` builds a
    ``TaskInfo`` on every call, a few µs per question), anyio's task id elsewhere."""
    if loop is not None:
        return id(asyncio.current_task(loop))
    return anyio.get_current_task().id


class RoundEnd(Protocol):
    """Answers a round's request once the run has asked again or ended (see :attr:`RoundAsker.round_end`)."""

    async def deliver(self) -> None:
        """Answer the request with the round's outcome, in the calling task."""
        ...

    def deliver_soon(self) -> None:
        """The same, in a task of its own."""
        ...


class _Waiter:
    __slots__ = ("answer", "event", "method")

    def __init__(self, method: str, loop: asyncio.AbstractEventLoop | None) -> None:
        self.method = method
        self.event = Waiter(loop)
        self.answer: JSONObject | None = None


class RoundAsker:
    """Serve questions from known answers; collect unknown ones into the current round's input requests.

    Attributes:
        answers: every answer known so far, by input-request key (what the sealed state carries forward).
        asks: the input requests of the current round, by key.
        activity: set whenever a question joins the current round.
    """

    def __init__(self, answers: AnswerBook, fresh: Mapping[str, Any], memo: dict[str, JSONValue]) -> None:
        self.answers = answers
        self.memo: dict[str, JSONValue] | None = memo
        self.journal: OnceJournal | None = None
        """Where ``ctx.once`` records its steps in the shared state (a task's run), besides ``memo``."""
        self.asked_in: object = None
        """Telemetry: when, and in which round, the previous round asked its questions (sealed in the state), so
        a replay records the ones this round answers from then (``telemetry/_hooks.py``, ``answered_elsewhere``)."""
        self.asks: dict[str, JSONObject] = {}
        self.loop = running_asyncio_loop()
        self.activity = Waiter(self.loop)
        self.owner: int | None = None
        self.concurrent = False
        """Whether a question came from a task other than the handler's own (so branches may ask together)."""
        self._fresh = fresh
        self._waiting: dict[str, _Waiter] = {}
        self.task_mode = False
        """The run is a task's: questions go to its record, and ``ctx.run_as_task()`` has nothing to do."""
        self.may_escalate = False
        """``ctx.run_as_task()`` turns this call into a task (the tool defers its task, the client can take it)."""
        self.escalate = False
        """The handler called ``ctx.run_as_task()``: the round ends and the call becomes a task."""
        self.round_end: RoundEnd | None = None
        """Who answers the current round's request when nobody waits on :meth:`Run.next` for it (a round taken
        without a task of its own): the run's own task delivers it as it asks again or ends."""

    async def become_task(self) -> None:
        """``ctx.run_as_task()``: end the multi-round-trip phase here; the call goes on as a task, replayed from
        the answers so far (this run is cancelled). Nothing to do in a task, or where no task can be made."""
        if self.task_mode or not self.may_escalate:
            return
        self.escalate = True
        self.activity.set()
        await anyio.sleep_forever()

    async def ask(self, method: str, params: JSONObject, key: str) -> JSONObject:
        answer = self.answers.get(key)
        if answer is None:
            candidate = self._fresh.get(key)
            if isinstance(candidate, dict) and usable_response(method, candidate):
                answer = candidate
                self.answers.add(key, candidate)
                if _telemetry.state.on and method == "elicitation/create":  # asked by a run that is not here
                    from ..telemetry import _hooks

                    _hooks.answered_elsewhere(params, candidate, self.asked_in)
        if answer is not None:
            return answer
        if not self.concurrent and _current_task_id(self.loop) != self.owner:
            self.concurrent = True
        waiter = self._waiting.get(key)
        if waiter is None:
            waiter = self._waiting[key] = _Waiter(method, self.loop)
        self.asks[key] = {"method": method, "params": params}
        self.activity.set()
        end = self.round_end
        if end is not None:
            self.round_end = None
            if self.concurrent:
                end.deliver_soon()  # other branches may still ask: the round settles in a task of its own
            else:
                await end.deliver()  # the handler's only task waits here anyway: it answers the round itself
        if _telemetry.state.on and method == "elicitation/create":
            from ..telemetry import _hooks

            return await _hooks.elicitation("server", params, _answer(waiter), within=self)
        await waiter.event.wait()
        assert waiter.answer is not None
        return waiter.answer

    def next_round(self, fresh: Mapping[str, Any]) -> None:
        """Start a round with this retry's ``inputResponses``: wake every question they answer.

        Questions still unanswered stay in ``asks`` (they are asked again); unknown keys are ignored.
        """
        self._fresh = fresh
        self.activity = Waiter(self.loop)
        for key, waiter in list(self._waiting.items()):
            candidate = fresh.get(key)
            if isinstance(candidate, dict) and usable_response(waiter.method, candidate):
                self.answers.add(key, candidate)
                waiter.answer = candidate
                del self._waiting[key]
                self.asks.pop(key, None)
                waiter.event.set()
        if self.asks:
            self.activity.set()


async def _answer(waiter: _Waiter) -> JSONObject:
    await waiter.event.wait()
    assert waiter.answer is not None
    return waiter.answer


@dataclass(slots=True)
class Finished:
    value: JSONObject


@dataclass(slots=True)
class NeedsInput:
    input_requests: dict[str, JSONObject]


@dataclass(slots=True)
class Escalate:
    """The handler called ``ctx.run_as_task()``: the call becomes a task with the answers gathered so far."""


class Run:
    """One handler invocation on the 2026-07-28 path, alive across rounds while parked."""

    def __init__(
        self, invoke: Callable[[], Awaitable[JSONObject]], asker: RoundAsker, context: Any, call: object = None
    ) -> None:
        self.id = os.urandom(12).hex()
        self.call = call if isinstance(call, str) and len(call) == 24 else self.id
        """The call this run serves: the id of its first run, carried from round to round in the sealed state."""
        self.round = 0
        self.asker = asker
        self.context = context
        self._invoke = invoke
        self._scope = anyio.CancelScope()
        self._done = False
        self._result: JSONObject | None = None
        self._failure: BaseException | None = None

    async def main(self) -> None:
        self.asker.owner = _current_task_id(self.asker.loop)
        with self._scope:
            try:
                self._result = await self._invoke()
            except Exception as exc:
                self._failure = exc
        self._done = True
        self.asker.activity.set()
        end = self.asker.round_end
        if end is not None:
            self.asker.round_end = None
            await end.deliver()

    def cancel(self) -> None:
        self._scope.cancel()

    async def next(self) -> Finished | NeedsInput | Escalate:
        """Wait until the handler finishes or every branch waits on an unanswered question.

        Raises:
            Exception: whatever the handler raised (a ``JSONRPCError`` becomes the request's error).
        """
        await self.asker.activity.wait()
        seen = -1
        while not self._done and seen != len(self.asker.asks):
            seen = len(self.asker.asks)
            for _ in range(SETTLE_TICKS if self.asker.concurrent else SOLO_TICKS):
                await anyio.lowlevel.checkpoint()
                if self._done:
                    break
        if self._done:
            if self._failure is not None:
                raise self._failure
            assert self._result is not None
            return Finished(self._result)
        if self.asker.escalate:
            return Escalate()
        self.round += 1
        return NeedsInput(dict(self.asker.asks))


class ParkedRuns:
    """Runs waiting for their next round, bounded in number and age; the oldest go first.

    A client that never comes back for the next round must not keep a run's task (and whatever the tool holds)
    alive: a sweeper task, running only while something is parked, cancels each run once its ``ttl`` has passed.

    Args:
        task_group: where parked runs' tasks live (the connection's or the application's lifetime).
        limit: the most runs parked at once; parking one more evicts (cancels) the oldest.
        ttl: seconds a run stays parked; the sealed state outlives it, so a late retry simply replays.
    """

    def __init__(self, task_group: anyio.abc.TaskGroup, *, limit: int = 1024, ttl: float = PARKED_RUN_TTL) -> None:
        self._tg = task_group
        self._limit = limit
        self._ttl = ttl
        self._runs: OrderedDict[str, tuple[float, Run]] = OrderedDict()
        self._calls: dict[str, str] = {}
        """The parked run of each call, by call id."""
        self._sweeping = False
        _telemetry.refresh()
        _telemetry.track_parked(self)

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        """Where work that outlives a request runs (parked runs, tasks)."""
        return self._tg

    def start(self, run: Run) -> None:
        self._tg.start_soon(run.main)

    def park(self, run: Run) -> None:
        """Keep ``run`` for its next round, instead of any run of the same call parked before; with a limit of 0
        nothing is kept (every retry replays)."""
        if self._limit <= 0:
            run.cancel()
            return
        earlier = self._calls.get(run.call)
        if earlier is not None and earlier != run.id:
            self._drop(earlier)  # the call went on elsewhere: this replica's older run of it cannot be resumed
        now = time.monotonic()
        while self._runs:
            oldest_id, (since, _) = next(iter(self._runs.items()))
            if len(self._runs) < self._limit and now - since < self._ttl:
                break
            self._drop(oldest_id)
        self._runs[run.id] = (now, run)
        self._calls[run.call] = run.id
        if not self._sweeping:
            self._sweeping = True
            self._tg.start_soon(self._sweep)

    async def _sweep(self) -> None:
        """Cancel runs whose time is up, oldest first (the table is in parking order), until none is parked."""
        try:
            while self._runs:
                run_id, (since, _) = next(iter(self._runs.items()))
                remaining = since + self._ttl - time.monotonic()
                if remaining > 0:
                    await anyio.sleep(remaining)
                    continue  # the oldest may have been claimed meanwhile: look again
                self._drop(run_id)
        finally:
            self._sweeping = False

    def _drop(self, run_id: str) -> None:
        """Cancel the parked run ``run_id`` and forget it."""
        _, run = self._runs.pop(run_id)
        self._release(run)
        run.cancel()

    def _release(self, run: Run) -> None:
        if self._calls.get(run.call) == run.id:
            del self._calls[run.call]

    def claim(self, run_id: object, round_number: object, call: object = None) -> Run | None:
        """Take the parked run ``run_id`` if it waits for round ``round_number``; it is no longer parked.

        A retry of an older round (the client sent the same state twice) leaves the run parked: that retry
        replays, and the run stays available to the retry of its current round. A round of ``call`` from a run
        parked elsewhere (the call went on on another replica) ends the run of that call parked here, if any: the
        client holds a state this run never produced, most likely a later one (at worst, a retry of this run's
        round replays).
        """
        if not isinstance(run_id, str):
            return None
        entry = self._runs.get(run_id)
        if entry is None:
            stale = self._calls.get(call) if isinstance(call, str) else None
            if stale is not None:
                self._drop(stale)
            return None
        if entry[1].round != round_number:
            return None
        del self._runs[run_id]
        since, run = entry
        self._release(run)
        if time.monotonic() - since >= self._ttl:
            run.cancel()
            return None
        return run

    def __len__(self) -> int:
        return len(self._runs)


class AnswerBook:
    """Every answer known for one call, kept in the compact form the sealed state carries.

    Each distinct answer is stored once. A question asked again gets keys ``base``, ``base~2``, ``base~3``...;
    per base, the answers' indexes are kept run-length encoded (``[index, count, index, count, ...]``, index -1 for
    a gap), so a call that asked the same question thousands of times carries a state of a few hundred bytes, and
    adding an answer costs the same however many came before.
    """

    __slots__ = ("_index", "_lengths", "_runs", "_values", "answers")

    def __init__(self) -> None:
        self.answers: dict[str, JSONObject] = {}
        self._values: list[JSONObject] = []
        self._index: dict[bytes, int] | None = {}
        """Each distinct answer's position in ``_values``, by its canonical JSON; ``None`` until an answer is added
        to an unpacked book (a replayed round mostly reads, so it is built from the distinct answers only then)."""
        self._runs: dict[str, list[int]] = {}
        self._lengths: dict[str, int] = {}

    def get(self, key: str) -> JSONObject | None:
        return self.answers.get(key)

    def add(self, key: str, answer: JSONObject) -> None:
        if key in self.answers:
            return
        self.answers[key] = answer
        base, occurrence = _split(key)
        index = self._index
        if index is None:
            index = self._index = {}
            for known, value in enumerate(self._values):
                index.setdefault(_canonical(value), known)
        blob = _canonical(answer)
        position = index.get(blob)
        if position is None:
            position = index[blob] = len(self._values)
            self._values.append(answer)
        runs = self._runs.setdefault(base, [])
        length = self._lengths.get(base, 0)
        if occurrence <= length:  # filling a gap left by an earlier, unanswered occurrence
            slots = _expand(runs)
            slots[occurrence - 1] = position
            self._runs[base] = _compress(slots)
            return
        if occurrence > length + 1:
            _append(runs, -1, occurrence - length - 1)
        _append(runs, position, 1)
        self._lengths[base] = occurrence

    def pack(self) -> JSONObject:
        return {"v": self._values, "k": self._runs}

    @classmethod
    def unpack(cls, packed: object) -> AnswerBook:
        """Read a packed book; anything malformed reads as no answers (those questions are asked again).

        A replayed round reads every answer the call has gathered, so this costs one dictionary entry per answer
        and nothing more per answer: a book as :meth:`pack` writes it is taken as it is (its runs and distinct
        answers, checked for shape), not added again answer by answer. Anything else (which no replica seals) is
        read answer by answer through :meth:`add`, keeping what reads as an answer.
        """
        book = cls()
        if not isinstance(packed, dict):
            return book
        values, keys = packed.get("v"), packed.get("k")
        if not isinstance(values, list) or not isinstance(keys, dict):
            return book
        if all(isinstance(value, dict) for value in values) and all(
            _as_packed(base, runs, len(values)) for base, runs in keys.items()
        ):
            book._values = list(values)  # adding to the book must not change the caller's list
            book._index = None
            answers = book.answers
            for base, runs in keys.items():
                slots = _expand(runs)
                for occurrence, position in enumerate(slots, 1):
                    if position >= 0:
                        answers[base if occurrence == 1 else f"{base}~{occurrence}"] = values[position]
                book._runs[base] = list(runs)
                book._lengths[base] = len(slots)
            return book
        for base, runs in keys.items():
            if not _well_formed(runs):
                continue
            for occurrence, position in enumerate(_expand(runs), 1):
                if 0 <= position < len(values) and isinstance(values[position], dict):
                    book.add(base if occurrence == 1 else f"{base}~{occurrence}", values[position])
        return book


def _well_formed(runs: object) -> bool:
    """Whether ``runs`` reads as a base's runs: ``[index, count, ...]``, counts positive and not too many."""
    if not isinstance(runs, list) or len(runs) % 2 or not all(isinstance(n, int) for n in runs):
        return False
    return sum(runs[1::2]) <= _MAX_OCCURRENCE and min(runs[1::2], default=1) >= 1


def _as_packed(base: str, runs: object, values: int) -> bool:
    """Whether a base and its runs are as :meth:`AnswerBook.pack` writes them: runs that point at the answers or
    are gaps (-1) and end with an answer, and only occurrences whose key :func:`_split` reads back as this base's
    (the first of a key that is not its own base, such as ``q~2``, is a gap: that key is ``q``'s second)."""
    if not _well_formed(runs):
        return False
    assert isinstance(runs, list)
    if not runs or runs[-2] < 0 or not all(-1 <= position < values for position in runs[::2]):
        return False
    if not base:
        return runs == [runs[0], 1]  # "~2" is a key of its own, not the empty key's second occurrence
    return runs[0] == -1 or _split(base) == (base, 1)


def _append(runs: list[int], position: int, count: int) -> None:
    if runs and runs[-2] == position:
        runs[-1] += count
    else:
        runs += (position, count)


def _expand(runs: list[int]) -> list[int]:
    slots: list[int] = []
    for position, count in zip(runs[::2], runs[1::2], strict=True):
        slots += [position] * count
    return slots


def _compress(slots: list[int]) -> list[int]:
    runs: list[int] = []
    for position in slots:
        _append(runs, position, 1)
    return runs


def _split(key: str) -> tuple[str, int]:
    base, _, suffix = key.rpartition("~")
    # ASCII digits, and few: int() refuses "²" (which isdigit() accepts) and strings of thousands of digits.
    plain = suffix.isascii() and suffix.isdigit() and len(suffix) <= 6 and not suffix.startswith("0")
    if base and plain and 2 <= int(suffix) <= _MAX_OCCURRENCE:
        return base, int(suffix)
    return key, 1
