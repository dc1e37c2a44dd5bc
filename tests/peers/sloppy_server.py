"""A hand-written stdio server whose lists and results each hold one bad entry among good ones.

Written without any library, the way a server written in a hurry (or for another era) answers: ``serverInfo``
without ``version`` and with fields of its own, capabilities of unexpected shapes, a ``tools/list`` in two pages
whose second ``nextCursor`` repeats, tools without ``inputSchema`` or with a malformed one, content blocks of a type
nobody defined, ``_meta`` and fields of a newer revision, and an elicitation with keys the spec does not name.
Run: ``python tests/peers/sloppy_server.py [REVISION]`` (the revision it answers ``initialize`` with; default: the
client's).
"""

from __future__ import annotations

import json
import sys
from typing import Any

GOOD = {"type": "object", "properties": {"text": {"type": "string"}}}

PAGE_1 = [
    {"name": "echo", "inputSchema": GOOD, "icons": [{"src": "https://x.test/i.png"}], "_meta": {"ui": "card"}},
    {"name": "bare", "description": "no inputSchema at all"},
    {"name": "broken", "inputSchema": "not a schema"},
    {"name": "annotated", "inputSchema": GOOD, "annotations": "read-only please"},
    42,
    {"inputSchema": GOOD, "description": "a tool without a name", "execution": {"taskSupport": "optional"}},
]
PAGE_2 = [
    {"name": "later", "inputSchema": GOOD, "execution": "sometimes"},
    {"name": ["not", "a", "string"], "inputSchema": GOOD},
]

CONTENT = [
    {"type": "text", "text": "hello"},
    {"type": "hologram", "frames": 3},
    {"type": "image", "mimeType": "image/png"},
    {"type": "text", "text": "bye", "annotations": "loud"},
    "just a string",
]


def result_of(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    if method == "ping":
        return {}
    if method == "tools/list":
        if params.get("cursor") == "page-2":
            return {"tools": PAGE_2, "nextCursor": "page-2"}  # the same cursor again: a loop
        return {"tools": PAGE_1, "nextCursor": "page-2"}
    if method == "tools/call" and params.get("name") == "echo":
        return {
            "content": CONTENT,
            "structuredContent": {"n": 1},
            "isError": False,
            "_meta": {"trace": "abc"},
            "someFieldOfTheFuture": {"x": 1},
        }
    if method == "tools/call" and params.get("name") == "fails":
        return {"content": [{"type": "text", "text": "it failed"}], "isError": True, "_meta": "not an object"}
    if method == "tools/call" and params.get("name") == "empty":  # nil slices, as a Go server encodes them
        return {"content": None, "structuredContent": {"rows": None}}
    if method == "resources/templates/list":
        return {"resourceTemplates": None, "nextCursor": None}
    if method == "prompts/list":
        return {"prompts": [{"name": "greet"}, 7], "nextCursor": 12}
    if method == "resources/list":
        return {"resources": [{"uri": "memo://a", "name": "a"}, "memo://b"]}
    return None


def main() -> None:
    forced = sys.argv[1] if len(sys.argv) > 1 else None
    asked = 0
    for line in sys.stdin:
        message = json.loads(line)
        method, params = message.get("method"), message.get("params") or {}
        if "id" not in message:
            continue
        if method is None:  # an answer to our elicitation: say what came back
            said = [{"type": "text", "text": json.dumps(message)}]
            out = {"jsonrpc": "2.0", "id": asked, "result": {"content": said}}
            print(json.dumps(out), flush=True)
            continue
        if method == "initialize":
            result: dict[str, Any] | None = {
                "protocolVersion": forced or params.get("protocolVersion"),
                "serverInfo": {
                    "name": "sloppy",
                    "title": {"en": "Sloppy"},
                    "description": "written by hand",
                    "icons": [{"src": "https://x.test/i.png"}],
                    "vendor": "nobody",
                },
                "capabilities": {"tools": True, "logging": [], "prompts": {"listChanged": "yes"}, "experimental": 5},
                "instructions": None,
            }
        elif method == "tools/call" and params.get("name") == "logs":
            for level, data, logger in [(5, "first", 7), ("WARNING", "second", "mine"), ("trace", "third", None)]:
                note = {"level": level, "data": data, "logger": logger}
                print(json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": note}), flush=True)
            result = {"content": [{"type": "text", "text": "logged"}]}
        elif method == "tools/call" and params.get("name") == "ask":
            asked = message["id"]
            question = {
                "jsonrpc": "2.0",
                "id": "q1",
                "method": "elicitation/create",
                "params": {
                    "message": "Your name?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"name": {"type": "string", "x-widget": "big"}},
                        "required": ["name"],
                        "x-vendor": True,
                    },
                    "priority": "high",
                    "_meta": {"x": 1},
                },
            }
            print(json.dumps(question), flush=True)
            continue
        else:
            result = result_of(method, params)
        if result is None:
            out = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": f"no {method}"}}
        else:
            out = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
