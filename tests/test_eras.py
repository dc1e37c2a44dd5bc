"""Servers and clients other people built with OLD releases, one per protocol era, against elicitor.

The releases (``scripts/peers.py`` installs each in its own environment under ``.cache/peers/``; ``make test`` runs
it): the official Python SDK 1.6.0 (2024-11-05 only: stdio and the HTTP+SSE transport), 1.9.4 (2025-03-26,
Streamable HTTP, no elicitation), 1.10.1 (the first with elicitation, 2025-06-18) and 1.24.0 (2025-11-25, URL
mode); FastMCP 2.10.6 and 2.14.5; the TypeScript SDK 1.10.2 (2024-11-05 over Streamable HTTP) and 1.13.3 (its
first with elicitation). Each server is a small file in ``tests/peers/era_*`` written for that release's API, with
a plain tool and, where the release can, a tool that asks a form.

* Our client, each server, each transport it has: the revision it speaks is the one chosen, the plain tool works,
  a form is accepted, declined and cancelled. An HTTP server is started once per module and shared by its cells.
* ``elicitor proxy`` and ``elicitor connect`` reach them.
* The old clients of each era against elicitor's server, stdio and Streamable HTTP: the revision chosen is one the
  client speaks; a client without elicitation gets a tool error that says why, never a hang.
* A 2025-03-26 server that sends JSON-RPC batches (``tests/peers/batch_server.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from elicitor import Client, ScriptedHandler

from .conftest import ROOT, free_port

pytestmark = pytest.mark.anyio

PEERS = ROOT / ".cache" / "peers"
NODE22 = ROOT / ".cache" / "node22" / "node_modules" / "node" / "bin" / "node"
SCRIPTS = ROOT / "tests" / "peers"
OURS = [sys.executable, str(ROOT / "examples" / "everything_server.py")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class OldServer:
    """A server built with an old release: where it runs, what it speaks, what it can do."""

    env: str
    """Its folder under ``.cache/peers/``."""
    script: str
    revision: str
    """The revision it chooses when our client offers its newest."""
    transports: tuple[str, ...]
    """``stdio``, ``streamable-http`` (``--port N``, at ``/mcp``), ``sse`` (``--sse-port N``, at ``/sse``)."""
    declined: str | None = "decline"
    """What its ``ask`` tool says when the person declines (``None``: no ``ask`` tool, no elicitation)."""
    one_session: bool = False
    """Its Streamable HTTP server serves one session: once that ends, every request gets HTTP 500 ("Task group is
    not initialized"), its own release's client's second session too. Each test starts it anew."""

    def command(self) -> list[str]:
        folder = PEERS / self.env
        if not (folder / ".installed").exists():
            pytest.skip(f"{folder} is missing: run `make test` (or python scripts/peers.py)")
        if self.script.endswith(".mjs"):
            node = str(NODE22) if NODE22.exists() else shutil.which("node")
            if node is None:
                pytest.skip("no node: run `make test` (or scripts/conformance.py --install-only)")
            script = folder / self.script  # beside the SDK it imports
            source = (SCRIPTS / self.script).read_text()
            if not script.exists() or script.read_text() != source:
                script.write_text(source)
            return [node, str(script)]
        return [str(folder / "bin" / "python"), str(SCRIPTS / self.script)]


ALL = ("stdio", "streamable-http", "sse")
SERVERS = {
    "mcp-1.6.0": OldServer("mcp-1.6.0", "era_mcp_1_6.py", "2024-11-05", ("stdio", "sse"), declined=None),
    "mcp-1.9.4": OldServer("mcp-1.9.4", "era_mcp_1_9.py", "2025-03-26", ALL, declined=None, one_session=True),
    "mcp-1.10.1": OldServer("mcp-1.10.1", "era_mcp_1_10.py", "2025-06-18", ALL),
    "mcp-1.24.0": OldServer("mcp-1.24.0", "era_mcp_1_24.py", "2025-11-25", ALL),
    "fastmcp-2.10.6": OldServer("mcp-1.10.1", "era_fastmcp_2.py", "2025-06-18", ALL),
    "fastmcp-2.14.5": OldServer("mcp-1.24.0", "era_fastmcp_2.py", "2025-11-25", ALL),
    "ts-sdk-1.10.2": OldServer("ts-sdk-1.10.2", "era_ts_1_10.mjs", "2024-11-05", ("stdio", "streamable-http"),
                               declined=None),
    # Its schema for the answer says accept, reject or cancel (a name 2025-06-18 changed to decline before it was
    # published): a decline fails the SDK's own check, and the tool ends with that error.
    "ts-sdk-1.13.3": OldServer("ts-sdk-1.13.3", "era_ts_1_13.mjs", "2025-06-18", ("stdio", "streamable-http"),
                               declined="Expected 'accept' | 'reject' | 'cancel', received 'decline'"),
}  # fmt: skip


class HttpServers:
    """One HTTP server process per old server and transport, started on first use, stopped with the module."""

    def __init__(self) -> None:
        self.running: dict[tuple[str, str], tuple[subprocess.Popen[bytes], str]] = {}

    def url(self, name: str, transport: str) -> str:
        if SERVERS[name].one_session and transport == "streamable-http" and (name, transport) in self.running:
            process, _ = self.running.pop((name, transport))
            process.kill()
            process.wait()
        if (name, transport) not in self.running:
            port = free_port()
            flag, path = ("--port", "/mcp") if transport == "streamable-http" else ("--sse-port", "/sse")
            process = subprocess.Popen(
                [*SERVERS[name].command(), flag, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            self.running[name, transport] = (process, f"http://127.0.0.1:{port}{path}")
            _wait_for_port(port, process)
        return self.running[name, transport][1]

    def stop(self) -> None:
        for process, _ in self.running.values():
            process.terminate()  # an old server under uvicorn waits for its open streams: not for long
            try:
                process.wait(3)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    import socket

    deadline = time.monotonic() + 120  # an old release's first start on a loaded machine compiles its bytecode
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError("the server did not start listening")


@pytest.fixture(scope="module")
def http_servers() -> Iterator[HttpServers]:
    servers = HttpServers()
    yield servers
    servers.stop()


GENEROUS: dict[str, Any] = {"probe_timeout": 120.0, "handshake_timeout": 120.0, "request_timeout": 120.0}
"""Deadlines for a client of ``elicitor proxy``: the proxy's start (its imports, the server behind it starting too)
counts in its handshake, and the machine may be loaded."""


def answers() -> ScriptedHandler:
    return ScriptedHandler([{"name": "Ada", "age": 3}, "decline", "cancel"], modes=frozenset({"form", "url"}))


CELLS = [
    pytest.param(name, transport, id=f"{name}-{transport}")
    for name, server in SERVERS.items()
    for transport in server.transports
]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("name", "transport"), CELLS)
async def test_our_client_and_an_old_server(anyio_backend: str, name: str, transport: str, http_servers: Any) -> None:
    """``protocol="auto"`` and ``transport="auto"`` as a person leaves them: the server's revision is found (its
    ``server/discover`` answered with an error, or ignored, or the death of a server of 1.6, started again), the
    redirect of ``/mcp`` to ``/mcp/`` of the SDK before 1.12 followed, ``/sse`` opened as the old transport."""
    server = SERVERS[name]
    handler = answers()
    # No limit of the probe's own over HTTP: the server is up, so server/discover is answered at once, whatever
    # the answer. On stdio the default holds: a server of 1.6 stops serving on it and says nothing.
    options: dict[str, Any] = {"elicitation": handler, "request_timeout": 60.0, "handshake_timeout": 120.0}
    if transport == "stdio":
        client = Client.stdio(server.command(), stderr=subprocess.DEVNULL, **options)
    else:
        client = Client.http(http_servers.url(name, transport), probe_timeout=600.0, **options)
    with anyio.fail_after(240):
        async with client:
            assert client.protocol_version == server.revision
            assert (await client.call_tool("echo", {"text": "hi"})).text == "echo hi"
            tools = {tool.name for tool in await client.list_tools()}
            if server.declined is None:
                assert "ask" not in tools
                assert (await client.call_tool("count")).text == "counted to three"
                return
            assert (await client.call_tool("ask")).text.startswith("accept Ada 3")
            declined = await client.call_tool("ask")
            assert server.declined in declined.text, declined.text
            assert (await client.call_tool("ask")).text == "cancel"
            if name.startswith("fastmcp"):  # its shorthands: a bare bool, a list of choices
                handler.add({"value": True}, {"value": "M"})
                assert (await client.call_tool("confirm_delete")).text == "deleted"
                assert (await client.call_tool("size")).text == "accept M"
    assert [request.message for request in handler.requests][:3] == ["Who are you?"] * 3


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["mcp-1.9.4", "mcp-1.24.0", "ts-sdk-1.13.3"])
async def test_the_proxy_in_front_of_an_old_http_server(anyio_backend: str, name: str, http_servers: Any) -> None:
    """A client of 2026-07-28 through ``elicitor proxy`` to an old Streamable HTTP server; its form comes back to
    the client (the proxy forwards what it cannot ask itself: ``--ui none``)."""
    url = http_servers.url(name, "streamable-http")
    handler = answers()
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", url]
    with anyio.fail_after(240):
        async with Client.stdio(command, elicitation=handler, protocol="2026-07-28", **GENEROUS) as client:
            assert (await client.call_tool("echo", {"text": "hi"})).text == "echo hi"
            if SERVERS[name].declined is not None:
                assert (await client.call_tool("ask")).text.startswith("accept Ada 3")


@pytest.mark.timeout(300)
async def test_the_proxy_to_an_old_sse_server_with_transport_sse(anyio_backend: str, http_servers: Any) -> None:
    """``elicitor proxy --transport sse`` to the HTTP+SSE transport of a server of 1.6 (2024-11-05)."""
    url = http_servers.url("mcp-1.6.0", "sse")
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", "--transport", "sse", url]
    with anyio.fail_after(240):
        async with Client.stdio(command, protocol="2025-11-25", **GENEROUS) as client:
            assert client.server_info is not None and client.server_info.name == "mcp-1.6.0-peer"
            assert (await client.call_tool("echo", {"text": "hi"})).text == "echo hi"


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("protocol", "pinned"), [("2026-07-28", False), ("2026-07-28", True), ("2025-11-25", False)])
async def test_the_proxy_to_a_stdio_server_of_1_6(anyio_backend: str, protocol: str, pinned: bool) -> None:
    """A handshake-era client's ``initialize`` goes to the server as it is, which answers it with 2024-11-05. For a
    client of 2026-07-28 the proxy asks ``server/discover``, which stops a stdio server of 1.6 (it says nothing,
    and exits on the next line): the proxy starts it again and begins with ``initialize``, as the client does.
    ``--upstream-protocol 2025-11-25`` begins with ``initialize`` at once."""
    pin = ["--upstream-protocol", "2025-11-25"] if pinned else []
    server = SERVERS["mcp-1.6.0"].command()
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", *pin, *server]
    before = _running(server)
    try:
        with anyio.fail_after(240):
            async with Client.stdio(command, protocol=protocol, stderr=subprocess.DEVNULL, **GENEROUS) as client:
                assert (await client.call_tool("echo", {"text": "hi"})).text == "echo hi"
        # That server does not exit when its input ends: the proxy, closed by its client (stdin closed, two
        # seconds, SIGTERM), must have stopped it first.
        with anyio.move_on_after(30):
            while _running(server) - before:
                await anyio.sleep(0.2)
        assert not _running(server) - before, "the proxy's server outlived it"
    finally:
        for pid in _running(server) - before:
            os.kill(pid, 9)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("discover", ["silent", "unaddressed"])
async def test_the_proxy_to_a_server_that_never_answers_server_discover(anyio_backend: str, discover: str) -> None:
    """A handshake-era stdio server that never answers ``server/discover``, or answers with an error whose id is
    null: the proxy's probe has the client's limit, then ``initialize`` follows on the same connection, and the
    2026-07-28 client's call is answered (without the limit, the client's handshake waits until its deadline)."""
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none"]
    command += [sys.executable, str(SCRIPTS / "batch_server.py"), "--discover", discover]
    with anyio.fail_after(240):
        async with Client.stdio(command, protocol="2026-07-28", **GENEROUS) as client:
            assert client.protocol_version == "2026-07-28"
            assert (await client.call_tool("report")).text == "the report"


def _running(command: list[str]) -> set[int]:
    """The processes running exactly ``command``."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().split(b"\0")[:-1] == [
                part.encode() for part in command
            ]:
                found.add(int(entry.name))
        except OSError:
            continue
    return found


def _connect(arguments: list[str], lines: list[str]) -> subprocess.CompletedProcess[str]:
    """``elicitor connect --ui lines`` as a script runs it, a person typing ``lines``."""
    return subprocess.run(
        [sys.executable, "-m", "elicitor", "--lang", "en", "connect", "--ui", "lines", "--timeout", "120", *arguments],
        input="".join(line + "\n" for line in lines), capture_output=True, text=True, timeout=240, cwd=ROOT,
        start_new_session=True, env={**os.environ, "LANG": "C.UTF-8", "LC_ALL": "", "LANGUAGE": ""},
    )  # fmt: skip


@pytest.mark.timeout(300)
def test_connect_to_old_servers(http_servers: Any) -> None:
    """``elicitor connect``: a form of 1.10's server over its HTTP+SSE transport asked for by name (``--transport
    sse``), and a server of 1.9 over Streamable HTTP (its ``/mcp`` redirected)."""
    url = http_servers.url("mcp-1.10.1", "sse")
    run = _connect(["--transport", "sse", url], ["ask", "", "Grace", "7", "n", "", "q"])
    assert run.returncode == 0, run.stderr
    assert "accept Grace 7" in run.stdout, (run.stdout, run.stderr)
    run = _connect([http_servers.url("mcp-1.9.4", "streamable-http")], ["count", "q"])
    assert run.returncode == 0, run.stderr
    assert "counted to three" in run.stdout, (run.stdout, run.stderr)


# ---- old clients, elicitor's server -----------------------------------------------------------------------------

CLIENTS = {"mcp-1.6.0": "2024-11-05", "mcp-1.9.4": "2025-03-26", "mcp-1.10.1": "2025-06-18", "mcp-1.24.0": "2025-11-25"}
"""Each old release's client, and the revision it asks for (elicitor's server must answer with that one)."""


def old_client(env: str, *arguments: str, script: str = "era_client.py") -> subprocess.CompletedProcess[str]:
    python = PEERS / env / "bin" / "python"
    if not (PEERS / env / ".installed").exists():
        pytest.skip(f"{PEERS / env} is missing: run `make test` (or python scripts/peers.py)")
    return subprocess.run([str(python), str(SCRIPTS / script), *arguments], capture_output=True, text=True, timeout=240)


@pytest.fixture(scope="module")
def our_http_server() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [*OURS, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT
    )
    try:
        _wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("env", "transport"),
    # 1.6 has no Streamable HTTP: see test_a_client_of_the_old_http_transport_is_refused_clearly
    [
        (env, transport)
        for env in CLIENTS
        for transport in ("stdio", "http")
        if (env, transport) != ("mcp-1.6.0", "http")
    ],
)
def test_an_old_client_and_our_server(env: str, transport: str, our_http_server: str) -> None:
    """The revision chosen is the client's; a client without elicitation reads why the tool could not ask."""
    arguments = ["stdio", *OURS] if transport == "stdio" else ["http", our_http_server]
    run = old_client(env, *arguments)
    assert run.returncode == 0, run.stderr[-3000:]
    said = json.loads(run.stdout.strip().splitlines()[-1])
    assert said["protocol"] == CLIENTS[env]
    assert "test_elicitation" in said["tools"]
    assert said["calls"]["test_simple_text"] == {
        "is_error": False,
        "text": "This is a simple text response for testing.",
    }
    asked = said["calls"]["test_elicitation"]
    if CLIENTS[env] in ("2024-11-05", "2025-03-26"):  # no elicitation in those revisions: the tool says so
        assert asked["is_error"] and "did not declare the elicitation capability" in asked["text"], asked
    else:
        assert asked == {
            "is_error": False,
            "text": "User response: action=accept, content={'username': 'ada', 'email': 'ada@example.com'}",
        }


FASTMCP_CLIENTS = {"fastmcp-2.10.6": "mcp-1.10.1", "fastmcp-2.14.5": "mcp-1.24.0"}
"""FastMCP's releases, each with its client run in the environment of the official SDK release it came with."""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("client", FASTMCP_CLIENTS)
def test_an_old_fastmcp_client_and_our_server(client: str, transport: str, our_http_server: str) -> None:
    """FastMCP's client turns each ``requestedSchema`` into a Python type for its handler to fill in: elicitor's
    forms (required fields, titled and untitled choices, multi-select on 2025-11-25) build and come back valid,
    a decline is a decline, and a client of 2025-06-18 is told why a multi-select form cannot be asked of it."""
    run = old_client(
        FASTMCP_CLIENTS[client],
        *(["stdio", *OURS] if transport == "stdio" else ["http", our_http_server]),
        script="era_fastmcp_client.py",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    accepted, declined, enums = json.loads(run.stdout.strip().splitlines()[-1])
    assert accepted == {
        "is_error": False,
        "text": "User response: action=accept, content={'username': 'ada', 'email': 'ada'}",
    }
    assert declined == {"is_error": False, "text": "User response: action=decline"}
    if client == "fastmcp-2.10.6":
        assert (
            enums["is_error"]
            and "multi-select fields (untitledMulti, titledMulti) need protocol revision" in enums["text"]
        )
    else:
        assert enums == {
            "is_error": False,
            "text": "Elicitation completed: action=accept, content=EnumForm(untitledSingle='option1', "
            "titledSingle=<Titled.VALUE1: 'value1'>, legacyEnum=<Legacy.OPT1: 'opt1'>, untitledMulti=['option1'], "
            "titledMulti=[<TitledMulti.VALUE1: 'value1'>])",
        }


TS_CLIENTS = ("ts-sdk-1.13.3",)
"""The TypeScript SDK's releases with a client that answers elicitations (1.10.2 has none)."""


def old_ts_client(env: str, *arguments: str, tool: str | None = None, answer: str | None = None) -> Any:
    """What ``era_ts_client.mjs`` said, run beside the TypeScript SDK release ``env``: ``tool`` (by default the
    example's ``test_elicitation``) called twice, accepted with ``answer`` (JSON) and then refused."""
    folder = PEERS / env
    node = str(NODE22) if NODE22.exists() else shutil.which("node")
    if not (folder / ".installed").exists() or node is None:
        pytest.skip(f"{folder} or node is missing: run `make test` (or python scripts/peers.py)")
    script = folder / "era_ts_client.mjs"  # beside the SDK it imports
    source = (SCRIPTS / "era_ts_client.mjs").read_text()
    if not script.exists() or script.read_text() != source:
        script.write_text(source)
    environment = dict(os.environ)
    if tool is not None:
        environment.update(ERA_TOOL=tool, ERA_ARGUMENTS="{}", ERA_CONTENT=answer or "{}")
    run = subprocess.run(
        [node, str(script), *arguments], capture_output=True, text=True, timeout=240, env=environment, cwd=folder
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("env", TS_CLIENTS)
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_client_of_the_draft_refuses_with_reject(env: str, transport: str, our_http_server: str) -> None:
    """The TypeScript SDK's client up to 1.13 refuses with ``reject``, 2025-06-18's draft word for ``decline``:
    the tool hears a decline, as from any client, where it failed with "an unknown action" before."""
    said = old_ts_client(env, *(["stdio", *OURS] if transport == "stdio" else ["http", our_http_server]))
    assert said["refusal"] == "reject"
    accepted = "User response: action=accept, content={'username': 'ada', 'email': 'ada@example.com'}"
    assert said["calls"] == [
        {"is_error": False, "text": accepted},
        {"is_error": False, "text": "User response: action=decline"},
    ]


@pytest.mark.timeout(300)
def test_the_proxy_tells_a_server_decline_for_the_drafts_reject() -> None:
    """In front of the official SDK's server, which fails the call on an action it does not know, the proxy
    passes a draft client's ``reject`` on as ``decline``: the tool hears the person said no."""
    server = [sys.executable, str(SCRIPTS / "mcp_server.py")]
    proxy = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", *server]
    said = old_ts_client(TS_CLIENTS[0], "stdio", *proxy, tool="push_ask", answer='{"name": "Ada", "age": 36}')
    assert said["calls"] == [{"is_error": False, "text": "hello Ada, 36"}, {"is_error": False, "text": "decline"}]


@pytest.mark.timeout(300)
def test_a_client_of_the_old_http_transport_is_refused_clearly(our_http_server: str) -> None:
    """elicitor's server has no HTTP+SSE transport of 2024-11-05: a client of 1.6 (it has no other over HTTP)
    reads HTTP 405 on its GET at once, and ends."""
    run = old_client("mcp-1.6.0", "sse", our_http_server)
    assert run.returncode != 0
    assert "405" in run.stderr, run.stderr[-3000:]


# ---- batches (2025-03-26) ---------------------------------------------------------------------------------------


@pytest.mark.timeout(300)
async def test_batches_from_a_server_of_2025_03_26(anyio_backend: str) -> None:
    """A call answered in a batch with its progress and a log message, and a batch of requests from the server
    (two pings, each answered), on stdio; a batch on a call's SSE stream over HTTP."""
    script = [sys.executable, str(SCRIPTS / "batch_server.py")]
    logged: list[Any] = []
    progress: list[float] = []

    async def on_log(level: str, data: Any, source: str | None) -> None:
        logged.append(data)

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    with anyio.fail_after(120):
        async with Client.stdio(script, on_log=on_log, request_timeout=60) as client:
            assert client.protocol_version == "2025-03-26"
            assert (await client.call_tool("report", progress=on_progress)).text == "the report"
            assert (await client.call_tool("ping_twice")).text == "pinged twice"
    assert logged == ["reported"] and progress == [1]
    port = free_port()
    process = subprocess.Popen([*script, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, process)
        with anyio.fail_after(120):
            async with Client.http(f"http://127.0.0.1:{port}/mcp", request_timeout=60, probe_timeout=120) as client:
                assert client.protocol_version == "2025-03-26"
                assert (await client.call_tool("report")).text == "the report"
    finally:
        process.terminate()
        process.wait(10)


def test_every_installed_peer_is_in_the_matrix() -> None:
    """What ``scripts/peers.py`` installs is what this file runs (a peer added there and not here would be for
    nothing)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("elicitor_test_peers_script", ROOT / "scripts" / "peers.py")
    assert spec is not None and spec.loader is not None
    peers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peers)
    assert {server.env for server in SERVERS.values()} == set(peers.PYTHON_PEERS) | set(peers.NODE_PEERS)
    assert set(CLIENTS) == set(peers.PYTHON_PEERS)
    assert Path(peers.PEERS) == PEERS
