"""``elicitor serve --telemetry native --metrics [HOST:]PORT``: a server run from the command line exports its spans
and metrics over OTLP/HTTP (to a receiver this test runs, named by the standard ``OTEL_EXPORTER_OTLP_ENDPOINT``) and
serves a Prometheus scrape; what cannot work (no SDK, options that contradict each other) is refused before the
server starts, saying what to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import httpx2 as httpx
import pytest
from opentelemetry.trace import SpanKind

from elicitor import Client
from elicitor.cli import main

from .conftest import ROOT
from .replicas import free_port, wait_for_port
from .test_telemetry import Otel, otel

__all__ = ["otel"]  # the fixture, shared


class Receiver:
    """An OTLP/HTTP endpoint that keeps what it is sent (protobuf bodies, by path)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, bytes]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                received.append((self.path, body))
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def sent_to(self, path: str) -> bytes:
        return b"".join(body for at, body in list(self.received) if at == path)


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def inherited() -> dict[str, str]:
    """Our environment without the OpenTelemetry variables someone may have set: the test names its own."""
    return {name: value for name, value in os.environ.items() if not name.startswith(("OTEL_", "ELICITOR_TELEMETRY"))}


@contextmanager
def serving(arguments: list[str], port: int, environment: dict[str, str], log: Path) -> Iterator[None]:
    command = [sys.executable, "-m", "elicitor", "serve", "tests.peers.cli_server:server", "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, *arguments], cwd=ROOT, env={**inherited(), "PYTHONPATH": str(ROOT), **environment},
            stdout=out, stderr=out, start_new_session=True,
        )  # fmt: skip
    try:
        wait_for_port(port, process)
        yield
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("trusted", [False, True])
async def test_serve_exports_over_otlp_and_serves_a_scrape(anyio_backend: str, trusted: bool, tmp_path: Path) -> None:
    """... and believes an ``X-Forwarded-For`` only from the peers ``--forwarded-allow-ips`` names: by default a
    client on loopback (uvicorn believed loopback) could put any address in the spans' ``client.address``."""
    port, metrics = free_port(), free_port()
    environment = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "",  # set below: the receiver's
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # milliseconds: spans leave soon after they end
        "OTEL_METRIC_EXPORT_INTERVAL": "300",
        "ELICITOR_TELEMETRY_MODE": "off",  # the option wins over the environment
    }
    with receiving() as receiver:
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
        arguments = ["--telemetry", "native", "--metrics", f"127.0.0.1:{metrics}"]
        arguments += ["--forwarded-allow-ips", "127.0.0.1"] if trusted else []
        with serving(arguments, port, environment, tmp_path / "serve.log"):
            said = {"x-forwarded-for": "203.0.113.9"}  # by a balancer on 127.0.0.1, or a client lying
            async with Client.http(f"http://127.0.0.1:{port}/mcp", protocol="2026-07-28", headers=said) as client:
                assert (await client.call_tool("count")).text == "counted to three"
            async with httpx.AsyncClient() as http:
                scraped = (await http.get(f"http://127.0.0.1:{metrics}/metrics")).text
            with anyio.fail_after(30):
                while b"tools/call count" not in receiver.sent_to(
                    "/v1/traces"
                ) or b"mcp.server.operation.duration" not in receiver.sent_to(
                    "/v1/metrics"
                ):  # the first metrics may have left before the call: wait for an export made after it
                    await anyio.sleep(0.1)
    assert "mcp_server_operation_duration_seconds_bucket" in scraped, scraped
    assert 'mcp_method_name="tools/call"' in scraped
    traces = receiver.sent_to("/v1/traces")
    assert b"cli-desk" in traces  # service.name: the server's name, OTEL_SERVICE_NAME unset
    assert (b"203.0.113.9" in traces) is trusted  # client.address: believed from a trusted peer only
    assert b"mcp.server.operation.duration" in receiver.sent_to("/v1/metrics")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_serve_logs_json_lines_carrying_the_callers_trace(anyio_backend: str, otel: Otel, tmp_path: Path) -> None:
    """``--log-format json`` over stdio: the server's log record of a failing tool, on stderr, is a JSON object
    whose trace id is the calling client's (the context crossed the pipe in ``_meta``; the server's SDK made the
    span the record was logged in, exporting nothing: ``OTEL_TRACES_EXPORTER=none``)."""
    command = [
        sys.executable, "-m", "elicitor", "serve", "tests.test_telemetry:server", "--transport", "stdio",
        "--telemetry", "native", "--log-format", "json",
    ]  # fmt: skip
    environment = {
        **inherited(), "PYTHONPATH": str(ROOT), "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none",
    }  # fmt: skip
    with (tmp_path / "stderr").open("wb") as stderr:
        async with Client.stdio(command, env=environment, cwd=ROOT, stderr=stderr, protocol="2025-11-25") as client:
            with anyio.fail_after(30):
                assert (await client.call_tool("refuse")).is_error
    records = [json.loads(line) for line in (tmp_path / "stderr").read_text().splitlines() if line.startswith("{")]
    [failed] = [r for r in records if r["message"] == "tool 'refuse' failed"]
    [call] = [s for s in otel.named("tools/call refuse") if s.kind == SpanKind.CLIENT]
    assert failed["logger"] == "elicitor.server" and failed["level"] == "ERROR" and "exception" in failed
    assert failed["trace_id"] == format(call.context.trace_id, "032x") and len(failed["span_id"]) == 16


def test_serve_without_the_sdk_says_how_to_install_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['opentelemetry.sdk'] = None  # as if the [otel] extra were not installed\n"
        "from elicitor.cli import main\n"
        "sys.exit(main(['serve', 'tests.peers.cli_server:server', '--telemetry', 'native']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**inherited(), "PYTHONPATH": str(ROOT)}, capture_output=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "pip install 'elicitor[otel]'" in done.stderr.decode()


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--telemetry", "off", "--metrics", "9464"], "--metrics needs telemetry on"),
        (["--telemetry", "propagation_only", "--metrics", "9464"], "--metrics needs telemetry on"),
        (["--metrics", "localhost:"], "--metrics takes [HOST:]PORT"),
        (["--metrics", "99999"], "--metrics takes [HOST:]PORT"),
    ],
)
def test_serve_refuses_telemetry_options_that_cannot_work(
    arguments: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--lang", "en", "serve", "tests.peers.cli_server:server", *arguments]) == 2
    assert said in capsys.readouterr().err


def test_a_mistyped_mode_in_the_environment_stops_serve_with_metrics(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ELICITOR_TELEMETRY_MODE", "natve")
    assert main(["--lang", "en", "serve", "tests.peers.cli_server:server", "--metrics", "9464"]) == 2
    assert "ELICITOR_TELEMETRY_MODE must be one of" in capsys.readouterr().err
