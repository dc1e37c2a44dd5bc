"""elicitor's Client as the official conformance harness's client command.

    conformance client --command "python examples/conformance_client.py" --scenario tools_call

The harness starts a mock server and runs this script with the server's URL as the last argument, naming the
scenario in ``MCP_CONFORMANCE_SCENARIO``, the revision in ``MCP_CONFORMANCE_PROTOCOL_VERSION`` (0.2.x) and extra
inputs in ``MCP_CONFORMANCE_CONTEXT``. The script does what any client would: connect, list what the server
offers, use it — answering every elicitation with the schema's defaults (an empty accept, which the client fills
in), every sampling request with a canned message, every roots request with one root. With
``ELICITOR_CONFORMANCE_VIA_PROXY=1`` it reaches the server through ``elicitor proxy`` instead (scripts/conformance.py
runs every scenario both ways).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio

from elicitor import Accepted, Client, ElicitorError, ScriptedHandler
from elicitor.client.auth import OAuth
from elicitor.types import ALL_REVISIONS

CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
"""Where the harness expects this client's Client ID Metadata Document (it never fetches it)."""


def _arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Plausible arguments for an input schema: one value per required property."""
    values = {"number": 1, "integer": 1, "boolean": True, "string": "test", "array": [], "object": {}}
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    return {
        name: values.get(str(prop.get("type")), "test")
        for name, prop in properties.items()
        if name in schema.get("required", []) and isinstance(prop, dict)
    }


async def _sample(params: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "canned",
        "stopReason": "endTurn",
    }


async def main(url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or "auto"
    if version not in ALL_REVISIONS:  # 2025-03-26 scenarios test sign-in, which works the same: negotiate
        version = "auto"
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    handler = ScriptedHandler(otherwise=Accepted({}))
    roots = [{"uri": "file:///conformance", "name": "conformance"}]
    options: dict[str, Any] = {"elicitation": handler, "protocol": version, "sampling": _sample, "roots": roots}
    # ELICITOR_CONFORMANCE_VIA_PROXY=1: reach the harness's server through `elicitor proxy` (stdio to us, HTTP on).
    via_proxy = os.environ.get("ELICITOR_CONFORMANCE_VIA_PROXY") == "1"
    proxy = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", url]
    if scenario.startswith("auth/"):
        # Sign in headless (the harness's authorization server approves at once and redirects), with the
        # pre-registered credentials it hands over, and the Client ID Metadata Document URL it expects.
        options["auth"] = OAuth(
            client_id=context.get("client_id"),
            client_secret=context.get("client_secret"),
            client_metadata_url=CLIENT_METADATA_URL,
            client_name="elicitor conformance client",
        )
    connection = Client.stdio(proxy, **options) if via_proxy else Client.http(url, **options)
    async with connection as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        if scenario == "tools_call" and "add_numbers" in tools:
            await client.call_tool("add_numbers", {"a": 5, "b": 3})
            return
        if "json_schema_echo" in tools and "json_schema_2020_12_tool" in tools:
            await client.call_tool("json_schema_echo", {"schema": tools["json_schema_2020_12_tool"].input_schema})
            return
        calls = context.get("toolCalls")
        if isinstance(calls, list):
            planned = [(call["name"], call.get("arguments", {})) for call in calls if call.get("name") in tools]
        else:
            planned = [(name, _arguments(tool.input_schema)) for name, tool in tools.items()]
        for name, arguments in planned:
            try:
                await client.call_tool(name, arguments)
            except ElicitorError as exc:
                print(f"tools/call {name}: {exc}", file=sys.stderr)
        await _browse(client)


async def _browse(client: Client) -> None:
    """Read what else the server lists, so that every request kind is exercised."""
    capabilities = client.server_capabilities
    try:
        if "resources" in capabilities:
            for resource in await client.list_resources():
                await client.read_resource(str(resource.get("uri")))
        if "prompts" in capabilities:
            for prompt in await client.list_prompts():
                arguments = {a["name"]: "test" for a in prompt.get("arguments", []) if a.get("required")}
                await client.get_prompt(str(prompt.get("name")), arguments)
    except ElicitorError as exc:
        print(f"browsing: {exc}", file=sys.stderr)


if __name__ == "__main__":
    anyio.run(main, sys.argv[-1])
