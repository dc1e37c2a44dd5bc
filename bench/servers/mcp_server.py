"""The benchmark workload served by the official MCP Python SDK (PyPI ``mcp``).

Handshake revisions use its typed ``ctx.elicit(message, PydanticModel)``. Its ``ctx.elicit`` has no back channel on
2026-07-28, so for the multi-round-trip scenario the tool drives the rounds itself through ``ctx.input_responses``
and ``ctx.request_state`` (a plain JSON counter, no sealing: the cheapest way that SDK offers).
"""

from __future__ import annotations

import json
import time

from mcp.server.elicitation import AcceptedElicitation
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult
from pydantic import BaseModel

app = MCPServer("bench-mcp")
MESSAGE = "Please provide your name and age"


class Person(BaseModel):
    name: str
    age: int | None = None


SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name"],
}


@app.tool()
async def ask(n: int, ctx: Context) -> int:
    accepted = 0
    for _ in range(n):
        if isinstance(await ctx.elicit(MESSAGE, Person), AcceptedElicitation):
            accepted += 1
    return accepted


@app.tool()
async def ask_rounds(n: int, ctx: Context) -> int | InputRequiredResult:
    state = json.loads(ctx.request_state) if ctx.request_state else {"i": 0, "accepted": 0}
    answer = (ctx.input_responses or {}).get("q")
    if answer is not None and state["i"] < n:
        if answer.action == "accept":
            Person.model_validate(answer.content)
            state["accepted"] += 1
        state["i"] += 1
    if state["i"] >= n:
        return int(state["accepted"])
    request = ElicitRequest(params=ElicitRequestFormParams(message=MESSAGE, requested_schema=SCHEMA))
    return InputRequiredResult(input_requests={"q": request}, request_state=json.dumps(state))


@app.tool()
async def probe() -> str:
    with open("/proc/self/status") as status:
        rss = next(line.split()[1] for line in status if line.startswith("VmRSS:"))
    return f"{time.process_time()} {rss}"


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--port":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run("stdio")
