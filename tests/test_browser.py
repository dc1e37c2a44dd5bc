"""The browser handler over real HTTP: the page, validation on the page, submit, decline, cancel."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any, Literal

import anyio
import httpx2
import pytest

from elicitor import Accepted, Cancelled, Context, Declined, FieldError, Form, Server
from elicitor.client import BrowserHandler, ElicitationRequest, UrlElicitationRequest
from elicitor.forms import Email, Field

from .conftest import Later, connected, later

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the page is served by uvicorn


@dataclass
class Booking:
    party: Annotated[int, Field(title="Party size", minimum=1, maximum=12)]
    day: date
    email: Email
    diet: Annotated[list[Literal["vegan", "halal"]], Field(max_items=2)]
    patio: bool = False
    notes: str | None = None


server = Server("desk", "1.0", title="Booking Desk")


@server.tool()
async def book(ctx: Context) -> str:
    outcome = await ctx.elicit("Book a table?", Booking)
    if isinstance(outcome, Accepted):
        b = outcome.data
        return f"{b.party} on {b.day} for {b.email}, {b.diet}, patio={b.patio}"
    return outcome.action


async def test_a_person_answers_in_the_browser(anyio_backend: str) -> None:
    links: list[str] = []
    pages: list[httpx2.Response] = []

    async def person() -> None:
        while not links:
            await anyio.sleep(0.01)
        async with httpx2.AsyncClient() as browser:
            page = await browser.get(links[0])
            pages.append(page)
            wrong = {"party": "40", "day": "2026-12-24", "email": "ada@example.com", "diet": ["vegan"]}
            pages.append(await browser.post(links[0], data={**wrong, "_action": "review"}))
            right = {**wrong, "party": "3", "patio": "true"}
            review = await browser.post(links[0], data={**right, "_action": "review"})
            assert review.status_code == 200 and "Review your answer" in review.text
            assert '<dt dir="auto">Party size</dt><dd dir="auto">3</dd>' in review.text
            assert '<dt dir="auto">patio</dt><dd dir="auto">yes</dd>' in review.text
            pages.append(await browser.post(links[0], data={"_action": "send"}))
            pages.append(await browser.get(links[0]))

    def opener(url: str) -> bool:
        links.append(url)
        return True

    async with BrowserHandler(open_url=opener, write=lambda text: None) as handler, anyio.create_task_group() as tg:
        tg.start_soon(person)
        async with connected(server, elicitation=handler, protocol="2025-11-25") as client:
            with anyio.fail_after(10):
                result = await client.call_tool("book")
    assert result.text == "3 on 2026-12-24 for ada@example.com, ['vegan'], patio=True"
    first, invalid, sent, after = pages
    assert links[0].startswith("http://127.0.0.1:") and len(links[0].rsplit("/", 1)[-1]) >= 32
    assert first.status_code == 200
    assert "default-src 'none'" in first.headers["content-security-policy"]
    text = first.text
    assert "<bdi>Booking Desk 1.0</bdi> asks:" in text and "Book a table?" in text
    assert '<form method="post" novalidate>' in text  # the validator speaks, in the person's language
    assert 'type=text inputmode="numeric"' in text and "from 1 to 12" in text and 'type="date"' in text
    assert 'type="text" inputmode="email"' in text
    assert "<bdi>Party size</bdi> <span class=req>(required)</span>" in text
    assert 'type=checkbox name="diet" value="halal"' in text and "choose up to 2" in text
    assert invalid.status_code == 422 and "Please check" in invalid.text and 'value="40"' in invalid.text
    assert sent.status_code == 200 and "sent" in sent.text
    assert after.status_code == 404  # answered: the page is gone


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_from_the_page(anyio_backend: str, action: str) -> None:
    links: list[str] = []

    async def person() -> None:
        while not links:
            await anyio.sleep(0.01)
        async with httpx2.AsyncClient() as browser:
            await browser.post(links[0], data={"_action": action})

    def cannot_open(url: str) -> bool:
        links.append(url)
        return False

    shown: list[str] = []
    async with (
        BrowserHandler(open_url=cannot_open, write=shown.append) as handler,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(person)
        async with connected(server, elicitation=handler, protocol="2026-07-28") as client:
            with anyio.fail_after(10):
                assert (await client.call_tool("book")).text == action
    assert shown == [f"Booking Desk 1.0 asks a question: open {links[0]}"]  # the opener failed: the link is printed


async def test_unknown_tokens_are_not_found(anyio_backend: str) -> None:
    async with (
        BrowserHandler(open_url=lambda url: True, write=lambda text: None) as handler,
        httpx2.AsyncClient() as browser,
    ):
        assert (await browser.get(f"{handler.base}/q/guess")).status_code == 404
        assert (await browser.get(f"{handler.base}/")).status_code == 404


@asynccontextmanager
async def asked(
    ask: Callable[[BrowserHandler], Awaitable[Any]],
) -> AsyncIterator[tuple[Later, str, httpx2.AsyncClient]]:
    """Start ``ask(handler)`` on a BrowserHandler; yield its result-to-be, the link it opened, and a "browser"."""
    links: list[str] = []

    def opener(url: str) -> bool:
        links.append(url)
        return True

    async with (
        BrowserHandler(open_url=opener, write=lambda text: None) as handler,
        anyio.create_task_group() as tg,
        httpx2.AsyncClient() as browser,
    ):
        outcome = later(tg, ask, handler)
        with anyio.fail_after(10):
            while not links:
                await anyio.sleep(0.01)
        yield outcome, links[0], browser


async def test_a_url_that_is_no_web_address_is_shown_but_never_opened(anyio_backend: str) -> None:
    request = UrlElicitationRequest.from_params({"message": "Look", "url": "file:///etc/passwd"}, None)
    async with asked(lambda handler: handler.url(request)) as (outcome, link, browser):
        page = await browser.get(link)
        assert "This is not a web address" in page.text and 'value="open"' not in page.text
        forced = await browser.post(link, data={"_action": "open"})  # a hand-made post changes nothing
        assert forced.status_code == 200 and "location" not in forced.headers and not outcome.done
        await browser.post(link, data={"_action": "decline"})
        assert await outcome.value() == Declined()


async def test_a_url_with_a_chinese_host_is_opened_from_the_page_as_the_browser_sends_it(anyio_backend: str) -> None:
    """https://銀行.台灣/付款 is a web address: the page offered no Open button ("This is not a web address"),
    because the CSP source it needs was made from the host as written. The page shows the URL as sent, and the
    new tab goes to its ASCII form (the host in IDNA, the path percent-encoded), which the CSP allows."""
    url = "https://銀行.台灣/付款?金額=100"
    request = UrlElicitationRequest.from_params({"message": "請在銀行的網頁上完成付款。", "url": url}, None)
    async with asked(lambda handler: handler.url(request)) as (outcome, link, browser):
        page = await browser.get(link)
        assert 'value="open"' in page.text and "This is not a web address" not in page.text
        assert "銀行.台灣</mark>/付款?金額=100" in page.text  # shown as the server wrote it
        host = "https://xn--jn2ax2s.xn--kpry57d"
        assert f"form-action 'self' {host};" in page.headers["content-security-policy"]
        opened = await browser.post(link, data={"_action": "open"})
        assert opened.status_code == 303
        assert opened.headers["location"] == f"{host}/%E4%BB%98%E6%AC%BE?%E9%87%91%E9%A1%8D=100"
        await browser.post(link, data={"_action": "done"})
        assert await outcome.value() == Accepted(None)


@pytest.mark.parametrize(
    ("zone", "sent"),
    [(None, "2026-12-24T19:30:00Z"), ("-05:00", "2026-12-24T19:30:00-05:00"), ("+01:00; x", "2026-12-24T19:30:00Z")],
)
async def test_a_local_date_time_gets_the_pages_zone_or_is_read_as_utc(
    anyio_backend: str, zone: str | None, sent: str
) -> None:
    """Without the page's script (no zone posted) the hint says UTC, and UTC it is; a malformed zone is ignored."""
    form = Form.from_schema({"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}})
    async with asked(lambda handler: handler(ElicitationRequest("When?", form, None))) as (outcome, link, browser):
        page = await browser.get(link)
        assert "a date and time, in UTC" in page.text and 'type="datetime-local"' in page.text
        posted = {"at": "2026-12-24T19:30", "_action": "review", **({"_zone.at": zone} if zone else {})}
        assert sent in (await browser.post(link, data=posted)).text
        await browser.post(link, data={"_action": "send"})
        assert await outcome.value() == Accepted({"at": sent})


async def test_an_answer_asked_again_shows_what_was_wrong_and_what_was_given(anyio_backend: str) -> None:
    form = Form.from_schema({"type": "object", "properties": {"name": {"type": "string", "title": "Name"}}})
    retry = ElicitationRequest("Name?", form, None, errors=(FieldError("name", "taken"),), previous={"name": "Ada"})
    async with asked(lambda handler: handler(retry)) as (outcome, link, browser):
        page = (await browser.get(link)).text
        assert "<li><bdi>Name</bdi>: taken</li>" in page and "✗ taken" in page and 'value="Ada"' in page
        await browser.post(link, data={"_action": "cancel"})
        assert await outcome.value() == Cancelled()


confirming = Server("desk", "1.0", title="Booking Desk")


@confirming.tool()
async def cancel_booking(ctx: Context) -> str:
    return "cancelled" if await ctx.confirm("Cancel Friday's booking?") else "kept"


@pytest.mark.parametrize(
    ("action", "result", "says"),
    [("yes", "cancelled", "You answered Yes."), ("no", "kept", "You answered No."),
     ("decline", "kept", "You declined."), ("cancel", "kept", "You cancelled.")],
)  # fmt: skip
async def test_a_yes_no_question_is_one_page_with_no_focused(
    anyio_backend: str, action: str, result: str, says: str
) -> None:
    """``ctx.confirm`` in the browser: the question with Yes and No on the first page, answered by one press (no
    checkbox, no review); No has the focus, so Enter answers No."""
    links: list[str] = []
    pages: list[str] = []

    def opener(url: str) -> bool:
        links.append(url)
        return True

    async def person() -> None:
        while not links:
            await anyio.sleep(0.01)
        async with httpx2.AsyncClient() as browser:
            pages.append((await browser.get(links[0])).text)
            pages.append((await browser.post(links[0], data={"_action": action})).text)

    async with BrowserHandler(open_url=opener, write=lambda text: None) as handler, anyio.create_task_group() as tg:
        tg.start_soon(person)
        async with connected(confirming, elicitation=handler, protocol="2025-11-25") as client:
            with anyio.fail_after(10):
                assert (await client.call_tool("cancel_booking")).text == result
    question, answered = pages
    assert "Cancel Friday&#x27;s booking?" in question and '<p class=question dir="auto">Confirm?</p>' in question
    buttons = re.findall(r"<button name=\"_action\" value=\"(\w+)\"( autofocus)?>", question)
    assert buttons == [("yes", ""), ("no", " autofocus"), ("decline", ""), ("cancel", "")]
    assert "<input" not in question and "Review" not in question
    assert says in answered


def test_a_page_counts_as_gone_only_once_its_reports_stop() -> None:
    """The wait for an answer sleeps until this moment, and every report from the page moves it."""
    from elicitor.client._browser._pages import STALE, Page

    page = Page("form", None, "token")  # type: ignore[arg-type]  # the request plays no part here
    assert page.gone_at(10.0) is None  # never reported (no JavaScript): the page cannot tell, so it never counts
    page.beat = 100.0
    assert page.gone_at(10.0) == 100.0 + STALE  # reporting: gone only if the reports stop
    page.left = 150.0
    assert page.gone_at(10.0) == 160.0  # said goodbye: gone after the grace period, unless it comes back
    news = page.news
    page.poke()
    assert news.is_set() and not page.news.is_set()  # a waiter woke; the next wait has a fresh event
