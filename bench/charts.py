"""The benchmark page's charts, drawn from the latest results (bench/results/latest.json) with matplotlib.

    python bench/charts.py      (make bench runs it after the benchmarks)

Writes docs/images/bench-*.svg: throughput against the official SDK (and FastMCP, on the scenarios it can run)
per scenario, server CPU per elicitation,
server memory per pending elicitation (with the floor of a bare uvicorn app), and elicitations per second through
nginx with one and three replicas. Each chart names the machine and the date of the run it shows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent
IMAGES = HERE.parent / "docs" / "images"
OURS, THEIRS, FAST, FLOOR = "#2b6cb0", "#a0aec0", "#d69e2e", "#718096"
SHORT = {
    "(a) stdio, 2025-11-25": "stdio\n2025-11-25",
    "(e) stdio, 2026-07-28": "stdio\n2026-07-28",
    "(b) HTTP, one session": "HTTP, 1 session\n2025-11-25",
    "(c) HTTP, 50 concurrent": "HTTP, 50 sessions\n2025-11-25",
    "(e) HTTP, 2026-07-28": "HTTP\n2026-07-28",
}


def _machine(section: dict[str, Any]) -> str:
    m = section["machine"]
    return f"{m['cores']} cores, {m['processor'] or 'unknown processor'}, Python {m['python']}, {m['date']}"


def _label(title: str) -> str | None:
    return next((label for prefix, label in SHORT.items() if title.startswith(prefix)), None)


def _bars(
    ax: Any, labels: list[str], ours: list[float], theirs: list[float], unit: str, fast: list[float] | None = None
) -> float:
    """Grouped bars; returns the offset of elicitor's bar from each group's centre (for annotations)."""
    xs = range(len(labels))
    series = [("elicitor", ours, OURS), ("official mcp SDK", theirs, THEIRS)]
    if fast is not None:
        series.append(("FastMCP", fast, FAST))
    width = 0.8 / len(series)
    for i, (name, values, colour) in enumerate(series):
        offset = (i - (len(series) - 1) / 2) * width
        ax.bar([x + offset for x in xs], values, width, label=name, color=colour)
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel(unit)
    ax.legend(frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return -(len(series) - 1) / 2 * width


def _save(fig: Any, name: str) -> None:
    fig.tight_layout()
    fig.savefig(IMAGES / name, format="svg", metadata={"Date": None})
    plt.close(fig)


def throughput_and_cpu(run: dict[str, Any]) -> None:
    rows = [(label, s) for title, s in run["scenarios"].items() if (label := _label(title)) and s["unit"] == "el/s"]
    if not rows:
        return
    labels = [label for label, _ in rows]
    fast = [s.get("fastmcp", 0.0) for _, s in rows] if any("fastmcp" in s for _, s in rows) else None
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    ours, theirs = [s["elicitor"] for _, s in rows], [s["official"] for _, s in rows]
    offset = _bars(ax, labels, ours, theirs, "elicitations per second", fast)
    for x, (_, s) in enumerate(rows):
        ax.annotate(f"{s['ratio']:.1f}×", (x + offset, s["elicitor"]), ha="center", va="bottom", fontsize=8)
    note = " (FastMCP: 2025-11-25 only)" if fast is not None else ""
    ax.set_title(f"Throughput, each library with its own client{note}\n{_machine(run)}", fontsize=9)
    _save(fig, "bench-throughput.svg")
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    fast_cpu = [s.get("fastmcp_cpu_us", 0.0) for _, s in rows] if fast is not None else None
    _bars(ax, labels, [s["elicitor_cpu_us"] for _, s in rows], [s["official_cpu_us"] for _, s in rows], "µs", fast_cpu)
    ax.set_title(f"Server CPU per elicitation (lower is better)\n{_machine(run)}", fontsize=9)
    _save(fig, "bench-cpu.svg")


def memory(run: dict[str, Any]) -> None:
    scenarios = run["scenarios"]
    rows = [(title, s) for title, s in scenarios.items() if s["unit"] == "KiB" and "elicitor" in s and "official" in s]
    if not rows:
        return
    labels = ["stdio" if "stdio" in title else "HTTP" for title, _ in rows]
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    _bars(ax, labels, [s["elicitor"] for _, s in rows], [s["official"] for _, s in rows], "KiB per pending")
    floor = scenarios.get("(dh) floor")
    if floor and "HTTP" in labels:
        x = labels.index("HTTP")
        ax.hlines(floor["bare uvicorn"], x - 0.45, x + 0.45, colors=FLOOR, linestyles="dashed")
        ax.annotate("bare uvicorn, no MCP", (x + 0.45, floor["bare uvicorn"]), fontsize=7, color=FLOOR, va="bottom")
    ax.set_title(f"Server memory per pending elicitation ({run['pending']} pending)\n{_machine(run)}", fontsize=9)
    _save(fig, "bench-memory.svg")


def replicas(section: dict[str, Any]) -> None:
    rates: dict[str, dict[str, float]] = section["rates"]
    eras = list(rates)
    setups = list(next(iter(rates.values())))
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    width = 0.8 / len(setups)
    colours = ["#a0aec0", "#63b3ed", "#2b6cb0"]
    for i, setup in enumerate(setups):
        xs = [e + (i - (len(setups) - 1) / 2) * width for e in range(len(eras))]
        ax.bar(xs, [rates[era][setup] for era in eras], width, label=setup, color=colours[i % len(colours)])
    ax.set_xticks(range(len(eras)), eras, fontsize=8)
    ax.set_ylabel("elicitations per second")
    ax.legend(frameon=False, fontsize=7)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(
        f"Through nginx, {section['sessions']} sessions × {section['n']} elicitations\n{_machine(section)}", fontsize=9
    )
    _save(fig, "bench-replicas.svg")


def main() -> int:
    latest = HERE / "results" / "latest.json"
    if not latest.is_file():
        print("no results yet: run the benchmarks first (make bench)")
        return 1
    data = json.loads(latest.read_text())
    IMAGES.mkdir(parents=True, exist_ok=True)
    plt.rcParams["svg.hashsalt"] = "elicitor"  # the same results draw the same file
    if "run" in data:
        throughput_and_cpu(data["run"])
        memory(data["run"])
    if "replicas" in data:
        replicas(data["replicas"])
    print(f"charts written to {IMAGES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
