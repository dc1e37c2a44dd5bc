"""stdio: newline-delimited JSON-RPC over a child process's standard streams.

Spec: https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/stdio (the same rules in every
revision): one message per line, UTF-8, nothing but MCP messages on stdout; the server may log to stderr; the
client shuts down by closing the server's stdin, waiting, then SIGTERM, then SIGKILL.

Both ends read and write raw pipe file descriptors, non-blocking, woken by the event loop
(``anyio.wait_readable``/``wait_writable``): no message hops through a worker thread or a stream wrapper, and a
write that fits in the pipe completes without yielding to the loop. POSIX only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, cast

import anyio

from .._loop import running_asyncio_loop
from ..protocol import LineFramer, Oversized
from ..types import RequestId

DEFAULT_MAX_MESSAGE_SIZE = 4 << 20
"""The largest message a server accepts on a line (4 MiB, as over HTTP): a larger one is skipped unread and, when
its first or last bytes say it is a request, refused under its own id (-32600), so the client's call ends."""

CLIENT_MAX_MESSAGE_SIZE = 16 << 20
"""The largest message a client accepts from the server it started (16 MiB: a tool's result may carry a large image
or file, and servers of other SDKs, which set no limit, send them); a larger answer fails its request at once
with :class:`~elicitor.MessageTooLarge`."""

_READ_SIZE = 1 << 16
_NOT_ASYNCIO: asyncio.AbstractEventLoop = cast(asyncio.AbstractEventLoop, object())


class FdStream:
    """Framed messages over a pair of pipe file descriptors (made non-blocking; restored by :meth:`aclose`).

    Writes keep message order: a message is written at once when nothing is queued; otherwise it joins a backlog
    that one task drains as the pipe accepts it, and every sender waits until its bytes are out (backpressure).
    """

    def __init__(self, read_fd: int, write_fd: int, *, max_message_size: int, own_fds: bool) -> None:
        self._in = read_fd
        self._out = write_fd
        self._own = own_fds
        self._framer = LineFramer(max_message_size)
        self._ready: deque[bytes | Oversized] = deque()
        self._eof = False
        self._saved = {fd: os.get_blocking(fd) for fd in {read_fd, write_fd}}
        for fd in self._saved:
            os.set_blocking(fd, False)
        self._backlog = bytearray()
        self._draining = False
        self._drained = anyio.Event()
        self._broken = False
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._readable: asyncio.Future[None] | None = None
        self._watching = False
        self._drained_in = False
        """The last read took all the pipe held (a short read) and the selector has not said "readable" since: a
        read now would only fail (EAGAIN), so the next receive waits first (asyncio, whose selector says)."""
        self._deliver: Callable[[bytes | Oversized], bool] | None = None
        self._failure: Exception | None = None
        """What the reading callback's :meth:`deliver_to` handler raised, for the waiting receive to raise."""

    async def _wait_readable(self) -> None:
        """Wait until the read descriptor has data (on asyncio: until :meth:`_on_readable` has read it).

        On asyncio the descriptor stays registered with the selector for the stream's life (registering and
        unregistering on every wait, as ``anyio.wait_readable`` does, costs a system call pair per message);
        other backends use ``anyio.wait_readable``.
        """
        if self._loop is None:
            self._loop = running_asyncio_loop()
            if self._loop is None:
                self._loop = _NOT_ASYNCIO
        if self._loop is _NOT_ASYNCIO:
            await anyio.wait_readable(self._in)
            return
        if not self._watching:
            self._loop.add_reader(self._in, self._on_readable)
            self._watching = True
        self._readable = self._loop.create_future()
        try:
            await self._readable
        finally:
            self._readable = None

    def deliver_to(self, handler: Callable[[bytes | Oversized], bool]) -> None:
        """On asyncio, offer each message read while a :meth:`receive` waits to ``handler`` first, from the loop's
        reading callback: ``True`` means it took the message, ``False`` leaves that message and the ones after it
        to ``receive`` (which is then woken). What needs no waiting is acted on without a wake-up of the receiving
        task, one pass of the event loop fewer per message. An exception from ``handler`` is raised by the
        waiting ``receive``."""
        self._deliver = handler

    def _on_readable(self) -> None:
        waiting = self._readable
        if waiting is None or waiting.done():  # nobody waits: the bytes stay in the pipe until a receive reads them
            self._drained_in = False
            return
        # Read here rather than in the task this wakes: the pipe is empty before the selector is polled again. The
        # selector is level-triggered, so bytes left for the task reported "readable" once more on that poll, which
        # woke the task again for a read that only failed (EAGAIN): a loop pass, a wake-up and a system call more
        # per message.
        if not self._read():
            return
        deliver, ready = self._deliver, self._ready
        if deliver is not None:
            try:
                while ready and deliver(ready[0]):
                    ready.popleft()
            except Exception as exc:
                ready.popleft()
                self._failure = exc
        if ready or self._eof or self._failure is not None:
            waiting.set_result(None)

    def _read(self) -> bool:
        """Read what the pipe holds into the framer (or note the end of the stream); ``False`` if it held nothing."""
        try:
            data = os.read(self._in, _READ_SIZE)
        except BlockingIOError:
            self._drained_in = self._watching
            return False
        except OSError:
            data = b""
        if data:
            self._drained_in = len(data) < _READ_SIZE and self._watching
            self._ready.extend(self._framer.feed(data))
        else:
            self._eof = True
            last = self._framer.close()
            if last is not None:
                self._ready.append(last)
        return True

    async def receive(self) -> bytes | Oversized:
        while True:
            if self._failure is not None:
                failure, self._failure = self._failure, None
                raise failure
            if self._ready:
                return self._ready.popleft()
            if self._eof:
                raise anyio.EndOfStream
            # After a short read the peer has not written since (one system call fewer per message); on asyncio
            # the wait ends once _on_readable has read what came.
            if self._drained_in or not self._read():
                await self._wait_readable()

    async def send(self, message: bytes, related: RequestId | None = None, *, final: bool = False) -> None:
        if self._broken or self._closed:
            raise anyio.BrokenResourceError
        data = message + b"\n"
        if not self._backlog:
            try:
                written = os.write(self._out, data)
            except BlockingIOError:
                written = 0
            except OSError as exc:
                self._broken = True
                raise anyio.BrokenResourceError from exc
            if written == len(data):
                return
            data = data[written:]
        self._backlog += data
        if self._draining:
            await self._drained.wait()
            if self._broken:
                raise anyio.BrokenResourceError
            return
        self._draining = True
        try:
            while self._backlog:
                await anyio.wait_writable(self._out)
                try:
                    written = os.write(self._out, self._backlog)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    self._broken = True
                    raise anyio.BrokenResourceError from exc
                del self._backlog[:written]
        finally:
            self._draining = False
            self._drained.set()
            self._drained = anyio.Event()

    def close_writer(self) -> None:
        """Close the write side (for a client: the server's stdin, the spec's shutdown signal)."""
        if self._own and self._out >= 0:
            os.close(self._out)
            self._saved.pop(self._out, None)
            self._out = -1
            self._broken = True

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watching and self._loop is not None and self._loop is not _NOT_ASYNCIO:
            self._loop.remove_reader(self._in)
            self._watching = False
        for fd, blocking in self._saved.items():
            with contextlib.suppress(OSError):
                os.set_blocking(fd, blocking)
        if self._own:
            for fd in {self._in, self._out}:
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)


class StdioServerTransport(FdStream):
    """The server's end: its own stdin and stdout (file descriptors 0 and 1 by default)."""

    answers_after_input_ends = True
    """The client may close our stdin and still read our stdout (basic/lifecycle: a stdio client shuts down by
    closing the server's input, then waits for it to exit): the requests read before the end are answered, within
    :data:`~elicitor.session._session.INPUT_ENDED_GRACE` (2 s), before the session closes."""

    def __init__(self, stdin: int = 0, stdout: int = 1, *, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        super().__init__(stdin, stdout, max_message_size=max_message_size, own_fds=False)


@contextlib.contextmanager
def stdout_kept_for_protocol(out: int = 1) -> Iterator[int]:
    """For the block, keep this process's stdout for the protocol only; everything else written there goes to stderr.

    The spec forbids a stdio server to write anything but MCP messages to stdout (basic/transports, stdio), yet a
    ``print()`` in a tool, a library's chatter, a C extension or a child process all write to descriptor 1. So the
    pipe to the client moves to a new descriptor (yielded: the transport writes the protocol there) and descriptor
    1 becomes a copy of stderr, which is where all of that ends up: visible, and harmless to the protocol.
    ``sys.stdout`` is flushed on both sides of the switch (output printed before it is still on the protocol
    channel, where the client reports it as a stray line) and is line-buffered meanwhile, so a print shows at once.
    Everything is restored on exit.
    """
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    protocol = os.dup(out)
    os.dup2(2, out)
    stdout = sys.stdout
    buffered = getattr(stdout, "line_buffering", None)
    if buffered is False:
        with contextlib.suppress(Exception):
            stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    try:
        yield protocol
    finally:
        with contextlib.suppress(Exception):
            stdout.flush()
        if buffered is False:
            with contextlib.suppress(Exception):
                stdout.reconfigure(line_buffering=False)  # type: ignore[union-attr]
        os.dup2(protocol, out)
        os.close(protocol)


class StdioClientTransport(FdStream):
    """The client's end: a server started with :meth:`start`, talked to through pipes to its stdin and stdout."""

    reads_peer_stdout = True
    """What arrives is the server process's stdout, where a stray ``print()`` lands: a line that is not JSON is
    reported as such (quoted, with where output belongs) and ignored, rather than answered with -32700."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        *,
        max_message_size: int = CLIENT_MAX_MESSAGE_SIZE,
        grace: float = 2.0,
        stderr_lines: int = 0,
        stderr_to: int = 2,
    ) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.grace = grace
        self.stderr_tail: deque[str] = deque(maxlen=stderr_lines)
        """The last lines the server wrote on its stderr (when started with ``stderr_lines``), to say why it ended."""
        self._relay: threading.Thread | None = None
        if process.stderr is not None and stderr_lines:
            self._relay = threading.Thread(
                target=_relay, args=(process.stderr, stderr_to, self.stderr_tail), name="stderr relay", daemon=True
            )
            self._relay.start()
        """Seconds :meth:`aclose` waits for the server to exit after closing its stdin, and again after SIGTERM."""
        # Take the descriptors over from the Popen file objects, which would otherwise close them again.
        read_fd = os.dup(process.stdout.fileno())
        write_fd = os.dup(process.stdin.fileno())
        process.stdout.close()
        process.stdin.close()
        super().__init__(read_fd, write_fd, max_message_size=max_message_size, own_fds=True)

    @classmethod
    async def start(
        cls,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: int | IO[bytes] | None = None,
        max_message_size: int = CLIENT_MAX_MESSAGE_SIZE,
        grace: float = 2.0,
        stderr_lines: int = 0,
    ) -> StdioClientTransport:
        """Start ``command`` with pipes for its stdin and stdout.

        ``env`` is added to this process's environment. ``stderr`` receives the server's stderr: ``None`` (the
        default) passes it through to ours — the spec says stderr is for logs, not errors. ``stderr_lines``: keep
        the last that many lines of it (:attr:`stderr_tail`: what a server that dies says last is why), relaying
        each line on to ``stderr`` (a descriptor; ``None``, ours) as it comes.

        Raises:
            OSError: the command could not be started (not found, not executable).
        """
        full_env = None if env is None else {**os.environ, **env}
        relayed = stderr if isinstance(stderr, int) else (sys.stderr if stderr is None else stderr).fileno()
        process = subprocess.Popen(
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stderr_lines else sys.stderr if stderr is None else stderr, env=full_env, cwd=cwd,
        )  # fmt: skip
        return cls(
            process, max_message_size=max_message_size, grace=grace, stderr_lines=stderr_lines, stderr_to=relayed
        )

    async def stderr_read(self, within: float = 1.0) -> None:
        """Wait (up to ``within`` seconds) until everything the server wrote on stderr has been read: once it has
        exited, :attr:`stderr_tail` then holds its last words."""
        with anyio.move_on_after(within):
            while self._relay is not None and self._relay.is_alive():
                await anyio.sleep(0.01)

    async def aclose(self, *, grace: float | None = None) -> None:
        """Shut the server down per spec: close its stdin, wait (``grace``, default :attr:`grace`), then SIGTERM,
        then SIGKILL."""
        grace = self.grace if grace is None else grace
        with anyio.CancelScope(shield=True):
            self.close_writer()
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if sig is not None and self.process.poll() is None:
                    self.process.send_signal(sig)
                if await _wait_exit(self.process, grace):
                    break
            await super().aclose()


def _relay(source: IO[bytes], out: int, tail: deque[str]) -> None:
    """Copy a server's stderr, line by line, to the descriptor ``out``, keeping the last lines in ``tail``; until
    the server's end of the pipe closes. A thread: stderr is read whatever the event loop does."""
    with source:
        for line in iter(lambda: source.readline(8192), b""):
            tail.append(line.decode("utf-8", "replace").rstrip("\r\n"))
            with contextlib.suppress(OSError):
                os.write(out, line)


async def _wait_exit(process: subprocess.Popen[bytes], timeout: float) -> bool:
    with anyio.move_on_after(timeout):
        delay = 0.001
        while process.poll() is None:
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.05)
        return True
    return False
