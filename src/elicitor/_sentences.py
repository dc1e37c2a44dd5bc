"""elicitor's own sentences that reach a person as text: a tool error or a JSON-RPC error its server writes, and
why a connection failed on this side.

A tool call that fails for a reason elicitor itself found (the arguments do not fit the tool, the answer does not
fit the form, the client lacks a capability the tool needs) ends with an ``isError`` result whose text the spec
leaves free, and which every client shows as it is. The server writes these sentences in English, since it cannot
know who reads them; ``elicitor connect`` recognises them (:func:`recognise`) and says them in the person's
language, the tool's name and whatever the server or the tool added (the steps, a validator's detail) as sent.

A sentence is a deferred :class:`~elicitor.i18n.Message`: ``{tool}`` is the tool's name as Python quotes it, every
other placeholder free text, possibly one of the inner sentences (why a capability is missing), which is then
translated too. Pure: no catalogs are read here.
"""

from __future__ import annotations

import re
from functools import cache

from ._outcomes import URL_REFUSED
from .i18n._message import N_, Message

INVALID_ARGUMENTS = N_("Invalid arguments for tool {tool}: {why}")
"""A call's arguments do not fit the tool's parameters (``why`` is the validator's detail, in English)."""

ANSWER_INVALID = N_("Tool {tool}: the answer did not satisfy the form: {why}")
"""The client accepted an elicitation with content the form refuses (``why``: the fields and their problems)."""

TOOL_FAILED = N_("Tool {tool} failed: {why}")
"""The tool raised an exception with no message of its own (``why``: the exception's type)."""

CAPABILITY_MISSING = N_("Tool {tool} needs something the client does not offer: {why}")
"""On the handshake revisions, a tool needed a capability the client did not declare (``why``: which, below)."""

NO_SAMPLING = N_("the client did not declare the sampling capability")
NO_ROOTS = N_("the client did not declare the roots capability")
NO_FORMS = N_("the client did not declare the elicitation capability (form mode), so it cannot be asked")
NO_URL_MODE = N_("the client did not declare URL-mode elicitation")
OLD_REVISION = N_("the client speaks 2025-06-18, which has no URL mode")
MULTI_SELECT = N_(
    "multi-select fields ({fields}) need protocol revision 2025-11-25 or later; the client speaks 2025-06-18"
)

INTERNAL = N_("Internal error (reference {reference}; the detail is in the server's log)")
"""-32603 for an unexpected exception: the detail stays in the server's log, the reference finds it there."""

TRANSIENT = N_(
    "Temporarily unavailable: a service the server relies on is away for a moment; retry in {seconds} s "
    "(reference {reference})"
)
"""-32603 marked retryable (``data.retryable``): the shared state was away for a moment."""

RPC_ERRORS: tuple[Message, ...] = (INTERNAL, TRANSIENT)
"""Every sentence elicitor's server writes as a JSON-RPC error's whole message."""

CLOSED = N_("the connection is closed")
PEER_ENDED = N_("the peer's side ended before it answered")
CLOSED_UNANSWERED = N_("the connection closed before the peer answered")
NO_HANDSHAKE = N_("the server did not complete the handshake in {seconds} s")

SESSION_ENDED = N_("the server's session ended while it ran (its replica may have stopped)")

LOCAL_ERRORS: tuple[Message, ...] = (CLOSED, PEER_ENDED, CLOSED_UNANSWERED, NO_HANDSHAKE, SESSION_ENDED)
"""Why a call or a connection failed on this side (:class:`~elicitor.ConnectionClosed`, the handshake's
``TimeoutError``): English in the exception, as every exception's text is, and said in the person's language
where ``elicitor connect`` shows them."""

TOOL_ERRORS: tuple[Message, ...] = (URL_REFUSED, INVALID_ARGUMENTS, ANSWER_INVALID, CAPABILITY_MISSING, TOOL_FAILED)
"""Every sentence elicitor's server writes as a whole tool error."""

REASONS: tuple[Message, ...] = (NO_SAMPLING, NO_ROOTS, NO_FORMS, NO_URL_MODE, OLD_REVISION, MULTI_SELECT)
"""Why a capability is missing, as :class:`~elicitor.ClientCapabilityMissing` says it (the ``why`` above)."""

_QUOTED = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
"""A name as ``repr`` quotes it (single quotes, or double ones when it holds a single quote)."""


def said(sentence: Message, **args: str) -> str:
    """``sentence`` in English with ``args`` as given (the server's side: ``tool=repr(name)``)."""
    return str(Message(sentence.msgid, None, args))


@cache
def _pattern(msgid: str) -> re.Pattern[str]:
    """The English sentence as a pattern: its text literally, each placeholder a group (``{tool}`` a quoted name)."""
    parts = re.split(r"\{(\w+)\}", msgid)
    pattern = "".join(
        re.escape(part) if i % 2 == 0 else f"(?P<{part}>{_QUOTED if part == 'tool' else '.*'})"
        for i, part in enumerate(parts)
    )
    return re.compile(pattern, re.S)


def recognise(text: str, sentences: tuple[Message, ...] = TOOL_ERRORS) -> Message | None:
    """``text`` as the deferred sentence of elicitor's that it is (its values as they were written, a ``why`` that
    is itself one of :data:`REASONS` deferred too), or ``None`` for anyone else's text."""
    for sentence in sentences:
        match = _pattern(sentence.msgid).fullmatch(text)
        if match is None:
            continue
        args: dict[str, object] = dict(match.groupdict())
        why = args.get("why")
        if isinstance(why, str) and sentences is TOOL_ERRORS:
            args["why"] = recognise(why, REASONS) or why
        return Message(sentence.msgid, None, args)
    return None
