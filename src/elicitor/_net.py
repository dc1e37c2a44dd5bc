"""Loopback listening sockets for the pages elicitor serves beside its protocol (URL-mode pages, the browser form,
the demo's pages)."""

from __future__ import annotations

import socket


def loopback_socket() -> socket.socket:
    """A TCP socket bound to a free port on 127.0.0.1, not yet listening.

    Made with ``IPPROTO_TCP`` named, not left at 0: asyncio turns on ``TCP_NODELAY`` only for connections whose
    socket says it is TCP (``sock.proto``), and an accepted connection inherits the listening socket's. Without it
    a response written in two pieces (uvicorn writes the head, then the body) waits for the browser's delayed
    acknowledgement: about 40 ms per page and per form submission instead of under 2.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.bind(("127.0.0.1", 0))
    except BaseException:
        sock.close()
        raise
    return sock
