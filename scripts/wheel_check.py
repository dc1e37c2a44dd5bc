"""Install elicitor's wheel as a user would, in fresh virtual environments, and run it there (part of ``make test``).

The editable install the tests use sees the whole source tree and every development dependency, so a module that
imports a package the wheel does not declare still passes them. Here the wheel is built once and installed into a
new environment per variant — plain, and with each optional extra of ``pyproject.toml`` (read from the file, so an
extra added later is covered) — where the ``elicitor`` command runs, every module of the package imports, and a
two-line server answers a client in-process. A module may fail to import only for want of an extra that variant
did not install (``elicitor.state._redis`` without ``[redis]``), and then with a ``ModuleNotFoundError`` naming it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import importlib, json, pkgutil, sys
import anyio
import elicitor
from elicitor import Client, Server
from elicitor.transports import memory_pair

allowed = set(json.loads(sys.argv[1]))
failures = []
for info in pkgutil.walk_packages(elicitor.__path__, "elicitor.", onerror=lambda name: None):
    if info.name.endswith("__main__"):
        continue  # running it is what `elicitor --help` checked
    try:
        importlib.import_module(info.name)
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top not in allowed:
            failures.append(f"{info.name}: needs {exc.name!r}, which the wheel does not declare ({exc})")
    except Exception as exc:
        failures.append(f"{info.name}: {type(exc).__name__}: {exc}")

server = Server("wheel-check")

@server.tool()
async def add(a: int, b: int) -> int:
    return a + b

async def call() -> str:
    ours, theirs = memory_pair()
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, theirs)
        async with Client(ours) as client:
            text = (await client.call_tool("add", {"a": 2, "b": 3})).text
        tg.cancel_scope.cancel()
    return text

answer = anyio.run(call)
if answer != "5":
    failures.append(f"the in-process call answered {answer!r}, not '5'")

from elicitor.i18n import available, language

# the compiled catalogs shipped, and load
for tag, cancel in (("zh-Hans", "取消"), ("zh-Hant", "取消"), ("ar", "إلغاء")):
    if language(tag).catalog.gettext("Cancel") != cancel:
        failures.append(f"the {tag} catalog is missing from the installed package (Cancel -> {cancel!r} expected)")
print("\n".join(failures))
sys.exit(1 if failures else 0)
"""


def extras() -> dict[str, list[str]]:
    """The optional extras users install (``dev`` is ours), with the distributions each brings."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared: dict[str, list[str]] = project.get("optional-dependencies", {})
    return {name: requirements for name, requirements in declared.items() if name != "dev"}


def distribution(requirement: str) -> str:
    """The import name a requirement provides, as far as this check needs it (``redis>=5`` → ``redis``)."""
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].strip().lower().replace("-", "_")


def build(into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(into), str(ROOT)],
        check=True,
    )
    (wheel,) = into.glob("elicitor-*.whl")
    return wheel


def catalogs(wheel: Path) -> list[str]:
    """What is wrong with the wheel's message catalogs: each language's compiled ``.mo``, and no ``.po`` source."""
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    problems = [
        f"the wheel lacks {name}"
        for name in (f"elicitor/i18n/locales/{lang}/LC_MESSAGES/elicitor.mo" for lang in ("zh_Hans", "zh_Hant", "ar"))
        if name not in names
    ]
    problems += [f"the wheel carries the catalog source {name}" for name in names if name.endswith((".po", ".pot"))]
    return problems


def check(wheel: Path, extra: str | None, optional: set[str], work: Path) -> tuple[str, bool, str]:
    """Install ``wheel`` (with ``extra``) into a new venv and run the command and the probe there."""
    label = f"elicitor[{extra}]" if extra else "elicitor"
    started = time.monotonic()
    venv = work / (extra or "plain")
    python = venv / "bin" / "python"
    version = wheel.name.split("-")[1]
    problem = ""
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, text=True)
        target = f"{wheel}[{extra}]" if extra else str(wheel)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", target],
            check=True,
            capture_output=True,
            text=True,
        )
        command = venv / "bin" / "elicitor"
        subprocess.run([str(command), "--help"], check=True, capture_output=True, text=True, timeout=60)
        shown = subprocess.run([str(command), "--version"], check=True, capture_output=True, text=True, timeout=60)
        if version not in shown.stdout.split():
            problem = f"`elicitor --version` printed {shown.stdout.strip()!r}, not version {version}"
        elif "### " not in shown.stdout:  # the changelog ships inside the package: its entry follows the version
            problem = f"`elicitor --version` printed no changelog entry: {shown.stdout.strip()!r}"
        allowed = sorted(optional - ({distribution(r) for r in extras()[extra]} if extra else set()))
        probe = subprocess.run(
            [str(python), "-c", PROBE, json.dumps(allowed)], capture_output=True, text=True, timeout=120, cwd=work
        )
        if probe.returncode != 0:
            problem = "\n".join(filter(None, [problem, probe.stdout.strip(), probe.stderr.strip()]))
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        what = "timed out" if isinstance(exc, subprocess.TimeoutExpired) else "failed"
        output = "".join(o if isinstance(o, str) else o.decode(errors="replace") for o in (exc.stdout, exc.stderr) if o)
        problem = f"{' '.join(map(str, exc.cmd))} {what}:\n{output}"
    elapsed = f"{time.monotonic() - started:.0f} s"
    return label, not problem, f"{elapsed}\n{problem}" if problem else elapsed


def main() -> int:
    declared = extras()
    optional = {distribution(r) for requirements in declared.values() for r in requirements}
    with tempfile.TemporaryDirectory(prefix="elicitor-wheel-") as folder:
        work = Path(folder)
        wheel = build(work / "dist")
        print(f"wheel: built {wheel.name}", flush=True)
        missing = catalogs(wheel)
        if missing:
            print("wheel: FAIL catalogs: " + "; ".join(missing))
            return 1
        variants: list[str | None] = [None, *declared]
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(lambda extra: check(wheel, extra, optional, work), variants))
    for label, ok, detail in results:
        print(f"wheel: {'ok  ' if ok else 'FAIL'} {label}: {detail}")
    failed = sum(not ok for _, ok, _ in results)
    print(f"wheel: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
