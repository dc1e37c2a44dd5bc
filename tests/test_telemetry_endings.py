"""How a session ended, in the session metrics: ``mcp.server.session.duration`` and ``mcp.client.session.duration``
say ``error.type`` when a handshake-era session ends badly (the conventions: "if and only if session ends with an
error"), from a bounded set, and nothing when it ends as the specification says. Each peer here is a real process,
killed with SIGKILL, over a real pipe or real HTTP.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from elicitor import Client, ConnectionClosed, Context, Server
from elicitor.transports import StdioServerTransport

from .conftest import ROOT, free_port, serving
from .replicas import wait_for_port
from .test_telemetry import Otel, otel
from .test_telemetry_serve import inherited

__all__ = ["otel"]  # the fixture, shared

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn runs on asyncio


asking = Server("asking", "1.0")
waiting: list[anyio.Event] = []
"""Set when the tool has asked its question: the client is then mid-call, the server waiting on it."""


@asking.tool()
async def ask(ctx: Context) -> str:
    """Asks a question nobody answers."""
    for event in waiting:
        event.set()
    await ctx.elicit("Which vault?", {"type": "object", "properties": {"vault": {"type": "string"}}})
    return "answered"


@asking.tool()
async def hello() -> str:
    return "hello"


def ended(otel: Otel, side: str) -> list[dict[str, Any]]:
    """The attributes of each point of ``side``'s session duration metric."""
    return [dict(p.attributes) for p in otel.metric_points().get(f"mcp.{side}.session.duration", ())]


async def until_recorded(otel: Otel, side: str) -> list[dict[str, Any]]:
    with anyio.fail_after(60):  # generous: a loaded machine
        while not ended(otel, side):
            await anyio.sleep(0.02)
    return ended(otel, side)


def killed(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


async def test_a_stdio_server_killed_mid_call_ends_the_clients_session_with_connection_lost(
    otel: Otel, tmp_path: Path
) -> None:
    """The server process is killed while the client's call waits on it: the client's session ends with
    ``error.type = connection_lost``."""
    pidfile = tmp_path / "server.pid"
    serve = f"{sys.executable} -m elicitor serve tests.peers.cli_server:server --transport stdio"
    command = ["sh", "-c", f'echo $$ > "{pidfile}"; exec {serve}']  # exec: the pid written is the server's

    async def kill_the_server(_request: Any) -> dict[str, Any]:
        os.kill(int(pidfile.read_text()), signal.SIGKILL)
        await anyio.sleep_forever()
        raise AssertionError  # never reached

    with anyio.fail_after(60):
        async with Client.stdio(
            command, env={**inherited(), "PYTHONPATH": str(ROOT)}, cwd=ROOT, elicitation=kill_the_server,
            protocol="2025-11-25",
        ) as client:  # fmt: skip
            with pytest.raises(ConnectionClosed):
                await client.call_tool("ship")
    [point] = await until_recorded(otel, "client")
    assert point == {"mcp.protocol.version": "2025-11-25", "network.transport": "pipe", "error.type": "connection_lost"}


async def test_a_stdio_server_that_stays_ends_the_clients_session_without_an_error(otel: Otel) -> None:
    """The control: the client closes the server's stdin as the specification says, and nothing went wrong."""
    command = [sys.executable, "-m", "elicitor", "serve", "tests.peers.cli_server:server", "--transport", "stdio"]
    with anyio.fail_after(60):
        async with Client.stdio(
            command, env={**inherited(), "PYTHONPATH": str(ROOT)}, cwd=ROOT, protocol="2025-11-25"
        ) as client:
            await client.list_tools()
    [point] = await until_recorded(otel, "client")
    assert "error.type" not in point, point


RAW_CLIENT = textwrap.dedent(
    """
    import json, sys

    def send(message):
        sys.stdout.write(json.dumps(message) + "\\n")
        sys.stdout.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
          "capabilities": {"elicitation": {}}, "clientInfo": {"name": "raw", "version": "1"}}})
    sys.stdin.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": sys.argv[1], "arguments": {}}})
    for line in sys.stdin:  # a question comes, and is never answered; or the call's answer
        if json.loads(line).get("id") == 2 and "result" in line:
            open(sys.argv[2], "w").close()
    """
)
"""A stdio client in a process of its own, speaking the protocol by hand: it initializes and calls a tool, then
only reads (and makes the file it is given once the call is answered)."""


@contextmanager
def raw_client(tool: str, answered: Path) -> Iterator[tuple[subprocess.Popen[bytes], StdioServerTransport]]:
    """:data:`RAW_CLIENT` calling ``tool``, its stdin and stdout the pipes of a stdio server transport of ours;
    ``answered`` is made once it has read the call's answer."""
    to_client, ours_out = os.pipe()
    ours_in, from_client = os.pipe()
    command = [sys.executable, "-c", RAW_CLIENT, tool, str(answered)]
    process = subprocess.Popen(command, stdin=to_client, stdout=from_client)
    os.close(to_client)
    os.close(from_client)
    try:
        yield process, StdioServerTransport(ours_in, ours_out)
    finally:
        if process.poll() is None:
            killed(process)
        os.close(ours_in)
        os.close(ours_out)


async def test_a_stdio_client_killed_mid_call_ends_the_servers_session_with_connection_lost(
    otel: Otel, tmp_path: Path
) -> None:
    """The client process is killed while the server waits for its answer to a question: the server's session
    ends with ``error.type = connection_lost``."""
    asked = anyio.Event()
    waiting.append(asked)
    try:
        with raw_client("ask", tmp_path / "answered") as (process, transport):
            async with anyio.create_task_group() as tg:
                tg.start_soon(asking.serve, transport)
                with anyio.fail_after(60):
                    await asked.wait()
                killed(process)
                [point] = await until_recorded(otel, "server")
    finally:
        waiting.remove(asked)
    assert point == {"mcp.protocol.version": "2025-11-25", "network.transport": "pipe", "error.type": "connection_lost"}


async def test_a_stdio_client_that_leaves_with_nothing_under_way_ends_the_servers_session_well(
    otel: Otel, tmp_path: Path
) -> None:
    """The control: the client's call was answered, and its input ends (killed or closed: the server cannot tell,
    and the specification's way to end a stdio session is to close the server's input)."""
    answered = tmp_path / "answered"
    with raw_client("hello", answered) as (process, transport):
        async with anyio.create_task_group() as tg:
            tg.start_soon(asking.serve, transport)
            with anyio.fail_after(60):
                while not answered.exists():
                    await anyio.sleep(0.02)
            killed(process)
            [point] = await until_recorded(otel, "server")
    assert "error.type" not in point, point


CALLER = textwrap.dedent(
    """
    import sys

    import anyio

    from elicitor import Client

    async def never(_request):
        await anyio.sleep_forever()

    async def main():
        async with Client.http(sys.argv[1], elicitation=never, protocol="2025-11-25") as client:
            await client.call_tool("ask")

    anyio.run(main)
    """
)
"""An HTTP client in a process of its own: it calls a tool that asks, and never answers."""


async def test_an_http_client_killed_mid_call_leaves_a_session_that_expires_with_timeout(otel: Otel) -> None:
    """The client process is killed while the server waits for its answer: it never ends its session (no DELETE),
    which expires after the idle timeout, ``error.type = timeout``."""
    asked = anyio.Event()
    waiting.append(asked)
    try:
        async with serving(asking.http_app(session_idle_timeout=1.0)) as url:
            process = subprocess.Popen(
                [sys.executable, "-c", CALLER, url], cwd=ROOT, env={**inherited(), "PYTHONPATH": str(ROOT)}
            )
            try:
                with anyio.fail_after(60):
                    await asked.wait()
            finally:
                killed(process)
            [point] = await until_recorded(otel, "server")
    finally:
        waiting.remove(asked)
    assert point == {
        "mcp.protocol.version": "2025-11-25", "network.transport": "tcp", "network.protocol.name": "http",
        "network.protocol.version": "1.1", "error.type": "timeout",
    }  # fmt: skip


@contextmanager
def served_by_a_process(port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``elicitor serve`` of the ``elicitor connect`` tests' server over HTTP on ``port``, as a process."""
    command = [sys.executable, "-m", "elicitor", "serve", "tests.peers.cli_server:server", "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env={**inherited(), "PYTHONPATH": str(ROOT)}, stdout=out, stderr=out,
            start_new_session=True,
        )  # fmt: skip
    try:
        wait_for_port(port, process)
        yield process
    finally:
        if process.poll() is None:
            killed(process)


@pytest.mark.parametrize(
    ("what", "error"), [("killed", "connection_lost"), ("restarted", "session_expired"), ("stays", None)]
)
async def test_an_http_server_killed_under_a_session_ends_the_clients_badly(
    otel: Otel, tmp_path: Path, what: str, error: str | None
) -> None:
    """The server process is killed while the client's session is open: the client cannot end it (its DELETE
    reaches nobody), ``error.type = connection_lost``; started again meanwhile, the new process knows nothing of
    the session (404 to the DELETE), ``session_expired``; still there, the DELETE ends it well (the control)."""
    port = free_port()
    with contextlib.ExitStack() as processes:
        process = processes.enter_context(served_by_a_process(port, tmp_path / "server.log"))
        with anyio.fail_after(60):
            async with Client.http(f"http://127.0.0.1:{port}/mcp", protocol="2025-11-25") as client:
                await client.list_tools()
                if what != "stays":
                    killed(process)
                if what == "restarted":
                    processes.enter_context(served_by_a_process(port, tmp_path / "again.log"))
    [point] = await until_recorded(otel, "client")
    network = {"network.transport": "tcp", "network.protocol.name": "http", "network.protocol.version": "1.1"}
    assert point == {"mcp.protocol.version": "2025-11-25", **network, **({"error.type": error} if error else {})}
