"""What a client hears while the proxy waits on a person signing in to the upstream server.

The proxy's upstream sign-in (:class:`~elicitor.OAuth`) may wait minutes on a person, and every request that needs
the upstream waits with it. A client that counts the server's silence would give up first, so the proxy says,
every ``keepalive`` seconds, that it is still there, in the one way the protocol allows for the request at hand:

* **a log message** (``notifications/message``, :data:`SIGNING_IN`): to a handshake-era client's ``initialize``
  (a server may send log messages before it answers it) and to its later requests when the server declared
  ``logging`` (a sign-in mid-session: more scope for a tool), and to a 2026-07-28 request that asked for log
  messages at ``notice`` or below (that era sends none to a request that did not ask);
* **an SSE comment** (``: waiting for sign-in``) on the response stream of any other 2026-07-28 request over
  Streamable HTTP (``--listen``): every parser ignores it, so it says nothing in the protocol and cannot be taken
  for a message, but the bytes start a client's read timeout again (``httpx``'s, the official SDKs'), and
  elicitor's client counts them as hearing from the server;
* **nothing** to a 2026-07-28 request over stdio that asked for no log messages: one channel carries everything
  there, and anything the proxy wrote would be a message the request did not ask for. Such a client needs a
  request limit longer than the person takes (the sign-in link is shown where the proxy runs).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress

import anyio

from .._exceptions import ConnectionClosed
from ..client._pace import Pace, PersonPaced
from ..types import LOGGING_LEVELS, META_LOG_LEVEL, JSONObject
from ._upstream import Notify

SIGNING_IN = "waiting for a person to sign in to the upstream server (the link is where the proxy runs)"
"""What a client waiting on the upstream sign-in hears, every ``keepalive`` seconds (a log message's data)."""
COMMENT = "waiting for sign-in"
"""The SSE comment a 2026-07-28 request that asked for no log messages gets instead."""
Keepalive = Callable[[str], Awaitable[None]]
"""Sends an SSE comment on one request's response stream (see :data:`elicitor.server._dispatch.Keepalive`)."""


def asks_for_notices(params: JSONObject) -> bool:
    """Whether a 2026-07-28 request asked for log messages at ``notice`` (or a lower level): only then may a server
    send it any (2026-07-28 server/utilities/logging)."""
    meta = params.get("_meta")
    level = meta.get(META_LOG_LEVEL) if isinstance(meta, dict) else None
    return level in LOGGING_LEVELS and LOGGING_LEVELS.index(level) <= LOGGING_LEVELS.index("notice")


class SignInWait:
    """Whether a person is signing in upstream now, and what the clients waiting meanwhile hear.

    Args:
        sign_in: the upstream's sign-in (``None``: nobody ever signs in, and nothing is sent).
        keepalive: seconds between what the clients hear (below their limits: 30 s for elicitor's handshake,
            httpx's read timeouts are often 5 to 30 s).
    """

    def __init__(self, sign_in: PersonPaced | None, keepalive: float) -> None:
        self.sign_in = sign_in
        self.keepalive = keepalive
        self.pace = Pace()
        """Paused while a person signs in upstream (the sign-in holds it then, once :meth:`follow` is called)."""

    def follow(self) -> Callable[[], None]:
        """Follow the sign-in from now on; returns the function that stops it."""
        if self.sign_in is None:
            return lambda: None
        return self.sign_in.pace_with(self.pace)

    @asynccontextmanager
    async def told(self, notify: Notify | None = None, comment: Keepalive | None = None) -> AsyncIterator[None]:
        """While the block runs, every ``keepalive`` seconds during a sign-in: a log message to ``notify`` when it
        is given (the request may hear one), else an SSE comment to ``comment`` when it is given."""
        if self.sign_in is None or (notify is None and comment is None):
            yield
            return

        async def keep_alive() -> None:
            while True:
                await anyio.sleep(self.keepalive)
                if not self.pace.paused:
                    continue
                with suppress(ConnectionClosed, anyio.BrokenResourceError, OSError):
                    if notify is not None:
                        await notify("notifications/message", {"level": "notice", "logger": "elicitor.proxy",
                                                               "data": SIGNING_IN})  # fmt: skip
                    elif comment is not None:
                        await comment(COMMENT)

        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_alive)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
