"""The Streamable HTTP app driven through raw ASGI calls: any method, path, headers and body.

The input reads like an HTTP/1.1 request without the version: ``METHOD PATH``, header lines ``name: value``, a
blank line, the body. ``$SESSION`` in a header value stands for a live handshake-era session (created when the
target starts, again after the input ended it), so the fuzzer reaches the paths behind a valid session id.
Property: the app never raises; if it answers, the status is one the spec's checks give (400 parse or invalid,
403 origin, 404 unknown session or stream, 405, 406, 409, 413, 415, 421, 503 for an overloaded or unready
replica, 200/202 otherwise), an error body is a JSON-RPC error with a peer's code (-32603 only with 503),
nothing logs a caught exception; and afterwards the app still serves a fresh client.
Spec: 2025-11-25 and 2026-07-28 basic/transports (Streamable HTTP), basic/security_best_practices (Origin).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import atheris

with atheris.instrument_imports(include=["elicitor"]):
    import anyio

    from elicitor.server.http import HttpApp
    from fuzz.targets._harness import PEER_ERROR_CODES, build_server, check_no_traceback, encode, fuzz, keep, portal

ALLOWED_STATUS = frozenset({200, 202, 400, 403, 404, 405, 406, 409, 413, 415, 421, 503})
MAX_BODY = 1 << 16
INITIALIZE = encode(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}, "url": {}}},
            "clientInfo": {"name": "fuzz", "version": "1"},
        },
    }
)
JSON_HEADERS = [
    (b"host", b"localhost:8000"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
]


class Exchange:
    """One request's ASGI conversation: its body once, then a client that leaves; the response as it came."""

    def __init__(self, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode("utf-8", "surrogateescape"),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "server": ("localhost", 8000),
            "client": ("127.0.0.1", 50000),
        }
        half = len(body) // 2
        self._chunks = [body[:half], body[half:]] if half else [body]
        self.status: int | None = None
        self.headers: dict[bytes, bytes] = {}
        self.body = b""
        self.ended = False

    async def receive(self) -> dict[str, Any]:
        if self._chunks:
            chunk = self._chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(self._chunks)}
        await anyio.sleep(0.02)  # long enough for a JSON answer; an event stream is then left by its client
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        assert not self.ended, f"the app sent {message['type']} after the response ended"
        if message["type"] == "http.response.start":
            assert self.status is None, "the app started two responses"
            self.status = message["status"]
            self.headers = {k.lower(): v for k, v in message.get("headers", [])}
        elif message["type"] == "http.response.body":
            assert self.status is not None, "the app sent a body before starting the response"
            self.body += message.get("body", b"")
            self.ended = not message.get("more_body", False)

    async def run(self, app: HttpApp) -> Exchange:
        with anyio.move_on_after(20):
            await app(self.scope, self.receive, self.send)
        return self


def parse(data: bytes) -> tuple[str, str, list[tuple[bytes, bytes]], bytes]:
    """Method, path, headers and body from the input's HTTP-like text (a missing part takes a neutral default)."""
    head, _, body = data.partition(b"\n\n")
    first, *lines = head.split(b"\n")
    method, _, path = first.decode("latin-1").partition(" ")
    headers = []
    for line in lines:
        name, colon, value = line.partition(b":")
        if colon:
            headers.append((name.strip().lower(), value.strip()))
    return method or "POST", path or "/mcp", headers, body


class Target:
    """The app, running in its lifespan for the whole campaign, and a live session the input may name."""

    def __init__(self) -> None:
        self.app = HttpApp(build_server(), max_body=MAX_BODY, session_idle_timeout=5.0)
        self.session = b""

    async def open_session(self) -> bytes:
        done = await Exchange("POST", "/mcp", JSON_HEADERS, INITIALIZE).run(self.app)
        assert done.status == 200 and done.headers.get(b"mcp-session-id"), (done.status, done.body)
        session = done.headers[b"mcp-session-id"]
        notified = [*JSON_HEADERS, (b"mcp-session-id", session), (b"mcp-protocol-version", b"2025-11-25")]
        initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        assert (await Exchange("POST", "/mcp", notified, initialized).run(self.app)).status == 202
        return session

    async def one(self, data: bytes) -> None:
        if not self.session:
            self.session = await self.open_session()
        method, path, headers, body = parse(data)
        headers = [(name, value.replace(b"$SESSION", self.session)) for name, value in headers]
        done = await Exchange(method, path, headers, body).run(self.app)
        if done.status is not None:
            check_response(done)
        if method == "DELETE":
            self.session = b""  # it may have ended the live session: start another for the next input
        probe = await Exchange("POST", "/mcp", JSON_HEADERS, INITIALIZE).run(self.app)
        assert probe.status == 200 and b'"result"' in probe.body, ("a fresh client is refused", probe.status)
        check_no_traceback()


def check_response(done: Exchange) -> None:
    assert done.status in ALLOWED_STATUS, f"HTTP {done.status}: {done.body[:300]!r}"
    if done.status >= 400 and done.body:
        assert done.headers.get(b"content-type") == b"application/json", done.headers
        error = decode_object(done.body).get("error")
        assert isinstance(error, dict), done.body[:300]
        allowed = PEER_ERROR_CODES | ({-32603} if done.status == 503 else set())
        assert error.get("code") in allowed, f"HTTP {done.status} with {done.body[:300]!r}"


def decode_object(body: bytes) -> dict[str, Any]:
    from elicitor.protocol import decode_json

    value = decode_json(body)
    assert isinstance(value, dict), body[:300]
    return value


_target: Target | None = None
_portal: Any = None


def TestOneInput(data: bytes) -> None:
    global _target, _portal
    if _portal is None:
        _portal = keep(portal())
        _target = Target()
        keep(_portal.wrap_async_context_manager(_target.app.lifespan()))
    assert _target is not None
    _portal.call(_target.one, data)


if __name__ == "__main__":
    fuzz(TestOneInput)
