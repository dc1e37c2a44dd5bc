"""``elicitor proxy`` with an OpenTelemetry SDK: its spans to a file, as ``traced_replica``'s.

``python -m tests.peers.traced_proxy proxy --listen HOST:PORT URL`` (the ``elicitor`` command's arguments) with
``ELICITOR_SPANS_DIR`` set: every span the proxy finishes is appended as one JSON line to
``$ELICITOR_SPANS_DIR/<pid>.jsonl``, so a test can join the proxy's side of a call to the client's and the
replicas'. The command has no telemetry option of its own: an application configures the SDK before it runs, as
here (or ``opentelemetry-instrument`` does).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from elicitor.cli import main as elicitor
from tests.peers.traced_replica import FileExporter


def main() -> None:
    folder = Path(os.environ["ELICITOR_SPANS_DIR"])
    resource = Resource.create({"service.name": "proxy", "service.instance.id": str(os.getpid())})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(FileExporter(folder / f"{os.getpid()}.jsonl")))
    trace.set_tracer_provider(provider)
    sys.exit(elicitor(sys.argv[1:]))


if __name__ == "__main__":
    main()
