"""OpenTelemetry for elicitor: traces, metrics and correlated logs, free until an SDK is configured.

elicitor uses the OpenTelemetry API only. Configure an SDK (or call :func:`setup` with the ``[otel]`` extra) before
starting a server or a client, and every request on either side becomes a span named and attributed per the
OpenTelemetry semantic conventions for MCP (https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/), each
question an ``elicitation`` span, and trace context travels in ``params._meta`` (``traceparent``, ``tracestate``:
SEP-414), so a client's span is the parent of the server's, and every round of a 2026-07-28 call is one trace on
whichever replica it lands. Without an SDK nothing is called: see ``docs/observability.md`` for the cost.

Example::

    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)  # before the server or client starts
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

from ._state import ENV_MODE, Mode, mode_from_env, refresh, set_mode, state

__all__ = ["ENV_MODE", "JsonFormatter", "Mode", "TraceContextFilter", "configure", "mode", "setup", "with_metrics"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def configure(
    mode: Mode | None = None,
    *,
    record_content: bool | None = None,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
) -> None:
    """Choose what elicitor does with OpenTelemetry (default: ``ELICITOR_TELEMETRY_MODE``, else ``native``).

    Args:
        mode: ``"native"`` — spans, metrics and trace context in ``_meta`` once an SDK is configured;
            ``"propagation_only"`` — carry trace context through ``_meta`` but make no spans or metrics of our own
            (another instrumentation owns them); ``"off"`` — touch nothing. The same values as FastMCP's
            ``FASTMCP_TELEMETRY_MODE``.
        record_content: also record tool arguments (``gen_ai.tool.call.arguments``), which the conventions mark
            opt-in because they may be sensitive, and resource URIs (``mcp.resource.uri``) whole: without it, a
            URI is recorded without its query, fragment and user (they may carry a code or a token). Answers, the
            messages shown to a person and URL-mode URLs are never recorded.
        tracer_provider: use this provider rather than the global one (``trace.set_tracer_provider``).
        meter_provider: use this provider rather than the global one (``metrics.set_meter_provider``).

    Call it (or configure the SDK) before servers and clients start: elicitor looks for an SDK when a connection
    or an HTTP app starts, never on each request.
    """
    set_mode(mode, record_content, tracer_provider, meter_provider)


def mode() -> Mode:
    """The mode in force (see :func:`configure`)."""
    return state.mode


def setup(
    service_name: str = "elicitor", *, otlp: bool = True, prometheus: bool = False, console: bool = False
) -> None:
    """Batteries: an SDK tracer and meter provider exporting over OTLP/HTTP (``pip install 'elicitor[otel]'``).

    The exporters read the standard variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, default ``http://localhost:4318``;
    ``OTEL_SERVICE_NAME`` overrides ``service_name``; ``OTEL_TRACES_EXPORTER=none`` or ``OTEL_METRICS_EXPORTER=none``
    exports no spans, or no metrics, over OTLP). Spans go through a batch processor; metrics are exported every
    minute (``OTEL_METRIC_EXPORT_INTERVAL``). ``prometheus=True`` also keeps the metrics for a Prometheus
    scrape (serve them with :func:`with_metrics`). ``console=True`` also prints spans, for a first look.

    Raises:
        ImportError: the SDK or the OTLP exporter is not installed (the ``[otel]`` extra).
    """
    import os

    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)})
    tracer_provider = TracerProvider(resource=resource)
    readers: list[MetricReader] = []
    if otlp and _exporting("OTEL_TRACES_EXPORTER"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if otlp and _exporting("OTEL_METRICS_EXPORTER"):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    if prometheus:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader

        readers.append(PrometheusMetricReader())
    if console:
        tracer_provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(tracer_provider)
    if readers:
        metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))
    refresh()


def _exporting(variable: str) -> bool:
    """Whether the standard ``OTEL_TRACES_EXPORTER``/``OTEL_METRICS_EXPORTER`` leaves OTLP on (``none``: off)."""
    import os

    return os.environ.get(variable, "otlp").strip().lower() != "none"


def with_metrics(app: ASGIApp, path: str = "/metrics") -> ASGIApp:
    """``app`` with a Prometheus scrape endpoint at ``path`` (``pip install 'elicitor[otel]'``).

    Installs an SDK meter provider whose reader is the Prometheus exporter, unless a meter provider is already set
    (``setup(prometheus=True)`` sets one with that reader; with a provider of your own, give it an
    ``opentelemetry.exporter.prometheus.PrometheusMetricReader``). Every other path goes
    to ``app``. Bind the endpoint where only your scraper reaches it: it tells request counts and durations.

    Example::

        app = telemetry.with_metrics(HttpApp(server))
    """
    from opentelemetry import metrics
    from prometheus_client import make_asgi_app

    from ._instruments import meter_configured

    if not meter_configured():
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider

        metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))
    refresh()
    scrape: ASGIApp = make_asgi_app()

    async def metrics_or_app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") == path:
            await scrape(scope, receive, send)
        else:
            await app(scope, receive, send)

    return metrics_or_app


class TraceContextFilter(logging.Filter):
    """Adds ``trace_id`` and ``span_id`` (hex, empty outside a span) to every record it sees, so a log line can be
    found from its trace and the other way round. Attach it to a handler: ``handler.addFilter(TraceContextFilter())``.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        record.trace_id, record.span_id = _current_ids()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time``, ``level``, ``logger``, ``message``, ``trace_id``, ``span_id`` (and
    ``exception`` when there is one). elicitor's own log messages never contain answers or tokens.

    Example::

        handler = logging.StreamHandler()
        handler.addFilter(TraceContextFilter())
        handler.setFormatter(JsonFormatter())
        logging.getLogger("elicitor").addHandler(handler)
    """

    @staticmethod
    def converter(seconds: float | None = None, /) -> time.struct_time:
        return time.gmtime(seconds)

    def format(self, record: logging.LogRecord) -> str:
        trace_id, span_id = getattr(record, "trace_id", None), getattr(record, "span_id", None)
        if trace_id is None:
            trace_id, span_id = _current_ids()
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": trace_id or "",
            "span_id": span_id or "",
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def _current_ids() -> tuple[str, str]:
    """The current trace and span ids in hex (empty when there is no span, or nobody imported the API)."""
    if "opentelemetry.trace" not in sys.modules:
        return "", ""
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return "", ""
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def _mode_at_import() -> Mode:
    try:
        return mode_from_env()
    except ValueError as exc:  # a typo in the environment must not stop the program importing elicitor
        # Said while elicitor is imported, before any program could choose a language: to whoever set the
        # variable, in their environment's language (elicitor serve's refusal of it follows in the same words).
        from ..i18n import N_, from_environment

        said = N_("{problem}; using native", problem=exc.args[0])
        logging.getLogger("elicitor.telemetry").warning("%s", from_environment().text(said))
        return "native"


set_mode(_mode_at_import(), None)
