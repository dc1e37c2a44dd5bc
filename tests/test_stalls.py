"""A replica that stalls or is stopped while a person is being asked: three replicas behind nginx, one Redis.

Everything is real (``tests/replicas.py``): redis-server, three ``tests.peers.replica_server`` processes started with
a 2.5 s lease and a 10 s shutdown grace, nginx running ``deploy/nginx.conf``. Each test picks which replica runs the
session, which one holds the client's response (the one its POST landed on, relaying the stream when another runs
the session) and which one the person's answer lands on, by sending each request to that replica directly, as the
balancer may; then it stops one of them (SIGSTOP, SIGTERM) at the moment that matters and checks what the person
sees: every question arrives once, every answer is taken (202, never 404 for a session that lives), the call ends
with its result, and a response ends cleanly rather than cut.
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import anyio.to_thread
import httpx2 as httpx
import mcp_types as types
import pytest
from mcp import Client as McpClient
from mcp.client.subscriptions import SubscriptionLost

from elicitor import Client, ElicitationRequest, ScriptedHandler, UrlElicitationRequest

from .replicas import MISSING, Deployment, deployment, one_response
from .test_replicas import all_ready, events, open_session, rpc

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(bool(MISSING), reason=f"needs {' and '.join(MISSING)} (make test installs them)"),
]
LEASE = 2.5
"""The replicas' lease (5 s by default): a stall past it and past ``gone_after`` (a lease and 2 s) takes seconds."""
STALL = LEASE + 3
"""A long stall: past the lease by three seconds, past ``gone_after`` by one."""
GRACE = 10
"""The replicas' ``shutdown_grace``: what a SIGTERM leaves the calls in flight."""
SERVER = [sys.executable, "-m", "tests.peers.replica_server", "--lease", str(LEASE), "--grace", str(GRACE)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deployment(SERVER, tmp_path_factory.mktemp("stalls")) as running:
        yield running


def direct(cluster: Deployment) -> list[str]:
    """Each replica's own endpoint, bypassing the balancer."""
    return [f"http://127.0.0.1:{port}/mcp" for port in cluster.replicas.ports]


def accept(question: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    """The person's answer to ``question``."""
    return {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": content}}


async def terminated(cluster: Deployment, index: int) -> None:
    """SIGTERM replica ``index``, wait until it has exited by itself (its grace is ``GRACE``), and start it again."""
    process = cluster.replicas._processes[index]
    assert process is not None
    os.killpg(process.pid, signal.SIGTERM)
    code = await anyio.to_thread.run_sync(process.wait, GRACE + 30)
    assert code == 0, cluster.replicas.log(index).read_text()[-3000:]  # a stop asked for and done
    cluster.replicas.start(index)


def slow_posts(cluster: Deployment, start: int) -> list[int]:
    """The replica of each POST logged by nginx from line ``start`` on that took a second or more (a call that
    waited on its person)."""
    log = (cluster.nginx.folder / "logs" / "access.log").read_text().splitlines()[start:]
    found = (re.search(r'"POST /mcp" \d+ upstream=(\S+) time=([\d.]+)', line) for line in log)
    return [cluster.replicas.index_of(m[1]) for m in found if m is not None and float(m[2]) >= 1.0]


def logged(cluster: Deployment) -> int:
    return len((cluster.nginx.folder / "logs" / "access.log").read_text().splitlines())


async def until_question(stream: AsyncIterator[tuple[str | None, dict[str, Any]]]) -> tuple[str | None, dict[str, Any]]:
    with anyio.fail_after(60):
        event_id, message = await anext(stream)
    return event_id, message


async def test_a_call_relayed_by_another_replica_gets_its_grace_when_the_session_replica_is_stopped(
    cluster: Deployment,
) -> None:
    """The session runs on replica 0; the call was POSTed to replica 1, which relays its stream; replica 0 is
    stopped (SIGTERM) while the person reads the question. Replica 0 had no request of its own in flight, so it
    ended the session at once: the person's answer, landing on replica 2, got 404 and the call's stream ended
    without its result (the official SDK's client cannot start again; ours asks the person again). Now a call in
    flight for one of its sessions gets the grace wherever its client's connection is: the answer is taken, the
    next question comes on the same stream, and the call ends with its result."""
    owner, relay, third = direct(cluster)
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, owner)
        async with anyio.create_task_group() as tg:
            async with http.stream("POST", relay, json=rpc("tools/call", {"name": "book"}, id=7), headers=headers) as r:
                stream = events(r)
                _, question = await until_question(stream)
                assert question["params"]["message"] == "Your name?"
                tg.start_soon(terminated, cluster, 0)
                await anyio.sleep(1)  # the shutdown has begun
                answered = await http.post(third, json=accept(question, {"name": "Ada"}), headers=headers)
                assert answered.status_code == 202, answered.text
                _, question = await until_question(stream)
                assert question["params"]["message"] == "How many people?"
                answered = await http.post(third, json=accept(question, {"size": 2}), headers=headers)
                assert answered.status_code == 202, answered.text
                _, result = await until_question(stream)
            assert result == {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "Ada x2"}]}}
        async with httpx.AsyncClient(timeout=60) as again:
            await all_ready(again, cluster)


async def test_a_stream_relayed_by_a_replica_being_stopped_ends_cleanly_at_once_and_resumes_elsewhere(
    cluster: Deployment,
) -> None:
    """The session runs on replica 0; the call's stream is relayed by replica 1, which is stopped (SIGTERM) while
    the person reads the question. It used to hold the response through its whole grace, then have uvicorn cut
    it mid-stream (an incomplete chunked body, an ERROR with a traceback in its log). Nothing of the call runs on
    replica 1: the response now ends at once, cleanly, and the client resumes the stream on another replica with
    ``Last-Event-ID``, where the person's answer brings the next question."""
    owner, relay, third = direct(cluster)
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, owner)
        async with anyio.create_task_group() as tg:
            async with http.stream("POST", relay, json=rpc("tools/call", {"name": "book"}, id=7), headers=headers) as r:
                stream = events(r)
                last, question = await until_question(stream)
                assert question["params"]["message"] == "Your name?"
                tg.start_soon(terminated, cluster, 1)
                with anyio.fail_after(60):
                    rest = [message async for _, message in stream]  # ends without raising: not cut
            assert rest == []
            assert last is not None
            answered = await http.post(third, json=accept(question, {"name": "Ada"}), headers=headers)
            assert answered.status_code == 202, answered.text
            resume = {**headers, "accept": "text/event-stream", "last-event-id": last}
            async with http.stream("GET", third, headers=resume) as r:
                assert r.status_code == 200
                stream = events(r)
                _, question = await until_question(stream)
                assert question["params"]["message"] == "How many people?"
                answered = await http.post(owner, json=accept(question, {"size": 3}), headers=headers)
                assert answered.status_code == 202, answered.text
                _, result = await until_question(stream)
            assert result["result"]["content"][0]["text"] == "Ada x3"
        log = cluster.replicas.log(1).read_text()
        assert "Exception in ASGI application" not in log and "timeout graceful shutdown exceeded" not in log, log
        await all_ready(http, cluster)


async def test_a_stall_of_the_replica_holding_the_stream_while_the_person_answers_loses_nothing(
    cluster: Deployment,
) -> None:
    """The session runs on replica 0; replica 1 relays the call's stream and is stopped (SIGSTOP) past its lease
    while the person answers on replica 2: the answer is taken, and the next question, which replica 0 sent to the
    stopped relay, reaches the person once it runs again, on the same response."""
    owner, relay, third = direct(cluster)
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, owner)
        async with http.stream("POST", relay, json=rpc("tools/call", {"name": "book"}, id=7), headers=headers) as r:
            stream = events(r)
            _, question = await until_question(stream)
            pid = cluster.replicas.pids()[1]
            os.killpg(pid, signal.SIGSTOP)
            try:
                answered = await http.post(third, json=accept(question, {"name": "Ada"}), headers=headers)
                assert answered.status_code == 202, answered.text
                await anyio.sleep(STALL)
            finally:
                os.killpg(pid, signal.SIGCONT)
            _, question = await until_question(stream)
            assert question["params"]["message"] == "How many people?"
            answered = await http.post(owner, json=accept(question, {"size": 4}), headers=headers)
            assert answered.status_code == 202, answered.text
            _, result = await until_question(stream)
        assert result["result"]["content"][0]["text"] == "Ada x4"
        assert (await http.delete(third, headers=headers)).status_code == 200
        await all_ready(http, cluster)


async def test_a_replica_stopped_across_a_redis_restart_keeps_its_sessions(cluster: Deployment) -> None:
    """Redis restarts without its data while replica 0, running the session, is stopped (SIGSTOP) for longer than a
    lease; the person's answer lands on replica 1 meanwhile. Replica 1 finds no record of the session: Redis lost
    it, and its owner cannot claim it again before it runs. Two defects lost the live session. Replica 1 waited for
    the owner's heartbeat only one lease after the first heartbeat that saw the data gone, then answered 404; it
    now waits as long as the lease rule elsewhere gives a silent owner. And the owner, waking to find its lease
    gone and a boot mark present, took itself for a replica that had stalled while Redis kept its data, and ended
    its sessions as released by the others; a mark other than the one it saw last now tells it Redis lost its data
    meanwhile, and it claims them again. The answer is taken and the call goes on."""
    owner, other, _ = direct(cluster)
    assert cluster.redis is not None
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, owner)
        async with http.stream("POST", owner, json=rpc("tools/call", {"name": "book"}, id=7), headers=headers) as r:
            stream = events(r)
            _, question = await until_question(stream)
            pid = cluster.replicas.pids()[0]
            os.killpg(pid, signal.SIGSTOP)
            try:
                await anyio.to_thread.run_sync(cluster.redis.restart)
                await anyio.sleep(1)  # replica 1's heartbeat has seen the data gone
                async with anyio.create_task_group() as tg:

                    async def wake() -> None:
                        await anyio.sleep(LEASE + 1)  # stopped past its lease, across the restart
                        os.killpg(pid, signal.SIGCONT)

                    tg.start_soon(wake)
                    answered = await http.post(other, json=accept(question, {"name": "Ada"}), headers=headers)
                assert answered.status_code == 202, answered.text
            finally:
                os.killpg(pid, signal.SIGCONT)
            _, question = await until_question(stream)
            assert question["params"]["message"] == "How many people?"
            answered = await http.post(other, json=accept(question, {"size": 2}), headers=headers)
            assert answered.status_code == 202, answered.text
            _, result = await until_question(stream)
        assert result["result"]["content"][0]["text"] == "Ada x2"
        assert (await http.delete(other, headers=headers)).status_code == 200
        await all_ready(http, cluster)


async def sdk_call_through_a_sigterm(cluster: Deployment) -> bool:
    """One session of the official SDK's client through nginx, its replica stopped (SIGTERM) while the person reads
    the first question; the person answers a second later. Asserts the call ends with its result; returns whether
    its POST had landed on another replica than the session's (then relayed from there)."""
    start = logged(cluster)
    owner: int | None = None
    asked: list[str] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if not asked:
            assert owner is not None
            os.killpg(cluster.replicas.pids()[owner], signal.SIGTERM)
            await anyio.sleep(1)  # the shutdown has begun
        asked.append(params.message)
        content: dict[str, str | int | float | bool | list[str] | None]
        content = {"name": "Ida"} if "name" in params.message else {"size": 5}
        return types.ElicitResult(action="accept", content=content)

    try:
        with anyio.fail_after(60):
            async with McpClient(cluster.nginx.url, elicitation_callback=callback, mode="legacy") as sdk:
                block = (await sdk.call_tool("replica", {})).content[0]
                assert isinstance(block, types.TextContent)
                owner = cluster.replicas.pids().index(int(block.text))
                block = (await sdk.call_tool("book", {})).content[0]
                assert isinstance(block, types.TextContent) and block.text == "Ida x5", block
        assert asked == ["Your name?", "How many people?"]
    finally:
        if owner is not None:
            process = cluster.replicas._processes[owner]
            assert process is not None
            await anyio.to_thread.run_sync(process.wait, GRACE + 30)
            cluster.replicas.start(owner)
    landed = slow_posts(cluster, start)
    assert len(landed) == 1, landed
    return landed[0] != owner


async def test_the_official_sdks_call_outlives_a_sigterm_of_its_session_replica_wherever_its_post_landed(
    cluster: Deployment,
) -> None:
    """The official SDK's client never starts a new session: a SIGTERM of its session's replica while the person
    reads the question must leave the call its grace whichever replica its POST landed on. Sessions are tried until
    one call's POST landed on another replica than the session's (two in three do, round robin): that case failed."""
    relayed = False
    for _ in range(8):
        if await sdk_call_through_a_sigterm(cluster):
            relayed = True
            break
    assert relayed, "no call's POST landed on another replica than its session's"
    async with httpx.AsyncClient(timeout=60) as http:
        await all_ready(http, cluster)


async def test_a_listen_on_a_replica_being_stopped_ends_at_once_as_lost_and_is_heard_again_elsewhere(
    cluster: Deployment,
) -> None:
    """2026-07-28, the official SDK's client listening for list changes (``subscriptions/listen``) on replica 1,
    which is stopped (SIGTERM). The stream was held through the whole grace, then cut mid-body (an ERROR with a
    traceback in the replica's log). Nothing is under way in a listen: it now ends at once, without the graceful
    close, so the client learns its subscription was lost and listens again, on another replica."""
    direct_url = direct(cluster)[1]
    with anyio.fail_after(60):
        async with McpClient(direct_url) as sdk:
            assert sdk.protocol_version == "2026-07-28"
            async with sdk.listen(tools_list_changed=True) as subscription, anyio.create_task_group() as tg:

                async def until_it_ends() -> None:
                    async for event in subscription:
                        pytest.fail(f"no change was made: {event!r}")

                tg.start_soon(terminated, cluster, 1)
                with pytest.raises(SubscriptionLost):
                    await until_it_ends()
    log = cluster.replicas.log(1).read_text()
    assert "Exception in ASGI application" not in log and "timeout graceful shutdown exceeded" not in log, log
    with anyio.fail_after(60):
        async with McpClient(cluster.nginx.url) as sdk, sdk.listen(tools_list_changed=True) as subscription:
            assert subscription.honored.tools_list_changed


async def test_a_2026_07_28_round_sent_to_a_stopped_replica_is_answered_once_it_wakes(cluster: Deployment) -> None:
    """2026-07-28: the person answers while the replica the client talks to is stopped (SIGSTOP) past its lease.
    The round carrying the answer waits in the replica's socket and is served when it wakes: the call goes on to
    its next question, each question asked once."""
    pid = cluster.replicas.pids()[1]
    stopped: list[bool] = []

    async def wake_later() -> None:
        try:
            await anyio.sleep(STALL)
        finally:
            os.killpg(pid, signal.SIGCONT)

    async with anyio.create_task_group() as tg:

        def answer(request: ElicitationRequest | UrlElicitationRequest) -> dict[str, Any]:
            if not stopped:
                stopped.append(True)
                os.killpg(pid, signal.SIGSTOP)
                tg.start_soon(wake_later)
            return {"name": "Lin"} if "name" in request.message else {"size": 4}

        handler = ScriptedHandler(otherwise=answer)
        with anyio.fail_after(60):
            async with Client.http(direct(cluster)[1], elicitation=handler, protocol="2026-07-28") as client:
                assert (await client.call_tool("book")).text == "Lin x4"
    assert [request.message for request in handler.requests] == ["Your name?", "How many people?"]
    async with httpx.AsyncClient(timeout=60) as http:
        await all_ready(http, cluster)


async def test_an_answer_whose_acknowledgement_does_not_come_in_time_is_sent_again_not_dropped(
    cluster: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2025-11-25: the person answers while the replica the answer goes to is stopped (SIGSTOP) for longer than our
    client waits for the 202 (30 s; 1 s here). The POST timed out and its error escaped the task answering the
    question (asyncio: "Task exception was never retrieved"), the answer sent once, its delivery left to what the
    stopped replica would make of a request whose client had gone. Now it is sent again, like one refused with 503:
    the call goes on, each question asked once, and nothing is left unretrieved."""
    from elicitor.client import _endpoint

    monkeypatch.setitem(_endpoint._BRIEF_TIMEOUTS, "read", 1.0)
    pid = cluster.replicas.pids()[0]
    stopped: list[bool] = []
    unretrieved: list[str] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: unretrieved.append(str(context.get("message"))))

    async def wake_later() -> None:
        try:
            await anyio.sleep(3)
        finally:
            os.killpg(pid, signal.SIGCONT)

    try:
        async with anyio.create_task_group() as tg:

            def answer(request: ElicitationRequest | UrlElicitationRequest) -> dict[str, Any]:
                if not stopped:
                    stopped.append(True)
                    os.killpg(pid, signal.SIGSTOP)
                    tg.start_soon(wake_later)
                return {"name": "Lin"} if "name" in request.message else {"size": 4}

            handler = ScriptedHandler(otherwise=answer)
            with anyio.fail_after(60):
                async with Client.http(direct(cluster)[0], elicitation=handler, protocol="2025-11-25") as client:
                    assert (await client.call_tool("book")).text == "Lin x4"
        gc.collect()  # a task that died with its exception unread says so as it is collected
        await anyio.sleep(0.1)
    finally:
        loop.set_exception_handler(None)
    assert [request.message for request in handler.requests] == ["Your name?", "How many people?"]
    assert not unretrieved, unretrieved
    async with httpx.AsyncClient(timeout=60) as http:
        await all_ready(http, cluster)


async def test_a_request_sent_to_a_stopped_replica_just_before_its_keep_alive_ran_out_is_answered(
    cluster: Deployment,
) -> None:
    """A balancer sends a request on a connection it kept alive, just before the replica's keep-alive period (5 s)
    runs out, while the replica is stopped (SIGSTOP); the replica wakes a moment after that deadline. Its event loop
    runs the overdue keep-alive timer before it reads the socket, and a timer less than a second late was taken as
    due: the connection was closed with the request unread in it (nginx answers such a POST 502 and never sends it
    again: the official SDK's client lost the person's answer; ours failed the 2026-07-28 round). A request waiting
    in the socket now keeps the connection open, however late the timer ran."""
    port, pid = cluster.replicas.ports[2], cluster.replicas.pids()[2]
    request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()

    def exchange() -> tuple[bytes, bytes]:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.sendall(request)
            before = one_response(sock)
            answered = time.monotonic()  # the replica's keep-alive period starts about now
            os.killpg(pid, signal.SIGSTOP)
            try:
                time.sleep(4.5)
                sock.sendall(request)  # before the deadline, as the balancer's own 4 s idle limit allows
                time.sleep(max(0.0, answered + 5.3 - time.monotonic()))  # woken 0.3 s past the deadline
            finally:
                os.killpg(pid, signal.SIGCONT)
            return before, one_response(sock)

    before, after = await anyio.to_thread.run_sync(exchange)
    assert before.startswith(b"HTTP/1.1 200"), before
    assert after.startswith(b"HTTP/1.1 "), after  # answered (503 while it catches up with Redis is an answer)
    async with httpx.AsyncClient(timeout=60) as http:
        await all_ready(http, cluster)
