"""The terminal the handler runs on: whether a full screen can be drawn there, whether it may be styled, and the
lines of standard input, read so that a line typed ahead is never lost to a buffer.

One reader serves the whole process (``STDIN``): the line mode's prompts and the "press Enter" wait of a URL
question share its buffer, so neither takes a line the other was owed.
"""

from __future__ import annotations

import codecs
import os
import select
import sys
import threading


def is_tty() -> bool:
    """Whether the full screen can be drawn: stdin and stderr a terminal, not a dumb one (``TERM=dumb`` is what
    screen readers' terminals and editors' shells set: they get the line mode), and one that speaks UTF-8: the
    full screen reads keys as UTF-8 whatever the locale says, so Chinese typed in a GB18030 or Big5 terminal
    (``LANG=zh_CN.GB18030``) would reach the answer as other characters. The line mode reads in the
    terminal's own encoding."""
    try:
        tty = sys.stdin.isatty() and sys.stderr.isatty() and os.environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):  # replaced or closed streams
        return False
    return tty and encoding() == "utf-8"


def encoding() -> str:
    """The encoding of what the person types (standard input's, as the locale or ``PYTHONIOENCODING`` set it),
    by its codec's name (``utf-8``, ``gb18030``, ``big5``); UTF-8 when standard input names none Python knows."""
    try:
        return codecs.lookup(getattr(sys.stdin, "encoding", None) or "utf-8").name
    except LookupError:
        return "utf-8"


def colours_allowed() -> bool:
    """Styling by escape sequences is allowed: ``NO_COLOR`` is unset or empty (https://no-color.org) and the
    terminal is not dumb."""
    return not os.environ.get("NO_COLOR") and os.environ.get("TERM", "") != "dumb"


class StdinLines:
    """Lines of standard input read straight from its descriptor, so a line typed ahead never hides in a buffer
    that ``select`` cannot see (it would leave a "press Enter" wait blind to an Enter already typed)."""

    def __init__(self) -> None:
        self._pending = b""
        self._eof = False
        self._lock = threading.Lock()

    def _fd(self) -> int | None:
        try:
            return sys.stdin.fileno()
        except (AttributeError, OSError, ValueError):  # replaced by an object without a descriptor, or closed
            return None

    def _fill(self, fd: int) -> None:
        chunk = os.read(fd, 65536)
        if chunk:
            self._pending += chunk
        else:
            self._eof = True

    def _take(self) -> str | None:
        line, newline, rest = self._pending.partition(b"\n")
        if not newline and not self._eof:
            return None
        self._pending = rest
        if not newline and not line:
            raise EOFError
        # In the terminal's encoding: decoded as UTF-8, a name typed in a GB18030 terminal (李雷, b"\xc0\xee\xc0\xd7")
        # was sent to the server as four replacement characters.
        return line.decode(encoding(), "replace").removesuffix("\r")

    def readline(self) -> str:
        """The next line, without its end; ``EOFError`` at the end of input."""
        fd = self._fd()
        if fd is None:
            line = sys.stdin.readline()
            if not line:
                raise EOFError
            return line.rstrip("\n")
        with self._lock:
            while (line := self._take()) is None:
                self._fill(fd)
            return line

    def wait_line(self, stop: threading.Event) -> None:
        """Consume one line, or return when ``stop`` is set (polled, so the thread ends when told) or at EOF."""
        fd = self._fd()
        with self._lock:
            while not stop.is_set():
                try:
                    if self._take() is not None:
                        return
                except EOFError:
                    return
                if fd is None:
                    return
                try:
                    ready, _, _ = select.select([fd], [], [], 0.2)
                except (OSError, ValueError):  # no selectable stdin: nothing to wait for
                    return
                if ready:
                    self._fill(fd)


STDIN = StdinLines()


def wait_for_enter(stop: threading.Event) -> None:
    STDIN.wait_line(stop)


def read_stdin(prompt: str) -> str:
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return STDIN.readline()
