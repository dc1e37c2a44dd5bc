"""How a tool's questions reach the client: pushed as requests, or collected into multi-round-trip rounds.

Both implement ``ask(method, params, key) -> result``; :class:`~elicitor.server.Context` does not know which one it
holds, so tool code is the same on every revision.

* :class:`PushAsker` — 2025-06-18 and 2025-11-25: send ``elicitation/create`` (or any server request) on the
  session, related to the tool call, and wait for the answer in place.
* :class:`~elicitor.server._rounds.RoundAsker` — 2026-07-28: an answer already known (from the sealed
  ``requestState`` or this request's ``inputResponses``) returns at once; an unknown question is recorded for the
  current round and its task waits until a later round brings the answer.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from ..session import Session
from ..telemetry import _state as _telemetry
from ..types import JSONObject, JSONValue, RequestId


class OnceJournal(Protocol):
    """Where ``ctx.once`` records its steps durably, for a call that may be run again elsewhere (a task).

    ``begin`` returns the recorded value of a finished step (``(True, value)``), or marks the step started for this
    run and returns ``(False, None)``: the step may then run. It raises if the step was started by an earlier run
    that never recorded its end (its outcome is unknown: it is never run again), and cancels the calling run if a
    newer run holds the call (fencing). ``commit`` records the step's value, merged by name, never replacing one;
    ``abandon`` forgets the start of a step that raised (it did not take effect, so a later run may try again).
    ``keep`` records a value that took no side effect to make (a page's id) in one write, start and end at once,
    unless one is recorded: it returns the recorded value, so every run of the call uses the first.
    """

    async def begin(self, name: str) -> tuple[bool, JSONValue]: ...

    async def keep(self, name: str, value: JSONValue) -> JSONValue: ...

    async def commit(self, name: str, value: JSONValue) -> None: ...

    async def abandon(self, name: str) -> None: ...


class Asker(Protocol):
    memo: dict[str, JSONValue] | None
    journal: OnceJournal | None

    def ask(self, method: str, params: JSONObject, key: str) -> Awaitable[JSONObject]: ...


class PushAsker:
    """Send each question as a request on the live session (handshake revisions).

    ``timeout`` bounds the wait for each answer (``Server(elicitation_timeout=...)``): a client that never answers
    cannot hold the tool and its pending request forever. On expiry the client is sent ``notifications/cancelled``
    and the wait raises ``TimeoutError``.
    """

    __slots__ = ("_related", "_session", "_timeout")
    memo: dict[str, JSONValue] | None = None
    journal: OnceJournal | None = None

    def __init__(self, session: Session, related: RequestId, timeout: float | None = None) -> None:
        self._session = session
        self._related = related
        self._timeout = timeout

    def ask(self, method: str, params: JSONObject, key: str) -> Awaitable[JSONObject]:
        return self._push(method, params)

    def _push(self, method: str, params: JSONObject) -> Awaitable[JSONObject]:
        """The question sent to the client, its answer awaited (in an ``elicitation`` span, with its metrics, when
        telemetry is on): what every push asker does for a question it has no answer to yet."""
        answer = self._session.request(method, params, related=self._related, timeout=self._timeout)
        if _telemetry.state.on and method == "elicitation/create":
            from ..telemetry import _hooks

            return _hooks.elicitation("server", params, answer)
        return answer
