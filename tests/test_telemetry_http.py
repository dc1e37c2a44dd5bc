"""OpenTelemetry over real HTTP: both eras in process, three replicas behind nginx (one trace whatever replica each
round lands on), a Prometheus scrape of a running replica, and FastMCP on either side of a call (one trace)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import mcp_types as types
import pytest
from mcp import Client as McpClient
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from elicitor import Accepted, Client, Context, ScriptedHandler, Server
from elicitor.server import StateSealer, _hold, generate_key

from .conftest import ROOT, free_port, request_body, serving
from .replicas import MISSING, Deployment, RedisServer, deployment, wait_for_port
from .test_replicas import events, open_session, rpc, two_replicas
from .test_telemetry import CITY, NAME, SECRET_CITY, SECRET_NAME, SETUP, Otel, otel, server

__all__ = ["otel"]  # the fixture, shared (redis is conftest's)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def one_trace(spans: list[ReadableSpan]) -> set[int]:
    return {s.context.trace_id for s in spans if s.name not in SETUP}


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_over_http_a_call_is_one_trace_with_the_http_attributes(otel: Otel, protocol: str) -> None:
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"city": SECRET_CITY}])
    async with serving(server.http_app()) as url, Client.http(url, elicitation=handler, protocol=protocol) as client:
        assert SECRET_CITY in (await client.call_tool("introduce")).text
    spans = otel.finished()
    assert len(one_trace(spans)) == 1
    # The client's spans name the server it reached (semconv: server.address, server.port on CLIENT spans).
    endpoint = httpx.URL(url)
    asked = [s for s in spans if s.kind == SpanKind.CLIENT and s.name == "tools/call introduce"]
    assert asked and {((s.attributes or {})["server.address"], (s.attributes or {})["server.port"]) for s in asked} == {
        (endpoint.host, endpoint.port)
    }
    # Every request sent names the revision, on either side and era (semconv: mcp.protocol.version).
    pushed = [s for s in spans if s.kind == SpanKind.CLIENT and s.name == "elicitation/create"]
    assert len(pushed) == (0 if protocol == "2026-07-28" else 2)
    assert {(s.attributes or {}).get("mcp.protocol.version") for s in asked + pushed} == {protocol}
    # A question the server pushes goes on the call's POST stream: its span says that POST's HTTP version, and so
    # does the client's span handling it (the version the client's connection to the server speaks).
    heard = [s for s in spans if s.kind == SpanKind.SERVER and s.name == "elicitation/create"]
    assert len(heard) == len(pushed)
    assert all((s.attributes or {}).get("network.protocol.version") == "1.1" for s in pushed + heard)
    served = [s for s in spans if s.name == "tools/call introduce" and s.kind == SpanKind.SERVER]
    assert len(served) == (3 if protocol == "2026-07-28" else 1)
    for span in served:
        attributes = span.attributes or {}
        assert attributes["network.transport"] == "tcp" and attributes["network.protocol.name"] == "http"
        assert attributes["mcp.protocol.version"] == protocol
        # Who sent it (semconv: client.address, client.port, network.protocol.version on SERVER spans).
        assert attributes["client.address"] == "127.0.0.1" and attributes["network.protocol.version"] == "1.1"
        assert isinstance(attributes["client.port"], int) and attributes["client.port"] not in (0, endpoint.port)
        if protocol == "2025-11-25":  # a session: its Mcp-Session-Id, on both sides
            assert len(str(attributes["mcp.session.id"])) >= 16
            [sent] = [s for s in spans if span.parent is not None and s.context.span_id == span.parent.span_id]
            assert (sent.attributes or {})["mcp.session.id"] == attributes["mcp.session.id"]
            assert (sent.attributes or {})["network.protocol.name"] == "http"
        else:
            assert "mcp.session.id" not in attributes
    for span in spans:  # a client's spans name the server, never themselves
        assert span.kind == SpanKind.SERVER or "client.address" not in (span.attributes or {})
    # Every request and notification the client sent says the HTTP version the server answered it in
    # (semconv: network.protocol.version on CLIENT spans, "Recording MCP transport").
    posted = [s for s in spans if s.kind == SpanKind.CLIENT and "server.address" in (s.attributes or {})]
    opening = {"initialize", "notifications/initialized"} if protocol == "2025-11-25" else {"server/discover"}
    assert {s.name for s in posted} == opening | {"tools/call introduce"}
    assert {(s.name, (s.attributes or {}).get("network.protocol.version")) for s in posted} == {
        (s.name, "1.1") for s in posted
    }
    for points in otel.metric_points().values():  # a port per connection: never a label
        assert not any({"client.address", "client.port"} & set(p.attributes) for p in points)
    exported = otel.exported_bytes()
    assert SECRET_NAME not in exported and SECRET_CITY not in exported


class SaysHttp2(httpx.AsyncBaseTransport):
    """An ``httpx`` transport whose responses say they came over HTTP/2, as ``httpx`` with ``http2=True`` reports a
    server that agreed to it (its ``http_version`` extension), carried over HTTP/1.1 by ``inner``: the server here
    (uvicorn) speaks no HTTP/2, and what is tested is that the client's spans report what its HTTP library says."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        response.extensions = {**response.extensions, "http_version": b"HTTP/2"}
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize(("transport", "version"), [(httpx.AsyncHTTPTransport, "1.1"), (SaysHttp2, "2")])
async def test_a_client_with_its_own_http_library_names_the_version_it_spoke(
    otel: Otel, protocol: str, transport: type[httpx.AsyncBaseTransport], version: str
) -> None:
    """A client given an ``httpx`` client of the caller's (``http=``: HTTP/2, a proxy, certificates) names on each
    ``CLIENT`` span the HTTP version that library says the server answered in, not the one elicitor's own
    connections speak."""
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"city": SECRET_CITY}])
    async with (
        httpx.AsyncClient(transport=transport()) as http,
        serving(server.http_app()) as url,
        Client.http(url, elicitation=handler, protocol=protocol, http=http) as client,
    ):
        assert SECRET_CITY in (await client.call_tool("introduce")).text
    sent = [s for s in otel.finished() if s.kind == SpanKind.CLIENT and "server.address" in (s.attributes or {})]
    assert "tools/call introduce" in {s.name for s in sent}
    assert {(s.attributes or {}).get("network.protocol.version") for s in sent} == {version}


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_the_proxy_names_who_posted_each_request_on_its_server_spans(otel: Otel, protocol: str) -> None:
    """``elicitor proxy --listen`` is the same HTTP app: its ``SERVER`` span for a request from the client names
    who POSTed it, on a handshake-era session (a bridge) as on a 2026-07-28 round."""
    from elicitor.proxy import ProxyServer

    from .test_proxy import in_memory

    handler = ScriptedHandler([{"name": SECRET_NAME}, {"city": SECRET_CITY}])
    async with anyio.create_task_group() as tg:
        proxy = ProxyServer(in_memory(server, tg), upstream_protocol=protocol)
        async with serving(proxy.http_app()) as url, Client.http(url, elicitation=handler, protocol=protocol) as client:
            with anyio.fail_after(30):
                assert SECRET_CITY in (await client.call_tool("introduce")).text
        tg.cancel_scope.cancel()
    served = [s for s in otel.named("tools/call introduce") if s.kind == SpanKind.SERVER]
    at_proxy = [s for s in served if (s.attributes or {}).get("network.transport") == "tcp"]
    assert len(at_proxy) == (3 if protocol == "2026-07-28" else 1)
    for span in at_proxy:
        attributes = span.attributes or {}
        assert attributes["client.address"] == "127.0.0.1" and attributes["network.protocol.version"] == "1.1"
        assert isinstance(attributes["client.port"], int)
    upstream = [s for s in served if s not in at_proxy]  # in memory, behind the proxy: no address to name
    assert upstream and not any("client.address" in (s.attributes or {}) for s in upstream)


async def test_a_log_line_the_client_writes_while_a_request_waits_names_its_span(otel: Otel) -> None:
    """What elicitor logs while a request is sent and waited on is under the request's ``CLIENT`` span, so the
    log line leads to it: here the client's retry of its ``initialize``, which the server answered 503 (a replica
    restarting, say), a request no span of the application's encloses."""
    from .test_telemetry import every_log_line

    app = server.http_app()
    refused: list[int] = []

    async def busy_once(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not refused:
            body = await request_body(receive)
            if b'"initialize"' in body:
                refused.append(503)
                headers = [(b"content-length", b"0")]
                await send({"type": "http.response.start", "status": 503, "headers": headers})
                await send({"type": "http.response.body", "body": b""})
                return
            replay = [{"type": "http.request", "body": body, "more_body": False}]

            async def again() -> Any:
                return replay.pop() if replay else await receive()

            await app(scope, again, send)
            return
        await app(scope, receive, send)

    with every_log_line() as lines:
        async with serving(busy_once) as url, Client.http(url, protocol="2025-11-25") as client:
            with anyio.fail_after(30):
                assert "introduce" in {tool.name for tool in await client.list_tools()}
    assert refused == [503]
    [retry] = [json.loads(line) for line in lines if "sending it again" in line]
    [opened] = [s for s in otel.named("initialize") if s.kind == SpanKind.CLIENT]
    assert retry["trace_id"] == f"{opened.context.trace_id:032x}"
    assert retry["span_id"] == f"{opened.context.span_id:016x}"


@pytest.fixture(scope="module")
def traced_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Deployment, Path]]:
    if MISSING:
        pytest.skip(f"needs {' and '.join(MISSING)} (make test installs them)")
    spans = tmp_path_factory.mktemp("spans")
    # The replicas' environment is copied from ours: their spans' folder, and nginx's address as the balancer whose
    # X-Forwarded-For they believe (uvicorn's variable; Server.run believes nobody's without it).
    settings = {"ELICITOR_SPANS_DIR": str(spans), "FORWARDED_ALLOW_IPS": "127.0.0.1"}
    before = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        with deployment([sys.executable, "-m", "tests.peers.traced_replica"], tmp_path_factory.mktemp("c")) as up:
            yield up, spans
    finally:
        for name, value in before.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


def replica_spans(folder: Path) -> list[dict[str, Any]]:
    found = []
    for path in folder.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            span = json.loads(line)
            span["pid"] = path.stem
            found.append(span)
    return found


async def test_the_rounds_of_a_call_on_three_replicas_are_one_trace(
    otel: Otel, traced_cluster: tuple[Deployment, Path]
) -> None:
    cluster, folder = traced_cluster
    start = len(cluster.nginx.upstreams())
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"size": 4}])
    with anyio.fail_after(30):
        async with Client.http(cluster.nginx.url, elicitation=handler, protocol="2026-07-28") as client:
            assert (await client.call_tool("book")).text == f"{SECRET_NAME} x4"
    [call] = [s for s in otel.named("tools/call book") if s.kind == SpanKind.INTERNAL]
    trace_id = f"0x{call.context.trace_id:032x}"
    with anyio.fail_after(10):
        while len([s for s in replica_spans(folder) if s["context"]["trace_id"] == trace_id]) < 3:
            await anyio.sleep(0.05)
    rounds = [
        s for s in replica_spans(folder)
        if s["name"] == "tools/call book" and s["kind"] == "SpanKind.SERVER" and s["context"]["trace_id"] == trace_id
    ]  # fmt: skip
    assert len(rounds) == 3
    # Each round's parent is the client's request for that round, sent inside the one call span.
    ours = {f"0x{s.context.span_id:016x}" for s in otel.named("tools/call book") if s.kind == SpanKind.CLIENT}
    assert {s["parent_id"] for s in rounds} == ours
    landed = {cluster.replicas.index_of(u) for _, u in cluster.nginx.upstreams()[start:] if u != "-"}
    assert len({s["pid"] for s in rounds}) == len(landed) >= 2
    paths = sorted(s["attributes"]["elicitor.round.path"] for s in rounds)
    assert paths[0] == "first" and set(paths[1:]) <= {"parked", "replayed"}
    for path in folder.glob("*.jsonl"):
        assert SECRET_NAME not in path.read_text()


async def test_a_handshake_call_on_three_replicas_is_one_trace_with_each_wait_for_the_person(
    otel: Otel, traced_cluster: tuple[Deployment, Path]
) -> None:
    """2025-11-25 through the balancer: the session lives on one replica, and the POSTs that land on the others
    (the call, the person's answers) are forwarded to it through Redis. The owner's spans continue the client's
    trace, and each question is an ``elicitation`` span there (the wait for the person and its outcome, never the
    answer), the ``elicitation/create`` pushed to the client under it: also when the call is kept in the shared
    store for a retry, as every call with an idempotency key is. Each hop through another replica is a
    ``forward`` span of that replica's in the same trace, under the client's request or the person's answer."""
    cluster, folder = traced_cluster
    start = len(cluster.nginx.upstreams())
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"size": 4}])
    with anyio.fail_after(30):
        async with Client.http(cluster.nginx.url, elicitation=handler, protocol="2025-11-25") as client:
            assert (await client.call_tool("book")).text == f"{SECRET_NAME} x4"
    posted = {u for request, u in cluster.nginx.upstreams()[start:] if request.startswith("POST")}
    assert len(posted) >= 2  # round robin: some POSTs were forwarded to the session's replica
    [call] = [s for s in otel.named("tools/call book") if s.kind == SpanKind.INTERNAL]
    trace_id = f"0x{call.context.trace_id:032x}"

    def traced() -> list[dict[str, Any]]:
        return [s for s in replica_spans(folder) if s["context"]["trace_id"] == trace_id]

    with anyio.fail_after(10):
        while len(traced()) < 6 or len({s["pid"] for s in traced()}) < 2:
            await anyio.sleep(0.05)  # the owner's five, and another replica's
    await anyio.sleep(0.5)  # a forward ends once the answer it relays has been sent: let the last ones land
    spans = traced()
    [served] = [s for s in spans if s["name"] == "tools/call book" and s["kind"] == "SpanKind.SERVER"]
    [sent] = [s for s in otel.named("tools/call book") if s.kind == SpanKind.CLIENT]
    assert served["parent_id"] == f"0x{sent.context.span_id:016x}"  # through whichever replica the POST hit
    questions = [s for s in spans if s["name"] == "elicitation"]
    assert [q["attributes"]["elicitor.elicitation.outcome"] for q in questions] == ["accept", "accept"]
    assert {q["parent_id"] for q in questions} == {served["context"]["span_id"]}
    pushes = [s for s in spans if s["name"] == "elicitation/create"]
    assert {p["parent_id"] for p in pushes} == {q["context"]["span_id"] for q in questions}
    forwards = [s for s in spans if s["name"].startswith("forward ")]
    assert forwards and served["pid"] not in {hop["pid"] for hop in forwards}
    ours = {f"0x{s.context.span_id:016x}": s for s in otel.finished()}
    owned = [s for s in spans if s["name"] == "forwarded response"]
    received = {link["context"]["span_id"]: s for s in owned for link in s["links"]}
    for hop in forwards:  # under the client's request, or under the person's answer for a forwarded answer
        wanted = "elicitation" if hop["name"] == "forward response" else hop["name"].removeprefix("forward ")
        assert ours[hop["parent_id"]].name == wanted, hop["name"]
        assert hop["attributes"]["elicitor.forwarded_to"] and hop["attributes"]["mcp.session.id"]
        if hop["name"] == "forward response":  # and the owner's side of the hop, under the question it answers
            owner = received[hop["context"]["span_id"]]
            assert owner["pid"] == served["pid"] and owner["parent_id"] in {p["context"]["span_id"] for p in pushes}
        if hop["name"] == "forward tools/call book":  # the owner's span for the call links to the hop
            assert hop["context"]["span_id"] in {link["context"]["span_id"] for link in served["links"]}
    for path in folder.glob("*.jsonl"):
        assert SECRET_NAME not in path.read_text()


PERSON = 0.3
"""Seconds the person takes to answer each question in the walk below."""

LABELS = {
    "mcp.method.name", "gen_ai.tool.name", "gen_ai.prompt.name", "mcp.protocol.version", "error.type",
    "elicitor.side", "elicitor.elicitation.mode", "elicitor.elicitation.outcome", "elicitor.round.path",
    "elicitor.task.status", "elicitor.store.operation", "network.transport", "network.protocol.name",
    "network.protocol.version", "rpc.response.status_code", "gen_ai.operation.name",
}  # fmt: skip
"""Every metric label elicitor may use: each from a bounded set."""

SCRAPE_LABELS = {"le", "otel_scope_name", "otel_scope_version", "otel_scope_schema_url"}
"""What the Prometheus exporter adds to those: a histogram's buckets and the instrumentation scope."""


@pytest.mark.parametrize(
    ("protocol", "upstream"),
    [("2025-11-25", "2025-11-25"), ("2026-07-28", "2026-07-28"), ("2026-07-28", "2025-11-25")],
)
async def test_one_elicitation_through_the_proxy_and_the_replicas_is_one_trace_with_no_orphan(
    otel: Otel, traced_cluster: tuple[Deployment, Path], protocol: str, upstream: str
) -> None:
    """An operator follows one call, whose tool asks two questions, from the client through ``elicitor proxy``
    and nginx to three replicas sharing Redis: on 2026-07-28 its rounds land on different replicas; on 2025-11-25
    the session lives on one and the POSTs (the proxy's answers among them) that land on the others are relayed
    through Redis; and a 2026-07-28 client in front of handshake-era replicas, whose answers reach the proxy in
    its next round with no trace context, yet whose proxied answers' hops are in the trace. Every span of the
    call, in this process (the client's, the proxy's) and in each replica's file, is in one trace whose only root
    is the client's call span, and every other span's parent is in it; the upstream's first request descends from
    the client's through the proxy; the person's time (0.3 s a question) is inside the ``elicitation`` spans on
    both sides; no metric label is outside the bounded set, and no label value names the trace, a span or an
    answer."""
    from elicitor.client._http import HttpClientTransport
    from elicitor.proxy import Bridge
    from elicitor.transports import memory_pair

    cluster, folder = traced_cluster
    start = len(cluster.nginx.upstreams())

    async def person(request: Any) -> dict[str, Any]:
        await anyio.sleep(PERSON)
        return {"name": SECRET_NAME} if "name" in str(request.message).lower() else {"size": 4}

    handler = ScriptedHandler(otherwise=person)
    client_end, down_end = memory_pair()
    bridge = Bridge(lambda: HttpClientTransport.connect(cluster.nginx.url), upstream_protocol=upstream)
    async with anyio.create_task_group() as tg:
        tg.start_soon(bridge.serve, down_end)
        async with Client(client_end, elicitation=handler, protocol=protocol) as client:
            with anyio.fail_after(60):
                assert (await client.call_tool("book")).text == f"{SECRET_NAME} x4"
        tg.cancel_scope.cancel()
    landed = {u for _, u in cluster.nginx.upstreams()[start:] if u != "-"}
    assert len(landed) >= 2
    [call] = [s for s in otel.named("tools/call book") if s.kind == SpanKind.INTERNAL]
    trace_id = f"0x{call.context.trace_id:032x}"
    ours = {
        f"0x{s.context.span_id:016x}": (s.name, s.kind.name, f"0x{s.parent.span_id:016x}" if s.parent else None)
        for s in otel.finished()
        if s.context.trace_id == call.context.trace_id
    }

    def theirs() -> dict[str, tuple[str, str, str | None]]:
        return {
            s["context"]["span_id"]: (s["name"], s["kind"].removeprefix("SpanKind."), s["parent_id"])
            for s in replica_spans(folder)
            if s["context"]["trace_id"] == trace_id
        }

    def orphans() -> set[str]:
        every = {**ours, **theirs()}
        return {f"{name}/{kind}" for name, kind, parent in every.values() if parent is not None and parent not in every}

    with anyio.move_on_after(15):  # replicas write a span when it ends: the last hops end after the call returns
        while orphans() or len([name for name, _, _ in theirs().values() if name == "elicitation"]) < 2:
            await anyio.sleep(0.1)
    assert not orphans(), orphans()
    every = {**ours, **theirs()}
    assert [name for name, _, parent in every.values() if parent is None] == ["tools/call book"]
    assert len({s["pid"] for s in replica_spans(folder) if s["context"]["trace_id"] == trace_id}) >= (
        2 if upstream == "2026-07-28" else 1
    )
    # The upstream's first request, on whichever replica, descends from the client's request through the proxy.
    served = [i for i, (name, kind, _) in theirs().items() if name == "tools/call book" and kind == "SERVER"]
    first = min(
        served, key=lambda i: next(s["start_time"] for s in replica_spans(folder) if s["context"]["span_id"] == i)
    )
    chain, at = [], every[first][2]
    while at is not None:
        chain.append(every[at][:2])
        at = every[at][2]
    assert chain[:3] == [("tools/call book", "CLIENT"), ("tools/call book", "SERVER"), ("tools/call book", "CLIENT")]
    if upstream == "2025-11-25":  # every hop of the proxy's session through another replica is in the call's trace
        [owner] = [s for s in replica_spans(folder) if s["context"]["span_id"] == first]
        session = owner["attributes"]["mcp.session.id"]
        hops = [
            s
            for s in replica_spans(folder)
            if s["name"].startswith("forward")
            and s["attributes"].get("mcp.session.id") == session
            and s["name"].removeprefix("forward ") not in SETUP
        ]  # fmt: skip (the session's setup: its own trace)
        strays = [(s["name"], s["attributes"]) for s in hops if s["context"]["trace_id"] != trace_id]
        assert not strays, strays  # (none at all when every POST happened to land on the session's replica)
        # The person's answer names the client's elicitation span when the client answered the proxy's question on
        # the same era; a 2026-07-28 client's answer comes in its next round, and the proxy's span for the question
        # is named instead.
        answer = ("elicitation", "INTERNAL") if protocol == upstream else ("elicitation/create", "SERVER")
        under = {"forward response": answer, "forwarded response": ("elicitation/create", "CLIENT")}
        for hop in hops:
            wanted = under.get(hop["name"], (hop["name"].removeprefix("forward "), "CLIENT"))
            assert every[hop["parent_id"]][:2] == wanted, hop["name"]
    # The person's time is inside each question's span, on the client's side and on the replica that asked.
    asked = [s for s in replica_spans(folder) if s["context"]["trace_id"] == trace_id and s["name"] == "elicitation"]
    answered = [s for s in otel.named("elicitation") if (s.attributes or {})["elicitor.side"] == "client"]
    assert len(answered) == 2 and len(asked) == 2
    for mine in answered:
        assert ((mine.end_time or 0) - (mine.start_time or 0)) / 1e9 >= PERSON
    for question in asked:
        took = _seconds(question["end_time"]) - _seconds(question["start_time"])
        assert took >= PERSON, question
    for points in otel.metric_points().values():
        for point in points:
            assert set(point.attributes) <= LABELS, point.attributes
            assert not {str(v) for v in point.attributes.values()} & {trace_id[2:], SECRET_NAME, *every}
    async with httpx.AsyncClient() as http:  # and each replica's scrape: bounded labels, none naming the call
        scraped = "\n".join(
            [(await http.get(f"http://127.0.0.1:{port}/metrics")).text for port in cluster.replicas.ports]
        )
    metered = "\n".join(line for line in scraped.splitlines() if line.startswith(("mcp_", "elicitor_")))
    labels = {key for key, _ in re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"', metered)}
    assert labels <= {key.replace(".", "_") for key in LABELS} | SCRAPE_LABELS, labels - SCRAPE_LABELS
    assert trace_id[2:] not in scraped and SECRET_NAME not in scraped
    for path in folder.glob("*.jsonl"):
        assert SECRET_NAME not in path.read_text()


@pytest.mark.parametrize(
    ("protocol", "upstream"),
    [
        ("2025-11-25", "2025-11-25"), ("2026-07-28", "2026-07-28"), ("2026-07-28", "2025-11-25"),
        ("2025-11-25", "auto"), ("2026-07-28", "auto"),
    ],
)  # fmt: skip
async def test_one_call_through_a_proxy_process_listening_and_the_replicas_is_one_trace(
    otel: Otel, traced_cluster: tuple[Deployment, Path], protocol: str, upstream: str, tmp_path: Path
) -> None:
    """Every hop as deployed: the client over HTTP to ``elicitor proxy --listen`` (a process, its spans written by
    its own SDK), the proxy to nginx, nginx round robin to three replicas sharing Redis. On 2025-11-25 the POSTs
    that land on a replica other than the session's are forwarded to it; on 2026-07-28 the rounds land on
    different replicas; a 2026-07-28 client in front of handshake-era replicas has its rounds held at the proxy
    as one upstream call; and the proxy left to choose (``auto``, its default), which speaks the client's era to
    these replicas of both. Every span of the call, in each of the five processes, is in one trace whose only root is
    the client's call: each request's span at the proxy is the child of the client's, the proxy's request
    upstream the child of that, the replica's span the child of the proxy's request, each hop through another
    replica under the request (or the answer) it carried, and each question's ``elicitation`` span under the
    span serving the call that asked it."""
    cluster, folder = traced_cluster
    spoken = protocol if upstream == "auto" else upstream  # auto: the tool asks in rounds, the client's era
    start = len(cluster.nginx.upstreams())
    spans_at_proxy = tmp_path / "proxy"
    spans_at_proxy.mkdir()
    port = free_port()
    command = [
        sys.executable, "-m", "tests.peers.traced_proxy", "proxy", "--listen", f"127.0.0.1:{port}",
        "--upstream-protocol", upstream, cluster.nginx.url,
    ]  # fmt: skip
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "ELICITOR_SPANS_DIR": str(spans_at_proxy)}
    with (tmp_path / "proxy.log").open("wb") as log:
        proxy = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=log, stderr=log, start_new_session=True)
    try:
        wait_for_port(port, proxy)

        async def person(request: Any) -> dict[str, Any]:
            await anyio.sleep(PERSON)
            return {"name": SECRET_NAME} if "name" in str(request.message).lower() else {"size": 4}

        handler = ScriptedHandler(otherwise=person)
        async with Client.http(f"http://127.0.0.1:{port}/mcp", elicitation=handler, protocol=protocol) as client:
            with anyio.fail_after(60):
                assert (await client.call_tool("book")).text == f"{SECRET_NAME} x4"
    finally:
        proxy.terminate()
        proxy.wait(timeout=30)
    [call] = [s for s in otel.named("tools/call book") if s.kind == SpanKind.INTERNAL]
    trace_id = f"0x{call.context.trace_id:032x}"
    ours = {
        f"0x{s.context.span_id:016x}": (
            s.name,
            s.kind.name,
            f"0x{s.parent.span_id:016x}" if s.parent else None,
            "client",
        )
        for s in otel.finished()
        if s.context.trace_id == call.context.trace_id
    }

    def theirs(where: Path) -> dict[str, tuple[str, str, str | None, str]]:
        return {
            s["context"]["span_id"]: (s["name"], s["kind"].removeprefix("SpanKind."), s["parent_id"], s["pid"])
            for s in replica_spans(where)
            if s["context"]["trace_id"] == trace_id
        }

    def every() -> dict[str, tuple[str, str, str | None, str]]:
        return {**ours, **theirs(spans_at_proxy), **theirs(folder)}

    def orphans() -> set[str]:
        found = every()
        return {
            f"{name}/{kind}" for name, kind, parent, _ in found.values() if parent is not None and parent not in found
        }

    with anyio.move_on_after(15):  # each process writes a span when it ends: the last hops end after the call
        while orphans() or len([name for name, *_ in theirs(folder).values() if name == "elicitation"]) < 2:
            await anyio.sleep(0.1)
    found = every()
    assert not orphans(), orphans()
    assert [name for name, _, parent, _ in found.values() if parent is None] == ["tools/call book"]
    at_proxy = theirs(spans_at_proxy)
    replicas = theirs(folder)
    assert at_proxy and len({pid for *_, pid in at_proxy.values()}) == 1

    def where(span: str) -> str:
        return "client" if span in ours else "proxy" if span in at_proxy else "replica"

    # Each request the replicas served for the call descends, hop by hop, from the client's request through the
    # proxy: replica SERVER <- proxy CLIENT <- proxy SERVER <- client CLIENT.
    served = [i for i, (name, kind, *_) in replicas.items() if name == "tools/call book" and kind == "SERVER"]
    assert len(served) == (3 if spoken == "2026-07-28" else 1)
    for span in served:
        chain: list[tuple[str, str, str]] = []
        at = found[span][2]
        while at is not None and len(chain) < 3:
            chain.append((*found[at][:2], where(at)))
            at = found[at][2]
        assert chain == [
            ("tools/call book", "CLIENT", "proxy"), ("tools/call book", "SERVER", "proxy"),
            ("tools/call book", "CLIENT", "client"),
        ], chain  # fmt: skip
    # Both HTTP hops say their HTTP version on both sides: the client's and the proxy's requests (CLIENT), and the
    # proxy's and the replicas' spans serving them (SERVER), an owner's for a request another replica forwarded too.
    said = {s["context"]["span_id"]: s["attributes"] for s in replica_spans(spans_at_proxy) + replica_spans(folder)}
    said.update({f"0x{s.context.span_id:016x}": dict(s.attributes or {}) for s in otel.finished()})
    hops_of_call = [i for i, (name, kind, *_) in found.items() if name == "tools/call book" and kind != "INTERNAL"]
    assert {said[i].get("network.protocol.version") for i in hops_of_call} == {"1.1"}
    # The person's side of each question is in the call too: on 2026-07-28 under the client's span for the call;
    # on 2025-11-25 under the question pushed to it, which the proxy relayed from the one the replica pushed
    # under the question's span there.
    answered = [i for i in ours if ours[i][0] == "elicitation"]
    assert len(answered) == 2
    for span in answered:
        chain = []
        at = found[span][2]
        while at is not None and len(chain) < (1 if protocol == "2026-07-28" else 6):
            chain.append((*found[at][:2], where(at)))
            at = found[at][2]
        if protocol == "2026-07-28":
            assert chain == [("tools/call book", "INTERNAL", "client")], chain
        else:
            assert chain == [
                ("elicitation/create", "SERVER", "client"), ("elicitation/create", "CLIENT", "proxy"),
                ("elicitation/create", "SERVER", "proxy"), ("elicitation/create", "CLIENT", "replica"),
                ("elicitation", "INTERNAL", "replica"), ("tools/call book", "SERVER", "replica"),
            ], chain  # fmt: skip
    # Each question's span on the replica that recorded it is under the span serving the call that asked it.
    asked = [i for i, (name, *_) in replicas.items() if name == "elicitation"]
    assert len(asked) == 2
    assert {found[i][2] for i in asked} <= set(served)  # (a SERVER span of tools/call book)
    landed = {u for _, u in cluster.nginx.upstreams()[start:] if u != "-"}
    assert len(landed) >= 2
    if spoken == "2026-07-28":  # the rounds, retried on other replicas, each under the client's own request
        assert len({found[i][3] for i in served}) >= 2
        return
    # 2025-11-25: the session lives on one replica; a POST that landed on another is a forward span there, under
    # the proxy's request it carried or the answer it passed on, and the owner's side of it is in the trace too.
    [owner] = {found[i][3] for i in served}
    hops = {i: v for i, v in replicas.items() if v[0].startswith("forward ")}
    assert hops and all(pid != owner for *_, pid in hops.values())
    for name, _, parent, _ in hops.values():
        assert parent is not None, name
        if name == "forward response":  # the proxy passes the answer on naming the client's span for the question
            answer = (
                ("elicitation", "INTERNAL", "client")
                if protocol == spoken
                else ("elicitation/create", "SERVER", "proxy")
            )
            assert (*found[parent][:2], where(parent)) == answer, found[parent]
        else:
            assert (*found[parent][:2], where(parent)) == (name.removeprefix("forward "), "CLIENT", "proxy"), name
    # The owner's side of each forwarded answer, under the question the answer is to.
    received = [v for v in replicas.values() if v[0] == "forwarded response"]
    assert len(received) == len([v for v in hops.values() if v[0] == "forward response"])
    for _, _, parent, pid in received:
        assert pid == owner and parent is not None and found[parent][:2] == ("elicitation/create", "CLIENT")
    for path in [*folder.glob("*.jsonl"), *spans_at_proxy.glob("*.jsonl")]:
        assert SECRET_NAME not in path.read_text()


def _seconds(stamp: str) -> float:
    """A span's time as the SDK's JSON writes it (ISO 8601, UTC), in seconds."""
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def test_a_hop_through_another_replica_is_a_span_even_when_the_client_names_no_trace(
    otel: Otel, traced_cluster: tuple[Deployment, Path]
) -> None:
    """A client without telemetry (most clients) puts no trace context in its requests or its answers: each POST
    that lands on a replica other than the session's is still a ``forward`` span there, the root of a trace of its
    own marked ``elicitor.trace_context = absent``, with the same few attributes as any forward and nothing of
    the answer."""
    from elicitor import telemetry

    cluster, folder = traced_cluster
    before = {s["context"]["span_id"] for s in replica_spans(folder)}
    telemetry.configure("off")  # this client injects nothing (the fixture turns it back on)
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"size": 4}])
    start = len(cluster.nginx.upstreams())
    with anyio.fail_after(30):
        async with Client.http(cluster.nginx.url, elicitation=handler, protocol="2025-11-25") as client:
            assert (await client.call_tool("book")).text == f"{SECRET_NAME} x4"
    posted = [u for request, u in cluster.nginx.upstreams()[start:] if request.startswith("POST")]
    assert len(set(posted)) >= 2  # round robin: some POSTs were forwarded to the session's replica

    def forwards() -> list[dict[str, Any]]:
        spans = replica_spans(folder)
        return [s for s in spans if s["name"].startswith("forward ") and s["context"]["span_id"] not in before]

    with anyio.fail_after(10):
        while not forwards():
            await anyio.sleep(0.05)
    await anyio.sleep(0.5)  # a forward ends once what it relays has been sent: let the last ones land
    hops = forwards()
    assert any(hop["name"] == "forward response" for hop in hops) or len(hops) >= 2, [h["name"] for h in hops]
    for hop in hops:
        assert hop["parent_id"] is None, hop  # a root: the POST's own context is not the call's
        attributes = hop["attributes"]
        assert attributes["elicitor.trace_context"] == "absent"
        assert attributes["elicitor.forwarded_to"] and attributes["mcp.session.id"]
        assert set(attributes) <= {
            "elicitor.trace_context", "elicitor.forwarded_to", "mcp.session.id", "jsonrpc.request.id",
            "mcp.method.name", "gen_ai.tool.name", "gen_ai.operation.name",
        }, attributes  # fmt: skip
    for path in folder.glob("*.jsonl"):
        assert SECRET_NAME not in path.read_text()


async def test_an_answer_forwarded_for_a_client_that_names_no_trace_is_in_the_call_trace(
    traced_cluster: tuple[Deployment, Path],
) -> None:
    """The official SDK's answers carry no trace context, so the replica an answer lands on can only start a trace
    of its own for its ``forward response`` span. The owner knows the question it answers: it records a
    ``forwarded response`` span under that question's ``elicitation/create`` span, in the call's trace, linked
    to the forwarding replica's span, naming that replica and the time the answer waited in the store, with the
    same few attributes and nothing of the answer."""
    cluster, folder = traced_cluster
    before = {s["context"]["span_id"] for s in replica_spans(folder)}

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        content: dict[str, str | int | float | bool | list[str] | None]
        content = {"name": SECRET_NAME} if "name" in params.message else {"size": 2}
        return types.ElicitResult(action="accept", content=content)

    def new(name: str) -> list[dict[str, Any]]:
        return [s for s in replica_spans(folder) if s["name"] == name and s["context"]["span_id"] not in before]

    with anyio.fail_after(120):
        async with McpClient(cluster.nginx.url, elicitation_callback=callback, mode="legacy") as client:
            for _ in range(8):  # round robin: until an answer lands on a replica that does not run the session
                result = await client.call_tool("book", {})
                assert result.content[0].text == f"{SECRET_NAME} x2"  # type: ignore[union-attr]
                with anyio.move_on_after(2):  # a forward span ends once the POST is answered: let it land
                    while not new("forward response"):
                        await anyio.sleep(0.05)
                if new("forward response"):
                    break
    hops = new("forward response")
    assert hops, "no answer was forwarded"
    for hop in hops:  # the client named no trace: each hop's own span is a root
        assert hop["parent_id"] is None and hop["attributes"]["elicitor.trace_context"] == "absent"
    with anyio.move_on_after(10):
        while len(new("forwarded response")) < len(hops):
            await anyio.sleep(0.05)
    assert len(new("forwarded response")) == len(hops), "the owner recorded no span for a forwarded answer"
    spans = [s for s in replica_spans(folder) if s["context"]["span_id"] not in before]
    by_id = {s["context"]["span_id"]: s for s in spans}
    received = {link["context"]["span_id"]: s for s in new("forwarded response") for link in s["links"]}
    for hop in hops:
        span = received[hop["context"]["span_id"]]  # linked to the forwarding replica's span
        [link] = span["links"]
        assert link["context"]["trace_id"] == hop["context"]["trace_id"]
        assert link["attributes"] == {"elicitor.link": "forwarded"}
        question = by_id[span["parent_id"]]  # under the question it answers, on the owner, in the call's trace
        assert question["name"] == "elicitation/create" and question["kind"] == "SpanKind.CLIENT"
        assert span["pid"] == question["pid"] != hop["pid"]
        [call] = [
            s for s in spans
            if s["name"] == "tools/call book" and s["kind"] == "SpanKind.SERVER"
            and s["context"]["trace_id"] == span["context"]["trace_id"]
        ]  # fmt: skip
        assert call["pid"] == span["pid"]
        attributes = span["attributes"]
        assert set(attributes) == {
            "jsonrpc.request.id",
            "mcp.session.id",
            "elicitor.forwarded_by",
            "elicitor.store.wait",
        }
        assert attributes["jsonrpc.request.id"] == hop["attributes"]["jsonrpc.request.id"]
        assert attributes["mcp.session.id"] == hop["attributes"]["mcp.session.id"]
        assert attributes["elicitor.forwarded_by"] != hop["attributes"]["elicitor.forwarded_to"]
        assert attributes["elicitor.store.wait"] >= 0
    for path in folder.glob("*.jsonl"):
        assert SECRET_NAME not in path.read_text()


async def test_a_request_forwarded_for_a_client_that_names_no_trace_links_to_the_owners_span(
    traced_cluster: tuple[Deployment, Path],
) -> None:
    """The official SDK's requests carry no trace context, so a ``tools/call`` that lands on a replica other than
    the session's is forwarded inside a ``forward tools/call …`` span that is the root of a trace of its own, and
    the owner's ``SERVER`` span for it starts another. The owner's span links to the forwarding one
    (``elicitor.link = forwarded``) and names that replica and the time the request waited in the store, so an
    operator goes from either to the other."""
    cluster, folder = traced_cluster
    before = {s["context"]["span_id"] for s in replica_spans(folder)}

    def new(name: str) -> list[dict[str, Any]]:
        return [s for s in replica_spans(folder) if s["name"] == name and s["context"]["span_id"] not in before]

    owners = set()
    with anyio.fail_after(120):
        async with McpClient(cluster.nginx.url, mode="legacy") as client:
            for _ in range(8):  # round robin: until a call lands on a replica that does not run the session
                result = await client.call_tool("replica", {})
                owners.add(result.content[0].text)  # type: ignore[union-attr]
                with anyio.move_on_after(2):  # a forward span ends once the answer is relayed: let it land
                    while not new("forward tools/call replica"):
                        await anyio.sleep(0.05)
                if new("forward tools/call replica"):
                    break
    hops = new("forward tools/call replica")
    assert hops, "no request was forwarded"
    [owner] = owners  # one session, on one replica
    for hop in hops:  # the client named no trace: each hop's own span is a root
        assert hop["parent_id"] is None and hop["attributes"]["elicitor.trace_context"] == "absent"
    with anyio.move_on_after(10):
        while len([s for s in new("tools/call replica") if s["kind"] == "SpanKind.SERVER"]) < len(hops):
            await anyio.sleep(0.05)
    served = [s for s in new("tools/call replica") if s["kind"] == "SpanKind.SERVER"]
    assert {s["pid"] for s in served} == {owner}
    linked = {link["context"]["span_id"]: s for s in served for link in s["links"]}
    for hop in hops:
        span = linked.get(hop["context"]["span_id"])
        assert span is not None, "the owner's span for a forwarded request does not link to the forwarding span"
        [link] = span["links"]
        assert link["context"]["trace_id"] == hop["context"]["trace_id"] != span["context"]["trace_id"]
        assert link["attributes"] == {"elicitor.link": "forwarded"}
        assert span["pid"] != hop["pid"]
        attributes = span["attributes"]
        assert attributes["jsonrpc.request.id"] == hop["attributes"]["jsonrpc.request.id"]
        assert attributes["mcp.session.id"] == hop["attributes"]["mcp.session.id"]
        assert attributes["elicitor.forwarded_by"] != hop["attributes"]["elicitor.forwarded_to"]
        assert attributes["elicitor.store.wait"] >= 0
    for span in served:  # a call that landed on the owner itself says nothing of a hop
        if not span["links"]:
            assert "elicitor.forwarded_by" not in span["attributes"]


async def test_behind_a_trusted_balancer_each_span_names_the_person_even_for_a_request_forwarded_to_its_owner(
    traced_cluster: tuple[Deployment, Path],
) -> None:
    """The replicas believe nginx's ``X-Forwarded-For`` (``FORWARDED_ALLOW_IPS``, nginx being on 127.0.0.1): the
    person, connected to nginx from 127.0.0.2, is the ``client.address`` of every ``SERVER`` span of their calls,
    a call served where it landed as a call another replica forwarded to the session's owner (which never saw
    its POST, and named nobody: the envelope now says who sent it). The address the person's own
    ``X-Forwarded-For`` claims is believed nowhere: only what nginx added, from a peer the replicas trust."""
    cluster, folder = traced_cluster
    before = {s["context"]["span_id"] for s in replica_spans(folder)}

    def new(name: str) -> list[dict[str, Any]]:
        return [s for s in replica_spans(folder) if s["name"] == name and s["context"]["span_id"] not in before]

    person = httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(local_address="127.0.0.2"), headers={"x-forwarded-for": "203.0.113.9"}
    )
    calls = 0
    with anyio.fail_after(120):
        async with person, Client.http(cluster.nginx.url, http=person, protocol="2025-11-25") as client:
            # Round robin: until one call landed on the session's replica and one on another (forwarded).
            while calls < 12 and not (
                new("forward tools/call replica") and calls > len(new("forward tools/call replica"))
            ):
                await client.call_tool("replica")
                calls += 1
                with anyio.move_on_after(2):  # a forward span ends once the answer is relayed: let it land
                    while len(new("tools/call replica")) < calls:
                        await anyio.sleep(0.05)
        while len([s for s in new("tools/call replica") if s["kind"] == "SpanKind.SERVER"]) < calls:
            await anyio.sleep(0.05)
    served = [s for s in new("tools/call replica") if s["kind"] == "SpanKind.SERVER"]
    forwarded = [s for s in served if "elicitor.forwarded_by" in s["attributes"]]
    assert forwarded and len(forwarded) < len(served)  # both kinds: forwarded to the owner, and served where it landed
    for span in served:
        assert span["attributes"]["client.address"] == "127.0.0.2", span["attributes"]
        assert "client.port" not in span["attributes"]  # X-Forwarded-For names no port: nginx's is not theirs
    for path in folder.glob("*.jsonl"):
        assert "203.0.113.9" not in path.read_text()


def test_replicas_before_and_after_the_hop_read_each_others_requests() -> None:
    """As for an answer (below): a forwarded request's envelope with its hop is read by a replica that does not
    know it, one without is read by a replica that does, and without a tracer it is byte for byte what it was."""
    import msgspec

    from elicitor.server.http._peer_wire import Hop, Open, PeerMessage

    class Before(msgspec.Struct, tag="open", frozen=True):
        session: str
        request: int | str
        body: bytes
        reply: str
        token: str

    encode = msgspec.msgpack.Encoder().encode
    body = b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"replica"}}'
    assert encode(Open("s", 3, body, "r2", "t")) == encode(Before("s", 3, body, "r2", "t"))
    hop = Hop("00-" + "1" * 32 + "-" + "2" * 16 + "-01", 3, 1_700_000_000_000_000_000, "r2")
    traced = encode(Open("s", 3, body, "r2", "t", hop))
    assert msgspec.msgpack.decode(traced, type=Before) == Before("s", 3, body, "r2", "t")
    assert msgspec.msgpack.decode(encode(Before("s", 3, body, "r2", "t")), type=PeerMessage) == Open(
        "s", 3, body, "r2", "t"
    )
    assert msgspec.msgpack.decode(traced, type=PeerMessage) == Open("s", 3, body, "r2", "t", hop)
    # Who POSTed it, for the owner's span: ignored by a replica that does not know it.
    peer: dict[str, str | int] = {
        "client.address": "192.0.2.7",
        "client.port": 50000,
        "network.protocol.version": "1.1",
    }
    told = encode(Open("s", 3, body, "r2", "t", hop, peer))
    assert msgspec.msgpack.decode(told, type=Before) == Before("s", 3, body, "r2", "t")
    assert msgspec.msgpack.decode(told, type=PeerMessage) == Open("s", 3, body, "r2", "t", hop, peer)


def test_replicas_before_and_after_the_hop_read_each_others_answers() -> None:
    """A rolling upgrade mixes replicas that send a forwarded answer's hop and replicas that do not know it: each
    reads the other's envelope (the hop is ignored, or absent), and without a tracer the envelope is byte for byte
    what it was before the hop existed."""
    import msgspec

    from elicitor.server.http._peer_wire import Deliver, Hop, PeerMessage

    class Before(msgspec.Struct, tag="deliver", frozen=True):
        session: str
        body: bytes

    encode = msgspec.msgpack.Encoder().encode
    body = b'{"jsonrpc":"2.0","id":1,"result":{"action":"accept"}}'
    assert encode(Deliver("s", body)) == encode(Before("s", body))
    hop = Hop("00-" + "1" * 32 + "-" + "2" * 16 + "-01", 1, 1_700_000_000_000_000_000, "r1")
    assert msgspec.msgpack.decode(encode(Deliver("s", body, hop)), type=Before) == Before("s", body)
    assert msgspec.msgpack.decode(encode(Before("s", body)), type=PeerMessage) == Deliver("s", body)
    assert msgspec.msgpack.decode(encode(Deliver("s", body, hop)), type=PeerMessage) == Deliver("s", body, hop)


async def test_a_task_picked_up_by_another_client_links_to_its_creation_on_any_replica(
    otel: Otel, traced_cluster: tuple[Deployment, Path]
) -> None:
    """One client starts a task through the balancer and leaves; another client object picks it up by id and
    answers it. The replica that created it kept its trace context in the task's record (Redis), so the SERVER
    span of every later tasks/* request, on whichever replica, and the second client's CLIENT spans link to the
    creating tools/call span, while living in traces of their own."""
    cluster, folder = traced_cluster
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"size": 3}])  # the first client declares it too; never asked
    async with Client.http(cluster.nginx.url, elicitation=handler, protocol="2026-07-28") as first:
        started = await first.start_tool("long_booking")
    assert started.id is not None
    with anyio.fail_after(60):
        async with Client.http(cluster.nginx.url, elicitation=handler, protocol="2026-07-28") as second:
            picked = await second.task(started.id)
            assert (await picked.wait()).text.startswith(f"{SECRET_NAME} x3")
    [call] = [s for s in otel.named("tools/call long_booking") if s.kind == SpanKind.CLIENT]
    created_in = f"0x{call.context.trace_id:032x}"
    with anyio.fail_after(10):
        while not [s for s in replica_spans(folder) if s["name"] == "tools/call long_booking"]:
            await anyio.sleep(0.05)
    [created] = [
        s for s in replica_spans(folder)
        if s["name"] == "tools/call long_booking" and s["kind"] == "SpanKind.SERVER"
        and s["context"]["trace_id"] == created_in
    ]  # fmt: skip
    origin = (created["context"]["trace_id"], created["context"]["span_id"])
    ours = [s for s in otel.finished() if str(s.name).startswith("tasks/") and s.kind == SpanKind.CLIENT]
    assert {s.name for s in ours} >= {"tasks/get", "tasks/update"}
    for span in ours:
        assert f"0x{span.context.trace_id:032x}" != created_in  # a trace of its own
        linked = {(f"0x{link.context.trace_id:032x}", f"0x{link.context.span_id:016x}") for link in span.links}
        assert origin in linked, span.name
    later_ids = {f"0x{s.context.span_id:016x}" for s in ours}
    with anyio.fail_after(10):
        while len([s for s in replica_spans(folder) if s.get("parent_id") in later_ids]) < len(ours):
            await anyio.sleep(0.05)
    served = [s for s in replica_spans(folder) if s.get("parent_id") in later_ids]
    for at in served:
        assert at["kind"] == "SpanKind.SERVER" and at["context"]["trace_id"] != created_in
        assert origin in {(link["context"]["trace_id"], link["context"]["span_id"]) for link in at["links"]}
    assert len({at["pid"] for at in served} | {created["pid"]}) >= 2  # round robin: other replicas than its own
    for path in folder.glob("*.jsonl"):
        assert SECRET_NAME not in path.read_text()


async def test_a_running_replica_is_scraped_once(traced_cluster: tuple[Deployment, Path]) -> None:
    cluster, _ = traced_cluster
    for protocol in ("2026-07-28", "2025-11-25"):  # the second forwards POSTs between replicas through Redis
        handler = ScriptedHandler([{"name": "Ada"}, {"size": 2}])
        async with Client.http(cluster.nginx.url, elicitation=handler, protocol=protocol) as client:
            await client.call_tool("book")
    texts = []
    async with httpx.AsyncClient() as http:
        for port in cluster.replicas.ports:
            response = await http.get(f"http://127.0.0.1:{port}/metrics")
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/plain")
            texts.append(response.text)
    scraped = "\n".join(texts)
    assert "mcp_server_operation_duration_seconds_bucket" in scraped
    assert 'mcp_method_name="tools/call"' in scraped
    assert "elicitor_rounds_total" in scraped and "elicitor_runs_parked" in scraped
    assert "elicitor_elicitation_pending" in scraped
    assert 'elicitor_store_operation_duration_seconds_count{elicitor_store_operation="' in scraped  # Redis, timed
    # What was being done, never which replica it was done with: a replica's id is new at every restart.
    operations = set(re.findall(r'elicitor_store_operation="([^"]*)"', scraped))
    assert {"forwarding to a replica", "sending on a queue"} <= operations, operations
    assert not [op for op in operations if re.search(r"[0-9a-f]{16}|replica:|tasks:", op)], operations
    assert "Ada" not in scraped


async def test_fastmcp_and_elicitor_call_each_other_in_one_trace() -> None:
    """FastMCP's client calls elicitor's server, elicitor's client calls FastMCP's server (both propagate trace
    context in ``_meta``): each call and the question it asks is one trace across the two libraries."""
    pytest.importorskip("fastmcp")
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [sys.executable, "-m", "tests.peers.fastmcp_traced"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
        )
    spans = [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]
    by_span = {s["span"]: s for s in spans}

    def parent(span: dict[str, Any]) -> dict[str, Any]:
        found: dict[str, Any] = by_span[span["parent"]]
        return found

    # FastMCP's client -> elicitor's server: our SERVER span's parent is FastMCP's (its SDK's) CLIENT span.
    [greet] = [s for s in spans if s["name"] == "tools/call greet" and s["scope"] == "elicitor"]
    assert greet["kind"] == "SERVER" and parent(greet)["scope"] != "elicitor"
    asked = [
        s for s in spans if s["name"] == "elicitation/create" and s["kind"] == "CLIENT" and s["scope"] == "elicitor"
    ]
    assert asked and all(s["trace"] == greet["trace"] for s in asked)
    [root] = [s for s in spans if s["trace"] == greet["trace"] and s["parent"] is None]
    assert (root["scope"], root["name"]) == ("fastmcp", "tools/call greet")
    # elicitor's client -> FastMCP's server: FastMCP's SERVER span's parent is our CLIENT span, and FastMCP's
    # question reaches our client in the same trace.
    [welcome] = [s for s in spans if s["name"] == "tools/call welcome" and s["scope"] == "fastmcp"]
    assert welcome["kind"] == "SERVER" and parent(welcome)["scope"] == "elicitor"
    answered = [s for s in spans if s["name"] == "elicitation/create" and s["kind"] == "SERVER"]
    assert [s["trace"] for s in answered] == [welcome["trace"]]
    assert any(s["name"] == "elicitation" and s["trace"] == welcome["trace"] for s in spans)


def test_an_answer_forwarded_to_a_question_no_longer_waiting_stays_in_the_forwarders_trace(otel: Otel) -> None:
    """An answer that reaches the owner once its question stopped waiting (answered late): the owner's side of the
    hop goes under the forwarding replica's span instead, and a forwarder whose clock runs ahead makes the wait 0,
    never negative."""
    from elicitor.telemetry import _hooks

    forwarder = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    _hooks.received_forwarded(None, forwarder, 7, time.time_ns() + 60 * 10**9, "r2", "session")
    [span] = otel.named("forwarded response")
    assert span.parent is not None and f"{span.parent.span_id:016x}" == "b" * 16
    assert f"{span.context.trace_id:032x}" == "a" * 32 and not span.links
    assert (span.attributes or {})["elicitor.store.wait"] == 0
    assert (span.attributes or {})["elicitor.forwarded_by"] == "r2"


async def test_a_forwarded_request_answered_without_being_served_leaves_nothing_of_its_hop() -> None:
    """The owner keeps a forwarded request's hop until the request is served; one the dispatch answers without
    serving it (refused) drops it with its answer, so a long session does not gather them."""
    from elicitor.server.http._handshake import SessionTransport
    from elicitor.state import MemoryEventStore
    from elicitor.telemetry._hooks import Forwarded

    session = SessionTransport("session", MemoryEventStore())
    session.open(4)
    session.open(5)
    session.forwarded[4] = Forwarded("00-" + "1" * 32 + "-" + "2" * 16 + "-01", "r2", 0.001)
    session.forwarded[5] = Forwarded("00-" + "3" * 32 + "-" + "4" * 16 + "-01", "r2", 0.001)
    try:
        await session.send(b'{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"refused"}}', 4, final=True)
        assert list(session.forwarded) == [5]
    finally:
        await session.end()


HEADER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
HEADER_SPAN = "00f067aa0ba902b7"


async def _post(http: httpx.AsyncClient, url: str, message: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    """POST one JSON-RPC message, reading the whole response (JSON or an SSE stream)."""
    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    return await http.post(url, content=json.dumps(message), headers={**accept, **headers})


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_a_trace_named_only_in_the_http_header_is_the_parent_of_the_server_span(
    otel: Otel, protocol: str
) -> None:
    """A client whose HTTP library is traced but which puts nothing in ``_meta`` sends the trace context as the
    W3C ``traceparent`` header alone. The server's span for the request continues that trace, as an HTTP server
    instrumentation would make it do; a request that names a trace in ``_meta`` keeps that one (``_meta`` wins)."""
    header = {"traceparent": f"00-{HEADER_TRACE}-{HEADER_SPAN}-01"}
    meta_trace, meta_span = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    in_meta = {"traceparent": f"00-{meta_trace}-{meta_span}-01"}
    async with serving(server.http_app()) as url, httpx.AsyncClient(timeout=30) as http:
        if protocol == "2025-11-25":
            opened = await _post(http, url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": protocol, "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"},
            }}, {})  # fmt: skip
            session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": protocol}
            await _post(http, url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
            meta: dict[str, Any] = {}
        else:
            session = {"mcp-protocol-version": protocol, "mcp-method": "tools/call", "mcp-name": "refuse"}
            meta = {
                "io.modelcontextprotocol/protocolVersion": protocol,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "curl", "version": "1"},
            }
        for request_id, extra in ((1, {}), (2, in_meta)):
            params = {"name": "refuse", "arguments": {}, "_meta": {**meta, **extra}}
            call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
            answered = await _post(http, url, call, {**session, **header})
            assert '"isError":true' in answered.text.replace(" ", "")
    spans = [s for s in otel.named("tools/call refuse") if s.kind == SpanKind.SERVER]
    served = {(s.attributes or {})["jsonrpc.request.id"]: s for s in spans}
    by_header, by_meta = served["1"], served["2"]
    assert f"{by_header.context.trace_id:032x}" == HEADER_TRACE
    assert by_header.parent is not None and f"{by_header.parent.span_id:016x}" == HEADER_SPAN
    assert f"{by_meta.context.trace_id:032x}" == meta_trace
    assert by_meta.parent is not None and f"{by_meta.parent.span_id:016x}" == meta_span


async def test_a_request_refused_while_redis_is_paused_is_a_span_in_the_callers_trace(
    otel: Otel, redis: RedisServer
) -> None:
    """A request that lands on a replica while the shared store cannot be reached, past what that replica holds
    for it, is refused with 503 before anything serves it. It is still a ``SERVER`` span there, in the trace the
    caller named: ``error.type`` -32603, the HTTP status, status ``ERROR`` with the refusal's reference (what finds
    the log line) and an ``exception`` event naming the store's error, nothing of the store's address; and it is
    counted in ``mcp.server.operation.duration`` with its error."""
    from redis.asyncio import Redis

    trace_id, parent = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
    call = rpc("tools/list", {"_meta": {"traceparent": f"00-{trace_id}-{parent}-01"}}, id=3)
    async with two_replicas(redis.url, lease=1.0, timeout=1.0) as (a, b, apps), httpx.AsyncClient(timeout=30) as http:
        headers = await open_session(http, a)
        apps[1]._hold.max_waiting = 0
        admin = Redis.from_url(redis.url)
        try:
            await admin.execute_command("CLIENT", "PAUSE", "4000", "ALL")
            with anyio.fail_after(60):
                refused = await http.post(b, json=call, headers=headers)
        finally:
            await admin.aclose()
    assert refused.status_code == 503
    reference = refused.json()["error"]["data"]["reference"]
    [span] = [
        s for s in otel.named("tools/list") if s.kind == SpanKind.SERVER and s.context.trace_id == int(trace_id, 16)
    ]
    assert span.parent is not None and f"{span.parent.span_id:016x}" == parent
    attributes = span.attributes or {}
    assert attributes["error.type"] == attributes["rpc.response.status_code"] == "-32603"
    assert attributes["http.response.status_code"] == 503 and attributes["jsonrpc.request.id"] == "3"
    assert span.status.status_code == StatusCode.ERROR and reference in (span.status.description or "")
    [event] = span.events
    assert event.name == "exception" and "StoreUnavailable" in str((event.attributes or {})["exception.type"])
    redis_address = httpx.URL(redis.url)
    exported = otel.exported_bytes()
    assert f"{redis_address.host}:{redis_address.port}" not in exported
    durations = [p for p in otel.metric_points()["mcp.server.operation.duration"] if p.attributes.get("error.type")]
    assert [p.attributes["mcp.method.name"] for p in durations] == ["tools/list"]


async def test_every_message_refused_before_its_session_took_it_is_a_span(otel: Otel, redis: RedisServer) -> None:
    """Not only a request: a person's answer and a notification POSTed while the shared store cannot be reached
    (refused promptly: this replica holds no request for it, and its outbox is full) are spans too, in the trace
    they name. The answer is a ``response`` span under the context elicitor's client puts in its ``result._meta``
    (or, naming none, the root of a trace of its own, ``elicitor.trace_context = absent``), with nothing of the
    answer; the notification a ``SERVER`` span as if served. A request for a session that does not exist is one
    too: the caller's mistake, ``error.type`` -32600 and HTTP 404, without an error status."""
    from redis.asyncio import Redis

    trace_id = "6c9f0e1d2b3a4958a7b6c5d4e3f20110"
    answer_parent, note_parent, lost_parent = "a1a2a3a4a5a6a7a8", "b1b2b3b4b5b6b7b8", "c1c2c3c4c5c6c7c8"
    traced = {"traceparent": f"00-{trace_id}-{answer_parent}-01"}
    answer = {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"action": "accept", "content": {"name": SECRET_NAME}, "_meta": traced},
    }
    untraced = {"jsonrpc": "2.0", "id": 8, "result": {"action": "accept", "content": {"city": SECRET_CITY}}}
    note = rpc("notifications/cancelled", {"requestId": 3, "_meta": {"traceparent": f"00-{trace_id}-{note_parent}-01"}})
    lost = rpc("tools/list", {"_meta": {"traceparent": f"00-{trace_id}-{lost_parent}-01"}}, id=4)
    statuses: dict[int, int] = {}
    async with two_replicas(redis.url, lease=1.0, timeout=1.0) as (a, b, apps), httpx.AsyncClient(timeout=30) as http:
        headers = await open_session(http, a)
        apps[1]._hold.max_waiting = 0
        apps[1]._handshake._outbox.max_messages = 0  # keeps no answer for later either: each is refused 503
        admin = Redis.from_url(redis.url)
        try:
            await admin.execute_command("CLIENT", "PAUSE", "5000", "ALL")

            async def post(message: dict[str, Any]) -> None:
                statuses[id(message)] = (await http.post(b, json=message, headers=headers)).status_code

            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    for message in (answer, untraced, note):
                        tg.start_soon(post, message)
        finally:
            await admin.aclose()
        with anyio.fail_after(60):
            unknown = {**headers, "mcp-session-id": "no-such-session-0123456789abcdef"}
            assert (await http.post(a, json=lost, headers=unknown)).status_code == 404
    assert list(statuses.values()) == [503, 503, 503]
    spans = otel.finished()

    def under(parent: str) -> ReadableSpan:
        [span] = [s for s in spans if s.parent is not None and f"{s.parent.span_id:016x}" == parent]
        assert f"{span.context.trace_id:032x}" == trace_id
        return span

    for span, name, kind in (
        (under(answer_parent), "response", SpanKind.INTERNAL),
        (under(note_parent), "notifications/cancelled", SpanKind.SERVER),
    ):
        attributes = span.attributes or {}
        assert (span.name, span.kind) == (name, kind)
        assert attributes["error.type"] == "-32603" and attributes["http.response.status_code"] == 503
        assert span.status.status_code == StatusCode.ERROR and "reference" in (span.status.description or "")
        assert [e.name for e in span.events] == ["exception"]
    assert (under(answer_parent).attributes or {})["jsonrpc.request.id"] == "7"
    [alone] = [s for s in spans if s.name == "response" and (s.attributes or {}).get("jsonrpc.request.id") == "8"]
    assert alone.parent is None and (alone.attributes or {})["elicitor.trace_context"] == "absent"
    missing = under(lost_parent)
    assert (missing.name, missing.kind) == ("tools/list", SpanKind.SERVER)
    attributes = missing.attributes or {}
    assert attributes["error.type"] == "-32600" and attributes["http.response.status_code"] == 404
    assert missing.status.status_code == StatusCode.UNSET
    exported = otel.exported_bytes()
    assert SECRET_NAME not in exported and SECRET_CITY not in exported


def test_replicas_before_and_after_the_completions_trace_read_each_others_notices() -> None:
    """A URL completion's notice to the replica holding the connection carries the completion's ``traceparent``
    now: a replica that does not know it ignores it, one that does reads a notice without it, and without a
    tracer the notice is byte for byte what it was."""
    import msgspec

    from elicitor.server._url import UrlComplete
    from elicitor.server.http._peer_wire import PeerMessage

    class Before(msgspec.Struct, tag="url-complete", frozen=True):
        connection: str
        elicitation: str

    encode = msgspec.msgpack.Encoder().encode
    traced = UrlComplete("c", "e", "00-" + "1" * 32 + "-" + "2" * 16 + "-01")
    assert encode(UrlComplete("c", "e")) == encode(Before("c", "e"))
    assert msgspec.msgpack.decode(encode(traced), type=Before) == Before("c", "e")
    assert msgspec.msgpack.decode(encode(Before("c", "e")), type=PeerMessage) == UrlComplete("c", "e")
    assert msgspec.msgpack.decode(encode(traced), type=PeerMessage) == traced


linker = Server("linker", "1.0", state=StateSealer([generate_key()]))


@linker.tool()
async def link(ctx: Context) -> str:
    """A URL-mode question: the person agrees to visit a page, which completes it later."""
    assert isinstance(await ctx.elicit_url("Link your account.", "https://pages.example/l/{elicitation_id}"), Accepted)
    return "asked"


async def test_a_url_completion_on_another_replica_tells_the_client_in_the_calls_trace(
    otel: Otel, redis: RedisServer
) -> None:
    """2025-11-25 on two replicas: the session (and the client's connection) is on A, the person's page completes
    the elicitation on B. B's ``elicitation complete`` span is in the call's trace; the notice goes through the
    store to A, which tells the client: that ``notifications/elicitation/complete`` is a ``CLIENT`` span on A
    under B's completion (its ``traceparent`` travelled with the notice), and the client's ``SERVER`` span for it
    is its child, so the whole visit is one trace."""
    person = ScriptedHandler(["accept"], modes=frozenset({"form", "url"}))
    async with (
        two_replicas(redis.url, linker) as (a, _, apps),
        Client.http(a, elicitation=person, protocol="2025-11-25") as client,
    ):
        with anyio.fail_after(30):
            assert (await client.call_tool("link")).text == "asked"
            [request] = person.url_requests
            assert await apps[1].server.complete_url_elicitation(request.url.rsplit("/", 1)[1])
            while not [s for s in otel.named("notifications/elicitation/complete") if s.kind == SpanKind.SERVER]:
                await anyio.sleep(0.02)
    [call] = [s for s in otel.named("tools/call link") if s.kind == SpanKind.INTERNAL]
    [done] = otel.named("elicitation complete")
    assert (done.attributes or {})["elicitor.elicitation.notified"] == "replica"
    [told] = [s for s in otel.named("notifications/elicitation/complete") if s.kind == SpanKind.CLIENT]
    [heard] = [s for s in otel.named("notifications/elicitation/complete") if s.kind == SpanKind.SERVER]
    assert told.parent is not None and told.parent.span_id == done.context.span_id
    assert heard.parent is not None and heard.parent.span_id == told.context.span_id
    assert {s.context.trace_id for s in (call, done, told, heard)} == {call.context.trace_id}


bookings = Server("bookings", "1.0")


@bookings.tool()
async def book_table(ctx: Context) -> str:
    """Asks three questions, one after the other."""
    for key, schema in (("name", NAME), ("city", CITY), ("guest", NAME)):
        assert isinstance(await ctx.elicit(f"{key}?", schema, key=key), Accepted)
    return "booked"


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_each_question_of_a_call_is_under_the_request_that_asked_it(otel: Otel, protocol: str) -> None:
    """A call whose tool asks three questions, over HTTP. 2025-11-25: each question is an ``elicitation`` span
    under the server's span for the call, the ``elicitation/create`` it pushed under that, and the client's
    handling and the person's answer under that. 2026-07-28: each question is asked in a round of its own, and its
    server-side ``elicitation`` span is under the round whose response carried it, also when the run parked by
    the first round goes on in the later ones; the person's answers are under the client's span for the call."""
    answers = ScriptedHandler([{"name": SECRET_NAME}, {"city": SECRET_CITY}, {"name": SECRET_NAME}])
    async with serving(bookings.http_app()) as url, Client.http(url, elicitation=answers, protocol=protocol) as client:
        assert (await client.call_tool("book_table")).text == "booked"
    spans = [s for s in otel.finished() if s.name not in SETUP]
    assert len({s.context.trace_id for s in spans}) == 1
    index = {s.context.span_id: s for s in spans}

    def parent(span: ReadableSpan) -> ReadableSpan:
        assert span.parent is not None
        return index[span.parent.span_id]

    [call] = [s for s in spans if s.name == "tools/call book_table" and s.kind == SpanKind.INTERNAL]
    served = sorted(
        (s for s in spans if s.name == "tools/call book_table" and s.kind == SpanKind.SERVER),
        key=lambda s: s.start_time or 0,
    )
    asked = [s for s in spans if s.name == "elicitation" and (s.attributes or {})["elicitor.side"] == "server"]
    answered = [s for s in spans if s.name == "elicitation" and (s.attributes or {})["elicitor.side"] == "client"]
    assert len(asked) == len(answered) == 3
    assert {(s.attributes or {})["elicitor.elicitation.outcome"] for s in asked + answered} == {"accept"}
    if protocol == "2025-11-25":
        [round_] = served
        assert [parent(s) for s in asked] == [round_] * 3
        pushes = [s for s in spans if s.name == "elicitation/create" and s.kind == SpanKind.CLIENT]
        assert sorted(parent(s).context.span_id for s in pushes) == sorted(s.context.span_id for s in asked)
        handled = [parent(s) for s in answered]
        assert {(s.name, s.kind) for s in handled} == {("elicitation/create", SpanKind.SERVER)}
        assert sorted(parent(s).context.span_id for s in handled) == sorted(s.context.span_id for s in pushes)
    else:
        assert len(served) == 4
        assert [(s.attributes or {})["elicitor.round.path"] for s in served] == ["first", "parked", "parked", "parked"]
        by_round = sorted(asked, key=lambda s: s.start_time or 0)
        assert [parent(s) for s in by_round] == served[:3]  # one question per round, under the round that asked it
        assert {parent(s).context.span_id for s in answered} == {call.context.span_id}
    exported = otel.exported_bytes()
    assert SECRET_NAME not in exported and SECRET_CITY not in exported


@pytest.mark.parametrize("protocol", ["2025-11-25"])
async def test_a_url_mode_elicitation_completed_by_its_page_is_in_the_call_trace(otel: Otel, protocol: str) -> None:
    """URL mode, end to end over HTTP (``examples/url_pages.py``): the tool needs the person to sign in on a page
    the server serves; the person's browser opens the link and signs in there, and the page completes the
    elicitation. That completion is an ``elicitation complete`` span in the trace of the call that asked for it,
    under the span that registered it (no HTTP server instrumentation makes the page's own span here), saying it
    completed and that the client was told over its connection on this replica. A forged completion is one too,
    ``completed = false``, in no call's trace. Nothing of the elicitation's id (what completes it) or its link is
    recorded."""
    from .test_pages import Browser

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from url_pages import server as pages_server
    finally:
        sys.path.pop(0)

    browser = Browser()
    async with (
        serving(pages_server.http_app()) as url,
        Client.http(url, elicitation=browser, protocol=protocol) as client,
    ):
        assert (await client.call_tool("connect_account")).text == "Connected as ada."
        assert not await pages_server.complete_url_elicitation("forged-id-0123456789")
    spans = otel.finished()
    index = {s.context.span_id: s for s in spans}
    done, forged = sorted(otel.named("elicitation complete"), key=lambda s: s.start_time or 0)
    assert dict(done.attributes or {}) == {
        "elicitor.elicitation.mode": "url",
        "elicitor.elicitation.completed": True,
        "elicitor.elicitation.notified": "connection",
    }
    assert done.parent is not None
    asked = index[done.parent.span_id]
    assert (asked.name, asked.kind) == ("tools/call connect_account", SpanKind.SERVER)
    [call] = [s for s in otel.named("tools/call connect_account") if s.kind == SpanKind.INTERNAL]
    assert done.context.trace_id == call.context.trace_id
    refused = {"elicitor.elicitation.mode": "url", "elicitor.elicitation.completed": False}
    assert dict(forged.attributes or {}) == refused
    assert forged.parent is None
    # The client is told under the completion (a notification is a span on both sides), still in the call's trace.
    [told] = [s for s in otel.named("notifications/elicitation/complete") if s.kind == SpanKind.CLIENT]
    [heard] = [s for s in otel.named("notifications/elicitation/complete") if s.kind == SpanKind.SERVER]
    assert told.parent is not None and told.parent.span_id == done.context.span_id
    assert heard.parent is not None and heard.parent.span_id == told.context.span_id
    assert heard.context.trace_id == call.context.trace_id
    [link] = browser.links
    exported = otel.exported_bytes()
    assert link.rsplit("/", 1)[1] not in exported and "forged-id" not in exported


@pytest.mark.parametrize("upstream", ["stdio", "http"])
async def test_the_proxy_carries_the_trace_to_a_real_upstream(otel: Otel, upstream: str, tmp_path: Path) -> None:
    """The proxy in front of an upstream server over a real transport: a server process on a pipe (its spans
    written by its own SDK), or a server over Streamable HTTP. The upstream's ``SERVER`` span for the call is the
    child of the proxy's ``CLIENT`` span, itself under the proxy's ``SERVER`` span for the client's request, under
    the client's own ``CLIENT`` span: the proxy's spans stand between the client's and the upstream's, and the
    trace context reached the upstream in ``params._meta`` over the pipe or the HTTP POST."""
    from elicitor.client._http import HttpClientTransport
    from elicitor.proxy import Bridge
    from elicitor.transports import StdioClientTransport, memory_pair

    spans_file = tmp_path / "upstream.jsonl"
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"city": SECRET_CITY}])
    client_end, down_end = memory_pair()
    async with serving(server.http_app()) as url, anyio.create_task_group() as tg:
        if upstream == "stdio":
            environment = {**os.environ, "PYTHONPATH": str(ROOT), "ELICITOR_SPANS_FILE": str(spans_file)}
            command = [sys.executable, "-m", "tests.peers.traced_stdio"]
            bridge = Bridge(lambda: StdioClientTransport.start(command, env=environment, cwd=ROOT))
        else:
            bridge = Bridge(lambda: HttpClientTransport.connect(url))
        tg.start_soon(bridge.serve, down_end)
        async with Client(client_end, elicitation=handler, protocol="2025-11-25") as client:
            with anyio.fail_after(60):
                assert SECRET_CITY in (await client.call_tool("introduce")).text
        tg.cancel_scope.cancel()
    ours = {f"0x{s.context.span_id:016x}": s for s in otel.finished()}
    calls = [s for s in ours.values() if s.name == "tools/call introduce"]
    [call] = [s for s in calls if s.kind == SpanKind.INTERNAL]
    if upstream == "stdio":
        with anyio.fail_after(10):  # the upstream writes its spans as they end
            while "tools/call introduce" not in (spans_file.read_text() if spans_file.exists() else ""):
                await anyio.sleep(0.05)
        theirs = [json.loads(line) for line in spans_file.read_text().splitlines()]
        [served] = [s for s in theirs if s["name"] == "tools/call introduce" and s["kind"] == "SpanKind.SERVER"]
        assert served["context"]["trace_id"] == f"0x{call.context.trace_id:032x}"
        assert served["attributes"]["network.transport"] == "pipe"
        parent = ours[served["parent_id"]]
    else:
        [served] = [
            s for s in calls if s.kind == SpanKind.SERVER and (s.attributes or {}).get("network.transport") == "tcp"
        ]
        assert served.parent is not None
        parent = ours[f"0x{served.parent.span_id:016x}"]
    chain = [parent]
    while chain[-1].parent is not None and f"0x{chain[-1].parent.span_id:016x}" in ours:
        chain.append(ours[f"0x{chain[-1].parent.span_id:016x}"])
    assert [(s.name, s.kind) for s in chain] == [
        ("tools/call introduce", SpanKind.CLIENT),  # the proxy's request upstream
        ("tools/call introduce", SpanKind.SERVER),  # the proxy serving the client's request
        ("tools/call introduce", SpanKind.CLIENT),  # the client's request
        ("tools/call introduce", SpanKind.INTERNAL),  # the client's call
    ]
    assert (chain[0].attributes or {})["network.transport"] == ("pipe" if upstream == "stdio" else "tcp")
    texts = [otel.exported_bytes(), spans_file.read_text() if upstream == "stdio" else ""]
    assert not any(SECRET_NAME in text or SECRET_CITY in text for text in texts)


@pytest.mark.parametrize(("mode", "protocol"), [("legacy", "2025-11-25"), (None, "2026-07-28")])
async def test_the_official_sdks_client_puts_its_trace_in_meta_and_the_server_continues_it(
    otel: Otel, mode: str | None, protocol: str
) -> None:
    """The official Python SDK's client (SEP-414) writes the current trace context into each request's
    ``params._meta`` (``traceparent``): an application span around its call is the parent of elicitor's
    ``SERVER`` span for the call, on each era (on 2026-07-28 for every round)."""
    import mcp_types as types

    async def callback(context: Any, params: Any) -> types.ElicitResult:
        key, value = ("name", SECRET_NAME) if "Who" in params.message else ("city", SECRET_CITY)
        return types.ElicitResult(action="accept", content={key: value})

    tracer = otel.tracer_provider.get_tracer("application")
    options: dict[str, Any] = {"mode": mode} if mode is not None else {}
    async with serving(server.http_app()) as url, McpClient(url, elicitation_callback=callback, **options) as client:
        with tracer.start_as_current_span("application") as application:
            result = await client.call_tool("introduce", {})
    assert SECRET_CITY in result.content[0].text  # type: ignore[union-attr]
    served = [s for s in otel.named("tools/call introduce") if s.kind == SpanKind.SERVER]
    assert len(served) == (3 if protocol == "2026-07-28" else 1)
    context = application.get_span_context()
    for span in served:
        assert (span.attributes or {})["mcp.protocol.version"] == protocol
        assert span.parent is not None
        assert (span.parent.trace_id, span.parent.span_id) == (context.trace_id, context.span_id)


patient = Server("patient", "1.0", elicitation_timeout=1.0)


@patient.tool()
async def wait_for_a_person(ctx: Context) -> str:
    """Asks, and gives the person a second."""
    return type(await ctx.elicit("Who are you?", NAME)).__name__


async def test_a_question_nobody_answers_in_time_says_timeout_and_leaves_nothing_pending(otel: Otel) -> None:
    """2025-11-25 over HTTP: the person never answers and the server's wait for them runs out. The server's
    ``elicitation`` span and its ``elicitation/create`` span say ``error.type = timeout`` (status ``ERROR``, no
    ``exception`` event: the type says it all); the client's side of the question ends ``cancelled`` (the server
    told it so); the question is counted with its timeout, and none is left pending on either side."""

    async def never(request: Any) -> Any:
        await anyio.sleep(3600)

    async with serving(patient.http_app()) as url, Client.http(url, elicitation=never, protocol="2025-11-25") as client:
        with anyio.fail_after(60):
            assert (await client.call_tool("wait_for_a_person")).text == "Cancelled"
        with anyio.fail_after(60):  # the client's side ends when the server's cancellation arrives
            while not [s for s in otel.named("elicitation") if (s.attributes or {})["elicitor.side"] == "client"]:
                await anyio.sleep(0.05)
    sides = {(s.attributes or {})["elicitor.side"]: s for s in otel.named("elicitation")}
    [pushed] = [s for s in otel.named("elicitation/create") if s.kind == SpanKind.CLIENT]
    for span in (sides["server"], pushed):
        assert (span.attributes or {})["error.type"] == "timeout"
        assert span.status.status_code == StatusCode.ERROR and not span.events
    assert (sides["client"].attributes or {})["error.type"] == "cancelled"
    points = otel.metric_points()
    counted = [dict(p.attributes) for p in points["elicitor.elicitations"] if p.value]
    assert counted == [{"elicitor.elicitation.mode": "form", "elicitor.side": "server", "error.type": "timeout"}]
    assert {p.value for p in points["elicitor.elicitation.pending"]} == {0}


async def test_the_outbox_says_what_it_holds_and_what_became_of_each_message(
    otel: Otel, redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis paused past the hold (a second here): B keeps a person's answer and a notification for a session that
    does not exist, and refuses a third message, its outbox full. Meanwhile ``elicitor.outbox.held`` says two
    messages and ``elicitor.outbox.held.size`` their bytes; once Redis is back, ``elicitor.outbox.messages``
    says two kept, one relayed, one dropped as gone, one dropped as full, with no attribute but those two."""
    from redis.asyncio import Redis

    monkeypatch.setattr(_hold, "STORE_HOLD", 1.0)
    async with two_replicas(redis.url, lease=1.0, timeout=1.0) as (a, b, apps), httpx.AsyncClient(timeout=60) as http:
        headers = await open_session(http, a)
        outbox = apps[1]._handshake._outbox
        outbox.max_messages = 2
        with anyio.fail_after(60):
            async with http.stream("POST", a, json=rpc("tools/call", {"name": "pick"}, id=7), headers=headers) as call:
                stream = events(call)
                _, question = await anext(stream)
                admin = Redis.from_url(redis.url)
                try:
                    await admin.execute_command("CLIENT", "PAUSE", "5000", "ALL")
                finally:
                    await admin.aclose()
                answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept",
                          "content": {"name": "Ada"}}}  # fmt: skip
                note = rpc("notifications/cancelled", {"requestId": 3})
                nowhere = {**headers, "mcp-session-id": "no-such-session-0123456789abcdef"}
                statuses = [(await http.post(b, json=answer, headers=headers)).status_code]
                statuses.append((await http.post(b, json=note, headers=nowhere)).status_code)
                statuses.append((await http.post(b, json=note, headers=headers)).status_code)
                assert statuses == [202, 202, 503]
                points = otel.metric_points()
                assert [p.value for p in points["elicitor.outbox.held"]] == [2]
                [size] = points["elicitor.outbox.held.size"]
                assert size.value == outbox.size > len(json.dumps(answer))
                _, result = await anext(stream)
            assert result["result"]["content"][0]["text"] == "Ada"
            while len(outbox):
                await anyio.sleep(0.05)
    counted = {tuple(sorted(p.attributes.items())): p.value for p in otel.metric_points()["elicitor.outbox.messages"]}
    outcome, reason = "elicitor.outbox.outcome", "elicitor.outbox.reason"
    assert counted == {
        ((outcome, "kept"),): 2,
        ((outcome, "relayed"),): 1,
        ((outcome, "dropped"), (reason, "gone")): 1,
        ((outcome, "dropped"), (reason, "full")): 1,
    }
    assert [p.value for p in otel.metric_points()["elicitor.outbox.held"]] == [0]
