"""The ``elicitor`` command."""

from __future__ import annotations

import argparse
import sys

from ._version import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="elicitor", description="MCP elicitation, end to end: servers that ask, clients that answer."
    )
    parser.add_argument("--version", action="version", version=f"elicitor {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser("demo", help="run the table-booking demo: a server that asks, you answer")
    demo.add_argument("--protocol", default="auto", help="auto (default), 2026-07-28, 2025-11-25 or 2025-06-18")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import main as demo_main

        demo_main(["client", "--protocol", args.protocol])
        return 0
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
