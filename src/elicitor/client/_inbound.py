"""What the server asks of the client: elicitations, sampling, roots and ping, mid-call or inside a round.

On the handshake revisions the server sends requests on the connection (``elicitation/create`` while a tool
runs); on 2026-07-28 the same questions come as a call's ``inputRequests`` (and a task's), answered by
:meth:`Inbound.answer_input`. Either way an elicitation takes the one path of :func:`~._answer.answer_elicitation`
(modes declared, the subset, URL safety, validation), after ``elicitation_limit``'s sliding window. While a handler
answers, no request's clock runs (a person's time is theirs). A handler that raises on a handshake revision
answers the server -32603 (its tool stops) and hands the exception to the oldest call waiting on this server
(:meth:`Inbound.waiting_call`), which raises it instead of the server's error.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager

import anyio

from .._exceptions import JSONRPCError, RemoteProtocolError
from ..protocol import RequestReceived
from ..types import INTERNAL_ERROR, METHOD_NOT_FOUND, REV_2025_11_25, JSONObject, has_elicitation
from ._answer import answer_elicitation
from ._elicitation_tasks import ElicitationTasks
from ._era import Era
from ._handlers import ElicitationHandler
from ._pace import Pace
from ._quiet import QuietClock
from ._url import UrlElicitationRequest
from ._url_flow import UrlFlow

logger = logging.getLogger("elicitor.client")

SamplingHandler = Callable[[JSONObject], Awaitable[JSONObject]]
"""Answers ``sampling/createMessage``: receives its params, returns a ``CreateMessageResult``."""


class RateLimit:
    """At most ``count`` elicitations in any ``seconds`` (a sliding window); the excess is declined, with a warning."""

    __slots__ = ("_era", "_recent", "count", "seconds")

    def __init__(self, count: int, seconds: float, era: Era) -> None:
        if count < 1 or seconds <= 0:
            raise ValueError("elicitation_limit must be (count >= 1, seconds > 0)")
        self.count, self.seconds = count, seconds
        self._era = era
        self._recent: deque[float] = deque()

    def admit(self) -> bool:
        """Whether one more elicitation may reach the person now (counted if so); logs why when it may not."""
        now = anyio.current_time()
        recent = self._recent
        while recent and recent[0] <= now - self.seconds:
            recent.popleft()
        if len(recent) >= self.count:
            who = self._era.server_info.display() if self._era.server_info else "the server"
            logger.warning("declined an elicitation from %s: more than %d in %g s", who, self.count, self.seconds)
            return False
        recent.append(now)
        return True


class Inbound:
    """Answers the server's requests with the client's handlers."""

    def __init__(
        self,
        era: Era,
        urls: UrlFlow,
        quiet: QuietClock | None,
        *,
        handler: ElicitationHandler | None,
        sampling: SamplingHandler | None,
        roots: Sequence[JSONObject] | None,
        limit: RateLimit | None,
        pace: Pace | None = None,
    ) -> None:
        self._era = era
        self._pace = pace
        """Told of every request from the server (a ping during the handshake keeps it alive: client/_pace.py)."""
        self._urls = urls
        self._quiet = quiet
        self._handler = handler
        self._sampling = sampling
        self._roots = list(roots) if roots is not None else None
        self._limit = limit
        self._waiting: list[list[Exception]] = []  # handshake era: each call waiting on the server, its failures
        self.tasks = ElicitationTasks()
        """Elicitations the server asked for as tasks (2025-11-25)."""

    @contextmanager
    def waiting_call(self) -> Iterator[list[Exception]]:
        """While a call waits on the server: the list a failing handler's exception is put in."""
        failures: list[Exception] = []
        self._waiting.append(failures)
        try:
            yield failures
        finally:
            self._waiting.remove(failures)

    async def __call__(self, request: RequestReceived) -> JSONObject:
        """A request from the server on the connection (the session's request callback)."""
        if self._pace is not None:
            self._pace.heard()
        quiet = self._quiet
        if quiet is None:
            return await self._answer_request(request)
        quiet.answering += 1  # a person may be answering: the time is theirs, no request's clock runs
        try:
            return await self._answer_request(request)
        finally:
            quiet.answering -= 1
            quiet.heard_from_server()

    async def _answer_request(self, request: RequestReceived) -> JSONObject:
        method, params = request.method, request.params or {}
        if method == "elicitation/create":
            version = self._era.protocol_version
            if version is not None and not has_elicitation(version):
                # The server chose a revision without elicitation in initialize: whatever this client declared
                # when it offered a newer one, the method does not exist on this connection.
                logger.warning("the server sent elicitation/create on %s, which has no elicitation", version)
                raise JSONRPCError(
                    METHOD_NOT_FOUND,
                    f"Method not found: elicitation/create is not part of protocol revision {version}, "
                    "which the server chose in initialize",
                )
            if "task" in params and self._runs_tasks():
                return self.tasks.create(params, self._answer_in_task)
            try:
                return await self.answer_elicitation(params)
            except JSONRPCError:
                raise
            except Exception as exc:
                raise self._report(exc) from None
        if method == "ping":
            return {}
        if method in ("sampling/createMessage", "roots/list"):
            return await self.answer_other(method, params)
        if method in ("tasks/get", "tasks/result", "tasks/cancel") and self._runs_tasks():
            if method == "tasks/get":
                return self.tasks.get(params)
            if method == "tasks/cancel":
                return self.tasks.cancel(params)
            return await self.tasks.result(params)
        raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _runs_tasks(self) -> bool:
        """Whether this client declared ``tasks.requests.elicitation.create`` (2025-11-25, with a handler)."""
        version = self._era.protocol_version
        declared = self._era.declared
        return version == REV_2025_11_25 and declared.tasks and bool(declared.modes_for(version))

    def _report(self, exc: Exception) -> Exception:
        """A handler failed (a script ran out of answers, a renderer broke): the call waiting on the server raises
        it, as on 2026-07-28 where the handler runs inside the call; the server gets an error answer, so its tool
        stops. With several calls waiting, the oldest is told. Without one, ``exc`` itself (logged, and -32603)."""
        if not self._waiting:
            return exc
        self._waiting[0].append(exc)
        return JSONRPCError(INTERNAL_ERROR, "Internal error: the client could not answer this elicitation")

    async def _answer_in_task(self, params: JSONObject) -> JSONObject:
        """An elicitation asked as a task, answered in the background (no request's clock runs meanwhile)."""
        quiet = self._quiet
        if quiet is not None:
            quiet.answering += 1
        try:
            return await self.answer_elicitation(params)
        except JSONRPCError:
            raise
        except Exception as exc:
            raise self._report(exc) from None
        finally:
            if quiet is not None:
                quiet.answering -= 1
                quiet.heard_from_server()

    async def answer_elicitation(self, params: JSONObject) -> JSONObject:
        """The ``ElicitResult`` for one ``elicitation/create``'s params.

        Raises:
            JSONRPCError: -32602 for a request outside the subset or in a mode this client did not declare.
        """
        era = self._era
        return await answer_elicitation(
            self._handler,
            params,
            era.server_info,
            modes=era.declared.modes_for(era.protocol_version),
            stateless=era.stateless,
            urls=self._urls,
            admit=self._limit.admit if self._limit is not None else None,
        )

    async def answer_input(self, request: object, refused: dict[str, str] | None = None) -> JSONObject:
        """The response to one of a 2026-07-28 round's (or task's) ``inputRequests``; a request this client
        cannot answer is answered ``cancel``, and why is put in ``refused`` under the request (as JSON)."""
        method = request.get("method") if isinstance(request, dict) else None
        params = request.get("params") if isinstance(request, dict) else None
        if method == "elicitation/create" and isinstance(params, dict):
            try:
                answer = await self.answer_elicitation(params)
            except JSONRPCError as exc:
                # An input response cannot carry an error: tell the server the request was dismissed.
                logger.warning("cancelling an input request the client cannot answer: %s", exc.message)
                if refused is not None:
                    refused[json.dumps(request, sort_keys=True)] = exc.message
                return {"action": "cancel"}
            wait_done = getattr(self._handler, "wait_done", None)
            if params.get("mode") == "url" and answer.get("action") == "accept" and wait_done is not None:
                # 2026-07-28 has no completion notification: retry once the person says they are done, so
                # the server sees the finished interaction instead of asking again at once.
                await wait_done(UrlElicitationRequest.from_params(params, self._era.server_info, stateless=True))
            return answer
        if method in ("sampling/createMessage", "roots/list") and isinstance(params, dict):
            return await self.answer_other(method, params)
        raise RemoteProtocolError(f"the server asked for input this client did not declare: {method!r}")

    async def answer_other(self, method: str, params: JSONObject) -> JSONObject:
        """``sampling/createMessage`` or ``roots/list``, if declared."""
        if method == "sampling/createMessage" and self._sampling is not None:
            return await self._sampling(params)
        if method == "roots/list" and self._roots is not None:
            return {"roots": self._roots}
        raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: {method} (this client did not declare it)")
