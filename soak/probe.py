"""The fault probe: mixed clients through nginx to three replicas sharing Redis, faults injected, then a checker.

    python soak/probe.py [--clients 12] [--mixed 240] [--seed 1] [--no-persist] [--folder DIR]

``--clients`` workers each make one call after another through nginx (``deploy/nginx.conf``) to three replicas of
``tests/peers/probe_server.py`` sharing one ``redis-server`` (``appendonly yes`` unless ``--no-persist``). Each
call is of one kind, at random: elicitor's client on 2025-11-25 or 2026-07-28, as a plain call or a task, or the
official SDK's client in either mode; for one of two users (``X-User``, the replicas' principal). Its tool asks one
to three questions, which a person answers after a random pause (up to 4 s), then acts once (``ctx.once``, a line
in a ledger file) and returns its user's name and answers.

The faults come one kind at a time (``--faults``: SIGKILL, SIGSTOP for 10-40 s and SIGTERM of a replica, each
restarted or resumed after; a Redis restart, one losing its data, ``CLIENT PAUSE`` for 5-30 s; an nginx reload),
the deployment left to recover after each, then for ``--mixed`` seconds at random and overlapping. Then the checker
asserts what must never happen, and reports each violation with what the call saw and the faults it met:

- **acted twice**: a call's side effect in the ledger more than once (Redis keeping its data);
- **another user's data**: a run, an effect or a result under another principal or with another call's answers;
- **hung**: a call without an outcome after ``--bound`` seconds;
- **unclear error**: an error without a message, one that is a traceback, one of elicitor's client that is not
  its own error type, a cancellation leaking out of a call, a 500 through nginx, a traceback in a replica's log;
- **asked again after answering**: a question shown again after the person answered it, while no replica
  died or stopped past its lease during the call (an answer that went to a replica that then died may be asked
  for again: docs/deploying.md);
- **failed through a passing fault**: a call that failed while the only faults it met are ones the deployment
  promises to ride out (an nginx reload, a Redis restart with its data, a pause or stall of up to 10 s).

Calls that failed with a clear error through a fault outside those promises (a replica killed under the official
SDK's client, Redis paused past the 15 s a request waits for it...) are counted, not failed. Exit status 1 if any
violation; the run's folder keeps the logs, ``violations.json`` and ``summary.json``. ``make soak`` runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2 as httpx
import mcp_types as types
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.replicas starts the processes, as the replica tests do

from tests.replicas import Nginx, RedisServer, Replicas  # noqa: E402

from elicitor import (  # noqa: E402
    Client,
    ElicitationRequest,
    ElicitorError,
    ScriptedHandler,
    UrlElicitationRequest,
)
from elicitor.server import generate_key  # noqa: E402

KINDS = ["ours-2025", "ours-2026", "ours-task-2025", "ours-task-2026", "sdk-legacy", "sdk-2026"]
USERS = ["alice", "bob"]
SERVER = [sys.executable, "-m", "tests.peers.probe_server"]
RIDDEN_OUT = 10.0
"""A pause or stall the deployment promises to ride out with no call failing (docs/deploying.md)."""


@dataclass
class Call:
    """One call of the workload and what became of it (times in seconds from the start of the run)."""

    order: str
    kind: str
    user: str
    questions: int
    start: float = 0.0
    end: float | None = None
    asked: list[tuple[float, str]] = field(default_factory=list)
    answered: list[tuple[float, str]] = field(default_factory=list)
    result: str | None = None
    error: str | None = None
    unclear: str | None = None
    hung: bool = False

    def answer_for(self, message: str) -> str:
        return f"{self.user}-{self.order}-q{message.split('question ')[1].split(' ')[0]}"

    @property
    def expected(self) -> str:
        answers = ",".join(f"{self.user}-{self.order}-q{n}" for n in range(1, self.questions + 1))
        return f"{self.user}|{self.order}|{answers}"


@dataclass
class Fault:
    start: float
    end: float
    what: str
    dies: bool
    """A replica died or stopped past its lease: its sessions may be declared gone, an answer it took lost."""
    passing: bool
    """The deployment promises that no call fails through it."""


class Probe:
    """The deployment, the workload's calls and the faults injected so far."""

    def __init__(self, folder: Path, *, persist: bool, bound: float, seed: int) -> None:
        self.folder = folder
        self.ledger = folder / "ledger.txt"
        self.ledger.touch()
        self.redis = RedisServer(folder, appendonly=persist)
        command = [*SERVER, "--ledger", str(self.ledger)]
        self.replicas = Replicas(command, 3, folder, redis=self.redis.url, keys=generate_key())
        self.nginx = Nginx(self.replicas.ports, folder)
        self.bound = bound
        self.rng = random.Random(seed)
        self.t0 = time.monotonic()
        self.calls: list[Call] = []
        self.faults: list[Fault] = []
        self.stopping = False

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 2)

    def say(self, text: str) -> None:
        print(f"[{self.now():7.1f}] {text}", flush=True)

    async def redis_command(self, *words: str) -> None:
        """One command to Redis on a connection of its own, its reply read (an error reply raises)."""
        command = "".join(f"${len(word)}\r\n{word}\r\n" for word in words)
        with anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", self.redis.port) as stream:
                await stream.send(f"*{len(words)}\r\n{command}".encode())
                reply = await stream.receive()
        if reply.startswith(b"-"):
            raise RuntimeError(reply.decode(errors="replace").strip())

    def heal(self) -> None:
        """What a supervisor does: start a replica that is not running, and resume one that is stopped."""
        for index, pid in enumerate(self.replicas.pids()):
            if pid == -1:
                self.replicas.start(index)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGCONT)

    async def all_serving(self) -> None:
        async with httpx.AsyncClient(timeout=5) as http:
            for port in self.replicas.ports:
                with anyio.fail_after(120):
                    while True:
                        with contextlib.suppress(httpx.HTTPError):
                            if (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                                break
                        await anyio.sleep(0.5)


# ---- the calls ----------------------------------------------------------------------------------------------------


async def person(probe: Probe, call: Call, message: str, rng: random.Random) -> str:
    call.asked.append((probe.now(), message))
    await anyio.sleep(rng.choice([0.0, 0.2, 0.5, 1.0, 2.0, 4.0]))
    call.answered.append((probe.now(), message))
    return call.answer_for(message)


async def run_call(probe: Probe, call: Call, rng: random.Random) -> None:
    """One call from start to end through the balancer; what it ended with, in ``call``."""
    call.start = probe.now()
    tool = "job_task" if "task" in call.kind else "job"
    arguments = {"order": call.order, "questions": call.questions}
    try:
        with anyio.fail_after(probe.bound):
            if call.kind.startswith("sdk"):

                async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
                    text = await person(probe, call, params.message, rng)
                    return types.ElicitResult(action="accept", content={"text": text})

                mode = "2026-07-28" if call.kind.endswith("2026") else "legacy"
                async with create_mcp_http_client(headers={"x-user": call.user}) as http:
                    transport = streamable_http_client(probe.nginx.url, http_client=http)
                    async with McpClient(transport, elicitation_callback=callback, mode=mode) as sdk:
                        result = await sdk.call_tool(tool, arguments)
                block = result.content[0] if result.content else None
                text = block.text if isinstance(block, types.TextContent) else repr(result)
                if result.is_error:
                    call.error = text
                else:
                    call.result = text
            else:

                async def handler(request: ElicitationRequest | UrlElicitationRequest) -> dict[str, Any]:
                    return {"text": await person(probe, call, request.message, rng)}

                era = "2026-07-28" if call.kind.endswith("2026") else "2025-11-25"
                elicitation = ScriptedHandler(otherwise=handler)
                headers = {"x-user": call.user}
                async with Client.http(probe.nginx.url, headers=headers, elicitation=elicitation, protocol=era) as c:
                    call.result = (await c.call_tool(tool, arguments)).text
    except TimeoutError as exc:
        if probe.now() - call.start >= probe.bound - 1:  # the bound's own: no outcome at all
            call.hung = True
            call.error = f"no outcome within {probe.bound:g} s"
        else:  # the client's own clock (the handshake's, say), which says what ran out
            call.error = described(exc)
    except Exception as exc:
        call.error = described(exc)
        if not call.kind.startswith("sdk") and not ours(exc):
            call.unclear = "".join(traceback.format_exception(exc))[-3000:]
    except anyio.get_cancelled_exc_class() as exc:  # nothing cancels a worker: this leaked out of a client
        call.error = "a cancellation left the client"
        call.unclear = "".join(traceback.format_exception(exc))[-3000:]
        exc.__context__ = None  # anyio follows the chain; a loop in it would stop the run here
    call.end = probe.now()


def ours(error: BaseException) -> bool:
    """Whether ``error`` is one of the errors elicitor's client raises (a group: all of its errors are)."""
    if isinstance(error, BaseExceptionGroup):
        return all(ours(inner) for inner in error.exceptions)
    return isinstance(error, ElicitorError)


def described(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(described(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}"


async def worker(probe: Probe, index: int) -> None:
    rng = random.Random(probe.rng.random())
    n = 0
    while not probe.stopping:
        n += 1
        call = Call(f"w{index}n{n}", rng.choice(KINDS), rng.choice(USERS), rng.randint(1, 3))
        probe.calls.append(call)
        await run_call(probe, call, rng)
        await anyio.sleep(rng.random())


# ---- the faults ---------------------------------------------------------------------------------------------------


async def sigkill(probe: Probe, rng: random.Random) -> tuple[str, bool, bool]:
    i = rng.randrange(3)
    probe.replicas.kill(i)
    await anyio.sleep(rng.uniform(1, 5))
    await anyio.to_thread.run_sync(probe.replicas.start, i)
    return f"sigkill r{i}", True, False


async def sigterm(probe: Probe, rng: random.Random) -> tuple[str, bool, bool]:
    i = rng.randrange(3)
    await anyio.to_thread.run_sync(probe.replicas.terminate, i)
    await anyio.sleep(rng.uniform(1, 5))
    await anyio.to_thread.run_sync(probe.replicas.start, i)
    return f"sigterm r{i}", True, False


async def sigstop(probe: Probe, rng: random.Random) -> tuple[str, bool, bool]:
    running = [index for index, pid in enumerate(probe.replicas.pids()) if pid != -1]
    if not running:  # every replica is down or restarting under other faults
        return "sigstop: no replica running", False, False
    i = rng.choice(running)
    pid = probe.replicas.pids()[i]
    seconds = rng.uniform(10, 40)
    os.killpg(pid, signal.SIGSTOP)
    try:
        await anyio.sleep(seconds)
    finally:
        with contextlib.suppress(ProcessLookupError):  # killed meanwhile by another fault
            os.killpg(pid, signal.SIGCONT)
    return f"sigstop r{i} {seconds:.0f} s", seconds > RIDDEN_OUT, seconds <= RIDDEN_OUT


async def redis_restart(probe: Probe, rng: random.Random) -> tuple[str, bool, bool]:
    await anyio.to_thread.run_sync(probe.redis.restart)
    if probe.redis.appendonly:
        return "redis restart", False, True
    return "redis restart without its data", False, False


async def redis_restart_empty(probe: Probe, rng: random.Random) -> tuple[str, bool, bool]:
    def restart() -> None:
        probe.redis.stop()
        for name in ("appendonlydir", "dump.rdb"):
            path = probe.folder / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        probe.redis.start()

    await anyio.to_thread.run_sync(restart)
    return "redis restart without its data", False, False


async def client_pause(probe: Probe, rng: random.Random) -> tuple[str, bool, bool]:
    seconds = rng.uniform(5, 30)
    await probe.redis_command("CLIENT", "PAUSE", str(int(seconds * 1000)), "ALL")
    await anyio.sleep(seconds)
    return f"client pause {seconds:.0f} s", False, seconds <= RIDDEN_OUT


async def nginx_reload(probe: Probe, rng: random.Random) -> tuple[str, bool, bool]:
    process = probe.nginx._process
    assert process is not None
    os.kill(process.pid, signal.SIGHUP)
    await anyio.sleep(1)
    return "nginx reload", False, True


FAULTS: dict[str, Callable[[Probe, random.Random], Awaitable[tuple[str, bool, bool]]]] = {
    "sigkill": sigkill,
    "sigstop": sigstop,
    "sigterm": sigterm,
    "redis-restart": redis_restart,
    "redis-restart-empty": redis_restart_empty,
    "client-pause": client_pause,
    "nginx-reload": nginx_reload,
}


async def inject(probe: Probe, name: str, rng: random.Random) -> None:
    start = probe.now()
    probe.say(f"fault {name} ...")
    try:
        what, dies, passing = await FAULTS[name](probe, rng)
    except Exception as exc:  # another fault in the way (Redis paused under a second pause...): noted, not fatal
        what, dies, passing = f"{name} (failed: {exc})", name in ("sigkill", "sigterm", "sigstop"), False
    probe.faults.append(Fault(start, probe.now(), what, dies, passing))
    probe.say(f"fault done: {what}")


async def schedule(probe: Probe, one_by_one: list[str], mixed: float, pool: list[str], settle: float) -> None:
    rng = random.Random(probe.rng.random())
    await anyio.sleep(settle)
    for name in one_by_one:
        await inject(probe, name, rng)
        probe.heal()
        await probe.all_serving()
        await anyio.sleep(settle)
    if mixed > 0 and pool:
        probe.say(f"mixed faults for {mixed:g} s")
        end = time.monotonic() + mixed
        async with anyio.create_task_group() as tg:
            while time.monotonic() < end:
                tg.start_soon(inject, probe, rng.choice(pool), rng)
                await anyio.sleep(rng.uniform(3, 15))
        probe.heal()
        await probe.all_serving()
        await anyio.sleep(settle)


# ---- the checker --------------------------------------------------------------------------------------------------


def met(probe: Probe, call: Call) -> list[Fault]:
    """The faults that overlapped the call, or ended less than 15 s before it began (what they left behind)."""
    end = call.end if call.end is not None else probe.now()
    return [fault for fault in probe.faults if fault.start <= end and fault.end + 15 >= call.start]


def check(probe: Probe) -> list[dict[str, Any]]:
    """Every violation of what must never happen, each with what its call saw and the faults it met."""
    effects: Counter[str] = Counter()
    principals: dict[str, set[str]] = {}
    seen: dict[str, set[tuple[str, str]]] = {}
    for line in probe.ledger.read_text().splitlines():
        fields = line.split()
        if fields[0] == "effect":
            effects[fields[1]] += 1
            principals.setdefault(fields[1], set()).add(fields[2])
        elif fields[0] == "saw":
            seen.setdefault(fields[1], set()).add((fields[2], fields[3]))
    violations: list[dict[str, Any]] = []

    def violation(category: str, call: Call, detail: str) -> None:
        violations.append(
            {
                "category": category,
                "detail": detail,
                "call": {k: v for k, v in vars(call).items() if k != "unclear"},
                "unclear": call.unclear,
                "faults": [vars(fault) for fault in met(probe, call)],
                "effects": effects[call.order],
            }
        )

    for call in probe.calls:
        faults = met(probe, call)
        if effects[call.order] > 1 and probe.redis.appendonly and not any("without" in f.what for f in faults):
            violation("acted twice", call, f"{effects[call.order]} effects in the ledger")
        for principal in principals.get(call.order, set()) - {call.user}:
            violation("another user's data", call, f"acted under {principal}")
        for principal, answer in seen.get(call.order, set()):
            if principal != call.user or not answer.startswith(f"{call.user}-{call.order}-"):
                violation("another user's data", call, f"its run saw {answer!r} under {principal}")
        again = [
            message for message, n in Counter(m for _, m in call.asked).items() if n > 1 and reasked(call, message)
        ]
        if again and not any(fault.dies for fault in faults) and not any("without" in f.what for f in faults):
            violation("asked again after answering", call, f"asked again: {again}")
        if call.hung or call.end is None:
            violation("hung", call, call.error or "still running at the end")
        elif call.unclear is not None:
            violation("unclear error", call, call.error or "")
        elif call.error is not None:
            if not call.error.strip() or call.error.rstrip().endswith(":") or "Traceback" in call.error:
                violation("unclear error", call, call.error)
            elif faults and all(fault.passing for fault in faults):
                violation("failed through a passing fault", call, call.error)
            elif not faults:
                violation("failed with no fault", call, call.error)
        elif call.result != call.expected:
            other = any(user in (call.result or "") for user in USERS if user != call.user)
            violation("another user's data" if other else "wrong result", call, f"returned {call.result!r}")
        elif effects[call.order] < 1:
            violation("wrong result", call, "succeeded but never acted")
    return violations


def reasked(call: Call, message: str) -> bool:
    """Whether ``message`` was shown again after the person answered it (not merely shown twice meanwhile)."""
    answered = [t for t, m in call.answered if m == message]
    return bool(answered) and min(answered) < max(t for t, m in call.asked if m == message)


def logs(probe: Probe) -> dict[str, Any]:
    """What the replicas and nginx logged that must not be there."""
    found: dict[str, Any] = {}
    for index in range(3):
        text = probe.replicas.log(index).read_text(errors="replace")
        found[f"replica {index}: tracebacks"] = text.count("Traceback (most recent call last)")
    access = (probe.nginx.folder / "logs" / "access.log").read_text()
    found["nginx statuses"] = dict(Counter(re.findall(r'"\w+ \S+" (\d+) upstream=', access)))
    return found


async def probe_run(args: argparse.Namespace, folder: Path) -> int:
    probe = Probe(folder, persist=not args.no_persist, bound=args.bound, seed=args.seed)
    one_by_one = [name for name in args.faults.split(",") if name]
    pool = [name for name in args.pool.split(",") if name]
    probe.redis.start()
    probe.replicas.start()
    probe.nginx.start()
    try:
        await probe.all_serving()
        async with anyio.create_task_group() as tg:
            for index in range(args.clients):
                tg.start_soon(worker, probe, index)
            await schedule(probe, one_by_one, args.mixed, pool, args.settle)
            probe.stopping = True
            probe.say("faults over; the calls under way end")
    finally:
        found = logs(probe)
        probe.nginx.stop()
        probe.replicas.stop()
        probe.redis.stop()
    violations = check(probe)
    if any(found[f"replica {index}: tracebacks"] for index in range(3)):
        violations.append({"category": "unclear error", "detail": "tracebacks in the replicas' logs", "logs": found})
    if found["nginx statuses"].get("500"):
        violations.append({"category": "unclear error", "detail": "500s through nginx", "logs": found})
    failed = [call for call in probe.calls if call.error is not None]
    summary = {
        "seed": args.seed,
        "calls": len(probe.calls),
        "succeeded": sum(1 for call in probe.calls if call.result == call.expected),
        "failed clearly, by kind": dict(Counter(call.kind for call in failed if call.unclear is None)),
        "faults": [fault.what for fault in probe.faults],
        "violations": dict(Counter(str(v["category"]) for v in violations)),
        "logs": found,
    }
    (folder / "violations.json").write_text(json.dumps(violations, indent=1, default=str))
    (folder / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps(summary, indent=1), flush=True)
    print(f"probe: {len(violations)} violation(s); details in {folder / 'violations.json'}", flush=True)
    return 1 if violations else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=12, help="calls under way at once (12)")
    parser.add_argument("--faults", default="sigkill,sigstop,sigterm,redis-restart,client-pause,nginx-reload",
                        help="the faults injected one at a time, in order")  # fmt: skip
    parser.add_argument("--mixed", type=float, default=240, help="seconds of mixed, overlapping faults (240)")
    parser.add_argument("--pool", default="sigkill,sigstop,sigterm,redis-restart,client-pause,nginx-reload",
                        help="the faults the mixed part picks from")  # fmt: skip
    parser.add_argument("--no-persist", action="store_true", help="Redis without appendonly: a restart loses all")
    parser.add_argument("--bound", type=float, default=240, help="seconds after which a call counts as hung (240)")
    parser.add_argument("--settle", type=float, default=8, help="seconds between two faults (8)")
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    parser.add_argument("--folder", type=Path, default=None, help="where the logs go (default: a temp folder)")
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="elicitor-probe-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"probe: seed {args.seed}, {args.clients} clients, logs in {folder}", flush=True)
    return anyio.run(probe_run, args, folder)


if __name__ == "__main__":
    sys.exit(main())
