"""Listening sockets made here rather than by uvicorn: the pages elicitor serves beside its protocol (URL-mode
pages, the browser form, the demo's pages) on a free loopback port, and a command asked for port 0, which must say
the port it got."""

from __future__ import annotations

import socket


def loopback_socket() -> socket.socket:
    """A TCP socket bound to a free port on 127.0.0.1, not yet listening (see :func:`bound_socket`)."""
    return bound_socket("127.0.0.1", 0)


def bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host`` (an address, IPv6 too) and ``port``, not yet listening; port 0 takes a free
    one, which ``getsockname()`` names.

    Made with ``IPPROTO_TCP`` named, not left at 0: asyncio turns on ``TCP_NODELAY`` only for connections whose
    socket says it is TCP (``sock.proto``), and an accepted connection inherits the listening socket's. Without it
    a response written in two pieces (uvicorn writes the head, then the body) waits for the browser's delayed
    acknowledgement: about 40 ms per page and per form submission instead of under 2. ``SO_REUSEADDR`` as uvicorn
    sets it: a command started again need not wait for its last connections' ``TIME_WAIT`` to end.

    Raises:
        OSError: the address cannot be bound (in use, not this machine's, not permitted).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def sockets_for(host: str, port: int) -> tuple[list[socket.socket] | None, int]:
    """What a server told to listen on ``host``:``port`` hands uvicorn, and the port to say it listens on: for port
    0 a socket bound here to a free port, and that port (uvicorn would bind port 0 itself and leave the command
    saying 0, where nothing answers); for any other port nothing (uvicorn binds it, every address of a name)."""
    if port != 0:
        return None, port
    sock = bound_socket(host, 0)
    return [sock], sock.getsockname()[1]
