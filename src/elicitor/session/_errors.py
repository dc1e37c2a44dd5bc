"""What a peer hears when serving its request failed, and how a stray line is quoted in a log.

The detail of a failure goes to this side's log, never to the peer: an exception's text may carry a path, a query
or a secret in a URL. The peer gets -32603 with a reference that finds the log line, or, for a service this side
relies on that was away for a moment, the same code with ``data`` saying it may retry and when.
"""

from __future__ import annotations

import logging
import secrets

from .._exceptions import JSONRPCError, TemporarilyUnavailable
from .._sentences import INTERNAL, TRANSIENT, said
from ..types import INTERNAL_ERROR

logger = logging.getLogger("elicitor.session")

STRAY_EXCERPT = 120
"""How many characters of a stray line a warning quotes."""


def stray_excerpt(line: bytes) -> str:
    """A line that is not a message, ready for a log: decoded leniently, cut at ``STRAY_EXCERPT`` characters and
    quoted with ``repr`` (control characters, escape sequences and bidi overrides shown escaped, never acted on)."""
    text = line.rstrip(b"\r\n").decode("utf-8", "backslashreplace")
    if len(text) <= STRAY_EXCERPT:
        return repr(text)
    return f"{text[:STRAY_EXCERPT]!r}... ({len(line)} bytes)"


def internal_error(exc: BaseException, where: str) -> JSONRPCError:
    """The error a peer gets for an unexpected exception: generic, with a reference to quote, the detail logged.

    The exception's text may carry anything (a path, a query, a secret in a URL): it goes to this server's log
    (ERROR, with the traceback and the reference), never to the peer, who gets -32603 "Internal error" and the
    reference (``data.reference``), which finds the log line.

    A :class:`~elicitor.TemporarilyUnavailable` (the shared state away: no bug) is :func:`transient_error`
    instead, and so is an exception group of nothing else (a task group's children that all met it).
    """
    passing = _transient(exc)
    if passing is not None:
        return transient_error(passing, where)
    reference = secrets.token_hex(6)
    logger.error("%s failed (reference %s)", where, reference, exc_info=exc)
    return JSONRPCError(
        INTERNAL_ERROR,
        said(INTERNAL, reference=reference),
        {"reference": reference},
    )


def transient_error(exc: TemporarilyUnavailable, where: str) -> JSONRPCError:
    """The error a peer gets when a service this server relies on was away for a moment: retryable.

    Still -32603 (JSON-RPC has no code for "try again later", and MCP adds none), but ``data`` says so for a
    client to act on: ``{"reference": ..., "retryable": true, "retryAfter": <seconds>}``
    (:attr:`~elicitor.JSONRPCError.retryable`). The message says to retry and nothing else: the exception's text
    names the store's address, so it goes only to this server's log, at WARNING and without a traceback (the
    operator needs to know the store was away, not where in the code it was noticed), with the reference.

    Over HTTP the response keeps its status (200), as any JSON-RPC error from a handler does, rather than 503 with
    ``Retry-After``: on 2025-11-25 the answer travels on the session's stream, which may already be an SSE response
    (progress, questions) when it fails; a 503 is what a balancer counts against a replica, or retries on another
    one (``proxy_next_upstream``), though the request may have done part of its work (a ``tools/call``), whereas the
    HTTP layer's own 503s refuse a request before anything ran; and a client reads the JSON-RPC error the same either
    way, ours and the official SDK's alike, so a status would tell it nothing more.
    """
    reference = secrets.token_hex(6)
    logger.warning("%s failed for a moment (reference %s): %s", where, reference, exc)
    retry_after = exc.retry_after
    return JSONRPCError(
        INTERNAL_ERROR,
        said(TRANSIENT, seconds=f"{retry_after:g}", reference=reference),
        {"reference": reference, "retryable": True, "retryAfter": retry_after},
    )


def _transient(exc: BaseException) -> TemporarilyUnavailable | None:
    """``exc`` if it is passing, or the first of a group's exceptions when every one of them is; else ``None``."""
    if isinstance(exc, TemporarilyUnavailable):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        found = [_transient(inner) for inner in exc.exceptions]
        if found and all(found):
            return found[0]
    return None
