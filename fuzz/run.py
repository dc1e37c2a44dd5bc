"""Run fuzzing campaigns: ``python -m fuzz.run [--target NAME ...] [--seconds N] [--jobs N]`` (``make fuzz``).

Each target runs as its own atheris process for ``--seconds``, ``--jobs`` of them at once. New inputs it finds
go to ``.cache/fuzz/corpus/<target>/`` (the checked-in seeds in ``fuzz/corpus/<target>/`` are read, never written),
a crash to ``.cache/fuzz/crashes/<target>-crash-<hash>``; reproduce one with
``python -m fuzz.targets.<target> <file>``. The exit status is 1 if any target crashed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from fuzz.targets import TARGETS

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "fuzz" / "corpus"
WORK = ROOT / ".cache" / "fuzz"
MAX_LEN = 8192


def command(target: str, seconds: float, corpus: Path, crashes: Path) -> list[str]:
    """The atheris command line for one campaign (libFuzzer options; the first corpus directory takes new inputs)."""
    return [
        sys.executable,
        "-m",
        f"fuzz.targets.{target}",
        str(corpus),
        str(SEEDS / target),
        f"-max_total_time={max(1, round(seconds))}",
        f"-max_len={MAX_LEN}",
        "-timeout=120",
        "-rss_limit_mb=4096",
        f"-artifact_prefix={crashes}/{target}-",
        "-print_final_stats=1",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", action="append", choices=TARGETS, help="a target (repeat; default: all)")
    parser.add_argument("--seconds", type=float, default=300.0, help="how long each target runs (default 300)")
    parser.add_argument("--jobs", type=int, default=1, help="how many targets run at once (default 1)")
    args = parser.parse_args(argv)
    targets = list(args.target or TARGETS)
    crashes = WORK / "crashes"
    crashes.mkdir(parents=True, exist_ok=True)
    waiting = list(targets)
    running: dict[str, subprocess.Popen[bytes]] = {}
    failed: list[str] = []
    while waiting or running:
        while waiting and len(running) < max(1, args.jobs):
            target = waiting.pop(0)
            corpus = WORK / "corpus" / target
            corpus.mkdir(parents=True, exist_ok=True)
            log = (WORK / f"{target}.log").open("wb")
            print(f"fuzz: {target} for {args.seconds:g}s (log: {WORK / f'{target}.log'})", flush=True)
            cmd = command(target, args.seconds, corpus, crashes)
            running[target] = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        time.sleep(0.5)
        for target, process in list(running.items()):
            if process.poll() is None:
                continue
            del running[target]
            status = "ok" if process.returncode == 0 else f"CRASHED (exit {process.returncode})"
            print(f"fuzz: {target}: {status}", flush=True)
            if process.returncode != 0:
                failed.append(target)
    if failed:
        print(f"fuzz: crashes in {', '.join(failed)}; inputs in {crashes}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
