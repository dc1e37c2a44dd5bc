"""Redis away (``CLIENT PAUSE``, a restart) while replicas serve tasks and sessions, and a replica stopped meanwhile.

The clients here send each request once and take its first answer, as the official SDKs' clients do: an error
that a retrying client would ride out is what their person sees. Replicas are uvicorn servers in this process (or
``elicitor serve`` processes, where a signal must reach a real process) sharing a real ``redis-server``.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2 as httpx
import pytest

from elicitor import (
    Accepted,
    Client,
    Context,
    ElicitationRequest,
    ScriptedHandler,
    Server,
    UrlElicitationRequest,
    UrlElicitationRequired,
)
from elicitor.server import HttpApp, StateSealer, generate_key
from elicitor.state import RedisStore, StoreUnavailable, TaskRecord, UrlRecord

from .conftest import serving
from .replicas import MISSING, ROOT, RedisServer, Replicas
from .test_replicas import open_session as replica_session
from .test_replicas import rpc

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(bool(MISSING), reason=f"needs {' and '.join(MISSING)} (make test installs them)"),
]

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
CAPABILITIES = {"elicitation": {"form": {}}, "tasks": {"requests": {"elicitation": {"create": {}}}}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Picked:
    name: str


tasking = Server("tasking", version="1.0.0", state=StateSealer([generate_key()]))


@tasking.tool(task="required")
async def chore(ctx: Context) -> str:
    """A task that waits on its person."""
    outcome = await ctx.elicit("Pick a name", Picked)
    return outcome.data.name if isinstance(outcome, Accepted) else "-"


def replica_of(template: Server, store: Any = None) -> tuple[Server, HttpApp]:
    """A replica of ``template``: its own Server (and store, if given) with the same tools and state keys."""
    server = Server(str(template.info["name"]), version="1.0.0", state=template.sealer)
    server._tools = template._tools
    if store is not None:
        server.share(store)
    return server, server.http_app()


def two_replicas(redis_url: str, template: Server = tasking) -> list[HttpApp]:
    """Two replicas of ``template`` sharing a Redis under a prefix of their own (short lease and timeout)."""
    prefix = f"outage{secrets.token_hex(4)}:"
    return [replica_of(template, RedisStore(redis_url, prefix=prefix, lease=1.0, timeout=1.0))[1] for _ in range(2)]


@asynccontextmanager
async def one_replica(redis_url: str, template: Server = tasking) -> AsyncIterator[tuple[str, HttpApp]]:
    """One replica of ``template`` on a Redis shared as replicas share it (short lease and timeout)."""
    store = RedisStore(redis_url, prefix=f"outage{secrets.token_hex(4)}:", lease=1.0, timeout=1.0)
    _, app = replica_of(template, store)
    async with serving(app) as url:
        yield url, app


async def open_session(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    """Initialize a 2025-11-25 session that declares tasks; the headers its later requests carry."""
    return await replica_session(http, url, CAPABILITIES)


def answer_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer a POST got, sent as JSON or as the last message of its SSE stream."""
    if response.headers.get("content-type", "").startswith("application/json"):
        answer: dict[str, Any] = response.json()
        return answer
    messages = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    finals = [m for m in messages if "result" in m or "error" in m]
    assert finals, response.text
    return finals[-1]  # type: ignore[no-any-return]


async def start_chore(http: httpx.AsyncClient, url: str, headers: dict[str, str]) -> str:
    created = await http.post(
        url, json=rpc("tools/call", {"name": "chore", "task": {"ttl": 60_000}}, id=2), headers=headers
    )
    task_id: str = answer_of(created)["result"]["task"]["taskId"]
    return task_id


async def test_task_requests_sent_once_while_redis_is_paused_are_answered_on_2025_11_25(redis: RedisServer) -> None:
    """2025-11-25, the session's own replica: ``tasks/get``, ``tasks/cancel`` and ``tasks/result``, each sent once
    while Redis is paused (``CLIENT PAUSE``), wait for Redis and are answered as they would be without the pause,
    instead of failing at once with the retryable -32603 that a client sending them once shows its person; the
    cancel takes effect."""
    from redis.asyncio import Redis

    admin = Redis.from_url(redis.url)
    async with one_replica(redis.url) as (url, app), httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, url)
        task_id = await start_chore(http, url, headers)
        try:
            with anyio.fail_after(90):
                await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
                seen = answer_of(await http.post(url, json=rpc("tasks/get", {"taskId": task_id}, 3), headers=headers))
                await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
                cancel = rpc("tasks/cancel", {"taskId": task_id}, 4)
                cancelled = answer_of(await http.post(url, json=cancel, headers=headers))
                await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
                result = rpc("tasks/result", {"taskId": task_id}, 5)
                ended = answer_of(await http.post(url, json=result, headers=headers))
        finally:
            await admin.aclose()
        assert app._hold.waiting == 0
    assert seen["result"]["taskId"] == task_id and seen["result"]["status"] in ("working", "input_required"), seen
    assert cancelled["result"]["status"] == "cancelled", cancelled
    assert ended["error"]["code"] == -32602 and "was cancelled" in ended["error"]["message"], ended


async def test_a_cancel_whose_write_reached_the_store_before_it_failed_is_answered_with_the_cancelled_task() -> None:
    """2025-11-25 ``tasks/cancel``: the compare-and-swap that cancels the task reaches the store, then the store's
    answer is lost (a timeout while Redis runs it late). The request waits and is tried again, and the try finds
    the task cancelled: its own cancel, answered with the task, not with "has already ended" (-32602) nor the
    retryable error. The task is cancelled once."""
    server, app = replica_of(tasking)
    registry = server.store.tasks
    swap = registry.swap
    lost: list[str] = []

    async def swap_then_lose_the_answer(record: TaskRecord) -> TaskRecord | None:
        stored = await swap(record)
        if record.status == "cancelled" and not lost:
            lost.append(record.id)
            raise StoreUnavailable("shared state unavailable (writing a task): the answer timed out")
        return stored

    registry.swap = swap_then_lose_the_answer  # type: ignore[method-assign]
    async with serving(app) as url, httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, url)
        task_id = await start_chore(http, url, headers)
        with anyio.fail_after(60):
            cancel = rpc("tasks/cancel", {"taskId": task_id}, 4)
            cancelled = answer_of(await http.post(url, json=cancel, headers=headers))
            again = answer_of(await http.post(url, json={**cancel, "id": 5}, headers=headers))
    assert lost == [task_id]
    assert cancelled.get("result", {}).get("status") == "cancelled", cancelled
    assert again["error"]["code"] == -32602 and "already ended" in again["error"]["message"]  # a new request


REPLICA = [sys.executable, "-m", "tests.peers.replica_server"]
"""A replica as its own process (``server.run("http", shutdown_grace=2)``: ``elicitor serve``'s path)."""


async def test_a_replica_stopped_while_redis_is_paused_exits_by_itself_whatever_its_sessions(
    redis: RedisServer, tmp_path: Path
) -> None:
    """SIGTERM to a replica running 30 sessions while Redis is paused for 20 s: the replica exits by itself while
    Redis is still paused, instead of taking each session's store timeouts one after the other (about 4 s each:
    two minutes here, past any orchestrator's grace period). Its sessions are left for its lease to expire: once
    Redis is back, the other replica answers 404 for them (their clients start again)."""
    from redis.asyncio import Redis

    group = Replicas(REPLICA, 2, tmp_path, redis=redis.url, keys=generate_key())
    urls = [f"http://127.0.0.1:{port}/mcp" for port in group.ports]
    admin = Redis.from_url(redis.url)
    group.start()
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            sessions = [await open_session(http, urls[0]) for _ in range(30)]
            process = group._processes[0]
            assert process is not None
            await admin.execute_command("CLIENT", "PAUSE", "20000", "ALL")  # Redis 7.0 cannot unpause it sooner
            back = anyio.current_time() + 20
            os.killpg(process.pid, signal.SIGTERM)
            with anyio.move_on_after(17):
                while process.poll() is None:
                    await anyio.sleep(0.1)
            exited = process.poll()
            await anyio.sleep(back - anyio.current_time())
            assert exited == 0, f"status {exited} (None: running) 17 s after SIGTERM, Redis paused\n{group.logs()}"
            with anyio.fail_after(60):  # the stopped replica's lease has lapsed: its sessions are gone
                while (await http.post(urls[1], json=rpc("ping", id=9), headers=sessions[0])).status_code != 404:
                    await anyio.sleep(0.2)
    finally:
        await admin.aclose()
        group.stop()


async def test_a_request_waiting_for_redis_when_its_replica_is_stopped_is_refused_with_503_not_cut(
    redis: RedisServer, tmp_path: Path
) -> None:
    """Redis is paused; a GET for replica 0's session lands on replica 1 and waits there for Redis; replica 1 is
    stopped (SIGTERM, a 2 s grace). The GET stops waiting before the grace is up and is refused as one that waited
    its whole bound: 503 with ``Retry-After`` and a body saying why. It was left waiting until uvicorn cancelled it
    at the end of the grace: a 500 "Internal Server Error" and an "Exception in ASGI application" traceback."""
    from redis.asyncio import Redis

    group = Replicas(REPLICA, 2, tmp_path, redis=redis.url, keys=generate_key())
    urls = [f"http://127.0.0.1:{port}/mcp" for port in group.ports]
    admin = Redis.from_url(redis.url)
    group.start()
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            headers = await open_session(http, urls[0])
            stream = {**headers, "accept": "text/event-stream"}
            process = group._processes[1]
            assert process is not None
            await admin.execute_command("CLIENT", "PAUSE", "8000", "ALL")
            async with anyio.create_task_group() as tg:

                async def stop_soon() -> None:
                    await anyio.sleep(1.5)  # the GET waits for Redis by now
                    os.killpg(process.pid, signal.SIGTERM)

                tg.start_soon(stop_soon)
                with anyio.fail_after(30):
                    response = await http.get(urls[1], headers=stream)
            assert response.status_code == 503, (response.status_code, response.text, group.logs())
            assert response.headers.get("retry-after") and response.text, response.headers
            await anyio.to_thread.run_sync(process.wait, 30)
        assert "Exception in ASGI application" not in group.logs(), group.logs()
    finally:
        await admin.aclose()
        group.stop()


async def test_a_call_followed_to_the_end_of_the_grace_while_redis_is_paused_ends_cleanly(
    redis: RedisServer, tmp_path: Path
) -> None:
    """A call of replica 0's session waits on its person, its client following the response, when Redis is paused
    and replica 0 is stopped (SIGTERM, a 2 s grace). At the end of the grace the replica ends its sessions; it gave
    Redis 2 s to forget each before closing its responses, past the grace, so uvicorn cut the response: an
    "Exception in ASGI application" traceback in the log. Now the wait for Redis fits in what is left of the
    grace, and the response ends before uvicorn would cut it."""
    from redis.asyncio import Redis

    group = Replicas(REPLICA, 1, tmp_path, redis=redis.url, keys=generate_key())
    url = f"http://127.0.0.1:{group.ports[0]}/mcp"
    admin = Redis.from_url(redis.url)
    group.start()
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            headers = await open_session(http, url)
            process = group._processes[0]
            assert process is not None
            call = rpc("tools/call", {"name": "book"}, id=7)
            with anyio.fail_after(30):
                async with http.stream("POST", url, json=call, headers=headers) as response:
                    async for message in messages(response):
                        if message.get("method") == "elicitation/create":  # the person has it: Redis away, stop
                            await admin.execute_command("CLIENT", "PAUSE", "6000", "ALL")
                            os.killpg(process.pid, signal.SIGTERM)
                await anyio.to_thread.run_sync(process.wait, 30)
        assert "Exception in ASGI application" not in group.logs(), group.logs()
    finally:
        await admin.aclose()
        group.stop()


async def messages(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """Each message of an SSE response, as it comes."""
    async for line in response.aiter_lines():
        if line.startswith("data: {"):
            yield json.loads(line[6:])


async def restart_after(store: RedisServer, seconds: float) -> None:
    """Start ``store`` again (on its port, with what it saved) ``seconds`` from now."""
    await anyio.sleep(seconds)
    await anyio.to_thread.run_sync(store.start)


async def test_a_task_followed_once_through_two_redis_restarts_ends_with_its_person_asked_once(
    tmp_path: Path,
) -> None:
    """2025-11-25, a client that sends each request once. ``redis-server`` is stopped and started again on the same
    port (with its data: ``appendonly``) while the client's ``tasks/get`` is on its way, and again as its person
    answers the question ``tasks/result`` asked: the ``tasks/get`` waits and is answered, the replica reconnects by
    itself, the answer is kept, the question is not asked again, and ``tasks/result`` ends with the task's result."""
    store = RedisServer(tmp_path, appendonly=True)
    store.start()
    try:
        async with one_replica(store.url) as (url, _), httpx.AsyncClient(timeout=60) as http:
            headers = await open_session(http, url)
            task_id = await start_chore(http, url, headers)
            with anyio.fail_after(120):
                await anyio.to_thread.run_sync(store.stop)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(restart_after, store, 1.0)
                    get = rpc("tasks/get", {"taskId": task_id}, 3)
                    seen = answer_of(await http.post(url, json=get, headers=headers))
                asked: list[str] = []
                follow = rpc("tasks/result", {"taskId": task_id}, 4)
                async with http.stream("POST", url, json=follow, headers=headers) as response:
                    async for message in messages(response):
                        if message.get("method") == "elicitation/create":
                            asked.append(message["params"]["message"])
                            await anyio.to_thread.run_sync(store.stop)
                            answer = {"jsonrpc": "2.0", "id": message["id"],
                                      "result": {"action": "accept", "content": {"name": "Ada"}}}  # fmt: skip
                            assert (await http.post(url, json=answer, headers=headers)).status_code == 202
                            await restart_after(store, 1.0)
                        elif "result" in message or "error" in message:
                            final = message
                            break
    finally:
        store.stop()
    assert seen["result"]["taskId"] == task_id, seen
    assert asked == ["Pick a name"]
    assert final["result"]["content"][0]["text"] == "Ada", final


linking = Server("linking", version="1.0.0", state=StateSealer([generate_key()]))


@linking.tool()
async def link(ctx: Context) -> str:
    """Sends its person to a page (URL mode), which registers the elicitation in the shared store first."""
    outcome = await ctx.elicit_url("Connect your account", "https://accounts.example/connect/{elicitation_id}")
    return "accepted" if isinstance(outcome, Accepted) else "refused"


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_url_mode_call_made_while_redis_is_paused_asks_its_person_once_redis_is_back(
    redis: RedisServer, era: str
) -> None:
    """A call whose tool sends its person to a page (URL mode) starts while Redis is paused: registering the
    elicitation waits for Redis, and the person is asked once it is back, instead of the call failing with the
    retryable error (a ``tools/call`` is never sent again: the person's call would simply fail)."""
    from redis.asyncio import Redis

    opened: list[str] = []

    def open_page(request: ElicitationRequest | UrlElicitationRequest) -> Accepted[None]:
        assert isinstance(request, UrlElicitationRequest)
        opened.append(request.url)
        return Accepted(None)

    handler = ScriptedHandler(otherwise=open_page, modes=frozenset({"form", "url"}))
    admin = Redis.from_url(redis.url)
    try:
        async with (
            one_replica(redis.url, linking) as (url, _),
            Client.http(url, elicitation=handler, protocol=era) as client,
        ):
            with anyio.fail_after(60):
                await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
                result = await client.call_tool("link")
    finally:
        await admin.aclose()
    assert result.text == "accepted"
    assert len(opened) == 1 and opened[0].startswith("https://accounts.example/connect/")


@pytest.mark.parametrize("connection", [None, "conn-1"])
async def test_a_url_elicitation_whose_first_try_reached_the_store_is_registered_once(connection: str | None) -> None:
    """Registering a URL-mode elicitation: the store takes the record, then its answer is lost (a timeout while
    Redis runs it late). The next try finds what the first stored (by the question asked on the connection, or by
    the id chosen once) instead of storing a second elicitation with a link nobody will open."""
    server = Server("linking", version="1.0.0")
    urls = server.store.urls
    add = urls.add
    added: list[str] = []

    async def add_then_lose_the_answer(record: Any, question: str | None = None) -> Any:
        stored = await add(record, question)
        added.append(record.id)
        if len(added) == 1:
            raise StoreUnavailable("shared state unavailable (storing a URL elicitation): the answer timed out")
        return stored

    urls.add = add_then_lose_the_answer  # type: ignore[method-assign]
    with anyio.fail_after(30):
        registered = await server.url_elicitations.new(
            "Connect", "https://accounts.example/{elicitation_id}", principal=None, connection=connection,
            question="connect" if connection else None,
        )  # fmt: skip
    assert added == [registered.id]
    assert registered.url == f"https://accounts.example/{registered.id}"


@dataclass
class Count:
    count: int


CHARGED: list[str] = []
"""Each charge of ``order`` (both in-process replicas share it): a side effect that must happen once per call."""

shop = Server("shop", version="1.0.0", state=StateSealer([generate_key()]))


@shop.tool()
async def order(ctx: Context, item: str) -> str:
    """Charges once (``ctx.once``), then asks."""

    async def charge() -> str:
        CHARGED.append(item)
        return "charged"

    receipt: str = await ctx.once("charge", charge)
    outcome = await ctx.elicit(f"How many {item}?", Count)
    return f"{receipt}: {item} x{outcome.data.count}" if isinstance(outcome, Accepted) else "-"


async def test_a_call_made_while_redis_is_paused_is_kept_and_its_charge_is_not_repeated_by_its_retry(
    redis: RedisServer,
) -> None:
    """2025-11-25, a call under an idempotency key (as elicitor's client sends every call) made on replica A
    while Redis is paused: it waits for Redis to keep it, then charges and asks. Its client then sends it again on
    B (its session on A lost, as when A dies): B finds the charge done and only asks. Kept, the call is charged
    once; run unkept (as it was when the store could not be reached at its start), it was charged twice."""
    from redis.asyncio import Redis

    CHARGED.clear()
    apps = two_replicas(redis.url, shop)
    key = {"dev.elicitor/idempotencyKey": secrets.token_urlsafe(18)}
    call = rpc("tools/call", {"name": "order", "arguments": {"item": "tea"}, "_meta": key}, 7)
    admin = Redis.from_url(redis.url)
    try:
        async with serving(apps[0]) as a, serving(apps[1]) as b, httpx.AsyncClient(timeout=60) as http:
            at_a, at_b = await open_session(http, a), await open_session(http, b)
            with anyio.fail_after(60):
                await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
                async with http.stream("POST", a, json=call, headers=at_a) as first:
                    async for message in messages(first):
                        assert message.get("method") == "elicitation/create", message
                        break  # charged, and waits on its person
                    async with http.stream("POST", b, json={**call, "id": 8}, headers=at_b) as again:
                        async for message in messages(again):
                            if message.get("method") == "elicitation/create":
                                answer = {"jsonrpc": "2.0", "id": message["id"],
                                          "result": {"action": "accept", "content": {"count": 2}}}  # fmt: skip
                                assert (await http.post(b, json=answer, headers=at_b)).status_code == 202
                            elif "result" in message or "error" in message:
                                final = message
                                break
    finally:
        await admin.aclose()
    assert final["result"]["content"][0]["text"] == "charged: tea x2", final
    assert CHARGED == ["tea"]


async def follow_answering(http: httpx.AsyncClient, url: str, headers: dict[str, str], task_id: str) -> dict[str, Any]:
    """``tasks/result`` for ``task_id``, its questions answered "Ada" as they come; its final message."""
    asked: list[str] = []
    async with http.stream("POST", url, json=rpc("tasks/result", {"taskId": task_id}, 40), headers=headers) as r:
        async for message in messages(r):
            if message.get("method") == "elicitation/create":
                asked.append(message["params"]["message"])
                answer = {"jsonrpc": "2.0", "id": message["id"],
                          "result": {"action": "accept", "content": {"name": "Ada"}}}  # fmt: skip
                assert (await http.post(url, json=answer, headers=headers)).status_code == 202
            elif "result" in message or "error" in message:
                assert asked == ["Pick a name"]
                return message
    raise AssertionError("tasks/result ended without an answer")


@pytest.mark.parametrize("lost", ["paused", "answer lost"])
async def test_a_kept_task_call_made_while_redis_is_away_creates_its_task_once_and_runs_it(
    redis: RedisServer, lost: str
) -> None:
    """2025-11-25, a task-augmented call under an idempotency key (its task's id comes from the key): made while
    Redis is paused, it waits for Redis and answers with its task instead of the retryable -32603 (a ``tools/call``
    is never sent again: the person's call failed). When the creation reached Redis but its answer was lost, the
    next try finds that task and runs it: one task, followed to its result from another replica (which leaves a
    task to its live owner, so a task stored without its run would wait there for ever)."""
    from redis.asyncio import Redis

    key = {"dev.elicitor/idempotencyKey": secrets.token_urlsafe(18)}
    call = rpc("tools/call", {"name": "chore", "task": {"ttl": 60_000}, "_meta": key}, 2)
    admin = Redis.from_url(redis.url)
    apps = two_replicas(redis.url)
    try:
        async with serving(apps[0]) as url, serving(apps[1]) as other, httpx.AsyncClient(timeout=60) as http:
            registry = apps[0].server.store.tasks
            create = registry.create
            created: list[str] = []

            async def create_then_lose_the_answer(record: TaskRecord) -> None:
                await create(record)
                created.append(record.id)
                if len(created) == 1:
                    raise StoreUnavailable("shared state unavailable (creating a task): the answer timed out")

            if lost == "answer lost":
                registry.create = create_then_lose_the_answer  # type: ignore[method-assign]
            headers = await open_session(http, url)
            with anyio.fail_after(60):
                if lost == "paused":
                    await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
                made = answer_of(await http.post(url, json=call, headers=headers))
                assert "result" in made, made
                elsewhere = await open_session(http, other)  # no user: the task is followed by its id
                final = await follow_answering(http, other, elsewhere, made["result"]["task"]["taskId"])
    finally:
        await admin.aclose()
    assert final["result"]["content"][0]["text"] == "Ada", final
    if lost == "answer lost":
        assert created == [made["result"]["task"]["taskId"]]


async def test_a_kept_task_call_whose_task_redis_stored_after_the_call_failed_runs_it_when_sent_again(
    redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2025-11-25, a task-augmented call under an idempotency key, made while Redis is paused longer than the hold
    (a second here): the call fails with the retryable -32603, and Redis then runs its last try's write all the same
    (its reply was what got lost): a task stored with no run. The call sent again under the same key on another
    replica finds that task, and its owner is told to run it: followed from that other replica, it asks its person
    once and ends. It answered ``working`` until its ttl, its person never asked (the other replica leaves a task
    to its live owner). About 5 s."""
    from redis.asyncio import Redis

    from elicitor.server import _hold

    monkeypatch.setattr(_hold, "STORE_HOLD", 1.0)
    key = {"dev.elicitor/idempotencyKey": secrets.token_urlsafe(18)}
    call = rpc("tools/call", {"name": "chore", "task": {"ttl": 60_000}, "_meta": key}, 2)
    admin = Redis.from_url(redis.url)
    apps = two_replicas(redis.url)
    try:
        async with serving(apps[0]) as url, serving(apps[1]) as other, httpx.AsyncClient(timeout=60) as http:
            registry = apps[0].server.store.tasks
            create = registry.create
            refused: list[TaskRecord] = []

            async def create_or_note_it(record: TaskRecord) -> None:
                try:
                    await create(record)
                except StoreUnavailable:
                    refused.append(record)
                    raise

            registry.create = create_or_note_it  # type: ignore[method-assign]
            headers = await open_session(http, url)
            with anyio.fail_after(60):
                await admin.execute_command("CLIENT", "PAUSE", "2500", "ALL")
                failed = answer_of(await http.post(url, json=call, headers=headers))
                assert failed["error"]["code"] == -32603 and failed["error"]["data"]["retryable"], failed
                while True:  # Redis is back: it runs the last try's write now, as it would have, late
                    try:
                        await create(refused[-1])
                        break
                    except StoreUnavailable:
                        await anyio.sleep(0.2)
                task_id = refused[-1].id
                elsewhere = await open_session(http, other)
                made = answer_of(await http.post(other, json=call, headers=elsewhere))
                assert made["result"]["task"]["taskId"] == task_id, made
                final = await follow_answering(http, other, elsewhere, task_id)
    finally:
        await admin.aclose()
    assert final["result"]["content"][0]["text"] == "Ada", final


@pytest.mark.parametrize("lost", ["paused", "answer lost"])
@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_task_call_without_an_idempotency_key_made_while_redis_is_away_creates_one_task(
    redis: RedisServer, era: str, lost: str
) -> None:
    """A task-creating ``tools/call`` with no idempotency key (the official SDK's on 2025-11-25; every one on
    2026-07-28), its task's id chosen at random: made while Redis is paused, it waits for Redis and answers with its
    task instead of the retryable -32603 (a client that does not send a ``tools/call`` again shows its person an
    error). When the creation reached Redis but its answer was lost, the next try finds that task by the id chosen
    once and runs it: one task, its person asked once, followed to its result from another replica."""
    from redis.asyncio import Redis

    admin = Redis.from_url(redis.url)
    apps = two_replicas(redis.url)
    created: list[str] = []
    asked: list[str] = []

    def person(request: ElicitationRequest | UrlElicitationRequest) -> Accepted[dict[str, str]]:
        asked.append(request.message)
        return Accepted({"name": "Ada"})

    try:
        async with serving(apps[0]) as url, serving(apps[1]) as other, httpx.AsyncClient(timeout=60) as http:
            registry = apps[0].server.store.tasks
            create = registry.create

            async def create_then_lose_the_answer(record: TaskRecord) -> None:
                await create(record)
                created.append(record.id)
                if len(created) == 1:
                    raise StoreUnavailable("shared state unavailable (creating a task): the answer timed out")

            if lost == "answer lost":
                registry.create = create_then_lose_the_answer  # type: ignore[method-assign]
            with anyio.fail_after(90):
                if era == "2025-11-25":
                    headers = await open_session(http, url)
                    call = rpc("tools/call", {"name": "chore", "task": {"ttl": 60_000}}, 2)
                    if lost == "paused":
                        await admin.execute_command("CLIENT", "PAUSE", "2000", "ALL")
                    made = answer_of(await http.post(url, json=call, headers=headers))
                    assert "result" in made, made
                    task_id = made["result"]["task"]["taskId"]
                    final = await follow_answering(http, other, await open_session(http, other), task_id)
                    text = final["result"]["content"][0]["text"]
                    asked.append("Pick a name")  # follow_answering checked it was asked once
                else:
                    handler = ScriptedHandler(otherwise=person)
                    async with Client.http(url, elicitation=handler, protocol=era) as client:
                        if lost == "paused":
                            await admin.execute_command("CLIENT", "PAUSE", "2000", "ALL")
                        handle = await client.start_tool("chore")
                        assert handle.id is not None
                        task_id = handle.id
                    async with Client.http(other, elicitation=handler, protocol=era) as elsewhere:
                        text = (await (await elsewhere.task(task_id)).wait()).text
    finally:
        await admin.aclose()
    assert text == "Ada"
    assert asked == ["Pick a name"]
    if lost == "answer lost":
        assert created == [task_id]


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_task_requests_sent_once_over_stdio_while_redis_is_paused_are_answered(
    redis: RedisServer, era: str
) -> None:
    """A stdio server keeping its tasks in Redis (``Server.run("stdio")`` with a ``RedisStore``): the task-creating
    ``tools/call``, ``tasks/get`` and ``tasks/cancel``, each sent once while Redis is paused, wait for Redis and are
    answered as over HTTP, instead of failing at once with the retryable error a client sending them once shows its
    person; the cancel takes effect."""
    from redis.asyncio import Redis

    async def person(request: ElicitationRequest) -> Accepted[dict[str, str]]:
        await anyio.sleep_forever()  # the task stays open: its person has not answered yet
        raise AssertionError

    command = [sys.executable, "-m", "tests.peers.outage_stdio", redis.url, f"outage{secrets.token_hex(4)}:"]
    admin = Redis.from_url(redis.url)
    try:
        async with Client.stdio(command, cwd=str(ROOT), protocol=era, elicitation=person) as client:
            with anyio.fail_after(90):
                await admin.execute_command("CLIENT", "PAUSE", "2000", "ALL")
                handle = await client.start_tool("chore")  # its creation waits too
                assert handle.id is not None
                await admin.execute_command("CLIENT", "PAUSE", "2000", "ALL")
                seen = await client.request("tasks/get", {"taskId": handle.id})
                await admin.execute_command("CLIENT", "PAUSE", "2000", "ALL")
                await client.request("tasks/cancel", {"taskId": handle.id})
                after = await client.request("tasks/get", {"taskId": handle.id})
    finally:
        await admin.aclose()
    task = seen.get("task", seen)
    assert task["taskId"] == handle.id and task["status"] in ("working", "input_required"), seen
    assert after.get("task", after)["status"] == "cancelled", after


accounts = Server("accounts", version="1.0.0", state=StateSealer([generate_key()]))


@accounts.tool()
async def connect_account(ctx: Context) -> str:
    """Needs its person to finish on a third party's page, whose callback completes the elicitation."""
    link = await ctx.url_elicitation("Connect your account", "https://accounts.example/connect/{elicitation_id}")
    if not link.completed:
        raise UrlElicitationRequired(link)
    return "connected"


@pytest.mark.parametrize("lost", ["paused", "answer lost"])
async def test_a_url_completion_made_while_redis_is_away_counts_once_redis_is_back(
    redis: RedisServer, lost: str
) -> None:
    """2025-11-25, two replicas: the person finishes on the third party's page while Redis is paused, and the
    page's callback (``complete_url_elicitation`` on the replica the page reached) waits for Redis instead of
    raising: the completion counts, the client's connection on the other replica is told, and the call goes on. A
    completion whose first try reached Redis but whose answer was lost counts once all the same, and the same
    completion made a second time (the page loaded twice) does not count again (it tells the client again)."""
    from redis.asyncio import Redis

    prefix = f"outage{secrets.token_hex(4)}:"
    replicas = [replica_of(accounts, RedisStore(redis.url, prefix=prefix, lease=1.0, timeout=1.0)) for _ in range(2)]
    (asking, asking_app), (paging, paging_app) = replicas
    admin = Redis.from_url(redis.url)
    told: list[str] = []
    counted: list[bool] = []
    notify_local = asking.url_elicitations.notify_local

    async def noted(connection: str, elicitation_id: str) -> None:
        told.append(elicitation_id)
        await notify_local(connection, elicitation_id)

    asking.url_elicitations.notify_local = noted  # type: ignore[method-assign]
    urls = paging.store.urls
    complete = urls.complete
    completions: list[str] = []

    async def complete_then_lose_the_answer(
        elicitation_id: str, principal: str | None, attempt: str | None = None
    ) -> UrlRecord | None:
        done = await complete(elicitation_id, principal, attempt)
        completions.append(elicitation_id)
        if len(completions) == 1:
            raise StoreUnavailable("shared state unavailable (completing a URL elicitation): the answer timed out")
        return done

    if lost == "answer lost":
        urls.complete = complete_then_lose_the_answer  # type: ignore[method-assign]

    async def finish_on_the_page(request: ElicitationRequest | UrlElicitationRequest) -> Accepted[None]:
        assert isinstance(request, UrlElicitationRequest) and request.elicitation_id is not None
        if lost == "paused":
            await admin.execute_command("CLIENT", "PAUSE", "2000", "ALL")
        counted.append(await paging.complete_url_elicitation(request.elicitation_id))
        counted.append(await paging.complete_url_elicitation(request.elicitation_id))  # loaded twice
        return Accepted(None)

    handler = ScriptedHandler(otherwise=finish_on_the_page, modes=frozenset({"form", "url"}))
    try:
        async with (
            serving(asking_app) as url,
            serving(paging_app),
            Client.http(url, elicitation=handler, protocol="2025-11-25") as client,
        ):
            with anyio.fail_after(60):
                result = await client.call_tool("connect_account")
                while not told:
                    await anyio.sleep(0.05)
                await anyio.sleep(0.5)  # a second notice would be on its way by now
    finally:
        await admin.aclose()
    assert result.text == "connected"
    assert counted == [True, False]
    assert told == [told[0]] * 2  # the page loaded twice tells the client twice (it ignores the second)


async def test_a_url_completion_that_cannot_reach_redis_within_its_bound_fails_clearly_and_counts_later(
    redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis paused for longer than a completion waits (``COMPLETE_PATIENCE``, half a second here): the page's
    callback gets ``StoreUnavailable`` (nothing counted; the page answers 503 and the person reloads it), and the
    same completion made once Redis is back counts."""
    from redis.asyncio import Redis

    from elicitor.server import _url

    monkeypatch.setattr(_url, "COMPLETE_PATIENCE", 0.5)
    store = RedisStore(redis.url, prefix=f"outage{secrets.token_hex(4)}:", timeout=1.0)
    server, _ = replica_of(accounts, store)
    admin = Redis.from_url(redis.url)
    try:
        link = await server.url_elicitations.new("Connect", "https://accounts.example/{elicitation_id}", principal=None)
        with anyio.fail_after(30):
            await admin.execute_command("CLIENT", "PAUSE", "2500", "ALL")
            with pytest.raises(StoreUnavailable):
                await server.complete_url_elicitation(link.id)
            while True:  # Redis is back once it answers
                try:
                    counted = await server.complete_url_elicitation(link.id)
                    break
                except StoreUnavailable:
                    continue
    finally:
        await admin.aclose()
        await store.aclose()
    assert counted


async def test_a_url_completion_redis_stored_after_its_page_was_refused_tells_the_client_when_the_page_is_reloaded(
    redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2025-11-25, two replicas: Redis paused longer than a completion waits (half a second here), so the page's
    completion raises and the page asks its person to reload; Redis then runs the last try's write all the same
    (its reply was what got lost): the completion counted, and nobody told the client. The person reloads: that
    completion is refused as a second one (not counted again), and the client's connection on the other replica
    is told now. It never was: the client waited for its notice until its own bound. About 3 s."""
    from redis.asyncio import Redis

    from elicitor.server import _url

    monkeypatch.setattr(_url, "COMPLETE_PATIENCE", 0.5)
    prefix = f"outage{secrets.token_hex(4)}:"
    replicas = [replica_of(accounts, RedisStore(redis.url, prefix=prefix, lease=1.0, timeout=1.0)) for _ in range(2)]
    (asking, asking_app), (paging, paging_app) = replicas
    admin = Redis.from_url(redis.url)
    told: list[str] = []
    notify_local = asking.url_elicitations.notify_local

    async def noted(connection: str, elicitation_id: str) -> None:
        told.append(elicitation_id)
        await notify_local(connection, elicitation_id)

    asking.url_elicitations.notify_local = noted  # type: ignore[method-assign]
    urls = paging.store.urls
    complete = urls.complete
    refused: list[tuple[str, str | None, str | None]] = []

    async def complete_or_note_it(
        elicitation_id: str, principal: str | None, attempt: str | None = None
    ) -> UrlRecord | None:
        try:
            return await complete(elicitation_id, principal, attempt)
        except StoreUnavailable:
            refused.append((elicitation_id, principal, attempt))
            raise

    urls.complete = complete_or_note_it  # type: ignore[method-assign]
    counted: list[bool] = []

    async def finish_on_the_page(request: ElicitationRequest | UrlElicitationRequest) -> Accepted[None]:
        assert isinstance(request, UrlElicitationRequest) and request.elicitation_id is not None
        await admin.execute_command("CLIENT", "PAUSE", "1500", "ALL")
        with pytest.raises(StoreUnavailable):  # the page says to reload in a moment
            await paging.complete_url_elicitation(request.elicitation_id)
        while True:  # Redis is back: it runs the last try's write now, as it would have, late
            try:
                assert await complete(*refused[-1]) is not None
                break
            except StoreUnavailable:
                await anyio.sleep(0.2)
        counted.append(await paging.complete_url_elicitation(request.elicitation_id))  # reloaded
        return Accepted(None)

    handler = ScriptedHandler(otherwise=finish_on_the_page, modes=frozenset({"form", "url"}))
    try:
        async with (
            serving(asking_app) as url,
            serving(paging_app),
            Client.http(url, elicitation=handler, protocol="2025-11-25") as client,
        ):
            with anyio.fail_after(60):
                result = await client.call_tool("connect_account")
            with anyio.move_on_after(10):  # the notice is on its way through Redis
                while not told:
                    await anyio.sleep(0.05)
    finally:
        await admin.aclose()
    assert result.text == "connected"
    assert counted == [False]
    assert told == [refused[-1][0]]


async def test_past_the_most_url_completions_waiting_for_redis_a_completion_raises_at_once(redis: RedisServer) -> None:
    """Completions waiting for Redis are bounded like the requests an HTTP replica holds (each keeps the page
    request that made it): past ``hold.max_waiting`` (none here), a completion made while Redis is paused raises
    ``StoreUnavailable`` instead of waiting, and nothing counted: made again once Redis is back, it counts."""
    from redis.asyncio import Redis

    store = RedisStore(redis.url, prefix=f"outage{secrets.token_hex(4)}:", timeout=1.0)
    server, _ = replica_of(accounts, store)
    server.url_elicitations.hold.max_waiting = 0
    admin = Redis.from_url(redis.url)
    try:
        link = await server.url_elicitations.new("Connect", "https://accounts.example/{elicitation_id}", principal=None)
        with anyio.fail_after(30):
            await admin.execute_command("CLIENT", "PAUSE", "2000", "ALL")
            with pytest.raises(StoreUnavailable):
                await server.complete_url_elicitation(link.id)  # would wait out the pause and count
            server.url_elicitations.hold.max_waiting = 1
            counted = await server.complete_url_elicitation(link.id)
    finally:
        await admin.aclose()
        await store.aclose()
    assert counted


async def test_a_session_ended_while_tasks_result_waits_on_its_person_ends_the_request_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """2025-11-25: the session ends (its client's ``DELETE`` here; on replicas, a session declared gone while its
    replica stalled, which that replica ends when it wakes) while ``tasks/result`` waits on the person for the
    task's question. The request ends with its session, as a call's does, not as a handler failure logged at ERROR
    with an exception group's traceback."""
    _, app = replica_of(tasking)
    async with serving(app) as url, httpx.AsyncClient(timeout=30) as http:
        headers = await open_session(http, url)
        task_id = await start_chore(http, url, headers)
        with caplog.at_level(logging.INFO, logger="elicitor"), anyio.fail_after(30):
            follow = rpc("tasks/result", {"taskId": task_id}, 5)
            async with http.stream("POST", url, json=follow, headers=headers) as response:
                async for message in messages(response):
                    if message.get("method") == "elicitation/create":  # the person has the question: the end
                        assert (await http.delete(url, headers=headers)).status_code in (200, 202, 204)
            await anyio.sleep(0.5)  # the session's requests end with it
    failures = [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]
    assert not failures, failures
