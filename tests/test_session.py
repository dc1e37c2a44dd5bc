"""The session's tasks for a peer's requests: cancelled by the peer or by the session's end, each finishes its
shielded cleanup, and the session does not end before they have (as leaving a task group would not)."""

from __future__ import annotations

import gc
from collections.abc import Awaitable
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


async def test_a_waiting_handler_does_not_keep_the_request_alive(anyio_backend: str) -> None:
    """A handler that took what it needs of the request and waits (on a person, perhaps for minutes) holds only
    that: the session's frames do not keep the decoded request alive meanwhile (over HTTP, 0.7 KiB a call)."""
    started, release = anyio.Event(), anyio.Event()
    taken: list[Any] = []

    async def wait() -> dict[str, Any]:
        started.set()
        await release.wait()
        return {}

    async def ask_to_wait(client: Session) -> None:
        await client.request("wait", {"arguments": {"n": 1}})

    def handler(request: RequestReceived) -> Awaitable[dict[str, Any]]:
        taken.append(request.params)  # the dispatch functions take what they need, then return what waits
        return wait()

    server_end, client_end = memory_pair()
    async with (
        open_session(server_end, handler, ignore),
        open_session(client_end, no_requests, ignore) as client,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(ask_to_wait, client)
        with anyio.fail_after(10):
            await started.wait()
        holders = [type(holder).__name__ for holder in gc.get_referrers(taken[0]) if holder is not taken]
        release.set()
    assert "RequestReceived" not in holders


class _Clock:
    """What :class:`Deadlines` uses of a loop, on a clock the test moves: which timers are set, and when."""

    def __init__(self) -> None:
        self.now = 100.0
        self.timers: list[tuple[float, Any]] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Any) -> Any:
        clock = self

        class Handle:
            def cancel(self) -> None:
                clock.timers.remove(entry)

        entry = (when, callback)
        self.timers.append(entry)
        return Handle()

    def advance(self, seconds: float) -> None:
        self.now += seconds
        while due := [timer for timer in self.timers if timer[0] <= self.now]:
            for timer in due:
                self.timers.remove(timer)
                timer[1]()


class _Waiting:
    def __init__(self, name: str, expired: list[str]) -> None:
        self.name = name
        self._expired = expired

    def expire(self) -> None:
        self._expired.append(self.name)


def test_deadlines_expire_each_waiting_request_once_in_order_on_one_timer() -> None:
    from elicitor.session._deadlines import Deadlines

    clock = _Clock()
    expired: list[str] = []
    deadlines = Deadlines(clock)  # type: ignore[arg-type]  # the part of a loop it uses
    a, b, c, d = (_Waiting(name, expired) for name in "abcd")
    deadlines.add(a, 10)
    clock.advance(1)
    deadlines.add(b, 10)  # due at 11
    deadlines.add(c, 3)  # due at 4: a shorter timeout moves the one timer earlier
    deadlines.add(d, 10)
    assert len(clock.timers) == 1
    deadlines.discard(d)  # answered: never expires
    clock.advance(2.5)
    assert expired == []
    clock.advance(1)
    assert expired == ["c"]
    assert len(clock.timers) == 1  # set again, for a
    clock.advance(6)
    assert expired == ["c", "a"]
    clock.advance(1)
    assert expired == ["c", "a", "b"]
    assert clock.timers == []
    deadlines.add(a, 5)
    deadlines.close()  # the session ended: nothing expires any more
    assert clock.timers == []
    clock.advance(60)
    assert expired == ["c", "a", "b"]


def test_deadlines_due_together_expire_in_deadline_order() -> None:
    """A loop busy past several deadlines of different timeouts: they expire in the order they were due."""
    from elicitor.session._deadlines import Deadlines

    clock = _Clock()
    expired: list[str] = []
    deadlines = Deadlines(clock)  # type: ignore[arg-type]
    deadlines.add(_Waiting("late", expired), 5)
    deadlines.add(_Waiting("early", expired), 2)
    clock.now += 10  # nothing ran meanwhile
    clock.advance(0)
    assert expired == ["early", "late"]


async def test_requests_with_different_timeouts_each_time_out_and_answered_ones_do_not(anyio_backend: str) -> None:
    """Over a real session: the one timer serves requests of several timeouts, and an answer removes its deadline."""
    release = anyio.Event()

    async def server(request: RequestReceived) -> dict[str, Any]:
        if request.method == "quick":
            return {}
        await release.wait()
        return {}

    server_end, client_end = memory_pair()
    outcomes: dict[str, str] = {}

    async def call(client: Session, name: str, method: str, timeout: float) -> None:
        try:
            await client.request(method, {}, timeout=timeout)
            outcomes[name] = "answered"
        except TimeoutError:
            outcomes[name] = "timed out"

    async with (
        open_session(server_end, server, ignore),
        open_session(client_end, no_requests, ignore) as client,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(call, client, "long", "slow", 60.0)
        tg.start_soon(call, client, "short", "slow", 0.05)
        tg.start_soon(call, client, "quick", "quick", 30.0)  # answered at once: its deadline goes with the answer
        tg.start_soon(call, client, "medium", "slow", 0.2)
        with anyio.fail_after(30):
            while len(outcomes) < 3:
                await anyio.sleep(0.01)
        release.set()
    assert outcomes == {"quick": "answered", "short": "timed out", "medium": "timed out", "long": "answered"}
