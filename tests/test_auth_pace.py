"""A person's time during sign-in, beyond the first one (client/_pace.py, client/auth/): a step-up in the middle of
a session waits for a slow person as the first sign-in does.

The people here are HTTP clients that follow the sign-in link after a delay, as a browser would: the authorization
server approves and redirects to the client's loopback listener. The client's own timers are made small, and each
person is a few times slower than them, so what is shown is that no timer of the client's runs while a person signs
in, without a test that takes minutes (tests/test_sign_in_pace.py has the people who take minutes).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest

from elicitor import Client, ScriptedHandler
from elicitor.client.auth import LoopbackAuthorizer, OAuth

from .replicas import free_port
from .test_auth_client import deployed
from .test_dev_auth import _Form, started

pytestmark = pytest.mark.anyio

TIMERS = 1.5
"""The client's request_timeout, handshake_timeout and probe_timeout (small, yet above a loaded machine's pauses)."""
SLOW = 3 * TIMERS
"""A person a few times slower than any of them."""
LINK = re.compile(r"^\s+(http://127\.0\.0\.1:\d+/(?:as/)?authorize\?\S+)")
"""A sign-in link as LoopbackAuthorizer shows it (the test authorization server's, or elicitor dev-auth's)."""


class Screen:
    """What a person reads off the screen: every sign-in link the authorizer shows (``write`` is its output)."""

    def __init__(self) -> None:
        self.links: list[str] = []
        self._shown = anyio.Event()

    def write(self, line: str) -> None:
        found = LINK.match(line)
        if found:
            self.links.append(found.group(1))
            self._shown.set()

    async def link(self, number: int) -> str:
        """The ``number``-th link shown (from 1), once it is."""
        while len(self.links) < number:
            self._shown = anyio.Event()
            await self._shown.wait()
        return self.links[number - 1]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn runs on asyncio


async def follow(link: str) -> None:
    """A browser opening the sign-in link: the authorization server approves and redirects to the client."""
    async with httpx.AsyncClient(follow_redirects=True, timeout=30) as browser:
        page = await browser.get(link)
    assert page.status_code == 200 and "You are signed in" in page.text, page.text


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_slow_person_stepping_up_in_the_middle_of_a_session_stops_every_timer(
    anyio_backend: str, era: str
) -> None:
    """The session is up (a quick sign-in, a tool called); then a tool needs more scope (403 insufficient_scope
    with WWW-Authenticate) and the person takes three times request_timeout to approve: the call goes on."""
    screen = Screen()

    async def person(delays: list[float]) -> None:
        for number, delay in enumerate(delays, 1):
            link = await screen.link(number)
            await anyio.sleep(delay)
            await follow(link)

    async with deployed(jwt=True) as (deployment, url):
        auth = OAuth(LoopbackAuthorizer(write=screen.write, open_browser=False))
        handler = ScriptedHandler([{"name": "Ada"}])
        async with anyio.create_task_group() as tg:
            tg.start_soon(person, [0.0, SLOW])
            with anyio.fail_after(60):
                async with Client.http(
                    url, auth=auth, elicitation=handler, protocol=era,
                    request_timeout=TIMERS, handshake_timeout=TIMERS, probe_timeout=TIMERS,
                ) as client:  # fmt: skip
                    assert (await client.call_tool("greet")).text == "hello Ada"
                    assert (await client.call_tool("admin")).text == "admin done for ada"  # the step-up
                    assert (await client.call_tool("admin")).text == "admin done for ada"  # and no other
    scopes = [set(a["scope"].split()) for a in deployment.authorizations]
    assert scopes == [{"mcp:basic", "offline_access"}, {"mcp:basic", "mcp:admin", "offline_access"}]
    assert len(screen.links) == 2 and len(deployment.registrations) == 1


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_two_calls_waiting_on_a_person_whose_token_lapsed_meanwhile_sign_in_once_at_the_persons_pace(
    anyio_backend: str, era: str
) -> None:
    """Two calls each wait on a question; while the person reads them, every token lapses and the refresh token is
    revoked. Both answers then meet a 401 at once: one refresh is tried, one link is shown, the person takes three
    times request_timeout to sign in, and both answers go through on the new token (no timer runs meanwhile)."""
    screen = Screen()
    both_waiting = anyio.Event()
    asked: list[str] = []

    async def answer(request: Any) -> dict[str, str]:
        asked.append(request.message)
        if len(asked) == 2:
            both_waiting.set()
        await both_waiting.wait()
        return {"name": "Ada"}

    async def person() -> None:
        await follow(await screen.link(1))
        await anyio.sleep(SLOW)
        await follow(await screen.link(2))

    async with deployed() as (deployment, url):
        auth = OAuth(LoopbackAuthorizer(write=screen.write, open_browser=False))
        handler = ScriptedHandler(otherwise=answer)
        results: list[str] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(person)
            with anyio.fail_after(60):
                async with Client.http(
                    url, auth=auth, elicitation=handler, protocol=era, request_timeout=TIMERS,
                ) as client:  # fmt: skip

                    async def call() -> None:
                        results.append((await client.call_tool("greet")).text)

                    async with anyio.create_task_group() as calls:
                        calls.start_soon(call)
                        calls.start_soon(call)
                        await both_waiting.wait()
                        deployment.access.clear()
                        deployment.refresh.clear()
    assert results == ["hello Ada", "hello Ada"]
    assert len(screen.links) == 2 and len(deployment.authorizations) == 2  # signed in again once, not twice
    assert [t["grant_type"] for t in deployment.token_requests] == [
        "authorization_code", "refresh_token", "authorization_code"
    ]  # fmt: skip


# ---- a sign-in interrupted part-way, with `elicitor dev-auth` -------------------------------------------------


@contextmanager
def protected_by_dev_auth(logs: Path) -> Iterator[tuple[str, str]]:
    """``elicitor dev-auth`` and ``elicitor serve --auth-issuer`` trusting it: the issuer and the MCP endpoint."""
    auth_port, mcp_port = free_port(), free_port()
    issuer, url = f"http://127.0.0.1:{auth_port}", f"http://127.0.0.1:{mcp_port}/mcp"
    dev_auth = [sys.executable, "-m", "elicitor", "dev-auth", "--port", str(auth_port), "--scope", "demo"]
    serve = [sys.executable, "-m", "elicitor", "serve", "tests.peers.cli_server:server", "--port", str(mcp_port),
             "--auth-issuer", issuer, "--auth-scope", "demo"]  # fmt: skip
    with started(dev_auth, auth_port, logs / "auth.log"), started(serve, mcp_port, logs / "serve.log"):
        yield issuer, url


class Browser:
    """A person's browser on ``elicitor dev-auth``'s sign-in page: opened, then (perhaps much later) submitted."""

    def __init__(self) -> None:
        self.http = httpx.AsyncClient(timeout=60)
        self.fields: dict[str, str] = {}
        self.action = ""

    async def open(self, link: str) -> None:
        page = await self.http.get(link)
        assert page.status_code == 200 and "Development only" in page.text, page.text
        form = _Form()
        form.feed(page.text)
        self.fields, self.action = form.fields, link.split("?", 1)[0]

    async def sign_in(self, name: str) -> str:
        """Type ``name`` and press Sign in: where the authorization server sends the browser back to."""
        answer = await self.http.post(self.action, data={**self.fields, "user": name})
        assert answer.status_code == 303, answer.text
        return answer.headers["location"]

    async def back(self, location: str) -> str:
        """Follow the redirect to the client's loopback listener: its page's text."""
        return (await self.http.get(location)).text


@pytest.mark.parametrize("back", ["before-the-next-request", "during-the-next-request"])
@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_sign_in_cancelled_part_way_keeps_its_link_for_the_next_request(
    anyio_backend: str, era: str, back: str, tmp_path: Path
) -> None:
    """The caller gives up on connecting (its scope is cancelled) while the person is on the sign-in page they
    opened. The next attempt shows the same link (same state, same PKCE challenge), and the person's sign-in on
    the page they already had open completes it: whether their browser comes back before the next attempt begins
    (the redirect waits in the loopback listener's queue) or while it waits."""
    screen = Screen()
    auth = OAuth(LoopbackAuthorizer(write=screen.write, open_browser=False))
    browser = Browser()
    pages: list[str] = []
    with protected_by_dev_auth(tmp_path) as (_, url):
        async with browser.http, anyio.create_task_group() as tg:
            with anyio.CancelScope() as caller:

                async def give_up_once_the_page_is_open() -> None:
                    await browser.open(await screen.link(1))
                    caller.cancel()

                tg.start_soon(give_up_once_the_page_is_open)
                async with Client.http(url, auth=auth, protocol=era):
                    pytest.fail("connected without a sign-in")
            assert caller.cancelled_caught and len(screen.links) == 1  # no cancel notice (it would meet a 401)

            async def person() -> None:
                pages.append(await browser.back(await browser.sign_in("ada")))

            if back == "before-the-next-request":
                tg.start_soon(person)
                await anyio.sleep(0.5)  # its redirect waits at the listener, which nobody serves yet
                assert not pages
            else:

                async def once_the_link_is_shown_again() -> None:
                    await screen.link(2)
                    await person()

                tg.start_soon(once_the_link_is_shown_again)
            with anyio.fail_after(60):
                async with Client.http(url, auth=auth, protocol=era) as client:
                    assert (await client.call_tool("whoami")).text == "you are ada"
                    assert client.protocol_version == era
    assert len(screen.links) == 2 and screen.links[0] == screen.links[1]  # the same link again, not a new one
    assert "You are signed in" in pages[0], pages


async def test_a_kept_sign_in_ends_when_its_time_is_up(anyio_backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past SIGN_IN_KEPT_FOR the next request shows a new link, and the old link's redirect is refused."""
    from elicitor.client.auth import _oauth

    monkeypatch.setattr(_oauth, "SIGN_IN_KEPT_FOR", 0.0)
    screen = Screen()
    auth = OAuth(LoopbackAuthorizer(write=screen.write, open_browser=False))
    async with deployed(jwt=True) as (deployment, url), anyio.create_task_group() as tg:
        with anyio.CancelScope() as caller:

            async def give_up() -> None:
                await screen.link(1)
                caller.cancel()

            tg.start_soon(give_up)
            async with Client.http(url, auth=auth, protocol="2025-11-25"):
                pytest.fail("connected without a sign-in")
        assert len(screen.links) == 1

        async def person() -> None:
            new = await screen.link(2)
            async with httpx.AsyncClient(follow_redirects=True, timeout=30) as browser:
                old = await browser.get(screen.links[0])
            assert old.status_code == 400 and "Not this sign-in" in old.text, old.text
            await follow(new)

        tg.start_soon(person)
        with anyio.fail_after(60):
            handler = ScriptedHandler([{"name": "Ada"}])
            async with Client.http(url, auth=auth, elicitation=handler, protocol="2025-11-25") as client:
                assert (await client.call_tool("greet")).text == "hello Ada"
    assert len(screen.links) == 2 and screen.links[1] != screen.links[0]  # a new link
    assert len(deployment.registrations) == 1
