"""Running a handler: a tool, a prompt or a resource, with its Context, and what each way of failing becomes.

A tool's failures are results (``isError``: the model reads them, basic/server/tools "Error Handling"), except
what the protocol says otherwise: a missing client capability is -32021 on 2026-07-28, a URL-mode step the tool
needs first is -32042 on 2025-11-25 and a round on 2026-07-28, and a store away for a moment is a retryable
error. A prompt's or a resource's failures are JSON-RPC errors (their results have no ``isError``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from .._exceptions import (
    ClientCapabilityMissing,
    ConnectionClosed,
    InvalidAnswer,
    JSONRPCError,
    TemporarilyUnavailable,
)
from .._outcomes import url_refused_text
from .._sentences import ANSWER_INVALID, CAPABILITY_MISSING, TOOL_FAILED, said
from ..session import internal_error
from ..telemetry import _state as _telemetry
from ..types import (
    INTERNAL_ERROR,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    URL_ELICITATION_REQUIRED,
    JSONObject,
    JSONValue,
)
from ._context import Context
from ._tools import ToolDef, error_result, to_call_result
from ._url import UrlElicitationRequired

logger = logging.getLogger("elicitor.server")


async def invoke_tool(tool: ToolDef, ctx: Context, kwargs: dict[str, Any], *, stateless: bool) -> JSONObject:
    """Run ``tool`` with ``kwargs`` (bound already) and ``ctx``; its value, or how it failed, as a call result.

    A tool that raises :class:`UrlElicitationRequired` needs a URL-mode step first: on 2025-11-25 that is error
    -32042 listing the steps (the client has the person open them and calls again); on 2026-07-28 the steps are
    asked in a round and the tool runs again once the person has dealt with them, or the call ends with a tool
    error if they declined.
    """
    if tool.context_param is not None:
        kwargs[tool.context_param] = ctx
    attempt = 0
    while True:
        try:
            value = await tool.fn(**kwargs) if tool.is_async else tool.fn(**kwargs)
            return to_call_result(value, tool.output_schema is not None)
        except UrlElicitationRequired as exc:
            required = exc
        except ClientCapabilityMissing as exc:
            return missing_capability(tool, exc, stateless=stateless)
        except InvalidAnswer as exc:
            return error_result(said(ANSWER_INVALID, tool=repr(tool.name), why=str(exc)))
        except (JSONRPCError, ConnectionClosed, TemporarilyUnavailable):
            raise  # TemporarilyUnavailable: answered with a retryable error, not a result that blames the tool
        except Exception as exc:
            logger.exception("tool %r failed", tool.name)
            if _telemetry.state.on:  # the exception's type and frames on the call's span
                from ..telemetry import _hooks

                _hooks.tool_failed(exc, ctx)
            return error_result(str(exc) or said(TOOL_FAILED, tool=repr(tool.name), why=type(exc).__name__))
        # The tool needs out-of-band interactions first.
        if not stateless:
            # 2025-11-25: error -32042 lists them; the client has the person open them and calls again.
            elicitations: JSONValue = [e.to_wire() for e in required.elicitations]
            raise JSONRPCError(URL_ELICITATION_REQUIRED, str(required), {"elicitations": elicitations})
        # 2026-07-28: ask for them in a round; once the person has dealt with them, run the tool again.
        # Each attempt is its own question: a person who has not finished yet is asked again, next round.
        attempt += 1
        try:
            refused = await ctx.wait_for_url_elicitations(required.elicitations, attempt=attempt)
        except ClientCapabilityMissing as exc:
            return missing_capability(tool, exc, stateless=stateless)
        if refused:  # declined or cancelled: the call cannot go on (2025-11-25: the client makes this result)
            return error_result(url_refused_text(tool.name, [e.message for e in refused]))


async def invoke_handler(
    fn: Callable[..., Any],
    context_param: str | None,
    ctx: Context,
    kwargs: dict[str, Any],
    convert: Callable[[Any], JSONObject],
    *,
    stateless: bool,
) -> JSONObject:
    """Run a prompt or resource handler: failures are JSON-RPC errors (these results have no ``isError``)."""
    if context_param is not None:
        kwargs = {**kwargs, context_param: ctx}
    try:
        value = fn(**kwargs)
        if inspect.isawaitable(value):
            value = await value
        return convert(value)
    except ClientCapabilityMissing as exc:
        code = MISSING_REQUIRED_CLIENT_CAPABILITY if stateless else INTERNAL_ERROR
        data: JSONObject | None = {"requiredCapabilities": exc.required} if stateless else None
        raise JSONRPCError(code, f"Missing required client capability: {exc}", data) from exc
    except (JSONRPCError, ConnectionClosed):
        raise
    except Exception as exc:
        raise internal_error(exc, f"handler for request {ctx.request_id}") from exc


def missing_capability(tool: ToolDef, exc: ClientCapabilityMissing, *, stateless: bool) -> JSONObject:
    """A tool needs a capability the client did not declare: -32021 on 2026-07-28, an ``isError`` result before."""
    if stateless:
        raise JSONRPCError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"Missing required client capability: {exc}",
            {"requiredCapabilities": exc.required},
        ) from exc
    return error_result(said(CAPABILITY_MISSING, tool=repr(tool.name), why=str(exc)))
