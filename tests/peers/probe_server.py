"""The server of the fault probe (soak/probe.py), run three times behind nginx: jobs that ask their person one to
three questions, then act once (``ctx.once``) and answer with data bound to the user who called.

``python -m tests.peers.probe_server --ledger FILE [--work SECONDS] --port N``: every replica appends to the
ledger, one line per answer a job's run received (``saw <order> <principal> <answer> <pid>``, again on a replay)
and one per side effect (``effect <order> <principal> <pid>``), which the probe's checker reads afterwards. The user
is the ``X-User`` header, standing in for the authentication in front of a real deployment.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

import anyio

from elicitor import Accepted, Context, Server

server = Server("probe", version="1.0.0", task_poll_interval=0.1)
LEDGER = os.devnull
WORK = 0.5


@dataclass
class Answer:
    text: str


def note(*fields: str) -> None:
    with open(LEDGER, "a") as ledger:  # O_APPEND: each line lands whole, whichever replica writes it
        ledger.write(" ".join([*fields, str(os.getpid())]) + "\n")


async def run_job(ctx: Context, order: str, questions: int) -> str:
    principal = str(ctx.principal)
    answers: list[str] = []
    for number in range(1, questions + 1):
        outcome = await ctx.elicit(f"{order}: question {number} of {questions}?", Answer)
        if not isinstance(outcome, Accepted):
            return f"{principal}|{order}|{type(outcome).__name__}"
        note("saw", order, principal, outcome.data.text)
        answers.append(outcome.data.text)
    await anyio.sleep(WORK)  # the work between the answers and the side effect: where many faults land

    def act() -> str:
        note("effect", order, principal)
        return "acted"

    await ctx.once("effect", act)
    return f"{principal}|{order}|{','.join(answers)}"


@server.tool()
async def job(ctx: Context, order: str, questions: int) -> str:
    """A job as a call: ``questions`` questions, work, one side effect; the answer names its user."""
    return await run_job(ctx, order, questions)


@server.tool(task="required")
async def job_task(ctx: Context, order: str, questions: int) -> str:
    """The same job as a task."""
    return await run_job(ctx, order, questions)


@server.tool()
async def replica() -> str:
    """Which process serves this request (its pid)."""
    return str(os.getpid())


def user(scope: dict[str, Any]) -> str | None:
    """Who asks: the ``X-User`` header."""
    for name, value in scope.get("headers", ()):
        if name == b"x-user":
            return bytes(value).decode()
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--work", type=float, default=0.5)
    options = parser.parse_args()
    global LEDGER, WORK
    LEDGER, WORK = options.ledger, options.work
    server.run("http", port=options.port, principal=user, shutdown_grace=2)


if __name__ == "__main__":
    main()
