"""uvicorn's server, telling the app when its graceful shutdown begins.

On SIGTERM uvicorn stops listening, waits up to ``timeout_graceful_shutdown`` for the requests in flight, cancels
what is left, and only then runs the app's lifespan shutdown. The app needs to know sooner: a stream it relays for
another replica's session can end at once (its client resumes on another replica), and the calls of its own
sessions may be in flight on another replica's connection, where uvicorn does not see them. See
:meth:`HttpApp.drain`.

Once its shutdown is done, uvicorn raises the signal that asked for it again, with Python's default handler back:
the process dies of its SIGTERM (exit status 143, -15 to a parent in Python), which systemd, supervisord and most
orchestrators count as a failure unless told otherwise. A stop that was asked for and done is a success: this
server keeps the signal to itself, so ``Server.run`` returns and the command exits 0, as gunicorn and hypercorn do.
"""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import uvicorn

if TYPE_CHECKING:
    from ._app import HttpApp


STOPPING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGBREAK") if hasattr(signal, name))
"""What asks the server to stop: Ctrl-C, ``kill``/an orchestrator, and Ctrl-Break on Windows (uvicorn's own set)."""


class DrainingServer(uvicorn.Server):
    """:class:`uvicorn.Server` serving ``app``, which hears of the shutdown as it begins (:meth:`HttpApp.drain`),
    and which returns once it is done instead of raising the signal that asked for it again."""

    def __init__(self, config: uvicorn.Config, app: HttpApp) -> None:
        super().__init__(config)
        self.app = app
        self.stopped_by: int | None = None
        """The signal that asked this server to stop (the first, if more came), once it did; else ``None``."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        """While serving, a stopping signal starts the graceful shutdown (a second Ctrl-C cuts it short), as in
        uvicorn; after it, the handlers there were before are back and the signal is not raised again."""
        if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
            yield
            return

        def stop(sig: int, frame: object) -> None:
            if self.stopped_by is None:
                self.stopped_by = sig
            self.handle_exit(sig, None)

        before = {sig: signal.signal(sig, stop) for sig in STOPPING_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.app.drain(self.config.timeout_graceful_shutdown)
        await super().shutdown(sockets)
