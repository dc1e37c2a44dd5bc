"""A server's words reach a person as words: nothing it writes may act on the terminal or the page that shows it.

A hostile server (``tests/peers/hostile_server.py``) puts escape sequences, bell, carriage returns, backspaces,
bidi overrides, zero-width characters and look-alike letters into everything it says. It is fed through every
renderer: the line mode and the full screen of :class:`TerminalHandler` (what a person sees is emulated with pyte,
a terminal emulator), ``elicitor connect`` as a program, and :class:`BrowserHandler` (the page fetched over HTTP).
Each must show the text with those characters visibly escaped, keep what was on screen before, and never write one
of them raw. The functions behind it, :func:`printable` and :func:`identity_warnings`, are tested on their own first.
"""

from __future__ import annotations

import re
import subprocess
import sys
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import httpx2
import pyte
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output.vt100 import Vt100_Output

from elicitor import Declined, Implementation, TerminalHandler
from elicitor.client import BrowserHandler, UrlElicitationRequest
from elicitor.client._present import identity_warnings, printable

from .conftest import REVISIONS, ROOT, connected, later
from .peers import hostile_server
from .peers.hostile_server import server
from .test_screen import DOWN, ENTER, TAB, Screen, _Feed, answer

# What a person must see, character for character: every trick is shown as its escape.
BANNER = r"Trusted Bаnk\x1b[2J\x1b[H 1.0\x1b]0;Trusted Terminal\x07"  # its second a is Cyrillic
NAME = r"bank\u200b-desk\u202eexe.txt"
MESSAGE = r"Approve the transfer?\rNothing to approve, press Enter\x07"
AMOUNT = r"Amount\x08\x08\x08\x08Tip"
AMOUNT_ABOUT = r"in euros\u2067sorue\u2069\u200d\x1b[2J\x1b[H"
ACCOUNT = r"Account\u202etnuocca\u202c"
MINE = r"My savings\x1b]8;;https://evil.example/\x1b\bank.example\x1b]8;;\x1b" "\\"  # ST is ESC and a backslash
THEIRS = r"Their account\rMy savings\x07"
MIXED = "the server's name mixes letters of different scripts (Cyrillic, Latin)"
INVISIBLE = "the server's name contains invisible or direction-changing characters (shown escaped)"

WHO = Implementation(name=hostile_server.NAME, version=hostile_server.VERSION, title=hostile_server.TITLE)

# Characters that act instead of being read: none may be written raw by any renderer.
ACTING = frozenset("\x1b\x07\r\b\x9b\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\u200c\u200d\u2060")


TAGGED_FLAG = re.compile(
    "(?<=\U0001f3f4)\U000e0067\U000e0062(\U000e0065\U000e006e\U000e0067|\U000e0073\U000e0063\U000e0074"
    "|\U000e0077\U000e006c\U000e0073)\U000e007f"
)
"""The tags of the flags of England, Scotland and Wales."""


def writing_needs(text: str, i: int) -> bool:
    """Whether the joiner at ``i`` does what the text means: it joins two emoji (a skin tone or a variation
    selector may stand after the first), follows a virama, or parts two Arabic letters (Persian)."""
    ch, before, after = text[i], text[i - 1 : i], text[i + 1 : i + 2]
    base = text[i - 2 : i - 1] if before == "\ufe0f" or "\U0001f3fb" <= before <= "\U0001f3ff" else before
    if not before or not after or ch not in "\u200c\u200d":
        return False
    if ch == "\u200d" and unicodedata.category(base) == unicodedata.category(after) == "So":
        return True
    if unicodedata.combining(before) == 9 and after.isalpha():
        return True
    return ch == "\u200c" and all("ARABIC" in unicodedata.name(c, "") and c.isalpha() for c in before + after)


def acting(text: str, allowed: str = "\n") -> set[str]:
    """The characters in ``text`` that a terminal or a browser would act on (controls, format characters).

    The line renderer's own bidi isolates around a server's words (FSI or LRI, then PDI) are elicitor's, balanced
    on each line, and taken out first: a server's own isolates are escaped like every other control. So are the
    invisible characters writing needs (:func:`writing_needs`, :data:`TAGGED_FLAG`): what they do is what the
    text means."""
    lines = []
    for line in text.split("\n"):
        opened = sum(line.count(c) for c in "\u2066\u2067\u2068")
        lines.append(line.translate(dict.fromkeys(range(0x2066, 0x206A))) if opened == line.count("\u2069") else line)
    read = TAGGED_FLAG.sub("", "\n".join(lines))
    read = "".join(c for i, c in enumerate(read) if not writing_needs(read, i))
    found = {c for c in read if c in ACTING or unicodedata.category(c) in ("Cc", "Cf")}
    return found - set(allowed)


def rows(screen: pyte.Screen) -> list[str]:
    return [line.rstrip() for line in screen.display]


# ---- printable() and identity_warnings() -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b[2J", r"\x1b[2J"),
        ("\x1b]8;;https://e.example/\x1b\\x\x1b]8;;\x1b\\", r"\x1b]8;;https://e.example/\x1b\x\x1b]8;;\x1b" "\\"),
        ("ding\x07", r"ding\x07"),
        ("a\rb\bc\td", r"a\rb\x08c\td"),
        ("\x9b31m", r"\x9b31m"),  # the one-byte C1 CSI
        ("abc\u202edef\u2066g\u2069", r"abc\u202edef\u2066g\u2069"),
        ("zero\u200bwidth\ufeff", r"zero\u200bwidth\ufeff"),
        ("tag\U000e0041", r"tag\U000e0041"),
        ("line\u2028break", r"line\u2028break"),
        ("blank\u3164", r"blank\u3164"),
        ("Zoë, 東京, مرحبا, 🙂 and a \\ backslash", "Zoë, 東京, مرحبا, 🙂 and a \\ backslash"),
        # What writing needs stays whole: emoji a joiner joins, one variation selector, the three tagged flags,
        # Persian's non-joiner, a Devanagari conjunct; skin tones, keycaps and flags of two regional indicators.
        ("👨\u200d👩\u200d👧 🏳️\u200d🌈 ❤️\u200d🔥 👍🏽 1️⃣ 🇨🇳 🇹🇼", "👨\u200d👩\u200d👧 🏳️\u200d🌈 ❤️\u200d🔥 👍🏽 1️⃣ 🇨🇳 🇹🇼"),
        (
            "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
            "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
        ),
        ("می\u200cخواهم", "می\u200cخواهم"),
        ("क्\u200dष", "क्\u200dष"),
        ("葛\U000e0100飾区", "葛\U000e0100飾区"),  # an ideographic variation sequence
        # ... and nowhere else: between letters, at an edge, a run of selectors hiding bytes, other tags.
        ("pay\u200dpal", r"pay\u200dpal"),
        ("🙂\u200d", r"🙂\u200d"),
        ("\u200d🙂", r"\u200d🙂"),
        ("🙂\ufe0f\ufe00\ufe01", r"🙂️\ufe00\ufe01"),
        ("\ufe0fstart", r"\ufe0fstart"),
        ("🏴\U000e0075\U000e0073\U000e007f", r"🏴\U000e0075\U000e0073\U000e007f"),
        ("a\u200cb", r"a\u200cb"),
    ],
)
def test_printable_shows_what_would_act_as_escapes_and_leaves_the_rest(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_newlines_stay_only_when_asked_and_a_bare_carriage_return_never_does() -> None:
    assert printable("one\ntwo") == r"one\ntwo"
    assert printable("one\ntwo\r\nthree\rfour", newlines=True) == "one\ntwo\nthree\\rfour"


@given(st.text(), st.booleans())
def test_printable_is_stable_and_leaves_nothing_that_acts(text: str, newlines: bool) -> None:
    once = printable(text, newlines=newlines)
    assert printable(once, newlines=newlines) == once
    assert acting(once, allowed="\n" if newlines else "") == set()
    assert all(unicodedata.category(c) not in ("Cs", "Zl", "Zp") for c in once)


SELECTORS = "".join(map(chr, [*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)]))


@given(
    st.text(
        st.characters(categories=("L", "M", "N", "P", "S", "Zs"), exclude_characters="\u115f\u1160\u3164\uffa0")
    ).map(lambda text: text.translate(dict.fromkeys(map(ord, SELECTORS))))
)
def test_text_that_is_only_read_is_left_as_it_is(text: str) -> None:
    """Letters, marks, digits, punctuation, symbols and spaces; not variation selectors, which are only read
    after a character they vary (one at a time)."""
    assert printable(text) == printable(text, newlines=True) == text


IMITATES = "the server's name uses characters that imitate ordinary"


@pytest.mark.parametrize(
    ("server", "warned"),
    [
        (None, []),
        (Implementation(name="grand-hotel", version="2.1", title="Grand Hotel"), []),
        (Implementation(name="東京ホテル Tokyo", version="1"), []),  # Han, Katakana and Latin go together
        (Implementation(name="Ελληνικά", version="1"), []),  # Greek, with letters Latin has not
        (Implementation(name="paypal", version="1", title="Pаypal"), [MIXED]),
        (Implementation(name="рорра", version="1"), ["the server's name is written in Cyrillic letters that look"]),
        (Implementation(name="ｂａｎｋ", version="1"), ["the server's name uses characters that imitate ordinary"]),
        (Implementation(name="ding-can", version="1", title="订餐助手（测试版）：北京，上海　分店"), []),  # CJK marks
        (Implementation(name="ｂａｎｋ（测试）", version="1"), [IMITATES]),
        (Implementation(name="bank①", version="1"), [IMITATES]),
        (Implementation(name="bank\u202etxt.exe", version="1"), [INVISIBLE]),
        (Implementation(name="bank", version="1\x1b[2J"), [INVISIBLE]),
    ],
)
def test_identity_warnings_name_what_could_pass_for_another_server(server: Any, warned: list[str]) -> None:
    warnings = identity_warnings(server)
    assert len(warnings) == len(warned)
    for warning, start in zip(warnings, warned, strict=True):
        assert str(warning).startswith(start)


# ---- the line renderer, over a real connection -------------------------------------------------------------------


class LineTerminal:
    """A 200x80 terminal (pyte) as the line renderer meets it: what is written, then a line feed (the terminal's
    own CR LF), and each prompt followed by the person's answer as the terminal echoes it."""

    def __init__(self, answers: list[str]) -> None:
        self.screen = pyte.Screen(200, 80)
        self._stream = pyte.Stream(self.screen)
        self.written: list[str] = []
        self._answers = iter(answers)

    def _show(self, text: str) -> None:
        self.written.append(text)
        # A terminal draws the renderer's bidi isolates as nothing; pyte stops drawing the chunk at them instead.
        self._stream.feed(text.replace("\n", "\r\n").translate(dict.fromkeys(range(0x2066, 0x206A))))

    def write(self, text: str) -> None:
        self._show(text + "\n")

    def read(self, prompt: str) -> str:
        self._show(prompt)
        try:
            answer = next(self._answers)
        except StopIteration:
            raise EOFError from None
        self._stream.feed(answer + "\r\n")
        return answer


@pytest.mark.anyio
@pytest.mark.parametrize("revision", REVISIONS)
async def test_the_line_renderer_shows_a_hostile_servers_words_escaped(anyio_backend: str, revision: str) -> None:
    term = LineTerminal(["", "100", "1", ""])  # answer now, the amount, the first choice, submit
    handler = TerminalHandler(read_line=term.read, write=term.write)
    async with connected(server, elicitation=handler, protocol=revision) as client:
        with anyio.fail_after(20):
            result = await client.call_tool("transfer")
    assert result.text.startswith("sent 100 to mine")
    assert acting("".join(term.written)) == set()
    assert term.screen.title == ""  # no OSC 0 reached the terminal
    screen = rows(term.screen)
    assert screen[:5] == [
        "",
        f"── {BANNER} asks (server name: {NAME}) ──",
        f"⚠ Careful: {INVISIBLE}.",
        f"⚠ Careful: {MIXED}, a way to imitate another name.",
        MESSAGE,
    ]  # in order and intact: nothing cleared the screen, moved the cursor or went back over a line
    assert screen[5] == r"second line\x1b[5A"  # a line break in the message is kept; the cursor move is not
    text = "\n".join(screen)
    assert f"{AMOUNT} (required)\n  {AMOUNT_ABOUT}" in text
    assert f"{ACCOUNT} (required)" in text
    assert f"   1) {MINE}\n   2) {THEIRS}\n" in text
    assert f"  1. {AMOUNT}: 100\n  2. {ACCOUNT}: {MINE}" in text  # the review


@pytest.mark.anyio
async def test_the_line_renderer_shows_a_hostile_url_escaped(anyio_backend: str) -> None:
    term = LineTerminal(["n"])
    handler = TerminalHandler(read_line=term.read, write=term.write, open_url=lambda url: True)
    req = UrlElicitationRequest.from_params(hostile_server.url_params(), WHO)
    assert await handler.url(req) == Declined()
    assert acting("".join(term.written)) == set()
    text = "\n".join(rows(term.screen))
    assert term.screen.title == ""
    assert f"── {BANNER} asks you to open a web page ──" in text
    assert r"Sign in\r\x1b]0;Trusted Terminal\x07" in text
    assert r"  URL:  https://bank.example/\u202enigol\u202c\x1b]8;;https://evil.example/\x1b\bank.example" in text


# ---- elicitor connect, as a program ------------------------------------------------------------------------------


def test_connect_shows_a_hostile_servers_words_escaped() -> None:
    """Names, tool descriptions, logs, progress, results, errors and the server's own stderr, through the CLI."""
    lines = ["transfer", "", "100", "1", "", "fail", "q"]
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", "connect", "--ui", "lines", "--protocol", "2025-11-25",
         sys.executable, str(ROOT / "tests" / "peers" / "hostile_server.py")],
        input="".join(line + "\n" for line in lines).encode(), capture_output=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = run.stderr.decode()
    assert acting(out + run.stdout.decode()) == set()
    terminal = pyte.Screen(200, 100)
    pyte.Stream(terminal).feed(out.replace("\n", "\r\n").translate(dict.fromkeys(range(0x2066, 0x206A))))
    assert terminal.title == ""
    text = "\n".join(rows(terminal))
    assert text.startswith(r"  [server] starting\x1b[2J\x1b[H\x1b]0;Trusted Terminal\x07\rready")
    assert f"Connected to {BANNER}, protocol 2025-11-25." in text
    # A tool's first line is its summary, and a carriage return ends a line too: what follows it is not shown.
    assert "  1. transfer: Moves money\n" + r"  2. fail: Fails\x1b[5A" + "\n" in text
    assert r"  [warning bank\x07] log\x1b[2J\x1b[Hwiped\r\x1b]0;Trusted Terminal\x07" in text
    assert r"  progress 1/2 half\x08\x08\x08\x08way\u202e" in text
    assert f"── {BANNER} asks (server name: {NAME}) ──" in text and f"   1) {MINE}" in text
    results = run.stdout.decode()  # a result on stdout, the interface (and a failed call) on stderr: all escaped
    assert r"Result: sent 100 to mine\x1b[2J\x1b[Hdone" in results
    assert r"Error: refused\x1b[2J\x1b[H\rall good\x1b]8;;https://evil.example/\x1b\bank.example" in text


# ---- the full screen ---------------------------------------------------------------------------------------------


class _Recording(_Feed):
    """What prompt_toolkit writes, kept as well as fed to the emulator."""

    def __init__(self, stream: pyte.Stream, kept: list[str]) -> None:
        super().__init__(stream)
        self.kept = kept

    def flush(self) -> None:
        self.kept.append(self.getvalue())
        super().flush()


class RecordedScreen(Screen):
    def __init__(self, pipe: Any) -> None:
        super().__init__(pipe, Size(rows=40, columns=200))
        self.written: list[str] = []
        size = Size(rows=40, columns=200)
        stream = pyte.Stream(self.screen)
        self.output = Vt100_Output(_Recording(stream, self.written), lambda: size, term="xterm")

    def drawn(self) -> str:
        return "".join(self.written)


@pytest.fixture
def full_screen() -> Iterator[tuple[TerminalHandler, RecordedScreen]]:
    with create_pipe_input() as pipe:
        screen = RecordedScreen(pipe)
        yield TerminalHandler(input=pipe, output=screen.output), screen


def assert_drew_nothing_hostile(screen: RecordedScreen) -> None:
    """prompt_toolkit writes its own escape sequences (CSI, CR); none of the server's may get through with them."""
    drawn = screen.drawn().replace("\x1b]2;\x07", "")  # prompt_toolkit's own: an empty window title
    assert "\x1b]" not in drawn and "\x07" not in drawn
    assert not set(drawn) & (ACTING - {"\x1b", "\r", "\b"})  # CSI, CR and BS move its cursor
    assert screen.screen.title == ""


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_full_screen_shows_a_hostile_servers_words_escaped(
    full_screen: tuple[TerminalHandler, RecordedScreen],
) -> None:
    handler, screen = full_screen
    seen: dict[str, str] = {}

    async def person() -> None:
        await screen.shows(AMOUNT_ABOUT)
        seen["form"] = screen.text()
        await screen.type("100", TAB, DOWN, " ", TAB, ENTER)
        await screen.shows("Review your answer")
        seen["review"] = screen.text()
        await screen.type(ENTER)

    async with connected(server, elicitation=handler, protocol="2026-07-28") as client:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                call = later(tg, client.call_tool, "transfer")
                await person()
    assert (await call.value()).text.startswith("sent 100 to mine")
    form = seen["form"].splitlines()
    assert form[0].strip() == f"{BANNER} asks (server name: {NAME})"  # the banner, on the top line
    assert form[1] == f"⚠ Careful: {INVISIBLE}."
    assert form[2] == f"⚠ Careful: {MIXED}, a way to imitate another name."
    assert f" {MESSAGE}\n" in seen["form"] and r" second line\x1b[5A" in seen["form"]
    for label in (f" {AMOUNT} *", f" {AMOUNT_ABOUT}", f" {ACCOUNT} *", MINE, THEIRS):
        assert label in seen["form"]
    assert f"{AMOUNT}: 100" in seen["review"] and f"{ACCOUNT}: {MINE}" in seen["review"]
    assert_drew_nothing_hostile(screen)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_full_screen_shows_a_hostile_url_escaped(full_screen: tuple[TerminalHandler, RecordedScreen]) -> None:
    handler, screen = full_screen
    req = UrlElicitationRequest.from_params(hostile_server.url_params(), WHO)

    async def person() -> None:
        await screen.shows("asks you to open a web page")
        text = screen.text()
        assert r"https://bank.example/\u202enigol\u202c\x1b]8;;https://evil.example/\x1b\bank.example" in text
        assert r"Sign in\r\x1b]0;Trusted Terminal\x07" in text and f"⚠ Careful: {INVISIBLE}." in text
        await screen.type(TAB, TAB, ENTER)  # Decline

    assert await answer(handler, req, person) == Declined()
    assert_drew_nothing_hostile(screen)


# ---- the browser -------------------------------------------------------------------------------------------------


def opener(links: list[str]) -> Callable[[str], bool]:
    """A browser that opens every page it is given (the test fetches them), keeping their addresses."""

    def open_url(url: str) -> bool:
        links.append(url)
        return True

    return open_url


def html_shows(page: str, text: str) -> bool:
    """Is ``text`` on the page, as the browser shows it (HTML escapes undone by the test, not by the page)?"""
    import html

    return text in html.unescape(page)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_browser_page_shows_a_hostile_servers_words_escaped_and_warns_about_its_name() -> None:
    links: list[str] = []
    pages: dict[str, str] = {}

    async def person() -> None:
        with anyio.fail_after(10):
            while not links:
                await anyio.sleep(0.01)
        async with httpx2.AsyncClient() as browser:
            pages["form"] = (await browser.get(links[0])).text
            answer = {"amount": "100", "to": "mine", "_action": "review"}
            pages["review"] = (await browser.post(links[0], data=answer)).text
            await browser.post(links[0], data={"_action": "send"})

    async with (
        BrowserHandler(open_url=opener(links), write=lambda text: None) as handler,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(person)
        async with connected(server, elicitation=handler, protocol="2025-11-25") as client:
            with anyio.fail_after(20):
                result = await client.call_tool("transfer")
    assert result.text.startswith("sent 100 to mine")
    form, review = pages["form"], pages["review"]
    for page in (form, review):
        assert acting(page) == set()
        assert html_shows(page, f"<bdi>{BANNER}</bdi> asks:")
        assert html_shows(page, f"server name: <bdi>{NAME}</bdi>")
        assert html_shows(page, "⚠ Careful:") and html_shows(page, f"<li>{MIXED}, a way to imitate another name.")
        assert html_shows(page, f"<li>{INVISIBLE}.</li>")
    assert html_shows(form, MESSAGE + "\n" + r"second line\x1b[5A")
    for label in (AMOUNT, AMOUNT_ABOUT, ACCOUNT, MINE, THEIRS):
        assert html_shows(form, label)
    assert html_shows(review, f'<dt dir="auto">{AMOUNT}</dt><dd dir="auto">100</dd>')
    assert html_shows(review, f'<dd dir="auto">{MINE}</dd>')


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_browser_url_page_shows_a_hostile_url_escaped() -> None:
    links: list[str] = []
    req = UrlElicitationRequest.from_params(hostile_server.url_params(), WHO)
    async with (
        BrowserHandler(open_url=opener(links), write=lambda text: None) as handler,
        anyio.create_task_group() as tg,
        httpx2.AsyncClient() as browser,
    ):
        outcome = later(tg, handler.url, req)
        with anyio.fail_after(10):
            while not links:
                await anyio.sleep(0.01)
        page = (await browser.get(links[0])).text
        await browser.post(links[0], data={"_action": "decline"})
        assert await outcome.value() == Declined()
    assert acting(page) == set()
    assert html_shows(
        page, r"https://<mark>bank.example</mark>/\u202enigol\u202c\x1b]8;;https://evil.example/\x1b\bank"
    )
    assert html_shows(page, r"Sign in\r\x1b]0;Trusted Terminal\x07") and "⚠ Careful:" in page


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_ordinary_servers_page_carries_no_warning() -> None:
    from .test_browser import server as desk

    links: list[str] = []
    pages: list[str] = []

    async def person() -> None:
        with anyio.fail_after(10):
            while not links:
                await anyio.sleep(0.01)
        async with httpx2.AsyncClient() as browser:
            pages.append((await browser.get(links[0])).text)
            await browser.post(links[0], data={"_action": "cancel"})

    async with (
        BrowserHandler(open_url=opener(links), write=lambda text: None) as handler,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(person)
        async with connected(desk, elicitation=handler) as client:
            with anyio.fail_after(20):
                assert (await client.call_tool("book")).text == "cancel"
    assert "<bdi>Booking Desk 1.0</bdi> asks:" in pages[0] and "Careful" not in pages[0]
