"""Write the seed corpus (``fuzz/corpus/<target>/``) from real messages: ``python -m fuzz.make_corpus [SPEC_DIR]``.

``SPEC_DIR`` is a checkout of the specification's revisions (``<revision>/examples/<Definition>/*.json``, the
examples the spec ships with its schema); without it only the built-in conversations are written. Seeds are small
and named after what they are, so a reader of the corpus sees what each target starts from.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from fuzz.targets import TARGETS
from fuzz.targets._harness import NAME_FORM, encode
from fuzz.targets.request_state import BINDING, sealer

OUT = Path(__file__).resolve().parent / "corpus"
V = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
META = {V: "2026-07-28", CAPS: {"elicitation": {"form": {}, "url": {}}}}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {"form": {}, "url": {}}},
        "clientInfo": {"name": "seed", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call(request_id: Any, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, **extra},
    }


def lines(*messages: object) -> bytes:
    return b"\n".join(encode(m) for m in messages) + b"\n"


def examples(spec: Path | None) -> dict[str, list[Any]]:
    """The spec's examples by definition name (every revision that ships them)."""
    found: dict[str, list[Any]] = {}
    if spec is None:
        return found
    for path in sorted(spec.glob("*/examples/*/*.json")):
        found.setdefault(path.parent.name, []).append(json.loads(path.read_text()))
    return found


def seeds(spec: Path | None) -> dict[str, dict[str, bytes]]:
    ex = examples(spec)
    messages = [m for name, ms in sorted(ex.items()) for m in ms if isinstance(m, dict) and "jsonrpc" in m]
    handshake = [
        INIT,
        INITIALIZED,
        call(2, "ask", {}),
        {"jsonrpc": "2.0", "id": 1, "result": {"action": "accept", "content": {"name": "Ada"}}},
    ]
    stateless = call("m1", "ask", {"greeting": "Hi"}, _meta=META)
    retry = call(
        "m2",
        "ask",
        {},
        _meta=META,
        inputResponses={"name": {"action": "accept", "content": {"name": "Ada", "age": 3}}},
        requestState="v1.AAAA",
    )
    out: dict[str, dict[str, bytes]] = {t: {} for t in TARGETS}
    for i, message in enumerate(messages):
        out["jsonrpc"][f"spec-{i:03d}"] = encode(message) + b"\n"
    out["jsonrpc"]["handshake"] = lines(*handshake)
    out["jsonrpc"]["cancel"] = lines(
        call(7, "ask", {}), {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    )
    out["session"]["handshake-ask-answer"] = lines(*handshake)
    out["session"]["handshake-url"] = lines(INIT, INITIALIZED, call(3, "visit", {}))
    out["session"]["stateless-ask"] = lines(stateless)
    out["session"]["stateless-retry"] = lines(retry)
    out["session"]["typed-arguments"] = lines(call("a", "add", {"a": 1, "b": 2.5, "tags": ["x"]}, _meta=META))
    out["session"]["cancel-in-flight"] = lines(
        INIT,
        INITIALIZED,
        call(9, "ask", {}),
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}},
    )
    for i, message in enumerate(m for m in messages if "method" in m):
        out["session"][f"spec-{i:03d}"] = lines(message)
    head = (
        "POST /mcp\nhost: localhost:8000\ncontent-type: application/json\naccept: application/json, text/event-stream\n"
    )
    out["http_app"]["initialize"] = (head + "\n").encode() + encode(INIT)
    out["http_app"]["session-call"] = (
        head + "mcp-session-id: $SESSION\nmcp-protocol-version: 2025-11-25\n\n"
    ).encode() + encode(call(5, "ask", {}))
    out["http_app"]["session-answer"] = (
        head + "mcp-session-id: $SESSION\nmcp-protocol-version: 2025-11-25\n\n"
    ).encode() + encode({"jsonrpc": "2.0", "id": 0, "result": {"action": "decline"}})
    out["http_app"]["stateless-call"] = (
        head + "mcp-protocol-version: 2026-07-28\nmcp-method: tools/call\nmcp-name: ask\n\n"
    ).encode() + encode(stateless)
    out["http_app"]["get-resume"] = (
        b"GET /mcp\nhost: localhost\naccept: text/event-stream\nmcp-session-id: $SESSION\nlast-event-id: abc.3\n\n"
    )
    out["http_app"]["delete"] = b"DELETE /mcp\nhost: localhost\nmcp-session-id: $SESSION\n\n"
    out["http_app"]["origin"] = (head + "origin: http://localhost:3000\n\n").encode() + encode(INIT)
    out["http_app"]["health"] = b"GET /healthz\nhost: localhost\n\n"
    out["sse"]["priming-then-message"] = (
        b"id: s1.0\nretry: 1000\ndata: \n\nid: s1.1\nevent: message\ndata: " + encode(call(1, "ask", {})) + b"\n\n"
    )
    out["sse"]["crlf-multiline"] = b': comment\r\ndata: {"a":\r\ndata: 1}\r\n\r\nretry: 12\r\n'
    out["sse"]["cr-only"] = b"id: x.9\rdata: y\r\r"
    for i, message in enumerate(messages[:20]):
        out["sse"][f"spec-{i:03d}"] = b"id: k." + str(i).encode() + b"\ndata: " + encode(message) + b"\n\n"
    init_result = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "h", "version": "1"},
    }
    asked = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "elicitation/create",
        "params": {"message": "Name?", "requestedSchema": NAME_FORM},
    }
    answer_json = b'{"jsonrpc":"2.0","id":$ID,"result":' + encode(init_result) + b"}"
    out["client_http"]["handshake-sse-resume"] = b"\n===\n".join(
        [
            b"POST initialize\n200\ncontent-type: application/json\nmcp-session-id: s-1\n\n" + answer_json,
            b"POST tools/call\n200\ncontent-type: text/event-stream\n\nid: a.0\nretry: 10\ndata: \n\nid: a.1\ndata: "
            + encode(asked)
            + b"\n\n",
            b"POST\n202\n\n",
            b"GET\n200\ncontent-type: text/event-stream\n\nid: a.2\ndata: "
            + encode({"jsonrpc": "2.0", "id": 2, "result": {"content": []}})
            + b"\n\n",
        ]
    )
    stateless_round = {
        "resultType": "input_required",
        "inputRequests": {
            "name": {
                "method": "elicitation/create",
                "params": {"mode": "form", "message": "Name?", "requestedSchema": NAME_FORM},
            }
        },
        "requestState": "e1.x",
    }
    out["client_http"]["stateless-round"] = b"\n===\n".join(
        [
            b'POST server/discover\n200\ncontent-type: application/json\n\n{"jsonrpc":"2.0","id":$ID,"result":'
            + encode(
                {
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}},
                    "serverInfo": init_result["serverInfo"],
                }
            )
            + b"}",
            b'POST tools/call\n200\ncontent-type: application/json\n\n{"jsonrpc":"2.0","id":$ID,"result":'
            + encode(stateless_round)
            + b"}",
            b'POST tools/call\n200\ncontent-type: application/json\n\n{"jsonrpc":"2.0","id":$ID,"result":'
            + encode({"content": [{"type": "text", "text": "ok"}]})
            + b"}",
        ]
    )
    out["schema"]["name-age"] = encode(NAME_FORM) + b"\n" + encode({"name": "Ada", "age": 36})
    for name in sorted(ex):
        if name.endswith("Schema") or name.startswith("ElicitRequest"):
            for i, value in enumerate(ex[name]):
                schema = (
                    value.get("requestedSchema")
                    if "requestedSchema" in value
                    else {"type": "object", "properties": {"f": value}}
                )
                out["schema"][f"{name}-{i}"] = encode(schema) + b"\n{}"
    for i, value in enumerate(ex.get("ElicitResult", [])):
        out["schema"][f"ElicitResult-{i}"] = encode(NAME_FORM) + b"\n" + encode(value.get("content", {}))
    out["request_state"]["sealed"] = sealer.seal(
        {"answers": {"v": [{"action": "accept"}], "k": {"name": [0, 2]}}}, BINDING
    ).encode()
    out["request_state"]["packed-book"] = encode(
        {"v": [{"action": "accept", "content": {"n": 1}}], "k": {"q": [0, 1, -1, 2, 0, 1]}}
    )
    for i, url in enumerate(
        [
            "https://example.com/sign-in?x=1",
            "http://localhost:8000/p",
            "https://user:pw@evil.example/",
            "http://[::1]:80/",
            "https://xn--80ak6aa92e.com/",
            "javascript:alert(1)",
        ]
    ):
        out["urls"][f"url-{i}"] = f"{url}\nExample server".encode()
    seeds = [
        'Bearer resource_metadata="https://s.example/.well-known/oauth-protected-resource/mcp", scope="a b"\n',
        'Basic realm="x", Bearer error="insufficient_scope", scope="mcp:admin", error_description="more"\nBearer',
        "Bearer good\nstate-1",
        "http://127.0.0.1:5/callback?code=c&state=state-1&iss=https%3A%2F%2Fas\nstate-1",
        "http://127.0.0.1:5/callback?error=access_denied&state=s\ns",
        'Bearer scope="q\\"uoted", junk ,, ===\n',
    ]
    for i, seed in enumerate(seeds):
        out["auth"][f"auth-{i}"] = seed.encode()
    out["meta"]["meta"] = encode({"_meta": META, "name": "ask"})
    out["meta"]["old-version"] = encode({"_meta": {V: "2024-11-05", CAPS: {}}})
    out["meta"]["input-responses"] = encode(
        {"_meta": META, "inputResponses": {"name": {"action": "accept", "content": {"name": "x"}}, "r": {"roots": []}}}
    )
    for name in ("InputResponses", "InputRequests", "CallToolRequestParams"):
        for i, value in enumerate(ex.get(name, [])):
            out["meta"][f"{name}-{i}"] = encode(value)
    body = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    out["http_response"] = {
        "accepted": b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
        "json": b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 36\r\n\r\n" + body,
        "sse-chunked": b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        b'13\r\nid: 1\ndata: {"a":1}\n\n\r\n0\r\n\r\n',
        "close-delimited": b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: x\n\n",
        "early-hints": b"HTTP/1.1 103 Early Hints\r\nlink: </s>\r\n\r\n"
        b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\nno",
        "trailing": b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nokHTTP/1.1 200",
    }
    return out


def main() -> None:
    spec = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    for target, files in seeds(spec).items():
        directory = OUT / target
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (directory / name).write_bytes(data)
        print(f"{target}: {len(files)} seeds ({hashlib.sha256(b''.join(files.values())).hexdigest()[:8]})")


if __name__ == "__main__":
    main()
