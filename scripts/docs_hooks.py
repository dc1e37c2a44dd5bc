"""mkdocs hooks: pages generated from the code, so they cannot drift from it.

``<!-- cli -->`` in a page becomes the help of the ``elicitor`` command and of each of its commands, as argparse
prints it.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from elicitor.cli import build_parser


def on_page_markdown(markdown: str, **_: Any) -> str:
    if "<!-- cli -->" in markdown:
        markdown = markdown.replace("<!-- cli -->", _cli())
    return markdown


def _cli() -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: the page is the same wherever it is built
    parser = build_parser()
    sections = [f"```text\n{parser.format_help().rstrip()}\n```"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                sections.append(f"## `elicitor {name}`\n\n```text\n{command.format_help().rstrip()}\n```")
    return "\n\n".join(sections)
