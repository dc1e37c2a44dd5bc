"""The rest of the surface: progress, logging, structured output, the client's own duties, the terminal handler."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from elicitor import (
    Accepted,
    Client,
    Context,
    Declined,
    ElicitationRequest,
    Form,
    JSONRPCError,
    ScriptedHandler,
    Server,
)
from elicitor.protocol import NotificationReceived, RequestReceived
from elicitor.session import Session, open_session
from elicitor.transports import memory_pair

from .conftest import REVISIONS, ROOT, connected, free_port, scripted_terminal, unisolated

pytestmark = pytest.mark.anyio

server = Server("surface", "1.0")


@dataclass
class Weather:
    city: str
    celsius: float


@server.tool()
async def forecast(city: str) -> Weather:
    """Structured output with an output schema."""
    return Weather(city, 21.5)


@server.tool()
async def busy(ctx: Context, steps: int) -> str:
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, f"step {step + 1}")
        await ctx.log("info", {"step": step + 1}, logger="busy")
        await ctx.log("debug", "noise")
    return "done"


async def test_structured_output_and_output_schema(anyio_backend: str) -> None:
    async with connected(server) as client:
        tools = {t.name: t for t in await client.list_tools()}
        result = await client.call_tool("forecast", {"city": "Oslo"})
    assert tools["forecast"].output_schema == {
        "type": "object",
        "title": "Weather",
        "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
        "required": ["city", "celsius"],
    }
    assert result.structured_content == {"city": "Oslo", "celsius": 21.5}
    assert result.text == '{"city":"Oslo","celsius":21.5}'


@pytest.mark.parametrize("revision", REVISIONS)
async def test_progress_and_logging_on_every_revision(anyio_backend: str, revision: str) -> None:
    logs: list[tuple[str, Any, str | None]] = []
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_log(level: Any, data: Any, logger: str | None) -> None:
        logs.append((level, data, logger))

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with connected(server, protocol=revision, on_log=on_log, log_level="info") as client:
        if revision != "2026-07-28":
            await client.set_logging_level("info")
        assert (await client.call_tool("busy", {"steps": 2}, progress=on_progress)).text == "done"
        # Without a progress callback no token is sent, so no progress arrives.
        assert (await client.call_tool("busy", {"steps": 1})).text == "done"
    assert progress == [(1, 2, "step 1"), (2, 2, "step 2")]
    assert logs == [("info", {"step": 1}, "busy"), ("info", {"step": 2}, "busy"), ("info", {"step": 1}, "busy")]


async def test_no_log_messages_on_2026_without_a_log_level(anyio_backend: str) -> None:
    logs: list[Any] = []

    async def on_log(level: Any, data: Any, logger: str | None) -> None:
        logs.append(data)

    async with connected(server, protocol="2026-07-28", on_log=on_log) as client:
        await client.call_tool("busy", {"steps": 2})
    assert logs == []


async def test_logging_set_level_rejects_unknown_levels(anyio_backend: str) -> None:
    async with connected(server, protocol="2025-11-25") as client:
        with pytest.raises(JSONRPCError) as info:
            await client.request("logging/setLevel", {"level": "loud"})
        assert info.value.code == -32602


@asynccontextmanager
async def fake_server(client_kwargs: dict[str, Any]) -> AsyncIterator[tuple[Session, Client]]:
    """A hand-driven server session (handshake era) connected to a real Client."""
    server_end, client_end = memory_pair()

    async def on_request(request: RequestReceived) -> dict[str, Any]:
        assert request.method == "initialize"
        return {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "fake", "version": "9"}}

    async def on_note(note: NotificationReceived) -> None:
        pass

    async with (
        open_session(server_end, on_request, on_note) as session,
        Client(client_end, protocol="2025-11-25", **client_kwargs) as client,
    ):
        yield session, client


async def test_client_answers_ping_and_refuses_unknown_server_requests(anyio_backend: str) -> None:
    async with fake_server({}) as (session, client):
        assert client.server_info is not None and client.server_info.name == "fake"
        assert await session.request("ping") == {}
        with pytest.raises(JSONRPCError) as info:
            await session.request("roots/list")
        assert info.value.code == -32601


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"message": "m", "requestedSchema": {"type": "object", "properties": {"a": {"type": "object"}}}}, "nested"),
        ({"message": "m", "requestedSchema": {"type": "array"}}, "object"),
        ({"mode": "url", "message": "m", "url": "https://x.example", "elicitationId": "1"}, "'url'"),
        ({"requestedSchema": {"type": "object", "properties": {}}}, "message must be a string"),
    ],
)
async def test_client_refuses_elicitations_outside_the_subset_or_mode(
    anyio_backend: str, params: dict[str, Any], reason: str
) -> None:
    handler = ScriptedHandler(otherwise={})
    async with fake_server({"elicitation": handler}) as (session, _):
        with pytest.raises(JSONRPCError, match=reason) as info:
            await session.request("elicitation/create", params)
        assert info.value.code == -32602
    assert handler.requests == []


async def test_client_without_handler_declares_nothing_and_refuses(anyio_backend: str) -> None:
    async with fake_server({}) as (session, client):
        assert client.elicitation_modes == frozenset()
        with pytest.raises(JSONRPCError) as info:
            await session.request("elicitation/create", {"message": "m", "requestedSchema": {"type": "object"}})
        assert info.value.code == -32602


FORM = Form.from_schema(
    {
        "type": "object",
        "required": ["party", "seat", "email"],
        "properties": {
            "party": {"type": "integer", "title": "Party size", "minimum": 1, "maximum": 12, "default": 2},
            "seat": {"type": "string", "title": "Seating", "oneOf": [{"const": "in", "title": "Indoors"},
                                                                     {"const": "out", "title": "Outdoors"}]},
            "diet": {"type": "array", "items": {"type": "string", "enum": ["vegan", "halal"]}, "maxItems": 2},
            "email": {"type": "string", "format": "email"},
            "ok": {"type": "boolean", "default": True},
        },
    }
)  # fmt: skip


def request(**kwargs: Any) -> ElicitationRequest:
    from elicitor import Implementation

    return ElicitationRequest("Book a table?", FORM, Implementation(name="desk", title="Booking Desk", version="2"))


async def test_terminal_handler_fills_every_kind_with_validation_and_review(anyio_backend: str) -> None:
    handler, shown = scripted_terminal(
        # answer now; party: 20 (too many) then Enter keeps the default 2; seat: 9 (invalid) then 2;
        # diet: "1,2"; email: "nope" then valid; ok: Enter keeps yes; review: edit 1 -> 4, then submit.
        ["", "20", "", "9", "2", "1,2", "nope", "a@b.co", "", "1", "4", ""]
    )
    outcome = await handler(request())
    assert outcome == Accepted({"party": 4, "seat": "out", "diet": ["vegan", "halal"], "email": "a@b.co", "ok": True})
    text = "\n".join(shown)
    assert "── Booking Desk 2 asks (server name: desk) ──" in text
    assert "must be at most 12" in text
    assert "pick one of the choices shown, by its number or its name" in text
    assert "type its number or its name" in text and "numbers or names separated by commas" in text
    assert "expected an email address" in text
    assert "2) Outdoors" in text
    assert "Review:" in text and "Seating: Outdoors" in text


@pytest.mark.parametrize(("lines", "action"), [(["d"], "decline"), (["c"], "cancel"), ([], "cancel")])
async def test_terminal_handler_decline_cancel_and_eof(anyio_backend: str, lines: list[str], action: str) -> None:
    handler, _ = scripted_terminal(lines)
    assert (await handler(request())).action == action


async def test_terminal_handler_decline_at_review(anyio_backend: str) -> None:
    handler, _ = scripted_terminal(["", "", "1", "", "a@b.co", "", "d"])
    assert await handler(request()) == Declined()


async def test_a_choice_is_typed_as_its_number_or_its_name_as_the_hint_says(anyio_backend: str) -> None:
    handler, shown = scripted_terminal(["", "", "Outdoors", "halal, 1", "a@b.co", "", ""])
    outcome = await handler(request())
    assert isinstance(outcome, Accepted)
    assert outcome.data["seat"] == "out" and outcome.data["diet"] == ["halal", "vegan"]
    assert "  type its number or its name" in shown


confirmations = Server("confirmations", "1.0")


@confirmations.tool()
async def delete_everything(ctx: Context) -> str:
    return "deleted" if await ctx.confirm("Delete every booking?") else "kept"


@pytest.mark.parametrize(
    ("typed", "result"),
    [(["y"], "deleted"), (["yes"], "deleted"), ([""], "kept"), (["n"], "kept"), (["maybe", "y"], "deleted"),
     (["d"], "kept"), (["c"], "kept"), ([], "kept")],
)  # fmt: skip
async def test_a_yes_no_question_is_one_prompt_with_no_on_enter(
    anyio_backend: str, typed: list[str], result: str
) -> None:
    """``ctx.confirm`` in line mode: the question and one prompt (no "Answer now?", no review); Enter is No."""
    handler, shown = scripted_terminal(typed)
    async with connected(confirmations, elicitation=handler, protocol="2025-11-25") as client:
        assert (await client.call_tool("delete_everything")).text == result
    prompts = [line for line in shown if line.endswith(": ")]
    assert prompts == ["Confirm? y = yes, n or Enter = no, d = decline, c = cancel: "] * max(len(typed), 1)
    assert "Delete every booking?" in shown and not any("Review" in line or "Answer now" in line for line in shown)
    assert ("  Answer y or n (or d to decline, c to cancel)." in shown) is (typed[:1] == ["maybe"])


@pytest.mark.parametrize(("typed", "outcome"), [(["y"], {"ok": True}), ([""], {"ok": False}), (["d"], None)])
async def test_any_form_of_one_boolean_is_a_yes_no_question(
    anyio_backend: str, typed: list[str], outcome: dict[str, bool] | None
) -> None:
    form = Form.from_schema(
        {
            "type": "object",
            "properties": {"ok": {"type": "boolean", "title": "Send it", "description": "Now", "default": True}},
        }
    )
    handler, shown = scripted_terminal(typed)
    answer = await handler(ElicitationRequest("Ready?", form, None))
    assert answer == (Accepted(outcome) if outcome is not None else Declined())  # Enter is No, whatever the default
    assert "  Now" in shown and shown[-1].startswith("Send it? y = yes")


async def test_shutdown_escalates_to_sigterm_for_a_server_that_ignores_eof(anyio_backend: str) -> None:
    script = (
        "import sys, json, time\n"
        "req = json.loads(sys.stdin.readline())\n"
        "print(json.dumps({'jsonrpc':'2.0','id':req['id'],'error':{'code':-32601,'message':'no'}}), flush=True)\n"
        "req = json.loads(sys.stdin.readline())\n"
        "print(json.dumps({'jsonrpc':'2.0','id':req['id'],'result':{'protocolVersion':'2025-11-25',"
        "'capabilities':{},'serverInfo':{'name':'stubborn'}}}), flush=True)\n"
        "time.sleep(60)\n"
    )
    client = Client.stdio([sys.executable, "-c", script])
    async with client:
        transport = client._session.transport if client._session else None
    assert transport is not None
    process = transport.process  # type: ignore[attr-defined]
    assert process.returncode == -15  # SIGTERM after the grace period


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
def test_demo_books_a_table_and_connects_the_calendar_end_to_end(protocol: str) -> None:
    """``make demo`` as a person drives it: the form in the terminal, then the calendar page in a "browser"."""
    import getpass

    import httpx2

    booking = ["", "3", "2026-12-24", "2", "ada@example.com", "1,3", "-", ""]
    confirm = ["y"]  # a yes/no question: one answer
    menu = ["", "2", ""]  # the tasting menu's question, asked while its task runs
    lines = [*booking, *confirm, *menu, "y"]
    demo = subprocess.Popen(
        [sys.executable, "-m", "elicitor", "demo", "--protocol", protocol], cwd=ROOT, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "BROWSER": "true"},  # the system "browser" does nothing; this test is the browser
    )  # fmt: skip
    assert demo.stdin is not None and demo.stderr is not None
    demo.stdin.write("".join(line + "\n" for line in lines))
    demo.stdin.flush()
    shown = []
    for line in demo.stderr:
        shown.append(line)
        if line.startswith(("Waiting for the server", "Press Enter when you have finished")):
            break
    text = unisolated("".join(shown))
    assert "Chez Elicitor booking desk 1.0.0 asks" in text
    (url,) = re.findall(r"URL:\s+(\S+)", text)
    assert "Host: 127.0.0.1" in text and "not encrypted" in text
    with httpx2.Client(follow_redirects=True) as browser:
        assert "sign in" in browser.get(url).text  # nobody signed in yet
        page = browser.post(url, data={"signin": "mallory"})
        assert "allow access" in page.text
        refused = browser.post(url, data={"decision": "allow"})
        assert refused.status_code == 403  # signed in as someone the link was not made for
        browser.cookies.clear()
        browser.post(url, data={"signin": getpass.getuser()})
        assert "Calendar connected" in browser.post(url, data={"decision": "allow"}).text
    stdout, stderr = demo.communicate(timeout=30)
    assert demo.returncode == 0, stderr
    booked, menu_planned, added = stdout.splitlines()
    assert booked.startswith("Result: Booked: 3 at Chez Elicitor on Thursday 24 December 2026, Heated patio")
    assert "vegetarian, gluten-free. Reservation " in booked
    assert menu_planned == "Result: Tasting menu for 2: seasonal starters, roast duck with cherries, chocolate soufflé."
    assert "task waiting for your answer" in text and "Checking this morning's market" in text
    assert added == "Result: Added 'Dinner at Chez Elicitor' to the calendar."


@pytest.mark.parametrize(
    ("target", "message"),
    [("no_such_module:server", "cannot load"), ("json:dumps", "is not an elicitor Server")],
)
def test_serve_refuses_what_is_not_a_server(target: str, message: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", "serve", target], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert run.returncode == 2
    assert message in run.stderr


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio
@pytest.mark.parametrize(
    ("options", "stack"), [([], "httptools, uvloop"), (["--loop", "asyncio", "--http", "h11"], "h11, asyncio")]
)
async def test_serve_runs_on_the_fastest_stack_unless_told_and_says_which(
    anyio_backend: str, options: list[str], stack: str
) -> None:
    """``auto`` picks httptools (installed with elicitor) and uvloop (the [speed] extra, in dev too)."""
    from .replicas import wait_for_port

    port = free_port()
    command = [sys.executable, "-m", "elicitor", "serve", "examples.url_pages:server", "--port", str(port), *options]
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE)
    try:
        await anyio.to_thread.run_sync(wait_for_port, port, process)
        async with Client.http(f"http://127.0.0.1:{port}/mcp", protocol="2026-07-28") as client:
            assert (await client.call_tool("create_issue", {"title": "t"})).text.startswith("Filed 't'")
    finally:
        process.terminate()
        _, said = process.communicate(timeout=30)
    assert f"at http://127.0.0.1:{port}/mcp ({stack})" in said.decode()


def test_a_stack_that_is_not_installed_or_unknown_is_refused_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from elicitor import _loop
    from elicitor.server import _server

    monkeypatch.setattr(_server, "_installed", lambda module: False)
    monkeypatch.setattr(_loop, "_installed", lambda module: False)
    assert _server.http_stack() == ("asyncio", "h11")
    with pytest.raises(ValueError, match=r"pip install 'elicitor\[speed\]'"):
        _server.http_stack("uvloop")
    with pytest.raises(ValueError, match="pip install httptools"):
        _server.http_stack(http="httptools")
    with pytest.raises(ValueError, match="unknown event loop 'tokio'"):
        _server.http_stack("tokio")
    with pytest.raises(ValueError, match="unknown HTTP parser"):
        _server.http_stack(http="h2")


def test_auto_never_picks_uvloop_on_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvloop does not exist on Windows (the [speed] extra leaves it out there): stdio and HTTP run on asyncio's."""
    from elicitor import _loop

    assert _loop.event_loop() == "uvloop"  # installed in development
    monkeypatch.setattr(sys, "platform", "win32")
    assert _loop.event_loop() == "asyncio"


def test_version_and_help() -> None:
    from elicitor import __version__

    version = subprocess.run([sys.executable, "-m", "elicitor", "--version"], capture_output=True, text=True)
    assert version.stdout.splitlines()[0] == f"elicitor {__version__}"  # then its changelog entry (test_docs)
    usage = subprocess.run([sys.executable, "-m", "elicitor"], capture_output=True, text=True)
    assert usage.returncode == 2
    assert "serve" in usage.stderr and "demo" in usage.stderr


def test_version_read_only_in_part_ends_quietly() -> None:
    """``elicitor --version | head -1``: the reader closes the pipe before the changelog is written. That ended
    in a ``BrokenPipeError`` traceback on the person's terminal; now status 1 and nothing said."""
    with subprocess.Popen(
        [sys.executable, "-m", "elicitor", "--lang", "en", "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as run:
        assert run.stdout is not None and run.stderr is not None
        run.stdout.close()  # before the command has written anything: every write of it meets a closed pipe
        said = run.stderr.read()
        assert run.wait(timeout=60) == 1
    assert said == b"", said.decode()


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("demo", "--ui {terminal,lines,browser}"),
        ("serve", "--transport {http,stdio}"),
        ("check", "exit 0 inside the subset, 1 outside it, 2 when the input cannot be read"),
        ("connect", "a command and its arguments, or an http(s) URL"),
    ],
)
def test_every_command_has_help(command: str, says: str) -> None:
    run = subprocess.run([sys.executable, "-m", "elicitor", command, "--help"], capture_output=True, text=True)
    assert run.returncode == 0
    assert run.stdout.startswith(f"usage: elicitor {command}") and says in " ".join(run.stdout.split())


def check(target: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "elicitor", "check", target]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_check_describes_a_schema_and_the_revisions_that_carry_it(tmp_path: Any) -> None:
    schema = {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "title": "Your name", "minLength": 1},
            "age": {"type": "integer", "minimum": 0, "default": 30},
            "seat": {"type": "string", "oneOf": [{"const": "in", "title": "Indoors"}]},
        },
    }
    path = tmp_path / "schema.json"
    path.write_text(json.dumps({"mode": "form", "message": "?", "requestedSchema": schema}))
    run = check(str(path))
    assert run.returncode == 0, run.stderr
    assert "name: string, required\n    shown as: Your name\n" in run.stdout
    assert "    default: 30\n" in run.stdout
    assert "choices: Indoors (sends 'in')" in run.stdout
    assert "2025-06-18: yes (defaults of age are not sent" in run.stdout
    assert "2026-07-28: yes\n" in run.stdout


def test_check_names_what_is_outside_the_subset() -> None:
    nested = check("-", json.dumps({"type": "object", "properties": {"x": {"type": "object"}}}))
    assert nested.returncode == 1
    assert "field 'x': nested objects are not allowed" in nested.stderr
    secret = check("-", json.dumps({"type": "object", "properties": {"password": {"type": "string"}}}))
    assert secret.returncode == 1
    assert "URL mode" in secret.stderr


def test_check_reads_python_types_and_reports_unreadable_input() -> None:
    booking = check("elicitor.demo:Booking")
    assert booking.returncode == 0, booking.stderr
    assert "diet: multi-select, required" in booking.stdout
    assert "2025-06-18: no: multi-select fields (diet) exist from 2025-11-25 on" in booking.stdout
    assert "the client speaks" not in booking.stdout  # a check involves no client
    for target, message in [("nope", "neither a JSON file"), ("no_module:Form", "cannot load"), ("-", "cannot read")]:
        run = check(target, "{not json" if target == "-" else None)
        assert run.returncode == 2
        assert message in run.stderr


def test_connect_calls_tools_and_answers_their_questions() -> None:
    """``elicitor connect`` over stdio, driven like a person: arguments, an elicitation, progress, logs, JSON args."""
    lines = [
        "test_elicitation", "Who are you?", "", "Ada", "ada@example.com", "",  # arguments, then the form, submit
        "test_tool_with_progress",
        "test_tool_with_logging",
        "json_schema_2020_12_tool", "{bad", "c",  # a schema outside the form subset: JSON arguments
        "nope",
        "q",
    ]  # fmt: skip
    server = [sys.executable, str(ROOT / "examples" / "everything_server.py")]
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", "connect", "--protocol", "2025-11-25", *server],
        input="".join(line + "\n" for line in lines), capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = unisolated(run.stderr)
    assert "Connected to elicitor conformance fixtures 1.0.0, protocol 2025-11-25." in out
    assert "  [server] elicitor-everything: serving on stdio" in out  # its stderr, shown through the terminal
    assert "── elicitor conformance fixtures 1.0.0 asks (server name: elicitor-everything) ──\nWho are you?" in out
    results = run.stdout  # a tool's result on stdout, everything for the person on stderr
    assert "Result: User response: action=accept, content={'username': 'Ada', 'email': 'ada@example.com'}" in results
    assert "progress 50/100" in out and "Result: Tool with progress executed successfully" in results
    assert "[info] Tool processing data" in out
    assert "Not JSON:" in out
    assert "No tool 'nope'." in out


def test_connect_without_a_target_shows_its_usage() -> None:
    usage = subprocess.run([sys.executable, "-m", "elicitor", "connect"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "give a command to run" in usage.stderr


def test_connect_with_the_browser_ui() -> None:
    import httpx2

    server = [sys.executable, str(ROOT / "examples" / "everything_server.py")]
    connect = subprocess.Popen(
        [sys.executable, "-m", "elicitor", "connect", "--ui", "browser", *server], cwd=ROOT, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "BROWSER": "/nonexistent/browser"},  # cannot open: the link is printed
    )  # fmt: skip
    assert connect.stdin is not None and connect.stderr is not None
    connect.stdin.write("test_elicitation\nWho are you?\n")
    connect.stdin.flush()
    link = None
    for line in connect.stderr:
        found = re.search(r"open (http://127\.0\.0\.1:\d+/q/\S+)", line)
        if found:
            link = found.group(1)
            break
    assert link is not None
    with httpx2.Client() as browser:
        page = browser.get(link)
        assert "<bdi>elicitor conformance fixtures 1.0.0</bdi> asks:" in page.text
        review = browser.post(link, data={"username": "ada", "email": "ada@example.com", "_action": "review"})
        assert "Review your answer" in review.text
        assert "sent" in browser.post(link, data={"_action": "send"}).text
    stdout, stderr = connect.communicate("q\n", timeout=30)
    assert connect.returncode == 0, stderr
    assert "Result: User response: action=accept, content={'username': 'ada', 'email': 'ada@example.com'}" in stdout


@pytest.mark.parametrize(
    ("target", "says"),
    [
        (["no-such-program-here"], "no program 'no-such-program-here': check the command"),
        ([sys.executable, "-c", "import sys; print('not MCP'); sys.stdin.read()"], "not complete the handshake in 2 s"),
        ([sys.executable, "-c", "pass"], "Run the command alone to see its own errors"),
        ([f"http://127.0.0.1:{free_port()}/mcp"], "Is the server running, at that address and path?"),
    ],
)
def test_connect_says_what_went_wrong_and_what_to_do(target: list[str], says: str) -> None:
    command = [sys.executable, "-m", "elicitor", "connect", "--timeout", "2", *target]
    run = subprocess.run(command, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert run.returncode == 1
    assert says in run.stderr and "Traceback" not in run.stderr


def test_lines_typed_ahead_are_seen_by_the_wait_for_enter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Standard input is read from its descriptor: a line already typed is not hidden in a buffer from select."""
    import threading

    from elicitor.client import _tty

    read_end, write_end = os.pipe()
    os.write(write_end, b"Ada\r\n\nrest\n")  # typed ahead; the pipe stays open (a person, still there)
    with open(read_end, closefd=True) as fake_stdin:
        monkeypatch.setattr(sys, "stdin", fake_stdin)
        lines = _tty.StdinLines()
        assert lines.readline() == "Ada"  # the whole input arrived in one read; the rest waits in our buffer
        stop = threading.Event()
        safety = threading.Timer(10, stop.set)  # only if the wait were blind to the buffered line
        safety.start()
        lines.wait_line(stop)
        safety.cancel()
        assert not stop.is_set()  # it returned for the empty line typed ahead, not because it was told to stop
        assert lines.readline() == "rest"
        os.close(write_end)
        with pytest.raises(EOFError):
            lines.readline()
