"""Run the official MCP conformance harness against elicitor's server and client (part of ``make test``).

Node 22 and the harness come from the npm registry into ``.cache/`` (git-ignored) the first time. Then:

* server mode: ``examples/everything_server.py --port N`` judged by ``--suite all`` of 0.1.16, and of
  0.2.0-alpha.12 at ``--spec-version 2025-11-25`` and ``2026-07-28``, and by every ``tasks-*`` extension scenario
  of 0.2.0-alpha.12 (the tasks extension, run by name); then the same suites through ``elicitor proxy`` (HTTP
  to the proxy, stdio from the proxy to the server), and against three replicas
  of it behind nginx sharing a Redis (``tests/replicas.py``: the deployment of docs/deploying.md);
* client mode: ``examples/conformance_client.py`` against every scenario that is neither ``auth/*`` nor an
  extension, each run alone so that a client crash counts, per harness version and revision; then all of them again
  with the client reaching the harness through ``elicitor proxy`` (stdio to the client, HTTP to the harness);
* sign-in: every non-extension ``auth/*`` client scenario of both harness versions (0.2.x: at each revision it is
  tagged with), the client signing in with ``OAuth`` and its headless authorizer.

The client and sign-in runs go two at a time (:data:`CLIENT_JOBS`): each has a harness and a client of its own.

Expected failures (``scripts/conformance-expected-failures.yml``) may only name extension scenarios; the harness
itself fails a run whose listed failure passes, so the list stays honest.

``--only REGEX`` runs only the runs whose label (as printed at the end, e.g. ``server through elicitor proxy
0.2.0-alpha.12 2026-07-28`` or ``client through elicitor proxy 0.1.16 initialize``) matches ``REGEX``
(``re.search``); a server is started only when one of its runs is chosen, a partial run's logs go to
``.cache/conformance-logs-<checkout folder name>``, and its results are not recorded for the documentation's page.
``--only 'through elicitor proxy'`` is every run through the proxy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
NODE_DIR = CACHE / "node22"
HARNESSES = ("0.1.16", "0.2.0-alpha.12")
TS_SDK = "1.32.2"
TS_SDK_DIR = CACHE / f"ts-sdk-{TS_SDK}"
"""The official TypeScript SDK, a peer for the interop tests (``tests/test_interop_ts.py``, ``tests/test_peers.py``)."""
AXE = "4.14.1"
AXE_DIR = CACHE / f"axe-core-{AXE}"
"""axe-core, the accessibility rules ``tests/test_a11y.py`` runs in Chromium on every page state."""
EVERYTHING = "2026.8.31"
EVERYTHING_DIR = CACHE / f"server-everything-{EVERYTHING}"
"""The reference server ``@modelcontextprotocol/server-everything``, a peer for ``tests/test_peers.py``."""
EXPECTED = ROOT / "scripts" / "conformance-expected-failures.yml"


def npm_install(folder: Path, package: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "package.json").exists():
        (folder / "package.json").write_text(json.dumps({"name": folder.name, "private": True}))
    subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", package], cwd=folder, check=True)


def setup() -> dict[str, str]:
    """Install Node 22 and the harness versions if missing; return the environment to run them in."""
    node = NODE_DIR / "node_modules" / "node" / "bin" / "node"
    if not node.exists():
        print("conformance: installing Node 22 from the npm registry", flush=True)
        npm_install(NODE_DIR, "node@22")
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ['PATH']}"}
    for version in HARNESSES:
        binary = CACHE / f"conformance-{version}" / "node_modules" / ".bin" / "conformance"
        if not binary.exists():
            print(f"conformance: installing @modelcontextprotocol/conformance@{version}", flush=True)
            npm_install(CACHE / f"conformance-{version}", f"@modelcontextprotocol/conformance@{version}")
    if not (TS_SDK_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").exists():
        print(f"conformance: installing @modelcontextprotocol/sdk@{TS_SDK}", flush=True)
        npm_install(TS_SDK_DIR, f"@modelcontextprotocol/sdk@{TS_SDK}")
    if not (AXE_DIR / "node_modules" / "axe-core" / "axe.min.js").exists():
        print(f"conformance: installing axe-core@{AXE}", flush=True)
        npm_install(AXE_DIR, f"axe-core@{AXE}")
    if not (EVERYTHING_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything" / "package.json").exists():
        print(f"conformance: installing @modelcontextprotocol/server-everything@{EVERYTHING}", flush=True)
        npm_install(EVERYTHING_DIR, f"@modelcontextprotocol/server-everything@{EVERYTHING}")
    return env


def harness(version: str) -> str:
    return str(CACHE / f"conformance-{version}" / "node_modules" / ".bin" / "conformance")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(command: list[str], env: dict[str, str], log: Path) -> tuple[int, str]:
    with log.open("w") as out:
        code = subprocess.run(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent, timeout=600
        ).returncode
    return code, log.read_text()


def chosen(label: str) -> bool:
    """Whether ``--only REGEX`` (if given) chooses the run called ``label``."""
    args = sys.argv[1:]
    if "--only" not in args:
        return True
    index = args.index("--only") + 1
    if index >= len(args):
        raise SystemExit("conformance: --only needs a regular expression")
    return re.search(args[index], label) is not None


def client_scenarios(version: str, env: dict[str, str], spec: str | None) -> list[str]:
    command = [harness(version), "list", "--client"]
    if spec:
        command += ["--spec-version", spec]
    listing = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    names = re.findall(r"^\s+- (\S+)(?: \[(.*)\])?$", listing, re.M)
    return [
        name for name, tags in names
        if not name.startswith("auth/") and "extension" not in tags and (spec is None or spec in tags or not tags)
    ]  # fmt: skip


def auth_scenarios(version: str, env: dict[str, str]) -> list[tuple[str, str | None]]:
    """Every non-extension ``auth/*`` client scenario with each revision it is tagged with (0.2.x), or once."""
    listing = subprocess.run([harness(version), "list", "--client"], env=env, capture_output=True, text=True).stdout
    runs: list[tuple[str, str | None]] = []
    for name, tags in re.findall(r"^\s+- (auth/\S+)(?: \[(.*)\])?$", listing, re.M):
        if "extension" in tags:
            continue
        if version.startswith("0.1."):
            runs.append((name, None))
        else:
            runs += [(name, tag) for tag in tags.split(",") if tag and tag != "draft"]
    return runs


def auth_runs(client: str, version: str, env: dict[str, str], expected: list[str]) -> list[ClientRun]:
    """The sign-in scenarios: the harness runs an authorization server and a protected MCP server, and the client
    (``OAuth`` with its headless authorizer) must discover, register, authorize and use the token as the spec says."""
    runs = []
    for scenario, spec in auth_scenarios(version, env):
        label = f"client {version}" + (f" {spec}" if spec else "") + f" {scenario}"
        if not chosen(label):
            continue
        command = [harness(version), "client", "--command", client, "--scenario", scenario, *expected]
        if spec:
            command += ["--spec-version", spec]
        runs.append((label, command, env))
    return runs


def wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("conformance: the example server did not start") from None
            time.sleep(0.1)


@contextmanager
def listening(command: list[str], port: int, log: Path) -> Iterator[str]:
    """Start ``command`` (it listens on ``port``, its stderr in ``log``) for the block; yields its MCP URL; SIGTERM
    after."""
    with log.open("w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT)
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)


def server_runs(name: str, env: dict[str, str]) -> list[tuple[str, list[str], bool]]:
    """The server runs chosen for the server called ``name``: label, harness arguments (``--url`` follows), and
    whether it is one extension scenario run by name."""
    runs = []
    for version, spec in (("0.1.16", None), ("0.2.0-alpha.12", "2025-11-25"), ("0.2.0-alpha.12", "2026-07-28")):
        label = f"{name} {version}" + (f" {spec}" if spec else "")
        arguments = [harness(version), "server", "--suite", "all"] + (["--spec-version", spec] if spec else [])
        runs.append((label, arguments, False))
    # Extension scenarios are off the spec timeline: each is run by name (the harness lists them).
    for scenario in extension_scenarios("0.2.0-alpha.12", env):
        label = f"{name} 0.2.0-alpha.12 {scenario}"
        runs.append((label, [harness("0.2.0-alpha.12"), "server", "--scenario", scenario], True))
    return [run for run in runs if chosen(run[0])]


def server_suites(
    url: str, runs: list[tuple[str, list[str], bool]], env: dict[str, str], logs: Path, expected: list[str]
) -> list[tuple[str, bool, str]]:
    """The server runs of :func:`server_runs` (both harness versions, both revisions) against the server at ``url``."""
    results = []
    for label, arguments, extension in runs:
        code, output = run([*arguments, "--url", url, *expected], env, logs / f"{label.replace(' ', '_')}.log")
        if extension:
            passed = re.findall(r"Passed: (\d+)/(\d+), (\d+) failed", output)
            summary = f"{passed[-1][0]}/{passed[-1][1]} checks" if passed else "no summary"
            results.append((label, code == 0 and bool(passed) and passed[-1][2] == "0", summary))
        else:
            total = re.findall(r"Total: (\d+) passed, (\d+) failed", output)
            summary = f"{total[-1][0]} passed, {total[-1][1]} failed" if total else "no summary"
            results.append((label, code == 0, summary))
    return results


ClientRun = tuple[str, list[str], dict[str, str]]
"""One client scenario run: its label, the harness command, the environment."""
CLIENT_JOBS = 2
"""Client runs at once. Each is a harness process with its own server on a free port driving a client process of
its own (tokens in memory, the proxy over stdio): two runs share nothing, and two keep both cores busy."""


def client_runs(
    client: str, version: str, spec: str | None, via: str, env: dict[str, str], expected: list[str]
) -> list[ClientRun]:
    """Every client scenario of one harness version and revision, each run alone (``via``: through the proxy)."""
    runs = []
    for scenario in client_scenarios(version, env, spec):
        label = f"client{via} {version}" + (f" {spec}" if spec else "") + f" {scenario}"
        if not chosen(label):
            continue
        command = [harness(version), "client", "--command", client, "--scenario", scenario, *expected]
        if spec:
            command += ["--spec-version", spec]
        runs.append((label, command, env))
    return runs


def run_clients(runs: list[ClientRun], logs: Path) -> list[tuple[str, bool, str]]:
    """The client runs, :data:`CLIENT_JOBS` at a time, their results in the order given."""

    def one(item: ClientRun) -> tuple[str, bool, str]:
        label, command, env = item
        code, output = run(command, env, logs / (re.sub(r"[^A-Za-z0-9.-]+", "_", label) + ".log"))
        passed = re.findall(r"Passed: (\d+)/(\d+)", output)
        summary = f"{passed[-1][0]}/{passed[-1][1]} checks" if passed else "no summary"
        return label, code == 0, summary

    with ThreadPoolExecutor(max_workers=CLIENT_JOBS) as pool:
        return list(pool.map(one, runs))


def extension_scenarios(version: str, env: dict[str, str]) -> list[str]:
    """The server scenarios of extensions elicitor implements (the tasks extension)."""
    listed = subprocess.run(
        [harness(version), "list", "--server"], env=env, capture_output=True, text=True, check=True
    ).stdout
    return re.findall(r"^\s*- (tasks-[\w-]+) \[extension\]", listed, flags=re.MULTILINE)


RESULTS = CACHE / "conformance-results.json"
PAGE_DATA = ROOT / "docs" / "data" / "conformance.json"
"""The results the documentation's conformance page is drawn from (``make conformance-page`` copies them there)."""


def record(results: list[tuple[str, bool, str]]) -> None:
    """Keep this run's results (every suite and scenario, passed or not) for the documentation's page."""
    import json
    import time

    data = {
        "date": time.strftime("%Y-%m-%d"),
        "harness": ["0.1.16", "0.2.0-alpha.12"],
        "results": [{"label": label, "passed": ok, "summary": summary} for label, ok, summary in results],
    }
    RESULTS.write_text(json.dumps(data, indent=2) + "\n")
    if "--page" in sys.argv[1:]:
        PAGE_DATA.parent.mkdir(exist_ok=True)
        PAGE_DATA.write_text(RESULTS.read_text())


def main() -> int:
    env = setup()
    if "--install-only" in sys.argv[1:]:
        return 0
    # A partial run (--only) keeps its logs apart: .cache may be shared by several checkouts of the repository.
    logs = CACHE / ("conformance-logs" if "--only" not in sys.argv[1:] else f"conformance-logs-{ROOT.name}")
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    expected = ["--expected-failures", str(EXPECTED)] if EXPECTED.exists() else []
    results: list[tuple[str, bool, str]] = []

    everything = [sys.executable, str(ROOT / "examples" / "everything_server.py")]
    runs = server_runs("server", env)
    if runs:
        port = free_port()
        with listening([*everything, "--port", str(port)], port, logs / "server.stderr") as url:
            results += server_suites(url, runs, env, logs, expected)

    # The same suites through `elicitor proxy`: the harness talks HTTP to the proxy, the proxy stdio to the server.
    runs = server_runs("server through elicitor proxy", env)
    if runs:
        port = free_port()
        proxy_command = [
            sys.executable, "-m", "elicitor", "proxy", "--ui", "none", "--listen", f"127.0.0.1:{port}", *everything,
        ]  # fmt: skip
        with listening(proxy_command, port, logs / "proxy.stderr") as url:
            results += server_suites(url, runs, env, logs, expected)

    # The same suites against three replicas behind nginx sharing a Redis, as docs/deploying.md deploys them.
    sys.path.insert(0, str(ROOT))
    from tests.replicas import MISSING, deployment

    runs = server_runs("server 3 replicas", env)
    if runs and MISSING:
        results.append(("server, 3 replicas", False, f"needs {' and '.join(MISSING)} (make test installs them)"))
    elif runs:
        with deployment(everything, logs / "replicas") as cluster:
            results += server_suites(cluster.nginx.url, runs, env, logs, expected)

    client = f"{sys.executable} {ROOT / 'examples' / 'conformance_client.py'}"
    clients: list[ClientRun] = []
    for via, client_env in (("", env), (" through elicitor proxy", {**env, "ELICITOR_CONFORMANCE_VIA_PROXY": "1"})):
        for version, spec in (("0.1.16", None), ("0.2.0-alpha.12", "2025-11-25"), ("0.2.0-alpha.12", "2026-07-28")):
            clients += client_runs(client, version, spec, via, client_env, expected)
    for version in ("0.1.16", "0.2.0-alpha.12"):
        clients += auth_runs(client, version, env, expected)
    results += run_clients(clients, logs)

    failed = [r for r in results if not r[1]]
    if "--only" not in sys.argv[1:]:
        record(results)

    for label, ok, summary in results:
        print(f"conformance: {'ok  ' if ok else 'FAIL'} {label}: {summary}")
    print(f"conformance: logs in {logs}")
    print(f"conformance: {len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
