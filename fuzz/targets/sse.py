"""The client's SSE parser reading a hostile server's event stream, cut into reads anywhere.

Property: :class:`~elicitor.transports._sse.SSEDecoder` raises nothing but ``ValueError`` for a line over its limit;
how the stream is cut into reads never changes the events, the last event id or the retry delay (a CR at the end of
one read and an LF at the start of the next are one line end); ``retry`` is a whole number of milliseconds no
larger than :data:`MAX_RETRY`; an id with a NUL is ignored; :func:`parse_event_id` of any last id raises nothing.
Spec: WHATWG HTML "Server-sent events", 9.2.6 Interpreting an event stream; 2025-11-25 basic/transports (resume).
"""

from __future__ import annotations

import atheris

with atheris.instrument_imports(include=["elicitor"]):
    from elicitor.transports._sse import MAX_RETRY, SSEDecoder, SSEEvent, parse_event_id
    from fuzz.targets._harness import fuzz

MAX_LINE = 4096


def decode(reads: list[bytes]) -> tuple[list[SSEEvent], str | None, int | None, bool]:
    decoder = SSEDecoder(max_line=MAX_LINE)
    events: list[SSEEvent] = []
    try:
        for read in reads:
            events.extend(decoder.feed(read))
    except ValueError:
        return events, decoder.last_event_id, decoder.retry, True
    return events, decoder.last_event_id, decoder.retry, False


def TestOneInput(data: bytes) -> None:
    whole = decode([data])
    cuts = sorted({b % (len(data) + 1) for b in data[:3]})
    pieces = [data[i:j] for i, j in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    cut = decode(pieces)
    bytewise = decode([data[i : i + 1] for i in range(len(data))] + [b""])
    if not (whole[3] or cut[3] or bytewise[3]):  # an over-long line may be caught at different reads
        assert whole == cut == bytewise, (whole, cut, bytewise)
    for events, last_id, retry, _ in (whole, cut, bytewise):
        assert retry is None or 0 <= retry <= MAX_RETRY, retry
        assert last_id is None or "\0" not in last_id
        if last_id is not None:
            parsed = parse_event_id(last_id)
            assert parsed is None or (parsed[0] and parsed[1] >= 0), parsed
        for event in events:
            assert event.data and isinstance(event.event, str)


if __name__ == "__main__":
    fuzz(TestOneInput)
