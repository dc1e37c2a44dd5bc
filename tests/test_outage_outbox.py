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
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2 as httpx
import mcp_types as types
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from elicitor import Accepted, Client, Context, ElicitationRequest, Server
from elicitor.server import StateSealer, _hold, generate_key
from elicitor.server.http._outbox import Outbox
from elicitor.state import RedisStore

from .conftest import serving
from .replicas import MISSING, RedisServer, Replicas
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


async def pause(redis_url: str, ms: int = PAUSE_MS) -> None:
    """``CLIENT PAUSE`` for ``ms``, every command held (as a stalled or failing-over Redis)."""
    from redis.asyncio import Redis

    admin = Redis.from_url(redis_url)
    try:
        await admin.execute_command("CLIENT", "PAUSE", str(ms), "ALL")
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
            while len(apps[1]._handshake._outbox):  # passed on, nothing left behind (B counts it just after)
                await anyio.sleep(0.05)
    assert result.content[0].text == "Ada"  # type: ignore[union-attr]
    assert asked == ["Pick a name"] and transport.sent == [202]


async def test_an_answer_kept_while_redis_restarts_without_its_data_reaches_the_call(tmp_path: Path) -> None:
    """Redis is stopped (connections refused) past B's hold while the official SDK's person answers on B: B keeps
    the answer (202). Redis comes back empty: the session's record is gone until A claims it again at its
    heartbeat, and B's relay waits for that rather than drop the answer as for a session gone; the call ends
    with the person's answer. About 5 s."""
    redis = RedisServer(tmp_path)
    redis.start()
    try:
        async with two_replicas(redis.url, picking, lease=1.0, timeout=1.0, heartbeat=1.0) as (a, b, apps):
            outbox = apps[1]._handshake._outbox

            async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
                redis.stop()
                await anyio.sleep(0.5)  # the person answers meanwhile
                return types.ElicitResult(action="accept", content={"name": "Ada"})

            async def start_redis_once_b_keeps_the_answer() -> None:
                while not len(outbox):
                    await anyio.sleep(0.05)
                await anyio.to_thread.run_sync(redis.start)

            transport = AnswersTo(b)
            with anyio.fail_after(60):
                async with (
                    anyio.create_task_group() as tg,
                    httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(30, read=300)) as http,
                    McpClient(
                        streamable_http_client(a, http_client=http), elicitation_callback=callback, mode="legacy"
                    ) as client,
                ):
                    tg.start_soon(start_redis_once_b_keeps_the_answer)
                    result = await client.call_tool("pick", {})
    finally:
        redis.stop()
    assert result.content[0].text == "Ada"  # type: ignore[union-attr]
    assert transport.sent == [202]


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
            while len(outbox):  # the owner may answer before B, told its write went through, counts it passed on
                await anyio.sleep(0.05)


async def asked(http: httpx.AsyncClient, url: str, stack: AsyncExitStack) -> tuple[dict[str, str], Any, Any]:
    """A session at ``url`` whose call of ``wait_then_note`` waits on its person: its headers, the question's id, and
    the rest of the call's answer stream (left open on ``stack``)."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "clientInfo": {"name": "t", "version": "1"},
        "capabilities": {"elicitation": {"form": {}}}}}  # fmt: skip
    opened = await http.post(url, json=init, headers=HEADERS)
    headers = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=initialized, headers=headers)).status_code == 202
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "wait_then_note"}}
    stream = await stack.enter_async_context(http.stream("POST", url, json=call, headers=headers))
    messages = sse(stream)
    question = await anext(messages)
    assert question["method"] == "elicitation/create"
    return headers, question["id"], messages


async def test_answers_for_a_killed_owner_do_not_hold_up_a_live_sessions_answer(
    redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replica A (a process) runs three sessions waiting on their people, C (another, its lease outlasting the
    pause) one more; A is killed (SIGKILL), and during a Redis pause longer than the hold the four answers land on
    B, which keeps them: A's first, C's last. Once Redis is back, each of A's answers takes B ``gone_after`` (3 s
    here) to find A gone; C's answer, behind them, reaches its call meanwhile instead of after all of them (one at
    a time, it waited 9 s, and behind a hundred answers for a dead replica, twelve minutes). Each answer is passed
    on or dropped once. About 15 s."""
    key = generate_key()
    command = [sys.executable, "-m", "tests.peers.replica_server", "--lease"]
    dies = Replicas([*command, "1"], 1, tmp_path / "a", redis=redis.url, keys=key)
    lives = Replicas([*command, "30"], 1, tmp_path / "c", redis=redis.url, keys=key)  # alive through the pause
    for replicas in (dies, lives):
        replicas.folder.mkdir()
        replicas.start()
    keeper = Server("replicas", version="1.0.0", state=StateSealer([key]))
    keeper.share(RedisStore(redis.url, lease=1.0, timeout=1.0))
    app = keeper.http_app()
    outbox = app._handshake._outbox
    kept: list[str] = []
    done: list[tuple[str, bool]] = []
    put, relay = Outbox.put, outbox._relay

    def keeping(self: Outbox, session_id: str, principal: str | None, body: bytes) -> bool:
        kept.append(session_id)
        return put(self, session_id, principal, body)

    async def relaying(session_id: str, principal: str | None, body: bytes) -> bool:
        delivered = await relay(session_id, principal, body)
        done.append((session_id, delivered))
        return delivered

    monkeypatch.setattr(Outbox, "put", keeping)
    outbox._relay = relaying
    a, c = (f"http://127.0.0.1:{replicas.ports[0]}/mcp" for replicas in (dies, lives))
    try:
        with anyio.fail_after(90):
            async with serving(app) as b, httpx.AsyncClient(timeout=60) as http, AsyncExitStack() as stack:
                dead = [await asked(http, a, stack) for _ in range(3)]
                live_headers, live_id, live_stream = await asked(http, c, stack)
                dies.kill(0)
                await anyio.sleep(1.5)  # A's lease (1 s) lapses: its sessions read as not alive
                await pause(redis.url, 5000)

                async def answer(headers: dict[str, str], question: Any) -> None:
                    message = {"jsonrpc": "2.0", "id": question, "result": {"action": "accept",
                               "content": {"name": "Ada"}}}  # fmt: skip
                    assert (await http.post(b, json=message, headers=headers)).status_code == 202

                async with anyio.create_task_group() as tg:
                    for headers, question, _ in dead:
                        tg.start_soon(answer, headers, question)
                await answer(live_headers, live_id)
                sessions = [headers["mcp-session-id"] for headers, _, _ in dead]
                live = live_headers["mcp-session-id"]
                assert sorted(kept[:3]) == sorted(sessions) and kept[3:] == [live], "not all kept during the pause"
                result = await anext(live_stream)
                assert result["id"] == 7 and result["result"]["content"][0]["text"] == "answered"
                while len(outbox):
                    await anyio.sleep(0.1)
                for _, _, stream in dead:  # their replica is gone: the streams end one way or another
                    with suppress(Exception):
                        await stream.aclose()
    finally:
        dies.stop()
        lives.stop()
    assert done[0] == (live, True), done  # the live session's answer first, not behind the dead ones
    assert sorted(done[1:]) == sorted((session, False) for session in sessions)


async def test_a_call_whose_kept_answer_died_with_its_keeper_ends_at_its_elicitation_timeout(
    redis: RedisServer, tmp_path: Path
) -> None:
    """B (a process) keeps the person's answer for A's session, Redis paused past B's hold, and is killed (SIGKILL)
    before Redis is back: the answer is lost with B's memory, and nothing can tell A (the owner cannot tell a lost
    answer from a person thinking). The call does not wait for ever: at A's ``elicitation_timeout`` (6 s here, an
    hour by default) the client is told its question is cancelled and ``ctx.elicit`` returns ``Cancelled()``, so
    the call ends with what the tool makes of that. About 10 s."""
    key = generate_key()
    keeper = Replicas(
        [sys.executable, "-m", "tests.peers.replica_server", "--lease", "1", "--hold", "1"], 1, tmp_path,
        redis=redis.url, keys=key,
    )  # fmt: skip
    keeper.start()
    owner = Server("picking", version="1.0.0", state=StateSealer([key]), elicitation_timeout=6.0)
    owner._tools = picking._tools
    owner.share(RedisStore(redis.url, lease=1.0, timeout=1.0))
    b = f"http://127.0.0.1:{keeper.ports[0]}/mcp"
    try:
        with anyio.fail_after(60):
            async with serving(owner.http_app()) as a, httpx.AsyncClient(timeout=60) as http:
                init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "clientInfo": {"name": "t", "version": "1"},
                    "capabilities": {"elicitation": {"form": {}}}}}  # fmt: skip
                opened = await http.post(a, json=init, headers=HEADERS)
                session = opened.headers["mcp-session-id"]
                headers = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
                initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                assert (await http.post(a, json=initialized, headers=headers)).status_code == 202
                call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "pick"}}
                async with http.stream("POST", a, json=call, headers=headers) as stream:
                    messages = sse(stream)
                    question = await anext(messages)
                    await pause(redis.url, 3000)
                    answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept",
                              "content": {"name": "Ada"}}}  # fmt: skip
                    assert (await http.post(b, json=answer, headers=headers)).status_code == 202  # kept by B
                    keeper.kill(0)
                    rest = [message async for message in messages]
    finally:
        keeper.stop()
    cancelled, result = rest
    assert cancelled["method"] == "notifications/cancelled"
    assert cancelled["params"]["requestId"] == question["id"]
    assert result["id"] == 7 and result["result"]["content"][0]["text"] == "-"


async def test_kept_messages_of_one_session_go_in_the_order_taken_and_others_pass_them() -> None:
    """Two messages kept for one session, the first slow to pass on (its owner is being checked), go in the order
    taken, the second only once the first went; another session's message, kept after them, passes them
    meanwhile (one at a time, the first waited for it for ever here); a try the store refused is made again;
    each message reaches its session once."""
    from elicitor.state import StoreUnavailable

    order: list[bytes] = []
    other_went = anyio.Event()
    refused = [b"2"]

    async def relay(session_id: str, principal: str | None, body: bytes) -> bool:
        if body == b"1":
            await other_went.wait()
        if body in refused:
            refused.remove(body)
            raise StoreUnavailable("shared state unavailable (test)")
        order.append(body)
        if body == b"other":
            other_went.set()
        return True

    outbox = Outbox(relay)
    for session_id, body in (("s", b"1"), ("s", b"2"), ("t", b"other")):
        assert outbox.put(session_id, None, body)
    assert len(outbox) == 3 and outbox.size == 7
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        with anyio.fail_after(30):
            while len(outbox):
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert order == [b"other", b"1", b"2"] and outbox.size == 0


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
