"""The stdio line framer and the JSON-RPC classifier, as one peer's byte stream reaches them.

Property: :class:`~elicitor.protocol.LineFramer` and :meth:`Connection.receive` raise nothing, whatever the bytes
and however they are cut into reads; every line becomes exactly one event; an :class:`InvalidMessage`'s reply is
a JSON-RPC error with -32700 or -32600 (or -32603 only for "too many in flight", which needs 65,536 requests), a
line over the limit is reported as :class:`Oversized`, and a request is answerable exactly once.
Spec: basic/transports (stdio: newline-delimited, no embedded newlines), basic/index (JSON-RPC messages).
"""

from __future__ import annotations

import atheris

with atheris.instrument_imports(include=["elicitor"]):
    from elicitor.protocol import (
        Connection,
        InvalidMessage,
        LineFramer,
        Oversized,
        RequestReceived,
        decode_json,
    )
    from elicitor.protocol._framing import HEAD, TAIL
    from elicitor.types import INVALID_REQUEST, PARSE_ERROR
    from fuzz.targets._harness import fuzz

MAX_LINE = 1024


def TestOneInput(data: bytes) -> None:
    """Cut ``data`` into reads at the positions its first bytes choose, frame it, classify every line."""
    cuts = sorted({b % (len(data) + 1) for b in data[:4]})
    reads = [data[i:j] for i, j in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    framer = LineFramer(MAX_LINE)
    items: list[bytes | Oversized] = []
    for read in reads:
        items.extend(framer.feed(read))
    last = framer.close()
    if last is not None:
        items.append(last)
    connection = Connection()
    for item in items:
        if isinstance(item, Oversized):
            assert item.size > MAX_LINE and len(item.head) <= HEAD and len(item.tail) <= TAIL, item
            event = connection.receive_oversized(item)  # what its first and last bytes say it was
            if isinstance(event, InvalidMessage) and event.reply is not None:
                assert decode_json(event.reply)["error"]["code"] == INVALID_REQUEST
            continue
        assert len(item) <= MAX_LINE and b"\n" not in item, item
        event = connection.receive(item)
        if isinstance(event, InvalidMessage):
            if event.reply is not None:
                reply = decode_json(event.reply)
                assert reply["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST), reply
        elif isinstance(event, RequestReceived):
            assert connection.is_answering(event.id)
            assert connection.send_result(event.id, {}) is not None
            assert connection.send_result(event.id, {}) is None  # answered once: the second is refused


if __name__ == "__main__":
    fuzz(TestOneInput)
