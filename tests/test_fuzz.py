"""The fuzz targets in ``fuzz/targets/``, run briefly: each replays its seed corpus, then mutates for a few seconds.

This keeps every target working (a target that no longer imports, or whose property no longer holds on the seeds,
fails here) and gives each change a little fuzzing; ``make fuzz`` runs the long campaigns.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fuzz.targets import TARGETS

ROOT = Path(__file__).resolve().parent.parent
SECONDS = 3


def campaign(target: str, work: Path) -> subprocess.CompletedProcess[str]:
    """Replay ``target``'s seeds and mutate for ``SECONDS`` in a subprocess (atheris exits the process it runs in)."""
    corpus = work / target / "corpus"
    corpus.mkdir(parents=True)
    command = [
        sys.executable, "-m", f"fuzz.targets.{target}", str(corpus), str(ROOT / "fuzz" / "corpus" / target),
        f"-max_total_time={SECONDS}", "-max_len=4096", "-timeout=60", f"-artifact_prefix={work / target}/",
    ]  # fmt: skip
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    work = tmp_path_factory.mktemp("fuzz")
    with ThreadPoolExecutor(max_workers=2) as pool:  # the machine's two cores; one campaign each
        return dict(zip(TARGETS, pool.map(lambda t: campaign(t, work), TARGETS), strict=True))


@pytest.mark.timeout(900)  # the first test's setup runs every campaign (two at a time): minutes on a loaded machine
@pytest.mark.parametrize("target", TARGETS)
def test_target_holds_its_property(target: str, campaigns: dict[str, subprocess.CompletedProcess[str]]) -> None:
    result = campaigns[target]
    tail = "\n".join(result.stderr.splitlines()[-40:])
    crashes = result.args[-1].partition("=")[2]  # -artifact_prefix: pytest keeps the directory for a look
    assert result.returncode == 0, f"fuzz target {target} failed (its input is in {crashes}):\n{tail}"
    assert "Done " in result.stderr, f"fuzz target {target} did not run its campaign:\n{tail}"


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_has_seeds(target: str) -> None:
    seeds = list((ROOT / "fuzz" / "corpus" / target).iterdir())
    assert seeds and all(seed.stat().st_size <= 8192 for seed in seeds)
