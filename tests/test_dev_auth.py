"""``elicitor dev-auth`` and ``elicitor serve --auth-issuer``: a server protected without writing code, signed in
to by a person through the shipped development authorization server, with the library's ``OAuth``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path

import anyio
import httpx2 as httpx
import pytest

from elicitor import Client
from elicitor.client.auth import LoopbackAuthorizer, OAuth
from tests.replicas import free_port, wait_for_port

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def started(command: list[str], port: int, log: Path) -> Iterator[Path]:
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=out, stderr=out,
            start_new_session=True,
        )  # fmt: skip
    try:
        wait_for_port(port, process)
        yield log
    finally:
        process.terminate()
        process.wait(timeout=20)


class _Form(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "input" and found.get("type") == "hidden" and found.get("name"):
            self.fields[str(found["name"])] = found.get("value") or ""


async def person(link: str, name: str) -> None:
    """A browser: the sign-in page, a name typed, Sign in; the redirect reaches the client's loopback listener."""
    async with httpx.AsyncClient(follow_redirects=True, timeout=30) as browser:
        page = await browser.get(link)
        assert page.status_code == 200 and "Development only" in page.text, page.text
        form = _Form()
        form.feed(page.text)
        done = await browser.post(link.split("?", 1)[0], data={**form.fields, "user": name})
    assert "You are signed in" in done.text, done.text


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_serve_protects_a_server_with_the_shipped_dev_authorization_server(
    anyio_backend: str, era: str, tmp_path: Path
) -> None:
    auth_port, mcp_port = free_port(), free_port()
    issuer, url = f"http://127.0.0.1:{auth_port}", f"http://127.0.0.1:{mcp_port}/mcp"
    dev_auth = [sys.executable, "-m", "elicitor", "dev-auth", "--port", str(auth_port), "--scope", "demo"]
    serve = [sys.executable, "-m", "elicitor", "serve", "tests.peers.cli_server:server", "--port", str(mcp_port),
             "--auth-issuer", issuer, "--auth-scope", "demo"]  # fmt: skip
    with started(dev_auth, auth_port, tmp_path / "auth.log") as auth_log:
        assert "never use it for real users" in auth_log.read_text().lower()  # loud about what it is
        with started(serve, mcp_port, tmp_path / "serve.log"):
            async with httpx.AsyncClient() as http:
                refused = await http.post(url, json={}, headers={"accept": "application/json, text/event-stream"})
                assert refused.status_code == 401 and 'scope="demo"' in refused.headers["www-authenticate"]
                assert "error" not in refused.json()
                stranger = await http.post(f"{issuer}/register", json={"redirect_uris": ["https://evil.example/cb"]})
                assert stranger.status_code == 400  # loopback redirects only
            links: list[str] = []
            arrived = anyio.Event()

            def write(line: str) -> None:
                found = re.match(r"^\s+(http://127\.0\.0\.1:\d+/authorize\?\S+)", line)
                if found:
                    links.append(found.group(1))
                    arrived.set()

            auth = OAuth(LoopbackAuthorizer(write=write, open_browser=False))
            async with anyio.create_task_group() as tg:

                async def approve() -> None:
                    await arrived.wait()
                    await person(links[0], "ada")

                tg.start_soon(approve)
                with anyio.fail_after(60):
                    async with Client.http(url, auth=auth, protocol=era) as client:
                        assert (await client.call_tool("whoami")).text == "you are ada"


def test_dev_auth_on_port_0_says_and_serves_the_port_it_got() -> None:
    """``--port 0`` takes a free port: the issuer it prints, and its metadata names, is that port (it said
    ``http://127.0.0.1:0`` and named port 0 in the metadata and its tokens)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "elicitor", "dev-auth", "--port", "0"], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8"},
    )  # fmt: skip
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:(\d+))", first)
        assert found is not None and found.group(2) != "0", first
        issuer = found.group(1)
        wait_for_port(int(found.group(2)), None)
        metadata = httpx.get(f"{issuer}/.well-known/oauth-authorization-server", timeout=30).json()
        assert metadata["issuer"] == issuer and metadata["token_endpoint"] == f"{issuer}/token"
    finally:
        process.terminate()
        process.communicate(timeout=20)


def test_dev_auth_on_a_port_in_use_says_so_in_the_persons_language() -> None:
    """A port another program holds: one sentence in the person's language and status 1, no traceback."""
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        run = subprocess.run(
            [sys.executable, "-m", "elicitor", "dev-auth", "--port", str(port)], cwd=ROOT, capture_output=True,
            text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT), "LANG": "zh_CN.UTF-8"},
        )  # fmt: skip
    assert run.returncode == 1, run.stderr
    assert run.stderr.strip() == f"无法在 127.0.0.1:{port} 上监听：Address already in use", run.stderr
