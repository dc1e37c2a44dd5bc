"""The server the soak test runs: forms, confirmations, multi-step calls, ``ctx.once``, URL mode, progress, a slow tool.

    python soak/server.py --stdio [--replay]        # one connection over stdin/stdout
    python soak/server.py --port 8123 [--idle 10]   # Streamable HTTP with uvicorn (both eras)

Every question carries the call's tag (``[c42]``, an argument of every tool) so the driver's handler knows which
plan it answers. ``diag`` reports what the process holds — tasks, descriptors, resident memory and the server's
own tables (pending elicitations, parked multi-round-trip runs, live connections, HTTP sessions and the streams
they keep, URL elicitations) — read from the objects themselves, so that a leak shows as a count that grows.
On HTTP, ``POST /complete/<id>`` completes a URL-mode elicitation, as the page a person finishes on would.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import secrets
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Annotated, Any

import anyio

from elicitor import Accepted, Cancelled, Context, Declined, Field, Server, UrlElicitationRequired
from elicitor.server import HttpApp, ServerSession

server = Server("soak", "1.0", title="Soak test server")

URL_BASE = "http://127.0.0.1"
"""Where URL-mode links point (the HTTP server puts its own address here; nothing is ever fetched)."""

_connections: weakref.WeakSet[ServerSession] = weakref.WeakSet()
"""Every connection dispatcher still alive: one that outlives its connection is a leak."""

_make_connection = server.connection


def _tracked_connection(*, principal: str | None = None) -> ServerSession:
    connection = _make_connection(principal=principal)
    _connections.add(connection)
    return connection


server.connection = _tracked_connection  # type: ignore[method-assign]  # counts connections for `diag`

_app: HttpApp | None = None

_ONCE_LIMIT = 10_000
_once_runs: OrderedDict[str, int] = OrderedDict()
"""How often each call's ``ctx.once`` step actually ran in this process (the newest calls only: bounded)."""


@dataclass
class Profile:
    name: Annotated[str, Field(title="Name", min_length=1, max_length=40)]
    age: Annotated[int, Field(title="Age", minimum=0, maximum=150)]


@dataclass
class Step:
    value: Annotated[int, Field(title="Value", minimum=0, maximum=1000)]


@server.tool()
async def profile(ctx: Context, call: str) -> str:
    """A form: name and age."""
    match await ctx.elicit(f"[{call}] Your profile?", Profile):
        case Accepted(data=answer):
            return f"profile {answer.name} {answer.age}"
        case Declined():
            return "profile declined"
        case Cancelled():
            return "profile cancelled"


@server.tool()
async def confirm(ctx: Context, call: str, item: str) -> str:
    """A confirmation, fail-closed: only an accepted "yes" deletes."""
    if await ctx.confirm(f"[{call}] Delete {item}?"):
        return f"deleted {item}"
    return f"kept {item}"


def _record_once(call: str) -> str:
    _once_runs[call] = _once_runs.get(call, 0) + 1
    _once_runs.move_to_end(call)
    while len(_once_runs) > _ONCE_LIMIT:
        _once_runs.popitem(last=False)
    return secrets.token_hex(4)


@server.tool()
async def wizard(ctx: Context, call: str, steps: int) -> str:
    """Several questions in a row (a round each on 2026-07-28), progress between them, then a side effect once."""
    total = 0
    for index in range(steps):
        await ctx.report_progress(index, steps)
        match await ctx.elicit(f"[{call}] Step {index + 1} of {steps}", Step):
            case Accepted(data=step):
                total += step.value
            case Declined():
                return f"stopped at step {index + 1}: declined"
            case Cancelled():
                return f"stopped at step {index + 1}: cancelled"
    await ctx.once("receipt", lambda: _record_once(call))
    return f"total {total} once {_once_runs.get(call, 0)}"


@server.tool()
async def connect(ctx: Context, call: str) -> str:
    """URL mode: -32042 on 2025-11-25, a URL input request on 2026-07-28, until the driver completes the link."""
    link = await ctx.url_elicitation(f"[{call}] Connect your account", URL_BASE + "/connect/{elicitation_id}")
    if not link.completed:
        raise UrlElicitationRequired(link)
    return f"connected {call}"


@server.tool()
async def complete_url(elicitation_id: str) -> str:
    """Complete a URL-mode elicitation (what the third party's callback does; stdio has no web route)."""
    return "completed" if await server.complete_url_elicitation(elicitation_id) else "unknown"


@server.tool()
async def slow(ctx: Context, call: str, seconds: float) -> str:
    """Takes its time, reporting progress: the call a cancellation or a killed server interrupts."""
    steps = max(1, int(seconds / 0.1))
    for index in range(steps):
        await ctx.report_progress(index, steps)
        await anyio.sleep(seconds / steps)
    return f"slept {call}"


@server.tool()
async def chatty(ctx: Context, call: str, count: int) -> str:
    """Many large progress notifications: what a slow reader has to keep up with."""
    filler = "x" * 2048
    for index in range(count):
        await ctx.report_progress(index, count, f"{index} {filler}")
    return f"chatted {call} {count}"


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        return int(next(line.split()[1] for line in status if line.startswith("VmRSS:")))


@server.tool()
async def diag() -> dict[str, Any]:
    """What this process holds now (see the module docstring); numbers only."""
    gc.collect()
    connections = list(_connections)
    sessions = [c.session for c in connections if c.session is not None]
    report: dict[str, Any] = {
        "pid": os.getpid(),
        "tasks": len(asyncio.all_tasks()),
        "fds": len(os.listdir("/proc/self/fd")),
        "rss_kib": _rss_kib(),
        "connections": len(connections),
        "pending": sum(len(s._pending) for s in sessions),
        "inflight": sum(len(s._inflight) for s in sessions),
        "parked": sum(len(c.parked) for c in connections if c.parked is not None),
        "url_listeners": len(server.url_elicitations._connections),
        "once_calls": len(_once_runs),
    }
    urls = getattr(server.store.urls, "_known", None)
    events = getattr(server.store.events, "_events", None)
    report["urls"] = len(urls) if urls is not None else -1
    report["events_kept"] = len(events) if events is not None else -1
    if _app is not None:
        table = _app._handshake._sessions
        report["sessions"] = len(table)
        report["streams_open"] = sum(len(s.streams) for s in table.values())
        report["streams_kept"] = sum(len(s.by_key) for s in table.values())
    return report


async def _complete_route(scope: Any, receive: Any, send: Any) -> None:
    """``POST /complete/<id>``: the page a person finishes on says the interaction is done."""
    if scope["type"] != "http":
        return
    path: str = scope.get("path", "")
    status = 404
    if scope["method"] == "POST" and path.startswith("/complete/"):
        status = 200 if await server.complete_url_elicitation(path.removeprefix("/complete/")) else 409
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": str(status).encode()})


def main() -> None:
    global URL_BASE, _app
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stdio", action="store_true", help="serve one connection on stdin/stdout")
    parser.add_argument("--port", type=int, help="serve Streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--replay", action="store_true", help="park nothing: every 2026-07-28 round replays")
    parser.add_argument("--idle", type=float, default=10.0, help="HTTP: end sessions idle for this many seconds")
    parser.add_argument(
        "--elicitation-timeout", type=float, default=15.0, help="seconds a tool waits for a pushed answer"
    )
    parser.add_argument("--parked-ttl", type=float, default=15.0, help="seconds a 2026-07-28 run waits parked")
    args = parser.parse_args()
    # Short bounds, so that a client that vanished mid-question is noticed within the run (they default to an hour
    # and ten minutes: a soak would see every vanished client as a leak).
    server.elicitation_timeout = args.elicitation_timeout
    server.parked_run_ttl = args.parked_ttl
    if args.replay:
        server.max_parked_runs = 0
    if args.port is None:
        server.run()
        return
    import uvicorn

    URL_BASE = f"http://127.0.0.1:{args.port}"
    _app = server.http_app(session_idle_timeout=args.idle, fallback=_complete_route)
    uvicorn.run(_app, host="127.0.0.1", port=args.port, log_level="warning", timeout_graceful_shutdown=2)


if __name__ == "__main__":
    main()
