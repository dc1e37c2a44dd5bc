"""The sans-I/O core, without an event loop: framing, correlation, malformed input, lifecycle."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitor import JSONRPCError, LocalProtocolError, ProtocolError, RemoteProtocolError
from elicitor.protocol import (
    ClientCapabilities,
    Connection,
    ErrorReceived,
    Handshake,
    HandshakeState,
    InvalidMessage,
    LineFramer,
    NotificationReceived,
    Oversized,
    RequestCancelled,
    RequestReceived,
    ResultReceived,
    negotiate,
    parse_request_meta,
)
from elicitor.protocol._connection import MAX_ABANDONED


def reply_of(event: object) -> dict[str, Any]:
    assert isinstance(event, InvalidMessage)
    assert event.reply is not None
    reply: dict[str, Any] = json.loads(event.reply)
    return reply


class TestConnection:
    def test_request_result_round_trip_between_two_connections(self) -> None:
        client, server = Connection(), Connection()
        request_id, data = client.send_request("tools/list", {"cursor": "x"})
        event = server.receive(data)
        assert event == RequestReceived(request_id, "tools/list", {"cursor": "x"})
        reply = server.send_result(request_id, {"tools": []})
        assert reply is not None
        assert client.receive(reply) == ResultReceived(request_id, {"tools": []})
        assert client.awaiting == 0
        assert server.answering == 0

    def test_error_response_is_delivered_as_jsonrpc_error(self) -> None:
        client, server = Connection(), Connection()
        request_id, data = client.send_request("nope")
        server.receive(data)
        reply = server.send_error(request_id, JSONRPCError(-32601, "Method not found"))
        assert reply is not None
        event = client.receive(reply)
        assert isinstance(event, ErrorReceived) and isinstance(event.error, JSONRPCError)
        assert (event.error.code, event.error.message) == (-32601, "Method not found")

    @pytest.mark.parametrize(
        ("data", "code"),
        [
            (b"{not json", -32700),
            (b"\xff\xfe{}", -32700),
            (b"[1, 2]", -32600),
            (b'"just a string"', -32600),
            (b"42", -32600),
            (b'{"jsonrpc": "1.0", "id": 1, "method": "x"}', -32600),
            (b'{"jsonrpc": "2.0", "id": true, "method": "x"}', -32600),
            (b'{"jsonrpc": "2.0", "id": null, "method": "x"}', -32600),
            (b'{"jsonrpc": "2.0", "id": 1.5, "method": "x"}', -32600),
            (b'{"jsonrpc": "2.0", "id": 1, "method": 7}', -32600),
            (b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1]}', -32600),
            (b'{"jsonrpc": "2.0", "id": 1}', -32600),
        ],
    )
    def test_malformed_input_gets_a_specific_error_reply(self, data: bytes, code: int) -> None:
        reply = reply_of(Connection().receive(data))
        assert reply["error"]["code"] == code
        assert reply["jsonrpc"] == "2.0"

    def test_parse_error_reply_has_null_id(self) -> None:
        assert reply_of(Connection().receive(b"garbage"))["id"] is None

    def test_invalid_request_with_readable_id_echoes_it(self) -> None:
        reply = reply_of(Connection().receive(b'{"jsonrpc": "2.0", "id": "a", "method": "x", "params": 3}'))
        assert reply["id"] == "a"

    def test_response_to_unknown_id_is_ignored_without_reply(self) -> None:
        event = Connection().receive(b'{"jsonrpc": "2.0", "id": 99, "result": {}}')
        assert isinstance(event, InvalidMessage)
        assert event.reply is None
        assert isinstance(event.error, RemoteProtocolError)

    def test_duplicate_in_flight_request_id_is_refused(self) -> None:
        server = Connection()
        assert isinstance(server.receive(b'{"jsonrpc": "2.0", "id": 1, "method": "x"}'), RequestReceived)
        assert reply_of(server.receive(b'{"jsonrpc": "2.0", "id": 1, "method": "x"}'))["error"]["code"] == -32600

    def test_answering_twice_sends_nothing_the_second_time(self) -> None:
        server = Connection()
        server.receive(b'{"jsonrpc": "2.0", "id": 1, "method": "x"}')
        assert server.send_result(1, {}) is not None
        assert server.send_result(1, {}) is None

    def test_cancellation_of_in_flight_request(self) -> None:
        server = Connection()
        server.receive(b'{"jsonrpc": "2.0", "id": "r", "method": "tools/call"}')
        note = b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "r", "reason": "x"}}'
        assert server.receive(note) == RequestCancelled("r", "x")
        # The cancelled request is no longer owed an answer.
        assert server.send_result("r", {}) is None

    def test_cancellation_of_unknown_request_is_just_a_notification(self) -> None:
        note = b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}'
        assert isinstance(Connection().receive(note), NotificationReceived)

    def test_a_late_response_to_our_cancelled_request_is_no_protocol_error(self) -> None:
        # The answer may cross our notifications/cancelled: an ordinary answer nobody awaits (the session drops it
        # quietly), not a stray to warn about; a second answer to the same id is a stray.
        client = Connection()
        request_id, _ = client.send_request("elicitation/create")
        notice = client.cancel_request(request_id, "gone")
        assert notice is not None
        assert json.loads(notice)["params"] == {"requestId": request_id, "reason": "gone"}
        assert client.awaiting == 0
        late = msgspec.json.encode({"jsonrpc": "2.0", "id": request_id, "result": {}})
        assert client.receive(late) == ResultReceived(request_id, {})
        assert isinstance(client.receive(late), InvalidMessage)

    def test_only_the_latest_cancelled_ids_are_remembered(self) -> None:
        client = Connection()
        ids = [client.send_request("ping")[0] for _ in range(MAX_ABANDONED + 1)]
        for request_id in ids:
            client.cancel_request(request_id)
        answer = b'{"jsonrpc": "2.0", "id": %d, "error": {"code": -32800, "message": "cancelled"}}'
        assert isinstance(client.receive(answer % ids[0]), InvalidMessage)
        assert isinstance(client.receive(answer % ids[-1]), ErrorReceived)

    def test_in_flight_limit(self) -> None:
        server = Connection(max_incoming=1)
        server.receive(b'{"jsonrpc": "2.0", "id": 1, "method": "x"}')
        assert reply_of(server.receive(b'{"jsonrpc": "2.0", "id": 2, "method": "x"}'))["id"] == 2

    def test_protocol_error_cannot_be_raised_directly(self) -> None:
        with pytest.raises(TypeError):
            ProtocolError("x")
        assert isinstance(LocalProtocolError("x"), ProtocolError)


class TestFraming:
    def test_lines_blank_lines_and_crlf(self) -> None:
        framer = LineFramer(100)
        assert framer.feed(b'{"a":1}\r\n\n{"b"') == [b'{"a":1}']
        assert framer.feed(b":2}\n") == [b'{"b":2}']

    def test_oversized_line_is_dropped_and_reported_once_when_it_ends(self) -> None:
        framer = LineFramer(10)
        assert framer.feed(b"x" * 25) == []  # dropped as it comes, nothing held beyond the limit
        assert framer.feed(b"y" * 5 + b"\nok\n") == [Oversized(30, b"x" * 25, b"x" * 25 + b"y" * 5, 10), b"ok"]

    def test_oversized_complete_line(self) -> None:
        assert LineFramer(4).feed(b"123456\nabc\n") == [Oversized(6, b"123456", b"123456", 4), b"abc"]

    def test_oversized_line_keeps_only_its_head_and_tail(self) -> None:
        framer = LineFramer(5000)
        line = b"{" + b"a" * 9000 + b"}"
        out = [*framer.feed(line[:3000]), *framer.feed(line[3000:7000]), *framer.feed(line[7000:] + b"\r\n")]
        assert out == [Oversized(len(line) + 1, line[:4096], line[-512:], 5000)]

    def test_oversized_last_line_at_eof(self) -> None:
        framer = LineFramer(4)
        assert framer.feed(b"123456") == []
        assert framer.close() == Oversized(6, b"123456", b"123456", 4)

    def test_unterminated_last_line_at_eof(self) -> None:
        framer = LineFramer(100)
        framer.feed(b"{}\n{")
        assert framer.close() == b"{"

    @given(st.lists(st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b and b.strip())), st.data())
    def test_any_split_of_the_stream_gives_the_same_lines(self, lines: list[bytes], data: st.DataObject) -> None:
        stream = b"".join(line + b"\n" for line in lines)
        cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
        framer = LineFramer(1000)
        out: list[bytes | Oversized] = []
        start = 0
        for cut in [*cuts, len(stream)]:
            out.extend(framer.feed(stream[start:cut]))
            start = cut
        expected = [line.removesuffix(b"\r") for line in lines]
        assert out == expected


class TestLifecycle:
    def test_handshake_table(self) -> None:
        shake = Handshake()
        with pytest.raises(JSONRPCError) as info:
            shake.check("tools/list")
        assert info.value.code == -32600
        shake.check("ping")
        shake.check("initialize")
        assert shake.initialize({"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}}) == "2025-06-18"
        assert shake.state is HandshakeState.INITIALIZING
        assert shake.capabilities.elicitation_modes == {"form"}
        shake.initialized()
        assert shake.state.value == "ready"
        with pytest.raises(JSONRPCError):
            shake.check("initialize")

    @pytest.mark.parametrize(
        ("asked", "answer"),
        [
            ("2025-11-25", "2025-11-25"),
            ("2025-06-18", "2025-06-18"),
            ("2025-03-26", "2025-03-26"),  # the clients of those years give up when offered a newer one
            ("2024-11-05", "2024-11-05"),
            ("2026-07-28", "2025-11-25"),
            (None, "2025-11-25"),
        ],
    )
    def test_negotiation(self, asked: str | None, answer: str) -> None:
        assert negotiate(asked) == answer

    @pytest.mark.parametrize(
        ("asked", "modes"), [("2025-03-26", set()), ("2024-11-05", set()), ("2025-06-18", {"form"})]
    )
    def test_a_revision_without_elicitation_cannot_be_asked(self, asked: str, modes: set[str]) -> None:
        """Elicitation declared on a revision that has none (a client's mistake) is not believed."""
        shake = Handshake()
        params = {"protocolVersion": asked, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "c"}}
        assert shake.initialize(params) == asked
        assert shake.capabilities.elicitation_modes == modes

    @pytest.mark.parametrize(
        ("raw", "modes"),
        [
            ({}, set()),
            ({"elicitation": {}}, {"form"}),
            ({"elicitation": {"url": {}}}, {"url"}),
            ({"elicitation": {"form": {}, "url": {}}}, {"form", "url"}),
            ({"elicitation": True}, set()),
            (None, set()),
        ],
    )
    def test_capabilities(self, raw: object, modes: set[str]) -> None:
        assert ClientCapabilities.parse(raw).elicitation_modes == modes

    def test_request_meta(self) -> None:
        meta = parse_request_meta(
            {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
                    "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
                }
            }
        )
        assert meta.revision == "2026-07-28"
        assert meta.capabilities.elicitation_modes == {"form"}
        assert meta.client_info is not None and meta.client_info.name == "c"

    @pytest.mark.parametrize(
        ("params", "code"),
        [
            (None, -32602),
            ({}, -32602),
            ({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}, -32602),
            ({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}, -32602),
            (
                {
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "v9",
                        "io.modelcontextprotocol/clientCapabilities": {},
                    }
                },
                -32022,
            ),
        ],
    )
    def test_request_meta_errors(self, params: dict[str, Any] | None, code: int) -> None:
        with pytest.raises(JSONRPCError) as info:
            parse_request_meta(params)
        assert info.value.code == code
        if code == -32022:
            assert info.value.data == {"supported": ["2026-07-28"], "requested": "v9"}
