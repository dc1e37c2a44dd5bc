"""The reference limit of performance.md: a bare asyncio newline-delimited JSON echo over a pipe, no MCP.

Each line read (an elicitation's answer, as a client sends it) is decoded and answered with the next question, an
``elicitation/create`` request of the workload's shape, encoded: the least any stdio server does per elicitation.
msgspec does the JSON, as in elicitor (orjson, which performance.md names, is as fast and not installed here). A
``probe`` line is answered with the process's CPU seconds and RSS in KiB, like the other bench servers' probe tool.
"""

from __future__ import annotations

import asyncio
import sys
import time

import msgspec

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name"],
}
encode, decode = msgspec.json.encode, msgspec.json.decode


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    asked = 0
    while line := await reader.readline():
        message = decode(line)
        if message.get("method") == "probe":
            with open("/proc/self/status") as status:
                rss = next(line.split()[1] for line in status if line.startswith("VmRSS:"))
            reply: dict[str, object] = {"jsonrpc": "2.0", "id": message["id"], "result": f"{time.process_time()} {rss}"}
        else:
            asked += 1
            params = {"mode": "form", "message": "Please provide your name and age", "requestedSchema": SCHEMA}
            reply = {"jsonrpc": "2.0", "id": asked, "method": "elicitation/create", "params": params}
        writer.write(encode(reply) + b"\n")
        await writer.drain()


if __name__ == "__main__":
    asyncio.run(main())
