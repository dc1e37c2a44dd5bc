"""``tests.test_telemetry``'s server (a tool asking two questions) over stdio, with an OpenTelemetry SDK.

``python -m tests.peers.traced_stdio`` with ``ELICITOR_SPANS_FILE`` set: every span the server side finishes is
appended to that file as one JSON line, so a test holding the client's spans in memory can join the two sides.
"""

from __future__ import annotations

import os
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.peers.traced_replica import FileExporter


def main() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter(Path(os.environ["ELICITOR_SPANS_FILE"]))))
    trace.set_tracer_provider(provider)
    from tests.test_telemetry import server

    server.run("stdio")


if __name__ == "__main__":
    main()
