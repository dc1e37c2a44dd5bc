"""A person's time during sign-in, beyond the first one (client/_pace.py, client/auth/): a step-up in the middle of
a session waits for a slow person as the first sign-in does.

The people here are HTTP clients that follow the sign-in link after a delay, as a browser would: the authorization
server approves and redirects to the client's loopback listener. The client's own timers are made small, and each
person is a few times slower than them, so what is shown is that no timer of the client's runs while a person signs
in, without a test that takes minutes (tests/test_sign_in_pace.py has the people who take minutes).
"""

from __future__ import annotations

import re

import anyio
import httpx2 as httpx
import pytest

from elicitor import Client, ScriptedHandler
from elicitor.client.auth import LoopbackAuthorizer, OAuth

from .test_auth_client import deployed

pytestmark = pytest.mark.anyio

TIMERS = 0.5
"""The client's request_timeout, handshake_timeout and probe_timeout."""
SLOW = 4 * TIMERS
"""A person a few times slower than any of them."""
LINK = re.compile(r"^\s+(http://127\.0\.0\.1:\d+/as/authorize\?\S+)")


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
    with WWW-Authenticate) and the person takes four times request_timeout to approve: the call goes on."""
    links: list[str] = []
    send, receive = anyio.create_memory_object_stream[str](4)

    def write(line: str) -> None:
        found = LINK.match(line)
        if found:
            links.append(found.group(1))
            send.send_nowait(found.group(1))

    async def person(delays: list[float]) -> None:
        async with receive:
            for delay in delays:
                link = await receive.receive()
                await anyio.sleep(delay)
                await follow(link)

    async with send, deployed(jwt=True) as (deployment, url):
        auth = OAuth(LoopbackAuthorizer(write=write, open_browser=False))
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
    assert len(links) == 2 and len(deployment.registrations) == 1
