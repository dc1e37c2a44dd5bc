"""``elicitor connect``: an interactive client in the terminal.

Connects to a server (a command to run over stdio, or a Streamable HTTP URL), lists its tools, asks for a tool's
arguments from its ``inputSchema`` (field by field when the schema is a flat form, as JSON otherwise), calls it,
shows progress and log messages as they come, answers elicitations with :class:`TerminalHandler`, and prints the
result: every content block in order (text, images and audio saved to files, resource links, embedded resources,
blocks it cannot read), then structured content as indented JSON (see :mod:`elicitor._results`). Empty input or
``q`` at the tool prompt ends the session.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import anyio.to_thread

from ._arguments import argument_form, arguments_from
from ._exceptions import ElicitorError, JSONRPCError, MessageTooLarge, OutcomeUnknown, TaskCancelled
from ._loop import run_on
from ._outcomes import Accepted
from ._results import Saver, result_text
from ._sentences import LOCAL_ERRORS, RPC_ERRORS, recognise
from .client import BrowserHandler, Client, TaskHandle, TerminalHandler
from .client._present import printable, spaced, wrap
from .i18n import N_, Language, language
from .types import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    RESOURCE_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    URL_ELICITATION_REQUIRED,
    CallToolResult,
    JSONValue,
    Tool,
)

if TYPE_CHECKING:
    pass


class Console:
    """Where ``elicitor connect`` and the demo meet the person, and where results go.

    The interface (the menu, forms, progress, sign-in links, the server's log lines) is for the person, so it goes
    to their terminal: standard error when that is a terminal, else, when a person types on standard input, the
    controlling terminal (``/dev/tty``), so ``elicitor connect server 2>err`` still shows everything. Results (a
    tool's answer) go to standard output, to be redirected or piped. With no terminal at all (a script feeding
    standard input) everything stays on standard error as before.
    """

    def __init__(
        self, ui: str = "terminal", handler: TerminalHandler | None = None, save: str | os.PathLike[str] | None = None
    ) -> None:
        self._saver = Saver(save)
        self._tty = _controlling_terminal() if handler is None else None
        self._own_terminal = handler is None  # a handler of the caller's writes where the caller says
        if handler is not None:
            self.terminal = handler
        elif self._tty is None:
            self.terminal = TerminalHandler(screen=False if ui == "lines" else None)
        else:
            tty = self._tty
            options: dict[str, Any] = {}
            if ui != "lines" and os.environ.get("TERM", "") != "dumb":
                from prompt_toolkit.input import create_input
                from prompt_toolkit.output import create_output

                options = {"input": create_input(), "output": create_output(stdout=tty), "screen": True}
            else:
                options = {"screen": False}
            self.terminal = TerminalHandler(_tty_reader(tty), _tty_writer(tty), **options)

    @property
    def lang(self) -> Language:
        """The person's language (``--lang``, else their environment's), for elicitor's own words."""
        return self.terminal.lang

    @property
    def write(self) -> Callable[[str], None]:
        """Show a line of the interface (held while a full-screen form is up), in lines of the terminal's width
        when it goes to one and forms are on the full screen (:func:`fitted`). The line mode is the screen reader's
        path, one sentence a line: its lines are left whole for the terminal to wrap."""
        write = self.terminal._write
        if self.terminal._screen is None:
            return write
        if self._tty is not None:
            tty = self._tty
            return lambda text: write(fitted(text, _columns(tty)))
        if self._own_terminal and sys.stderr.isatty():
            return lambda text: write(fitted(text, _columns(sys.stderr)))
        return write

    def result(self, text: str) -> None:
        """A result, on standard output."""
        print(text, flush=True)

    def tool_result(self, result: CallToolResult) -> None:
        """A tool's answer, on standard output: ``Result:`` or ``Error:`` in the person's language, each content
        block in order (the server's words as sent, escaped; bytes saved to files), then its structured content
        as indented JSON (:func:`~elicitor._results.result_text`)."""
        self.result(result_text(result, self.lang, self._saver))

    def close(self) -> None:
        if self._tty is not None:
            self._tty.close()
            self._tty = None


def fitted(text: str, columns: int | None) -> str:
    """``text`` with each line longer than the terminal wrapped by cells (:func:`~elicitor.client._present.wrap`),
    its next lines indented as it is: the terminal cut a line where it ended, so a Chinese full stop or comma began
    the next one ("…协议版本 2026-07-28" / "。"), and a word was split in two."""
    if columns is None or columns < 20:
        return text
    from .client._present import cells

    lines = []
    for line in text.split("\n"):
        if cells(line) <= columns:  # a line that fills the width exactly is not cut
            lines.append(line)
        else:
            lines += wrap(line, columns, " " * (len(line) - len(line.lstrip(" "))))
    return "\n".join(lines)


def _columns(stream: TextIO) -> int | None:
    """The width of the terminal ``stream`` writes to (``None``: it cannot say)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return None


def _controlling_terminal() -> TextIO | None:
    """The person's terminal when standard error is not it: only when standard input is a terminal (a person
    types there; a script feeding it keeps everything on standard error), and there is one to open."""
    try:
        if not sys.stdin.isatty() or sys.stderr.isatty():
            return None
        return open("/dev/tty", "w", encoding="utf-8", errors="replace")
    except (OSError, ValueError, AttributeError):  # no controlling terminal (a daemon, CI), or streams replaced
        return None


def _tty_writer(tty: TextIO) -> Callable[[str], None]:
    def write(text: str) -> None:
        tty.write(text + "\n")
        tty.flush()

    return write


def _tty_reader(tty: TextIO) -> Callable[[str], str]:
    def read_line(prompt: str) -> str:
        tty.write(prompt)
        tty.flush()
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n").removesuffix("\r")

    return read_line


async def run(
    target: list[str],
    *,
    protocol: str = "auto",
    handler: TerminalHandler | None = None,
    ui: str = "terminal",
    timeout: float = 30.0,
    browser: bool = True,
    console: Console | None = None,
    transport: str = "auto",
) -> int:
    console = console or Console(ui, handler)
    async with answering(ui, console.terminal) as answers:
        return await _session(target, protocol, console, answers, timeout, browser, transport)


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
    console: Console,
    answers: TerminalHandler | BrowserHandler,
    timeout: float,
    browser: bool = True,
    transport: str = "auto",
) -> int:
    write = console.write

    async def on_log(level: str, data: JSONValue, source: str | None) -> None:
        text = data if isinstance(data, str) else json.dumps(data)  # one line: a log cannot fake a line of its own
        write(f"  [{printable(level)}{' ' + printable(source) if source else ''}] {printable(text)}")

    kwargs: dict[str, Any] = {
        "elicitation": answers, "protocol": protocol, "on_log": on_log, "log_level": "info",
        "handshake_timeout": timeout,  # the time a person takes to sign in is not counted (client/_pace.py)
    }  # fmt: skip
    if len(target) == 1 and target[0].startswith(("http://", "https://")):
        # A protected server (401) gets a sign-in in the person's browser; tokens are kept for next time.
        from .client.auth import LoopbackAuthorizer, OAuth, default_token_store

        authorizer = LoopbackAuthorizer(write=lambda line: write(printable(line)), open_browser=browser)
        auth = OAuth(authorizer, store=default_token_store(), client_name="elicitor connect")
        return await _connected(Client.http(target[0], auth=auth, transport=transport, **kwargs), console)
    with server_stderr(write) as stderr:
        return await _connected(Client.stdio(target, stderr=stderr, **kwargs), console)


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


async def _connected(client: Client, console: Console) -> int:
    """Run the tool menu on ``client`` once it completes the handshake (within its ``handshake_timeout``, the time
    a person takes to sign in not counted: see ``client/_pace.py``)."""
    async with client:
        t = console.lang._
        label = printable(client.server_info.display()) if client.server_info else t("the server")
        console.write(t("Connected to {server}, protocol {version}.", server=label, version=client.protocol_version))
        return await tool_menu(client, console)


def menu_line(number: int, tool: Tool, width: int | None = None) -> str:
    """One tool of the menu: its number, name and description's first line, wrapped to the terminal's width in
    cells (at spaces, and between the characters of Chinese; :func:`~elicitor.client._present.wrap`) with the
    continuation lines indented under the description."""
    from .client._present import cells

    head = f"  {number}. {printable(tool.name)}"
    about = summary(tool.description)
    if not about:
        return head
    columns = width if width is not None else shutil.get_terminal_size().columns
    indent = " " * min(cells(head) + 2, 24)
    return "\n".join(wrap(f"{head}: {about}", max(columns - 1, 40), indent))


def summary(description: str | None) -> str:
    """The first line of a tool's description with text in it, as one line a person can read: a docstring's
    leading blank line and indentation dropped, tabs as spaces, anything else that is not text shown escaped."""
    for line in (description or "").splitlines():
        if line.strip():
            return printable(" ".join(line.split()))
    return ""


async def tool_menu(client: Client, console: Console) -> int:
    """Offer the server's tools until the person quits: pick one, give its arguments, see what it returns."""
    terminal = console.terminal
    write, lang = console.write, console.lang
    t = lang._
    tools = await client.list_tools()
    left_out = client.tools_left_out
    if not tools:
        write(
            t("It offers no tools that can be used (the warnings say why).") if left_out else t("It offers no tools.")
        )
        return 0
    while True:
        write("")
        for i, tool in enumerate(tools, 1):
            write(menu_line(i, tool))
        _say_left_out(write, lang, left_out)
        try:
            choice = await _read(terminal, t("Tool to call (number or name; Enter or q to quit): "))
        except EOFError:
            return 0
        if choice in ("", "q", "quit", t("quit")):
            return 0
        picked = _pick(tools, choice)
        if picked is None:
            write(t("No tool {name}.", name=repr(choice)))
            continue
        try:
            arguments = await _arguments(terminal, picked)
        except EOFError:
            return 0
        if arguments is None:
            continue

        follow = Progress(write, lang)
        try:
            handle = await client.start_tool(picked.name, arguments, progress=follow.progress)
            if handle.id is not None:
                name = printable(picked.name)
                task = printable(handle.id)
                write(
                    "  "
                    + t("{tool} runs as a task ({task}); its questions come as it needs them.", tool=name, task=task)
                )
            result = await handle.wait(on_status=follow.status if handle.id is not None else None)
        except (JSONRPCError, ElicitorError) as exc:
            write(t("Error: {reason}", reason=printable(reason_of(exc, lang))))
            continue
        write("")
        console.tool_result(result)


def reason_of(exc: BaseException, lang: Language) -> str:
    """Why a call or the connection failed, as the person reads it: when the HTTP transport answered the request
    itself (it never reached the server, or its answer could not be read), that frame in their language and the
    technical detail as it came; a server's own error, or the system's, as it is."""
    from .client._http import LOCAL_FAILURE, NOT_JSON
    from .client._local import in_language

    if isinstance(exc, JSONRPCError) and exc.message.startswith(LOCAL_FAILURE):
        detail = in_language(exc.message.removeprefix(LOCAL_FAILURE), lang)
        return lang._(
            "Transport error (local, not from the server): {detail} (code {code})", detail=detail, code=str(exc.code)
        )
    if isinstance(exc, JSONRPCError) and exc.message == NOT_JSON:
        return lang._("Transport error (local): the server's answer is not JSON (code {code})", code=str(exc.code))
    if isinstance(exc, JSONRPCError):
        return rpc_error_text(exc, lang)
    t = lang._
    if isinstance(exc, TaskCancelled):  # the server's reason, if it gave one, as sent
        said = t("task {task} was cancelled", task=exc.task_id)
        return t("{line}: {message}", line=said, message=exc.reason) if exc.reason else said
    if isinstance(exc, OutcomeUnknown):
        why = recognise(exc.reason, LOCAL_ERRORS)
        return t(
            "the outcome of {method} is unknown: {reason}; the server may have acted on it, so it was not sent again",
            method=exc.method, reason=exc.reason if why is None else lang.text(why),
        )  # fmt: skip
    if isinstance(exc, MessageTooLarge):
        return t(
            "the server's answer was {size} bytes, over the limit of {limit} (max_message_size): it was dropped",
            size=exc.size, limit=exc.limit,
        )  # fmt: skip
    own = recognise(str(exc), LOCAL_ERRORS)  # this side's own sentence (the connection closed, no handshake)
    return str(exc) if own is None else lang.text(own)


_MEANINGS = {
    PARSE_ERROR: N_("the server could not read the request"),
    INVALID_REQUEST: N_("the request is not one the server accepts"),
    METHOD_NOT_FOUND: N_("the server does not offer this"),
    INVALID_PARAMS: N_("invalid parameters"),
    INTERNAL_ERROR: N_("an error inside the server"),
    RESOURCE_NOT_FOUND: N_("no such resource"),
    HEADER_MISMATCH: N_("the request's headers do not match its body"),
    MISSING_REQUIRED_CLIENT_CAPABILITY: N_("the client lacks a capability the server needs"),
    UNSUPPORTED_PROTOCOL_VERSION: N_("the server does not speak this protocol version"),
    URL_ELICITATION_REQUIRED: N_("a web page must be opened first"),
}
"""What each code the spec and JSON-RPC define means, for the person who reads a server's error in English."""


def rpc_error_text(exc: JSONRPCError, lang: Language) -> str:
    """A server's JSON-RPC error as the person reads it, made on this side from what is structured in it: a
    sentence of elicitor's own server (an internal error's reference, a passing outage) in their language; a
    missing capability named from ``data.requiredCapabilities``; any other message as sent, with its code and,
    for a code the spec defines, what it means in their words (``-32602``: invalid parameters)."""
    t = lang._
    own = recognise(exc.message, RPC_ERRORS)
    if own is not None:
        return t("{message} (code {code})", message=lang.text(own), code=str(exc.code))
    data = exc.data if isinstance(exc.data, dict) else {}
    required = data.get("requiredCapabilities")
    if exc.code == MISSING_REQUIRED_CLIENT_CAPABILITY and isinstance(required, dict) and required:
        names = t(", ").join(_capability(name, value) for name, value in required.items())
        return t("The server needs a capability this client does not offer: {names} (code {code})", names=names,
                 code=str(exc.code))  # fmt: skip
    meaning = _MEANINGS.get(exc.code)
    if meaning is None:
        return t("{message} (code {code})", message=exc.message, code=str(exc.code))
    return t("{message} (code {code}: {meaning})", message=exc.message, code=str(exc.code), meaning=lang.text(meaning))


def _capability(name: str, value: JSONValue) -> str:
    """A capability as its name in the spec, with what in it is needed (``elicitation (url)``)."""
    inner = ", ".join(value) if isinstance(value, dict) else ""
    return f"{name} ({inner})" if inner else name


def _say_left_out(write: Callable[[str], None], lang: Language, left_out: tuple[str, ...]) -> None:
    """Under the menu: that the server listed more than it shows (entries it cannot use, a listing cut short).
    Why each was left out is in the warnings logged as the list was read."""
    if left_out:
        write("  " + lang._("(incomplete: some of what the server listed cannot be used; the warnings say why)"))


class Progress:
    """A call's progress and, for a task, its status, each said once: on 2025-11-25 a task's step arrives both as
    a progress notification and as the task's status message, and is shown as the progress line alone."""

    def __init__(self, write: Callable[[str], None], lang: Language | None = None) -> None:
        self._write = write
        self._lang = language(lang)
        self._said: str | None = None
        self._status: str | None = None

    async def progress(self, done: float, total: float | None, message: str | None) -> None:
        t, number = self._lang._, self._lang.number
        count = f"{number(done)}/{number(total)}" if total else number(done)
        line = t("progress {count}", count=count)
        self._write(f"  {line} {printable(message)}" if message else f"  {line}")
        self._said = message

    def status(self, task: TaskHandle) -> None:
        changed = task.status != self._status
        self._status = task.status
        if changed or (task.status_message and task.status_message != self._said):
            self._write(f"  {task_status(task, self._lang)}")
        self._said = task.status_message


def task_status(task: TaskHandle, lang: Language | None = None) -> str:
    """One line about a running task, for a person: its status in words and the server's message."""
    t = language(lang)._
    words = {
        "working": t("task working"), "input_required": t("task waiting for your answer"),
        "completed": t("task done"), "failed": t("task failed"), "cancelled": t("task cancelled"),
    }  # fmt: skip
    line = words.get(task.status) or t("task {status}", status=printable(task.status))
    return t("{line}: {message}", line=line, message=printable(task.status_message)) if task.status_message else line


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
    t, name = terminal.lang._, printable(tool.name)
    flat = argument_form(tool.input_schema)
    if flat is None:
        while True:
            prompt = t("Arguments for {tool} as a JSON object (Enter for {{}}, c to cancel): ", tool=name)
            text = await _read(terminal, prompt)
            if text in ("c", t("cancel")):
                return None
            try:
                value = json.loads(text or "{}")
            except json.JSONDecodeError as exc:  # where, not Python's English reason ("Expecting ',' delimiter")
                where = t(
                    "Not JSON: something is wrong at line {line}, column {column}.", line=exc.lineno, column=exc.colno
                )
                terminal._write("  " + where)
                continue
            if isinstance(value, dict):
                return value
            terminal._write("  " + t("The arguments must be a JSON object."))
    form, nulls = flat
    if not form.fields:
        return {}
    about = tool.description.splitlines()[0] if tool.description else t("Call {tool}.", tool=tool.name)
    outcome = await terminal.fill_in(about, form, banner=t("Arguments for {tool}", tool=name))
    if not isinstance(outcome, Accepted):
        return None  # the person gave up on this call: back to the menu
    return arguments_from(outcome.data, nulls)


def main(
    target: list[str],
    protocol: str,
    ui: str = "terminal",
    timeout: float = 30.0,
    browser: bool = True,
    save: str | None = None,
    transport: str = "auto",
) -> int:
    shown = " ".join(target)
    is_url = len(target) == 1 and target[0].startswith(("http://", "https://"))
    console = Console(ui, save=save)
    t = console.lang._
    try:
        return run_on(
            lambda: run(
                target, protocol=protocol, ui=ui, timeout=timeout, browser=browser, console=console, transport=transport
            )
        )
    except KeyboardInterrupt:
        console.write("\n" + t("Bye."))
        return 130
    except FileNotFoundError:
        problem = t("no program {name}: check the command (or give the server's http(s) URL).", name=repr(target[0]))
        console.write("elicitor connect" + t(": ") + problem)
        return 1
    except (OSError, ElicitorError) as exc:  # TimeoutError (no handshake within --timeout) is an OSError
        advice = (
            t("Is the server running, at that address and path?")
            if is_url
            else t("Run the command alone to see its own errors: it must speak MCP on stdin and stdout.")
        )
        reason = printable(reason_of(exc, console.lang)) or type(exc).__name__
        problem = t("cannot connect to {target}: {reason}.", target=shown, reason=reason)
        console.write("elicitor connect" + t(": ") + spaced(problem) + advice)
        return 1
    finally:
        console.close()
