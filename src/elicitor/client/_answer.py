"""The answerer: one ``elicitation/create`` request's raw params in, the ``ElicitResult`` to send out.

Everything a client must check before a person sees a request, and before an answer leaves, in one place that
needs no connection: the mode was declared, the message is text, the schema is inside the spec's subset (else
-32602), a URL request has a URL (and an id where its revision requires one) and goes through the URL handler with
its warnings, and an accepted form is completed with its defaults and validated, the person being asked again with
the errors (client/elicitation, "Security Considerations": validate before sending). ``Client`` (for requests
mid-call, in 2026-07-28 rounds, in tasks and for -32042), the proxy's own renderers (``elicitor proxy --ui``) and
the official SDK's callback adapter all answer through it: there is one path.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import replace
from typing import Any, Protocol

from .._exceptions import FormDefinitionError, InvalidAnswer, JSONRPCError
from .._outcomes import Accepted, Cancelled, outcome_to_wire
from ..forms import SINGLE_FIELD, Form
from ..telemetry import _state as _telemetry
from ..types import INVALID_PARAMS, Implementation, JSONObject
from ._handlers import ElicitationHandler, ElicitationOutcome, ElicitationRequest
from ._url import UrlElicitationRequest

logger = logging.getLogger("elicitor.client")

MAX_ANSWER_ATTEMPTS = 5
"""How often a handler is asked again after an invalid answer before the client cancels the elicitation."""


class UrlWatch(Protocol):
    """Where a URL request's id is remembered while the person is away (the completion notice may come first)."""

    def expect(self, elicitation_id: str) -> None:
        """Listen for ``notifications/elicitation/complete`` naming ``elicitation_id`` from now on."""
        ...

    def forget(self, elicitation_id: str | None) -> None:
        """Stop listening: the person declined, cancelled, or the handler failed."""
        ...


async def ask_until_valid(handler: ElicitationHandler, request: ElicitationRequest) -> ElicitationOutcome:
    """Ask ``handler``; fill defaults into an acceptance and validate it, asking again with the errors if invalid.

    After ``MAX_ANSWER_ATTEMPTS`` invalid answers the request is cancelled: nothing invalid is ever sent.
    """
    for _ in range(MAX_ANSWER_ATTEMPTS):
        outcome = await handler(request)
        if not isinstance(outcome, Accepted):
            return outcome
        content = request.form.with_defaults(outcome.data or {})
        try:
            return Accepted(request.form.validate(content))
        except InvalidAnswer as exc:
            request = replace(request, errors=exc.errors, previous=content)
            if _telemetry.state.on:
                from ..telemetry import _hooks

                _hooks.invalid_answer()
    logger.warning("no valid answer after %d attempts; cancelling the elicitation", MAX_ANSWER_ATTEMPTS)
    return Cancelled()


def answer_elicitation(
    handler: ElicitationHandler | None,
    params: JSONObject,
    server: Implementation | None,
    *,
    modes: Collection[str],
    stateless: bool,
    urls: UrlWatch | None = None,
    admit: Callable[[], bool] | None = None,
) -> Awaitable[JSONObject]:
    """Ask ``handler`` the elicitation ``params`` describe and return the wire answer.

    Args:
        handler: who answers (a person through a renderer, or a script); ``None``: nobody (every mode refused).
        params: the request's params exactly as the server sent them.
        server: who asks, as the server named itself (shown to the person).
        modes: the elicitation modes the asking side declared (``form``, ``url``) for the revision in use.
        stateless: the request came on 2026-07-28 (URL requests carry no ``elicitationId`` there).
        urls: remembers a URL request's id before the person opens the page, so a completion notice that comes
            before the handler returns is not missed; forgotten again unless the person accepted.
        admit: called once the request is known to be valid, just before the handler is asked; ``False`` declines
            without asking (the client's ``elicitation_limit``).

    Raises:
        JSONRPCError: -32602 for a request outside the subset, or in a mode not declared.
    """
    answer = _answer(handler, params, server, modes, stateless, urls, admit)
    if _telemetry.state.on:  # an "elicitation" span: mode, outcome, the person's time (never the answer)
        from ..telemetry import _hooks

        return _hooks.elicitation("client", params, answer, carry=not stateless)
    return answer


async def _answer(
    handler: ElicitationHandler | None,
    params: JSONObject,
    server: Implementation | None,
    modes: Collection[str],
    stateless: bool,
    urls: UrlWatch | None,
    admit: Callable[[], bool] | None,
) -> JSONObject:
    mode = params.get("mode", "form")
    if handler is None or not isinstance(mode, str) or mode not in modes:
        raise JSONRPCError(INVALID_PARAMS, f"Invalid params: this client did not declare elicitation mode {mode!r}")
    message = params.get("message")
    if not isinstance(message, str):
        raise JSONRPCError(INVALID_PARAMS, "Invalid params: elicitation message must be a string")
    if mode == "url":
        url_request = UrlElicitationRequest.from_params(params, server, stateless=stateless)
        if not url_request.url:
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: a URL-mode elicitation needs a url")
        if not stateless and url_request.elicitation_id is None:
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: a URL-mode elicitation needs an elicitationId")
        url_handler: Any = getattr(handler, "url", None)
        if url_handler is None:
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: this client's handler does not take URL-mode requests")
        if admit is not None and not admit():
            return {"action": "decline"}
        elicitation_id = url_request.elicitation_id
        if urls is not None and elicitation_id is not None:
            urls.expect(elicitation_id)  # before the person opens the page: it may end before the handler returns
        try:
            outcome = await url_handler(url_request)
        except BaseException:
            if urls is not None:
                urls.forget(elicitation_id)
            raise
        if not isinstance(outcome, Accepted):
            if urls is not None:
                urls.forget(elicitation_id)
            return {"action": outcome.action}
        return {"action": "accept"}
    schema = params.get("requestedSchema")
    try:
        form = request_form(schema, message)
    except FormDefinitionError as exc:
        raise JSONRPCError(INVALID_PARAMS, f"Invalid params: requestedSchema is not a valid form: {exc}") from None
    if admit is not None and not admit():
        return {"action": "decline"}
    request = ElicitationRequest(message=message, form=form, server=server)
    return outcome_to_wire(await ask_until_valid(handler, request))


def request_form(schema: object, message: str) -> Form[dict[str, Any]]:
    """The form of a ``requestedSchema``; a lone untitled field named ``value`` (what a server sends for
    ``ctx.elicit("Go ahead?", bool)``, here and in other SDKs) is labelled with the message, not with "value".

    Raises:
        FormDefinitionError: the schema is outside the spec's subset.
    """
    form = Form.from_schema(schema if isinstance(schema, dict) else {}, check_secrets=False)
    if len(form.fields) == 1 and form.fields[0].name == SINGLE_FIELD and not form.fields[0].title and message:
        return Form((replace(form.fields[0], title=message),), check_secrets=False)
    return form
