"""``elicitor connect`` as a person meets it: the interface on their terminal whatever is redirected, results on
stdout, progress said once, a task's status only for a task, a yes/no question labelled by its message, a
docstring's paragraphs as one line of the menu."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_screen import Tmux, tmux  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, str(ROOT / "tests" / "peers" / "cli_server.py")]


def _connect(protocol: str, lines: list[str]) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", "connect", "--ui", "lines", "--protocol", protocol, *SERVER],
        input="".join(line + "\n" for line in lines), capture_output=True, text=True, timeout=90, cwd=ROOT,
        start_new_session=True,  # no controlling terminal: a script's run, everything on stderr
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return run


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
def test_progress_is_said_once_and_task_status_only_for_a_task(protocol: str) -> None:
    run = _connect(protocol, ["count", "pack", "q"])
    shown = run.stderr
    assert shown.count("task done") == 1, shown  # pack's, not also count's
    for step in (1, 2, 3):
        assert shown.count(f"counted {step}") == 1, shown
        # 2025-11-25: each step as progress, never again as the task's status; 2026-07-28 has no progress
        # notifications, and the status polled shows the steps it happens to see, each once
        said = shown.count(f"box {step} packed")
        assert said == 1 if protocol == "2025-11-25" else said <= 1, shown
    assert "task done" in shown
    assert run.stdout.splitlines() == ["Result: counted to three", "Result: three boxes packed"]


def test_a_yes_no_question_is_labelled_by_its_message_and_a_docstring_reads_as_a_line() -> None:
    run = _connect("2025-11-25", ["ship", "y", "q"])
    assert "  1. ship: Ship the order.\n" in run.stderr  # the docstring's first line, not "\n    Ship..." or ""
    shown = run.stderr.replace("\u2068", "").replace("\u2069", "")  # the label in bidi isolates (a server's text)
    assert "Ship the order now? y = yes" in shown and "value" not in shown
    assert run.stdout == "Result: shipped\n"


def test_the_interface_is_on_the_terminal_when_stderr_and_stdout_are_redirected(tmux: Tmux, tmp_path: Path) -> None:  # noqa: F811
    """``elicitor connect server 2>err >out`` in a real terminal: the menu and the full-screen yes/no question
    are on the screen, the result in ``out``, nothing of the interface in ``err``."""
    server = " ".join(SERVER)
    err, out = tmp_path / "err", tmp_path / "out"
    command = f"{sys.executable} -m elicitor connect {server} 2>{err} >{out}; echo '[connect exited '$?']'; sleep 60"
    tmux("new-session", "-d", "-s", "demo", "-x", "160", "-y", "40", "-c", str(ROOT), command)
    tmux.wait_for("1. ship: Ship the order.", "Tool to call")
    tmux.keys("ship", "Enter")
    shown = tmux.wait_for("cli-desk 1.0.0 asks", "Ship the order now?", "Yes")
    assert "value" not in shown
    tmux.keys("y")
    tmux.wait_for("Tool to call (number or name; Enter or q to quit): ")
    tmux.keys("q", "Enter")
    tmux.wait_for("[connect exited 0]")
    assert out.read_text() == "Result: shipped\n"
    assert "Tool to call" not in err.read_text() and "ship" not in err.read_text()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_official_sdk_client_gets_through_32042_with_the_adapter(anyio_backend: str) -> None:
    """The official SDK raises -32042 (URL elicitation required) as MCPError; ``sdk_call_tool`` shows each step
    through the handler, whose person finishes it on the page, and calls again."""
    from mcp import Client as McpClient
    from mcp.shared.exceptions import MCPError

    from elicitor import Accepted, Cancelled
    from elicitor.client import ElicitationRequest, UrlElicitationRequest, sdk_call_tool, sdk_elicitation_callback

    from .conftest import serving

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from everything_server import fixture_pages, server
    finally:
        sys.path.pop(0)
    opened: list[str] = []

    class Person:
        modes = frozenset({"form", "url"})

        async def __call__(self, request: ElicitationRequest) -> Cancelled:
            return Cancelled()

        async def url(self, request: UrlElicitationRequest) -> Accepted[None]:
            opened.append(request.url)
            assert request.elicitation_id is not None
            assert await server.complete_url_elicitation(request.elicitation_id)  # the person, on the page
            return Accepted(None)

    person = Person()
    app = server.http_app(fallback=fixture_pages)
    async with (
        serving(app) as url,
        McpClient(url, elicitation_callback=sdk_elicitation_callback(person), mode="legacy") as client,
    ):
        with pytest.raises(MCPError) as required:
            await client.call_tool("test_elicitation_url_required", {})
        assert required.value.code == -32042  # what the SDK alone does
        opened.clear()
        result = await sdk_call_tool(client, "test_elicitation_url_required", {}, person)
    assert result.content[0].text == "connected: the URL elicitation was completed"
    assert len(opened) == 1
