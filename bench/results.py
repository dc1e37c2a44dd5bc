"""Where the benchmarks keep what they measured: bench/results/latest.json, for bench/charts.py.

Each benchmark records its medians under a section of its own; a run replaces its own section and leaves the
others, so the charts always show the latest run of each benchmark. The machine they ran on is recorded with them.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

LATEST = Path(__file__).resolve().parent / "results" / "latest.json"


def machine() -> dict[str, Any]:
    """What the figures depend on: cores, processor, Python, the date."""
    model = ""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "processor": model or platform.processor(),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
        "date": time.strftime("%Y-%m-%d"),
    }


def record(section: str, entries: dict[str, Any]) -> None:
    """Replace ``section`` of the latest results with ``entries`` (and this machine's description).

    A section's ``scenarios`` are merged instead: a run of some scenarios (``--scenarios c``) replaces those and
    keeps the others' latest figures.
    """
    LATEST.parent.mkdir(exist_ok=True)
    data: dict[str, Any] = json.loads(LATEST.read_text()) if LATEST.is_file() else {}
    if "scenarios" in entries:
        entries = {**entries, "scenarios": {**data.get(section, {}).get("scenarios", {}), **entries["scenarios"]}}
    data[section] = {"machine": machine(), **entries}
    LATEST.write_text(json.dumps(data, indent=2) + "\n")
