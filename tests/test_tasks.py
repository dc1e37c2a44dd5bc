"""Tasks (2026-07-28 extension io.modelcontextprotocol/tasks): long tool calls that ask the person mid-way.

End to end through our Client, in memory and over HTTP (uvicorn); the official conformance harness's tasks-*
scenarios run in ``make test`` against one server and three replicas (scripts/conformance.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from elicitor import (
    Accepted,
    Client,
    Context,
    ElicitationRequest,
    JSONRPCError,
    ScriptedHandler,
    Server,
    TaskCancelled,
)
from elicitor.state import StoreUnavailable
from elicitor.types import INTERNAL_ERROR, MISSING_REQUIRED_CLIENT_CAPABILITY

from .conftest import connected, serving

STATELESS = "2026-07-28"


@dataclass
class Rows:
    keep: str


def make_server(**options: Any) -> tuple[Server, dict[str, Any]]:
    """A server with a migration that asks twice as a task; ``seen`` counts what its tools really did."""
    server = Server("tasks-test", "1.0.0", task_poll_interval=0.05, **options)
    seen: dict[str, Any] = {"migrations": 0, "cancelled": 0, "started": anyio.Event()}

    @server.tool(task="optional")
    async def migrate(ctx: Context, table: str) -> str:
        """Two questions mid-way; the expensive step runs once however often the task is replayed."""

        def migrate_rows() -> int:
            seen["migrations"] += 1
            return 3

        conflicts = await ctx.once("migrate", migrate_rows)
        await ctx.report_progress(1, 2, f"{conflicts} conflicts in {table}")
        first = await ctx.elicit(f"{conflicts} rows conflict in {table}: which version wins?", Rows)
        second = await ctx.confirm("Apply the migration?")
        winner = first.data.keep if isinstance(first, Accepted) else "none"
        return f"{table}: {winner} wins, applied={second}"

    @server.tool(task="required")
    async def wait_forever(ctx: Context) -> str:
        seen["started"].set()
        try:
            await ctx.elicit("Nobody will answer this", Rows)
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            seen["cancelled"] += 1
            raise
        return "never"

    @server.tool(task="optional")
    async def steps(ctx: Context) -> str:
        for step in (1, 2, 3):
            await ctx.report_progress(step, 3, f"step {step}")
            await anyio.sleep(0.15)
        return "done"

    @server.tool(task="required")
    async def survey(ctx: Context) -> str:
        answer = await ctx.elicit("Favourite table?", Rows)
        return f"likes {answer.data.keep if isinstance(answer, Accepted) else '-'}"

    @server.tool(task="required", defer_task=True)
    async def greet_later(ctx: Context) -> str:
        name = await ctx.elicit("Your name?", Rows)
        await ctx.run_as_task()
        await anyio.sleep(0.05)
        return f"Hello {name.data.keep if isinstance(name, Accepted) else '?'}"

    return server, seen


def answers(*values: Any) -> ScriptedHandler:
    return ScriptedHandler(list(values))


async def test_a_task_that_asks_twice_is_followed_to_its_result(anyio_backend: str) -> None:
    server, seen = make_server()
    handler = answers({"keep": "theirs"}, {"confirm": True})
    async with connected(server, elicitation=handler, protocol=STATELESS) as client:
        result = await client.call_tool("migrate", {"table": "users"})
    assert result.text == "users: theirs wins, applied=True"
    assert [r.message for r in handler.requests] == [
        "3 rows conflict in users: which version wins?",
        "Apply the migration?",
    ]
    assert seen["migrations"] == 1


async def test_the_same_tool_runs_inline_on_earlier_revisions_and_without_the_extension(anyio_backend: str) -> None:
    server, _ = make_server()
    for options in ({"protocol": "2025-11-25"}, {"protocol": "2025-06-18"}, {"protocol": STATELESS, "tasks": False}):
        handler = answers({"keep": "ours"}, {"confirm": False})
        async with connected(server, elicitation=handler, **options) as client:
            result = await client.call_tool("migrate", {"table": "t"})
        assert result.text == "t: ours wins, applied=False", options


async def test_a_required_task_tool_refuses_a_client_without_the_extension(anyio_backend: str) -> None:
    server, _ = make_server()
    async with connected(server, elicitation=answers(), protocol=STATELESS, tasks=False) as client:
        with pytest.raises(JSONRPCError) as caught:
            await client.call_tool("wait_forever")
    assert caught.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert caught.value.data == {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


async def test_replayed_from_its_record_when_nothing_is_kept_in_memory(anyio_backend: str) -> None:
    """max_parked_tasks=0: each answer resumes the task by replaying the tool from the record (as on another
    replica); ctx.once keeps the side effect to one run."""
    server, seen = make_server(max_parked_tasks=0)
    handler = answers({"keep": "mine"}, {"confirm": True})
    async with connected(server, elicitation=handler, protocol=STATELESS) as client:
        result = await client.call_tool("migrate", {"table": "orders"})
    assert result.text == "orders: mine wins, applied=True"
    assert seen["migrations"] == 1
    assert len(handler.requests) == 2  # each question shown once, though the tool ran three times


async def test_a_task_handle_shows_status_and_progress_and_cancels(anyio_backend: str) -> None:
    server, seen = make_server()
    async with connected(server, elicitation=answers(), protocol=STATELESS) as client:
        handle = await client.start_tool("wait_forever")
        assert handle.id and handle.status == "working"
        with anyio.fail_after(10):
            while (await client.task(handle.id)).status != "input_required":
                await anyio.sleep(0.02)
        await handle.cancel()
        with anyio.fail_after(10):
            while (await client.task(handle.id)).status != "cancelled":
                await anyio.sleep(0.02)
        with anyio.fail_after(10):
            while not seen["cancelled"]:
                await anyio.sleep(0.02)  # the tool saw the cancellation
        again = await client.task(handle.id)
        with pytest.raises(TaskCancelled):
            again.result()
        await again.cancel()  # on an ended task: nothing happens


async def test_questions_before_the_task_then_the_task(anyio_backend: str) -> None:
    server, _ = make_server()
    handler = answers({"keep": "Ada"})
    async with connected(server, elicitation=handler, protocol=STATELESS) as client:
        handle = await client.start_tool("greet_later")
        assert handle.id is not None  # the question came first, in an ordinary round; then the task
        with anyio.fail_after(10):
            assert (await handle.wait()).text == "Hello Ada"
    assert len(handler.requests) == 1


async def test_a_task_expires_with_its_ttl(anyio_backend: str) -> None:
    server, seen = make_server(task_ttl=0.3)
    async with connected(server, elicitation=answers(), protocol=STATELESS) as client:
        handle = await client.start_tool("wait_forever")
        assert handle.id is not None
        await anyio.sleep(0.6)
        with pytest.raises(JSONRPCError) as caught:
            await client.task(handle.id)
        assert caught.value.code == -32602
        with anyio.fail_after(10):
            while not seen["cancelled"]:
                await anyio.sleep(0.02)  # its run ended with it


async def test_another_connection_of_the_same_user_answers_and_a_stranger_cannot(anyio_backend: str) -> None:
    """The record outlives the connection that started the task; another user gets the unknown-task error."""
    server, _ = make_server()
    async with connected(server, principal="ada", elicitation=answers(), protocol=STATELESS) as first:
        handle = await first.start_tool("migrate", {"table": "accounts"})
        assert handle.id is not None
        with anyio.fail_after(10):
            while (await first.task(handle.id)).status != "input_required":
                await anyio.sleep(0.02)
    task_id = handle.id
    async with connected(server, principal="mallory", elicitation=answers(), protocol=STATELESS) as stranger:
        calls: list[tuple[str, dict[str, Any]]] = [
            ("tasks/get", {}),
            ("tasks/update", {"inputResponses": {}}),
            ("tasks/cancel", {}),
        ]
        for method, params in calls:
            with pytest.raises(JSONRPCError) as caught:
                await stranger.request(method, {"taskId": task_id, **params})
            assert caught.value.code == -32602
    handler = answers({"keep": "both"}, {"confirm": True})
    async with connected(server, principal="ada", elicitation=handler, protocol=STATELESS) as second:
        resumed = await second.task(task_id)
        with anyio.fail_after(10):
            assert (await resumed.wait()).text == "accounts: both wins, applied=True"


async def test_over_http_with_a_person_answering(anyio_backend: str) -> None:
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    server, seen = make_server()
    asked: list[str] = []

    async def person(request: ElicitationRequest) -> Any:
        asked.append(request.message)
        return Accepted({"keep": "newest"}) if "conflict" in request.message else Accepted({"confirm": True})

    async with serving(server.http_app()) as url, Client.http(url, elicitation=person, protocol=STATELESS) as client:
        with anyio.fail_after(20):
            result = await client.call_tool("migrate", {"table": "events"})
    assert result.text == "events: newest wins, applied=True"
    assert len(asked) == 2
    assert seen["migrations"] == 1


HANDSHAKE = "2025-11-25"


async def test_2025_11_25_tasks_are_asked_for_and_their_questions_come_through_tasks_result(anyio_backend: str) -> None:
    """The client asks for the task; tasks/result carries the questions as elicitation/create tagged with the task
    and returns the result with the related-task _meta."""
    server, seen = make_server()
    handler = answers({"keep": "left"}, {"confirm": True})
    async with connected(server, elicitation=handler, protocol=HANDSHAKE) as client:
        assert client.server_capabilities["tasks"] == {"cancel": {}, "requests": {"tools": {"call": {}}}}
        listed = {t["name"]: t.get("execution") for t in (await client.request("tools/list"))["tools"]}
        assert listed["migrate"] == {"taskSupport": "optional"} and listed["survey"] == {"taskSupport": "required"}
        handle = await client.start_tool("migrate", {"table": "logs"})
        assert handle.id is not None and handle.status == "working"
        with anyio.fail_after(10):
            assert (await handle.wait()).text == "logs: left wins, applied=True"
        # A tool that runs only as a task: call_tool is refused (-32601) and asks for the task instead.
        handler.add({"keep": "round"})
        with anyio.fail_after(10):
            assert (await client.call_tool("survey")).text == "likes round"
        assert len(handler.requests) == 3
        with pytest.raises(JSONRPCError) as caught:
            await client.request("tasks/cancel", {"taskId": handle.id})
        assert caught.value.code == -32602  # it has ended (2025-11-25: cancelling an ended task is an error)
        with pytest.raises(JSONRPCError) as caught:
            await client.request("tasks/list")
        assert caught.value.code == -32601  # not offered: tasks are found by id
    assert seen["migrations"] == 1


async def test_2025_11_25_a_task_is_its_sessions_and_can_be_cancelled(anyio_backend: str) -> None:
    server, seen = make_server()
    async with connected(server, elicitation=answers(), protocol=HANDSHAKE) as client:
        handle = await client.start_tool("wait_forever")
        assert handle.id is not None
        async with connected(server, elicitation=answers(), protocol=HANDSHAKE) as other:
            with pytest.raises(JSONRPCError) as caught:
                await other.request("tasks/get", {"taskId": handle.id})
            assert caught.value.code == -32602  # another session, no user: not its task
        cancelled = await client.request("tasks/cancel", {"taskId": handle.id})
        assert cancelled["status"] == "cancelled" and cancelled["taskId"] == handle.id
        assert "ttl" in cancelled and "ttlMs" not in cancelled
        with anyio.fail_after(10):
            while not seen["cancelled"]:
                await anyio.sleep(0.02)
        with pytest.raises(TaskCancelled):
            await handle.wait()


async def test_many_tasks_waiting_beyond_the_parked_bound_all_finish(anyio_backend: str) -> None:
    """20 tasks wait at once with room for 2 runs: the others are dropped and replayed from their records when
    answered; every task finishes with its own answer and the server keeps serving."""
    server, _ = make_server(max_parked_tasks=2)
    async with connected(server, elicitation=answers(), protocol=STATELESS) as client:
        handles = []

        async def start() -> None:
            handles.append(await client.start_tool("survey"))

        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(start)
        with anyio.fail_after(20):
            for handle in handles:
                while await handle.refresh() != "input_required":
                    await anyio.sleep(0.01)
        results: list[str] = []

        async def finish(index: int, handle: Any) -> None:
            task_id = handle.id
            (key,) = (await client.request("tasks/get", {"taskId": task_id}))["inputRequests"]
            answer = {key: {"action": "accept", "content": {"keep": f"t{index}"}}}
            await client.request("tasks/update", {"taskId": task_id, "inputResponses": answer})
            results.append((await handle.wait()).text)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for index, handle in enumerate(handles):
                    tg.start_soon(finish, index, handle)
        assert sorted(results) == sorted(f"likes t{i}" for i in range(20))
        assert len((await client.request("tools/list"))["tools"]) == 5  # still serving


@pytest.mark.parametrize("protocol", [STATELESS, HANDSHAKE])
async def test_a_person_sees_a_tasks_progress_while_it_runs(anyio_backend: str, protocol: str) -> None:
    """Progress messages become the task's status message (both eras); on 2025-11-25 the call's progress
    notifications keep coming too, as its progress token stays valid for the task."""
    server, _ = make_server()
    shown: list[tuple[str, str | None]] = []
    notified: list[str | None] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        notified.append(message)

    async with connected(server, elicitation=answers(), protocol=protocol) as client:
        handle = await client.start_tool("steps", progress=progress)
        with anyio.fail_after(10):
            result = await handle.wait(on_status=lambda h: shown.append((h.status, h.status_message)))
    assert result.text == "done"
    assert shown[-1][0] == "completed"
    messages = [message for _, message in shown if message]
    assert messages and set(messages) <= {"step 1", "step 2", "step 3"}
    assert messages == sorted(messages)
    if protocol == HANDSHAKE:
        assert notified == ["step 1", "step 2", "step 3"]


@pytest.mark.parametrize("protocol", [STATELESS, HANDSHAKE])
async def test_over_http_a_task_is_its_users_on_every_connection(anyio_backend: str, protocol: str) -> None:
    """The HTTP app says who asks (here from a header an authenticating proxy would set): the user's second
    connection follows and answers the task; another user gets the unknown-task error for every task method."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    server, _ = make_server()

    def user(scope: dict[str, Any]) -> str | None:
        return dict(scope["headers"]).get(b"x-user", b"").decode() or None

    methods = ["tasks/get", "tasks/cancel"] + (["tasks/update"] if protocol == STATELESS else ["tasks/result"])
    async with serving(server.http_app(principal=user)) as url:
        async with Client.http(url, headers={"x-user": "ada"}, protocol=protocol, elicitation=answers()) as first:
            handle = await first.start_tool("survey")
            assert handle.id is not None
        async with Client.http(url, headers={"x-user": "eve"}, protocol=protocol, elicitation=answers()) as eve:
            for method in methods:
                extra: dict[str, Any] = {"inputResponses": {}} if method == "tasks/update" else {}
                with pytest.raises(JSONRPCError) as caught:
                    await eve.request(method, {"taskId": handle.id, **extra})
                assert caught.value.code == -32602, method
        handler = answers({"keep": "window"})
        async with Client.http(url, headers={"x-user": "ada"}, protocol=protocol, elicitation=handler) as second:
            resumed = await second.task(handle.id)
            with anyio.fail_after(20):
                assert (await resumed.wait()).text == "likes window"


def store_away_for(server: Server, polls: int) -> dict[str, int]:
    """The next ``polls`` task lookups of a request (``tasks/get``...) meet the store away, as while Redis restarts
    or a replica's connection pool is drained; the task's own run is untouched. Returns the counts."""
    engine = server.tasks
    own = engine._own
    counts = {"left": polls, "refused": 0}

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        if counts["left"]:
            counts["left"] -= 1
            counts["refused"] += 1
            raise StoreUnavailable("the store is restarting")
        return await own(*args, **kwargs)

    engine._own = flaky  # type: ignore[method-assign]
    return counts


async def test_following_a_task_rides_out_a_store_away_for_a_moment(anyio_backend: str) -> None:
    """A poll only reads: a few ``tasks/get`` answered with a retryable error (the replica's store away) are polled
    again, and the task that was fine all along is followed to its result."""
    server, _ = make_server()
    async with connected(server, elicitation=answers(), protocol=STATELESS) as client:
        handle = await client.start_tool("steps")
        counts = store_away_for(server, polls=2)
        result = await handle.wait()
    assert result.text == "done"
    assert counts["refused"] == 2


async def test_following_a_task_gives_up_when_the_store_stays_away(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from elicitor.client import _tasks

    monkeypatch.setattr(_tasks, "RETRYABLE_FOR", 1.5)
    server, _ = make_server()
    async with connected(server, elicitation=answers(), protocol=STATELESS) as client:
        handle = await client.start_tool("steps")
        store_away_for(server, polls=1_000)
        with pytest.raises(JSONRPCError) as caught:
            await handle.wait()
    assert caught.value.code == INTERNAL_ERROR and caught.value.retryable
