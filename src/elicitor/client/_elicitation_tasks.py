"""Elicitations the server asks for as tasks (2025-11-25 ``tasks.requests.elicitation.create``).

A 2025-11-25 client that declares ``tasks.requests.elicitation.create`` lets the server send ``elicitation/create``
with a ``task`` field (basic/utilities/tasks: the client is then the *receiver*). Instead of holding the request
open while the person answers, the client answers at once with a ``CreateTaskResult`` and asks the person in the
background; the server polls ``tasks/get``, fetches the answer with ``tasks/result`` (which waits until there is
one) and may ``tasks/cancel`` it. The person sees the question exactly as any other elicitation (the one path of
:func:`~._answer.answer_elicitation`). Task ids are unguessable; a task is kept for its ``ttl`` (at most an hour)
and at most :data:`MAX_TASKS` at once, ended ones dropped first. The tasks belong to this connection: they end
with it.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import anyio
import anyio.abc

from .._exceptions import JSONRPCError
from ..types import INTERNAL_ERROR, INVALID_PARAMS, JSONObject

logger = logging.getLogger("elicitor.client")

RELATED_TASK = "io.modelcontextprotocol/related-task"
MAX_TASKS = 256
"""Elicitation tasks kept at once; beyond it the oldest ended one is dropped, or the request refused (-32603)."""
MAX_TTL_MS = 3_600_000
"""The longest a task is kept (milliseconds), whatever ``ttl`` the server asks for."""
DEFAULT_TTL_MS = 600_000
POLL_INTERVAL_MS = 1000
TERMINAL = frozenset({"completed", "failed", "cancelled"})


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class _Task:
    __slots__ = ("answer", "done", "error", "expires", "record", "scope")

    def __init__(self, record: JSONObject, expires: float) -> None:
        self.record = record
        self.expires = expires
        self.answer: JSONObject | None = None
        self.error: JSONRPCError | None = None
        self.done = anyio.Event()
        self.scope = anyio.CancelScope()


class ElicitationTasks:
    """The elicitation tasks the server created on this client."""

    def __init__(self) -> None:
        self._tasks: dict[str, _Task] = {}
        self.group: anyio.abc.TaskGroup | None = None
        """Where the questions are asked (the client's, while connected)."""

    def create(self, params: JSONObject, answer: Callable[[JSONObject], Awaitable[JSONObject]]) -> JSONObject:
        """Start answering ``params`` in the background; the ``CreateTaskResult`` to send back at once."""
        if self.group is None:
            raise JSONRPCError(INTERNAL_ERROR, "Internal error: the client is not connected")
        self._expire()
        if len(self._tasks) >= MAX_TASKS:
            ended = next((key for key, task in self._tasks.items() if task.done.is_set()), None)
            if ended is None:
                raise JSONRPCError(INTERNAL_ERROR, "Internal error: too many elicitation tasks at once")
            del self._tasks[ended]
        wanted = params.get("task")
        ttl = wanted.get("ttl") if isinstance(wanted, dict) else None
        ttl = min(int(ttl), MAX_TTL_MS) if isinstance(ttl, int | float) and ttl > 0 else DEFAULT_TTL_MS
        task_id = secrets.token_urlsafe(16)
        now = _now()
        record: JSONObject = {
            "taskId": task_id, "status": "working", "statusMessage": "waiting for the person's answer",
            "createdAt": now, "lastUpdatedAt": now, "ttl": ttl, "pollInterval": POLL_INTERVAL_MS,
        }  # fmt: skip
        task = self._tasks[task_id] = _Task(record, anyio.current_time() + ttl / 1000)
        question = {key: value for key, value in params.items() if key != "task"}
        self.group.start_soon(self._run, task, question, answer)
        return {"task": dict(record)}

    async def _run(
        self, task: _Task, params: JSONObject, answer: Callable[[JSONObject], Awaitable[JSONObject]]
    ) -> None:
        status, message = "completed", None
        with task.scope:
            try:
                task.answer = await answer(params)
            except JSONRPCError as exc:
                task.error, status, message = exc, "failed", exc.message
            except Exception as exc:
                logger.exception("answering an elicitation task failed")
                task.error = JSONRPCError(
                    INTERNAL_ERROR, "Internal error: the client could not answer this elicitation"
                )
                status, message = "failed", str(exc) or type(exc).__name__
        if task.scope.cancelled_caught:
            status, message = "cancelled", "cancelled by the server"
        task.record.update(status=status, lastUpdatedAt=_now())
        if message is None:
            task.record.pop("statusMessage", None)
        else:
            task.record["statusMessage"] = message
        task.done.set()

    def _find(self, params: JSONObject) -> _Task:
        self._expire()
        task = self._tasks.get(str(params.get("taskId")))
        if task is None:
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: no such task")
        return task

    def _expire(self) -> None:
        now = anyio.current_time()
        for key in [key for key, task in self._tasks.items() if task.expires <= now]:
            task = self._tasks.pop(key)
            task.scope.cancel()

    def get(self, params: JSONObject) -> JSONObject:
        """``tasks/get``: the task as it is now."""
        return dict(self._find(params).record)

    async def result(self, params: JSONObject) -> JSONObject:
        """``tasks/result``: the ``ElicitResult`` once the person has answered (waits until then)."""
        task = self._find(params)
        await task.done.wait()
        if task.error is not None:
            raise task.error
        if task.answer is None:  # cancelled
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: the task was cancelled")
        related = {RELATED_TASK: {"taskId": task.record["taskId"]}}
        return {**task.answer, "_meta": related}

    def cancel(self, params: JSONObject) -> JSONObject:
        """``tasks/cancel``: stop asking (-32602 for a task that has already ended)."""
        task = self._find(params)
        if task.record["status"] in TERMINAL:
            raise JSONRPCError(INVALID_PARAMS, f"Invalid params: the task is already {task.record['status']}")
        task.scope.cancel()
        task.record.update(status="cancelled", statusMessage="cancelled by the server", lastUpdatedAt=_now())
        return dict(task.record)
