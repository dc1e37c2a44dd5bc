"""Tasks benchmark: 1,000 tasks waiting for a person at once, and how fast an answer moves a task on.

    python bench/tasks.py [--tasks 1000] [--updates 200]

Real processes on loopback, as in bench/replicas.py: the workload server (``bench/servers/elicitor_server.py``,
tool ``hold``: a task that asks one question) as uvicorn replicas behind nginx (``deploy/nginx.conf``), with the
in-memory store or a shared redis-server. Our client (``Client.http``, 2026-07-28, tasks extension) starts every
task with ``start_tool``; each soon waits in ``input_required``.

* **Memory per waiting task**: replica RSS growth and Redis dataset growth (``used_memory_dataset``) from before
  the tasks to when all of them wait, divided by the number of tasks; for the two ways a waiting task is held: its
  run kept in the replica (the default, up to ``max_parked_tasks``) and its record alone (``max_parked_tasks=0``: a
  waiting task costs no coroutine, and an answer replays the tool from the record).
* **Answer to next status**: for ``--updates`` of the waiting tasks, one at a time, the time from sending
  ``tasks/update`` until ``tasks/get`` (polled back to back) shows the task moved on (completed). With one replica
  the run is woken in place (or replayed there); with three, the update and the polls land round robin, so the
  answer usually reaches another replica than the owner, which is told through its tasks queue (or replays it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.replicas import MISSING, deployment  # noqa: E402

from elicitor import Client  # noqa: E402

SERVER = [sys.executable, str(ROOT / "bench" / "servers" / "elicitor_server.py")]
SHAPES = (
    ("1 replica, memory store", 1, False),
    ("1 replica, Redis store", 1, True),
    ("3 replicas, Redis store", 3, True),
)
HOLDS = (("run kept", "1024"), ("record only", "0"))


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return int(next(line.split()[1] for line in status if line.startswith("VmRSS:")))


async def redis_bytes(url: str | None) -> int:
    if url is None:
        return 0
    async with Redis.from_url(url) as redis:
        # The dataset alone: used_memory also counts client connections, which grow with concurrency, not tasks.
        return int((await redis.info("memory"))["used_memory_dataset"])


async def waiting(client: Client, task_id: str) -> dict[str, Any]:
    with anyio.fail_after(120):
        while True:
            task = await client.request("tasks/get", {"taskId": task_id})
            if task["status"] == "input_required":
                return task
            if task["status"] != "working":
                raise RuntimeError(f"task {task_id} ended while it should wait: {task}")
            await anyio.sleep(0.05)


async def run(label: str, replicas: int, redis: bool, hold: str, count: int, updates: int) -> None:
    os.environ["BENCH_MAX_PARKED_TASKS"] = hold
    with tempfile.TemporaryDirectory() as folder, deployment(SERVER, Path(folder), replicas=replicas, redis=redis) as d:
        redis_url = d.redis.url if d.redis is not None else None
        # A handler makes the client declare elicitation (the tool asks); the answers go out by hand below.
        async with Client.http(d.nginx.url, protocol="2026-07-28", elicitation=lambda request: None) as client:
            warm = await client.start_tool("hold")  # the first task warms every code path up
            assert warm.id is not None
            await waiting(client, warm.id)
            pids = d.replicas.pids()
            rss0, redis0 = sum(rss_kib(p) for p in pids), await redis_bytes(redis_url)
            ids: list[str] = []
            limit = anyio.Semaphore(50)

            async def start() -> None:
                async with limit:
                    handle = await client.start_tool("hold")
                    assert handle.id is not None
                    ids.append(handle.id)

            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for _ in range(count):
                    tg.start_soon(start)
            tasks: dict[str, dict[str, Any]] = {}

            async def wait(task_id: str) -> None:
                async with limit:
                    tasks[task_id] = await waiting(client, task_id)

            async with anyio.create_task_group() as tg:
                for task_id in ids:
                    tg.start_soon(wait, task_id)
            elapsed = time.perf_counter() - started
            await anyio.sleep(0.5)
            rss1, redis1 = sum(rss_kib(p) for p in pids), await redis_bytes(redis_url)
            moves: list[float] = []
            for task_id in ids[:updates]:
                (key,) = tasks[task_id]["inputRequests"]
                answer = {key: {"action": "accept", "content": {"name": "x", "age": 1}}}
                t0 = time.perf_counter()
                await client.request("tasks/update", {"taskId": task_id, "inputResponses": answer})
                while (await client.request("tasks/get", {"taskId": task_id}))["status"] != "completed":
                    pass
                moves.append((time.perf_counter() - t0) * 1000)
    moves.sort()
    p99 = moves[min(len(moves) - 1, int(len(moves) * 0.99))]
    print(
        f"  {label:<24} {next(name for name, value in HOLDS if value == hold):<12}"
        f" {(rss1 - rss0) / count:8.1f} KiB {(redis1 - redis0) / count:10,.0f} B"
        f" {statistics.median(moves):9.2f} ms {p99:9.2f} ms   ({count} tasks waiting after {elapsed:.1f} s)",
        flush=True,
    )


async def main(args: argparse.Namespace) -> None:
    print(f"{args.tasks} tasks waiting for a person at once (2026-07-28 tasks extension), through nginx")
    columns = f"{'RSS/task':>12} {'Redis/task':>12} {'update->done p50':>16} {'p99':>9}"
    print(f"  {'deployment':<24} {'waiting as':<12} {columns}")
    for label, replicas, redis in SHAPES:
        for _, hold in HOLDS:
            await run(label, replicas, redis, hold, args.tasks, args.updates)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--updates", type=int, default=200)
    arguments = parser.parse_args()
    if MISSING:
        sys.exit(f"bench/tasks.py needs {' and '.join(MISSING)} (make test installs them)")
    anyio.run(main, arguments)
