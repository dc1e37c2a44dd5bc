"""The stdio server behind ``elicitor proxy COMMAND``: started for each upstream connection, and again after it
ends (crashed, killed, or exited), at a bounded pace.

A server that ends while the proxy serves is started again by the next request that needs it; what it was told
(its session: ``initialize``, a log level) is told again by whoever holds the connection (see :class:`Bridge`).
A server that dies at once on every start must not be started in a tight loop, each start spending a second of
CPU on imports: once it has ended :data:`QUICK_ENDS` times in a row before answering its first request (the
handshake), the next start waits 2 s after the last end, then 4, 8... up to :data:`MAX_BACKOFF`; the requests
meanwhile get an error at once, naming how the server ended and its last lines on stderr. A server that answered
starts the count afresh, however soon it ended after: it is started again by the next request.
"""

from __future__ import annotations

import logging
import math
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio

from .._exceptions import JSONRPCError
from ..transports import StdioClientTransport, Transport
from ..types import INTERNAL_ERROR, JSONObject

logger = logging.getLogger("elicitor.proxy")

QUICK_ENDS = 2
"""Ends in a row before the first answer after which starting again waits (see the module)."""
MAX_BACKOFF = 60.0
"""The longest wait between two starts of a server that keeps dying."""
STDERR_LINES = 5
"""Lines of the server's stderr kept to say why it ended."""


class ServerCommand:
    """Opens upstream connections by starting ``command`` as a stdio server (a :data:`~._upstream.Connect`).

    Args:
        command: the server's command line.
        grace: seconds the server has to exit once its input is closed, and again after SIGTERM.
    """

    def __init__(self, command: Sequence[str], *, grace: float) -> None:
        self.command = list(command)
        self.grace = grace
        self.quick_ends = 0
        """Ends in a row before the server answered its first request."""
        self.last_end: float | None = None
        """When the server last ended by itself (``anyio.current_time()``)."""
        self.last: JSONObject | None = None
        """How it ended: ``exitStatus`` (negative: the signal that killed it) and ``stderr`` (its last lines)."""

    def __call__(self) -> AbstractAsyncContextManager[Transport]:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[Transport]:
        wait = self.backoff_left()
        if wait > 0:
            raise JSONRPCError(
                INTERNAL_ERROR,
                f"Internal error: the upstream server {self.said()}; it ended {self.quick_ends} times in a row before "
                f"answering, so it is started again only in {math.ceil(wait)} s (by the first request after that)",
                {**(self.last or {}), "retryAfter": math.ceil(wait)},
            )
        transport = await StdioClientTransport.start(
            self.command, stderr=sys.stderr.fileno(), grace=self.grace, stderr_lines=STDERR_LINES
        )
        try:
            yield transport
        finally:
            await transport.aclose()  # closed by the session already, unless it never opened

    def backoff_left(self) -> float:
        """Seconds until the server may be started again (0: now)."""
        if self.quick_ends < QUICK_ENDS or self.last_end is None:
            return 0.0
        delay = min(2.0 ** (self.quick_ends - QUICK_ENDS + 1), MAX_BACKOFF)
        return max(self.last_end + delay - anyio.current_time(), 0.0)

    async def ended(self, transport: Transport, *, served: bool) -> str:
        """The server of ``transport`` ended the connection by itself (the proxy did not close it), after it had
        answered the handshake (``served``) or before: counted (see the module), and said as :meth:`said` says."""
        if not isinstance(transport, StdioClientTransport):
            return "closed the connection"
        await transport.stderr_read()
        self.last = {"exitStatus": transport.process.returncode, "stderr": list(transport.stderr_tail)}
        self.last_end = anyio.current_time()
        self.quick_ends = 0 if served else self.quick_ends + 1
        logger.warning("the upstream server %s", self.said())
        return self.said()

    def said(self) -> str:
        """How the server last ended, in words: its exit status (or the signal) and its last lines on stderr."""
        if self.last is None:
            return "ended"
        status = self.last.get("exitStatus")
        if isinstance(status, int) and status < 0:
            try:
                name = signal.Signals(-status).name
            except ValueError:
                name = f"signal {-status}"
            how = f"was killed by {name} (exit status {status})"
        else:
            how = f"exited with status {status}"
        lines = self.last.get("stderr")
        if isinstance(lines, list) and lines:
            return how + "; its last lines on stderr: " + " | ".join(str(line)[:300] for line in lines)
        return how + ", saying nothing on stderr"
