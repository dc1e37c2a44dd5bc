"""Stopping a server as an operator does: SIGTERM (an orchestrator, ``kill``, ``systemctl stop``) or Ctrl-C, to
``elicitor serve`` (HTTP and stdio), ``elicitor proxy --listen`` and ``Server.run("http")``, each a real process.

A stop that was asked for and done is a success: exit status 0 (``run`` returns), never the signal's 143, which
service managers count as a failure; the calls in flight finish within the grace, and what the grace had to cut is
said in the log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import anyio
import httpx2 as httpx
import pytest

from elicitor import Client

from .replicas import ROOT, free_port, wait_for_port
from .test_replicas import events, open_session, rpc

pytestmark = pytest.mark.anyio

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextmanager
def started(command: list[str], port: int | None) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` running (serving on ``port``, or on its stdin/stdout with ``None``); killed if a test leaves it."""
    process = subprocess.Popen(
        command, cwd=ROOT, env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        if port is not None:
            wait_for_port(port, process, timeout=60)
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=60)


def stopped(process: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    """Wait for ``process`` to exit by itself (its stdin left open: a stdio server would end at its end): its status,
    stdout and stderr."""
    process.wait(timeout=90)
    out, err = process.communicate(timeout=10)
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def stdio_call(process: subprocess.Popen[bytes], *messages: dict[str, Any]) -> dict[str, Any]:
    """Send ``messages`` to a stdio server; the first message it sends back after them."""
    assert process.stdin is not None and process.stdout is not None
    for message in messages:
        process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()
    line = process.stdout.readline()
    assert line, "the server closed its stdout"
    found: dict[str, Any] = json.loads(line)
    return found


INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
               "clientInfo": {"name": "stopping", "version": "1"}},
}  # fmt: skip

SERVE = [sys.executable, "-m", "elicitor", "serve", "tests.peers.stop_server:server"]


@pytest.mark.parametrize(
    ("what", "sig"),
    [("serve", signal.SIGTERM), ("serve", signal.SIGINT), ("stdio", signal.SIGINT), ("proxy", signal.SIGTERM)],
)
def test_a_requested_stop_of_an_idle_server_exits_0(what: str, sig: signal.Signals) -> None:
    """uvicorn raised the stopping signal again once its shutdown was done, so ``elicitor serve`` and ``elicitor
    proxy --listen`` died of their SIGTERM (143); a stdio server died of it (SIGTERM's default), and Ctrl-C ended it
    with a KeyboardInterrupt traceback."""
    port = None if what == "stdio" else free_port()
    if what == "serve":
        command = [*SERVE, "--port", str(port)]
    elif what == "stdio":
        command = [*SERVE, "--transport", "stdio"]
    else:
        command = [sys.executable, "-m", "elicitor", "proxy", "--listen", f"127.0.0.1:{port}",
                   sys.executable, "-m", "tests.peers.stop_server"]  # fmt: skip
    with started(command, port) as process:
        if port is None:  # serving once it answers
            assert stdio_call(process, INITIALIZE)["id"] == 1
        process.send_signal(sig)
        status, _, err = stopped(process)
    assert status == 0, err
    assert "Traceback" not in err, err


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_a_call_in_flight_finishes_within_the_grace_and_serve_exits_0(protocol: str) -> None:
    """SIGTERM while a call works: the call's answer arrives, then ``elicitor serve`` exits 0 without a word of
    anything cut."""
    port = free_port()
    with started([*SERVE, "--port", str(port)], port) as process:

        async def stop_now(progress: float, total: float | None, message: str | None) -> None:
            process.send_signal(signal.SIGTERM)

        with anyio.fail_after(60):
            async with Client.http(f"http://127.0.0.1:{port}/mcp", protocol=protocol) as client:
                result = await client.call_tool("work", {"seconds": 2}, progress=stop_now)
        assert result.text == "worked 2 s"
        status, _, err = stopped(process)
    assert status == 0, err
    assert "ended" not in err and "Cancel" not in err and "Traceback" not in err, err


@pytest.mark.parametrize("how", ["run", "serve"])
async def test_a_call_cut_at_the_end_of_the_grace_is_said_and_run_returns(how: str) -> None:
    """``Server.run("http", shutdown_grace=2)`` (and ``elicitor serve --shutdown-grace 2``): SIGTERM while a call
    waits on a person who never answers; two seconds later the call is ended, the log says so, and ``run``
    returns (the script goes on: exit 0)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    if how == "run":
        command = [sys.executable, "-m", "tests.peers.stop_server", str(port), "2"]
    else:
        command = [*SERVE, "--port", str(port), "--shutdown-grace", "2"]
    with started(command, port) as process:
        with anyio.fail_after(60):
            async with httpx.AsyncClient(timeout=30) as http:
                headers = await open_session(http, url)
                async with http.stream(
                    "POST", url, json=rpc("tools/call", {"name": "ask"}, id=2), headers=headers
                ) as response:
                    async for _, message in events(response):
                        if message.get("method") == "elicitation/create":  # waits on the person: stop the server
                            process.send_signal(signal.SIGTERM)
        status, out, err = stopped(process)
    assert status == 0, err
    assert out == ("run returned\n" if how == "run" else "")
    assert "1 call(s) still in flight at the end of the 2 s grace are ended now" in err, err
    assert "Traceback" not in err, err


def test_a_stdio_server_stopped_with_a_call_in_flight_says_so_and_exits_0() -> None:
    """SIGTERM (what a host sends after closing stdin, if the server has not gone) while a call waits on the
    person: the call ends at once, the log says so, and the status is 0."""
    with started([*SERVE, "--transport", "stdio"], None) as process:
        assert stdio_call(process, INITIALIZE)["id"] == 1
        question = stdio_call(
            process,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ask", "arguments": {}}},
        )
        assert question["method"] == "elicitation/create"
        process.send_signal(signal.SIGTERM)
        status, _, err = stopped(process)
    assert status == 0, err
    assert "stopping on SIGTERM: 1 request(s) in flight are ended" in err, err


def test_a_negative_shutdown_grace_is_refused() -> None:
    done = subprocess.run(
        [*SERVE, "--shutdown-grace", "-1"], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "--shutdown-grace must be a whole number of seconds, 0 or more" in done.stderr


STUBBORN = (  # answers initialize, then neither reads its input nor ends when it closes
    "import json, sys, time\n"
    "request = json.loads(sys.stdin.readline())\n"
    "print(json.dumps({'jsonrpc': '2.0', 'id': request['id'], 'result': {'protocolVersion': '2025-11-25',"
    " 'capabilities': {}, 'serverInfo': {'name': 'stubborn', 'version': '1'}}}), flush=True)\n"
    "time.sleep(120)\n"
)


def test_a_sigterm_to_the_stdio_proxy_stops_its_server_and_exits_0() -> None:
    """A host that sends ``elicitor proxy`` SIGTERM without closing its stdin first: the proxy stops the server
    it started (which would not end by itself) and exits 0. It died of the signal, its server left running."""
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", sys.executable, "-c", STUBBORN]
    with started(command, None) as process:
        assert stdio_call(process, INITIALIZE)["id"] == 1
        [server] = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
        process.send_signal(signal.SIGTERM)
        status, _, err = stopped(process)
    assert status == 0, err
    with suppress(FileNotFoundError):  # a zombie until reaped by init: gone either way
        assert open(f"/proc/{server}/stat").read().split()[2] == "Z", "the proxy's server outlived it"
