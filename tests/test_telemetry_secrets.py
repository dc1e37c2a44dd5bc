"""Nothing secret in what an operator collects: a workload over real HTTP with sign-in, on both eras (form answers,
a URL-mode elicitation whose link carries a code, a completion tried by another user, a task whose run fails, a
token the verifier chokes on), with every log line elicitor writes at every level, every span and every metric
captured, and each planted value searched for in all of it.

What may appear is what docs/observability.md promises: a session's and a task's id whole on spans (the trace
store is to be kept as closed as the endpoint), their first 8 characters in logs; nothing else of the values below.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import warnings
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

import anyio
import pytest
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from elicitor import Accepted, BearerToken, Client, Context, JSONRPCError, ScriptedHandler, Server
from elicitor.server.http import AccessToken, Protection

from .conftest import serving
from .test_telemetry import Otel, every_log_line, otel

__all__ = ["otel"]  # the fixture, shared

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn runs on asyncio


TOKEN = "tok-Quokka-Marmalade-3391"
OWNER = "user-Wombat-Paprika-5120"
INTRUDER = "user-Narwhal-Cobalt-8803"
ANSWER = "Zephyrine-Oblong-7756"
CODE = "code-Halibut-Saffron-2468"
QUESTION = "Which vault, Periwinkle-4471?"
FAILURE = "Tumbleweed-Cardamom-6002"
CHOKING = "choke-Albatross-Juniper-1177"

FORM = {"type": "object", "properties": {"vault": {"type": "string"}}, "required": ["vault"]}

vault = Server("vault", "1.0", task_poll_interval=0.05)


@vault.tool()
async def enrol(ctx: Context) -> str:
    """A form question, then a link whose query carries a code."""
    answer = await ctx.elicit(QUESTION, FORM, key="vault")
    assert isinstance(answer, Accepted)
    visited = await ctx.elicit_url(
        "Confirm on the vault's page.", f"https://vault.example/c/{{elicitation_id}}?c={CODE}"
    )
    assert isinstance(visited, Accepted)
    return "enrolled"


@vault.tool(scopes=["vault:admin"])
async def rotate() -> str:
    """Needs a scope the owner's token lacks."""
    return "rotated"


@vault.tool(task="required")
async def audit(ctx: Context) -> str:
    """A task that asks, then fails with the answer in its exception (the application's text, for its log)."""
    assert isinstance(await ctx.elicit(QUESTION, FORM, key="vault"), Accepted)
    raise RuntimeError(f"audit failed: {FAILURE}")


class Verifier:
    """One user's token; a second token makes the verifier raise an error that quotes it (as careless code does)."""

    async def verify(self, token: str) -> AccessToken | None:
        if token == CHOKING:
            raise ValueError(f"cannot decode {token!r}")
        return AccessToken(subject=OWNER, scopes=frozenset({"mcp"})) if token == TOKEN else None


Scope = MutableMapping[str, Any]
App = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def overheard(app: App, said: set[str]) -> App:
    """``app``, with every ``requestState`` and ``Mcp-Session-Id`` it sends kept in ``said``: what a client holds
    that would let someone else go on with its call or its session."""

    async def listening(
        scope: Scope, receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
    ) -> None:
        async def heard(message: Any) -> None:
            if message["type"] == "http.response.start":
                said.update(v.decode() for k, v in message.get("headers", []) if k == b"mcp-session-id")
            elif message["type"] == "http.response.body":
                body = message.get("body", b"").decode("utf-8", "replace")
                said.update(re.findall(r'"requestState":"([^"]+)"', body))
            await send(message)

        await app(scope, receive, heard)

    return listening


@contextlib.contextmanager
def sdk_log_records() -> Iterator[Callable[[], list[ReadableLogRecord]]]:
    """The OpenTelemetry SDK's own logging integration on elicitor's loggers, at every level: its
    ``LoggingHandler`` turning each record into an OpenTelemetry log record (the current span's ids, the record's
    attributes, an exception's type, message and stack) for an in-memory exporter. What an operator who ships
    logs over OTLP gets."""
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    with warnings.catch_warnings():  # deprecated for opentelemetry-instrumentation-logging's, still the SDK's own
        warnings.simplefilter("ignore", DeprecationWarning)
        handler = LoggingHandler(logging.DEBUG, logger_provider=provider)
    logger = logging.getLogger("elicitor")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield lambda: list(exporter.get_finished_logs())
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        provider.shutdown()


async def test_no_secret_reaches_a_log_line_a_span_or_a_metric(otel: Otel) -> None:
    held: set[str] = set()
    protection = Protection(Verifier(), "http://127.0.0.1/mcp", ["https://issuer.example"])
    app = overheard(vault.http_app(auth=protection), held)
    with every_log_line() as lines, sdk_log_records() as records:
        async with serving(app) as url:
            for protocol in ("2025-11-25", "2026-07-28"):
                person = ScriptedHandler([{"vault": ANSWER}, "accept"], modes=frozenset({"form", "url"}))
                async with Client.http(url, auth=BearerToken(TOKEN), elicitation=person, protocol=protocol) as client:
                    with anyio.fail_after(30):
                        assert (await client.call_tool("enrol")).text == "enrolled"
                    [link] = person.url_requests
                    elicitation_id = link.url.split("/c/", 1)[1].split("?", 1)[0]
                    assert not await vault.complete_url_elicitation(elicitation_id, principal=INTRUDER)
                    assert await vault.complete_url_elicitation(elicitation_id, principal=OWNER)
            person = ScriptedHandler([{"vault": ANSWER}])
            async with Client.http(url, auth=BearerToken(TOKEN), elicitation=person, protocol="2025-11-25") as client:
                with anyio.fail_after(30), contextlib.suppress(JSONRPCError):
                    await client.call_tool("audit")
            with anyio.fail_after(30), contextlib.suppress(Exception):  # refused: 401
                async with Client.http(url, auth=BearerToken(CHOKING), protocol="2025-11-25") as client:
                    await client.list_tools()
    task_ids = [str(a["elicitor.task.id"]) for s in otel.finished() if "elicitor.task.id" in (a := s.attributes or {})]
    logged = "\n".join(lines)
    exported = otel.exported_bytes()
    # The workload did what it says: the refusals were logged, the task ran and failed, sessions and rounds were held.
    assert "belongs to another user" in logged and "the token verifier failed" in logged, logged
    assert task_ids and "tool 'audit' failed" in logged, logged
    states, sessions = [h for h in held if len(h) > 100], [h for h in held if len(h) <= 100]
    assert len(states) >= 2 and len(sessions) >= 2, held
    for secret in (TOKEN, OWNER, INTRUDER, ANSWER, CODE, QUESTION, CHOKING, *states):
        assert secret not in logged, (secret, logged)
        assert secret not in exported, secret
    for named in (*sessions, *task_ids):  # on spans by design (mcp.session.id, elicitor.task.id), never whole in logs
        assert named not in logged
    assert FAILURE not in exported  # the application's exception text: in its log, never on a span
    # The same records as the SDK's logging integration exports them: each one written while a span was current
    # carries that span's trace and span ids; none holds a secret, in its body or any attribute.
    shipped = records()
    assert len(shipped) == len(lines)
    spans = {(s.context.trace_id, s.context.span_id): s for s in otel.finished()}
    for record, line in zip(shipped, lines, strict=True):
        ids = (record.log_record.trace_id or 0, record.log_record.span_id or 0)
        said = json.loads(line)  # what TraceContextFilter put on the same record: the same span
        assert (f"{ids[0]:032x}" if ids[0] else "", f"{ids[1]:016x}" if ids[1] else "") == (
            said["trace_id"],
            said["span_id"],
        ), said
        assert ids == (0, 0) or ids in spans, said  # a span of the workload's, exported

    def under(text: str) -> list[ReadableSpan | None]:
        found = [r.log_record for r in shipped if text in str(r.log_record.body)]
        return [spans.get((r.trace_id or 0, r.span_id or 0)) for r in found]

    # A refused URL-mode completion is logged inside its own span (completed = false), the tool's failure inside
    # the span serving the call.
    refusals = under("belongs to another user")
    assert len(refusals) == 2
    for span in refusals:
        assert span is not None and span.name == "elicitation complete", span
        assert (span.attributes or {})["elicitor.elicitation.completed"] is False
    [failed] = under("tool 'audit' failed")
    assert failed is not None and failed.name == "tools/call audit"
    every = "\n".join(r.to_json() for r in shipped)
    for secret in (TOKEN, OWNER, INTRUDER, ANSWER, CODE, QUESTION, CHOKING, *states):
        assert secret not in every, (secret, every)
    for named in (*sessions, *task_ids):
        assert named not in every


async def test_a_call_refused_for_a_missing_scope_is_a_span_in_the_callers_trace(otel: Otel) -> None:
    """A ``tools/call`` whose token lacks the tool's scope is refused with 403 before anything serves it: still a
    ``SERVER`` span in the caller's trace, ``error.type = insufficient_scope`` (no JSON-RPC error answers it, so
    no ``rpc.response.status_code``) and ``http.response.status_code = 403``, without an error status (the
    caller's to fix: a token with the scope)."""
    protection = Protection(Verifier(), "http://127.0.0.1/mcp", ["https://issuer.example"])
    async with (
        serving(vault.http_app(auth=protection)) as url,
        Client.http(url, auth=BearerToken(TOKEN), protocol="2025-11-25") as client,
    ):
        with anyio.fail_after(30), pytest.raises(JSONRPCError):  # this token can do nothing more
            await client.call_tool("rotate")
    [sent] = [s for s in otel.named("tools/call rotate") if s.kind == SpanKind.CLIENT]
    [refused] = [s for s in otel.named("tools/call rotate") if s.kind == SpanKind.SERVER]
    assert refused.parent is not None and refused.parent.span_id == sent.context.span_id
    attributes = refused.attributes or {}
    assert attributes["error.type"] == "insufficient_scope" and attributes["http.response.status_code"] == 403
    assert "rpc.response.status_code" not in attributes and refused.status.status_code == StatusCode.UNSET
    assert TOKEN not in otel.exported_bytes()
