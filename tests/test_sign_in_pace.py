"""Signing in at a person's pace: a person who takes 20 s, 90 s or four minutes to approve gets in, through the
library and through ``elicitor connect``, on both eras, with one registration, one link and the era the server
speaks, whatever their speed (client/_pace.py). The person is an HTTP client that follows the sign-in link only
after the delay, as a browser would: the authorization server approves and redirects to the client's loopback
listener.

The waits are real (a subprocess's clock cannot be driven), so every person of this module waits at the same
time, in one test, and the clocks are scaled down with the people: each person takes longer than the clocks they
must not run out — the library's ``probe_timeout``, ``handshake_timeout`` and ``request_timeout`` set to seconds,
``connect``'s ``--timeout`` too (its probe keeps its 10 s) — which proves in well under a minute what 20 s, 90 s
and four minutes prove against the defaults. ``ELICITOR_PACE=real`` (``make soak``) runs those people against the
defaults: about four minutes.
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
REAL = os.environ.get("ELICITOR_PACE") == "real"
Clocks = dict[str, Any]
"""The client's clocks a person outlasts: ``Client.http`` keywords (library), ``{"--timeout": s}`` (connect); empty:
the defaults (a 10 s probe, a 30 s handshake, a 300 s request_timeout; connect's --timeout 30)."""
PEOPLE: dict[str, list[tuple[float, Clocks]]] = (
    {surface: [(20.0, {}), (90.0, {}), (240.0, {})] for surface in ("library", "connect")}
    if REAL
    else {
        # Slower than the probe; than the probe and the handshake; than every clock, request_timeout too.
        "library": [
            (6.0, {"probe_timeout": 4.0, "handshake_timeout": 30.0}),
            (10.0, {"probe_timeout": 4.0, "handshake_timeout": 8.0}),
            (16.0, {"probe_timeout": 4.0, "handshake_timeout": 8.0, "request_timeout": 12.0}),
        ],
        # connect's probe is the library's 10 s: slower than it; than it and --timeout.
        "connect": [(15.0, {"--timeout": 30.0}), (15.0, {"--timeout": 6.0})],
    }
)
SLOWEST = max(delay for people in PEOPLE.values() for delay, _ in people)
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


class SignIn:
    """A client's loopback sign-in (``auth``) whose links a person follows: the lines it writes (``shown``), the
    links among them (``links``), and :meth:`approve`, the person following each link as it comes."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.links: list[str] = []
        self._arrived = anyio.Event()
        self.auth = OAuth(LoopbackAuthorizer(write=self._write, open_browser=False), store=MemoryTokenStore())

    def _write(self, line: str) -> None:
        self.shown.append(line)
        found = LINK.match(line)
        if found:
            self.links.append(found.group(1))
            self._arrived.set()

    async def approve(self, *delays: float) -> None:
        """For each of ``delays``: wait for the next link, then follow it that many seconds later."""
        for delay in delays:
            await self._arrived.wait()
            self._arrived = anyio.Event()
            await person(self.links[-1], delay)


async def through_the_library(url: str, era: str, delay: float, clocks: Clocks) -> dict[str, Any]:
    sign_in = SignIn()
    handler = ScriptedHandler([{"name": "Ada"}])
    async with anyio.create_task_group() as tg:
        tg.start_soon(sign_in.approve, delay)
        async with Client.http(url, auth=sign_in.auth, elicitation=handler, protocol=era, **clocks) as client:
            result = (await client.call_tool("greet")).text
            version = client.protocol_version
    said = "\n".join(sign_in.shown)
    return {"result": result, "version": version, "links": sign_in.links, "said": said}


async def through_connect(url: str, era: str, delay: float, clocks: Clocks, home: Path) -> dict[str, Any]:
    """``elicitor connect URL`` as a person runs it, answering on standard input."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(home), "BROWSER": "/nonexistent/browser"}
    options = [word for flag, seconds in clocks.items() for word in (flag, f"{seconds:g}")]
    command = [sys.executable, "-m", "elicitor", "connect", "--ui", "lines", "--no-browser", *options]
    command += ["--protocol", era, url]
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


@pytest.mark.timeout(SLOWEST + 180)  # the slowest person, and everything else meanwhile
async def test_a_person_who_takes_their_time_gets_in_on_every_path(anyio_backend: str, tmp_path: Path) -> None:
    outcomes: dict[tuple[str, str, int], dict[str, Any]] = {}
    deployments: dict[tuple[str, str, int], tuple[Deployment, str]] = {}
    async with AsyncExitStack() as stack:
        for surface, people in PEOPLE.items():
            for era in ERAS:
                for index in range(len(people)):
                    deployments[surface, era, index] = await stack.enter_async_context(deployed(jwt=True))

        async def one(surface: str, era: str, index: int) -> None:
            _, url = deployments[surface, era, index]
            delay, clocks = PEOPLE[surface][index]
            if surface == "library":
                outcomes[surface, era, index] = await through_the_library(url, era, delay, clocks)
            else:
                home = tmp_path / f"{era}-{index}"
                outcomes[surface, era, index] = await through_connect(url, era, delay, clocks, home)

        with anyio.fail_after(SLOWEST + 120):
            async with anyio.create_task_group() as tg:
                for key in deployments:
                    tg.start_soon(one, *key)

    assert len(outcomes) == len(deployments)
    for (surface, era, index), outcome in outcomes.items():
        delay, clocks = PEOPLE[surface][index]
        case = f"{surface}, {era}, a person taking {delay:g} s, clocks {clocks or 'the defaults'}: {outcome}"
        deployment, _ = deployments[surface, era, index]
        assert outcome.get("code", 0) == 0, case
        assert outcome["result"].endswith("hello Ada"), case
        assert outcome["version"] == ("2026-07-28" if era == "auto" else era), case  # the era does not hang on speed
        assert outcome["said"].count("Sign in to continue") == 1 and len(outcome["links"]) == 1, case  # one link
        assert len(deployment.registrations) == 1 and len(deployment.authorizations) == 1, case


async def test_through_the_proxy_a_probe_given_up_during_the_upstream_sign_in_leaves_it_running(
    anyio_backend: str,
) -> None:
    """The proxy (over stdio, here in memory) starts its upstream connection's sign-in when the client's first
    request, its ``server/discover`` probe, arrives. The client gives the probe up before the person is done and
    sends ``initialize``: the proxy must go on (not end with the probe), the sign-in too, with the same link, and
    the client gets in on the handshake era once the person has approved: one link, one authorization."""
    from elicitor.client._http import HttpClientTransport
    from elicitor.proxy import Bridge
    from elicitor.transports import memory_pair

    async with deployed() as (deployment, url):
        sign_in = SignIn()
        auth = sign_in.auth
        client_end, down_end = memory_pair()
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(sign_in.approve, 2.0)  # longer than the probe's limit, well within the handshake's
                tg.start_soon(Bridge(lambda: HttpClientTransport.connect(url, auth=auth)).serve, down_end)
                handler = ScriptedHandler([{"name": "Ada"}])
                clocks: Clocks = {"probe_timeout": 0.5, "handshake_timeout": 30, "request_timeout": 30}
                async with Client(client_end, elicitation=handler, **clocks) as client:
                    assert client.protocol_version == "2025-11-25"  # the probe went unanswered in its time
                    assert (await client.call_tool("greet")).text.endswith("hello Ada")
                tg.cancel_scope.cancel()
    assert len(sign_in.links) == 1
    assert len(deployment.authorizations) == 1


@pytest.mark.parametrize("through", ["client", "proxy"])
async def test_a_person_who_gives_up_is_shown_one_link_and_told_why(anyio_backend: str, through: str) -> None:
    """Nobody follows the link, and the authorizer's wait runs out. The client (``protocol="auto"``, the default)
    must not take the failed ``server/discover`` probe for a server of the handshake era and sign in again for
    ``initialize``: one link, then the reason. Through the proxy the same holds for its upstream sign-in, and the
    client in front of it gets the reason, not a closed connection."""
    from elicitor import JSONRPCError
    from elicitor.client._http import HttpClientTransport
    from elicitor.proxy import Bridge
    from elicitor.transports import memory_pair

    async with deployed() as (deployment, url):
        links: list[str] = []

        def write(line: str) -> None:
            if LINK.match(line):
                links.append(line)

        auth = OAuth(LoopbackAuthorizer(write=write, open_browser=False, timeout=1.0), store=MemoryTokenStore())
        failed: list[JSONRPCError] = []
        with anyio.fail_after(60):
            if through == "client":
                try:
                    async with Client.http(url, auth=auth) as client:
                        await client.list_tools()
                except JSONRPCError as exc:
                    failed.append(exc)
            else:
                client_end, down_end = memory_pair()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(Bridge(lambda: HttpClientTransport.connect(url, auth=auth)).serve, down_end)
                    try:
                        async with Client(client_end, probe_timeout=30, handshake_timeout=30) as client:
                            await client.list_tools()
                    except JSONRPCError as exc:
                        failed.append(exc)
                    tg.cancel_scope.cancel()
    assert len(failed) == 1, "the client got in without a person"
    assert "signing in to the server failed: no sign-in within 1 s" in failed[0].message
    assert len(links) == 1
    assert deployment.authorizations == []


@pytest.mark.parametrize(("listen", "era"), [(False, "2025-11-25"), (True, "2025-11-25"), (False, "2026-07-28")])
async def test_through_the_proxy_a_person_slower_than_the_clients_handshake_limit_gets_in(
    anyio_backend: str, listen: bool, era: str
) -> None:
    """The proxy's upstream sign-in takes longer than its client's ``handshake_timeout`` (here 3 s against 1 s,
    for a minute or more against 30 s). The client's ``initialize`` waits on it, and the client would give up;
    the proxy tells it every ``keepalive`` that a person is signing in (log messages, which a server may send
    before it answers ``initialize``), the client counts them as the server's progress, and gets in once the
    person has approved: one link, one authorization, the messages seen by the client's ``on_log``. Over stdio
    (here in memory) and behind ``--listen`` (the proxy's HTTP app, the messages on ``initialize``'s own stream).
    A client pinned to 2026-07-28 that asks for log messages hears them on its ``server/discover`` (that era has
    no ping, and a server sends no log message to a request that did not ask for one)."""
    from elicitor.client._http import HttpClientTransport
    from elicitor.proxy import Bridge, ProxyServer
    from elicitor.proxy._bridge import SIGNING_IN
    from elicitor.transports import memory_pair

    async with deployed() as (deployment, url):
        sign_in = SignIn()
        auth = sign_in.auth
        heard: list[object] = []

        async def on_log(level: str, data: object, source: str | None) -> None:
            heard.append(data)

        connect = lambda: HttpClientTransport.connect(url, auth=auth)  # noqa: E731
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(sign_in.approve, 3.0)  # three times the client's handshake limit
                handler = ScriptedHandler([{"name": "Ada"}])
                clocks: Clocks = {"protocol": era, "handshake_timeout": 1.0, "on_log": on_log}
                if era == "2026-07-28":
                    clocks["log_level"] = "info"
                async with AsyncExitStack() as stack:
                    if listen:
                        from .conftest import serving

                        proxy = ProxyServer(connect, sign_in=auth, keepalive=0.3)
                        at = await stack.enter_async_context(serving(proxy.http_app()))
                        client = await stack.enter_async_context(Client.http(at, elicitation=handler, **clocks))
                    else:
                        client_end, down_end = memory_pair()
                        tg.start_soon(Bridge(connect, sign_in=auth, keepalive=0.3).serve, down_end)
                        client = await stack.enter_async_context(Client(client_end, elicitation=handler, **clocks))
                    assert client.protocol_version == era
                    assert (await client.call_tool("greet")).text.endswith("hello Ada")
                tg.cancel_scope.cancel()
    assert len(sign_in.links) == 1
    assert len(deployment.authorizations) == 1
    assert SIGNING_IN in heard


async def test_the_official_sdk_client_waits_for_a_slow_upstream_sign_in_and_hears_why(anyio_backend: str) -> None:
    """The official Python SDK's client in front of the proxy while a person signs in upstream: it waits for
    ``initialize`` (it has no limit unless given ``read_timeout_seconds``), its ``logging_callback`` gets the
    proxy's notices meanwhile (a notification before the ``initialize`` result does not upset it), and it lists
    the server's tools once the person has approved."""
    import mcp_types as types
    from mcp.client.session import ClientSession
    from mcp.shared.message import SessionMessage

    from elicitor.client._http import HttpClientTransport
    from elicitor.proxy import Bridge
    from elicitor.proxy._bridge import SIGNING_IN
    from elicitor.transports import memory_pair

    async with deployed() as (deployment, url):
        sign_in = SignIn()
        auth = sign_in.auth
        client_end, down_end = memory_pair()
        bridge = Bridge(lambda: HttpClientTransport.connect(url, auth=auth), sign_in=auth, keepalive=0.3)
        heard: list[object] = []

        async def logging_callback(params: types.LoggingMessageNotificationParams) -> None:
            heard.append(params.data)

        to_sdk, sdk_reads = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        sdk_writes, from_sdk = anyio.create_memory_object_stream[SessionMessage](16)

        async def proxy_to_sdk() -> None:
            async with to_sdk:
                while True:
                    try:
                        data = await client_end.receive()
                    except anyio.EndOfStream:
                        return
                    assert isinstance(data, bytes)
                    await to_sdk.send(SessionMessage(types.jsonrpc_message_adapter.validate_json(data)))

        async def sdk_to_proxy() -> None:
            async with from_sdk:
                async for message in from_sdk:
                    await client_end.send(message.message.model_dump_json(by_alias=True, exclude_none=True).encode())

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(sign_in.approve, 2.0)
                tg.start_soon(bridge.serve, down_end)
                tg.start_soon(proxy_to_sdk)
                tg.start_soon(sdk_to_proxy)
                async with (
                    sdk_reads,
                    sdk_writes,
                    ClientSession(sdk_reads, sdk_writes, logging_callback=logging_callback) as session,
                ):
                    await session.initialize()
                    assert SIGNING_IN in heard  # before the initialize result
                    tools = await session.list_tools()
                    assert "greet" in [tool.name for tool in tools.tools]
                tg.cancel_scope.cancel()
            await client_end.aclose()
    assert len(sign_in.links) == 1 and len(deployment.authorizations) == 1


@pytest.mark.parametrize("era", ["2026-07-28", "auto"])
async def test_behind_listen_a_client_that_asked_for_no_logs_waits_out_a_slow_sign_in(
    anyio_backend: str, era: str
) -> None:
    """A 2026-07-28 client of a ``--listen`` proxy that asked for no log messages, while a person signs in upstream
    for three times every limit the client keeps (probe, handshake, request: 1 s against 3 s). Nothing may be
    said to it in the protocol, so the proxy sends SSE comments on the request's response stream; the client
    counts them as the server being there, gets in on 2026-07-28 (with ``auto`` too: the probe is not taken for
    a handshake-era server's silence), and hears no log message it did not ask for."""
    from elicitor.proxy import ProxyServer

    from .conftest import serving

    async with deployed() as (deployment, url):
        sign_in = SignIn()
        auth = sign_in.auth
        heard: list[object] = []

        async def on_log(level: str, data: object, source: str | None) -> None:
            heard.append(data)

        from elicitor.client._http import HttpClientTransport

        proxy = ProxyServer(lambda: HttpClientTransport.connect(url, auth=auth), sign_in=auth, keepalive=0.3)
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg, serving(proxy.http_app()) as at:
                tg.start_soon(sign_in.approve, 3.0)
                clocks: Clocks = {"probe_timeout": 1.0, "handshake_timeout": 1.0, "request_timeout": 1.0}
                handler = ScriptedHandler([{"name": "Ada"}])
                async with Client.http(at, elicitation=handler, protocol=era, on_log=on_log, **clocks) as client:
                    assert client.protocol_version == "2026-07-28"
                    assert (await client.call_tool("greet")).text.endswith("hello Ada")
    assert len(sign_in.links) == 1 and len(deployment.authorizations) == 1
    assert heard == []  # no log message the client did not ask for


async def test_the_official_sdk_client_with_a_short_read_timeout_waits_for_a_slow_upstream_sign_in(
    anyio_backend: str,
) -> None:
    """The official Python SDK's client on 2026-07-28, asking for no log messages, its HTTP read timeout (1 s)
    shorter than the person behind the ``--listen`` proxy takes to sign in upstream (3 s): the proxy's SSE comments
    keep the read going, the SDK's parser ignores them, and the call succeeds once the person has approved."""
    import httpx2
    from mcp import Client as McpClient
    from mcp import types
    from mcp.client.streamable_http import streamable_http_client

    from elicitor.client._http import HttpClientTransport
    from elicitor.proxy import ProxyServer

    from .conftest import serving

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with deployed() as (deployment, url):
        sign_in = SignIn()
        auth = sign_in.auth
        proxy = ProxyServer(lambda: HttpClientTransport.connect(url, auth=auth), sign_in=auth, keepalive=0.3)
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg, serving(proxy.http_app()) as at:
                tg.start_soon(sign_in.approve, 3.0)
                async with httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=1.0)) as http:
                    transport = streamable_http_client(at, http_client=http)
                    async with McpClient(transport, elicitation_callback=answer, mode="2026-07-28") as client:
                        tools = await client.list_tools()
                        assert "greet" in [tool.name for tool in tools.tools]
                        result = await client.call_tool("greet", {})
                        assert result.content[0].text.endswith("hello Ada")  # type: ignore[union-attr]
    assert len(sign_in.links) == 1 and len(deployment.authorizations) == 1


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_behind_listen_a_call_waiting_on_a_slow_step_up_sign_in_hears_why(anyio_backend: str, era: str) -> None:
    """Mid-session, a tool needs more scope upstream (403 ``insufficient_scope``), and the person at the proxy takes
    3 s to approve the second sign-in, three times the client's ``request_timeout``. The client's call waits on it
    and is kept alive: a handshake-era client hears the proxy's ``notice`` log messages (the server declared
    logging, so it may send them at any time), a 2026-07-28 client that asked for no log messages gets SSE
    comments. The call then succeeds: two sign-ins, the second with the tool's scope."""
    from elicitor.client._http import HttpClientTransport
    from elicitor.proxy import ProxyServer
    from elicitor.proxy._signing import SIGNING_IN

    from .conftest import serving

    async with deployed(jwt=True) as (deployment, url):
        sign_in = SignIn()
        auth = sign_in.auth
        heard: list[object] = []

        async def on_log(level: str, data: object, source: str | None) -> None:
            heard.append(data)

        proxy = ProxyServer(lambda: HttpClientTransport.connect(url, auth=auth), sign_in=auth, keepalive=0.3)
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg, serving(proxy.http_app()) as at:
                tg.start_soon(sign_in.approve, 0.0, 3.0)  # the first sign-in at once, the step-up slowly
                clocks: Clocks = {"request_timeout": 1.0, "handshake_timeout": 30.0}
                async with Client.http(at, protocol=era, on_log=on_log, **clocks) as client:
                    assert (await client.call_tool("admin")).text.startswith("admin done")
    assert len(sign_in.links) == 2 and len(deployment.authorizations) == 2
    assert "mcp:admin" in deployment.authorizations[1]["scope"].split()
    if era == "2025-11-25":
        assert SIGNING_IN in heard
    else:
        assert heard == []  # it asked for none
