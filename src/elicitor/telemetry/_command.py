"""``elicitor serve --telemetry MODE --metrics [HOST:]PORT``: telemetry for a server run from the command line.

A person running ``elicitor serve`` cannot call :func:`elicitor.telemetry.setup` before the server starts, so the
command does it for them, from two options and the standard OpenTelemetry environment variables:

* ``--telemetry native`` sets up the SDK (the ``[otel]`` extra) exporting spans and metrics over OTLP/HTTP, as
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` (default ``http://localhost:4318``), ``OTEL_EXPORTER_OTLP_HEADERS``,
  ``OTEL_SERVICE_NAME`` (default: the server's name) and the exporters' other variables say;
  ``OTEL_TRACES_EXPORTER=none`` or ``OTEL_METRICS_EXPORTER=none`` keeps one signal home. When the process already
  has an SDK (run under ``opentelemetry-instrument``, say), that one is used and nothing is set up.
  ``propagation_only`` and ``off`` set up nothing: they are the modes of :func:`elicitor.telemetry.configure`.
  Without the option, ``ELICITOR_TELEMETRY_MODE`` decides, as for any program using elicitor.
* ``--metrics [HOST:]PORT`` serves the metrics for a Prometheus scrape at ``http://HOST:PORT/metrics`` (HOST
  defaults to ``127.0.0.1``: the endpoint tells request counts and durations, so it listens on loopback unless
  told otherwise), on a port of its own, whichever transport the server speaks.

* ``--log-format json`` writes elicitor's log records to stderr as one JSON object per line, each with the trace
  and span ids of the request it was logged in (:class:`~elicitor.telemetry.JsonFormatter`,
  :class:`~elicitor.telemetry.TraceContextFilter`), at level INFO; it needs no SDK (without one the ids are empty).

Anything that cannot work is a :class:`ValueError` saying what to do, raised before the server starts.
"""

from __future__ import annotations

from ..i18n._message import N_
from ._state import MODES, Mode, mode_from_env, set_mode

EXTRA = "pip install 'elicitor[otel]'"


def serve_telemetry(mode: str | None, metrics: str | None, service_name: str) -> None:
    """Set up what ``elicitor serve --telemetry mode --metrics metrics`` asks for (see the module docstring).

    Raises:
        ValueError: the options contradict each other, ``--metrics`` is no ``[HOST:]PORT``, or the SDK is
            missing; the message says what to do.
    """
    chosen: Mode = _mode(mode)
    address = _address(metrics) if metrics is not None else None
    if address is not None and chosen != "native":
        raise ValueError(f"--metrics needs telemetry on: --telemetry native (it is {chosen})")
    exporting = mode == "native"
    if exporting or address is not None:
        _require_sdk(
            ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http") if exporting else ("opentelemetry.sdk",),
            "--telemetry native" if exporting else "--metrics",
        )
        if address is not None:
            _require_sdk(("opentelemetry.exporter.prometheus", "prometheus_client"), "--metrics")
        _set_up(service_name, otlp=exporting, prometheus=address is not None)
    set_mode(chosen, None)
    if address is not None:
        from prometheus_client import start_http_server

        host, port = address
        try:
            start_http_server(port, addr=host)
        except OSError as exc:
            raise ValueError(f"--metrics: cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _mode(mode: str | None) -> Mode:
    if mode is None:
        return mode_from_env()  # a mistyped ELICITOR_TELEMETRY_MODE is refused here, before anything starts
    for known in MODES:
        if mode == known:
            return known
    raise ValueError(N_("--telemetry must be one of {modes}, not {mode}", modes=", ".join(MODES), mode=repr(mode)))


def _address(text: str) -> tuple[str, int]:
    """``[HOST:]PORT`` (an IPv6 host in brackets) as a host and a port."""
    host, colon, port = text.rpartition(":")
    host = host.strip("[]") if colon else "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536 or (colon and not host):
        raise ValueError(N_("--metrics takes [HOST:]PORT (e.g. 9464 or 0.0.0.0:9464), not {text}", text=repr(text)))
    return host, int(port)


def _require_sdk(modules: tuple[str, ...], option: str) -> None:
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            raise ValueError(
                f"{option} needs the OpenTelemetry SDK and its exporters, which are not installed ({name} is "
                f"missing): {EXTRA}"
            ) from None


def _set_up(service_name: str, *, otlp: bool, prometheus: bool) -> None:
    """The SDK, unless the process has one already (``opentelemetry-instrument``, the application's own)."""
    from opentelemetry import trace

    from . import setup

    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return
    setup(service_name, otlp=otlp, prometheus=prometheus)  # OTEL_SERVICE_NAME, OTEL_*_EXPORTER=none: honoured there


def json_logs() -> None:
    """``--log-format json``: the root logger writes JSON lines to stderr (stdout may be the protocol's, on stdio),
    replacing the handlers it had, at INFO unless a level was chosen (the Python default is WARNING)."""
    import logging
    import sys

    from . import JsonFormatter, TraceContextFilter

    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(TraceContextFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    if root.level == logging.WARNING:
        root.setLevel(logging.INFO)
