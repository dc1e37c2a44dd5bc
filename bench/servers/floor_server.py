"""The floor under (dh): uvicorn holding open SSE responses with no MCP at all, for bench/run.py.

Each POST to /mcp is answered as the SSE responses of a pending elicitation are: headers, one priming event, and
then nothing until ``POST /release``, after which each response sends one event and ends. ``GET /probe`` reports
CPU seconds and resident KiB like the other bench servers' ``probe`` tool. The same uvicorn stack as
``elicitor_server.py`` runs by default (httptools, and uvloop when installed).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import anyio
import uvicorn

release = anyio.Event()


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    while (await receive()).get("more_body"):
        pass
    if scope["path"] == "/probe":
        with open("/proc/self/status") as status:
            rss = next(line.split()[1] for line in status if line.startswith("VmRSS:"))
        body = f"{time.process_time()} {rss}".encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": body})
        return
    if scope["path"] == "/release":
        release.set()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"id: 0\nretry: 1000\ndata: \n\n", "more_body": True})
    await release.wait()
    await send({"type": "http.response.body", "body": b'data: {"done":true}\n\n', "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


if __name__ == "__main__":
    from elicitor.server._server import http_stack

    loop, parser = http_stack()
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), http=parser, loop=loop, log_level="warning")
