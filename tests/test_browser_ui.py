"""The browser handler in a real browser: Debian's headless Chromium, driven by Playwright.

Every field kind filled (partly from the keyboard), native and server-side validation errors, review, edit, send,
decline, cancel, a closed page becoming cancel after the grace period (and a reload not), a question the server
withdrew, and URL consent. Screenshots of a form (phone-sized and desktop) and of the URL consent page are saved
to ``artifacts/``, where ``scripts/pictures.py`` takes them for the documentation.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.streams.text
import pytest
from playwright.async_api import Browser, Page, async_playwright

from elicitor import Accepted, Cancelled, Context, Declined, Form, Server
from elicitor.client import BrowserHandler, ElicitationRequest, UrlElicitationRequest
from elicitor.types import Implementation

from .conftest import ROOT, connected, later, self_signed, serving

pytestmark = pytest.mark.anyio
ARTIFACTS = ROOT / "artifacts"
GRACE = 0.6


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # Playwright's async API runs on asyncio; one loop for the module, for its one chromium


@pytest.fixture(scope="module", autouse=True)
async def one_chromium(anyio_backend: str) -> AsyncIterator[None]:
    async with shared_chromium():
        yield


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 2, "maxLength": 40},
        "email": {"type": "string", "format": "email", "title": "Email"},
        "site": {"type": "string", "format": "uri", "title": "Website"},
        "arrival": {"type": "string", "format": "date", "title": "Arrival"},
        "dinner": {"type": "string", "format": "date-time", "title": "Dinner at"},
        "guests": {"type": "integer", "minimum": 1, "maximum": 10, "title": "Guests", "default": 2},
        "budget": {"type": "number", "minimum": 0, "title": "Budget per night", "description": "In euros"},
        "news": {"type": "boolean", "title": "Send me the newsletter", "default": False},
        "floor": {"type": "string", "title": "Floor", "enum": ["low", "high"]},
        "room": {
            "type": "string",
            "title": "Room",
            "oneOf": [{"const": "s", "title": "Single room"}, {"const": "d", "title": "Double room"}],
        },
        "pillows": {"type": "array", "title": "Pillows", "items": {"type": "string", "enum": ["soft", "firm"]}},
        "extras": {
            "type": "array",
            "title": "Extras",
            "minItems": 1,
            "maxItems": 2,
            "items": {
                "anyOf": [
                    {"const": "b", "title": "Breakfast"},
                    {"const": "p", "title": "Parking"},
                    {"const": "s", "title": "Spa"},
                ]
            },
        },
        "note": {"type": "string", "title": "Note for the desk"},
    },
    "required": ["name", "email", "arrival", "guests", "room", "extras"],
}

server = Server("hotel", "2.1", title="Grand Hotel")


@server.tool()
async def book(ctx: Context) -> str:
    outcome = await ctx.elicit("Book a room at the Grand Hotel.", Form.from_schema(SCHEMA))
    return json.dumps(outcome.data, sort_keys=True) if isinstance(outcome, Accepted) else outcome.action


_SHARED: list[Browser] = []
"""The chromium of the module running now (:func:`shared_chromium`), if it has one."""


@asynccontextmanager
async def shared_chromium() -> AsyncIterator[None]:
    """One chromium for a module's tests, which :func:`chromium` then hands out: launching one takes about a second,
    and each test's pages are in browser contexts of their own (no cookie, storage or cache shared), closed after it.
    The module's ``anyio_backend`` fixture must be module-scoped too (the browser belongs to one event loop)."""
    async with launched() as browser:
        _SHARED.append(browser)
        try:
            yield
        finally:
            _SHARED.remove(browser)


@asynccontextmanager
async def chromium(*more_args: str) -> AsyncIterator[Browser]:
    """Headless chromium for the block: the module's shared one if it has one and no argument asks for another (what
    the block opened in it is closed after it), else one launched with ``more_args``."""
    if _SHARED and not more_args:
        browser = _SHARED[-1]
        before = set(browser.contexts)
        try:
            yield browser
        finally:
            for context in browser.contexts:
                if context not in before:
                    await context.close()
        return
    async with launched(*more_args) as browser:
        yield browser


@asynccontextmanager
async def launched(*more_args: str) -> AsyncIterator[Browser]:
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("Debian's chromium is not installed (make test installs it)")
    args = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", *more_args]  # fmt: skip
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, args=args, headless=True)
        try:
            yield browser
        finally:
            await browser.close()


class Person:
    """A browser and the links the handler asked it to open."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.links: list[str] = []

    def open(self, url: str) -> bool:
        self.links.append(url)
        return True

    async def link(self, index: int = 0) -> str:
        """The ``index``-th link the handler asked to open, once it has."""
        with anyio.fail_after(10):
            while len(self.links) <= index:
                await anyio.sleep(0.02)
        return self.links[index]

    async def page(self, index: int = 0, **options: Any) -> Page:
        link = await self.link(index)
        page = await self.browser.new_page(**options)
        await page.goto(link)
        return page


async def call_book(handler: BrowserHandler, protocol: str) -> str:
    async with connected(server, elicitation=handler, protocol=protocol) as client:
        return (await client.call_tool("book")).text


@asynccontextmanager
async def person_and_handler(**options: Any) -> AsyncIterator[tuple[Person, BrowserHandler]]:
    async with chromium() as browser:
        person = Person(browser)
        async with BrowserHandler(open_url=person.open, write=lambda text: None, grace=GRACE, **options) as handler:
            yield person, handler


async def fill_valid(page: Page) -> None:
    await page.wait_for_function("document.activeElement.id === 'f-name'")  # the first field has the focus
    await page.keyboard.type("Ada")
    await page.get_by_label("Email").fill("ada@example.com")
    await page.get_by_label("Website").fill("https://ada.example.com/")
    await page.get_by_label("Arrival").fill("2026-12-24")
    await page.get_by_label("Dinner at").fill("2026-12-24T19:30")
    await page.get_by_label("Budget per night").fill("120.5")
    await page.get_by_label("Send me the newsletter").check()
    await page.get_by_label("high").check()
    await page.get_by_label("Double room").check()
    await page.get_by_label("soft").check()
    await page.get_by_label("Breakfast").check()
    await page.get_by_label("Spa").check()


async def test_every_field_kind_in_chromium_with_review_and_a_screenshot() -> None:
    async with person_and_handler() as (person, handler), anyio.create_task_group() as tg:
        booked = later(tg, call_book, handler, "2025-11-25")
        page = await person.page(viewport={"width": 390, "height": 844}, timezone_id="Europe/Paris")  # a phone
        assert await page.title() == "Grand Hotel 2.1 asks"
        body = await page.inner_text("body")
        assert "Grand Hotel 2.1 asks:\n\nserver name: hotel\n" in body and "Book a room at the Grand Hotel." in body
        assert "Your name (required)" in body and "Note for the desk" in body and "In euros" in body
        assert "an email address" in body and "from 1 to 10" in body and "choose 1–2" in body
        assert "a date and time, in your time zone (UTC+01:00)" in body  # the page's script knows the zone
        assert await page.get_by_label("Guests").input_value() == "2"  # the default, pre-filled
        await fill_valid(page)
        ARTIFACTS.mkdir(exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "browser-form.png"), full_page=True)
        await page.set_viewport_size({"width": 1100, "height": 900})  # a desktop window, for the documentation
        await page.screenshot(path=str(ARTIFACTS / "browser-form-desktop.png"), full_page=True)
        await page.get_by_role("button", name="Review").click()
        await page.get_by_text("Review your answer").wait_for()
        review = await page.inner_text("dl")
        assert "Double room" in review and "Breakfast, Spa" in review and "2026-12-24T19:30:00+01:00" in review
        await page.keyboard.press("Enter")  # Send has the focus
        await page.get_by_text("Your answer was sent").wait_for()
        assert json.loads(await booked.value()) == {
            "name": "Ada", "email": "ada@example.com", "site": "https://ada.example.com/", "arrival": "2026-12-24",
            "dinner": "2026-12-24T19:30:00+01:00", "guests": 2, "budget": 120.5, "news": True, "floor": "high",
            "room": "d", "pillows": ["soft"], "extras": ["b", "s"],
        }  # fmt: skip


async def test_validation_errors_edit_and_send() -> None:
    async with person_and_handler() as (person, handler):
        request = ElicitationRequest("Book", Form.from_schema(SCHEMA), Implementation(name="hotel", version="2.1"))
        async with anyio.create_task_group() as tg:
            outcome = later(tg, handler, request)
            page = await person.page()
            await fill_valid(page)
            await page.get_by_label("Guests").fill("99")
            await page.get_by_label("Email").fill("ada@localhost")  # the browser accepts it; the validator not
            await page.get_by_label("Parking").check()  # three extras: more than allowed
            await page.get_by_role("button", name="Review").click()
            alert = page.get_by_role("alert")
            await alert.wait_for()
            text = await alert.inner_text()
            assert "Email: expected an email address" in text and "Extras: choose at most 2" in text
            assert "Guests: must be at most 10" in text  # said in the page, not in the browser's own bubble
            email = page.get_by_label("Email")
            assert await email.input_value() == "ada@localhost"  # nothing typed is lost
            assert await email.get_attribute("aria-invalid") == "true"  # marked at the field, for screen readers too
            assert "✗ expected an email address" in await page.inner_text("#e-email")
            await page.wait_for_function("document.activeElement.id === 'f-email'")  # the first field to fix
            await page.get_by_label("Guests").fill("3")
            await page.get_by_label("Email").fill("ada@example.com")
            await page.get_by_label("Parking").uncheck()
            await page.get_by_role("button", name="Review").click()
            await page.get_by_role("button", name="Edit").click()
            await page.get_by_label("Guests").fill("4")
            await page.get_by_role("button", name="Review").click()
            assert "Guests\n4" in await page.inner_text("dl")
            await page.get_by_role("button", name="Send").click()
            sent = await outcome.value()
    assert isinstance(sent, Accepted) and sent.data["guests"] == 4


async def test_chinese_answers_count_characters_and_keep_their_domain() -> None:
    """What the schema allows, the page lets a person type and sends as typed: three characters where maxLength is 3
    even when one is outside the BMP (two UTF-16 units: the browser's count), and an email address in Chinese,
    local part and domain (not refused by the browser, not turned into Punycode)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "店名", "maxLength": 3},
            "email": {"type": "string", "format": "email", "title": "邮箱"},
        },
        "required": ["name", "email"],
    }
    async with person_and_handler(lang="zh") as (person, handler):
        request = ElicitationRequest("请填写", Form.from_schema(schema), Implementation(name="shop", version="1"))
        async with anyio.create_task_group() as tg:
            outcome = later(tg, handler, request)
            page = await person.page()
            await page.get_by_label("店名").click()
            await page.keyboard.insert_text("𠮷野家")  # as an input method commits it
            await page.get_by_label("邮箱").click()
            await page.keyboard.insert_text("李雷@例子.中国")
            await page.get_by_role("button", name="检查").click()
            assert "李雷@例子.中国" in await page.inner_text("dl")
            await page.get_by_role("button", name="发送").click()
            sent = await outcome.value()
    assert sent == Accepted({"name": "𠮷野家", "email": "李雷@例子.中国"})


async def test_a_traditional_chinese_page_in_an_english_browser_explains_in_traditional_chinese() -> None:
    """The browser's own validation speaks the language of its interface, in bubbles of its own: a person reading
    a zh-Hant page in an English Chromium got "Please fill out this field." for the 十三 they typed in a number
    field (the browser blanks what it cannot read). The page now leaves checking to the shared validator, which
    says what is wrong in the page, in Traditional Chinese, and reads full-width digits as the terminal does."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "姓名", "minLength": 2},
            "guests": {"type": "integer", "title": "入住人數", "minimum": 1, "maximum": 12},
            "nights": {"type": "number", "title": "晚數"},
        },
        "required": ["name", "guests"],
    }
    async with person_and_handler(lang="zh-TW") as (person, handler):
        request = ElicitationRequest("請填寫", Form.from_schema(schema), Implementation(name="inn", version="1"))
        async with anyio.create_task_group() as tg:
            outcome = later(tg, handler, request)
            page = await person.page(locale="en-US")  # the browser's own language is English
            assert await page.get_attribute("html", "lang") == "zh-Hant"
            for label, typed in (
                ("姓名", "李"),
                ("入住人數", "十三"),
                ("晚數", "２．５"),
            ):  # as an input method commits
                await page.get_by_label(label).click()
                await page.keyboard.insert_text(typed)
            await page.get_by_role("button", name="檢查").click()
            alert = page.get_by_role("alert")
            await alert.wait_for()
            text = await alert.inner_text()
            assert (
                "請檢查：" in text
                and "姓名：長度至少為 2 個字元（目前有 1 個）" in text
                and "入住人數：應為整數" in text
            ), text
            assert text.index("姓名：") < text.index("入住人數："), text  # in the order of the fields on the page
            assert await page.get_by_label("入住人數").input_value() == "十三"  # nothing typed is lost
            await page.wait_for_function("document.activeElement.id === 'f-name'")  # the first field to fix
            await page.get_by_label("姓名").fill("")
            await page.keyboard.insert_text("李雷")
            await page.get_by_label("入住人數").fill("")
            await page.get_by_label("入住人數").click()
            await page.keyboard.insert_text("１２")
            await page.get_by_role("button", name="檢查").click()
            await page.get_by_text("檢查您的回答").wait_for()
            await page.get_by_role("button", name="送出").click()
            sent = await outcome.value()
    assert sent == Accepted({"name": "李雷", "guests": 12, "nights": 2.5})


@pytest.mark.parametrize(("button", "expected"), [("Decline", Declined()), ("Cancel", Cancelled())])
async def test_decline_and_cancel_buttons(button: str, expected: Any) -> None:
    async with person_and_handler() as (person, handler), anyio.create_task_group() as tg:
        booked = later(tg, call_book, handler, "2026-07-28")
        page = await person.page()
        await page.get_by_role("button", name=button).click()
        await page.get_by_text("You declined" if button == "Decline" else "You cancelled").wait_for()
        assert await booked.value() == expected.action


async def test_a_closed_page_becomes_cancel_after_the_grace_period_and_a_reload_does_not() -> None:
    async with person_and_handler() as (person, handler):
        request = ElicitationRequest("Book", Form.from_schema(SCHEMA), None)
        async with anyio.create_task_group() as tg:
            outcome = later(tg, handler, request)
            page = await person.page()
            await page.wait_for_timeout(300)
            await page.reload()
            await page.wait_for_timeout(GRACE * 3000)
            assert not outcome.done  # reloaded, still asking
            await page.close(run_before_unload=True)
            assert await outcome.value(10) == Cancelled()


async def test_the_page_says_when_the_question_was_withdrawn() -> None:
    async with person_and_handler() as (person, handler):
        request = ElicitationRequest("Book", Form.from_schema(SCHEMA), None)
        async with anyio.create_task_group() as tg:
            tg.start_soon(handler, request)
            page = await person.page()
            await page.get_by_label("Email").fill("typed before the server gave up")
            tg.cancel_scope.cancel()  # the server cancelled the request
        notice = page.get_by_text("This question is no longer waiting for an answer.")
        await notice.wait_for(state="visible", timeout=5000)
        assert not await page.get_by_role("button", name="Review").is_visible()


async def test_url_consent_in_the_browser(tmp_path: Path) -> None:
    """A named server's link to a calendar's connection page (https, an opaque state token): shown whole, its host
    highlighted, nothing fetched until the person opens it, then opened in a new tab without a referrer.

    The calendar's site is a real https server on loopback; the browser resolves its name there."""
    host = "calendar.example.com"
    target = f"https://{host}/connect?state=f3Zq8LrT2wXk9VbN6mHc"
    who = Implementation(name="team-planner", version="2.4.1", title="Team Planner")
    fetched: list[dict[bytes, bytes]] = []

    async def calendar(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        fetched.append(dict(scope["headers"]))
        body = b"<title>Example Calendar</title><p>Sign in to connect your calendar to Team Planner"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
        await send({"type": "http.response.body", "body": body})

    cert_file, key_file = self_signed(host, tmp_path)
    async with serving(calendar, ssl_certfile=str(cert_file), ssl_keyfile=str(key_file)) as endpoint:
        port = urlsplit(endpoint).port
        async with (
            chromium(f"--host-resolver-rules=MAP {host} 127.0.0.1:{port}") as browser,
            BrowserHandler(open_url=(person := Person(browser)).open, write=lambda text: None, grace=GRACE) as handler,
        ):
            message = "Connect your calendar so Team Planner can add the meetings you agree to."
            request = UrlElicitationRequest.from_params({"message": message, "url": target}, who)
            outcomes: list[Any] = []

            async def ask() -> None:
                outcomes.append(await handler.url(request))
                await handler.wait_done(request)
                outcomes.append("done")

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                context = await browser.new_context(viewport={"width": 640, "height": 360}, ignore_https_errors=True)
                page = await context.new_page()
                await page.goto(await person.link())
                body = await page.inner_text("body")
                assert "Team Planner 2.4.1 asks you to open a web page:" in body and message in body
                assert target in body and "Nothing has been opened or fetched." in body
                assert await page.inner_text("mark >> nth=0") == host
                assert "Careful" not in body  # https on a named host and its usual port: nothing to warn about
                assert fetched == []  # shown, not fetched
                ARTIFACTS.mkdir(exist_ok=True)
                await page.screenshot(path=str(ARTIFACTS / "browser-url.png"), full_page=True)
                async with context.expect_page() as opening:
                    await page.get_by_role("button", name="Open the page in a new tab").click()
                tab = await opening.value
                await tab.wait_for_load_state()
                assert tab.url == target and "Sign in to connect your calendar" in await tab.inner_text("body")
                assert b"referer" not in fetched[0]  # the page's token did not leak to the site
                done = page.get_by_role("button", name="I'm done")
                await done.wait_for(state="visible", timeout=5000)
                await done.click()
                await context.close()
    assert outcomes == [Accepted(None), "done"]


async def test_url_decline_opens_nothing() -> None:
    async with person_and_handler() as (person, handler):
        link = "http://203.0.113.7:8080/pay?invoice=2291"
        request = UrlElicitationRequest.from_params({"message": "Pay the invoice", "url": link}, None)
        async with anyio.create_task_group() as tg:
            outcome = later(tg, handler.url, request)
            page = await person.page()
            body = await page.inner_text("body")
            assert "an unnamed server asks you to open a web page:" in body and link in body
            warned = await page.inner_text("[role=alert]")  # everything unusual about the link, before any choice
            assert "bare IP address" in warned and "not encrypted" in warned and "unusual port (8080)" in warned
            await page.wait_for_function("document.activeElement.value === 'decline'")
            await page.keyboard.press("Enter")  # Decline has the focus: a stray Enter opens nothing
            await page.get_by_text("You declined; nothing was opened.").wait_for()
            assert await outcome.value() == Declined()


async def test_the_official_sdk_client_answers_in_chromium_through_the_adapter() -> None:
    """A host built on the official SDK adopts the browser handler in one line (sdk_elicitation_callback)."""
    from mcp import Client as McpClient

    from elicitor.client import sdk_elicitation_callback

    from .test_interop import OURS

    async def call(handler: BrowserHandler) -> str:
        async with McpClient(OURS, elicitation_callback=sdk_elicitation_callback(handler), mode="legacy") as client:
            result = await client.call_tool("test_elicitation", {"message": "Who are you?"})
            return result.content[0].text  # type: ignore[union-attr]

    async with person_and_handler() as (person, handler), anyio.create_task_group() as tg:
        called = later(tg, call, handler)
        page = await person.page()
        assert "elicitor conformance fixtures 1.0.0 asks:" in await page.inner_text("body")
        await page.get_by_label("username").fill("ada")
        await page.get_by_label("email").fill("ada@example.com")
        await page.get_by_role("button", name="Review").click()
        await page.get_by_role("button", name="Send").click()
        text = await called.value()
    assert "action=accept" in text and "'username': 'ada'" in text


async def test_concurrent_questions_come_one_at_a_time_with_the_queue_shown() -> None:
    confirm = Form.from_schema({"type": "object", "properties": {"ok": {"type": "boolean", "title": "OK"}}})
    async with person_and_handler() as (person, handler), anyio.create_task_group() as tg:
        first = later(tg, handler, ElicitationRequest("first", confirm, None))
        page = await person.page()
        second_outcome = later(tg, handler, ElicitationRequest("second", confirm, None))
        await page.get_by_text("1 more question waiting after this one").wait_for()  # updated live
        assert len(person.links) == 1  # the second page is not open yet
        await page.get_by_role("button", name="Decline").click()
        second = await person.page(1)
        assert "second" in await second.inner_text("body") and handler.waiting == 0
        await second.get_by_role("button", name="Cancel").click()
        assert (await first.value(), await second_outcome.value()) == (Declined(), Cancelled())


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_the_demo_answered_in_chromium(protocol: str) -> None:
    """``elicitor demo --ui browser``: the booking, the confirmation and the calendar consent, all in pages."""
    import getpass
    import re
    import subprocess
    import sys

    env = {**os.environ, "BROWSER": "true"}  # the system "browser" does nothing; Chromium here is the browser
    command = [sys.executable, "-m", "elicitor", "demo", "--ui", "browser", "--protocol", protocol]
    async with (
        await anyio.open_process(command, env=env, stdin=subprocess.PIPE, cwd=ROOT) as demo,
        chromium() as browser,
    ):
        assert demo.stderr is not None and demo.stdout is not None and demo.stdin is not None
        lines = anyio.streams.text.TextReceiveStream(demo.stderr)
        shown = ""

        async def next_page(what: str) -> Page:
            nonlocal shown
            with anyio.fail_after(30):
                while not (found := re.search(rf"{what}: answer it in your browser \((http://\S+)\)", shown)):
                    shown += await lines.receive()
            shown = shown[found.end() :]
            page = await browser.new_page()
            await page.goto(found.group(1))
            return page

        page = await next_page("asks a question")
        assert "Chez Elicitor booking desk 1.0.0 asks:" in await page.inner_text("body")
        await page.get_by_label("Party size").fill("2")
        await page.get_by_label("Date").fill("2026-12-31")
        await page.get_by_label("Heated patio").check()
        await page.get_by_label("Contact email").fill("ada@example.com")
        await page.get_by_label("vegan").check()
        await page.get_by_role("button", name="Review").click()
        await page.get_by_role("button", name="Send").click()
        page = await next_page("asks a question")
        assert "Confirm the booking: 2 at Chez Elicitor on Thursday 31 December 2026" in await page.inner_text("body")
        await page.get_by_role("button", name="Yes").click()  # a yes/no question: one press
        page = await next_page("asks a question")  # the tasting menu's question, asked while its task runs
        await page.get_by_label("Roast duck with cherries").check()
        await page.get_by_role("button", name="Review").click()
        await page.get_by_role("button", name="Send").click()
        page = await next_page("asks you to open a web page")
        async with page.context.expect_page() as opening:
            await page.get_by_role("button", name="Open the page in a new tab").click()
        calendar = await opening.value
        await calendar.get_by_label("User name").fill(getpass.getuser())
        await calendar.get_by_role("button", name="Sign in").click()
        await calendar.get_by_role("button", name="Allow").click()
        await calendar.get_by_text("Calendar connected").wait_for()
        if protocol == "2026-07-28":  # no notifications in this revision: the person says when they are done
            await page.get_by_role("button", name="I'm done").click()
        with anyio.fail_after(30):
            while "Now try the tools yourself" not in shown:
                shown += await lines.receive()
        await demo.stdin.aclose()  # the tool menu reads end of input: the demo ends
        output = b"".join([chunk async for chunk in demo.stdout]).decode()
        assert await demo.wait() == 0
    booked, menu, added = output.splitlines()
    assert menu.startswith("Result: Tasting menu for 2: seasonal starters, roast duck with cherries")
    assert booked.startswith("Result: Booked: 2 at Chez Elicitor on Thursday 31 December 2026, Heated patio, vegan.")
    assert added == "Result: Added 'Dinner at Chez Elicitor' to the calendar."


async def test_a_form_answered_with_the_keyboard_alone() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name"},
            "news": {"type": "boolean", "title": "Newsletter"},
            "size": {"type": "string", "title": "Size", "enum": ["S", "M", "L"]},
        },
        "required": ["name", "size"],
    }
    async with person_and_handler() as (person, handler), anyio.create_task_group() as tg:
        outcome = later(tg, handler, ElicitationRequest("Order", Form.from_schema(schema), None))
        page = await person.page()
        await page.wait_for_function("document.activeElement.id === 'f-name'")
        for key in ["A", "d", "a", "Tab", "Space", "Tab", "Space", "ArrowDown", "ArrowDown", "Enter"]:
            await page.keyboard.press(key)  # type, tick, choose S then move to L, Enter reviews
        await page.get_by_text("Review your answer").wait_for()
        await page.keyboard.press("Enter")  # Send has the focus
        assert await outcome.value() == Accepted({"name": "Ada", "news": True, "size": "L"})


@pytest.mark.parametrize(("lang", "host_line"), [("zh-CN", "主机：calendar.example"), ("en", "Host: calendar.example")])
async def test_the_url_pages_host_follows_a_chinese_colon_without_a_gap(lang: str, host_line: str) -> None:
    """The consent page's Chinese "host" label stood a space apart from the host, after its full-width colon, which
    has its own room, as everywhere else elicitor joins a label to its value; English keeps its space."""
    async with person_and_handler() as (person, handler):
        request = UrlElicitationRequest(
            message="连接您的日历", url="https://calendar.example/connect/abc",
            server=Implementation(name="hotel", version="1"), elicitation_id="e1",
        )  # fmt: skip
        async with anyio.create_task_group() as tg:
            outcome = later(tg, handler, request)
            page = await person.page(locale=lang, extra_http_headers={"Accept-Language": lang})
            assert await page.locator("p", has=page.locator("mark")).last.inner_text() == host_line
            await page.get_by_role("button", name="拒绝" if lang == "zh-CN" else "Decline").click()
            assert await outcome.value() == Declined()
