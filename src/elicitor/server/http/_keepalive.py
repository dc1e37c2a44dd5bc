"""uvicorn's HTTP protocols, with a keep-alive timeout that a stalled process does not take for idleness.

uvicorn closes a kept-alive connection from a timer, ``timeout_keep_alive`` seconds after its last response. When the
process was stopped meanwhile (SIGSTOP, a paused VM, an event loop blocked), the timer is overdue once it runs again,
and the event loop runs overdue timers before it reads its sockets: the connection is closed with whatever a balancer
sent on it during the stall still unread. The kernel resets such a connection, and nginx answers the request 502
without trying another replica (it never replays a POST that reached one), so a client that does not send it again,
the official SDKs among them, loses the person's answer or call. A timer that runs a second or more late measured a
stall, not an idle connection: it waits another full period instead, in which a request waiting in the socket is read
(and cancels it, as any request does). A stall that ends just after the deadline leaves the timer less late than
that, so the timer also polls the socket: bytes waiting there (a request, or the peer's close) are read first.
"""

from __future__ import annotations

import asyncio
import select
from collections.abc import Callable
from typing import Any

LATE = 1.0
"""Seconds past its deadline at which a keep-alive timer is taken to have been held up rather than due."""


def http_protocol(parser: str) -> type[asyncio.Protocol]:
    """uvicorn's protocol class for ``parser`` (``"httptools"``, else h11), its keep-alive timeout patient with a
    stall (see the module)."""
    if parser == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        class HttpTools(HttpToolsProtocol):
            def timeout_keep_alive_handler(self) -> None:
                _patiently(self, super().timeout_keep_alive_handler)

        return HttpTools

    from uvicorn.protocols.http.h11_impl import H11Protocol

    class H11(H11Protocol):
        def timeout_keep_alive_handler(self) -> None:
            _patiently(self, super().timeout_keep_alive_handler)

    return H11


def _patiently(protocol: Any, due: Callable[[], None]) -> None:
    """``protocol``'s keep-alive timer ran: ``due()`` (uvicorn's own handler, which closes an idle connection), unless
    the timer was held up by a stall or something waits unread in the socket; then it is set again for a full period
    (a request read meanwhile cancels it, as any request does)."""
    if _held_up(protocol.loop, protocol.timeout_keep_alive_task) or _unread(protocol.transport):
        protocol.timeout_keep_alive_task = protocol.loop.call_later(
            protocol.timeout_keep_alive, protocol.timeout_keep_alive_handler
        )
    else:
        due()


def _held_up(loop: asyncio.AbstractEventLoop, timer: asyncio.TimerHandle | None) -> bool:
    """Whether ``timer`` (the one running now) runs ``LATE`` or more past its deadline."""
    return timer is not None and loop.time() - timer.when() >= LATE


def _unread(transport: Any) -> bool:
    """Whether bytes wait unread in the connection's socket (or its peer closed it): a request sent while the
    process was stopped, which the event loop has not read yet because it runs overdue timers first. A stall that
    ends less than :data:`LATE` after the deadline does not make the timer late enough to tell, but the request is
    in the socket all the same (a poll of the descriptor, without reading: nothing is taken from uvicorn)."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    try:
        descriptor = sock.fileno() if sock is not None else -1
    except (OSError, ValueError):
        return False
    if descriptor < 0:
        return False
    poller = select.poll()
    poller.register(descriptor, select.POLLIN)
    return bool(poller.poll(0))
