"""``tests.peers.replica_server`` with an OpenTelemetry SDK: spans to a file, metrics at ``/metrics``.

``python -m tests.peers.traced_replica --port N`` with ``ELICITOR_SPANS_DIR`` set: every finished span is appended
as one JSON line to ``$ELICITOR_SPANS_DIR/<pid>.jsonl`` (the replica tests read what each replica recorded), and
the app is wrapped by ``telemetry.with_metrics``, so ``GET /metrics`` is a Prometheus scrape.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from elicitor import telemetry
from tests.peers import replica_server


class FileExporter(SpanExporter):
    """One JSON line per span, appended (a replica killed mid-test keeps what it wrote)."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._path.open("a") as out:
            for span in spans:
                out.write(json.dumps(json.loads(span.to_json())) + "\n")
        return SpanExportResult.SUCCESS


def main() -> None:
    folder = Path(os.environ["ELICITOR_SPANS_DIR"])
    resource = Resource.create({"service.name": "replica", "service.instance.id": str(os.getpid())})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(FileExporter(folder / f"{os.getpid()}.jsonl")))
    trace.set_tracer_provider(provider)
    server = replica_server.server
    make_app = server.http_app

    def http_app(*args: Any, **options: Any) -> Any:
        return telemetry.with_metrics(make_app(*args, **options))

    server.http_app = http_app  # type: ignore[method-assign]
    replica_server.main()


if __name__ == "__main__":
    main()
