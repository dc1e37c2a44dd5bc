"""The soak test, short: ``soak/run.py`` for ``SOAK_DURATION`` seconds (default 40) against real servers.

Stdio subprocess servers and uvicorn servers on both eras, random answers, cancellations, vanishing clients, servers
killed and restarted; the run fails on any call that hangs or ends wrongly and on what the servers hold growing
without bound. ``make soak DURATION=600`` runs a long one. The judge of growth is tested here on its own too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from soak.run import judge, slope_per_minute

ROOT = Path(__file__).resolve().parent.parent
DURATION = float(os.environ.get("SOAK_DURATION", "40"))
"""Long enough for the judge: samples every 2 s, a 15 s warm-up, then a dozen or more to compare by halves."""


@pytest.mark.timeout(DURATION + 300)
def test_soak_passes(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "soak" / "run.py"), "--duration", str(DURATION), "--logs", str(tmp_path),
         "--json", str(report_path)],
        capture_output=True, text=True, timeout=DURATION + 240, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    report = json.loads(report_path.read_text())
    assert report["passed"] and not report["failures"] and not report["leaks"]
    outcomes: dict[str, int] = report["outcomes"]
    # Every lane made calls that ended well, and the faults really happened.
    for lane in ("stdio/2025-11-25", "stdio/2026-07-28", "http/2025-11-25", "http/2026-07-28",
                 "http-chaos/2025-11-25", "http-chaos/2026-07-28"):  # fmt: skip
        assert outcomes.get(f"{lane}/ok", 0) > 0, (lane, outcomes)
    assert outcomes.get("http/raw-vanish/vanished", 0) > 0
    assert sum(n for key, n in outcomes.items() if key.startswith("stdio-chaos/") and key.endswith("/server-lost")) > 0
    assert sum(n for key, n in outcomes.items() if key.endswith("/aborted")) > 0
    assert report["kills"] > 0
    # What the steady HTTP server held was sampled throughout, and it let go of everything at the end.
    assert report["series"]["server http: pending"]["samples"] >= 5
    assert report["series"]["server http settled: sessions"]["last"] == 0


def test_slope_is_least_squares_per_minute() -> None:
    assert slope_per_minute([(0.0, 10.0), (30.0, 15.0), (60.0, 20.0)]) == pytest.approx(10.0)
    assert slope_per_minute([(0.0, 3.0), (60.0, 3.0)]) == 0.0
    assert slope_per_minute([(5.0, 1.0)]) == 0.0


def test_judge_trips_on_a_leak_and_not_on_noise() -> None:
    times = [float(t) for t in range(0, 600, 5)]
    # A task per call never released, a few calls a minute: slow, steady growth over a noisy base.
    leak = [(t, 20 + (t % 15) + t / 20) for t in times]
    assert judge("tasks", leak, warmup=60) is not None
    # The same noise without the growth, with bursts up to five times the base.
    noise = [(t, 20 + (t % 15) + (80 if int(t) % 95 == 0 else 0)) for t in times]
    assert judge("tasks", noise, warmup=60) is None
    # Resident memory that grows early and then settles is not a leak; one that keeps growing is.
    settling = [(t, 100_000 + 40_000 * min(t, 200) / 200) for t in times]
    assert judge("rss_kib", settling, warmup=120) is None
    growing = [(t, 100_000 + 400 * t) for t in times]
    assert judge("rss_kib", growing, warmup=120) is not None
    # Too few samples after the warm-up: no verdict rather than a guess.
    assert judge("tasks", leak[:10], warmup=60) is None
