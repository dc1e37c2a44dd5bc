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
  at once, ``ctx.once`` steps are not run again. A task whose owner's lease lapsed while ``working`` is taken
  over by the replica that next sees it, so nothing stays ``working`` forever; the takeover raises the record's
  epoch, which fences the old run (:mod:`._journal`). The runs themselves, and the one port through which they
  reach the server (``ToolRunner.run_tool``), are in :mod:`._task_runs`; this module creates tasks, serves the
  client's ``tasks/*`` requests on both wires and resumes or takes over tasks.
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
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

import anyio
import anyio.abc
import msgspec

from .._exceptions import ConnectionClosed, JSONRPCError
from ..protocol import RequestMeta
from ..state import StoreUnavailable, Subscription, TaskRecord, TaskRegistry
from ..telemetry import _state as _telemetry
from ..types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    JSONObject,
    JSONValue,
    RequestId,
    is_stateless,
)
from ._journal import Apply, Change, change, patient
from ._rounds import AnswerBook, usable_response
from ._task_runs import TaskRuns, ToolRunner
from ._task_wire import (
    RELATED_TASK,
    created_result,
    declares_tasks,
    handshake_task,
    missing_tasks_extension,
    task_channel,
    wire_task,
)

if TYPE_CHECKING:
    from ._dispatch import ServerSession
    from ._server import Server
    from ._tools import ToolDef

logger = logging.getLogger("elicitor.server")

_T = TypeVar("_T")


class Hold(Protocol):
    """Where a request waits for a store away for a moment, within a bound (a
    :class:`~elicitor.server._hold.StoreHold`: the HTTP app's, shared by the requests of both eras, or a stdio
    connection's own)."""

    def deadline(self) -> float:
        """The clock reading until which a request arriving now may wait."""
        ...

    async def patiently(self, attempt: Callable[[], Awaitable[_T]], until: float | None) -> _T:
        """``attempt()``, tried again while the store cannot be reached, until ``until``."""
        ...


CREATE_PATIENCE = 15.0
"""Seconds the creation of a task waits for a store that cannot be reached on a connection without a :class:`Hold`
(``docs/deploying.md`` promises to ride out a Redis restart, failover or pause of up to 10 s)."""
CREATE_RETRY = 0.5
"""Seconds between two tries at creating it."""

RESULT_RIDES_OUT = 60.0
"""Seconds of failed reads of a task in a row that a 2025-11-25 ``tasks/result`` rides out, its stream and the
questions asked on it left open: a person may be answering, and a store away for a moment (a Redis restart) must not
withdraw the question to ask it again later. Past this it fails with the retryable error (the client asks again)."""


class _Patience:
    """The wait of a task's creation on a connection without a :class:`Hold`: up to :data:`CREATE_PATIENCE`."""

    @staticmethod
    def deadline() -> float:
        return anyio.current_time() + CREATE_PATIENCE

    @staticmethod
    async def patiently(attempt: Callable[[], Awaitable[_T]], until: float | None) -> _T:
        while True:
            try:
                return await attempt()
            except StoreUnavailable:
                if until is None or anyio.current_time() + CREATE_RETRY >= until:
                    raise
                await anyio.sleep(CREATE_RETRY)


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
        self._changes: dict[str, anyio.Event] = {}
        """Set when a task's record changes in this replica (``tasks/result`` waits on it, polling besides)."""
        self._delivering: set[tuple[str, str]] = set()
        """(task id, question key): answers that came on a ``tasks/result`` stream, being written to the record."""
        self.runs = TaskRuns(server, self._change, max_parked=max_parked)
        """The runs of tasks in this replica."""
        self.subscription = Subscription("tasks")
        """This replica's tasks queue (replicas sharing a store), as ``/healthz`` reports it."""
        self._offset = "0"
        """The offset of the last message handled from this replica's tasks queue (its id is new: from the start)."""

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
        task_id: str | None = None,
    ) -> JSONObject:
        """Create a task for this call, start its run here, and return the ``CreateTaskResult``.

        Returns only once the record is stored, so a ``tasks/get`` on any replica finds it (ext-tasks "Task
        Creation": durably created first). On 2025-11-25 (the handshake era's wire shapes) the requestor may ask for a
        shorter ``ttl``, and ``notify`` carries the tool's progress to the requestor (basic/utilities/tasks "Task
        Progress Notifications"): the progress token of the call stays valid for the task. ``task_id`` (a call
        sent again under its idempotency key, see ``_calls``): the task's id, derived from the key, so that the call
        sent again finds the task the first attempt created instead of starting a second one.
        """
        handshake = not is_stateless(meta.revision)
        now = time.time()
        call: JSONObject = {
            "name": tool.name,
            "arguments": arguments if isinstance(arguments, dict) else {},
            "revision": meta.revision,
            "capabilities": meta.capabilities.raw,
            "client": msgspec.to_builtins(meta.client_info) if meta.client_info is not None else None,
            "log": meta.log_level,
            "progress": progress_token if handshake else None,
        }
        if _telemetry.state.on:  # where it was created: its later polls and updates link to it, wherever they come
            from ..telemetry import _hooks

            call["trace"] = _hooks.task_origin()
        record = TaskRecord(
            id=task_id or secrets.token_urlsafe(18),
            principal=meta.principal,
            # Without an authenticated user, a 2025-11-25 task is its session's; on 2026-07-28 (no sessions) the
            # unguessable id is the bearer token (ext-tasks "Security Considerations"), and so it is on replicas
            # sharing a store, where a task must outlive the session that made it (its replica may die: the
            # client's new session follows the task by id; 2025-11-25 basic/utilities/tasks "Security").
            connection=session.id if handshake and meta.principal is None and not self._server.store.shared else None,
            status="working",
            created=now,
            updated=now,
            ttl=min(self.ttl, ttl) if ttl is not None and ttl > 0 else self.ttl,
            poll_interval=self.poll_interval,
            call=call,
            answers={"a": answers or AnswerBook().pack(), "m": memo or {}},
            owner=self.replica,
        )
        # The creation waits for a store away for a moment instead of failing the call (a ``tools/call`` is never
        # sent again by the official SDKs, and elicitor's client leaves it to its caller): the id is fixed before
        # the first try, so a try after one whose write reached the store (its answer lost to a timeout) finds
        # that task and starts its run, and no try makes a second task. Past the wait the call fails with the
        # retryable error; a record its last try stored all the same has no run. Without an idempotency key
        # nobody knows its id: it asks no one and expires with its ttl. Under a key, the call sent again finds
        # it, and its run is started then (see ``orphan``): followed without one, it waited until its ttl.
        tried: list[bool] = []  # a try met the store away: a task found under our id may be our own write
        orphan: list[TaskRecord] = []  # a task found under our key, still working, whose run may be nowhere

        async def attempt() -> TaskRecord | JSONObject:
            try:
                await self._registry.create(record)
                return record
            except StoreUnavailable:
                tried.append(True)
                raise
            except OverflowError:
                raise JSONRPCError(INTERNAL_ERROR, "Internal error: too many tasks are running; retry later") from None
            except ValueError:  # the same call sent again (a kept call's id), or this call's own earlier try
                if task_id is None and not tried:
                    raise JSONRPCError(INTERNAL_ERROR, "Internal error: this task exists already") from None
                existing = await self._registry.get(record.id)
                if existing is None or existing.principal != meta.principal:
                    raise JSONRPCError(INTERNAL_ERROR, "Internal error: this task exists already") from None
                ours = existing.owner == self.replica and existing.epoch == record.epoch
                if not (tried and ours and existing.status == "working" and existing.id not in self.runs.table):
                    if existing.status == "working" and existing.id not in self.runs.table:
                        orphan.append(existing)
                    return created_result(existing, handshake=handshake)
                return existing  # this call's own try stored it before failing: its run starts here

        hold: Hold = session.hold or _Patience()
        made = await hold.patiently(attempt, hold.deadline())
        if not isinstance(made, TaskRecord):
            if orphan:
                await self._adopt(session, orphan[-1], tg)
            return made
        record = made
        if _telemetry.state.on:
            from ..telemetry import _hooks

            _hooks.task_status("working")
        if notify is not None:
            self.runs.forward[record.id] = notify
        self._start(session, record, tg)
        return created_result(record, handshake=handshake)

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
            return _traced(record, {"resultType": "complete", **wire_task(record, detailed=True)})
        if method == "tasks/update":
            responses = params.get("inputResponses")
            if not isinstance(responses, dict):
                raise JSONRPCError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
            await self._answer(session, record.id, responses, tg)
            return _traced(record, {"resultType": "complete"})
        await self._cancel(record)
        return _traced(record, {"resultType": "complete"})

    async def serve_handshake(
        self,
        session: ServerSession,
        request_id: RequestId,
        method: str,
        params: JSONObject,
        meta: RequestMeta,
        tg: anyio.abc.TaskGroup,
    ) -> JSONObject:
        """``tasks/get``, ``tasks/result`` or ``tasks/cancel`` on 2025-11-25 (basic/utilities/tasks).

        With ``session.hold`` (over HTTP), a request that meets the store away waits for it, tried again within the
        hold's bound, instead of failing at once with the retryable error, which clients that send it once (the
        official SDKs) show the person: as 2026-07-28's ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` wait
        (``http/_stateless.py``). A try acts once in all: a takeover is claimed again by this replica, and a cancel
        whose compare-and-swap may have reached the store before it failed is answered with the task it cancelled
        when the next try finds it so, not with "has already ended"."""
        hold = session.hold
        cancelling: list[bool] = []
        serve = functools.partial(
            self._serve_handshake, session, request_id, method, params, meta, tg, cancelling=cancelling
        )
        if hold is None:
            return await serve()
        return await hold.patiently(serve, hold.deadline())

    async def _serve_handshake(
        self,
        session: ServerSession,
        request_id: RequestId,
        method: str,
        params: JSONObject,
        meta: RequestMeta,
        tg: anyio.abc.TaskGroup,
        *,
        cancelling: list[bool],
    ) -> JSONObject:
        """One try of :meth:`serve_handshake`; ``cancelling`` is not empty once a try of this request began to
        cancel the task."""
        task_id = params.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: taskId must be a non-empty string")
        record = await self._own(task_id, meta, session.id)
        if method == "tasks/get":
            if record.status == "working" and not self._runs_here(record):
                record = await self._take_over(session, record, tg)
            return _traced(record, handshake_task(record))
        if method == "tasks/cancel":
            if record.terminal:
                if cancelling and record.status == "cancelled":  # an earlier try's cancel reached the store
                    return _traced(record, handshake_task(record))
                raise JSONRPCError(INVALID_PARAMS, f"Invalid params: task {task_id!r} has already ended")
            cancelling.append(True)
            await self._cancel(record)
            current = await self._registry.get(task_id)
            return _traced(record, handshake_task(current or record))
        return _traced(record, await self._result(session, request_id, record, meta, tg))

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
        failure: Exception | None = None
        async with anyio.create_task_group() as questions:
            try:
                record = await self._follow(session, request_id, record, tg, questions, asking)
            except Exception as exc:  # raised below, outside the group: as itself, not in an exception group
                failure = exc
            questions.cancel_scope.cancel()
        if failure is not None:
            raise failure
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

    async def _follow(
        self,
        session: ServerSession,
        request_id: RequestId,
        record: TaskRecord,
        tg: anyio.abc.TaskGroup,
        questions: anyio.abc.TaskGroup,
        asking: set[str],
    ) -> TaskRecord:
        """:meth:`_result`'s wait: the task's record once it is terminal, its open questions asked meanwhile in
        ``questions``. Raises the error ``tasks/result`` answers with (expired; the store away too long)."""
        task_id = record.id
        failing_since: float | None = None  # when the reads of the record started failing, if the last one did
        while not record.terminal:
            try:
                if record.status == "working" and not self._runs_here(record):
                    record = await self._take_over(session, record, tg)
                for key, ask in record.asks.items():
                    if key not in asking and (task_id, key) not in self._delivering and isinstance(ask, dict):
                        asking.add(key)
                        questions.start_soon(self._push_question, session, request_id, task_id, key, ask, tg)
                changed = self._changes.setdefault(task_id, anyio.Event())
                with anyio.move_on_after(max(self.poll_interval, 0.2)):  # other replicas change it too
                    await changed.wait()
                current = await self._registry.get(task_id)
            except StoreUnavailable:
                now = anyio.current_time()
                if failing_since is None:
                    failing_since = now
                    logger.info("task %.8s...: the shared state is unavailable; tasks/result waits for it", task_id)
                if now - failing_since >= RESULT_RIDES_OUT:
                    raise
                await anyio.sleep(1.0)
                continue
            failing_since = None
            if current is None:
                raise JSONRPCError(INVALID_PARAMS, f"Invalid params: task {task_id!r} has expired")
            record = current
        return record

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
            logger.info("task %.8s...: the client refused question %s: %s", task_id, key, exc.message)
            answer = {"action": "cancel"} if method == "elicitation/create" else {}
        except TimeoutError as exc:  # Server(elicitation_timeout): the client was told (notifications/cancelled)
            logger.info("task %.8s...: question %s unanswered: %s", task_id, key, exc)
            answer = {"action": "cancel"} if method == "elicitation/create" else {}
        except ConnectionClosed:  # the session ended (left, or declared gone while its replica stalled): so does
            # this request; the question stays open in the task's record, unanswered, not declined
            logger.info("task %.8s...: question %s left open: its session ended", task_id, key)
            return
        self._delivering.add((task_id, key))
        tg.start_soon(self._deliver, session, task_id, key, answer, tg)

    async def _deliver(
        self, session: ServerSession, task_id: str, key: str, answer: JSONValue, tg: anyio.abc.TaskGroup
    ) -> None:
        """Write an answer that came on a ``tasks/result`` stream into the task's record, waiting for the store to
        come back if it is away (:func:`~._journal.patient`). It runs in the connection's task group, not the
        request's: a ``tasks/result`` that fails meanwhile (its own read of the record met the store away) must not
        take the answer with it. Until it is written, ``tasks/result`` does not ask the question again."""
        try:
            await self._answer(session, task_id, {key: answer}, tg, write=patient(self._change))
        except Exception as exc:  # the store stayed away past the patience: the question is asked again
            logger.warning("task %.8s...: could not record the answer to question %s (%s)", task_id, key, exc)
        finally:
            self._delivering.discard((task_id, key))
            self._changes.pop(task_id, anyio.Event()).set()

    async def _own(self, task_id: str, meta: RequestMeta, connection: str | None = None) -> TaskRecord:
        """The record, if it exists and belongs to this caller; another user's task reads as unknown."""
        record = await self._registry.get(task_id)
        foreign = record is not None and record.connection is not None and record.connection != connection
        if record is None or record.principal != meta.principal or foreign or record.call.get("kind") is not None:
            raise JSONRPCError(INVALID_PARAMS, f"Invalid params: unknown task {task_id!r} (or it has expired)")
        return record

    async def _answer(
        self,
        session: ServerSession,
        task_id: str,
        responses: JSONObject,
        tg: anyio.abc.TaskGroup,
        *,
        write: Change | None = None,
    ) -> None:
        """Record the answers to open questions (others are ignored, as the spec asks); resume once none is open.
        ``write``: how the record is changed (by default :meth:`_change`, once)."""

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

        changed = await (write or self._change)(task_id, apply)
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
        parked = self.runs.table.get(record.id)
        if parked is not None:
            parked.scope.cancel()
        elif changed.owner is not None and changed.owner != self.replica:
            await self._tell(changed.owner, record.id)

    # ---- resuming ---------------------------------------------------------------------------------------------

    def _runs_here(self, record: TaskRecord) -> bool:
        return record.id in self.runs.table or (record.owner not in (None, self.replica) and record.owner_alive)

    async def _resume(self, session: ServerSession, record: TaskRecord, tg: anyio.abc.TaskGroup) -> None:
        """Answers are in: wake the run, here or on its replica, or replay the task here.

        An owner whose lease is current keeps the task: the message waits in its tasks queue until it reads it
        (however long it was cut off from the store), and its run re-reads the record on its own besides. Only a
        lapsed lease, or an owner that let the task go, lets another replica take it over."""
        parked = self.runs.table.get(record.id)
        if parked is not None:
            parked.wake.set()
            return
        current = await self._registry.get(record.id)  # with the owner's liveness as of now
        if current is None or current.status != "working":
            return
        owner = current.owner
        if owner is not None and owner != self.replica and current.owner_alive:
            if not await self._tell(owner, record.id):
                logger.info(
                    "task %.8s...: its replica %s could not be told; its run reads the answers itself", record.id, owner
                )
            return
        await self._take_over(session, current, tg)

    async def _adopt(self, session: ServerSession, record: TaskRecord, tg: anyio.abc.TaskGroup) -> None:
        """A call sent again under its idempotency key found its task ``working`` with no run here, and its owner
        is this replica or lapsed (then it runs here), or another live replica (asked to look at it: it runs it
        there if it has no run of it). An earlier try of the call stored it after all after its caller was told
        the store was away (the write reached Redis late), so nothing ran it: followed as it was, it answered
        ``working`` until its ttl. A run that exists is left alone (the take-over changes nothing then)."""
        try:
            if record.owner not in (None, self.replica) and record.owner_alive:
                await self._tell(record.owner, record.id)
            else:
                await self._take_over(session, record, tg)
        except StoreUnavailable as exc:  # its next tasks/get on its owner takes it over
            logger.warning("task %.8s...: found without its run, not started yet (%s)", record.id, exc)

    async def _take_over(self, session: ServerSession, record: TaskRecord, tg: anyio.abc.TaskGroup) -> TaskRecord:
        """Run the task here from its record: its owner died (its lease lapsed), let it go, or never had it.

        The claim raises the task's epoch: every write of an older run is refused from then on."""

        def apply(current: TaskRecord) -> TaskRecord | None:
            if current.terminal or current.status != "working" or current.id in self.runs.table:
                return None
            if current.owner not in (None, self.replica) and current.owner_alive:
                return None  # someone else runs it
            return dataclasses.replace(current, owner=self.replica, epoch=current.epoch + 1)

        claimed = await self._change(record.id, apply)
        if claimed is None:
            return await self._registry.get(record.id) or record
        self._start(session, claimed, tg)
        return claimed

    async def _tell(self, replica: str, task_id: str) -> bool:
        """Ask the replica running a task to look at its record again, through that replica's tasks queue: once
        this returns ``True`` the message is in the store and the replica reads it, however long it was cut off
        from it meanwhile (pub/sub would drop it); ``False`` if the store was away."""
        try:
            await self._server.store.bus.append(task_channel(replica), task_id.encode())
        except StoreUnavailable:
            return False
        return True

    async def listen(self, session: ServerSession, tg: anyio.abc.TaskGroup) -> None:
        """Replicas sharing a store: read this replica's tasks queue until cancelled, from the last offset handled
        after every reconnect, so no message about a task it runs is missed. A parked run is woken at once;
        anything that needs the store runs off the reader, in ``tg``."""

        async def handle(item: tuple[str, bytes]) -> None:
            self._offset, message = item
            task_id = message.decode(errors="replace")
            parked = self.runs.table.get(task_id)
            if parked is not None:
                parked.wake.set()
                return
            tg.start_soon(self._look_again, session, task_id, tg)

        await self.subscription.run(
            lambda: self._server.store.bus.read(task_channel(self.replica), self._offset), handle
        )

    async def _look_again(self, session: ServerSession, task_id: str, tg: anyio.abc.TaskGroup) -> None:
        """A message about a task this replica holds no run of: take it over if it is still ``working`` and its
        owner let it go. Nothing it raises may end ``tg`` (the replica's lifespan)."""
        try:
            record = await self._registry.get(task_id)
            if record is not None and record.status == "working":
                await self._take_over(session, record, tg)
        except StoreUnavailable as exc:
            logger.warning("task %.8s...: not looked at again (%s); its next request does", task_id, exc)
        except Exception:
            logger.exception("task %.8s...: not looked at again", task_id)

    # ---- running ----------------------------------------------------------------------------------------------

    def _start(self, runner: ToolRunner, record: TaskRecord, tg: anyio.abc.TaskGroup) -> None:
        if _telemetry.state.on and record.call.get("trace"):  # its questions in the task's trace, wherever it runs
            from ..telemetry import _hooks

            with _hooks.in_task_origin(record.call["trace"]):
                self.runs.start(runner, record, tg)
            return
        self.runs.start(runner, record, tg)

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


def _traced(record: TaskRecord, result: JSONObject) -> JSONObject:
    """A ``tasks/*`` response naming, for telemetry, the request that created the task (``_meta``; see
    ``telemetry/_hooks.py``, ``TASK_ORIGIN``): the spans of the request on both sides link to it."""
    if not _telemetry.state.on or not record.call.get("trace"):
        return result
    from ..telemetry import _hooks

    return _hooks.with_task_origin(result, record.call["trace"])
