"""Proxy benchmark: what ``elicitor proxy`` adds, per elicitation and per plain call, on stdio and HTTP, both eras.

    python bench/proxy.py [--runs 3] [--n 500] [--calls 500] [--sessions 50] [--per-session 20]

Real processes on loopback. The workload server is bench/servers/elicitor_server.py (``ask(n)``: n form
elicitations in one call; ``probe``: a plain call). Each measurement runs direct and through the proxy, in turn, in
the same run, on the same era (the proxy forwards; no era bridging):

* **stdio**: our client starts the server (direct) or ``elicitor proxy --ui none <server>`` (the proxy starts the
  server): ms per elicitation over one ``ask(n)``, and ms per plain call over ``--calls`` sequential calls;
* **HTTP**: the server over Streamable HTTP (direct) or ``elicitor proxy --ui none --listen`` in front of the server
  on stdio: the same two figures, and the throughput of ``--sessions`` concurrent sessions each calling
  ``ask(--per-session)``.

Medians over ``--runs`` with min-max; the proxy's overhead is the ratio proxy / direct, run by run.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio

from elicitor import Accepted, Client, ElicitationRequest

HERE = Path(__file__).resolve().parent
SERVER = [sys.executable, str(HERE / "servers" / "elicitor_server.py")]
PROXY = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none"]
ANSWER = {"name": "x", "age": 1}
ERAS = ("2025-11-25", "2026-07-28")


async def accept(request: ElicitationRequest) -> Accepted[dict[str, object]]:
    return Accepted(ANSWER)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def listening(command: list[str], port: int) -> AsyncIterator[str]:
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with anyio.fail_after(30):
            while True:
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def per_elicitation_and_call(client: Client, n: int, calls: int) -> tuple[float, float]:
    await client.call_tool("ask", {"n": 5})  # warm up every path
    started = time.perf_counter()
    await client.call_tool("ask", {"n": n})
    elicitation = (time.perf_counter() - started) * 1000 / n
    started = time.perf_counter()
    for _ in range(calls):
        await client.call_tool("probe")
    return elicitation, (time.perf_counter() - started) * 1000 / calls


async def stdio(era: str, proxied: bool, n: int, calls: int) -> tuple[float, float]:
    command = [*PROXY, *SERVER] if proxied else SERVER
    async with Client.stdio(
        command, elicitation=accept, protocol=era, max_rounds=100_000, stderr=subprocess.DEVNULL
    ) as client:
        return await per_elicitation_and_call(client, n, calls)


@asynccontextmanager
async def http_endpoint(proxied: bool) -> AsyncIterator[str]:
    port = free_port()
    command = [*PROXY, "--listen", f"127.0.0.1:{port}", *SERVER] if proxied else [*SERVER, "--port", str(port)]
    async with listening(command, port) as url:
        yield url


async def http(era: str, proxied: bool, n: int, calls: int, sessions: int, per_session: int) -> tuple[float, ...]:
    async with http_endpoint(proxied) as url:
        async with Client.http(url, elicitation=accept, protocol=era, max_rounds=100_000) as client:
            elicitation, call = await per_elicitation_and_call(client, n, calls)
        async with AsyncExitStack() as stack:
            opened = [
                await stack.enter_async_context(Client.http(url, elicitation=accept, protocol=era, max_rounds=100_000))
                for _ in range(sessions)
            ]
            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for client in opened:
                    tg.start_soon(client.call_tool, "ask", {"n": per_session})
            throughput = sessions * per_session / (time.perf_counter() - started)
    return elicitation, call, throughput


def summary(values: list[float], digits: int = 2) -> str:
    return f"{statistics.median(values):,.{digits}f} ({min(values):,.{digits}f}-{max(values):,.{digits}f})"


def ratio(proxied: list[float], direct: list[float], inverse: bool = False) -> str:
    values = [(d / p if inverse else p / d) for p, d in zip(proxied, direct, strict=True)]
    return summary(values)


def _adder(rows: dict[str, dict[bool, list[float]]]) -> Callable[[str, bool, float], None]:
    def add(name: str, proxied: bool, value: float) -> None:
        rows.setdefault(name, {True: [], False: []})[proxied].append(value)

    return add


async def main(args: argparse.Namespace) -> None:
    print(f"elicitor proxy vs direct, {args.runs} run(s); medians (min-max); overhead = proxy / direct")
    for era in ERAS:
        rows: dict[str, dict[bool, list[float]]] = {}
        add = _adder(rows)
        for _ in range(args.runs):
            for proxied in (False, True):
                elicitation, call = await stdio(era, proxied, args.n, args.calls)
                add("stdio ms per elicitation", proxied, elicitation)
                add("stdio ms per plain call", proxied, call)
                elicitation, call, throughput = await http(
                    era, proxied, args.n, args.calls, args.sessions, args.per_session
                )
                add("HTTP ms per elicitation", proxied, elicitation)
                add("HTTP ms per plain call", proxied, call)
                add(f"HTTP {args.sessions} sessions, elicitations/s", proxied, throughput)
        print(f"\n{era}")
        print(f"  {'':<34} {'direct':>22} {'through the proxy':>22} {'overhead':>20}")
        for name, values in rows.items():
            rate = "/s" in name
            shown: Callable[[list[float]], str] = (lambda v: summary(v, 0)) if rate else summary
            overhead = ratio(values[True], values[False], inverse=rate)
            print(f"  {name:<34} {shown(values[False]):>22} {shown(values[True]):>22} {overhead:>20}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--n", type=int, default=500, help="elicitations in the one-call latency figure")
    parser.add_argument("--calls", type=int, default=500, help="plain calls in the per-call latency figure")
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--per-session", type=int, default=20)
    anyio.run(main, parser.parse_args())
