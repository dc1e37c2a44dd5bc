"""Redis away longer than a replica holds a request for it: a person's answer landing on another replica, a page.

The answer (a JSON-RPC response POSTed by the client) lands on B while A runs the session, and Redis is paused
(``CLIENT PAUSE``) longer than B holds a POST for it (``STORE_HOLD``, made a second here so the tests take
seconds). B keeps the answer, answers 202, and passes it on once Redis is back: the call ends with the person's
answer, asked once, whether the client sends a refused answer again (elicitor's) or never does (the official SDK).
A URL-mode page opened meanwhile answers 503 with a page saying to reload, in the person's language. Replicas are
uvicorn servers in this process sharing a real ``redis-server``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2 as httpx
import mcp_types as types
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from elicitor import Accepted, Client, Context, ElicitationRequest, Server
from elicitor.server import StateSealer, _hold, generate_key
from elicitor.state import RedisStore

from .conftest import serving
from .replicas import MISSING, RedisServer
from .test_replicas import two_replicas

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(bool(MISSING), reason=f"needs {' and '.join(MISSING)} (make test installs them)"),
]

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
PAUSE_MS = 4000
"""How long Redis is paused: well past the hold (a second here), short enough for a quick test."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def short_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """A POST waits a second for the store (15 s in production): the pause outlasts it in a few seconds."""
    monkeypatch.setattr(_hold, "STORE_HOLD", 1.0)


@dataclass
class Picked:
    name: str


picking = Server("picking", version="1.0.0", state=StateSealer([generate_key()]))


@picking.tool()
async def pick(ctx: Context) -> str:
    """Asks its person for a name."""
    outcome = await ctx.elicit("Pick a name", Picked)
    return outcome.data.name if isinstance(outcome, Accepted) else "-"


class AnswersTo(httpx.AsyncHTTPTransport):
    """Sends the client's answers (JSON-RPC responses) to the replica at ``url``, everything else where asked: a
    balancer that routed the answer to another replica than the session's. Records each answer's status."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.target = httpx.URL(url)
        self.sent: list[int] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and b'"result"' in request.content:
            request.url = request.url.copy_with(port=self.target.port)
            response = await super().handle_async_request(request)
            self.sent.append(response.status_code)
            return response
        return await super().handle_async_request(request)


async def sse(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of an SSE answer stream, in order."""
    async for line in response.aiter_lines():
        if line.startswith("data: {"):
            yield json.loads(line[6:])


async def pause(redis_url: str) -> None:
    """``CLIENT PAUSE`` for :data:`PAUSE_MS`, every command held (as a stalled or failing-over Redis)."""
    from redis.asyncio import Redis

    admin = Redis.from_url(redis_url)
    try:
        await admin.execute_command("CLIENT", "PAUSE", str(PAUSE_MS), "ALL")
    finally:
        await admin.aclose()


async def test_an_answer_of_the_official_sdk_landing_elsewhere_past_the_hold_still_reaches_the_call(
    redis: RedisServer,
) -> None:
    """The official SDK's client never sends a refused answer again. Its person answers during a pause longer than
    B holds the POST: B keeps the answer (202) and passes it on once Redis is back, so the call ends with it
    instead of waiting on it (B used to refuse it with 503, and the call and ``call_tool`` waited until the tool's
    ``elicitation_timeout``, an hour, the answer lost)."""
    asked: list[str] = []
    async with two_replicas(redis.url, picking, lease=1.0, timeout=1.0) as (a, b, apps):

        async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(params.message)
            await pause(redis.url)
            await anyio.sleep(0.5)  # the person answers meanwhile
            return types.ElicitResult(action="accept", content={"name": "Ada"})

        transport = AnswersTo(b)
        with anyio.fail_after(40):
            async with (
                httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(30, read=300)) as http,
                McpClient(
                    streamable_http_client(a, http_client=http), elicitation_callback=callback, mode="legacy"
                ) as client,
            ):
                result = await client.call_tool("pick", {})
        assert len(apps[1]._handshake._outbox) == 0  # passed on, nothing left behind
    assert result.content[0].text == "Ada"  # type: ignore[union-attr]
    assert asked == ["Pick a name"] and transport.sent == [202]


async def test_a_replica_stopped_while_it_keeps_an_answer_passes_it_on_within_its_grace(redis: RedisServer) -> None:
    """B keeps the official SDK's answer (Redis paused past the hold) and is told to stop (SIGTERM: ``drain``) with
    a grace longer than the pause: it waits for Redis to pass the answer on before it ends, so the call ends with
    the answer instead of waiting on one lost with B's memory."""
    async with two_replicas(redis.url, picking, lease=1.0, timeout=1.0) as (a, b, apps):

        async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            await pause(redis.url)
            await anyio.sleep(0.5)
            return types.ElicitResult(action="accept", content={"name": "Ada"})

        async def stop_b_once_it_keeps_the_answer() -> None:
            while not len(apps[1]._handshake._outbox):
                await anyio.sleep(0.05)
            apps[1].drain(20.0)

        transport = AnswersTo(b)
        with anyio.fail_after(40):
            async with (
                anyio.create_task_group() as tg,
                httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(30, read=300)) as http,
                McpClient(
                    streamable_http_client(a, http_client=http), elicitation_callback=callback, mode="legacy"
                ) as client,
            ):
                tg.start_soon(stop_b_once_it_keeps_the_answer)
                result = await client.call_tool("pick", {})
            await apps[1]._handshake.drained.wait()
    assert result.content[0].text == "Ada"  # type: ignore[union-attr]
    assert transport.sent == [202]


async def test_an_answer_of_elicitors_client_landing_elsewhere_past_the_hold_is_sent_once(redis: RedisServer) -> None:
    """elicitor's client would send a refused answer again; past the hold B takes it at once (202), so it is sent
    once, and the call ends with it once Redis is back."""
    asked: list[str] = []
    async with two_replicas(redis.url, picking, lease=1.0, timeout=1.0) as (a, b, _):

        async def handler(request: ElicitationRequest) -> Accepted[Any]:
            asked.append(request.message)
            await pause(redis.url)
            await anyio.sleep(0.5)
            return Accepted({"name": "Grace"})

        transport = AnswersTo(b)
        with anyio.fail_after(40):
            async with (
                httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(30, read=300)) as http,
                Client.http(a, http=http, elicitation=handler, protocol="2025-11-25") as client,
            ):
                assert (await client.call_tool("pick")).text == "Grace"
    assert asked == ["Pick a name"] and transport.sent == [202]


async def test_an_answer_sent_twice_past_the_hold_is_kept_once_and_a_full_outbox_refuses(redis: RedisServer) -> None:
    """The same answer POSTed twice to B during the pause is kept once; a message past a full outbox is refused
    with 503 and ``Retry-After`` as before (bounded memory); the call ends with the answer once Redis is back."""
    async with (
        two_replicas(redis.url, picking, lease=1.0, timeout=1.0) as (a, b, apps),
        httpx.AsyncClient(timeout=60) as http,
    ):
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "clientInfo": {"name": "t", "version": "1"},
            "capabilities": {"elicitation": {"form": {}}}}}  # fmt: skip
        opened = await http.post(a, json=init, headers=HEADERS)
        headers = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(a, json=initialized, headers=headers)).status_code == 202
        outbox = apps[1]._handshake._outbox
        outbox.max_messages = 1
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "pick"}}
        with anyio.fail_after(40):
            async with http.stream("POST", a, json=call, headers=headers) as stream:
                messages = sse(stream)
                question = await anext(messages)
                await pause(redis.url)
                answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept",
                          "content": {"name": "Ada"}}}  # fmt: skip
                statuses: list[int] = []

                async def post(message: dict[str, Any]) -> None:
                    statuses.append((await http.post(b, json=message, headers=headers)).status_code)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(post, answer)
                    tg.start_soon(post, answer)
                assert statuses == [202, 202] and len(outbox) == 1
                progress = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}}
                refused = await http.post(b, json=progress, headers=headers)
                assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
                result = await anext(messages)
        assert result["id"] == 7 and result["result"]["content"][0]["text"] == "Ada"
        assert len(outbox) == 0


def sign_in_page(server: Server) -> Any:
    """A page that reads its elicitation, as a URL-mode page does (``url_elicitations.get``: it needs the store)."""

    async def page(scope: dict[str, Any], receive: Any, send: Any) -> None:
        elicitation = await server.url_elicitations.get(scope["path"].rsplit("/", 1)[-1])
        text = b"unknown" if elicitation is None else elicitation.message.encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": text})

    return page


PEOPLE = [
    ("zh-CN,zh;q=0.9", "zh-Hans", "请稍后再试"),
    ("ar", "ar", "يُرجى المحاولة مرة أخرى بعد قليل"),
    (None, "en", "Please try again"),
]
"""(``Accept-Language``, the page's ``lang``, words of its title): a person reading Chinese, Arabic, English."""


@pytest.mark.parametrize(("accept", "tag", "title"), PEOPLE)
async def test_a_url_mode_page_opened_while_redis_is_away_says_to_reload_in_the_persons_language(
    redis: RedisServer, accept: str | None, tag: str, title: str
) -> None:
    """A person opens their sign-in page while Redis is paused: the page's ``url_elicitations.get`` cannot reach
    the store. They get 503 with ``Retry-After`` and a short page in their language saying to reload in a moment,
    not a 500 or a traceback (which reads as a broken link); once Redis is back the same page shows."""
    store = RedisStore(redis.url, prefix=f"page{secrets.token_hex(4)}:", lease=1.0, timeout=1.0)
    server = Server("paging", version="1.0.0", state=StateSealer([generate_key()]))
    server.share(store)
    server.serve_pages(sign_in_page(server))
    async with serving(server.http_app()) as url, httpx.AsyncClient(timeout=30) as http:
        link = url.removesuffix("/mcp") + "/sign-in/" + secrets.token_hex(8)
        with anyio.fail_after(40):
            assert (await http.get(link)).text == "unknown"  # the page works while Redis is there
            headers = {"accept-language": accept} if accept else {}
            await pause(redis.url)
            page = await http.get(link, headers=headers)
            assert page.status_code == 503, page.text
            assert page.headers["retry-after"].isdigit() and page.headers["content-type"].startswith("text/html")
            assert f"lang={tag}" in page.text and title in page.text and "Traceback" not in page.text
            while (page := await http.get(link, headers=headers)).status_code == 503:
                await anyio.sleep(0.5)
    assert page.status_code == 200 and page.text == "unknown"


async def test_a_page_that_fails_for_the_store_after_it_began_answering_is_not_answered_twice() -> None:
    """The 503 page replaces only a page that had not begun its answer: one that already sent its status cannot
    change it, so its error goes on as it was (ASGI allows one response), and other errors are not hidden."""
    from elicitor.server._pages import answering_unavailable
    from elicitor.state import StoreUnavailable

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def late(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise StoreUnavailable("shared state unavailable (test)")

    async def broken(scope: Any, receive: Any, send: Any) -> None:
        raise ValueError("a bug in the page")

    scope = {"type": "http", "path": "/sign-in/x", "headers": []}
    with pytest.raises(StoreUnavailable):
        await answering_unavailable(late)(scope, receive, send)
    assert [m.get("status") for m in sent] == [200]
    with pytest.raises(ValueError, match="a bug in the page"):
        await answering_unavailable(broken)(scope, receive, send)
    assert [m.get("status") for m in sent] == [200]
