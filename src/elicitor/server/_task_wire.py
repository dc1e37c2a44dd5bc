"""Tasks on the wire: the shapes of both revisions (2026-07-28 extension ``io.modelcontextprotocol/tasks`` and
2025-11-25 basic/utilities/tasks), which methods are task methods, and the capability checks."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from .._exceptions import JSONRPCError
from ..protocol import ClientCapabilities
from ..state import TaskRecord
from ..types import MISSING_REQUIRED_CLIENT_CAPABILITY, TASKS_EXTENSION, JSONObject

TaskSupport = Literal["never", "optional", "required"]
"""Whether a tool runs as a task: never, when the client can (``optional``), or always (``required``: a client
without the extension gets -32021)."""

_TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
_HANDSHAKE_TASK_METHODS = frozenset({"tasks/get", "tasks/result", "tasks/cancel"})


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


def created_result(record: TaskRecord, *, handshake: bool) -> JSONObject:
    """The ``CreateTaskResult`` of a task, in its revision's shape."""
    if handshake:
        return {"task": handshake_task(record)}
    return {"resultType": "task", **wire_task(record, detailed=False)}


def task_channel(replica: str) -> str:
    """The bus queue from which a replica hears about the tasks it runs."""
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


def is_task_method(method: str, *, handshake: bool = False) -> bool:
    return method in (_HANDSHAKE_TASK_METHODS if handshake else _TASK_METHODS)


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def handshake_task(record: TaskRecord) -> JSONObject:
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
