"""The conventions' session metrics: ``mcp.server.session.duration`` and ``mcp.client.session.duration``.

A session here is a handshake-era one (2025-06-18, 2025-11-25 and older): from the connection's start to its end,
on stdio or Streamable HTTP. A 2026-07-28 call has no session, so nothing is recorded for it. The labels are the
conventions' and each is bounded: the revision the handshake agreed (``_OTHER`` for one elicitor does not speak),
``network.transport`` and ``network.protocol.name``; never the session's id, which is one series per session.

A session that ended badly says how in ``error.type`` (the conventions: "if and only if session ends with an
error"), one of :data:`ENDINGS` (see :func:`why_ended`), or the class of an exception that ended it.
"""

from __future__ import annotations

import time

from ._attributes import add_network, metric_attributes
from ._state import state

ENDINGS = frozenset({"connection_lost", "session_expired", "timeout"})
"""How a session may end badly, besides an exception's class:

- ``connection_lost``: the connection ended under the session. A client's: the server's side ended before the
  client closed it (a stdio server that exited or was killed; the old HTTP+SSE transport's stream ended), or over
  HTTP the server could not be reached to end it (it was gone). A server's: the client's side ended while a request
  of its was served or a question waited for its answer (a stdio client killed mid-call), or the pipe broke.
- ``session_expired``: HTTP, a client's: the server no longer knew the session (it ended it, or restarted).
- ``timeout``: HTTP, a server's: the client left without ending it, and it expired after the idle timeout.

A stdio client whose input ends with nothing under way has ended its session as the specification says (it
closes the server's stdin), killed or not: the server cannot tell, and records no error."""


def why_ended(side: str, session: object, transport: object, failure: BaseException | None = None) -> str | None:
    """``error.type`` for a session that ended (``None``: it ended well): the class of the exception that ended it
    (``failure``; a cancellation is this side ending it), else what its ``transport`` knows (an HTTP transport's
    ``lost``: whatever it says decides), else how the peer's side ended (``session.peer_ended``)."""
    import anyio

    if failure is not None and not isinstance(failure, anyio.get_cancelled_exc_class()):
        return type(failure).__qualname__
    if hasattr(transport, "lost"):
        lost = transport.lost
        return lost if lost in ENDINGS else None
    peer = getattr(session, "peer_ended", None)
    if peer is None or (side == "server" and peer == "idle"):
        return None
    return "connection_lost"


def session_ended(
    side: str,
    started: int,
    revision: str | None,
    transport: str,
    error: str | None = None,
    http_version: str | None = None,
) -> None:
    """A handshake-era session that started at ``started`` (``time.monotonic_ns()``) ended: its duration on
    ``side``'s histogram (``server`` or ``client``), with ``error.type`` when it ended badly (:func:`why_ended`)
    and, over HTTP, ``network.protocol.version`` (``http_version``: the transport's, see :func:`http_version`).
    A connection that never agreed a revision (a 2026-07-28 client on stdio, a handshake that failed) had no
    session, and is not counted.

    Called only when ``state.on``."""
    instruments = state.instruments
    if instruments is None or revision is None:
        return
    attributes: dict[str, object] = {"mcp.protocol.version": revision}
    if error is not None:
        attributes["error.type"] = error
    if http_version is not None:  # over HTTP: the version the session's connections spoke (1.1, 2)
        attributes["network.protocol.version"] = http_version
    labels = metric_attributes(attributes)
    add_network(labels, transport, None)
    histogram = instruments.server_session if side == "server" else instruments.client_session
    histogram.record((time.monotonic_ns() - started) / 1e9, labels)


def http_version(transport: object) -> str | None:
    """The HTTP version an HTTP transport's session spoke, as it noted it (``None`` on stdio)."""
    version = getattr(transport, "http_version", None)
    return version if isinstance(version, str) else None
