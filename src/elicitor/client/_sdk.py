"""elicitor's handlers as the official MCP Python SDK's ``elicitation_callback``.

A host built on that SDK adopts the terminal handler (or any elicitor handler) in one line::

    from elicitor.client import TerminalHandler, sdk_elicitation_callback

    async with mcp.Client(server, elicitation_callback=sdk_elicitation_callback(TerminalHandler())) as client: ...

The callback does what ``elicitor.Client`` does with a request: shows which server asks, parses the schema (a
request outside the subset is answered with -32602), fills defaults and validates the person's answer before it is
sent, and shows URL-mode requests with their warnings. The SDK itself stays an optional dependency: it is imported
only when a request arrives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .._exceptions import FormDefinitionError, TooManyRounds
from .._outcomes import Accepted, outcome_to_wire
from ..protocol import parse_implementation
from ..types import INVALID_PARAMS, URL_ELICITATION_REQUIRED, Implementation
from ._answer import ask_until_valid, request_form
from ._handlers import ElicitationHandler, ElicitationRequest
from ._url import UrlElicitationRequest


class SdkCallback(Protocol):
    """The shape of the official SDK's ``elicitation_callback``."""

    async def __call__(self, context: Any, params: Any) -> Any: ...


def sdk_elicitation_callback(handler: ElicitationHandler) -> SdkCallback:
    """The official SDK's ``elicitation_callback(context, params)``, answered by ``handler``.

    Declare URL mode to the SDK yourself only if ``handler`` has a ``url`` method (the SDK declares both modes).
    """

    async def callback(context: Any, params: Any) -> Any:
        import mcp_types as types  # the official SDK's types; present wherever this callback is used

        raw = params.model_dump(by_alias=True, exclude_none=True, mode="json")
        server = _server_of(context)
        message = str(raw.get("message", ""))
        if raw.get("mode") == "url":
            url_handler = getattr(handler, "url", None)
            if url_handler is None:
                return types.ErrorData(code=INVALID_PARAMS, message="Invalid params: URL mode is not supported here")
            request = UrlElicitationRequest.from_params(raw, server)
            return types.ElicitResult(action=(await url_handler(request)).action)
        try:
            form = request_form(raw.get("requestedSchema") or {}, message)
        except FormDefinitionError as exc:
            text = f"Invalid params: requestedSchema is not a valid form: {exc}"
            return types.ErrorData(code=INVALID_PARAMS, message=text)
        outcome = await ask_until_valid(handler, ElicitationRequest(message=message, form=form, server=server))
        return types.ElicitResult.model_validate(outcome_to_wire(outcome))

    return callback


def _server_of(context: Any) -> Implementation | None:
    """Who asks, as the SDK's session (or client) recorded it (self-reported by the server)."""
    info = getattr(context, "server_info", None) or getattr(getattr(context, "session", None), "server_info", None)
    if info is None:
        return None
    return parse_implementation(info.model_dump(by_alias=True, exclude_none=True, mode="json"))


async def sdk_call_tool(
    client: Any, name: str, arguments: Mapping[str, Any] | None, handler: ElicitationHandler
) -> Any:
    """``client.call_tool(name, arguments)`` on the official SDK's client, with -32042 handled as elicitor's own
    client handles it.

    On the handshake revisions a server whose tool needs an out-of-band step first (``UrlElicitationRequired``)
    answers the call with -32042 listing URL-mode elicitations (2025-11-25 client/elicitation, "URL Elicitation
    Required Error"); the SDK raises it as ``MCPError``. Here each listed step goes to ``handler.url`` (shown with
    its host and warnings; opened only with the person's consent), the adapter waits until they say they are done
    (``handler.wait_done`` when the handler has it), and the call is made again. A step the person declines or
    cancels, a handler without URL mode, or a server that asks again for a step already done (it did not record it
    as completed) ends with the server's error raised again (the last, with :class:`~elicitor.TooManyRounds`).
    """
    seen: set[str] = set()
    while True:
        try:
            return await client.call_tool(name, dict(arguments or {}))
        except Exception as exc:
            if getattr(exc, "code", None) != URL_ELICITATION_REQUIRED:
                raise
            data = getattr(exc, "data", None)
            listed = data.get("elicitations") if isinstance(data, dict) else None
            url_handler = getattr(handler, "url", None)
            if not isinstance(listed, list) or not listed or url_handler is None:
                raise
            server = _server_of(client)
            for params in listed:
                if not isinstance(params, dict) or params.get("mode") != "url":
                    raise
                request = UrlElicitationRequest.from_params(params, server)
                if request.elicitation_id in seen:
                    raise TooManyRounds(
                        f"the server asked again for URL elicitation {request.elicitation_id} after the person "
                        "finished there (a loop): it did not record that step as completed"
                    ) from exc
                seen.add(str(request.elicitation_id))
                if not isinstance(await url_handler(request), Accepted):
                    raise
                wait_done = getattr(handler, "wait_done", None)
                if wait_done is not None:
                    await wait_done(request)
