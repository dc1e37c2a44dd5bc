"""The exceptions elicitor raises, as one tree.

* ElicitorError — base of everything below
  + ProtocolError — a breach of JSON-RPC/MCP rules (never raised directly)
    - LocalProtocolError — this side tried to break the rules (a bug or a misuse of the API)
    - RemoteProtocolError — the peer broke the rules; the message says how
  + JSONRPCError — a JSON-RPC error response: received from the peer, or raised by a handler to send one
  + ConnectionClosed — the peer went away (EOF, process exit) before an answer came
  + FormDefinitionError — a form is outside the spec's restricted schema subset, or asks for a secret
  + InvalidAnswer — accepted content failed the form's validation; ``errors`` lists each field's problem
    - InvalidScriptedAnswer — a ``ScriptedHandler``'s answer failed it (a test's script is wrong)
  + ClientCapabilityMissing — the client did not declare a capability a call needs (sampling, roots...)
    - ElicitationUnsupported — the client did not declare the elicitation mode (or revision) a call needs
  + TooManyRounds — a multi-round-trip request did not complete within the client's round limit
  + TaskCancelled — the task a call became was cancelled before it finished
  + TemporarilyUnavailable — a service this side relies on is away for a moment: try again
    - StoreUnavailable (elicitor.state) — the shared state (Redis) cannot be reached
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field as _field

from .i18n._message import Message
from .types import JSONValue


class ElicitorError(Exception):
    """Base class of every exception elicitor raises on purpose."""


class ProtocolError(ElicitorError):
    """A breach of the protocol's rules. Raise a subclass: whose fault it was matters."""

    def __init__(self, message: str) -> None:
        if type(self) is ProtocolError:
            raise TypeError(
                "tried to instantiate ProtocolError directly: use LocalProtocolError or RemoteProtocolError"
            )
        super().__init__(message)


class LocalProtocolError(ProtocolError):
    """This side tried to do something the protocol forbids (for example, answer a request twice)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids. The session stays up; the message says what was wrong."""


class JSONRPCError(ElicitorError):
    """A JSON-RPC error: ``code``, ``message`` and optional ``data``, exactly as on the wire.

    Received: the peer answered a request with an error. Raised inside a handler (a tool, say): the request is
    answered with this error instead of a result.
    """

    def __init__(self, code: int, message: str, data: JSONValue = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data

    @property
    def retryable(self) -> bool:
        """Whether the peer says the request failed for a passing reason (``data.retryable`` is ``true``): a
        service it relies on was away for a moment, and the same request may succeed if sent again later.

        elicitor's servers mark so a request that met :class:`TemporarilyUnavailable` (the shared state away);
        the code stays -32603, so this is how a client tells it from a bug. Whether to send the request again is
        still the caller's choice: a read is safe to repeat, a ``tools/call`` may have acted before it failed.
        """
        return isinstance(self.data, dict) and self.data.get("retryable") is True

    @property
    def retry_after(self) -> float | None:
        """Seconds the peer suggests waiting before sending a :attr:`retryable` request again
        (``data.retryAfter``), or ``None`` if it gave no usable number."""
        value = self.data.get("retryAfter") if isinstance(self.data, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf:
            return float(value)
        return None

    def to_wire(self) -> dict[str, JSONValue]:
        """The ``error`` member of a JSON-RPC error response."""
        error: dict[str, JSONValue] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ConnectionClosed(ElicitorError):
    """The connection ended (EOF, the process exited, the session was closed) while waiting for it."""


class FormDefinitionError(ElicitorError, TypeError):
    """A form cannot be sent as an elicitation: the message names the field and the rule it breaks.

    Raised by ``Form.of``, or by the ``ctx.elicit`` that uses the form, before anything is sent: a person is never
    shown a form that cannot be answered. ``Form.of`` at module level has it raised at import.
    """


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem with one field of an answer; ``field`` is ``None`` for the form as a whole.

    ``message`` is English (what goes on the wire and in logs); ``text``, when elicitor wrote the sentence, keeps
    it deferred so that a renderer shows it in the person's language (:meth:`elicitor.i18n.Language.text`).
    """

    field: str | None
    message: str
    text: Message | None = _field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class InvalidAnswer(ElicitorError, ValueError):
    """The person's accepted content does not satisfy the form; ``errors`` says what, field by field.

    Catch it to ask again::

        try:
            outcome = await ctx.elicit("Party size?", Booking)
        except InvalidAnswer as exc:
            outcome = await ctx.elicit(f"Please fix: {exc}", Booking)
    """

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        super().__init__("; ".join(str(e) for e in self.errors) or "invalid answer")


class InvalidScriptedAnswer(InvalidAnswer):
    """A :class:`~elicitor.ScriptedHandler` answered with content the form does not accept.

    The client validates every answer before sending it (a person would be asked again); a script cannot correct
    itself, so the handler raises this instead, and ``Client.call_tool`` raises it on every revision. ``question``
    is the elicitation's message, ``answer`` the content that was checked (the script's answer with the form's
    defaults filled in), ``errors`` each field's problem.
    """

    def __init__(self, question: str, answer: object, errors: Sequence[FieldError]) -> None:
        super().__init__(errors)
        self.question = question
        self.answer = answer
        problems = "; ".join(str(e) for e in self.errors)
        self.args = (f"the scripted answer to {question!r} is invalid: {answer!r}: {problems}",)


class ClientCapabilityMissing(ElicitorError):
    """The client did not declare a capability this call needs; ``required`` names it as capabilities JSON.

    Left uncaught in a tool on 2026-07-28 it becomes error -32021 with ``data.requiredCapabilities``; on the
    handshake revisions the tool call ends with an ``isError`` result that says so.
    """

    def __init__(self, message: str, required: dict[str, JSONValue]) -> None:
        super().__init__(message)
        self.required = required


class ElicitationUnsupported(ClientCapabilityMissing):
    """The client cannot answer this elicitation (no ``elicitation`` capability, or not this mode).

    It is an exception, never an outcome, so that it can never be mistaken for consent. ``ctx.confirm`` turns it
    into ``False``.
    """

    def __init__(self, message: str, *, mode: str = "form") -> None:
        super().__init__(message, {"elicitation": {} if mode == "form" else {mode: {}}})
        self.mode = mode


class TooManyRounds(ElicitorError):
    """A multi-round-trip request still asked for input after the client's ``max_rounds`` retries."""


class TaskCancelled(ElicitorError):
    """The task a tool call became was cancelled (by this client, another one of the same user, or the server)
    before it finished; ``task_id`` names it, ``reason`` is the server's status message if it gave one."""

    def __init__(self, task_id: str, reason: str | None = None) -> None:
        super().__init__(f"task {task_id} was cancelled" + (f": {reason}" if reason else ""))
        self.task_id = task_id
        self.reason = reason


class TemporarilyUnavailable(ElicitorError):
    """A service this side relies on is away for a moment (the shared state reconnecting, say): the operation
    failed without being a bug, and the same request may succeed later; ``retry_after`` suggests when, in seconds.

    A request whose handler raises it is answered with a JSON-RPC error the client can recognise
    (:attr:`JSONRPCError.retryable`), and logged at WARNING without a traceback, instead of as an internal error.
    :class:`~elicitor.state.StoreUnavailable` is the one elicitor raises.
    """

    retry_after: float = 1.0
    """Seconds to suggest waiting before trying again: long enough for a store to reconnect, short enough that a
    person following a call notices no more than a pause."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        if retry_after is not None:
            self.retry_after = retry_after


class OutcomeUnknown(ElicitorError):
    """The connection to the server was lost while it handled a request that is not safe to send twice (a
    ``tools/call``: it may charge a card): the server may have acted on it, or not. It was not sent again.

    A server that keeps calls in a shared store (it declares ``dev.elicitor/idempotentCalls``) is sent the call
    again instead, under the same idempotency key, and goes on with it where it was; this is raised only when the
    server makes no such promise. ``method`` names the request."""

    def __init__(self, method: str, reason: str) -> None:
        super().__init__(
            f"the outcome of {method} is unknown: {reason}; the server may have acted on it, so it was not sent again"
        )
        self.method = method
        self.reason = reason


class MessageTooLarge(ElicitorError):
    """The peer's answer to a request was larger than this side accepts (``max_message_size``), so it was dropped
    unread and the request fails at once instead of waiting for an answer that will not come. ``size`` is the
    answer's length in bytes, ``limit`` the limit it broke: raise the limit if the peer is to be trusted with
    that much (a server returning a large image, say)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"the peer's answer was {size:,} bytes, over the limit of {limit:,} (max_message_size): it was dropped"
        )
        self.size = size
        self.limit = limit


class LegacyRefused(ElicitorError):
    """A server's URL did not open the HTTP+SSE transport of 2024-11-05 (``Client.http(url, transport="sse")``), or
    opened one the client must not use: its ``endpoint`` event named another origin than the server's (the
    client's messages and credentials would go there), no usable URL, or came late or not first."""


class AuthError(ElicitorError):
    """Signing in to an MCP server, or checking a client's token, failed; the message says which step and why.

    Never carries a token or a client secret. ``error`` is the OAuth error code when a server sent one
    (``invalid_grant``, ``insufficient_scope``...), else ``None``.
    """

    def __init__(self, message: str, error: str | None = None) -> None:
        super().__init__(message)
        self.error = error
