"""Following a task from the client: the 2026-07-28 extension ``io.modelcontextprotocol/tasks`` and 2025-11-25
tasks.

On 2026-07-28 a server may answer ``tools/call`` with a ``CreateTaskResult`` (``resultType: "task"``) instead of
the tool's result. :class:`TaskHandle` follows it: ``tasks/get`` every ``pollIntervalMs`` (the server's suggestion,
within sane bounds), each open input request answered once through the client's handlers (the same validation and
URL safety as any elicitation; keys already answered are not shown again however often a poll repeats them) and
sent with ``tasks/update``, until the task completes (its result inline), fails (its JSON-RPC error) or is
cancelled. Spec: ../spec/ext-tasks/tasks.md, "Task Polling", "Task Update Requests".

On 2025-11-25 the client asks for the task (``task`` in the ``tools/call`` params) and gets ``{"task": ...}``; it
polls ``tasks/get`` (``pollInterval``), and once the task needs input or has ended it calls ``tasks/result``, which
the server holds open while it asks its questions as ordinary ``elicitation/create`` requests (answered by the
client's handlers like any other) and answers with the tool's result or error. Spec: 2025-11-25
basic/utilities/tasks, "Input Required Status", "Result Retrieval".
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import anyio

from .._exceptions import ElicitorError, JSONRPCError, RemoteProtocolError, TaskCancelled
from ..telemetry import _state as _telemetry
from ..telemetry._state import TASK_ORIGIN
from ..types import INTERNAL_ERROR, CallToolResult, JSONObject
from ._lenient import read_tool_result

logger = logging.getLogger("elicitor.client")

MAX_UPDATE_ATTEMPTS = 5
"""``tasks/update`` failures in a row after which following a task gives up with the last error."""
TERMINAL = frozenset({"completed", "failed", "cancelled"})
KNOWN_STATUSES = ("working", "input_required", "completed", "failed", "cancelled")
"""The statuses the tasks extension defines (``Task.status``); a tuple, as a sloppy server's may be unhashable."""
MIN_POLL = 0.05
"""Seconds: a server suggesting less is polled this often."""
MAX_POLL = 30.0
"""Seconds: a server suggesting more is still polled this often (a person may be waiting on the result)."""
POLL_FAILURES_FOR = 30.0
"""Seconds of failed ``tasks/get`` in a row (an internal error, a timeout) that following a task rides out: a poll
only reads, so it is safe to send again, and a replica's store away for a moment (a Redis restart, a connection
pool drained by many pollers) must not end a task that is still fine. Past this, the last error is raised."""
RETRYABLE_FOR = 300.0
"""Seconds of failed reads of a task in a row that following it rides out when the server marks the errors
:attr:`~elicitor.JSONRPCError.retryable` (its shared state away, not a bug): long enough for a Redis failover
(Sentinel takes 30 s to call a primary down by default, then elects another), where an unmarked internal error
might be a bug that will not go away. Past this, the last error is raised."""
POLL_RETRY = 1.0
"""Seconds at least between a failed poll and the next (the server's interval may be far shorter), unless the
server said when to try again (``retryAfter``)."""


@dataclass(frozen=True, slots=True)
class TaskPort:
    """All a :class:`TaskHandle` needs of its client: send a request, answer an input request, end progress."""

    request: Callable[[str, JSONObject], Awaitable[JSONObject]]
    """Send a request through the client's request layer (``_meta``, ``request_timeout``, session renewal)."""
    answer_input: Callable[[object], Awaitable[JSONObject]]
    """Answer one of the task's ``inputRequests`` through the client's handlers."""
    end_progress: Callable[[str | None], None]
    """The call that started the task has ended: stop delivering progress for its token."""


class TaskHandle:
    """A tool call running as a task on the server: its status now, and the means to wait for it or cancel it.

    Made by :meth:`Client.start_tool` (a new call) or :meth:`Client.task` (a task id kept from before, after a
    restart, say). A call the server chose to answer at once is a handle that is already ``completed``.

    Attributes:
        id: the task id (``None`` when the server answered the call at once, without a task).
        status: ``working``, ``input_required``, ``completed``, ``failed`` or ``cancelled``, as last seen; a status
            outside these (a newer server's word) is kept as sent and the task followed as still running.
        status_message: the server's ``statusMessage`` as last seen (progress, say), or ``None``.
        poll_interval: seconds between polls the server suggests.
    """

    def __init__(
        self, port: TaskPort, task: JSONObject, *, handshake: bool = False, progress_token: str | None = None
    ) -> None:
        self._port = port
        self._handshake = handshake
        """2025-11-25 wire: ``ttl``/``pollInterval``, results through ``tasks/result``."""
        self._final: JSONObject | JSONRPCError | None = None
        """2025-11-25: what ``tasks/result`` returned (or raised)."""
        self._answered: set[str] = set()
        """Keys of input requests whose answers the server acknowledged."""
        self._unsent: JSONObject = {}
        """Answers given by the person but not yet acknowledged by the server (sent again until they are)."""
        self._failed_updates = 0
        self._failing_since: float | None = None
        """When the reads of the task (``tasks/get``, ``tasks/result``) started failing, if the last one failed."""
        self._retry_in = POLL_RETRY
        """Seconds until the next read, after a failed one."""
        self._progress_token = progress_token
        """The progress token of the call that started it (2025-11-25 progress keeps coming while it runs)."""
        self._unknown_seen: set[str] = set()
        """The unknown statuses already warned of (see :meth:`_see_unknown`)."""
        self.id: str | None = None
        self.status = "working"
        self.status_message: str | None = None
        self.poll_interval = 1.0
        self._task: JSONObject = {}
        self._see(task)

    @classmethod
    def finished(cls, port: TaskPort, result: JSONObject) -> TaskHandle:
        """A call the server answered at once: a handle already completed with ``result``."""
        return cls(port, {"status": "completed", "result": result})

    def _see(self, task: JSONObject) -> None:
        status = task.get("status")
        task_id = task.get("taskId", self.id)
        if task_id is not None and not isinstance(task_id, str):
            raise RemoteProtocolError("the server sent a task whose taskId is not a string")
        self.id = task_id
        if status not in KNOWN_STATUSES:
            self._see_unknown(status)
            status = status if isinstance(status, str) and status else "working"
        self.status = str(status)
        message = task.get("statusMessage")
        self.status_message = message if isinstance(message, str) else None
        interval = task.get("pollInterval" if self._handshake else "pollIntervalMs")
        if isinstance(interval, int | float) and not isinstance(interval, bool) and math.isfinite(interval):
            self.poll_interval = min(max(interval / 1000, MIN_POLL), MAX_POLL)
        self._task = task

    def _see_unknown(self, status: object) -> None:
        """A status outside the five the tasks extension defines (a newer server's, or a sloppy one's): the task is
        followed as still running, as the spec's fixed set implies of anything that is not one of its three ends (a
        task that has in fact ended answers ``tasks/get`` with an error once it expires, which ends the wait), and
        the person can always stop waiting. Said once per status, not at every poll."""
        shown = repr(status)[:80]
        if shown not in self._unknown_seen:
            self._unknown_seen.add(shown)
            logger.warning(
                "task %.8s...: the server sent status %s, which is none of %s; following the task as still running",
                self.id, shown, ", ".join(KNOWN_STATUSES),
            )  # fmt: skip

    @property
    def done(self) -> bool:
        """Whether the task has ended (completed, failed or cancelled), as last seen."""
        return self.status in TERMINAL

    async def refresh(self) -> str:
        """One ``tasks/get``: the status now (its open questions are answered by :meth:`wait`)."""
        if self.done or self.id is None:
            return self.status
        self._see(await self._port.request("tasks/get", {"taskId": self.id}))
        return self.status

    async def _poll(self) -> None:
        """:meth:`refresh` while following the task, riding out passing failures (see :meth:`_ride_out`)."""
        try:
            await self.refresh()
        except (JSONRPCError, TimeoutError) as exc:
            self._ride_out(exc, "tasks/get")
            return
        self._failing_since = None

    def _ride_out(self, exc: JSONRPCError | TimeoutError, method: str) -> None:
        """A read of the task failed: return to try it again after :attr:`_retry_in` seconds, or raise ``exc``.

        A read is safe to send again. An error the server marks :attr:`~elicitor.JSONRPCError.retryable` is tried
        again for up to :data:`RETRYABLE_FOR` seconds in a row, after the server's ``retryAfter``; an unmarked
        internal error or a timeout (a server that does not mark its errors) for up to :data:`POLL_FAILURES_FOR`.
        Any other error is the server's answer (an unknown task, say) and is raised at once."""
        retryable = isinstance(exc, JSONRPCError) and exc.retryable
        if isinstance(exc, JSONRPCError) and not retryable and exc.code != INTERNAL_ERROR:
            raise exc
        now = anyio.current_time()
        if self._failing_since is None:
            self._failing_since = now
        elif now - self._failing_since >= (RETRYABLE_FOR if retryable else POLL_FAILURES_FOR):
            raise exc
        after = exc.retry_after if isinstance(exc, JSONRPCError) else None
        self._retry_in = POLL_RETRY if after is None else min(max(after, MIN_POLL), MAX_POLL)
        logger.warning("%s for task %.8s... failed (%s); trying again in %.1f s", method, self.id, exc, self._retry_in)

    def _pause(self) -> float:
        """Seconds until the next read: the server's interval, or :attr:`_retry_in` after a failed read."""
        return self.poll_interval if self._failing_since is None else self._retry_in

    async def _answer(self) -> None:
        """Answer the task's open questions: each asked of the person once, and counted as answered only once the
        server has acknowledged the ``tasks/update`` carrying it. An update that fails (an error from the server,
        ``request_timeout``) is sent again at the next poll with the same answers, while the task still asks for
        them; after ``MAX_UPDATE_ATTEMPTS`` failures in a row its error is raised."""
        requests = self._task.get("inputRequests")
        if not isinstance(requests, dict):
            raise RemoteProtocolError("the server sent an input_required task without inputRequests")
        for key in [key for key in self._unsent if key not in requests]:
            del self._unsent[key]  # no longer asked: the server has it (or gave up on it)
        for key, request in requests.items():
            if key in self._answered or key in self._unsent:
                continue  # shown once: a poll repeats the open questions until the server has the answer
            self._unsent[key] = await self._ask(request)
        if not self._unsent:
            return
        assert self.id is not None
        responses = dict(self._unsent)
        try:
            await self._port.request("tasks/update", {"taskId": self.id, "inputResponses": responses})
        except (JSONRPCError, TimeoutError) as exc:
            self._failed_updates += 1
            if self._failed_updates >= MAX_UPDATE_ATTEMPTS:
                raise
            logger.warning("tasks/update for task %.8s... failed (%s); sending the answers again", self.id, exc)
            return
        self._failed_updates = 0
        self._answered.update(responses)
        for key in responses:
            self._unsent.pop(key, None)

    async def _ask(self, request: object) -> JSONObject:
        """One input request answered by the person; for telemetry, in the trace of the call that created the task
        (its ``_meta`` names it) when this handle follows the task from elsewhere, as the server's question is."""
        if _telemetry.state.on:
            origin = self._origin()
            if origin is not None:
                from ..telemetry import _hooks

                with _hooks.in_task_origin(origin, elsewhere=True):
                    return await self._port.answer_input(request)
        return await self._port.answer_input(request)

    async def wait(self, *, on_status: Callable[[TaskHandle], Awaitable[None] | None] | None = None) -> CallToolResult:
        """Follow the task to its end, answering its questions through the client's handlers (each once), and
        return the tool's result.

        If the wait is cancelled, the task is cancelled on the server too (``tasks/cancel``). ``on_status`` is
        called with this handle whenever its status or status message changes (to show progress to a person).

        Raises:
            JSONRPCError: the task failed with this error.
            TaskCancelled: the task was cancelled.
        """
        if _telemetry.state.on:
            from ..telemetry import _hooks

            with _hooks.following(self.id, self._origin):
                return await self._wait(on_status)
        return await self._wait(on_status)

    def _origin(self) -> object:
        """What the server said of the call that created the task (telemetry links to it), if it did."""
        meta = self._task.get("_meta")
        return meta.get(TASK_ORIGIN) if isinstance(meta, dict) else None

    async def _wait(self, on_status: Callable[[TaskHandle], Awaitable[None] | None] | None) -> CallToolResult:
        """:meth:`wait`'s work."""
        seen: tuple[str, str | None] | None = None

        async def report() -> None:
            nonlocal seen
            if on_status is not None and (self.status, self.status_message) != seen:
                seen = (self.status, self.status_message)
                shown = on_status(self)
                if inspect.isawaitable(shown):
                    await shown

        try:
            if self.status == "input_required" and self.id is not None:
                await self._poll()  # the questions seen before may have been answered since (elsewhere, too)
            while not self.done:
                await report()
                if self.status == "input_required":
                    if not self._handshake:
                        await self._answer()
                    elif await self._fetch_result():  # the questions come on its stream; it returns at the end
                        continue
                await anyio.sleep(self._pause())
                await self._poll()
            while self._handshake and self._final is None and self.status != "cancelled":
                if not await self._fetch_result():
                    await anyio.sleep(self._pause())
            await report()
        except anyio.get_cancelled_exc_class():
            # Best effort: the caller's cancellation often closes the connection too (the client's own tasks are
            # cancelled with it), and what the cancel meets then must not take the cancellation's place.
            with anyio.CancelScope(shield=True), anyio.move_on_after(5), suppress(ElicitorError):
                await self.cancel()
            raise
        finally:
            self._port.end_progress(self._progress_token)
        return self.result()

    async def _fetch_result(self) -> bool:
        """2025-11-25: ``tasks/result``, which blocks until the task ends; then the status it ended in.

        ``False`` if it failed for a passing reason (a :attr:`~elicitor.JSONRPCError.retryable` error, ridden out as
        a poll's is): it is to be sent again, the task having perhaps asked or ended meanwhile. Unless the task is
        known to have failed: then the error is the task's own, whatever it says."""
        assert self.id is not None
        try:
            self._final = await self._port.request("tasks/result", {"taskId": self.id})
            self.status, self.status_message = "completed", None
        except JSONRPCError as exc:
            if exc.retryable and self.status != "failed":
                self._ride_out(exc, "tasks/result")
                return False
            self._final = exc
            await self.refresh()  # failed, or cancelled meanwhile
            if not self.done:
                raise
        self._failing_since = None
        return True

    def result(self) -> CallToolResult:
        """The tool's result, once the task has ended (see :meth:`wait` for what else it may raise)."""
        if self.status == "cancelled":
            raise TaskCancelled(self.id or "?", self.status_message)
        if isinstance(self._final, JSONRPCError):
            raise self._final
        if self.status == "failed":
            error = self._task.get("error")
            error = error if isinstance(error, dict) else {}
            code, message = error.get("code"), error.get("message")
            raise JSONRPCError(
                code if isinstance(code, int) else INTERNAL_ERROR,
                message if isinstance(message, str) else "the task failed",
                error.get("data"),
            )
        if self.status == "cancelled":
            raise TaskCancelled(self.id or "?", self.status_message)
        if self.status != "completed":
            raise RuntimeError(f"task {self.id} has not finished (it is {self.status})")
        result: Any = self._final if self._handshake else self._task.get("result")
        what = f"tool result of task {self.id}" if self.id is not None else "tools/call result"  # a direct call
        return read_tool_result(result, what)

    async def cancel(self) -> None:
        """Ask the server to cancel the task (it may still finish first; nothing happens on an ended task)."""
        if self.id is None or self.done:
            return
        await self._port.request("tasks/cancel", {"taskId": self.id})
