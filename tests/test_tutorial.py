"""The tutorial works the first time: each of its steps (docs/tutorial/*.py) run as its page tells a reader to.

The files run in their own folder with the virtual environment first on PATH, as for a reader who activated it;
the HTTP steps start their server with the command the page gives, on a free loopback port.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .conftest import free_port
from .replicas import wait_for_port

TUTORIAL = Path(__file__).resolve().parent.parent / "docs" / "tutorial"
BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def _run(*command: str) -> str:
    done = subprocess.run(command, cwd=TUTORIAL, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@contextmanager
def _serving(*command: str, port: int) -> Iterator[str]:
    process = subprocess.Popen(command, cwd=TUTORIAL, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        try:
            wait_for_port(port, process)
        except (RuntimeError, TimeoutError) as exc:
            process.kill()
            output = process.communicate()[0].decode()
            raise AssertionError(f"the tutorial's server did not start: {exc}\n{output}") from exc
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        if process.poll() is None:
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
    port = free_port()
    with _serving("elicitor", "serve", "server:server", "--port", str(port), port=port) as url:
        out = _run("python", "http_client.py", url)
    assert "protocol: 2026-07-28" in out
    assert "Booked a table for 3 at Chez Nous (Indoor dining room)" in out


def test_step_5_url_mode_through_the_servers_own_page() -> None:
    port = free_port()
    with _serving("python", "server_url.py", str(port), port=port) as url:
        out = _run("python", "url_client.py", url)
    assert f"the server asks to open: http://127.0.0.1:{port}/approve/" in out
    assert "Your calendar is connected." in out
