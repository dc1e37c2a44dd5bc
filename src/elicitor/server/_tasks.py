"""Tasks (2026-07-28 extension ``io.modelcontextprotocol/tasks``): a tool call that runs on its own and asks the
person mid-way through ``tasks/get`` and ``tasks/update``.

Spec: ../spec/ext-tasks/tasks.md (SEP-2663). The design (docs/architecture.md, "Tasks"):

* **The record is the truth.** A task is a :class:`~elicitor.state.TaskRecord` in the shared state (memory, or
  Redis for replicas): its status, the answers gathered so far and the ``ctx.once`` values (what a replay needs),
  the questions still open, the result. Every change is a compare-and-swap, so replicas racing on one task agree,
  and a terminal status is never overwritten.
* **The tool runs as on the multi-round-trip path.** A task's run is a :class:`~._rounds.Run` whose questions are
  collected by a :class:`~._rounds.RoundAsker`: when the tool waits on questions, they are written to the record
  (``input_required``); ``tasks/update`` adds the answers to the record and, once none is open, the run goes on.
* **A parked coroutine is a cache, the record suffices.** While it waits for a person, the run is kept in this
  replica (bounded by ``Server(max_parked_tasks=...)``) so answering costs nothing; evicted, on another replica,
  or after a replica died, the task is resumed by *replaying* the tool from the record: answered questions return
  at once, ``ctx.once`` steps are not run again. A task whose runner died while ``working`` is taken over by the
  replica that next sees it, so nothing stays ``working`` forever.
* **Questions before the task exists** (``@server.tool(task=..., defer_task=True)``) go through ordinary
  ``input_required`` rounds; ``await ctx.run_as_task()`` then creates the task with the answers so far and the
  call returns ``CreateTaskResult`` (the spec's SHOULD: multi-round-trip first, then the task).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextlib import suppress
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

import anyio
import anyio.abc
import msgspec

from .._exceptions import JSONRPCError
from ..protocol import ClientCapabilities, RequestMeta
from ..state import StoreUnavailable, Subscription, TaskRecord, TaskRegistry
from ..telemetry import _state as _telemetry
from ..types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    TASKS_EXTENSION,
    Implementation,
    JSONObject,
    JSONValue,
    RequestId,
    is_modern,
)
from ._journal import Apply, Claim, OnceSteps, act, change, patient, table
from ._rounds import AnswerBook, Finished, NeedsInput, RoundAsker, Run, usable_response

if TYPE_CHECKING:
    from ._dispatch import ServerSession
    from ._server import Server
    from ._tools import ToolDef

logger = logging.getLogger("elicitor.server")

TaskSupport = Literal["never", "optional", "required"]
"""Whether a tool runs as a task: never, when the client can (``optional``), or always (``required``: a client
without the extension gets -32021)."""

_TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
_LEGACY_TASK_METHODS = frozenset({"tasks/get", "tasks/result", "tasks/cancel"})


def declares_tasks(capabilities: ClientCapabilities) -> bool:
    """Whether this request's client declared the tasks extension (per request on 2026-07-28)."""
    extensions = capabilities.raw.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def missing_tasks_extension(what: str) -> JSONRPCError:
    """-32021 naming the extension (ext-tasks "Capability Negotiation")."""
    return JSONRPCError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"Missing required client capability: {what} needs the {TASKS_EXTENSION} extension",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


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


class TaskEngine:
    """Creates, drives and answers for the tasks of one server, in this replica (see the module docstring).

    Args:
        server: whose tools run as tasks and whose store keeps the records.
        ttl: seconds a task is kept from its creation (``ttlMs``); its run is cancelled then.
        poll_interval: seconds between polls suggested to clients (``pollIntervalMs``).
        max_parked: runs kept waiting for a person in this replica; beyond, the oldest waiting run is dropped and
            its task resumes by replay when answered. 0 keeps none: every answer replays the tool.
    """

    def __init__(self, server: Server, *, ttl: float, poll_interval: float, max_parked: int) -> None:
        self._server = server
        self.ttl = ttl
        self.poll_interval = poll_interval
        self.max_parked = max_parked
        self._runs: dict[str, _Parked] = {}
        """Runs of tasks in this replica, working or waiting."""
        self._waiting: OrderedDict[str, _Parked] = OrderedDict()
        """The runs among them that wait for a person, longest waiting first (the first dropped beyond the bound)."""
        self._forward: dict[str, Callable[[str, JSONObject], Awaitable[None]]] = {}
        """2025-11-25 tasks: where their progress goes (the requestor's session), while it lasts."""
        self._changes: dict[str, anyio.Event] = {}
        """Set when a task's record changes in this replica (``tasks/result`` waits on it, polling besides)."""
        self._watch_every = 1.0
        """Seconds between a run's own reads of its record, with replicas (see :meth:`_watch`)."""
        self.subscription = Subscription("tasks")
        """This replica's tasks channel (replicas sharing a store), as ``/healthz`` reports it."""

    @property
    def _registry(self) -> TaskRegistry:
        return self._server.store.tasks

    @property
    def replica(self) -> str:
        return str(self._server.store.replica)

    # ---- creating ----------------------------------------------------------------------------------------------

    async def create(
        self,
        session: ServerSession,
        tool: ToolDef,
        arguments: JSONValue,
        meta: RequestMeta,
        tg: anyio.abc.TaskGroup,
        *,
        answers: JSONObject | None = None,
        memo: dict[str, JSONValue] | None = None,
        ttl: float | None = None,
        notify: Callable[[str, JSONObject], Awaitable[None]] | None = None,
        progress_token: JSONValue = None,
    ) -> JSONObject:
        """Create a task for this call, start its run here, and return the ``CreateTaskResult``.

        Returns only once the record is stored, so a ``tasks/get`` on any replica finds it (ext-tasks "Task
        Creation": durably created first). On 2025-11-25 (``legacy`` wire shapes) the requestor may ask for a
        shorter ``ttl``, and ``notify`` carries the tool's progress to the requestor (basic/utilities/tasks "Task
        Progress Notifications"): the progress token of the call stays valid for the task.
        """
        legacy = not is_modern(meta.revision)
        now = time.time()
        call: JSONObject = {
            "name": tool.name,
            "arguments": arguments if isinstance(arguments, dict) else {},
            "revision": meta.revision,
            "capabilities": meta.capabilities.raw,
            "client": msgspec.to_builtins(meta.client_info) if meta.client_info is not None else None,
            "log": meta.log_level,
            "progress": progress_token if legacy else None,
        }
        record = TaskRecord(
            id=secrets.token_urlsafe(18),
            principal=meta.principal,
            # Without an authenticated user, a 2025-11-25 task is its session's; on 2026-07-28 (no sessions) the
            # unguessable id is the bearer token (ext-tasks "Security Considerations"), and so it is on replicas
            # sharing a store, where a task must outlive the session that made it (its replica may die: the
            # client's new session follows the task by id; 2025-11-25 basic/utilities/tasks "Security").
            connection=session.id if legacy and meta.principal is None and not self._server.store.shared else None,
            status="working",
            created=now,
            updated=now,
            ttl=min(self.ttl, ttl) if ttl is not None and ttl > 0 else self.ttl,
            poll_interval=self.poll_interval,
            call=call,
            answers={"a": answers or AnswerBook().pack(), "m": memo or {}},
            runner=self.replica,
        )
        try:
            await self._registry.create(record)
            if _telemetry.state.on:
                from ..telemetry import _hooks

                _hooks.task_status("working")
        except OverflowError:
            raise JSONRPCError(INTERNAL_ERROR, "Internal error: too many tasks are running; retry later") from None
        if notify is not None:
            self._forward[record.id] = notify
        self._start(session, record, tg)
        if legacy:
            return {"task": legacy_task(record)}
        return {"resultType": "task", **wire_task(record, detailed=False)}

    # ---- the client's requests -----------------------------------------------------------------------------------

    async def serve(
        self, session: ServerSession, method: str, params: JSONObject, meta: RequestMeta, tg: anyio.abc.TaskGroup
    ) -> JSONObject:
        """``tasks/get``, ``tasks/update`` or ``tasks/cancel``."""
        if not declares_tasks(meta.capabilities):
            raise missing_tasks_extension(method)
        task_id = params.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: taskId must be a non-empty string")
        record = await self._own(task_id, meta)
        if method == "tasks/get":
            if record.status == "working" and not self._runs_here(record):
                record = await self._take_over(session, record, tg)
            return {"resultType": "complete", **wire_task(record, detailed=True)}
        if method == "tasks/update":
            responses = params.get("inputResponses")
            if not isinstance(responses, dict):
                raise JSONRPCError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
            await self._answer(session, record, responses, tg)
            return {"resultType": "complete"}
        await self._cancel(record)
        return {"resultType": "complete"}

    async def serve_legacy(
        self,
        session: ServerSession,
        request_id: RequestId,
        method: str,
        params: JSONObject,
        meta: RequestMeta,
        tg: anyio.abc.TaskGroup,
    ) -> JSONObject:
        """``tasks/get``, ``tasks/result`` or ``tasks/cancel`` on 2025-11-25 (basic/utilities/tasks)."""
        task_id = params.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: taskId must be a non-empty string")
        record = await self._own(task_id, meta, session.id)
        if method == "tasks/get":
            if record.status == "working" and not self._runs_here(record):
                record = await self._take_over(session, record, tg)
            return legacy_task(record)
        if method == "tasks/cancel":
            if record.terminal:
                raise JSONRPCError(INVALID_PARAMS, f"Invalid params: task {task_id!r} has already ended")
            await self._cancel(record)
            current = await self._registry.get(task_id)
            return legacy_task(current or record)
        return await self._result(session, request_id, record, meta, tg)

    async def _result(
        self,
        session: ServerSession,
        request_id: RequestId,
        record: TaskRecord,
        meta: RequestMeta,
        tg: anyio.abc.TaskGroup,
    ) -> JSONObject:
        """``tasks/result``: block until the task ends, asking its open questions on this request's stream as
        ``elicitation/create`` (and kin) tagged with the task; then exactly what the call would have returned."""
        task_id = record.id
        asking: set[str] = set()
        async with anyio.create_task_group() as questions:
            while not record.terminal:
                if record.status == "working" and not self._runs_here(record):
                    record = await self._take_over(session, record, tg)
                for key, ask in record.asks.items():
                    if key not in asking and isinstance(ask, dict):
                        asking.add(key)
                        questions.start_soon(self._push_question, session, request_id, task_id, key, ask, tg)
                changed = self._changes.setdefault(task_id, anyio.Event())
                with anyio.move_on_after(max(self.poll_interval, 0.2)):  # other replicas change it too
                    await changed.wait()
                current = await self._registry.get(task_id)
                if current is None:
                    raise JSONRPCError(INVALID_PARAMS, f"Invalid params: task {task_id!r} has expired")
                record = current
            questions.cancel_scope.cancel()
        related = {RELATED_TASK: {"taskId": task_id}}
        if record.status == "failed" and record.error is not None:
            error = dict(record.error)
            raise JSONRPCError(int(error.get("code", INTERNAL_ERROR)), str(error.get("message")), error.get("data"))
        if record.status == "cancelled":
            raise JSONRPCError(INVALID_PARAMS, f"Invalid params: task {task_id!r} was cancelled")
        result = dict(record.result or {})
        own = result.get("_meta")
        result["_meta"] = {**own, **related} if isinstance(own, dict) else related
        return result

    async def _push_question(
        self,
        session: ServerSession,
        request_id: RequestId,
        task_id: str,
        key: str,
        ask: JSONObject,
        tg: anyio.abc.TaskGroup,
    ) -> None:
        """One open question of a 2025-11-25 task, asked on the ``tasks/result`` stream; its answer goes into the
        task's record as a ``tasks/update`` would put it."""
        method, params = ask.get("method"), ask.get("params")
        if session.session is None or not isinstance(method, str) or not isinstance(params, dict):
            return
        own = params.get("_meta")
        related = {RELATED_TASK: {"taskId": task_id}}
        tagged = {**params, "_meta": {**own, **related} if isinstance(own, dict) else related}
        try:
            answer = await session.session.request(
                method, tagged, related=request_id, timeout=session.server.elicitation_timeout
            )
        except JSONRPCError as exc:
            logger.info("task %s: the client refused question %s: %s", task_id, key, exc.message)
            answer = {"action": "cancel"} if method == "elicitation/create" else {}
        except TimeoutError as exc:  # Server(elicitation_timeout): the client was told (notifications/cancelled)
            logger.info("task %s: question %s unanswered: %s", task_id, key, exc)
            answer = {"action": "cancel"} if method == "elicitation/create" else {}
        record = await self._registry.get(task_id)
        if record is not None:
            await self._answer(session, record, {key: answer}, tg)

    async def _own(self, task_id: str, meta: RequestMeta, connection: str | None = None) -> TaskRecord:
        """The record, if it exists and belongs to this caller; another user's task reads as unknown."""
        record = await self._registry.get(task_id)
        foreign = record is not None and record.connection is not None and record.connection != connection
        if record is None or record.principal != meta.principal or foreign or record.call.get("kind") is not None:
            raise JSONRPCError(INVALID_PARAMS, f"Invalid params: unknown task {task_id!r} (or it has expired)")
        return record

    async def _answer(
        self, session: ServerSession, record: TaskRecord, responses: JSONObject, tg: anyio.abc.TaskGroup
    ) -> None:
        """Record the answers to open questions (others are ignored, as the spec asks); resume once none is open."""

        def apply(current: TaskRecord) -> TaskRecord | None:
            if current.status != "input_required":
                return None
            open_asks = dict(current.asks)
            book = AnswerBook.unpack(current.answers.get("a"))
            taken = False
            for key, response in responses.items():
                ask = open_asks.get(key)
                if isinstance(ask, dict) and usable_response(str(ask.get("method")), response):
                    book.add(key, response)
                    del open_asks[key]
                    taken = True
            if not taken:
                return None
            status = "input_required" if open_asks else "working"
            return dataclasses.replace(
                current, status=status, asks=open_asks, answers={**current.answers, "a": book.pack()},
                updated=time.time(), message=None if status == "working" else current.message,
            )  # fmt: skip

        changed = await self._change(record.id, apply)
        if changed is not None and changed.status == "working":
            await self._resume(session, changed, tg)

    async def _cancel(self, record: TaskRecord) -> None:
        """Mark the task cancelled (idempotent on a terminal task) and stop its run wherever it is."""

        def apply(current: TaskRecord) -> TaskRecord | None:
            if current.terminal:
                return None
            return dataclasses.replace(
                current, status="cancelled", asks={}, updated=time.time(), message="Cancelled by the client"
            )

        changed = await self._change(record.id, apply)
        if changed is None:
            return
        parked = self._runs.get(record.id)
        if parked is not None:
            parked.scope.cancel()
        elif changed.runner is not None and changed.runner != self.replica:
            await self._tell(changed.runner, record.id)

    # ---- resuming ---------------------------------------------------------------------------------------------

    def _runs_here(self, record: TaskRecord) -> bool:
        return record.id in self._runs or (record.runner not in (None, self.replica) and record.runner_alive)

    async def _resume(self, session: ServerSession, record: TaskRecord, tg: anyio.abc.TaskGroup) -> None:
        """Answers are in: wake the run, here or on its replica, or replay the task here.

        A runner whose lease is current keeps the task even if it did not hear the message (the bus may lose one):
        its run re-reads the record on its own (:meth:`_watch`). Only a lapsed lease, or a runner that let the
        task go, lets another replica take it over."""
        parked = self._runs.get(record.id)
        if parked is not None:
            parked.wake.set()
            return
        current = await self._registry.get(record.id)  # with the runner's liveness as of now
        if current is None or current.status != "working":
            return
        runner = current.runner
        if runner is not None and runner != self.replica and current.runner_alive:
            if not await self._tell(runner, record.id):
                logger.info("task %s: its replica %s did not hear the answers; it reads them itself", record.id, runner)
            return
        await self._take_over(session, current, tg)

    async def _take_over(self, session: ServerSession, record: TaskRecord, tg: anyio.abc.TaskGroup) -> TaskRecord:
        """Run the task here from its record: its runner died (its lease lapsed), let it go, or never had it.

        The claim raises the task's epoch: every write of an older run is refused from then on."""

        def apply(current: TaskRecord) -> TaskRecord | None:
            if current.terminal or current.status != "working" or current.id in self._runs:
                return None
            if current.runner not in (None, self.replica) and current.runner_alive:
                return None  # someone else runs it
            return dataclasses.replace(current, runner=self.replica, epoch=current.epoch + 1)

        claimed = await self._change(record.id, apply)
        if claimed is None:
            return await self._registry.get(record.id) or record
        self._start(session, claimed, tg)
        return claimed

    async def _tell(self, replica: str, task_id: str) -> bool:
        """Ask the replica running a task to look at its record again; whether anyone heard."""
        try:
            return bool(await self._server.store.bus.publish(task_channel(replica), task_id.encode()))
        except StoreUnavailable:
            return False

    async def listen(self, session: ServerSession, tg: anyio.abc.TaskGroup) -> None:
        """Replicas sharing a store: take the messages other replicas send about tasks this one runs."""

        async def handle(message: bytes) -> None:
            task_id = message.decode(errors="replace")
            parked = self._runs.get(task_id)
            if parked is not None:
                parked.wake.set()
                return
            record = await self._registry.get(task_id)
            if record is not None and record.status == "working":
                await self._take_over(session, record, tg)

        await self.subscription.run(lambda: self._server.store.bus.subscribe(task_channel(self.replica)), handle)

    # ---- running ----------------------------------------------------------------------------------------------

    def _start(self, session: ServerSession, record: TaskRecord, tg: anyio.abc.TaskGroup) -> None:
        """Start the task's run here, holding the claim ``record`` carries: a replay from the record (on
        creation, nothing to replay yet)."""
        call = record.call
        tool = self._server._tools.get(str(call.get("name")))
        meta = RequestMeta(
            call.get("revision"),  # type: ignore[arg-type]
            ClientCapabilities.parse(call.get("capabilities")),
            _implementation(call.get("client")),
            log_level=call.get("log"),
            principal=record.principal,
        )
        parked = self._runs[record.id] = _Parked(record.id, record.epoch)
        book = AnswerBook.unpack(record.answers.get("a"))
        asker = RoundAsker(book, {}, dict(table(record.answers.get("m"))))
        asker.task_mode = True
        asker.journal = OnceSteps(self._change, parked)
        notify = functools.partial(self._notified, parked)
        token = call.get("progress")
        ctx = session._context_for_task(record.id, meta, notify, asker, token if token is not None else record.id)
        invoke = session._task_invoker(tool, call.get("arguments"), ctx)
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
            logger.exception("task %s: its run stopped", task_id)
        finally:
            assert parked.run is not None
            parked.run.cancel()
            if self._runs.get(task_id) is parked:
                del self._runs[task_id]
            if self._waiting.get(task_id) is parked:
                del self._waiting[task_id]
            if not parked.ended and not parked.lost:
                with anyio.CancelScope(shield=True):
                    await self._let_go(parked)
            if task_id not in self._runs:
                self._forward.pop(task_id, None)

    async def _drive_run(self, parked: _Parked) -> None:
        """The run itself, within the task's TTL and its cancel scope (``tasks/cancel``, dropped, or lost)."""
        run, task_id = parked.run, parked.task_id
        assert run is not None
        record = await self._registry.get(task_id)
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
                    except Exception as exc:
                        logger.exception("task %s failed", task_id)
                        await self._finish(parked, "failed", error=_error(INTERNAL_ERROR, f"Internal error: {exc}"))
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
            await anyio.sleep(self._watch_every)
            try:
                current = await self._registry.get(parked.task_id)
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
                current = await self._registry.get(task_id)
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
            if self._runs.get(dropped_id) is dropped:
                del self._runs[dropped_id]
            dropped.scope.cancel()

    async def _let_go(self, parked: _Parked) -> None:
        """The run stopped without ending the task: clear its claim (if still its own), so that whichever replica
        next sees the task answered or polled runs it. Best effort: a runner whose lease lapses lets go too."""

        def apply(current: TaskRecord) -> TaskRecord | None:
            if current.terminal or current.epoch != parked.epoch or current.runner != self.replica:
                return None
            return dataclasses.replace(current, runner=None)

        try:
            await self._change(parked.task_id, apply)
        except (StoreUnavailable, JSONRPCError):
            logger.info(
                "task %s: could not let it go; it is taken over once this replica's lease lapses", parked.task_id
            )

    async def _finish(
        self, parked: _Parked, status: str, *, result: JSONObject | None = None, error: JSONObject | None = None
    ) -> None:
        def apply(current: TaskRecord) -> TaskRecord | None:
            if current.terminal:
                return None  # cancelled meanwhile: the cancel stands
            message = error.get("message") if error is not None else None
            return dataclasses.replace(
                current, status=status, result=result, error=error, asks={}, updated=time.time(), runner=None,
                message=str(message) if message is not None else None,
            )  # fmt: skip

        if await self._act(parked, apply) is not None:
            parked.ended = True

    async def _notified(self, parked: _Parked, method: str, params: JSONObject) -> None:
        """What the tool sends while it runs as a task: progress messages become the ``statusMessage`` (ext-tasks:
        progress and log notifications are not carried for tasks)."""
        forward = self._forward.get(parked.task_id)
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
            logger.warning("task %s: could not record its progress message", parked.task_id)

    async def _act(self, parked: _Parked, apply: Apply) -> TaskRecord | None:
        """:meth:`_change` for a run, fenced by its claim (:func:`~._journal.act`)."""
        return await act(patient(self._change), parked, apply)

    async def _change(self, task_id: str, apply: Apply) -> TaskRecord | None:
        """Compare-and-swap ``apply`` onto the record until it sticks (:func:`~._journal.change`); wakes this
        replica's ``tasks/result`` waiters on a change."""
        before: list[str] = []

        def tracked(current: TaskRecord) -> TaskRecord | None:
            before[:] = [current.status]  # the status the stored change replaced (its last attempt's)
            return apply(current)

        stored = await change(self._registry, task_id, tracked)
        if stored is not None:
            if _telemetry.state.on and before and stored.status != before[0]:
                from ..telemetry import _hooks

                _hooks.task_status(stored.status)
            waiting = self._changes.pop(task_id, None)
            if waiting is not None:
                waiting.set()
        return stored


def task_channel(replica: str) -> str:
    """The bus channel on which a replica hears about the tasks it runs."""
    return f"tasks:{replica}"


def wire_task(record: TaskRecord, *, detailed: bool) -> JSONObject:
    """The ``Task`` as the wire has it (``DetailedTask`` with ``detailed``: the questions, result or error)."""
    task: JSONObject = {
        "taskId": record.id,
        "status": record.status,
        "createdAt": _iso(record.created),
        "lastUpdatedAt": _iso(record.updated),
        "ttlMs": None if record.ttl is None else round(record.ttl * 1000),
        "pollIntervalMs": max(1, round(record.poll_interval * 1000)),
    }
    if record.message:
        task["statusMessage"] = record.message
    if detailed:
        if record.status == "input_required":
            task["inputRequests"] = dict(record.asks)
        elif record.status == "completed" and record.result is not None:
            task["result"] = dict(record.result)
        elif record.status == "failed" and record.error is not None:
            task["error"] = dict(record.error)
    return task


def is_task_method(method: str, *, legacy: bool = False) -> bool:
    return method in (_LEGACY_TASK_METHODS if legacy else _TASK_METHODS)


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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


def legacy_task(record: TaskRecord) -> JSONObject:
    """The ``Task`` in 2025-11-25's shape (``ttl``/``pollInterval``; results come from ``tasks/result``)."""
    task = wire_task(record, detailed=False)
    task["ttl"] = task.pop("ttlMs")
    task["pollInterval"] = task.pop("pollIntervalMs")
    return task


RELATED_TASK = "io.modelcontextprotocol/related-task"
"""``_meta`` key tying a message to its task (2025-11-25 basic/utilities/tasks, "Associating Task-Related Messages")."""


def capabilities_2025() -> JSONObject:
    """The server's ``tasks`` capability on 2025-11-25: task-augmented ``tools/call`` and ``tasks/cancel``.
    ``tasks/list`` is not offered: a task is found by its id, as on 2026-07-28 (which removed listing)."""
    return {"cancel": {}, "requests": {"tools": {"call": {}}}}
