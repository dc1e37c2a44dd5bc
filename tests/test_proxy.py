"""The proxy: our client on either era, through a Bridge, to a server on either era (ours, and the official SDK's).

Each cell runs end to end: a form, a confirmation, a decline, and a call cancelled while it waits on the person;
then a client that cannot elicit at all, answered by the proxy's own renderer.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from elicitor import (
    Accepted,
    Client,
    ConnectionClosed,
    Context,
    ElicitationRequest,
    JSONRPCError,
    ScriptedHandler,
    Server,
)
from elicitor.client._handlers import ElicitationHandler
from elicitor.proxy import Bridge, Connect, static
from elicitor.transports import StdioClientTransport, Transport, memory_pair

from .conftest import ROOT

ERAS = ["2025-11-25", "2026-07-28"]


@dataclass
class Name:
    name: str


def make_server() -> tuple[Server, dict[str, Any]]:
    server = Server("upstream", "1.0.0", title="The upstream server")
    seen: dict[str, Any] = {"cancelled": 0}

    @server.tool()
    async def book(ctx: Context) -> str:
        """Asks a name, then a confirmation."""
        name = await ctx.elicit("Your name?", Name)
        if not isinstance(name, Accepted):
            return f"no booking ({name.action})"
        return f"booked for {name.data.name}" if await ctx.confirm("Book it?") else "not confirmed"

    @server.tool()
    async def together(ctx: Context) -> str:
        """Two questions at once."""
        found: dict[str, str] = {}

        async def ask(which: str) -> None:
            outcome = await ctx.elicit(f"Name for {which}?", Name, key=which)
            found[which] = outcome.data.name if isinstance(outcome, Accepted) else "-"

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "left")
            tg.start_soon(ask, "right")
        return f"{found['left']}+{found['right']}"

    @server.tool()
    async def waits(ctx: Context) -> str:
        try:
            await ctx.elicit("Nobody answers this", Name)
        except anyio.get_cancelled_exc_class():
            seen["cancelled"] += 1
            raise
        return "answered"

    @server.tool()
    async def plain(word: str) -> str:
        return word.upper()

    return server, seen


def in_memory(server: Server, tg: anyio.abc.TaskGroup, opened: list[int] | None = None) -> Connect:
    """A :data:`Connect` to ``server`` in this process: each connection a new memory pair served by ``server``."""

    async def connect() -> Transport:
        up_end, server_end = memory_pair()
        tg.start_soon(server.serve, server_end)
        if opened is not None:
            opened.append(1)
        return up_end

    return connect


@asynccontextmanager
async def proxied(
    server: Server,
    upstream: str,
    *,
    ui: ElicitationHandler | None = None,
    elicitation_timeout: float | None = 3600.0,
    **client: Any,
) -> AsyncIterator[Client]:
    """Our client -> Bridge -> ``server``, all in memory; the bridge speaks ``upstream`` to the server."""
    client_end, down_end = memory_pair()
    async with anyio.create_task_group() as tg:
        bridge = Bridge(
            in_memory(server, tg), ui=ui, upstream_protocol=upstream, elicitation_timeout=elicitation_timeout
        )
        tg.start_soon(bridge.serve, down_end)
        async with Client(client_end, **client) as connection:
            yield connection
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("downstream", ERAS)
@pytest.mark.parametrize("upstream", ERAS)
async def test_every_era_pair_bridges_forms_confirmations_and_declines(
    anyio_backend: str, downstream: str, upstream: str
) -> None:
    server, _ = make_server()
    handler = ScriptedHandler(
        [{"name": "Ada"}, {"confirm": True}, "decline"],
        otherwise=lambda request: {"name": request.message.split()[2].rstrip("?")},
    )
    async with proxied(server, upstream, elicitation=handler, protocol=downstream) as client:
        assert client.protocol_version == downstream
        assert client.server_info is not None and client.server_info.name == "upstream"
        with anyio.fail_after(10):
            assert (await client.call_tool("book")).text == "booked for Ada"
            assert (await client.call_tool("book")).text == "no booking (decline)"
            assert (await client.call_tool("together")).text == "left+right"
            assert (await client.call_tool("plain", {"word": "hi"})).text == "HI"
            assert {tool.name for tool in await client.list_tools()} == {"book", "together", "waits", "plain"}
    assert [r.message for r in handler.requests[:3]] == ["Your name?", "Book it?", "Your name?"]


@pytest.mark.parametrize("downstream", ERAS)
@pytest.mark.parametrize("upstream", ERAS)
async def test_the_servers_logs_reach_the_client_on_every_era_pair(
    anyio_backend: str, downstream: str, upstream: str
) -> None:
    """A 2026-07-28 request carries its log level (a server sends no logs without it); a handshake-era connection
    has ``logging/setLevel`` (and a server's own default without it). The proxy asks the server, on the era it
    speaks, for what the client asked on its own; a handshake-era client that set no level gets the server's
    info and above, as it would directly."""
    server = Server("logs", "1")

    @server.tool()
    async def talk(ctx: Context) -> str:
        await ctx.log("debug", "fine detail")
        await ctx.log("warning", "watch out")
        return "said"

    logs: list[str] = []

    async def on_log(level: str, data: Any, logger: str | None) -> None:
        logs.append(str(data))

    level = "info" if downstream == "2025-11-25" else "debug"
    async with proxied(server, upstream, protocol=downstream, on_log=on_log, log_level=level) as client:
        with anyio.fail_after(10):
            assert (await client.call_tool("talk")).text == "said"
            await client.list_tools()  # a notification sent before the result may be handled after it: one more turn
    assert logs == (["watch out"] if downstream == "2025-11-25" else ["fine detail", "watch out"])


@pytest.mark.parametrize("downstream", ERAS)
@pytest.mark.parametrize("upstream", ERAS)
async def test_a_call_cancelled_while_it_waits_is_cancelled_upstream(
    anyio_backend: str, downstream: str, upstream: str
) -> None:
    server, seen = make_server()
    asked = anyio.Event()

    async def person(request: ElicitationRequest) -> Any:
        asked.set()
        await anyio.sleep_forever()

    # A 2026-07-28 client gives up by not coming back: a call the proxy holds open upstream for it (handshake-era
    # server) is cancelled when its time runs out; every other pair cancels upstream at once.
    async with proxied(server, upstream, elicitation=person, protocol=downstream, elicitation_timeout=0.5) as client:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "waits")
                await asked.wait()
                tg.cancel_scope.cancel()
            if upstream == "2025-11-25":  # a 2026-07-28 server has nothing running between rounds to cancel
                while not seen["cancelled"]:
                    await anyio.sleep(0.02)
            assert (await client.call_tool("plain", {"word": "still"})).text == "STILL"


@pytest.mark.parametrize("downstream", ERAS)
@pytest.mark.parametrize("upstream", ERAS)
async def test_a_client_that_cannot_elicit_is_answered_by_the_proxys_renderer(
    anyio_backend: str, downstream: str, upstream: str
) -> None:
    server, _ = make_server()
    ui = ScriptedHandler([{"name": "Lin"}, {"confirm": True}])
    async with proxied(server, upstream, ui=ui, protocol=downstream) as client:
        assert client.elicitation_modes == frozenset()  # this client declares no elicitation
        with anyio.fail_after(10):
            assert (await client.call_tool("book")).text == "booked for Lin"
    assert [r.message for r in ui.requests] == ["Your name?", "Book it?"]
    assert ui.requests[0].server is not None and ui.requests[0].server.name == "upstream"  # who asks is shown


async def test_without_a_renderer_a_client_that_cannot_elicit_gets_what_the_server_says(anyio_backend: str) -> None:
    server, _ = make_server()
    async with proxied(server, "2025-11-25", protocol="2025-11-25") as client:
        with anyio.fail_after(10):
            result = await client.call_tool("book")
    assert result.is_error  # the server's own answer to a client without elicitation, passed through


async def test_a_stale_round_is_refused_clearly(anyio_backend: str) -> None:
    """A 2026-07-28 client's retry for a held call that is gone gets -32602, not a hang."""
    server, _ = make_server()
    async with proxied(server, "2025-11-25", elicitation=ScriptedHandler([]), protocol="2026-07-28") as client:
        first = await client.request("tools/call", {"name": "book", "arguments": {}})
        assert first["resultType"] == "input_required"
        (key,) = first["inputRequests"]
        retry = {"name": "book", "arguments": {}, "requestState": first["requestState"]}
        answered = await client.request("tools/call", {**retry, "inputResponses": {key: {"action": "decline"}}})
        assert answered["content"][0]["text"] == "no booking (decline)"
        with pytest.raises(JSONRPCError) as caught:
            await client.request("tools/call", {**retry, "inputResponses": {key: {"action": "decline"}}})
        assert caught.value.code == -32602


@pytest.mark.parametrize("downstream", ERAS)
@pytest.mark.parametrize("upstream", ["auto", *ERAS])
async def test_the_official_sdk_server_through_the_proxy(
    anyio_backend: str, downstream: str, upstream: str, tmp_path: Path
) -> None:
    """A server we did not write, speaking both eras, over stdio, with a tool of each kind: one that asks by pushing
    (``ctx.elicit``: handshake era only), one through the SDK's resolver (both eras), one that returns
    ``InputRequiredResult`` itself (2026-07-28 only). A default proxy serves all three to a client of either era;
    pinned to one era upstream, the tool that cannot ask there fails with the server's own error. The ledger the
    server writes (one line when ``push_ask`` starts, one when ``rounds_ask`` does its work) shows no tool ran
    twice, whichever era was tried first."""
    if anyio_backend != "asyncio":
        pytest.skip("one backend is enough for a subprocess peer")
    command = [sys.executable, str(ROOT / "tests" / "peers" / "mcp_server.py")]
    ledger = tmp_path / "ledger"
    ledger.write_text("")

    @asynccontextmanager
    async def upstream_connection() -> AsyncIterator[Any]:
        transport = await StdioClientTransport.start(command, env={"ELICITOR_PEER_LEDGER": str(ledger)})
        try:
            yield transport
        finally:
            await transport.aclose()

    client_end, down_end = memory_pair()
    bridge = Bridge(upstream_connection, upstream_protocol=upstream)
    handler = ScriptedHandler(otherwise={"name": "Sam", "age": 41})
    async with anyio.create_task_group() as tg:
        tg.start_soon(bridge.serve, down_end)
        async with Client(client_end, elicitation=handler, protocol=downstream) as client:
            with anyio.fail_after(60):
                assert (await client.call_tool("resolved_ask")).text == "resolved Sam, 41"
                for _ in range(2):  # the second time, the proxy knows which era each tool asks in
                    if upstream == "2026-07-28":  # the SDK cannot push on 2026-07-28: its own error, unchanged
                        with pytest.raises(JSONRPCError) as caught:
                            await client.call_tool("push_ask")
                        assert "back-channel" in caught.value.message
                    else:
                        assert (await client.call_tool("push_ask")).text == "hello Sam, 41"
                    if upstream == "2025-11-25":  # a result the handshake era cannot carry: the SDK's error
                        with pytest.raises(JSONRPCError) as caught:
                            await client.call_tool("rounds_ask")
                        assert "invalid result" in caught.value.message
                    else:
                        assert (await client.call_tool("rounds_ask")).text == "rounds Sam"
        tg.cancel_scope.cancel()
    events = ledger.read_text().splitlines()
    assert events.count("push_ask started") == 2  # twice called, twice started: never again on another era
    assert events.count("rounds_ask done") == (0 if upstream == "2025-11-25" else 2)


@pytest.mark.parametrize("downstream", ERAS)
async def test_elicitor_proxy_command_over_stdio_to_a_stdio_server(anyio_backend: str, downstream: str) -> None:
    """``elicitor proxy python server.py`` started by a host in place of the server: the official SDK's server
    behind it, our client in front, over real pipes."""
    if anyio_backend != "asyncio":
        pytest.skip("one backend is enough for subprocesses")
    server = [sys.executable, str(ROOT / "tests" / "peers" / "mcp_server.py")]
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", *server]
    handler = ScriptedHandler(otherwise={"name": "Kit", "age": 7})
    # Two Python processes start before the first answer (the proxy, then the SDK's server): on a loaded machine
    # that can take longer than the client's default 10 s for its first request.
    async with Client.stdio(command, elicitation=handler, protocol=downstream, probe_timeout=30) as client:
        with anyio.fail_after(30):
            assert client.server_info is not None and client.server_info.name == "official-peer"
            assert (await client.call_tool("resolved_ask")).text == "resolved Kit, 7"


async def test_elicitor_proxy_command_to_an_http_server(anyio_backend: str) -> None:
    """An HTTP server exposed over stdio: our server on uvicorn, the proxy in front of it, a handshake-era client."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    from .conftest import serving

    server, _ = make_server()
    handler = ScriptedHandler([{"name": "Noor"}, {"confirm": True}])
    async with serving(server.http_app()) as url:
        command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", url]
        async with Client.stdio(command, elicitation=handler, protocol="2025-11-25") as client:
            with anyio.fail_after(30):
                assert (await client.call_tool("book")).text == "booked for Noor"


@pytest.mark.parametrize("downstream", ERAS)
async def test_the_proxys_browser_renderer_answers_in_chromium(anyio_backend: str, downstream: str) -> None:
    """A client that declares no elicitation; the proxy asks the person in a page, driven in Chromium."""
    if anyio_backend != "asyncio":
        pytest.skip("Playwright runs on asyncio")
    from elicitor.client import BrowserHandler

    from .test_browser_ui import Person, chromium

    server, _ = make_server()
    async with chromium() as browser:
        person = Person(browser)
        async with (
            BrowserHandler(open_url=person.open, write=lambda text: None) as ui,
            proxied(server, "2025-11-25", ui=ui, protocol=downstream) as client,
            anyio.create_task_group() as tg,
        ):
            results: list[str] = []

            async def call() -> None:
                results.append((await client.call_tool("book")).text)

            tg.start_soon(call)
            page = await person.page(0)
            assert await page.title() == "The upstream server 1.0.0 asks"  # who asks: the server, not the proxy
            await page.get_by_label("name").fill("Ines")
            await page.get_by_role("button", name="Review").click()
            await page.get_by_text("Review your answer").wait_for()
            await page.get_by_role("button", name="Send").click()
            await page.get_by_text("Your answer was sent").wait_for()
            confirm = await person.page(1)
            await confirm.get_by_role("button", name="Yes").click()  # a yes/no question: one press, no review
            await confirm.get_by_text("You answered Yes").wait_for()
        assert results == ["booked for Ines"]


@pytest.mark.parametrize("downstream", ERAS)
@pytest.mark.parametrize("upstream", ERAS)
async def test_clients_over_http_through_the_proxy(anyio_backend: str, downstream: str, upstream: str) -> None:
    """The proxy's HTTP side (ProxyServer.http_app on uvicorn) in front of our server: each client era over HTTP,
    each upstream era, forms and a confirmation; progress of a 2026-07-28 call reaches its own response."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    from elicitor.proxy import ProxyServer

    from .conftest import serving

    server, _ = make_server()
    handler = ScriptedHandler([{"name": "Ravi"}, {"confirm": True}, {"name": "Ravi"}, {"confirm": False}])
    async with anyio.create_task_group() as tg:
        proxy = ProxyServer(in_memory(server, tg), upstream_protocol=upstream)
        async with (
            serving(proxy.http_app()) as url,
            Client.http(url, elicitation=handler, protocol=downstream) as client,
        ):
            with anyio.fail_after(20):
                assert (await client.call_tool("book")).text == "booked for Ravi"
                assert (await client.call_tool("book")).text == "not confirmed"
                assert (await client.call_tool("plain", {"word": "ok"})).text == "OK"
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("downstream", ERAS)
@pytest.mark.parametrize("upstream", ERAS)
async def test_url_mode_across_every_era_pair(anyio_backend: str, downstream: str, upstream: str) -> None:
    """A URL elicitation mid-call, and a tool that needs one first (-32042 on the handshake era, a URL input
    request on 2026-07-28), through the proxy: the person opens the page (which completes it) and the call goes on."""
    from elicitor import Declined, UrlElicitationRequest, UrlElicitationRequired

    server = Server("url-upstream", "1.0")
    link = "https://auth.example.com/connect?e={elicitation_id}"

    @server.tool()
    async def open_page(ctx: Context) -> str:
        return f"action={(await ctx.elicit_url('Sign in', link)).action}"

    @server.tool()
    async def needs_connection(ctx: Context) -> str:
        elicitation = await ctx.url_elicitation("Connect your calendar", link)
        if not elicitation.completed:
            raise UrlElicitationRequired(elicitation)
        return "connected"

    class Person:
        modes = frozenset({"form", "url"})

        def __init__(self) -> None:
            self.seen: list[UrlElicitationRequest] = []

        async def __call__(self, request: ElicitationRequest) -> Any:
            return Declined()

        async def url(self, request: UrlElicitationRequest) -> Any:
            self.seen.append(request)
            assert request.host == "auth.example.com"
            await server.complete_url_elicitation(request.url.rsplit("=", 1)[-1])  # the page, finished
            return Accepted(None)

    person = Person()
    async with proxied(server, upstream, elicitation=person, protocol=downstream) as client:
        with anyio.fail_after(20):
            assert (await client.call_tool("open_page")).text == "action=accept"
            assert (await client.call_tool("needs_connection")).text == "connected"
    assert [r.message for r in person.seen][:2] == ["Sign in", "Connect your calendar"]


DYING_SERVER = """
import os
from elicitor import Context, Server
server = Server("dying", "1")

@server.tool()
async def pid() -> str:
    return str(os.getpid())

@server.tool()
async def wait(ctx: Context) -> str:
    await ctx.elicit("Hold on", {"type": "object", "properties": {"x": {"type": "string"}}})
    return "answered"

server.run()
"""


@pytest.mark.parametrize("downstream", ERAS)
async def test_an_upstream_that_dies_mid_call_ends_the_call_cleanly(anyio_backend: str, downstream: str) -> None:
    """The server behind the proxy is killed while a person looks at its question: the client's call ends with a
    clear error instead of hanging (the proxy stays, and starts the server again for the next call: see
    ``test_proxy_upstream.py``)."""
    if anyio_backend != "asyncio":
        pytest.skip("one backend is enough for subprocesses")
    import os
    import signal

    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", sys.executable, "-c", DYING_SERVER]
    victim: list[int] = []

    async def person(request: ElicitationRequest) -> Any:
        os.kill(victim[0], signal.SIGKILL)
        if downstream == "2025-11-25":
            await anyio.sleep_forever()  # the call must end while the person still looks at the question
        await anyio.sleep(0.5)
        return Accepted({"x": "late"})  # 2026-07-28 holds nothing between rounds: the retry finds the server gone

    with anyio.fail_after(30):
        async with Client.stdio(command, elicitation=person, protocol=downstream) as client:
            victim.append(int((await client.call_tool("pid")).text))
            with pytest.raises((ConnectionClosed, JSONRPCError)):
                await client.call_tool("wait")


async def test_garbage_from_upstream_is_refused_and_the_proxy_keeps_serving(anyio_backend: str) -> None:
    """An upstream that writes lines that are not JSON-RPC between its answers: they are dropped with a warning."""
    server, _ = make_server()
    client_end, down_end = memory_pair()
    up_end, server_end = memory_pair()
    bridge = Bridge(static(up_end))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, server_end)
        tg.start_soon(bridge.serve, down_end)
        async with Client(client_end, elicitation=ScriptedHandler([]), protocol="2025-11-25") as client:
            for junk in (b"not json", b"[1,2]", b'{"jsonrpc":"2.0","id":99999,"result":{}}', b'{"jsonrpc":"2.0"}'):
                await server_end.send(junk)  # as if the server wrote it
            with anyio.fail_after(10):
                assert (await client.call_tool("plain", {"word": "fine"})).text == "FINE"
        tg.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("mode", "upstream"), [("legacy", "2026-07-28"), ("2026-07-28", "2025-11-25"), ("auto", "auto")]
)
async def test_the_official_sdk_client_through_the_proxy(anyio_backend: str, mode: str, upstream: str) -> None:
    """A client we did not write (the official Python SDK's), through ``elicitor proxy`` over stdio, with the eras
    bridged both ways: its elicitation callback answers forms pushed or asked in rounds."""
    if anyio_backend != "asyncio":
        pytest.skip("one backend is enough for subprocesses")
    import mcp_types as types
    from mcp import Client as McpClient
    from mcp.client.stdio import StdioServerParameters

    everything = str(ROOT / "examples" / "everything_server.py")
    arguments = ["-m", "elicitor", "proxy", "--ui", "none", "--upstream-protocol", upstream, sys.executable, everything]
    proxy = StdioServerParameters(command=sys.executable, args=arguments, cwd=str(ROOT))
    asked: list[str] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        content: dict[str, Any] = {"username": "sdk", "email": "sdk@example.com", "name": "Ada"}
        return types.ElicitResult(action="accept", content=content)

    with anyio.fail_after(60):
        async with McpClient(proxy, elicitation_callback=callback, mode=mode) as client:
            result = await client.call_tool("test_elicitation", {"message": "Who are you?"})
            assert "action=accept" in result.content[0].text  # type: ignore[union-attr]
            result = await client.call_tool("test_input_required_result_elicitation", {})
            assert result.content[0].text == "Hello, Ada!"  # type: ignore[union-attr]
    assert asked[0] == "Who are you?"


@pytest.mark.parametrize("downstream", ERAS)
async def test_the_typescript_sdk_server_through_the_proxy(anyio_backend: str, downstream: str) -> None:
    """A server we did not write in another language: the TypeScript SDK's, which pushes elicitation/create
    mid-call (handshake era only); a 2026-07-28 client gets it as a round through the proxy."""
    if anyio_backend != "asyncio":
        pytest.skip("one backend is enough for subprocesses")
    from .test_interop_ts import SDK, node

    script = SDK / "ts_server.mjs"
    script.write_text((ROOT / "tests" / "peers" / "ts_server.mjs").read_text())
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", node(), str(script)]
    handler = ScriptedHandler([{"name": "Yuki"}])
    with anyio.fail_after(60):
        async with Client.stdio(command, elicitation=handler, protocol=downstream) as client:
            assert client.server_info is not None and client.server_info.name == "ts-peer-server"
            assert (await client.call_tool("ask")).text == "hello Yuki"


@pytest.mark.parametrize("upstream", ERAS)
async def test_a_question_the_client_never_answers_is_dismissed_after_its_time(
    anyio_backend: str, upstream: str
) -> None:
    """A handshake-era client that never answers what the proxy relays: after ``elicitation_timeout`` the client is
    told and the server hears a dismissal, so neither side waits forever."""
    server, _ = make_server()

    async def never(request: ElicitationRequest) -> Any:
        await anyio.sleep_forever()

    async with proxied(server, upstream, elicitation=never, protocol="2025-11-25", elicitation_timeout=0.3) as client:
        with anyio.fail_after(10):
            assert (await client.call_tool("book")).text == "no booking (cancel)"


async def test_ui_terminal_without_a_controlling_terminal_asks_in_the_browser(
    anyio_backend: str, tmp_path: Path
) -> None:
    """``elicitor proxy --ui terminal`` started the way the official SDK starts servers (a new session: no
    controlling terminal): it says so on stderr and asks the person in the browser instead, where they answer in
    Chromium; the SDK's client, which declares no elicitation, gets the tool's result."""
    if anyio_backend != "asyncio":
        pytest.skip("Playwright runs on asyncio")
    import os
    import shlex

    from mcp import Client as McpClient
    from mcp.client.stdio import StdioServerParameters

    from .test_browser_ui import chromium

    links = tmp_path / "links"
    links.write_text("")
    errors = tmp_path / "stderr"
    server = f"{shlex.quote(sys.executable)} {shlex.quote(str(ROOT / 'tests' / 'peers' / 'mcp_server.py'))}"
    line = f"exec {shlex.quote(sys.executable)} -m elicitor proxy --ui terminal {server} 2>{shlex.quote(str(errors))}"
    env = {"BROWSER": f"sh -c 'echo %s >> {links}'", "PATH": os.environ["PATH"]}
    proxy = StdioServerParameters(command="sh", args=["-c", line], cwd=str(ROOT), env=env)
    async with chromium() as browser, anyio.create_task_group() as tg:
        results: list[str] = []

        async def call() -> None:
            async with McpClient(proxy, mode="legacy") as client:
                result = await client.call_tool("push_ask", {})
                results.append(result.content[0].text)  # type: ignore[union-attr]

        tg.start_soon(call)
        with anyio.fail_after(60):
            while not links.read_text().strip():
                await anyio.sleep(0.1)
            page = await browser.new_page()
            await page.goto(links.read_text().split()[0])
            assert await page.title() == "official-peer asks"  # who asks: the server, not the proxy
            await page.get_by_label("name").fill("Ines")
            await page.get_by_role("button", name="Review").click()
            await page.get_by_role("button", name="Send").click()
            await page.get_by_text("Your answer was sent").wait_for()
            while not results:
                await anyio.sleep(0.05)
    assert results == ["hello Ines, 30"]
    assert "no controlling terminal" in errors.read_text()


@pytest.mark.parametrize("downstream", ERAS)
@pytest.mark.parametrize("upstream", ["auto", *ERAS])
async def test_url_steps_a_client_cannot_open_are_asked_by_the_proxys_renderer(
    anyio_backend: str, downstream: str, upstream: str
) -> None:
    """A client that declares no elicitation, a tool that asks a URL step mid-call and one that needs it first
    (-32042 on the handshake era): the proxy's renderer asks the person, nothing reaches the client, and the call
    goes on as soon as the person says they are done."""
    from elicitor import UrlElicitationRequest, UrlElicitationRequired

    server = Server("url-upstream", "1.0")
    link = "https://auth.example.com/connect?e={elicitation_id}"

    @server.tool()
    async def open_page(ctx: Context) -> str:
        return f"action={(await ctx.elicit_url('Sign in', link)).action}"

    @server.tool()
    async def needs_connection(ctx: Context) -> str:
        elicitation = await ctx.url_elicitation("Connect your calendar", link)
        if not elicitation.completed:
            raise UrlElicitationRequired(elicitation)
        return "connected"

    class Person:
        modes = frozenset({"form", "url"})

        def __init__(self) -> None:
            self.seen: list[str] = []

        async def __call__(self, request: ElicitationRequest) -> Any:
            raise AssertionError("no form in this test")

        async def url(self, request: UrlElicitationRequest) -> Any:
            self.seen.append(request.message)
            await server.complete_url_elicitation(request.url.rsplit("=", 1)[-1])  # the page, finished
            return Accepted(None)

    person = Person()
    async with proxied(server, upstream, ui=person, protocol=downstream) as client:
        assert client.elicitation_modes == frozenset()
        with anyio.fail_after(20):
            assert (await client.call_tool("open_page")).text == "action=accept"
            assert (await client.call_tool("needs_connection")).text == "connected"
    assert person.seen == ["Sign in", "Connect your calendar"]


EVERYTHING = ROOT / ".cache" / "server-everything-2026.8.31" / "node_modules" / "@modelcontextprotocol"


async def test_a_task_required_tool_of_server_everything_through_the_proxy(anyio_backend: str) -> None:
    """The reference server-everything's ``simulate-research-query`` runs only as a 2025-11-25 task and asks its
    question on the task's ``tasks/result`` stream. A 2026-07-28 client cannot create that task itself: the
    proxy learns from the server's tool list that the tool requires a task (the server refused the plain call
    without running it), creates the task, follows it, and asks the question in the client's rounds."""
    if anyio_backend != "asyncio":
        pytest.skip("one backend is enough for subprocesses")
    from .test_interop_ts import node

    script = EVERYTHING / "server-everything" / "dist" / "index.js"
    if not script.exists():
        pytest.skip("server-everything is not installed: run `make test` (or scripts/conformance.py --install-only)")
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", node(), str(script), "stdio"]
    handler = ScriptedHandler([{"interpretation": "historical"}])
    with anyio.fail_after(90):
        async with Client.stdio(command, elicitation=handler, protocol="2026-07-28", probe_timeout=30) as client:
            result = await client.call_tool("simulate-research-query", {"topic": "tea", "ambiguous": True})
    assert not result.is_error, result.text
    assert "historical" in result.text
    assert [r.message[:24] for r in handler.requests] == ['The research query "tea"']


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_official_sdk_client_and_server_through_a_default_proxy(anyio_backend: str, mode: str) -> None:
    """Neither side ours: the official SDK's client, of either era, through a plain ``elicitor proxy`` to the
    official SDK's server, which speaks both eras: the tool that pushes and the tool that asks in rounds both
    answer."""
    if anyio_backend != "asyncio":
        pytest.skip("one backend is enough for subprocesses")
    import mcp_types as types
    from mcp import Client as McpClient
    from mcp.client.stdio import StdioServerParameters

    server = str(ROOT / "tests" / "peers" / "mcp_server.py")
    proxy = StdioServerParameters(
        command=sys.executable, args=["-m", "elicitor", "proxy", "--ui", "none", sys.executable, server], cwd=str(ROOT)
    )
    asked: list[str] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada", "age": 36})

    with anyio.fail_after(90):
        async with McpClient(proxy, elicitation_callback=callback, mode=mode) as client:
            pushed = await client.call_tool("push_ask", {})
            assert pushed.content[0].text == "hello Ada, 36"  # type: ignore[union-attr]
            rounds = await client.call_tool("rounds_ask", {})
            assert rounds.content[0].text == "rounds Ada"  # type: ignore[union-attr]
    assert asked == ["Who are you?", "Who are you (rounds)?"]


@pytest.mark.parametrize("downstream", ERAS)
async def test_a_fastmcp_server_through_a_default_proxy(anyio_backend: str, downstream: str) -> None:
    """FastMCP's ``ctx.elicit`` asks by pushing (handshake era only): through a plain ``elicitor proxy`` our client
    of either era gets its confirmation and its titled choice."""
    if anyio_backend != "asyncio":
        pytest.skip("one backend is enough for subprocesses")
    server = [sys.executable, str(ROOT / "tests" / "peers" / "fastmcp_server.py")]
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", *server]
    handler = ScriptedHandler([{"value": True}, {"value": "pro"}])
    with anyio.fail_after(90):
        async with Client.stdio(command, elicitation=handler, protocol=downstream, probe_timeout=30) as client:
            assert (await client.call_tool("confirm_delete")).text == "deleted"
            assert (await client.call_tool("tier")).text == "accept pro"
    assert [r.message for r in handler.requests] == ["Delete the file?", "Which tier?"]


@pytest.mark.parametrize("downstream", ERAS)
async def test_a_form_outside_the_subset_is_refused_to_the_server_with_its_reason(
    anyio_backend: str, downstream: str
) -> None:
    """A handshake-era server pushes a form with a nested object. Without the proxy our client answers -32602
    saying why; through it the server hears the same, never a "cancel" the person did not choose: a handshake-era
    client's error goes upstream as it is, and for a 2026-07-28 client (whose answer would be an input response,
    which cannot carry an error) the proxy refuses the request itself. Nobody is asked."""
    from .test_waits import RawPeer, raw_server

    nested = {"type": "object", "properties": {"name": {"type": "object"}}}
    replies: list[dict[str, Any]] = []

    async def pushing(peer: RawPeer, message: dict[str, Any]) -> None:
        ask = {"message": "Name?", "requestedSchema": nested}
        await peer.send({"jsonrpc": "2.0", "id": "q", "method": "elicitation/create", "params": ask})
        replies.append(await peer.reply("q"))
        content = [{"type": "text", "text": "done"}]
        await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": content}})

    handler = ScriptedHandler([{"name": "never asked"}])
    client_end, down_end = memory_pair()
    async with raw_server(pushing) as (transport, _), anyio.create_task_group() as tg:
        tg.start_soon(Bridge(static(transport), upstream_protocol="2025-11-25").serve, down_end)
        async with Client(client_end, elicitation=handler, protocol=downstream) as client:
            with anyio.fail_after(10):
                assert (await client.call_tool("anything")).text == "done"
        tg.cancel_scope.cancel()
    assert handler.requests == []
    error = replies[0]["error"]
    assert error["code"] == -32602
    assert "nested objects are not allowed" in error["message"]


@pytest.mark.parametrize("downstream", ERAS)
async def test_requests_the_client_did_not_declare_are_refused_to_the_server(
    anyio_backend: str, downstream: str
) -> None:
    """A handshake-era server pushes sampling (not declared by the client) and a method no client knows. The
    server hears -32601 for each, from our client or, for a 2026-07-28 client (which has only input requests, and
    would take an undeclared one for the server's protocol error and end its call), from the proxy; the call
    goes on."""
    from .test_waits import RawPeer, raw_server

    replies: list[dict[str, Any]] = []

    async def pushing(peer: RawPeer, message: dict[str, Any]) -> None:
        sampling = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}
        for index, (method, params) in enumerate([("sampling/createMessage", sampling), ("weird/thing", {})]):
            await peer.send({"jsonrpc": "2.0", "id": f"q{index}", "method": method, "params": params})
            replies.append(await peer.reply(f"q{index}"))
        content = [{"type": "text", "text": "done"}]
        await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": content}})

    client_end, down_end = memory_pair()
    async with raw_server(pushing) as (transport, _), anyio.create_task_group() as tg:
        tg.start_soon(Bridge(static(transport), upstream_protocol="2025-11-25").serve, down_end)
        async with Client(client_end, elicitation=ScriptedHandler([]), protocol=downstream) as client:
            with anyio.fail_after(10):
                assert (await client.call_tool("anything")).text == "done"
        tg.cancel_scope.cancel()
    assert [reply["error"]["code"] for reply in replies] == [-32601, -32601]


async def test_a_2026_server_asking_again_what_the_client_refused_ends_the_call_saying_why(anyio_backend: str) -> None:
    """A 2026-07-28 server asks a handshake-era client, through the proxy, for a form outside the subset; the
    client refuses it (-32602), the server hears ``cancel`` (an input response cannot be an error) and asks the
    same again. The proxy ends the call on that second round with the client's reason, instead of relaying the
    refusal until its round limit."""
    from .test_waits import RawPeer, raw_server

    nested = {"type": "object", "properties": {"name": {"type": "object"}}}
    question = {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": nested}}
    calls: list[dict[str, Any]] = []

    async def asks_forever(peer: RawPeer, message: dict[str, Any]) -> None:
        calls.append(message)
        result = {"resultType": "input_required", "inputRequests": {"who": question}}
        await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    handler = ScriptedHandler([])
    client_end, down_end = memory_pair()
    async with raw_server(asks_forever, stateless=True) as (transport, _), anyio.create_task_group() as tg:
        tg.start_soon(Bridge(static(transport), upstream_protocol="2026-07-28").serve, down_end)
        async with Client(client_end, elicitation=handler, protocol="2025-11-25") as client:
            with anyio.fail_after(10), pytest.raises(JSONRPCError, match="asked again for input the client") as e:
                await client.call_tool("anything")
        tg.cancel_scope.cancel()
    assert "nested objects are not allowed" in e.value.message
    assert len(calls) == 2 and calls[1]["params"]["inputResponses"] == {"who": {"action": "cancel"}}
    assert handler.requests == []


@pytest.mark.parametrize("through", ["direct", "proxy"])
async def test_a_client_that_never_opens_the_get_stream_gets_its_question_on_the_calls_stream(
    anyio_backend: str, through: str
) -> None:
    """A 2025-11-25 client over Streamable HTTP need not open the standalone GET stream (a MAY): a question a tool
    asks comes on its call's own POST stream (what the server sends about a request SHOULD relate to it), directly
    and through ``elicitor proxy --listen``, whose upstream (stdio here) says nothing about which call a pushed
    question belongs to: while one call of the client is in flight, it is that one."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    import httpx2 as httpx

    from elicitor.proxy import ProxyServer

    from .conftest import serving
    from .test_replicas import events, open_session, rpc

    server = Server("asks", "1")

    @server.tool()
    async def ask(ctx: Context) -> str:
        outcome = await ctx.elicit("Name?", Name)
        return outcome.data.name if isinstance(outcome, Accepted) else outcome.action

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            app = server.http_app() if through == "direct" else ProxyServer(in_memory(server, tg)).http_app()
            async with serving(app) as url, httpx.AsyncClient(timeout=20) as http:
                headers = await open_session(http, url)
                call = rpc("tools/call", {"name": "ask"}, id=2)
                async with http.stream("POST", url, json=call, headers=headers) as r:
                    async for _, message in events(r):
                        if message.get("method") == "elicitation/create":
                            answer = {"jsonrpc": "2.0", "id": message["id"],
                                      "result": {"action": "accept", "content": {"name": "Ada"}}}  # fmt: skip
                            assert (await http.post(url, json=answer, headers=headers)).status_code == 202
                        elif message.get("id") == 2:
                            assert message["result"]["content"][0]["text"] == "Ada"
                            break
            tg.cancel_scope.cancel()
