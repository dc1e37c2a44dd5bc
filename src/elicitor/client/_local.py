"""Why an HTTP transport answered a request itself: the sentences it says, and reading them back in a language.

The transports answer a request with an error of their own when it never reached the server or its answer could
not be read (``Transport error (local, not from the server): HTTP request failed: ...``). That error travels as a
JSON-RPC error, whose message is text, so it is written in English (:func:`said`); ``elicitor connect`` reads the
sentence back (:func:`in_language`) and says it in the person's language, the technical detail it carries (the HTTP
library's words, a server's page) as it came.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..i18n._message import N_, Message

if TYPE_CHECKING:
    from ..i18n import Language

HTTP_FAILED = N_("HTTP request failed: {detail}")
SIGNING_IN_FAILED = N_("signing in to the server failed: {detail}")
INVALID_SESSION_ID = N_("the server sent an invalid Mcp-Session-Id {value}")
ANSWERED_UNTYPED = N_("the server answered HTTP {status} without a Content-Type")
ANSWERED_KIND = N_("the server answered HTTP {status} ({kind})")
ANSWERED_EMPTY = N_("the server answered HTTP {status} with no body")
STREAM_ENDED = N_("the server's stream ended before it answered")
SESSION_ENDED_MIDWAY = N_("the session ended while the server handled this request")
SESSION_ENDED = N_("the server ended this session (404)")
NO_OLD_TRANSPORT = N_(
    "the server answered HTTP {status} to a POST, and a GET of its URL did not open the HTTP+SSE transport of "
    "2024-11-05 either: {detail}"
)
OLD_STREAM_ENDED = N_("the server's event stream ended before it answered ({detail})")
OLD_STREAM_GONE = N_("the server's event stream has ended ({detail})")
REFUSED = N_("the server refused the message with HTTP {status}: {detail}")

NO_SIGN_IN = N_("no sign-in within {seconds} s (the browser never came back)")
AUTH_REFUSED_WHY = N_("authorization refused: {error} ({detail})")
AUTH_REFUSED = N_("authorization refused: {error}")
NO_METADATA = N_("no authorization server metadata found for {issuer}")
FORGED = N_("the authorization response's state does not match the request (a forged redirect?)")

_SIGN_IN = (NO_SIGN_IN, AUTH_REFUSED_WHY, AUTH_REFUSED, NO_METADATA, FORGED)
"""Why signing in failed (:class:`~elicitor.AuthError`), the sentences a person meets: the browser never came back,
the person or the authorization server refused, no authorization server to sign in at, a redirect not their own.
Said after :data:`SIGNING_IN_FAILED`; the authorization server's error code and description as sent."""

_REASONS = (
    HTTP_FAILED, SIGNING_IN_FAILED, INVALID_SESSION_ID, ANSWERED_UNTYPED, ANSWERED_EMPTY, ANSWERED_KIND, STREAM_ENDED,
    SESSION_ENDED_MIDWAY, SESSION_ENDED, NO_OLD_TRANSPORT, OLD_STREAM_ENDED, OLD_STREAM_GONE, REFUSED,
)  # fmt: skip
"""Every sentence, the more particular before the more general (``with no body`` before ``({kind})``)."""


def said(reason: Message, **args: Any) -> str:
    """``reason`` with its values, in English: the text of the error on the wire."""
    return str(Message(reason.msgid, None, args))


def _pattern(reason: Message) -> re.Pattern[str]:
    parts = re.split(r"\{(\w+)\}", reason.msgid)
    return re.compile("".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.*)" for i, p in enumerate(parts)), re.S)


_PATTERNS = tuple((reason, _pattern(reason)) for reason in _REASONS)
_SIGN_IN_PATTERNS = tuple((reason, _pattern(reason)) for reason in _SIGN_IN)


def in_language(text: str, lang: Language, patterns: tuple[tuple[Message, re.Pattern[str]], ...] = _PATTERNS) -> str:
    """A transport's own reason (:func:`said`'s text) in ``lang``, its values as they came (why signing in failed,
    when it is one of :data:`_SIGN_IN`, in ``lang`` too); any other text as it is."""
    for reason, pattern in patterns:
        match = pattern.fullmatch(text)
        if match is not None:
            values = match.groupdict()
            if reason is SIGNING_IN_FAILED:
                values["detail"] = in_language(values["detail"], lang, _SIGN_IN_PATTERNS)
            return lang._(reason.msgid, **values)
    return text
