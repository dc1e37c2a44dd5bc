"""What OpenTelemetry costs: CPU time per call without an SDK (the hooks alone), and with the SDK exporting.

    python bench/telemetry.py [--calls 300] [--runs 7] [--instructions]

The workload is a tool call that asks one question, client and server in one process over the in-memory
transport (so the figure is both sides' CPU, no I/O), on 2025-11-25 and on 2026-07-28. Each variant runs in a
process of its own, in turns (A B C D A B C D...), ``--runs`` times; the figure is the median CPU time per call
(``time.process_time``, which a loaded machine disturbs less than wall time):

* **before** and **hooks** — the source trees of the commit before the telemetry hooks and of the commit that
  completed them (exported with ``git archive``; nothing else changed between the two), no SDK: the hooks' cost,
  which must stay within 2 %;
* **now** and **SDK** — this tree without an SDK, and with the SDK's tracer provider (a batch span processor
  handing spans to an exporter that drops them) and meter provider (an in-memory reader): what turning it on costs.

``--instructions`` also counts the instructions of one call in **before** and **hooks** with valgrind's callgrind,
on both eras: exact on a loaded machine, where CPU time moves by tens of percent from run to run (about four
minutes per era). The medians are recorded in ``bench/results/latest.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import record

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BEFORE = "f96ac36"
"""The last commit before the telemetry hooks."""
HOOKS = "074b1d1"
"""The commit that completed the hooks on the path measured (e7b0321 added the server's, 074b1d1 the client's)."""

WORKLOAD = r"""
import sys, time
import anyio

variant, protocol, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
if variant == "sdk":
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Drop()))
    from opentelemetry import metrics, trace
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))

from elicitor import Context, ScriptedHandler, Server
from elicitor.testing import connected

server = Server("bench", "1.0")
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

@server.tool()
async def ask(ctx: Context) -> str:
    return (await ctx.elicit("Your name?", NAME)).action

async def main() -> None:
    handler = ScriptedHandler(otherwise=lambda request: {"name": "Ada"})
    async with connected(server, elicitation=handler, protocol=protocol) as client:
        for _ in range(50):
            await client.call_tool("ask")
        start = time.process_time()
        for _ in range(calls):
            await client.call_tool("ask")
        print((time.process_time() - start) / calls * 1e6)

anyio.run(main)
"""


def export(commit: str, into: Path) -> Path:
    """``commit``'s ``src`` tree, from git."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit, "src"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def one(source: Path, variant: str, protocol: str, calls: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(source)}
    done = subprocess.run(
        [sys.executable, "-c", WORKLOAD, variant, protocol, str(calls)], env=env, check=True, capture_output=True,
        text=True, cwd=tempfile.gettempdir(),
    )  # fmt: skip
    return float(done.stdout.strip().splitlines()[-1])


def instructions(source: Path, protocol: str, calls: tuple[int, int] = (20, 120)) -> float:
    """Instructions per call (both sides): two runs under callgrind, the difference per extra call."""
    totals = []
    with tempfile.TemporaryDirectory(prefix="elicitor-callgrind-") as folder:
        for n in calls:
            out = f"{folder}/callgrind.{n}"
            env = {**os.environ, "PYTHONPATH": str(source)}
            subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--quiet",
                 sys.executable, "-c", WORKLOAD, "none", protocol, str(n)],
                env=env, check=True, capture_output=True, cwd=folder,
            )  # fmt: skip
            text = Path(out).read_text(errors="replace")
            found = next(line for line in text.splitlines() if line.startswith(("summary:", "totals:")))
            totals.append(int(found.split()[1]))
    return (totals[1] - totals[0]) / (calls[1] - calls[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--instructions", action="store_true")
    options = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="elicitor-bench-") as folder:
        before = export(BEFORE, Path(folder) / "before")
        hooks = export(HOOKS, Path(folder) / "hooks")
        variants = {
            "before": (before, "none"), "hooks": (hooks, "none"), "now": (ROOT / "src", "none"),
            "SDK": (ROOT / "src", "sdk"),
        }  # fmt: skip
        for protocol in ("2025-11-25", "2026-07-28"):
            samples: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(options.runs):
                for name, (source, variant) in variants.items():
                    samples[name].append(one(source, variant, protocol, options.calls))
            medians = {name: statistics.median(values) for name, values in samples.items()}
            results[protocol] = medians
            print(
                f"telemetry {protocol}, CPU per call (both sides): without an SDK {medians['before']:.0f} µs before "
                f"the hooks, {medians['hooks']:.0f} µs with them ({_change(medians['hooks'], medians['before'])}); "
                f"with the SDK exporting {medians['SDK']:.0f} µs against {medians['now']:.0f} µs "
                f"({_change(medians['SDK'], medians['now'])})",
                flush=True,
            )
        counted: dict[str, dict[str, float]] = {}
        for protocol in ("2025-11-25", "2026-07-28") if options.instructions else ():
            counted[protocol] = {"before": instructions(before, protocol), "hooks": instructions(hooks, protocol)}
            print(
                f"telemetry {protocol}, instructions per call (both sides, no SDK): "
                f"{counted[protocol]['before']:,.0f} before the hooks, {counted[protocol]['hooks']:,.0f} with them "
                f"({_change(counted[protocol]['hooks'], counted[protocol]['before'], 2)})",
                flush=True,
            )
    record("telemetry", {"before": BEFORE, "hooks": HOOKS, "cpu_us_per_call": results, "instructions": counted})


def _change(value: float, base: float, digits: int = 1) -> str:
    return f"{(value / base - 1) * 100:+.{digits}f} %"


if __name__ == "__main__":
    main()
