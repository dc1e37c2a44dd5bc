"""Whose task is whose, on the 2026-07-28 server connection that several people's requests share.

A 2026-07-28 server binds each task to who created it (the authorization context it saw), and answers
``tasks/get``, ``tasks/result``, ``tasks/update`` and ``tasks/cancel`` for that one only. Through the proxy the
server sees one client, the proxy, whoever asks: so the proxy keeps the binding itself. It records the principal
of every task a forwarded request created, and refuses a request about a task to anyone else, with the answer a
server gives for a task it does not know; a task it did not see created (another proxy process, an id made up)
is nobody's through this one. Without authentication every person is the same principal (``None``): a task id is
then all it takes, as on a server without authentication.
"""

from __future__ import annotations

from collections import OrderedDict

from .._exceptions import JSONRPCError
from ..types import INVALID_PARAMS, JSONObject

MAX_TASKS = 65536
"""Tasks remembered at once (the oldest is forgotten first: its owner then meets "unknown task")."""

_ABOUT_A_TASK = frozenset({"tasks/get", "tasks/result", "tasks/update", "tasks/cancel"})


class TaskOwners:
    """The principal of each task the proxy saw created (see the module docstring)."""

    def __init__(self) -> None:
        self._owners: OrderedDict[str, str | None] = OrderedDict()

    def check(self, method: str, params: JSONObject, principal: str | None) -> None:
        """Refuse (-32602) a request about a task that ``principal`` did not create through this proxy."""
        if method not in _ABOUT_A_TASK:
            return
        task_id = params.get("taskId")
        if not isinstance(task_id, str) or task_id not in self._owners or self._owners[task_id] != principal:
            raise JSONRPCError(INVALID_PARAMS, f"Invalid params: unknown task {task_id!r}")

    def created(self, result: JSONObject, principal: str | None) -> None:
        """Record the task a forwarded request created, if its result is one (2026-07-28 ``resultType: task``)."""
        task_id = result.get("taskId")
        if result.get("resultType") != "task" or not isinstance(task_id, str):
            return
        self._owners[task_id] = principal
        self._owners.move_to_end(task_id)
        while len(self._owners) > MAX_TASKS:
            self._owners.popitem(last=False)
