"""Driving one call to its complete result: 2026-07-28 rounds and 2025-11-25's -32042 retries.

On 2026-07-28 a request may end with ``resultType: "input_required"``: each of its ``inputRequests`` is answered
(:meth:`~._inbound.Inbound.answer_input`) and the request is sent again with ``inputResponses`` and the server's
``requestState`` echoed byte-exact, at most ``max_rounds`` times (then :class:`~elicitor.TooManyRounds`). On
2025-11-25 a tool that needs the person somewhere else first ends with -32042 (URL elicitation required, client/
elicitation "URL Elicitation Required Error"): each listed URL is shown, the client waits until it is done (the
completion notice, the person, or ``url_timeout``) and retries the call; a declined step ends ``tools/call`` with the
``isError`` result the server itself returns on 2026-07-28, so callers see one outcome on both revisions.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from .._exceptions import JSONRPCError, RemoteProtocolError, TooManyRounds
from .._outcomes import url_refused_text
from ..telemetry import _state as _telemetry
from ..types import URL_ELICITATION_REQUIRED, JSONObject, JSONValue
from ._era import Era
from ._handlers import ElicitationHandler
from ._inbound import Inbound
from ._notifications import CallbackQueue, progress_key
from ._requests import Requests, keyed
from ._url import UrlElicitationRequest
from ._url_flow import UrlFlow

if TYPE_CHECKING:
    from ..telemetry._hooks import Call

DEFAULT_MAX_ROUNDS = 16
"""How many ``input_required`` rounds a call may take before :class:`TooManyRounds`."""


class Rounds:
    """Follows calls through their rounds."""

    def __init__(
        self,
        era: Era,
        requests: Requests,
        inbound: Inbound,
        urls: UrlFlow,
        callbacks: CallbackQueue,
        *,
        handler: ElicitationHandler | None,
        max_rounds: int,
    ) -> None:
        self._era = era
        self._requests = requests
        self._inbound = inbound
        self._urls = urls
        self._callbacks = callbacks
        self._handler = handler
        self.max_rounds = max_rounds

    def drive(self, method: str, params: JSONObject) -> Awaitable[JSONObject]:
        """Send ``method`` and follow ``input_required`` rounds until a complete result (or a task) arrives.

        If the elicitation handler raised while this call waited, the call raises that exception, on every
        revision: on 2026-07-28 the handler runs here, in the call's own rounds; on the handshake revisions it runs
        when the server's ``elicitation/create`` arrives, which answers the server with an error (so the tool
        stops) and hands the exception to the call waiting on that server, here (see :class:`~._inbound.Inbound`).
        The call's progress and log callbacks queued before its result are delivered before it returns.
        """
        if _telemetry.state.on:  # one span around all the call's requests: one trace whatever the rounds do
            return self._traced(method, params)
        return self._drive(method, params, None)

    async def _traced(self, method: str, params: JSONObject) -> JSONObject:
        from ..telemetry import _hooks

        with _hooks.calling(method, params) as call:
            return await self._drive(method, params, call)

    async def _drive(self, method: str, params: JSONObject, call: Call | None) -> JSONObject:
        if self._era.stateless:
            result = await self._rounds(method, params, call)
            await self._callbacks.caught_up(progress_key(params))
            return result
        with self._inbound.waiting_call() as failures:
            try:
                result = await self._rounds(method, params, call)
            except Exception:
                if failures:
                    raise failures[0] from None  # what the server answered is a consequence of it
                raise
        if failures:
            raise failures[0]
        await self._callbacks.caught_up(progress_key(params))  # its progress and logs before its result
        return result

    async def _rounds(self, method: str, params: JSONObject, call: Call | None) -> JSONObject:
        """The request, and its ``input_required`` rounds (2026-07-28) or -32042 retries (2025-11-25)."""
        responses: JSONObject | None = None
        state: JSONValue = None
        seen: set[str] = set()
        cannot: dict[str, str] = {}
        """Input requests of the last round this client could not answer (as JSON), and why."""
        if method == "tools/call" and not self._era.stateless:
            # Each -32042 retry is the same call: under one idempotency key, a server that keeps calls finds its
            # record (the pages it asked for) even when the retry comes on a new session, its replica gone.
            params = keyed(params)
        for number in range(1, self.max_rounds + 2):
            if call is not None:
                call.round(number)
            attempt = dict(params)
            if responses is not None:
                attempt["inputResponses"] = responses
            if state is not None:
                attempt["requestState"] = state
            try:
                result = await self._requests.request(method, attempt)
            except JSONRPCError as exc:
                if exc.code != URL_ELICITATION_REQUIRED or self._era.stateless:
                    raise
                refused = await self._url_required(exc, seen)
                if refused is not None:
                    if method != "tools/call":
                        raise  # no tool error to end with: the caller gets the server's -32042
                    # The person declined or cancelled: end as the server ends it on 2026-07-28.
                    text = url_refused_text(str(params.get("name")), [refused])
                    return {"content": [{"type": "text", "text": text}], "isError": True}
                responses, state = None, None
                continue
            kind = result.get("resultType", "complete")
            if kind == "complete" or (kind == "task" and method == "tools/call" and self._era.declared.tasks):
                return result  # a task is followed by the caller (TaskHandle)
            if kind != "input_required":
                raise RemoteProtocolError(f"the server sent an unknown resultType {kind!r}")
            requests = result.get("inputRequests") or {}
            state = result.get("requestState")
            if not isinstance(requests, dict) or (state is not None and not isinstance(state, str)):
                raise RemoteProtocolError("the server sent a malformed input_required result")
            responses = {}
            for request in requests.values():
                again = cannot.get(json.dumps(request, sort_keys=True))
                if again is not None:
                    # Cancelled last round because this client cannot answer it, asked again as it was: a server
                    # that does so would ask until max_rounds. Say what it asks for instead.
                    raise RemoteProtocolError(
                        f"the server asked again for input this client refused (answered cancel): {again}"
                    )
            cannot = {}
            for key, request in requests.items():
                responses[key] = await self._inbound.answer_input(request, cannot)
        raise TooManyRounds(f"{method} still asked for input after {self.max_rounds} rounds")

    async def _url_required(self, error: JSONRPCError, seen: set[str]) -> str | None:
        """-32042 (2025-11-25): have the person open each URL, wait until they are done, then the call is retried.

        Returns ``None`` when every step was accepted, else the message of the step the person declined or
        cancelled (the call cannot go on; later steps are not shown). An id seen before means the server asks
        again for something already done: a loop, reported as the error.
        """
        data = error.data if isinstance(error.data, dict) else {}
        listed = data.get("elicitations")
        if not isinstance(listed, list) or not listed:
            raise error
        for params in listed:
            if not isinstance(params, dict) or params.get("mode") != "url":
                raise error
            elicitation_id = str(params.get("elicitationId"))
            if elicitation_id in seen:
                raise TooManyRounds(
                    f"the server asked again for URL elicitation {elicitation_id} after the person finished there "
                    "(a loop): it did not record that step as completed (a page that completes it for no signed-in "
                    "user, or another one, is refused; the server's log says which)"
                ) from error
            seen.add(elicitation_id)
            try:
                answer = await self._inbound.answer_elicitation(params)  # the same checks as a URL request mid-call
            except JSONRPCError:
                raise error from None  # this client cannot take it: the caller gets the server's error
            if answer["action"] != "accept":
                return str(params.get("message", ""))  # declined or cancelled: the call cannot go on
            request = UrlElicitationRequest.from_params(params, self._era.server_info)
            await self._urls.wait_done(request, self._handler)
        return None
