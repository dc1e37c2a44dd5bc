"""The browser pages with assistive technology in mind, in English, Chinese and Arabic (right to left).

axe-core (the npm package, installed into ``.cache/`` by ``make test``) runs in Debian's headless Chromium on every
page state — the empty form with every field kind, the form with errors, the review, a yes/no question, the URL
consent and its "I'm done" step, the last page — and must find no violation of the WCAG 2.0, 2.1 and 2.2 A/AA
rules. Past what rules can see: a keyboard-only walk through each form (the focus always visible, errors focus the
first invalid field and are announced), reflow at 320 CSS pixels (400 % zoom) and a page without motion.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import anyio
import pytest
from playwright.async_api import Page

from elicitor import Accepted, AuthError, Declined, Form
from elicitor.client import BrowserHandler, ElicitationRequest, UrlElicitationRequest
from elicitor.types import Implementation

from .conftest import ROOT, later
from .test_browser_ui import GRACE, SCHEMA, Person, chromium, shared_chromium

pytestmark = pytest.mark.anyio

AXE = ROOT / ".cache" / "axe-core-4.14.1" / "node_modules" / "axe-core" / "axe.min.js"
RULES = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
LANGUAGES = ["en", "zh-Hans", "zh-Hant", "ar"]
SERVER = Implementation(name="hotel", version="2.1", title="Grand Hotel")
RTL_SERVER = Implementation(name="maktab", version="1.0", title="مكتب الحجز")
YES_NO = Form.from_schema({"type": "object", "properties": {"ok": {"type": "boolean", "title": "Confirm"}}})
URL = UrlElicitationRequest.from_params(
    {"mode": "url", "message": "Sign in to the calendar", "url": "http://127.0.0.1:9/connect?x=1",
     "elicitationId": "e1"},
    SERVER,
)  # fmt: skip


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # one loop for the module, for its one chromium


@pytest.fixture(scope="module", autouse=True)
async def one_chromium(anyio_backend: str) -> AsyncIterator[None]:
    async with shared_chromium():
        yield


async def violations(page: Page, state: str) -> list[str]:
    """axe-core's WCAG A/AA violations on the page as it stands, one line each (empty: none)."""
    if not AXE.exists():
        pytest.fail("axe-core is not installed (make test installs it: scripts/conformance.py --install-only)")
    if not await page.evaluate("typeof window.axe !== 'undefined'"):
        await page.add_script_tag(path=str(AXE))
    found = await page.evaluate(
        "(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags}}).then((r) => r.violations.map("
        "(v) => v.id + ': ' + v.help + ' at ' + v.nodes.map((n) => n.target.join(' ')).join(', ')))",
        RULES,
    )
    return [f"{state}: {line}" for line in found]


async def focus_is_visible(page: Page) -> bool:
    """The focused element draws a focus ring (an outline at least 2 px wide, not ``none``)."""
    return bool(
        await page.evaluate(
            "() => { const s = getComputedStyle(document.activeElement);"
            " return s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2; }"
        )
    )


async def reflows(page: Page) -> bool:
    """At 320 CSS pixels wide nothing needs scrolling sideways (WCAG 1.4.10, what 400 % zoom of 1280 px gives)."""
    await page.set_viewport_size({"width": 320, "height": 640})
    fits = await page.evaluate("() => document.documentElement.scrollWidth <= 320")
    await page.set_viewport_size({"width": 1024, "height": 900})
    return bool(fits)


@pytest.mark.parametrize("lang", LANGUAGES)
async def test_every_page_state_has_no_wcag_violation_and_works_from_the_keyboard(lang: str) -> None:
    problems: list[str] = []
    async with chromium() as browser:
        person = Person(browser)
        context = await browser.new_context(bypass_csp=True, reduced_motion="reduce", locale=lang)
        handler = BrowserHandler(open_url=person.open, write=lambda t: None, grace=GRACE, lang=lang)
        async with handler, anyio.create_task_group() as tg:
            # the form, every field kind: empty, with errors, the review, the last page
            request = ElicitationRequest("Book a room at the Grand Hotel.", Form.from_schema(SCHEMA), SERVER)
            outcome = later(tg, handler, request)
            page = await context.new_page()
            await page.goto(await person.link(0))
            assert await page.get_attribute("html", "lang") == lang
            assert await page.get_attribute("html", "dir") == ("rtl" if lang == "ar" else "ltr")
            problems += await violations(page, "empty form")
            if lang == "zh-Hans":  # the documentation's picture (scripts/pictures.py)
                (ROOT / "artifacts").mkdir(exist_ok=True)
                await page.screenshot(path=str(ROOT / "artifacts" / "browser-form-zh.png"), full_page=True)
            assert await reflows(page), "the form does not reflow at 320 px"
            assert await page.evaluate("() => document.getAnimations().length") == 0
            # keyboard only: the first field has the focus; type, Tab on, the focus always drawn
            await page.wait_for_function("document.activeElement.id === 'f-name'")
            assert await focus_is_visible(page)
            await page.keyboard.type("Ada")
            for _ in range(3):
                await page.keyboard.press("Tab")
                assert await focus_is_visible(page)
            await page.fill("#f-email", "ada@localhost")  # the browser accepts it, the validator does not
            await page.fill("#f-arrival", "2026-12-24")
            await page.get_by_role("radio").nth(2).check()  # a room
            for extra in range(3, 6):  # three extras: more than the two allowed
                await page.get_by_role("checkbox").nth(extra).check()
            await page.focus("button[value=review]")
            await page.keyboard.press("Enter")
            await page.get_by_role("alert").wait_for()
            problems += await violations(page, "errors shown")
            await page.wait_for_function("document.activeElement.id === 'f-email'")  # the first invalid field
            assert await page.get_attribute("#f-email", "aria-invalid") == "true"
            described = await page.get_attribute("#f-email", "aria-describedby") or ""
            assert "e-email" in described.split() and await page.is_visible("#e-email")
            assert (await page.inner_text("#e-email")).startswith("✗")  # not by colour alone
            await page.fill("#f-email", "ada@example.com")
            await page.get_by_role("checkbox").nth(5).uncheck()
            await page.focus("button[value=review]")
            await page.keyboard.press("Enter")
            await page.wait_for_selector("dl")
            problems += await violations(page, "review")
            assert await page.evaluate("document.activeElement.value") == "send"
            assert await focus_is_visible(page)
            await page.keyboard.press("Enter")  # Send
            await page.wait_for_selector("[role=status]")
            problems += await violations(page, "sent")
            assert isinstance(await outcome.value(), Accepted)

            # a yes/no question, from an Arabic-named server: No has the focus
            outcome = later(tg, handler, ElicitationRequest("Cancel Friday's booking?", YES_NO, RTL_SERVER))
            page = await context.new_page()
            await page.goto(await person.link(1))
            problems += await violations(page, "yes/no")
            assert await page.evaluate("document.activeElement.value") == "no" and await focus_is_visible(page)
            assert await reflows(page)
            await page.keyboard.press("Tab")  # on to Decline, then press it
            await page.keyboard.press("Enter")
            await page.wait_for_selector("[role=status]")
            problems += await violations(page, "declined")
            assert await outcome.value() == Declined()

            # URL consent, then its "I'm done" step
            opened = later(tg, handler.url, URL)
            page = await context.new_page()
            await page.goto(await person.link(2))
            problems += await violations(page, "URL consent")
            assert await page.evaluate("document.activeElement.value") == "decline"  # never Open first
            assert await reflows(page)
            link = await person.link(2)
            answer = await context.request.post(link, form={"_action": "open"}, max_redirects=0)
            assert answer.status == 303  # on to the page itself (nothing listens there in this test)
            assert isinstance(await opened.value(), Accepted)
            done = later(tg, handler.wait_done, URL)
            page = await context.new_page()
            await page.goto(link)
            problems += await violations(page, "URL opened")
            await page.click("button[value=done]")
            await page.wait_for_selector("[role=status]")
            problems += await violations(page, "URL done")
            await done.value()
        await context.close()
    assert problems == []


async def test_the_language_switch_is_a_labelled_list_of_links_each_in_its_own_language() -> None:
    async with chromium() as browser:
        person = Person(browser)
        handler = BrowserHandler(open_url=person.open, write=lambda t: None, grace=GRACE)
        async with handler, anyio.create_task_group() as tg:
            outcome = later(tg, handler, ElicitationRequest("?", YES_NO, SERVER))
            context = await browser.new_context(locale="zh-CN", extra_http_headers={"accept-language": "zh-CN"})
            page = await context.new_page()
            await page.goto(await person.link(0))
            assert await page.get_attribute("html", "lang") == "zh-Hans"
            nav = page.get_by_role("navigation", name="语言")
            assert await nav.get_by_role("link").all_inner_texts() == ["English", "简体中文", "繁體中文", "العربية"]
            await nav.get_by_role("link", name="العربية").click()
            await page.wait_for_function("document.documentElement.dir === 'rtl'")
            body = await page.inner_text("main")
            assert "Grand Hotel 2.1 يسأل:" in body and "?" in body
            assert re.search(r"نعم\s+لا\s+رفض\s+إلغاء", body)
            await page.get_by_role("button", name="لا").click()
            await page.wait_for_selector("[role=status]")
            assert await outcome.value() == Accepted({"ok": False})
            await context.close()


async def test_the_rules_do_find_a_violation() -> None:
    """The check above can fail: an unlabelled field on a page without a language is found."""
    async with chromium() as browser:
        page = await browser.new_page()
        await page.set_content("<!doctype html><title>x</title><input>")
        found = await violations(page, "control")
        assert any("label" in line for line in found) and any("html-has-lang" in line for line in found)


@pytest.mark.parametrize("lang", LANGUAGES)
async def test_the_sign_in_pages_have_no_wcag_violation(lang: str) -> None:
    """The page the browser comes back to after signing in (and the ones for a stray or refused answer)."""
    from elicitor.client.auth import LoopbackAuthorizer

    problems: list[str] = []
    shown: list[str] = []
    async with chromium() as browser, LoopbackAuthorizer(write=shown.append, open_browser=False, lang=lang) as auth:
        context = await browser.new_context(bypass_csp=True)

        async def person() -> None:
            with anyio.fail_after(20):
                while not shown:
                    await anyio.sleep(0.02)
            base = auth.redirect_uri
            for query, state in (("?state=other&code=x", "stray"), ("?state=s1&error=access_denied", "refused")):
                page = await context.new_page()
                await page.goto(base + query)
                problems.extend(await violations(page, f"sign-in {state}"))
                assert await page.get_attribute("html", "lang") == lang

        async with anyio.create_task_group() as tg:
            tg.start_soon(person)
            with pytest.raises(AuthError, match="access_denied"):
                await auth.authorize("https://auth.example/authorize?x=1", "s1")
        async with anyio.create_task_group() as tg:
            shown.clear()
            done = later(tg, auth.authorize, "https://auth.example/authorize?x=1", "s2")
            with anyio.fail_after(20):
                while not shown:
                    await anyio.sleep(0.02)
            page = await context.new_page()
            await page.goto(auth.redirect_uri + "?state=s2&code=abc")
            problems.extend(await violations(page, "signed in"))
            assert (await done.value()).code == "abc"
        await context.close()
    assert problems == []
