"""How a tool's questions reach the client: pushed as requests, or collected into a multi-round-trip round.

Both implement ``ask(method, params, key) -> result``; :class:`~elicitor.server.Context` does not know which one it
holds, so tool code is the same on every revision.

* :class:`PushAsker` — 2025-06-18 and 2025-11-25: send ``elicitation/create`` (or any server request) on the
  session, related to the tool call, and wait for the answer in place.
* :class:`ReplayAsker` — 2026-07-28: answers known from ``requestState`` and ``inputResponses`` return at once; the
  first unknown question marks the round as blocked and parks the asking task until the round driver ends the
  run (see :mod:`elicitor.server._rounds`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import anyio

from ..session import Session
from ..types import JSONObject, JSONValue, RequestId

_ELICIT_ACTIONS = frozenset({"accept", "decline", "cancel"})


class Asker(Protocol):
    memo: dict[str, JSONValue] | None

    async def ask(self, method: str, params: JSONObject, key: str) -> JSONObject: ...


class PushAsker:
    """Send each question as a request on the live session (handshake revisions)."""

    memo: dict[str, JSONValue] | None = None

    def __init__(self, session: Session, related: RequestId) -> None:
        self._session = session
        self._related = related

    async def ask(self, method: str, params: JSONObject, key: str) -> JSONObject:
        return await self._session.request(method, params, related=self._related)


def usable_response(method: str, response: object) -> bool:
    """Whether ``response`` can stand as the answer to an input request of ``method``.

    A malformed answer is treated as no answer: the question is asked again rather than failing the call
    (mrtr.mdx: if responses are missing, re-send an ``InputRequiredResult``).
    """
    if not isinstance(response, dict):
        return False
    if method == "elicitation/create":
        return response.get("action") in _ELICIT_ACTIONS
    return True


class ReplayAsker:
    """Serve questions from known answers; collect the unknown ones into the round's input requests."""

    def __init__(self, answers: Mapping[str, JSONObject], fresh: Mapping[str, Any], memo: dict[str, JSONValue]) -> None:
        self.answers = dict(answers)
        self._fresh = fresh
        self.memo: dict[str, JSONValue] | None = memo
        self.asks: dict[str, JSONObject] = {}
        self.used: set[str] = set()
        self.blocked = anyio.Event()

    async def ask(self, method: str, params: JSONObject, key: str) -> JSONObject:
        answer = self.answers.get(key)
        if answer is None:
            candidate = self._fresh.get(key)
            if isinstance(candidate, dict) and usable_response(method, candidate):
                answer = self.answers[key] = candidate
        if answer is not None:
            self.used.add(key)
            return answer
        self.asks[key] = {"method": method, "params": params}
        self.blocked.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover
