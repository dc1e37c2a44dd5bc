"""The person's language: which catalog speaks to them, how their numbers and dates read, which way they write.

A :class:`Language` is chosen once per person — from the environment (``LANGUAGE``, ``LC_ALL``, ``LC_MESSAGES``,
``LANG``, in gettext's order), from ``--lang``, or in the browser from ``Accept-Language`` and the page's own
switch — and handed to every renderer that speaks to them. Catalogs are gettext's (compiled ``.mo`` files next to
their ``.po`` sources; a source tree that has not been built reads the ``.po`` itself through Babel), numbers and
dates are Babel's (CLDR): a date reads ``25 November 2026``, ``2026年11月25日`` or ``25 نوفمبر 2026``.

Only elicitor's own words are translated. What a server sent (its message, titles, descriptions, choices) is shown
as sent: it is the server's to say in whatever language it speaks.
"""

from __future__ import annotations

import gettext
import io
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any, Literal

from babel import Locale, UnknownLocaleError
from babel.dates import format_date, format_datetime
from babel.numbers import NumberFormatError, format_decimal, parse_decimal

from ._message import Message

LOCALES = Path(__file__).parent / "locales"
DOMAIN = "elicitor"

_CATALOGS: dict[str, str] = {"en": "en", "zh-Hans": "zh_Hans", "zh-Hant": "zh_Hant", "ar": "ar"}
"""The languages elicitor speaks, as BCP 47 tags, with the folder of each one's catalog under ``locales/``."""

_TRADITIONAL = frozenset({"TW", "HK", "MO"})
"""The regions whose Chinese is written in Traditional characters when a tag names no script (``zh-TW``)."""


def available() -> tuple[str, ...]:
    """The languages elicitor's own words come in (BCP 47 tags): ``("en", "zh-Hans", "zh-Hant", "ar")``."""
    return tuple(_CATALOGS)


@dataclass(frozen=True, slots=True)
class Language:
    """One person's language: elicitor's words translated, numbers and dates in their region's forms.

    ``tag`` is the catalog's BCP 47 tag (``"zh-Hans"``), ``locale`` the Babel locale for numbers and dates (the
    person's region when they named one, ``zh_Hant_HK``; digits are written in ASCII, and ``١٢`` typed is read as
    12), ``direction`` ``"rtl"`` for Arabic.
    """

    tag: str
    locale: Locale
    catalog: gettext.NullTranslations

    @property
    def direction(self) -> Literal["ltr", "rtl"]:
        """Which way the language is written (``dir`` on a page)."""
        return "rtl" if self.locale.character_order == "right-to-left" else "ltr"

    def _(self, msgid: str, /, **args: Any) -> str:
        """``msgid`` (elicitor's English) in this language, its ``{placeholders}`` filled from ``args``."""
        return _fill(self.catalog.gettext(msgid), msgid, self._values(args))

    def n_(self, singular: str, plural: str, n: int, /, **args: Any) -> str:
        """A sentence counting ``n`` (``{n}`` in it, written in this language's digits) in its plural form."""
        text = self.catalog.ngettext(singular, plural, n)
        return _fill(text, singular if n == 1 else plural, self._values({**args, "n": n}))

    def text(self, message: Message | str) -> str:
        """A deferred :class:`Message` in this language; any other text (a server's) as it is."""
        if not isinstance(message, Message):
            return message
        if message.plural is not None:
            args = dict(message.args)
            return self.n_(message.msgid, message.plural, args.pop("n"), **args)
        return self._(message.msgid, **message.args)

    def _values(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Values as this person reads them: numbers in their region's forms, nested messages translated."""
        out: dict[str, Any] = {}
        for name, value in args.items():
            if isinstance(value, Message):
                value = self.text(value)
            elif isinstance(value, int | float) and not isinstance(value, bool):
                value = self.number(value)
            out[name] = value
        return out

    def number(self, value: float) -> str:
        """A number as this person's region writes it (grouping, decimal sign), every digit kept."""
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
            value = int(value)
        try:
            return format_decimal(Decimal(repr(value)), locale=self.locale, decimal_quantization=False)
        except (ArithmeticError, ValueError):  # beyond what a person reads as digits (1e300): as Python writes it
            return repr(value) if isinstance(value, float) else str(value)

    def parse_number(self, text: str) -> float | None:
        """A number typed with the grouping and decimal signs of this person's region, or ``None``."""
        try:
            return float(parse_decimal(text, locale=self.locale, strict=True))
        except (NumberFormatError, ValueError):
            return None

    def parse_date(self, text: str) -> str | None:
        """A date typed as this language writes it in words with digits (``2026年11月25日``, the form the date hint
        shows), as ``YYYY-MM-DD``; ``None`` if it is not one, or the language names its months in words."""
        pattern = _numeric_date(self.locale)
        found = pattern.fullmatch(text.strip()) if pattern is not None else None
        if found is None:
            return None
        try:
            return date(int(found["y"]), int(found["m"]), int(found["d"])).isoformat()
        except ValueError:  # 2026年2月30日
            return None

    def date(self, value: date) -> str:
        """A date in words (``25 November 2026``, ``2026年11月25日``)."""
        if isinstance(value, datetime):
            return format_datetime(value, format="medium", tzinfo=value.tzinfo, locale=self.locale)
        return format_date(value, format="long", locale=self.locale)


@cache
def _numeric_date(locale: Locale) -> re.Pattern[str] | None:
    """The locale's long date as a pattern when it is written in digits (Chinese ``y年M月d日``), its year, month and
    day as groups; ``None`` when it names the month (English ``MMMM d, y``) or the day of the week."""
    fields = re.findall(r"'[^']*'|([A-Za-z])\1*|([^A-Za-z']+)", locale.date_formats["long"].pattern)
    parts: list[str] = []
    for letter, literal in fields:
        if literal:
            parts.append(r"\s*" + re.escape(literal.strip()) + r"\s*" if literal.strip() else r"\s*")
        elif letter in ("y", "M", "d"):
            parts.append({"y": r"(?P<y>\d{4})", "M": r"(?P<m>\d{1,2})", "d": r"(?P<d>\d{1,2})"}[letter])
        else:
            return None
    return re.compile("".join(parts))


def _fill(template: str, english: str, args: Mapping[str, Any]) -> str:
    try:
        return template.format(**args)
    except (KeyError, IndexError, ValueError):  # a translation naming a value the sentence lacks: say it in English
        return english.format(**args)


_PROCESS: list[Language] = []  # the language use() chose for this process, if any


def use(spec: str | Language | None) -> None:
    """Choose the language of this process's renderers (what ``elicitor --lang`` does): every handler made
    afterwards without ``lang=`` speaks it, browser pages included (their switch still works). ``None`` goes back
    to the environment's.

    Raises:
        ValueError: elicitor has no catalog for ``spec``.
    """
    _PROCESS.clear()
    if spec is None:
        return
    chosen = spec if isinstance(spec, Language) else _chosen(spec)
    if chosen is None and isinstance(spec, str) and spec.replace("_", "-").split("-")[0].lower() == "en":
        chosen = _load("en", None)
    if chosen is None:
        raise ValueError(f"no catalog for {spec!r}: elicitor speaks {', '.join(available())}")
    _PROCESS.append(chosen)


def chosen() -> Language | None:
    """The language :func:`use` chose for this process (``None``: none was)."""
    return _PROCESS[0] if _PROCESS else None


def language(spec: str | Language | None = None, environ: Mapping[str, str] | None = None) -> Language:
    """The language for ``spec`` (``"zh"``, ``"zh_CN.UTF-8"``, ``"ar-EG"``; a :class:`Language` as it is), or, when
    ``None``, the one :func:`use` chose, else the environment's (:func:`from_environment`). One elicitor does not
    speak falls back to English."""
    if isinstance(spec, Language):
        return spec
    if spec is None:
        return chosen() or from_environment(environ)
    return _chosen(spec) or _load("en", None)


def from_environment(environ: Mapping[str, str] | None = None) -> Language:
    """The language the person's environment asks for, in gettext's order: ``LANGUAGE`` (a ``:``-separated list
    of preferences, unless the locale is ``C``), then the first of ``LC_ALL``, ``LC_MESSAGES``, ``LANG`` that is
    set; English if none names a language elicitor speaks. Chinese goes by its script: ``zh_TW``, ``zh_HK``,
    ``zh_MO`` and ``zh_Hant`` read Traditional, ``zh_CN``, ``zh_SG`` and ``zh`` Simplified, except that a bare
    ``zh`` in ``LANGUAGE`` takes the script of a Traditional locale (``LANG=zh_TW.UTF-8 LANGUAGE=zh``)."""
    env = os.environ if environ is None else environ
    locale_name = next((env[k] for k in ("LC_ALL", "LC_MESSAGES", "LANG") if env.get(k)), "")
    wishes = [] if locale_name in ("", "C", "POSIX") else env.get("LANGUAGE", "").split(":")
    home = _chosen(locale_name)
    for wish in [*wishes, locale_name]:
        chosen = _chosen(wish)
        if _bare(wish).lower() == "zh" and home is not None and home.tag == "zh-Hant":
            return home  # LANG=zh_TW.UTF-8 LANGUAGE=zh: Chinese, in the script the locale names
        if chosen is not None:
            return chosen
    return _load("en", None)


def negotiate(accept_language: str) -> Language:
    """The best language of an ``Accept-Language`` header (RFC 9110 §12.5.4: quality values, order breaking
    ties); English when it names none elicitor speaks."""
    ranked: list[tuple[float, int, str]] = []
    for position, item in enumerate(accept_language.split(",")[:32]):
        tag, _, params = item.strip().partition(";")
        quality = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if tag and quality > 0:
            ranked.append((-quality, position, tag.strip()))
    for _, _, tag in sorted(ranked):
        chosen = _chosen(tag)
        if chosen is not None:
            return chosen
    return _load("en", None)


def _bare(text: str) -> str:
    """A locale name or language tag without its encoding and modifier, ``_`` between its parts."""
    return text.split(".")[0].split("@")[0].replace("-", "_").strip()


def _chosen(text: str) -> Language | None:
    """The language of a locale name or language tag, if elicitor speaks it; the region kept for formats."""
    name = _bare(text)
    if name in ("", "C", "POSIX", "*"):
        return None
    parts = name.split("_")
    lang = parts[0].lower()
    script = next((p.title() for p in parts[1:] if len(p) == 4), None)
    region = next((p.upper() for p in parts[1:] if len(p) in (2, 3)), None)
    if lang == "zh":
        # Chinese by its script: Traditional for zh-Hant*, and for zh-TW, zh-HK, zh-MO that name none; Simplified
        # for zh-Hans*, zh-CN, zh-SG and a bare zh. The region stays for numbers and dates (zh-Hant-HK).
        traditional = script == "Hant" or (script is None and region in _TRADITIONAL)
        return _load("zh-Hant" if traditional else "zh-Hans", region)
    tag = next((t for t in _CATALOGS if t.split("-")[0] == lang), None)
    return _load(tag, region) if tag is not None else None


@cache
def _load(tag: str, region: str | None) -> Language:
    base = Locale.parse(_CATALOGS[tag])
    formats = base
    if region is not None:
        try:
            formats = Locale(base.language, territory=region, script=base.script)
        except (UnknownLocaleError, ValueError):
            formats = base
    return Language(tag, formats, _catalog(tag))


@cache
def _catalog(tag: str) -> gettext.NullTranslations:
    """The compiled catalog of ``tag``; in a source tree whose ``.mo`` is missing or older than its ``.po``, the
    ``.po`` compiled in memory (Babel), so a translation edited in place shows without a build step."""
    if tag == "en":
        return gettext.NullTranslations()
    folder = LOCALES / _CATALOGS[tag] / "LC_MESSAGES"
    mo, po = folder / f"{DOMAIN}.mo", folder / f"{DOMAIN}.po"
    if mo.exists() and (not po.exists() or mo.stat().st_mtime >= po.stat().st_mtime):
        with mo.open("rb") as file:
            return gettext.GNUTranslations(file)
    if not po.exists():
        return gettext.NullTranslations()
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with po.open("rb") as file:
        compiled = io.BytesIO()
        write_mo(compiled, read_po(file, locale=_CATALOGS[tag]))
    compiled.seek(0)
    return gettext.GNUTranslations(compiled)


ENGLISH = _load("en", None)
"""elicitor's own words as written (the message ids), numbers and dates as English writes them."""
