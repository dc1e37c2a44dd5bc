"""How a tool's questions reach the client: pushed as requests, or collected into multi-round-trip rounds.

Both implement ``ask(method, params, key) -> result``; :class:`~elicitor.server.Context` does not know which one it
holds, so tool code is the same on every revision.

* :class:`PushAsker` — 2025-06-18 and 2025-11-25: send ``elicitation/create`` (or any server request) on the
  session, related to the tool call, and wait for the answer in place.
* :class:`RoundAsker` — 2026-07-28: an answer already known (from the sealed ``requestState`` or this request's
  ``inputResponses``) returns at once; an unknown question is recorded for the current round and its task waits
  until a later round brings the answer (see :mod:`elicitor.server._rounds`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from .._loop import running_asyncio_loop
from ..session import Session, Waiter
from ..types import JSONObject, JSONValue, RequestId

if TYPE_CHECKING:
    from ._rounds import AnswerBook

_ELICIT_ACTIONS = frozenset({"accept", "decline", "cancel"})


class Asker(Protocol):
    memo: dict[str, JSONValue] | None

    def ask(self, method: str, params: JSONObject, key: str) -> Awaitable[JSONObject]: ...


class PushAsker:
    """Send each question as a request on the live session (handshake revisions)."""

    __slots__ = ("_related", "_session")
    memo: dict[str, JSONValue] | None = None

    def __init__(self, session: Session, related: RequestId) -> None:
        self._session = session
        self._related = related

    def ask(self, method: str, params: JSONObject, key: str) -> Awaitable[JSONObject]:
        return self._session.request(method, params, related=self._related)


def usable_response(method: str, response: object) -> bool:
    """Whether ``response`` can stand as the answer to an input request of ``method``.

    A malformed answer is treated as no answer: the question is asked again rather than failing the call
    (mrtr.mdx: if responses are missing, re-send an ``InputRequiredResult``).
    """
    if not isinstance(response, dict):
        return False
    if method == "elicitation/create":
        return response.get("action") in _ELICIT_ACTIONS
    if method == "roots/list":
        return isinstance(response.get("roots"), list)
    if method == "sampling/createMessage":
        return "content" in response
    return True


class _Waiter:
    __slots__ = ("answer", "event", "method")

    def __init__(self, method: str, loop: asyncio.AbstractEventLoop | None) -> None:
        self.method = method
        self.event = Waiter(loop)
        self.answer: JSONObject | None = None


class RoundAsker:
    """Serve questions from known answers; collect unknown ones into the current round's input requests.

    Attributes:
        answers: every answer known so far, by input-request key (what the sealed state carries forward).
        asks: the input requests of the current round, by key.
        activity: set whenever a question joins the current round.
    """

    def __init__(self, answers: AnswerBook, fresh: Mapping[str, Any], memo: dict[str, JSONValue]) -> None:
        self.answers = answers
        self.memo: dict[str, JSONValue] | None = memo
        self.asks: dict[str, JSONObject] = {}
        self._loop = running_asyncio_loop()
        self.activity = Waiter(self._loop)
        self.owner: int | None = None
        self.concurrent = False
        """Whether a question came from a task other than the handler's own (so branches may ask together)."""
        self._fresh = fresh
        self._waiting: dict[str, _Waiter] = {}

    async def ask(self, method: str, params: JSONObject, key: str) -> JSONObject:
        answer = self.answers.get(key)
        if answer is None:
            candidate = self._fresh.get(key)
            if isinstance(candidate, dict) and usable_response(method, candidate):
                answer = candidate
                self.answers.add(key, candidate)
        if answer is not None:
            return answer
        if not self.concurrent and anyio.get_current_task().id != self.owner:
            self.concurrent = True
        waiter = self._waiting.get(key)
        if waiter is None:
            waiter = self._waiting[key] = _Waiter(method, self._loop)
        self.asks[key] = {"method": method, "params": params}
        self.activity.set()
        await waiter.event.wait()
        assert waiter.answer is not None
        return waiter.answer

    def next_round(self, fresh: Mapping[str, Any]) -> None:
        """Start a round with this retry's ``inputResponses``: wake every question they answer.

        Questions still unanswered stay in ``asks`` (they are asked again); unknown keys are ignored.
        """
        self._fresh = fresh
        self.activity = Waiter(self._loop)
        for key, waiter in list(self._waiting.items()):
            candidate = fresh.get(key)
            if isinstance(candidate, dict) and usable_response(waiter.method, candidate):
                self.answers.add(key, candidate)
                waiter.answer = candidate
                del self._waiting[key]
                self.asks.pop(key, None)
                waiter.event.set()
        if self.asks:
            self.activity.set()
