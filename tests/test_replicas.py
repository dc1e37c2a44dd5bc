"""Three replicas behind nginx (deploy/nginx.conf, round-robin, no affinity) sharing a real Redis.

Everything here is real: redis-server, three ``python -m tests.peers.replica_server`` processes, nginx, our client
and the official SDK's client over loopback HTTP. The assertions are what a person would notice: every answer
arrives, on both eras, whichever replica each request lands on, and a replica that dies takes nothing that a person
typed on 2026-07-28 with it, and leaves the handshake era's clients a clean way on.
"""

from __future__ import annotations

import functools
import json
import secrets
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2 as httpx
import mcp_types as types
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from elicitor import Accepted, Client, Context, ElicitationRequest, ScriptedHandler, Server, UrlElicitationRequest
from elicitor.server import HttpApp, StateSealer, generate_key
from elicitor.server.http._peer_wire import Opened
from elicitor.state import MemoryEventStore, RedisStore, StoreUnavailable

from .conftest import serving
from .replicas import MISSING, Deployment, RedisServer, Replicas, deployment, one_response

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(bool(MISSING), reason=f"needs {' and '.join(MISSING)} (make test installs them)"),
]
SERVER = [sys.executable, "-m", "tests.peers.replica_server"]
ERAS = ["2025-11-25", "2026-07-28"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deployment(SERVER, tmp_path_factory.mktemp("cluster")) as running:
        yield running


LEASE = 2.5
"""The replicas' lease in :func:`stalling` (5 s by default): a session reads as gone once the lease has lapsed on
two looks ``LEASE + 2`` s apart (``gone_after``), so a stall that must outlast them takes seconds, not a dozen."""
KEEP_ALIVE = 2
"""How long an idle connection stays open on the replicas of :func:`stalling` (5 s by default)."""
STALL = LEASE + 3
"""A long stall: past the lease by three seconds, past ``gone_after`` by one (8 s with the default lease)."""


@pytest.fixture(scope="module")
def stalling(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """The same deployment with the lease and keep-alive set shorter through the server's own settings (the code
    path is the default's): for the tests that stop or kill a replica and must wait out those periods."""
    command = [*SERVER, "--lease", str(LEASE), "--keep-alive", str(KEEP_ALIVE)]
    with deployment(command, tmp_path_factory.mktemp("stalling")) as running:
        yield running


def replicas_used(cluster: Deployment, start: int) -> set[int]:
    return {cluster.replicas.index_of(upstream) for _, upstream in cluster.nginx.upstreams()[start:] if upstream != "-"}


@pytest.mark.parametrize("era", ERAS)
async def test_every_answer_arrives_whichever_replica_each_request_lands_on(cluster: Deployment, era: str) -> None:
    start = len(cluster.nginx.upstreams())
    handler = ScriptedHandler([{"name": "Ada"}, {"size": 4}])
    with anyio.fail_after(30):
        async with Client.http(cluster.nginx.url, elicitation=handler, protocol=era) as client:
            assert (await client.call_tool("book")).text == "Ada x4"
    assert [r.message for r in handler.requests] == ["Your name?", "How many people?"]
    assert len(replicas_used(cluster, start)) >= 2, cluster.nginx.upstreams()[start:]


@pytest.mark.parametrize("era", ERAS)
async def test_questions_asked_together_are_answered_across_replicas(cluster: Deployment, era: str) -> None:
    handler = ScriptedHandler(otherwise=lambda request: {"name": request.message.split()[-1].rstrip("?")})
    with anyio.fail_after(30):
        async with Client.http(cluster.nginx.url, elicitation=handler, protocol=era) as client:
            for _ in range(3):
                assert (await client.call_tool("together")).text == "left+right"


async def test_many_sessions_at_once(cluster: Deployment) -> None:
    results: list[str] = []

    async def one(i: int, era: str) -> None:
        handler = ScriptedHandler([{"name": f"n{i}"}, {"size": i}])
        async with Client.http(cluster.nginx.url, elicitation=handler, protocol=era) as client:
            results.append((await client.call_tool("book")).text)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for i in range(12):
                tg.start_soon(one, i, ERAS[i % 2])
    assert sorted(results) == sorted(f"n{i} x{i}" for i in range(12))


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_url_elicitation_completed_on_another_replica(cluster: Deployment, protocol: str) -> None:
    opened: list[str] = []

    def open_page(request: ElicitationRequest | UrlElicitationRequest) -> Accepted[None]:
        assert isinstance(request, UrlElicitationRequest)
        opened.append(request.url)
        assert httpx.get(request.url, timeout=10).status_code == 200  # lands on any replica; completes it there
        return Accepted(None)

    handler = ScriptedHandler(otherwise=open_page, modes=frozenset({"form", "url"}))
    with anyio.fail_after(30):
        async with Client.http(cluster.nginx.url, elicitation=handler, protocol=protocol) as client:
            result = await client.call_tool("connect", {"base": cluster.nginx.base})
    assert result.text == "connected"
    assert len(set(opened)) == 1  # one elicitation, whatever replica asked or completed it


async def test_the_official_sdk_client_through_the_balancer(cluster: Deployment) -> None:
    asked: list[str] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        content: dict[str, str | int | float | bool | list[str] | None]
        content = {"name": "Grace"} if "name" in params.message else {"size": 2}
        return types.ElicitResult(action="accept", content=content)

    with anyio.fail_after(30):
        async with McpClient(cluster.nginx.url, elicitation_callback=callback, mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            for _ in range(3):  # several calls, so requests of the one session land on every replica
                result = await client.call_tool("book", {})
                assert result.content[0].text == "Grace x2"  # type: ignore[union-attr]
    assert asked == ["Your name?", "How many people?"] * 3


async def test_a_replica_killed_mid_call_loses_no_answer_on_2026_07_28(cluster: Deployment) -> None:
    replicas = cluster.replicas

    def kill_then_answer(request: ElicitationRequest | UrlElicitationRequest) -> dict[str, int]:
        replicas.kill(0)  # the first answer is in the sealed state; the retry must land elsewhere
        return {"size": 3}

    handler = ScriptedHandler([{"name": "Lin"}, kill_then_answer])
    try:
        with anyio.fail_after(30):
            async with Client.http(cluster.nginx.url, elicitation=handler, protocol="2026-07-28") as client:
                for _ in range(2):  # the first call may have avoided replica 0 altogether; the second cannot
                    handler.add({"name": "Lin"}, kill_then_answer)
                    assert (await client.call_tool("book")).text == "Lin x3"
    finally:
        replicas.start(0)


async def test_a_task_outlives_the_replica_that_ran_it(cluster: Deployment) -> None:
    """A task waits for a person; its replica is killed; the answer lands on another replica, which replays the
    task from its record in Redis (the first answer kept), asks the second question, and finishes it."""
    replicas = cluster.replicas
    handler = ScriptedHandler([{"name": "Ida"}, {"size": 2}])
    owner: int | None = None
    try:
        with anyio.fail_after(60):
            async with Client.http(cluster.nginx.url, elicitation=handler, protocol="2026-07-28") as client:
                handle = await client.start_tool("long_booking")
                assert handle.id is not None
                while (seen := await client.task(handle.id)).status != "input_required":
                    await anyio.sleep(0.05)
                assert seen.status_message is not None
                pid = int(seen.status_message.split()[-1])
                owner = replicas.pids().index(pid)
                replicas.kill(owner)
                text = (await handle.wait()).text
        assert text.startswith("Ida x2 by "), text
        assert int(text.split()[-1]) != pid  # finished elsewhere
        assert [r.message for r in handler.requests] == ["Your name?", "How many people?"]
    finally:
        if owner is not None:
            replicas.start(owner)


async def test_a_replica_killed_mid_elicitation_on_the_handshake_era(stalling: Deployment) -> None:
    """Its session is gone: the client gets 404, starts a new session on a live replica and calls again."""
    cluster = stalling
    replicas = cluster.replicas
    asked: list[str] = []

    def answer(request: ElicitationRequest | UrlElicitationRequest) -> dict[str, Any]:
        asked.append(request.message)
        if len(asked) == 1:
            replicas.kill(owner)
        return {"name": "Kim"} if "name" in request.message else {"size": 5}

    handler = ScriptedHandler(otherwise=answer)
    bystander = ScriptedHandler(otherwise=lambda r: {"name": "Bo"} if "name" in r.message else {"size": 1})
    try:
        with anyio.fail_after(60):
            async with (
                Client.http(cluster.nginx.url, elicitation=handler, protocol="2025-11-25") as client,
                Client.http(cluster.nginx.url, elicitation=bystander, protocol="2025-11-25") as other,
            ):
                pids = replicas.pids()
                owner = pids.index(int((await client.call_tool("replica")).text))
                other_owner = pids.index(int((await other.call_tool("replica")).text))
                assert (await client.call_tool("book")).text == "Kim x5"
                assert asked[0] == "Your name?" and len(asked) >= 3  # asked again on the new session
                if other_owner != owner:  # a session on another replica is untouched: same session, same process
                    assert (await other.call_tool("replica")).text == str(pids[other_owner])
                    assert (await other.call_tool("book")).text == "Bo x1"
    finally:
        if owner is not None:
            replicas.start(owner)


async def test_health_follows_redis_and_service_recovers_after_a_restart(cluster: Deployment) -> None:
    assert cluster.redis is not None
    direct = f"http://127.0.0.1:{cluster.replicas.ports[1]}/healthz"
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(f"{cluster.nginx.base}/healthz")
        assert response.status_code == 200 and response.json()["status"] == "ok"
        cluster.redis.stop()
        try:
            response = await http.get(direct)
            assert response.status_code == 503 and response.json()["status"] == "unavailable"
            handler = ScriptedHandler([{"name": "Ann"}, {"size": 2}])
            with anyio.fail_after(30):  # stateless rounds need no Redis
                async with Client.http(cluster.nginx.url, elicitation=handler, protocol="2026-07-28") as client:
                    assert (await client.call_tool("book")).text == "Ann x2"
        finally:
            cluster.redis.start()
        await all_ready(http, cluster)
    handler = ScriptedHandler([{"name": "Ann"}, {"size": 2}])
    with anyio.fail_after(30):
        async with Client.http(cluster.nginx.url, elicitation=handler, protocol="2025-11-25") as client:
            assert (await client.call_tool("book")).text == "Ann x2"


def test_each_replica_says_where_it_listens(cluster: Deployment) -> None:
    for index, port in enumerate(cluster.replicas.ports):
        said = cluster.replicas.log(index).read_text()
        # the fastest stack installed: httptools comes with elicitor, uvloop with the [speed] extra (in dev too)
        assert f"elicitor: replicas at http://127.0.0.1:{port}/mcp (httptools, uvloop, state shared in Redis)" in said


def test_the_nginx_configuration_is_the_deployed_one(cluster: Deployment) -> None:
    rendered = (cluster.nginx.folder / "nginx.conf").read_text()
    deployed = (Path(__file__).resolve().parent.parent / "deploy" / "nginx.conf").read_text()
    for directive in ("proxy_buffering off;", "proxy_read_timeout 1h;", "keepalive 64;"):
        assert directive in deployed and directive in rendered
    directives = "\n".join(line.split("#", 1)[0] for line in rendered.splitlines())
    assert "ip_hash" not in directives and "sticky" not in directives and "hash " not in directives


HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def rpc(method: str, params: dict[str, Any] | None = None, id: int | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if id is not None:
        message["id"] = id
    return message


async def open_session(http: httpx.AsyncClient, url: str, capabilities: dict[str, Any] | None = None) -> dict[str, str]:
    """Initialize a 2025-11-25 session by hand; the headers its later requests carry."""
    init = rpc("initialize", {"protocolVersion": "2025-11-25", "clientInfo": {"name": "t", "version": "1"},
                              "capabilities": capabilities or {"elicitation": {"form": {}}}}, id=1)  # fmt: skip
    response = await http.post(url, json=init, headers=HEADERS)
    headers = {**HEADERS, "mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    assert (await http.post(url, json=rpc("notifications/initialized"), headers=headers)).status_code == 202
    return headers


async def events(response: httpx.Response) -> AsyncIterator[tuple[str | None, dict[str, Any]]]:
    """``(event id, message)`` for each SSE event carrying a message."""
    event_id: str | None = None
    async for line in response.aiter_lines():
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("data: {"):
            yield event_id, json.loads(line[6:])


async def test_a_stream_resumes_on_another_replica_and_answers_cross_replicas(cluster: Deployment) -> None:
    """The call, its answers and its resumption each go to a replica that does not run the session."""
    async with httpx.AsyncClient(timeout=20) as http:
        headers = await open_session(http, cluster.nginx.url)
        urls = [f"http://127.0.0.1:{port}/mcp" for port in cluster.replicas.ports]
        who = await http.post(cluster.nginx.url, json=rpc("tools/call", {"name": "replica"}, id=7), headers=headers)
        owner = cluster.replicas.pids().index(int(who.json()["result"]["content"][0]["text"]))
        first, second = [url for i, url in enumerate(urls) if i != owner]
        last: str | None = None
        with anyio.fail_after(20):
            call = rpc("tools/call", {"name": "book"}, id=2)
            async with http.stream("POST", first, json=call, headers=headers) as r:
                async for event_id, message in events(r):
                    if message.get("method") == "elicitation/create":
                        last, asked = event_id, message
                        break  # the connection drops here, before the answer
            answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "Rue"}}}
            assert (await http.post(second, json=answer, headers=headers)).status_code == 202
            result = None
            for url in (second, first, second):  # resumed each time on a replica that does not run the session
                assert last is not None
                resume = {**headers, "accept": "text/event-stream", "last-event-id": last}
                async with http.stream("GET", url, headers=resume) as r:
                    assert r.status_code == 200
                    async for event_id, message in events(r):
                        last = event_id or last
                        if message.get("method") == "elicitation/create":
                            assert message["params"]["message"] == "How many people?"
                            reply = {"action": "accept", "content": {"size": 6}}
                            answer = {"jsonrpc": "2.0", "id": message["id"], "result": reply}
                            assert (await http.post(first, json=answer, headers=headers)).status_code == 202
                            break  # leave this stream too: the rest is picked up by the next resume
                        if message.get("id") == 2:
                            result = message["result"]
                            break
                if result is not None:
                    break
        assert result is not None and result["content"][0]["text"] == "Rue x6"
        assert (await http.delete(second, headers=headers)).status_code == 200


async def test_cancelling_a_call_reaches_the_replica_that_runs_it(cluster: Deployment) -> None:
    url = cluster.nginx.url
    async with httpx.AsyncClient(timeout=20) as http:
        headers = await open_session(http, url)

        async def count() -> int:
            response = await http.post(url, json=rpc("tools/call", {"name": "cancellations"}, id=9), headers=headers)
            return int(response.json()["result"]["content"][0]["text"])

        before = await count()
        with anyio.fail_after(20):
            call = rpc("tools/call", {"name": "wait_then_note"}, id=3)
            async with http.stream("POST", url, json=call, headers=headers) as r:
                async for _, message in events(r):
                    if message.get("method") == "elicitation/create":
                        break
            cancel = rpc("notifications/cancelled", {"requestId": 3, "reason": "changed my mind"})
            assert (await http.post(url, json=cancel, headers=headers)).status_code == 202
            while await count() == before:  # the cancellation lands on any replica; the owner's tool sees it
                await anyio.sleep(0.05)
        assert await count() == before + 1


async def test_change_notices_reach_sessions_on_every_replica(cluster: Deployment) -> None:
    url = cluster.nginx.url
    async with httpx.AsyncClient(timeout=20) as http:
        listeners = [await open_session(http, url) for _ in range(3)]  # round-robin: on every replica
        heard: list[str] = []
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                ready = 0

                async def listen(headers: dict[str, str]) -> None:
                    nonlocal ready
                    async with http.stream("GET", url, headers={**headers, "accept": "text/event-stream"}) as r:
                        ready += 1
                        async for _, message in events(r):
                            if message.get("method") == "notifications/tools/list_changed":
                                heard.append(headers["mcp-session-id"])
                                return

                for headers in listeners:
                    tg.start_soon(listen, headers)
                while ready < len(listeners):
                    await anyio.sleep(0.01)
                await anyio.sleep(0.2)  # every listener's stream attached on its session's replica
                trigger = await open_session(http, url)
                await http.post(url, json=rpc("tools/call", {"name": "change_tools"}, id=4), headers=trigger)
        assert sorted(heard) == sorted(h["mcp-session-id"] for h in listeners)


async def all_ready(http: httpx.AsyncClient, cluster: Deployment) -> None:
    """Every replica ready again (what a balancer's readiness check waits for), after a fault: the next test meets a
    cluster that serves, not one still reconnecting to Redis."""
    with anyio.fail_after(20):
        for port in cluster.replicas.ports:
            while (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code != 200:
                await anyio.sleep(0.05)


async def test_a_session_of_a_replica_stopped_past_its_lease_is_not_declared_gone(stalling: Deployment) -> None:
    """The replica running a session is stopped (SIGSTOP) for ``STALL`` s, a long pause. The person's answer lands
    on another replica after the stopped one's lease lapsed: the session is not answered 404 (the replica is only
    stalled); the answer waits in its queue, and once the replica runs again the call goes on to its next question."""
    import os
    import signal

    cluster = stalling

    owner, other = (f"http://127.0.0.1:{port}/mcp" for port in cluster.replicas.ports[:2])
    pid = cluster.replicas.pids()[0]
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, owner)
        async with http.stream("POST", owner, json=rpc("tools/call", {"name": "book"}, id=7), headers=headers) as call:
            stream = events(call)
            _, question = await anext(stream)
            assert question["params"]["message"] == "Your name?"
            accepted = {"action": "accept", "content": {"name": "Ada"}}
            answer = {"jsonrpc": "2.0", "id": question["id"], "result": accepted}

            async def stop() -> None:
                os.killpg(pid, signal.SIGSTOP)
                try:
                    await anyio.sleep(STALL)
                finally:
                    os.killpg(pid, signal.SIGCONT)

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(stop)
                    await anyio.sleep(LEASE + 0.5)  # past the lease: the stopped replica's sessions read as not alive
                    delivered = await http.post(other, json=answer, headers=headers)
            assert delivered.status_code == 202, delivered.text
            with anyio.fail_after(30):
                _, question = await anext(stream)
            assert question["params"]["message"] == "How many people?"
        assert (await http.delete(owner, headers=headers)).status_code == 200
        await all_ready(http, cluster)


async def test_a_session_declared_gone_while_its_replica_stalled_stays_gone_when_it_wakes(stalling: Deployment) -> None:
    """The replica running a session is stopped past its lease, long enough for another replica to find the lease
    lapsed twice and answer 404 for the session (the client then starts a new one). When the stalled replica runs
    again, its heartbeat used to claim the session back (it could not tell that from Redis losing its data): the
    same id answered 200 again, its tool still asking on an old stream. Now the woken replica ends it: 404
    everywhere, and the call's stream ends."""
    import os
    import signal

    cluster = stalling

    owner, other = (f"http://127.0.0.1:{port}/mcp" for port in cluster.replicas.ports[:2])
    pid = cluster.replicas.pids()[0]
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, owner)

        async def status(url: str) -> int:
            return (await http.post(url, json=rpc("ping", {}, id=9), headers=headers)).status_code

        async with http.stream("POST", owner, json=rpc("tools/call", {"name": "book"}, id=7), headers=headers) as call:
            stream = events(call)
            _, question = await anext(stream)
            assert question["params"]["message"] == "Your name?"
            os.killpg(pid, signal.SIGSTOP)
            try:
                await anyio.sleep(LEASE + 0.5)  # past the lease: a request is not forwarded to a replica that stalls
                with anyio.fail_after(60):
                    while await status(other) != 404:  # the lease lapsed on two looks: declared gone
                        await anyio.sleep(0.5)
            finally:
                os.killpg(pid, signal.SIGCONT)
            with anyio.fail_after(30):
                while await status(owner) != 404:  # the woken replica ends it at its next heartbeat
                    await anyio.sleep(0.2)
                async for _ in stream:  # the call's stream ends with its session
                    pass
        assert await status(other) == 404
        await all_ready(http, cluster)


async def test_a_stream_relayed_from_a_replica_stopped_past_its_lease_goes_on(stalling: Deployment) -> None:
    """The call is POSTed to another replica than the session's, which relays its stream. The session's replica
    is stopped for ``STALL`` s while the question waits: the relay does not take it for dead (its lease lapsed, but
    only for moments), so the stream goes on, and the person's answer, given once it runs again, brings the next
    question on that same stream."""
    import os
    import signal

    cluster = stalling

    owner, relay = (f"http://127.0.0.1:{port}/mcp" for port in cluster.replicas.ports[:2])
    pid = cluster.replicas.pids()[0]
    async with httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, owner)
        async with http.stream("POST", relay, json=rpc("tools/call", {"name": "book"}, id=7), headers=headers) as call:
            stream = events(call)
            _, question = await anext(stream)
            assert question["params"]["message"] == "Your name?"
            os.killpg(pid, signal.SIGSTOP)
            try:
                await anyio.sleep(STALL)
            finally:
                os.killpg(pid, signal.SIGCONT)
            accepted = {"action": "accept", "content": {"name": "Ada"}}
            answer = {"jsonrpc": "2.0", "id": question["id"], "result": accepted}
            assert (await http.post(owner, json=answer, headers=headers)).status_code == 202
            with anyio.fail_after(30):
                _, question = await anext(stream)
            assert question.get("params", {}).get("message") == "How many people?", question
        assert (await http.delete(owner, headers=headers)).status_code == 200
        await all_ready(http, cluster)


async def test_a_request_sent_on_an_idle_connection_to_a_stopped_replica_is_answered_once_it_wakes(
    stalling: Deployment,
) -> None:
    """nginx keeps idle connections to the replicas and sends a request on one while the replica is stopped
    (SIGSTOP) past its keep-alive timeout (``KEEP_ALIVE``). Once the replica runs again, its overdue keep-alive timer
    must not close that connection with the request unread in it: the kernel would reset it, and nginx answers a
    reset POST 502 without trying another replica (the official SDK's client then loses the person's answer)."""
    import os
    import signal
    import socket

    cluster = stalling

    port, pid = cluster.replicas.ports[2], cluster.replicas.pids()[2]
    request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()

    def exchange() -> tuple[bytes, bytes]:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.sendall(request)
            before = one_response(sock)
            os.killpg(pid, signal.SIGSTOP)
            try:
                time.sleep(KEEP_ALIVE + 3)  # idle past the replica's keep-alive, as it sees it once awake
                sock.sendall(request)  # what the balancer sends meanwhile waits in the socket
            finally:
                os.killpg(pid, signal.SIGCONT)
            return before, one_response(sock)  # b"" if the replica reset the connection

    before, after = await anyio.to_thread.run_sync(exchange)
    assert before.startswith(b"HTTP/1.1 200"), before
    # Answered, whatever it says: just awake, the replica may not be ready yet (503 until it reads its queues again).
    assert after.startswith(b"HTTP/1.1 "), after
    async with httpx.AsyncClient(timeout=60) as http:
        await all_ready(http, cluster)


class OpensAfterItsReplicaStops:
    """A person at a browser, on a handler that takes URL mode: each page shown is noted; when asked to say they
    are done, the replica running the session is stopped (``stop``) and only then is the page opened (and
    finished there, on whichever live replica it lands)."""

    modes = frozenset({"form", "url"})

    def __init__(self, stop: Callable[[], None]) -> None:
        self.stop = stop
        self.shown: list[str] = []
        self.finished: list[int] = []

    async def __call__(self, request: ElicitationRequest) -> Any:
        raise AssertionError(f"no form was expected: {request.message}")

    async def url(self, request: UrlElicitationRequest) -> Accepted[None]:
        self.shown.append(request.url)
        return Accepted(None)

    async def wait_done(self, request: UrlElicitationRequest) -> None:
        self.stop()
        async with httpx.AsyncClient(timeout=30) as http:
            self.finished.append((await http.get(request.url)).status_code)


@pytest.mark.parametrize("stop", ["kill", "terminate"])
async def test_a_page_finished_after_its_replica_stopped_is_not_shown_again(stalling: Deployment, stop: str) -> None:
    """2025-11-25, URL mode through -32042: the person is shown a page, the replica running the session stops
    (SIGKILL, or SIGTERM), and the person finishes the page on another replica. The client's retry of the call
    starts a new session; it is the same call (the same idempotency key), whose record holds the page it asked
    for, so the tool finds that page finished and the person is not shown another."""
    cluster = stalling
    replicas = cluster.replicas
    owner: int | None = None

    def stop_owner() -> None:
        assert owner is not None
        getattr(replicas, stop)(owner)

    person = OpensAfterItsReplicaStops(stop_owner)
    try:
        with anyio.fail_after(90):
            async with Client.http(cluster.nginx.url, elicitation=person, protocol="2025-11-25") as client:
                owner = replicas.pids().index(int((await client.call_tool("replica")).text))
                result = await client.call_tool("connect", {"base": cluster.nginx.base})
        assert result.text == "connected"
        assert person.finished == [200]
        assert len(person.shown) == 1, person.shown
    finally:
        if owner is not None:
            replicas.start(owner)


def start_the_dead(replicas: Replicas) -> None:
    """Start again every replica that is not running (one a test, or its server's hook, killed)."""
    for index, pid in enumerate(replicas.pids()):
        if pid == -1:
            replicas.start(index)


class FinishesOnlyTheUrl:
    """A person who answers the form, finishes the page when shown it and never says they are done: only the
    server's completion notice ends the client's wait. ``first_form`` runs before the first form is answered."""

    modes = frozenset({"form", "url"})

    def __init__(self, first_form: Callable[[], None]) -> None:
        self.first_form = first_form
        self.forms = 0
        self.shown: list[str] = []

    async def __call__(self, request: ElicitationRequest) -> Accepted[dict[str, str]]:
        self.forms += 1
        if self.forms == 1:
            self.first_form()
        return Accepted({"name": "work"})

    async def url(self, request: UrlElicitationRequest) -> Accepted[None]:
        self.shown.append(str(request.elicitation_id))
        async with httpx.AsyncClient(timeout=30) as http:
            assert (await http.get(request.url)).status_code == 200
        return Accepted(None)

    async def wait_done(self, request: UrlElicitationRequest) -> None:
        await anyio.sleep_forever()


async def test_a_page_whose_call_moved_to_a_new_session_is_completed_there(stalling: Deployment) -> None:
    """2025-11-25: the call registers its page, then asks a question; while the question is asked, the replica
    running the session is killed (SIGKILL). The client's retry (the same idempotency key) runs on a new session
    on another replica, finds the page in the call's record and sends the person there (-32042). The person
    finishes it and never says so: the completion notice must reach the new session, the one waiting now."""
    cluster = stalling
    replicas = cluster.replicas
    owner: int | None = None

    def kill_owner() -> None:
        assert owner is not None
        replicas.kill(owner)

    person = FinishesOnlyTheUrl(kill_owner)
    try:
        with anyio.fail_after(90):
            async with Client.http(cluster.nginx.url, elicitation=person, protocol="2025-11-25") as client:
                owner = replicas.pids().index(int((await client.call_tool("replica")).text))
                result = await client.call_tool("connect_account", {"base": cluster.nginx.base})
        assert result.text == "connected"
        assert person.forms == 2  # asked again on the new session: the answer was given to the dead one
        assert len(person.shown) == 1, person.shown
    finally:
        start_the_dead(replicas)


async def test_the_official_sdk_hears_a_page_finished_after_its_call_moved_to_a_new_session(
    stalling: Deployment,
) -> None:
    """The official SDK's client (2025-11-25), calling with an idempotency key of its own: -32042 names a page; the
    replica of its session is killed; a new client calls again under the same key, on a new session, and is sent
    to the same page. The person finishes it: the completion notice reaches the new session."""
    from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError

    cluster = stalling
    replicas = cluster.replicas
    meta: Any = {"dev.elicitor/idempotencyKey": secrets.token_urlsafe(18)}
    completed: list[str] = []
    heard = anyio.Event()

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept")

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            completed.append(message.params.elicitation_id)
            heard.set()

    def page_of(error: MCPError) -> str:
        (required,) = UrlElicitationRequiredError.from_error(error.error).elicitations
        return str(required.elicitation_id)

    try:
        with anyio.fail_after(90):
            async with McpClient(cluster.nginx.url, elicitation_callback=callback, mode="legacy") as first:
                owner = replicas.pids().index(int((await first.call_tool("replica")).content[0].text))  # type: ignore[union-attr]
                with pytest.raises(MCPError) as raised:
                    await first.call_tool("connect", {"base": cluster.nginx.base}, meta=meta)
                page = page_of(raised.value)
                replicas.kill(owner)  # the first client's session goes with it
                async with McpClient(
                    cluster.nginx.url, elicitation_callback=callback, message_handler=on_message, mode="legacy"
                ) as second:
                    with pytest.raises(MCPError) as again:
                        await second.call_tool("connect", {"base": cluster.nginx.base}, meta=meta)
                    assert page_of(again.value) == page  # the call's record holds the page it was shown
                    async with httpx.AsyncClient(timeout=30) as http:
                        assert (await http.get(f"{cluster.nginx.base}/done/{page}")).status_code == 200
                    with anyio.fail_after(30):  # generous: the notice is sent as the page is answered
                        await heard.wait()
                    assert completed == [page]
                    result = await second.call_tool("connect", {"base": cluster.nginx.base}, meta=meta)
                    assert result.content[0].text == "connected"  # type: ignore[union-attr]
    finally:
        start_the_dead(replicas)


async def test_a_replica_killed_as_its_call_names_its_page_leaves_the_page_to_the_retry(stalling: Deployment) -> None:
    """2025-11-25, URL mode through -32042: the replica running the call is killed (SIGKILL, by a hook of the test
    server in that very process) right after the call's record first names its page, before the page is
    registered. The client's retry, on a new session, goes on from the record: the person is sent to one page,
    once, and the call ends connected; nothing is left whose outcome is unknown."""
    cluster = stalling
    replicas = cluster.replicas
    opened: list[str] = []
    forms: list[str] = []

    def open_page(request: ElicitationRequest | UrlElicitationRequest) -> Any:
        if not isinstance(request, UrlElicitationRequest):
            forms.append(request.message)
            return {"name": "work"}
        opened.append(request.url)
        assert httpx.get(request.url, timeout=30).status_code == 200
        return Accepted(None)

    handler = ScriptedHandler(otherwise=open_page, modes=frozenset({"form", "url"}))
    try:
        with anyio.fail_after(90):
            async with Client.http(cluster.nginx.url, elicitation=handler, protocol="2025-11-25") as client:
                result = await client.call_tool("connect_dying", {"base": cluster.nginx.base})
        assert -1 in replicas.pids()  # the hook did kill the replica that ran the first attempt
        assert result.text == "connected"
        assert len(opened) == 1, opened
        assert forms == ["Which account?"]  # its answer was kept before the kill
    finally:
        start_the_dead(replicas)


async def test_a_graceful_shutdown_ends_calls_cleanly_and_hands_sessions_on(cluster: Deployment) -> None:
    """SIGTERM: the replica gives up its sessions at once; their clients start again elsewhere."""
    replicas = cluster.replicas
    handler = ScriptedHandler(otherwise=lambda r: {"name": "Sol"} if "name" in r.message else {"size": 2})
    owner: int | None = None
    try:
        with anyio.fail_after(60):
            async with Client.http(cluster.nginx.url, elicitation=handler, protocol="2025-11-25") as client:
                owner = replicas.pids().index(int((await client.call_tool("replica")).text))
                replicas.terminate(owner)
                assert (await client.call_tool("book")).text == "Sol x2"
                assert int((await client.call_tool("replica")).text) in replicas.pids()
    finally:
        if owner is not None:
            replicas.start(owner)


async def test_a_session_is_its_users_on_every_replica(cluster: Deployment) -> None:
    """Another user presenting a session id gets 404 on whichever replica, as for an unknown session."""
    urls = [f"http://127.0.0.1:{port}/mcp" for port in cluster.replicas.ports]
    async with httpx.AsyncClient(timeout=20) as http:
        init = rpc("initialize", {"protocolVersion": "2025-11-25", "clientInfo": {"name": "t", "version": "1"},
                                  "capabilities": {}}, id=1)  # fmt: skip
        created = await http.post(urls[0], json=init, headers={**HEADERS, "x-user": "alice"})
        alice = {**HEADERS, "x-user": "alice", "mcp-session-id": created.headers["mcp-session-id"]}
        bob = {**alice, "x-user": "bob"}
        anonymous = {k: v for k, v in alice.items() if k != "x-user"}
        for url in urls:
            assert (await http.post(url, json=rpc("ping", id=2), headers=alice)).status_code == 200
            assert (await http.post(url, json=rpc("ping", id=3), headers=bob)).status_code == 404
            assert (await http.post(url, json=rpc("ping", id=4), headers=anonymous)).status_code == 404
            assert (await http.delete(url, headers=bob)).status_code == 404
        assert (await http.delete(urls[1], headers=alice)).status_code == 200
        with anyio.fail_after(60):  # the end is in the owner's queue: it ends the session when it reads it
            while (await http.post(urls[0], json=rpc("ping", id=5), headers=alice)).status_code != 404:
                await anyio.sleep(0.05)
        # urls[2] forwarded to the session's replica before: what it remembers of that is checked, not trusted
        notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(urls[2], json=notice, headers=alice)).status_code == 404
        assert (await http.post(urls[2], json=rpc("ping", id=6), headers=alice)).status_code == 404


# ---------------------------------------------------------------------------------------------------------------
# Two replicas in this process on a real Redis: the store's faults, injected one at a time


@dataclass
class Picked:
    name: str


in_process = Server("in-process", version="1.0.0", state=StateSealer([generate_key()]))


@in_process.tool()
async def pick(ctx: Context) -> str:
    outcome = await ctx.elicit("Pick a name", Picked)
    return outcome.data.name if isinstance(outcome, Accepted) else "-"


RUNS: list[str] = []
"""Each run of ``tally`` (both in-process replicas share it): a side effect that must happen once per call."""


@in_process.tool()
async def tally(ctx: Context, label: str) -> str:
    RUNS.append(label)
    outcome = await ctx.elicit("Pick a name", Picked)
    return f"{label}: {outcome.data.name}" if isinstance(outcome, Accepted) else "-"


@in_process.tool()
async def full_name(ctx: Context) -> str:
    first = await ctx.elicit("First name", Picked)
    last = await ctx.elicit("Last name", Picked)
    names = [outcome.data.name for outcome in (first, last) if isinstance(outcome, Accepted)]
    return " ".join(names) or "-"


tasking = Server("tasking", version="1.0.0", state=StateSealer([generate_key()]))


@tasking.tool(task="required")
async def chore(ctx: Context) -> str:
    outcome = await ctx.elicit("Pick a name", Picked)
    return outcome.data.name if isinstance(outcome, Accepted) else "-"


@asynccontextmanager
async def two_replicas(
    redis_url: str, template: Server = in_process, **options: Any
) -> AsyncIterator[tuple[str, str, list[HttpApp]]]:
    """Two replicas of ``template`` (one Server each, one Redis, one prefix), each served by uvicorn."""
    prefix = f"inproc{secrets.token_hex(4)}:"
    apps = []
    for _ in range(2):
        replica = Server(str(template.info["name"]), version="1.0.0", state=template.sealer)
        replica._tools = template._tools
        replica.share(RedisStore(redis_url, prefix=prefix, **options))
        apps.append(replica.http_app())
    async with serving(apps[0]) as a, serving(apps[1]) as b:
        yield a, b, apps


async def until_status(send: Callable[[], Awaitable[httpx.Response]], *, seconds: float) -> httpx.Response:
    """Send until the answer is not a 503 (each 503 must say when to retry); never a 404 meanwhile."""
    with anyio.fail_after(seconds):
        while True:
            response = await send()
            assert response.status_code != 404, response.text
            if response.status_code != 503:
                return response
            assert response.headers.get("retry-after") == "1"
            await anyio.sleep(0.1)


async def test_a_redis_restart_loses_no_live_session_and_requests_meanwhile_wait_for_it(redis: RedisServer) -> None:
    """Redis restarts without persistence while a session waits on a person: the other replica's health check
    answers 503 with Retry-After while Redis is away (never 500, never 404), and a request and a GET (the
    standalone stream) it gets meanwhile wait for Redis and are served; the session's record comes back with its
    owner's heartbeat; the answer then reaches the call; both replicas report healthy again by themselves."""
    async with two_replicas(redis.url, lease=1.0, timeout=1.0) as (a, b, apps), httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, a)
        async with http.stream("POST", a, json=rpc("tools/call", {"name": "pick"}, id=7), headers=headers) as call:
            stream = events(call)
            _, question = await anext(stream)
            assert question["method"] == "elicitation/create"

            redis.stop()
            health = await http.get(b.removesuffix("/mcp") + "/healthz")
            assert health.status_code == 503 and health.headers.get("retry-after") == "1"
            held: dict[str, int] = {}
            async with anyio.create_task_group() as tg:

                async def ping() -> None:
                    response = await http.post(b, json=rpc("ping", id=8), headers=headers)
                    assert response.status_code != 200 or response.json()["result"] == {}
                    held["POST"] = response.status_code

                async def listen() -> None:  # the standalone stream, relayed from A
                    async with http.stream("GET", b, headers=headers) as response:
                        held["GET"] = response.status_code

                tg.start_soon(ping)
                tg.start_soon(listen)
                await anyio.sleep(1)
                redis.start()
            assert held == {"POST": 200, "GET": 200}

            pong = await until_status(lambda: http.post(b, json=rpc("ping", id=9), headers=headers), seconds=15)
            assert pong.status_code == 200 and pong.json()["result"] == {}
            answer = {
                "jsonrpc": "2.0",
                "id": question["id"],
                "result": {"action": "accept", "content": {"name": "Ada"}},
            }
            delivered = await until_status(lambda: http.post(b, json=answer, headers=headers), seconds=10)
            assert delivered.status_code == 202
            with anyio.fail_after(10):
                async for _, message in stream:
                    assert message["result"]["content"][0]["text"] == "Ada"
                    break
        for url in (a, b):
            health_url = url.removesuffix("/mcp") + "/healthz"
            health = await until_status(functools.partial(http.get, health_url), seconds=10)
            assert set(health.json()["channels"]) == {"peers", "changes", "tasks"}
        assert all(app._tg is not None for app in apps)


class ForgetfulEvents(MemoryEventStore):
    """An event store that cannot forget (Redis away at that moment)."""

    async def discard(self, stream: str) -> None:
        raise StoreUnavailable("shared state unavailable (discarding events): Redis at redis://nowhere")


async def test_a_store_error_while_a_session_ends_ends_nothing_else() -> None:
    """Cleanup is best-effort: a session ending while the store fails leaves the replica, and its lifespan, up."""
    app = in_process.http_app(event_store=ForgetfulEvents())
    async with serving(app) as url, httpx.AsyncClient(timeout=10) as http:
        first = await open_session(http, url)
        second = await open_session(http, url)
        assert (await http.delete(url, headers=first)).status_code == 200
        assert (await http.post(url, json=rpc("ping", id=2), headers=second)).status_code == 200
        assert (await http.post(url, json=rpc("ping", id=3), headers=first)).status_code == 404
        await open_session(http, url)
        assert app._tg is not None


class SlowReplay(MemoryEventStore):
    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]]:
        await anyio.sleep(0.2)
        return await super().replay(stream, after)


class Unreachable(MemoryEventStore):
    """An event store that keeps nothing while ``away`` is set: a Redis that is really away (a write that timed out
    on a paused Redis may still be run once it is back, which would hide what this shows)."""

    away = False

    async def store(self, stream: str, sequence: int, message: bytes) -> None:
        if self.away:
            raise StoreUnavailable("shared state unavailable (storing an event): Redis at redis://nowhere")
        await super().store(stream, sequence, message)


async def test_a_question_the_store_could_not_keep_is_served_to_a_resume_from_before_it() -> None:
    """The event store is away when the call asks its second question. The question goes out on the client's
    stream, but the connection drops before the client reads it (the client resumes from the first question):
    the server held the question until the store took it, so the resume gets it, once, and the call ends. (Its
    history read from the store alone, the resume got nothing: the question was never answered.)"""
    store = Unreachable()
    app = in_process.http_app(event_store=store)
    async with serving(app) as url, httpx.AsyncClient(timeout=10) as http:
        headers = await open_session(http, url)
        with anyio.fail_after(30):
            call = rpc("tools/call", {"name": "full_name"}, id=7)
            async with http.stream("POST", url, json=call, headers=headers) as response:
                stream = events(response)
                first_id, first = await anext(stream)
                store.away = True
                accepted = {"action": "accept", "content": {"name": "Ada"}}
                answer = {"jsonrpc": "2.0", "id": first["id"], "result": accepted}
                assert (await http.post(url, json=answer, headers=headers)).status_code == 202
                second_id, second = await anext(stream)  # sent on the connection that drops with it unread
            assert second["params"]["message"] == "Last name"
            store.away = False
            resume = {**headers, "accept": "text/event-stream", "last-event-id": first_id or ""}
            async with http.stream("GET", url, headers=resume) as resumed:
                replayed = events(resumed)
                assert await anext(replayed) == (second_id, second)
                accepted = {"action": "accept", "content": {"name": "Lovelace"}}
                answer = {"jsonrpc": "2.0", "id": second["id"], "result": accepted}
                assert (await http.post(url, json=answer, headers=headers)).status_code == 202
                rest = [message async for _, message in replayed]
        key = (second_id or "").rpartition(".")[0]
        kept = [sequence for sequence, _ in await store.replay(key, 0)]  # the store took it once it was back
    assert [message["result"]["content"][0]["text"] for message in rest] == ["Ada Lovelace"]
    assert kept == [1, 2, 3]


async def test_two_resumes_of_one_stream_at_once_cannot_both_pump_it() -> None:
    app = in_process.http_app(event_store=SlowReplay())
    async with serving(app) as url, httpx.AsyncClient(timeout=10) as http:
        headers = await open_session(http, url)
        async with http.stream("POST", url, json=rpc("tools/call", {"name": "pick"}, id=7), headers=headers) as call:
            event_id, _ = await anext(events(call))
        resume = {**headers, "accept": "text/event-stream", "last-event-id": event_id or ""}
        statuses: list[int] = []

        async def attach() -> None:
            async with http.stream("GET", url, headers=resume) as response:
                statuses.append(response.status_code)

        async with anyio.create_task_group() as tg:
            tg.start_soon(attach)
            tg.start_soon(attach)
        assert sorted(statuses) == [200, 409]


async def resume_while_held(http: httpx.AsyncClient, post_to: str, resume_at: str, headers: dict[str, str]) -> None:
    """Call ``pick`` on ``post_to`` and, its response still open, resume the stream at ``resume_at``: the resume
    delivers the rest; the response it superseded ends without the result (no event reaches both)."""
    with anyio.fail_after(20):
        async with http.stream("POST", post_to, json=rpc("tools/call", {"name": "pick"}, id=7), headers=headers) as old:
            superseded = events(old)
            event_id, question = await anext(superseded)
            resume = {**headers, "accept": "text/event-stream", "last-event-id": event_id or ""}
            async with http.stream("GET", resume_at, headers=resume) as resumed:
                assert resumed.status_code == 200, await resumed.aread()
                left_on_old = [message async for _, message in superseded]  # it ends: the resume holds the stream
                assert left_on_old == []
                accepted = {"action": "accept", "content": {"name": "Ada"}}
                answer = {"jsonrpc": "2.0", "id": question["id"], "result": accepted}
                assert (await http.post(resume_at, json=answer, headers=headers)).status_code == 202
                async for _, message in events(resumed):
                    if message.get("id") == 7:
                        assert message["result"]["content"][0]["text"] == "Ada"
                        return
    raise AssertionError("the resumed stream ended without the result")


async def test_a_resume_takes_the_stream_from_a_connection_the_server_still_holds() -> None:
    """A client that resumes has given up on its old connection, which the server may still hold (a half-open
    connection lasts minutes): the resume is served at once, not refused with 409 until the server notices."""
    app = in_process.http_app()
    async with serving(app) as url, httpx.AsyncClient(timeout=10) as http:
        await resume_while_held(http, url, url, await open_session(http, url))


async def test_a_resume_on_one_replica_takes_the_stream_from_a_relay_on_another(redis: RedisServer) -> None:
    """The same across replicas, both ways: the owner's own connection superseded by a resume landing on the other
    replica, and a relay through the other replica superseded by a resume at the owner."""
    async with two_replicas(redis.url) as (a, b, _), httpx.AsyncClient(timeout=10) as http:
        headers = await open_session(http, a)  # a owns the session
        await resume_while_held(http, a, b, headers)
        await resume_while_held(http, b, a, headers)


async def kill_connections(redis_url: str, replica: str) -> int:
    """``CLIENT KILL`` every connection of ``replica`` to Redis (a network cut, as the replica sees it)."""
    from redis.asyncio import Redis

    admin = Redis.from_url(redis_url)
    try:
        killed = 0
        for client in await admin.client_list():
            if client.get("name") == f"elicitor-{replica}":
                killed += int(await admin.client_kill_filter(_id=client["id"]))
        return killed
    finally:
        await admin.aclose()


async def test_an_answer_sent_while_its_owner_is_cut_off_from_redis_still_arrives(redis: RedisServer) -> None:
    """The answer lands on B while A's connections to Redis were just killed: B's 202 means the answer is in A's
    queue, and A, reading again from its last offset, finds it (pub/sub would have dropped it)."""
    async with two_replicas(redis.url) as (a, b, apps), httpx.AsyncClient(timeout=10) as http:
        headers = await open_session(http, a)
        async with http.stream("POST", a, json=rpc("tools/call", {"name": "pick"}, id=7), headers=headers) as call:
            stream = events(call)
            _, question = await anext(stream)
            owner = apps[0].server.store.replica
            for _ in range(3):  # cut A off, again and again, while the answer goes in
                assert await kill_connections(redis.url, owner) >= 1
                await anyio.sleep(0.05)
            accepted = {"action": "accept", "content": {"name": "Grace"}}
            answer = {"jsonrpc": "2.0", "id": question["id"], "result": accepted}
            delivered = await until_status(functools.partial(http.post, b, json=answer, headers=headers), seconds=10)
            assert delivered.status_code == 202
            await kill_connections(redis.url, owner)
            with anyio.fail_after(15):
                async for _, message in stream:
                    assert message["result"]["content"][0]["text"] == "Grace"
                    break


class AnswersTo(httpx.AsyncHTTPTransport):
    """Sends the client's answers (JSON-RPC responses) to the replica at ``url``, everything else where asked: a
    balancer that happened to route the answer to another replica than the session's."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.target = httpx.URL(url)
        self.sent: list[int] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and b'"result"' in request.content:
            request.url = request.url.copy_with(port=self.target.port)
            response = await super().handle_async_request(request)
            self.sent.append(response.status_code)
            return response
        return await super().handle_async_request(request)


async def test_an_answer_of_the_official_sdk_given_while_redis_is_paused_still_arrives(redis: RedisServer) -> None:
    """The official SDK's client does not send an answer again on 503. Its person answers while Redis is paused
    (``CLIENT PAUSE``), and the answer lands on B, not on A which runs the session: B holds the POST until Redis
    is back and forwards it (202), instead of refusing it and leaving the call waiting for ever."""
    from redis.asyncio import Redis

    asked: list[str] = []
    async with two_replicas(redis.url, lease=1.0, timeout=1.0) as (a, b, _):
        admin = Redis.from_url(redis.url)

        async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(params.message)
            await admin.execute_command("CLIENT", "PAUSE", "4000", "ALL")  # the person answers meanwhile
            await anyio.sleep(0.5)
            return types.ElicitResult(action="accept", content={"name": "Ada"})

        transport = AnswersTo(b)
        try:
            with anyio.fail_after(60):
                async with (
                    httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(30, read=300)) as http,
                    McpClient(
                        streamable_http_client(a, http_client=http), elicitation_callback=callback, mode="legacy"
                    ) as client,
                ):
                    result = await client.call_tool("pick", {})
        finally:
            await admin.aclose()
    assert result.content[0].text == "Ada"  # type: ignore[union-attr]
    assert asked == ["Pick a name"] and transport.sent == [202]


async def test_the_official_sdk_connects_while_redis_is_paused(redis: RedisServer) -> None:
    """The official SDK's client connects (``initialize``) while Redis is paused: the replica waits for Redis to
    record the new session instead of refusing with 503, which that client does not retry, and the client then
    works."""
    from redis.asyncio import Redis

    async with two_replicas(redis.url, lease=1.0, timeout=1.0) as (a, _, _):
        admin = Redis.from_url(redis.url)
        try:
            await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
            with anyio.fail_after(60):
                async with McpClient(a, mode="legacy") as client:
                    tools = await client.list_tools()
        finally:
            await admin.aclose()
    assert [tool.name for tool in tools.tools] == ["pick", "tally", "full_name"]


async def test_a_question_asked_while_redis_is_paused_reaches_a_relayed_stream(redis: RedisServer) -> None:
    """B relays the call of a session A runs. Redis is paused (``CLIENT PAUSE``) longer than A tries to send a
    message to B (``send_for``, shortened here) when the call asks its second question: A's pump waits for Redis
    instead of giving up, so the question reaches the client on B's stream once Redis is back, asked once, and the
    call ends. (A pump that gave up left B's stream open with nothing to feed it: the call waited for ever.)"""
    from redis.asyncio import Redis

    async with two_replicas(redis.url, lease=1.0, timeout=1.0) as (a, b, apps), httpx.AsyncClient(timeout=60) as http:
        apps[0]._handshake._peers.send_for = 1.0
        admin = Redis.from_url(redis.url)
        try:
            headers = await open_session(http, a)
            call = rpc("tools/call", {"name": "full_name"}, id=7)
            with anyio.fail_after(60):
                async with http.stream("POST", b, json=call, headers=headers) as relayed:
                    stream = events(relayed)
                    first_id, first = await anext(stream)
                    assert first["params"]["message"] == "First name"
                    await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
                    answer = {
                        "jsonrpc": "2.0",
                        "id": first["id"],
                        "result": {"action": "accept", "content": {"name": "Ada"}},
                    }
                    assert (await http.post(a, json=answer, headers=headers)).status_code == 202  # A's own session
                    second_id, second = await anext(stream)
                    assert second["params"]["message"] == "Last name" and second_id != first_id
                    answer = {
                        "jsonrpc": "2.0",
                        "id": second["id"],
                        "result": {"action": "accept", "content": {"name": "Lovelace"}},
                    }
                    assert (await http.post(a, json=answer, headers=headers)).status_code == 202
                    _, result = await anext(stream)
        finally:
            await admin.aclose()
    assert result["result"]["content"][0]["text"] == "Ada Lovelace"


async def test_a_long_session_holds_no_stream_of_a_finished_request_and_still_resumes_it() -> None:
    app = in_process.http_app()
    async with serving(app) as url, httpx.AsyncClient(timeout=10) as http:
        headers = await open_session(http, url)
        for n in range(200):
            assert (await http.post(url, json=rpc("ping", id=100 + n), headers=headers)).status_code == 200
        session = app._handshake._sessions[headers["mcp-session-id"]]
        assert len(session.by_key) <= 2, len(session.by_key)  # the standalone stream, and perhaps one in flight
        async with http.stream("POST", url, json=rpc("tools/call", {"name": "pick"}, id=7), headers=headers) as call:
            stream = events(call)
            first_id, question = await anext(stream)
        accepted = {"action": "accept", "content": {"name": "Ada"}}
        answer = {"jsonrpc": "2.0", "id": question["id"], "result": accepted}
        assert (await http.post(url, json=answer, headers=headers)).status_code == 202
        with anyio.fail_after(10):
            while len(session.by_key) > 1:  # the call ended: its stream is all in the event store
                await anyio.sleep(0.02)
        resume = {**headers, "accept": "text/event-stream", "last-event-id": first_id or ""}
        async with http.stream("GET", url, headers=resume) as resumed:
            assert resumed.status_code == 200
            replayed = [message async for _, message in events(resumed)]
        assert [message["result"]["content"][0]["text"] for message in replayed] == ["Ada"]
        other = {**resume, "last-event-id": "0123456789abcdef01234567.1"}  # not a stream of this session
        assert (await http.get(url, headers=other)).status_code == 404


async def test_a_registry_change_while_serving_replicas_is_refused_clearly(redis: RedisServer) -> None:
    """A tool added on one replica would exist there only (tools/list flipping through the balancer): refused, and
    the error says why; the same change on a server of its own is fine."""
    async with two_replicas(redis.url) as (_, _, apps):
        server = apps[0].server
        with pytest.raises(RuntimeError, match="other replicas"):
            server.tool(name="late")(lambda: "late")
        with pytest.raises(RuntimeError, match="other replicas"):
            server.remove_tool("pick")
        assert "pick" in server._tools and "late" not in server._tools
    alone = Server("alone")
    async with serving(alone.http_app()):
        alone.tool(name="late")(lambda: "late")
        alone.remove_tool("late")


class AfterConnectingTo(httpx.AsyncHTTPTransport):
    """Sends every POST but the ``initialize`` to the replica at ``url`` (the session runs where it was created):
    a balancer that routes each of the client's later requests, and its answers, to another replica. Records the
    status of each."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.target = httpx.URL(url)
        self.sent: list[int] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and b'"initialize"' not in request.content:
            request.url = request.url.copy_with(port=self.target.port)
            response = await super().handle_async_request(request)
            self.sent.append(response.status_code)
            return response
        return await super().handle_async_request(request)


async def test_requests_of_the_official_sdk_sent_while_redis_is_paused_are_answered_once(redis: RedisServer) -> None:
    """The official SDK's client does not send a request again on 503. Its ``tools/list`` and ``tools/call`` land
    on B while Redis is paused (``CLIENT PAUSE``), and A runs the session: B holds each request until Redis is back
    and forwards it, instead of refusing it. The call runs once, the person is asked once, the answer arrives."""
    from redis.asyncio import Redis

    RUNS.clear()
    asked: list[str] = []
    async with two_replicas(redis.url, lease=1.0, timeout=1.0) as (a, b, _):
        admin = Redis.from_url(redis.url)

        async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(params.message)
            return types.ElicitResult(action="accept", content={"name": "Ada"})

        transport = AfterConnectingTo(b)
        try:
            with anyio.fail_after(90):
                async with (
                    httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(30, read=300)) as http,
                    McpClient(
                        streamable_http_client(a, http_client=http), elicitation_callback=callback, mode="legacy"
                    ) as client,
                ):
                    await admin.execute_command("CLIENT", "PAUSE", "4000", "ALL")
                    tools = await client.list_tools()
                    await admin.execute_command("CLIENT", "PAUSE", "4000", "ALL")
                    result = await client.call_tool("tally", {"label": "once"})
        finally:
            await admin.aclose()
    assert "tally" in [tool.name for tool in tools.tools]
    assert result.content[0].text == "once: Ada"  # type: ignore[union-attr]
    assert RUNS == ["once"] and asked == ["Pick a name"]
    assert 503 not in transport.sent


async def test_a_request_forwarded_again_after_a_try_that_arrived_runs_once(redis: RedisServer) -> None:
    """A try at forwarding a request that timed out may still reach the owner (Redis ran it late), and the request
    is then sent again: the owner serves the first copy it reads and ignores the second (same token), so the call
    runs once and its answer reaches the client, never a 400 "already in flight"."""
    RUNS.clear()
    async with two_replicas(redis.url) as (a, b, apps), httpx.AsyncClient(timeout=30) as http:
        headers = await open_session(http, a)

        async def twice(attempt: Callable[[], Awaitable[Any]], until: float | None) -> Any:
            await attempt()
            return await attempt()

        apps[1]._handshake._patiently = twice  # type: ignore[method-assign]
        call = rpc("tools/call", {"name": "tally", "arguments": {"label": "twice"}}, id=7)
        with anyio.fail_after(60):
            async with http.stream("POST", b, json=call, headers=headers) as response:
                assert response.status_code == 200
                stream = events(response)
                _, question = await anext(stream)
                assert question["method"] == "elicitation/create"
                answer = {
                    "jsonrpc": "2.0",
                    "id": question["id"],
                    "result": {"action": "accept", "content": {"name": "Bo"}},
                }
                assert (await http.post(a, json=answer, headers=headers)).status_code == 202
                _, message = await anext(stream)
    assert message["result"]["content"][0]["text"] == "twice: Bo"
    assert RUNS == ["twice"]


async def test_past_the_most_posts_held_at_once_a_request_is_refused_at_once(redis: RedisServer) -> None:
    """A replica holds only so many POSTs for a paused Redis: past them (none, here) a request for another
    replica's session is refused at once with a retryable 503, instead of joining an unbounded queue."""
    from redis.asyncio import Redis

    async with two_replicas(redis.url, lease=1.0, timeout=1.0) as (a, b, apps), httpx.AsyncClient(timeout=30) as http:
        headers = await open_session(http, a)
        apps[1]._hold.max_waiting = 0
        admin = Redis.from_url(redis.url)
        try:
            await admin.execute_command("CLIENT", "PAUSE", "4000", "ALL")
            with anyio.fail_after(60):
                refused = await http.post(b, json=rpc("tools/list", id=3), headers=headers)
        finally:
            await admin.aclose()
    assert refused.status_code == 503 and refused.headers.get("retry-after") == "1"
    assert refused.json()["error"]["data"]["retryable"] is True


async def test_the_health_check_says_unavailable_while_redis_is_paused_without_waiting_out_the_store(
    redis: RedisServer,
) -> None:
    """A load balancer must learn of a paused Redis promptly: ``/healthz`` waits a short probe for it, not the
    store's own timeout (30 s here), and answers 503 saying so while Redis is still paused; 200 again after."""
    from redis.asyncio import Redis
    from redis.exceptions import TimeoutError as RedisTimeout

    async with two_replicas(redis.url, timeout=30.0) as (a, _, _), httpx.AsyncClient(timeout=60) as http:
        health_url = a.removesuffix("/mcp") + "/healthz"
        assert (await until_status(functools.partial(http.get, health_url), seconds=30)).status_code == 200
        admin = Redis.from_url(redis.url)
        probe = Redis.from_url(redis.url, socket_timeout=0.5)
        try:
            await probe.ping()
            await admin.execute_command("CLIENT", "PAUSE", "8000", "ALL")
            with anyio.fail_after(60):
                health = await http.get(health_url)
            with pytest.raises(RedisTimeout):
                await probe.ping()  # Redis is still paused: the health check did not wait for it
            # the probe cut short left no broken connection behind: healthy again once Redis is back
            assert (await until_status(functools.partial(http.get, health_url), seconds=60)).status_code == 200
        finally:
            await admin.aclose()
            await probe.aclose()
    assert health.status_code == 503 and health.headers.get("retry-after") == "1"
    assert health.json()["status"] == "unavailable"
    assert health.json()["reason"] == "the shared state did not answer within 1 s"


async def test_a_resume_and_an_end_of_session_sent_while_redis_is_paused_wait_for_it(redis: RedisServer) -> None:
    """A GET resuming a call's stream and a DELETE ending the session land on B while Redis is paused, and A runs
    the session: each waits for Redis instead of being refused with 503, the resumed stream delivers the call's
    answer, and the DELETE takes effect (the session is gone on both replicas)."""
    from redis.asyncio import Redis

    async with two_replicas(redis.url, lease=1.0, timeout=1.0) as (a, b, _), httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, a)
        admin = Redis.from_url(redis.url)
        try:
            with anyio.fail_after(90):
                async with http.stream(
                    "POST", a, json=rpc("tools/call", {"name": "pick"}, id=7), headers=headers
                ) as call:
                    event_id, question = await anext(events(call))
                    assert question["method"] == "elicitation/create" and event_id is not None
                await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
                async with http.stream("GET", b, headers={**headers, "last-event-id": event_id}) as resumed:
                    assert resumed.status_code == 200, await resumed.aread()
                    answer = {
                        "jsonrpc": "2.0",
                        "id": question["id"],
                        "result": {"action": "accept", "content": {"name": "Ada"}},
                    }
                    assert (await http.post(a, json=answer, headers=headers)).status_code == 202
                    _, message = await anext(events(resumed))
                await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
                ended = await http.delete(b, headers=headers)
                after = [(await http.post(url, json=rpc("ping", id=9), headers=headers)).status_code for url in (a, b)]
        finally:
            await admin.aclose()
    assert message["result"]["content"][0]["text"] == "Ada"
    assert ended.status_code == 200, ended.text
    assert after == [404, 404]


async def nobody(request: ElicitationRequest) -> Any:
    """A person who never answers: the task waits on them."""
    await anyio.sleep_forever()


async def test_task_requests_sent_once_while_redis_is_paused_are_answered_on_2026_07_28(redis: RedisServer) -> None:
    """``tasks/get`` and ``tasks/cancel`` sent once (as by a client that does not send them again on an error, like
    the official SDKs) while Redis is paused: each waits for Redis and is answered, instead of failing at once
    with the retryable error; the cancel takes effect."""
    from redis.asyncio import Redis

    async with (
        two_replicas(redis.url, tasking, lease=1.0, timeout=1.0) as (a, b, _),
        Client.http(a, protocol="2026-07-28", elicitation=nobody) as at_a,
        Client.http(b, protocol="2026-07-28") as at_b,
    ):
        handle = await at_a.start_tool("chore")
        assert handle.id is not None
        admin = Redis.from_url(redis.url)
        try:
            with anyio.fail_after(60):
                await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
                seen = await at_b.request("tasks/get", {"taskId": handle.id})
                await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
                await at_b.request("tasks/cancel", {"taskId": handle.id})
                final = await at_a.request("tasks/get", {"taskId": handle.id})
        finally:
            await admin.aclose()
    assert seen["taskId"] == handle.id and seen["status"] in ("working", "input_required"), seen
    assert final["status"] == "cancelled"


async def test_requests_waiting_for_redis_on_both_eras_share_one_bound(redis: RedisServer) -> None:
    """A replica holds at most ``max_waiting`` requests of either era for a paused Redis: a 2026-07-28
    ``tasks/get`` waiting takes the one place, so a 2025-11-25 request for another replica's session is refused
    at once with a retryable 503, and the ``tasks/get`` is answered once Redis is back."""
    from redis.asyncio import Redis

    async with (
        two_replicas(redis.url, tasking, lease=1.0, timeout=1.0) as (a, b, apps),
        Client.http(a, protocol="2026-07-28", elicitation=nobody) as at_a,
        Client.http(b, protocol="2026-07-28") as at_b,
        httpx.AsyncClient(timeout=60) as http,
    ):
        handle = await at_a.start_tool("chore")
        headers = await open_session(http, a)
        apps[1]._hold.max_waiting = 1
        admin = Redis.from_url(redis.url)
        seen: list[dict[str, Any]] = []
        try:
            with anyio.fail_after(90):
                async with anyio.create_task_group() as tg:
                    await admin.execute_command("CLIENT", "PAUSE", "8000", "ALL")

                    async def poll() -> None:
                        seen.append(await at_b.request("tasks/get", {"taskId": handle.id}))

                    tg.start_soon(poll)
                    while apps[1]._hold.waiting < 1:
                        await anyio.sleep(0.05)
                    refused = await http.post(b, json=rpc("tools/list", id=3), headers=headers)
        finally:
            await admin.aclose()
    assert refused.status_code == 503 and refused.headers.get("retry-after") == "1"
    assert refused.json()["error"]["data"]["retryable"] is True
    assert [task["taskId"] for task in seen] == [handle.id]


async def test_a_stream_left_as_soon_as_it_opened_is_not_held_by_its_owner(redis: RedisServer) -> None:
    """A client leaves the standalone stream B relays from A right after it opened, before A's pump for it has
    started (A's task resumes late after telling B the stream opened, as under load or when Redis answers many
    commands at once after a pause): A must still stop that pump when B's detach arrives, so the client's next GET
    gets the stream instead of 409 "already being delivered"."""
    async with two_replicas(redis.url) as (a, b, apps), httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, a)
        peers = apps[0]._handshake._peers
        sent = peers._send

        async def late_after_opening(replica: str, message: Any) -> None:
            await sent(replica, message)
            if isinstance(message, Opened):
                await anyio.sleep(1)

        peers._send = late_after_opening  # type: ignore[method-assign]
        with anyio.fail_after(60):
            async with http.stream("GET", b, headers=headers) as first:
                assert first.status_code == 200
            await anyio.sleep(2)  # B's detach reaches A meanwhile, before its pump starts
            peers._send = sent  # type: ignore[method-assign]
            async with http.stream("GET", b, headers=headers) as second:
                again = second.status_code
    assert again == 200


async def test_a_stream_refused_after_a_try_that_reached_its_owner_late_is_not_held_there(redis: RedisServer) -> None:
    """A GET for A's standalone stream lands on B, whose last try at asking A for it timed out (B answers 503),
    yet reached A (Redis ran it late): A must not pump that stream to nobody, so the client's next GET gets it
    instead of 409 "already being delivered"."""
    async with two_replicas(redis.url) as (a, b, apps), httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, a)
        handshake = apps[1]._handshake
        patiently = handshake._patiently

        async def arrived_late(attempt: Callable[[], Awaitable[Any]], until: float | None) -> Any:
            result = await attempt()
            if getattr(attempt, "__name__", "") == "send":  # the relay's request to A: sent, then "timed out"
                raise StoreUnavailable("timed out (yet Redis ran it)")
            return result

        handshake._patiently = arrived_late  # type: ignore[method-assign]
        with anyio.fail_after(60):
            refused = await http.get(b, headers=headers)
            handshake._patiently = patiently  # type: ignore[method-assign]
            await anyio.sleep(2)  # A reads the late request, then whatever follows it
            async with http.stream("GET", b, headers=headers) as again:
                status = again.status_code
    assert refused.status_code == 503
    assert status == 200


class DeletesTo(httpx.AsyncHTTPTransport):
    """Sends the client's DELETE to the replica at ``url``, everything else where asked; records the DELETE's
    session and status."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.target = httpx.URL(url)
        self.deleted: list[tuple[str | None, int]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "DELETE":
            return await super().handle_async_request(request)
        request.url = request.url.copy_with(port=self.target.port)
        response = await super().handle_async_request(request)
        self.deleted.append((request.headers.get("mcp-session-id"), response.status_code))
        return response


async def test_the_official_sdk_ending_its_session_while_redis_is_paused_ends_it(redis: RedisServer) -> None:
    """The official SDK's client ends its session with DELETE as it closes, once, and only logs a refusal (the
    session then lived on until its idle timeout). Its DELETE lands on B while Redis is paused, and A runs the
    session: B waits for Redis and the session ends."""
    from redis.asyncio import Redis

    async with two_replicas(redis.url, lease=1.0, timeout=1.0) as (a, b, _), httpx.AsyncClient(timeout=60) as plain:
        admin = Redis.from_url(redis.url)
        transport = DeletesTo(b)
        try:
            with anyio.fail_after(90):
                async with (
                    httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(30, read=300)) as http,
                    McpClient(streamable_http_client(a, http_client=http), mode="legacy") as client,
                ):
                    await client.list_tools()
                    await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
                ((session_id, status),) = transport.deleted
                assert session_id is not None
                headers = {**HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
                after = await plain.post(a, json=rpc("ping", id=2), headers=headers)
        finally:
            await admin.aclose()
    assert status == 200
    assert after.status_code == 404
