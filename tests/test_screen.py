"""The full-screen terminal renderer: headless through prompt_toolkit's pipe input, and once for real in tmux."""

from __future__ import annotations

import getpass
import io
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pyte
import pytest
from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output.vt100 import Vt100_Output

from elicitor import Accepted, Cancelled, Declined, FieldError, Form, TerminalHandler
from elicitor.client import ElicitationRequest, UrlElicitationRequest
from elicitor.client._present import hint
from elicitor.forms import FormField, MultiEnumField, NumberField, Option, StringField
from elicitor.i18n import ENGLISH
from elicitor.types import Implementation

from .conftest import ROOT

SERVER = Implementation(name="hotel", version="2.1", title="Grand Hotel")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 2},
        "email": {"type": "string", "format": "email", "title": "Email"},
        "guests": {"type": "integer", "minimum": 1, "maximum": 10, "title": "Guests", "default": 2},
        "news": {"type": "boolean", "title": "Newsletter", "default": False},
        "room": {
            "type": "string",
            "title": "Room",
            "oneOf": [{"const": "s", "title": "Single"}, {"const": "d", "title": "Double"}],
        },
        "extras": {
            "type": "array",
            "title": "Extras",
            "items": {"anyOf": [{"const": "b", "title": "Breakfast"}, {"const": "p", "title": "Parking"}]},
            "maxItems": 1,
        },
        "arrival": {"type": "string", "format": "date", "title": "Arrival"},
        "note": {"type": "string", "title": "Note", "description": "Anything the desk should know"},
    },
    "required": ["name", "email", "guests", "room", "arrival"],
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the screens run in a worker thread either way; the first test below runs on both backends


TAB, SHIFT_TAB, DOWN, ESC, ENTER = "\t", "\x1b[Z", "\x1b[B", "\x1b", "\r"


TALL = Size(rows=60, columns=100)


class _Feed(io.StringIO):
    """What prompt_toolkit writes, fed to a terminal emulator as it is flushed."""

    def __init__(self, stream: pyte.Stream) -> None:
        super().__init__()
        self.stream = stream

    def flush(self) -> None:
        self.stream.feed(self.getvalue())
        self.seek(0)
        self.truncate()


class Screen:
    """A pipe-fed terminal (100x60 unless told), emulated by pyte: ``text()`` is what a person sees right now."""

    def __init__(self, pipe: PipeInput, size: Size = TALL) -> None:
        self.pipe = pipe
        self.screen = pyte.Screen(size.columns, size.rows)
        self.output = Vt100_Output(_Feed(pyte.Stream(self.screen)), lambda: size, term="xterm")

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    async def type(self, *keys: str, settle: float = 0.15) -> None:
        for key in keys:
            self.pipe.send_text(key)
            await anyio.sleep(0.03)
        await anyio.sleep(settle)

    async def shows(self, text: str) -> None:
        """Wait until ``text`` is on the screen and the drawing has settled (so what follows reads a whole frame)."""
        with anyio.move_on_after(5):
            while text not in self.text():
                await anyio.sleep(0.05)
            before = ""
            while before != self.text():
                before = self.text()
                await anyio.sleep(0.05)
            return
        raise AssertionError(f"{text!r} never appeared; the screen shows:\n{self.text()}")


@asynccontextmanager
async def screen_handler(size: Size | None = None, **options: Any) -> AsyncIterator[tuple[TerminalHandler, Screen]]:
    with create_pipe_input() as pipe:
        screen = Screen(pipe, size or TALL)
        yield TerminalHandler(input=pipe, output=screen.output, **options), screen


def request(**overrides: Any) -> ElicitationRequest:
    return ElicitationRequest(
        overrides.pop("message", "Book a room"), Form.from_schema(overrides.pop("schema", SCHEMA)), SERVER, **overrides
    )


async def answer(handler: TerminalHandler, req: Any, drive: Any) -> Any:
    """Run the handler on ``req`` while ``drive()`` types; return the handler's outcome."""
    result: list[Any] = []

    async def ask() -> None:
        result.append(await (handler.url(req) if isinstance(req, UrlElicitationRequest) else handler(req)))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await drive()
    return result[0]


FILL = ["Ada", TAB, "ada@example.com", TAB, TAB, " ", TAB, DOWN, DOWN, " ", TAB, DOWN, " ", TAB, "2026-12-24", TAB]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_every_field_kind_is_filled_reviewed_and_sent() -> None:
    async with screen_handler() as (handler, screen):

        async def drive() -> None:
            await screen.shows("Grand Hotel 2.1 asks")
            await screen.type(*FILL, TAB, ENTER)  # past the optional note, onto Review
            await screen.shows("Review your answer before it is sent")
            text = screen.text()
            assert "Room: Double" in text and "Extras: Parking" in text and "Newsletter: yes" in text
            await screen.type(ENTER)  # Submit

        outcome = await answer(handler, request(), drive)
    assert outcome == Accepted(
        {"name": "Ada", "email": "ada@example.com", "guests": 2, "news": True, "room": "d", "extras": ["p"],
         "arrival": "2026-12-24"}
    )  # fmt: skip


@pytest.mark.anyio
async def test_a_form_taller_than_an_80x12_terminal_scrolls_to_what_has_the_focus() -> None:
    async with screen_handler(Size(rows=12, columns=80)) as (handler, screen):

        async def drive() -> None:
            await screen.shows("Grand Hotel 2.1 asks")
            assert "Note" not in screen.text()  # below the fold
            await screen.type(*FILL)
            await screen.shows("Anything the desk should know")  # scrolled down with the focus
            await screen.type(TAB, ENTER)
            await screen.shows("< Submit >")  # the review, scrolled to keep its buttons in sight
            assert "Room: Double" in screen.text()
            await screen.type(ENTER)

        outcome = await answer(handler, request(), drive)
    assert isinstance(outcome, Accepted) and outcome.data["arrival"] == "2026-12-24"


@pytest.mark.anyio
async def test_the_screen_names_the_server_marks_required_fields_and_hints_from_the_schema() -> None:
    async with screen_handler() as (handler, screen):

        async def drive() -> None:
            await screen.shows("Grand Hotel 2.1 asks (server name: hotel)")
            text = screen.text()
            assert "Book a room" in text
            assert "Your name *" in text and "Note" in text and "Note *" not in text
            assert "an email address" in text and "a whole number · from 1 to 10" in text
            assert "a date, YYYY-MM-DD" in text and "choose up to 1" in text
            assert "Anything the desk should know" in text
            assert "(not chosen)" in text and "Single" in text and "Double" in text  # titles, not "s"/"d"
            assert "Esc cancel" in text
            await screen.type(ESC)

        assert await answer(handler, request(), drive) == Cancelled()


@pytest.mark.anyio
async def test_live_validation_shows_errors_and_review_refuses_until_they_are_fixed() -> None:
    async with screen_handler() as (handler, screen):

        async def drive() -> None:
            await screen.shows("asks")
            await screen.type("A", TAB, "not-an-email", TAB, "\x7f99")
            await screen.shows("✗ must be at least 2 characters")
            await screen.shows("✗ expected an email address")
            await screen.shows("✗ must be at most 10")
            await screen.type(TAB * 6, ENTER)  # Review
            await screen.shows("Please fix 5 fields marked ✗.")  # name, email, guests, room, arrival
            await screen.shows("✗ this field is required")
            assert "Review your answer" not in screen.text()
            await screen.type("da", TAB, "\x15ada@example.com", TAB, "\x153", TAB, TAB)  # focus is back on the name
            await screen.type(DOWN, " ", TAB, TAB, "2026-01-02", TAB, TAB, ENTER)
            await screen.shows("Review your answer before it is sent")
            await screen.type(TAB, ENTER)  # Edit
            await screen.type(TAB * 8, ENTER)  # back on Review
            await screen.shows("Guests: 3")
            await screen.type(ENTER)

        outcome = await answer(handler, request(), drive)
    assert isinstance(outcome, Accepted)
    assert outcome.data == {"name": "Ada", "email": "ada@example.com", "guests": 3, "news": False, "room": "s",
                            "arrival": "2026-01-02"}  # fmt: skip


@pytest.mark.anyio
async def test_decline_and_cancel_from_the_form_and_from_the_review() -> None:
    async with screen_handler() as (handler, screen):

        async def decline_at_once() -> None:
            await screen.shows("asks")
            await screen.type(SHIFT_TAB, SHIFT_TAB, ENTER)  # from the first field back round to Decline

        assert await answer(handler, request(), decline_at_once) == Declined()

    async with screen_handler() as (handler, screen):

        async def cancel_at_review() -> None:
            await screen.shows("asks")
            await screen.type(*FILL, TAB, ENTER)
            await screen.shows("Review your answer")
            await screen.type(TAB, TAB, TAB, ENTER)  # Submit, Edit, Decline, Cancel

        assert await answer(handler, request(), cancel_at_review) == Cancelled()


@pytest.mark.anyio
async def test_a_retry_shows_the_previous_errors_and_prefills_the_previous_answer() -> None:
    previous = {"name": "Ada", "email": "ada@example.com", "guests": 4, "room": "d", "arrival": "2026-02-03"}
    retry = request(previous=previous, errors=(FieldError("guests", "the desk refused this"),))
    async with screen_handler() as (handler, screen):

        async def drive() -> None:
            await screen.shows("Your previous answer was not accepted: Guests: the desk refused this")  # its title
            await screen.shows("✗ the desk refused this")
            await screen.type(TAB, TAB, "\x7f5", TAB * 6, ENTER)
            await screen.shows("Guests: 5")
            await screen.type(ENTER)

        outcome = await answer(handler, retry, drive)
    assert outcome == Accepted({**previous, "guests": 5, "news": False})


@pytest.mark.anyio
async def test_the_queue_is_visible_and_requests_are_answered_one_at_a_time() -> None:
    confirm = {"type": "object", "properties": {"ok": {"type": "boolean", "title": "OK"}}, "required": ["ok"]}
    async with screen_handler() as (handler, screen):
        outcomes: list[Any] = []

        async def ask(message: str) -> None:
            outcomes.append((message, await handler(request(message=message, schema=confirm))))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, "first")
                await screen.shows("first")
                tg.start_soon(ask, "second")
                await screen.shows("1 more question waiting after this one")
                await screen.type("y")  # a yes/no question: answered at once
                await screen.shows("second")
                await screen.type(ESC)
    assert outcomes == [("first", Accepted({"ok": True})), ("second", Cancelled())]


@pytest.mark.anyio
async def test_a_cancelled_request_gives_the_terminal_back() -> None:
    async with screen_handler() as (handler, screen):
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(handler, request())
                await screen.shows("asks")
                tg.cancel_scope.cancel()  # the server gave up, say
        confirm = {"type": "object", "properties": {"ok": {"type": "boolean", "title": "OK"}}}

        async def drive() -> None:
            await screen.shows("OK?")
            await screen.type(ENTER)  # a yes/no question: Enter is No

        assert await answer(handler, request(schema=confirm), drive) == Accepted({"ok": False})


YES_NO: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "title": "Confirm", "description": "Two nights, €240", "default": True}
    },
    "required": ["confirm"],
}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("keys", "outcome"),
    [([ENTER], Accepted({"confirm": False})), (["y"], Accepted({"confirm": True})),
     (["n"], Accepted({"confirm": False})), ([SHIFT_TAB, ENTER], Accepted({"confirm": True})),
     (["\uff59"], Accepted({"confirm": True})), (["Y"], Accepted({"confirm": True})),  # an IME's fullwidth y
     (["\uff4e", ENTER], Accepted({"confirm": False})),
     ([TAB, ENTER], Declined()), ([ESC], Cancelled())],
)  # fmt: skip
async def test_a_yes_no_question_is_one_screen_with_no_focused(keys: list[str], outcome: Any) -> None:
    """A form of one boolean (``ctx.confirm``): the question with Yes and No at once, no checkbox, no review; No has
    the focus whatever the default, so a stray Enter agrees to nothing."""
    async with screen_handler() as (handler, screen):

        async def drive() -> None:
            await screen.shows("< No >")
            text = screen.text()
            assert "Grand Hotel 2.1 asks" in text and "Book a room" in text
            assert "Confirm?" in text and "Two nights, €240" in text
            assert "< Yes >" in text and "< Decline >" in text and "< Cancel >" in text
            assert "[ ]" not in text and "[*]" not in text and "Review" not in text  # no checkbox, no review step
            assert "n or Enter No" in text
            await screen.type(*keys)

        assert await answer(handler, request(schema=YES_NO), drive) == outcome


@pytest.mark.anyio
async def test_url_consent_shows_the_full_url_and_host_and_opens_only_on_open() -> None:
    opened: list[str] = []

    def open_url(url: str) -> bool:
        opened.append(url)
        return True

    url = "http://user@xn--pple-43d.com:8080/consent?x=1"
    req = UrlElicitationRequest.from_params({"message": "Sign in to continue", "url": url}, SERVER)
    async with screen_handler(open_url=open_url) as (handler, screen):

        async def stray_enter_then_decline() -> None:
            await screen.shows("Grand Hotel 2.1 asks you to open a web page")
            text = screen.text()
            assert url in text and "Host: xn--pple-43d.com" in text
            assert "Punycode" in text and "user name or password" in text and "not encrypted" in text
            assert "unusual port (8080)" in text and "Nothing has been opened or fetched." in text
            await screen.type(ENTER)  # a stray Enter lands on the URL, not on Open
            assert opened == []
            await screen.type(TAB, TAB, ENTER)

        assert await answer(handler, req, stray_enter_then_decline) == Declined()

        async def open_it() -> None:
            await screen.shows("asks you to open a web page")
            await screen.type(TAB, ENTER)

        assert await answer(handler, req, open_it) == Accepted(None)
        assert opened == [url]

        async def done() -> None:
            await screen.shows("finish in your browser")
            await screen.type(ENTER)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(handler.wait_done, req)
                await done()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("params", "stateless", "says"),
    [
        ({"elicitationId": "e1"}, False, "Waiting for the server to see that you have finished."),
        ({}, True, "choose I'm done to retry now (the server asks again if it is not finished)"),
    ],
)
async def test_the_wait_screen_says_what_ends_the_wait(params: dict[str, str], stateless: bool, says: str) -> None:
    """2025-11-25 can end the wait with a completion notice; 2026-07-28 has none: only the person, retrying."""
    req = UrlElicitationRequest.from_params({"message": "Sign in", "url": "https://a.example/x", **params}, SERVER,
                                            stateless=stateless)  # fmt: skip
    async with screen_handler() as (handler, screen):

        async def done() -> None:
            await screen.shows("finish in your browser")
            text = " ".join(screen.text().split())
            assert says in text
            assert ("Waiting for the server" in text) is not stateless
            await screen.type(ENTER)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(handler.wait_done, req)
                await done()


@pytest.mark.anyio
async def test_the_screen_offers_no_open_button_for_what_is_not_a_web_address() -> None:
    req = UrlElicitationRequest.from_params({"message": "Look", "url": "javascript:alert(1)"}, SERVER)
    async with screen_handler(open_url=lambda url: pytest.fail("opened")) as (handler, screen):

        async def drive() -> None:
            await screen.shows("This is not a web address: it will not be opened from here.")
            assert "Open in browser" not in screen.text()
            await screen.type(TAB, ENTER)  # the first button is Decline

        assert await answer(handler, req, drive) == Declined()


# ---- once for real: the demo in a terminal inside tmux -----------------------------------------------------------


class Tmux:
    def __init__(self) -> None:
        self.socket = f"elicitor-{uuid.uuid4().hex[:8]}"

    def __call__(self, *args: str) -> str:
        env = {**os.environ, "BROWSER": "true"}  # the system "browser" does nothing; the test is the browser
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], check=True, capture_output=True, text=True, env=env
        ).stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            if key in ("Tab", "BTab", "Enter", "Down", "Up", "Space", "Escape", "BSpace"):
                self("send-keys", "-t", "demo", key)
            else:
                self("send-keys", "-t", "demo", "-l", key)
            time.sleep(0.05)

    def screen(self) -> str:
        return self("capture-pane", "-p", "-J", "-t", "demo")

    def keep(self, name: str) -> None:
        """Save the screen with its colours (ANSI) to ``artifacts/``: scripts/pictures.py draws it for the docs."""
        (ROOT / "artifacts").mkdir(exist_ok=True)
        self("resize-window", "-t", "demo", "-x", "96", "-y", "46")  # the size of a picture on a page
        time.sleep(0.5)  # prompt_toolkit redraws on SIGWINCH
        (ROOT / "artifacts" / name).write_text(self("capture-pane", "-p", "-e", "-t", "demo"))
        self("resize-window", "-t", "demo", "-x", "200", "-y", "50")
        time.sleep(0.5)

    def wait_for(self, *texts: str, timeout: float = 20) -> str:
        """The screen once every one of ``texts`` is on it at once (a frame may reach tmux in pieces)."""
        deadline = time.monotonic() + timeout
        while True:
            shown = self.screen()
            if all(text in shown for text in texts):
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"{texts!r} never appeared together; the screen shows:\n{shown}")
            time.sleep(0.1)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (make test installs it)")
    session = Tmux()
    try:
        yield session
    finally:
        subprocess.run(["tmux", "-L", session.socket, "kill-server"], capture_output=True)


def test_the_demo_in_a_real_terminal(tmux: Tmux) -> None:
    """``make demo`` in tmux: the full-screen form, the confirmation, the URL consent, the browser step."""
    command = f"{sys.executable} -m elicitor demo; echo '[demo exited '$?']'; sleep 60"
    tmux("new-session", "-d", "-s", "demo", "-x", "200", "-y", "50", "-c", str(ROOT), command)
    # The whole form, not only its banner: a frame may reach tmux in pieces, more so on a busy machine.
    shown = tmux.wait_for("Chez Elicitor booking desk 1.0.0 asks", "Party size *", "Heated patio", "Dietary needs")
    (ROOT / "artifacts").mkdir(exist_ok=True)
    (ROOT / "artifacts" / "terminal-form.txt").write_text(shown)  # what a person sees, for people to look at
    tmux.keep("terminal-form.ansi")
    assert "Party size *" in shown and "Heated patio" in shown and "Dietary needs" in shown
    tmux.keys("3", "Tab", "2026-12-24", "Tab", "Down", "Down", "Space", "Tab", "ada@example.com", "Tab")
    tmux.keys("Space", "Down", "Down", "Space", "Tab", "Tab", "Enter")
    shown = tmux.wait_for("Review your answer before it is sent")
    assert "Seating: Heated patio" in shown and "Dietary needs: vegetarian, gluten-free" in shown
    tmux.keys("Enter")
    tmux.wait_for("Confirm the booking")
    tmux.keys("y")  # a yes/no question: one key
    tmux.wait_for("Which main course instead?")  # the tasting menu's question, asked while its task runs
    tmux.keys("Down", "Down", "Space", "Tab", "Enter")
    tmux.wait_for("Main course: Roast duck with cherries")
    tmux.keys("Enter")
    shown = tmux.wait_for("asks you to open a web page")
    tmux.keep("terminal-url.ansi")
    (url,) = re.findall(r"(http://127\.0\.0\.1:\d+/\S+)", shown)
    assert "Host: 127.0.0.1" in shown and "not encrypted" in shown
    tmux.keys("Tab", "Enter")  # Open in browser (BROWSER=true: nothing opens; this test is the browser)
    tmux.wait_for("finish in your browser")
    with httpx2.Client(follow_redirects=True) as browser:
        browser.post(url, data={"signin": getpass.getuser()})
        assert "Calendar connected" in browser.post(url, data={"decision": "allow"}).text
    tmux.keys("Enter")  # "I'm done" (2026-07-28 retries when the person says so; 2025-11-25 hears from the server)
    shown = tmux.wait_for("Tool to call")
    assert "Result: Booked: 3 at Chez Elicitor on Thursday 24 December 2026, Heated patio" in shown
    assert "Result: Added 'Dinner at Chez Elicitor' to the calendar." in shown
    tmux.keys("update_profile", "Enter")  # the tool menu: every kind of field
    shown = tmux.wait_for("Spice tolerance")
    assert "0 is mild, 10 is fiery" in shown and "(*) By email" in shown  # the default, chosen
    tmux.keys("Ada", "Tab", "Space", "Tab", "Tab", "BSpace", "7.5", "Tab", "Space", "Tab", "Tab", "Tab", "Enter")
    shown = tmux.wait_for("Review your answer")
    assert "Spice tolerance: 7.5" in shown and "Birthday: —" in shown
    tmux.keys("Enter")
    tmux.wait_for("Tool to call (number or name; Enter or q to quit): ")
    tmux.keys("q", "Enter")
    shown = tmux.wait_for("[demo exited 0]")
    assert "Result: Profile saved for Ada: likes starters, spice 7.5/10, contact: by email, monthly menu." in shown


@pytest.mark.anyio
async def test_the_official_sdk_client_answers_on_the_full_screen_through_the_adapter() -> None:
    from mcp import Client as McpClient

    from elicitor.client import sdk_elicitation_callback

    from .test_interop import OURS

    async with screen_handler() as (handler, screen):
        results: list[str] = []

        async def call() -> None:
            async with McpClient(OURS, elicitation_callback=sdk_elicitation_callback(handler), mode="legacy") as c:
                results.append((await c.call_tool("test_elicitation", {"message": "Who are you?"})).content[0].text)  # type: ignore[union-attr]

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await screen.shows("elicitor conformance fixtures 1.0.0 asks")
                await screen.type("ada", TAB, "ada@example.com", TAB, ENTER)
                await screen.shows("Review your answer")
                await screen.type(ENTER)
    assert "action=accept" in results[0] and "'email': 'ada@example.com'" in results[0]


@pytest.mark.anyio
async def test_a_form_no_server_sent_is_filled_on_the_same_screen_under_its_own_banner() -> None:
    """What ``elicitor connect`` uses for a tool's arguments."""
    form = Form.from_schema({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    async with screen_handler() as (handler, screen):
        result: list[Any] = []

        async def fill() -> None:
            result.append(await handler.fill_in("Look up the weather.", form, banner="Arguments for weather"))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(fill)
                await screen.shows("Arguments for weather")
                assert "asks" not in screen.text() and "Look up the weather." in screen.text()
                await screen.type("Paris", TAB, ENTER)
                await screen.shows("city: Paris")
                await screen.type(ENTER)
    assert result == [Accepted({"city": "Paris"})]


@pytest.mark.anyio
async def test_an_earlier_answer_outside_the_choices_is_not_silently_replaced_by_the_first_choice() -> None:
    retry = request(previous={"room": "suite", "extras": ["p", "helicopter"]}, errors=(FieldError("room", "no"),))
    async with screen_handler() as (handler, screen):

        async def drive() -> None:
            await screen.shows("Your previous answer was not accepted")
            text = screen.text()
            assert "(*) (not chosen)" in text and "( ) Single" in text  # nothing chosen for the person
            assert "[*] Parking" in text and "[ ] Breakfast" in text  # the valid part of the earlier answer kept
            await screen.type(ESC)

        assert await answer(handler, retry, drive) == Cancelled()


@pytest.mark.anyio
async def test_a_terminal_whose_input_closes_cancels_the_question() -> None:
    async with screen_handler() as (handler, screen):

        async def hang_up() -> None:
            await screen.shows("asks")
            screen.pipe.close()

        assert await answer(handler, request(), hang_up) == Cancelled()


@pytest.mark.anyio
async def test_lines_written_while_a_screen_is_up_wait_until_it_closes() -> None:
    """Log lines from the server (elicitor connect shows them) must not draw over a form."""
    shown: list[str] = []
    async with screen_handler(write=shown.append) as (handler, screen):

        async def drive() -> None:
            await screen.shows("asks")
            handler._write("[info] the server is thinking")
            assert shown == []
            await screen.type(ESC)

        assert await answer(handler, request(), drive) == Cancelled()
    assert shown == ["[info] the server is thinking"]
    handler._write("after")
    assert shown[-1] == "after"


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        (NumberField(name="n", integer=True, minimum=1, maximum=10), ["a whole number", "from 1 to 10"]),
        (NumberField(name="n", integer=True, minimum=0), ["a whole number", "at least 0"]),
        (NumberField(name="n", maximum=2.5), ["a number", "at most 2.5"]),
        (StringField(name="s", max_length=200), ["up to 200 characters"]),
        (StringField(name="s", min_length=2), ["at least 2 characters"]),
        (StringField(name="s", min_length=2, max_length=2), ["exactly 2 characters"]),
        (StringField(name="s", min_length=0), []),
        (MultiEnumField(name="m", options=(Option("a"), Option("b")), max_items=2), ["choose up to 2"]),
        (MultiEnumField(name="m", options=(Option("a"), Option("b")), min_items=1, max_items=2), ["choose 1–2"]),
    ],
)
def test_hints_read_as_a_person_says_them(field: FormField, expected: list[str]) -> None:
    """No "from 0 to ∞": one-sided ranges read "at least", "at most", "up to"."""
    assert hint(field, ENGLISH) == expected


def test_the_tutorials_server_in_a_real_terminal(tmux: Tmux) -> None:
    """The tutorial's step 2 as a reader does it: ``elicitor connect python server.py``, the book_table tool, its
    form (the picture on the tutorial's page), the review, the confirmation, the result."""
    server = ROOT / "docs" / "tutorial" / "server.py"
    command = f"{sys.executable} -m elicitor connect {sys.executable} {server}; echo '[connect exited '$?']'; sleep 60"
    tmux("new-session", "-d", "-s", "demo", "-x", "200", "-y", "50", "-c", str(ROOT), command)
    tmux.wait_for("1. book_table: Book a table, asking the person for the details.")
    tmux.keys("book_table", "Enter")
    tmux.wait_for("restaurant *")
    tmux.keys("Chez Nous", "Tab", "Enter")  # the tool's argument, then Review
    tmux.wait_for("restaurant: Chez Nous")
    tmux.keys("Enter")  # Submit: the tool runs and asks
    labels = ("Party size *", "seating *", "Where to send the confirmation *", "notes")  # the four, in order
    shown = tmux.wait_for("Booking desk 1.0.0 asks", *labels, "< Cancel >")  # the whole form, not part of a frame
    assert "Book a table at Chez Nous?" in shown
    rows = [row.strip() for row in shown.splitlines()]
    for field in labels:
        assert field in rows, field
    fields = [rows.index(field) for field in ("Party size *", "seating *", "Where to send the confirmation *")]
    assert fields == sorted(fields) and rows.index("notes") > fields[-1]
    assert "a whole number · from 1 to 12" in shown and "an email address" in shown
    assert "( ) Indoor dining room" in shown and "( ) Heated patio" in shown
    tmux.keys("2", "Tab", "Down", "Down", "Space", "Tab", "ada@example.com")
    shown = tmux.wait_for("› ada@example.com")
    rows = [row.strip() for row in shown.splitlines()]
    assert "› 2" in rows and "(*) Heated patio" in rows and "( ) Indoor dining room" in rows
    tmux.keep("tutorial-form.ansi")  # filled in, before Review: the tutorial's picture
    tmux.keys("Tab", "Tab", "Enter")  # past the optional notes, to Review
    shown = tmux.wait_for("Review your answer before it is sent")
    assert "Party size: 2" in shown and "seating: Heated patio" in shown and "notes: —" in shown
    assert "Where to send the confirmation: ada@example.com" in shown
    tmux.keys("Enter")  # Submit
    tmux.wait_for("Book 2 people, Heated patio?")
    tmux.keys("y")
    shown = tmux.wait_for("Result: ")
    assert "Result: Booked a table for 2 at Chez Nous (Heated patio); we wrote to ada@example.com." in shown
    tmux.keys("q", "Enter")
    tmux.wait_for("[connect exited 0]")
