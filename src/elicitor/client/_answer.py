"""The answerer: one ``elicitation/create`` request's raw params in, the ``ElicitResult`` to send out.

Everything a client must check before a person sees a request, and before an answer leaves, in one place that
needs no connection: the mode was declared, the message is text, the schema is inside the spec's subset (else
-32602), a URL request has a URL (and an id where its revision requires one) and goes through the URL handler with
its warnings, and an accepted form is completed with its defaults and validated, the person being asked again with
the errors (client/elicitation, "Security Considerations": validate before sending). ``Client`` and the proxy's
own renderers (``elicitor proxy --ui``) both answer through it.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from .._exceptions import FormDefinitionError, JSONRPCError
from .._outcomes import Accepted, outcome_to_wire
from ..forms import Form
from ..types import INVALID_PARAMS, Implementation, JSONObject
from ._handlers import ElicitationHandler, ElicitationRequest
from ._url import UrlElicitationRequest


async def answer_elicitation(
    handler: ElicitationHandler,
    params: JSONObject,
    server: Implementation | None,
    *,
    modes: Collection[str],
    modern: bool,
) -> JSONObject:
    """Ask ``handler`` the elicitation ``params`` describe and return the wire answer.

    Args:
        handler: who answers (a person through a renderer, or a script).
        params: the request's params exactly as the server sent them.
        server: who asks, as the server named itself (shown to the person).
        modes: the elicitation modes the asking side declared (``form``, ``url``).
        modern: the request came on 2026-07-28 (URL requests carry no ``elicitationId`` there).

    Raises:
        JSONRPCError: -32602 for a request outside the subset, or in a mode not declared.
    """
    from ._client import ask_until_valid  # the loop lives with the Client that also uses it

    mode = params.get("mode", "form")
    if not isinstance(mode, str) or mode not in modes:
        raise JSONRPCError(INVALID_PARAMS, f"Invalid params: this client did not declare elicitation mode {mode!r}")
    message = params.get("message")
    if not isinstance(message, str):
        raise JSONRPCError(INVALID_PARAMS, "Invalid params: elicitation message must be a string")
    if mode == "url":
        url_request = UrlElicitationRequest.from_params(params, server, modern=modern)
        if not url_request.url:
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: a URL-mode elicitation needs a url")
        if not modern and url_request.elicitation_id is None:
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: a URL-mode elicitation needs an elicitationId")
        url_handler: Any = getattr(handler, "url", None)
        if url_handler is None:
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: this client's handler does not take URL-mode requests")
        outcome = await url_handler(url_request)
        return {"action": "accept"} if isinstance(outcome, Accepted) else {"action": outcome.action}
    schema = params.get("requestedSchema")
    try:
        form = Form.from_schema(schema if isinstance(schema, dict) else {}, check_secrets=False)
    except FormDefinitionError as exc:
        raise JSONRPCError(INVALID_PARAMS, f"Invalid params: requestedSchema is not a valid form: {exc}") from None
    request = ElicitationRequest(message=message, form=form, server=server)
    return outcome_to_wire(await ask_until_valid(handler, request))
