"""The documentation cannot rot: its Python blocks run, its site builds, and every public name is documented.

Every ```python block of README.md and docs/ runs (with Sybil), in order, one namespace per page, so a page can
build on its earlier blocks; a block may use top-level ``await``; a block that includes a file (``--8<--``) is that
file, run by its own test. A block that needs the outside world (a person, a running server, an authorization
server) is preceded by ``<!-- compile only -->``: it is still compiled and its imports still run, so a renamed
module or name fails it, and it is type-checked with mypy's strict settings (with the names its page takes as
given declared, ``TAKEN_AS_GIVEN``), so a wrong argument or a wrong use of a result fails it too. The tutorial's
steps are files, run in tests/test_tutorial.py.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
import types
from pathlib import Path
from typing import Any

import anyio
import pytest
from sybil import Example, Sybil
from sybil.parsers.markdown import CodeBlockParser

import elicitor

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
COMPILE_ONLY = "<!-- compile only -->"


def _evaluate(example: Example) -> None:
    source = str(example.parsed)
    if source.lstrip().startswith("--8<--"):  # an included file (the tutorial's): tests/test_tutorial.py runs it
        included = ROOT / source.split('"')[1]
        assert included.is_file(), f"{example.path}:{example.line} includes {included}, which does not exist"
        return
    before = example.document.text[: example.start].rstrip()
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = ast.parse(source, filename=f"{example.path}:{example.line}", mode="exec")
    if before.endswith(COMPILE_ONLY):
        compile(source, f"{example.path}:{example.line}", "exec", flags=flags, dont_inherit=True)
        tree.body = [node for node in tree.body if _imports_elicitor(node)]
    code = compile(tree, f"{example.path}:{example.line}", "exec", flags=flags, dont_inherit=True)
    result = eval(code, example.namespace)
    if inspect.iscoroutine(result):

        async def finish() -> Any:
            return await result

        anyio.run(finish)


def _imports_elicitor(node: ast.stmt) -> bool:
    """Whether ``node`` imports from elicitor (a compile-only block's imports of other packages, FastAPI say, are
    not this project's to check)."""
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "elicitor"
    return isinstance(node, ast.Import) and all(alias.name.split(".")[0] == "elicitor" for alias in node.names)


SYBIL = Sybil(parsers=[CodeBlockParser("python", evaluator=_evaluate)])


# What each page with compile-only blocks takes as given (defined in the reader's code, or earlier on the page),
# declared before its blocks are type-checked.
TAKEN_AS_GIVEN = {
    "docs/concepts/client.md": "url: str",
    "docs/how-to/http.md": "",
    "docs/how-to/sign-in.md": "",
    "docs/how-to/mount.md": "",
    "docs/how-to/official-client.md": "from mcp.server.mcpserver import MCPServer\n\napp: MCPServer",
    "docs/how-to/migrate.md": "",
    "docs/observability.md": "",
}
# Packages a block uses that this project does not install: their names are taken as Any (the rest of the block,
# elicitor's names and the standard library's, is still checked).
NOT_INSTALLED = ["fastapi", "fastmcp"]
# Strict settings a page's blocks are spared, and why.
RELAXED = {"docs/how-to/migrate.md": "disallow_untyped_decorators = False"}  # FastMCP's @mcp.tool is Any here
# A deliberately wrong block, type-checked with the others: the check must find its error, or it checks nothing.
BROKEN = """from elicitor import Client, TerminalHandler

async with Client.http(url, elicitation=TerminalHandler()) as client:
    result = await client.call_tool("book_table")
    print(result.txt)
"""


def _compile_only_blocks() -> list[tuple[str, int, str]]:
    """Each compile-only block: its page (relative to the root), its line, its source."""
    found: list[tuple[str, int, str]] = []
    for page in PAGES:
        document = SYBIL.parse(page)
        for example in document:
            if document.text[: example.start].rstrip().endswith(COMPILE_ONLY):
                found.append((str(page.relative_to(ROOT)), example.line, str(example.parsed)))
    return found


def _checkable(source: str, given: str) -> tuple[str, int]:
    """A module mypy can check, and how many lines come before the block's first: the declarations, then the block,
    inside an ``async def`` if it awaits at the top level (as a notebook or ``python -m asyncio`` would run it)."""
    head = f"{given}\n\n" if given else ""
    try:
        compile(source, "<block>", "exec", dont_inherit=True)
    except SyntaxError:  # top-level await
        body = "".join(f"    {line}" if line.strip() else line for line in source.splitlines(keepends=True))
        head += "\nasync def _block() -> None:\n"
        return head + body, head.count("\n")
    return head + source, head.count("\n")


def test_compile_only_blocks_type_check(tmp_path: Path) -> None:
    """The blocks that cannot run here are type-checked (mypy --strict), each in a module of its own."""
    import re
    import subprocess

    blocks = _compile_only_blocks()
    assert sorted({page for page, _, _ in blocks}) == sorted(TAKEN_AS_GIVEN)
    where: dict[str, tuple[str, int]] = {}
    given = {**TAKEN_AS_GIVEN, "broken": "url: str"}
    for index, (page, line, source) in enumerate([*blocks, ("broken", 0, BROKEN)]):
        module, offset = _checkable(source, given[page])
        name = f"block_{index}.py"
        (tmp_path / name).write_text(module)
        where[name] = (page, line - offset)  # a block's first line follows the ``` fence
    sections = "".join(
        f"\n[mypy-{name[:-3]}]\n{RELAXED[page]}\n" for name, (page, _) in where.items() if page in RELAXED
    )
    sections += "".join(
        f"\n[mypy-{package}.*]\nignore_missing_imports = True\nfollow_imports = skip\n"
        f"[mypy-{package}]\nignore_missing_imports = True\nfollow_imports = skip\n"
        for package in NOT_INSTALLED
    )
    config = tmp_path / "mypy.ini"
    config.write_text(
        f"[mypy]\nstrict = True\nwarn_unused_ignores = True\npython_version = 3.11\nmypy_path = {ROOT / 'src'}\n"
        f"cache_dir = {ROOT / '.cache' / 'mypy-docs'}\n"
        f"{sections}"
    )
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--no-error-summary", *sorted(where)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors: dict[str, list[str]] = {}
    for found in re.finditer(r"^(block_\d+\.py):(\d+): error: (.*)$", checked.stdout, re.MULTILINE):
        page, first = where[found[1]]
        errors.setdefault(page, []).append(f"{page}:{first + int(found[2])}: {found[3]}")
    assert checked.returncode in (0, 1), checked.stdout + checked.stderr  # 2: mypy itself failed
    broken = errors.pop("broken", [])
    assert errors == {}, "\n".join(line for lines in errors.values() for line in lines)
    assert len(broken) == 1 and 'has no attribute "txt"' in broken[0] and broken[0].startswith("broken:5:"), broken


def _python_blocks(page: Path) -> int:
    return sum(1 for line in page.read_text().splitlines() if line.strip() == "```python")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_python_block_runs(page: Path) -> None:
    document = SYBIL.parse(page)
    # The page's blocks run in a module of their own (dataclasses and type hints look their module up), never
    # named __main__, so `if __name__ == "__main__":` blocks stay unrun.
    module = types.ModuleType(f"docs_{abs(hash(page))}")
    document.namespace = module.__dict__
    sys.modules[module.__name__] = module
    try:
        examples = list(document)
        assert len(examples) >= _python_blocks(page), "a ```python block was not picked up"
        for example in examples:
            example.evaluate()
    finally:
        del sys.modules[module.__name__]


def test_blocks_are_found() -> None:
    """The check above checks something: the pages hold Python blocks, and most of them really run."""
    total = sum(_python_blocks(page) for page in PAGES)
    compile_only = sum(page.read_text().count(COMPILE_ONLY) for page in PAGES)
    assert total >= 25
    assert compile_only <= total // 2


def _public_modules() -> list[types.ModuleType]:
    """The package root and every module whose names the API reference lists."""
    import elicitor.client
    import elicitor.client.auth
    import elicitor.forms
    import elicitor.proxy
    import elicitor.server
    import elicitor.state
    import elicitor.telemetry
    import elicitor.testing

    return [
        elicitor,
        elicitor.server,
        elicitor.client,
        elicitor.client.auth,
        elicitor.forms,
        elicitor.testing,
        elicitor.proxy,
        elicitor.state,
        elicitor.telemetry,
    ]


# A protocol's only method, which the protocol's own docstring describes.
DESCRIBED_BY_THEIR_CLASS = {"elicitor.server.TokenVerifier.verify"}


def _public_objects() -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    for module in _public_modules():
        for name in module.__all__:
            if name.startswith("__"):
                continue
            found.append((f"{module.__name__}.{name}", getattr(module, name)))
    return found


def test_every_public_name_has_a_docstring() -> None:
    """The API reference is generated from docstrings: a public name without one would be a blank entry."""
    missing: list[str] = []
    for qualified, obj in _public_objects():
        if not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismethod(obj)):
            continue  # constants and aliases: documented where they are defined
        if not (inspect.getdoc(obj) or "").strip():
            missing.append(qualified)
        if inspect.isclass(obj):
            for member, value in vars(obj).items():
                if member.startswith("_") or (not callable(value) and not isinstance(value, property)):
                    continue
                if not (inspect.getdoc(getattr(obj, member)) or "").strip():  # its own, or the one it overrides
                    missing.append(f"{qualified}.{member}")
    assert [name for name in missing if name not in DESCRIBED_BY_THEIR_CLASS] == []


def test_the_reference_names_every_public_name() -> None:
    """Each name of the root once; each name of another public module under that module, unless the root has it
    (``elicitor.testing``, ``elicitor.proxy`` and ``elicitor.state`` are shown whole)."""
    reference = (ROOT / "docs" / "reference" / "api.md").read_text()
    for module in _public_modules():
        whole = f"::: {module.__name__}\n" in reference
        for name in module.__all__:
            if name.startswith("__") or whole or (module is not elicitor and name in elicitor.__all__):
                continue
            assert f"::: {module.__name__}.{name}\n" in reference, f"{module.__name__}.{name}"


def test_the_error_codes_page_lists_every_code_and_exception() -> None:
    """Every JSON-RPC error code elicitor sends, and every exception it raises on purpose, is on the page."""
    import elicitor.server
    import elicitor.state
    import elicitor.types

    page = (ROOT / "docs" / "reference" / "errors.md").read_text()
    codes = {getattr(elicitor.types, name) for name in elicitor.types.__all__ if name.isupper()}
    codes = {code for code in codes if isinstance(code, int) and -32768 <= code <= -32000}
    assert len(codes) >= 10
    assert [code for code in sorted(codes) if f"| {code} |" not in page] == []
    raised = [
        name
        for module in (elicitor, elicitor.server, elicitor.state)
        for name in module.__all__
        if inspect.isclass(getattr(module, name)) and issubclass(getattr(module, name), BaseException)
    ]
    assert [name for name in raised if f"`{name}`" not in page] == []


def test_every_public_exception_is_an_elicitor_error() -> None:
    """``except ElicitorError`` catches everything elicitor raises on purpose, as the error page says."""
    exceptions = [
        (qualified, obj)
        for qualified, obj in _public_objects()
        if inspect.isclass(obj) and issubclass(obj, BaseException)
    ]
    assert len(exceptions) >= 15
    assert [qualified for qualified, obj in exceptions if not issubclass(obj, elicitor.ElicitorError)] == []


def test_version_shows_its_changelog_entry(capsys: pytest.CaptureFixture[str]) -> None:
    from elicitor.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"elicitor {elicitor.__version__}\n")
    assert "### Added" in shown and "## [" not in shown  # the entry of this version alone, without its heading


def test_the_cli_page_is_generated_from_the_parser() -> None:
    """Every command and option appears on the reference page, because the page is made from the parser."""
    import argparse
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = hooks.on_page_markdown((ROOT / "docs" / "reference" / "cli.md").read_text())
    from elicitor.cli import build_parser

    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                assert f"## `elicitor {name}`" in page
                for option in command._actions:
                    for flag in option.option_strings:
                        assert flag in page, (name, flag)


def test_the_site_builds_strictly_and_loads_nothing_from_elsewhere(tmp_path: Path) -> None:
    """No broken link, missing reference or warning (--strict), and no page loads a script, a stylesheet, a font or
    an image from another site: the documentation works offline and tells nobody who reads it."""
    import re
    import subprocess

    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    loaded = re.compile(r"<(?:script|img|iframe)[^>]*\ssrc=\"https?://|<link[^>]*rel=\"?stylesheet[^>]*https?://")
    pages = list(site.rglob("*.html"))
    assert len(pages) > 25
    offenders = [str(page.relative_to(site)) for page in pages if loaded.search(page.read_text())]
    assert offenders == []
    revisions = (site / "concepts" / "revisions" / "index.html").read_text()
    assert revisions.count("sequenceDiagram") == 3  # one diagram per revision, Mermaid, drawn in the browser
    api = (site / "reference" / "api" / "index.html").read_text()
    assert re.findall(r":(?:class|meth|func|attr|data|exc|mod|obj):", api) == []  # cross-references, resolved
    assert api.count('<a href="#elicitor.') > 50


def test_the_readmes_links_lead_somewhere() -> None:
    """The README is read on its own (a repository's front page), outside the site's --strict build."""
    import re

    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    local = [t for t in targets if not t.startswith(("http://", "https://"))]
    assert len(local) > 20
    assert [t for t in local if not (ROOT / t).exists()] == []


def test_every_test_the_docs_name_exists() -> None:
    """A page that says a test shows something (deploying's "what survives what", hostile-peers' limits) names a
    test that exists: a renamed or removed test fails here, not silently in the docs. A name cut short with "…"
    must begin some test's name."""
    import re

    defined = set(re.findall(r"def (test_\w+)", "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))))
    missing = []
    for page in PAGES:
        for quoted in re.findall(r"`([^`\n]*test_[^`\n]*)`", page.read_text()):
            for name, cut in re.findall(r"\b(test_\w+)(…?)", quoted):
                if quoted.find(f"{name}.py") >= 0:
                    continue  # a file, not a test
                found = any(d.startswith(name) for d in defined) if cut else name in defined
                if not found:
                    missing.append(f"{page.relative_to(ROOT)}: {name}{cut}")
    assert len(defined) > 500
    assert missing == []
