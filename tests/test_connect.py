"""``elicitor connect`` as a person meets it: the interface on their terminal whatever is redirected, results on
stdout, progress said once, a task's status only for a task, a yes/no question labelled by its message, a
docstring's paragraphs as one line of the menu, every kind of content block shown (bytes saved to files, a
hostile server's words escaped), and a tool list a bad entry left incomplete saying so."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import unisolated
from tests.peers.content_server import PDF, PNG, WAV
from tests.test_hostile_text import acting
from tests.test_screen import Tmux, tmux  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, str(ROOT / "tests" / "peers" / "cli_server.py")]
CONTENT = [sys.executable, str(ROOT / "tests" / "peers" / "content_server.py")]
SLOPPY = [sys.executable, str(ROOT / "tests" / "peers" / "sloppy_server.py")]


def _connect(
    protocol: str,
    lines: list[str],
    server: list[str] = SERVER,
    *,
    lang: str = "en",
    save: Path | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """``elicitor --lang LANG connect --ui lines`` as a script runs it, a person typing ``lines``."""
    options = ["--save", str(save)] if save is not None else []
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", "--lang", lang, "connect", "--ui", "lines", "--protocol", protocol,
         *options, *server],
        input="".join(line + "\n" for line in lines), capture_output=True, text=True, timeout=90, cwd=ROOT,
        start_new_session=True,  # no controlling terminal: a script's run, everything on stderr
        env={**os.environ, "LANG": "C.UTF-8", "LC_ALL": "", "LANGUAGE": "", **env},
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


# ---- what a result holds -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["2025-06-18", "2025-11-25", "2026-07-28"])
def test_every_kind_of_content_block_is_shown_in_order_and_its_bytes_saved(protocol: str, tmp_path: Path) -> None:
    """Text, an image, audio, a resource link, an embedded text resource and an embedded binary one, then the
    structured content: each a line of its own on stdout (it was the text alone), the bytes in files under
    ``--save`` that hold exactly what the server sent."""
    run = _connect(protocol, ["kinds", "q"], CONTENT, save=tmp_path)
    assert unisolated(run.stdout).splitlines() == [
        "Result: the chart for March",
        f"[image image/png, 11.8 KB] saved as {tmp_path}/1-image.png",
        f"[audio audio/wav, 604 bytes] saved as {tmp_path}/2-audio.wav",
        "[link Quarterly report, application/pdf, 2 KB] file:///reports/q1.pdf",
        "  The first quarter.",
        "[resource memo://notes, text/plain]",
        "  line one",
        "  line two",
        f"[resource memo://report.pdf, application/pdf, 2.9 KB] saved as {tmp_path}/3-resource.pdf",
        "Structured content:",
        "{",
        '  "month": "March",',
        '  "rows": 3',
        "}",
    ]
    assert (tmp_path / "1-image.png").read_bytes() == PNG
    assert (tmp_path / "2-audio.wav").read_bytes() == WAV
    assert (tmp_path / "3-resource.pdf").read_bytes() == PDF
    # The URI set apart as URL mode sets it apart (left-to-right isolate), the link's name isolated
    assert "\u2066file:///reports/q1.pdf\u2069" in run.stdout and "\u2068Quarterly report\u2069" in run.stdout
    assert "incomplete" not in run.stderr


def test_an_error_result_is_marked_and_its_image_saved_in_a_private_temporary_folder(tmp_path: Path) -> None:
    """Without ``--save`` the bytes go to a folder of their own under the system's temporary folder, readable
    by the person alone; an ``isError`` result says Error, whatever its blocks."""
    run = _connect("2025-11-25", ["refuse", "q"], CONTENT, TMPDIR=str(tmp_path))
    lines = run.stdout.splitlines()
    assert lines[0] == "Error: the chart could not be drawn"
    head, _, saved = lines[1].partition(" saved as ")
    assert head == "[image image/png, 11.8 KB]" and len(lines) == 2
    path = Path(saved)
    assert path.parent.parent == tmp_path and path.parent.name.startswith("elicitor-connect-")
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == PNG


def test_a_hostile_servers_blocks_reach_the_terminal_escaped(tmp_path: Path) -> None:
    """Escape sequences, C1 controls and bidi overrides in every string of every kind of block (and in the
    structured content, which JSON alone left as they were): all shown escaped; data that is not base64 is said
    to be so; the files are named by elicitor, never by the server's MIME type or URI."""
    run = _connect("2025-11-25", ["hostile", "q"], CONTENT, save=tmp_path)
    assert acting(run.stdout) == set() and acting(run.stderr) == set()
    shown = unisolated(run.stdout)
    assert r"Result: ok\x1b[2J\x1b[H\x1b]0;Trusted Terminal\x07" in shown
    assert r"[image image/png\x1b[2J\x1b[H, 11.8 KB] saved as " in shown
    assert "[audio audio/ogg] its data is not base64: not saved" in shown
    assert r"[link Statement\x9b2J] https://bank.example/\u202enigol\x1b]8;;https://evil.example/" in shown
    assert r"[resource memo://\u202etxt.exe, text/plain]" + "\n" + r"  a\x1b[2J\x1b[Hb" in shown
    assert r'"note": "c\x9b2J\u202ed\u001b[2J\u001b[H"' in shown
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1-image.bin", "2-resource.bin"]


@pytest.mark.parametrize(
    ("lang", "said"),
    [
        ("zh", ["结果：the chart for March", "[图片 image/png、11.8 KB] 已保存为 ",
                "[音频 audio/wav、604 字节] 已保存为 ",
                "[链接 Quarterly report、application/pdf、2 KB] file:///reports/q1.pdf", "结构化内容："]),
        ("zh-TW", ["結果：the chart for March", "[圖片 image/png、11.8 KB] 已儲存為 ",
                   "[音訊 audio/wav、604 位元組] 已儲存為 ",
                   "[連結 Quarterly report、application/pdf、2 KB] file:///reports/q1.pdf", "結構化內容："]),
    ],
)  # fmt: skip
def test_the_blocks_are_described_in_the_persons_language(lang: str, said: list[str], tmp_path: Path) -> None:
    run = _connect("2026-07-28", ["kinds", "q"], CONTENT, lang=lang, TMPDIR=str(tmp_path))
    shown = unisolated(run.stdout)
    for words in said:
        assert words in shown, shown
    assert "[image" not in shown and "saved as" not in shown and "Structured" not in shown


def test_a_block_the_client_cannot_read_is_a_line_and_an_incomplete_tool_list_says_so() -> None:
    """A hand-written server lists tools without a name or an ``inputSchema`` and loops its cursor, and answers
    with blocks of a type nobody defined: the menu says it is incomplete (it looked complete), and each block it
    cannot read is a line of the result in its place (it was only a warning on stderr)."""
    run = _connect("2025-11-25", ["echo", "", "q"], SLOPPY)
    menu = unisolated(run.stderr)
    assert (
        "  1. echo\n  2. annotated\n  3. later\n"
        "  (incomplete: some of what the server listed cannot be used; the warnings say why)\n"
    ) in menu
    assert run.stdout.splitlines()[:5] == [
        "Result: hello",
        "[content this client cannot read: unknown type hologram]",
        "[content this client cannot read: a block of type 'image' that does not parse: Object missing required "
        "field `data`]",
        "bye",
        "[content this client cannot read: a content block must be an object, not a str]",
    ]
    assert "tools/call result: keeping a content block" in run.stderr and "task None" not in run.stderr


def test_a_hostile_result_in_a_real_terminal_moves_nothing_and_retitles_nothing(tmux: Tmux, tmp_path: Path) -> None:  # noqa: F811
    """The hostile blocks on a real terminal (tmux), the result on it too: the menu above is still there (no
    clear screen, no cursor move), the window keeps its title, and the escapes read as text."""
    server = " ".join(CONTENT)
    command = f"TMPDIR={tmp_path} {sys.executable} -m elicitor connect {server}; echo '[connect exited '$?']'; sleep 60"
    tmux("new-session", "-d", "-s", "demo", "-x", "200", "-y", "50", "-c", str(ROOT), command)
    tmux.wait_for("3. hostile: Answer with blocks", "Tool to call", timeout=60)
    title = tmux("display-message", "-p", "-t", "demo", "#{pane_title}")
    tmux.keys("hostile", "Enter")
    shown = unisolated(tmux.wait_for("Structured content:", r'"note": "c\x9b2J\u202ed\u001b[2J\u001b[H"', timeout=60))
    assert shown.index("1. kinds: Answer with one block") < shown.index(r"Result: ok\x1b[2J\x1b[H\x1b]0;Trusted")
    assert r"[link Statement\x9b2J] https://bank.example/\u202enigol\x1b]8;;https://evil.example/" in shown
    assert tmux("display-message", "-p", "-t", "demo", "#{pane_title}") == title
    tmux.keys("q", "Enter")
    tmux.wait_for("[connect exited 0]", timeout=60)


def test_an_incomplete_list_and_an_unreadable_block_are_said_in_traditional_chinese() -> None:
    run = _connect("2025-06-18", ["echo", "", "q"], SLOPPY, lang="zh-TW")
    assert "  3. later\n  （清單不完整：伺服器列出的部分內容無法使用，原因請見警告）\n" in unisolated(run.stderr)
    lines = run.stdout.splitlines()
    assert lines[:2] == ["結果：hello", "[此用戶端無法讀取的內容：未知類型 hologram]"]
