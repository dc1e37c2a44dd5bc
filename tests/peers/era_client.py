"""A client built with an old release of the official Python SDK (PyPI ``mcp`` 1.6.0 to 1.24.0), run in that
release's environment under ``.cache/peers/`` against elicitor's server (``tests/test_eras.py``).

Usage: ``python era_client.py stdio COMMAND...``, ``python era_client.py http URL`` (Streamable HTTP, 1.8 and later)
or ``python era_client.py sse URL`` (the HTTP+SSE transport of 2024-11-05). It lists the tools, calls
``test_elicitation`` (answering with a fixed form when the release can: 1.10 and later) and ``test_simple_text``,
and prints one JSON object: the revision the server chose, the tool names, and each call's error flag and text.
"""

import json
import sys
from contextlib import AsyncExitStack
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client


async def answer(context: Any, params: Any) -> Any:
    return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})


async def main() -> None:
    kind, *target = sys.argv[1:]
    async with AsyncExitStack() as stack:
        if kind == "stdio":
            streams = await stack.enter_async_context(
                stdio_client(StdioServerParameters(command=target[0], args=target[1:]))
            )
        elif kind == "sse":
            streams = await stack.enter_async_context(sse_client(target[0]))
        else:
            from mcp.client.streamable_http import streamablehttp_client

            streams = await stack.enter_async_context(streamablehttp_client(target[0]))
        read, write = streams[0], streams[1]
        options: dict[str, Any] = {}
        if hasattr(types, "ElicitResult"):  # elicitation came with 1.10 (2025-06-18)
            options["elicitation_callback"] = answer
        session = await stack.enter_async_context(ClientSession(read, write, **options))
        initialized = await session.initialize()
        tools = await session.list_tools()
        calls = {}
        for name, arguments in (("test_elicitation", {"message": "Who are you?"}), ("test_simple_text", {})):
            with anyio.fail_after(60):
                result = await session.call_tool(name, arguments)
            text = " ".join(getattr(block, "text", "") for block in result.content)
            calls[name] = {"is_error": bool(result.isError), "text": text}
        print(json.dumps({
            "protocol": initialized.protocolVersion,
            "tools": sorted(tool.name for tool in tools.tools),
            "calls": calls,
        }), flush=True)  # fmt: skip


if __name__ == "__main__":
    anyio.run(main)
