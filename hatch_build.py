"""Compile the message catalogs into the wheel: each ``src/elicitor/i18n/locales/*/LC_MESSAGES/elicitor.po`` becomes
the ``.mo`` beside it (Babel), shipped as a build artifact (the ``.mo`` files are not in git)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CatalogsHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        locales = Path(self.root) / "src" / "elicitor" / "i18n" / "locales"
        for po in sorted(locales.glob("*/LC_MESSAGES/elicitor.po")):
            with po.open("rb") as file:
                catalog = read_po(file, locale=po.parent.parent.name)
            with po.with_suffix(".mo").open("wb") as file:
                write_mo(file, catalog)
        build_data.setdefault("artifacts", []).append("src/elicitor/i18n/locales/*/LC_MESSAGES/elicitor.mo")
