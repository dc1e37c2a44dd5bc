"""A message over the size limit ends the call it belongs to instead of stranding it.

Sans-I/O: what :func:`peek_envelope` reads from an oversized line's first and last bytes, whatever the key order
(the Python SDKs write ``id`` first, the TypeScript SDK last) and whatever the bytes, and what
:meth:`Connection.receive_oversized` makes of it. End to end over real pipes: a server whose tool returns more than
the client accepts, and a client that sends more than the server accepts, each side a real process.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitor import Client, JSONRPCError, MessageTooLarge
from elicitor.protocol import (
    Connection,
    ErrorReceived,
    InvalidMessage,
    LineFramer,
    Oversized,
    peek_envelope,
)

pytestmark = pytest.mark.anyio

_encode = msgspec.json.encode
BIG = "x" * 20_000

ids = st.one_of(st.integers(-(2**53), 2**53), st.text(max_size=40))
payloads = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=30)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)


def oversized(line: bytes, limit: int = 1000) -> Oversized:
    """What the framer reports for ``line`` with ``limit``."""
    out = LineFramer(limit).feed(line + b"\n")
    assert len(out) == 1 and isinstance(out[0], Oversized)
    return out[0]


def ordered(members: list[tuple[str, Any]]) -> bytes:
    """A JSON object with its members in exactly this order."""
    return b"{" + b",".join(_encode(key) + b":" + _encode(value) for key, value in members) + b"}"


class TestPeek:
    def test_python_sdk_order_id_first(self) -> None:
        line = ordered([("jsonrpc", "2.0"), ("id", 7), ("result", {"content": [{"type": "text", "text": BIG}]})])
        assert peek_envelope(*_head_tail(line)) == (7, "response")

    def test_typescript_sdk_order_id_last(self) -> None:
        line = ordered([("result", {"content": [{"type": "text", "text": BIG}]}), ("jsonrpc", "2.0"), ("id", 'a"b')])
        assert peek_envelope(*_head_tail(line)) == ('a"b', "response")

    def test_a_request_and_a_notification(self) -> None:
        request = ordered([("method", "tools/call"), ("params", {"x": BIG}), ("jsonrpc", "2.0"), ("id", 3)])
        assert peek_envelope(*_head_tail(request)) == (3, "request")
        note = ordered([("jsonrpc", "2.0"), ("method", "notifications/message"), ("params", {"data": BIG})])
        assert peek_envelope(*_head_tail(note)) == (None, "notification")

    def test_an_id_inside_the_payload_is_not_taken_for_the_message_id(self) -> None:
        line = ordered([("jsonrpc", "2.0"), ("method", "x"), ("params", {"id": 99, "blob": BIG, "end": {"id": 5}})])
        assert peek_envelope(*_head_tail(line)) == (None, "notification")  # {"id":5}} ends the params

    def test_a_first_member_too_large_to_read_past(self) -> None:
        line = ordered([("params", {"blob": BIG}), ("jsonrpc", "2.0"), ("method", "x"), ("id", 1)])
        assert peek_envelope(*_head_tail(line)) == (1, "unknown")

    @given(
        kind=st.sampled_from(["request", "notification", "response", "error"]),
        request_id=ids,
        payload=payloads,
        order=st.permutations(range(4)),
        filler=st.integers(0, 9000),
    )
    def test_what_it_finds_is_never_wrong(
        self, kind: str, request_id: int | str, payload: Any, order: list[int], filler: int
    ) -> None:
        body: dict[str, Any] = {"payload": payload, "blob": "y" * filler}
        members: list[tuple[str, Any]] = [("jsonrpc", "2.0")]
        if kind in ("request", "notification"):
            members.append(("method", "tools/call"))
            members.append(("params", body))
        elif kind == "response":
            members.append(("result", body))
        else:
            members.append(("error", {"code": -1, "message": "no", "data": body}))
        if kind != "notification":
            members.append(("id", request_id))
        line = ordered([members[i] for i in order if i < len(members)])
        found_id, found_kind = peek_envelope(*_head_tail(line))
        expected_kind = "response" if kind == "error" else kind
        assert found_kind in (expected_kind, "unknown")
        if found_id is not None:
            assert found_id == request_id and kind != "notification"
        if found_kind == "request":
            assert found_id == request_id

    @given(st.binary(max_size=600), st.binary(max_size=600))
    def test_any_bytes_never_raise(self, head: bytes, tail: bytes) -> None:
        found_id, found_kind = peek_envelope(head, tail)
        assert found_kind in ("request", "notification", "response", "unknown")
        assert found_id is None or type(found_id) in (int, str)


def _head_tail(line: bytes) -> tuple[bytes, bytes]:
    marker = oversized(line, limit=len(line) - 1)
    return marker.head, marker.tail


class TestConnection:
    def test_an_answer_too_large_fails_its_request_and_is_not_answered(self) -> None:
        client = Connection()
        request_id, _ = client.send_request("tools/call", {})
        line = ordered([("result", {"text": BIG}), ("jsonrpc", "2.0"), ("id", request_id)])
        event = client.receive_oversized(oversized(line))
        assert isinstance(event, ErrorReceived) and event.id == request_id
        assert isinstance(event.error, MessageTooLarge)
        assert (event.error.size, event.error.limit) == (len(line), 1000)
        assert client.awaiting == 0

    def test_an_answer_to_no_request_of_ours_is_only_reported(self) -> None:
        line = ordered([("jsonrpc", "2.0"), ("id", 41), ("result", {"text": BIG})])
        event = Connection().receive_oversized(oversized(line))
        assert isinstance(event, InvalidMessage) and event.reply is None

    def test_a_request_too_large_is_refused_under_its_own_id(self) -> None:
        line = ordered([("jsonrpc", "2.0"), ("id", "call-9"), ("method", "tools/call"), ("params", {"a": BIG})])
        event = Connection().receive_oversized(oversized(line))
        assert isinstance(event, InvalidMessage) and event.reply is not None
        reply = msgspec.json.decode(event.reply)
        assert reply["id"] == "call-9" and reply["error"]["code"] == -32600
        assert f"{len(line):,} bytes" in reply["error"]["message"]

    def test_a_request_reusing_an_id_in_flight_is_refused_with_a_null_id(self) -> None:
        server = Connection()
        server.receive(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        line = ordered([("jsonrpc", "2.0"), ("id", 1), ("method", "tools/call"), ("params", {"a": BIG})])
        event = server.receive_oversized(oversized(line))
        assert isinstance(event, InvalidMessage) and event.reply is not None
        assert msgspec.json.decode(event.reply)["id"] is None  # id 1's answer belongs to the ping in flight

    def test_a_notification_too_large_gets_no_reply(self) -> None:
        line = ordered([("jsonrpc", "2.0"), ("method", "notifications/message"), ("params", {"a": BIG})])
        event = Connection().receive_oversized(oversized(line))
        assert isinstance(event, InvalidMessage) and event.reply is None


SERVER = textwrap.dedent(
    """
    import sys
    from elicitor import Server
    from elicitor.transports import StdioServerTransport

    server = Server("sizes")

    @server.tool()
    async def blob(size: int) -> str:
        return "z" * size

    @server.tool()
    async def length(text: str) -> int:
        return len(text)

    if __name__ == "__main__":
        import anyio
        anyio.run(server.serve, StdioServerTransport(max_message_size=int(sys.argv[1])))
    """
)


@pytest.fixture
def server_script(tmp_path: Path) -> Path:
    path = tmp_path / "sizes_server.py"
    path.write_text(SERVER)
    return path


async def test_a_result_over_the_clients_limit_fails_the_call_at_once_and_the_session_goes_on(
    server_script: Path,
) -> None:
    command = [sys.executable, str(server_script), str(1 << 20)]
    async with Client.stdio(command, max_message_size=100_000) as client:
        with anyio.fail_after(60):  # a hang guard: the old client waited for ever
            with pytest.raises(MessageTooLarge) as info:
                await client.call_tool("blob", {"size": 200_000})
            assert info.value.size > 200_000 and info.value.limit == 100_000
            assert (await client.call_tool("blob", {"size": 10})).text == "z" * 10


async def test_a_call_over_the_servers_limit_is_refused_under_its_id_and_the_session_goes_on(
    server_script: Path,
) -> None:
    async with Client.stdio([sys.executable, str(server_script), "50000"]) as client:
        with anyio.fail_after(60):
            with pytest.raises(JSONRPCError) as info:
                await client.call_tool("length", {"text": "q" * 80_000})
            assert info.value.code == -32600 and "too large" in info.value.message
            assert (await client.call_tool("length", {"text": "q" * 100})).text == "100"


async def test_the_default_limits_carry_a_large_image_sized_result(server_script: Path) -> None:
    """Servers of other SDKs set no limit and return screenshots of several MiB; elicitor's client takes 16."""
    async with Client.stdio([sys.executable, str(server_script), str(4 << 20)]) as client:
        with anyio.fail_after(60):
            assert len((await client.call_tool("blob", {"size": 6 << 20})).text) == 6 << 20
