"""Install old releases of other people's MCP libraries, one virtual environment (or npm folder) each, under
``.cache/peers/`` (part of ``make test``'s ``node-peers`` step; ``tests/test_eras.py`` runs them).

Real people run servers and clients built with releases a year old or more. Each release here marks an era of the
protocol:

* ``mcp`` 1.6.0: the last one that speaks 2024-11-05 only, over stdio and the old HTTP+SSE transport;
* ``mcp`` 1.9.4: 2025-03-26 and Streamable HTTP, before elicitation existed;
* ``mcp`` 1.10.1: the first with elicitation (2025-06-18), with FastMCP 2.10.6 (``ctx.elicit``) beside it;
* ``mcp`` 1.24.0: 2025-11-25 (URL mode, tasks), with FastMCP 2.14.5, the last FastMCP 2;
* the TypeScript SDK 1.10.2 (it answers with 2024-11-05, over Streamable HTTP too) and 1.13.3, its first release
  with elicitation (2025-06-18).

Idempotent: an environment is made once and kept while its list of requirements is the same (a stamp file records
it); a new list replaces it. Several checkouts may share ``.cache``: a lock file makes one install at a time, and a
folder is built beside its final name and renamed into place, so nobody sees half of one.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / ".cache" / "peers"
NODE = ROOT / ".cache" / "node22" / "node_modules" / "node" / "bin"

PYTHON_PEERS: dict[str, tuple[str, ...]] = {
    "mcp-1.6.0": ("mcp==1.6.0", "pydantic==2.11.7"),
    "mcp-1.9.4": ("mcp==1.9.4", "pydantic==2.11.7"),
    "mcp-1.10.1": ("mcp==1.10.1", "fastmcp==2.10.6", "pydantic==2.11.7"),
    "mcp-1.24.0": ("mcp==1.24.0", "fastmcp==2.14.5"),
}
"""Folder name under ``.cache/peers/`` → what is installed there. The SDK before 1.11 imports a private function
pydantic 2.12 removed: those environments keep the pydantic of their time."""

NODE_PEERS: dict[str, tuple[str, ...]] = {
    "ts-sdk-1.10.2": ("@modelcontextprotocol/sdk@1.10.2",),
    "ts-sdk-1.13.3": ("@modelcontextprotocol/sdk@1.13.3",),
}

STAMP = ".installed"


def _current(folder: Path, requirements: tuple[str, ...]) -> bool:
    stamp = folder / STAMP
    return stamp.exists() and stamp.read_text() == json.dumps(list(requirements))


def _python(name: str, requirements: tuple[str, ...]) -> None:
    folder = PEERS / name
    if _current(folder, requirements):
        return
    print(f"peers: installing {', '.join(requirements)} into .cache/peers/{name}", flush=True)
    building = PEERS / f"{name}.building"
    shutil.rmtree(building, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(building)], check=True)
    # The pip of the running interpreter installs into the new environment: no pip of its own to set up.
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(building / "bin" / "python"), "install", "--quiet",
         "--disable-pip-version-check", *requirements],
        check=True,
    )  # fmt: skip
    (building / STAMP).write_text(json.dumps(list(requirements)))
    _replace(folder, building)


def _node(name: str, packages: tuple[str, ...]) -> None:
    folder = PEERS / name
    if _current(folder, packages):
        return
    npm = shutil.which("npm", path=f"{NODE}{os.pathsep}{os.environ.get('PATH', '')}")
    if npm is None:
        print(f"peers: no npm, {name} is not installed", flush=True)
        return
    print(f"peers: installing {', '.join(packages)} into .cache/peers/{name}", flush=True)
    building = PEERS / f"{name}.building"
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    (building / "package.json").write_text(json.dumps({"name": name, "private": True}))
    subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", *packages], cwd=building, check=True)
    (building / STAMP).write_text(json.dumps(list(packages)))
    _replace(folder, building)


def _replace(folder: Path, building: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    building.rename(folder)


def main() -> int:
    """Install every peer; ``--python``: only the Python environments (``make test`` makes them beside the
    conformance harness, which may be installing Node 22 meanwhile: the npm folders come after it)."""
    python_only = "--python" in sys.argv[1:]
    PEERS.mkdir(parents=True, exist_ok=True)
    with (PEERS / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name, requirements in PYTHON_PEERS.items():
            _python(name, requirements)
        for name, packages in {} if python_only else NODE_PEERS.items():
            _node(name, packages)
    return 0


if __name__ == "__main__":
    sys.exit(main())
