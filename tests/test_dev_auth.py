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
