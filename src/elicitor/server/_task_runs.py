"""The runs of tasks in this replica: a task's tool running as a multi-round-trip :class:`~._rounds.Run`, fenced by
its claim on the record (:mod:`._journal`), writing its questions and its end to the record, woken by answers.

A run reaches the server through one narrow port, :class:`ToolRunner` ("run this tool for this task"): it needs no
connection, no session and no registry of tools, so a task runs the same on the replica that created it, on another
after a takeover, or after a restart. See ``_tasks.py`` for the engine that creates, serves and resumes tasks.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.abc
import msgspec

from .._exceptions import JSONRPCError
from ..protocol import ClientCapabilities, RequestMeta
from ..session import internal_error
from ..state import StoreUnavailable, TaskRecord
from ..types import Implementation, JSONObject, JSONValue
from ._journal import Apply, Change, Claim, OnceSteps, act, patient, table
from ._rounds import AnswerBook, Finished, NeedsInput, RoundAsker, Run

if TYPE_CHECKING:
    from ._server import Server

logger = logging.getLogger("elicitor.server")

Notify = Callable[[str, JSONObject], Awaitable[None]]


class ToolRunner(Protocol):
    """The port through which a task runs its tool: what a connection offers (``ServerSession.run_tool``)."""

    def run_tool(
        self,
        name: str,
        arguments: JSONValue,
        meta: RequestMeta,
        asker: RoundAsker,
        notify: Notify,
        *,
        task_id: str,
        progress_token: JSONValue,
    ) -> tuple[Callable[[], Awaitable[JSONObject]], object]:
        """How to invoke tool ``name`` with ``arguments`` for task ``task_id`` (its questions through ``asker``, its
        notifications through ``notify``), and the context it gets; an unknown tool fails when invoked."""
        ...


class _Parked(Claim):
    """A run of a task in this replica, holding the task's claim as of ``epoch`` (see :mod:`._journal`).

    ``wake`` is set when answers (or a cancel) may be waiting; ``ended`` once it wrote the task's end."""

    __slots__ = ("ended", "run", "since", "wake")

    def __init__(self, task_id: str, epoch: int) -> None:
        super().__init__(task_id, epoch)
        self.run: Run | None = None
        self.wake = anyio.Event()
        self.since = time.monotonic()
        self.ended = False

    @property
    def task_id(self) -> str:
        return self.record_id


class TaskRuns:
    """The runs of tasks in this replica, working or waiting for a person (a bounded cache: the record suffices).

    Args:
        server: whose store keeps the records.
        change: the engine's compare-and-swap of a record (it also wakes ``tasks/result`` waiters).
        max_parked: runs kept waiting for a person; beyond, the run waiting longest is dropped and its task
            resumes by replay when answered.
    """

    def __init__(self, server: Server, change: Change, *, max_parked: int) -> None:
        self._server = server
        self._change = change
        self.max_parked = max_parked
        self.table: dict[str, _Parked] = {}
        """Runs of tasks in this replica, working or waiting."""
        self._waiting: OrderedDict[str, _Parked] = OrderedDict()
        """The runs among them that wait for a person, longest waiting first (the first dropped beyond the bound)."""
        self.forward: dict[str, Notify] = {}
        """2025-11-25 tasks: where their progress goes (the requestor's session), while it lasts."""
        self.watch_every = 1.0
        """Seconds between a run's own reads of its record, with replicas (see :meth:`_watch`)."""

    @property
    def replica(self) -> str:
        return str(self._server.store.replica)

    def start(self, runner: ToolRunner, record: TaskRecord, tg: anyio.abc.TaskGroup) -> None:
        """Start the task's run here, holding the claim ``record`` carries: a replay from the record (on
        creation, nothing to replay yet)."""
        call = record.call
        meta = RequestMeta(
            call.get("revision"),  # type: ignore[arg-type]
            ClientCapabilities.parse(call.get("capabilities")),
            _implementation(call.get("client")),
            log_level=call.get("log"),
            principal=record.principal,
        )
        parked = self.table[record.id] = _Parked(record.id, record.epoch)
        book = AnswerBook.unpack(record.answers.get("a"))
        asker = RoundAsker(book, {}, dict(table(record.answers.get("m"))))
        asker.task_mode = True
        asker.journal = OnceSteps(self._change, parked)
        notify = functools.partial(self._notified, parked)
        token = call.get("progress")
        invoke, ctx = runner.run_tool(
            str(call.get("name")), call.get("arguments"), meta, asker, notify,
            task_id=record.id, progress_token=token if token is not None else record.id,
        )  # fmt: skip
        parked.run = Run(invoke, asker, ctx)
        tg.start_soon(self._drive, parked)

    async def _drive(self, parked: _Parked) -> None:
        """Run the task to its end: write its questions, wait for answers, write its result.

        Nothing escapes: this runs in the application's (or connection's) task group, which a task's failure must
        never end. A run that stops without writing the task's end (dropped to make room, or the shared state
        failed) lets the task go, so the next replica that sees it answered or polled takes it over."""
        task_id = parked.task_id
        try:
            await self._drive_run(parked)
        except Exception:
            logger.exception("task %.8s...: its run stopped", task_id)
        finally:
            assert parked.run is not None
            parked.run.cancel()
            if self.table.get(task_id) is parked:
                del self.table[task_id]
            if self._waiting.get(task_id) is parked:
                del self._waiting[task_id]
            if not parked.ended and not parked.lost:
                with anyio.CancelScope(shield=True):
                    await self._let_go(parked)
            if task_id not in self.table:
                self.forward.pop(task_id, None)

    async def _drive_run(self, parked: _Parked) -> None:
        """The run itself, within the task's TTL and its cancel scope (``tasks/cancel``, dropped, or lost)."""
        run, task_id = parked.run, parked.task_id
        assert run is not None
        record = await self._server.store.tasks.get(task_id)
        remaining = record.created + record.ttl - time.time() if record is not None and record.ttl else None
        with parked.scope, anyio.move_on_after(remaining):
            async with anyio.create_task_group() as inner:
                inner.start_soon(run.main)
                if self._server.store.shared:
                    inner.start_soon(self._watch, parked)
                while True:
                    try:
                        outcome = await run.next()
                    except JSONRPCError as exc:
                        await self._finish(parked, "failed", error=_error(exc.code, exc.message, exc.data))
                        break
                    except Exception as exc:  # its text stays in the log: the record is read by the client
                        failure = internal_error(exc, f"task {task_id[:8]}...")  # the log names a task by 8 characters
                        await self._finish(parked, "failed", error=_error(failure.code, failure.message, failure.data))
                        break
                    if isinstance(outcome, Finished):
                        await self._finish(parked, "completed", result=outcome.value)
                        break
                    if isinstance(outcome, NeedsInput) and not await self._wait_for_answers(parked, outcome):
                        break
                inner.cancel_scope.cancel()

    async def _watch(self, parked: _Parked) -> None:
        """With replicas: read the record now and then, so a run notices on its own that it lost the task (a
        stall outlived its lease and another replica took over: the run stops), that the task ended elsewhere, or
        that its questions were answered though the message saying so was lost."""
        while True:
            await anyio.sleep(self.watch_every)
            try:
                current = await self._server.store.tasks.get(parked.task_id)
            except StoreUnavailable:
                continue
            if current is None or current.terminal or current.epoch != parked.epoch:
                parked.lose()
                return
            if current.status == "working" and parked.task_id in self._waiting:
                parked.wake.set()

    async def _wait_for_answers(self, parked: _Parked, outcome: NeedsInput) -> bool:
        """Write the open questions; wait until they are answered. False: the run ends here (cancelled, expired,
        or dropped from this replica to make room — then a later answer replays it)."""
        run, task_id = parked.run, parked.task_id
        assert run is not None
        asks = outcome.input_requests
        answers = run.asker.answers.pack()
        memo = run.asker.memo or {}

        def ask(current: TaskRecord) -> TaskRecord | None:
            if current.terminal:
                return None
            book = AnswerBook.unpack(current.answers.get("a"))
            still = {key: value for key, value in asks.items() if book.get(key) is None}
            kept = table(current.answers.get("m"))
            return dataclasses.replace(
                current, status="input_required" if still else "working", asks=still,
                answers={**current.answers, "a": _merge(answers, book), "m": {**memo, **kept}}, updated=time.time(),
            )  # fmt: skip

        while True:
            written = await self._act(parked, ask)
            if written is None:
                return False  # terminal (cancelled), gone (expired), or no longer this run's
            if written.status == "input_required":
                self._park(task_id, parked)
                try:
                    await parked.wake.wait()
                finally:
                    self._waiting.pop(task_id, None)
                parked.wake = anyio.Event()
                current = await self._server.store.tasks.get(task_id)
                if current is None or current.terminal or current.epoch != parked.epoch:
                    return False
                written = current
                if written.status == "input_required":
                    continue  # partly answered (or woken for nothing): wait on
            run.asker.next_round(AnswerBook.unpack(written.answers.get("a")).answers)
            return True

    def _park(self, task_id: str, parked: _Parked) -> None:
        """Keep the waiting run, within ``max_parked``: the run waiting longest beyond it is dropped (its task
        resumes by replay when answered). With ``max_parked`` 0 this run itself is dropped at once."""
        parked.since = time.monotonic()
        self._waiting[task_id] = parked
        while len(self._waiting) > max(self.max_parked, 0):
            dropped_id, dropped = self._waiting.popitem(last=False)
            if self.table.get(dropped_id) is dropped:
                del self.table[dropped_id]
            dropped.scope.cancel()

    async def _let_go(self, parked: _Parked) -> None:
        """The run stopped without ending the task: clear its claim (if still its own), so that whichever replica
        next sees the task answered or polled runs it. Best effort: an owner whose lease lapses lets go too."""

        def apply(current: TaskRecord) -> TaskRecord | None:
            if current.terminal or current.epoch != parked.epoch or current.owner != self.replica:
                return None
            return dataclasses.replace(current, owner=None)

        try:
            await self._change(parked.task_id, apply)
        except (StoreUnavailable, JSONRPCError):
            logger.info(
                "task %.8s...: could not let it go; it is taken over once this replica's lease lapses", parked.task_id
            )

    async def _finish(
        self, parked: _Parked, status: str, *, result: JSONObject | None = None, error: JSONObject | None = None
    ) -> None:
        def apply(current: TaskRecord) -> TaskRecord | None:
            if current.terminal:
                return None  # cancelled meanwhile: the cancel stands
            message = error.get("message") if error is not None else None
            return dataclasses.replace(
                current, status=status, result=result, error=error, asks={}, updated=time.time(), owner=None,
                message=str(message) if message is not None else None,
            )  # fmt: skip

        if await self._act(parked, apply) is not None:
            parked.ended = True

    async def _notified(self, parked: _Parked, method: str, params: JSONObject) -> None:
        """What the tool sends while it runs as a task: progress messages become the ``statusMessage`` (ext-tasks:
        progress and log notifications are not carried for tasks)."""
        forward = self.forward.get(parked.task_id)
        if forward is not None:
            with suppress(Exception):  # the requestor's session may be gone: the task goes on
                await forward(method, params)
        if method != "notifications/progress" or not isinstance(params.get("message"), str):
            return
        message = params["message"]

        def apply(current: TaskRecord) -> TaskRecord | None:
            if current.terminal or current.message == message:
                return None
            return dataclasses.replace(current, message=message, updated=time.time())

        try:
            await act(self._change, parked, apply)  # not patient: a progress message is not worth a wait
        except StoreUnavailable:
            logger.warning("task %.8s...: could not record its progress message", parked.task_id)

    async def _act(self, parked: _Parked, apply: Apply) -> TaskRecord | None:
        """:meth:`_change` for a run, fenced by its claim (:func:`~._journal.act`)."""
        return await act(patient(self._change), parked, apply)


def _error(code: int, message: str, data: JSONValue = None) -> JSONObject:
    error: JSONObject = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


def _merge(packed: JSONObject, book: AnswerBook) -> JSONObject:
    """The run's answers with any the record has that the run has not seen (answered meanwhile)."""
    merged = AnswerBook.unpack(packed)
    for key, answer in book.answers.items():
        merged.add(key, answer)
    return merged.pack()


def _implementation(raw: object) -> Implementation | None:
    if not isinstance(raw, dict):
        return None
    try:
        return msgspec.convert(raw, Implementation)
    except msgspec.ValidationError:
        return None
