"""A server with the official conformance fixtures for elicitation, each written once for every revision.

Run it over stdio, or over Streamable HTTP at http://127.0.0.1:PORT/mcp::

    python examples/everything_server.py --stdio
    python examples/everything_server.py --port 8765

Every tool below uses the ordinary ``ctx.elicit`` API: on 2025-06-18 and 2025-11-25 it sends
``elicitation/create`` in the middle of the call; on 2026-07-28 the same code answers ``input_required`` and
finishes when the client retries with the answers.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import sys
import wave
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import anyio

from elicitor import (
    Accepted,
    AudioContent,
    Choices,
    Context,
    EmbeddedResource,
    Field,
    ImageContent,
    InvalidAnswer,
    JSONRPCError,
    Server,
    TextContent,
)
from elicitor.server import Header, UrlElicitationRequired
from elicitor.types import INTERNAL_ERROR

server = Server("elicitor-everything", "1.0.0", title="elicitor conformance fixtures")


@dataclass
class UserResponse:
    username: Annotated[str, Field(description="User's response")]
    email: Annotated[str, Field(description="User's email address")]


@server.tool()
async def test_elicitation(ctx: Context, message: str) -> str:
    """Ask the user for a username and an email address (conformance: tools-call-elicitation)."""
    outcome = await ctx.elicit(message, UserResponse)
    if isinstance(outcome, Accepted):
        data = outcome.data
        return f"User response: action=accept, content={{'username': {data.username!r}, 'email': {data.email!r}}}"
    return f"User response: action={outcome.action}"


@dataclass
class Defaults:
    name: str = "John Doe"
    age: int = 30
    score: float = 95.5
    status: Literal["active", "inactive", "pending"] = "active"
    verified: bool = True


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Ask with a default on every primitive type (conformance: elicitation-sep1034-defaults)."""
    outcome = await ctx.elicit("Please review and update the form fields with defaults", Defaults)
    if isinstance(outcome, Accepted):
        return f"Elicitation completed: action=accept, content={outcome.data!r}"
    return f"Elicitation completed: action={outcome.action}"


class Titled(Choices):
    VALUE1 = "value1", "First Option"
    VALUE2 = "value2", "Second Option"
    VALUE3 = "value3", "Third Option"


class Legacy(Choices):
    OPT1 = "opt1", "Option One"
    OPT2 = "opt2", "Option Two"
    OPT3 = "opt3", "Option Three"


class TitledMulti(Choices):
    VALUE1 = "value1", "First Choice"
    VALUE2 = "value2", "Second Choice"
    VALUE3 = "value3", "Third Choice"


Plain = Literal["option1", "option2", "option3"]


@dataclass
class EnumForm:
    untitledSingle: Plain | None = None
    titledSingle: Titled | None = None
    legacyEnum: Annotated[Legacy | None, Field(enum_names=True)] = None
    untitledMulti: list[Plain] | None = None
    titledMulti: list[TitledMulti] | None = None


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Ask with all five enum variants (conformance: elicitation-sep1330-enums)."""
    try:
        outcome = await ctx.elicit("Please select options from the enum fields", EnumForm)
    except InvalidAnswer as exc:
        return f"Elicitation completed: action=accept, but the answer was invalid: {exc}"
    if isinstance(outcome, Accepted):
        return f"Elicitation completed: action=accept, content={outcome.data!r}"
    return f"Elicitation completed: action={outcome.action}"


NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Ask for a name under the input key ``user_name`` (conformance: input-required-result-*)."""
    outcome = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    if isinstance(outcome, Accepted):
        return f"Hello, {outcome.data['name']}!"
    return f"No name given ({outcome.action})"


@server.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Two questions in two rounds (conformance: input-required-result-multi-round)."""
    first = await ctx.elicit("Step 1: What is your name?", NAME_FORM, key="step1")
    color_form = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
    second = await ctx.elicit("Step 2: What is your favorite color?", color_form, key="step2")
    if isinstance(first, Accepted) and isinstance(second, Accepted):
        return f"{first.data['name']} likes {second.data['color']}"
    return "Not all steps were answered"


@server.tool()
async def test_input_required_result_request_state(ctx: Context) -> str:
    """A question whose answer comes back with the sealed state (conformance: ...-request-state)."""
    form = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    outcome = await ctx.elicit("Please confirm", form, key="confirm")
    return f"state-ok: {outcome.action}"


@server.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Any question: a tampered requestState on the retry must be refused (conformance: ...-tampered-state)."""
    outcome = await ctx.elicit("Please confirm", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
    return f"answered: {outcome.action}"


def _text_of(sampled: dict[str, Any]) -> str:
    content = sampled.get("content")
    if isinstance(content, list):
        content = content[0] if content else {}
    return str(content.get("text", "")) if isinstance(content, dict) else ""


@server.tool()
async def test_sampling(ctx: Context, prompt: str) -> str:
    """Ask the client's model (conformance: tools-call-sampling)."""
    return f"LLM response: {_text_of(await ctx.sample(prompt, max_tokens=100))}"


@server.tool()
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Sampling under the input key ``capital_question`` (conformance: input-required-result-basic-sampling)."""
    sampled = await ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return f"The model says: {_text_of(sampled)}"


@server.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """The client's roots under the input key ``client_roots`` (conformance: input-required-result-basic-list-roots)."""
    roots = await ctx.list_roots(key="client_roots")
    return "Roots: " + ", ".join(str(root.get("uri")) for root in roots)


@server.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """An elicitation, a sampling and a roots request in one round (conformance: ...-multiple-input-requests)."""
    found: dict[str, Any] = {}

    async def name() -> None:
        found["name"] = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")

    async def greeting() -> None:
        found["greeting"] = await ctx.sample("Generate a greeting", max_tokens=50, key="greeting")

    async def roots() -> None:
        found["roots"] = await ctx.list_roots(key="client_roots")

    async with anyio.create_task_group() as tg:
        for step in (name, greeting, roots):
            tg.start_soon(step)
    return f"name: {found['name'].action}, greeting: {_text_of(found['greeting'])}, roots: {len(found['roots'])}"


@server.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs sampling: a client without it gets -32021 naming sampling (conformance: server-stateless)."""
    return _text_of(await ctx.sample("Say hi", max_tokens=10))


@server.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Streams a notification, then asks (conformance: server-stateless; no independent request on the stream)."""
    await ctx.report_progress(0, 1, "asking")
    outcome = await ctx.elicit("Stream me a name", NAME_FORM, key="stream_name")
    return f"streamed: {outcome.action}"


@server.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs at info: only clients that asked for a log level hear it (conformance: server-stateless)."""
    await ctx.log("info", "test_logging_tool ran")
    return "logged"


@server.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only for what the client declared (conformance: input-required-result-capability-check)."""
    answers: list[str] = []
    if ctx.can_elicit():
        answers.append((await ctx.elicit("What is your name?", NAME_FORM, key="user_name")).action)
    if ctx.capabilities.sampling:
        answers.append(_text_of(await ctx.sample("Say hello", max_tokens=20, key="hello")))
    return f"asked for {len(answers)} thing(s)"


@server.tool()
async def test_header_mirroring(region: Annotated[str, Header("Region")], query: str = "") -> str:
    """A parameter mirrored into the Mcp-Param-Region header (conformance: http-custom-header-server-validation)."""
    return f"{query or 'nothing'} in {region}"


# ---- the rest of the harness's fixtures: content types, errors, logging, progress, JSON Schema 2020-12 ----

RED_PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="


def _silence_wav() -> str:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\0\0" * 80)
    return base64.b64encode(buffer.getvalue()).decode()


@server.tool()
async def test_simple_text() -> str:
    """Return simple text."""
    return "This is a simple text response for testing."


@server.tool()
async def test_image_content() -> ImageContent:
    """Return an image (a 1x1 red PNG)."""
    return ImageContent(data=RED_PIXEL_PNG, mime_type="image/png")


@server.tool()
async def test_audio_content() -> AudioContent:
    """Return audio (10 ms of silence, WAV)."""
    return AudioContent(data=_silence_wav(), mime_type="audio/wav")


@server.tool()
async def test_embedded_resource() -> EmbeddedResource:
    """Return an embedded text resource."""
    resource = {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    }
    return EmbeddedResource(resource=resource)


@server.tool()
async def test_multiple_content_types() -> list[Any]:
    """Return text, an image and an embedded resource together."""
    resource = {
        "uri": "test://mixed-content-resource",
        "mimeType": "application/json",
        "text": '{"test":"data","value":123}',
    }
    return [
        TextContent(text="Multiple content types test:"),
        ImageContent(data=RED_PIXEL_PNG, mime_type="image/png"),
        EmbeddedResource(resource=resource),
    ]


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Send three log messages while working."""
    await ctx.log("info", "Tool execution started")
    await anyio.sleep(0.05)
    await ctx.log("info", "Tool processing data")
    await anyio.sleep(0.05)
    await ctx.log("info", "Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Report progress 0, 50, 100 of 100."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100)
        if step < 100:
            await anyio.sleep(0.05)
    return "Tool with progress executed successfully"


@server.tool()
async def test_error_handling() -> str:
    """Always fail."""
    raise RuntimeError("This tool intentionally returns an error for testing")


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@server.tool(input_schema=JSON_SCHEMA_2020_12, description="Tool with JSON Schema 2020-12 features")
async def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    return f"contact {name or 'someone'} by {contactMethod or 'email'}"


@server.tool()
async def test_trigger_tool_change() -> str:
    """Add or remove a tool, and tell listening clients (conformance: server-stateless list changes)."""
    if "dynamic_tool" in server.tools:
        server.remove_tool("dynamic_tool")
    else:

        @server.tool(name="dynamic_tool")
        async def dynamic() -> str:
            """A tool that test_trigger_tool_change adds and removes."""
            return "I come and go"

    server.notify_tools_changed()
    return "tools changed"


@server.tool()
async def test_trigger_prompt_change() -> str:
    """Tell listening clients the prompt list changed (conformance: server-stateless list changes)."""
    server.notify_prompts_changed()
    return "prompts changed"


# ---- URL mode: open the fixture's URL with a plain GET to complete it -------------------------------------------

FIXTURE_URL = "http://localhost:{port}/fixture/complete/{elicitation_id}"
PORT = {"value": 0}


def _fixture_url() -> str:
    return FIXTURE_URL.replace("{port}", str(PORT["value"] or 8000))


@server.tool()
async def test_elicitation_url(ctx: Context) -> str:
    """Ask the person to open a URL; return what they answered (URL mode)."""
    outcome = await ctx.elicit_url("Please open this page to continue", _fixture_url())
    return f"URL elicitation: action={outcome.action}"


@server.tool()
async def test_elicitation_url_required(ctx: Context) -> str:
    """Needs an out-of-band step: -32042 (2025-11-25) or a URL input request (2026-07-28) until it is done."""
    link = await ctx.url_elicitation("Connect the test service to continue", _fixture_url())
    if not link.completed:
        raise UrlElicitationRequired(link)
    return "connected: the URL elicitation was completed"


async def fixture_pages(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """GET /fixture/complete/<id>: the 'third party' page. Opening it completes that elicitation (test fixture)."""
    path = str(scope.get("path", ""))
    done = False
    if scope["type"] == "http" and scope["method"] == "GET" and path.startswith("/fixture/complete/"):
        done = await server.complete_url_elicitation(path.rsplit("/", 1)[-1])
    body = b"<p>Done. You can close this page.</p>" if done else b"<p>Unknown or finished link.</p>"
    status = 200 if done else 404
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/html")]})
    await send({"type": "http.response.body", "body": body})


# ---- tasks (2026-07-28 extension io.modelcontextprotocol/tasks): conformance tasks-* ----------------------------


@server.tool()
async def greet(name: str) -> str:
    """An ordinary call, never a task."""
    return f"Hello, {name}!"


@server.tool(task="optional")
async def slow_compute(ctx: Context, seconds: float = 1.0, label: str = "") -> str:
    """Sleep ``seconds`` as a task, with progress in the task's status message; cancelling it cancels the sleep."""
    await ctx.report_progress(0, 1, f"computing {label}".strip())
    await anyio.sleep(seconds)
    return f"computed {label} in {seconds:g} s".replace("  ", " ")


@server.tool(task="required")
async def failing_job() -> str:
    """Runs as a task and fails as a tool (``isError``) after a second: the task completes with that result."""
    await anyio.sleep(1)
    raise RuntimeError("the job failed: nothing to process")


@server.tool(task="optional")
async def protocol_error_job() -> str:
    """A JSON-RPC error inside the task: the task fails with that error."""
    await anyio.sleep(0.2)
    raise JSONRPCError(INTERNAL_ERROR, "the job hit an internal error")


@server.tool(task="optional")
async def confirm_delete(ctx: Context, filename: str) -> str:
    """One question mid-task, then done."""
    if await ctx.confirm(f"Delete {filename}?"):
        return f"deleted {filename}"
    return f"kept {filename}"


@dataclass
class PartialAnswer:
    name: str | None = None
    confirm: bool | None = None


@server.tool(task="optional")
async def multi_input(ctx: Context) -> str:
    """Two questions at once (two open input requests; either may be answered first)."""
    found: dict[str, Any] = {}

    async def ask(which: str) -> None:
        found[which] = await ctx.elicit(f"The {which} detail, please", PartialAnswer)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, "first")
        tg.start_soon(ask, "second")
    return ", ".join(f"{k}: {v.action}" for k, v in sorted(found.items()))


@server.tool(task="required", defer_task=True)
async def test_tool_with_task(ctx: Context) -> str:
    """A name asked in an ordinary round, then the rest as a task that greets with it."""
    outcome = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    name = outcome.data["name"] if isinstance(outcome, Accepted) else "stranger"
    await ctx.run_as_task()
    await anyio.sleep(0.2)
    return f"Hello, {name}, from a task!"


# ---- resources, prompts, completion ----------------------------------------------------------------------------


@server.resource("test://static-text", name="static-text", mime_type="text/plain")
async def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", mime_type="image/png")
async def static_binary() -> bytes:
    """A static binary resource (a 1x1 red PNG)."""
    return base64.b64decode(RED_PIXEL_PNG)


@server.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
async def template_data(id: str) -> str:
    """Data for any id."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":"))


@server.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
async def watched_resource() -> str:
    """A resource clients may subscribe to."""
    return "Watched resource content."


@server.prompt()
async def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@server.prompt(arguments={"arg1": "First test argument", "arg2": "Second test argument"})
async def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt(arguments={"resourceUri": "URI of the resource to embed"})
async def test_prompt_with_embedded_resource(resourceUri: str) -> list[Any]:
    """A prompt embedding a resource."""
    resource = {"uri": resourceUri, "mimeType": "text/plain", "text": "Embedded resource content for testing."}
    return [EmbeddedResource(resource=resource), "Please process the embedded resource above."]


@server.prompt()
async def test_prompt_with_image() -> list[Any]:
    """A prompt with an image."""
    return [ImageContent(data=RED_PIXEL_PNG, mime_type="image/png"), "Please analyze the image above."]


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> str:
    """A prompt that asks first (conformance: input-required-result-non-tool-request)."""
    form = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}
    outcome = await ctx.elicit("What context should the prompt use?", form, key="user_context")
    context = outcome.data["context"] if isinstance(outcome, Accepted) else "none"
    return f"Use this context: {context}"


@server.completion
async def complete(ref: dict[str, Any], argument: dict[str, Any], context: dict[str, Any] | None) -> list[str]:
    """Suggest values that start with what was typed so far."""
    words = ["paris", "park", "party", "pasta", "hello", "world"]
    typed = str(argument.get("value", ""))
    return [word for word in words if word.startswith(typed)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="serve over stdin/stdout (the default)")
    mode.add_argument("--port", type=int, help="serve Streamable HTTP on 127.0.0.1:PORT/mcp instead")
    args = parser.parse_args()
    if args.port is not None:
        PORT["value"] = args.port
        print(f"elicitor-everything: serving on http://127.0.0.1:{args.port}/mcp", file=sys.stderr)
        server.run("http", port=args.port, fallback=fixture_pages)
    else:
        print("elicitor-everything: serving on stdio", file=sys.stderr)
        server.run("stdio")


if __name__ == "__main__":
    main()
