"""What the HTTP stack under uvicorn is worth: elicitor's server on each, the official SDK's as it runs by default.

    python bench/stacks.py [--runs 3]

``server.run("http")`` picks the fastest stack installed: httptools' parser (a dependency of elicitor) and uvloop's
event loop (``elicitor[speed]``). Here the same bench server runs on asyncio + h11 (what a pure-Python install
gets), asyncio + httptools (the default without the extra) and uvloop + httptools (the default with it), each on
(c) 50 concurrent sessions x 50 elicitations on 2025-11-25 and (e) one 2026-07-28 multi-round-trip call over HTTP;
the official SDK's server runs in the same process order, interleaved, on whatever its uvicorn picks in this
environment. Medians of ``--runs``; the ratio is per run, against the official run next to it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import anyio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import Result, ours_http, theirs_http  # the harness's own scenarios

STACKS = (("asyncio", "h11"), ("asyncio", "httptools"), ("uvloop", "httptools"))
SCENARIOS = (
    (
        "(c) HTTP, 50 sessions x 50, 2025-11-25",
        lambda: ours_http(50, "2025-11-25", 50),
        lambda: theirs_http(50, "2025-11-25", 50),
    ),
    (
        "(e) HTTP, 2026-07-28 multi-round-trip, one call of 500",
        lambda: ours_http(500, "2026-07-28"),
        lambda: theirs_http(500, "2026-07-28"),
    ),
)


async def main(runs: int) -> None:
    print(f"elicitor's server on each uvicorn stack vs the official SDK's server, {runs} run(s), medians")
    for title, ours_fn, theirs_fn in SCENARIOS:
        print(f"\n{title}: elicitations/s, server CPU µs per elicitation")
        theirs: list[Result] = []
        ours: dict[tuple[str, str], list[Result]] = {stack: [] for stack in STACKS}
        for _ in range(runs):
            for stack in STACKS:
                os.environ["ELICITOR_BENCH_STACK"] = ",".join(stack)
                ours[stack].append(await ours_fn())
            theirs.append(await theirs_fn())
        base = statistics.median(r[0] for r in theirs)
        base_cpu = statistics.median(r[1] for r in theirs)
        print(f"  {'official SDK (its default)':32} {base:9,.0f} el/s  {base_cpu:6,.0f} µs")
        for stack, results in ours.items():
            rate = statistics.median(r[0] for r in results)
            cpu = statistics.median(r[1] for r in results)
            ratios = [o[0] / t[0] for o, t in zip(results, theirs, strict=True)]
            label = f"elicitor on {stack[1]} + {stack[0]}"
            print(f"  {label:32} {rate:9,.0f} el/s  {cpu:6,.0f} µs  {statistics.median(ratios):.2f}x the official SDK")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    anyio.run(main, parser.parse_args().runs)
