"""A server of revision 2025-03-26 that sends JSON-RPC batches, as that revision allowed (and said clients must
accept): written by hand, line by line, since no SDK we run sends them.

``python batch_server.py`` serves stdio; ``--port N`` serves Streamable HTTP at ``/mcp`` (uvicorn), answering a
call on an SSE stream whose one event is a batch. Tools: ``report`` answers in a batch together with its progress
and a log message; ``ping_twice`` (stdio) sends the client a batch of two pings and answers once both came back.

``--discover silent`` (stdio) never answers ``server/discover``; ``--discover unaddressed`` answers it with an error
whose id is null, which names no request: handshake-era servers that do either exist, and a client waits on them
for ever unless its probe has a limit.
"""

import json
import sys
from typing import Any

REVISION = "2025-03-26"
TOOLS = [
    {"name": "report", "inputSchema": {"type": "object"}},
    {"name": "ping_twice", "inputSchema": {"type": "object"}},
]


def reply(message: dict[str, Any]) -> list[dict[str, Any]] | dict[str, Any] | None:
    """What the server says to one message: a message, a batch, or nothing."""
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        result = {"protocolVersion": REVISION, "capabilities": {"tools": {}, "logging": {}},
                  "serverInfo": {"name": "batch-peer", "version": "1.0"}}  # fmt: skip
        return {"jsonrpc": "2.0", "id": request_id, "result": result}
    if method == "tools/list":
        return {"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}}
    if method == "tools/call" and message["params"]["name"] == "report":
        token = message["params"].get("_meta", {}).get("progressToken", "none")
        return [
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1}},
            {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "reported"}},
            {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "the report"}]}},
        ]
    if request_id is not None and method is not None:
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no {method}"}}
    return None


def stdio(discover: str | None = None) -> None:
    calls: dict[str, Any] = {}  # ping_twice's call id, while its pings are out
    answered: set[str] = set()
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("method") == "server/discover" and discover is not None:
            if discover == "unaddressed":
                error = {"code": -32600, "message": "Invalid request"}
                print(json.dumps({"jsonrpc": "2.0", "id": None, "error": error}), flush=True)
            continue
        if message.get("method") == "tools/call" and message["params"]["name"] == "ping_twice":
            calls["call"] = message["id"]
            batch = [{"jsonrpc": "2.0", "id": f"p{n}", "method": "ping"} for n in (1, 2)]
            print(json.dumps(batch), flush=True)
            continue
        if message.get("id") in ("p1", "p2") and "result" in message:
            answered.add(message["id"])
            if answered == {"p1", "p2"}:
                result = {"content": [{"type": "text", "text": "pinged twice"}]}
                print(json.dumps({"jsonrpc": "2.0", "id": calls.pop("call"), "result": result}), flush=True)
            continue
        said = reply(message)
        if said is not None:
            print(json.dumps(said), flush=True)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Streamable HTTP, one session: JSON for everything but a tool call, whose SSE stream carries one batch."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        event = await receive()
        body += event.get("body", b"")
        if not event.get("more_body"):
            break
    if scope["method"] != "POST":
        await send({"type": "http.response.start", "status": 405, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    message = json.loads(body)
    said = reply(message)
    if said is None:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    headers = [(b"mcp-session-id", b"batch-session")]
    if isinstance(said, list):
        data = f"event: message\ndata: {json.dumps(said)}\n\n".encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*headers, (b"content-type", b"text/event-stream")]})  # fmt: skip
        await send({"type": "http.response.body", "body": data})
        return
    status = 200 if "result" in said else 400
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-type", b"application/json")]})  # fmt: skip
    await send({"type": "http.response.body", "body": json.dumps(said).encode()})


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--port":
        import uvicorn

        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    elif len(sys.argv) == 3 and sys.argv[1] == "--discover":
        stdio(sys.argv[2])
    else:
        stdio()
