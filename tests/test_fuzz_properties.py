"""Property-based fuzzing: messages built from the spec's JSON Schemas, then mutated, fed to every peer-facing entry.

The strategies read the definitions of each revision's ``schema.json`` (``ELICITOR_SPEC_DIR``, default
``/work/shared/spec``: ``<revision>/schema.json``) and generate valid client requests and notifications (for the
server) and server requests (for the client); a mutation then puts a value of the wrong type at any position, or
an id of any type, or hostile text (invalid UTF-8, a lone surrogate, a BOM, a NUL, a duplicate key, numbers too
large or too deep). Lists of them arrive in any order. Properties, on the real session over the in-memory
transport and on the ASGI app:

* nothing raises out of the session or the app (on stdio that would end the process);
* every error is the spec's (-32700, -32600, -32601, -32602, and MCP's own codes), never -32603;
* the session still answers a ``ping`` afterwards, and the app still serves a new client.

The second half holds the regression tests of the crashes fuzzing found, one each, named after what they check.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import msgspec
import pytest
from fuzz.targets import http_app, session
from fuzz.targets._harness import PEER_ERROR_CODES, check_no_traceback, check_reply, encode
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from elicitor import Client, ElicitorError, FormDefinitionError, JSONRPCError, ScriptedHandler
from elicitor.client._http import HttpClientTransport
from elicitor.forms import Form
from elicitor.protocol import MAX_DEPTH, Connection, InvalidMessage, decode_json
from elicitor.server._rounds import AnswerBook, _split
from elicitor.transports import memory_pair
from elicitor.transports._sse import MAX_RETRY, SSEDecoder, parse_event_id

SPEC = Path(os.environ.get("ELICITOR_SPEC_DIR", "/work/shared/spec"))
REVISIONS = ("2025-06-18", "2025-11-25", "2026-07-28")
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
}
BOUNDED = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
"""Every property here: a fixed, bounded number of examples (the whole file runs in well under a minute)."""


# ---- strategies from the spec's schemas -------------------------------------------------------------------------


def _definitions(revision: str) -> dict[str, Any]:
    path = SPEC / revision / "schema.json"
    if not path.exists():
        pytest.skip(f"the specification's schema is not at {path} (set ELICITOR_SPEC_DIR)")
    schema = json.loads(path.read_text())
    return dict(schema.get("$defs") or schema.get("definitions") or {})


JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
ANY_JSON = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def from_schema(schema: Any, defs: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values valid for ``schema`` (the subset of JSON Schema the MCP schema uses), bounded in depth."""
    if not isinstance(schema, dict) or depth > 8:
        return ANY_JSON
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return st.deferred(lambda: from_schema(defs.get(name, {}), defs, depth + 1))
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(option, defs, depth + 1) for option in schema[key]])
    if "allOf" in schema:
        return from_schema(schema["allOf"][0], defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}, defs, depth) for k in kind])
    if kind == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {name: from_schema(p, defs, depth + 1) for name, p in properties.items() if name in required},
            optional={
                name: from_schema(p, defs, depth + 1)
                for name, p in properties.items()
                if name not in required and depth < 4
            },
        )
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {}), defs, depth + 1), max_size=2)
    if kind == "string":
        if schema.get("format") in ("uri", "uri-template"):
            return st.sampled_from(["https://example.com/a", "file:///tmp/x", "test://static/1"])
        return st.text(max_size=16)
    if kind == "integer":
        return st.integers(min_value=int(schema.get("minimum", -(2**53))), max_value=int(schema.get("maximum", 2**53)))
    if kind == "number":
        return st.floats(min_value=schema.get("minimum"), max_value=schema.get("maximum"), allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return ANY_JSON


def messages_of(revision: str, union: str) -> st.SearchStrategy[dict[str, Any]]:
    """Messages of one of the schema's unions (``ClientRequest``, ``ServerRequest``...) as JSON-RPC objects."""
    defs = _definitions(revision)
    members = [ref["$ref"].rsplit("/", 1)[-1] for ref in defs[union].get("anyOf", [])]
    ids = st.one_of(st.integers(min_value=-(2**53), max_value=2**53), st.text(min_size=1, max_size=8))

    def frame(message: dict[str, Any], request_id: object, meta: bool) -> dict[str, Any]:
        message = {**message, "jsonrpc": "2.0"}
        if "Request" in union:
            message["id"] = request_id
        if meta and revision == "2026-07-28" and isinstance(message.get("params"), dict):
            message["params"] = {**message["params"], "_meta": META}
        return message

    bodies = st.one_of([from_schema(defs[name], defs) for name in members if name in defs])
    return st.builds(frame, bodies, ids, st.booleans())


HOSTILE = st.one_of(
    ANY_JSON,
    st.just(10**400),
    st.just(-(2**63) - 1),
    st.just(1e308),
    st.just("\u0000"),
    st.just("\ufeff"),
    st.just("x" * 5000),
    st.just(json.loads("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5))),
)


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[dict[str, Any]]) -> bytes:
    """A message, then maybe one value replaced by a hostile one, then maybe its text made hostile."""
    message = draw(base)
    if draw(st.booleans()):
        target: Any = message
        while isinstance(target, dict) and target and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(target)))
            if not isinstance(target[key], dict) or not target[key]:
                target[key] = draw(HOSTILE)
                break
            target = target[key]
        else:
            if isinstance(target, dict):
                target[draw(st.sampled_from([*sorted(target), "id", "method", "params", "result"]))] = draw(HOSTILE)
    try:
        text = encode(message)
    except (OverflowError, msgspec.EncodeError):  # a number msgspec will not write: send it as text
        text = json.dumps(message).encode()
    how = draw(st.sampled_from(["as is", "as is", "bom", "nul", "bad utf-8", "surrogate", "duplicate", "nan"]))
    if how == "bom":
        text = b"\xef\xbb\xbf" + text
    elif how == "nul":
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + b"\x00" + text[cut:]
    elif how == "bad utf-8":
        text = text.replace(b'"2.0"', b'"2.0\xff\xfe"', 1)
    elif how == "surrogate":
        text = text.replace(b'"2.0"', b'"\\ud800"', 1)
    elif how == "duplicate" and text.endswith(b"}"):
        text = text[:-1] + b',"id":' + encode(draw(ANY_JSON)) + b"}"
    elif how == "nan":
        text = text.replace(b'"2.0"', b"NaN", 1)
    return text.replace(b"\n", b" ")


def client_lines(revision: str) -> st.SearchStrategy[list[bytes]]:
    """A client's side of a conversation: requests and notifications of ``revision``, in any order."""
    one = st.one_of(
        mutated(messages_of(revision, "ClientRequest")), mutated(messages_of(revision, "ClientNotification"))
    )
    return st.lists(one, min_size=1, max_size=5)


@pytest.fixture(autouse=True)
def _no_earlier_tracebacks() -> None:
    """The targets fail on any traceback the implementation logged; those logged by earlier tests (a tool that
    raises on purpose) are not this test's."""
    with contextlib.suppress(AssertionError):
        check_no_traceback()


# ---- the server session ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("revision", REVISIONS)
@BOUNDED
@given(data=st.data())
def test_server_session_answers_any_client_messages_and_keeps_serving(revision: str, data: st.DataObject) -> None:
    lines = data.draw(client_lines(revision))
    initialize = {**decode_json(http_app.INITIALIZE), "id": "init"}
    initialize["params"]["protocolVersion"] = revision
    handshake = [encode(initialize), b'{"jsonrpc":"2.0","method":"notifications/initialized"}']
    prefix = handshake if revision != "2026-07-28" and data.draw(st.booleans()) else []
    anyio.run(session.converse, prefix + lines)


# ---- the ASGI app ------------------------------------------------------------------------------------------------


async def post_all(bodies: list[bytes], headers: list[tuple[bytes, bytes]]) -> list[http_app.Exchange]:
    target = http_app.Target()
    async with target.app.lifespan():
        target.session = await target.open_session()
        exchanges = []
        for body in bodies:
            live = [(name, value.replace(b"$SESSION", target.session)) for name, value in headers]
            done = await http_app.Exchange("POST", "/mcp", live, body).run(target.app)
            if done.status is not None:
                http_app.check_response(done)
            exchanges.append(done)
        probe = await http_app.Exchange("POST", "/mcp", http_app.JSON_HEADERS, http_app.INITIALIZE).run(target.app)
        assert probe.status == 200 and b'"result"' in probe.body
        return exchanges


HEADER_SETS = st.sampled_from(
    [
        [*http_app.JSON_HEADERS, (b"mcp-session-id", b"$SESSION"), (b"mcp-protocol-version", b"2025-11-25")],
        [*http_app.JSON_HEADERS, (b"mcp-protocol-version", b"2026-07-28"), (b"mcp-method", b"tools/call")],
        http_app.JSON_HEADERS,
        [*http_app.JSON_HEADERS, (b"mcp-session-id", b"\xff\x00 not a session")],
    ]
)


@pytest.mark.parametrize("revision", REVISIONS)
@BOUNDED
@given(data=st.data())
def test_http_app_answers_any_post_with_a_spec_status_and_keeps_serving(revision: str, data: st.DataObject) -> None:
    bodies = data.draw(client_lines(revision))
    anyio.run(post_all, bodies, data.draw(HEADER_SETS))


# ---- the client session ------------------------------------------------------------------------------------------

INITIALIZE_RESULT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "hostile", "version": "1"},
}
CLIENT_PROBE = b'{"jsonrpc":"2.0","id":"client-probe","method":"ping"}'


async def hostile_server(lines: list[bytes]) -> None:
    """Answer a real Client's handshake, send it ``lines``, then a ping it must still answer."""
    server_end, client_end = memory_pair()
    handler = ScriptedHandler(otherwise="decline")
    probed = anyio.Event()

    async def serve() -> None:
        first = await server_end.receive()
        assert isinstance(first, bytes)
        initialize = decode_json(first)
        reply = {"jsonrpc": "2.0", "id": initialize["id"], "result": INITIALIZE_RESULT}
        await server_end.send(encode(reply))
        for line in lines:
            await server_end.send(line)
        await server_end.send(CLIENT_PROBE)
        with anyio.fail_after(60):  # a guard against a hang only
            while True:
                message = check_reply(await server_end.receive())
                if message.get("id") == "client-probe" and "method" not in message:
                    assert message.get("result") == {}, message
                    probed.set()
                    return

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            async with Client(client_end, protocol="2025-11-25", elicitation=handler):
                await probed.wait()
    finally:
        await server_end.aclose()
        await client_end.aclose()


@BOUNDED
@given(data=st.data())
def test_client_answers_any_server_request_and_keeps_serving(data: st.DataObject) -> None:
    revision = data.draw(st.sampled_from(["2025-06-18", "2025-11-25"]))
    one = st.one_of(
        mutated(messages_of(revision, "ServerRequest")), mutated(messages_of(revision, "ServerNotification"))
    )
    anyio.run(hostile_server, data.draw(st.lists(one, min_size=1, max_size=4)))


DISCOVER_RESULT = {
    "resultType": "complete",
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {}},
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "hostile", "version": "1"}},
}


async def hostile_stateless_server(results: list[bytes]) -> None:
    """A 2026-07-28 server answering each ``tools/call`` (the first and every retry) with the next of ``results``.

    The client must end the call with a result or one of its own errors, and every retry it sends must be a
    well-formed request: ``inputResponses`` an object, ``requestState`` echoed only as a string.
    """
    server_end, client_end = memory_pair()
    queue = list(results)

    async def serve() -> None:
        while True:
            try:
                raw = await server_end.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return
            request = check_reply(raw)
            if "id" not in request or "method" not in request:
                continue
            if request["method"] == "server/discover":
                body = encode({"jsonrpc": "2.0", "id": request["id"], "result": DISCOVER_RESULT})
            else:
                params = request.get("params", {})
                assert isinstance(params.get("inputResponses", {}), dict), params
                assert isinstance(params.get("requestState", ""), str), params
                result = queue.pop(0) if queue else b'{"content":[]}'
                body = b'{"jsonrpc":"2.0","id":' + encode(request["id"]) + b',"result":' + result + b"}"
            await server_end.send(body)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            handler = ScriptedHandler(otherwise="decline")
            try:
                # An answer that is not JSON answers nothing: the call waits for request_timeout, its bound.
                options: dict[str, Any] = {"max_rounds": 4, "request_timeout": 1.0}
                async with Client(client_end, protocol="2026-07-28", elicitation=handler, **options) as client:
                    await client.call_tool("ask", {})
            except (ElicitorError, TimeoutError):
                pass
            tg.cancel_scope.cancel()
    finally:
        await server_end.aclose()
        await client_end.aclose()


@st.composite
def call_results(draw: st.DrawFn) -> bytes:
    """What a server may answer a ``tools/call`` with on 2026-07-28: a round of questions or a result, mutated."""
    defs = _definitions("2026-07-28")
    name = draw(st.sampled_from(["InputRequiredResult", "InputRequiredResult", "CallToolResult"]))
    value = draw(from_schema(defs[name], defs))
    if name == "InputRequiredResult":
        value["resultType"] = "input_required"
    text = draw(mutated(st.just(value)))
    return text if text.startswith(b"{") and text.endswith(b"}") else b"{}"


@BOUNDED
@given(results=st.lists(call_results(), min_size=1, max_size=4))
def test_client_ends_any_2026_call_with_a_result_or_its_own_error(results: list[bytes]) -> None:
    anyio.run(hostile_stateless_server, results)


# ---- the classifier on hostile text --------------------------------------------------------------------------------


@BOUNDED
@given(text=st.one_of(st.binary(max_size=64), mutated(messages_of("2026-07-28", "ClientRequest"))))
def test_classifier_turns_any_bytes_into_one_event(text: bytes) -> None:
    event = Connection().receive(text)
    if isinstance(event, InvalidMessage) and event.reply is not None:
        assert decode_json(event.reply)["error"]["code"] in (-32700, -32600)


# ---- regressions: every crash fuzzing found, and what fixed it ---------------------------------------------------


def test_json_nested_deeper_than_the_limit_is_a_parse_error_not_a_recursion_error() -> None:
    deep = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    event = Connection().receive(deep)
    assert isinstance(event, InvalidMessage) and event.reply is not None
    assert decode_json(event.reply)["error"]["code"] == -32700
    just_deep_enough = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert decode_json(just_deep_enough) is not None
    with pytest.raises(msgspec.DecodeError, match="nested deeper"):
        decode_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


@pytest.mark.anyio
async def test_deep_json_over_http_is_400_parse_error_and_the_app_keeps_serving() -> None:
    deep = b"[" * 20_000 + b"]" * 20_000  # under the app's body limit, far over the depth limit
    [done] = await post_all([deep], http_app.JSON_HEADERS)
    assert done.status == 400 and decode_json(done.body)["error"]["code"] == -32700


@pytest.mark.anyio
@pytest.mark.parametrize("bad_id", [None, 1.5, [1], {"a": 1}, True])
async def test_initialize_with_a_bad_id_is_refused_before_it_creates_a_session(bad_id: object) -> None:
    target = http_app.Target()
    async with target.app.lifespan():
        body = encode({**decode_json(http_app.INITIALIZE), "id": bad_id})
        done = await http_app.Exchange("POST", "/mcp", http_app.JSON_HEADERS, body).run(target.app)
        assert done.status == 400 and decode_json(done.body)["error"]["code"] == -32600
        assert b"mcp-session-id" not in done.headers
        assert len(target.app._handshake) == 0


@pytest.mark.anyio
async def test_an_invalid_request_in_a_session_is_answered_400_not_left_waiting() -> None:
    # Found by the http_app target: the session sent its -32600 unrelated to the POST, which then never answered.
    session_headers = [
        *http_app.JSON_HEADERS,
        (b"mcp-session-id", b"$SESSION"),
        (b"mcp-protocol-version", b"2025-11-25"),
    ]
    body = b'{"jsonRPC":"2.0","id":5,"method":"tools/call","params":{"name":"ask","arguments":{}}}'
    [done] = await post_all([body], session_headers)
    assert done.status == 400
    reply = decode_json(done.body)
    assert reply["id"] == 5 and reply["error"]["code"] == -32600


def test_sse_ids_and_retry_take_ascii_digits_only() -> None:
    assert parse_event_id("k.\u00b2") is None  # "²" is a digit to str.isdigit(), not to int()
    assert parse_event_id("k.\u0663") is None  # ARABIC-INDIC DIGIT THREE
    assert parse_event_id("k." + "9" * 19) is None
    assert parse_event_id("k.12") == ("k", 12)
    decoder = SSEDecoder()
    decoder.feed(b"retry: \xc2\xb2\n\n")
    assert decoder.retry is None
    decoder.feed(b"retry: " + b"9" * 5000 + b"\n\n")
    assert decoder.retry == MAX_RETRY


def test_an_empty_sse_read_keeps_a_pending_cr() -> None:
    decoder = SSEDecoder()
    events = decoder.feed(b"data: a\r") + decoder.feed(b"") + decoder.feed(b"\ndata: b\n\n")
    assert [event.data for event in events] == ["a\nb"]  # CR, LF across reads is one line end, not two


@pytest.mark.anyio
@pytest.mark.parametrize("offered", ["has space", "tab\there", "caf\u00e9"])
async def test_a_server_session_id_that_is_not_visible_ascii_is_refused(offered: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        result = {"jsonrpc": "2.0", "id": decode_json(request.content)["id"], "result": INITIALIZE_RESULT}
        return httpx.Response(200, json=result, headers=[(b"mcp-session-id", offered.encode("latin-1"))])

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        client = Client(
            lambda: HttpClientTransport.connect("http://example.test/mcp", http=http),
            protocol="2025-11-25",
        )
        with pytest.raises(JSONRPCError, match="invalid Mcp-Session-Id"):
            async with client:
                pass


@pytest.mark.parametrize("key", ["minimum", "maximum", "minLength", "maxLength", "default"])
def test_a_huge_integer_in_a_schema_is_read_never_overflowing(key: str) -> None:
    # float() of 10**400 raised OverflowError out of the client's schema reader and the form's renderer.
    kind = "string" if "Length" in key else "integer"
    form = Form.from_schema({"type": "object", "properties": {"n": {"type": kind, key: 10**400}}}, check_secrets=False)
    assert form.schema("2025-11-25")["properties"]["n"][key] == 10**400


def test_a_non_string_format_is_refused_by_name() -> None:
    # Found by the schema target: {"format": {}} raised TypeError (unhashable) out of the client's schema reader.
    formats: list[object] = [{}, [], 1, None]
    for fmt in formats:
        schema = {"type": "object", "properties": {"s": {"type": "string", "format": fmt}}}
        if fmt is None:
            Form.from_schema(schema, check_secrets=False)
            continue
        with pytest.raises(FormDefinitionError, match="unknown format"):
            Form.from_schema(schema, check_secrets=False)


def test_two_schemas_differing_only_in_property_order_keep_their_own_order() -> None:
    # Found by the schema target: the form cache keyed schemas with sorted keys, so the second got the first's order.
    first = {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "string"}}}
    second = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    assert [f.name for f in Form.from_schema(first, check_secrets=False).fields] == ["b", "a"]
    assert [f.name for f in Form.from_schema(second, check_secrets=False).fields] == ["a", "b"]


def test_answer_keys_with_non_ascii_or_endless_digits_are_plain_keys() -> None:
    assert _split("q~\u00b2") == ("q~\u00b2", 1)
    assert _split("q~" + "9" * 5000) == ("q~" + "9" * 5000, 1)
    assert _split("q~3") == ("q", 3)
    book = AnswerBook()
    book.add("q~\u00b2", {"action": "decline"})
    book.add("q~" + "9" * 5000, {"action": "cancel"})
    assert AnswerBook.unpack(book.pack()).answers == book.answers


@pytest.mark.anyio
@pytest.mark.parametrize("origin", [b"http://[::1", b"http://[", b"\xff\xfe"])
async def test_an_origin_that_is_not_a_url_is_403(origin: bytes) -> None:
    target = http_app.Target()
    async with target.app.lifespan():
        headers = [*http_app.JSON_HEADERS, (b"origin", origin)]
        done = await http_app.Exchange("POST", "/mcp", headers, http_app.INITIALIZE).run(target.app)
        assert done.status == 403 and decode_json(done.body)["error"]["code"] in PEER_ERROR_CODES


@pytest.mark.anyio
async def test_an_elicitation_answer_whose_action_is_not_a_string_is_asked_again() -> None:
    # Found by the meta target: {"action": []} raised TypeError (unhashable) in usable_response, failing the tool.
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "ask", "arguments": {}, "_meta": META, "inputResponses": {"name": {"action": []}}},
    }
    server_end, client_end = memory_pair()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.server.serve, server_end)
            await client_end.send(encode(call))
            reply = check_reply(await client_end.receive())
            tg.cancel_scope.cancel()
    finally:
        await client_end.aclose()
        await server_end.aclose()
    assert reply["result"]["resultType"] == "input_required"
    assert list(reply["result"]["inputRequests"]) == ["name"]


@pytest.mark.anyio
async def test_an_event_id_that_cannot_go_back_in_a_header_ends_the_call_with_an_error() -> None:
    # Found by the client_http target: resuming sent "Last-Event-ID: café.1" and httpx raised UnicodeEncodeError
    # out of the transport's task group, taking the whole client down.
    gets: list[httpx.Request] = []

    async def priming_only() -> AsyncIterator[bytes]:
        yield "retry: 0\nid: caf\u00e9.1\ndata: \n\n".encode()  # a priming event, then the stream just ends

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            gets.append(request)
            return httpx.Response(405)
        if request.method == "DELETE":
            return httpx.Response(200)
        sent = decode_json(request.content)
        if "id" not in sent:
            return httpx.Response(202)
        if sent["method"] == "initialize":
            result = {"jsonrpc": "2.0", "id": sent["id"], "result": INITIALIZE_RESULT}
            return httpx.Response(200, json=result, headers={"mcp-session-id": "s-1"})
        return httpx.Response(200, content=priming_only(), headers={"content-type": "text/event-stream"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        client = Client(
            lambda: HttpClientTransport.connect("http://example.test/mcp", http=http), protocol="2025-11-25"
        )
        async with client:
            with pytest.raises(JSONRPCError, match="stream ended before it answered"):
                await client.call_tool("ask", {})
    assert all("last-event-id" not in request.headers for request in gets)


# ---- the answers a sealed state carries ----------------------------------------------------------------------------


def _unpack_answer_by_answer(packed: Any) -> AnswerBook:
    """What reading a packed book means: each answer of each run added in turn (the way a book is written)."""
    book = AnswerBook()
    for base, runs in packed["k"].items():
        if not isinstance(runs, list) or len(runs) % 2 or not all(isinstance(n, int) for n in runs):
            continue
        if sum(runs[1::2]) > 100_000 or min(runs[1::2], default=1) < 1:
            continue
        slots = [position for position, count in zip(runs[::2], runs[1::2], strict=True) for _ in range(count)]
        for occurrence, position in enumerate(slots, 1):
            value = packed["v"][position] if 0 <= position < len(packed["v"]) else None
            if isinstance(value, dict):
                book.add(base if occurrence == 1 else f"{base}~{occurrence}", value)
    return book


ANSWER_VALUES = st.sampled_from(
    [{"action": "accept", "content": {"n": 1}}, {"action": "decline"}, {"action": "cancel"}]
)
ANSWER_BASES = st.sampled_from(["q", "z~1", "q~2", "", "~2", "r~\u00b2"])
PACKED_RUNS = st.lists(st.tuples(st.integers(-1, 3), st.integers(1, 3)), max_size=3).map(
    lambda runs: [number for run in runs for number in run]
)


_ACCEPT, _DECLINE = {"action": "accept", "content": {"n": 1}}, {"action": "decline"}


@settings(max_examples=400, deadline=None, derandomize=True)
# Packs no replica writes, each read as if its answers were added one by one: "q~2" is q's second answer, so
# the first of base "q~2" does not replace it; "~2" is not the empty key's second; a trailing gap, an index below
# -1, and answers added after them.
@example(written=[], packed={"v": [_ACCEPT, _DECLINE], "k": {"q": [1, 2], "q~2": [0, 1]}}, more=[])
@example(written=[], packed={"v": [_ACCEPT, _DECLINE], "k": {"~2": [1, 1], "": [0, 2]}}, more=[])
@example(written=[], packed={"v": [_ACCEPT], "k": {"q": [0, 1, -1, 2]}}, more=[("q", 2, _DECLINE)])
@example(written=[], packed={"v": [_ACCEPT], "k": {"q": [-2, 1, 0, 1]}}, more=[("q", 1, _DECLINE)])
@given(
    written=st.lists(st.tuples(ANSWER_BASES, st.integers(1, 6), ANSWER_VALUES), max_size=20),
    packed=st.one_of(
        st.fixed_dictionaries(  # as a book is packed: runs of (position or -1 for a gap, count)
            {
                "v": st.lists(ANSWER_VALUES, min_size=1, max_size=3),
                "k": st.dictionaries(ANSWER_BASES, PACKED_RUNS, max_size=5),
            }
        ),
        st.fixed_dictionaries(  # anything
            {
                "v": st.lists(st.one_of(ANSWER_VALUES, st.just("not an object"), st.just([1])), max_size=4),
                "k": st.dictionaries(ANSWER_BASES, st.lists(st.integers(-2, 3), max_size=6), max_size=5),
            }
        ),
    ),
    more=st.lists(st.tuples(ANSWER_BASES, st.integers(1, 8), ANSWER_VALUES), max_size=6),
)
def test_an_unpacked_book_reads_and_grows_as_one_written_answer_by_answer(
    written: list[tuple[str, int, dict[str, Any]]],
    packed: dict[str, Any],
    more: list[tuple[str, int, dict[str, Any]]],
) -> None:
    # A replayed round unpacks the runs as they are sealed instead of adding every answer again: whatever it is
    # given (a book we packed, or a malformed one), it must hold the same answers and pack the same as the book
    # written answer by answer, and go on the same when later rounds add answers to it.
    book = AnswerBook()
    for base, occurrence, answer in written:
        book.add(base if occurrence == 1 else f"{base}~{occurrence}", answer)
    sources = (book.pack(), packed)
    for source in sources:
        copy = msgspec.json.decode(msgspec.json.encode(source))  # what opening a sealed state gives
        fast, reference = AnswerBook.unpack(copy), _unpack_answer_by_answer(source)
        assert fast.answers == reference.answers
        for base, occurrence, answer in more:
            key = base if occurrence == 1 else f"{base}~{occurrence}"
            fast.add(key, answer)
            reference.add(key, answer)
            if source is sources[0]:
                book.add(key, answer)
        assert fast.answers == reference.answers
        assert AnswerBook.unpack(fast.pack()).answers == AnswerBook.unpack(reference.pack()).answers == fast.answers
        if source is sources[0]:  # a book we packed: the state sealed next is the same, byte for byte
            assert msgspec.json.encode(fast.pack()) == msgspec.json.encode(book.pack())
