"""The conventions' session metrics: ``mcp.server.session.duration`` and ``mcp.client.session.duration``.

A session here is a handshake-era one (2025-06-18, 2025-11-25 and older): from the connection's start to its end,
on stdio or Streamable HTTP. A 2026-07-28 call has no session, so nothing is recorded for it. The labels are the
conventions' and each is bounded: the revision the handshake agreed (``_OTHER`` for one elicitor does not speak),
``network.transport`` and ``network.protocol.name``; never the session's id, which is one series per session.
"""

from __future__ import annotations

import time

from ._attributes import add_network, metric_attributes
from ._state import state


def session_ended(side: str, started: int, revision: str | None, transport: str) -> None:
    """A handshake-era session that started at ``started`` (``time.monotonic_ns()``) ended: its duration on
    ``side``'s histogram (``server`` or ``client``). A connection that never agreed a revision (a 2026-07-28
    client on stdio, a handshake that failed) had no session, and is not counted.

    Called only when ``state.on``."""
    instruments = state.instruments
    if instruments is None or revision is None:
        return
    attributes: dict[str, object] = {"mcp.protocol.version": revision}
    labels = metric_attributes(attributes)
    add_network(labels, transport, None)
    histogram = instruments.server_session if side == "server" else instruments.client_session
    histogram.record((time.monotonic_ns() - started) / 1e9, labels)
