"""The tutorial works the first time: each of its steps (docs/tutorial/*.py) run as its page tells a reader to.

The files run in their own folder with the virtual environment first on PATH, as for a reader who activated it;
the HTTP steps start their server with the command the page gives, on a free loopback port.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TUTORIAL = Path(__file__).resolve().parent.parent / "docs" / "tutorial"
BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def _run(*command: str) -> str:
    done = subprocess.run(command, cwd=TUTORIAL, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _serving(*command: str, port: int) -> Iterator[str]:
    process = subprocess.Popen(command, cwd=TUTORIAL, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None, process.communicate()[0].decode()
                assert time.monotonic() < deadline, "the tutorial's server did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.communicate(timeout=10)


def test_step_2_a_client_answers_the_server_over_stdio() -> None:
    out = _run("python", "client.py")
    assert "Booked a table for 2 at Chez Nous (Heated patio); we wrote to ada@example.com." in out
    assert "asked: Book 2 people, Heated patio?" in out


def test_step_3_the_readers_tests_pass() -> None:
    out = _run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_server.py")
    assert "3 passed" in out


def test_step_4_the_same_server_over_http() -> None:
    port = _port()
    with _serving("elicitor", "serve", "server:server", "--port", str(port), port=port) as url:
        out = _run("python", "http_client.py", url)
    assert "protocol: 2026-07-28" in out
    assert "Booked a table for 3 at Chez Nous (Indoor dining room)" in out


def test_step_5_url_mode_through_the_servers_own_page() -> None:
    port = _port()
    with _serving("python", "server_url.py", str(port), port=port) as url:
        out = _run("python", "url_client.py", url)
    assert f"the server asks to open: http://127.0.0.1:{port}/approve/" in out
    assert "Your calendar is connected." in out
