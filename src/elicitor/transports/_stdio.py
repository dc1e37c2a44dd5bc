"""stdio: newline-delimited JSON-RPC over a child process's standard streams.

Spec: https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/stdio (the same rules in every
revision): one message per line, UTF-8, nothing but MCP messages on stdout; the server may log to stderr; the
client shuts down by closing the server's stdin, waiting, then SIGTERM, then SIGKILL.

The server side reads and writes its file descriptors directly, non-blocking, woken by the event loop
(``anyio.wait_readable``), so no message hops through a worker thread.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from typing import IO

import anyio
import anyio.abc

from ..protocol import LineFramer, Oversized
from ..types import RequestId

DEFAULT_MAX_MESSAGE_SIZE = 1 << 20
"""The largest message accepted on a line (1 MiB); larger lines are refused with -32600 and skipped."""

_READ_SIZE = 1 << 16


class _Lines:
    """Framing state shared by both ends: a framer and a queue of complete lines."""

    def __init__(self, max_size: int) -> None:
        self._framer = LineFramer(max_size)
        self._ready: deque[bytes | Oversized] = deque()
        self._eof = False

    def feed(self, data: bytes) -> None:
        if data:
            self._ready.extend(self._framer.feed(data))
            return
        self._eof = True
        last = self._framer.close()
        if last is not None:
            self._ready.append(last)

    def pop(self) -> bytes | Oversized | None:
        if self._ready:
            return self._ready.popleft()
        if self._eof:
            raise anyio.EndOfStream
        return None


class StdioServerTransport:
    """The server's end: reads its stdin, writes its stdout, both without threads.

    Args:
        stdin, stdout: file descriptors (default 0 and 1). They are made non-blocking while the transport is
            open and restored by :meth:`aclose`.
    """

    def __init__(self, stdin: int = 0, stdout: int = 1, *, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        self._in = stdin
        self._out = stdout
        self._lines = _Lines(max_message_size)
        self._saved = {fd: os.get_blocking(fd) for fd in {stdin, stdout}}
        for fd in self._saved:
            os.set_blocking(fd, False)
        self._lock = anyio.Lock()
        self._closed = False

    async def receive(self) -> bytes | Oversized:
        while True:
            line = self._lines.pop()
            if line is not None:
                return line
            try:
                data = os.read(self._in, _READ_SIZE)
            except BlockingIOError:
                await anyio.wait_readable(self._in)
                continue
            except OSError as exc:
                raise anyio.EndOfStream from exc
            self._lines.feed(data)

    async def send(self, message: bytes, related: RequestId | None = None) -> None:
        data = memoryview(message + b"\n")
        async with self._lock:
            while data:
                try:
                    written = os.write(self._out, data)
                except BlockingIOError:
                    await anyio.wait_writable(self._out)
                    continue
                except (BrokenPipeError, ConnectionResetError) as exc:
                    raise anyio.BrokenResourceError from exc
                data = data[written:]

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        for fd, blocking in self._saved.items():
            with contextlib.suppress(OSError):
                os.set_blocking(fd, blocking)


class StdioClientTransport:
    """The client's end: a server process started with :meth:`start`.

    ``stderr`` is where the server's stderr goes: ``None`` passes it through to ours (the default; the spec says
    stderr is for logs, not errors), or a file object, or ``subprocess.DEVNULL``.
    """

    def __init__(self, process: anyio.abc.Process, *, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        self.process = process
        self._lines = _Lines(max_message_size)
        self._lock = anyio.Lock()
        self._closed = False
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout

    @classmethod
    async def start(
        cls,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: int | IO[bytes] | None = None,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    ) -> StdioClientTransport:
        """Start ``command`` with pipes for stdin and stdout.

        Raises:
            OSError: the command could not be started (not found, not executable).
        """
        full_env = None if env is None else {**os.environ, **env}
        process = await anyio.open_process(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=sys.stderr if stderr is None else stderr,
            env=full_env,
            cwd=cwd,
        )
        return cls(process, max_message_size=max_message_size)

    async def receive(self) -> bytes | Oversized:
        while True:
            line = self._lines.pop()
            if line is not None:
                return line
            try:
                data = await self._stdout.receive(_READ_SIZE)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                data = b""
            self._lines.feed(data)

    async def send(self, message: bytes, related: RequestId | None = None) -> None:
        async with self._lock:
            try:
                await self._stdin.send(message + b"\n")
            except (anyio.ClosedResourceError, BrokenPipeError, ConnectionResetError) as exc:
                raise anyio.BrokenResourceError from exc

    async def aclose(self, *, grace: float = 2.0) -> None:
        """Shut the server down per spec: close its stdin, wait, then SIGTERM, then SIGKILL."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(anyio.BrokenResourceError, OSError):
                await self._stdin.aclose()
            with anyio.move_on_after(grace):
                await self.process.wait()
                return
            if self.process.returncode is None:
                self.process.terminate()
                with anyio.move_on_after(grace):
                    await self.process.wait()
                    return
                self.process.kill()
                await self.process.wait()
