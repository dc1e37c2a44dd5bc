"""Real stdio: our client and the example server as two processes, and a peer sending bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from typing import Any

import anyio
import pytest

from elicitor import Client, ConnectionClosed, ScriptedHandler

from .conftest import ASYNCIO_LOOPS, EVERYTHING, REVISIONS, ROOT, on_asyncio_loop

pytestmark = pytest.mark.anyio


anyio_backend = pytest.fixture(params=ASYNCIO_LOOPS)(on_asyncio_loop)


@pytest.mark.parametrize("revision", [*REVISIONS, "auto"])
async def test_fixtures_over_stdio(anyio_backend: str, revision: str) -> None:
    handler = ScriptedHandler(
        [
            {"username": "testuser", "email": "test@example.com"},
            {"name": "Ada"},
        ],
        otherwise={},  # accept with the schema's defaults
    )
    async with Client.stdio(EVERYTHING, elicitation=handler, protocol=revision, stderr=subprocess.DEVNULL) as client:
        assert client.protocol_version == (revision if revision != "auto" else "2026-07-28")
        names = {t.name for t in await client.list_tools()}
        assert {
            "test_elicitation",
            "test_elicitation_sep1034_defaults",
            "test_elicitation_sep1330_enums",
            "test_input_required_result_elicitation",
        } <= names
        result = await client.call_tool("test_elicitation", {"message": "Who?"})
        assert "action=accept" in result.text and "testuser" in result.text
        result = await client.call_tool("test_input_required_result_elicitation")
        assert result.text == "Hello, Ada!"
        result = await client.call_tool("test_elicitation_sep1034_defaults")
        assert result.text == (
            "Elicitation completed: action=accept, content=Defaults(name='John Doe', age=30, score=95.5, "
            "status='active', verified=True)"
        )
        enums = await client.call_tool("test_elicitation_sep1330_enums")
        if revision == "2025-06-18":
            assert enums.is_error and "multi-select" in enums.text
        else:
            assert "action=accept" in enums.text
    asked = handler.requests[2].form.schema()
    if revision != "2025-06-18":
        assert asked["properties"]["age"] == {"type": "integer", "default": 30}


class RawPeer:
    """A hand-driven client process talking raw bytes to the example server."""

    def __init__(self) -> None:
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            EVERYTHING, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, cwd=ROOT
        )

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the server closed its stdout"
        message: dict[str, Any] = json.loads(line)
        return message

    def start_elicitation(self) -> dict[str, Any]:
        """Initialize, call test_elicitation as request 9, and return the server's elicitation/create."""
        self.send(INIT)
        self.read()
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.send(
            b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"test_elicitation",'
            b'"arguments":{"message":"hi"}}}\n'
        )
        request = self.read()
        assert request["method"] == "elicitation/create"
        return request

    def close(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=10)
        self.proc.stdout.close()
        self.stderr.seek(0)
        errors = self.stderr.read().decode()
        self.stderr.close()
        assert "Traceback" not in errors, errors
        return code


INIT = (
    b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"0"}}}\n'
)


def test_bad_input_over_stdio_gets_errors_and_the_session_keeps_serving() -> None:
    peer = RawPeer()
    try:
        cases: list[tuple[bytes, int | None]] = [
            (b"this is not json\n", -32700),
            (b"\xff\xfe\xfd\n", -32700),
            (b"[1,2,3]\n", -32600),
            (b"42\n", -32600),
            (b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n', -32600),  # before initialize
            (b'{"jsonrpc":"2.0","id":"early","method":"ping"}\n', None),  # ping is fine before initialize
            (b'{"jsonrpc":"2.0","id":true,"method":"ping"}\n', -32600),
            (b'{"jsonrpc":"2.0","id":2,"method":"ping","params":"x"}\n', -32600),
            (b"{" + b'"x":"' + b"a" * (5 << 20) + b'"}\n', -32600),  # a 5 MB line, over the 4 MiB limit
        ]
        for data, code in cases:
            peer.send(data)
            reply = peer.read()
            if code is None:
                assert reply["result"] == {}, (data[:40], reply)
                continue
            assert reply["error"]["code"] == code, (data[:40], reply)
        # A response to nothing is ignored (never answered), so the next reply is the ping's.
        peer.send(b'{"jsonrpc":"2.0","id":777,"result":{}}\n')
        peer.send(INIT)
        assert peer.read()["result"]["protocolVersion"] == "2025-11-25"
        peer.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        peer.send(b'{"jsonrpc":"2.0","id":3,"method":"no/such/method"}\n')
        assert peer.read() == {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": -32601, "message": "Method not found: no/such/method"},
        }
        peer.send(
            b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"test_elicitation",'
            b'"arguments":{"message":5}}}\n'
        )
        reply = peer.read()
        assert reply["result"]["isError"] is True and "message" in reply["result"]["content"][0]["text"]
        peer.send(b'{"jsonrpc":"2.0","id":5,"method":"ping"}\n')
        assert peer.read() == {"jsonrpc": "2.0", "id": 5, "result": {}}
    finally:
        assert peer.close() == 0


def test_what_a_client_sent_before_closing_the_servers_input_is_answered() -> None:
    """``printf '...' | server``, or a client that writes its last requests and closes stdin to shut the server down
    (basic/lifecycle, stdio): what was read before the end is answered before the server exits."""
    data = (
        INIT
        + b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        + b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}\n'
        + b'{"jsonrpc":"2.0","id":3,"method":"ping"}\n'
    )
    done = subprocess.run(EVERYTHING, input=data, capture_output=True, cwd=ROOT, timeout=60)
    replies = {message["id"]: message for message in map(json.loads, done.stdout.splitlines())}
    assert set(replies) == {"init", 2, 3}, done.stdout
    assert replies["init"]["result"]["protocolVersion"] == "2025-11-25"
    assert "content" in replies[2]["result"] and replies[3]["result"] == {}
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr


def test_peer_vanishing_mid_elicitation_is_a_clean_cancellation() -> None:
    peer = RawPeer()
    request = peer.start_elicitation()
    assert request["method"] == "elicitation/create"
    # The client vanishes without answering: the server exits cleanly, without a traceback.
    assert peer.close() == 0


def test_answer_to_a_cancelled_elicitation_is_ignored() -> None:
    peer = RawPeer()
    try:
        request = peer.start_elicitation()
        peer.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}\n')
        cancel = peer.read()
        assert cancel["method"] == "notifications/cancelled"
        assert cancel["params"]["requestId"] == request["id"]
        late = {"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}}
        peer.send(json.dumps(late).encode() + b"\n")
        peer.send(b'{"jsonrpc":"2.0","id":10,"method":"ping"}\n')
        assert peer.read() == {"jsonrpc": "2.0", "id": 10, "result": {}}
    finally:
        assert peer.close() == 0


async def test_server_that_exits_mid_call_raises_connection_closed(anyio_backend: str) -> None:
    script = (
        "import sys, json\n"
        "line = sys.stdin.readline()\n"
        "req = json.loads(line)\n"
        "print(json.dumps({'jsonrpc':'2.0','id':req['id'],'error':{'code':-32601,'message':'no'}}), flush=True)\n"
        "sys.stdin.readline()\n"
        "print(json.dumps({'jsonrpc':'2.0','id':2,'result':{'protocolVersion':'2025-11-25',"
        "'capabilities':{},'serverInfo':{'name':'dying'}}}), flush=True)\n"
        "sys.stdin.readline(); sys.stdin.readline()\n"
    )
    async with Client.stdio([sys.executable, "-c", script]) as client:
        assert client.protocol_version == "2025-11-25"
        with pytest.raises(ConnectionClosed):
            with anyio.fail_after(10):
                await client.call_tool("anything")


CHATTY = """
import logging
import subprocess
import sys

from elicitor import Server

print("Starting the issue tracker \\x1b[31m" + "x" * 300)  # before serving: this one does reach the protocol channel

server = Server("chatty")


@server.tool()
async def create_issue(title: str) -> str:
    print("debug: creating", title)
    logging.getLogger("tracker").info("created %s", title)
    subprocess.run(["echo", "child output"], check=True)
    sys.stdout.write("no newline yet")
    return f"created {title}"


server.run("stdio")
"""


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_prints_and_logs_of_a_stdio_server_go_to_stderr(
    anyio_backend: str, protocol: str, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """stdout is the protocol channel: while serving, print(), logging and child processes write to stderr; what
    was printed before reaches the client, which quotes the line and says where output belongs."""
    script = tmp_path / "chatty.py"
    script.write_text(CHATTY)
    with open(tmp_path / "stderr", "wb") as stderr, caplog.at_level("WARNING", logger="elicitor"):
        async with Client.stdio([sys.executable, str(script)], protocol=protocol, stderr=stderr) as client:
            assert (await client.call_tool("create_issue", {"title": "Crash"})).text == "created Crash"
            assert (await client.call_tool("create_issue", {"title": "Hang"})).text == "created Hang"
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("elicitor")]
    assert warnings == [
        "the server wrote a line that is not an MCP message to its stdout, ignored: "
        + repr("Starting the issue tracker \x1b[31m" + "x" * 88)
        + "... (332 bytes); stdout is the protocol channel (basic/transports, stdio): "
        "a server's prints and logs belong on stderr"
    ]
    logged = (tmp_path / "stderr").read_text()
    assert "debug: creating Crash\n" in logged and "debug: creating Hang\n" in logged
    assert "INFO tracker: created Crash" in logged
    assert logged.count("child output\n") == 2
    assert "no newline yet" in logged
    assert "-32700" not in logged and "unknown request id" not in logged  # the server was not answered noise


async def test_a_message_costs_one_read_and_a_stream_reads_only_while_asked(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The readable callback reads the pipe itself: the woken receive never retries a read that finds the pipe
    empty (EAGAIN), which a level-triggered selector caused once per message when the task read instead. And it
    reads only while a receive waits: bytes nobody asked for stay in the pipe (backpressure)."""
    import os

    import anyio.lowlevel

    from elicitor.transports import _stdio

    empty_reads = 0
    real_read = os.read

    def read(fd: int, size: int) -> bytes:
        nonlocal empty_reads
        try:
            return real_read(fd, size)
        except BlockingIOError:
            empty_reads += 1
            raise

    monkeypatch.setattr(os, "read", read)
    inbound, peer = os.pipe()
    _, outbound = os.pipe()
    stream = _stdio.FdStream(inbound, outbound, max_message_size=1 << 16, own_fds=True)
    got: list[bytes] = []
    received = anyio.Event()

    async def reader() -> None:  # the session's read loop: straight back to receive after each message
        nonlocal received
        while True:
            message = await stream.receive()
            assert isinstance(message, bytes)
            got.append(message)
            received.set()
            received = anyio.Event()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            for n in range(50):  # one at a time, as a peer waiting on each answer sends them
                for _ in range(5):  # the peer is another process: its next line comes after the reader settled
                    await anyio.lowlevel.checkpoint()
                event = received
                os.write(peer, b'{"n": %d}\n' % n)
                await event.wait()
            tg.cancel_scope.cancel()
    assert got == [b'{"n": %d}' % n for n in range(50)]
    assert empty_reads <= 1  # the first receive, before the descriptor is watched

    os.write(peer, b'{"n": "unread"}\n')
    await anyio.sleep(0.05)  # loop passes while the descriptor is readable and no receive waits
    assert not stream._ready
    assert await stream.receive() == b'{"n": "unread"}'
    await stream.aclose()
    os.close(peer)


async def test_what_the_reading_callback_delivers_is_taken_in_order_and_the_rest_left_to_receive(
    anyio_backend: str,
) -> None:
    """``deliver_to``: messages read while a receive waits go to the handler first, in order; the first it refuses
    and every one after it (even one it would take) go to ``receive``, in order; what the handler raises, the
    waiting receive raises."""
    import os

    from elicitor.transports import _stdio

    inbound, peer = os.pipe()
    _, outbound = os.pipe()
    stream = _stdio.FdStream(inbound, outbound, max_message_size=1 << 16, own_fds=True)
    offered: list[bytes] = []

    def handler(message: object) -> bool:
        assert isinstance(message, bytes)
        offered.append(message)
        if message == b"boom":
            raise ValueError("the handler failed")
        return message.startswith(b"take")

    stream.deliver_to(handler)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            got: list[object] = []

            async def reader() -> None:
                got.append(await stream.receive())

            tg.start_soon(reader)
            await anyio.sleep(0.05)  # the reader waits on the selector
            os.write(peer, b"take 1\ntake 2\nkeep 3\ntake 4\n")
        assert got == [b"keep 3"]
        assert offered == [b"take 1", b"take 2", b"keep 3"]
        assert await stream.receive() == b"take 4"  # left in order, not offered: the reader asked itself

        async def fails() -> None:
            with pytest.raises(ValueError, match="the handler failed"):
                await stream.receive()

        async with anyio.create_task_group() as tg:
            tg.start_soon(fails)
            await anyio.sleep(0.05)
            os.write(peer, b"take 5\nboom\n")
        assert offered[-2:] == [b"take 5", b"boom"]
        os.write(peer, b"keep 6\n")
        assert await stream.receive() == b"keep 6"  # the stream goes on
    await stream.aclose()
    os.close(peer)


async def test_a_notification_read_with_requests_is_handled_before_the_requests_after_it(anyio_backend: str) -> None:
    """The session acts on requests and results from the reading callback, but a notification (which its handler
    awaits in the read loop) and everything after it wait for the read loop: the order the peer sent is kept."""
    import os

    from elicitor.protocol import NotificationReceived, RequestReceived
    from elicitor.session import open_session
    from elicitor.transports import _stdio

    inbound, peer = os.pipe()
    outbound, replies = os.pipe()
    stream = _stdio.FdStream(inbound, replies, max_message_size=1 << 16, own_fds=True)
    seen: list[str] = []

    async def on_request(request: RequestReceived) -> dict[str, Any]:
        seen.append(f"request {request.id}")
        return {}

    async def on_notification(note: NotificationReceived) -> None:
        await anyio.sleep(0.01)  # the read loop waits for it
        seen.append(f"notification {note.method}")

    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]
    with anyio.fail_after(60):
        async with open_session(stream, on_request, on_notification):
            await anyio.sleep(0.05)  # the read loop waits on the selector
            os.write(peer, b"".join(json.dumps(line).encode() + b"\n" for line in lines))
            while len(seen) < 4:
                await anyio.sleep(0.01)
    assert seen == ["request 1", "notification notifications/initialized", "request 2", "request 3"]
    answered = os.read(outbound, 1 << 16).splitlines()
    assert sorted(json.loads(line)["id"] for line in answered) == [1, 2, 3]
    for fd in (peer, outbound):
        os.close(fd)


WHICH_LOOP = """
import asyncio
import os

from elicitor import Server

server = Server("which-loop")


@server.tool()
async def loop() -> str:
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


@server.tool()
async def echo(text: str) -> str:
    return text


@server.tool()
async def vanish() -> str:
    os._exit(3)
"""


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("server.run('stdio')", "uvloop"),
        ("server.run('stdio', loop='asyncio')", "asyncio"),
        ("serve", "uvloop"),
        ("serve --loop asyncio", "asyncio"),
    ],
)
async def test_a_stdio_server_runs_on_uvloop_when_installed_unless_told(
    anyio_backend: Any, tmp_path: Any, how: str, expected: str
) -> None:
    """Like HTTP, stdio serves on the fastest event loop installed (uvloop, with the [speed] extra and in
    development), from ``Server.run`` and ``elicitor serve`` alike; ``loop``/``--loop`` pick asyncio's own."""
    (tmp_path / "which_loop.py").write_text(WHICH_LOOP)
    if how.split()[0] == "serve":
        command = [sys.executable, "-m", "elicitor", "serve", "which_loop:server", "--transport", "stdio"]
        command += how.split()[1:]
    else:
        command = [sys.executable, "-c", f"from which_loop import server; {how}"]
    async with Client.stdio(command, cwd=tmp_path, stderr=subprocess.DEVNULL) as client:
        assert (await client.call_tool("loop")).text == expected


@pytest.mark.parametrize("server_loop", ASYNCIO_LOOPS)
async def test_large_messages_and_a_vanishing_server_on_either_loop_at_either_end(
    anyio_backend: Any, tmp_path: Any, server_loop: str
) -> None:
    """Both ends on asyncio's loop or uvloop's: a message many times a pipe's buffer goes through whole each way
    (the writer waits for the pipe to drain, the reader frames what arrives in pieces), and a server that exits
    mid-call ends the call and the next one with ``ConnectionClosed`` (end of its stdout, then a broken pipe)
    rather than a hang."""
    (tmp_path / "which_loop.py").write_text(WHICH_LOOP)
    command = [sys.executable, "-c", f"from which_loop import server; server.run('stdio', loop={server_loop!r})"]
    big = "".join(chr(0x41 + i % 26) for i in range(900_000))
    async with Client.stdio(command, cwd=tmp_path, stderr=subprocess.DEVNULL) as client:
        with anyio.fail_after(60):
            assert (await client.call_tool("loop")).text == server_loop
            assert (await client.call_tool("echo", {"text": big})).text == big
            assert (await client.call_tool("echo", {"text": "still here"})).text == "still here"
            with pytest.raises(ConnectionClosed):
                await client.call_tool("vanish")
            with pytest.raises(ConnectionClosed):
                await client.call_tool("echo", {"text": "anyone?"})
