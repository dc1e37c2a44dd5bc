"""Instructions per elicitation, server and client, counted by valgrind's callgrind: exact on a loaded machine.

    python bench/instructions.py [--scenario e|a] [--n 200,1200] [--side server,client] [--loop auto|uvloop|asyncio]

CPU time per operation moves with whatever else the machine runs (other processes' cache traffic, a virtual
machine's stolen cycles counted as ours); the number of instructions a process executes does not. Each side runs
under ``valgrind --tool=callgrind`` twice, with one call of each ``n`` (after the same warm-up), and the
difference of the two totals divided by the difference of the ``n`` is that side's cost of one elicitation:
start-up, imports and warm-up cancel out. The other side runs natively. Python's own interpreter counts
(no JIT), so a change in elicitor's code shows here one for one. Valgrind slows a process about fifty times: a
side takes a minute or two. Both sides run on the event loop ``--loop`` names (default: uvloop if installed, as
elicitor picks it), the one measured under valgrind and the other alike.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
SERVER = HERE / "servers" / "elicitor_server.py"
ANSWER = {"name": "x", "age": 1}


def _valgrind(out: str) -> list[str]:
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--quiet"]


def _total(out: str) -> int:
    text = Path(out).read_text(errors="replace")
    found = re.search(r"^(?:summary|totals):\s*(\d+)", text, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"no totals in {out}")
    return int(found.group(1))


async def drive(server: list[str], n: int, protocol: str) -> None:
    """The client side: warm up, then one call of ``n`` elicitations (what the two runs differ by)."""
    from elicitor import Accepted, Client, ElicitationRequest

    async def handler(request: ElicitationRequest) -> Accepted[dict[str, Any]]:
        return Accepted(ANSWER)

    # A process under valgrind starts and answers fifty times slower: no deadline may end the run.
    slow = {"probe_timeout": 3600.0, "handshake_timeout": None, "request_timeout": None}
    async with Client.stdio(server, elicitation=handler, protocol=protocol, max_rounds=n + 1, **slow) as client:
        await client.call_tool("ask", {"n": 10})
        result = await client.call_tool("ask", {"n": n})
    assert result.text == str(n), result


def count(side: str, n: int, protocol: str, tmp: str) -> int:
    """Instructions the ``side`` process executed for a whole session with one call of ``n``."""
    out = os.path.join(tmp, f"{side}-{n}.out")
    server = [sys.executable, str(SERVER)]
    command = [sys.executable, __file__, "--drive", str(n), "--protocol", protocol, "--"]
    if side == "server":
        # The client gives a server 2 s to exit after closing its stdin, then SIGTERM, then SIGKILL: too short for
        # one under valgrind, which would then write no counts. A shell in between takes the signals; valgrind,
        # in the background with the same stdin, ends at end of input and writes them.
        # (The shell's own stdin is kept on descriptor 3 first: a background command's stdin is /dev/null.)
        command += ["sh", "-c", 'exec 3<&0; "$@" <&3 3<&- & wait', "sh", *_valgrind(out), *server]
    else:
        command = [*_valgrind(out), *command, *server]
    subprocess.run(command, check=True)
    deadline = time.monotonic() + 600
    while True:
        try:
            return _total(out)
        except (OSError, RuntimeError):
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=["a", "e"], default="e")
    parser.add_argument("--n", default="200,1200", help="the two call sizes whose difference is measured")
    parser.add_argument("--side", default="server,client")
    parser.add_argument("--loop", choices=["auto", "uvloop", "asyncio"], default="auto")
    parser.add_argument("--drive", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--protocol", help=argparse.SUPPRESS)
    parser.add_argument("server", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive is not None:
        loop = os.environ.get("ELICITOR_BENCH_STACK", "auto").partition(",")[0]
        anyio.run(drive, args.server, args.drive, args.protocol, backend_options={"use_uvloop": loop == "uvloop"})
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    protocol = "2026-07-28" if args.scenario == "e" else "2025-11-25"
    from elicitor._loop import event_loop

    loop = event_loop(args.loop)
    os.environ["ELICITOR_BENCH_STACK"] = f"{loop},auto"  # the bench server's loop (servers/elicitor_server.py)
    low, high = (int(x) for x in args.n.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        for side in args.side.split(","):
            per = (count(side, high, protocol, tmp) - count(side, low, protocol, tmp)) / (high - low)
            print(f"({args.scenario}) {side} on {loop}: {per:,.0f} instructions per elicitation", flush=True)


if __name__ == "__main__":
    main()
