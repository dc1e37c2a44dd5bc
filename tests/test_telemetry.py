"""OpenTelemetry: the span tree of a call on every era and transport, trace context through ``_meta``, metrics, logs,
and nothing a person typed anywhere in what is exported.

The SDK's in-memory exporters are given to ``telemetry.configure`` (not set globally), so the rest of the suite
keeps running without telemetry, as users without an SDK do.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from elicitor import Accepted, Client, Context, JSONRPCError, ScriptedHandler, Server, telemetry
from elicitor.telemetry import _state
from elicitor.testing import connected
from elicitor.types import JSONObject

from .conftest import ROOT, serving

pytestmark = pytest.mark.anyio

SECRET_NAME = "Zebulon-Quixotic-4417"
SECRET_CITY = "Xanthoria-Vellum-9921"
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

server = Server("traced", "1.0")


@server.tool()
async def introduce(ctx: Context) -> str:
    """Asks two questions, one after the other."""
    name = await ctx.elicit("Who are you?", NAME, key="name")
    city = await ctx.elicit("Where do you live?", CITY, key="city")
    assert isinstance(name, Accepted) and isinstance(city, Accepted)
    return f"hello {name.data['name']} from {city.data['city']}"


@server.tool()
async def refuse() -> str:
    """Fails: an isError result."""
    raise ValueError("nope")


SETUP = {"initialize", "notifications/initialized", "server/discover", "tools/list", "ping", "subscriptions/listen"}
"""Requests of the connection, not of the call: traces of their own."""


def of_calls(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """``spans`` without the traces of the connection's own requests (:data:`SETUP`) and what they sent: a
    subscription's acknowledgement, the cancellation of a subscription when the connection closes."""
    setup = {s.context.trace_id for s in spans if s.name in SETUP}
    return [s for s in spans if s.context.trace_id not in setup]


class Otel:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.metrics])

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.finished() if s.name == name]

    def metric_points(self) -> dict[str, list[Any]]:
        data = self.metrics.get_metrics_data()
        points: dict[str, list[Any]] = {}
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    points.setdefault(metric.name, []).extend(metric.data.data_points)
        return points

    def exported_bytes(self) -> str:
        """Every span, attribute, event and metric as text: what an exporter would send."""
        parts = [span.to_json() for span in self.finished()]
        data = self.metrics.get_metrics_data()
        if data is not None:
            parts.append(data.to_json())
        return "\n".join(parts)


@pytest.fixture
def otel() -> Iterator[Otel]:
    recorder = Otel()
    telemetry.configure("native", tracer_provider=recorder.tracer_provider, meter_provider=recorder.meter_provider)
    try:
        yield recorder
    finally:
        telemetry.configure("native")  # back to the global providers: none in this suite


@contextmanager
def every_log_line() -> Iterator[list[str]]:
    """Every record elicitor logs meanwhile, at every level, as the JSON formatter writes it."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    keep = Keep(logging.DEBUG)
    keep.addFilter(telemetry.TraceContextFilter())
    keep.setFormatter(telemetry.JsonFormatter())
    logger = logging.getLogger("elicitor")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(keep)
    try:
        yield lines
    finally:
        logger.removeHandler(keep)
        logger.setLevel(level)


def by_id(spans: list[ReadableSpan]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans}


def ancestors(span: ReadableSpan, spans: list[ReadableSpan]) -> list[str]:
    """The names of ``span``'s ancestors, nearest first."""
    index = by_id(spans)
    names = []
    parent = span.parent
    while parent is not None and parent.span_id in index:
        found = index[parent.span_id]
        names.append(f"{found.name}/{found.kind.name}")
        parent = found.parent
    return names


@pytest.mark.parametrize("protocol", ["2025-06-18", "2025-11-25", "2026-07-28"])
async def test_a_call_with_two_questions_is_one_trace_on_every_era(otel: Otel, protocol: str) -> None:
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"city": SECRET_CITY}])
    with every_log_line() as logged:
        async with connected(server, elicitation=handler, protocol=protocol) as client:
            result = await client.call_tool("introduce")
    assert SECRET_NAME in result.text
    assert not any(SECRET_NAME in line or SECRET_CITY in line for line in logged)  # at DEBUG, both sides
    spans = [s for s in otel.finished() if s.name not in SETUP]
    calls = [s for s in spans if s.name == "tools/call introduce"]
    servers = [s for s in calls if s.kind == SpanKind.SERVER]
    clients = [s for s in calls if s.kind == SpanKind.CLIENT]
    rounds = 3 if protocol == "2026-07-28" else 1  # two questions asked one after the other: three rounds
    assert len(servers) == rounds and len(clients) == rounds
    assert len({s.context.trace_id for s in spans}) == 1, "one call, one trace"
    whole = [s for s in calls if s.kind == SpanKind.INTERNAL]
    assert len(whole) == 1 and (whole[0].attributes or {})["elicitor.rounds"] == rounds
    for span in clients:
        assert span.parent is not None and span.parent.span_id == whole[0].context.span_id
    for span in servers:
        attributes = span.attributes or {}
        assert attributes["mcp.method.name"] == "tools/call"
        assert attributes["gen_ai.tool.name"] == "introduce"
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["mcp.protocol.version"] == protocol
        assert attributes["network.transport"] == "pipe"
        assert "jsonrpc.request.id" in attributes
        # The client's span is the parent of the server's: the context crossed the wire in params._meta.
        assert span.parent is not None and span.parent.span_id in {c.context.span_id for c in clients}
    for span in clients:
        assert (span.attributes or {})["jsonrpc.request.id"]
        # A pipe has no server address and no application protocol ("Recording MCP transport": stdio is
        # network.transport = pipe alone, no network.protocol.*).
        attributes = span.attributes or {}
        assert attributes["network.transport"] == "pipe" and "server.address" not in attributes
        assert not {"network.protocol.name", "network.protocol.version"} & set(attributes)
    questions = [s for s in otel.named("elicitation") if (s.attributes or {})["elicitor.side"] == "server"]
    answers = [s for s in otel.named("elicitation") if (s.attributes or {})["elicitor.side"] == "client"]
    assert len(questions) == 2 and len(answers) == 2
    for span in questions + answers:
        assert (span.attributes or {})["elicitor.elicitation.outcome"] == "accept"
        assert (span.attributes or {})["elicitor.elicitation.mode"] == "form"
    if protocol != "2026-07-28":
        # Handshake era: the server's question is a request of its own, pushed inside the tool's span.
        pushes = otel.named("elicitation/create")
        assert {s.kind for s in pushes} == {SpanKind.CLIENT, SpanKind.SERVER}
        for push in pushes:
            path = ancestors(push, spans)
            assert "tools/call introduce/SERVER" in path
        for answer in answers:
            assert ancestors(answer, spans)[0] == "elicitation/create/SERVER"
    else:
        assert [(s.attributes or {}).get("elicitor.round.path") for s in servers] == ["first", "parked", "parked"]
        assert [(s.attributes or {}).get("elicitor.result_type") for s in servers][:2] == ["input_required"] * 2
    exported = otel.exported_bytes()
    for secret in (SECRET_NAME, SECRET_CITY, "Who are you?", "Where do you live?"):
        assert secret not in exported


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_over_real_stdio_the_server_process_continues_the_clients_trace(
    otel: Otel, protocol: str, tmp_path: Path
) -> None:
    """A server started as a process and spoken to over its stdin/stdout, its spans written by its own SDK: the
    two sides' spans join one trace (the server's SERVER span a child of the client's CLIENT span, through
    ``params._meta`` on the pipe), both say ``network.transport = pipe``, and neither holds an answer."""
    spans_file = tmp_path / "server.jsonl"
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"city": SECRET_CITY}])
    command = [sys.executable, "-m", "tests.peers.traced_stdio"]
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "ELICITOR_SPANS_FILE": str(spans_file)}
    async with Client.stdio(command, env=environment, cwd=ROOT, elicitation=handler, protocol=protocol) as client:
        with anyio.fail_after(30):
            assert SECRET_CITY in (await client.call_tool("introduce")).text
    with anyio.fail_after(10):  # the server writes its spans as they end; its last ends as it answers
        while "tools/call introduce" not in (spans_file.read_text() if spans_file.exists() else ""):
            await anyio.sleep(0.05)
    theirs = [json.loads(line) for line in spans_file.read_text().splitlines()]
    ours = [s for s in otel.finished() if s.name not in SETUP]
    sent = {format(s.context.span_id, "#018x"): s for s in ours if s.kind == SpanKind.CLIENT}
    served = [s for s in theirs if s["name"] == "tools/call introduce" and s["kind"] == "SpanKind.SERVER"]
    assert len(served) == (3 if protocol == "2026-07-28" else 1)
    [trace_id] = {format(s.context.trace_id, "#034x") for s in ours}
    for span in served:
        assert span["context"]["trace_id"] == trace_id
        assert span["parent_id"] in sent and sent[span["parent_id"]].name == "tools/call introduce"
        assert span["attributes"]["network.transport"] == "pipe" and "server.address" not in span["attributes"]
        assert span["attributes"]["mcp.protocol.version"] == protocol
    questions = [s for s in theirs if s["name"] == "elicitation"]
    assert [s["attributes"].get("elicitor.elicitation.outcome") for s in questions].count("accept") == 2
    assert all(s["context"]["trace_id"] == trace_id for s in questions)
    if protocol == "2025-11-25":  # the server's pushed questions: its CLIENT spans, the client's SERVER spans
        pushed = [s for s in theirs if s["name"] == "elicitation/create" and s["kind"] == "SpanKind.CLIENT"]
        answered = [s for s in ours if s.name == "elicitation/create" and s.kind == SpanKind.SERVER]
        assert len(pushed) == len(answered) == 2
        assert {format(s.parent.span_id, "#018x") for s in answered if s.parent} == {
            s["context"]["span_id"] for s in pushed
        }
    for text in (spans_file.read_text(), otel.exported_bytes()):
        assert SECRET_NAME not in text and SECRET_CITY not in text


failing = Server("failing", "1.0")


@failing.tool()
async def reject(name: str) -> str:
    """Fails with the caller's own text in its message: an ``isError`` result."""
    raise ValueError(f"{name} is not welcome here")


@failing.tool()
async def ask_then_reject(ctx: Context) -> str:
    """Asks, then fails: on 2026-07-28 it fails in the second round, in the run parked by the first."""
    await ctx.elicit("Who are you?", NAME, key="name")
    raise ValueError("not today")


@failing.resource("memo://broken", name="broken")
async def broken() -> str:
    """Fails with a secret in its message: an internal error (-32603)."""
    raise RuntimeError(f"cannot reach db://admin:{SECRET_CITY}@db")


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn
async def test_errors_follow_the_conventions(otel: Otel) -> None:
    """Over real HTTP: a failed request says ``error.type`` on both sides. Its status follows the conventions for
    MCP: every JSON-RPC error makes the client's span an error, the server's only for -32603 and -32000 to -32099
    (an unknown tool is the caller's mistake). An exception that escaped the application's code (a tool's, a
    resource's) is an ``exception`` event on the server's span, with its type and frames and never its text."""
    async with serving(failing.http_app()) as url, Client.http(url, protocol="2025-11-25") as client:
        result = await client.call_tool("reject", {"name": SECRET_NAME})
        assert result.is_error and SECRET_NAME in result.text
        with pytest.raises(JSONRPCError):
            await client.call_tool("no-such-tool")
        with pytest.raises(JSONRPCError) as internal:
            await client.read_resource("memo://broken")
        assert internal.value.code == -32603
        with pytest.raises(JSONRPCError):  # a resource URI's query may carry a code: never recorded
            await client.read_resource(f"memo://missing?code={SECRET_CITY}#{SECRET_CITY}")
    handler = ScriptedHandler([{"name": SECRET_NAME}])
    async with serving(failing.http_app()) as url, Client.http(url, elicitation=handler) as client:
        assert (await client.call_tool("ask_then_reject")).is_error
    [failed] = [s for s in otel.named("tools/call reject") if s.kind == SpanKind.SERVER]
    assert (failed.attributes or {})["error.type"] == "tool_error"
    assert failed.status.status_code == StatusCode.ERROR
    [event] = failed.events
    assert event.name == "exception" and (event.attributes or {})["exception.type"] == "ValueError"
    assert "in reject" in str((event.attributes or {})["exception.stacktrace"])
    assert "exception.message" not in (event.attributes or {})
    sides = {s.kind: s for s in otel.named("tools/call no-such-tool")}
    for span in sides.values():
        attributes = span.attributes or {}
        assert attributes["error.type"] == attributes["rpc.response.status_code"] == "-32602"
        assert not span.events
    assert sides[SpanKind.SERVER].status.status_code == StatusCode.UNSET
    assert sides[SpanKind.CLIENT].status.status_code == StatusCode.ERROR
    assert "unknown tool" in (sides[SpanKind.CLIENT].status.description or "")
    reads = otel.named("resources/read")
    assert {(s.attributes or {})["mcp.resource.uri"] for s in reads} == {"memo://broken", "memo://missing?#"}
    missing = [s for s in reads if (s.attributes or {})["mcp.resource.uri"] == "memo://missing?#"]
    assert {s.status.description for s in missing} == {"Resource not found: memo://missing?# (code -32002)"}
    served = {s.kind: s for s in reads if s not in missing}
    for span in served.values():
        assert span.status.status_code == StatusCode.ERROR
        assert (span.attributes or {})["error.type"] == "-32603"
    [event] = served[SpanKind.SERVER].events
    assert (event.attributes or {})["exception.type"] == "RuntimeError"
    assert "in broken" in str((event.attributes or {})["exception.stacktrace"])
    # 2026-07-28: the round in which the parked run's tool failed has the event, not the first, which had ended.
    first, second = sorted(
        (s for s in otel.named("tools/call ask_then_reject") if s.kind == SpanKind.SERVER),
        key=lambda s: s.start_time or 0,
    )
    assert (first.attributes or {})["elicitor.round.path"] == "first" and not first.events
    assert (second.attributes or {})["elicitor.round.path"] == "parked"
    assert [(e.attributes or {})["exception.type"] for e in second.events] == ["ValueError"]
    exported = otel.exported_bytes()
    assert SECRET_NAME not in exported and SECRET_CITY not in exported


async def test_an_application_span_is_the_parent_of_the_call(otel: Otel) -> None:
    tracer = otel.tracer_provider.get_tracer("app")
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"city": SECRET_CITY}])
    with tracer.start_as_current_span("booking") as outer:
        async with connected(server, elicitation=handler, protocol="2026-07-28") as client:
            await client.call_tool("introduce")
    spans = [s for s in otel.finished() if s.name not in SETUP]
    assert {s.context.trace_id for s in spans} == {outer.get_span_context().trace_id}


async def test_metrics_count_requests_questions_and_the_persons_time(otel: Otel) -> None:
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"city": SECRET_CITY}])
    async with connected(server, elicitation=handler, protocol="2026-07-28") as client:
        await client.call_tool("introduce")
    points = otel.metric_points()
    durations = {p.attributes.get("mcp.method.name"): p.count for p in points["mcp.server.operation.duration"]}
    assert durations["tools/call"] == 3
    assert "mcp.client.operation.duration" in points
    answered = {
        (p.attributes["elicitor.side"], p.attributes["elicitor.elicitation.outcome"]): p.value
        for p in points["elicitor.elicitations"]
    }
    assert answered == {("server", "accept"): 2, ("client", "accept"): 2}
    assert sum(p.count for p in points["elicitor.elicitation.duration"]) == 4
    assert all(p.value == 0 for p in points["elicitor.elicitation.pending"])
    paths = {p.attributes["elicitor.round.path"]: p.value for p in points["elicitor.rounds"]}
    assert paths == {"first": 1, "parked": 2}
    [per_call] = points["elicitor.call.rounds"]
    assert (per_call.count, per_call.sum, per_call.attributes) == (1, 3, {"gen_ai.tool.name": "introduce"})


async def test_replayed_rounds_are_one_trace_and_counted_as_replays(otel: Otel) -> None:
    replaying = Server("replaying", "1.0", max_parked_runs=0)  # every retry replays, as on another replica
    replaying.tool()(introduce)
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"city": SECRET_CITY}])
    async with connected(replaying, elicitation=handler, protocol="2026-07-28") as client:
        await client.call_tool("introduce")
    spans = [s for s in otel.finished() if s.name not in SETUP]
    assert len({s.context.trace_id for s in spans}) == 1
    paths = [(s.attributes or {}).get("elicitor.round.path") for s in spans if s.kind == SpanKind.SERVER]
    assert paths == ["first", "replayed", "replayed"]
    answered = {
        (p.attributes["elicitor.side"], p.attributes["elicitor.elicitation.outcome"]): p.value
        for p in otel.metric_points()["elicitor.elicitations"]
    }
    assert answered[("server", "accept")] == 2  # each answer counted once, on the round that brought it


async def test_propagation_only_carries_the_context_and_makes_no_spans() -> None:
    recorder = Otel()
    telemetry.configure("propagation_only")
    seen: list[Any] = []
    probe = Server("probe", "1.0")

    @probe.tool()
    async def where() -> str:
        seen.append(trace.get_current_span().get_span_context())
        return "here"

    try:
        tracer = recorder.tracer_provider.get_tracer("app")
        with tracer.start_as_current_span("caller") as outer:
            async with connected(probe, protocol="2025-11-25") as client:
                await client.call_tool("where")
    finally:
        telemetry.configure("native")
    assert [s.name for s in recorder.finished()] == ["caller"]
    # The tool ran in the caller's trace: its context came through params._meta.
    assert seen[0].trace_id == outer.get_span_context().trace_id


async def test_off_touches_nothing() -> None:
    telemetry.configure("off")
    try:
        assert not _state.state.on
        async with connected(server, elicitation=ScriptedHandler([{"name": "a"}, {"city": "b"}])) as client:
            await client.call_tool("introduce")
    finally:
        telemetry.configure("native")


def test_the_mode_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from elicitor.telemetry._state import mode_from_env

    monkeypatch.setenv(telemetry.ENV_MODE, "propagation_only")
    assert mode_from_env() == "propagation_only"
    monkeypatch.setenv(telemetry.ENV_MODE, "loud")
    with pytest.raises(ValueError, match="ELICITOR_TELEMETRY_MODE must be one of native"):
        mode_from_env()
    with pytest.raises(ValueError, match="telemetry mode must be one of"):
        telemetry.configure("loud")  # type: ignore[arg-type]


async def test_logs_carry_trace_and_span_ids_as_json(otel: Otel) -> None:
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = Keep()
    handler.addFilter(telemetry.TraceContextFilter())
    handler.setFormatter(telemetry.JsonFormatter())
    logger = logging.getLogger("elicitor.server")
    logger.addHandler(handler)
    try:
        async with connected(server, protocol="2025-11-25") as client:
            await client.call_tool("refuse")  # the server logs the tool's failure inside its span
    finally:
        logger.removeHandler(handler)
    entry = json.loads(records[-1])
    span = next(s for s in otel.named("tools/call refuse") if s.kind == SpanKind.SERVER)
    assert entry["trace_id"] == format(span.context.trace_id, "032x")
    assert entry["span_id"] == format(span.context.span_id, "016x")
    assert entry["level"] == "ERROR" and entry["logger"] == "elicitor.server"
    assert "exception" in entry


async def test_no_sdk_no_spans_and_nothing_imported() -> None:
    """Without an SDK the hooks are off: a fresh interpreter serving a call never imports OpenTelemetry."""
    import sys

    code = (
        "import sys, anyio\n"
        "from elicitor import Server, ScriptedHandler\n"
        "from elicitor.testing import connected\n"
        "from elicitor import telemetry\n"
        "server = Server('s', '1')\n"
        "@server.tool()\n"
        "async def t() -> str:\n"
        "    return 'ok'\n"
        "async def main():\n"
        "    async with connected(server) as client:\n"
        "        assert (await client.call_tool('t')).text == 'ok'\n"
        "anyio.run(main)\n"
        "print(telemetry.state.on, 'opentelemetry.trace' in sys.modules)\n"
    )
    done = await anyio.run_process([sys.executable, "-c", code], check=True)
    assert done.stdout.decode().split() == ["False", "False"]


tasked = Server("tasked", "1.0", task_poll_interval=0.05)


@tasked.tool(task="required")
async def migrate(ctx: Context) -> str:
    """Runs as a task and asks twice."""
    name = await ctx.elicit("Who approves?", NAME, key="name")
    city = await ctx.elicit("Which datacenter?", CITY, key="city")
    assert isinstance(name, Accepted) and isinstance(city, Accepted)
    return "migrated"


async def test_a_tasks_run_polls_and_answers_are_one_trace(otel: Otel) -> None:
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"city": SECRET_CITY}])
    async with connected(tasked, elicitation=handler, protocol="2026-07-28") as client:
        assert (await client.call_tool("migrate")).text == "migrated"
    spans = [s for s in otel.finished() if s.name not in SETUP]
    assert len({s.context.trace_id for s in spans}) == 1
    created = [s for s in otel.named("tools/call migrate") if s.kind == SpanKind.SERVER]
    task_id = (created[0].attributes or {})["elicitor.task.id"]
    followed = [s for s in spans if s.kind == SpanKind.SERVER and str(s.name).startswith("tasks/")]
    assert {s.name for s in followed} >= {"tasks/get", "tasks/update"}
    assert {(s.attributes or {})["elicitor.task.id"] for s in followed} == {task_id}
    # Its life, from the spans alone: the status each response said, in order (tasks/update says none).
    said = [
        (s.attributes or {})["elicitor.task.status"]
        for s in sorted([*created, *followed], key=lambda s: s.start_time or 0)
        if "elicitor.task.status" in (s.attributes or {})
    ]
    assert said[0] == "working" and said[-1] == "completed" and said.count("input_required") >= 2, said
    # The questions are asked by the task's run (not by any one request), and answered by the person.
    questions = [s for s in otel.named("elicitation") if (s.attributes or {})["elicitor.side"] == "server"]
    assert [(s.attributes or {})["elicitor.elicitation.outcome"] for s in questions] == ["accept", "accept"]
    statuses = {p.attributes["elicitor.task.status"]: p.value for p in otel.metric_points()["elicitor.tasks"]}
    assert statuses["working"] >= 1 and statuses["input_required"] == 2 and statuses["completed"] == 1
    exported = otel.exported_bytes()
    assert SECRET_NAME not in exported and SECRET_CITY not in exported


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
async def test_a_task_picked_up_later_links_to_the_call_that_created_it(otel: Otel, protocol: str) -> None:
    """``client.task(id)`` — another client object on 2026-07-28 (the id is all it needs, as in another process),
    the same connection on 2025-11-25 (its tasks are its session's) — follows the task in a trace of its own, each
    request's span on both sides linked to the server span of the ``tools/call`` that created the task; the wait
    is one ``follow task`` span with every poll under it (not a trace per poll); the task's questions stay in the
    creating call's trace, although the run that asks them is started again by a later poll."""
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"city": SECRET_CITY}])
    async with connected(tasked, elicitation=handler, protocol=protocol) as first:
        started = await first.start_tool("migrate")
        assert started.id is not None
        if protocol == "2025-11-25":
            picked = await first.task(started.id)
            assert (await picked.wait()).text == "migrated"
    if protocol == "2026-07-28":
        async with connected(tasked, elicitation=handler, protocol=protocol) as second:
            picked = await second.task(started.id)
            assert (await picked.wait()).text == "migrated"
    spans = otel.finished()
    created = next(s for s in otel.named("tools/call migrate") if s.kind == SpanKind.SERVER).context
    assert created is not None
    later = [s for s in spans if str(s.name).startswith("tasks/")]
    for kind in (SpanKind.CLIENT, SpanKind.SERVER):
        on_side = [s for s in later if s.kind == kind]
        assert {s.name for s in on_side} >= (
            {"tasks/get", "tasks/update"} if protocol == "2026-07-28" else {"tasks/get", "tasks/result"}
        )
        for span in on_side:
            links = [(link.context.trace_id, link.context.span_id) for link in span.links]
            assert (created.trace_id, created.span_id) in links, span.name
            assert span.context is not None and span.context.trace_id != created.trace_id  # a trace of its own
    [follow] = otel.named("follow task")
    assert follow.context is not None and (follow.attributes or {})["elicitor.task.id"] == started.id
    assert [(link.context.trace_id, link.context.span_id) for link in follow.links] == [
        (created.trace_id, created.span_id)
    ]
    sent = [s for s in later if s.kind == SpanKind.CLIENT]
    polled = [s for s in sent if s.context is not None and s.context.trace_id == follow.context.trace_id]
    assert len(polled) == len(sent) - 1 >= 2  # all but the one tasks/get of client.task(id)
    assert all(s.parent is not None and s.parent.span_id == follow.context.span_id for s in polled)
    # The questions the task's runs asked (the first run's cut short when its connection closed, on 2026-07-28;
    # an answer a replay reads from the record asks nothing) are in the creating call's trace.
    questions = [s for s in otel.named("elicitation") if (s.attributes or {})["elicitor.side"] == "server"]
    assert "accept" in [(s.attributes or {}).get("elicitor.elicitation.outcome") for s in questions]
    assert {s.context.trace_id for s in questions if s.context is not None} == {created.trace_id}
    if protocol == "2026-07-28":  # and so are the person's answers to them, given through the later client
        answers = [s for s in otel.named("elicitation") if (s.attributes or {})["elicitor.side"] == "client"]
        assert len(answers) == 2 and {s.context.trace_id for s in answers if s.context} == {created.trace_id}
    exported = otel.exported_bytes()
    assert SECRET_NAME not in exported and SECRET_CITY not in exported


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=80),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
TRACEPARENTS = st.builds(
    "{}-{}-{}-{}".format, st.sampled_from(["00", "ff", "0g", ""]), st.text("0123456789abcdef", max_size=34),
    st.text("0123456789abcdef", max_size=18), st.sampled_from(["00", "01", "zz"]),
) | st.builds(
    "00-{}-{}-01".format, st.text("0123456789abcdef", min_size=32, max_size=32),
    st.text("0123456789abcdef", min_size=16, max_size=16),
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(origin=JSON | st.fixed_dictionaries({"traceparent": TRACEPARENTS}, optional={"tracestate": JSON}))
def test_a_task_origin_a_peer_sends_is_never_trusted_blindly(otel: Otel, origin: Any) -> None:
    """Whatever a server puts under dev.elicitor/taskOrigin, a client's span reads it without raising, and links
    only to a valid W3C trace context; neither does answering in that context start from anything else."""
    from elicitor.telemetry import _attributes, _propagation

    span = otel.tracer_provider.get_tracer("test").start_span("tasks/get")
    _attributes.settle_result(span, {"mcp.method.name": "tasks/get"}, {"_meta": {_state.TASK_ORIGIN: origin}})
    span.end()
    assert isinstance(span, ReadableSpan)
    valid = _propagation.span_context(origin)
    assert len(span.links) == (valid is not None)
    with _propagation.in_task_origin(origin, elsewhere=True):
        current = trace.get_current_span().get_span_context()
        assert current == valid if valid is not None else not current.is_valid


@pytest.mark.parametrize(
    ("downstream", "upstream"),
    [
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2026-07-28", "2026-07-28"),
        ("2025-11-25", "2026-07-28"),
        ("2026-07-28", "2025-11-25"),
    ],
)
async def test_the_proxy_continues_the_trace_through_both_sides(otel: Otel, downstream: str, upstream: str) -> None:
    from elicitor import Client
    from elicitor.proxy import Bridge, static
    from elicitor.transports import memory_pair

    client_end, down_end = memory_pair()
    up_end, server_end = memory_pair()
    bridge = Bridge(static(up_end), upstream_protocol=upstream)
    handler = ScriptedHandler([{"name": SECRET_NAME}, {"city": SECRET_CITY}])
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, server_end)
        tg.start_soon(bridge.serve, down_end)
        async with Client(client_end, elicitation=handler, protocol=downstream) as client:
            with anyio.fail_after(10):
                assert SECRET_CITY in (await client.call_tool("introduce")).text
        tg.cancel_scope.cancel()
    spans = of_calls(otel.finished())
    assert len({s.context.trace_id for s in spans}) == 1
    served = [s for s in otel.named("tools/call introduce") if s.kind == SpanKind.SERVER]
    # The upstream server's span descends from the proxy's SERVER span (the client's request at the proxy) through
    # the proxy's CLIENT span (the request it forwarded): two SERVER spans in one path.
    deepest = max(served, key=lambda s: len(ancestors(s, spans)))
    path = ancestors(deepest, spans)
    assert path[:3] == ["tools/call introduce/CLIENT", "tools/call introduce/SERVER", "tools/call introduce/CLIENT"]
    # Each request sent, the proxy's on either side too, names the revision of the side it is sent on.
    sent = [s for s in spans if s.kind == SpanKind.CLIENT and s.name in ("tools/call introduce", "elicitation/create")]
    assert len(sent) >= 4
    assert {(s.attributes or {}).get("mcp.protocol.version") for s in sent} <= {downstream, upstream}
    exported = otel.exported_bytes()
    assert SECRET_NAME not in exported and SECRET_CITY not in exported


@pytest.mark.parametrize("upstream", ["2025-11-25", "2026-07-28"])
async def test_rounds_a_client_sends_in_traces_of_their_own_are_linked_to_the_first_through_the_proxy(
    otel: Otel, upstream: str
) -> None:
    """A 2026-07-28 client that starts a new trace for every round (its retries are requests of their own) still
    has each of the call's rounds linked to the first (``elicitor.link = first_round``): by the proxy for a call
    it holds on a handshake-era server, by the server when the rounds pass through to a 2026-07-28 one. Nothing
    of the answers is recorded."""
    import secrets

    from elicitor.protocol import decode_json
    from elicitor.proxy import Bridge, static
    from elicitor.transports import memory_pair

    client_end, down_end = memory_pair()
    up_end, server_end = memory_pair()
    bridge = Bridge(static(up_end), upstream_protocol=upstream)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }
    traces: list[int] = []
    answers = iter([{"name": SECRET_NAME}, {"city": SECRET_CITY}])

    async def call(params: JSONObject, request_id: int) -> JSONObject:
        trace_id = int.from_bytes(secrets.token_bytes(16), "big") | 1
        traces.append(trace_id)
        traceparent = f"00-{trace_id:032x}-{secrets.randbits(63) | 1:016x}-01"
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
        message["params"] = {**params, "_meta": {**meta, "traceparent": traceparent}}
        await client_end.send(json.dumps(message).encode())
        while True:
            received = await client_end.receive()
            assert isinstance(received, bytes)
            reply = decode_json(received)
            if reply.get("id") == request_id and "method" not in reply:
                assert "result" in reply, reply
                return reply["result"]  # type: ignore[no-any-return]

    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, server_end)
        tg.start_soon(bridge.serve, down_end)
        with anyio.fail_after(10):
            params: JSONObject = {"name": "introduce", "arguments": {}}
            result = await call(params, 1)
            for request_id in (2, 3):
                assert result["resultType"] == "input_required", result
                responses = {key: {"action": "accept", "content": next(answers)} for key in result["inputRequests"]}
                params = {"name": "introduce", "arguments": {}, "inputResponses": responses}
                params["requestState"] = result["requestState"]
                result = await call(params, request_id)
        assert SECRET_CITY in result["content"][0]["text"]
        tg.cancel_scope.cancel()
    for end in (client_end, down_end, up_end, server_end):
        await end.aclose()
    spans = otel.finished()
    first, *later = traces
    for trace_id in later:
        links = [
            link for s in spans if s.context.trace_id == trace_id for link in s.links
            if (link.attributes or {}).get("elicitor.link") == "first_round"
        ]  # fmt: skip
        assert links and {link.context.trace_id for link in links} == {first}, (upstream, trace_id)
    exported = otel.exported_bytes()
    assert SECRET_NAME not in exported and SECRET_CITY not in exported


async def test_answers_refused_by_the_forms_checks_are_counted_on_the_persons_span(otel: Otel) -> None:
    checked = Server("checked", "1.0")

    @checked.tool()
    async def age(ctx: Context) -> str:
        outcome = await ctx.elicit("How old?", {"type": "object", "properties": {"age": {"type": "integer"}}})
        return str(outcome.data["age"]) if isinstance(outcome, Accepted) else outcome.action

    typed: Iterator[dict[str, Any]] = iter([{"age": "eleven"}, {"age": "twelve"}, {"age": 12}])

    async def person(request: Any) -> Accepted[dict[str, Any]]:
        return Accepted(next(typed))  # a person typing, wrong twice: the client's checks ask again

    async with connected(checked, elicitation=person, protocol="2025-11-25") as client:
        assert (await client.call_tool("age")).text == "12"
    [answered] = [s for s in otel.named("elicitation") if (s.attributes or {})["elicitor.side"] == "client"]
    assert (answered.attributes or {})["elicitor.elicitation.validation_failures"] == 2
    assert "eleven" not in otel.exported_bytes()


async def test_a_mistyped_mode_in_the_environment_is_said_and_native_used() -> None:
    """The mode is read at import: a fresh process with a typo in the variable still imports, and says so."""
    import os
    import sys

    code = "from elicitor import telemetry; print(telemetry.mode())"
    env = {**os.environ, "ELICITOR_TELEMETRY_MODE": "loud"}
    done = await anyio.run_process([sys.executable, "-c", code], env=env, check=True)
    assert done.stdout.decode().strip() == "native"
    assert "ELICITOR_TELEMETRY_MODE must be one of native, propagation_only, off, not 'loud'" in done.stderr.decode()


async def test_a_store_operation_that_fails_is_timed_with_its_error(otel: Otel, anyio_backend: str) -> None:
    """``elicitor.store.operation.duration`` times every Redis operation; one that fails says why."""
    if anyio_backend != "asyncio":
        pytest.skip("redis-py runs on asyncio")
    from elicitor.state import RedisStore, StoreUnavailable

    from .conftest import free_port

    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5)  # nothing listens there
    with pytest.raises(StoreUnavailable):
        await store.sessions.lookup("a-session")
    [point] = otel.metric_points()["elicitor.store.operation.duration"]
    assert point.attributes["elicitor.store.operation"] == "looking up a session"
    assert point.attributes["error.type"] and point.count == 1


async def test_setup_configures_the_sdk_for_a_prometheus_scrape() -> None:
    """``telemetry.setup(prometheus=True)`` (global providers: a process of its own) and a call: the scrape has it."""
    import sys

    code = (
        "import anyio, prometheus_client\n"
        "from elicitor import Server, telemetry\n"
        "from elicitor.testing import connected\n"
        "telemetry.setup('scraped', otlp=False, prometheus=True)\n"
        "server = Server('s', '1')\n"
        "@server.tool()\n"
        "async def t() -> str:\n"
        "    return 'ok'\n"
        "async def main():\n"
        "    async with connected(server) as client:\n"
        "        await client.call_tool('t')\n"
        "anyio.run(main)\n"
        "print(prometheus_client.generate_latest().decode())\n"
    )
    done = await anyio.run_process([sys.executable, "-c", code], check=True)
    scraped = done.stdout.decode()
    assert (
        'mcp_server_operation_duration_seconds_count{gen_ai_operation_name="execute_tool",gen_ai_tool_name="t",'
        'mcp_method_name="tools/call"'
    ) in scraped


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_what_a_caller_makes_up_never_becomes_a_metric_label(otel: Otel, protocol: str) -> None:
    """Tool and prompt names a server does not have, methods MCP does not define and protocol versions nobody
    speaks are the caller's to invent: a series each would let one client grow every replica's metrics without
    bound. The server's metrics count them under one label (``_OTHER``, or without the name); spans keep them."""
    async with connected(server, protocol=protocol) as client:
        for i in range(5):
            with pytest.raises(JSONRPCError):
                await client.call_tool(f"made-up-{i}")
            with pytest.raises(JSONRPCError):
                await client.get_prompt(f"made-up-{i}")
            with pytest.raises(JSONRPCError):
                await client.request(f"made/up-{i}", {"_meta": {"io.modelcontextprotocol/protocolVersion": f"v{i}"}})
        await client.call_tool("refuse")  # a tool the server has: named
    points = otel.metric_points()
    served = [dict(p.attributes) for p in points["mcp.server.operation.duration"]]
    labels = {(k, v) for attributes in served for k, v in attributes.items()}
    assert not any("made" in str(v) or str(v).startswith("v") for _, v in labels), labels
    assert ("gen_ai.tool.name", "refuse") in labels and ("mcp.method.name", "_OTHER") in labels
    assert len([a for a in served if a.get("mcp.method.name") == "tools/call"]) == 2  # refuse; the unknown ones
    called = {(k, v) for p in points["mcp.client.operation.duration"] for k, v in p.attributes.items()}
    assert not any("made" in str(v) for _, v in called), called
    spans = {s.name for s in otel.finished() if s.kind == SpanKind.SERVER}
    assert "tools/call made-up-4" in spans and "made/up-4" in spans  # the trace still says what was asked


async def test_error_codes_a_client_answers_a_question_with_never_become_a_metric_label(otel: Otel) -> None:
    """A client may answer a question with a JSON-RPC error of any code it likes, a new one each time: the
    server's question metrics count those under ``error.type="_OTHER"``, never the code (nor
    ``rpc.response.status_code``), so one client cannot grow them without bound; the span keeps the code."""
    codes = iter(range(4700, 4705))

    async def refuse_with_a_new_code(request: Any) -> Any:
        raise JSONRPCError(next(codes), "not telling")

    async with connected(server, protocol="2025-11-25", elicitation=refuse_with_a_new_code) as client:
        for _ in range(5):
            with pytest.raises(JSONRPCError):  # the question's error is the call's
                await client.call_tool("introduce")
    points = otel.metric_points()
    asked = [
        dict(p.attributes) for name in ("elicitor.elicitation.duration", "elicitor.elicitations")
        for p in points[name] if p.attributes.get("elicitor.side") == "server"
    ]  # fmt: skip
    assert asked and {a.get("error.type") for a in asked} == {"_OTHER"}
    assert not any("rpc.response.status_code" in a for a in asked), asked
    questions = [s for s in otel.named("elicitation") if (s.attributes or {})["elicitor.side"] == "server"]
    assert {(s.attributes or {})["error.type"] for s in questions} == {str(code) for code in range(4700, 4705)}


async def test_error_codes_a_server_makes_up_never_become_a_client_metric_label(otel: Otel) -> None:
    """A server picks any integer for an error's code, a new one per request if it likes: the client's metrics
    count codes outside JSON-RPC's reserved range as ``_OTHER`` (its span keeps the code); reserved codes stay."""
    inventive = Server("inventive", "1.0")

    @inventive.tool()
    async def odd(code: int) -> str:
        raise JSONRPCError(code, "an error of the server's own")

    async with connected(inventive) as client:
        for code in (7, 1234567, -5, -32603, -32042 + 1):
            with pytest.raises(JSONRPCError):
                await client.call_tool("odd", {"code": code})
    called = [dict(p.attributes) for p in otel.metric_points()["mcp.client.operation.duration"]]
    kinds = {a.get("error.type") for a in called if a.get("mcp.method.name") == "tools/call"}
    assert kinds == {"_OTHER", "-32603", "-32041"}, kinds
    # The conventions' rpc.response.status_code is the same code, bounded the same way; a tool call's points say
    # gen_ai.operation.name = execute_tool.
    for attributes in (a for a in called if a.get("mcp.method.name") == "tools/call"):
        assert attributes["rpc.response.status_code"] == attributes["error.type"], attributes
        assert attributes["gen_ai.operation.name"] == "execute_tool"
    errors = {(s.attributes or {}).get("error.type") for s in otel.finished() if s.kind == SpanKind.CLIENT}
    assert {"7", "1234567", "-5"} <= errors  # the trace still says what the server sent


async def test_rounds_a_client_sends_in_traces_of_their_own_link_to_the_first(otel: Otel) -> None:
    """A 2026-07-28 client that sends each round of a call in a trace of its own (one that keeps no span around the
    call, as ``client.request`` does not): the server seals the first round's span into ``requestState``, and the
    SERVER span of every later round links to it, parked or replayed, whichever replica serves it."""
    replaying = Server("replaying", "1.0", max_parked_runs=0)  # every retry replays, as on another replica
    replaying.tool()(introduce)
    answers = {"name": {"name": SECRET_NAME}, "city": {"city": SECRET_CITY}}
    never = ScriptedHandler([])  # declares elicitation; the rounds below are answered by hand
    async with connected(replaying, elicitation=never, protocol="2026-07-28") as client:
        params: dict[str, Any] = {"name": "introduce", "arguments": {}}
        while True:
            result = await client.request("tools/call", params)
            if result.get("resultType") != "input_required":
                break
            (key,) = result["inputRequests"]
            params = {
                "name": "introduce", "arguments": {}, "requestState": result["requestState"],
                "inputResponses": {key: {"action": "accept", "content": answers[key]}},
            }  # fmt: skip
    assert SECRET_NAME in result["content"][0]["text"]
    rounds = sorted(
        (s for s in otel.named("tools/call introduce") if s.kind == SpanKind.SERVER), key=lambda s: s.start_time or 0
    )
    assert len(rounds) == 3 and len({s.context.trace_id for s in rounds}) == 3  # a trace per round
    first = rounds[0].context
    assert not rounds[0].links
    for later in rounds[1:]:
        assert [(link.context.trace_id, link.context.span_id, dict(link.attributes or {})) for link in later.links] == [
            (first.trace_id, first.span_id, {"elicitor.link": "first_round"})
        ]


async def test_a_tasks_id_is_named_in_the_log_by_its_first_characters_only(otel: Otel) -> None:
    """Without sign-in a task's id is all it takes to read, answer or cancel the task, as a session's id is for the
    session: elicitor's log lines name a task by its first 8 characters, as they name a session (the spans keep
    the whole id, ``elicitor.task.id``, for the trace store; see docs/observability.md)."""

    async def refuse_every_question(request: Any) -> Any:
        raise JSONRPCError(-32600, "not now")

    with every_log_line() as lines:
        async with connected(tasked, elicitation=refuse_every_question, protocol="2025-11-25") as client:
            with contextlib.suppress(JSONRPCError):
                await client.call_tool("migrate")
    created = [s for s in otel.named("tools/call migrate") if s.kind == SpanKind.SERVER]
    task_id = str((created[0].attributes or {})["elicitor.task.id"])
    logged = "\n".join(lines)
    assert f"task {task_id[:8]}...: the client refused question" in logged, logged
    assert task_id not in logged


noisy = Server("noisy", "1.0", elicitation_timeout=0.3)


@noisy.tool()
async def chatty(ctx: Context) -> str:
    """Reports its progress and logs a line."""
    await ctx.report_progress(1, 2, "halfway")
    await ctx.log("info", "working")
    return "done"


@noisy.tool()
async def impatient(ctx: Context) -> str:
    """Asks a question and gives up on it after 0.3 s (the server's elicitation_timeout)."""
    return type(await ctx.elicit("Still there?", NAME, key="name")).__name__


@pytest.mark.parametrize("transport", ["memory", "http"])
@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_notifications_are_spans_in_the_trace_they_were_sent_in(
    otel: Otel, protocol: str, transport: str, anyio_backend: str
) -> None:
    """The conventions for MCP make a notification a span on either side, as a request is: a ``CLIENT`` span
    where it is sent (its context in ``params._meta``), a ``SERVER`` span where it is received, its child;
    ``mcp.method.name`` and no ``jsonrpc.request.id``; both counted in the operation duration metrics. A tool's
    progress and log line are in the trace of its call, under the span serving it, on either era and transport."""
    if transport == "http" and anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    progressed: list[float] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        progressed.append(done)

    def quiet(*_: Any) -> None:
        pass

    async with contextlib.AsyncExitStack() as stack:
        if transport == "http":
            url = await stack.enter_async_context(serving(noisy.http_app()))
            client = await stack.enter_async_context(
                Client.http(url, protocol=protocol, on_log=quiet, log_level="info")
            )
        else:
            client = await stack.enter_async_context(
                connected(noisy, protocol=protocol, on_log=quiet, log_level="info")
            )
        with anyio.fail_after(10):
            assert (await client.call_tool("chatty", progress=progress)).text == "done"
    assert progressed == [1]
    spans = of_calls(otel.finished())
    index = by_id(spans)
    [served] = [s for s in spans if s.name == "tools/call chatty" and s.kind == SpanKind.SERVER]
    for method in ("notifications/progress", "notifications/message"):
        [sent] = [s for s in spans if s.name == method and s.kind == SpanKind.CLIENT]
        [heard] = [s for s in spans if s.name == method and s.kind == SpanKind.SERVER]
        assert sent.parent is not None and index[sent.parent.span_id] is served
        assert heard.parent is not None and heard.parent.span_id == sent.context.span_id
        for span in (sent, heard):
            attributes = span.attributes or {}
            assert attributes["mcp.method.name"] == method and "jsonrpc.request.id" not in attributes
            assert span.context.trace_id == served.context.trace_id
    points = otel.metric_points()
    network = {"network.transport": "tcp", "network.protocol.name": "http"} if transport == "http" else {}
    for metric in ("mcp.server.operation.duration", "mcp.client.operation.duration"):
        assert {"notifications/progress", "notifications/message"} <= {
            p.attributes["mcp.method.name"] for p in points[metric]
        }
        for point in points[metric]:  # the transport too, as the conventions' metric attributes say
            assert point.attributes["network.transport"] == network.get("network.transport", "pipe")
            assert point.attributes.get("network.protocol.name") == network.get("network.protocol.name")
    # Over HTTP every message on either side says the HTTP version it went or came over (network.protocol.version):
    # a client's requests and notifications the version the server answered them in, a server's requests served
    # the POST's, what a server pushes the POST's whose stream carries it, and what arrived on a stream or in a
    # notification's POST the version of the session's connection. Over memory, none.
    for metric in ("mcp.server.operation.duration", "mcp.client.operation.duration"):
        versions = {
            (p.attributes["mcp.method.name"], p.attributes.get("network.protocol.version")) for p in points[metric]
        }
        assert {v for _, v in versions} == ({"1.1"} if network else {None}), (metric, versions)


async def test_a_question_given_up_is_cancelled_under_its_request_and_the_client_hears_it_there(otel: Otel) -> None:
    """2025-11-25: the server gives up on a question (its elicitation_timeout) and tells the client with
    ``notifications/cancelled``: a ``CLIENT`` span under the ``elicitation/create`` it cancels, and on the client a
    ``SERVER`` span under that, while the client's handling of the question ends ``error.type = cancelled``."""

    async def never(request: Any) -> Any:
        await anyio.sleep_forever()

    async with connected(noisy, elicitation=never, protocol="2025-11-25") as client:
        with anyio.fail_after(10):
            assert (await client.call_tool("impatient")).text == "Cancelled"
        with anyio.fail_after(10):
            while not otel.named("notifications/cancelled") or len(otel.named("elicitation/create")) < 2:
                await anyio.sleep(0.01)
    spans = of_calls(otel.finished())
    index = by_id(spans)
    [asked] = [s for s in spans if s.name == "elicitation/create" and s.kind == SpanKind.CLIENT]
    [handled] = [s for s in spans if s.name == "elicitation/create" and s.kind == SpanKind.SERVER]
    [notice] = [s for s in spans if s.name == "notifications/cancelled" and s.kind == SpanKind.CLIENT]
    [heard] = [s for s in spans if s.name == "notifications/cancelled" and s.kind == SpanKind.SERVER]
    assert notice.parent is not None and index[notice.parent.span_id] is asked
    assert heard.parent is not None and heard.parent.span_id == notice.context.span_id
    assert (asked.attributes or {})["error.type"] == "timeout"
    assert (handled.attributes or {})["error.type"] == "cancelled"
    assert len({s.context.trace_id for s in spans}) == 1


@pytest.mark.parametrize("transport", ["memory", "http"])
@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_a_handshake_era_session_is_timed_on_both_sides_with_bounded_labels(
    otel: Otel, protocol: str, transport: str, anyio_backend: str
) -> None:
    """The conventions' ``mcp.server.session.duration`` and ``mcp.client.session.duration``: one point per
    handshake-era session on each side, once it ends, labelled by the revision and the transport and never by the
    session's id; a 2026-07-28 client has no session, so neither side records one."""
    if transport == "http" and anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    async with contextlib.AsyncExitStack() as stack:
        if transport == "http":
            url = await stack.enter_async_context(serving(server.http_app()))
            client = await stack.enter_async_context(Client.http(url, protocol=protocol))
        else:
            client = await stack.enter_async_context(connected(server, protocol=protocol))
        with anyio.fail_after(30):
            await client.call_tool("refuse")
            await anyio.sleep(0.05)  # a session that lasts: its duration is more than nothing
    points = otel.metric_points()
    if protocol == "2026-07-28":
        assert "mcp.server.session.duration" not in points and "mcp.client.session.duration" not in points
        return
    network = (
        {"network.transport": "tcp", "network.protocol.name": "http", "network.protocol.version": "1.1"}
        if transport == "http"
        else {"network.transport": "pipe"}
    )
    with anyio.fail_after(30):  # the server's session ends once the client's DELETE (or its pipe's end) reaches it
        while "mcp.server.session.duration" not in otel.metric_points():
            await anyio.sleep(0.01)
    points = otel.metric_points()
    for metric in ("mcp.server.session.duration", "mcp.client.session.duration"):
        [point] = points[metric]
        assert dict(point.attributes) == {"mcp.protocol.version": protocol, **network}
        assert point.count == 1 and point.sum >= 0.05


async def test_the_proxys_two_sessions_are_timed_each_on_its_side(otel: Otel) -> None:
    """``elicitor proxy`` runs two handshake-era sessions for a client: one it serves (``mcp.server.session.duration``)
    and one it holds with the server (``mcp.client.session.duration``): each side counts two, the proxy's and the
    client's or the server's own."""
    from elicitor.proxy import Bridge, static
    from elicitor.transports import memory_pair

    client_end, down_end = memory_pair()
    up_end, server_end = memory_pair()
    bridge = Bridge(static(up_end), upstream_protocol="2025-11-25")
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, server_end)
        tg.start_soon(bridge.serve, down_end)
        async with Client(client_end, protocol="2025-11-25") as client:
            with anyio.fail_after(30):
                await client.call_tool("refuse")
        with anyio.fail_after(30):  # the proxy ends with its client, and its upstream session with it
            while sum(p.count for p in otel.metric_points().get("mcp.client.session.duration", ())) < 2:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    points = otel.metric_points()
    for metric in ("mcp.server.session.duration", "mcp.client.session.duration"):
        counted = {p.attributes["mcp.protocol.version"]: p.count for p in points[metric]}
        assert counted == {"2025-11-25": 2}, metric
