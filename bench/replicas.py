"""Scale-out benchmark: elicitor replicas behind nginx (deploy/nginx.conf), with and without a shared Redis.

    python bench/replicas.py [--runs 3] [--sessions 50] [--n 50] [--single 200] [--short 3] [--pending 500]
                             [--tasks 500] [--eras ...]

Everything is real and on loopback: redis-server, uvicorn replicas as separate processes (the workload server of
bench/run.py, ``bench/servers/elicitor_server.py``, which picks up ``ELICITOR_REDIS_URL`` as any replica does) and
nginx running ``deploy/nginx.conf``, started by the harness of the replica tests (``tests/replicas.py``). Clients
always go through nginx. Three deployments:

  (1) 1 replica, memory store   (2) 1 replica, Redis store   (3) 3 replicas, Redis store

each on both eras: the handshake era (``protocol="2025-11-25"``: a session, ``elicitation/create`` pushed on the
``tools/call`` stream, the answer POSTed back, forwarded through Redis when it lands on another replica than the
session's) and 2026-07-28 (each elicitation a round: ``input_required``, then a retry with ``inputResponses`` and the
sealed ``requestState``, which a replica that does not hold the parked run answers by replaying the tool).

Throughput: ``--sessions`` client sessions (our ``Client.http``, opened and warmed up before the clock starts) each
call ``ask(n)`` at the same moment; the handler accepts at once. Elicitations/s = sessions x n / wall time of the
calls. **Latency per elicitation** is measured in the client handler: the time from one handler invocation to the
next in the same session (the first one: from the start of the call). It is a full round trip as the person's client
sees it — answer POSTed, through nginx, the tool continues (or replays), the next question comes back — with the
handler itself taking no time. Under 50 concurrent sessions on a small machine it is mostly queueing (p50 ≈ sessions
/ throughput), so each run also measures one session alone (one call of ``--single`` elicitations, and as many in
calls of ``--short`` each: what a typical call meets, as a replayed round costs more the more answers came before
it): its p50 is the latency of one elicitation on an idle deployment, and its difference between (2) and (1) is what
the Redis path adds to each elicitation; between (3) and (2), what the durable path across replicas adds (two
requests in three land on a replica that does not hold the conversation: on the handshake era forwarded through the
owner's Redis queue; on 2026-07-28 every round of one session alone, as round robin never sends it where the round
before went, replayed from ``requestState``). CPU time per elicitation is read from ``/proc``
for every process of the deployment (the replicas, nginx's master and workers, redis-server), for this process (the
clients) and for the whole machine (``others`` is what the rest of the machine used meanwhile: the noise); in the
runs of one session alone, for the replicas. Redis commands per elicitation (INFO commandstats deltas; what a script
or a MULTI runs counts command by command) are the steady figure on a loaded machine: load moves times, not counts.
Medians over ``--runs`` with min-max; the deployments run side by side and each run measures all of them in turn, so
ratios are computed run by run.

Memory per pending elicitation: ``--pending`` tool calls (``ask(1)``, spread over sessions of 50 calls each) whose
question the client's handler holds (it waits on an event); Redis ``used_memory`` and ``used_memory_dataset`` (INFO
memory: all it allocated, and the keys alone) and key-count growth, and each replica's RSS growth, divided by the
number pending. Handshake era: each pending call is a tool
task waiting on its answer in the session's replica, its open SSE response (on the replica the POST landed on:
with three replicas, two times in three another one, relaying), and the stream's event history (in the process
with the memory store, in Redis otherwise). 2026-07-28: between rounds no request is open; what is held is the
parked run (the tool's task waiting for the next round) in the replica that served the round, up to
``Server(max_parked_runs=...)`` (1,024 by default) per replica, and nothing in Redis. Measured on a fresh deployment
for each configuration and era, as RSS does not shrink after a first batch and would hide a second one.

Redis memory per waiting task: ``--tasks`` tasks of the ``hold`` tool (``task="required"``: it asks once) started on
each era, each followed by the client (``tasks/get``) until it is ``input_required``; INFO memory
(``used_memory``, and ``used_memory_dataset``: the keys alone) and key-count growth divided by the number waiting, on
the deployments with Redis (a task's record, sealed: its call, its open question with the form's schema).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the replica tests' harness: tests/replicas.py

from bench.holding import ANSWER, Holding  # noqa: E402
from bench.results import record  # noqa: E402
from tests.replicas import MISSING, Deployment, deployment  # noqa: E402

from elicitor import Accepted, Client, ElicitationRequest  # noqa: E402

SERVER = [sys.executable, str(ROOT / "bench" / "servers" / "elicitor_server.py")]
ERAS = ("2025-11-25", "2026-07-28")
PER_SESSION = 50
"""Pending calls per client session in the memory measurement (an HTTP client keeps at most 100 connections, and
on the handshake era each pending call holds one)."""
TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Setup:
    """One deployment shape."""

    label: str
    replicas: int
    redis: bool


SETUPS = (
    Setup("(1) 1 replica, memory store", 1, redis=False),
    Setup("(2) 1 replica, Redis store", 1, redis=True),
    Setup("(3) 3 replicas, Redis store", 3, redis=True),
)


# ---- what the processes use ------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 if it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime: fields 14 and 15 of proc(5)


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine spent not idle so far (``/proc/stat``)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values[:8]) - idle) / TICK  # user..steal (guest time is already counted in user)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return int(next(line.split()[1] for line in status if line.startswith("VmRSS:")))


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


class Running:
    """A started deployment and the process ids to account CPU to, by component."""

    def __init__(self, setup: Setup, deployed: Deployment) -> None:
        self.setup = setup
        self.deployed = deployed
        self.url = deployed.nginx.url
        pid_file = deployed.nginx.folder / "logs" / "nginx.pid"
        for _ in range(600):  # nginx may write it a moment after it listens (a loaded machine: seconds)
            if pid_file.exists() and pid_file.read_text().strip():
                break
            time.sleep(0.05)
        master = int(pid_file.read_text())
        self.nginx = [master, *children(master)]
        self.redis_pid: int | None = None
        self._redis: Redis | None = None

    async def redis(self) -> Redis | None:
        """A client of this deployment's Redis (for INFO), or ``None`` with the memory store."""
        if self.deployed.redis is None:
            return None
        if self._redis is None:
            self._redis = Redis.from_url(self.deployed.redis.url)
            self.redis_pid = int((await self._redis.info("server"))["process_id"])
        return self._redis

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()

    async def commands(self) -> dict[str, int]:
        """Commands redis-server ran so far, by name (INFO commandstats); empty with the memory store."""
        redis = await self.redis()
        if redis is None:
            return {}
        stats = await redis.info("commandstats")
        return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far: replicas, nginx, redis, this process (the clients) and the whole machine."""
        return {
            "replicas": sum(cpu_seconds(pid) for pid in self.deployed.replicas.pids()),
            "nginx": sum(cpu_seconds(pid) for pid in self.nginx),
            "redis": cpu_seconds(self.redis_pid) if self.redis_pid is not None else 0.0,
            "client": time.process_time(),
            "machine": machine_busy_seconds(),
        }


@contextlib.contextmanager
def started(setup: Setup, folder: Path) -> Iterator[Running]:
    with deployment(SERVER, folder, replicas=setup.replicas, redis=setup.redis) as deployed:
        yield Running(setup, deployed)


# ---- throughput and latency ------------------------------------------------------------------------------------


class Timed:
    """A handler that accepts at once and notes the time since the previous elicitation of its session."""

    def __init__(self) -> None:
        self.last = 0.0
        self.gaps: list[float] = []

    async def __call__(self, request: ElicitationRequest) -> Accepted[dict[str, Any]]:
        now = time.perf_counter()
        self.gaps.append(now - self.last)
        self.last = now
        return Accepted(ANSWER)


@dataclass
class Sample:
    """One measurement of one deployment on one era."""

    rate: float
    """Elicitations per second, all sessions together."""
    p50: float
    p99: float
    """Latency per elicitation, ms (see the module)."""
    single: float
    """p50 latency per elicitation of one session alone, ms."""
    short: float
    """The same in calls of ``--short`` elicitations each (what a typical call meets), ms."""
    alone_cpu: tuple[float, float] = (0.0, 0.0)
    """Replicas' CPU µs per elicitation of one session alone: calls of ``--single``, calls of ``--short``."""
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU µs per elicitation by component (replicas, nginx, redis, client, others)."""
    commands: dict[str, float] = field(default_factory=dict)
    """Redis commands per elicitation, by name (the bench's own INFO left out): unlike time, load does not move it."""
    alone_commands: dict[str, float] = field(default_factory=dict)
    """The same for one session alone (calls of ``--single``): nothing to share a transaction with."""


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]


async def calls(
    running: Running, protocol: str, sessions: int, n: int, repeat: int = 1
) -> tuple[float, list[float], dict[str, float], dict[str, int]]:
    """``sessions`` sessions call ``ask(n)`` at once, ``repeat`` times each one after the other; (elapsed s, gaps
    in s, CPU seconds by component, Redis commands run by name)."""
    handlers = [Timed() for _ in range(sessions)]
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                Client.http(running.url, elicitation=handler, protocol=protocol, max_rounds=n + 1)
            )
            for handler in handlers
        ]

        async def call(client: Client, handler: Timed, count: int, times: int = 1) -> None:
            for _ in range(times):
                handler.last = time.perf_counter()
                result = await client.call_tool("ask", {"n": count})
                assert result.text == str(count), result

        async with anyio.create_task_group() as tg:  # warm up every replica, and every session's connections
            for client, handler in zip(clients, handlers, strict=True):
                tg.start_soon(call, client, handler, 2)
        for handler in handlers:
            handler.gaps.clear()
        commands = await running.commands()
        before = running.cpu()
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for client, handler in zip(clients, handlers, strict=True):
                tg.start_soon(call, client, handler, n, repeat)
        elapsed = time.perf_counter() - start
        after = running.cpu()
        ran = {name: calls - commands.get(name, 0) for name, calls in (await running.commands()).items()}
    gaps = [gap for handler in handlers for gap in handler.gaps]
    assert len(gaps) == sessions * n * repeat, (len(gaps), sessions * n * repeat)
    used = {name: after[name] - before[name] for name in before}
    ran = {name: count for name, count in ran.items() if count and name != "info"}
    return elapsed, gaps, used, ran


async def measure(running: Running, protocol: str, sessions: int, n: int, single: int, short: int) -> Sample:
    await running.redis()  # learn redis-server's pid before the first measurement
    elapsed, gaps, used, ran = await calls(running, protocol, sessions, n)
    total = sessions * n
    ours = sum(value for name, value in used.items() if name != "machine")
    cpu = {name: value / total * 1e6 for name, value in used.items() if name != "machine"}
    cpu["others"] = max(0.0, used["machine"] - ours) / total * 1e6
    _, alone, alone_used, alone_ran = await calls(running, protocol, 1, single)
    _, brief, brief_used, _ = await calls(running, protocol, 1, short, repeat=max(1, single // short))
    return Sample(
        rate=total / elapsed,
        p50=percentile(gaps, 0.5) * 1e3,
        p99=percentile(gaps, 0.99) * 1e3,
        single=percentile(alone, 0.5) * 1e3,
        short=percentile(brief, 0.5) * 1e3,
        alone_cpu=(alone_used["replicas"] / len(alone) * 1e6, brief_used["replicas"] / len(brief) * 1e6),
        cpu=cpu,
        commands={name: count / total for name, count in ran.items()},
        alone_commands={name: count / len(alone) for name, count in alone_ran.items()},
    )


# ---- memory per pending elicitation ----------------------------------------------------------------------------


@dataclass
class Memory:
    """Growth per pending elicitation."""

    redis_bytes: float
    """``used_memory``: everything redis-server allocated, connections' buffers included."""
    dataset_bytes: float
    """``used_memory_dataset``: the keys alone (steadier from run to run)."""
    redis_keys: float
    rss_kib: list[float]
    """Per replica."""


async def _redis_usage(redis: Redis | None) -> tuple[int, int, int]:
    if redis is None:
        return 0, 0, 0
    info = await redis.info("memory")
    return int(info["used_memory"]), int(info["used_memory_dataset"]), int(await redis.dbsize())


async def pending_memory(running: Running, protocol: str, count: int) -> Memory:
    """``count`` calls each waiting on its question in the client's handler; what that holds, per call."""
    held = Holding(count)
    redis = await running.redis()
    pids = running.deployed.replicas.pids()
    sessions = math.ceil(count / PER_SESSION)
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(Client.http(running.url, elicitation=held.handler, protocol=protocol))
            for _ in range(sessions)
        ]
        async with anyio.create_task_group() as tg:
            for client in clients:
                for _ in range(3):
                    tg.start_soon(client.call_tool, "ask", {"n": 2})
        await anyio.sleep(0.5)  # let the warm-up's writes and releases settle
        redis0, data0, keys0 = await _redis_usage(redis)
        rss0 = [rss_kib(pid) for pid in pids]
        held.armed = True
        async with anyio.create_task_group() as tg:
            for i in range(count):
                tg.start_soon(clients[i % sessions].call_tool, "ask", {"n": 1})
            with anyio.fail_after(120):
                await held.all_in.wait()
            await anyio.sleep(0.5)  # writes that follow the question (its event's history) land
            redis1, data1, keys1 = await _redis_usage(redis)
            rss1 = [rss_kib(pid) for pid in pids]
            held.release.set()
    return Memory(
        redis_bytes=(redis1 - redis0) / count,
        dataset_bytes=(data1 - data0) / count,
        redis_keys=(keys1 - keys0) / count,
        rss_kib=[(after - before) / count for before, after in zip(rss0, rss1, strict=True)],
    )


# ---- Redis memory per waiting task -----------------------------------------------------------------------------


@dataclass
class TaskMemory:
    """Redis growth per task waiting on its question (INFO memory), and the replicas' RSS growth."""

    used_bytes: float
    """``used_memory``: everything redis-server allocated, connections' buffers included."""
    dataset_bytes: float
    """``used_memory_dataset``: the keys alone."""
    redis_keys: float
    rss_kib: float
    """All replicas together."""


async def waiting_tasks_memory(running: Running, protocol: str, count: int) -> TaskMemory:
    """``count`` tasks of the ``hold`` tool each waiting on its question (``input_required``); what that holds, per
    task. The client follows them by hand (``tasks/get``, at most 50 requests at once, as bench/tasks.py does): a
    handle per task would poll each at the server's suggested interval, which is the bench server's 50 ms."""
    redis = await running.redis()
    assert redis is not None
    pids = running.deployed.replicas.pids()
    limit = anyio.Semaphore(50)

    async def usage() -> tuple[int, int, int]:
        info = await redis.info("memory")
        return int(info["used_memory"]), int(info["used_memory_dataset"]), int(await redis.dbsize())

    # A handler makes the client declare elicitation (the tool asks); no question is answered here.
    async with Client.http(running.url, elicitation=lambda request: None, protocol=protocol) as client:

        async def waiting() -> str:
            async with limit:
                handle = await client.start_tool("hold")
            assert handle.id is not None
            with anyio.fail_after(300):
                while True:
                    async with limit:
                        task = await client.request("tasks/get", {"taskId": handle.id})
                    if task["status"] == "input_required":
                        return handle.id
                    if task["status"] != "working":
                        raise RuntimeError(f"task {handle.id} ended while it should wait: {task}")
                    await anyio.sleep(0.05)

        await waiting()  # the first task warms the task path up
        await anyio.sleep(0.5)
        used0, data0, keys0 = await usage()
        rss0 = sum(rss_kib(pid) for pid in pids)
        async with anyio.create_task_group() as tg:
            for _ in range(count):
                tg.start_soon(waiting)
        await anyio.sleep(0.5)
        used1, data1, keys1 = await usage()
        rss1 = sum(rss_kib(pid) for pid in pids)
    return TaskMemory(
        used_bytes=(used1 - used0) / count,
        dataset_bytes=(data1 - data0) / count,
        redis_keys=(keys1 - keys0) / count,
        rss_kib=(rss1 - rss0) / count,
    )


# ---- the report ------------------------------------------------------------------------------------------------


def summary(values: Sequence[float], digits: int = 1) -> str:
    return f"{statistics.median(values):,.{digits}f} ({min(values):,.{digits}f}–{max(values):,.{digits}f})"


def report_era(
    protocol: str, samples: dict[Setup, list[Sample]], sessions: int, n: int, single: int, short: int
) -> None:
    print(f"\n{protocol}: {sessions} sessions x {n} elicitations through nginx; medians (min–max)")
    alone, brief = f"1 session p50 ms, {single}/call", f"{short}/call"
    print(f"  {'':30} {'elicitations/s':>22} {'p50 ms':>20} {'p99 ms':>20} {alone:>28} {brief:>18}")
    for setup, runs in samples.items():
        print(
            f"  {setup.label:30} {summary([s.rate for s in runs], 0):>22} {summary([s.p50 for s in runs]):>20} "
            f"{summary([s.p99 for s in runs]):>20} {summary([s.single for s in runs], 2):>28} "
            f"{summary([s.short for s in runs], 2):>18}"
        )
    print("  CPU µs per elicitation (medians): " + ", ".join(samples[SETUPS[0]][0].cpu))
    for setup, runs in samples.items():
        parts = [f"{name} {statistics.median([s.cpu[name] for s in runs]):,.0f}" for name in runs[0].cpu]
        print(f"  {setup.label:30} " + ", ".join(parts))
    print(f"  Replicas' CPU µs per elicitation of one session alone (medians), calls of {single} and of {short}:")
    for setup, runs in samples.items():
        each = [summary([s.alone_cpu[i] for s in runs], 0) for i in (0, 1)]
        print(f"  {setup.label:30} {each[0]}, {each[1]}")
    print("  Redis commands per elicitation (medians; MULTI and EXEC count as commands):")
    for alone in (False, True):  # the sessions at once, then one session alone (nothing to share a transaction with)
        for setup, runs in samples.items():
            if not runs[0].commands:
                continue
            figures = [s.alone_commands if alone else s.commands for s in runs]
            names = sorted({name for counts in figures for name in counts})
            each = {name: statistics.median([counts.get(name, 0.0) for counts in figures]) for name in names}
            total = statistics.median([sum(counts.values()) for counts in figures])
            parts = [
                f"{name} {count:.2f}" for name, count in sorted(each.items(), key=lambda x: -x[1]) if count >= 0.01
            ]
            label = f"{setup.label[:3]} one session alone" if alone else setup.label
            print(f"  {label:30} {total:.2f}: " + (", ".join(parts) or "(the bench's own only)"))
    memory, redis, scaled = (samples[setup] for setup in SETUPS)

    def differences(metric: Callable[[Sample], float]) -> list[float]:
        return [metric(r) - metric(m) for m, r in zip(memory, redis, strict=True)]

    print(
        "  Redis path, (2) - (1), run by run: one session p50 "
        f"{summary(differences(lambda s: s.single), 2)} ms/elicitation; 50-session p50 "
        f"{summary(differences(lambda s: s.p50), 2)} ms; replica CPU "
        f"{summary(differences(lambda s: s.cpu['replicas']), 0)} µs, redis-server CPU "
        f"{summary(differences(lambda s: s.cpu['redis']), 0)} µs per elicitation"
    )
    across = [s.single - r.single for s, r in zip(scaled, redis, strict=True)]
    across_short = [s.short - r.short for s, r in zip(scaled, redis, strict=True)]
    print(
        "  Durable path across replicas, (3) - (2), run by run: one session p50 "
        f"{summary(across, 2)} ms/elicitation in calls of {single}, {summary(across_short, 2)} ms in calls of "
        f"{short} (requests that land on a replica that does not hold the conversation: forwarded through the "
        "owner's Redis queue, or replayed from requestState)"
    )
    ratio_redis = [s.rate / r.rate for s, r in zip(scaled, redis, strict=True)]
    ratio_memory = [s.rate / m.rate for s, m in zip(scaled, memory, strict=True)]
    print(
        f"  3 replicas vs 1, elicitations/s, run by run: (3)/(2) {summary(ratio_redis, 2)}, "
        f"(3)/(1) {summary(ratio_memory, 2)}"
    )


def report_memory(results: dict[tuple[Setup, str], Memory], count: int) -> None:
    print(f"\nMemory per pending elicitation ({count} pending, {PER_SESSION} per session)")
    for (setup, protocol), memory in results.items():
        rss = " + ".join(f"{value:.1f}" for value in memory.rss_kib)
        total = f" = {sum(memory.rss_kib):.1f}" if len(memory.rss_kib) > 1 else ""
        print(
            f"  {setup.label:30} {protocol}: replica RSS {rss}{total} KiB, Redis used_memory "
            f"{memory.redis_bytes:,.0f} B (dataset {memory.dataset_bytes:,.0f} B) and {memory.redis_keys:.2f} keys"
        )


def report_tasks(results: dict[tuple[Setup, str], TaskMemory], count: int) -> None:
    print(f"\nRedis memory per waiting task ({count} tasks of the hold tool, each waiting on its question)")
    for (setup, protocol), memory in results.items():
        print(
            f"  {setup.label:30} {protocol}: used_memory {memory.used_bytes:,.0f} B, dataset "
            f"{memory.dataset_bytes:,.0f} B, {memory.redis_keys:.2f} keys; replica RSS {memory.rss_kib:.1f} KiB"
        )


async def main(args: argparse.Namespace) -> None:
    eras = [era for era in ERAS if era in args.eras.split(",")]
    print(
        f"elicitor replicas behind nginx, {args.runs} run(s), {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} at start"
    )
    started_at = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="elicitor-bench-") as scratch:
        folder = Path(scratch)
        if args.pending:
            memory: dict[tuple[Setup, str], Memory] = {}
            for setup in SETUPS:
                for era in eras:
                    with started(setup, folder / f"memory-{len(memory)}") as running:
                        try:
                            memory[setup, era] = await pending_memory(running, era, args.pending)
                        finally:
                            await running.aclose()
            report_memory(memory, args.pending)
        if args.tasks:
            tasks: dict[tuple[Setup, str], TaskMemory] = {}
            for setup in SETUPS:
                for era in eras:
                    if setup.redis:
                        with started(setup, folder / f"tasks-{len(tasks)}") as running:
                            try:
                                tasks[setup, era] = await waiting_tasks_memory(running, era, args.tasks)
                            finally:
                                await running.aclose()
            report_tasks(tasks, args.tasks)
        with ExitStack() as stack:
            deployments = [stack.enter_context(started(s, folder / f"rate-{i}")) for i, s in enumerate(SETUPS)]
            try:
                samples = {era: {setup: list[Sample]() for setup in SETUPS} for era in eras}
                for _ in range(args.runs):
                    for era in eras:
                        for running in deployments:
                            sample = await measure(running, era, args.sessions, args.n, args.single, args.short)
                            samples[era][running.setup].append(sample)
                for era in eras:
                    report_era(era, samples[era], args.sessions, args.n, args.single, args.short)
                record(
                    "replicas",
                    {
                        "runs": args.runs,
                        "sessions": args.sessions,
                        "n": args.n,
                        "rates": {
                            era: {setup.label: statistics.median([s.rate for s in runs]) for setup, runs in by.items()}
                            for era, by in samples.items()
                        },
                    },
                )
            finally:
                for running in deployments:
                    await running.aclose()
    print(f"\n({time.monotonic() - started_at:.0f} s, load average {os.getloadavg()[0]:.2f} at the end)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--n", type=int, default=50, help="elicitations per session")
    parser.add_argument("--single", type=int, default=200, help="elicitations of the one-session latency run")
    parser.add_argument(
        "--short", type=int, default=3, help="elicitations per call of the one-session run of short calls"
    )
    parser.add_argument(
        "--pending", type=int, default=500, help="pending elicitations for the memory figures (0: skip)"
    )
    parser.add_argument("--tasks", type=int, default=500, help="waiting tasks for the Redis figures (0: skip)")
    parser.add_argument("--eras", default=",".join(ERAS))
    arguments = parser.parse_args()
    if MISSING:
        sys.exit(f"bench/replicas.py needs {' and '.join(MISSING)} (make test installs them)")
    anyio.run(main, arguments)
