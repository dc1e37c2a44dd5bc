"""A first deployment says what is wrong: the shipped nginx file runs as it is, and a replica that cannot work
(state shared in Redis without ``ELICITOR_STATE_KEYS``) or whose lifespan fails exits non-zero with the reason.

The replica tests (tests/test_replicas.py) run ``deploy/nginx.conf`` itself in front of real replicas, with only
its addresses changed; here the file is checked exactly as shipped.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
import uvicorn

from elicitor import Server
from tests.replicas import NGINX, ROOT, SHIPPED_NGINX, free_port, with_addresses

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn runs on asyncio


@pytest.mark.skipif(NGINX is None, reason="nginx is not installed (make test installs it)")
def test_the_shipped_nginx_conf_runs_as_is_under_its_own_prefix(tmp_path: Path) -> None:
    """``nginx -p DIR -c deploy/nginx.conf``, the file untouched: it loads, and what it writes (pid, logs,
    temporary files) is under DIR, so it runs beside the system's nginx."""
    (tmp_path / "logs").mkdir()
    assert NGINX is not None
    checked = subprocess.run(
        [NGINX, "-t", "-p", str(tmp_path), "-c", str(SHIPPED_NGINX), "-e", "logs/error.log"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert checked.returncode == 0, checked.stderr
    assert {"client_body_temp", "proxy_temp"} <= {p.name for p in tmp_path.iterdir()}
    directives = [line.split("#", 1)[0].strip() for line in SHIPPED_NGINX.read_text().splitlines()]
    assert "pid logs/nginx.pid;" in directives
    assert all(not d.split()[1].startswith("/") for d in directives if "_temp_path " in d)


def test_the_tests_run_the_shipped_file_with_only_its_addresses_changed() -> None:
    shipped = SHIPPED_NGINX.read_text()
    rendered = with_addresses(shipped, [9101, 9102], 9100)
    changed = set(rendered.splitlines()) ^ set(shipped.splitlines())
    assert changed and all(("server 127.0.0.1:" in line or "listen " in line) for line in changed), changed


def _env_without_keys() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "ELICITOR_STATE_KEYS"}
    # Nothing listens there: the replica must refuse before it ever reaches Redis.
    return {**env, "ELICITOR_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0", "PYTHONPATH": str(ROOT)}


@pytest.mark.parametrize("how", ["elicitor serve", "server.run"])
def test_a_replica_sharing_state_without_keys_exits_non_zero_saying_why(how: str) -> None:
    command = {
        "elicitor serve": [sys.executable, "-m", "elicitor", "serve", "tests.peers.replica_server:server"],
        "server.run": [sys.executable, "-m", "tests.peers.replica_server"],
    }[how]
    done = subprocess.run(
        [*command, "--port", str(free_port())],
        cwd=ROOT,
        env=_env_without_keys(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "ELICITOR_STATE_KEYS" in done.stderr, done.stderr
    assert "elicitor: replicas at" not in done.stderr  # no start line for a replica that does not start


async def test_a_failing_lifespan_stops_uvicorn_with_its_reason(
    anyio_backend: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvicorn's default lifespan="auto" takes an exception for "no lifespan here" and serves on (every request
    then fails with 500); the app says startup failed instead, so uvicorn exits non-zero and the reason is logged."""
    monkeypatch.delenv("ELICITOR_STATE_KEYS", raising=False)
    server = Server("misconfigured")
    server.share(f"redis://127.0.0.1:{free_port()}/0")
    assert server.misconfiguration() is not None
    config = uvicorn.Config(server.http_app(), host="127.0.0.1", port=free_port(), log_level="warning")
    uv = uvicorn.Server(config)
    caplog.set_level(logging.ERROR)
    with anyio.fail_after(30), pytest.raises(SystemExit) as exited:
        await uv.serve()
    assert exited.value.code != 0 and not uv.started
    assert "ELICITOR_STATE_KEYS" in caplog.text


@pytest.mark.parametrize(
    ("completer", "reason"),
    [
        (None, "the completion named none"),
        ("mallory", "belongs to another user"),
        ("grace", "it already was"),
    ],
)
async def test_a_refused_url_completion_is_logged_with_its_reason(
    anyio_backend: str, caplog: pytest.LogCaptureFixture, completer: str | None, reason: str
) -> None:
    """Behind OAuth a URL elicitation belongs to the signed-in user: a page that completes it without naming them
    (or as someone else) completes nothing, and the server says why instead of leaving the client to ask again."""
    server = Server("url-desk")
    link = await server.url_elicitations.new("Connect", "https://example.com/c/{elicitation_id}", principal="grace")
    if completer == "grace":
        assert await server.complete_url_elicitation(link.id, principal="grace")
    caplog.set_level(logging.INFO, logger="elicitor.server")
    assert not await server.complete_url_elicitation(link.id, principal=completer)
    assert reason in caplog.text
    assert not await server.complete_url_elicitation("no-such-id", principal="grace")
    assert "unknown or expired" in caplog.text


def test_the_shipped_balancer_drops_idle_connections_before_a_replica_does() -> None:
    """A request nginx sends on an idle connection just as the replica closes it is reset, and a reset POST is not
    safe to send again: the client gets a 502. So the upstream's idle timeout must be the shorter of the two."""
    import inspect
    import re

    from elicitor.server._server import KEEP_ALIVE

    upstream = re.search(r"upstream elicitor \{(.*?)\}", SHIPPED_NGINX.read_text(), re.DOTALL)
    assert upstream is not None
    found = re.search(r"^\s*keepalive_timeout (\d+)s;", upstream.group(1), re.MULTILINE)
    assert found is not None, "deploy/nginx.conf's upstream keeps idle connections for nginx's default 60 s"
    assert int(found.group(1)) < KEEP_ALIVE
    assert inspect.signature(Server.run).parameters["keep_alive"].default == KEEP_ALIVE


def test_keep_alive_sets_how_long_an_idle_connection_stays_open() -> None:
    """``elicitor serve --keep-alive 60``: a connection idle for longer than uvicorn's default 5 s still serves."""
    import socket

    port = free_port()
    command = [sys.executable, "-m", "elicitor", "serve", "tests.peers.replica_server:server", "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ELICITOR_REDIS_URL", None)
    with subprocess.Popen(
        [*command, "--keep-alive", "60"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            assert process.stderr is not None
            started = process.stderr.readline()  # the start line, printed just before uvicorn listens
            assert "elicitor:" in started, started
            request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
            for _ in range(600):
                try:
                    connection = socket.create_connection(("127.0.0.1", port), timeout=30)
                    break
                except ConnectionRefusedError:
                    time.sleep(0.05)
            with connection:

                def answered() -> bytes:
                    """Send the request and read its whole response (head, then Content-Length bytes of body)."""
                    connection.sendall(request)
                    data = b""
                    while b"\r\n\r\n" not in data:
                        chunk = connection.recv(65536)
                        if not chunk:
                            return data  # closed: the caller sees no response
                        data += chunk
                    head, _, body = data.partition(b"\r\n\r\n")
                    length = next(
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    )
                    while len(body) < length:
                        chunk = connection.recv(65536)
                        if not chunk:
                            break
                        body += chunk
                    return head + b"\r\n\r\n" + body

                assert answered().startswith(b"HTTP/1.1 200")
                time.sleep(6.5)  # idle past the default: with it, the replica would have closed the connection
                assert answered().startswith(b"HTTP/1.1 200")
        finally:
            process.terminate()
            process.wait(timeout=60)


def test_keep_alive_must_be_a_positive_number_of_seconds() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "elicitor", "serve", "tests.peers.replica_server:server", "--keep-alive", "0"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--keep-alive must be a whole number of seconds, 1 or more" in done.stderr
