"""FastMCP and elicitor in one process under one OpenTelemetry SDK, each side calling the other; prints the spans.

``python -m tests.peers.fastmcp_traced`` sets the global tracer provider (FastMCP uses the global one, so this runs
in a process of its own), serves an elicitor server and a FastMCP server over HTTP (uvicorn, loopback), then
FastMCP's client calls elicitor's server and elicitor's client calls FastMCP's server, each tool asking once. Every
finished span is printed as one JSON object per line: the interop test reads them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import anyio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

EXPORTED = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(EXPORTED))
trace.set_tracer_provider(provider)

from fastmcp import Client as FastClient  # noqa: E402  (after the provider: FastMCP reads it when it traces)
from fastmcp import Context as FastContext  # noqa: E402
from fastmcp import FastMCP  # noqa: E402

from elicitor import Accepted, Client, Context, ScriptedHandler, Server  # noqa: E402
from tests.conftest import serving  # noqa: E402


@dataclass
class Person:
    name: str


ours = Server("ours", "1.0")


@ours.tool()
async def greet(ctx: Context) -> str:
    """elicitor's tool: asks FastMCP's client."""
    answer = await ctx.elicit("Your name?", Person)
    return f"hello {answer.data.name}" if isinstance(answer, Accepted) else answer.action


theirs = FastMCP("theirs")


@theirs.tool
async def welcome(ctx: FastContext) -> str:
    """FastMCP's tool: asks elicitor's client."""
    result = await ctx.elicit("Your name?", response_type=Person)
    return f"welcome {result.data.name}" if result.action == "accept" else result.action


async def fast_answer(message: str, response_type: object, params: object, context: object) -> Person:
    return Person(name="Grace")


async def main() -> None:
    async with serving(ours.http_app()) as ours_url, serving(theirs.http_app(path="/mcp")) as theirs_url:
        async with FastClient(ours_url, elicitation_handler=fast_answer, mode="legacy") as fast:
            result = await fast.call_tool("greet", {})
            assert result.content[0].text == "hello Grace", result
        answers = ScriptedHandler([{"name": "Ada"}])
        async with Client.http(theirs_url, elicitation=answers, protocol="2025-11-25") as client:
            called = await client.call_tool("welcome")
            assert called.text == "welcome Ada", called.text
    provider.force_flush()
    for span in EXPORTED.get_finished_spans():
        print(json.dumps({
            "name": span.name,
            "kind": span.kind.name,
            "scope": span.instrumentation_scope.name if span.instrumentation_scope else "",
            "trace": format(span.context.trace_id, "032x"),
            "span": format(span.context.span_id, "016x"),
            "parent": format(span.parent.span_id, "016x") if span.parent else None,
            "attributes": dict(span.attributes or {}),
        }))  # fmt: skip


if __name__ == "__main__":
    anyio.run(main)
