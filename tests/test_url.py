"""URL-mode elicitation on every revision: asking, -32042 and its 2026-07-28 form, completion, safety."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.from_thread
import pytest

from elicitor import (
    Accepted,
    Cancelled,
    Client,
    Context,
    Declined,
    ElicitationRequest,
    Implementation,
    JSONRPCError,
    ScriptedHandler,
    Server,
    TerminalHandler,
    TooManyRounds,
    UnsafeUrl,
    UrlElicitationRequest,
    UrlElicitationRequired,
)
from elicitor.client import url_warnings
from elicitor.server import check_url
from elicitor.transports import memory_pair

from .conftest import connected, scripted_terminal

pytestmark = pytest.mark.anyio

server = Server("url-server", "1.0")
CONNECT = "https://auth.example.com/connect?e={elicitation_id}"


@server.tool()
async def open_page(ctx: Context) -> str:
    outcome = await ctx.elicit_url("Please sign in to the example service", CONNECT)
    return f"action={outcome.action}"


@server.tool()
async def needs_connection(ctx: Context) -> str:
    link = await ctx.url_elicitation("Connect your calendar", CONNECT)
    if not link.completed:
        raise UrlElicitationRequired(link)
    return "connected"


class Person:
    """A URL handler that 'completes' the page it is shown (or not), like a person in a browser would."""

    modes = frozenset({"form", "url"})

    def __init__(self, *, complete: bool = True, answer: str = "accept") -> None:
        self.complete = complete
        self.answer = answer
        self.seen: list[UrlElicitationRequest] = []

    async def __call__(self, request: ElicitationRequest) -> Any:
        return Declined()

    async def url(self, request: UrlElicitationRequest) -> Any:
        self.seen.append(request)
        if self.answer != "accept":
            return Declined()
        if self.complete:
            elicitation_id = request.url.rsplit("=", 1)[-1]
            assert await server.complete_url_elicitation(elicitation_id)
        return Accepted(None)


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_elicit_url_accept_and_decline(anyio_backend: str, revision: str) -> None:
    handler = ScriptedHandler(["accept", "decline"], modes=frozenset({"form", "url"}))
    async with connected(server, elicitation=handler, protocol=revision) as client:
        assert (await client.call_tool("open_page")).text == "action=accept"
        assert (await client.call_tool("open_page")).text == "action=decline"
    request = handler.url_requests[0]
    assert request.message == "Please sign in to the example service"
    assert request.host == "auth.example.com"
    assert request.url.startswith("https://auth.example.com/connect?e=")
    assert len(request.url.rsplit("=", 1)[-1]) >= 32  # an unguessable id in place of {elicitation_id}
    assert request.warnings == ()
    assert (request.elicitation_id is None) == (revision == "2026-07-28")


async def test_url_mode_is_declared_only_by_handlers_that_take_it(anyio_backend: str) -> None:
    for revision in ("2025-06-18", "2025-11-25"):
        async with connected(server, elicitation=ScriptedHandler(), protocol=revision) as client:
            result = await client.call_tool("open_page")
            assert result.is_error
            assert "URL" in result.text
    async with connected(server, elicitation=ScriptedHandler(), protocol="2026-07-28") as client:
        with pytest.raises(JSONRPCError) as info:
            await client.call_tool("open_page")
        assert info.value.data == {"requiredCapabilities": {"elicitation": {"url": {}}}}


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_url_elicitation_required_round_trip(anyio_backend: str, revision: str) -> None:
    person = Person()
    async with connected(server, elicitation=person, protocol=revision) as client:
        assert (await client.call_tool("needs_connection")).text == "connected"
        assert (await client.call_tool("needs_connection")).text == "connected"
    # 2025-11-25: on the same connection the question is answered already, no new link. 2026-07-28 keeps no
    # connection: each call stands alone (a tool remembers what it needs, e.g. a stored credential).
    assert len(person.seen) == (1 if revision == "2025-11-25" else 2)


async def test_minus_32042_on_the_wire_and_a_person_who_declines(anyio_backend: str) -> None:
    person = Person(answer="decline")
    async with connected(server, elicitation=person, protocol="2025-11-25") as client:
        with pytest.raises(JSONRPCError) as info:  # the raw request: what the server sends
            await client.request("tools/call", {"name": "needs_connection", "arguments": {}})
        # call_tool shows the link; the person declines: a tool error, as the server makes it on 2026-07-28.
        declined = await client.call_tool("needs_connection")
    assert declined.is_error
    refused = "Tool 'needs_connection' needs a step the person declined or cancelled: Connect your calendar"
    assert declined.text == refused
    assert [request.message for request in person.seen] == ["Connect your calendar"]
    assert info.value.code == -32042
    data: Any = info.value.data
    (elicitation,) = data["elicitations"]
    assert elicitation["mode"] == "url"
    assert elicitation["message"] == "Connect your calendar"
    assert elicitation["url"].endswith(elicitation["elicitationId"])


async def test_asking_again_for_what_was_not_completed_is_a_loop(anyio_backend: str) -> None:
    class SaysDone(Person):
        async def wait_done(self, request: UrlElicitationRequest) -> None:
            return  # the person says "done" without finishing in the browser

    async with connected(server, elicitation=SaysDone(complete=False), protocol="2025-11-25") as client:
        with pytest.raises(TooManyRounds, match="loop"):
            await client.call_tool("needs_connection")


async def test_completion_reaches_only_the_initiating_client(anyio_backend: str) -> None:
    waiting: dict[str, Client] = {}
    shown: list[tuple[str, str]] = []

    class Shows(Person):
        def __init__(self, name: str) -> None:
            super().__init__(complete=False)
            self.name = name

        async def url(self, request: UrlElicitationRequest) -> Any:
            shown.append((self.name, request.elicitation_id or ""))
            return Accepted(None)

    async with anyio.create_task_group() as tg:
        ends = {name: memory_pair() for name in ("a", "b")}
        for server_end, _ in ends.values():
            tg.start_soon(server.serve, server_end)
        async with (
            Client(ends["a"][1], elicitation=Shows("a"), protocol="2025-11-25") as a,
            Client(ends["b"][1], elicitation=Shows("b"), protocol="2025-11-25") as b,
        ):
            waiting.update(a=a, b=b)
            results: dict[str, str] = {}

            async def call(name: str) -> None:
                results[name] = (await waiting[name].call_tool("needs_connection")).text

            async with anyio.create_task_group() as calls:
                calls.start_soon(call, "a")
                calls.start_soon(call, "b")
                with anyio.fail_after(5):
                    while len(shown) < 2:
                        await anyio.sleep(0.01)
                ids = dict(shown)
                assert ids["a"] != ids["b"]
                assert await server.complete_url_elicitation(ids["a"])
                with anyio.fail_after(5):
                    while "a" not in results:
                        await anyio.sleep(0.01)
                assert "b" not in results  # b's client did not hear a's completion
                assert not await server.complete_url_elicitation(ids["a"])  # replayed: refused
                assert not await server.complete_url_elicitation("forged-id")  # forged: refused
                assert await server.complete_url_elicitation(ids["b"])
        tg.cancel_scope.cancel()
    assert results == {"a": "connected", "b": "connected"}


async def test_completion_by_another_user_is_refused(anyio_backend: str) -> None:
    registry = server.url_elicitations
    link = await registry.new("Connect", CONNECT, principal="alice")
    assert not await registry.complete(link.id, principal="mallory")
    assert not await registry.complete(link.id)  # nobody signed in
    assert await registry.complete(link.id, principal="alice")
    assert not link.completed  # a snapshot: read it again to see the change
    now = await registry.get(link.id)
    assert now is not None and now.completed
    assert not await registry.complete(link.id, principal="alice")  # once only


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://example.com/x", "absolute http"),
        ("/relative", "absolute http"),
        ("https://user:pw@example.com/", "credentials"),
        ("http://example.com/", "use https"),
    ],
)
def test_unsafe_urls_are_refused(url: str, reason: str) -> None:
    with pytest.raises(UnsafeUrl, match=reason):
        check_url(url)


def test_http_is_fine_on_loopback_or_when_allowed() -> None:
    check_url("http://localhost:8000/fixture")
    check_url("http://127.0.0.1/x")
    check_url("http://example.com/", allow_http=True)


@pytest.mark.parametrize(
    ("url", "warning"),
    [
        ("https://xn--pple-43d.com/login", "Punycode"),
        ("https://аpple.com/login", "Punycode"),
        ("https://93.184.216.34/", "IP address"),
        ("http://example.com/", "not encrypted"),
        ("https://example.com@evil.example/", "user name or password"),
        ("https://example.com:8443/", "unusual port"),
        ("javascript:alert(1)", "not a web address"),
    ],
)
def test_client_warns_about_suspicious_urls(url: str, warning: str) -> None:
    assert any(warning in str(text) for text in url_warnings(url)), url_warnings(url)


def test_plain_https_urls_raise_no_warning() -> None:
    assert url_warnings("https://calendar.example.com/connect?x=1") == []


def terminal_person(lines: list[str]) -> tuple[TerminalHandler, list[str], list[str]]:
    """A scripted terminal whose browser opener records what it was asked to open."""
    opened: list[str] = []

    def open_url(url: str) -> bool:
        opened.append(url)
        return True

    handler, shown = scripted_terminal(lines, open_url=open_url)
    return handler, shown, opened


SUSPICIOUS = UrlElicitationRequest(
    message="Sign in",
    url="https://example.com@xn--pple-43d.com:8443/login?e=1",
    server=Implementation(name="desk", version="1"),
    elicitation_id="e1",
    warnings=tuple(url_warnings("https://example.com@xn--pple-43d.com:8443/login?e=1")),
)


async def test_terminal_opens_a_url_only_after_an_explicit_yes(anyio_backend: str) -> None:
    handler, shown, opened = terminal_person(["", "maybe", "y"])
    assert handler.modes == frozenset({"form", "url"})
    assert isinstance(await handler.url(SUSPICIOUS), Accepted)
    assert opened == [SUSPICIOUS.url]  # after two prompts that were not a yes
    text = "\n".join(shown)
    assert SUSPICIOUS.url in text  # the full URL, untruncated
    assert "Host: xn--pple-43d.com" in text  # the real host, set apart from the decoy before the "@"
    assert "desk 1 asks" in text
    for warning in SUSPICIOUS.warnings:
        assert str(warning) in text


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://pay.example.com/x", "pay.example.com"),
        ("https://EVIL.example/x", "EVIL.example"),  # highlighted as written
        ("https://evil.example@evil.example.bank.com/", "evil.example.bank.com"),  # not the decoy in the user info
        ("https://a.com@a.com.evil.net:8443/a.com", "a.com.evil.net"),
        ("http://[::1]:8080/x", "::1"),
    ],
)
def test_the_highlighted_host_is_the_real_one(url: str, host: str) -> None:
    request = UrlElicitationRequest.from_params({"message": "?", "url": url}, None)
    span = request.host_span
    assert span is not None and url[span[0] : span[1]] == host


@pytest.mark.parametrize(
    ("url", "openable"),
    [("https://a.example/", True), ("http://127.0.0.1:9/", True), ("file:///etc/passwd", False),
     ("javascript:alert(1)", False), ("ms-settings:privacy", False), ("https:///nohost", False), ("", False)],
)  # fmt: skip
def test_only_web_addresses_are_offered_for_opening(url: str, openable: bool) -> None:
    assert UrlElicitationRequest.from_params({"message": "?", "url": url}, None).openable is openable


async def test_the_terminal_never_opens_what_is_not_a_web_address(anyio_backend: str) -> None:
    handler, shown, opened = terminal_person(["y", "yes", "n"])
    request = UrlElicitationRequest.from_params({"message": "Look", "url": "file:///etc/passwd"}, None)
    assert await handler.url(request) == Declined()
    assert opened == []
    assert "This is not a web address: it will not be opened from here." in "\n".join(shown)


@pytest.mark.parametrize(("line", "outcome"), [("n", Declined), ("c", Cancelled), (None, Cancelled)])
async def test_terminal_declining_or_cancelling_opens_nothing(
    anyio_backend: str, line: str | None, outcome: type
) -> None:
    handler, _, opened = terminal_person([line] if line is not None else [])
    assert isinstance(await handler.url(SUSPICIOUS), outcome)
    assert opened == []


async def test_terminal_url_handler_over_a_real_session(anyio_backend: str) -> None:
    handler, _, opened = terminal_person(["y", ""])
    async with connected(server, elicitation=handler, protocol="2025-11-25") as client:
        assert client.elicitation_modes == frozenset({"form", "url"})
        with anyio.fail_after(5):
            # The person opens the page, then presses Enter; no completion notification ever comes.
            with pytest.raises(TooManyRounds, match="loop"):
                await client.call_tool("needs_connection")
    assert len(opened) == 1


@pytest.mark.parametrize(
    ("revision", "says", "never"),
    [
        ("2025-11-25", "Waiting for the server to see that you are done", "retry now"),
        ("2026-07-28", "Press Enter when you have finished in the browser to retry now", "Waiting for the server"),
    ],
)
async def test_the_terminal_says_what_ends_the_wait_on_each_revision(
    anyio_backend: str, revision: str, says: str, never: str
) -> None:
    """2025-11-25 has a completion notice to wait for; 2026-07-28 has none (its changelog removes it), so there
    the person is told that Enter retries now, never that the server will notice by itself."""
    shown: list[str] = []
    opened: list[str] = []

    def read(prompt: str) -> str:
        shown.append(prompt)
        if prompt.startswith("Open it in your browser?"):
            return "y"
        # The wait for Enter: the person finishes on the page, then presses Enter.
        assert anyio.from_thread.run(server.complete_url_elicitation, opened[-1].rsplit("=", 1)[-1])
        return ""

    def open_url(url: str) -> bool:
        opened.append(url)
        return True

    handler = TerminalHandler(read_line=read, write=shown.append, open_url=open_url)
    async with connected(server, elicitation=handler, protocol=revision) as client:
        with anyio.fail_after(10):
            assert (await client.call_tool("needs_connection")).text == "connected"
    waits = [line for line in shown if says in line]
    assert len(waits) == 1, shown
    assert not any(never in line for line in shown)


async def test_terminal_handler_can_leave_url_mode_out(anyio_backend: str) -> None:
    handler = TerminalHandler(read_line=lambda p: "", write=lambda t: None, url_mode=False)
    async with connected(server, elicitation=handler, protocol="2025-11-25") as client:
        assert client.elicitation_modes == frozenset({"form"})


async def test_2026_asks_again_each_round_until_the_interaction_is_complete(anyio_backend: str) -> None:
    class SlowPerson(Person):
        """Opens the page each time, finishes only on the third visit."""

        async def url(self, request: UrlElicitationRequest) -> Any:
            self.seen.append(request)
            if len(self.seen) == 3:
                assert await server.complete_url_elicitation(request.url.rsplit("=", 1)[-1])
            return Accepted(None)

    person = SlowPerson()
    async with connected(server, elicitation=person, protocol="2026-07-28") as client:
        with anyio.fail_after(5):
            assert (await client.call_tool("needs_connection")).text == "connected"
    assert len(person.seen) == 3
    assert len({request.url for request in person.seen}) == 1  # the same link every round


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn serves on asyncio
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_url_required_round_trip_over_http(anyio_backend: str, revision: str) -> None:
    """The example server's fixture over real Streamable HTTP: the person's browser is a plain GET of the page."""
    import sys

    import httpx2

    from .conftest import ROOT, serving

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from everything_server import fixture_pages
        from everything_server import server as example
    finally:
        sys.path.pop(0)
    opened: list[str] = []

    class Browser(Person):
        async def url(self, request: UrlElicitationRequest) -> Any:
            opened.append(request.url)
            elicitation_id = request.url.rsplit("/", 1)[-1]
            async with httpx2.AsyncClient() as browser:
                page = await browser.get(f"{base}/fixture/complete/{elicitation_id}")
            assert page.status_code == 200
            return Accepted(None)

    async with serving(example.http_app(fallback=fixture_pages)) as url:
        base = url.removesuffix("/mcp")
        async with Client.http(url, elicitation=Browser(), protocol=revision) as client:
            with anyio.fail_after(10):
                result = await client.call_tool("test_elicitation_url_required")
    assert result.text == "connected: the URL elicitation was completed"
    assert len(opened) == 1


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_http_binds_sessions_and_url_elicitations_to_the_authenticated_user(
    anyio_backend: str, revision: str
) -> None:
    """``HttpApp(principal=...)``: whoever the authentication in front says made the request owns what it starts."""
    import httpx2

    from .conftest import serving

    def user(scope: dict[str, Any]) -> str | None:  # stands in for real authentication middleware
        for name, value in scope["headers"]:
            if name == b"x-test-user":
                return str(value.decode())
        return None

    ids: list[str] = []

    class Remembers(Person):
        async def url(self, request: UrlElicitationRequest) -> Any:
            ids.append(request.url.rsplit("=", 1)[-1])
            return Declined()

    async with serving(server.http_app(principal=user)) as url:
        alice = {"x-test-user": "alice"}
        async with Client.http(url, headers=alice, elicitation=Remembers(), protocol=revision) as client:
            declined = await client.call_tool("needs_connection")  # declined: the call ends, once, as a tool error
            assert declined.is_error and "declined" in declined.text
            assert not await server.complete_url_elicitation(ids[0], principal="bob")
            assert await server.complete_url_elicitation(ids[0], principal="alice")
        if revision == "2025-11-25":
            accept = {"accept": "application/json, text/event-stream", "mcp-protocol-version": revision}
            me = {"name": "t", "version": "1"}
            hello = {
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": revision, "capabilities": {}, "clientInfo": me},
            }  # fmt: skip
            async with httpx2.AsyncClient() as web:
                started = await web.post(url, json=hello, headers={**accept, **alice})
                session = {"mcp-session-id": started.headers["mcp-session-id"]}
                listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
                stolen = await web.post(url, json=listing, headers={**accept, **session, "x-test-user": "bob"})
                assert stolen.status_code == 404  # another user's session does not exist for bob
                owned = await web.post(url, json=listing, headers={**accept, **session, **alice})
                assert owned.status_code == 200


async def test_elicitation_limit_declines_the_excess_without_asking(anyio_backend: str) -> None:
    limited = Server("asks-in-a-loop", "1")

    @limited.tool()
    async def pester(ctx: Context) -> str:
        actions = [(await ctx.elicit(f"Question {i}?", bool, key=f"q{i}")).action for i in range(5)]
        return ",".join(actions)

    handler = ScriptedHandler([{"value": True}] * 5)
    async with connected(limited, elicitation=handler, elicitation_limit=(3, 60.0)) as client:
        assert (await client.call_tool("pester")).text == "accept,accept,accept,decline,decline"
    assert len(handler.requests) == 3  # the person saw only the first three

    async def unused() -> Any:
        raise AssertionError("never connected")

    with pytest.raises(ValueError, match="elicitation_limit"):
        Client(unused, elicitation=handler, elicitation_limit=(0, 1.0))


async def test_terminal_shows_how_many_questions_wait(anyio_backend: str) -> None:
    import time

    shown: list[str] = []

    answered: list[str] = []

    def read(prompt: str) -> str:
        deadline = time.monotonic() + 5
        while not answered and handler.waiting < 2 and time.monotonic() < deadline:  # let the others queue up
            time.sleep(0.005)
        answered.append(prompt)
        return "d"

    handler = TerminalHandler(read_line=read, write=shown.append)
    asking = Server("asks-three", "1")

    @asking.tool()
    async def three(ctx: Context) -> str:
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(ctx.elicit, f"Question {i}?", bool)
        return "done"

    async with connected(asking, elicitation=handler, protocol="2025-11-25") as client:
        assert (await client.call_tool("three")).text == "done"
    assert handler.waiting == 0
    queue = [line for line in shown if "waiting after this one" in line]
    assert queue == ["(2 more questions waiting after this one)", "(1 more question waiting after this one)"]


async def test_a_closed_connection_takes_its_url_elicitations_with_it(anyio_backend: str) -> None:
    person = Person(complete=False)
    async with connected(server, elicitation=person, protocol="2025-11-25") as client:
        person.wait_done = _done  # type: ignore[attr-defined]
        with pytest.raises(TooManyRounds):  # no completion comes; the person "says done"; asked again: a loop
            await client.call_tool("needs_connection")
        elicitation_id = person.seen[0].url.rsplit("=", 1)[-1]
        assert await server.url_elicitations.get(elicitation_id) is not None
    with anyio.fail_after(5):
        while await server.url_elicitations.get(elicitation_id) is not None:
            await anyio.sleep(0.01)
    assert not await server.complete_url_elicitation(elicitation_id)  # nobody left to tell


async def _done(request: UrlElicitationRequest) -> None:
    return


async def test_a_script_never_waits_indefinitely_for_a_completion_notice(anyio_backend: str) -> None:
    """No person to say "I'm done" and no notice from the server: after url_timeout the call goes on (the spec's
    MUST NOT wait indefinitely), and a server that still wants the same interaction is reported as a loop."""
    person = Person(complete=False)  # opens nothing, and has no wait_done
    async with connected(server, elicitation=person, protocol="2025-11-25", url_timeout=0.2) as client:
        with anyio.fail_after(10), pytest.raises(TooManyRounds):
            await client.call_tool("needs_connection")
    assert len(person.seen) == 1


async def test_a_server_that_never_completes_the_handshake_is_a_timeout(anyio_backend: str) -> None:
    nobody, silent = memory_pair()  # nobody answers on the other end
    try:
        with anyio.fail_after(10), pytest.raises(TimeoutError, match="handshake"):
            async with Client(silent, protocol="2025-11-25", handshake_timeout=0.2):
                pass
    finally:
        await nobody.aclose()
