"""mkdocs hooks: pages generated from the code, so they cannot drift from it.

``<!-- cli -->`` in a page becomes the help of the ``elicitor`` command and of each of its commands, as argparse
prints it. ``<!-- conformance -->`` becomes the table of the last recorded run of the official conformance harness
(docs/data/conformance.json, written by ``make conformance-page``). Docstrings' ``Example::`` reads ``Example:``, and
their cross-references (``:class:`Form```) read as the name in code, linked when the page documents it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

from elicitor.cli import build_parser
from elicitor.i18n import chosen, use


def on_page_markdown(markdown: str, **_: Any) -> str:
    if "<!-- cli -->" in markdown:
        markdown = markdown.replace("<!-- cli -->", _cli())
    if "<!-- conformance -->" in markdown:
        markdown = markdown.replace("<!-- conformance -->", _conformance())
    return markdown


_ROLE = re.compile(r":(?:class|meth|func|attr|data|exc|mod|obj):<code>(~?)([\w.]+)</code>")


def on_page_content(html: str, **_: Any) -> str:
    """Docstrings are written for reading in the source too, the reStructuredText way; on the page:

    - ``Example::`` (read in the source as "code follows") ends with one colon, the code block already says so;
    - a cross-reference (``:class:`~elicitor.AuthError```, ``:meth:`run```) is its name in code, without the role,
      and a link when the page documents that name (``~`` shows only the last part of a dotted name).
    """
    html = html.replace("::</p>", ":</p>")
    anchors = set(re.findall(r'\sid="([\w.]+)"', html))

    def reference(match: re.Match[str]) -> str:
        short, target = match.group(1), match.group(2)
        shown = target.rpartition(".")[2] if short else target
        found = [target] if target in anchors else [a for a in anchors if a.endswith(f".{target}")]
        if len(found) == 1:  # a short name (``Tokens``, ``Server.run``) links only when it names one thing
            return f'<a href="#{found[0]}"><code>{shown}</code></a>'
        return f"<code>{shown}</code>"

    return _ROLE.sub(reference, html)


def _conformance() -> str:
    data = json.loads((Path(__file__).resolve().parent.parent / "docs" / "data" / "conformance.json").read_text())
    rows = [f"| {'✅' if r['passed'] else '❌'} | {r['label']} | {r['summary']} |" for r in data["results"]]
    passed = sum(1 for r in data["results"] if r["passed"])
    head = (
        f"The last recorded run ({data['date']}, harness {' and '.join(data['harness'])}): "
        f"**{passed} of {len(data['results'])}** suites and scenarios passed.\n\n"
        "| | suite or scenario | checks |\n|---|---|---|"
    )
    return head + "\n" + "\n".join(rows)


def _cli() -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: the page is the same wherever it is built
    before = chosen()
    use("en")  # --help speaks the builder's language: the page is English whatever their locale
    try:
        parser = build_parser()
        sections = [f"```text\n{parser.format_help().rstrip()}\n```"]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, command in action.choices.items():
                    sections.append(f"## `elicitor {name}`\n\n```text\n{command.format_help().rstrip()}\n```")
    finally:
        use(before)  # the process's own choice again (a test process goes on rendering pages after this)
    return "\n\n".join(sections)
