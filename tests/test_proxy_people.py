"""Two and three people on one proxy, each with a real client, in front of real upstream servers: nothing of one
person's ever reaches another (their tasks, and the keep-alive of the connections they share), whatever their
clients' eras.

The checker in each test names every task after the person who made it, and asserts that each person sees only
tasks naming them.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import anyio
import pytest

from elicitor import AccessToken, Client, Protection
from elicitor.client._http import HttpClientTransport
from elicitor.proxy import ProxyServer


class Names:
    """A token verifier for the test: the bearer token is the person's name."""

    async def verify(self, token: str) -> AccessToken | None:
        return AccessToken(subject=token)


def person(url: str, name: str, era: str) -> Client:
    return Client.http(url, protocol=era, headers={"Authorization": f"Bearer {name}"})


def task_lister() -> Any:
    """A 2025-11-25 server over Streamable HTTP that binds its tasks to the one principal it sees, as a server
    behind authentication does: through a proxy, that is everybody, so ``tasks/list`` lists every task it made, on
    every session, and its answer to ``tools/list`` (an event stream) tells the status of every task first, as a
    server may tell a principal's sessions of its tasks. Each task is named after the ``who`` argument of the call
    that made it."""
    tasks: list[dict[str, Any]] = []
    sessions = itertools.count(1)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        if scope["method"] != "POST":
            await send({"type": "http.response.start", "status": 405 if scope["method"] == "GET" else 200})
            await send({"type": "http.response.body", "body": b""})
            return
        message = json.loads(body)
        method, request_id = message.get("method"), message.get("id")
        headers = [(b"content-type", b"application/json")]
        if request_id is None:
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        params = message.get("params") or {}
        result: dict[str, Any] = {}
        if method == "initialize":
            capabilities: dict[str, Any] = {"tools": {}, "tasks": {"list": {}, "requests": {"tools": {"call": {}}}}}
            result = {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                      "serverInfo": {"name": "lister", "version": "0"}}  # fmt: skip
            headers.append((b"mcp-session-id", f"s{next(sessions)}".encode()))
        elif method == "tools/call" and "task" in params:
            who = str((params.get("arguments") or {}).get("who"))
            task = {"taskId": f"task-of-{who}", "status": "working", "ttl": 60_000,
                    "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z"}  # fmt: skip
            tasks.append(task)
            result = {"task": task}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "done"}]}
        elif method == "tasks/list":
            result = {"tasks": tasks}
        elif method == "tools/list":
            result = {"tools": [{"name": "work", "inputSchema": {"type": "object"}}]}
        answer = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()
        if method == "tools/list":
            told = [{"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task} for task in tasks]
            events = [b"event: message\ndata: " + json.dumps(m).encode() + b"\n\n" for m in told]
            answer = b"".join(events) + b"event: message\ndata: " + answer + b"\n\n"
            headers[0] = (b"content-type", b"text/event-stream")
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return app


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio
async def test_a_task_list_shows_each_person_only_their_own_tasks_whatever_their_era(anyio_backend: str) -> None:
    """A 2025-11-25 server over HTTP listing every task it made (the one principal it sees is the proxy): Ann and
    Bob (2025-11-25, a session each) each create one; Cal, on 2026-07-28 (his requests go on upstream connections
    of the proxy's own, as held calls), creates none. Each one's ``tasks/list`` has their own tasks only."""
    from .conftest import serving

    with anyio.fail_after(120):
        async with serving(task_lister()) as upstream_url:
            proxy = ProxyServer(lambda: HttpClientTransport.connect(upstream_url), upstream_protocol="auto")
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            async with (
                serving(proxy.http_app(auth=protection)) as url,
                person(url, "ann", "2025-11-25") as ann,
                person(url, "bob", "2025-11-25") as bob,
                person(url, "cal", "2026-07-28") as cal,
            ):
                for name, client in (("ann", ann), ("bob", bob)):
                    await client.request("tools/call", {"name": "work", "arguments": {"who": name}, "task": {}})
                listed = {
                    name: [task["taskId"] for task in (await client.request("tasks/list", {}))["tasks"]]
                    for name, client in (("ann", ann), ("bob", bob), ("cal", cal))
                }
    assert listed == {"ann": ["task-of-ann"], "bob": ["task-of-bob"], "cal": []}


def test_a_proxy_listening_on_port_0_says_the_port_it_got() -> None:
    """``--listen 127.0.0.1:0`` takes a free port: the line it says names that port, and it answers there (it said
    ``http://127.0.0.1:0/mcp``, where nothing answers)."""
    import re
    import subprocess
    import sys

    import httpx2 as httpx

    from .replicas import wait_for_port

    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", "--listen", "127.0.0.1:0",
               sys.executable, "-m", "tests.peers.cli_server"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/mcp", line)
        assert found is not None and found.group(1) != "0", line
        wait_for_port(int(found.group(1)), None, timeout=60)
        assert httpx.get(f"http://127.0.0.1:{found.group(1)}/healthz", timeout=60).status_code == 200
    finally:
        process.terminate()
        process.communicate(timeout=60)


def test_the_listening_proxy_runs_on_the_fastest_stack_and_reads_what_came_during_a_stall() -> None:
    """``elicitor proxy --listen`` runs on the stack ``elicitor serve`` chooses (httptools and uvloop, installed in
    dev) and says which. Stopped (SIGSTOP) past its keep-alive timeout right after answering on a connection, it
    must read the request a balancer sent on that connection meanwhile once it runs again, not close the
    connection from its overdue keep-alive timer with the request unread (the kernel would reset it, and a reset
    POST is lost)."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    from .conftest import free_port
    from .replicas import one_response, wait_for_port

    port = free_port()
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", "--listen", f"127.0.0.1:{port}",
               sys.executable, "-m", "tests.peers.cli_server"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE)
    request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()

    try:
        wait_for_port(port, process, timeout=60)
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.sendall(request)
            before = one_response(sock)
            os.kill(process.pid, signal.SIGSTOP)
            try:
                time.sleep(8)  # the connection idle past the keep-alive timeout (5 s), as the proxy sees it once awake
                sock.sendall(request)  # waits in the socket
            finally:
                os.kill(process.pid, signal.SIGCONT)
            after = one_response(sock)  # b"" if the proxy reset the connection
    finally:
        process.terminate()
        _, said = process.communicate(timeout=60)
    assert before.startswith(b"HTTP/1.1 200"), before
    assert after.startswith(b"HTTP/1.1 200"), after
    assert f"at http://127.0.0.1:{port}/mcp, forwarding to" in said.decode()
    assert "(httptools, uvloop)" in said.decode(), said.decode()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio
async def test_a_task_status_notification_reaches_only_the_tasks_owner(anyio_backend: str) -> None:
    """The server above tells each session of the status of every task it sees as the proxy's (everybody's). Ann
    (elicitor's client) and Bob (a client written here, reading the raw event stream; the same request ids as
    Ann's) each create a task; Bob's ``tools/list`` then hears of his own task only, never of Ann's."""
    import httpx2 as httpx

    from .conftest import serving

    def rpc(method: str, params: dict[str, Any], request_id: int | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        return message if request_id is None else {**message, "id": request_id}

    with anyio.fail_after(120):
        async with serving(task_lister()) as upstream_url:
            proxy = ProxyServer(lambda: HttpClientTransport.connect(upstream_url), upstream_protocol="auto")
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            async with (
                serving(proxy.http_app(auth=protection)) as url,
                person(url, "ann", "2025-11-25") as ann,
                httpx.AsyncClient(timeout=60) as http,
            ):
                await ann.request("tools/call", {"name": "work", "arguments": {"who": "ann"}, "task": {}})
                headers = {"Authorization": "Bearer bob", "Accept": "application/json, text/event-stream",
                           "MCP-Protocol-Version": "2025-11-25"}  # fmt: skip
                hello = {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "b", "version": "0"},
                }
                opened = await http.post(url, json=rpc("initialize", hello, 1), headers=headers)
                headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
                await http.post(url, json=rpc("notifications/initialized", {}), headers=headers)
                call = {"name": "work", "arguments": {"who": "bob"}, "task": {}}
                assert "task-of-bob" in (await http.post(url, json=rpc("tools/call", call, 2), headers=headers)).text
                heard = (await http.post(url, json=rpc("tools/list", {}, 3), headers=headers)).text
    assert '"taskId":"task-of-bob"' in heard, heard
    assert "task-of-ann" not in heard, heard


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # subprocesses: one backend is enough
@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("server", ["tests.peers.people_server", "tests.peers.people_sdk_server"])
async def test_four_people_through_the_listening_command_see_only_their_own_calls(
    anyio_backend: str, server: str, transport: str
) -> None:
    """``elicitor proxy --listen`` started as a command, in front of a server started as a command of its own
    (ours, speaking both eras: its 2026-07-28 callers share one upstream connection; or the official SDK's: each
    2026-07-28 call is held on a connection of its own), on stdio or over Streamable HTTP. Four people at once,
    each with a real client: Ann with elicitor's on 2025-11-25, Bob with elicitor's on 2026-07-28, Cal with the
    official SDK's, Eve with elicitor's on 2025-06-18. Their clients number requests and progress tokens alike
    (each first call is id 1 or 2, progress token likewise), and all four wait on their questions at the same
    moment, while a fifth cancels those ids and leaves. Each is asked only their own question, hears only their
    own progress and log messages, and gets their own answer back."""
    import subprocess
    import sys

    import mcp_types as types
    from mcp import Client as McpClient

    from elicitor import Accepted, ElicitationRequest

    from .conftest import free_port
    from .replicas import wait_for_port

    port = free_port()
    target = [sys.executable, "-m", server]
    upstream: subprocess.Popen[bytes] | None = None
    if transport == "http":
        upstream_port = free_port()
        upstream = subprocess.Popen([*target, "http", str(upstream_port)], stderr=subprocess.DEVNULL)
        await anyio.to_thread.run_sync(lambda: wait_for_port(upstream_port, upstream, timeout=60))
        target = [f"http://127.0.0.1:{upstream_port}/mcp"]
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", "--listen", f"127.0.0.1:{port}", *target]
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    people = ("ann", "bob", "cal", "eve")
    everyone_asked = anyio.Event()
    dan_done = anyio.Event()
    asked: dict[str, list[str]] = {name: [] for name in people}
    progress: dict[str, list[str]] = {name: [] for name in people}
    heard = progress  # the SDK's progress callback names its first parameter "progress"
    logs: dict[str, list[str]] = {name: [] for name in people}
    results: dict[str, str] = {}

    async def asked_of(name: str, message: str) -> None:
        asked[name].append(message)
        if sum(len(questions) for questions in asked.values()) >= len(people):
            everyone_asked.set()
        await everyone_asked.wait()  # every call waits on its question at once
        await dan_done.wait()  # and stays in flight while Dan cancels and leaves

    async def ours(name: str, era: str) -> None:
        async def answer(request: ElicitationRequest) -> Any:
            await asked_of(name, request.message)
            return Accepted({"name": name})

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress[name].append(str(message))

        async def on_log(level: str, data: Any, logger: str | None) -> None:
            logs[name].append(str(data))

        async with Client.http(url, elicitation=answer, protocol=era, on_log=on_log, log_level="info") as client:
            results[name] = (await client.call_tool("greet", {"tag": name}, progress=on_progress)).text

    async def theirs(name: str) -> None:
        async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            await asked_of(name, params.message)
            return types.ElicitResult(action="accept", content={"name": name})

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            logs[name].append(str(params.data))

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            heard[name].append(str(message))

        async with McpClient(url, elicitation_callback=answer, logging_callback=on_log, mode="legacy") as client:
            result = await client.call_tool("greet", {"tag": name}, progress_callback=on_progress)
            results[name] = result.content[0].text  # type: ignore[union-attr]

    async def dan() -> None:
        """A fifth person, with a client written here: while the four calls wait on their questions, he cancels
        every request id their clients may be using, in a session of his own and without one (2026-07-28), then
        ends his session. None of it touches anyone else's call."""
        import httpx2 as httpx

        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "dan", "version": "0"}}
        async with httpx.AsyncClient(timeout=60) as http:
            opened = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
                                     headers=headers)  # fmt: skip
            session = {**headers, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            await everyone_asked.wait()
            for request_id in range(10):
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
                await http.post(url, json=cancel, headers=session)
                await http.post(url, json=cancel, headers={**headers, "MCP-Protocol-Version": "2026-07-28"})
            assert (await http.delete(url, headers=session)).status_code == 200
        dan_done.set()

    try:
        await anyio.to_thread.run_sync(lambda: wait_for_port(port, process, timeout=60))
        with anyio.fail_after(120):  # a proxy that misroutes may leave a call waiting forever: end the test instead
            async with anyio.create_task_group() as tg:
                tg.start_soon(ours, "ann", "2025-11-25")
                tg.start_soon(ours, "bob", "2026-07-28")
                tg.start_soon(ours, "eve", "2025-06-18")
                tg.start_soon(theirs, "cal")
                tg.start_soon(dan)
    finally:
        for started in (process, upstream):
            if started is not None:
                started.terminate()
                started.wait(timeout=60)
    for name in people:
        assert asked[name] == [f"Name for {name}?"], asked
        assert results[name] == f"{name}:{name}", results
        assert all(message.startswith(f"{name} ") for message in progress[name]), progress
        assert all(message == f"{name} logged" for message in logs[name]), logs
    # What each client is sent of its own: progress for every call (the proxy follows each call's token), the log
    # message for the handshake-era clients (Bob's call on a connection shared by three may go without it).
    assert progress["ann"] and progress["bob"] and progress["cal"], progress
    assert logs["ann"] == ["ann logged"] and logs["cal"] == ["cal logged"] and logs["eve"] == ["eve logged"], logs


def any_answer(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """A valid answer to a form of the spec's subset (as the official SDK's client receives it), its plain strings
    set to ``name``."""
    samples = {"email": f"{name}@example.com", "uri": "https://example.com/", "date": "2026-01-01",
               "date-time": "2026-01-01T00:00:00Z"}  # fmt: skip
    content: dict[str, Any] = {}
    for key, spec in schema.get("properties", {}).items():
        kind = spec.get("type")
        choices = spec.get("enum") or [option["const"] for option in spec.get("oneOf", [])]
        if kind == "array":
            items = spec.get("items", {})
            options = items.get("enum") or [option["const"] for option in items.get("anyOf", [])]
            content[key] = options[: max(spec.get("minItems", 1), 1)]
        elif choices:
            content[key] = choices[0]
        elif kind == "string":
            content[key] = samples.get(spec.get("format", ""), name).ljust(spec.get("minLength", 0), "e")
        elif kind in ("integer", "number"):
            content[key] = spec.get("minimum", 1)
        elif kind == "boolean":
            content[key] = True
    return content


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # subprocesses: one backend is enough
async def test_three_people_in_front_of_server_everything_each_get_their_own_answer(anyio_backend: str) -> None:
    """The reference server-everything (TypeScript, handshake era) on stdio behind ``elicitor proxy --listen``:
    Ann (elicitor's client, 2025-11-25), Bob (elicitor's, 2026-07-28: a held call) and Cal (the official SDK's)
    call its form tool at once, all waiting on their forms together, each answering with their own name; each
    result quotes its own person's name and nobody else's."""
    import subprocess
    import sys

    import mcp_types as types
    from mcp import Client as McpClient

    from elicitor import Accepted, ElicitationRequest

    from .conftest import free_port
    from .replicas import wait_for_port
    from .test_interop_ts import node
    from .test_peers import EVERYTHING, everything_ready, fill

    everything_ready()
    port = free_port()
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", "--listen", f"127.0.0.1:{port}",
               node(), str(EVERYTHING / "dist" / "index.js"), "stdio"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    people = ("ann", "bob", "cal")
    everyone_asked = anyio.Event()
    asked: list[str] = []
    results: dict[str, str] = {}

    async def together(name: str) -> None:
        asked.append(name)
        if len(asked) >= len(people):
            everyone_asked.set()
        await everyone_asked.wait()

    async def ours(name: str, era: str) -> None:
        async def answer(request: ElicitationRequest) -> Any:
            await together(name)
            return Accepted({**fill(request).data, "name": name})

        async with Client.http(url, elicitation=answer, protocol=era) as client:
            results[name] = (await client.call_tool("trigger-elicitation-request")).text

    async def theirs(name: str) -> None:
        async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            await together(name)
            assert isinstance(params, types.ElicitRequestFormParams)
            return types.ElicitResult(action="accept", content=any_answer(params.requested_schema, name))

        async with McpClient(url, elicitation_callback=answer, mode="legacy") as client:
            result = await client.call_tool("trigger-elicitation-request", {})
            results[name] = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))

    try:
        await anyio.to_thread.run_sync(lambda: wait_for_port(port, process, timeout=60))
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ours, "ann", "2025-11-25")
                tg.start_soon(ours, "bob", "2026-07-28")
                tg.start_soon(theirs, "cal")
    finally:
        process.terminate()
        process.wait(timeout=60)
    for name in people:
        assert f"- Name: {name}" in results[name], results
        assert not any(f"- Name: {other}" in results[name] for other in people if other != name), results


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio
@pytest.mark.parametrize("upstream_era", ["2025-11-25", "2026-07-28"])
async def test_another_persons_request_state_gets_nothing_of_theirs(anyio_backend: str, upstream_era: str) -> None:
    """Our server over HTTP, spoken to on the handshake era (Ann's 2026-07-28 call is held by the proxy, its state
    the proxy's own, sealed) or on 2026-07-28 (the server's state, tagged by the proxy). Bob replays the state of
    Ann's round with her call's arguments and an answer of his own: refused (-32602), with nothing of Ann's call in
    the refusal; Ann then answers her round and gets her own result, never Bob's answer."""
    from elicitor import JSONRPCError, ScriptedHandler

    from .conftest import serving
    from .peers.people_server import server

    with anyio.fail_after(120):
        async with serving(server.http_app()) as upstream_url:
            proxy = ProxyServer(lambda: HttpClientTransport.connect(upstream_url), upstream_protocol=upstream_era)
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            headers = {"ann": {"Authorization": "Bearer ann"}, "bob": {"Authorization": "Bearer bob"}}
            async with (
                serving(proxy.http_app(auth=protection)) as url,
                Client.http(url, protocol="2026-07-28", headers=headers["ann"], elicitation=ScriptedHandler([])) as ann,
                Client.http(url, protocol="2026-07-28", headers=headers["bob"], elicitation=ScriptedHandler([])) as bob,
            ):
                call = {"name": "greet", "arguments": {"tag": "ann"}}
                asked = await ann.request("tools/call", call)
                assert asked["resultType"] == "input_required", asked
                (key,) = asked["inputRequests"]
                state = asked["requestState"]
                replayed = {**call, "inputResponses": {key: {"action": "accept", "content": {"name": "bob"}}},
                            "requestState": state}  # fmt: skip
                with pytest.raises(JSONRPCError) as refused:
                    await bob.request("tools/call", replayed)
                assert refused.value.code == -32602
                assert "ann" not in f"{refused.value.message} {refused.value.data}"
                mine = {**call, "inputResponses": {key: {"action": "accept", "content": {"name": "ann"}}},
                        "requestState": state}  # fmt: skip
                done = await ann.request("tools/call", mine)
    assert done["content"][0]["text"] == "ann:ann", done


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # subprocesses: one backend is enough
async def test_a_resource_update_reaches_only_its_subscriber_and_a_list_change_everyone(anyio_backend: str) -> None:
    """``elicitor proxy --listen`` in front of our server on stdio, pinned to 2026-07-28 (one upstream connection,
    one server process, for everybody: the listeners see what the tools change). Ann subscribes to her memo and Bob
    to his, both with request id 1 and both to tool list changes, on ``subscriptions/listen`` streams. Ann's memo
    changing reaches Ann only, tagged with her own request id; the tool list changing reaches both (it is
    everyone's by design)."""
    import json
    import subprocess
    import sys

    import httpx2 as httpx

    from .conftest import free_port
    from .replicas import wait_for_port

    port = free_port()
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", "--upstream-protocol", "2026-07-28",
               "--listen", f"127.0.0.1:{port}", sys.executable, "-m", "tests.peers.people_server"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}}  # fmt: skip
    heard: dict[str, list[dict[str, Any]]] = {"ann": [], "bob": []}
    acknowledged = {"ann": anyio.Event(), "bob": anyio.Event()}

    async def listen(http: httpx.AsyncClient, name: str) -> None:
        wanted = {"toolsListChanged": True, "resourceSubscriptions": [f"memo://{name}"]}
        message = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                   "params": {"_meta": meta, "notifications": wanted}}  # fmt: skip
        listening = {**headers, "Mcp-Method": "subscriptions/listen"}
        async with http.stream("POST", url, json=message, headers=listening) as stream:
            async for line in stream.aiter_lines():
                if line.startswith("data:") and line[5:].strip():
                    note = json.loads(line[5:])
                    heard[name].append(note)
                    if note.get("method") == "notifications/subscriptions/acknowledged":
                        acknowledged[name].set()

    async def call(http: httpx.AsyncClient, tool: str, arguments: dict[str, Any]) -> None:
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"_meta": meta, "name": tool, "arguments": arguments}}  # fmt: skip
        calling = {**headers, "Mcp-Method": "tools/call", "Mcp-Name": tool}
        assert (await http.post(url, json=message, headers=calling)).status_code == 200

    def told(name: str, method: str) -> list[dict[str, Any]]:
        return [note for note in heard[name] if note.get("method") == method]

    try:
        await anyio.to_thread.run_sync(lambda: wait_for_port(port, process, timeout=60))
        with anyio.fail_after(90):
            async with httpx.AsyncClient(timeout=60) as http, anyio.create_task_group() as tg:
                for name in heard:
                    tg.start_soon(listen, http, name)
                    await acknowledged[name].wait()
                await call(http, "touch", {"uri": "memo://ann"})
                await call(http, "retool", {})
                while not (told("ann", "notifications/tools/list_changed") and
                           told("bob", "notifications/tools/list_changed")):  # fmt: skip
                    await anyio.sleep(0.05)
                await anyio.sleep(0.5)  # anything misrouted has had its time to arrive
                tg.cancel_scope.cancel()
    finally:
        process.terminate()
        process.wait(timeout=60)
    (update,) = told("ann", "notifications/resources/updated")
    assert update["params"] == {"uri": "memo://ann", "_meta": {"io.modelcontextprotocol/subscriptionId": 1}}
    assert not told("bob", "notifications/resources/updated"), heard["bob"]
    for name in heard:
        (change,) = told(name, "notifications/tools/list_changed")
        assert change["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": 1}


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # subprocesses: one backend is enough
async def test_roots_and_sampling_are_asked_of_each_person_alone(anyio_backend: str) -> None:
    """``elicitor proxy --listen`` in front of our server on stdio: a tool asks the client's roots and its model.
    Ann (2025-11-25), Bob (2026-07-28: a held call, asked in rounds) and Eve (2025-06-18) call it at once, each
    client with roots and a model of its own, all waiting on their model's answer together: each result has
    their own roots and their own model's words, and each model was asked about its own person's call only."""
    import subprocess
    import sys

    from .conftest import free_port
    from .replicas import wait_for_port

    port = free_port()
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", "--listen", f"127.0.0.1:{port}",
               sys.executable, "-m", "tests.peers.people_server"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    people = {"ann": "2025-11-25", "bob": "2026-07-28", "eve": "2025-06-18"}
    everyone_asked = anyio.Event()
    prompts: dict[str, list[str]] = {name: [] for name in people}
    results: dict[str, str] = {}

    async def person(name: str, era: str) -> None:
        async def model(params: dict[str, Any]) -> dict[str, Any]:
            prompts[name].append(params["messages"][0]["content"]["text"])
            if sum(map(len, prompts.values())) >= len(people):
                everyone_asked.set()
            await everyone_asked.wait()
            return {"role": "assistant", "content": {"type": "text", "text": f"{name}'s model"}, "model": name}

        roots = [{"uri": f"file:///home/{name}", "name": name}]
        async with Client.http(url, protocol=era, sampling=model, roots=roots) as client:
            results[name] = (await client.call_tool("consult", {"tag": name})).text

    try:
        await anyio.to_thread.run_sync(lambda: wait_for_port(port, process, timeout=60))
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for name, era in people.items():
                    tg.start_soon(person, name, era)
    finally:
        process.terminate()
        process.wait(timeout=60)
    for name in people:
        assert results[name] == f"{name}: roots file:///home/{name}; model {name}'s model", results
        assert set(prompts[name]) == {f"What does {name} think?"}, prompts


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # subprocesses: one backend is enough
async def test_a_url_elicitations_completion_reaches_only_its_person(anyio_backend: str) -> None:
    """The official SDK's server on stdio behind ``elicitor proxy --listen``: its URL-mode tool asks every caller
    to open a page under the same elicitation id (``peer-1``) and, once they accept, says the interaction is
    complete (``notifications/elicitation/complete``). Two people with the official SDK's client call it at once,
    both waiting on their page together: each hears of one completion, their own, however alike the ids."""
    import subprocess
    import sys

    import mcp_types as types
    from mcp import Client as McpClient

    from .conftest import free_port
    from .replicas import wait_for_port

    port = free_port()
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", "--listen", f"127.0.0.1:{port}",
               sys.executable, "-m", "tests.peers.mcp_server"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    people = ("ann", "bob")
    everyone_asked = anyio.Event()
    asked: list[str] = []
    completed: dict[str, list[str]] = {name: [] for name in people}
    results: dict[str, str] = {}

    async def person(name: str) -> None:
        async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(name)
            if len(asked) >= len(people):
                everyone_asked.set()
            await everyone_asked.wait()
            return types.ElicitResult(action="accept")

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ElicitCompleteNotification):
                completed[name].append(message.params.elicitation_id)

        async with McpClient(url, elicitation_callback=answer, message_handler=on_message, mode="legacy") as client:
            result = await client.call_tool("push_url", {})
            results[name] = result.content[0].text  # type: ignore[union-attr]
            with anyio.fail_after(10):
                while not completed[name]:
                    await anyio.sleep(0.05)
            await anyio.sleep(0.5)  # a completion sent to everybody has had its time to arrive

    try:
        await anyio.to_thread.run_sync(lambda: wait_for_port(port, process, timeout=60))
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for name in people:
                    tg.start_soon(person, name)
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert results == {"ann": "accept", "bob": "accept"}, results
    assert completed == {"ann": ["peer-1"], "bob": ["peer-1"]}, completed


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio; subprocesses: one is enough
@pytest.mark.parametrize("signed_in", [False, True])
async def test_what_a_server_keeps_per_connection_never_passes_from_one_person_to_the_next(
    anyio_backend: str, signed_in: bool
) -> None:
    """The official SDK's server on stdio keeps what each connection told it (``remember``, ``recall``). Three
    2026-07-28 people, one after the other, through one listening proxy: each call is held on an upstream
    connection of its own, and a connection left idle by one person's call must never carry the next person's,
    whose call would then find what the first one told the server. Ann (elicitor's client) tells it a secret; Bob
    (elicitor's client, declaring what Ann's declares) and Cal (the official SDK's client) recall nothing of it,
    whether they sign in or not (without a sign-in nothing tells them apart: each call is its own person)."""
    import sys

    import httpx2 as httpx
    from mcp import Client as McpClient
    from mcp.client.streamable_http import streamable_http_client

    from elicitor.transports import StdioClientTransport

    from .conftest import serving

    async def start() -> Any:
        return await StdioClientTransport.start([sys.executable, "-m", "tests.peers.people_sdk_server"])

    def headers(name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {name}"} if signed_in else {}

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            proxy = ProxyServer(start)
            protection = Protection(Names(), "http://127.0.0.1/mcp", ["https://as.example"])
            async with serving(proxy.http_app(auth=protection) if signed_in else proxy.http_app()) as url:
                async with Client.http(url, protocol="2026-07-28", headers=headers("ann")) as ann:
                    assert (await ann.call_tool("remember", {"note": "ann's secret"})).text == "kept"
                async with Client.http(url, protocol="2026-07-28", headers=headers("bob")) as bob:
                    bob_recalled = (await bob.call_tool("recall")).text
                async with (
                    httpx.AsyncClient(headers=headers("cal"), timeout=60) as http,
                    McpClient(streamable_http_client(url, http_client=http)) as cal,
                ):
                    recalled = (await cal.call_tool("recall", {})).content[0]
                    cal_recalled = recalled.text  # type: ignore[union-attr]
            tg.cancel_scope.cancel()
    assert (bob_recalled, cal_recalled) == ("nothing", "nothing")


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio; subprocesses: one is enough
@pytest.mark.parametrize("cal_era", ["2026-07-28", "2025-11-25"])
async def test_a_list_change_made_on_another_connection_reaches_the_listeners_of_the_shared_one(
    anyio_backend: str, cal_era: str
) -> None:
    """A listening proxy in front of our server on stdio, which speaks both eras: 2026-07-28 people's
    ``subscriptions/listen`` streams are on the one shared connection (a process), while Cal's call of ``retool``
    runs in another process: on 2026-07-28 it goes on the handshake era first, held on a connection of its own; on
    2025-11-25 it goes on his session's own connection. There the server says the tool list changed. Ann, who
    listens for tool list changes, hears it once, tagged with her own request id; Bob,
    with the same request id, listens for prompt list changes only, and hears none."""
    import json
    import sys

    import httpx2 as httpx

    from elicitor.transports import StdioClientTransport

    from .conftest import serving

    async def start() -> Any:
        return await StdioClientTransport.start([sys.executable, "-m", "tests.peers.people_server"])

    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}}  # fmt: skip
    heard: dict[str, list[dict[str, Any]]] = {"ann": [], "bob": []}
    acknowledged = {"ann": anyio.Event(), "bob": anyio.Event()}
    wants = {"ann": {"toolsListChanged": True}, "bob": {"promptsListChanged": True}}

    async def listen(http: httpx.AsyncClient, url: str, name: str) -> None:
        message = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                   "params": {"_meta": meta, "notifications": wants[name]}}  # fmt: skip
        listening = {**headers, "Mcp-Method": "subscriptions/listen"}
        async with http.stream("POST", url, json=message, headers=listening) as stream:
            async for line in stream.aiter_lines():
                if line.startswith("data:") and line[5:].strip():
                    note = json.loads(line[5:])
                    heard[name].append(note)
                    if note.get("method") == "notifications/subscriptions/acknowledged":
                        acknowledged[name].set()

    def told(name: str) -> list[dict[str, Any]]:
        return [note for note in heard[name] if note.get("method", "").endswith("/list_changed")]

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            async with (
                serving(ProxyServer(start).http_app()) as url,
                httpx.AsyncClient(timeout=60) as http,
                anyio.create_task_group() as listeners,
            ):
                for name in heard:
                    listeners.start_soon(listen, http, url, name)
                    await acknowledged[name].wait()
                async with Client.http(url, protocol=cal_era) as cal:
                    assert (await cal.call_tool("retool")).text == "retooled"
                    while not told("ann"):  # the server may say it after its answer: Cal's session is still open
                        await anyio.sleep(0.05)
                await anyio.sleep(0.5)  # anything else has had its time to arrive
                listeners.cancel_scope.cancel()
            tg.cancel_scope.cancel()
    (change,) = told("ann")
    assert change == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                      "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 1}}}  # fmt: skip
    assert told("bob") == [], heard["bob"]


STALLED_CLIENT = """
import sys

import anyio

from elicitor import Client


async def main() -> None:
    told = False

    async def progress(done: float, total: float | None, message: str | None) -> None:
        nonlocal told
        if not told:
            told = True
            print("flooding", flush=True)

    async with Client.http(sys.argv[1], protocol=sys.argv[3]) as client:
        arguments = {"count": 4000, "size": 8000, "pause": 0.5, "ledger": sys.argv[2]}
        result = await client.call_tool("flood", arguments, progress=progress)
        print(result.text, flush=True)


anyio.run(main)
"""


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio; subprocesses: one is enough
@pytest.mark.parametrize("ann_era", ["2026-07-28", "2025-11-25"])
async def test_a_stalled_persons_client_never_holds_up_anothers_calls(
    anyio_backend: str, tmp_path: Any, ann_era: str
) -> None:
    """A listening proxy in front of our server on stdio, pinned to 2026-07-28: every 2026-07-28 person's calls
    share one upstream connection, read by one reader (a handshake-era person has a connection of their own, whose
    reader only they could hold up). Ann's client (a process of its own) calls a tool that reports more
    progress than fits in the sockets between her and the proxy, and is stopped (SIGSTOP) as the tool starts: it
    reads nothing more. Bob's call (asking a question, answered) must go on meanwhile, not wait for Ann to read;
    Ann's call ends with its result once her client runs again."""
    import os
    import signal
    import subprocess
    import sys

    from elicitor import Accepted, ElicitationRequest
    from elicitor.transports import StdioClientTransport

    from .conftest import serving

    async def start() -> Any:
        return await StdioClientTransport.start([sys.executable, "-m", "tests.peers.people_server"])

    async def answer(request: ElicitationRequest) -> Any:
        return Accepted({"name": "bob"})

    with anyio.fail_after(180):
        async with anyio.create_task_group() as tg:
            async with serving(ProxyServer(start, upstream_protocol="2026-07-28").http_app()) as url:
                ledger = tmp_path / "flooded"
                command = [sys.executable, "-c", STALLED_CLIENT, url, str(ledger), ann_era]
                ann = await anyio.open_process(command, stderr=subprocess.DEVNULL)
                try:
                    assert ann.stdout is not None
                    said = b""
                    while b"flooding\n" not in said:
                        said += await ann.stdout.receive()
                    os.kill(ann.pid, signal.SIGSTOP)
                    try:
                        # Bob comes once the flood is all sent (the proxy reads on), or stands still (it does not).
                        sent, still = "", 0
                        while sent != "4000" and still < 20:
                            await anyio.sleep(0.1)
                            now = ledger.read_text() if ledger.exists() else ""
                            sent, still = now, (still + 1 if now == sent and now else 0)
                        with anyio.fail_after(90):  # it waits for ever on Ann's client when it waits on her at all
                            async with Client.http(url, protocol="2026-07-28", elicitation=answer) as bob:
                                bob_got = (await bob.call_tool("greet", {"tag": "bob"})).text
                    finally:
                        os.kill(ann.pid, signal.SIGCONT)
                    while b"flooded 4000\n" not in said:
                        said += await ann.stdout.receive()
                finally:
                    if ann.returncode is None:
                        ann.kill()
                    await ann.aclose()
            tg.cancel_scope.cancel()
    assert bob_got == "bob:bob"


ASKED_CLIENT = """
import sys

import anyio

from elicitor import Client


async def main() -> None:
    async def answer(request: object) -> object:
        print("asked", flush=True)
        await anyio.sleep_forever()

    async with Client.http(sys.argv[1], protocol=sys.argv[2], elicitation=answer) as client:
        await client.call_tool("greet", {"tag": "ann"})


anyio.run(main)
"""


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio; subprocesses: one is enough
@pytest.mark.parametrize("ann_era", ["2025-11-25", "2026-07-28"])
async def test_a_person_whose_client_dies_mid_question_leaves_anothers_call_to_go_on(
    anyio_backend: str, ann_era: str
) -> None:
    """A listening proxy in front of the official SDK's server on stdio. Ann (elicitor's client, a process of its
    own) and Bob (the official SDK's client, on the handshake era) are each asked their question at once; Ann's
    client process is killed (SIGKILL: no goodbye) while hers is open. Bob, answering after that, gets his result,
    and the proxy still serves Cal, who comes afterwards."""
    import signal
    import sys

    import mcp_types as types
    from mcp import Client as McpClient

    from elicitor.transports import StdioClientTransport

    from .conftest import serving

    async def start() -> Any:
        return await StdioClientTransport.start([sys.executable, "-m", "tests.peers.people_sdk_server"])

    ann_gone, bob_asked = anyio.Event(), anyio.Event()

    async def bob_answers(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        bob_asked.set()
        await ann_gone.wait()
        return types.ElicitResult(action="accept", content={"name": "bob"})

    async def cal_answers(request: Any) -> Any:
        from elicitor import Accepted

        return Accepted({"name": "cal"})

    results: dict[str, str] = {}

    async def bob(url: str) -> None:
        async with McpClient(url, elicitation_callback=bob_answers, mode="legacy") as client:
            result = await client.call_tool("greet", {"tag": "bob"})
            results["bob"] = result.content[0].text  # type: ignore[union-attr]

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            async with serving(ProxyServer(start).http_app()) as url, anyio.create_task_group() as people:
                people.start_soon(bob, url)
                ann = await anyio.open_process([sys.executable, "-c", ASKED_CLIENT, url, ann_era])
                try:
                    assert ann.stdout is not None
                    said = b""
                    while b"asked\n" not in said:
                        said += await ann.stdout.receive()
                    await bob_asked.wait()  # both questions open at once
                    ann.send_signal(signal.SIGKILL)
                    await ann.wait()
                finally:
                    if ann.returncode is None:
                        ann.kill()
                    await ann.aclose()
                ann_gone.set()
                async with Client.http(url, protocol="2025-11-25", elicitation=cal_answers) as cal:
                    results["cal"] = (await cal.call_tool("greet", {"tag": "cal"})).text
            tg.cancel_scope.cancel()
    assert results == {"bob": "bob:bob", "cal": "cal:cal"}


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # subprocesses: one backend is enough
async def test_the_listening_command_asks_nobody_here_for_a_client_that_cannot_be_asked(anyio_backend: str) -> None:
    """``elicitor proxy --listen`` serves several people's clients: by default it never answers for a client that
    declared no elicitation through this machine's browser (which would show each person's questions to whoever
    sits here, and take their answers for that person's). Ann's client declares none: the server is told so, as
    it would be without the proxy, and her call ends with the server's tool error (it cannot ask her) instead of
    waiting for a person at the proxy's machine. (``BROWSER=true``: were a page opened, nothing would show it.)"""
    import os
    import subprocess
    import sys

    from .conftest import free_port
    from .replicas import wait_for_port

    port = free_port()
    command = [sys.executable, "-m", "elicitor", "proxy", "--listen", f"127.0.0.1:{port}",
               sys.executable, "-m", "tests.peers.people_server"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, env={**os.environ, "BROWSER": "true"})
    try:
        await anyio.to_thread.run_sync(lambda: wait_for_port(port, process, timeout=60))
        with anyio.fail_after(60):  # asked at the proxy's machine, the call would wait an hour for a person there
            async with Client.http(f"http://127.0.0.1:{port}/mcp", protocol="2025-11-25") as ann:
                refused = await ann.call_tool("greet", {"tag": "ann"})
    finally:
        process.terminate()
        _, said = process.communicate(timeout=60)
    assert refused.is_error, refused
    assert "did not declare the elicitation capability" in refused.text, refused
    assert b"http://127.0.0.1" not in said.split(b"\n", 1)[1], said  # no question's link after the listening line


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # subprocesses: one backend is enough
async def test_a_sigterm_ends_the_listening_proxy_while_a_person_never_answers(anyio_backend: str) -> None:
    """``elicitor proxy --listen`` (its entry point, with a grace of 2 s) in front of a server on stdio, a call
    waiting on a person who never answers: a SIGTERM shuts the proxy down as ``Server.run("http")`` shuts down,
    within its grace. Without the bound it waited for that call for ever."""
    import signal
    import subprocess
    import sys

    from elicitor import ElicitationRequest

    from .conftest import free_port
    from .replicas import wait_for_port

    port = free_port()
    target = [sys.executable, "-m", "tests.peers.people_server"]
    script = (
        "import sys; from elicitor.proxy._run import main; "
        f"sys.exit(main({target!r}, 'none', listen='127.0.0.1:{port}', shutdown_grace=2))"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE)
    asked = anyio.Event()

    async def never(request: ElicitationRequest) -> Any:
        asked.set()
        await anyio.sleep_forever()

    try:
        await anyio.to_thread.run_sync(lambda: wait_for_port(port, process, timeout=60))
        async with anyio.create_task_group() as tg:
            url = f"http://127.0.0.1:{port}/mcp"
            async with Client.http(url, elicitation=never, protocol="2025-11-25") as client:

                async def call() -> None:
                    with pytest.raises(Exception):  # noqa: B017, PT011  # whatever ends it: the proxy went away
                        await client.call_tool("greet", {"tag": "zoe"})

                tg.start_soon(call)
                with anyio.fail_after(60):
                    await asked.wait()
                process.send_signal(signal.SIGTERM)
                # Generous: the grace is 2 s; on a loaded machine the exit takes longer, never for ever.
                code = await anyio.to_thread.run_sync(lambda: process.wait(timeout=60))
                tg.cancel_scope.cancel()
        assert code == 0, process.stderr.read() if process.stderr else ""  # a stop asked for and done
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
