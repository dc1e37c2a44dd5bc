"""The regression guard: this run's figures (bench/results/latest.json) against the last recorded run
(bench/recorded.json, kept in the repository), scenario by scenario.

    python bench/guard.py [--tolerance 0.15]     (make bench runs it last; exit status 1 when a scenario fell)
    python bench/guard.py --record               (after a run you accept: recorded.json := latest.json)

What is judged. A scenario measured against the official SDK is judged by its ratio to it, computed run by run in
one interleaved run: both libraries meet the same load, so the ratio moves with our code, not with the machine. A
scenario *fell* when its ratio is worse than the recorded one by more than ``--tolerance`` (15 % by default:
spreads of 30 % between runs of the raw figures are common on a shared 2-core machine, much less between ratios).
Every other figure (elicitations/s, server CPU per elicitation, memory, the replicas' rates, which have no peer in
the run) is printed beside them with its change, for the reader to weigh against the load the run met.

Recording is deliberate: look at a run, then ``--record`` and commit bench/recorded.json with the change that
earned it, saying in the commit under what conditions the figures were taken.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "recorded.json"
LATEST = HERE / "results" / "latest.json"

LOWER_IS_BETTER = {"KiB", "MiB", "s", "µs"}


def _figures(data: dict[str, Any]) -> dict[str, tuple[float, bool, str, bool]]:
    """Every figure of a results file: name -> (value, higher is better, unit, judged)."""
    figures: dict[str, tuple[float, bool, str, bool]] = {}
    for title, entry in data.get("run", {}).get("scenarios", {}).items():
        unit = str(entry.get("unit", ""))
        if "ratio" in entry:
            peer = entry.get("peer", "the official SDK")
            figures[f"{title}: ratio to {peer}"] = (float(entry["ratio"]), True, "x", True)
        for key, value in entry.items():
            if key in ("elicitor", "elicitor_cpu_us", "bare uvicorn") and value:
                shown = "µs" if key.endswith("_us") else unit
                name = "elicitor server CPU per elicitation" if key == "elicitor_cpu_us" else key
                figures[f"{title}: {name}"] = (
                    float(value),
                    shown not in LOWER_IS_BETTER,
                    shown,
                    False,
                )
    for era, rates in data.get("replicas", {}).get("rates", {}).items():
        for setup, rate in rates.items():
            figures[f"replicas, {era}, {setup}"] = (float(rate), True, "el/s", False)
    return figures


def compare(recorded: dict[str, Any], latest: dict[str, Any], tolerance: float) -> list[str]:
    """Print the comparison; return the judged figures that fell."""
    before, now = _figures(recorded), _figures(latest)
    fell: list[str] = []
    for label, data in (("recorded", recorded), ("this run", latest)):
        machine = data.get("run", {}).get("machine", {})
        print(
            f"{label}: {machine.get('date', '?')}, {machine.get('cores', '?')} cores, {machine.get('processor', '?')}"
        )
    print(
        f"{'':<5}{'figure (judged ones first: ratios to the official SDK in one run)':<100} "
        f"{'recorded':>10} {'now':>10} {'change':>7}"
    )
    for name, (value, higher, unit, judged) in sorted(now.items(), key=lambda item: not item[1][3]):
        if name not in before:
            print(f"     {name:<100} {'—':>10} {value:>10,.2f} {'new':>7}")
            continue
        old = before[name][0]
        change = (value - old) / old if old else 0.0
        worse = -change if higher else change
        mark = "FELL" if judged and worse > tolerance else ""
        if mark:
            fell.append(f"{name}: {old:,.2f} -> {value:,.2f} {unit} ({change:+.0%})")
        print(f"{mark:<5}{name:<100} {old:>10,.2f} {value:>10,.2f} {change:>+7.0%}")
    for title in sorted({name.rpartition(": ")[0] for name in before.keys() - now.keys()}):
        print(f"     {title}: not measured in this run")
    return fell


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tolerance", type=float, default=0.15, help="how much worse a judged figure may be")
    parser.add_argument("--record", action="store_true", help="make this run the recorded one")
    args = parser.parse_args()
    if not LATEST.is_file():
        sys.exit(f"no results yet ({LATEST}): run make bench first")
    if args.record:
        shutil.copy(LATEST, RECORDED)
        print(f"recorded {LATEST} as {RECORDED}: commit it with the change it measures")
        return
    if not RECORDED.is_file():
        sys.exit(f"nothing recorded yet: python {Path(__file__).name} --record")
    fell = compare(json.loads(RECORDED.read_text()), json.loads(LATEST.read_text()), args.tolerance)
    if fell:
        print(f"\n{len(fell)} figure(s) fell by more than {args.tolerance:.0%} against the recorded run:")
        for line in fell:
            print(f"  {line}")
        sys.exit(1)
    print(f"\nno judged figure fell by more than {args.tolerance:.0%} against the recorded run")


if __name__ == "__main__":
    main()
