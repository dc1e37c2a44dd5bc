"""The SSE codec: spec line handling, and any split of the byte stream decodes the same."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitor.transports._sse import SSEDecoder, SSEEvent, encode_event, priming_event


def test_fields_comments_ids_retry_and_priming() -> None:
    decoder = SSEDecoder()
    stream = (
        priming_event("s1-0", retry=250)
        + b": keep-alive\r\n"
        + b'event: message\r\ndata: {"a":1}\r\nid: s1-1\r\n\r\n'
        + b"data:no-space\ndata: second line\n\n"
        + b"id: bad\x00id\ndata: x\n\n"
    )
    events = decoder.feed(stream)
    assert events == [
        SSEEvent('{"a":1}', "message", "s1-1"),
        SSEEvent("no-space\nsecond line", "message", "s1-1"),
        SSEEvent("x", "message", "s1-1"),
    ]
    assert decoder.retry == 250
    assert decoder.last_event_id == "s1-1"


def test_priming_event_moves_the_last_id_without_dispatching() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(priming_event("s2-0")) == []
    assert decoder.last_event_id == "s2-0"


def test_an_event_of_many_short_data_lines_is_bounded_like_one_long_line() -> None:
    """Every line is short, so the line limit alone would let one event's data grow without end."""
    decoder = SSEDecoder(max_line=1000)
    assert decoder.feed(b"data: " + b"x" * 900 + b"\n\n") == [SSEEvent("x" * 900)]
    for _ in range(9):
        assert decoder.feed(b"data: " + b"y" * 100 + b"\n") == []
    with pytest.raises(ValueError, match="more than 1000 bytes of data"):
        decoder.feed(b"data: " + b"y" * 100 + b"\n")


messages = st.lists(st.text(st.characters(blacklist_characters="\r\n", codec="utf-8"), min_size=1), max_size=8)


@given(messages, st.data(), st.sampled_from([b"\n", b"\r\n", b"\r"]))
def test_any_split_decodes_the_same(items: list[str], data: st.DataObject, newline: bytes) -> None:
    stream = b"".join(
        encode_event(item.encode(), event_id=f"e{i}").replace(b"\n", newline) for i, item in enumerate(items)
    )
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        events.extend(decoder.feed(stream[start:cut]))
        start = cut
    expected = [SSEEvent(item, "message", f"e{i}") for i, item in enumerate(items) if item]
    assert events == expected
