"""Listing and calling a server's tools, and choosing when a call runs as a task.

On 2026-07-28 the server decides: a client that declared the tasks extension may get ``resultType: "task"`` back.
On 2025-11-25 the client decides, by the rules of basic/utilities/tasks ("Tool-Level Negotiation"): only when the
server declared ``tasks.requests.tools.call``, and then by the tool's ``execution.taskSupport`` — ``"required"``:
the call MUST be a task (``task`` in the ``tools/call`` params); ``"optional"``: :meth:`Tools.call` calls it
directly (it waits for the result either way) and :meth:`Tools.start` as a task; absent or ``"forbidden"``: never
a task. What each tool declares comes from ``tools/list``, listed once when first needed and cached per tool until
the server says the list changed (``notifications/tools/list_changed``) or the application lists again. A tool
the listing did not name keeps the old fallback: a -32601 from a server with task-augmented calls means "only as a
task", and the call is sent again as one. Either way the result is followed by a :class:`~._tasks.TaskHandle`,
which reaches the client only through a :class:`~._tasks.TaskPort`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from typing import Any

from .._exceptions import JSONRPCError
from ..telemetry import _state as _telemetry
from ..types import METHOD_NOT_FOUND, REV_2025_11_25, CallToolResult, JSONObject, TaskSupport, Tool
from ._era import Era
from ._headers import header_params
from ._inbound import Inbound
from ._lenient import read_tool, read_tool_result
from ._notifications import Progress, ProgressCallback
from ._requests import Requests
from ._rounds import Rounds
from ._tasks import TaskHandle, TaskPort
from ._transport import HttpAware

logger = logging.getLogger("elicitor.client")


class Tools:
    """A server's tools, as one client sees and calls them."""

    def __init__(self, era: Era, requests: Requests, rounds: Rounds, inbound: Inbound, progress: Progress) -> None:
        self._era = era
        self._requests = requests
        self._rounds = rounds
        self._progress = progress
        self._support: dict[str, TaskSupport] | None = None
        """Each listed tool's ``execution.taskSupport`` (2025-11-25); ``None`` until listed."""
        self.left_out: tuple[str, ...] = ()
        """Why the last listing left entries out (one reason each), or ended before the server's last page."""
        self.port = TaskPort(request=requests.request, answer_input=inbound.answer_input, end_progress=progress.end)

    async def list(self) -> list[Tool]:
        """Every tool the server offers (all pages), leaving out, with a warning, those that do not parse (no
        ``name`` or ``inputSchema``, say) and those whose ``x-mcp-header`` is invalid (see :mod:`._lenient`)."""
        tools: list[Tool] = []
        support: dict[str, TaskSupport] = {}
        left_out: list[str] = []
        for raw in await self._requests.list_all("tools/list", "tools", left_out):
            tool = read_tool(raw, left_out)
            if tool is None:
                continue
            mirrored = header_params(tool.input_schema)
            if isinstance(mirrored, str):
                left_out.append(f"leaving out tool {tool.name!r}: {mirrored}")
                logger.warning("%s", left_out[-1])
                continue
            transport = self._era.transport
            if mirrored and isinstance(transport, HttpAware):
                transport.mirror(tool.name, mirrored)
            support[tool.name] = tool.task_support
            tools.append(tool)
        self._support = support
        self.left_out = tuple(left_out)
        return tools

    def list_changed(self) -> None:
        """``notifications/tools/list_changed``: what the tools declared is listed again when next needed."""
        self._support = None

    async def task_support(self, name: str) -> TaskSupport | None:
        """What tool ``name`` declared, listing the tools first if they have not been (``None``: not listed)."""
        if self._support is None:
            await self.list()
        assert self._support is not None
        return self._support.get(name)

    async def _as_task(self, name: str, *, wanted: bool) -> tuple[bool, bool]:
        """Whether to send this call as a task (2025-11-25) and whether a -32601 may still mean "only as a task".

        ``wanted``: the caller would rather have a task where the tool allows one (:meth:`start`).
        """
        if not self.handshake_tasks():
            return False, False
        support = await self.task_support(name)
        if support is None:  # not in the listing: the server's -32601 decides
            return wanted, not wanted
        return support == "required" or (wanted and support == "optional"), False

    def call(
        self, name: str, arguments: Mapping[str, Any] | None, progress: ProgressCallback | None
    ) -> Awaitable[CallToolResult]:
        """:meth:`Client.call_tool`."""
        if _telemetry.state.on:  # one span around the call and the task it may become (its polls and answers)
            return self._traced(name, arguments, progress)
        return self._call(name, arguments, progress)

    async def _traced(
        self, name: str, arguments: Mapping[str, Any] | None, progress: ProgressCallback | None
    ) -> CallToolResult:
        from ..telemetry import _hooks

        with _hooks.calling("tools/call", {"name": name}):
            return await self._call(name, arguments, progress)

    async def _call(
        self, name: str, arguments: Mapping[str, Any] | None, progress: ProgressCallback | None
    ) -> CallToolResult:
        params: JSONObject = {"name": name, "arguments": dict(arguments or {})}
        token = self._progress.attach(params, progress)
        try:
            as_task, fallback = await self._as_task(name, wanted=False)
            try:
                result = await self._rounds.drive("tools/call", {**params, "task": {}} if as_task else params)
            except JSONRPCError as exc:
                if exc.code != METHOD_NOT_FOUND or not fallback:
                    raise
                # 2025-11-25: -32601 from a server with task-augmented tools/call: this tool runs only as a task.
                result = await self._rounds.drive("tools/call", {**params, "task": {}})
            handle = self.task_of(result)
            if handle is not None:
                return await handle.wait()
        finally:
            self._progress.end(token)
        return read_tool_result(result, f"tools/call result of {name!r}")

    async def start(
        self, name: str, arguments: Mapping[str, Any] | None, progress: ProgressCallback | None
    ) -> TaskHandle:
        """:meth:`Client.start_tool`."""
        params: JSONObject = {"name": name, "arguments": dict(arguments or {})}
        token = self._progress.attach(params, progress)
        try:
            as_task, _ = await self._as_task(name, wanted=True)
            if as_task and await self.task_support(name) is None:
                try:  # 2025-11-25, a tool the listing did not name: one that does not run as a task says -32601
                    result = await self._rounds.drive("tools/call", {**params, "task": {}})
                except JSONRPCError as exc:
                    if exc.code != METHOD_NOT_FOUND:
                        raise
                    result = await self._rounds.drive("tools/call", params)
            else:
                result = await self._rounds.drive("tools/call", {**params, "task": {}} if as_task else params)
            handle = self.task_of(result, token)  # the token is ended when the handle's wait ends
        except BaseException:
            self._progress.end(token)
            raise
        if handle is None:
            self._progress.end(token)
            return TaskHandle.finished(self.port, result)
        return handle

    def handshake_tasks(self) -> bool:
        """2025-11-25 with a server that runs tools/call as tasks when asked (its ``tasks`` capability)."""
        tasks = self._era.server_capabilities.get("tasks")
        requests = tasks.get("requests") if isinstance(tasks, dict) else None
        tools = requests.get("tools") if isinstance(requests, dict) else None
        return (
            self._era.declared.tasks and self._era.protocol_version == REV_2025_11_25 and isinstance(tools, dict)
            and isinstance(tools.get("call"), dict)
        )  # fmt: skip

    def task_of(self, result: JSONObject, token: str | None = None) -> TaskHandle | None:
        """The task a ``tools/call`` result created, if it did (either era's shape); ``token``: the call's progress."""
        if result.get("resultType") == "task":
            return TaskHandle(self.port, result, progress_token=token)
        task = result.get("task")
        if not self._era.stateless and isinstance(task, dict) and "content" not in result:
            return TaskHandle(self.port, task, handshake=True, progress_token=token)
        return None

    async def task(self, task_id: str) -> TaskHandle:
        """:meth:`Client.task`."""
        handle = TaskHandle(self.port, {"taskId": task_id, "status": "working"}, handshake=not self._era.stateless)
        await handle.refresh()
        return handle
