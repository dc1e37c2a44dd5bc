"""The 2026-07-28 call in rounds, on one connection: a retry's answers handed to the call's waiting run, or the
handler replayed from the sealed ``requestState``; the round's end sealed again (mrtr.mdx, "Multi Round-Trip").

The run of a call (:class:`~._rounds.Run`) waits in this process between rounds, parked (:class:`~._rounds.
ParkedRuns`); the retry that comes here finds it by the ids the sealed state carries and hands it the new answers
(the fast path, one ``ctx.elicit`` resumed where it waits). A retry that comes to another process, or after the
run was let go, replays the handler with every answer so far: the same tool code serves both, and the server's
author never branches on the revision. :meth:`RoundDriver.take` serves the plain case without a task for the
request at all (:attr:`~elicitor.session.Session.take`); :meth:`RoundDriver.serve` every other.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from .._exceptions import JSONRPCError
from ..protocol import RequestMeta, RequestReceived, is_stateless_request, parse_request_meta
from ..session import Session
from ..telemetry import _state as _telemetry
from ..types import INVALID_PARAMS, STATELESS_REVISIONS, JSONObject, JSONValue, RequestId
from ._context import Context
from ._rounds import AnswerBook, Escalate, Finished, ParkedRuns, RoundAsker, Run
from ._sealing import request_binding

if TYPE_CHECKING:
    from ._dispatch import Notify, ServerSession

logger = logging.getLogger("elicitor.server")

Escalation = Callable[[JSONObject, "dict[str, JSONValue] | None"], Awaitable[JSONObject]]
"""Turns a call into a task with the answers and ``ctx.once`` values gathered so far (``ctx.run_as_task()``)."""


class RoundDriver:
    """One connection's 2026-07-28 calls, round by round (see the module's docstring)."""

    __slots__ = ("_owner",)

    def __init__(self, owner: ServerSession) -> None:
        self._owner = owner

    def take(self, request: RequestReceived) -> _RoundReply | None:
        """Serve the next round of a call whose run is parked here without a task for the request
        (:attr:`Session.take`): the retry's answers wake the run, and the run's own task answers the request as
        it asks again or ends (two passes of the event loop per round instead of four).

        Only the plain case: a ``tools/call`` retry whose run waits here for this round with the same client
        capabilities, of a tool that never becomes a task, telemetry off, the handler asking from its own task.
        Anything else, a token that does not open included, is left to :meth:`ServerSession.on_request`
        (``None``), which serves it, or refuses it, as ever.
        """
        owner = self._owner
        params, parked, session = request.params, owner.parked, owner.session
        if (
            request.method != "tools/call"
            or parked is None
            or session is None
            or _telemetry.state.on
            or not params
            or "requestState" not in params
            or not is_stateless_request(params)
        ):
            return None
        name = params.get("name")
        tool = owner.server._tools.get(name) if isinstance(name, str) else None
        fresh = params.get("inputResponses")
        if tool is None or tool.task != "never" or not (fresh is None or isinstance(fresh, dict)):
            return None
        try:
            meta = parse_request_meta(params, STATELESS_REVISIONS)
            if owner.principal is not None:
                meta = dataclasses.replace(meta, principal=owner.principal)
            binding = request_binding(request.method, params, meta.principal)
            state = owner.server.sealer.open(params["requestState"], binding)
        except JSONRPCError:
            return None
        run = parked.claim(state.get("r"), state.get("n"), state.get("c"))
        if run is None:
            return None
        if run.context.capabilities != meta.capabilities:
            run.cancel()  # what serve() does with it: the call is replayed under the new capabilities
            return None
        if run.asker.concurrent:
            parked.park(run)  # its round settles in a task: serve() claims it again
            return None
        request_meta = params.get("_meta")
        token: JSONValue = request_meta.get("progressToken") if isinstance(request_meta, dict) else None
        run.context.rebind(request.id, meta, owner.notifier(request.id), token)
        asker = run.asker
        asker.may_escalate = False
        reply = _RoundReply(self, session, run, request.id, binding)
        asker.next_round(fresh or {})
        if asker.asks:
            reply.deliver_soon()  # a question is still unanswered: the round ends at once, asking it again
        else:
            asker.round_end = reply
        return reply

    async def serve(
        self,
        request: RequestReceived,
        meta: RequestMeta,
        notify: Notify,
        invoke: Callable[[Context], Awaitable[JSONObject]],
        token: JSONValue,
        escalate: Escalation | None = None,
    ) -> JSONObject:
        """Serve one round of a 2026-07-28 call: hand this request's answers to the call's run if it waits in this
        process (the fast path), or replay the handler from the answers the sealed ``requestState`` carries; then
        the call's result, or ``input_required`` with the questions still open and a new sealed state.

        ``invoke`` runs the handler with its Context; ``escalate``: how the call becomes a task at
        ``ctx.run_as_task()``.
        """
        owner = self._owner
        params = request.params or {}
        binding = request_binding(request.method, params, meta.principal)
        state: JSONObject = {}
        if "requestState" in params:
            state = owner.server.sealer.open(params["requestState"], binding)
        fresh = params.get("inputResponses")
        if fresh is None:
            fresh = {}
        if not isinstance(fresh, dict):
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
        parked = owner.parked
        run = parked.claim(state.get("r"), state.get("n"), state.get("c")) if parked is not None else None
        origin: object = state.get("o")  # the first round's span (telemetry): every later round links to it
        if _telemetry.state.on:
            from ..telemetry import _hooks

            _hooks.round_served(bool(state), run is not None and run.context.capabilities == meta.capabilities)
            origin = _hooks.first_round(origin)
        if run is not None and run.context.capabilities == meta.capabilities:
            # Fast path: the run waits in this process; hand it this round's answers.
            run.context.rebind(request.id, meta, notify, token)
            run.asker.next_round(fresh)
        else:
            if run is not None:
                run.cancel()
            # Stateless path: replay the handler with every answer the sealed state carries.
            asker = RoundAsker(AnswerBook.unpack(state.get("a")), fresh, _dict(state.get("m")))
            asker.asked_in = state.get("w")  # telemetry: when the last round asked (see :meth:`round`)
            ctx = owner.context(request, meta, notify, token, asker)
            run = Run(functools.partial(invoke, ctx), asker, ctx, state.get("c"))
            if parked is None:
                return await self._one_round(run, binding, origin)
            parked.start(run)
        if _telemetry.state.on:  # this round's span is the one a failure of the run's tool goes on
            from ..telemetry import _hooks

            _hooks.serving_round(run.context, run.asker)
        run.asker.may_escalate = escalate is not None
        return await self.round(run, binding, parked, escalate, origin)

    async def _one_round(self, run: Run, binding: bytes, origin: object) -> JSONObject:
        """Serve a round with nothing to park the run in (no long-lived task group): replay-only."""
        result: JSONObject | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(run.main)
            try:
                result = await self.round(run, binding, None, origin=origin)
            finally:
                tg.cancel_scope.cancel()
        assert result is not None
        return result

    async def round(
        self,
        run: Run,
        binding: bytes,
        parked: ParkedRuns | None,
        escalate: Escalation | None = None,
        origin: object = None,
    ) -> JSONObject:
        """Run ``run`` to its next question or its end: the result, ``input_required`` (the run parked in
        ``parked`` for the next round, or cancelled without one), or the task it became."""
        try:
            outcome = await run.next()
        except BaseException:
            run.cancel()
            raise
        if isinstance(outcome, Finished):
            return outcome.value
        if isinstance(outcome, Escalate):
            run.cancel()  # the task replays the tool from the answers so far, wherever it runs
            assert escalate is not None
            return await escalate(run.asker.answers.pack(), run.asker.memo)
        sealed: JSONObject = {
            "a": run.asker.answers.pack(), "m": run.asker.memo, "r": run.id, "n": run.round, "c": run.call
        }  # fmt: skip
        if isinstance(origin, dict):
            sealed["o"] = origin
        if _telemetry.state.on:  # when, and in which round, these questions are asked: a replay records them from then
            from ..telemetry import _hooks

            asked = _hooks.asked_in()
            if asked is not None:
                sealed["w"] = asked
        token_out = self._owner.server.sealer.seal(sealed, binding, compress=("a",))  # "a": the client's answers
        if parked is not None:
            parked.park(run)
        else:
            run.cancel()
        return {"resultType": "input_required", "inputRequests": outcome.input_requests, "requestState": token_out}


class _RoundReply:
    """A round taken by :meth:`RoundDriver.take`: answers its request with the round's outcome."""

    __slots__ = ("_binding", "_driver", "_request_id", "_run", "_session")

    def __init__(self, driver: RoundDriver, session: Session, run: Run, request_id: RequestId, binding: bytes) -> None:
        self._driver = driver
        self._session = session
        self._run = run
        self._request_id = request_id
        self._binding = binding

    async def deliver(self) -> None:
        driver = self._driver
        owner = driver._owner
        outcome: JSONObject | Exception
        try:
            outcome = owner.stamp(await driver.round(self._run, self._binding, owner.parked))
        except Exception as exc:
            outcome = exc
        try:
            await self._session.answer(self._request_id, "tools/call", outcome)
        except Exception:  # a result that cannot be sent must not fail the tool's task (or the connection's tasks)
            logger.exception("answering request %r failed", self._request_id)

    def deliver_soon(self) -> None:
        self._session.start_soon(self.deliver)

    def cancel(self) -> None:
        """The peer cancelled the request, or the connection ended: the run stops, as a request's task would
        have stopped it."""
        self._run.asker.round_end = None
        self._session.connection.forget_incoming(self._request_id)
        self._run.cancel()


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
