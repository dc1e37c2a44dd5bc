"""The proxy in front of servers that stall, crash, or make a person sign in: every limit is on the machine's part
(a server that accepted the connection and says nothing), never on a person's (a sign-in in progress), and the
caller of a limit that trips gets a clear error, never a hang.

The servers are real processes, stopped with SIGSTOP; the people are the sign-in tests' own (a person following
the link only after a delay). The proxy's limits are scaled down (``HANDSHAKE_TIMEOUT``, ``PROBE_TIMEOUT``,
``ENDPOINT_WAIT``) so that what proves a 30 s limit against a person taking minutes takes seconds.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest

from elicitor import Accepted, Client, JSONRPCError, ScriptedHandler
from elicitor.client._http import HttpClientTransport
from elicitor.proxy import Bridge
from elicitor.transports import memory_pair

from .conftest import ROOT, free_port, serving
from .replicas import wait_for_port

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn and subprocesses


@pytest.fixture
def short_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy's limits on the server's silence, scaled down: the probe 2 s, the handshake 3 s, the old
    transport's endpoint event 2 s (seconds still, for a server in this process on a loaded machine)."""
    monkeypatch.setattr("elicitor.proxy._upstream.PROBE_TIMEOUT", 2.0)
    monkeypatch.setattr("elicitor.proxy._upstream.HANDSHAKE_TIMEOUT", 3.0, raising=False)
    monkeypatch.setattr("elicitor.client._legacy.ENDPOINT_WAIT", 2.0)


@pytest.fixture
def stopped_server() -> Iterator[str]:
    """A Streamable HTTP server process (the example server) that accepts connections but is stopped (SIGSTOP):
    the kernel completes each TCP handshake, and nothing ever answers."""
    port = free_port()
    command = [sys.executable, str(ROOT / "examples" / "everything_server.py"), "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process, timeout=60)
        os.kill(process.pid, signal.SIGSTOP)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        os.kill(process.pid, signal.SIGCONT)
        process.kill()
        process.wait(timeout=30)


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_a_stopped_http_server_fails_the_handshake_in_time(
    anyio_backend: str, short_limits: None, stopped_server: str, era: str
) -> None:
    """The server accepted the connection and never answers. A 2026-07-28 client's first request makes the proxy
    probe (``server/discover``, then ``initialize`` once the probe's time is out); a handshake-era client's
    ``initialize`` is forwarded. Either way the client, whose own limit is far longer, gets the proxy's error
    naming what went unanswered and for how long: before, the proxy waited for ever."""
    client_end, down_end = memory_pair()
    bridge = Bridge(lambda: HttpClientTransport.connect(stopped_server))
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, down_end)
            with pytest.raises(JSONRPCError) as failed:
                async with Client(client_end, protocol=era, handshake_timeout=300):
                    pass
            tg.cancel_scope.cancel()
    assert "the upstream server did not answer initialize within 3 s of silence" in failed.value.message


STOPPING_SERVER = "import os, signal; os.kill(os.getpid(), signal.SIGSTOP)"
"""A stdio server that stops itself (SIGSTOP) as it starts: its pipes stay open, and nothing is ever read."""


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_a_stopped_stdio_server_fails_the_handshake_in_time(
    anyio_backend: str, short_limits: None, era: str
) -> None:
    """The same over stdio: the server process is stopped before it reads a line. A 2026-07-28 client's probe
    falls back to ``initialize`` after its limit (it always had one on stdio), and ``initialize`` is given up too
    (it had none): the client gets the proxy's error, not a wait for ever."""
    from elicitor.transports import StdioClientTransport

    client_end, down_end = memory_pair()
    bridge = Bridge(lambda: StdioClientTransport.start([sys.executable, "-c", STOPPING_SERVER], grace=0.5))
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, down_end)
            with pytest.raises(JSONRPCError) as failed:
                async with Client(client_end, protocol=era, handshake_timeout=300):
                    pass
            tg.cancel_scope.cancel()
    assert "the upstream server did not answer initialize within 3 s of silence" in failed.value.message


def _old_protected_server() -> Any:
    """An ASGI app: the sign-in tests' authorization server, in front of a server of the old HTTP+SSE transport
    whose stream (GET) and messages (POST) both need the token."""
    from .test_auth_client import Deployment, _json
    from .test_legacy_sse import OldServer

    old = OldServer()
    old.stream_path = "/mcp"

    class OldDeployment(Deployment):
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"] == "/messages":
                token = dict(scope["headers"]).get(b"authorization", b"").decode().removeprefix("Bearer ")
                if token not in self.access:
                    return await _json(send, 401, {"error": "invalid_token"}, "Bearer")
                return await old(scope, receive, send)
            return await super().__call__(scope, receive, send)

    deployment = OldDeployment()
    deployment.mcp = old  # type: ignore[assignment]
    return deployment


@pytest.mark.parametrize("upstream", ["sse", "streamable-http"])
async def test_a_person_slower_than_every_limit_of_the_proxy_signs_in_upstream(
    anyio_backend: str, short_limits: None, upstream: str
) -> None:
    """The person at the proxy takes 6 s to sign in upstream, twice the proxy's handshake limit and three times its
    probe's and the old transport's endpoint wait. Old HTTP+SSE (``--transport sse``: its stream's GET is the
    first request, answered 401): the GET waits for the person, and the stream opens after. Streamable HTTP (a
    server that speaks 2026-07-28): the probe's ``server/discover`` waits for the person, and the client lands
    on 2026-07-28, not on the handshake era the probe's limit would have chosen. One link, one authorization."""
    from .test_auth_client import deployed
    from .test_sign_in_pace import SignIn

    sign_in = SignIn()
    auth = sign_in.auth
    client_end, down_end = memory_pair()
    handler = ScriptedHandler([{"name": "Ada"}])
    async with AsyncExitStack() as stack:
        if upstream == "sse":
            deployment = _old_protected_server()
            url = await stack.enter_async_context(serving(deployment))
            deployment.base = url.removesuffix("/mcp")
        else:
            deployment, url = await stack.enter_async_context(deployed())
        transport = "sse" if upstream == "sse" else "auto"
        bridge = Bridge(lambda: HttpClientTransport.connect(url, auth=auth, transport=transport), sign_in=auth)
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(sign_in.approve, 6.0)
                tg.start_soon(bridge.serve, down_end)
                async with Client(client_end, elicitation=handler, protocol="2026-07-28", handshake_timeout=300) as c:
                    if upstream == "sse":
                        assert c.server_info is not None and c.server_info.name == "old-server"
                        assert (await c.call_tool("echo", {"n": 1})).text == '{"n": 1}'
                    else:
                        assert (await c.call_tool("greet")).text.endswith("hello Ada")
                        learnt = bridge._stateless.lanes.current if bridge._stateless is not None else None
                        assert learnt is not None and learnt.revision == "2026-07-28"  # the probe was not cut
                tg.cancel_scope.cancel()
    assert len(sign_in.links) == 1 and len(deployment.authorizations) == 1


CRASHING_SERVER = """
import os, sys
import anyio
from pathlib import Path
from elicitor import Context, Server

folder = Path(sys.argv[1])
with open(folder / "starts", "a") as starts:
    starts.write(f"{os.getpid()}\\n")
if (folder / "broken").exists():
    print("cannot start: the database is locked", file=sys.stderr, flush=True)
    sys.exit(3)
server = Server("crashing", "1")

@server.tool()
async def pid() -> str:
    return str(os.getpid())

@server.tool()
async def slow() -> str:
    (folder / "slow").touch()
    await anyio.sleep(60)
    return "slept"

@server.tool()
async def wait(ctx: Context) -> str:
    await ctx.elicit("Hold on", {"type": "object", "properties": {"x": {"type": "string"}}})
    return "answered"

server.run()
"""


async def kill_servers(folder: Path) -> None:
    """SIGKILL every server process of ``CRASHING_SERVER`` alive (a 2026-07-28 client's calls may be on another
    than the first), and wait until the proxy has seen each end and reaped it: a call sent at the very moment a
    server dies is one in flight at the crash."""
    alive = set((folder / "starts").read_text().split())
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    while alive:
        for pid in list(alive):
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                alive.discard(pid)
        await anyio.sleep(0.05)


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_stdio_server_that_crashes_is_started_again_by_the_next_call(
    anyio_backend: str, tmp_path: Path, era: str
) -> None:
    """``elicitor proxy COMMAND``, its server killed (SIGKILL) three times while the proxy serves: between calls,
    while a person looks at its question, and then for good (every start exits at once, saying why on stderr).

    The call after a crash gets a server started again; the call in flight at a crash gets an error saying how
    the server ended, and the person is not asked again; a server that dies at once on every start gets its
    exit status and its last stderr line to the caller, is started twice (by one call or two: a 2026-07-28
    client's first call probes), and then not before 2 s have passed (no tight loop); once it can start, the next
    call after that is served."""
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", sys.executable, "-c", CRASHING_SERVER]
    command.append(str(tmp_path))
    asked: list[str] = []

    def starts() -> int:
        return len((tmp_path / "starts").read_text().split())

    async def person(request: Any) -> Any:
        asked.append(request.message)
        await kill_servers(tmp_path)
        if era == "2025-11-25":
            await anyio.sleep_forever()  # the call must end while the person still looks at the question
        return Accepted({"x": "late"})  # 2026-07-28 holds nothing between rounds: the retry finds the server gone

    pids: list[str] = []
    with anyio.fail_after(120):
        async with Client.stdio(command, elicitation=person, protocol=era) as client:
            pids.append((await client.call_tool("pid")).text)
            await kill_servers(tmp_path)  # between calls
            pids.append((await client.call_tool("pid")).text)
            assert pids[1] != pids[0]
            with pytest.raises(JSONRPCError) as in_flight:  # killed while the person looks at its question
                await client.call_tool("wait")
            assert "the upstream server ended before it answered: it was killed by SIGKILL" in in_flight.value.message
            assert asked == ["Hold on"]
            pids.append((await client.call_tool("pid")).text)
            assert pids[2] != pids[1]
            (tmp_path / "broken").touch()
            await kill_servers(tmp_path)
            before = starts()
            failures: list[str] = []
            while len(failures) < 4:  # a 2026-07-28 client's probe starts the server twice: see Upstream.learn
                with pytest.raises(JSONRPCError) as dies:
                    await client.call_tool("pid")
                failures.append(dies.value.message)
                assert "exited with status 3" in failures[-1]
                assert "its last lines on stderr: cannot start: the database is locked" in failures[-1]
                if "started again only in" in failures[-1]:
                    break
            # After two quick ends: a second's wait, doubled (1 s if this machine took over a second to ask again).
            assert re.search(r"started again only in [12] s", failures[-1]), failures[-1]
            assert 1 < len(failures) < 4 and starts() == before + 2
            with pytest.raises(JSONRPCError, match="started again only in"):
                await client.call_tool("pid")
            assert starts() == before + 2  # not started again meanwhile
            (tmp_path / "broken").unlink()
            await anyio.sleep(2.5)
            pids.append((await client.call_tool("pid")).text)
            assert pids[3] not in pids[:3]
    assert asked == ["Hold on"]


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_stdio_server_that_cannot_start_is_explained_to_the_client(anyio_backend: str, era: str) -> None:
    """The server exits at once (a missing setting, say), before the client's first request is answered: the client
    is told its exit status and what it wrote on stderr, rather than seeing the proxy's connection close."""
    script = "import sys; print('no DATABASE_URL in the environment', file=sys.stderr); sys.exit(2)"
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", sys.executable, "-c", script]
    with anyio.fail_after(60), pytest.raises(JSONRPCError) as failed:
        async with Client.stdio(command, protocol=era, handshake_timeout=60):
            pass
    assert "exited with status 2" in failed.value.message
    assert "no DATABASE_URL in the environment" in failed.value.message


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_behind_listen_a_crashed_stdio_server_is_started_again(
    anyio_backend: str, tmp_path: Path, era: str
) -> None:
    """``elicitor proxy --listen`` in front of a stdio server killed between calls and during a call: the client's
    session (a handshake-era one, or none on 2026-07-28) goes on, the call in flight gets how the server ended, the
    next call a server started again, and the person was asked once."""
    port = free_port()
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", "--listen", f"127.0.0.1:{port}"]
    command += [sys.executable, "-c", CRASHING_SERVER, str(tmp_path)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    asked: list[str] = []

    async def person(request: Any) -> Any:
        asked.append(request.message)
        await kill_servers(tmp_path)
        if era == "2025-11-25":
            await anyio.sleep_forever()
        return Accepted({"x": "late"})

    try:
        wait_for_port(port, process, timeout=60)
        with anyio.fail_after(90):
            async with Client.http(f"http://127.0.0.1:{port}/mcp", elicitation=person, protocol=era) as client:
                first = (await client.call_tool("pid")).text
                await kill_servers(tmp_path)
                second = (await client.call_tool("pid")).text
                assert second != first
                with pytest.raises(JSONRPCError, match="ended before it answered: it was killed by SIGKILL"):
                    await client.call_tool("wait")
                assert (await client.call_tool("pid")).text not in (first, second)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert asked == ["Hold on"]


async def test_a_call_in_flight_on_a_shared_2026_07_28_connection_hears_how_the_server_ended(
    anyio_backend: str, tmp_path: Path
) -> None:
    """``--upstream-protocol 2026-07-28``: every call goes on the one connection the proxy shares. The server is
    killed while a call runs there: that call is told how the server ended (not only that a connection closed),
    and the next call gets a server started again."""
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", "--upstream-protocol", "2026-07-28"]
    command += [sys.executable, "-c", CRASHING_SERVER, str(tmp_path)]
    with anyio.fail_after(90):
        async with Client.stdio(command, protocol="2026-07-28") as client:
            first = (await client.call_tool("pid")).text
            async with anyio.create_task_group() as tg:

                async def kill_once_running() -> None:
                    while not (tmp_path / "slow").exists():
                        await anyio.sleep(0.05)
                    await kill_servers(tmp_path)

                tg.start_soon(kill_once_running)
                with pytest.raises(JSONRPCError, match="ended before it answered: it was killed by SIGKILL"):
                    await client.call_tool("slow")
            assert (await client.call_tool("pid")).text != first


async def test_a_listen_on_a_server_that_dies_ends_with_how_it_ended(anyio_backend: str, tmp_path: Path) -> None:
    """``--listen --upstream-protocol 2026-07-28``: a ``subscriptions/listen`` stream passed to the shared
    connection, whose server is then killed: the stream ends with the error saying how the server ended, so the
    listener knows to listen again (its next request starts the server again), rather than waiting on a stream
    nothing will ever come on."""
    import json

    import httpx2 as httpx

    port = free_port()
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", "--upstream-protocol", "2026-07-28"]
    command += ["--listen", f"127.0.0.1:{port}", sys.executable, "-c", CRASHING_SERVER, str(tmp_path)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}}  # fmt: skip
    message = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
               "params": {"_meta": meta, "notifications": {"toolsListChanged": True}}}  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
               "Mcp-Method": "subscriptions/listen"}  # fmt: skip
    heard: list[dict[str, Any]] = []
    try:
        wait_for_port(port, process, timeout=60)
        with anyio.fail_after(60):
            async with (
                httpx.AsyncClient(timeout=60) as http,
                http.stream("POST", url, json=message, headers=headers) as stream,
            ):
                async for line in stream.aiter_lines():
                    if line.startswith("data:") and line[5:].strip():
                        heard.append(json.loads(line[5:]))
                        if heard[-1].get("method") == "notifications/subscriptions/acknowledged":
                            await kill_servers(tmp_path)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert heard[-1].get("id") == 1, heard
    assert "ended before it answered: it was killed by SIGKILL" in heard[-1]["error"]["message"]
