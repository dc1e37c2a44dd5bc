"""The client's parts on their own: what each revision declares and accepts, and a task's answers acknowledged."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from elicitor import Client, JSONRPCError, ScriptedHandler
from elicitor.client._era import Declared
from elicitor.client._tasks import TaskHandle, TaskPort
from elicitor.transports import memory_pair

pytestmark = pytest.mark.anyio


def test_each_revision_declares_the_modes_it_accepts() -> None:
    both = Declared(frozenset({"form", "url"}))
    assert both.capabilities("2025-06-18") == {"elicitation": {}}
    assert both.modes_for("2025-06-18") == {"form"}
    assert both.capabilities("2025-11-25") == {
        "elicitation": {"form": {}, "url": {}},
        "tasks": {"cancel": {}, "requests": {"elicitation": {"create": {}}}},
    }
    assert both.capabilities("2026-07-28")["elicitation"] == {"form": {}, "url": {}}
    assert "tasks" not in Declared(frozenset({"form"}), tasks=False).capabilities("2025-11-25")
    assert Declared(frozenset({"url"})).capabilities("2025-06-18") == {}  # no form mode, no URL mode there
    assert Declared(frozenset()).capabilities("2025-11-25") == {}  # no handler: nothing, tasks included


@pytest.mark.parametrize(("revision", "refused"), [("2025-06-18", True), ("2025-11-25", False)])
async def test_an_undeclared_mode_is_refused_before_any_handler(
    anyio_backend: str, revision: str, refused: bool
) -> None:
    """2025-06-18 has no URL mode: a server sending one anyway gets -32602 and the handler never sees it."""
    server_end, client_end = memory_pair()
    handler = ScriptedHandler(otherwise="accept", modes=frozenset({"form", "url"}))
    replies: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        await server_end.send(json.dumps(message).encode())

    async def serve() -> None:
        while True:
            try:
                message = json.loads(await server_end.receive())  # type: ignore[arg-type]
            except anyio.EndOfStream:
                return
            method, request_id = message.get("method"), message.get("id")
            if method == "initialize":
                assert message["params"]["capabilities"]["elicitation"] == ({} if refused else {"form": {}, "url": {}})
                result = {"protocolVersion": revision, "capabilities": {"tools": {}}, "serverInfo": {"name": "s"}}
                await send({"jsonrpc": "2.0", "id": request_id, "result": result})
            elif method == "tools/call":
                params = {"mode": "url", "message": "Sign in", "url": "https://example.com/a", "elicitationId": "e1"}
                await send({"jsonrpc": "2.0", "id": "q1", "method": "elicitation/create", "params": params})
                tool_call = request_id
            elif method is None and message.get("id") == "q1":
                replies.append(message)
                content = [{"type": "text", "text": "done"}]
                await send({"jsonrpc": "2.0", "id": tool_call, "result": {"content": content}})

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        async with Client(client_end, elicitation=handler, protocol=revision) as client:
            with anyio.fail_after(10):
                assert (await client.call_tool("sign_in")).text == "done"
        tg.cancel_scope.cancel()
    await server_end.aclose()
    (reply,) = replies
    if refused:
        assert reply["error"]["code"] == -32602 and "url" in reply["error"]["message"]
        assert handler.url_requests == []
    else:
        assert reply["result"] == {"action": "accept"}
        assert len(handler.url_requests) == 1


async def test_a_task_answer_is_sent_again_until_the_server_acknowledges_it(anyio_backend: str) -> None:
    """The person is asked once; a failed tasks/update is sent again with the same answer; then the task ends."""
    asked: list[object] = []
    updates: list[dict[str, Any]] = []
    polls = 0
    question = {"method": "elicitation/create", "params": {"message": "Go?", "requestedSchema": {}}}

    async def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        nonlocal polls
        if method == "tasks/update":
            updates.append(params)
            if len(updates) < 3:
                raise JSONRPCError(-32603, "Internal error: the store is restarting")
            return {}
        assert method == "tasks/get"
        polls += 1
        if len(updates) < 3:  # the server has no answer yet: it keeps asking
            return {"taskId": "t1", "status": "input_required", "inputRequests": {"q": question}, "pollIntervalMs": 1}
        content = [{"type": "text", "text": "went"}]
        return {"taskId": "t1", "status": "completed", "result": {"content": content}}

    async def answer_input(request: object) -> dict[str, Any]:
        asked.append(request)
        return {"action": "accept", "content": {}}

    port = TaskPort(request=request, answer_input=answer_input, end_progress=lambda token: None)
    handle = TaskHandle(port, {"taskId": "t1", "status": "input_required", "inputRequests": {"q": question}})
    with anyio.fail_after(10):
        assert (await handle.wait()).text == "went"
    assert asked == [question]  # asked once
    assert [u["inputResponses"] for u in updates] == [{"q": {"action": "accept", "content": {}}}] * 3


async def test_a_task_update_that_keeps_failing_ends_the_wait(anyio_backend: str) -> None:
    question = {"method": "elicitation/create", "params": {"message": "Go?", "requestedSchema": {}}}

    async def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "tasks/update":
            raise JSONRPCError(-32603, "Internal error")
        if method == "tasks/cancel":
            return {}
        return {"taskId": "t1", "status": "input_required", "inputRequests": {"q": question}, "pollIntervalMs": 1}

    async def answer_input(request: object) -> dict[str, Any]:
        return {"action": "decline"}

    port = TaskPort(request=request, answer_input=answer_input, end_progress=lambda token: None)
    handle = TaskHandle(port, {"taskId": "t1", "status": "input_required", "inputRequests": {"q": question}})
    with anyio.fail_after(10), pytest.raises(JSONRPCError, match="Internal error"):
        await handle.wait()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_request_clock_cancels_a_wait_as_asyncio_timeout_does(anyio_backend: str) -> None:
    """On asyncio ``request_timeout`` cancels the waiting task itself, no cancel scope: its expiry ends the wait
    with nothing left pending on the task, and a cancellation from anyone else at the same time goes on."""
    import asyncio

    from elicitor.client._quiet import QuietClock

    clock = QuietClock(3600.0)
    task = asyncio.current_task()
    assert task is not None
    finished = False
    with clock.request():
        next(iter(clock._waiting)).expire()  # what the watchdog does when the server was silent too long
        await asyncio.sleep(30)
        finished = True
    assert not finished and not clock._waiting
    assert task.cancelling() == 0
    await asyncio.sleep(0)  # no stray cancellation left for the next wait

    async def both() -> None:
        with clock.request():
            next(iter(clock._waiting)).expire()
            task.cancel()  # someone else's cancellation, at the same time
            await asyncio.sleep(30)

    with pytest.raises(asyncio.CancelledError):
        await both()
    assert task.cancelling() == 1
    task.uncancel()
