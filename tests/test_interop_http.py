"""Interop with the official MCP Python SDK over Streamable HTTP, both directions, both eras."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import anyio
import httpx2 as httpx
import mcp_types as types
import pytest
from mcp import Client as McpClient

from elicitor import Client, ScriptedHandler

from .conftest import ROOT, free_port, serving

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def everything_app() -> Any:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from everything_server import server
    finally:
        sys.path.pop(0)
    return server.http_app()


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
async def test_official_client_over_http(anyio_backend: str, mode: str) -> None:
    asked: list[str] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"username": "u", "email": "e@x.io", "name": "Ada"})

    async with serving(everything_app()) as url, McpClient(url, elicitation_callback=callback, mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        result = await client.call_tool("test_elicitation", {"message": "Who?"})
        assert "action=accept" in result.content[0].text  # type: ignore[union-attr]
        result = await client.call_tool("test_input_required_result_elicitation", {})
        assert result.content[0].text == "Hello, Ada!"  # type: ignore[union-attr]
    assert asked == ["Who?", "What is your name?"]


async def test_our_client_against_the_official_http_server(anyio_backend: str) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "peers" / "mcp_server.py"), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        with anyio.fail_after(20):
            while True:
                try:
                    async with httpx.AsyncClient() as http:
                        await http.get(url)
                    break
                except httpx.TransportError:
                    await anyio.sleep(0.1)
        for protocol, tool, expected in [
            ("2025-11-25", "push_ask", "hello Grace, 30"),
            ("2025-06-18", "push_ask", "hello Grace, 30"),
            ("auto", "resolved_ask", "resolved Grace, 30"),
        ]:
            handler = ScriptedHandler([{"name": "Grace"}])
            async with Client.http(url, elicitation=handler, protocol=protocol) as client:
                assert client.protocol_version == ("2026-07-28" if protocol == "auto" else protocol)
                assert (await client.call_tool(tool)).text == expected
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_official_client_and_our_url_mode_over_http(anyio_backend: str) -> None:
    """URL mode, -32042 and the completion notification, as the official client (2025-11-25) sees them."""
    from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from everything_server import fixture_pages, server
    finally:
        sys.path.pop(0)
    asked: list[types.ElicitRequestParams] = []
    completed: list[str] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept")

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            completed.append(message.params.elicitation_id)

    app = server.http_app(fallback=fixture_pages)
    async with (
        serving(app) as url,
        McpClient(url, elicitation_callback=callback, message_handler=on_message, mode="legacy") as client,
    ):
        result = await client.call_tool("test_elicitation_url", {})
        assert result.content[0].text == "URL elicitation: action=accept"  # type: ignore[union-attr]
        (params,) = asked
        assert isinstance(params, types.ElicitRequestURLParams) and params.mode == "url"
        assert params.elicitation_id and params.url.endswith(params.elicitation_id)

        with pytest.raises(MCPError) as info:
            await client.call_tool("test_elicitation_url_required", {})
        # The SDK's own model of -32042 accepts our error data.
        (required,) = UrlElicitationRequiredError.from_error(info.value.error).elicitations
        assert required.mode == "url" and required.message == "Connect the test service to continue"
        # The person opens the page (here: the fixture's plain GET, on the port actually served).
        base = url.removesuffix("/mcp")
        async with httpx.AsyncClient() as browser:
            page = await browser.get(f"{base}/fixture/complete/{required.elicitation_id}")
        assert page.status_code == 200
        with anyio.fail_after(5):
            while required.elicitation_id not in completed:
                await anyio.sleep(0.01)
        result = await client.call_tool("test_elicitation_url_required", {})
        assert result.content[0].text == "connected: the URL elicitation was completed"  # type: ignore[union-attr]
