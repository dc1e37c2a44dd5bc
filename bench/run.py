"""Benchmarks of performance.md: elicitor against the official MCP Python SDK and FastMCP, in one run.

    python bench/run.py [--runs 3] [--scenarios a,echo,e,b,c,cx,eh,d,dh,f] [--n 2000] [--many 100000]

stdio: (a) one tools/call with n sequential form elicitations (handshake revision 2025-11-25): elicitations/s and
server CPU µs per elicitation; (echo) (a) against a bare asyncio JSON-lines echo of the same message shapes
(bench/servers/echo_server.py), the reference limit, with the library's client and, server against server, with
the echo's bare loop driving elicitor's server: on the chosen event loop (--loop: uvloop if installed, as elicitor
picks it) and, interleaved, on asyncio's own, both clients and elicitor's server alike (the echo server always on
asyncio's own). (d) 1000 tool calls each blocked on a pending elicitation:
server RSS growth per pending elicitation. (e) the same n elicitations on 2026-07-28, each one a multi-round-trip
round. (f) 100,000 tool calls on one connection, each waiting on its elicitation at once: server RSS per pending
one, and how long putting them in flight and answering them takes (elicitor alone, driven by a bare JSON-lines
client).
Streamable HTTP on 127.0.0.1 (uvicorn on both sides): (b) one session, n/2 elicitations; (c) 50 concurrent sessions
of 50 elicitations each, total elicitations/s; (cx) the official SDK's client doing (c) against elicitor's server
and against its own (what the server alone is worth to its clients); (eh) n/2 multi-round-trip rounds; (dh) as
(d) over HTTP, and the seconds each client takes to drain the pending answers once its handler releases them.
FastMCP (when installed; make bench installs it) runs (a), (b) and (c): its ctx.elicit has no 2026-07-28 path.
Each library uses its own client; the client's handler accepts at once with {"name": "x", "age": 1}. Medians of
the runs with min-max; ratios are computed run by run. Timings never appear in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import mcp_types as mt
import msgspec
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from elicitor import Accepted, Client, ElicitationRequest
from elicitor._loop import event_loop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from holding import ANSWER, Holding
from results import record

HERE = Path(__file__).resolve().parent
OURS = [sys.executable, str(HERE / "servers" / "elicitor_server.py")]
THEIRS = StdioServerParameters(command=sys.executable, args=[str(HERE / "servers" / "mcp_server.py")])

Result = tuple[float, float]  # (rate or KiB, server CPU µs per elicitation)


async def _ours_handler(request: ElicitationRequest) -> Accepted[dict[str, Any]]:
    return Accepted(ANSWER)


async def _theirs_handler(context: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
    return mt.ElicitResult(action="accept", content=ANSWER)


def _probe(text: str) -> tuple[float, int]:
    cpu, rss = text.split()
    return float(cpu), int(rss)


async def ours_rate(n: int, protocol: str) -> Result:
    async with Client.stdio(OURS, elicitation=_ours_handler, protocol=protocol, max_rounds=n + 1) as client:
        await client.call_tool("ask", {"n": 10})  # warm up
        cpu0, _ = _probe((await client.call_tool("probe")).text)
        start = time.perf_counter()
        result = await client.call_tool("ask", {"n": n})
        elapsed = time.perf_counter() - start
        cpu1, _ = _probe((await client.call_tool("probe")).text)
    assert result.text == str(n), result
    return n / elapsed, (cpu1 - cpu0) / n * 1e6


async def theirs_rate(n: int, protocol: str) -> Result:
    mode = "legacy" if protocol != "2026-07-28" else protocol
    tool = "ask" if mode == "legacy" else "ask_rounds"
    async with McpClient(
        THEIRS, elicitation_callback=_theirs_handler, mode=mode, input_required_max_rounds=n + 1
    ) as client:
        await client.call_tool(tool, {"n": 10})
        cpu0, _ = _probe(_text(await client.call_tool("probe", {})))
        start = time.perf_counter()
        result = await client.call_tool(tool, {"n": n})
        elapsed = time.perf_counter() - start
        cpu1, _ = _probe(_text(await client.call_tool("probe", {})))
    assert _text(result) == str(n), result
    return n / elapsed, (cpu1 - cpu0) / n * 1e6


def _text(result: mt.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mt.TextContent)
    return block.text


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def http_server(script: str) -> AsyncIterator[str]:
    """Run a bench server over Streamable HTTP in its own process; yields its URL."""
    port = _port()
    process = subprocess.Popen(
        [sys.executable, str(HERE / "servers" / script), "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120  # a loaded machine, or a server tracing its allocations, starts slowly
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{script} did not start") from None
                await anyio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def ours_http(n: int, protocol: str, sessions: int = 1) -> Result:
    async with (
        http_server("elicitor_server.py") as url,
        Client.http(url, elicitation=_ours_handler, protocol=protocol) as probe,
    ):
        await probe.call_tool("ask", {"n": 5})
        cpu0, _ = _probe((await probe.call_tool("probe")).text)

        async def one() -> None:
            async with Client.http(url, elicitation=_ours_handler, protocol=protocol, max_rounds=n + 1) as client:
                result = await client.call_tool("ask", {"n": n})
                assert result.text == str(n), result

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(sessions):
                tg.start_soon(one)
        elapsed = time.perf_counter() - start
        cpu1, _ = _probe((await probe.call_tool("probe")).text)
    total = n * sessions
    return total / elapsed, (cpu1 - cpu0) / total * 1e6


async def theirs_http(n: int, protocol: str, sessions: int = 1, server: str = "mcp_server.py") -> Result:
    """The official SDK's client on ``server`` (its own by default; ``elicitor_server.py`` for (cx))."""
    mode = "legacy" if protocol != "2026-07-28" else protocol
    tool = "ask" if mode == "legacy" or server != "mcp_server.py" else "ask_rounds"
    async with (
        http_server(server) as url,
        McpClient(url, elicitation_callback=_theirs_handler, mode=mode) as probe,
    ):
        await probe.call_tool(tool, {"n": 5})
        cpu0, _ = _probe(_text(await probe.call_tool("probe", {})))

        async def one() -> None:
            async with McpClient(
                url, elicitation_callback=_theirs_handler, mode=mode, input_required_max_rounds=n + 1
            ) as client:
                result = await client.call_tool(tool, {"n": n})
                assert _text(result) == str(n), result

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(sessions):
                tg.start_soon(one)
        elapsed = time.perf_counter() - start
        cpu1, _ = _probe(_text(await probe.call_tool("probe", {})))
    total = n * sessions
    return total / elapsed, (cpu1 - cpu0) / total * 1e6


FAST = [sys.executable, str(HERE / "servers" / "fastmcp_server.py")]
"""FastMCP's server for the handshake scenarios, when fastmcp is installed (make bench installs it)."""


def fastmcp_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("fastmcp") is not None


async def _fast_handler(message: str, response_type: Any, params: Any, context: Any) -> dict[str, Any]:
    return ANSWER


def _fast_text(result: Any) -> str:
    return str(result.data)


async def fastmcp_rate(n: int) -> Result:
    """(a) with FastMCP's server and client, over stdio, 2025-11-25."""
    from fastmcp import Client as FastClient
    from fastmcp.client.transports import StdioTransport

    transport = StdioTransport(command=FAST[0], args=FAST[1:])
    async with FastClient(transport, elicitation_handler=_fast_handler, mode="legacy") as client:
        await client.call_tool("ask", {"n": 10})
        cpu0, _ = _probe(_fast_text(await client.call_tool("probe", {})))
        start = time.perf_counter()
        result = await client.call_tool("ask", {"n": n})
        elapsed = time.perf_counter() - start
        cpu1, _ = _probe(_fast_text(await client.call_tool("probe", {})))
    assert _fast_text(result) == str(n), result
    return n / elapsed, (cpu1 - cpu0) / n * 1e6


async def fastmcp_http(n: int, sessions: int = 1) -> Result:
    """(b) and (c) with FastMCP's server (uvicorn, as it runs itself) and client, 2025-11-25."""
    from fastmcp import Client as FastClient

    async with (
        http_server("fastmcp_server.py") as url,
        FastClient(url, elicitation_handler=_fast_handler, mode="legacy") as probe,
    ):
        await probe.call_tool("ask", {"n": 5})
        cpu0, _ = _probe(_fast_text(await probe.call_tool("probe", {})))

        async def one() -> None:
            async with FastClient(url, elicitation_handler=_fast_handler, mode="legacy") as client:
                result = await client.call_tool("ask", {"n": n})
                assert _fast_text(result) == str(n), result

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(sessions):
                tg.start_soon(one)
        elapsed = time.perf_counter() - start
        cpu1, _ = _probe(_fast_text(await probe.call_tool("probe", {})))
    total = n * sessions
    return total / elapsed, (cpu1 - cpu0) / total * 1e6


Memory = tuple[float, float, float]
"""Server RSS growth per pending elicitation (KiB), seconds to drain them all once released, and the server's RSS
growth (MiB) from all pending to all drained (a server that holds on to what it answered shows here)."""


async def ours_memory(count: int, http: bool = False) -> Memory:
    """(d): see :data:`Memory`."""
    held = Holding(count)
    async with AsyncExitStack() as stack:
        if http:
            url = await stack.enter_async_context(http_server("elicitor_server.py"))
            client = Client.http(url, elicitation=held.handler, protocol="2025-11-25")
        else:
            client = Client.stdio(OURS, elicitation=held.handler, protocol="2025-11-25")
        await stack.enter_async_context(client)
        await client.call_tool("ask", {"n": 10})
        _, rss0 = _probe((await client.call_tool("probe")).text)
        held.armed = True
        async with anyio.create_task_group() as tg:
            for _ in range(count):
                tg.start_soon(client.call_tool, "ask", {"n": 1})
            await held.all_in.wait()
            _, rss1 = _probe((await client.call_tool("probe")).text)
            start = time.perf_counter()
            held.release.set()
        drained = time.perf_counter() - start
        _, rss2 = _probe((await client.call_tool("probe")).text)
    return (rss1 - rss0) / count, drained, (rss2 - rss1) / 1024


async def theirs_memory(count: int, http: bool = False) -> Memory:
    held = Holding(count)

    async def handler(context: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        await held.hold()
        return mt.ElicitResult(action="accept", content=ANSWER)

    async with AsyncExitStack() as stack:
        target: Any = THEIRS
        if http:
            # Its default pool (100 connections) times out with 1,000 streams open: give it room, as ours has.
            url = await stack.enter_async_context(http_server("mcp_server.py"))
            pool = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=300.0), limits=httpx.Limits(max_connections=4096))
            target = streamable_http_client(url, http_client=await stack.enter_async_context(pool))
        client = await stack.enter_async_context(McpClient(target, elicitation_callback=handler, mode="legacy"))
        await client.call_tool("ask", {"n": 10})
        _, rss0 = _probe(_text(await client.call_tool("probe", {})))
        held.armed = True
        async with anyio.create_task_group() as tg:
            for _ in range(count):
                tg.start_soon(client.call_tool, "ask", {"n": 1})
            await held.all_in.wait()
            _, rss1 = _probe(_text(await client.call_tool("probe", {})))
            start = time.perf_counter()
            held.release.set()
        drained = time.perf_counter() - start
        _, rss2 = _probe(_text(await client.call_tool("probe", {})))
    return (rss1 - rss0) / count, drained, (rss2 - rss1) / 1024


async def floor_memory(count: int) -> float:
    """Server RSS growth per open SSE response of a bare uvicorn app (bench/servers/floor_server.py), in KiB.

    What any Python server on this stack spends to hold one pending elicitation open before it does any work.
    """
    async with (
        http_server("floor_server.py") as url,
        httpx.AsyncClient(limits=httpx.Limits(max_connections=None, max_keepalive_connections=None)) as http,
    ):
        base = url.removesuffix("/mcp")

        async def rss() -> int:
            return _probe((await http.get(f"{base}/probe")).text)[1]

        rss0 = await rss()
        opened = 0
        all_open = anyio.Event()

        async def one() -> None:
            nonlocal opened
            async with http.stream("POST", url, content=b"{}", timeout=120) as response:
                chunks = response.aiter_bytes()
                await chunks.__anext__()  # the priming event: the response is open and waiting
                opened += 1
                if opened == count:
                    all_open.set()
                async for _ in chunks:
                    pass

        async with anyio.create_task_group() as tg:
            for _ in range(count):
                tg.start_soon(one)
            await all_open.wait()
            rss1 = await rss()
            await http.post(f"{base}/release")
    return (rss1 - rss0) / count


Many = tuple[float, float, float, float]
"""(f): KiB of server RSS per pending elicitation, seconds to put them all in flight, seconds to answer them all,
and MiB the server's RSS grew while they drained."""


async def ours_many_pending(count: int) -> Many:
    """(f): ``count`` tool calls on one stdio connection, each waiting on its elicitation at once.

    The client is a bare JSON-lines driver over the pipe (what this measures is the server: the library's client
    would hold a task per question, and its own limit of 65,536 requests in flight). The server's limit on a
    connection's calls in flight is raised for the run (``BENCH_MAX_IN_FLIGHT``); nothing else changes.
    """
    encode, decode = msgspec.json.encode, msgspec.json.decode
    env = {**os.environ, "BENCH_MAX_IN_FLIGHT": str(count + 16)}
    process = await asyncio.create_subprocess_exec(
        *OURS, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env, limit=1 << 20
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    async def send(*messages: dict[str, Any]) -> None:
        stdin.write(b"".join(encode(m) + b"\n" for m in messages))
        await stdin.drain()

    async def until(request_id: int, questions: list[Any] | None = None, results: list[Any] | None = None) -> Any:
        """Read until the response to ``request_id``, gathering questions and other results on the way."""
        while True:
            message = decode(await stdout.readline())
            if message.get("method") == "elicitation/create" and questions is not None:
                questions.append(message["id"])
            elif message.get("id") == request_id and "method" not in message:
                return message
            elif results is not None and "result" in message:
                results.append(message["id"])

    def call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        params = {"name": name, "arguments": arguments}
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}

    async def rss(request_id: int, **gather: Any) -> int:
        await send(call(request_id, "probe", {}))
        return _probe((await until(request_id, **gather))["result"]["content"][0]["text"])[1]

    init = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "f"}}
    try:
        await send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        await until(0)
        await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        rss0 = await rss(-1)
        start = time.perf_counter()
        questions: list[Any] = []
        for first in range(1, count + 1, 1000):
            await send(*(call(i, "ask", {"n": 1}) for i in range(first, min(first + 1000, count + 1))))
        while len(questions) < count:
            message = decode(await stdout.readline())
            if message.get("method") == "elicitation/create":
                questions.append(message["id"])
        in_flight = time.perf_counter() - start
        rss1 = await rss(-2)
        start = time.perf_counter()
        answer = {"action": "accept", "content": ANSWER}
        results: list[Any] = []
        for first in range(0, count, 1000):
            await send(*({"jsonrpc": "2.0", "id": q, "result": answer} for q in questions[first : first + 1000]))
        while len(results) < count:
            message = decode(await stdout.readline())
            if "result" in message:
                assert message["result"]["content"][0]["text"] == "1", message
                results.append(message["id"])
        drained = time.perf_counter() - start
        rss2 = await rss(-3)
    finally:
        stdin.close()
        await process.wait()
    return (rss1 - rss0) / count, in_flight, drained, (rss2 - rss1) / 1024


ECHO = [sys.executable, str(HERE / "servers" / "echo_server.py")]


async def echo_rate(n: int) -> Result:
    """The bare asyncio echo (bench/servers/echo_server.py): round trips/s and server CPU µs per round trip, the
    client a bare loop writing an answer and reading the next question."""
    encode, decode = msgspec.json.encode, msgspec.json.decode
    process = await asyncio.create_subprocess_exec(
        *ECHO, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 20
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    answer = encode({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept", "content": ANSWER}}) + b"\n"

    async def cpu() -> float:
        stdin.write(b'{"jsonrpc":"2.0","id":"probe","method":"probe"}\n')
        return _probe(decode(await stdout.readline())["result"])[0]

    try:
        for _ in range(10):
            stdin.write(answer)
            decode(await stdout.readline())
        cpu0 = await cpu()
        start = time.perf_counter()
        for _ in range(n):
            stdin.write(answer)
            await stdin.drain()
            decode(await stdout.readline())
        elapsed = time.perf_counter() - start
        cpu1 = await cpu()
    finally:
        stdin.close()
        await process.wait()
    return n / elapsed, (cpu1 - cpu0) / n * 1e6


async def ours_bare_rate(n: int) -> Result:
    """elicitor's server driven by the echo's bare loop: one ``tools/call`` of ``n`` elicitations, each answered by
    writing the answer and reading the next question, nothing validated on the client's side. Against
    :func:`echo_rate`, server against server with the same client: the library's client is left out of it."""
    encode, decode = msgspec.json.encode, msgspec.json.decode
    process = await asyncio.create_subprocess_exec(
        *OURS, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 20
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    answer = {"action": "accept", "content": ANSWER}

    async def call(request_id: int, name: str, arguments: dict[str, Any]) -> Any:
        """Make the call, answering each question as it comes; its result's text."""
        params = {"name": name, "arguments": arguments}
        stdin.write(encode({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}) + b"\n")
        while True:
            message = decode(await stdout.readline())
            if message.get("id") == request_id and "method" not in message:
                return message["result"]["content"][0]["text"]
            stdin.write(encode({"jsonrpc": "2.0", "id": message["id"], "result": answer}) + b"\n")
            await stdin.drain()

    init = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "bare"}}
    try:
        stdin.write(encode({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}) + b"\n")
        decode(await stdout.readline())
        stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        await call(1, "ask", {"n": 10})  # warm up
        cpu0, _ = _probe(await call(2, "probe", {}))
        start = time.perf_counter()
        done = await call(3, "ask", {"n": n})
        elapsed = time.perf_counter() - start
        cpu1, _ = _probe(await call(4, "probe", {}))
    finally:
        stdin.close()
        await process.wait()
    assert done == str(n), done
    return n / elapsed, (cpu1 - cpu0) / n * 1e6


async def memory_only(measure: Awaitable[Memory]) -> Result:
    return (await measure)[0], 0.0


RECORDED: dict[str, dict[str, float]] = {}
"""This run's medians by scenario, for bench/results.py."""


def report(
    title: str,
    unit: str,
    ours: list[Result],
    theirs: list[Result],
    higher_is_better: bool = True,
    fast: list[Result] | None = None,
    peer: str = "official mcp",
) -> None:
    def summary(values: list[float]) -> str:
        return f"{statistics.median(values):>10,.1f} ({min(values):,.1f}–{max(values):,.1f})"

    ratios = [(o[0] / t[0]) if higher_is_better else (t[0] / o[0]) for o, t in zip(ours, theirs, strict=True)]
    print(f"\n{title}")
    print(f"  elicitor     {summary([o[0] for o in ours])} {unit}")
    print(f"  {peer:<12} {summary([t[0] for t in theirs])} {unit}")
    if fast:
        print(f"  FastMCP      {summary([f[0] for f in fast])} {unit}")
    if ours[0][1]:
        print(
            f"  server CPU µs/elicitation: elicitor {statistics.median([o[1] for o in ours]):,.0f}, "
            f"{peer} {statistics.median([t[1] for t in theirs]):,.0f}"
        )
    RECORDED[title] = {
        "unit": unit,  # type: ignore[dict-item]
        "elicitor": statistics.median([o[0] for o in ours]),
        "official": statistics.median([t[0] for t in theirs]),
        "elicitor_cpu_us": statistics.median([o[1] for o in ours]),
        "official_cpu_us": statistics.median([t[1] for t in theirs]),
        "ratio": statistics.median(ratios),
    }
    if peer != "official mcp":
        RECORDED[title]["peer"] = peer  # type: ignore[assignment]
    if fast:
        RECORDED[title]["fastmcp"] = statistics.median([f[0] for f in fast])
        RECORDED[title]["fastmcp_cpu_us"] = statistics.median([f[1] for f in fast])
        print(
            f"  FastMCP server CPU µs/elicitation {statistics.median([f[1] for f in fast]):,.0f}; elicitor / FastMCP "
            f"{statistics.median([o[0] / f[0] for o, f in zip(ours, fast, strict=True)]):.2f}"
        )
    better = "better" if higher_is_better else "smaller"
    print(
        f"  ratio (x {better}, run by run): median {statistics.median(ratios):.2f} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f})"
    )


def against_echo(runs: int, n: int, loops: list[str]) -> None:
    """(a) against the bare echo, interleaved, ratios run by run (performance.md's reference limit): with the
    library's client, then with the echo's bare loop driving elicitor's server. Each of ``loops`` in turn is the
    event loop of this process (the library's client and the echo's bare client alike) and of elicitor's server;
    the echo server stays on asyncio's own (it is *the bare asyncio echo*)."""
    samples: dict[str, tuple[list[Result], ...]] = {loop: ([], [], [], []) for loop in loops}

    async def one_run(mine: list[Result], echo: list[Result], bare: list[Result], echo_too: list[Result]) -> None:
        mine.append(await ours_rate(n, "2025-11-25"))
        echo.append(await echo_rate(n))
        bare.append(await ours_bare_rate(n))
        echo_too.append(await echo_rate(n))

    for _ in range(runs):
        for loop in loops:
            _serve_on(loop)
            anyio.run(one_run, *samples[loop], backend_options={"use_uvloop": loop == "uvloop"})
    for loop in loops:
        mine, echo, bare, echo_too = samples[loop]
        on = "" if loop == loops[0] else f", {loop}'s loop on both sides"
        print(f"\n[elicitor's server and both clients on {loop}'s event loop; the echo server on asyncio's]", end="")
        report(
            f"(a) stdio against the bare asyncio echo{on}, round trips/s", "el/s", mine, echo, True, peer="bare echo"
        )
        report(
            f"(a) stdio server driven by the echo's bare client, against the bare asyncio echo{on}, round trips/s",
            "el/s", bare, echo_too, True, peer="bare echo",
        )  # fmt: skip


def _serve_on(loop: str) -> None:
    """Start elicitor's bench servers on ``loop`` from now on (its stdio, and its HTTP unless a stack is pinned)."""
    _, _, http = os.environ.get("ELICITOR_BENCH_STACK", "auto,auto").partition(",")
    os.environ["ELICITOR_BENCH_STACK"] = f"{loop},{http}"


async def main(runs: int, scenarios: set[str], n: int, pending: int, many_pending: int) -> None:
    plan: list[tuple[str, str, Callable[[], Awaitable[Result]], Callable[[], Awaitable[Result]], bool]] = []
    if "a" in scenarios:
        plan.append(
            (
                "(a) stdio, 2025-11-25, elicitations/s",
                "el/s",
                lambda: ours_rate(n, "2025-11-25"),
                lambda: theirs_rate(n, "2025-11-25"),
                True,
            )
        )
    if "e" in scenarios:
        plan.append(
            (
                "(e) stdio, 2026-07-28 multi-round-trip, elicitations/s",
                "el/s",
                lambda: ours_rate(n, "2026-07-28"),
                lambda: theirs_rate(n, "2026-07-28"),
                True,
            )
        )
    if "b" in scenarios:
        plan.append(
            (
                "(b) HTTP, one session, 2025-11-25, elicitations/s",
                "el/s",
                lambda: ours_http(n // 2, "2025-11-25"),
                lambda: theirs_http(n // 2, "2025-11-25"),
                True,
            )
        )
    if "c" in scenarios:
        plan.append(
            (
                "(c) HTTP, 50 concurrent sessions x 50, 2025-11-25, elicitations/s",
                "el/s",
                lambda: ours_http(50, "2025-11-25", 50),
                lambda: theirs_http(50, "2025-11-25", 50),
                True,
            )
        )
    if "cx" in scenarios:
        plan.append(
            (
                "(cx) HTTP, the official client's 50 sessions x 50 against each server, 2025-11-25, elicitations/s",
                "el/s",
                lambda: theirs_http(50, "2025-11-25", 50, server="elicitor_server.py"),
                lambda: theirs_http(50, "2025-11-25", 50),
                True,
            )
        )
    if "eh" in scenarios:
        plan.append(
            (
                "(e) HTTP, 2026-07-28 multi-round-trip, elicitations/s",
                "el/s",
                lambda: ours_http(n // 2, "2026-07-28"),
                lambda: theirs_http(n // 2, "2026-07-28"),
                True,
            )
        )
    if "d" in scenarios:
        plan.append(
            (
                f"(d) stdio, KiB of server RSS per pending elicitation ({pending} pending)",
                "KiB",
                lambda: memory_only(ours_memory(pending)),
                lambda: memory_only(theirs_memory(pending)),
                False,
            )
        )
    if "dh" in scenarios:
        samples: list[tuple[Memory, Memory]] = []
        floors: list[float] = []
        for _ in range(runs):
            samples.append((await ours_memory(pending, http=True), await theirs_memory(pending, http=True)))
            floors.append(await floor_memory(pending))
        title = f"(d) HTTP, {pending} pending on one session, 2025-11-25"
        print(
            f"\n{title}: the floor, a bare uvicorn app holding {pending} SSE responses open (no MCP): "
            f"{statistics.median(floors):.1f} KiB each ({min(floors):.1f}-{max(floors):.1f})"
        )
        RECORDED["(dh) floor"] = {"unit": "KiB", "bare uvicorn": statistics.median(floors)}  # type: ignore[dict-item]
        report(
            f"{title}: KiB of server RSS per pending elicitation",
            "KiB",
            [(o[0], 0.0) for o, _ in samples],
            [(t[0], 0.0) for _, t in samples],
            False,
        )
        report(
            f"{title}: seconds for each library's client to drain the answers once released",
            "s",
            [(o[1], 0.0) for o, _ in samples],
            [(t[1], 0.0) for _, t in samples],
            False,
        )
        growth = f"{title}: MiB the server's RSS grew while the answers drained"
        print(
            f"\n{growth}\n  elicitor     {statistics.median(o[2] for o, _ in samples):+.1f} MiB"
            f"\n  official mcp {statistics.median(t[2] for _, t in samples):+.1f} MiB"
        )
        RECORDED[growth] = {
            "unit": "MiB",  # type: ignore[dict-item]
            "elicitor": statistics.median(o[2] for o, _ in samples),
            "official": statistics.median(t[2] for _, t in samples),
        }
    if "f" in scenarios:
        many = [await ours_many_pending(many_pending) for _ in range(runs)]
        title = f"(f) stdio, {many_pending:,} elicitations pending at once in one server process, 2025-11-25"
        kib, rise, drain, growth = (statistics.median(m[i] for m in many) for i in range(4))
        print(
            f"\n{title}\n  KiB of server RSS per pending elicitation {kib:.1f} "
            f"({min(m[0] for m in many):.1f}-{max(m[0] for m in many):.1f}); all in flight in {rise:.1f} s, "
            f"all answered in {drain:.1f} s; server RSS {growth:+.1f} MiB while they drained"
        )
        RECORDED[title] = {"unit": "KiB", "elicitor": kib, "in flight s": rise, "drained s": drain}  # type: ignore[dict-item]
    with_fast = fastmcp_installed()
    fast_fns: dict[str, Callable[[], Awaitable[Result]]] = {
        "(a)": lambda: fastmcp_rate(n),
        "(b)": lambda: fastmcp_http(n // 2),
        "(c)": lambda: fastmcp_http(50, 50),
    }
    for title, unit, ours_fn, theirs_fn, higher in plan:
        ours: list[Result] = []
        theirs: list[Result] = []
        fast: list[Result] = []
        fast_fn = fast_fns.get(title[:3]) if with_fast else None
        for _ in range(runs):
            ours.append(await ours_fn())
            theirs.append(await theirs_fn())
            if fast_fn is not None:
                fast.append(await fast_fn())
        report(title, unit, ours, theirs, higher, fast or None)
    record("run", {"runs": runs, "n": n, "pending": pending, "scenarios": RECORDED})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scenarios", default="a,echo,e,b,c,cx,eh,d,dh,f")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--many", type=int, default=100_000, help="elicitations pending at once in (f)")
    parser.add_argument(
        "--loop",
        choices=["auto", "uvloop", "asyncio"],
        default="auto",
        help="the event loop of this process (every client) and of elicitor's servers, as elicitor itself picks "
        "it by default: uvloop if installed. (echo) also runs on asyncio's own loop, interleaved, if this is uvloop",
    )
    args = parser.parse_args()
    scenarios = set(args.scenarios.split(","))
    loop = event_loop(args.loop)
    print(f"elicitor vs official mcp, {args.runs} run(s), n={args.n}, pending={args.pending}")
    print(
        f"event loop: {loop} (this process, with every client, and elicitor's servers; the others' servers pick theirs)"
    )
    if "echo" in scenarios:
        against_echo(args.runs, args.n, [loop, "asyncio"] if loop == "uvloop" else [loop])
    _serve_on(loop)
    anyio.run(
        main, args.runs, scenarios, args.n, args.pending, args.many, backend_options={"use_uvloop": loop == "uvloop"}
    )
