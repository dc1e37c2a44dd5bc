"""The message catalogs: extract elicitor's words from the source, merge them into every language, compile.

``python scripts/catalogs.py`` (``make catalogs``) extracts every call of ``_`` (and its local alias ``t``),
``n_``, ``N_`` and ``NP_`` under ``src/elicitor`` into ``locales/elicitor.pot`` (Babel), merges it into each
language's ``.po`` (new sentences arrive untranslated, gone ones are dropped) and compiles the ``.mo`` files. The
wheel's build compiles them too (``hatch_build.py``). ``tests/test_i18n.py`` fails when the template or a
catalog differs from the source, and :func:`marked` reads the source's syntax trees as a second opinion: Babel's
tokenizer does not look inside f-strings on Python 3.11, so a sentence marked there would silently stay English.
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "elicitor"
LOCALES = SOURCE / "i18n" / "locales"
TEMPLATE = LOCALES / "elicitor.pot"
KEYWORDS: dict[str, tuple[int, ...] | None] = {"_": None, "t": None, "n_": (1, 2), "N_": None, "NP_": (1, 2)}


def extract() -> Catalog:
    """Every sentence the source marks for translation, with where it is used."""
    catalog = Catalog(project="elicitor", domain="elicitor", copyright_holder="The elicitor developers")
    for filename, lineno, message, comments, context in extract_from_dir(
        SOURCE,
        method_map=[("**.py", "python")],
        keywords=KEYWORDS,
        comment_tags=("Translators:",),
        directory_filter=lambda path: Path(path).name != "__pycache__",  # Babel's default skips _private folders
    ):
        catalog.add(message, None, [(f"src/elicitor/{filename}", lineno)], auto_comments=comments, context=context)
    return catalog


def marked() -> dict[str, str]:
    """Every sentence marked in the source (the first argument of a ``_``, ``t``, ``n_``, ``N_``, ``NP_`` call,
    plural forms too), found in the syntax trees, with where; f-strings included."""
    import ast

    found: dict[str, str] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name not in KEYWORDS:
                continue
            for index in KEYWORDS[name] or (1,):
                arg = node.args[index - 1] if index <= len(node.args) else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.setdefault(arg.value, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def catalogs() -> list[Path]:
    """Each language's ``.po`` file."""
    return sorted(LOCALES.glob("*/LC_MESSAGES/elicitor.po"))


def read(path: Path) -> Catalog:
    with path.open("rb") as file:
        return read_po(file, locale=path.parent.parent.name)


_DATES = re.compile(rb'^"(?:POT-Creation-Date|PO-Revision-Date): [^"]*"\n', re.MULTILINE)
"""The header lines that change on every run: a catalog that differs only there is left as it is."""


def write(path: Path, catalog: Catalog) -> None:
    """Write ``catalog`` unless the file already says the same (so ``make catalogs`` on unchanged sources changes
    nothing, not even a date)."""
    buffer = io.BytesIO()
    write_po(buffer, catalog, width=116, sort_output=False, ignore_obsolete=True, omit_header=False)
    text = buffer.getvalue()
    if path.exists() and _DATES.sub(b"", path.read_bytes()) == _DATES.sub(b"", text):
        return
    path.write_bytes(text)


def compile_all() -> list[Path]:
    """Compile every ``.po`` into the ``.mo`` beside it; return the ``.mo`` files."""
    out = []
    for po in catalogs():
        mo = po.with_suffix(".mo")
        with mo.open("wb") as file:
            write_mo(file, read(po))
        out.append(mo)
    return out


def main() -> int:
    template = extract()
    write(TEMPLATE, template)
    for po in catalogs():
        catalog = read(po)
        catalog.update(template, no_fuzzy_matching=True)
        write(po, catalog)
        empty = [m.id for m in catalog if m.id and not m.string]
        if empty:
            print(f"{po.relative_to(ROOT)}: {len(empty)} untranslated", file=sys.stderr)
    compile_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
