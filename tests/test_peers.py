"""The peer matrix: elicitor's client against servers other people wrote, on every era each speaks, stdio and HTTP.

Peers: the official Python SDK (``tests/peers/mcp_server.py``), FastMCP (``tests/peers/fastmcp_server.py``), the
official TypeScript SDK (``tests/peers/ts_server.mjs``) and the reference ``server-everything`` (npm). Each cell —
one peer, one transport, one revision — is one connection that goes through every case the peer offers on that
revision: a form of every field kind, a confirmation, URL mode mid-call and by -32042, decline, cancel, and the
peer's task tools. An HTTP server process is started once per peer and shared by its cells; stdio starts one
process per cell. ``make test`` installs the Node peers (``scripts/conformance.py --install-only``) and the Python
ones (the ``dev`` extra).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from elicitor import Accepted, Client, ElicitationRequest, JSONRPCError, ScriptedHandler, UrlElicitationRequest
from elicitor.forms import BooleanField, EnumField, MultiEnumField, NumberField, StringField

from .conftest import ROOT, free_port

pytestmark = pytest.mark.anyio

CACHE = ROOT / ".cache"
NODE22 = CACHE / "node22" / "node_modules" / "node" / "bin" / "node"
TS_SDK = CACHE / "ts-sdk-1.32.2"
EVERYTHING = CACHE / "server-everything-2026.8.31" / "node_modules" / "@modelcontextprotocol" / "server-everything"
PEERS_DIR = ROOT / "tests" / "peers"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def node() -> str:
    found = str(NODE22) if NODE22.exists() else shutil.which("node")
    if found is None:
        pytest.skip("no node: run `make test` (or scripts/conformance.py --install-only)")
    return found


# ---- the answers: a form of every field kind, filled as a person would --------------------------------------------

SAMPLE = {"email": "ada@example.com", "uri": "https://example.com/ada", "date": "2026-01-02"}
SAMPLE["date-time"] = "2026-01-02T03:04:05Z"


def fill(request: ElicitationRequest | UrlElicitationRequest) -> Any:
    """A valid answer to any form: every field given a value of its kind (the first choice of an enum)."""
    assert isinstance(request, ElicitationRequest)
    content: dict[str, Any] = {}
    for spec in request.form.fields:
        if isinstance(spec, StringField):
            text = SAMPLE.get(spec.format or "", "Ada Lovelace")
            content[spec.name] = text.ljust(spec.min_length or 0, "e")
        elif isinstance(spec, NumberField):
            low = spec.minimum if spec.minimum is not None else 1
            content[spec.name] = int(low) if spec.integer else float(low) + 0.5 if spec.maximum is None else low
        elif isinstance(spec, BooleanField):
            content[spec.name] = True
        elif isinstance(spec, EnumField):
            content[spec.name] = spec.options[0].value
        elif isinstance(spec, MultiEnumField):
            content[spec.name] = [option.value for option in spec.options[: max(spec.min_items or 1, 1)]]
    return Accepted(content)


def kinds(request: ElicitationRequest) -> set[str]:
    """The field kinds of a form, titled and untitled enums told apart."""
    found: set[str] = set()
    for spec in request.form.fields:
        kind: str = spec.kind
        if isinstance(spec, StringField) and spec.format:
            kind = f"string:{spec.format}"
        elif isinstance(spec, EnumField):
            kind = f"enum:{spec.style}"
        elif isinstance(spec, MultiEnumField):
            kind = "multi-enum:titled" if spec.titled else "multi-enum:untitled"
        found.add(kind)
    return found


EVERY_KIND = {
    "string", "string:email", "string:uri", "string:date", "boolean", "integer", "number",
    "enum:untitled", "multi-enum:untitled", "multi-enum:titled",
}  # fmt: skip
"""What "a form of every field kind" covers at least (single-select titled: ``oneOf`` or legacy ``enumNames``)."""


def handler(*answers: Any) -> ScriptedHandler:
    return ScriptedHandler(list(answers), modes=frozenset({"form", "url"}))


def text(result: Any) -> str:
    return str(result.text)


# ---- the peers ------------------------------------------------------------------------------------------------------


@dataclass
class Peer:
    name: str
    eras: tuple[str, ...]
    stdio: Callable[[], list[str]]
    http: Callable[[int], tuple[list[str], dict[str, str]]]
    cases: Callable[[Client, ScriptedHandler, str], Awaitable[None]]
    cwd: Path = ROOT
    ready: Callable[[], None] = lambda: None
    env: dict[str, str] = field(default_factory=dict)


async def everything_cases(client: Client, form_handler: ScriptedHandler, era: str) -> None:
    """server-everything: forms, URL mode both ways, its task tool, and elicitation inside a client task."""
    tools = {tool.name: tool for tool in await client.list_tools()}
    assert tools["simulate-research-query"].task_support == "required"

    form_handler.add(fill, "decline", "cancel")
    result = await client.call_tool("trigger-elicitation-request")
    assert "User provided the requested information" in text(result), text(result)
    assert kinds(form_handler.requests[-1]) >= EVERY_KIND
    assert "User declined" in text(await client.call_tool("trigger-elicitation-request"))
    assert "User cancelled" in text(await client.call_tool("trigger-elicitation-request"))

    if era == "2025-11-25":
        form_handler.add("accept")  # URL mode mid-call: the person opens the page
        result = await client.call_tool("trigger-url-elicitation", {"url": "https://example.com/step"})
        assert "accept" in text(result).lower(), text(result)
        # -32042, with no completion notice ever: a script's acceptance is final, the call is retried at once.
        form_handler.add("accept", "accept")
        with anyio.fail_after(60):
            result = await client.call_tool(
                "trigger-url-elicitation", {"url": "https://example.com/after", "errorPath": True}
            )
        assert not result.is_error and "accept" in text(result).lower(), text(result)
        assert form_handler.url_requests[-2].url == "https://modelcontextprotocol.io"
        form_handler.add("decline")
        result = await client.call_tool("trigger-url-elicitation", {"url": "https://example.com/no"})
        assert "decline" in text(result).lower(), text(result)

        # taskSupport "required": called as a task (never a plain call answered with an error), asking mid-way.
        form_handler.add(fill)
        with anyio.fail_after(60):
            result = await client.call_tool("simulate-research-query", {"topic": "mcp", "ambiguous": True})
        assert not result.is_error, text(result)
        assert "Research Report" in text(result) and "Clarification" in text(result), text(result)
        # An elicitation the server runs as a task on this client (tasks.requests.elicitation.create).
        assert "trigger-elicitation-request-async" in tools
        form_handler.add(fill)
        with anyio.fail_after(60):
            result = await client.call_tool("trigger-elicitation-request-async")
        assert "[COMPLETED]" in text(result) and "Ada Lovelace" in text(result), text(result)
    else:
        assert "trigger-url-elicitation" not in tools  # 2025-06-18: no URL mode declared, none offered
        assert "trigger-elicitation-request-async" not in tools


async def official_cases(client: Client, answers: ScriptedHandler, era: str) -> None:
    """The official Python SDK: raw-schema forms, a model, a confirmation, URL mode both ways, resolvers."""
    key = secrets.token_hex(8)
    answers.add(fill, "decline", "cancel")
    if era == "2026-07-28":  # push requests do not exist there: the SDK's resolvers ask in rounds
        assert text(await client.call_tool("resolved_ask")) == "resolved Ada Lovelace, 0"
        assert text(await client.call_tool("resolved_ask")) == "decline"
        assert text(await client.call_tool("resolved_ask")) == "cancel"
        return
    result = text(await client.call_tool("every_kind"))
    assert result.startswith("accept") and "'email', 'ada@example.com'" in result, result
    assert kinds(answers.requests[-1]) >= EVERY_KIND | {"enum:titled", "enum:legacy"}
    assert text(await client.call_tool("push_ask")) == "decline"
    assert text(await client.call_tool("resolved_ask")) == "cancel"
    answers.add({"confirm": True}, {"confirm": False})
    assert text(await client.call_tool("confirm_delete")) == "deleted"
    assert text(await client.call_tool("confirm_delete")) == "kept"
    if era == "2025-11-25":
        answers.add("accept", "accept")
        assert text(await client.call_tool("push_url")) == "accept"
        with anyio.fail_after(60):  # -32042, then the retry at once (a script does not wait for a person)
            assert text(await client.call_tool("url_gate", {"key": key})) == f"connected {key}"
        assert answers.url_requests[-1].url.endswith(f"/gate/{key}")
        answers.add("decline")
        assert text(await client.call_tool("push_url")) == "decline"
    else:  # 2025-06-18: the SDK sends URL mode anyway; the client refuses it (-32602), nobody is asked
        before = len(answers.url_requests)
        with pytest.raises(JSONRPCError, match="did not declare elicitation mode 'url'"):
            await client.call_tool("push_url")  # the SDK passes the client's error on as its own
        assert len(answers.url_requests) == before


async def fastmcp_cases(client: Client, answers: ScriptedHandler, era: str) -> None:
    """FastMCP: forms from a dataclass and its shorthands, a bool confirmation, URL mode through its session."""
    answers.add(fill, "decline", "cancel")
    assert text(await client.call_tool("profile")) == "accept Ada Lovelace 1 1.5 True S ['a']"
    assert kinds(answers.requests[-1]) >= {"string", "integer", "number", "boolean", "enum:untitled"}
    assert text(await client.call_tool("profile")) == "decline"
    assert text(await client.call_tool("profile")) == "cancel"
    answers.add(fill)
    assert text(await client.call_tool("tier")) == "accept free"
    assert kinds(answers.requests[-1]) == {"enum:titled"}
    answers.add({"value": True}, {"value": False})
    assert text(await client.call_tool("confirm_delete")) == "deleted"
    assert text(await client.call_tool("confirm_delete")) == "kept"
    answers.add("accept")
    result = await client.call_tool("sign_in")
    if era == "2025-11-25":
        assert text(result) == "accept"
    else:  # FastMCP sends URL mode on 2025-06-18 too; the client refuses it and nobody is asked
        assert result.is_error and "did not declare elicitation mode 'url'" in text(result)
    # FastMCP turns -32042 into an isError result (its tools catch every exception): nothing to retry.
    assert (await client.call_tool("url_gate", {"key": secrets.token_hex(8)})).is_error


async def typescript_cases(client: Client, answers: ScriptedHandler, era: str) -> None:
    """The official TypeScript SDK: raw-schema forms, a confirmation, URL mode both ways."""
    key = secrets.token_hex(8)
    answers.add(fill, "decline", "cancel")
    result = text(await client.call_tool("every_kind"))
    assert result.startswith("accept") and 'email="ada@example.com"' in result, result
    assert kinds(answers.requests[-1]) >= EVERY_KIND | {"enum:titled"}
    assert text(await client.call_tool("ask")) == "decline"
    assert text(await client.call_tool("ask")) == "cancel"
    answers.add({"confirm": True})
    assert text(await client.call_tool("confirm_delete")) == "deleted"
    if era == "2025-11-25":
        answers.add("accept", "accept", "cancel")
        assert text(await client.call_tool("sign_in")) == "accept"
        with anyio.fail_after(60):  # -32042 and no completion notice: a script's acceptance is final
            assert text(await client.call_tool("url_gate", {"key": key})) == f"connected {key}"
        assert text(await client.call_tool("sign_in")) == "cancel"
        # taskSupport "optional": call_tool calls it directly or as a task; start_tool asks for the task.
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert tools["slow_report"].task_support == "optional"
        with anyio.fail_after(60):
            assert text(await client.call_tool("slow_report", {"topic": "a"})).startswith("report on a")
            handle = await client.start_tool("slow_report", {"topic": "b"})
            assert handle.id is not None
            assert text(await handle.wait()) == "report on b (task)"
    else:  # the SDK itself refuses URL mode to a client that did not declare it; -32042 is not on 2025-06-18
        assert (await client.call_tool("sign_in")).is_error
        with pytest.raises(JSONRPCError) as caught:
            await client.call_tool("url_gate", {"key": key})
        assert caught.value.code == -32042


def typescript_script() -> str:
    """The peer's script, placed beside the SDK it imports (``.cache/ts-sdk-*/node_modules``)."""
    if not (TS_SDK / "node_modules" / "@modelcontextprotocol" / "sdk").exists():
        pytest.skip("the TypeScript SDK is not installed: run `make test` (or scripts/conformance.py --install-only)")
    script = TS_SDK / "ts_server.mjs"
    source = (PEERS_DIR / "ts_server.mjs").read_text()
    if not script.exists() or script.read_text() != source:
        script.write_text(source)
    return str(script)


def python_peer(script: str) -> tuple[Callable[[], list[str]], Callable[[int], tuple[list[str], dict[str, str]]]]:
    path = str(PEERS_DIR / script)
    return (lambda: [sys.executable, path]), (lambda port: ([sys.executable, path, "--port", str(port)], {}))


def everything_http(port: int) -> tuple[list[str], dict[str, str]]:
    return [node(), str(EVERYTHING / "dist" / "index.js"), "streamableHttp"], {"PORT": str(port)}


def everything_ready() -> None:
    if not (EVERYTHING / "dist" / "index.js").exists():
        pytest.skip("server-everything is not installed: run `make test` (or scripts/conformance.py --install-only)")


PEERS = {
    "official-sdk": Peer(
        "official-sdk", ("2025-06-18", "2025-11-25", "2026-07-28"), *python_peer("mcp_server.py"), official_cases
    ),
    "fastmcp": Peer("fastmcp", ("2025-06-18", "2025-11-25"), *python_peer("fastmcp_server.py"), fastmcp_cases),
    "typescript-sdk": Peer(
        "typescript-sdk",
        ("2025-06-18", "2025-11-25"),
        lambda: [node(), typescript_script()],
        lambda port: ([node(), typescript_script(), "--port", str(port)], {}),
        typescript_cases,
    ),
    "server-everything": Peer(
        "server-everything",
        ("2025-06-18", "2025-11-25"),
        lambda: [node(), str(EVERYTHING / "dist" / "index.js"), "stdio"],
        everything_http,
        everything_cases,
        ready=everything_ready,
    ),
}


# ---- running the cells ----------------------------------------------------------------------------------------------


class HttpServers:
    """One HTTP server process per peer, started on first use, stopped when the module's tests end."""

    def __init__(self) -> None:
        self.running: dict[str, tuple[subprocess.Popen[bytes], str]] = {}

    def url(self, peer: Peer) -> str:
        if peer.name not in self.running:
            port = free_port()
            command, env = peer.http(port)
            process = subprocess.Popen(
                command, cwd=peer.cwd, env={**os.environ, **peer.env, **env},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            self.running[peer.name] = (process, f"http://127.0.0.1:{port}/mcp")
            _wait_for_port(port, process)
        return self.running[peer.name][1]

    def stop(self) -> None:
        for process, _ in self.running.values():
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    import socket
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the peer server exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError("the peer server did not start listening")


@pytest.fixture(scope="module")
def http_servers() -> Iterator[HttpServers]:
    servers = HttpServers()
    yield servers
    servers.stop()


@asynccontextmanager
async def connect(
    peer: Peer, transport: str, era: str, http_servers: HttpServers, answers: ScriptedHandler
) -> AsyncIterator[Client]:
    options: dict[str, Any] = {
        "elicitation": answers, "protocol": era, "request_timeout": 60.0, "handshake_timeout": 120.0,
        "probe_timeout": 60.0,  # a peer starting on a loaded machine may take seconds to answer server/discover
    }  # fmt: skip
    if transport == "stdio":
        client = Client.stdio(peer.stdio(), cwd=peer.cwd, stderr=subprocess.DEVNULL, **options)
    else:
        client = Client.http(http_servers.url(peer), **options)
    async with client:
        assert client.protocol_version == era
        yield client


CELLS = [
    pytest.param(name, transport, era, id=f"{name}-{transport}-{era}")
    for name, peer in PEERS.items()
    for transport in ("stdio", "http")
    for era in peer.eras
]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("name", "transport", "era"), CELLS)
async def test_peer_matrix(anyio_backend: str, name: str, transport: str, era: str, http_servers: HttpServers) -> None:
    peer = PEERS[name]
    peer.ready()
    answers = handler()
    async with connect(peer, transport, era, http_servers, answers) as client:
        await peer.cases(client, answers, era)


def test_the_matrix_covers_every_peer_transport_and_era() -> None:
    assert {cell.values[0] for cell in CELLS} == set(PEERS)
    assert json.dumps(sorted({(c.values[0], c.values[1]) for c in CELLS})).count("http") == len(PEERS)
