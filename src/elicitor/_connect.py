"""``elicitor connect``: an interactive client in the terminal.

Connects to a server (a command to run over stdio, or a Streamable HTTP URL), lists its tools, asks for a tool's
arguments from its ``inputSchema`` (field by field when the schema is a flat form, as JSON otherwise), calls it,
shows progress and log messages as they come, answers elicitations with :class:`TerminalHandler`, and prints the
result (text, then structured content as indented JSON). Empty input or ``q`` at the tool prompt ends the session.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ._arguments import argument_form, arguments_from
from ._exceptions import ElicitorError, JSONRPCError
from ._outcomes import Accepted
from .client import BrowserHandler, Client, TaskHandle, TerminalHandler
from .client._present import printable
from .types import JSONValue, Tool

if TYPE_CHECKING:
    from .client.auth import LoopbackAuthorizer


class HandshakeTimeout(Exception):
    """The target did not complete the MCP handshake in time (not an MCP server, or stuck)."""


async def run(
    target: list[str],
    *,
    protocol: str = "auto",
    handler: TerminalHandler | None = None,
    ui: str = "terminal",
    timeout: float = 30.0,
    browser: bool = True,
) -> int:
    terminal = handler or TerminalHandler(screen=False if ui == "lines" else None)
    async with answering(ui, terminal) as answers:
        return await _session(target, protocol, terminal, answers, timeout, browser)


UI_CHOICES = ("terminal", "lines", "browser")
"""Where a person answers (``--ui``): full-screen terminal forms, one question per line, or browser pages."""


@asynccontextmanager
async def answering(ui: str, terminal: TerminalHandler) -> AsyncIterator[TerminalHandler | BrowserHandler]:
    """What answers elicitations for ``--ui``: the terminal itself, or pages in the browser (links shown there)."""
    if ui == "browser":
        async with BrowserHandler(write=terminal._write) as browser:
            yield browser
    else:
        yield terminal


async def _session(
    target: list[str],
    protocol: str,
    terminal: TerminalHandler,
    answers: TerminalHandler | BrowserHandler,
    timeout: float,
    browser: bool = True,
) -> int:
    write = terminal._write

    async def on_log(level: str, data: JSONValue, source: str | None) -> None:
        text = data if isinstance(data, str) else json.dumps(data)  # one line: a log cannot fake a line of its own
        write(f"  [{printable(level)}{' ' + printable(source) if source else ''}] {printable(text)}")

    kwargs: dict[str, Any] = {"elicitation": answers, "protocol": protocol, "on_log": on_log, "log_level": "info"}
    if len(target) == 1 and target[0].startswith(("http://", "https://")):
        # A protected server (401) gets a sign-in in the person's browser; tokens are kept for next time.
        from .client.auth import LoopbackAuthorizer, OAuth, default_token_store

        authorizer = LoopbackAuthorizer(write=lambda line: write(printable(line)), open_browser=browser)
        auth = OAuth(authorizer, store=default_token_store(), client_name="elicitor connect")
        return await _connected(Client.http(target[0], auth=auth, **kwargs), terminal, timeout, authorizer)
    with server_stderr(write) as stderr:
        return await _connected(Client.stdio(target, stderr=stderr, **kwargs), terminal, timeout)


@contextmanager
def server_stderr(write: Callable[[str], None]) -> Iterator[int]:
    """A descriptor for a child server's stderr whose lines are shown through ``write``.

    A server may log to stderr (the spec allows it); passed straight to the terminal it would draw over a
    full-screen form, so its lines go through the terminal handler, which holds them while a form is up.
    """
    read_end, write_end = os.pipe()

    def pump() -> None:
        with open(read_end, "rb") as lines:
            for line in lines:
                write("  [server] " + line.decode("utf-8", "replace").rstrip())

    thread = threading.Thread(target=pump, name="elicitor-server-stderr", daemon=True)
    thread.start()
    try:
        yield write_end
    finally:
        os.close(write_end)  # the child has its own copy: the pump ends when the child has gone too
        thread.join(timeout=2)


async def _connected(
    client: Client, terminal: TerminalHandler, timeout: float, authorizer: LoopbackAuthorizer | None = None
) -> int:
    """Run the tool menu on ``client`` once it completes the handshake, which must happen within ``timeout``
    (not counting the time the person takes to sign in)."""
    # The library has no timeouts (people take their time); a person at a prompt deserves one for the handshake.
    with anyio.CancelScope(deadline=anyio.current_time() + timeout) as handshake:
        if authorizer is not None:

            def signing_in() -> None:
                handshake.deadline = math.inf

            authorizer.on_wait = signing_in
        async with client:
            handshake.deadline = math.inf
            label = printable(client.server_info.display()) if client.server_info else "the server"
            terminal._write(f"Connected to {label}, protocol {client.protocol_version}.")
            return await tool_menu(client, terminal)
    raise HandshakeTimeout(f"no MCP handshake within {timeout:g} s")


def menu_line(number: int, tool: Tool, width: int | None = None) -> str:
    """One tool of the menu: its number, name and description's first line, wrapped at word boundaries to the
    terminal's width with the continuation lines indented under the description."""
    head = f"  {number}. {printable(tool.name)}"
    if not tool.description:
        return head
    about = printable(tool.description.splitlines()[0])
    columns = width if width is not None else shutil.get_terminal_size().columns
    indent = " " * min(len(head) + 2, 24)
    lines = textwrap.wrap(f"{head}: {about}", width=max(columns - 1, 40), subsequent_indent=indent)
    return "\n".join(lines)


async def tool_menu(client: Client, terminal: TerminalHandler) -> int:
    """Offer the server's tools until the person quits: pick one, give its arguments, see what it returns."""
    write = terminal._write
    tools = await client.list_tools()
    if not tools:
        write("It offers no tools.")
        return 0
    while True:
        write("")
        for i, tool in enumerate(tools, 1):
            write(menu_line(i, tool))
        try:
            choice = await _read(terminal, "Tool to call (number or name; Enter or q to quit): ")
        except EOFError:
            return 0
        if choice in ("", "q", "quit"):
            return 0
        picked = _pick(tools, choice)
        if picked is None:
            write(f"No tool {choice!r}.")
            continue
        try:
            arguments = await _arguments(terminal, picked)
        except EOFError:
            return 0
        if arguments is None:
            continue

        async def progress(done: float, total: float | None, message: str | None) -> None:
            about = " " + printable(message) if message else ""
            write(f"  progress {done:g}{'/' + format(total, 'g') if total else ''}{about}")

        try:
            handle = await client.start_tool(picked.name, arguments, progress=progress)
            if handle.id is not None:
                name = printable(picked.name)
                write(f"  {name} runs as a task ({printable(handle.id)}); its questions come as it needs them.")
            result = await handle.wait(on_status=lambda task: write(f"  {task_status(task)}"))
        except (JSONRPCError, ElicitorError) as exc:
            write(f"Error: {printable(str(exc))}")
            continue
        write("")
        write(("Error: " if result.is_error else "Result: ") + result.text)
        if result.structured_content is not None:
            write(json.dumps(result.structured_content, indent=2, ensure_ascii=False))


def task_status(task: TaskHandle) -> str:
    """One line about a running task, for a person: its status in words and the server's message."""
    words = {
        "working": "working", "input_required": "waiting for your answer", "completed": "done",
        "failed": "failed", "cancelled": "cancelled",
    }  # fmt: skip
    line = f"task {words.get(task.status, task.status)}"
    return f"{line}: {printable(task.status_message)}" if task.status_message else line


async def _read(terminal: TerminalHandler, prompt: str) -> str:
    line: str = await anyio.to_thread.run_sync(terminal._read, prompt)
    return line.strip()


def _pick(tools: list[Tool], choice: str) -> Tool | None:
    if choice.isdigit() and 1 <= int(choice) <= len(tools):
        return tools[int(choice) - 1]
    return next((tool for tool in tools if tool.name == choice), None)


async def _arguments(terminal: TerminalHandler, tool: Tool) -> dict[str, Any] | None:
    """The tool's arguments: field by field for a flat schema (optional values and enums included, see
    :mod:`elicitor._arguments`), else one JSON object. None: the person gave up."""
    flat = argument_form(tool.input_schema)
    if flat is None:
        while True:
            text = await _read(terminal, f"Arguments for {tool.name} as a JSON object (Enter for {{}}, c to cancel): ")
            if text == "c":
                return None
            try:
                value = json.loads(text or "{}")
            except json.JSONDecodeError as exc:
                terminal._write(f"  Not JSON: {exc}")
                continue
            if isinstance(value, dict):
                return value
            terminal._write("  The arguments must be a JSON object.")
    form, nulls = flat
    if not form.fields:
        return {}
    about = tool.description.splitlines()[0] if tool.description else f"Call {tool.name}."
    outcome = await terminal.fill_in(about, form, banner=f"Arguments for {printable(tool.name)}")
    if not isinstance(outcome, Accepted):
        return None  # the person gave up on this call: back to the menu
    return arguments_from(outcome.data, nulls)


def main(target: list[str], protocol: str, ui: str = "terminal", timeout: float = 30.0, browser: bool = True) -> int:
    shown = " ".join(target)
    is_url = len(target) == 1 and target[0].startswith(("http://", "https://"))
    try:
        return anyio.run(lambda: run(target, protocol=protocol, ui=ui, timeout=timeout, browser=browser))
    except KeyboardInterrupt:
        print("\nBye.", file=sys.stderr)
        return 130
    except FileNotFoundError:
        print(f"elicitor connect: no program {target[0]!r}: check the command (or give the server's http(s) URL).",
              file=sys.stderr)  # fmt: skip
        return 1
    except (OSError, ElicitorError, HandshakeTimeout) as exc:
        advice = (
            "Is the server running, at that address and path?"
            if is_url
            else "Run the command alone to see its own errors: it must speak MCP on stdin and stdout."
        )
        print(f"elicitor connect: cannot connect to {shown}: {printable(str(exc))}. {advice}", file=sys.stderr)
        return 1
