"""Interop with the official TypeScript SDK (npm ``@modelcontextprotocol/sdk``) as a client of our HTTP server.

``make test`` installs the SDK into ``.cache/`` (``scripts/conformance.py --install-only``) before the suite runs.
"""

from __future__ import annotations

import json
import shutil
import sys
from typing import Any

import anyio
import pytest

from .conftest import ROOT, serving

pytestmark = pytest.mark.anyio

SDK = ROOT / ".cache" / "ts-sdk-1.32.2"
NODE22 = ROOT / ".cache" / "node22" / "node_modules" / "node" / "bin" / "node"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def node() -> str:
    if not (SDK / "node_modules" / "@modelcontextprotocol" / "sdk").exists():
        pytest.skip("the TypeScript SDK is not installed: run `make test` (or scripts/conformance.py --install-only)")
    found = str(NODE22) if NODE22.exists() else shutil.which("node")
    if found is None:
        pytest.skip("no node on PATH")
    return found


async def test_typescript_client_meets_form_and_url_mode(anyio_backend: str) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from everything_server import fixture_pages, server
    finally:
        sys.path.pop(0)
    # The script imports the SDK from SDK/node_modules: run it from a copy placed there.
    script = SDK / "ts_client.mjs"
    script.write_text((ROOT / "tests" / "peers" / "ts_client.mjs").read_text())
    async with serving(server.http_app(fallback=fixture_pages)) as url:
        with anyio.fail_after(60):
            run = await anyio.run_process([node(), str(script), url], check=False)
    assert run.returncode == 0, run.stderr.decode()
    seen = json.loads(run.stdout.decode().strip().splitlines()[-1])
    assert seen["protocol"] == "2025-11-25"
    assert seen["results"]["form"].startswith("User response: action=accept")
    assert seen["results"]["url"] == "URL elicitation: action=accept"
    url_request = seen["asked"][1]
    assert url_request["mode"] == "url" and url_request["url"].endswith(url_request["elicitationId"])
    # -32042, parsed by the SDK; the page; the completion notification; the retry.
    assert seen["error"]["code"] == -32042
    (elicitation,) = seen["error"]["data"]["elicitations"]
    assert seen["page"] == 200
    assert elicitation["elicitationId"] in seen["completed"]
    assert seen["results"]["required"] == "connected: the URL elicitation was completed"


async def test_typescript_client_runs_2025_11_25_tasks_that_ask_mid_way(anyio_backend: str) -> None:
    """The SDK's experimental tasks: it asks for the task, polls tasks/get, and on input_required calls
    tasks/result, on whose stream our server asks its question; then the result (or the tool's error)."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from everything_server import server
    finally:
        sys.path.pop(0)
    async with serving(server.http_app()) as url:
        seen = await run_ts_tasks_client(url)
    check_ts_tasks_client(seen)


async def test_typescript_client_through_the_proxy(anyio_backend: str) -> None:
    """The same client in front of `elicitor proxy --listen`, the example server behind it over stdio."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    everything = [sys.executable, str(ROOT / "examples" / "everything_server.py")]
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", "--listen", f"127.0.0.1:{port}", *everything]
    async with await anyio.open_process(command, cwd=ROOT) as proxy:
        try:
            with anyio.fail_after(20):
                while True:
                    try:
                        await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                        break
                    except OSError:
                        await anyio.sleep(0.1)
            seen = await run_ts_tasks_client(f"http://127.0.0.1:{port}/mcp")
        finally:
            proxy.terminate()
    check_ts_tasks_client(seen)


async def run_ts_tasks_client(url: str) -> dict[str, Any]:
    script = SDK / "ts_tasks_client.mjs"
    script.write_text((ROOT / "tests" / "peers" / "ts_tasks_client.mjs").read_text())
    with anyio.fail_after(60):
        run = await anyio.run_process([node(), str(script), url], check=False)
    assert run.returncode == 0, run.stderr.decode()
    seen: dict[str, Any] = json.loads(run.stdout.decode().strip().splitlines()[-1])
    return seen


def check_ts_tasks_client(seen: dict[str, Any]) -> None:
    assert seen["protocol"] == "2025-11-25"
    assert seen["capabilities"]["tasks"]["requests"] == {"tools": {"call": {}}}
    assert seen["execution"]["failing_job"] == {"taskSupport": "required"}
    assert seen["execution"]["confirm_delete"] == {"taskSupport": "optional"}
    confirm = seen["runs"]["confirm_delete"]
    assert confirm[0]["type"] == "taskCreated"
    assert {"type": "taskStatus", "status": "input_required"} in confirm
    assert confirm[-1] == {"type": "result", "text": "deleted ts.txt", "isError": False}
    assert [asked["message"] for asked in seen["asked"]] == ["Delete ts.txt?"]
    assert seen["asked"][0]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == confirm[0]["taskId"]
    failing = seen["runs"]["failing_job"]
    assert failing[0]["type"] == "taskCreated"
    assert failing[-1]["type"] == "result" and failing[-1]["isError"] is True
