"""A service the server relies on away for a moment (Redis restarting) is a retryable error, never a bug.

The peer is answered -32603 with ``data.retryable`` and ``data.retryAfter`` and nothing of the failure's detail
(its text names the store's address); the server logs it at WARNING without a traceback; a client following a task
rides out such errors for as long as the store takes to come back, and never sends a ``tools/call`` again.
Against a real redis-server this test starts, stops and starts again (appendonly, so the task survives it).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from elicitor import (
    Accepted,
    Client,
    Context,
    ElicitationRequest,
    JSONRPCError,
    Server,
    StateSealer,
    TemporarilyUnavailable,
)
from elicitor.client import _tasks
from elicitor.server import _hold, generate_key
from elicitor.server import _tasks as server_tasks
from elicitor.state import RedisStore, StoreUnavailable
from elicitor.types import INTERNAL_ERROR

from .conftest import connected, serving
from .replicas import REDIS, RedisServer

HANDSHAKE = "2025-11-25"
STATELESS = "2026-07-28"
needs_redis = pytest.mark.skipif(REDIS is None, reason="needs redis-server (make test installs it)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # redis.asyncio, uvicorn


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own, which it may stop; it keeps its data across a restart."""
    server = RedisServer(tmp_path, appendonly=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class Colour:
    name: str


@asynccontextmanager
async def shop(redis: RedisServer) -> AsyncIterator[tuple[Server, str]]:
    """A server keeping its tasks in ``redis``, served over HTTP; yields it and its URL. Its ``answers`` are those
    its surveys went on with."""
    store = RedisStore(redis.url, prefix=f"transient-{secrets.token_hex(4)}:", timeout=2.0)
    keys = StateSealer([generate_key()])
    server = Server("transient", "1.0.0", store=store, state=keys, task_poll_interval=0.05)
    server.go = anyio.Event()  # type: ignore[attr-defined]
    server.answers = []  # type: ignore[attr-defined]

    @server.tool(task="required")
    async def wait_for_go() -> str:
        await server.go.wait()  # type: ignore[attr-defined]
        return "went"

    @server.tool(task="required")
    async def survey(ctx: Context) -> str:
        answer = await ctx.elicit("Favourite colour?", Colour)
        server.answers.append(answer)  # type: ignore[attr-defined]
        return f"likes {answer.data.name if isinstance(answer, Accepted) else '-'}"

    @server.tool()
    async def survey_now(ctx: Context) -> str:
        return await survey(ctx)

    try:
        async with serving(server.http_app()) as url:
            yield server, url
    finally:
        await store.aclose()


def transient(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """What the server logged of requests that met the store away."""
    return [r for r in caplog.records if r.name == "elicitor.session" and "failed for a moment" in r.getMessage()]


@needs_redis
@pytest.mark.parametrize("protocol", [HANDSHAKE, STATELESS])
async def test_a_request_that_meets_the_store_away_is_answered_retryable_and_logged_as_a_warning(
    anyio_backend: str,
    redis: RedisServer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    protocol: str,
) -> None:
    """On 2026-07-28 ``tasks/get`` first waits for the store (up to ``STORE_HOLD``, a second here), then fails so."""
    monkeypatch.setattr(_hold, "STORE_HOLD", 1.0)
    caplog.set_level(logging.INFO, logger="elicitor")
    async with shop(redis) as (_, url), Client.http(url, protocol=protocol) as client:
        handle = await client.start_tool("wait_for_go")
        assert handle.id is not None
        redis.stop()
        with anyio.fail_after(30), pytest.raises(JSONRPCError) as caught:
            await client.request("tasks/get", {"taskId": handle.id})
    error = caught.value
    assert error.code == INTERNAL_ERROR
    assert error.retryable and error.retry_after == 1.0
    assert isinstance(error.data, dict)
    reference = error.data["reference"]
    assert error.data == {"reference": reference, "retryable": True, "retryAfter": 1.0}
    assert error.message.startswith("Temporarily unavailable") and "retry" in error.message
    assert str(reference) in error.message
    assert "127.0.0.1" not in error.message and str(redis.port) not in error.message  # the detail stays here
    (logged,) = [r for r in caplog.records if str(reference) in r.getMessage()]
    assert logged.levelno == logging.WARNING and logged.exc_info is None
    assert f"127.0.0.1:{redis.port}" in logged.getMessage()  # where the store was, for the operator
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR and r.name == "elicitor.session"]


@needs_redis
async def test_a_client_following_a_task_rides_out_a_store_away_longer_than_an_internal_error_is(
    anyio_backend: str, redis: RedisServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2025-11-25: the store goes away while the person is asked (on ``tasks/result``'s stream) and stays away
    longer than the server keeps ``tasks/result`` open for it (here, not at all), then for several failed polls,
    longer than an unmarked internal error is ridden out; once it is back, the question is asked again (the first
    one was withdrawn unanswered) and the task ends with its result. Each request waits for the store first (up to
    ``STORE_HOLD``, half a second here: this is about what the client does once the server gives up waiting)."""
    monkeypatch.setattr(_hold, "STORE_HOLD", 0.5)
    monkeypatch.setattr(_tasks, "POLL_FAILURES_FOR", 0.5)  # an unmarked -32603 would end the wait after 0.5 s
    monkeypatch.setattr(server_tasks, "RESULT_RIDES_OUT", 0.0)  # tasks/result fails at the first failed read
    caplog.set_level(logging.INFO, logger="elicitor")
    shown = anyio.Event()
    asked: list[str] = []

    async def person(request: ElicitationRequest) -> Any:
        asked.append(request.message)
        if len(asked) == 1:
            shown.set()
            await anyio.sleep_forever()  # the store goes away meanwhile: the question is withdrawn
        return Accepted({"name": "blue"})

    async with shop(redis) as (_, url), Client.http(url, protocol=HANDSHAKE, elicitation=person) as client:
        handle = await client.start_tool("survey")
        async with anyio.create_task_group() as tg:
            result: list[str] = []

            async def follow() -> None:
                result.append((await handle.wait()).text)

            tg.start_soon(follow)
            with anyio.fail_after(30):
                await shown.wait()
            redis.stop()
            with anyio.fail_after(60):
                while len(transient(caplog)) < 3:  # tasks/result, then polls a second apart: over 0.5 s away
                    await anyio.sleep(0.05)
            redis.start()
            with anyio.fail_after(60):
                while not result:
                    await anyio.sleep(0.05)
    assert result == ["likes blue"]
    assert asked == ["Favourite colour?", "Favourite colour?"]
    methods = {r.getMessage().split(" failed")[0] for r in transient(caplog)}
    assert methods == {"handler for tasks/result", "handler for tasks/get"}


@needs_redis
async def test_a_request_refused_with_503_while_the_store_is_away_says_it_is_retryable_in_its_body_too(
    anyio_backend: str, redis: RedisServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused before it reached a session (the store cannot say which replica runs it), once it waited for the
    store (up to ``STORE_HOLD``, a second here): 503 with ``Retry-After``, and the JSON-RPC error in the body carries
    the same mark a handler's retryable error does, for a client that reads only the error. The store's address
    stays in the server's log (WARNING, with the reference the client gets), never in the answer."""
    import httpx2 as httpx

    monkeypatch.setattr(_hold, "STORE_HOLD", 1.0)
    caplog.set_level(logging.WARNING)
    async with shop(redis) as (_, url), httpx.AsyncClient(timeout=30) as http:
        redis.stop()
        headers = {"mcp-session-id": "elsewhere", "accept": "application/json, text/event-stream"}
        response = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers)
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    error = response.json()["error"]
    reference = error["data"].pop("reference")
    assert error["data"] == {"retryable": True, "retryAfter": 1}
    assert JSONRPCError(error["code"], error["message"], error["data"]).retryable
    assert str(redis.port) not in response.text and "Redis" not in response.text
    logged = [r for r in caplog.records if reference in r.getMessage()]
    assert [r.levelno for r in logged] == [logging.WARNING] and str(redis.port) in logged[0].getMessage()


async def test_a_tool_that_meets_a_service_away_is_answered_retryable_and_never_called_again(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Not an ``isError`` result blaming the tool (with the failure's text in it): the retryable error, once; the
    client leaves it to its caller whether a call that may have acted is made again."""
    server = Server("transient", "1.0.0")
    calls: list[str] = []

    @server.tool()
    async def charge(card: str) -> str:
        calls.append(card)
        raise StoreUnavailable("shared state unavailable (reading): Redis at redis://10.0.0.7:6379/0: refused")

    @server.tool(task="required")
    async def charge_later(card: str) -> str:
        return await charge(card)

    for protocol in (HANDSHAKE, STATELESS):
        for tool in ("charge", "charge_later"):  # a task fails with that error, its text kept out of its record
            async with connected(server, protocol=protocol) as client:
                with anyio.fail_after(30), pytest.raises(JSONRPCError) as caught:
                    await client.call_tool(tool, {"card": f"{tool} {protocol}"})
            assert caught.value.retryable, (tool, protocol)
            assert "10.0.0.7" not in caught.value.message
    assert calls == [f"{tool} {protocol}" for protocol in (HANDSHAKE, STATELESS) for tool in ("charge", "charge_later")]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_store_away_is_a_passing_failure_and_an_error_says_whether_it_is() -> None:
    assert issubclass(StoreUnavailable, TemporarilyUnavailable)
    assert StoreUnavailable("away").retry_after == 1.0
    assert TemporarilyUnavailable("payments away", retry_after=5).retry_after == 5
    assert not JSONRPCError(INTERNAL_ERROR, "Internal error", {"reference": "abc"}).retryable
    assert not JSONRPCError(INTERNAL_ERROR, "Internal error", "retryable").retryable
    marked = JSONRPCError(INTERNAL_ERROR, "Temporarily unavailable", {"retryable": True, "retryAfter": 2})
    assert marked.retryable and marked.retry_after == 2.0
    for odd in (-1, "2", True, float("inf"), None):
        assert JSONRPCError(INTERNAL_ERROR, "x", {"retryable": True, "retryAfter": odd}).retry_after is None


@needs_redis
async def test_an_answer_given_while_the_store_is_away_is_used_and_the_person_is_asked_once(
    anyio_backend: str, redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """2025-11-25: the person answers a task's question (shown on ``tasks/result``'s stream) just as the store goes
    away. The answer is neither lost nor asked for again: once the store is back, the task ends with it."""
    caplog.set_level(logging.INFO, logger="elicitor")
    shown, answer = anyio.Event(), anyio.Event()
    asked: list[str] = []

    async def person(request: ElicitationRequest) -> Any:
        asked.append(request.message)
        shown.set()
        await answer.wait()
        return Accepted({"name": "blue" if len(asked) == 1 else "asked again"})

    async with shop(redis) as (server, url), Client.http(url, protocol=HANDSHAKE, elicitation=person) as client:
        handle = await client.start_tool("survey")
        async with anyio.create_task_group() as tg:
            result: list[str] = []

            async def follow() -> None:
                result.append((await handle.wait()).text)

            tg.start_soon(follow)
            with anyio.fail_after(30):
                await shown.wait()
            redis.stop()
            answer.set()  # reaches the server, whose write of it into the task then meets the store away
            with anyio.fail_after(60):
                while not [r for r in caplog.records if "the shared state is unavailable; trying" in r.getMessage()]:
                    await anyio.sleep(0.05)
            redis.start()
            with anyio.fail_after(60):
                while not result:
                    await anyio.sleep(0.05)
    assert result == ["likes blue"]
    assert asked == ["Favourite colour?"]
    assert server.answers == [Accepted(Colour("blue"))]  # type: ignore[attr-defined]


@needs_redis
async def test_a_question_shown_while_the_store_is_away_stays_up_and_its_answer_is_used(
    anyio_backend: str, redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """2025-11-25: the store goes away while a task's question is shown on ``tasks/result``'s stream, and the
    person answers while it is still away: ``tasks/result`` waits for the store with the question left up (not
    withdrawn), the answer is written once the store is back, and the task ends with it."""
    caplog.set_level(logging.INFO, logger="elicitor")
    shown, answer = anyio.Event(), anyio.Event()
    asked: list[str] = []
    withdrawn: list[str] = []

    async def person(request: ElicitationRequest) -> Any:
        asked.append(request.message)
        shown.set()
        try:
            await answer.wait()
        except anyio.get_cancelled_exc_class():
            withdrawn.append(request.message)
            raise
        return Accepted({"name": "blue" if len(asked) == 1 else "asked again"})

    def noticed() -> bool:  # tasks/result waiting for the store, or failing for want of it
        return any("tasks/result waits for it" in r.getMessage() for r in caplog.records) or bool(transient(caplog))

    async with shop(redis) as (server, url), Client.http(url, protocol=HANDSHAKE, elicitation=person) as client:
        handle = await client.start_tool("survey")
        async with anyio.create_task_group() as tg:
            result: list[str] = []

            async def follow() -> None:
                result.append((await handle.wait()).text)

            tg.start_soon(follow)
            with anyio.fail_after(30):
                await shown.wait()
            redis.stop()
            with anyio.fail_after(60):
                while not noticed():  # the server has found the store away
                    await anyio.sleep(0.05)
            await anyio.sleep(1.5)  # and keeps finding it so, a read a second
            answer.set()
            await anyio.sleep(1.5)
            redis.start()
            with anyio.fail_after(60):
                while not result:
                    await anyio.sleep(0.05)
    assert result == ["likes blue"]
    assert asked == ["Favourite colour?"] and withdrawn == []
    assert server.answers == [Accepted(Colour("blue"))]  # type: ignore[attr-defined]


@needs_redis
async def test_an_answer_to_a_plain_call_given_while_the_store_is_away_is_used_and_the_person_is_asked_once(
    anyio_backend: str, redis: RedisServer
) -> None:
    """2025-11-25, no task: the question waits in the session that asked it, in this replica, and the answer's POST
    reaches it there without the store. (A replica that had to look the session up in the store would refuse the
    POST with 503, and the client would send it again.)"""
    shown, answer = anyio.Event(), anyio.Event()
    asked: list[str] = []

    async def person(request: ElicitationRequest) -> Any:
        asked.append(request.message)
        shown.set()
        await answer.wait()
        return Accepted({"name": "blue" if len(asked) == 1 else "asked again"})

    result: list[str] = []
    async with (
        shop(redis) as (server, url),
        Client.http(url, protocol=HANDSHAKE, elicitation=person) as client,
        anyio.create_task_group() as tg,
    ):

        async def call() -> None:
            result.append((await client.call_tool("survey_now")).text)

        tg.start_soon(call)
        with anyio.fail_after(30):
            await shown.wait()
        redis.stop()
        answer.set()
        await anyio.sleep(1.5)  # the store stays away a moment after the answer (longer than a Retry-After)
        redis.start()
        with anyio.fail_after(60):
            while not result:
                await anyio.sleep(0.05)
    assert result == ["likes blue"]
    assert asked == ["Favourite colour?"]
    assert server.answers == [Accepted(Colour("blue"))]  # type: ignore[attr-defined]
