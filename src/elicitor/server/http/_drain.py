"""uvicorn's server, telling the app when its graceful shutdown begins.

On SIGTERM uvicorn stops listening, waits up to ``timeout_graceful_shutdown`` for the requests in flight, cancels
what is left, and only then runs the app's lifespan shutdown. The app needs to know sooner: a stream it relays for
another replica's session can end at once (its client resumes on another replica), and the calls of its own
sessions may be in flight on another replica's connection, where uvicorn does not see them. See
:meth:`HttpApp.drain`.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import uvicorn

if TYPE_CHECKING:
    from ._app import HttpApp


class DrainingServer(uvicorn.Server):
    """:class:`uvicorn.Server` serving ``app``, which hears of the shutdown as it begins (:meth:`HttpApp.drain`)."""

    def __init__(self, config: uvicorn.Config, app: HttpApp) -> None:
        super().__init__(config)
        self.app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.app.drain(self.config.timeout_graceful_shutdown)
        await super().shutdown(sockets)
