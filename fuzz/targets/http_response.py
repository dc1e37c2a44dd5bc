"""The client's HTTP/1.1 connection reading a hostile server's response, cut into reads anywhere.

Property: reading a response (:class:`elicitor.client._connection.Connection`, llhttp through httptools) raises nothing
but ``httpx.RemoteProtocolError``; how the bytes are cut into reads never changes whether the response is refused,
nor its status, headers and body; an accepted response has a final status (200-999, never 1xx), a body no longer
than what was sent, and is offered for reuse only when it ended cleanly. RFC 9112 (HTTP/1.1 message syntax).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import anyio
import atheris

with atheris.instrument_imports(include=["elicitor"]):
    import httpx2 as httpx

    from elicitor.client._connection import Connection
    from fuzz.targets._harness import fuzz

ORIGIN = (b"http", b"server.test", 80)


class Reads:
    """A byte stream that hands out prepared reads, then the end of the stream."""

    def __init__(self, reads: list[bytes]) -> None:
        self._reads = [read for read in reads if read]

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._reads:
            raise anyio.EndOfStream
        return self._reads.pop(0)

    async def send(self, item: bytes) -> None:
        pass

    async def aclose(self) -> None:
        pass

    def extra(self, attribute: object, default: object = None) -> object:
        return default


def drive(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine that never waits on anything outside (the reads are all there): no event loop needed."""
    for _ in range(100_000):
        try:
            coroutine.send(None)
        except StopIteration:
            return
    raise AssertionError("reading a response waited on something other than its reads")


Result = tuple[str, int, list[tuple[bytes, bytes]], bytes] | tuple[str, str]


def read(reads: list[bytes], total: int) -> tuple[Result, bool]:
    connection = Connection(Reads(reads), ORIGIN)  # type: ignore[arg-type]
    body: list[bytes] = []

    async def whole() -> None:
        await connection.read_head(None, None, False)
        while True:
            body.extend(connection.chunks)
            connection.chunks = []
            if connection.complete:
                return
            await connection.fill(None, None)

    try:
        drive(whole())
    except httpx.RemoteProtocolError:
        return ("refused", "RemoteProtocolError"), False
    data = b"".join(body)
    assert 200 <= connection.status <= 999, connection.status
    assert len(data) <= total
    if connection.reusable():
        assert connection.complete
    return ("read", connection.status, connection.headers, data), connection.reusable()


def TestOneInput(data: bytes) -> None:
    whole, _ = read([data], len(data))
    cuts = sorted({b % (len(data) + 1) for b in data[:4]})
    pieces = [data[i:j] for i, j in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    cut, _ = read(pieces, len(data))
    bytewise, _ = read([data[i : i + 1] for i in range(len(data))], len(data))
    assert whole == cut == bytewise, (whole, cut, bytewise)


if __name__ == "__main__":
    fuzz(TestOneInput)
