"""elicitor.testing and the answer shapes docs/testing.md promises, on both eras."""

from __future__ import annotations

import dataclasses
import enum
import sys
from pathlib import Path
from typing import Literal

import anyio
import pytest

from elicitor import (
    Accepted,
    Client,
    ConnectionClosed,
    Context,
    ElicitationRequest,
    InvalidScriptedAnswer,
    JSONRPCError,
    ScriptedHandler,
    Server,
    UrlElicitationRequest,
    UrlElicitationRequired,
)
from elicitor.testing import connected

pytestmark = pytest.mark.anyio


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


server = Server("testing-recipe")
seen: dict[str, object] = {}


@server.tool()
async def every_shape(ctx: Context) -> str:
    seen["bool"] = await ctx.elicit("A yes or no?", bool)
    seen["enum"] = await ctx.elicit("A color?", Color)
    seen["list"] = await ctx.elicit("Some colors?", list[Color])
    seen["confirm"] = await ctx.confirm("Go ahead?")
    return "asked"


@server.tool()
async def whose(ctx: Context) -> str:
    link = await ctx.url_elicitation("Connect", "https://example.com/connect/{elicitation_id}")
    refused = not await server.complete_url_elicitation(link.id, principal="mallory")
    accepted = await server.complete_url_elicitation(link.id, principal=ctx.principal)
    return f"{ctx.principal} refused={refused} accepted={accepted}"


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_the_documented_answer_shapes(anyio_backend: str, protocol: str) -> None:
    handler = ScriptedHandler([{"value": True}, {"value": "red"}, {"value": ["red", "blue"]}, {"confirm": True}])
    async with connected(server, elicitation=handler, protocol=protocol) as client:
        assert (await client.call_tool("every_shape")).text == "asked"
    assert seen == {
        "bool": Accepted(True),
        "enum": Accepted(Color.RED),
        "list": Accepted([Color.RED, Color.BLUE]),
        "confirm": True,
    }
    assert all(not request.errors for request in handler.requests)


async def test_a_connection_runs_as_its_principal(anyio_backend: str) -> None:
    handler = ScriptedHandler(modes=frozenset({"form", "url"}))
    async with connected(server, principal="alice", elicitation=handler, protocol="2025-11-25") as client:
        assert (await client.call_tool("whose")).text == "alice refused=True accepted=True"


# ---- a newcomer's server: a typed form with a multi-select, a confirmation, ctx.once, a URL step ----------------


class Label(enum.Enum):
    BUG = "bug"
    UI = "ui"


@dataclasses.dataclass
class IssueDetails:
    title: str
    labels: list[Label]


issues = Server("issues")
created: list[str] = []


@issues.tool()
async def create_issue(ctx: Context, repo: str) -> str:
    match await ctx.elicit("Describe the issue", IssueDetails):
        case Accepted(data=details):
            pass
        case refused:
            return f"not created ({refused.action})"
    if not await ctx.confirm(f"Create {details.title!r} in {repo}?"):
        return "not created (not confirmed)"

    def create() -> int:
        created.append(details.title)
        return len(created)

    return f"created #{await ctx.once('create', create)} with {[label.value for label in details.labels]}"


@issues.tool()
async def connect_account(ctx: Context) -> str:
    link = await ctx.url_elicitation("Connect your tracker account", "https://example.com/connect/{elicitation_id}")
    if not link.completed:
        raise UrlElicitationRequired(link)
    return "connected"


@issues.tool()
async def sign_in(ctx: Context) -> str:
    outcome = await ctx.elicit_url("Sign in to the tracker", "https://example.com/sign-in/{elicitation_id}")
    return f"sign-in: {outcome.action}"


@issues.tool()
async def broken() -> str:
    raise RuntimeError("the tracker is down")


@issues.tool()
async def silent() -> str:
    await anyio.sleep_forever()
    return "never"


BOTH = pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
URL_TOO = frozenset({"form", "url"})


async def finish_page(request: ElicitationRequest | UrlElicitationRequest) -> Literal["accept"]:
    """An async answer function, standing in for the person who opens the page and completes it there."""
    assert isinstance(request, UrlElicitationRequest)
    assert await issues.complete_url_elicitation(request.url.rsplit("/", 1)[-1])
    return "accept"


@BOTH
async def test_answer_functions_may_be_async(anyio_backend: str, protocol: str) -> None:
    asked: list[str] = []

    async def describe(request: ElicitationRequest | UrlElicitationRequest) -> dict[str, object]:
        await anyio.sleep(0)  # really awaited: a coroutine object is not an answer
        asked.append(request.message)
        return {"title": "Crash on start", "labels": ["bug", "ui"]}

    async def agree(request: ElicitationRequest | UrlElicitationRequest) -> Literal["accept"]:
        asked.append(request.message)
        return "accept"

    created.clear()
    # Form and URL requests alike; a plain function may also hand back an async one.
    handler = ScriptedHandler([describe, {"confirm": True}, agree, lambda request: finish_page], modes=URL_TOO)
    async with connected(issues, elicitation=handler, protocol=protocol) as client:
        result = await client.call_tool("create_issue", {"repo": "acme/app"})
        assert result.text == "created #1 with ['bug', 'ui']"
        assert (await client.call_tool("sign_in")).text == "sign-in: accept"
        assert (await client.call_tool("connect_account")).text == "connected"
    assert asked == ["Describe the issue", "Sign in to the tracker"]
    assert created == ["Crash on start"]
    assert [r.message for r in handler.url_requests] == ["Sign in to the tracker", "Connect your tracker account"]


async def test_an_invalid_scripted_answer_fails_the_call_saying_why_on_both_eras(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    said: dict[str, str] = {}
    for protocol in ["2025-11-25", "2026-07-28"]:
        created.clear()
        handler = ScriptedHandler([{"title": "Crash", "labels": "bug"}, {"confirm": True}])
        with caplog.at_level("DEBUG"), pytest.raises(InvalidScriptedAnswer) as info:
            async with connected(issues, elicitation=handler, protocol=protocol) as client:
                await client.call_tool("create_issue", {"repo": "acme/app"})
        said[protocol] = str(info.value)
        assert info.value.question == "Describe the issue"
        assert info.value.answer == {"title": "Crash", "labels": "bug"}
        assert [(e.field, e.message) for e in info.value.errors] == [("labels", "expected a list of choices, got text")]
        assert created == []  # the tool did not go on
        # An expected situation in a test: nothing logged as an error, no traceback on either side.
        assert [r.getMessage() for r in caplog.records if r.levelname in ("ERROR", "CRITICAL") or r.exc_info] == []
        caplog.clear()
    expected = (
        "the scripted answer to 'Describe the issue' is invalid: {'title': 'Crash', 'labels': 'bug'}: "
        "labels: expected a list of choices, got text"
    )
    assert said["2025-11-25"] == said["2026-07-28"] == expected


async def test_a_script_without_an_answer_left_fails_the_call_on_both_eras(anyio_backend: str) -> None:
    said: dict[str, str] = {}
    for protocol in ["2025-11-25", "2026-07-28"]:
        handler = ScriptedHandler([{"title": "Crash", "labels": ["bug"]}])  # no answer for the confirmation
        async with connected(issues, elicitation=handler, protocol=protocol) as client:
            with pytest.raises(LookupError) as info:
                await client.call_tool("create_issue", {"repo": "acme/app"})
            said[protocol] = str(info.value)
            # The connection is still good: the next call (with answers) goes through.
            handler.add({"title": "Again", "labels": []}, {"confirm": False})
            assert (await client.call_tool("create_issue", {"repo": "acme/app"})).text == "not created (not confirmed)"
    expected = "ScriptedHandler has no answer left for: \"Create 'Crash' in acme/app?\""
    assert said["2025-11-25"] == said["2026-07-28"] == expected


# ---- what call_tool returns or raises (the table in docs/testing.md), each row on both eras ----------------------

REFUSED_URL = "Tool 'connect_account' needs a step the person declined or cancelled: Connect your tracker account"


@BOTH
@pytest.mark.parametrize("answer", ["decline", "cancel"])
async def test_a_person_who_refuses(anyio_backend: str, protocol: str, answer: Literal["decline", "cancel"]) -> None:
    handler = ScriptedHandler([answer] * 3, modes=URL_TOO)
    async with connected(issues, elicitation=handler, protocol=protocol) as client:
        form = await client.call_tool("create_issue", {"repo": "acme/app"})  # the tool decides what it means
        mid_call = await client.call_tool("sign_in")
        required = await client.call_tool("connect_account")  # the tool cannot go on without the step
    assert (form.is_error, form.text) == (False, f"not created ({answer})")
    assert (mid_call.is_error, mid_call.text) == (False, f"sign-in: {answer}")
    assert (required.is_error, required.text) == (True, REFUSED_URL)


@BOTH
async def test_results_tool_errors_and_request_errors(anyio_backend: str, protocol: str) -> None:
    async with connected(issues, elicitation=ScriptedHandler([finish_page], modes=URL_TOO), protocol=protocol) as c:
        done = await c.call_tool("connect_account")  # the -32042 / URL round is handled inside call_tool
        failed = await c.call_tool("broken")
        invalid = await c.call_tool("create_issue", {"repo": 3})
        with pytest.raises(JSONRPCError) as unknown:
            await c.call_tool("create_ticket")
    assert (done.is_error, done.text) == (False, "connected")
    assert (failed.is_error, failed.text) == (True, "the tracker is down")
    assert invalid.is_error and invalid.text.startswith("Invalid arguments for tool 'create_issue': ")
    assert unknown.value.code == -32602


@BOTH
async def test_a_capability_the_client_did_not_declare(anyio_backend: str, protocol: str) -> None:
    # The one row that differs: 2026-07-28 requires error -32021; 2025-11-25 has no such code (a tool error).
    async with connected(issues, elicitation=ScriptedHandler(), protocol=protocol) as client:
        if protocol == "2026-07-28":
            with pytest.raises(JSONRPCError) as info:
                await client.call_tool("connect_account")
            assert info.value.code == -32021
            assert info.value.data == {"requiredCapabilities": {"elicitation": {"url": {}}}}
        else:
            result = await client.call_tool("connect_account")
            assert result.is_error and "did not declare URL-mode elicitation" in result.text


@BOTH
async def test_a_server_that_says_nothing_times_out(anyio_backend: str, protocol: str) -> None:
    async with connected(issues, protocol=protocol, request_timeout=0.2) as client:
        with pytest.raises(TimeoutError):
            await client.call_tool("silent")
        assert (await client.call_tool("broken")).is_error  # the connection is still usable


VANISHING = """
import os

from elicitor import Server

server = Server("vanishing")


@server.tool()
async def vanish() -> str:
    os._exit(3)


server.run("stdio")
"""


@BOTH
async def test_a_server_that_goes_away(anyio_backend: str, protocol: str, tmp_path: Path) -> None:
    script = tmp_path / "vanishing.py"
    script.write_text(VANISHING)
    async with Client.stdio([sys.executable, str(script)], protocol=protocol) as client:
        with pytest.raises(ConnectionClosed):
            await client.call_tool("vanish")


@BOTH
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn serves on asyncio
async def test_the_same_outcomes_over_http(anyio_backend: str, protocol: str) -> None:
    """What the in-process tests show holds on a real transport: a wrong script and a refused URL step."""
    from .conftest import serving

    async with serving(issues.http_app()) as url:
        handler = ScriptedHandler([{"title": "Crash", "labels": "bug"}, "decline"], modes=URL_TOO)
        async with Client.http(url, elicitation=handler, protocol=protocol) as client:
            with pytest.raises(InvalidScriptedAnswer, match="labels: expected a list of choices, got text"):
                await client.call_tool("create_issue", {"repo": "acme/app"})
            refused = await client.call_tool("connect_account")
    assert (refused.is_error, refused.text) == (True, REFUSED_URL)
