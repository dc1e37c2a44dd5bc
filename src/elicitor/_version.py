"""The package's version, and its changelog entry for ``elicitor --version``."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

__version__ = "0.1.0"


def changes(version: str = __version__) -> str | None:
    """The body of ``version``'s section of CHANGELOG.md, or ``None`` when the changelog is not at hand.

    The wheel ships the changelog inside the package; a source checkout reads it from the project's root.
    """
    text = _changelog()
    if text is None:
        return None
    match = re.search(rf"^## \[{re.escape(version)}\][^\n]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1).strip() if match else None


def _changelog() -> str | None:
    shipped = resources.files("elicitor").joinpath("CHANGELOG.md")
    if shipped.is_file():
        return shipped.read_text(encoding="utf-8")
    checkout = Path(__file__).resolve().parents[2] / "CHANGELOG.md"
    return checkout.read_text(encoding="utf-8") if checkout.is_file() else None
