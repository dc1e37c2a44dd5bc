"""How a field and its value read to a person, shared by the renderers (line-based, full-screen, browser).

Hints come from the schema (format, length, bounds, item counts) so a person knows what fits before typing;
parsing turns typed text into the value a field's shared validator (:meth:`check`) accepts.

Everything a server writes (its name, messages, titles, descriptions, URLs, logs, errors) passes through
:func:`printable` before it reaches a terminal or a page, and :func:`identity_warnings` says when the name a server
gives itself could pass for another's. The spec asks clients to show which server asks (client/elicitation
"User Interaction Model") and to warn about ambiguous URLs ("Safe URL Handling"); a name that can rewrite the
screen, or imitate another name, would defeat both.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from .._exceptions import FieldError
from ..forms import BooleanField, EnumField, Form, FormField, MultiEnumField, NumberField, StringField
from ..forms._fields import Problem
from ..i18n import N_, Message
from ..types import Implementation

if TYPE_CHECKING:  # Babel and the catalogs load when a renderer first speaks to a person, not at import
    from ..i18n import Language

_FORMATS = {
    "email": N_("an email address"),
    "uri": N_("a URL"),
    "date": N_("a date, YYYY-MM-DD"),
    "date-time": N_("a date and time, YYYY-MM-DDTHH:MM:SSZ"),
}

LRI, RLI, FSI, PDI = "\u2066", "\u2067", "\u2068", "\u2069"


def isolated(text: str) -> str:
    """Text from a server inside a first-strong isolate (Unicode bidi, UAX #9 §2.7) for a terminal that orders
    lines itself: a right-to-left title cannot reorder elicitor's own words around it, nor they the title. The
    text's own controls are escaped first (:func:`printable`), so it cannot close the isolate."""
    return f"{FSI}{printable(text)}{PDI}"


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SHOWN_AS_ESCAPE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})  # controls, format (bidi, zero-width), surrogates, breaks
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")  # Hangul fillers: letters that draw nothing
ZWJ, ZWNJ = "\u200d", "\u200c"
_VARIATIONS = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")
_TAG_FLAGS = tuple(
    "\U0001f3f4" + "".join(chr(0xE0000 + ord(c)) for c in region) + "\U000e007f"
    for region in ("gbeng", "gbsct", "gbwls")
)
"""The flags written with tag characters that Unicode recommends (England, Scotland, Wales): a black flag, the
region's code in invisible tag letters, a cancel tag. Tag letters anywhere else are hidden text, shown escaped."""


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` from a server as it may be shown to a person: what would act on the terminal or the page instead
    of being read is shown escaped (``\\x1b``, ``\\x07``, ``\\r``, ``\\u202e``, ``\\u200b``).

    That is every control character (C0 and C1: escape sequences, bell, backspace, carriage return, tab), every
    invisible format character (bidi embeddings, overrides and isolates U+202A to U+202E and U+2066 to U+2069, marks,
    zero-width characters, soft hyphens, tags), line and paragraph separators, lone surrogates, letters that draw
    nothing, and a variation selector that follows no character or another selector (a run of them after one
    emoji hides bytes). So a server cannot clear or move over what is already on screen, retitle the window, plant
    a hyperlink whose target differs from its text, ring the bell, hide words or reorder them. The invisible
    characters writing needs stay, where it needs them: a zero-width joiner between two emoji (a family, a rainbow
    flag), a joiner or non-joiner after a virama (Indic conjuncts) and a non-joiner between two Arabic letters
    (Persian), as IDNA allows them (RFC 5892, appendix A); one variation selector after a character (❤️, an
    ideographic variant); the tag letters of the flags of England, Scotland and Wales. With ``newlines`` a line
    feed (or CR LF) stays a line break, for text a renderer shows on several lines (a message); a carriage return
    alone never does. Everything else (any script, emoji, ordinary spaces, backslashes) is left as it is, and the
    result is stable: ``printable(printable(t)) == printable(t)``.
    """
    if text.isprintable() and _BLANK_LETTERS.isdisjoint(text) and _VARIATIONS.search(text) is None:
        return text
    if newlines:
        text = text.replace("\r\n", "\n")
    return "".join(shown_characters(text, newlines=newlines))


def shown_characters(text: str, *, newlines: bool = False) -> list[str]:
    """How :func:`printable` shows each character of ``text``, one item per character: itself, or its escape."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        flag = next((f for f in _TAG_FLAGS if text.startswith(f, i)), None) if ch == "\U0001f3f4" else None
        if flag is not None:
            out += flag
            i += len(flag)
            continue
        if ch == "\n" and newlines:
            out.append(ch)
        else:
            out.append(_escape(ch) if _acts(text, i) else ch)
        i += 1
    return out


def _acts(text: str, i: int) -> bool:
    """Whether the character at ``i`` would act or hide instead of being read, where it stands."""
    ch = text[i]
    if ch in _BLANK_LETTERS:
        return True
    if unicodedata.category(ch) in _SHOWN_AS_ESCAPE:
        return not _joins(text, i)
    return _VARIATIONS.match(ch) is not None and not _varies(text, i)


def _joins(text: str, i: int) -> bool:
    """Whether the joiner or non-joiner at ``i`` is one writing needs (see :func:`printable`)."""
    ch = text[i]
    if ch not in (ZWJ, ZWNJ) or i == 0 or i + 1 == len(text):
        return False
    after = text[i + 1]
    if unicodedata.combining(text[i - 1]) == 9 and after.isalpha():  # after a virama: a conjunct's form
        return True
    before = i - 1
    while before > 0 and (_VARIATIONS.match(text[before]) or _modifier(text[before])):
        before -= 1
    if ch == ZWJ:
        return unicodedata.category(text[before]) == "So" and unicodedata.category(after) == "So"
    return _arabic_letter(text[i - 1]) and _arabic_letter(after)


def _varies(text: str, i: int) -> bool:
    """Whether the variation selector at ``i`` follows a character it can vary (one selector, not a run)."""
    if i == 0:
        return False
    before = text[i - 1]
    return not (
        _VARIATIONS.match(before)
        or before in (ZWJ, ZWNJ, "\n")
        or before in _BLANK_LETTERS
        or unicodedata.category(before) in _SHOWN_AS_ESCAPE
        or before.isspace()
    )


def _modifier(ch: str) -> bool:
    return "\U0001f3fb" <= ch <= "\U0001f3ff"  # the five skin tones


def _regional(ch: str) -> bool:
    return "\U0001f1e6" <= ch <= "\U0001f1ff"  # two of them make a flag


def _arabic_letter(ch: str) -> bool:
    return ch.isalpha() and any(low <= ch <= high for low, high in _ARABIC)


_ARABIC = (("\u0600", "\u06ff"), ("\u0750", "\u077f"), ("\u08a0", "\u08ff"), ("\ufb50", "\ufdff"), ("\ufe70", "\ufeff"))


def _continues(text: str, j: int) -> bool:
    """Whether the character at ``j`` belongs with the one before it (see :func:`units`)."""
    ch = text[j]
    if text[j - 1] == ZWJ and not ch.isascii():
        return True
    return (
        ch in (ZWJ, ZWNJ)
        or unicodedata.category(ch) in ("Mn", "Me", "Mc")
        or _modifier(ch)
        or "\U000e0020" <= ch <= "\U000e007f"
    )


def cells(text: str) -> int:
    """How many terminal cells ``text`` (as :func:`printable` leaves it) takes, as tmux draws it: by ``wcwidth``,
    except that what a zero-width joiner joins is drawn in the glyph it joins (a family of three emoji takes two
    cells, not six) and a regional indicator takes one cell (a flag, two). ``wcwidth`` alone counted six cells for
    the family and four for a flag, so what followed them on a line stood too far right."""
    from prompt_toolkit.utils import get_cwidth

    total = 0
    before = ""
    for ch in text:
        if _regional(ch):
            total += 1
        elif before != ZWJ or ch.isascii():
            total += get_cwidth(ch)
        before = ch
    return total


def units(text: str) -> list[str]:
    """``text`` in the pieces a line must not break inside: a character with the marks, selectors, skin tones and
    tags that follow it and whatever a joiner joins to it, and the two regional indicators of a flag."""
    out: list[str] = []
    i = 0
    while i < len(text):
        j = i + 1
        if _regional(text[i]) and j < len(text) and _regional(text[j]):
            j += 1
        while j < len(text) and _continues(text, j):
            j += 1
        out.append(text[i:j])
        i = j
    return out


def spaced(text: str, following: str = "") -> str:
    """``text`` and the space that parts it from what follows (``following``, when known), unless a full-width mark
    stands between them: Chinese puts no space after its full-width colon or full stop, nor before its opening
    bracket (each takes two cells, its own room included), so a label stood apart from its value, two sentences
    had a gap between them and the Chinese "(required)" one before it."""
    if _full_width_mark(text[-1:]) or _full_width_mark(following[:1]):
        return text
    return text + " "


def _full_width_mark(ch: str) -> bool:
    return bool(ch) and unicodedata.east_asian_width(ch) in ("F", "W") and unicodedata.category(ch).startswith("P")


_NO_LINE_START = frozenset("，。、；：？！）》」』】〕〉…—·,.;:?!)]}%")
"""Punctuation a line must not begin with (closing marks, commas, full stops): kept with what it follows."""


_NO_LINE_END = frozenset("（《「『【〔〈“‘([{")
"""Opening marks a line must not end with: kept with what they open."""


def break_lines(text: str, width: int) -> list[int]:
    """Where ``text`` (one line, no newline) breaks to fit ``width`` terminal cells: the index each line after the
    first starts at. Broken as :func:`wrap` breaks (after a space, between two wide characters, never before a
    closing mark nor after an opening one), cut between characters where a run has no such place, never inside
    what :func:`units` keeps together (an emoji a joiner joins, a flag, a letter and its marks); every character
    kept, so a renderer can carry each one's style along."""
    breaks: list[int] = []
    start, used, chance = 0, 0, 0
    pieces = units(text)
    sizes = [cells(piece) for piece in pieces]
    starts: dict[int, int] = {}  # where each piece starts in the text: its number
    at = 0
    for k, piece in enumerate(pieces):
        starts[at] = k
        at += len(piece)
    for at, k in starts.items():
        piece, size = pieces[k], sizes[k]
        if at > start and _may_break(pieces[k - 1][-1], piece[0], size == 2 or sizes[k - 1] == 2):
            chance = at
        if used + size > width and at > start and piece != " ":
            cut = chance if chance > start else at
            breaks.append(cut)
            start, chance = cut, cut
            used = sum(sizes[starts[cut] : k])
        used += size
    return breaks


def break_items(text: str, width: int, separator: str) -> list[int]:
    """Where ``text``, items parted by ``separator`` (the keys' bar: "Tab 移动 · Esc 取消"), breaks to fit ``width``
    cells: only after a separator, which ends its line (its trailing space dropped), so a key stays with what it
    does and a word with itself; an item wider than a line alone is broken as :func:`break_lines` breaks it."""
    items = text.split(separator)
    ending = cells(separator.rstrip())  # what a separator leaves at the end of a line it ends
    breaks: list[int] = []
    used, at = 0, 0
    for number, item in enumerate(items):
        size = cells(item)
        tail = ending if number < len(items) - 1 else 0
        if number and used + cells(separator) + size + tail > width:
            breaks.append(at)
            used = 0
        elif number:
            used += cells(separator)
        if size + tail > width:
            breaks += [at + cut for cut in break_lines(item, width)]
        used += size
        at += len(item) + len(separator)
    return breaks


def _may_break(before: str, ch: str, wide: bool) -> bool:
    """Whether a line may break between ``before`` and ``ch`` (``wide``: one of them takes two cells)."""
    if before == " ":
        return ch != " "
    return wide and ch != " " and ch not in _NO_LINE_START and before not in _NO_LINE_END


def wrap(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` in lines of at most ``width`` terminal cells, the lines after the first starting with ``indent``.

    Measured in cells, not code points (:func:`cells`: a Chinese character or an emoji takes two, a combining mark
    none), and broken where the text allows it: at spaces, and between two characters of a script written without
    spaces (Chinese, Japanese), never before a closing mark (a Chinese comma, full stop or closing bracket) nor
    inside what :func:`units` keeps together. A word longer than a line is cut between characters.
    ``textwrap`` counts code points and breaks at spaces only, so a Chinese sentence came out as one line twice
    the terminal's width.
    """
    lines: list[str] = []
    line = text[: len(text) - len(text.lstrip())]  # the first line's own indentation is kept
    used = cells(line)
    for word, space in _pieces(text):
        room = width - (cells(indent) if lines else 0)
        size = cells(word)
        if line.strip() and used + size > room:
            lines.append(line.rstrip())
            line, used, room = "", 0, width - cells(indent)
        while size > room - used and len(units(word)) > 1:  # longer than a line: cut where it reaches the end
            cut = _fitting(word, room - used) or len(units(word)[0])
            lines.append((line + word[:cut]).rstrip())
            line, used, room = "", 0, width - cells(indent)
            word = word[cut:]
            size = cells(word)
        line, used = line + word, used + size
        if space:
            line, used = line + " ", used + 1
    if line.strip() or not lines:
        lines.append(line.rstrip())
    return lines[:1] + [indent + rest for rest in lines[1:]]


def _pieces(text: str) -> list[tuple[str, bool]]:
    """What a line may break between, each with whether a space follows it: words, and each character of a
    script written without spaces (with its marks, or an emoji and what is joined to it), with the closing marks
    that follow it and the opening marks before it (a line ended with a full-width opening bracket when what it
    opened was a word too long for the rest of the line)."""
    pieces: list[tuple[str, bool]] = []
    for word in text.split():
        first, current = len(pieces), ""
        for unit in units(word):
            opened = bool(current) and current[-1] in _NO_LINE_END  # kept with what follows
            if unit in _NO_LINE_START and (current or len(pieces) > first):
                if current:
                    current += unit
                else:
                    pieces[-1] = (pieces[-1][0] + unit, False)
                if current and cells(unit) == 2:  # after a full-width mark a line may break (、 then 2025-11-25)
                    pieces.append((current, False))
                    current = ""
            elif cells(unit) == 2:  # a wide character: a line may break before and after it
                if current and not opened:
                    pieces.append((current, False))
                    current = ""
                if unit in _NO_LINE_END:
                    current += unit
                else:
                    pieces.append((current + unit, False))
                    current = ""
            else:
                current += unit
        if current:
            pieces.append((current, False))
        pieces[-1] = (pieces[-1][0], True)
    return pieces


def _fitting(word: str, room: int) -> int:
    """How many of ``word``'s characters fit in ``room`` terminal cells, whole :func:`units` only."""
    used = count = 0
    for unit in units(word):
        used += cells(unit)
        if used > room:
            return count
        count += len(unit)
    return len(word)


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


# Scripts that are written together in one name without any trick (UTS #39, "Highly Restrictive").
_TOGETHER = (
    frozenset({"Latin", "Han", "Hiragana", "Katakana"}),
    frozenset({"Latin", "Han", "Bopomofo"}),
    frozenset({"Latin", "Han", "Hangul"}),
)
_SCRIPT_WORDS = {"CJK": "Han", "IDEOGRAPHIC": "Han", "KATAKANA-HIRAGANA": "Katakana"}
# Cyrillic and Greek letters that pass for Latin ones: a name made only of them reads as a Latin name.
_LATIN_LOOKALIKES = frozenset("аеіјорсхуѕԁһԛԝӏАВЕІЈКМНОРСТХУЅԌԚԜΑΒΕΖΗΙΚΜΝΟΡΤΥΧοικνρυ")


def _script(ch: str) -> str | None:
    """The script of a letter, from its Unicode name (``"Latin"``, ``"Cyrillic"``, ``"Han"``...); ``None`` if
    ``ch`` is no letter. Compatibility forms count as what they imitate (fullwidth Latin letters are Latin)."""
    plain = unicodedata.normalize("NFKC", ch)[:1] or ch
    if not plain.isalpha():
        return None
    word = unicodedata.name(plain, "").partition(" ")[0]
    if not word or word == "MODIFIER":
        return None
    return _SCRIPT_WORDS.get(word, word.capitalize())


def _name_warnings(text: str) -> list[Message]:
    warnings: list[Message] = []
    scripts = sorted({s for s in map(_script, text) if s is not None})
    if len(scripts) > 1 and not any(together.issuperset(scripts) for together in _TOGETHER):
        warnings.append(N_("the server's name mixes letters of different scripts ({scripts}), a way to imitate "
                           "another name", scripts=", ".join(scripts)))  # fmt: skip
    elif scripts in (["Cyrillic"], ["Greek"]) and all(c in _LATIN_LOOKALIKES for c in text if c.isalpha()):
        warnings.append(N_("the server's name is written in {script} letters that look like Latin ones",
                           script=scripts[0]))  # fmt: skip
    if any(_imitates_ascii(c) for c in text):
        warnings.append(N_("the server's name uses characters that imitate ordinary letters or digits"))
    return warnings


def _imitates_ascii(ch: str) -> bool:
    """Whether ``ch`` is a compatibility form of an ASCII letter or digit (a fullwidth or mathematical bold B, a
    circled digit...). Punctuation and spaces are left out: Chinese and Japanese are written with fullwidth
    parentheses, colons and commas and the ideographic space, whose NFKC forms are ASCII too, and a name written
    with them imitates nothing."""
    plain = unicodedata.normalize("NFKC", ch)
    return plain != ch and plain.isascii() and any(c.isalnum() for c in plain)


def identity_warnings(server: Implementation | None) -> list[Message]:
    """What a person should know about the name a server gives itself before trusting it (empty: nothing).

    A server names itself, so a hostile one may borrow a name a person trusts: with characters that do not show
    or that reverse what follows (bidi controls), with letters of another script that look the same (a Cyrillic
    letter a in a Latin name), or with compatibility forms of ordinary letters (fullwidth, mathematical).
    """
    if server is None:
        return []
    texts = [t for t in (server.title, server.name, server.version) if t]
    warnings: list[Message] = []
    if any(printable(t) != t for t in texts):
        warnings.append(N_("the server's name contains invisible or direction-changing characters (shown escaped)"))
    for text in dict.fromkeys(t for t in (server.title, server.name) if t):
        warnings += [w for w in _name_warnings(text) if w not in warnings]
    return warnings


def server_name(server: Implementation | None) -> str:
    """The server's own name when its title hides it (``"booking-desk"`` behind "Chez Elicitor booking desk").

    Titles are free text any server can choose; the name beside it helps a person tell two servers apart. Shown
    escaped (:func:`printable`), on one line.
    """
    if server is None or not server.title or server.title == server.name:
        return ""
    return printable(server.name)


def server_label(server: Implementation | None) -> str:
    """Who asks, as a person reads it: the server's title (or name) and version on one line, escaped."""
    return printable(server.display()) if server is not None else "an unnamed server"


def asker(server: Implementation | None, lang: Language) -> str:
    """Who asks, in ``lang`` when the server gave no name (:func:`server_label` otherwise)."""
    return server_label(server) if server is not None else lang._("an unnamed server")


def queue_text(waiting: int, lang: Language) -> str:
    """How many questions wait behind the one shown ("" when none)."""
    if not waiting:
        return ""
    return lang.n_("{n} more question waiting after this one", "{n} more questions waiting after this one", waiting)


def error_text(error: FieldError, lang: Language) -> str:
    """What is wrong with an answer, in ``lang`` when elicitor wrote the sentence."""
    return lang.text(error.text) if error.text is not None else error.message


def warning_text(warning: Message | str, lang: Language) -> str:
    """A warning ("the connection is not encrypted") as a line: "⚠ Careful: …." in ``lang``."""
    return lang._("⚠ Careful: {warning}.", warning=lang.text(warning))


def yes_no(form: Form[Any]) -> BooleanField | None:
    """The one field of a yes/no question, or ``None`` when the form asks more than that.

    A form whose only field is a boolean (what ``ctx.confirm`` sends) is a question with two answers: the renderers
    show it on one screen with Yes and No (plus decline and cancel, client/elicitation "User Interaction Model"),
    instead of a checkbox, a review and a submit. No, the answer that changes nothing, is what Enter or the first
    focus gives, whatever the field's default: a stray key must not agree to anything.
    """
    fields = form.fields
    return fields[0] if len(fields) == 1 and isinstance(fields[0], BooleanField) else None


def hint(f: FormField, lang: Language) -> list[str]:
    """What fits the field, in words ("an email address", "from 1 to 10", "at least 2 characters", "choose up to 3"),
    in ``lang`` with its numbers; a date field shows today's date as the person's language writes it."""
    parts: list[str] = []
    if isinstance(f, StringField):
        if f.format:
            parts.append(lang.text(_FORMATS[f.format]))
            if f.format == "date":
                today = date.today()
                parts.append(lang._("today is {iso}, {words}", iso=today.isoformat(), words=lang.date(today)))
        if f.min_length or f.max_length is not None:
            parts.append(lang.text(_count(f.min_length or None, f.max_length, _CHARACTERS)))
    elif isinstance(f, NumberField):
        parts.append(lang._("a whole number") if f.integer else lang._("a number"))
        if f.minimum is not None or f.maximum is not None:
            parts.append(lang.text(_range(f.minimum, f.maximum)))
    elif isinstance(f, MultiEnumField) and (f.min_items or f.max_items is not None):
        parts.append(lang.text(_count(f.min_items or None, f.max_items, _CHOICES)))
    return parts


_CHARACTERS = {
    "exactly": N_("exactly {n} characters"),
    "between": N_("{low}–{high} characters"),
    "at least": N_("at least {n} characters"),
    "up to": N_("up to {n} characters"),
}
_CHOICES = {
    "exactly": N_("choose exactly {n}"),
    "between": N_("choose {low}–{high}"),
    "at least": N_("choose at least {n}"),
    "up to": N_("choose up to {n}"),
}


def _count(low: int | None, high: int | None, words: dict[str, Message]) -> Message:
    """A count as a person says it: "exactly 3 characters", "2-5 characters", "choose up to 3"."""
    if low is not None and high is not None:
        if low == high:
            return Message(words["exactly"].msgid, None, {"n": low})
        return Message(words["between"].msgid, None, {"low": low, "high": high})
    if low is not None:
        return Message(words["at least"].msgid, None, {"n": low})
    return Message(words["up to"].msgid, None, {"n": high})


def _range(low: float | None, high: float | None) -> Message:
    """A range as a person says it: "from 1 to 10", "at least 0", "at most 5"."""
    if low is not None and high is not None:
        return N_("from {low} to {high}", low=low, high=high)
    if low is not None:
        return N_("at least {n}", n=low)
    return N_("at most {n}", n=high)


def show(f: FormField, value: Any, lang: Language) -> str:
    """A value as the person chose it: titles, not wire values; yes/no; "—" for nothing; numbers and dates as the
    person's language writes them; one line, escaped."""
    if value is None:
        return "—"
    if isinstance(f, BooleanField):
        return lang._("yes") if value else lang._("no")
    if isinstance(f, EnumField):
        return printable(next((o.label for o in f.options if o.value == value), str(value)))
    if isinstance(f, MultiEnumField):
        labels = {o.value: o.label for o in f.options}
        return printable(lang._(", ").join(labels.get(v, v) for v in value) or lang._("none"))
    if isinstance(f, NumberField) and isinstance(value, int | float) and not isinstance(value, bool):
        return lang.number(value)
    if isinstance(f, StringField) and f.format in ("date", "date-time") and isinstance(value, str):
        words = _date_words(value, f.format == "date", lang)
        return lang._("{value} ({words})", value=printable(value), words=words) if words else printable(value)
    return printable(str(value))


def _date_words(value: str, day: bool, lang: Language) -> str:
    try:
        if day:
            return lang.date(date.fromisoformat(value))
        return lang.date(datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00")))
    except ValueError:
        return ""


_FULLWIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
"""Fullwidth ASCII (``１２``, ``＠``, ``－``) and the ideographic space as their ASCII selves."""
_FULLWIDTH_EMAIL = _FULLWIDTH | {0x3002: 0x2E}
"""The same, and the ideographic full stop ``。`` as a dot (IDNA reads it as one between labels)."""


def command_typed(text: str) -> str:
    """An answer to a prompt of letters and numbers (``y``, ``d``, ``c``, ``2``, ``-``) as it is compared: an input
    method in full-width mode types their fullwidth forms (U+FF59, U+FF44, U+FF12), which mean the same."""
    return text.translate(_FULLWIDTH).strip().lower()


def ascii_typed(f: FormField, text: str) -> str:
    """What a person typed into a number, date or email field with ASCII where they typed its fullwidth forms.

    A Chinese or Japanese input method in full-width mode types fullwidth digits, hyphens and at signs (U+FF10,
    U+FF0D, U+FF20...): characters that read as the date and the address but are not the ASCII the formats are
    made of, so they were refused. Free text is left exactly as typed (it is the person's own), and so are URLs
    (a path may mean its fullwidth letters)."""
    if isinstance(f, NumberField | BooleanField) or (isinstance(f, StringField) and f.format in ("date", "date-time")):
        return text.translate(_FULLWIDTH)
    if isinstance(f, StringField) and f.format == "email":
        return text.translate(_FULLWIDTH_EMAIL)
    return text


def typed_number(f: NumberField, text: str, lang: Language) -> int | float | None:
    """A number as a person typed it (fullwidth forms already read as ASCII), or ``None`` if it is not one (or, for
    an integer field, not a whole one): as Python reads it (any script's digits), else as the person's region
    writes it (``1,234.5``)."""
    number: int | float | None
    try:
        return int(text) if f.integer else float(text)
    except ValueError:
        number = lang.parse_number(text)
    if number is not None and f.integer and number.is_integer():
        number = int(number)
    if number is None or (f.integer and not isinstance(number, int)):
        return None
    return number


def parse_text(f: FormField, text: str, lang: Language) -> Any:
    """Typed text as the field's value, checked by the field's shared validator; raises ``Problem`` if it is not.

    Yes and no may be typed in English or in ``lang``; numbers as Python reads them (any script's digits) or as
    the person's region writes them (``1,234.5``), fullwidth forms too (:func:`ascii_typed`); a date as ``lang``
    writes it in digits too (``2026年12月24日``, the form the date's hint shows), sent as ``2026-12-24``."""
    text = ascii_typed(f, text)
    if isinstance(f, StringField) and f.format == "date":
        text = lang.parse_date(text) or text
    if isinstance(f, BooleanField):
        lowered = text.lower()
        if lowered in ("y", "yes", "true", "1", lang._("yes").lower()):
            return True
        if lowered in ("n", "no", "false", "0", lang._("no").lower()):
            return False
        raise Problem(N_("answer y or n"))
    if isinstance(f, NumberField):
        number = typed_number(f, text, lang)
        if number is None:
            raise Problem(N_("expected a whole number") if f.integer else N_("expected a number"))
        return f.check(number)
    if isinstance(f, EnumField):
        return f.check(_pick(f.options, text))
    if isinstance(f, MultiEnumField):
        if any(text.strip() in (o.value, o.title) for o in f.options):
            return f.check([_pick(f.options, text.strip())])  # one choice whose name holds a comma
        # The comma of Chinese and of Arabic too, and the enumeration comma a Chinese list is written with (、).
        parts = [part.strip() for part in text.replace("，", ",").replace("、", ",").replace("،", ",").split(",")]
        unknown = [part for part in parts if part and not _known(f.options, part)]
        if unknown and len([part for part in parts if part]) > 1:  # of several, say which was not understood
            listed = lang._(", ").join(unknown)
            raise Problem(N_("not among the choices shown: {typed}; give each by its number or its name", typed=listed))
        return f.check([_pick(f.options, part) for part in parts if part])
    return f.check(text)


def _known(options: tuple[Any, ...], text: str) -> bool:
    """Whether ``text`` names one of ``options`` (:func:`_pick` would find it)."""
    try:
        _pick(options, text)
    except Problem:
        return False
    return True


def _pick(options: tuple[Any, ...], text: str) -> str:
    if text.isdigit() and 1 <= int(text) <= len(options):
        return str(options[int(text) - 1].value)
    for option in options:
        if text in (option.value, option.title):
            return str(option.value)
    raise Problem(N_("pick one of the choices shown, by its number or its name"))
