"""Where a round's CPU time goes: scenario (e) (or (a)) with both sides under cProfile, timed by CPU time.

    python bench/cpu_profile.py [--scenario e|a] [--n 2000] [--top 25] [--side server|client|both]

The server runs as bench/servers/elicitor_server.py in a process of its own, as in bench/run.py, with cProfile
timing by the process's CPU clock (``time.process_time``), not the wall clock: on a shared, loaded machine wall
time counts the moments the process waits for a core, and a profile by wall time shows idle ``epoll`` waits on
top. The client runs in this process, profiled the same way around the one measured call. Each side prints its
CPU µs per elicitation (without the profiler's own overhead, from a run without it first) and its top functions
by own time. cProfile's overhead inflates calls-heavy code: read the profile for where time goes, and the
unprofiled figures for how much.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from elicitor import Accepted, Client, ElicitationRequest

HERE = Path(__file__).resolve().parent
SERVER = HERE / "servers" / "elicitor_server.py"
ANSWER = {"name": "x", "age": 1}

_WRAPPER = """
import cProfile, runpy, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # a slow exit is sent SIGTERM: still write the profile
profile = cProfile.Profile(time.process_time)
sys.argv = [{script!r}]
profile.enable()
try:
    runpy.run_path({script!r}, run_name="__main__")
finally:
    profile.disable()
    profile.dump_stats({out!r})
"""


async def _handler(request: ElicitationRequest) -> Accepted[dict[str, Any]]:
    return Accepted(ANSWER)


async def measure(command: list[str], n: int, protocol: str, profile: cProfile.Profile | None) -> tuple[float, float]:
    """Server and client CPU µs per elicitation for one call of ``n``."""
    slow = {"probe_timeout": 120.0, "handshake_timeout": None}  # a profiled server on a loaded machine starts slowly
    async with Client.stdio(command, elicitation=_handler, protocol=protocol, max_rounds=n + 1, **slow) as client:
        await client.call_tool("ask", {"n": 10})  # warm up
        server0 = float((await client.call_tool("probe")).text.split()[0])
        client0 = time.process_time()
        if profile is not None:
            profile.enable()
        result = await client.call_tool("ask", {"n": n})
        if profile is not None:
            profile.disable()
        client1 = time.process_time()
        server1 = float((await client.call_tool("probe")).text.split()[0])
    assert result.text == str(n), result
    return (server1 - server0) / n * 1e6, (client1 - client0) / n * 1e6


def show(stats_source: Any, top: int, title: str) -> None:
    out = io.StringIO()
    stats = pstats.Stats(stats_source, stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    print(f"\n== {title}: top {top} by own CPU time ==")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:20000])


async def main(scenario: str, n: int, top: int, side: str, save: str | None) -> None:
    protocol = "2026-07-28" if scenario == "e" else "2025-11-25"
    plain = [sys.executable, str(SERVER)]
    server_us, client_us = await measure(plain, n, protocol, None)
    print(
        f"({scenario}) n={n}, without the profiler: server {server_us:.0f} µs, client {client_us:.0f} µs of CPU "
        "per elicitation"
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "server.prof")
        wrapper = os.path.join(tmp, "wrapper.py")
        Path(wrapper).write_text(_WRAPPER.format(script=str(SERVER), out=out))
        client_profile = cProfile.Profile(time.process_time) if side != "server" else None
        await measure([sys.executable, wrapper], n, protocol, client_profile)
        deadline = time.monotonic() + 10
        while not os.path.exists(out) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        if side != "client":
            show(out, top, "server")
            if save:
                shutil.copy(out, os.path.join(save, "server.prof"))
        if client_profile is not None:
            show(client_profile, top, "client")
            if save:
                client_profile.dump_stats(os.path.join(save, "client.prof"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=["a", "e"], default="e")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--side", choices=["server", "client", "both"], default="both")
    parser.add_argument("--save", metavar="DIR", help="also write server.prof and client.prof there (for pstats)")
    args = parser.parse_args()
    anyio.run(main, args.scenario, args.n, args.top, args.side, args.save)
