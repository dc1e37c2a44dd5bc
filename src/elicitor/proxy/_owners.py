"""Whose task is whose, on an upstream server that sees one client (the proxy) for several people.

A server binds each task to who created it (the authorization context it saw; a 2025-11-25 server without one,
to the session, unless its tasks must outlive the session, as on replicas sharing a store), and answers
``tasks/get``, ``tasks/result``, ``tasks/update`` and ``tasks/cancel`` for that one only. Through the proxy the
server sees one client, the proxy, whoever asks (the same authorization context, the proxy's own sign-in): so the
proxy keeps the binding itself, on either era. It records the principal of every task a forwarded request created,
and refuses a request about a task to anyone else, with the answer a server gives for a task it does not know; a
task it did not see created (another proxy process, an id made up) is nobody's through this one when people sign
in, and goes to the server when they do not (which then answers as it would). A 2025-11-25
``tasks/list`` is cut down to the asker's own tasks. Without authentication every person is the same principal
(``None``): a task id is then all it takes, as on a server without authentication.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections import OrderedDict

from .._exceptions import JSONRPCError
from ..types import INVALID_PARAMS, META_IDEMPOTENCY_KEY, JSONObject

MAX_TASKS = 65536
"""Tasks remembered at once (the oldest is forgotten first: its owner then meets "unknown task")."""

_ABOUT_A_TASK = frozenset({"tasks/get", "tasks/result", "tasks/update", "tasks/cancel"})


class TaskOwners:
    """The principal of each task the proxy saw created (see the module docstring)."""

    def __init__(self) -> None:
        self._owners: OrderedDict[str, str | None] = OrderedDict()

    def check(self, method: str, params: JSONObject, principal: str | None) -> None:
        """Refuse (-32602) a request about a task that ``principal`` did not create through this proxy (without
        authentication, about a task someone else created through it: one it never saw goes to the server)."""
        if method not in _ABOUT_A_TASK:
            return
        task_id = params.get("taskId")
        if isinstance(task_id, str) and task_id in self._owners:
            if self._owners[task_id] == principal:
                return
        elif principal is None:
            # Without authentication a task id is all it takes, as on the server: one this proxy did not see
            # created (made up, or from before a restart) goes to the server, which answers as it does (-32021
            # to a client without the tasks extension, -32601 for a method its era removed, unknown task).
            return
        raise JSONRPCError(INVALID_PARAMS, f"Invalid params: unknown task {task_id!r}")

    def tells(self, method: str, params: JSONObject | None, principal: str | None) -> bool:
        """Whether a notification the server sent on a connection of ``principal``'s may reach them: any but a
        task's status (``notifications/tasks/status``), and that one only for a task :meth:`check` would let them
        ask about. A server that binds tasks to the one client it sees may tell every session of it of every task:
        through the proxy, one person's task (its status message, its result's coming) to everybody."""
        if method != "notifications/tasks/status" or not isinstance(params, dict):
            return True
        task_id = params.get("taskId")
        if isinstance(task_id, str) and task_id in self._owners:
            return self._owners[task_id] == principal
        return principal is None

    def created(self, result: JSONObject, principal: str | None) -> None:
        """Record the task a forwarded request created, if its result is one (2026-07-28 ``resultType: task``;
        2025-11-25 ``{"task": {"taskId": ...}}``)."""
        task = result.get("task")
        if result.get("resultType") == "task":
            task_id = result.get("taskId")
        elif isinstance(task, dict):
            task_id = task.get("taskId")
        else:
            return
        if not isinstance(task_id, str):
            return
        self._owners[task_id] = principal
        self._owners.move_to_end(task_id)
        while len(self._owners) > MAX_TASKS:
            self._owners.popitem(last=False)

    def listed(self, result: JSONObject, principal: str | None) -> JSONObject:
        """A 2025-11-25 ``tasks/list`` result with only ``principal``'s tasks (the server listed everyone's)."""
        tasks = result.get("tasks")
        if not isinstance(tasks, list):
            return result
        mine = [
            task
            for task in tasks
            if isinstance(task, dict)
            and isinstance(task.get("taskId"), str)
            and task["taskId"] in self._owners
            and self._owners[task["taskId"]] == principal
        ]
        return {**result, "tasks": mine}


def own_key(params: JSONObject, principal: str | None) -> JSONObject:
    """``params`` with their idempotency key (``dev.elicitor/idempotencyKey``) made the principal's own.

    A server that keeps calls under their key (replicas sharing a store) binds each key to the principal it sees,
    so that a key never gets anyone else's call: through the proxy that is one principal for everybody, and
    another person sending the same key (the same tool, the same arguments) would be handed the first call's
    result, or take over its run. The key sent upstream is a digest of the principal and the client's key: the
    same person sending it again (their session lost, say) still finds their call; another person never does.
    Without authentication every person is the same principal (``None``), as on the server: the key is left as
    it is."""
    meta = params.get("_meta")
    key = meta.get(META_IDEMPOTENCY_KEY) if isinstance(meta, dict) else None
    if principal is None or not isinstance(meta, dict) or not isinstance(key, str):
        return params
    digest = hashlib.sha256(json.dumps([principal, key]).encode()).hexdigest()
    return {**params, "_meta": {**meta, META_IDEMPOTENCY_KEY: digest}}


class RoundStates:
    """A 2026-07-28 server's ``requestState``, bound to the principal it was given to.

    The server binds the state of each round to who asked; through the proxy it sees one client, whoever asks, so
    a person holding another's state (and that call's arguments) could answer their round. The proxy hands the
    client the server's state with a tag of its own (an HMAC of the principal and the state, under a key of this
    proxy), and takes back only a state whose tag is the asker's: anything else is refused with -32602, as the
    server refuses a state that was not issued for the call. The server's state itself is untouched. Without
    authentication every person is the same principal (``None``), as on the server: the state passes as it is
    (a stdio proxy started again between two rounds still takes it)."""

    PREFIX = "proxy:"

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def _tag(self, state: str, principal: str | None) -> str:
        mac = hmac.new(self._key, json.dumps([principal, state]).encode(), hashlib.sha256).digest()[:16]
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def give(self, result: JSONObject, principal: str | None) -> JSONObject:
        """``result`` with its ``requestState`` tagged for ``principal``."""
        state = result.get("requestState")
        if principal is None or not isinstance(state, str):
            return result
        return {**result, "requestState": f"{self.PREFIX}{self._tag(state, principal)}:{state}"}

    def take(self, params: JSONObject, principal: str | None) -> JSONObject:
        """``params`` with the server's own ``requestState`` back, if its tag is ``principal``'s (else -32602)."""
        if principal is None or "requestState" not in params:
            return params
        token = params["requestState"]
        if isinstance(token, str) and token.startswith(self.PREFIX):
            tag, _, state = token[len(self.PREFIX) :].partition(":")
            if hmac.compare_digest(tag, self._tag(state, principal)):
                return {**params, "requestState": state}
        raise JSONRPCError(INVALID_PARAMS, "Invalid params: this requestState was not issued for this call")
