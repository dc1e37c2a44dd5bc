"""``elicitor proxy --ui terminal`` in a real terminal (tmux): stdin and stdout are the protocol, so the whole
question (who asks, the message, the answer) is drawn on the controlling terminal, and nothing of it on stderr."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .conftest import ROOT
from .test_screen import Tmux, tmux  # noqa: F401 (the fixture)

SERVER = """
from elicitor import Context, Server

server = Server("Harbour bistro", "2.0")

@server.tool()
async def book(ctx: Context) -> str:
    return "booked" if await ctx.confirm("Book the window table for tonight?") else "not booked"

server.run()
"""

HOST = """
import sys

import anyio

from elicitor import Client


async def main() -> None:
    proxy = [sys.executable, "-m", "elicitor", "proxy", "--ui", "terminal", sys.executable, sys.argv[1]]
    async with Client.stdio(proxy) as client:  # a host that declares no elicitation
        result = await client.call_tool("book")
    with open(sys.argv[2], "w") as out:
        out.write(result.text)


anyio.run(main)
"""


def test_ui_terminal_asks_the_whole_question_on_the_controlling_terminal(tmux: Tmux, tmp_path: Path) -> None:  # noqa: F811
    server, host = tmp_path / "server.py", tmp_path / "host.py"
    server.write_text(SERVER)
    host.write_text(HOST)
    result, errors = tmp_path / "result", tmp_path / "stderr"
    command = f"{sys.executable} {host} {server} {result} 2>{errors}"
    tmux("new-session", "-d", "-s", "demo", "-x", "120", "-y", "30", "-c", str(ROOT), command)
    tmux.wait_for("Harbour bistro 2.0 asks", "Book the window table for tonight?", timeout=60)
    tmux.keys("y")
    for _ in range(300):  # the host writes the result once the call ends
        if result.exists():
            break
        time.sleep(0.1)
    assert result.read_text() == "booked"
    assert "Book the window table" not in errors.read_text()  # the question was on the terminal, not on stderr
