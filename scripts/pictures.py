"""The documentation's pictures, made from what the tests capture of the real user interfaces.

    python scripts/pictures.py        (make pictures: runs the capturing tests first)

The tmux tests (tests/test_screen.py) save terminal screens with their colours to ``artifacts/*.ansi`` (the demo's
form and URL consent, the tutorial server's form); they are replayed into a terminal emulator (pyte) and drawn as
SVG, cell by cell, in the colours the terminal showed. The Chromium tests (tests/test_browser_ui.py) save
screenshots of the browser pages, copied as they are. Everything lands in docs/images/.
"""

from __future__ import annotations

import shutil
import sys
from html import escape
from pathlib import Path

import pyte

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"
IMAGES = ROOT / "docs" / "images"

SCREENS = {
    "terminal-form.ansi": "terminal-form.svg",
    "terminal-url.ansi": "terminal-url.svg",
    "tutorial-form.ansi": "tutorial-form.svg",
    "terminal-form-zh.ansi": "terminal-form-zh.svg",
}
SHOTS = ["browser-form.png", "browser-form-desktop.png", "browser-url.png", "browser-form-zh.png"]

FOREGROUND, BACKGROUND = "#d4d4d4", "#1e1e1e"
NAMED = {
    "black": "#000000", "red": "#cd3131", "green": "#0dbc79", "brown": "#e5e510", "yellow": "#e5e510",
    "blue": "#2472c8", "magenta": "#bc3fbc", "cyan": "#11a8cd", "white": "#e5e5e5", "brightblack": "#767676",
    "brightred": "#f14c4c", "brightgreen": "#23d18b", "brightyellow": "#f5f543", "brightblue": "#3b8eea",
    "brightmagenta": "#d670d6", "brightcyan": "#29b8db", "brightwhite": "#ffffff",
}  # fmt: skip
CELL_W, CELL_H, PAD = 8.4, 18.0, 12.0


def _colour(value: str, default: str) -> str:
    if value == "default":
        return default
    if value in NAMED:
        return NAMED[value]
    return f"#{value}" if len(value) == 6 else default


def render(ansi: str, columns: int = 96, rows: int = 46) -> str:
    """An SVG of the terminal screen ``ansi`` (what ``tmux capture-pane -e`` prints), cropped to what is drawn."""
    screen = pyte.Screen(columns, rows)
    pyte.Stream(screen).feed(ansi.rstrip("\n").replace("\n", "\r\n"))  # no newline after the last row
    used_rows = [y for y in range(rows) if any(screen.buffer[y][x].data.strip() for x in range(columns))]
    used_cols = [x for y in used_rows for x in range(columns) if screen.buffer[y][x].data.strip()]
    height_rows = (max(used_rows) + 1) if used_rows else 1
    width_cols = (max(used_cols) + 2) if used_cols else 1
    width, height = width_cols * CELL_W + 2 * PAD, height_rows * CELL_H + 2 * PAD
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
        f'height="{height:.0f}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="14">',
        f'<rect width="100%" height="100%" rx="6" fill="{BACKGROUND}"/>',
    ]
    for y in range(height_rows):
        x = 0
        while x < width_cols:
            cell = screen.buffer[y][x]
            fg, bg = _colour(cell.fg, FOREGROUND), _colour(cell.bg, BACKGROUND)
            if cell.reverse:
                fg, bg = bg, fg
            style = (fg, bg, cell.bold, cell.underscore)
            run = [cell.data]
            end = x + 1
            while end < width_cols:
                nxt = screen.buffer[y][end]
                nfg, nbg = _colour(nxt.fg, FOREGROUND), _colour(nxt.bg, BACKGROUND)
                if nxt.reverse:
                    nfg, nbg = nbg, nfg
                if (nfg, nbg, nxt.bold, nxt.underscore) != style:
                    break
                run.append(nxt.data)
                end += 1
            left, top = PAD + x * CELL_W, PAD + y * CELL_H
            if bg != BACKGROUND:
                parts.append(
                    f'<rect x="{left:.1f}" y="{top:.1f}" width="{(end - x) * CELL_W:.1f}" height="{CELL_H}" '
                    f'fill="{bg}"/>'
                )
            text = "".join(run)
            if cell.underscore and not text.strip():  # an empty input line: its underline is what shows
                parts.append(
                    f'<line x1="{left:.1f}" y1="{top + CELL_H - 2:.1f}" x2="{left + len(text) * CELL_W:.1f}" '
                    f'y2="{top + CELL_H - 2:.1f}" stroke="{fg}"/>'
                )
            elif text.strip():
                weight = ' font-weight="bold"' if cell.bold else ""
                underline = ' text-decoration="underline"' if cell.underscore else ""
                parts.append(
                    f'<text x="{left:.1f}" y="{top + CELL_H * 0.75:.1f}" fill="{fg}"{weight}{underline} '
                    f'xml:space="preserve" textLength="{len(text) * CELL_W:.1f}">{escape(text)}</text>'
                )
            x = end
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> int:
    IMAGES.mkdir(parents=True, exist_ok=True)
    missing = [name for name in [*SCREENS, *SHOTS] if not (ARTIFACTS / name).is_file()]
    if missing:
        print(f"missing in artifacts/: {', '.join(missing)} (make pictures runs the tests that capture them)")
        return 1
    for source, target in SCREENS.items():
        (IMAGES / target).write_text(render((ARTIFACTS / source).read_text()))
    for shot in SHOTS:
        shutil.copyfile(ARTIFACTS / shot, IMAGES / shot)
    print(f"pictures written to {IMAGES.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
