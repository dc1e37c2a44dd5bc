"""What a handshake-era elicitation costs with Redis: CPU time and Redis commands per elicitation.

    python bench/kept_calls.py [--questions 50] [--calls 6] [--tree DIR]

One replica on a real ``redis-server`` (the bench server, ``bench/servers/elicitor_server.py``, with the state keys
set as a deployment has them), served by uvicorn over loopback HTTP; elicitor's client on 2025-11-25 calls ``ask``
``--calls`` times, each asking ``--questions`` questions, in the same process. Every call carries an idempotency
key (elicitor's client sends one), so each answer is kept in Redis for a retry of the call. Printed: the process's
CPU time per elicitation (``time.process_time``: both sides, which a loaded machine disturbs less than wall time)
and the commands Redis ran per elicitation (``INFO commandstats``, the commands inside scripts counted too, so
``evalsha`` and ``exec`` are the round trips that ran a script or a transaction).

``--tree DIR`` measures another source tree (``git archive <commit> src | tar -x -C DIR``): run both in turns to
compare commits on a loaded machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _measure(redis_url: str, questions: int, calls: int) -> tuple[float, dict[str, float]]:
    import anyio
    import uvicorn
    from redis.asyncio import Redis

    from elicitor import Accepted, Client, ElicitationRequest

    sys.path.insert(0, str(ROOT))
    from bench.servers.elicitor_server import server

    server.share(redis_url)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    serving = uvicorn.Server(uvicorn.Config(server.http_app(), log_level="warning", lifespan="on"))
    admin = Redis.from_url(redis_url)

    async def person(request: ElicitationRequest) -> Accepted[dict[str, object]]:
        return Accepted({"name": "Ada", "age": 36})

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serving.serve(sockets=[sock]))
        while not serving.started:
            await anyio.sleep(0.01)
        async with Client.http(url, elicitation=person, protocol="2025-11-25") as client:
            await client.call_tool("ask", {"n": 2})  # warm: connections, scripts loaded
            await admin.config_resetstat()
            started = time.process_time()
            for _ in range(calls):
                await client.call_tool("ask", {"n": questions})
            cpu = time.process_time() - started
            stats = await admin.info("commandstats")
        serving.should_exit = True
    await admin.aclose()
    total = questions * calls
    commands = {
        name.removeprefix("cmdstat_"): entry["calls"] / total
        for name, entry in stats.items()
        if not name.startswith("cmdstat_config")
    }
    return cpu / total, commands


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--tree", type=Path, help="a source tree (its src/) to measure instead of this one")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.child:  # in a process of its own, with the tree asked for first on the path
        env = dict(os.environ)
        if args.tree is not None:
            env["PYTHONPATH"] = str(args.tree.resolve() / "src")
        raise SystemExit(subprocess.call([sys.executable, __file__, "--child", *sys.argv[1:]], env=env))
    import anyio

    from elicitor.server import generate_key

    redis_server = shutil.which("redis-server")
    if redis_server is None:
        raise SystemExit("needs redis-server (make test installs it)")
    os.environ["ELICITOR_STATE_KEYS"] = generate_key()
    port = _free_port()
    with tempfile.TemporaryDirectory() as folder:
        command = [redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", folder]
        redis = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            cpu, commands = anyio.run(_measure, f"redis://127.0.0.1:{port}/0", args.questions, args.calls)
        finally:
            redis.terminate()
            redis.wait()
    print(f"CPU per elicitation: {cpu * 1000:.2f} ms (client and server)")
    listed = ", ".join(f"{name} {count:.2f}" for name, count in sorted(commands.items()) if count >= 0.05)
    print(f"Redis commands per elicitation: {sum(commands.values()):.2f} ({listed})")


if __name__ == "__main__":
    main()
