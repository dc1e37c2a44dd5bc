"""Many people on one ``--listen`` proxy: each answers only their own questions and sees only their own progress,
logs and results, whatever request ids and progress tokens their clients choose (elicitor's client numbers both the
same way in every process, so every client here collides with every other on purpose).

The checker: every question a person is shown names that person's own call; every progress and log message they
receive names it too; every result carries their own answer. All calls wait on their questions at the same moment (a
barrier), so a proxy routing by arrival order rather than by call would hand a question to the wrong person.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from elicitor import Accepted, AccessToken, Client, Context, ElicitationRequest, Protection, ScriptedHandler, Server
from elicitor.proxy import ProxyServer
from elicitor.types import JSONObject

from .test_proxy import in_memory


@dataclass
class Name:
    name: str


class Names:
    """A token verifier for the test: the bearer token is the person's name."""

    async def verify(self, token: str) -> AccessToken | None:
        return AccessToken(subject=token)


def make_server() -> Server:
    server = Server("shared", "1.0")

    @server.tool()
    async def greet(ctx: Context, tag: str) -> str:
        """Reports progress and logs naming the call, asks a name, reports again, and answers with both."""
        await ctx.report_progress(1, 3, f"{tag} started")
        await ctx.log("info", f"{tag} logged")
        outcome = await ctx.elicit(f"Name for {tag}?", Name)
        await ctx.report_progress(2, 3, f"{tag} answered")
        return f"{tag}:{outcome.data.name}" if isinstance(outcome, Accepted) else f"{tag}:{outcome.action}"

    return server


def slow_server(monkeypatch: Any) -> tuple[Server, anyio.Event, list[str]]:
    """``make_server()`` with a tool ``slow(tag)`` that runs until ``release`` is set, asking nothing (its caller's
    request stays in flight meanwhile), noting each tag in ``started`` as it starts; and the proxy's room for held
    calls made 4, 2 per person. Returns the server, ``release`` and ``started``."""
    from elicitor.proxy import _held

    monkeypatch.setattr(_held, "MAX_HELD_CALLS", 4)
    monkeypatch.setattr(_held, "MAX_HELD_PER_PERSON", 2)
    server = make_server()
    release = anyio.Event()
    started: list[str] = []

    @server.tool()
    async def slow(tag: str) -> str:
        """Runs until released, asking nothing: its caller's request stays in flight meanwhile."""
        started.append(tag)
        await release.wait()
        return f"{tag} done"

    return server, release, started


@pytest.mark.parametrize("people", [2, 20])
@pytest.mark.parametrize("upstream", ["2025-11-25", "auto"])
async def test_people_on_one_listen_proxy_see_only_their_own_calls(
    anyio_backend: str, people: int, upstream: str
) -> None:
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    from .conftest import serving

    server = make_server()
    everyone_asked = anyio.Event()
    asked = 0
    seen: dict[str, list[str]] = {}
    progress: dict[str, list[str]] = {}
    logs: dict[str, list[str]] = {}
    results: dict[str, str] = {}

    def handler_for(person: str) -> Any:
        async def answer(request: ElicitationRequest) -> Any:
            nonlocal asked
            seen[person].append(request.message)
            asked += 1
            if asked == people:
                everyone_asked.set()
            await everyone_asked.wait()  # every call waits on its question at once
            return Accepted({"name": person})

        return answer

    async def one(url: str, index: int) -> None:
        person = f"user{index}"
        seen[person], progress[person], logs[person] = [], [], []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress[person].append(str(message))

        async def on_log(level: str, data: Any, logger: str | None) -> None:
            logs[person].append(str(data))

        era = "2025-11-25" if index % 3 == 2 else "2026-07-28"  # two people: both stateless; twenty: both eras
        headers = {"Authorization": f"Bearer {person}"}
        async with Client.http(
            url, elicitation=handler_for(person), protocol=era, headers=headers, on_log=on_log, log_level="info"
        ) as client:
            results[person] = (await client.call_tool("greet", {"tag": person}, progress=on_progress)).text

    with anyio.fail_after(60):  # a proxy that misroutes may leave a call waiting forever: end the test instead
        async with anyio.create_task_group() as tg:
            proxy = ProxyServer(in_memory(server, tg), upstream_protocol=upstream)
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            async with serving(proxy.http_app(auth=protection)) as url, anyio.create_task_group() as clients:
                for index in range(people):
                    clients.start_soon(one, url, index)
            tg.cancel_scope.cancel()

    for index in range(people):
        person = f"user{index}"
        assert seen[person] == [f"Name for {person}?"], person
        assert results[person] == f"{person}:{person}"
        assert progress[person], person  # progress reached them, and only theirs:
        assert all(message.startswith(f"{person} ") for message in progress[person]), progress[person]
        assert logs[person] == [f"{person} logged"], logs[person]  # theirs, once, on either era


async def test_a_connection_whose_call_was_given_up_never_carries_another_persons_call(anyio_backend: str) -> None:
    """A slow server may still act on a call the proxy gave up (its person went away, the call was cancelled
    upstream): here it asks that call's second question when the next call arrives on the same connection. The
    next person (anonymous, declaring the same capabilities, so the proxy would reuse an idle connection) must
    never be shown it: a connection whose call did not end with the server's answer is closed, not kept idle."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    import json

    from elicitor.transports import memory_pair

    from .conftest import serving

    a_asked, a_cancelled = anyio.Event(), anyio.Event()
    shown_to_b: list[str] = []

    async def raw_server(transport: Any) -> None:
        """A handshake-era server that never stops a call it was told to cancel."""
        try:
            await serve_raw(transport)
        finally:
            await transport.aclose()

    async def serve_raw(transport: Any) -> None:
        given_up: list[object] = []

        async def send(message: dict[str, Any]) -> None:
            await transport.send(json.dumps({"jsonrpc": "2.0", **message}).encode())

        while True:
            try:
                message = json.loads(await transport.receive())
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return
            method, request_id, params = message.get("method"), message.get("id"), message.get("params") or {}
            if method == "initialize":
                result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                          "serverInfo": {"name": "slow", "version": "0"}}  # fmt: skip
                await send({"id": request_id, "result": result})
            elif method == "server/discover":
                await send({"id": request_id, "error": {"code": -32601, "message": "Method not found"}})
            elif method == "notifications/cancelled":
                given_up.append(params.get("requestId"))
                a_cancelled.set()
            elif method == "tools/call" and params.get("name") == "first":
                form = {"type": "object", "properties": {"name": {"type": "string"}}}
                ask = {"message": "A's first question", "requestedSchema": form}
                await send({"id": "a1", "method": "elicitation/create", "params": ask})
            elif method == "tools/call":
                if given_up:  # still running A's call: its next question
                    ask = {"message": "A's second question", "requestedSchema": {"type": "object", "properties": {}}}
                    await send({"id": "a2", "method": "elicitation/create", "params": ask})
                await send({"id": request_id, "result": {"content": [{"type": "text", "text": "B's result"}]}})
            elif request_id is not None and method is not None:
                await send({"id": request_id, "result": {}})

    async def person_a(request: ElicitationRequest) -> Any:
        a_asked.set()
        await anyio.sleep_forever()  # A walks away from the question

    async def person_b(request: ElicitationRequest) -> Any:
        shown_to_b.append(request.message)
        return Accepted({})

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:

            async def connect() -> Any:
                up_end, server_end = memory_pair()
                tg.start_soon(raw_server, server_end)
                return up_end

            proxy = ProxyServer(connect, upstream_protocol="2025-11-25", elicitation_timeout=0.5)
            async with serving(proxy.http_app()) as url:
                async with (
                    Client.http(url, elicitation=person_a, protocol="2026-07-28") as a,
                    anyio.create_task_group() as calls,
                ):
                    calls.start_soon(a.call_tool, "first")
                    await a_asked.wait()
                    calls.cancel_scope.cancel()
                await a_cancelled.wait()  # the proxy gave A's call up after its time without progress
                async with Client.http(url, elicitation=person_b, protocol="2026-07-28") as b:
                    assert (await b.call_tool("second")).text == "B's result"
            tg.cancel_scope.cancel()
    assert shown_to_b == []


@pytest.mark.parametrize("bob_era", ["2026-07-28", "2025-11-25"])
async def test_a_task_of_one_person_is_nobody_elses_through_the_proxy(anyio_backend: str, bob_era: str) -> None:
    """A 2026-07-28 server binds each task to who created it; through the proxy it sees one client whoever asks.
    Alice creates a task; Bob, signed in as himself and holding her task's id, gets "unknown task" for it, on
    either era, while Alice reads her result."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    from elicitor import JSONRPCError

    from .conftest import serving

    server = Server("tasks", "1", task_poll_interval=0.05)

    @server.tool(task="required")
    async def secret(who: str) -> str:
        return f"the secret of {who}"

    def as_bob(url: str) -> Any:
        return Client.http(url, protocol=bob_era, headers={"Authorization": "Bearer bob"})

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            proxy = ProxyServer(in_memory(server, tg), upstream_protocol="2026-07-28")
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            async with (
                serving(proxy.http_app(auth=protection)) as url,
                Client.http(url, protocol="2026-07-28", headers={"Authorization": "Bearer alice"}) as alice,
                as_bob(url) as bob,
            ):
                created = await alice.request("tools/call", {"name": "secret", "arguments": {"who": "alice"}})
                assert created["resultType"] == "task"
                task_id = created["taskId"]
                while (await alice.request("tasks/get", {"taskId": task_id}))["status"] != "completed":
                    await anyio.sleep(0.05)
                mine = await alice.request("tasks/get", {"taskId": task_id})
                assert mine["result"]["content"][0]["text"] == "the secret of alice"
                for method in ("tasks/get", "tasks/cancel"):
                    with pytest.raises(JSONRPCError, match="unknown task") as refused:
                        await bob.request(method, {"taskId": task_id})
                    assert refused.value.code == -32602
                    assert "alice" not in str(refused.value.data)
            tg.cancel_scope.cancel()


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from .replicas import REDIS, RedisServer

    if REDIS is None:
        pytest.skip("redis-server is not installed")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("bob_era", ["2025-11-25", "2026-07-28"])
async def test_a_handshake_era_task_of_one_person_is_nobody_elses_through_the_proxy(
    anyio_backend: str, redis: Any, bob_era: str
) -> None:
    """A 2025-11-25 server whose tasks outlive their session (replicas sharing a store; likewise a server that
    authenticated the proxy) binds them to the principal it sees: through the proxy, one for everybody. Alice
    creates a task on her session; Bob, on his own session or on 2026-07-28 (his requests then go on upstream
    connections of the proxy's own), holding her task's id, gets "unknown task" for tasks/get, tasks/result and
    tasks/cancel, while Alice reads her result."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    import secrets

    from elicitor import JSONRPCError
    from elicitor.state._redis import RedisStore

    from .conftest import serving

    store = RedisStore(redis.url, prefix=f"proxy-{secrets.token_hex(4)}:", lease=1.0)
    server = Server("tasks", "1", store=store, task_poll_interval=0.05)

    @server.tool(task="required")
    async def secret(who: str) -> str:
        return f"the secret of {who}"

    def person(url: str, name: str, era: str = "2025-11-25") -> Any:
        return Client.http(url, protocol=era, headers={"Authorization": f"Bearer {name}"})

    with anyio.fail_after(60):
        async with store.running(), anyio.create_task_group() as tg:
            proxy = ProxyServer(in_memory(server, tg), upstream_protocol="2025-11-25")
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            async with (
                serving(proxy.http_app(auth=protection)) as url,
                person(url, "alice") as alice,
                person(url, "bob", bob_era) as bob,
            ):
                call = {"name": "secret", "arguments": {"who": "alice"}, "task": {"ttl": 60_000}}
                task_id = (await alice.request("tools/call", call))["task"]["taskId"]
                mine = await alice.request("tasks/result", {"taskId": task_id})
                assert mine["content"][0]["text"] == "the secret of alice"
                for method in ("tasks/get", "tasks/result", "tasks/cancel"):
                    with pytest.raises(JSONRPCError, match="unknown task") as refused:
                        await bob.request(method, {"taskId": task_id})
                    assert refused.value.code == -32602
                assert (await alice.request("tasks/get", {"taskId": task_id}))["status"] == "completed"
            tg.cancel_scope.cancel()


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_one_persons_idempotency_key_never_reaches_another_persons_call(
    anyio_backend: str, redis: Any, era: str
) -> None:
    """A handshake-era server sharing a store keeps each call under its idempotency key, bound to the principal
    it sees: through the proxy, one for everybody. Bob sending the key of Alice's call (the same tool, the same
    arguments) must get a call of his own, never Alice's result, on either era; Alice sending hers again gets
    her own."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    import secrets

    from elicitor.state._redis import RedisStore

    from .conftest import serving

    store = RedisStore(redis.url, prefix=f"proxy-{secrets.token_hex(4)}:", lease=1.0)
    server = Server("kept", "1", store=store)
    runs: list[int] = []

    @server.tool()
    async def count() -> str:
        runs.append(1)
        return f"run {len(runs)}"

    def person(url: str, name: str) -> Any:
        return Client.http(url, protocol=era, headers={"Authorization": f"Bearer {name}"})

    key = {"dev.elicitor/idempotencyKey": secrets.token_urlsafe(18)}
    call = {"name": "count", "arguments": {}, "_meta": key}
    with anyio.fail_after(60):
        async with store.running(), anyio.create_task_group() as tg:
            proxy = ProxyServer(in_memory(server, tg), upstream_protocol="2025-11-25")
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            async with (
                serving(proxy.http_app(auth=protection)) as url,
                person(url, "alice") as alice,
                person(url, "bob") as bob,
            ):
                assert (await alice.request("tools/call", call))["content"][0]["text"] == "run 1"
                assert (await bob.request("tools/call", call))["content"][0]["text"] == "run 2"
                assert (await alice.request("tools/call", call))["content"][0]["text"] == "run 1"  # kept: hers
            tg.cancel_scope.cancel()
    assert len(runs) == 2


async def test_a_handshake_era_task_list_through_the_proxy_shows_each_person_their_own(anyio_backend: str) -> None:
    """A 2025-11-25 server that lists the tasks of the principal it sees (the proxy, for everybody, when the proxy
    signed in to it) would show Bob Alice's tasks: through the proxy each person's ``tasks/list`` has their own."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    import json

    from elicitor.transports import memory_pair

    from .conftest import serving

    everyone: list[JSONObject] = []  # the server's tasks, all bound to the one client it sees

    async def raw_server(transport: Any) -> None:
        try:
            await serve_raw(transport)
        finally:
            await transport.aclose()

    async def serve_raw(transport: Any) -> None:
        async def send(message: dict[str, Any]) -> None:
            await transport.send(json.dumps({"jsonrpc": "2.0", **message}).encode())

        while True:
            try:
                message = json.loads(await transport.receive())
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return
            method, request_id = message.get("method"), message.get("id")
            if method == "initialize":
                capabilities: JSONObject = {"tools": {}, "tasks": {"list": {}, "requests": {"tools": {"call": {}}}}}
                result = {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                          "serverInfo": {"name": "lister", "version": "0"}}  # fmt: skip
                await send({"id": request_id, "result": result})
            elif method == "tools/call":
                task = {"taskId": f"task-{len(everyone) + 1}", "status": "working", "ttl": 60_000,
                        "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z"}  # fmt: skip
                everyone.append(task)
                await send({"id": request_id, "result": {"task": task}})
            elif method == "tasks/list":
                await send({"id": request_id, "result": {"tasks": everyone}})
            elif request_id is not None and method is not None:
                await send({"id": request_id, "result": {}})

    def person(url: str, name: str) -> Any:
        return Client.http(url, protocol="2025-11-25", headers={"Authorization": f"Bearer {name}"})

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:

            async def connect() -> Any:
                up_end, server_end = memory_pair()
                tg.start_soon(raw_server, server_end)
                return up_end

            proxy = ProxyServer(connect, upstream_protocol="2025-11-25")
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            async with (
                serving(proxy.http_app(auth=protection)) as url,
                person(url, "alice") as alice,
                person(url, "bob") as bob,
            ):
                call = {"name": "work", "arguments": {}, "task": {"ttl": 60_000}}
                hers = (await alice.request("tools/call", call))["task"]["taskId"]
                his = (await bob.request("tools/call", call))["task"]["taskId"]
                assert [t["taskId"] for t in (await alice.request("tasks/list", {}))["tasks"]] == [hers]
                assert [t["taskId"] for t in (await bob.request("tasks/list", {}))["tasks"]] == [his]
            tg.cancel_scope.cancel()


async def test_one_persons_many_held_calls_never_end_anothers(anyio_backend: str, monkeypatch: Any) -> None:
    """The proxy holds at most ``MAX_HELD_CALLS`` (2 here) calls for 2026-07-28 clients of a handshake-era
    server. Alice fills them, both waiting on her answers; Bob's call is refused ("retry later") instead of
    ending one of hers, and hers then finish with her answers."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    from elicitor import JSONRPCError
    from elicitor.proxy import _held

    from .conftest import serving

    monkeypatch.setattr(_held, "MAX_HELD_CALLS", 2)
    server = make_server()
    both_asked, answer = anyio.Event(), anyio.Event()
    asked: list[str] = []
    results: list[str] = []

    async def alice_answers(request: ElicitationRequest) -> Any:
        asked.append(request.message)
        if len(asked) == 2:
            both_asked.set()
        await answer.wait()
        return Accepted({"name": "alice"})

    def person(name: str, handler: Any) -> Any:
        headers = {"Authorization": f"Bearer {name}"}
        return Client.http(url, elicitation=handler, protocol="2026-07-28", headers=headers)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            proxy = ProxyServer(in_memory(server, tg), upstream_protocol="2025-11-25")
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            async with serving(proxy.http_app(auth=protection)) as url, person("alice", alice_answers) as alice:

                async def call(tag: str) -> None:
                    results.append((await alice.call_tool("greet", {"tag": tag})).text)

                async with anyio.create_task_group() as calls:
                    calls.start_soon(call, "a1")
                    calls.start_soon(call, "a2")
                    await both_asked.wait()
                    async with person("bob", alice_answers) as bob:
                        with pytest.raises(JSONRPCError, match="calls are held through the proxy; retry later"):
                            await bob.call_tool("greet", {"tag": "b"})
                    answer.set()
            tg.cancel_scope.cancel()
    assert sorted(results) == ["a1:alice", "a2:alice"]
    assert len(asked) == 2  # Bob was never asked anything


async def test_one_person_has_a_fair_share_of_held_calls_and_another_still_gets_in(
    anyio_backend: str, monkeypatch: Any
) -> None:
    """Each person may have ``MAX_HELD_PER_PERSON`` (2 here) calls held of ``MAX_HELD_CALLS`` (4 here). Alice
    starts four calls, each waiting on her answer: her third and fourth cancel her own oldest two (which end
    saying why), never filling the proxy, so Bob's call goes through and is answered. A fifth call of Alice's
    while she waits on both of her others (her client's requests in flight) is refused, saying she has too many."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    from elicitor import JSONRPCError

    from .conftest import serving

    server, release, started = slow_server(monkeypatch)

    asked: list[str] = []
    four_asked, answer = anyio.Event(), anyio.Event()
    outcomes: dict[str, str] = {}

    async def alice_answers(request: ElicitationRequest) -> Any:
        asked.append(request.message)
        if len(asked) == 4:
            four_asked.set()
        await answer.wait()
        return Accepted({"name": "alice"})

    def person(url: str, name: str, handler: Any) -> Any:
        headers = {"Authorization": f"Bearer {name}"}
        return Client.http(url, elicitation=handler, protocol="2026-07-28", headers=headers)

    with anyio.fail_after(90):
        async with anyio.create_task_group() as tg:
            proxy = ProxyServer(in_memory(server, tg), upstream_protocol="2025-11-25")
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            async with serving(proxy.http_app(auth=protection)) as url, person(url, "alice", alice_answers) as alice:

                async def call(tag: str) -> None:
                    try:
                        outcomes[tag] = (await alice.call_tool("greet", {"tag": tag})).text
                    except JSONRPCError as exc:
                        outcomes[tag] = exc.message

                async with anyio.create_task_group() as calls:
                    for tag in ("a1", "a2", "a3", "a4"):
                        calls.start_soon(call, tag)
                        while len(asked) < int(tag[1]):  # one at a time: which is oldest is known
                            await anyio.sleep(0.01)
                    await four_asked.wait()
                    async with person(url, "bob", ScriptedHandler([{"name": "bob"}])) as bob:
                        assert (await bob.call_tool("greet", {"tag": "b"})).text == "b:bob"
                    answer.set()
                assert outcomes["a3"] == "a3:alice" and outcomes["a4"] == "a4:alice"
                for tag in ("a1", "a2"):
                    assert "the call was cancelled: you had 2 calls held through the proxy" in outcomes[tag], outcomes

                async with anyio.create_task_group() as calls:

                    async def slow_call(tag: str) -> None:
                        await alice.call_tool("slow", {"tag": tag})

                    for tag in ("s1", "s2"):
                        calls.start_soon(slow_call, tag)
                    while len(started) < 2:
                        await anyio.sleep(0.01)
                    with pytest.raises(JSONRPCError) as refused:
                        await alice.call_tool("slow", {"tag": "s3"})
                    release.set()
                assert "2 of your calls are in progress through the proxy, the most one person may" in (
                    refused.value.message
                )
                assert refused.value.data == {"heldCalls": 2, "maxPerPerson": 2}
                assert started == ["s1", "s2"]  # the refused call never reached the server
            tg.cancel_scope.cancel()


async def test_without_a_sign_in_callers_are_not_held_to_one_persons_share(
    anyio_backend: str, monkeypatch: Any
) -> None:
    """Without a sign-in nobody can be told apart, so anonymous callers are not all one person with one share:
    with a share of 2 and room for 4, three calls in flight at once are all held and all answered."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    from .conftest import serving

    server, release, started = slow_server(monkeypatch)

    results: list[str] = []
    with anyio.fail_after(90):
        async with anyio.create_task_group() as tg:
            proxy = ProxyServer(in_memory(server, tg), upstream_protocol="2025-11-25")
            async with (
                serving(proxy.http_app()) as url,
                Client.http(url, elicitation=ScriptedHandler([]), protocol="2026-07-28") as anyone,
            ):

                async def slow_call(tag: str) -> None:
                    results.append((await anyone.call_tool("slow", {"tag": tag})).text)

                async with anyio.create_task_group() as calls:
                    for tag in ("s1", "s2", "s3"):
                        calls.start_soon(slow_call, tag)
                    while len(started) < 3:
                        await anyio.sleep(0.01)
                    release.set()
            tg.cancel_scope.cancel()
    assert sorted(results) == ["s1 done", "s2 done", "s3 done"]


async def test_one_person_has_a_fair_share_of_handshake_sessions_and_another_still_gets_in(
    anyio_backend: str, monkeypatch: Any
) -> None:
    """Each handshake-era session holds an upstream connection of its own; a signed-in person may have
    ``MAX_SESSIONS_PER_PERSON`` (2 here) open at once. Alice's third is refused at ``initialize``, saying why, and
    opens no upstream connection; Bob still gets in; once Alice closes one of hers, she gets in again."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    from elicitor import JSONRPCError
    from elicitor.proxy import _http

    from .conftest import serving

    monkeypatch.setattr(_http, "MAX_SESSIONS_PER_PERSON", 2)
    server = make_server()
    opened: list[int] = []

    def person(url: str, name: str) -> Any:
        headers = {"Authorization": f"Bearer {name}"}
        return Client.http(url, elicitation=ScriptedHandler([{"name": name}]), protocol="2025-11-25", headers=headers)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            proxy = ProxyServer(in_memory(server, tg, opened), upstream_protocol="2025-11-25")
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            async with serving(proxy.http_app(auth=protection)) as url:
                async with person(url, "alice") as first, person(url, "alice") as second:
                    assert len(opened) == 2
                    with pytest.raises(JSONRPCError) as refused:
                        async with person(url, "alice"):
                            pass
                    assert "you have 2 sessions open through the proxy, the most one person may" in (
                        refused.value.message
                    )
                    assert refused.value.data == {"sessions": 2, "maxPerPerson": 2}
                    assert len(opened) == 2  # the refused session opened no upstream connection
                    async with person(url, "bob") as bob:
                        assert (await bob.call_tool("greet", {"tag": "b"})).text == "b:bob"
                    assert (await first.call_tool("greet", {"tag": "a1"})).text == "a1:alice"
                    assert (await second.call_tool("greet", {"tag": "a2"})).text == "a2:alice"
                with anyio.fail_after(10):
                    while proxy._sessions:  # her sessions end as their clients close them
                        await anyio.sleep(0.01)
                async with person(url, "alice") as again:
                    assert (await again.call_tool("greet", {"tag": "a3"})).text == "a3:alice"
            tg.cancel_scope.cancel()


async def test_a_2026_07_28_round_of_one_person_cannot_be_answered_by_another_through_the_proxy(
    anyio_backend: str,
) -> None:
    """A 2026-07-28 server binds the ``requestState`` of a round to who asked; through the proxy it sees one client
    whoever asks. Bob, holding the state of Alice's round (and her call's arguments), is refused with -32602 and
    never reaches her call; Alice answers her own round."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    from elicitor import JSONRPCError

    from .conftest import serving

    server = make_server()

    def person(url: str, name: str) -> Any:
        headers = {"Authorization": f"Bearer {name}"}
        return Client.http(url, protocol="2026-07-28", headers=headers, elicitation=ScriptedHandler([]))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            proxy = ProxyServer(in_memory(server, tg), upstream_protocol="2026-07-28")
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            async with (
                serving(proxy.http_app(auth=protection)) as url,
                person(url, "alice") as alice,
                person(url, "bob") as bob,
            ):
                call: JSONObject = {"name": "greet", "arguments": {"tag": "alice"}}
                asked = await alice.request("tools/call", call)
                assert asked["resultType"] == "input_required"
                (key,) = asked["inputRequests"]
                state = asked["requestState"]
                answer = {key: {"action": "accept", "content": {"name": "bob"}}}
                with pytest.raises(JSONRPCError) as refused:
                    await bob.request("tools/call", {**call, "inputResponses": answer, "requestState": state})
                assert refused.value.code == -32602
                mine = {key: {"action": "accept", "content": {"name": "alice"}}}
                done = await alice.request("tools/call", {**call, "inputResponses": mine, "requestState": state})
                assert done["content"][0]["text"] == "alice:alice"
            tg.cancel_scope.cancel()


def test_a_task_the_proxy_never_saw_is_the_servers_to_answer_without_sign_in() -> None:
    """Without authentication a task id is all it takes, as on the server itself: an id the proxy did not see
    created goes to the server, which answers as it would (-32021 to a client without the tasks extension, -32601
    for ``tasks/result`` on 2026-07-28, unknown task). With sign-in it is nobody's, and one person's task stays
    theirs either way."""
    from elicitor import JSONRPCError
    from elicitor.proxy._owners import TaskOwners

    owners = TaskOwners()
    owners.created({"resultType": "task", "taskId": "alices"}, "alice")
    owners.created({"task": {"taskId": "anyones"}}, None)
    for method in ("tasks/get", "tasks/result", "tasks/update", "tasks/cancel"):
        owners.check(method, {"taskId": "made-up"}, None)  # forwarded: the server answers
        owners.check(method, {"taskId": "anyones"}, None)
        owners.check(method, {"taskId": "alices"}, "alice")
        for principal, task_id in ((None, "alices"), ("bob", "alices"), ("bob", "made-up"), ("bob", "anyones")):
            with pytest.raises(JSONRPCError) as refused:
                owners.check(method, {"taskId": task_id}, principal)
            assert refused.value.code == -32602


@pytest.mark.parametrize("anonymous", [False, True])
async def test_a_2026_07_28_servers_logs_reach_only_the_caller_through_one_shared_upstream_connection(
    anyio_backend: str, anonymous: bool
) -> None:
    """Two 2026-07-28 clients of one ``--listen`` proxy in front of a 2026-07-28 server over Streamable HTTP: their
    calls share one upstream connection, and run at the same moment (the tool waits until both are in). Each
    person gets their own call's log messages and progress, in order, and never the other's: the proxy routes them
    by the response stream the server sent them on, not by arrival."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    from elicitor.client._http import HttpClientTransport

    from .conftest import serving

    server = Server("logs", "1.0")
    both_in = anyio.Event()
    inside = 0

    @server.tool()
    async def work(ctx: Context, tag: str) -> str:
        """Logs and reports before and after every call is in, so the two calls' messages interleave."""
        nonlocal inside
        await ctx.log("info", f"{tag} before")
        await ctx.report_progress(1, 2, f"{tag} half")
        inside += 1
        if inside == 2:
            both_in.set()
        await both_in.wait()
        await ctx.log("warning", f"{tag} after")
        return tag

    logs: dict[str, list[str]] = {"ann": [], "bob": []}
    progress: dict[str, list[str]] = {"ann": [], "bob": []}
    results: dict[str, str] = {}

    async def one(url: str, person: str) -> None:
        async def on_log(level: str, data: Any, logger: str | None) -> None:
            logs[person].append(str(data))

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress[person].append(str(message))

        headers = {} if anonymous else {"Authorization": f"Bearer {person}"}
        async with Client.http(url, protocol="2026-07-28", headers=headers, on_log=on_log, log_level="info") as client:
            results[person] = (await client.call_tool("work", {"tag": person}, progress=on_progress)).text

    with anyio.fail_after(60):
        async with serving(server.http_app()) as upstream_url, anyio.create_task_group() as tg:
            proxy = ProxyServer(lambda: HttpClientTransport.connect(upstream_url), upstream_protocol="2026-07-28")
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            app = proxy.http_app() if anonymous else proxy.http_app(auth=protection)
            async with serving(app) as url, anyio.create_task_group() as clients:
                for person in ("ann", "bob"):
                    clients.start_soon(one, url, person)
            tg.cancel_scope.cancel()

    assert results == {"ann": "ann", "bob": "bob"}
    for person in ("ann", "bob"):
        assert logs[person] == [f"{person} before", f"{person} after"], logs
        assert progress[person] == [f"{person} half"], progress


async def test_a_call_whose_client_cannot_take_its_logs_still_gets_its_answer(anyio_backend: str) -> None:
    """The person's side of a call is gone (passing a log message on fails) while the 2026-07-28 server goes on
    sending them on the call's response stream: the proxy's upstream connection reads the stream on and the call
    still ends with the server's answer; the connection serves the next call."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    from elicitor._exceptions import ConnectionClosed
    from elicitor.client._http import HttpClientTransport
    from elicitor.proxy._downstream import Downstream
    from elicitor.proxy._upstream import Route, Upstream

    from .conftest import serving

    server = Server("chatty", "1.0")

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Logs twice, then answers."""
        await ctx.log("info", "one")
        await ctx.log("info", "two")
        return "done"

    async def gone(method: str, params: JSONObject) -> None:
        raise ConnectionClosed("the client is not connected")

    with anyio.fail_after(30):
        async with serving(server.http_app()) as url, anyio.create_task_group() as tg:
            upstream = Upstream(lambda: HttpClientTransport.connect(url), wanted="2026-07-28", mirrored={})
            ready = anyio.Event()
            tg.start_soon(upstream.run, ready.set)
            await ready.wait()
            down = Downstream("2026-07-28", {}, None, None, None, "info")
            await upstream.learn(down)
            assert upstream.revision is not None
            params = down.with_meta({"name": "chatty", "arguments": {}}, upstream.revision)
            for _ in range(2):
                result = await upstream.request("tools/call", params, route=Route(gone, None))
                assert result["content"][0]["text"] == "done"
            upstream.close()


LOGGING_SERVER = """
import anyio
from elicitor import Context, Server

server = Server("logs", "1")


@server.tool()
async def work(ctx: Context, tag: str, hold: float = 0.0) -> str:
    await ctx.log("info", f"{tag} before")
    await ctx.log("debug", f"{tag} detail")
    await anyio.sleep(hold)
    await ctx.log("warning", f"{tag} after")
    return tag


server.run()
"""


@pytest.mark.parametrize("anonymous", [False, True])
async def test_a_2026_07_28_stdio_servers_logs_reach_only_the_caller_behind_listen(
    anyio_backend: str, anonymous: bool
) -> None:
    """Two 2026-07-28 clients of one ``--listen`` proxy in front of a 2026-07-28 server started as a child process
    (stdio: nothing in a log message says whose call it is about, and both calls share the one connection), both
    asking for log messages at ``info``, their calls running at the same moment. Ann's call, in first, hears its
    own messages at its level; Bob's, made while Ann's runs, is forwarded without its level and hears none (the
    server sends none to a request that did not ask), never Ann's; Bob's next call, alone, hears its own."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio, and one backend is enough for subprocesses")
    import sys

    from elicitor.transports import StdioClientTransport

    from .conftest import serving

    logs: dict[str, list[str]] = {"ann": [], "bob": []}
    results: list[str] = []
    ann_in = anyio.Event()

    async def one(url: str, person: str, calls: list[float]) -> None:
        async def on_log(level: str, data: Any, logger: str | None) -> None:
            logs[person].append(str(data))
            if data == "ann before":
                ann_in.set()

        headers = {} if anonymous else {"Authorization": f"Bearer {person}"}
        async with Client.http(url, protocol="2026-07-28", headers=headers, on_log=on_log, log_level="info") as client:
            for hold in calls:
                results.append((await client.call_tool("work", {"tag": person, "hold": hold})).text)

    command = [sys.executable, "-c", LOGGING_SERVER]

    async def start() -> Any:
        return await StdioClientTransport.start(command)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            proxy = ProxyServer(start, upstream_protocol="2026-07-28")  # every call on the one shared connection
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            app = proxy.http_app() if anonymous else proxy.http_app(auth=protection)
            async with serving(app) as url:
                async with anyio.create_task_group() as clients:
                    clients.start_soon(one, url, "ann", [4.0])  # Bob comes and goes meanwhile
                    await ann_in.wait()  # Ann's call is in, and hears its messages
                    await one(url, "bob", [0.0])
                assert logs == {"ann": ["ann before", "ann after"], "bob": []}, logs
                await one(url, "bob", [0.0])  # alone now
            tg.cancel_scope.cancel()

    assert sorted(results) == ["ann", "bob", "bob"]
    assert logs == {"ann": ["ann before", "ann after"], "bob": ["bob before", "bob after"]}, logs


async def test_a_given_up_calls_late_log_message_never_reaches_the_next_caller_behind_listen(
    anyio_backend: str,
) -> None:
    """Ann's call, which asked for log messages on the proxy's one stdio connection, is given up while the server
    has a log message about it on the way (written before the server read the cancellation; held in the pipe
    here). Bob's call, made at once and asking for log messages too, must not take it for his: the proxy lets
    nobody ask again until the server has answered a ``server/discover`` sent after the cancellation, so Bob's call
    goes without its level and the late message, whose call is gone, reaches nobody. The upstream is a scripted
    2026-07-28 server whose output is held until Bob's call has reached it."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    import json

    from elicitor.transports import Transport, memory_pair

    from .conftest import serving

    cancelled = anyio.Event()
    bob_levels: list[object] = []
    logs: dict[str, list[str]] = {"ann": [], "bob": []}

    async def scripted(end: Transport) -> None:
        try:
            await script(end)
        finally:
            with anyio.CancelScope(shield=True):
                await end.aclose()

    async def script(end: Transport) -> None:
        held: list[bytes] | None = None

        async def out(message: JSONObject) -> None:
            data = json.dumps({"jsonrpc": "2.0", **message}).encode()
            if held is not None:
                held.append(data)
            else:
                await end.send(data)

        def log(text: str) -> JSONObject:
            return {"method": "notifications/message", "params": {"level": "info", "data": text}}

        while True:
            try:
                message = json.loads(await end.receive())  # type: ignore[arg-type]
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return
            method, params = message.get("method"), message.get("params") or {}
            level = (params.get("_meta") or {}).get("io.modelcontextprotocol/logLevel")
            if method == "server/discover":
                meta = {"io.modelcontextprotocol/serverInfo": {"name": "scripted", "version": "1"}}
                await out({"id": message["id"], "result": {
                    "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}, "logging": {}},
                    "_meta": meta, "resultType": "complete"}})  # fmt: skip
            elif method == "notifications/cancelled":
                cancelled.set()
            elif method == "tools/call" and params["arguments"]["tag"] == "ann":
                await out(log("ann before"))
                held = []  # from here on the pipe holds what the server writes
                await out(log("ann late"))  # written before the cancellation is read
            elif method == "tools/call":
                bob_levels.append(level)
                if level is not None:
                    await out(log("bob before"))
                await out({"id": message["id"], "result": {"content": [{"type": "text", "text": "bob"}]}})
                for data in held or []:  # Bob's call is in: the pipe delivers, in order
                    await end.send(data)
                held = None

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:

            async def connect() -> Transport:
                up_end, server_end = memory_pair()
                tg.start_soon(scripted, server_end)
                return up_end

            proxy = ProxyServer(connect, upstream_protocol="2026-07-28")
            async with serving(proxy.http_app()) as url:

                def on_log_of(person: str) -> Any:
                    async def on_log(level: str, data: Any, logger: str | None) -> None:
                        logs[person].append(str(data))
                        if data == "ann before":
                            ann.cancel()  # the person gives the call up

                    return on_log

                ann = anyio.CancelScope()
                async with (
                    Client.http(url, protocol="2026-07-28", on_log=on_log_of("ann"), log_level="info") as a,
                    Client.http(url, protocol="2026-07-28", on_log=on_log_of("bob"), log_level="info") as b,
                ):
                    with ann:
                        await a.call_tool("work", {"tag": "ann"})
                    await cancelled.wait()
                    assert (await b.call_tool("work", {"tag": "bob"})).text == "bob"
                    assert logs == {"ann": ["ann before"], "bob": []}, logs  # the late message reached nobody
                    # The server has answered the server/discover sent after the cancellation: calls hear again.
                    assert (await b.call_tool("work", {"tag": "bob"})).text == "bob"
            tg.cancel_scope.cancel()

    assert logs == {"ann": ["ann before"], "bob": ["bob before"]}, logs
    assert bob_levels == [None, "info"]  # without its level while the server might still send Ann's; then with it


async def test_a_log_message_from_a_server_that_logs_unasked_never_reaches_another_caller_behind_listen(
    anyio_backend: str,
) -> None:
    """A 2026-07-28 stdio server that logs whether or not a request asked (against the spec, and common): Ann's call
    asked for log messages and hears them on the proxy's one connection; Bob's call, made while Ann's runs, asked
    for none, yet the server writes a log message about it. Nothing in it says whose it is: it must not reach Ann
    (it did: her call was the one hearing the connection's log messages). What the server says while Ann's call is
    alone there still reaches her."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    import json

    from elicitor.transports import Transport, memory_pair

    from .conftest import serving

    bob_answered = anyio.Event()
    logs: dict[str, list[str]] = {"ann": [], "bob": []}

    async def scripted(end: Transport) -> None:
        try:
            async with anyio.create_task_group() as calls:
                while True:
                    try:
                        message = json.loads(await end.receive())  # type: ignore[arg-type]
                    except (anyio.EndOfStream, anyio.ClosedResourceError):
                        calls.cancel_scope.cancel()
                        return
                    calls.start_soon(serve, end, message)
        finally:
            with anyio.CancelScope(shield=True):
                await end.aclose()

    async def serve(end: Transport, message: dict[str, Any]) -> None:
        async def out(body: JSONObject) -> None:
            await end.send(json.dumps({"jsonrpc": "2.0", **body}).encode())

        def log(text: str) -> JSONObject:
            return {"method": "notifications/message", "params": {"level": "info", "data": text}}

        def done(text: str) -> JSONObject:
            return {"id": message["id"], "result": {"content": [{"type": "text", "text": text}]}}

        method, params = message.get("method"), message.get("params") or {}
        if method == "server/discover":
            meta = {"io.modelcontextprotocol/serverInfo": {"name": "unasked", "version": "1"}}
            await out({"id": message["id"], "result": {
                "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}, "logging": {}},
                "_meta": meta, "resultType": "complete"}})  # fmt: skip
        elif method == "tools/call" and params["arguments"]["tag"] == "ann":
            await out(log("ann before"))
            await bob_answered.wait()  # Bob's call has come and gone: Ann's is alone again
            await out(log("ann after"))
            await out(done("ann"))
        elif method == "tools/call":
            await out(log("bob's secret"))  # whatever the request asked: this server logs every call
            await out(done("bob"))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:

            async def connect() -> Transport:
                up_end, server_end = memory_pair()
                tg.start_soon(scripted, server_end)
                return up_end

            proxy = ProxyServer(connect, upstream_protocol="2026-07-28")
            async with serving(proxy.http_app()) as url:

                def on_log_of(person: str) -> Any:
                    async def on_log(level: str, data: Any, logger: str | None) -> None:
                        logs[person].append(str(data))

                    return on_log

                async def ann(a: Client) -> None:
                    assert (await a.call_tool("work", {"tag": "ann"})).text == "ann"

                async with (
                    Client.http(url, protocol="2026-07-28", on_log=on_log_of("ann"), log_level="info") as a,
                    Client.http(url, protocol="2026-07-28", on_log=on_log_of("bob")) as b,
                    anyio.create_task_group() as both,
                ):
                    both.start_soon(ann, a)
                    while not logs["ann"]:  # Ann's call is in, and hears its first message
                        await anyio.sleep(0.01)
                    assert (await b.call_tool("work", {"tag": "bob"})).text == "bob"
                    bob_answered.set()
            tg.cancel_scope.cancel()

    assert logs == {"ann": ["ann before", "ann after"], "bob": []}, logs
