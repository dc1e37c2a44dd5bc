"""The pages URL mode links to, served with the server (``Server.serve_pages``) on stdio and over HTTP.

End to end: ``elicitor serve examples.url_pages:server`` on each transport and era; the client follows the link the
way a browser would (httpx), signs in, the page completes the elicitation and the tool returns.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest

from elicitor import Accepted, Client, Declined, ElicitorError, Server, UrlElicitationRequest
from elicitor.server import PagesNotServed

from .conftest import ROOT, free_port, serving, unisolated
from .replicas import wait_for_port

pytestmark = pytest.mark.anyio


class Browser:
    """A URL handler that opens the page like a person's browser: shows the form, signs in as ``user``."""

    modes = frozenset({"form", "url"})

    def __init__(self, user: str = "ada") -> None:
        self.user = user
        self.links: list[str] = []
        self.pages: list[str] = []

    async def __call__(self, request: Any) -> Any:
        return Declined()

    async def url(self, request: UrlElicitationRequest) -> Any:
        self.links.append(request.url)
        async with httpx2.AsyncClient() as browser:
            form = await browser.get(request.url)
            assert form.status_code == 200, form.text
            done = await browser.post(request.url, data={"user": self.user})
            assert done.status_code == 200, done.text
        self.pages += [form.text, done.text]
        return Accepted(None)


@asynccontextmanager
async def served(transport: str, protocol: str, handler: Browser) -> AsyncIterator[Client]:
    """``examples/url_pages.py`` run by ``elicitor serve`` on ``transport``, and a client connected to it."""
    serve = [sys.executable, "-m", "elicitor", "serve", "examples.url_pages:server"]
    if transport == "stdio":
        client = Client.stdio([*serve, "--transport", "stdio"], cwd=ROOT, elicitation=handler, protocol=protocol)
        async with client:
            yield client
        return
    port = free_port()
    process = subprocess.Popen([*serve, "--port", str(port)], cwd=ROOT)
    try:
        await anyio.to_thread.run_sync(wait_for_port, port, process)
        async with Client.http(f"http://127.0.0.1:{port}/mcp", elicitation=handler, protocol=protocol) as client:
            yield client
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_sign_in_page_completes_the_elicitation(anyio_backend: str, transport: str, protocol: str) -> None:
    browser = Browser()
    async with served(transport, protocol, browser) as client:
        result = await client.call_tool("connect_account")
        assert result.text == "Connected as ada.", result.text
        # The connection still speaks MCP after the page server answered (its log never reached stdout).
        assert (await client.call_tool("create_issue", {"title": "t"})).text == "Filed 't' (priority 3, labels: none)."
    (link,) = browser.links
    found = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/sign-in/[\w-]{20,}", link)
    assert found is not None, link
    assert int(found.group(1)) != 0
    assert "Sign in to the issue tracker." in browser.pages[0]
    assert "Signed in as <b>ada</b>. You can close this tab." in browser.pages[1]


async def hello(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": f"page {scope['path']}".encode()})


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio
async def test_the_http_app_serves_the_pages_and_links_to_where_it_listens(anyio_backend: str) -> None:
    pages_server = Server("pages")
    assert pages_server.serve_pages(hello) is hello and pages_server.pages is hello
    with pytest.raises(PagesNotServed, match="not known yet"):
        pages_server.page_url("/p")  # nothing serves it yet: no address to give
    with pytest.raises(PagesNotServed, match="serves no pages"):
        Server("none").page_url("/p")
    with pytest.raises(ElicitorError):  # like everything elicitor raises on purpose
        Server("none").page_url("/p")
    with pytest.raises(RuntimeError):  # and, as it was first, a RuntimeError
        Server("none").page_url("/p")
    async with serving(pages_server.http_app()) as endpoint:  # uvicorn on port 0: the address comes from the socket
        base = endpoint.removesuffix("/mcp")
        async with httpx2.AsyncClient() as web:
            assert (await web.get(f"{base}/p/1")).text == "page /p/1"
            assert (await web.get(f"{base}/mcp")).status_code != 200  # the MCP endpoint is still the MCP endpoint
        assert pages_server.page_url("/p/{elicitation_id}") == f"{base}/p/{{elicitation_id}}"
        assert pages_server.page_url("q") == f"{base}/q"


def test_a_public_url_wins_over_the_listening_address() -> None:
    server = Server("proxied")
    server.serve_pages(hello, url="https://tracker.example.com/pages/")
    assert server.page_url("/sign-in/{elicitation_id}") == "https://tracker.example.com/pages/sign-in/{elicitation_id}"
    server._pages.learn({"type": "http", "scheme": "http", "server": ("10.0.0.5", 8000)})
    assert server.page_url("/x") == "https://tracker.example.com/pages/x"


def sign_in_link(*options: str) -> tuple[str, subprocess.Popen[str]]:
    """``elicitor serve examples.url_pages:server --transport stdio`` spoken to in raw JSON-RPC on 2025-11-25: the
    link ``connect_account`` gives (in its -32042 error), and the process, still serving."""
    command = [sys.executable, "-m", "elicitor", "serve", "examples.url_pages:server", "--transport", "stdio"]
    process = subprocess.Popen([*command, *options], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdin is not None and process.stdout is not None
    capabilities: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
    hello = {"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}
    for message in [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "connect_account", "arguments": {}}},
    ]:
        process.stdin.write(json.dumps(message) + "\n")
    process.stdin.flush()
    replies = [json.loads(process.stdout.readline()) for _ in range(2)]
    assert replies[1]["error"]["code"] == -32042, replies  # URLElicitationRequiredError, carrying the page's link
    return str(replies[1]["error"]["data"]["elicitations"][0]["url"]), process


def test_a_stdio_server_with_pages_keeps_stdout_for_mcp() -> None:
    """The loopback page server logs to stderr only: after page requests, stdout still carries only MCP messages."""
    link, process = sign_in_link()
    assert httpx2.get(link).status_code == 200 and httpx2.get(link + "x").status_code == 404
    rest, _ = process.communicate("", timeout=30)
    assert rest == "", rest  # no access log line (uvicorn's default writes it to stdout)
    assert process.returncode == 0


def test_serve_takes_the_address_browsers_reach_the_pages_at() -> None:
    link, process = sign_in_link("--pages-url", "https://tracker.example.com/")
    process.communicate("", timeout=30)
    assert link.startswith("https://tracker.example.com/sign-in/"), link
    refused = subprocess.run(
        [sys.executable, "-m", "elicitor", "serve", "tests.test_url:server", "--pages-url", "https://x.example"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert refused.returncode == 2 and "serves no pages" in refused.stderr


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
def test_elicitor_connect_through_the_sign_in_page(protocol: str) -> None:
    """A person at ``elicitor connect`` agrees to open the link, signs in on the page in a browser, and is done:
    on 2025-11-25 the server's completion notice ends the wait, on 2026-07-28 Enter asks the server again."""
    server = [sys.executable, "-m", "elicitor", "serve", "examples.url_pages:server", "--transport", "stdio"]
    connect = subprocess.Popen(
        [sys.executable, "-m", "elicitor", "connect", "--ui", "lines", "--protocol", protocol, *server], cwd=ROOT,
        text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "BROWSER": "/nonexistent/browser"},  # nothing opens: the person uses the link shown
    )  # fmt: skip
    assert connect.stdin is not None and connect.stderr is not None
    connect.stdin.write("connect_account\ny\n")
    connect.stdin.flush()
    shown: list[str] = []
    link = None
    for line in connect.stderr:
        shown.append(line)
        found = re.search(r"URL:\s+(http://127\.0\.0\.1:\d+/sign-in/\S+)", unisolated(line))
        if found:
            link = found.group(1)
            break
    assert link is not None, "".join(shown)
    assert httpx2.post(link, data={"user": "grace"}).status_code == 200
    out, rest = connect.communicate("\nq\n" if protocol == "2026-07-28" else "q\n", timeout=60)
    assert connect.returncode == 0, rest
    assert "Result: Connected as grace." in out, "".join(shown) + rest + out  # results on stdout, the rest on stderr


async def test_a_page_connection_is_sent_without_waiting_for_acknowledgements(anyio_backend: str) -> None:
    """The sockets pages are served on (URL-mode pages, the browser form, the demo) are made so that asyncio sets
    TCP_NODELAY on every connection it accepts: otherwise each response uvicorn writes in two pieces waits ~40 ms
    for the browser's delayed acknowledgement."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    import asyncio
    import socket

    from elicitor._net import loopback_socket

    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    listening = loopback_socket()
    server = await asyncio.get_running_loop().create_server(Probe, sock=listening)
    try:
        port = listening.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        with anyio.fail_after(10):
            assert await accepted != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
