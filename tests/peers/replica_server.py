"""The server the replica tests run three times behind nginx: questions in sequence, together, URL mode, waits.

``python -m tests.peers.replica_server --port N`` serves it over HTTP, with the page a URL elicitation points to
(``/done/<id>`` completes it: on whichever replica the balancer sends the person). ``--lease`` and
``--keep-alive`` shorten the periods a stall must outlast, so a test of one waits seconds instead of a dozen;
``--hold`` the wait for an unreachable Redis, past which an answer for another replica's session is kept.
"""

from __future__ import annotations

import argparse
import contextvars
import os
import signal
from dataclasses import dataclass
from typing import Any

import anyio

from elicitor import Accepted, Context, Server, UrlElicitationRequired
from elicitor.state import TaskRecord
from elicitor.state._redis._tasks import RedisTaskRegistry

server = Server("replicas", version="1.0.0")
cancelled: list[str] = []
"""Calls of this replica cancelled while they waited on a person."""


@dataclass
class Name:
    name: str


@dataclass
class Party:
    size: int


@server.tool()
async def book(ctx: Context) -> str:
    """Two questions, one after the other."""
    name = await ctx.elicit("Your name?", Name)
    party = await ctx.elicit("How many people?", Party)
    if isinstance(name, Accepted) and isinstance(party, Accepted):
        return f"{name.data.name} x{party.data.size}"
    return "nothing booked"


@server.tool()
async def together(ctx: Context) -> str:
    """Two questions asked at the same time (one round on 2026-07-28, two pending requests before)."""
    answers: dict[str, str] = {}

    async def ask(key: str) -> None:
        outcome = await ctx.elicit(f"Name for {key}?", Name, key=key)
        answers[key] = outcome.data.name if isinstance(outcome, Accepted) else "-"

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, "left")
        tg.start_soon(ask, "right")
    return f"{answers['left']}+{answers['right']}"


@server.tool()
async def connect(ctx: Context, base: str) -> str:
    """Needs an out-of-band step: the person opens ``base/done/<id>``, which completes it."""
    link = await ctx.url_elicitation("Connect your account", f"{base}/done/{{elicitation_id}}")
    if not link.completed:
        raise UrlElicitationRequired(link)
    return "connected"


@server.tool()
async def connect_account(ctx: Context, base: str) -> str:
    """``connect``, with a question after its page is registered and before the person is sent there: while it is
    asked, the call is under way with its page chosen."""
    link = await ctx.url_elicitation("Connect your account", f"{base}/done/{{elicitation_id}}")
    if link.completed:
        return "connected"
    await ctx.elicit("Which account?", Name)
    raise UrlElicitationRequired(link)


dies_naming_its_page: contextvars.ContextVar[bool] = contextvars.ContextVar("dies_naming_its_page", default=False)
"""Set by :func:`connect_dying`: the first attempt's replica is killed as its call's record first names its page."""
_swap = RedisTaskRegistry.swap


async def _swap_then_die(self: RedisTaskRegistry, record: TaskRecord) -> TaskRecord | None:
    """The store's write, then, for a first attempt of :func:`connect_dying` whose record now names its page (as
    started, or with the id), SIGKILL of this very process: nothing after that write runs."""
    stored = await _swap(self, record)
    if stored is not None and dies_naming_its_page.get() and record.epoch == 0:
        steps = [*dict(record.answers.get("p") or {}), *dict(record.answers.get("m") or {})]
        if any(step.startswith("url-id:") for step in steps):
            os.kill(os.getpid(), signal.SIGKILL)
    return stored


RedisTaskRegistry.swap = _swap_then_die  # type: ignore[method-assign]


@server.tool()
async def connect_dying(ctx: Context, base: str) -> str:
    """``connect`` after a question, whose first attempt's replica is killed (SIGKILL) right after the call's record
    first names its page, before the page is registered: the retry goes on from the record. The question opens the
    call's answer stream first, so the retry is always the client's after its session ended (a replica killed
    before its first byte has nginx answer 502 when the request went straight to it, or ends a relayed stream)."""
    dies_naming_its_page.set(True)
    await ctx.elicit("Which account?", Name)
    return await connect(ctx, base)


@server.tool()
async def wait_then_note(ctx: Context) -> str:
    """Asks, and notes it if the call is cancelled while waiting."""
    try:
        await ctx.elicit("Take your time", Name)
    except anyio.get_cancelled_exc_class():
        cancelled.append("wait_then_note")
        raise
    return "answered"


@server.tool(task="required")
async def long_booking(ctx: Context) -> str:
    """Runs as a task: says where it runs (its status message), asks twice, and says where it finished."""
    await ctx.report_progress(0, 2, f"running in {os.getpid()}")
    name = await ctx.elicit("Your name?", Name)
    party = await ctx.elicit("How many people?", Party)
    if isinstance(name, Accepted) and isinstance(party, Accepted):
        return f"{name.data.name} x{party.data.size} by {os.getpid()}"
    return "nothing booked"


@server.tool(scopes=["admin"])
async def manage(ctx: Context) -> str:
    """Needs the ``admin`` scope behind ``--auth-*`` (a step-up sign-in); says who called it."""
    return f"managed by {ctx.principal}"


@server.tool()
async def replica() -> str:
    """Which process serves this session (its pid)."""
    return str(os.getpid())


@server.tool()
async def cancellations() -> int:
    """How many calls this replica saw cancelled while waiting."""
    return len(cancelled)


@server.tool()
async def change_tools() -> str:
    """Tell every client, on every replica, that the tool list changed."""
    server.notify_tools_changed()
    return "changed"


async def pages(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``GET /done/<id>``: the third party's page, on whichever replica it lands."""
    path = str(scope.get("path", ""))
    done = path.startswith("/done/") and await server.complete_url_elicitation(path.rsplit("/", 1)[-1])
    status = 200 if done else 404
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"done" if done else b"unknown"})


def user(scope: dict[str, Any]) -> str | None:
    """Who asks: the ``X-User`` header, standing in for the authentication in front of a real deployment."""
    for name, value in scope.get("headers", ()):
        if name == b"x-user":
            return bytes(value).decode()
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--lease", type=float, help="the replica's lease in Redis, in seconds (default: the store's)")
    parser.add_argument("--keep-alive", type=int, help="seconds an idle connection stays open (default: run's)")
    parser.add_argument("--grace", type=int, default=2, help="seconds a SIGTERM leaves requests in flight (2)")
    parser.add_argument("--hold", type=float, help="seconds a request waits for an unreachable Redis (default 15)")
    args = parser.parse_args()
    if args.hold is not None:
        from elicitor.server import _hold

        _hold.STORE_HOLD = args.hold
    if args.lease is not None:  # the store run() would open from ELICITOR_REDIS_URL, with a shorter lease
        from elicitor.state import RedisStore

        server.share(RedisStore(os.environ["ELICITOR_REDIS_URL"], lease=args.lease))
    more = {} if args.keep_alive is None else {"keep_alive": args.keep_alive}
    server.run("http", port=args.port, fallback=pages, principal=user, shutdown_grace=args.grace, **more)


if __name__ == "__main__":
    main()
