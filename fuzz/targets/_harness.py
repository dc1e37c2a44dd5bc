"""What the targets share: the server they attack, an event loop that outlives one input, the checks on replies.

The server is small but reaches every path a peer can drive: a tool that asks a form (pushed on the handshake era,
a multi-round-trip round on 2026-07-28), one that takes typed arguments, and one that asks for a URL.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import msgspec

from elicitor import Accepted, Context, Server, StateSealer
from elicitor.protocol import decode_json

PEER_ERROR_CODES = frozenset({-32700, -32600, -32601, -32602, -32002, -32020, -32021, -32022, -32042})
"""Every JSON-RPC error code a peer's input may legitimately earn (jsonrpc.org, MCP basic/index; -32002 resource
not found; -32020 header mismatch, -32021 missing client capability, -32022 unsupported protocol version; -32042
URL elicitation required). -32603 is missing on purpose: an internal error answering peer input is a bug."""

NAME_FORM = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name"],
}


def build_server() -> Server:
    """A fresh server with the tools the targets call (a fixed key, so sealed states are reproducible)."""
    server = Server("fuzzed", "1.0", state=StateSealer(keys=[b"k" * 32]))

    @server.tool()
    async def ask(ctx: Context, greeting: str = "Hello") -> str:
        """Asks the person's name, then greets them."""
        outcome = await ctx.elicit("Your name?", NAME_FORM, key="name")
        return f"{greeting}, {outcome.data['name']}!" if isinstance(outcome, Accepted) else outcome.action

    @server.tool()
    async def add(a: int, b: float = 0.0, tags: list[str] | None = None) -> str:
        """Adds two numbers (typed arguments, validated from the wire)."""
        return f"{a + b} {tags or []}"

    @server.tool()
    async def visit(ctx: Context) -> str:
        """Asks the person to open a page (URL mode)."""
        outcome = await ctx.elicit_url("Sign in", "https://example.com/sign-in")
        return outcome.action

    return server


def check_reply(raw: object) -> dict[str, Any]:
    """One message the implementation under test sent: a JSON object, and an error only with a peer's code.

    Raises:
        AssertionError: the message is not a JSON-RPC object, or carries an error code peer input must not cause.
    """
    assert isinstance(raw, bytes), f"sent {raw!r} instead of a message"
    message = decode_json(raw)
    assert isinstance(message, dict), f"sent something that is not a JSON object: {raw[:200]!r}"
    assert message.get("jsonrpc") == "2.0", f"sent a message without jsonrpc 2.0: {raw[:200]!r}"
    error = message.get("error")
    if error is not None:
        assert isinstance(error, dict) and error.get("code") in PEER_ERROR_CODES, f"answered with {raw[:300]!r}"
    return message


class _Tracebacks(logging.Handler):
    """Keeps every record logged with an exception: the implementation caught something it did not expect."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


_tracebacks = _Tracebacks()
logging.getLogger("elicitor").addHandler(_tracebacks)


def check_no_traceback() -> None:
    """Fail if the implementation logged an exception since the last check.

    The tools of :func:`build_server` raise nothing of their own, so a logged traceback ("tool 'ask' failed",
    "handler for ... failed") means peer input reached code that did not expect it, even when the reply that
    followed looks orderly (an ``isError`` result, say).

    Raises:
        AssertionError: naming the first exception logged.
    """
    records, _tracebacks.records = _tracebacks.records, []
    if records:
        record = records[0]
        assert record.exc_info is not None
        raise AssertionError(f"logged {record.getMessage()!r}: {record.exc_info[1]!r}") from record.exc_info[1]


@contextmanager
def portal() -> Iterator[Any]:
    """An event loop in a thread that lives as long as the target, so per-input work does not start one each time."""
    from anyio.from_thread import start_blocking_portal

    with start_blocking_portal() as running:
        yield running


_stack = ExitStack()


def keep(context: Any) -> Any:
    """Enter ``context`` for the rest of the process (a target's loop, an app's lifespan)."""
    return _stack.enter_context(context)


def encode(value: object) -> bytes:
    return msgspec.json.encode(value)


def fuzz(test_one_input: Callable[[bytes], None]) -> None:
    """Run ``test_one_input`` under atheris with this process's command line (libFuzzer options, corpus dirs)."""
    import atheris

    logging.disable(logging.WARNING)  # "invalid message from peer", a thousand times a second; errors still show
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
