"""The client over Streamable HTTP against a hostile server: any status, headers and body, JSON or event stream.

The input is the server's side: records separated by a line ``===``, each ``SELECTOR`` (``POST initialize``,
``POST tools/call``, ``GET``, ``DELETE`` or ``*``), a status line, header lines, a blank line and the body, in
which ``$ID`` stands for the JSON-RPC id of the request being answered. Each HTTP request the client makes takes
the first unused record that matches it (else: 405 for GET, 202 for a notification, 500 for a request).
The client connects and calls a tool that asks a question, answered by a scripted person who declines.
Property: whatever the server sends, the client raises nothing but its own typed errors (:class:`ElicitorError`:
a JSON-RPC error, a closed connection, a protocol error; ``TimeoutError`` for a server that never answers)
and ends — time is virtual (trio's ``MockClock``), so
a server that stalls, or asks for a retry delay of an hour, costs nothing.
Spec: 2025-11-25 and 2026-07-28 basic/transports (Streamable HTTP), WHATWG "Server-sent events".
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import atheris

with atheris.instrument_imports(include=["elicitor"]):
    import anyio
    import httpx2 as httpx
    import msgspec
    from trio.testing import MockClock

    from elicitor import Client, ElicitorError, ScriptedHandler
    from elicitor.client._http import HttpClientTransport
    from elicitor.protocol import decode_json
    from fuzz.targets._harness import fuzz

URL = "http://hostile.test/mcp"


class Script:
    """The server's records, matched against the client's requests."""

    def __init__(self, data: bytes) -> None:
        self.records: list[tuple[str, int, list[tuple[bytes, bytes]], bytes]] = []
        for record in data.split(b"\n===\n")[:16]:
            selector, _, rest = record.partition(b"\n")
            status_line, _, rest = rest.partition(b"\n")
            head, _, body = rest.partition(b"\n\n")
            status = int(status_line) if status_line.strip().isdigit() and len(status_line.strip()) == 3 else 200
            headers = []
            for line in head.split(b"\n"):
                name, colon, value = line.partition(b":")
                if colon and name.strip() and b"\r" not in line:
                    headers.append((name.strip().lower(), value.strip()))
            self.records.append((selector.decode("latin-1").strip(), max(status, 100), headers, body))

    def take(self, selector: str) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
        for i, (wanted, status, headers, body) in enumerate(self.records):
            if wanted in (selector, selector.split(" ")[0], "*"):
                del self.records[i]
                return status, headers, body
        return None

    async def handle(self, request: httpx.Request) -> httpx.Response:
        rpc_method, rpc_id = "", b"null"
        if request.method == "POST":
            sent = decode_json(request.content)
            rpc_method = str(sent.get("method", "")) if isinstance(sent, dict) else ""
            rpc_id = msgspec.json.encode(sent.get("id")) if isinstance(sent, dict) else b"null"
        found = self.take(f"{request.method} {rpc_method}".strip())
        if found is None:
            if request.method == "GET":
                return httpx.Response(405)
            if request.method == "DELETE" or b'"id"' not in request.content:
                return httpx.Response(202)
            return httpx.Response(500)
        status, headers, body = found
        body = body.replace(b"$ID", rpc_id)
        half = len(body) // 2

        async def chunks() -> AsyncIterator[bytes]:
            yield body[:half]
            yield body[half:]

        try:
            return httpx.Response(status, headers=headers, content=chunks())
        except (ValueError, TypeError):  # a header httpx itself refuses to build: the server sends nothing usable
            return httpx.Response(502)


async def converse(data: bytes) -> None:
    script = Script(data)
    http = httpx.AsyncClient(transport=httpx.MockTransport(script.handle))
    client = Client(
        lambda: HttpClientTransport.connect(URL, http=http),
        elicitation=ScriptedHandler(otherwise="decline"),
    )
    try:
        async with http, client:
            await client.call_tool("ask", {})
    except (ElicitorError, TimeoutError):  # TimeoutError: no answer within handshake_timeout/request_timeout
        pass


def TestOneInput(data: bytes) -> None:
    anyio.run(converse, data, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)})


if __name__ == "__main__":
    fuzz(TestOneInput)
