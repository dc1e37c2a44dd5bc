"""Signing in at a person's pace: a person who takes 20 s, 90 s or four minutes to approve gets in, through the
library and through ``elicitor connect``, on both eras, with one registration, one link and the era the server
speaks, whatever their speed (client/_pace.py). The person is an HTTP client that follows the sign-in link only
after the delay, as a browser would: the authorization server approves and redirects to the client's loopback
listener.

The waits are real (a subprocess's clock cannot be driven), so every person of this module waits at the same
time, in one test: it takes as long as the slowest person, about four minutes.
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from elicitor import Client, ScriptedHandler
from elicitor.client.auth import LoopbackAuthorizer, MemoryTokenStore, OAuth

from .test_auth_client import Deployment, deployed

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
DELAYS = (20.0, 90.0, 240.0)
ERAS = ("auto", "2025-11-25")  # auto: the server speaks 2026-07-28, and a slow person must not change that
LINK = re.compile(r"^\s+(http://127\.0\.0\.1:\d+/as/authorize\?\S+)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn runs on asyncio


async def person(link: str, delay: float) -> None:
    """Take ``delay`` seconds, then open the link: the authorization server approves and sends the browser to the
    client's loopback listener, whose page says the sign-in is done."""
    await anyio.sleep(delay)
    async with httpx.AsyncClient(follow_redirects=True, timeout=30) as browser:
        page = await browser.get(link)
    assert page.status_code == 200 and "You are signed in" in page.text, page.text


async def through_the_library(url: str, era: str, delay: float) -> dict[str, Any]:
    shown: list[str] = []
    links: list[str] = []
    arrived = anyio.Event()

    def write(line: str) -> None:
        shown.append(line)
        found = LINK.match(line)
        if found:
            links.append(found.group(1))
            arrived.set()

    authorizer = LoopbackAuthorizer(write=write, open_browser=False)
    auth = OAuth(authorizer, store=MemoryTokenStore())
    handler = ScriptedHandler([{"name": "Ada"}])
    async with anyio.create_task_group() as tg:

        async def approve() -> None:
            await arrived.wait()
            await person(links[0], delay)

        tg.start_soon(approve)
        # The library's defaults: a 10 s probe, a 30 s handshake, a 300 s request_timeout.
        async with Client.http(url, auth=auth, elicitation=handler, protocol=era) as client:
            result = (await client.call_tool("greet")).text
            version = client.protocol_version
    said = "\n".join(shown)
    return {"result": result, "version": version, "links": links, "said": said}


async def through_connect(url: str, era: str, delay: float, home: Path) -> dict[str, Any]:
    """``elicitor connect URL`` as a person runs it (its --timeout left at 30 s), answering on standard input."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(home), "BROWSER": "/nonexistent/browser"}
    command = [sys.executable, "-m", "elicitor", "connect", "--ui", "lines", "--no-browser", "--protocol", era, url]
    process = await anyio.open_process(command, cwd=ROOT, env=env, start_new_session=True)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    stderr = BufferedByteReceiveStream(process.stderr)
    said: list[str] = []
    out: list[bytes] = []

    async def read_stdout() -> None:
        assert process.stdout is not None
        async for chunk in process.stdout:
            out.append(chunk)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stdout)
            link = None
            while link is None:
                line = (await stderr.receive_until(b"\n", 65536)).decode(errors="replace")
                said.append(line)
                found = LINK.match(line)
                link = found.group(1) if found else None
            await person(link, delay)
            await process.stdin.send(b"greet\n\nAda\n\n\nq\n")
            with anyio.fail_after(60):
                while True:
                    try:
                        said.append((await stderr.receive_until(b"\n", 65536)).decode(errors="replace"))
                    except (anyio.EndOfStream, anyio.IncompleteRead):
                        break
                await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    text = "\n".join(said)
    version = re.search(r"Connected to .*, protocol (\S+)\.", text)
    return {
        "result": b"".join(out).decode().strip(),
        "version": version.group(1) if version else None,
        "links": [line for line in said if LINK.match(line)],
        "code": process.returncode,
        "said": text,
    }


@pytest.mark.timeout(max(DELAYS) + 180)  # the slowest person, and everything else meanwhile
async def test_a_person_who_takes_their_time_gets_in_on_every_path(anyio_backend: str, tmp_path: Path) -> None:
    outcomes: dict[tuple[str, str, float], dict[str, Any]] = {}
    deployments: dict[tuple[str, str, float], tuple[Deployment, str]] = {}
    async with AsyncExitStack() as stack:
        for surface in ("library", "connect"):
            for era in ERAS:
                for delay in DELAYS:
                    deployments[surface, era, delay] = await stack.enter_async_context(deployed(jwt=True))

        async def one(surface: str, era: str, delay: float) -> None:
            _, url = deployments[surface, era, delay]
            if surface == "library":
                outcomes[surface, era, delay] = await through_the_library(url, era, delay)
            else:
                outcomes[surface, era, delay] = await through_connect(url, era, delay, tmp_path / f"{era}-{delay:g}")

        with anyio.fail_after(max(DELAYS) + 120):
            async with anyio.create_task_group() as tg:
                for key in deployments:
                    tg.start_soon(one, *key)

    assert len(outcomes) == len(deployments)
    for (surface, era, delay), outcome in outcomes.items():
        case = f"{surface}, {era}, a person taking {delay:g} s: {outcome}"
        deployment, _ = deployments[surface, era, delay]
        assert outcome.get("code", 0) == 0, case
        assert outcome["result"].endswith("hello Ada"), case
        assert outcome["version"] == ("2026-07-28" if era == "auto" else era), case  # the era does not hang on speed
        assert outcome["said"].count("Sign in to continue") == 1 and len(outcome["links"]) == 1, case  # one link
        assert len(deployment.registrations) == 1 and len(deployment.authorizations) == 1, case
