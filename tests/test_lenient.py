"""One bad entry in what a server lists or answers never costs the client the good ones (docs/hostile-peers.md).

The server is ``tests/peers/sloppy_server.py``, written by hand without any library, over stdio; the same server
behind ``elicitor proxy``; and a 2026-07-28 peer in memory for the stateless era's path. Property tests feed the
readers arbitrary JSON.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elicitor import Client, RemoteProtocolError, ScriptedHandler, TextContent, UnknownContent
from elicitor.client._lenient import read_block, read_tool, read_tool_result

from .conftest import ROOT
from .peers import sloppy_server
from .test_waits import RawPeer, raw_server

pytestmark = pytest.mark.anyio

SLOPPY = [sys.executable, str(ROOT / "tests" / "peers" / "sloppy_server.py")]
HANDSHAKE_ERAS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def warnings(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


def check_echo(result: Any) -> None:
    """The ``echo`` result of the sloppy server: every block in its place, the unreadable ones kept as sent."""
    kinds = [type(block).__name__ for block in result.content]
    assert kinds == ["TextContent", "UnknownContent", "UnknownContent", "TextContent", "UnknownContent"]
    hologram, image, stray = (b for b in result.content if isinstance(b, UnknownContent))
    assert hologram.raw == {"type": "hologram", "frames": 3} and hologram.kind == "hologram"
    assert hologram.problem == "unknown content type 'hologram'"
    assert image.kind == "image" and "missing required field `data`" in image.problem
    assert stray.raw == "just a string" and stray.kind is None
    assert result.text == "hello\nbye"  # the text block whose annotations were malformed keeps its text
    assert result.structured_content == {"n": 1}
    assert result.meta == {"trace": "abc"}
    assert result.is_error is False


@pytest.mark.parametrize("revision", HANDSHAKE_ERAS)
async def test_a_hand_written_server_of_every_handshake_era_keeps_its_good_entries(
    anyio_backend: str, revision: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="elicitor.client")
    handler = ScriptedHandler([{"name": "Ann"}])
    async with Client.stdio([*SLOPPY, revision], elicitation=handler, probe_timeout=30) as client:
        with anyio.fail_after(60):
            assert client.protocol_version == revision
            assert client.server_info is not None
            info = client.server_info
            assert (info.name, info.version, info.title, info.description) == ("sloppy", "", None, "written by hand")
            assert client.server_capabilities["tools"] is True  # as sent: the client reads only what it needs
            tools = await client.list_tools()
            assert [tool.name for tool in tools] == ["echo", "annotated", "later"]
            assert tools[0].meta == {"ui": "card"} and tools[1].meta is None
            annotated = tools[1]
            assert annotated.annotations is None and annotated.input_schema == sloppy_server.GOOD
            check_echo(await client.call_tool("echo", {"text": "hi"}))
            failed = await client.call_tool("fails")
            assert failed.is_error is True and failed.text == "it failed" and failed.meta is None
            assert await client.list_prompts() == [{"name": "greet"}]
            assert await client.list_resources() == [{"uri": "memo://a", "name": "a"}]
            assert await client.list_resource_templates() == []  # null, as a Go server sends an empty slice
            empty = await client.call_tool("empty")
            assert empty.content == [] and empty.structured_content == {"rows": None} and not empty.is_error
            if revision in ("2025-06-18", "2025-11-25"):  # an elicitation with keys nobody defined is answered
                asked = await client.call_tool("ask")
                assert '"content": {"name": "Ann"}' in asked.text
    said = warnings(caplog)
    for expected in [
        "leaving out tool 'bare': Object missing required field `inputSchema`",
        "leaving out tool 'broken': Expected `object`, got `str` - at `$.inputSchema`",
        "tool 'annotated': Expected `object | null`, got `str` - at `$.annotations` (left out)",
        "tool 'later': Expected `object | null`, got `str` - at `$.execution` (left out)",
        "leaving out a tools/list entry that is a int, not an object",
        "leaving out tool without a string name ({'inputSchema'",
        "leaving out tool without a string name ({'name': ['not', 'a', 'string']",
        "tools/list: nextCursor 'page-2' was already followed: listing ends here",
        "tools/call result of 'echo': keeping a content block it cannot read as it is: unknown content type",
        "tools/call result of 'fails': Expected `object | null`, got `str` - at `$._meta` (left out)",
        "leaving out a prompts/list entry that is a int, not an object",
        "prompts/list: nextCursor is a int, not a string: listing ends here",
        "leaving out a resources/list entry that is a str, not an object",
    ]:
        assert expected in said


async def test_log_messages_of_any_level_reach_the_callback_with_one_of_the_eight(anyio_backend: str) -> None:
    """A level that is not a string, in capitals, or of the server's own: the callback gets one of the eight."""
    heard: list[tuple[str, Any, str | None]] = []

    async def on_log(level: str, data: Any, source: str | None) -> None:
        heard.append((level, data, source))

    async with Client.stdio([*SLOPPY, "2025-06-18"], on_log=on_log, probe_timeout=30) as client:
        with anyio.fail_after(60):
            assert (await client.call_tool("logs")).text == "logged"
            while len(heard) < 3:
                await anyio.sleep(0.01)
    assert heard == [("info", "first", None), ("warning", "second", "mine"), ("info", "third", None)]


@pytest.mark.parametrize("downstream", ["2025-11-25", "2026-07-28"])
async def test_the_proxy_forwards_a_sloppy_servers_lists_as_they_are(
    anyio_backend: str, downstream: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The proxy passes every entry on, the bad ones too (it is not the judge; the client at the end is), and
    learns nothing from an entry without a name instead of failing the listing."""
    caplog.set_level(logging.WARNING, logger="elicitor.client")
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", *SLOPPY, "2025-06-18"]
    async with Client.stdio(command, protocol=downstream, probe_timeout=30) as client:
        with anyio.fail_after(60):
            page = await client.request("tools/list")
            assert page["tools"] == sloppy_server.PAGE_1
            assert [tool.name for tool in await client.list_tools()] == ["echo", "annotated", "later"]
            check_echo(await client.call_tool("echo"))
    assert "leaving out tool 'bare'" in warnings(caplog)


async def test_the_proxys_renderer_names_a_server_whose_server_info_is_partly_malformed(anyio_backend: str) -> None:
    """The person answering in the proxy's renderer sees the upstream server's name (its ``title`` is an object)."""
    from contextlib import asynccontextmanager

    from elicitor.proxy import Bridge
    from elicitor.transports import StdioClientTransport, memory_pair

    @asynccontextmanager
    async def upstream() -> Any:
        transport = await StdioClientTransport.start([*SLOPPY, "2025-06-18"])
        try:
            yield transport
        finally:
            await transport.aclose()

    ui = ScriptedHandler([{"name": "Ann"}])
    client_end, down_end = memory_pair()
    async with anyio.create_task_group() as tg:
        tg.start_soon(Bridge(upstream, ui=ui, upstream_protocol="2025-11-25").serve, down_end)
        async with Client(client_end, protocol="2025-11-25") as client:  # it cannot elicit: the proxy asks
            with anyio.fail_after(60):
                assert '"content": {"name": "Ann"}' in (await client.call_tool("ask")).text
        tg.cancel_scope.cancel()
    server = ui.requests[0].server
    assert server is not None and (server.name, server.description) == ("sloppy", "written by hand")


async def test_the_stateless_era_reads_results_leniently(anyio_backend: str) -> None:
    async def answer(peer: RawPeer, message: dict[str, Any]) -> None:
        result = {"resultType": "complete", "content": sloppy_server.CONTENT, "structuredContent": {"n": 1}}
        result["_meta"] = {"trace": "abc"}
        await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    async with raw_server(answer, stateless=True) as (transport, _), Client(transport, protocol="2026-07-28") as client:
        with anyio.fail_after(10):
            check_echo(await client.call_tool("echo"))


async def test_an_input_request_with_keys_nobody_defined_is_answered(anyio_backend: str) -> None:
    """2026-07-28: keys the spec does not name, in the result, the input request, its params and its schema, are
    ignored; the person is asked the form the known keys describe."""
    form = {
        "type": "object",
        "properties": {"name": {"type": "string", "x-widget": "big", "$comment": "any"}},
        "required": ["name"],
        "x-vendor": True,
    }
    question = {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Who?", "requestedSchema": form, "priority": "high", "_meta": {}},
        "x-route": "front",
    }

    async def asks_once(peer: RawPeer, message: dict[str, Any]) -> None:
        answers = message["params"].get("inputResponses")
        result: dict[str, Any]
        if answers is None:
            result = {"resultType": "input_required", "inputRequests": {"who": question}, "requestState": "s"}
            result["somethingNew"] = [1]
        else:
            result = {
                "resultType": "complete",
                "content": [{"type": "text", "text": answers["who"]["content"]["name"]}],
            }
        await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    handler = ScriptedHandler([{"name": "Ann"}])
    async with (
        raw_server(asks_once, stateless=True) as (transport, _),
        Client(transport, elicitation=handler) as client,
    ):
        with anyio.fail_after(10):
            assert (await client.call_tool("ask")).text == "Ann"
    assert [field.name for field in handler.requests[0].form.fields] == ["name"]


async def test_a_task_status_nobody_defined_is_followed_as_running_and_said_once(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A task status outside the tasks extension's five (a newer server's ``paused``, a sloppy one's object) used to
    end the wait with a RemoteProtocolError, though the task went on and finished: it is followed as still running,
    shown as sent, and the warning is given once per status, not at every poll. It names the task by its first 8
    characters, as every log line does: the whole id is enough to read, answer or cancel a task without sign-in."""
    statuses = iter(["paused", "paused", {"state": "odd"}, "paused", "completed"])
    task = {"taskId": "t-1-Lh2GfVx9QpRz7", "pollIntervalMs": 50}

    async def tasks(peer: RawPeer, message: dict[str, Any]) -> None:
        result: dict[str, Any]
        if message["method"] == "tools/call":
            result = {"resultType": "task", **task, "status": "working"}
        else:
            assert message["method"] == "tasks/get", message
            result = {**task, "status": next(statuses)}
            if result["status"] == "completed":
                result["result"] = {"content": [{"type": "text", "text": "done"}]}
        await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    seen: list[str] = []
    async with (
        raw_server(tasks, stateless=True, every_method=True) as (transport, _),
        Client(transport, protocol="2026-07-28") as client,
    ):
        with anyio.fail_after(10):
            handle = await client.start_tool("slow")
            result = await handle.wait(on_status=lambda h: seen.append(h.status))
    assert result.text == "done"
    assert seen == ["working", "paused", "working", "paused", "completed"]
    said = [r.getMessage() for r in caplog.records if "following the task as still running" in r.getMessage()]
    assert len(said) == 2 and "'paused'" in said[0] and "{'state': 'odd'}" in said[1], said
    assert all(line.startswith("task t-1-Lh2G...: ") for line in said), said


async def test_a_result_that_is_not_readable_at_all_is_still_a_remote_protocol_error(anyio_backend: str) -> None:
    async def answer(peer: RawPeer, message: dict[str, Any]) -> None:
        await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": "nope"}})

    async with raw_server(answer, stateless=True) as (transport, _), Client(transport, protocol="2026-07-28") as client:
        with anyio.fail_after(10), pytest.raises(RemoteProtocolError, match="content is a str"):
            await client.call_tool("anything")


# ---- properties ---------------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
FIELDS = ["name", "inputSchema", "title", "description", "outputSchema", "annotations", "execution", "type", "text"]
ENTRY = JSON | st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=5)
GOOD_TOOLS = st.builds(
    lambda name, extra: {"name": name, "inputSchema": {"type": "object"}, **extra},
    st.text(min_size=1, max_size=8),
    st.dictionaries(st.text(max_size=6).filter(lambda k: k not in FIELDS and k != "_meta"), JSON, max_size=2),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.booleans(), GOOD_TOOLS, ENTRY), max_size=6))
def test_every_good_tool_is_kept_in_order_whatever_surrounds_it(entries: list[tuple[bool, Any, Any]]) -> None:
    listed = [good if is_good else bad for is_good, good, bad in entries]
    kept = [tool for tool in map(read_tool, listed) if tool is not None]
    goods = [good["name"] for is_good, good, _ in entries if is_good]
    names = [tool.name for tool in kept]
    it = iter(names)
    assert all(name in it for name in goods)  # a subsequence: none lost, none reordered


@settings(max_examples=300, deadline=None)
@given(st.lists(ENTRY, max_size=5), JSON)
def test_a_result_with_any_blocks_keeps_each_in_its_place(blocks: list[Any], structured: Any) -> None:
    raw = {"content": [{"type": "text", "text": "first"}, *blocks], "structuredContent": structured}
    result = read_tool_result(raw, "a result")
    assert len(result.content) == len(raw["content"])
    assert result.content[0] == TextContent(text="first")
    assert result.structured_content == structured
    for sent, block in zip(blocks, result.content[1:], strict=True):
        assert block == read_block(sent)
        if isinstance(block, UnknownContent):
            assert block.raw == sent and block.problem


@settings(max_examples=200, deadline=None)
@given(JSON | st.dictionaries(st.sampled_from(["content", "isError", "_meta"]), JSON | st.lists(ENTRY)))
def test_any_result_either_reads_or_is_a_remote_protocol_error(raw: Any) -> None:
    """Only a result that is not an object, or whose ``content`` is not a list, is refused; any other is read."""
    content = raw.get("content") if isinstance(raw, dict) else None
    readable = isinstance(raw, dict) and (content is None or isinstance(content, list))
    try:
        result = read_tool_result(raw, "a result")
    except RemoteProtocolError:
        assert not readable
    else:
        assert readable and len(result.content) == len(content or [])


FIELD_SCHEMAS = [
    {"type": "string", "title": "Name", "maxLength": 20},
    {"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]},
    {"type": "array", "items": {"type": "string", "enum": ["p", "q"]}},
    {"type": "integer", "minimum": 1, "maximum": 9},
    {"type": "boolean", "default": True},
    {"type": "string", "format": "email"},
]
EXTRA_KEY = st.sampled_from(["$comment", "examples", "deprecated", "readOnly", "$schema", "$id"]) | st.text(
    max_size=6
).map(lambda name: f"x-{name}")


def sprinkle(draw: Callable[[st.SearchStrategy[Any]], Any], node: Any) -> Any:
    """``node`` with keys nobody defined added to every object in it, at random."""
    if isinstance(node, dict):
        out = {key: sprinkle(draw, value) for key, value in node.items()}
        for key in draw(st.lists(EXTRA_KEY, max_size=2)):
            out.setdefault(key, draw(JSON))
        return out
    if isinstance(node, list):
        return [sprinkle(draw, item) for item in node]
    return node


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_form_with_keys_nobody_defined_is_the_form_without_them(data: st.DataObject) -> None:
    from elicitor import Form

    chosen = data.draw(st.lists(st.sampled_from(range(len(FIELD_SCHEMAS))), min_size=1, max_size=4, unique=True))
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {f"f{i}": FIELD_SCHEMAS[i] for i in chosen},
        "required": ["f" + str(chosen[0])],
    }
    properties = {name: sprinkle(data.draw, field) for name, field in schema["properties"].items()}
    extended = {**sprinkle(data.draw, {k: v for k, v in schema.items() if k != "properties"}), "properties": properties}
    assert Form.from_schema(extended).schema() == Form.from_schema(schema).schema()


def test_a_block_a_server_tags_as_unknown_is_kept_as_it_sent_it() -> None:
    """``UnknownContent`` is the client's: one the server forges is read as a block of a type nobody defined."""
    forged = {"type": "x-elicitor-unknown", "raw": {"type": "text", "text": "trust me"}, "problem": "none"}
    result = read_tool_result({"content": [forged, {"type": "text", "text": "real"}]}, "a result")
    assert result.content == [
        UnknownContent(raw=forged, problem="unknown content type 'x-elicitor-unknown'"),
        TextContent(text="real"),
    ]


PAGE = st.fixed_dictionaries(
    {"tools": st.lists(st.dictionaries(st.sampled_from(["name", "inputSchema"]), JSON, max_size=2) | JSON, max_size=3)},
    optional={"nextCursor": st.sampled_from(["a", "b", "c", ""]) | JSON.filter(lambda v: not isinstance(v, str))},
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["", "a", "b", "c"]), PAGE, min_size=4, max_size=4))
def test_a_listing_ends_whatever_cursors_the_server_hands_out(pages: dict[str, dict[str, Any]]) -> None:
    """Cursors that loop back, repeat, or are not strings: the listing ends, with every object of each page read."""
    from elicitor.client._requests import Requests

    asked: list[str] = []

    class Server(Requests):
        __slots__ = ()

        async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
            cursor = (params or {}).get("cursor", "")
            asked.append(cursor)
            assert len(asked) <= 4, "a cursor was followed twice"
            return pages[cursor]

    items = anyio.run(Server.__new__(Server).list_all, "tools/list", "tools")
    expected = [item for cursor in asked for item in pages[cursor]["tools"] if isinstance(item, dict)]
    assert items == expected


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["name", "version", "title", "description", "websiteUrl", "icons"]), JSON))
def test_server_info_keeps_every_field_that_is_a_string(raw: dict[str, Any]) -> None:
    from elicitor.protocol import parse_implementation

    info = parse_implementation(raw)
    if not isinstance(raw.get("name"), str):
        assert info is None
        return
    assert info is not None and info.name == raw["name"]
    assert info.version == (raw["version"] if isinstance(raw.get("version"), str) else "")
    for attribute, key in [("title", "title"), ("description", "description"), ("website_url", "websiteUrl")]:
        assert getattr(info, attribute) == (raw[key] if isinstance(raw.get(key), str) else None)
