"""The session's tasks for a peer's requests: cancelled by the peer or by the session's end, each finishes its
shielded cleanup, and the session does not end before they have (as leaving a task group would not)."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import anyio
import pytest

from elicitor import ConnectionClosed
from elicitor.protocol import NotificationReceived, RequestReceived
from elicitor.session import Session, open_session
from elicitor.transports import memory_pair

pytestmark = pytest.mark.anyio


async def ignore(note: NotificationReceived) -> None:
    pass


async def no_requests(request: RequestReceived) -> dict[str, Any]:
    raise AssertionError(f"unexpected request {request.method}")


class Slow:
    """A handler that waits until cancelled, then cleans up for a while inside a shielded scope."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.events: list[str] = []

    async def __call__(self, request: RequestReceived) -> dict[str, Any]:
        try:
            self.started.set()
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.05)  # a real wait: a cancellation that ignored the shield would cut it short
                await anyio.sleep(0)
                self.events.append("cleaned up")
        return {}


async def ask(client: Session) -> None:
    with suppress(ConnectionClosed):
        await client.request("slow", {})


async def test_a_request_the_peer_cancels_finishes_its_shielded_cleanup(anyio_backend: str) -> None:
    handler = Slow()
    server_end, client_end = memory_pair()
    async with (
        open_session(server_end, handler, ignore),
        open_session(client_end, no_requests, ignore) as client,
    ):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, client)
            await handler.started.wait()
            tg.cancel_scope.cancel()  # the client sends notifications/cancelled
        with anyio.fail_after(10):
            while not handler.events:
                await anyio.sleep(0.01)
    assert handler.events == ["cleaned up"]


async def test_a_session_ends_only_after_its_requests_have_cleaned_up(anyio_backend: str) -> None:
    handler = Slow()
    server_end, client_end = memory_pair()
    async with open_session(client_end, no_requests, ignore) as client, anyio.create_task_group() as tg:
        async with open_session(server_end, handler, ignore):
            tg.start_soon(ask, client)
            await handler.started.wait()
        # Leaving the block cancelled the handler and waited for its cleanup.
        assert handler.events == ["cleaned up"]
        tg.cancel_scope.cancel()
