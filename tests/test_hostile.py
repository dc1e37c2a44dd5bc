"""Rows of docs/hostile-peers.md that no other test pins down: what a peer's bad input gets, on each side."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from elicitor import Client, RemoteProtocolError, Server

from .test_waits import RawPeer, asking_server, call, raw_client, raw_server, text_of

pytestmark = pytest.mark.anyio


async def test_json_nested_too_deep_is_a_parse_error_and_the_connection_goes_on(anyio_backend: str) -> None:
    """``[[[[...`` deeper than 128 levels would exhaust the decoder's recursion: refused with -32700."""
    async with raw_client(Server("deep", "1"), "2025-11-25") as peer:
        deep = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + b"[" * 200 + b"]" * 200 + b"}}"
        with anyio.fail_after(10):
            await peer.transport.send(deep)
            refused = await peer.receive()
            assert refused["error"]["code"] == -32700
            assert "nested deeper than 128" in refused["error"]["message"]
            await peer.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            assert await peer.answer_of(2) == {"jsonrpc": "2.0", "id": 2, "result": {}}


@pytest.mark.parametrize(
    ("result", "says"),
    [
        ({"resultType": "something_else"}, "unknown resultType"),
        ({"resultType": "input_required", "inputRequests": ["not", "an", "object"]}, "malformed input_required"),
        ({"resultType": "input_required", "inputRequests": {}, "requestState": 42}, "malformed input_required"),
    ],
)
async def test_a_malformed_call_result_from_the_server_is_a_remote_protocol_error(
    anyio_backend: str, result: dict[str, Any], says: str
) -> None:
    async def answer(peer: RawPeer, message: dict[str, Any]) -> None:
        await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    async with raw_server(answer, stateless=True) as (transport, _), Client(transport, protocol="2026-07-28") as client:
        with anyio.fail_after(10), pytest.raises(RemoteProtocolError, match=says):
            await client.call_tool("anything")


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            {"result": {"action": "accept", "content": {"value": "yes please"}}},
            {"isError": True, "text": "the answer did not satisfy the form: value: expected true or false"},
        ),
        (
            {"result": {"action": "maybe"}},
            {"isError": True, "text": "the client answered with an unknown action 'maybe'"},
        ),
        ({"result": "not an object"}, {"code": -32603, "text": "not an object"}),
        ({"error": {"code": -32601, "message": "no such method here"}}, {"code": -32601, "text": "no such method"}),
    ],
)
async def test_what_a_bad_answer_to_an_elicitation_does_to_the_call(
    anyio_backend: str, answer: dict[str, Any], expected: dict[str, Any]
) -> None:
    """Handshake era: an answer that does not fit the form, an unknown action, a result that is not an object, or a
    JSON-RPC error instead of a result. The tool never sees invalid data; the call ends as the table says."""
    server = asking_server()
    async with raw_client(server, "2025-11-25", elicitation={}) as peer:
        with anyio.fail_after(10):
            await peer.send(call(1, "ask"))
            question = await peer.until(lambda m: m.get("method") == "elicitation/create")
            await peer.send({"jsonrpc": "2.0", "id": question["id"], **answer})
            reply = await peer.answer_of(1)
    if "isError" in expected:
        assert reply["result"]["isError"] is True
        assert expected["text"] in text_of(reply)
    else:
        assert reply["error"]["code"] == expected["code"]
        assert expected["text"] in reply["error"]["message"]


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_an_unexpected_exception_reaches_the_peer_as_a_reference_never_its_text(
    anyio_backend: str, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The text of an exception may carry anything (a path, a connection string): the client gets -32603 with a
    reference, the server's log gets the text, the traceback and the same reference."""
    from elicitor import JSONRPCError, Server
    from elicitor.testing import connected

    leaky = Server("leaky")

    @leaky.resource("memo://broken", name="broken")
    def broken() -> str:
        raise RuntimeError("postgres://admin:hunter2@db/prod is down")

    async with connected(leaky, protocol=protocol) as client:
        with pytest.raises(JSONRPCError) as raised:
            await client.read_resource("memo://broken")
    assert raised.value.code == -32603
    assert "hunter2" not in str(raised.value) and "hunter2" not in repr(raised.value.data)
    data = raised.value.data
    assert isinstance(data, dict)
    reference = data["reference"]
    assert isinstance(reference, str) and reference in str(raised.value)
    logged = [r for r in caplog.records if reference in r.getMessage()]
    assert logged and logged[0].exc_info is not None and "hunter2" in str(logged[0].exc_info[1])


@pytest.mark.parametrize("version", ["2025-03-26", "2024-11-05"])
@pytest.mark.parametrize("mode", ["form", "url"])
async def test_a_server_that_chose_an_older_revision_cannot_elicit(anyio_backend: str, version: str, mode: str) -> None:
    """The client offers 2025-11-25 declaring form and URL mode; the server answers ``initialize`` with a revision
    that has no elicitation (still accepted: its tools work). An ``elicitation/create`` it pushes anyway is refused
    with -32601 naming the revision, the person is never asked, and the call goes on."""
    from elicitor import Accepted

    asked: list[object] = []

    class Person:
        async def __call__(self, request: object) -> Accepted[dict[str, str]]:
            asked.append(request)
            return Accepted({"name": "x"})

        async def url(self, request: object) -> Accepted[None]:
            asked.append(request)
            return Accepted(None)

    params: dict[str, Any] = {"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}}
    if mode == "url":
        params = {"mode": "url", "message": "Sign in", "url": "https://example.com/", "elicitationId": "e1"}
    refusals: list[dict[str, Any]] = []

    async def pushing(peer: RawPeer, message: dict[str, Any]) -> None:
        await peer.send({"jsonrpc": "2.0", "id": "q", "method": "elicitation/create", "params": params})
        refusals.append(await peer.reply("q"))
        content = [{"type": "text", "text": "done"}]
        await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": content}})

    async with (
        raw_server(pushing, version=version) as (transport, _),
        Client(transport, elicitation=Person()) as client,
    ):
        assert client.protocol_version == version
        with anyio.fail_after(10):
            assert (await client.call_tool("anything")).text == "done"
    assert asked == []
    assert refusals[0]["error"]["code"] == -32601
    assert f"not part of protocol revision {version}" in refusals[0]["error"]["message"]


async def test_a_server_asking_again_for_input_the_client_refused_is_told_apart_from_a_long_call(
    anyio_backend: str,
) -> None:
    """2026-07-28: a server asks a client that declared no elicitation for a form (it should have answered -32021)
    and, answered ``cancel``, asks the same again (the official SDK's tools that ask in rounds do). The client
    stops on the second round saying what the server asks for, instead of answering cancel until ``max_rounds``."""
    from elicitor import RemoteProtocolError

    form = {"type": "object", "properties": {"name": {"type": "string"}}}
    question = {"method": "elicitation/create", "params": {"message": "Who?", "requestedSchema": form}}

    async def asks_forever(peer: RawPeer, message: dict[str, Any]) -> None:
        result = {"resultType": "input_required", "inputRequests": {"who": question}}
        await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    async with raw_server(asks_forever, stateless=True) as (transport, peer), Client(transport) as client:
        with anyio.fail_after(10), pytest.raises(RemoteProtocolError, match="asked again for input this client") as e:
            await client.call_tool("anything")
    assert "did not declare elicitation mode 'form'" in str(e.value)
    calls = [m for m in peer.seen if m.get("method") == "tools/call"]
    assert len(calls) == 2
    assert calls[1]["params"]["inputResponses"] == {"who": {"action": "cancel"}}
