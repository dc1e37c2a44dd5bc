"""Drive the soak server for a while with many concurrent sessions, random answers and faults; judge the run.

    python soak/run.py --duration 300 [--seed 7] [--json report.json]

What runs at once, for ``--duration`` seconds (``make soak DURATION=600``):

- **steady lanes**, one per transport and era (stdio and Streamable HTTP, 2025-11-25 and 2026-07-28): servers
  nobody kills, so what they hold can be sampled over the whole run. Each lane runs several call loops: a random
  tool, random answers (valid data, decline, cancel, an invalid answer the client's validation sends back to the
  handler before the fixed one goes out), random cancellations of a call mid-question, slow readers (a progress
  callback that dawdles, a handler that takes its time). On HTTP, sessions come and go (a few calls each), and
  some clients vanish mid-question: their task is cancelled, or a raw HTTP client drops the connection while the
  server waits for its answer.
- **chaos lanes**: stdio servers killed (``SIGKILL``) mid-call and clients that leave mid-question (the server
  process must then exit); an HTTP server killed with ``SIGKILL`` now and then and restarted on the same port,
  with clients calling through it. A call in flight when its server dies must end with an error, which counts
  as a correct outcome for it.

Every call has a deadline (``--call-deadline``); a call still running then is a failure (a hang). Every call that
ends is checked against what its plan answered (``wizard`` returns the sum of the accepted steps, a declined
profile takes the tool's decline path...). Every few seconds the steady servers report what they hold through
their ``diag`` tool (tasks, descriptors, RSS, pending elicitations, parked runs, connections, HTTP sessions and
streams), and this process its own tasks, descriptors and RSS. The summary gives calls by outcome, failures, and
per series the peak and the least-squares slope per minute; the run fails on any failure or on a series that
grows without bound (see :func:`judge`). Exit status 0 only for a clean run; ``--json`` writes the report.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx

from elicitor import (
    Accepted,
    Cancelled,
    Client,
    Declined,
    ElicitationRequest,
    JSONRPCError,
    Outcome,
    UrlElicitationRequest,
)

HERE = Path(__file__).resolve().parent
SERVER = [sys.executable, str(HERE / "server.py")]
ERAS = ("2025-11-25", "2026-07-28")
URL_REQUIRED = -32042

SERVER_TIMEOUTS = ["--elicitation-timeout", "12", "--parked-ttl", "12", "--idle", "10"]
"""The soak server's bounds on a vanished peer: well inside a short run, so forgotten state shows up as growth."""


# ---- plans: what a call asks and how it is answered ------------------------------------------------------------


@dataclass
class Plan:
    """One call: the tool, its arguments, the answers to give in order, and what the result must then be.

    ``answers`` holds one entry per question: ``("accept", data)``, ``("decline", None)``, ``("cancel", None)``,
    ``("invalid", data)`` (first an answer outside the form's bounds, then ``data`` once the client's validation
    re-asks), ``("abort", None)`` (cancel the call itself mid-question) or ``("vanish", None)`` (the client leaves).
    """

    tag: str
    tool: str
    arguments: dict[str, Any]
    answers: list[tuple[str, Any]]
    expect: str | None
    """The tool's text result when every answer is given; ``None`` when the call must not return one."""
    expect_error: int | None = None
    """The JSON-RPC error the call must end with (2025-11-25's -32042 for a declined URL)..."""
    expect_error_result: str | None = None
    """...or, on 2026-07-28, the text of the ``isError`` result it must end with instead."""
    progress_expected: int | None = None
    slow_reader: float = 0.0
    asked: int = 0
    reasks: int = 0
    progress: int = 0
    scope: anyio.CancelScope | None = None
    vanish: Callable[[], None] | None = None
    vanished: bool = False
    url_completer: Callable[[str], Awaitable[bool]] | None = None


def make_plan(rng: random.Random, tag: str, *, allow_abort: bool = True) -> Plan:
    """A random call and the answers for it, with the result those answers must produce."""
    tool = rng.choices(["profile", "confirm", "wizard", "connect", "slow", "chatty"], [4, 3, 4, 2, 1, 1])[0]
    abort = allow_abort and rng.random() < 0.08
    if tool == "profile":
        name, age = f"n{rng.randrange(1000)}", rng.randrange(0, 151)
        kind = rng.choices(["accept", "decline", "cancel", "invalid"], [5, 2, 1, 2])[0]
        plan = Plan(tag, tool, {"call": tag}, [(kind, {"name": name, "age": age})], None)
        plan.expect = {"decline": "profile declined", "cancel": "profile cancelled"}.get(kind, f"profile {name} {age}")
    elif tool == "confirm":
        item = f"file{rng.randrange(100)}"
        kind = rng.choice(["yes", "no", "decline", "cancel"])
        answer = ("accept", {"confirm": kind == "yes"}) if kind in ("yes", "no") else (kind, None)
        plan = Plan(
            tag, tool, {"call": tag, "item": item}, [answer], f"deleted {item}" if kind == "yes" else f"kept {item}"
        )
    elif tool == "wizard":
        steps = rng.randint(1, 4)
        answers: list[tuple[str, Any]] = []
        expect = ""
        total = 0
        for index in range(steps):
            kind = rng.choices(["accept", "invalid", "decline", "cancel"], [8, 2, 1, 1])[0]
            value = rng.randrange(0, 1001)
            answers.append((kind, {"value": value}))
            if kind in ("decline", "cancel"):
                expect = (
                    f"stopped at step {index + 1}: {kind}d"
                    if kind == "decline"
                    else f"stopped at step {index + 1}: cancelled"
                )
                break
            total += value
        else:
            expect = f"total {total} once 1"
        plan = Plan(tag, tool, {"call": tag, "steps": steps}, answers, expect)
    elif tool == "connect":
        if rng.random() < 0.8:
            plan = Plan(tag, tool, {"call": tag}, [("accept", None)], f"connected {tag}")
        else:
            plan = Plan(tag, tool, {"call": tag}, [("decline", None)], None, expect_error=URL_REQUIRED)
            plan.expect_error_result = "needs a step the person declined or cancelled"
    elif tool == "slow":
        plan = Plan(tag, tool, {"call": tag, "seconds": round(rng.uniform(0.2, 2.0), 2)}, [], f"slept {tag}")
        if abort:
            plan.answers = [("abort", None)]  # cancelled after a random time instead of at a question
    else:
        count = rng.randint(5, 40)
        plan = Plan(tag, tool, {"call": tag, "count": count}, [], f"chatted {tag} {count}", progress_expected=count)
        plan.slow_reader = rng.choice([0.0, 0.005, 0.02])
    if abort and plan.answers and tool != "slow":
        position = rng.randrange(len(plan.answers))
        plan.answers = [*plan.answers[:position], ("abort", None)]
        plan.expect = None
    if rng.random() < 0.15:
        plan.slow_reader = max(plan.slow_reader, rng.uniform(0.05, 0.4))
    return plan


_TAG = re.compile(r"^\[(c\d+)\]")


class SoakHandler:
    """Answers every question by the plan its tag names (``[c42] ...``); form and URL mode."""

    modes = frozenset({"form", "url"})

    def __init__(self) -> None:
        self.plans: dict[str, Plan] = {}

    def _plan(self, message: str) -> Plan:
        match = _TAG.match(message)
        if match is None or match.group(1) not in self.plans:
            raise AssertionError(f"a question no plan expects: {message!r}")
        return self.plans[match.group(1)]

    async def __call__(self, request: ElicitationRequest) -> Outcome[Any]:
        plan = self._plan(request.message)
        if plan.slow_reader:
            await anyio.sleep(plan.slow_reader)
        if request.errors:  # the client's validation refused our invalid answer: now the valid one
            plan.reasks += 1
            kind, data = plan.answers[plan.asked - 1]
            if kind != "invalid":
                raise AssertionError(f"{plan.tag}: re-asked after a valid answer: {request.errors}")
            return Accepted(data)
        kind, data = self._next(plan)
        if kind == "invalid":
            bad = dict(data)
            bad["age" if "age" in bad else "value"] = 5000
            return Accepted(bad)
        return self._outcome(plan, kind, data)

    async def url(self, request: UrlElicitationRequest) -> Outcome[Any]:
        plan = self._plan(request.message)
        kind, data = self._next(plan)
        if kind == "accept":
            # The person opens the page and finishes there: complete it before saying "accepted", as a page that
            # is quick would (the client listens for the completion before it calls us).
            assert plan.url_completer is not None
            elicitation_id = request.url.rstrip("/").rsplit("/", 1)[-1]
            if not await plan.url_completer(elicitation_id):
                raise AssertionError(f"{plan.tag}: URL elicitation {elicitation_id} could not be completed")
            return Accepted(None)
        return self._outcome(plan, kind, data)

    def _next(self, plan: Plan) -> tuple[str, Any]:
        if plan.asked >= len(plan.answers):
            raise AssertionError(f"{plan.tag}: asked {plan.asked + 1} questions, the plan has {len(plan.answers)}")
        plan.asked += 1
        return plan.answers[plan.asked - 1]

    def _outcome(self, plan: Plan, kind: str, data: Any) -> Outcome[Any]:
        if kind == "abort" and plan.scope is not None:
            plan.scope.cancel()
        if kind == "vanish" and plan.vanish is not None:
            plan.vanished = True
            plan.vanish()
        if kind == "accept":
            return Accepted(data)
        return Declined() if kind == "decline" else Cancelled()


# ---- bookkeeping -----------------------------------------------------------------------------------------------


@dataclass
class Soak:
    """The run's shared state: settings, tallies, failures, samples, and the chaos server's kill epochs."""

    duration: float
    call_deadline: float
    rng: random.Random
    folder: Path
    started: float = field(default_factory=time.monotonic)
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    samples: dict[str, list[tuple[float, dict[str, float]]]] = field(default_factory=dict)
    next_tag: int = 0
    kills: int = 0
    """How many servers were killed so far."""
    stopping: bool = False

    def tag(self) -> str:
        self.next_tag += 1
        return f"c{self.next_tag}"

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def running(self) -> bool:
        return not self.stopping and self.elapsed() < self.duration

    def fail(self, lane: str, message: str) -> None:
        self.failures.append(f"{self.elapsed():7.1f}s {lane}: {message}")

    def sample(self, source: str, values: dict[str, float]) -> None:
        self.samples.setdefault(source, []).append((self.elapsed(), values))


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@dataclass
class Fate:
    """What a chaos lane knows of its server: how often it was killed, and whether it is up now."""

    kills: int = 0
    ready: bool = True

    def kill(self, soak: Soak) -> None:
        self.kills += 1
        self.ready = False
        soak.kills += 1


async def run_call(
    soak: Soak, client: Client, handler: SoakHandler, plan: Plan, lane: str, *, chaos: Fate | None = None
) -> str:
    """Make one call by ``plan``, under the soak's deadline; returns and tallies its outcome (``lane/what``).

    ``chaos``: the server may be killed meanwhile, so an error is a correct end for the call (``server-lost``) if
    it was killed while the call ran or was down when it started; elsewhere any error the plan does not expect is
    a failure.
    """
    handler.plans[plan.tag] = plan
    epoch = chaos.kills if chaos is not None else 0
    lost = chaos is not None and not chaos.ready

    async def progress(_done: float, _total: float | None, _message: str | None) -> None:
        plan.progress += 1
        if plan.slow_reader:
            await anyio.sleep(plan.slow_reader)

    outcome = "?"
    with anyio.move_on_after(soak.call_deadline) as deadline:
        with anyio.CancelScope() as plan.scope:
            if plan.tool == "slow" and plan.answers == [("abort", None)]:
                scope = plan.scope

                async def abort_later() -> None:
                    await anyio.sleep(soak.rng.uniform(0.05, float(plan.arguments["seconds"])))
                    scope.cancel()

                abort = asyncio.get_running_loop().create_task(abort_later())
            else:
                abort = None
            try:
                result = await client.call_tool(plan.tool, plan.arguments, progress=progress)
            except JSONRPCError as exc:
                if plan.expect_error is not None and exc.code == plan.expect_error:
                    outcome = "expected-error"
                elif chaos is not None and (lost or chaos.kills != epoch):
                    outcome = "server-lost"
                else:
                    outcome = "failed"
                    soak.fail(lane, f"{plan.tag} {plan.tool} {plan.answers}: error {exc.code} {exc.message}")
            except Exception as exc:  # judged here: a lost server is fine only during chaos
                if chaos is not None and (lost or chaos.kills != epoch):
                    outcome = "server-lost"
                else:
                    outcome = "failed"
                    soak.fail(lane, f"{plan.tag} {plan.tool} {plan.answers}: {type(exc).__name__}: {exc}")
            else:
                outcome = _judge_result(soak, plan, lane, _text(result), bool(result.is_error))
            finally:
                if abort is not None:
                    abort.cancel()
        if plan.scope.cancel_called or plan.vanished:
            # Cancelled mid-call (or the client left): whatever came first, the result, the cancellation or the
            # error of a connection going away, is a correct end; failures recorded meanwhile are withdrawn.
            if outcome == "failed":
                soak.failures.pop()
            outcome = "vanished" if plan.vanished else "aborted"
    if deadline.cancelled_caught:
        outcome = "hung"
        soak.fail(lane, f"{plan.tag} {plan.tool} {plan.answers}: no end within {soak.call_deadline:g} s")
    handler.plans.pop(plan.tag, None)
    soak.outcomes[f"{lane}/{outcome}"] += 1
    return outcome


def _judge_result(soak: Soak, plan: Plan, lane: str, text: str, is_error: bool) -> str:
    problems = []
    if plan.expect_error_result is not None and is_error and plan.expect_error_result in text:
        return "expected-error"
    if is_error:
        problems.append(f"the tool failed: {text}")
    if plan.expect is None:
        problems.append(f"a result where the plan expects none: {text!r}")
    elif text != plan.expect:
        problems.append(f"result {text!r}, expected {plan.expect!r}")
    if plan.asked != len(plan.answers):
        problems.append(f"{plan.asked} questions asked, the plan answers {len(plan.answers)}")
    if any(kind == "invalid" for kind, _ in plan.answers[: plan.asked]) and plan.reasks == 0:
        problems.append("an invalid answer was never sent back to the handler")
    if plan.progress_expected is not None and plan.progress < plan.progress_expected:
        problems.append(f"{plan.progress} progress notifications of {plan.progress_expected}")
    if problems:
        soak.fail(lane, f"{plan.tag} {plan.tool} {plan.arguments} {plan.answers}: {'; '.join(problems)}")
        return "failed"
    return "ok"


# ---- servers ---------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpServer:
    """The soak server as a uvicorn subprocess on a fixed port; killed with SIGKILL and restarted on that port."""

    def __init__(self, name: str, folder: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = folder / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.fate = Fate(ready=False)

    async def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [*SERVER, "--port", str(self.port), *SERVER_TIMEOUTS], stderr=log, stdout=log
            )
        with anyio.fail_after(30):
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"the soak server exited ({self.process.returncode}); see {self.log}")
                try:
                    async with httpx.AsyncClient() as http:
                        if (await http.get(f"http://127.0.0.1:{self.port}/healthz")).status_code == 200:
                            self.fate.ready = True
                            return
                except httpx.TransportError:
                    pass
                await anyio.sleep(0.1)

    def kill(self) -> None:
        self.fate.ready = False
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def _proc_counts(pid: int) -> dict[str, float]:
    with open(f"/proc/{pid}/status") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return {"fds": len(os.listdir(f"/proc/{pid}/fd")), "rss_kib": rss}


async def diag(client: Client) -> dict[str, float]:
    result = await client.call_tool("diag")
    structured = result.structured_content
    if isinstance(structured, dict) and "result" in structured and isinstance(structured["result"], dict):
        structured = structured["result"]
    if not isinstance(structured, dict):
        structured = json.loads(_text(result))
    return {key: float(value) for key, value in structured.items() if isinstance(value, int | float)}


def _stdio_client(handler: SoakHandler, era: str, log: Path, *extra: str) -> Client:
    return Client.stdio(
        [*SERVER, "--stdio", *SERVER_TIMEOUTS, *extra],
        stderr=log.open("ab"),
        elicitation=handler,
        protocol=era,
        request_timeout=30,
        handshake_timeout=30,
        url_timeout=30,
    )


def _http_client(handler: SoakHandler, url: str, era: str) -> Client:
    return Client.http(url, elicitation=handler, protocol=era, request_timeout=30, handshake_timeout=30, url_timeout=30)


async def _http_completer(base: str, elicitation_id: str) -> bool:
    async with httpx.AsyncClient() as http:
        return (await http.post(f"{base}/complete/{elicitation_id}")).status_code == 200


# ---- lanes -----------------------------------------------------------------------------------------------------


async def steady_stdio(soak: Soak, era: str, loops: int) -> None:
    """One stdio server for the whole run: ``loops`` concurrent call loops over its one connection, sampled."""
    lane = f"stdio/{era}"
    handler = SoakHandler()
    async with _stdio_client(handler, era, soak.folder / f"steady-stdio-{era}.log") as client:

        async def complete(elicitation_id: str) -> bool:
            return _text(await client.call_tool("complete_url", {"elicitation_id": elicitation_id})) == "completed"

        async def loop() -> None:
            while soak.running():
                plan = make_plan(soak.rng, soak.tag())
                plan.url_completer = complete
                await run_call(soak, client, handler, plan, lane)

        async def sampler() -> None:
            while soak.running():
                soak.sample(f"server {lane}", await diag(client))
                await anyio.sleep(2.0)

        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler)
            for _ in range(loops):
                tg.start_soon(loop)


async def steady_http(soak: Soak, server: HttpServer, era: str, loops: int) -> None:
    """Sessions that come and go on a server nobody kills: a few calls each, some clients vanishing."""
    lane = f"http/{era}"
    base = server.url.removesuffix("/mcp")

    async def complete(elicitation_id: str) -> bool:
        return await _http_completer(base, elicitation_id)

    async def loop() -> None:
        while soak.running():
            handler = SoakHandler()
            vanish = soak.rng.random() < 0.12
            with anyio.CancelScope() as session_scope:
                async with _http_client(handler, server.url, era) as client:
                    for _ in range(soak.rng.randint(1, 8)):
                        if not soak.running() or session_scope.cancel_called:
                            break
                        plan = make_plan(soak.rng, soak.tag())
                        plan.url_completer = complete
                        if vanish and plan.answers and plan.tool not in ("slow", "chatty"):  # tools that ask
                            plan.answers = [*plan.answers[:-1], ("vanish", None)]
                            plan.expect = None
                            plan.vanish = session_scope.cancel  # the whole client goes, mid-question
                        await run_call(soak, client, handler, plan, lane)
            if session_scope.cancelled_caught:
                soak.outcomes[f"{lane}/client-vanished"] += 1

    async with anyio.create_task_group() as tg:
        for _ in range(loops):
            tg.start_soon(loop)


async def sample_http(soak: Soak, server: HttpServer) -> None:
    """What the steady HTTP server holds, through a 2026-07-28 client of its own, and its /proc counts."""
    async with _http_client(SoakHandler(), server.url, "2026-07-28") as client:
        while soak.running():
            soak.sample("server http", await diag(client))
            await anyio.sleep(2.0)


async def raw_vanish(soak: Soak, server: HttpServer) -> None:
    """Clients that drop the TCP connection while the server waits on them (no DELETE, no cancel): on the
    handshake era right after ``elicitation/create`` arrives, on 2026-07-28 in the middle of a slow call's SSE."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    lane = "http/raw-vanish"
    while soak.running():
        await anyio.sleep(soak.rng.uniform(0.5, 2.0))
        tag = soak.tag()
        with anyio.move_on_after(soak.call_deadline) as deadline:
            async with httpx.AsyncClient(timeout=20) as http:
                if soak.rng.random() < 0.5:
                    init = {
                        "jsonrpc": "2.0", "id": 1, "method": "initialize",
                        "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
                                   "clientInfo": {"name": "vanishing", "version": "0"}},
                    }  # fmt: skip
                    answer = await http.post(server.url, json=init, headers=headers)
                    session = {**headers, "Mcp-Session-Id": answer.headers["mcp-session-id"],
                               "MCP-Protocol-Version": "2025-11-25"}  # fmt: skip
                    await http.post(
                        server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
                    )
                    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                            "params": {"name": "wizard", "arguments": {"call": tag, "steps": 2}}}  # fmt: skip
                    want = "elicitation/create"
                else:
                    session = {
                        **headers,
                        "MCP-Protocol-Version": "2026-07-28",
                        "Mcp-Method": "tools/call",
                        "Mcp-Name": "slow",
                    }
                    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                            "params": {"name": "slow", "arguments": {"call": tag, "seconds": 3},
                                       "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                                 "io.modelcontextprotocol/clientCapabilities": {},
                                                 "progressToken": tag}}}  # fmt: skip
                    want = "notifications/progress"
                async with http.stream("POST", server.url, json=call, headers=session) as response:
                    async for line in response.aiter_lines():
                        if want in line:
                            break  # leaving the block closes the connection under the server's feet
                    else:
                        soak.fail(lane, f"{tag}: the stream ended without {want} ({response.status_code})")
        outcome = "hung" if deadline.cancelled_caught else "vanished"
        if deadline.cancelled_caught:
            soak.fail(lane, f"{tag}: no {want} within {soak.call_deadline:g} s")
        soak.outcomes[f"{lane}/{outcome}"] += 1


async def chaos_http(soak: Soak, server: HttpServer, loops: int) -> None:
    """An HTTP server killed (SIGKILL) and restarted on its port every so often, clients of both eras on it."""
    base = server.url.removesuffix("/mcp")

    async def complete(elicitation_id: str) -> bool:
        return await _http_completer(base, elicitation_id)

    async def killer() -> None:
        while soak.running():
            await anyio.sleep(soak.rng.uniform(8, 20))
            if not soak.running():
                break
            server.fate.kill(soak)
            server.kill()
            await anyio.sleep(soak.rng.uniform(0.2, 1.5))
            await server.start()

    async def loop(era: str) -> None:
        lane = f"http-chaos/{era}"
        while soak.running():
            handler = SoakHandler()
            epoch, was_ready = server.fate.kills, server.fate.ready
            try:
                async with _http_client(handler, server.url, era) as client:
                    for _ in range(soak.rng.randint(1, 6)):
                        if not soak.running():
                            break
                        plan = make_plan(soak.rng, soak.tag())
                        plan.url_completer = complete
                        if await run_call(soak, client, handler, plan, lane, chaos=server.fate) == "server-lost":
                            break
            except Exception as exc:  # connecting while the server is down, or closing after a kill
                if was_ready and server.fate.kills == epoch and server.fate.ready:
                    soak.fail(lane, f"session: {type(exc).__name__}: {exc}")
                else:
                    soak.outcomes[f"{lane}/server-down"] += 1
                    await anyio.sleep(0.3)

    async with anyio.create_task_group() as tg:
        tg.start_soon(killer)
        for index in range(loops):
            tg.start_soon(loop, ERAS[index % 2])


async def chaos_stdio(soak: Soak, era: str) -> None:
    """Short stdio sessions that end badly: the server killed mid-call, or the client leaving mid-question.

    A killed server must make the call fail at once (an error, not a hang); a client that leaves must leave no
    server process behind.
    """
    lane = f"stdio-chaos/{era}"
    while soak.running():
        handler = SoakHandler()
        kill = soak.rng.random() < 0.5
        pid = -1
        with anyio.move_on_after(soak.call_deadline) as deadline:
            with anyio.CancelScope() as session_scope:
                async with _stdio_client(handler, era, soak.folder / f"chaos-stdio-{era}.log") as client:
                    pid = int((await diag(client))["pid"])
                    tag = soak.tag()
                    if kill:
                        fate = Fate()
                        plan = Plan(tag, "slow", {"call": tag, "seconds": 5}, [], None)

                        async def kill_later(fate: Fate, pid: int) -> None:
                            await anyio.sleep(soak.rng.uniform(0.1, 1.5))
                            fate.kill(soak)
                            os.kill(pid, signal.SIGKILL)

                        async with anyio.create_task_group() as tg:
                            tg.start_soon(kill_later, fate, pid)
                            outcome = await run_call(soak, client, handler, plan, lane, chaos=fate)
                        if outcome != "server-lost":
                            soak.fail(lane, f"{tag}: a call whose server was killed ended {outcome!r}")
                    else:
                        plan = Plan(
                            tag, "wizard", {"call": tag, "steps": 3}, [("accept", {"value": 1}), ("vanish", None)], None
                        )
                        plan.vanish = session_scope.cancel
                        await run_call(soak, client, handler, plan, lane)
            if session_scope.cancelled_caught:
                soak.outcomes[f"{lane}/client-vanished"] += 1
        if deadline.cancelled_caught:
            soak.fail(lane, f"the session did not end within {soak.call_deadline:g} s")
        if pid > 0:
            with anyio.move_on_after(10):
                while os.path.exists(f"/proc/{pid}") and _state(pid) not in ("Z", "X"):
                    await anyio.sleep(0.1)
            if os.path.exists(f"/proc/{pid}") and _state(pid) not in ("Z", "X"):
                soak.fail(lane, f"server process {pid} still runs 10 s after its client left")
        await anyio.sleep(soak.rng.uniform(0.2, 1.0))


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"


async def sample_self(soak: Soak, steady: HttpServer) -> None:
    """This process (the clients) and the steady HTTP server, from /proc."""
    while soak.running():
        before = time.monotonic()
        await anyio.sleep(0.05)
        mine = _proc_counts(os.getpid())
        mine["tasks"] = len(asyncio.all_tasks())
        mine["loop_lag_ms"] = round((time.monotonic() - before - 0.05) * 1000, 1)
        soak.sample("client", mine)
        if steady.process is not None and steady.process.poll() is None:
            soak.sample("server http /proc", _proc_counts(steady.process.pid))
        await anyio.sleep(2.0)


# ---- judging ---------------------------------------------------------------------------------------------------

BOUNDED = ("tasks", "fds", "rss_kib", "pending", "inflight", "parked", "connections", "sessions", "streams_open",
           "streams_kept", "url_listeners")  # fmt: skip
"""Series that must stay bounded. (``urls``, ``events_kept`` and ``once_calls`` are capped tables that fill up by
design; they are reported, not judged.)"""

FLOOR = {"rss_kib": 65_536.0, "fds": 12.0, "loop_lag_ms": float("inf")}
"""Growth below this many units never counts as a leak (default 10: load alone swings counts by a few). Resident
memory settles slowly (the allocator's arenas fill over the first minutes even with nothing leaking): 64 MiB."""


def slope_per_minute(points: Sequence[tuple[float, float]]) -> float:
    """The least-squares slope of ``(seconds, value)`` points, per minute (0 for fewer than two distinct times)."""
    if len(points) < 2:
        return 0.0
    mean_t = statistics.fmean(t for t, _ in points)
    mean_v = statistics.fmean(v for _, v in points)
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread == 0:
        return 0.0
    return 60.0 * sum((t - mean_t) * (v - mean_v) for t, v in points) / spread


def judge(name: str, points: Sequence[tuple[float, float]], *, warmup: float) -> str | None:
    """Whether a series grows without bound; the reason if so, else ``None``.

    After ``warmup`` seconds, the points are cut in halves. A leak grows steadily, so its second half sits above
    its first: the series is unbounded when the median of the second half exceeds the median of the first by more
    than both a floor (``FLOOR``, default 10: a handful of calls in flight is noise) and a quarter of the first
    half's median (a busy server's counts swing with the load), and the least-squares slope is positive. Medians
    keep one busy moment from deciding; both tests together keep a bounded but noisy series from tripping it.
    """
    kept = [(t, v) for t, v in points if t >= warmup]
    if len(kept) < 6:
        return None
    middle = len(kept) // 2
    first = statistics.median(v for _, v in kept[:middle])
    second = statistics.median(v for _, v in kept[middle:])
    allowed = max(FLOOR.get(name, 10.0), 0.25 * first)
    slope = slope_per_minute(kept)
    if second - first > allowed and slope > 0:
        return f"{name} grew from a median of {first:g} to {second:g} (allowed +{allowed:g}), {slope:+.1f}/min"
    return None


SHORT_RUN = 300.0
"""In a run shorter than this (``make test`` runs 40 seconds), the load is still ramping up while the halves are
compared, so what the steady HTTP server holds may rise with it. There, a rise counts as a leak only if it is still
held after the clients have left and the server has settled; longer runs judge the growth alone."""


def _drained(soak: Soak, source: str, name: str, points: Sequence[tuple[float, float]], warmup: float) -> bool:
    if soak.duration >= SHORT_RUN or source != "server http":
        return False
    settled = [values[name] for _, values in soak.samples.get("server http settled", []) if name in values]
    kept = [v for t, v in points if t >= warmup]
    return bool(settled and kept) and settled[-1] <= statistics.median(kept[: max(1, len(kept) // 2)])


def report(soak: Soak, warmup: float) -> tuple[str, dict[str, Any], bool]:
    """The summary text, the same as data, and whether the run passed."""
    lines = [f"soak: {soak.elapsed():.0f} s, {sum(soak.outcomes.values())} calls, {soak.kills} server kills"]
    for key, count in sorted(soak.outcomes.items()):
        lines.append(f"  {key:40} {count}")
    series: dict[str, dict[str, Any]] = {}
    leaks: list[str] = []
    lines.append(f"  {'series':44} {'peak':>10} {'last':>10} {'slope/min':>10}")
    for source, samples in sorted(soak.samples.items()):
        names = sorted({name for _, values in samples for name in values} - {"pid"})
        for name in names:
            points = [(t, values[name]) for t, values in samples if name in values]
            peak, last, slope = (
                max(v for _, v in points),
                points[-1][1],
                slope_per_minute([p for p in points if p[0] >= warmup]),
            )
            series[f"{source}: {name}"] = {"peak": peak, "last": last, "slope_per_min": slope, "samples": len(points)}
            lines.append(f"  {source + ': ' + name:44} {peak:10g} {last:10g} {slope:+10.2f}")
            if name in BOUNDED and (reason := judge(name, points, warmup=warmup)) is not None:
                if _drained(soak, source, name, points, warmup):
                    lines.append(f"    (load, not a leak: back to its first level once the clients left: {reason})")
                else:
                    leaks.append(f"{source}: {reason}")
    if soak.failures:
        lines.append(f"FAILURES ({len(soak.failures)}):")
        lines.extend(f"  {failure}" for failure in soak.failures[:50])
    if leaks:
        lines.append("UNBOUNDED GROWTH:")
        lines.extend(f"  {leak}" for leak in leaks)
    passed = not soak.failures and not leaks and sum(soak.outcomes.values()) > 0
    lines.append("soak: PASSED" if passed else "soak: FAILED")
    data = {"duration": soak.elapsed(), "outcomes": dict(soak.outcomes), "failures": soak.failures, "leaks": leaks,
            "series": series, "kills": soak.kills, "passed": passed}  # fmt: skip
    return "\n".join(lines), data, passed


# ---- main ------------------------------------------------------------------------------------------------------


async def guarded(soak: Soak, lane: str, work: Awaitable[None]) -> None:
    """Run one lane; an error it did not expect ends that lane as a failure of the run, not the whole run."""
    try:
        await work
    except Exception as exc:
        cause: BaseException = exc
        while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
            cause = cause.exceptions[0]
        soak.fail(lane, f"the lane stopped: {type(cause).__name__}: {cause}")


async def soak_run(
    duration: float, *, seed: int, folder: Path, loops: int, call_deadline: float
) -> tuple[str, dict[str, Any], bool]:
    """Run the whole soak for ``duration`` seconds; returns the summary, the report data and whether it passed."""
    soak = Soak(duration=duration, call_deadline=call_deadline, rng=random.Random(seed), folder=folder)
    steady, chaos = HttpServer("steady-http", folder), HttpServer("chaos-http", folder)
    await steady.start()
    await chaos.start()
    try:
        async with anyio.create_task_group() as tg:
            for era in ERAS:
                tg.start_soon(guarded, soak, f"stdio/{era}", steady_stdio(soak, era, loops))
                tg.start_soon(guarded, soak, f"http/{era}", steady_http(soak, steady, era, loops))
                tg.start_soon(guarded, soak, f"stdio-chaos/{era}", chaos_stdio(soak, era))
            tg.start_soon(guarded, soak, "http-chaos", chaos_http(soak, chaos, loops))
            tg.start_soon(guarded, soak, "http/raw-vanish", raw_vanish(soak, steady))
            tg.start_soon(guarded, soak, "sampler http", sample_http(soak, steady))
            tg.start_soon(guarded, soak, "sampler", sample_self(soak, steady))
        chaos.stop()
        await settle(soak, steady)
    finally:
        chaos.stop()
        steady.stop()
    return report(soak, warmup=min(120.0, max(15.0, duration / 5)))


SETTLED_LIMITS = {"pending": 0, "parked": 0, "sessions": 0, "streams_open": 0, "inflight": 1, "url_listeners": 0}
"""What the steady HTTP server may still hold once every client is gone and its bounds have passed (the one call
in flight is the ``diag`` asking)."""


async def settle(soak: Soak, server: HttpServer) -> None:
    """Once every client has left: after the server's own bounds on vanished peers (``SERVER_TIMEOUTS``), it must
    have let go of everything it held for them, whatever the samples' trend said."""
    with anyio.move_on_after(40):
        while True:
            await anyio.sleep(2.0)
            async with _http_client(SoakHandler(), server.url, "2026-07-28") as client:
                held = await diag(client)
            if all(held.get(name, 0) <= limit for name, limit in SETTLED_LIMITS.items()):
                break
    soak.sample("server http settled", held)
    for name, limit in SETTLED_LIMITS.items():
        if held.get(name, 0) > limit:
            soak.fail("http/settled", f"{name} is {held[name]:g} 40 s after the last client left (expected <= {limit})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=float(os.environ.get("SOAK_DURATION", 300)))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", random.randrange(1 << 30))))
    parser.add_argument("--loops", type=int, default=3, help="concurrent call loops per steady lane")
    parser.add_argument("--call-deadline", type=float, default=90.0, help="seconds after which a call counts as hung")
    parser.add_argument("--logs", type=Path, default=None, help="where the servers' logs go (default: a temp folder)")
    parser.add_argument("--json", type=Path, default=None, help="also write the report here as JSON")
    args = parser.parse_args(argv)
    import tempfile

    folder = args.logs or Path(tempfile.mkdtemp(prefix="elicitor-soak-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"soak: {args.duration:g} s, seed {args.seed}, logs in {folder}", flush=True)
    summary, data, passed = anyio.run(
        lambda: soak_run(
            args.duration, seed=args.seed, folder=folder, loops=args.loops, call_deadline=args.call_deadline
        )
    )
    data["seed"] = args.seed
    print(summary, flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(data, indent=2))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
