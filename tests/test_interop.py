"""Interop with the official MCP Python SDK (PyPI ``mcp``) over real stdio, in both directions."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters

from elicitor import Client, ScriptedHandler

from .conftest import ROOT

pytestmark = pytest.mark.anyio

OURS = StdioServerParameters(command=sys.executable, args=[str(ROOT / "examples" / "everything_server.py")])
THEIRS = [sys.executable, str(ROOT / "tests" / "peers" / "mcp_server.py")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def answering(content: dict[str, Any]) -> Any:
    asked: list[types.ElicitRequestParams] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content=content)

    callback.asked = asked  # type: ignore[attr-defined]
    return callback


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
async def test_official_client_drives_our_server(anyio_backend: str, mode: str) -> None:
    callback = answering({"username": "testuser", "email": "test@example.com", "name": "Ada"})
    async with McpClient(OURS, elicitation_callback=callback, mode=mode) as client:
        expected = "2025-11-25" if mode == "legacy" else "2026-07-28"
        assert client.protocol_version == expected
        tools = await client.list_tools()
        assert "test_elicitation" in {t.name for t in tools.tools}
        result = await client.call_tool("test_elicitation", {"message": "Who are you?"})
        assert not result.is_error
        text = result.content[0].text  # type: ignore[union-attr]
        assert "action=accept" in text and "testuser" in text
        result = await client.call_tool("test_input_required_result_elicitation", {})
        assert result.content[0].text == "Hello, Ada!"  # type: ignore[union-attr]
        result = await client.call_tool("test_elicitation_sep1034_defaults", {})
        assert "action=accept" in result.content[0].text  # type: ignore[union-attr]
    first = callback.asked[0]
    assert first.message == "Who are you?"
    assert first.requested_schema["required"] == ["username", "email"]


async def test_official_client_declining_and_unknown_tool(anyio_backend: str) -> None:
    async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with McpClient(OURS, elicitation_callback=decline, mode="legacy") as client:
        result = await client.call_tool("test_elicitation", {"message": "?"})
        assert result.content[0].text == "User response: action=decline"  # type: ignore[union-attr]


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-11-25"])
async def test_our_client_answers_the_official_servers_push_elicitation(anyio_backend: str, revision: str) -> None:
    handler = ScriptedHandler([{"name": "Grace"}])
    async with Client.stdio(THEIRS, elicitation=handler, protocol=revision, stderr=subprocess.DEVNULL) as client:
        assert client.protocol_version == revision
        assert client.server_info is not None and client.server_info.name == "official-peer"
        result = await client.call_tool("push_ask")
        # Our client filled the schema default (age 30) before sending.
        assert (result.text, result.is_error) == ("hello Grace, 30", False)
    (request,) = handler.requests
    assert request.message == "Who are you?"
    assert {f.name for f in request.form.fields} == {"name", "age"}


@pytest.mark.parametrize("revision", ["auto", "2025-11-25"])
async def test_our_client_through_the_official_resolver(anyio_backend: str, revision: str) -> None:
    handler = ScriptedHandler([{"name": "Lin", "age": 40}])
    async with Client.stdio(THEIRS, elicitation=handler, protocol=revision, stderr=subprocess.DEVNULL) as client:
        assert client.protocol_version == ("2026-07-28" if revision == "auto" else revision)
        result = await client.call_tool("resolved_ask")
        assert result.text == "resolved Lin, 40"
    assert handler.requests[0].message == "Who are you (resolver)?"


async def test_our_client_and_the_official_servers_url_mode(anyio_backend: str) -> None:
    """The official server's URL mode, its -32042 and its completion notification, met by our client."""

    class Person(ScriptedHandler):
        async def wait_done(self, request: Any) -> None:
            return  # the person says they have finished in the browser

    handler = Person(["accept", "accept"], modes=frozenset({"form", "url"}))
    async with Client.stdio(THEIRS, elicitation=handler, protocol="2025-11-25", stderr=subprocess.DEVNULL) as client:
        assert client.elicitation_modes == frozenset({"form", "url"})
        assert (await client.call_tool("push_url")).text == "accept"
        with anyio.fail_after(5):
            await client.wait_url_completion("peer-1")  # the server's notification arrived and was matched
        assert (await client.call_tool("url_required")).text == "connected"  # -32042, presented, retried
    first, second = handler.url_requests
    assert (first.elicitation_id, first.host) == ("peer-1", "auth.example.com")
    assert (second.elicitation_id, second.message) == ("peer-2", "Connect")


async def test_our_handlers_inside_the_official_client(anyio_backend: str) -> None:
    """sdk_elicitation_callback: a host built on the official SDK answers with an elicitor handler in one line."""
    from elicitor import Accepted, TerminalHandler
    from elicitor.client import UrlElicitationRequest, sdk_elicitation_callback

    lines = iter(["", "Ada", "ada@example.com", "", ""])  # TerminalHandler: answer now, fields, then submit
    shown: list[str] = []
    terminal = TerminalHandler(read_line=lambda prompt: next(lines), write=shown.append)
    async with McpClient(OURS, elicitation_callback=sdk_elicitation_callback(terminal), mode="legacy") as client:
        result = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    assert "action=accept" in result.content[0].text  # type: ignore[union-attr]
    assert "Ada" in result.content[0].text  # type: ignore[union-attr]
    assert any("elicitor conformance fixtures" in line and "asks" in line for line in shown)  # which server asks

    class Invalid(ScriptedHandler):
        async def url(self, request: UrlElicitationRequest) -> Any:
            self.url_requests.append(request)
            return Accepted(None)

    # An invalid answer never leaves: the handler is asked again with the errors, then the request is cancelled.
    scripted = Invalid([{"username": 5}] * 5 + ["accept"], modes=frozenset({"form", "url"}), retry_invalid=True)
    async with McpClient(OURS, elicitation_callback=sdk_elicitation_callback(scripted), mode="legacy") as client:
        result = await client.call_tool("test_elicitation", {"message": "?"})
        assert "action=cancel" in result.content[0].text  # type: ignore[union-attr]
        assert len(scripted.requests) == 5 and scripted.requests[-1].errors
        result = await client.call_tool("test_elicitation_url", {})
        assert result.content[0].text == "URL elicitation: action=accept"  # type: ignore[union-attr]
    assert scripted.url_requests[0].elicitation_id is not None
