"""The full-screen terminal renderer (prompt_toolkit): the form, the review step and the URL consent screen.

What a person sees for a form (client/elicitation "User Interaction Model": show which server asks, let the person
review and edit before sending, offer decline and cancel):

- a banner naming the server (title or name, version) and how many more questions wait their turn;
- the message, then every field with its title, ``*`` when required, its description and a hint from the schema
  (format, length, bounds, how many to choose); text and numbers as input lines, booleans as a checkbox,
  single-select as radio buttons showing titles (the value is what is sent), multi-select as checkboxes;
  defaults pre-filled;
- live validation with the same validator the server uses (an error appears under a field as soon as what is
  typed cannot fit; a missing required answer is pointed out when the person asks to review);
- Review, then Submit or Edit; Decline and Cancel at every step; Esc cancels.

A yes/no question (a form whose only field is a boolean, as ``ctx.confirm`` sends) is one screen instead: the
question with Yes, No, Decline and Cancel, No focused so that Enter answers No.

URL mode (client/elicitation "Safe URL Handling"): the full URL with its host highlighted, every warning, and an
Open button that is never focused first — a stray Enter cannot open anything.

Every word of elicitor's own comes from the catalogs in the person's language (:class:`~elicitor.i18n.Language`);
what the server wrote is drawn as sent. Layout is by terminal cells, not code points (prompt_toolkit measures with
``wcwidth``): a Chinese character takes two cells, buttons are as wide as their words. The server's words are drawn
in fragments of their own, never spliced into a sentence of elicitor's, so a right-to-left title cannot reorder
elicitor's words; bidi isolates (``FSI``…``PDI``) are the line mode's tool, since a full screen places every cell
itself. ``NO_COLOR`` drops colour (prompt_toolkit honours it): nothing is said by colour alone — errors start with
✗, required fields carry ``*``, the focused button is reversed.

Each screen is a prompt_toolkit ``Application`` run in a worker thread (prompt_toolkit brings its own asyncio loop
there, so this works under any anyio backend). When the request is cancelled (the server gave up, the connection
closed), the application is told to exit and the terminal is handed back before the cancellation goes on.

This module is where a screen runs and the pieces every screen is drawn from (banner, lines of text, buttons,
the keys); the screens themselves are ``_form_screens`` (the form, its review, a yes/no question) and
``_url_screens`` (URL consent, the wait).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from prompt_toolkit.application import Application
from prompt_toolkit.application.current import get_app
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples, fragment_list_to_text
from prompt_toolkit.input import Input, create_input
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.key_binding.bindings.focus import focus_next, focus_previous
from prompt_toolkit.key_binding.key_processor import KeyPressEvent
from prompt_toolkit.layout import (
    AnyContainer,
    ConditionalContainer,
    FormattedTextControl,
    Layout,
    Window,
)
from prompt_toolkit.layout.controls import UIContent
from prompt_toolkit.output import ColorDepth, Output, create_output
from prompt_toolkit.styles import Style
from prompt_toolkit.utils import get_cwidth
from prompt_toolkit.widgets import Button

from .._exceptions import FieldError
from ..forms import Form
from ..i18n import ENGLISH, Language
from ..types import Implementation
from ._handlers import ElicitationRequest
from ._present import (
    _regional,
    asker,
    break_items,
    break_lines,
    cells,
    error_text,
    identity_warnings,
    printable,
    server_name,
    spaced,
    units,
    warning_text,
)

T = TypeVar("T")

try:  # prompt_toolkit's cache of each character's width in cells, which the stand-ins of laid_out() are put in
    from prompt_toolkit.utils import _CHAR_SIZES_CACHE as _SIZES
except ImportError:  # not in this prompt_toolkit: text is drawn as it measures it
    _SIZES = None  # type: ignore[assignment]

_STYLE = Style.from_dict(
    {
        "banner": "reverse bold",
        "waiting": "italic",
        "message": "bold",
        "label": "bold",
        "required": "fg:ansired bold",
        "hint": "fg:ansibrightblack",
        "error": "fg:ansired bold",
        "warning": "fg:ansiyellow bold",
        "input": "underline",
        "host": "reverse bold underline",
        "help": "reverse",
        "button.focused": "reverse bold",
    }
)


class Terminal:
    """Where the screens run: prompt_toolkit input and output (default: the process's terminal, drawn on stderr)."""

    def __init__(self, input: Input | None = None, output: Output | None = None, lang: Language = ENGLISH) -> None:
        self._input = input
        self._output = output
        self.lang = lang

    def application(self, layout: Layout, bindings: KeyBindings) -> Application[Any]:
        return Application(
            layout=layout,
            key_bindings=bindings,
            style=_STYLE,
            full_screen=True,
            mouse_support=False,
            refresh_interval=1.0,  # the queue count can change while a question is on screen
            color_depth=ColorDepth.from_env(),  # NO_COLOR: one colour, whatever the output (https://no-color.org)
            input=self._input or create_input(),
            output=translating(self._output or create_output(stdout=sys.stderr)),
        )


async def run_screen(app: Application[T], on_cancel: T) -> T:
    """Run ``app`` in a worker thread; if the caller is cancelled, make it exit and wait until it has."""
    stop = threading.Event()
    finished = threading.Event()

    def run() -> T:
        try:
            return app.run(pre_run=lambda: exit_with(app, on_cancel) if stop.is_set() else None, handle_sigint=False)
        except EOFError:  # the terminal's input closed under the screen: nobody is there to answer
            return on_cancel
        finally:
            finished.set()

    try:
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        stop.set()
        loop = app.loop
        if app.is_running and loop is not None:
            loop.call_soon_threadsafe(exit_with, app, on_cancel)
        with anyio.CancelScope(shield=True):  # give the terminal back before anything else draws on it
            await anyio.to_thread.run_sync(finished.wait, 5.0)
        raise


def exit_with(app: Application[T], result: T) -> None:
    """Exit with ``result`` unless the application already has one (a second press is ignored)."""
    future = app.future
    if app.is_running and future is not None and not future.done():
        app.exit(result=result)


def key_bindings(on_escape: Callable[[KeyPressEvent], None]) -> KeyBindings:
    kb = KeyBindings()
    kb.add("tab")(focus_next)
    kb.add("s-tab")(focus_previous)
    in_text = Condition(_in_text_field)  # arrows move between lines; in lists they move between choices
    kb.add("down", filter=in_text)(focus_next)
    kb.add("up", filter=in_text)(focus_previous)
    kb.add("escape", eager=True)(on_escape)
    kb.add("c-c")(on_escape)
    return kb


def _in_text_field() -> bool:
    return get_app().layout.current_buffer is not None


def escaped(fragments: StyleAndTextTuples, newlines: bool = True) -> StyleAndTextTuples:
    """``fragments`` with their text escaped (:func:`printable`) and laid out by the terminal's cells
    (:func:`laid_out`). prompt_toolkit draws C0 and C1 controls as ``^[`` or ``<9b>`` but hands bidi controls and
    zero-width characters to the terminal as they are, where they reorder or hide what a person reads; every window
    that shows text from a server draws it through here."""
    return [(fragment[0], drawn(fragment[1], newlines=newlines)) for fragment in fragments]


def drawn(text: str, newlines: bool = False) -> str:
    """Text from a server as the full screen draws it: :func:`printable`, then :func:`laid_out`."""
    return laid_out(printable(text, newlines=newlines))


_STAND_INS: dict[str, str] = {}
"""Each piece of text prompt_toolkit would measure wrong (:func:`laid_out`), and the character standing in for it."""
_DRAWN_AS: dict[str, str] = {}
"""Each stand-in, and the text the terminal is sent in its place."""
_PLANE = 0x100000
"""Where the stand-ins are: Unicode's last plane, private use; a server's own characters there are shown escaped."""


def laid_out(text: str) -> str:
    """``text`` (printable) with what prompt_toolkit would measure wrong replaced by one character of its own, as
    wide as the terminal draws it; the terminal is sent the text itself (:func:`translating`).

    prompt_toolkit gives every character a cell or two of its own, so a family of three emoji held six cells and a
    flag four, where the terminal draws them in two: everything after them on the line stood four or two cells
    right of where it showed, the frame's edge pushed out, the cursor astray. Only the joined emoji and the
    regional indicators are replaced, each by the same stand-in every time."""
    if text.isascii() or _SIZES is None:
        return text
    out: list[str] = []
    for unit in units(text):
        if unit[0] >= chr(_PLANE):
            out.append(f"\\U{ord(unit[0]):08x}{unit[1:]}")
        elif len(unit) > 1 or _regional(unit):
            size = cells(unit)
            out.append(_stand_in(unit, size) if size != sum(_SIZES[ch] for ch in unit) else unit)
        else:
            out.append(unit)
    return "".join(out)


def _stand_in(unit: str, size: int) -> str:
    known = _STAND_INS.get(unit)
    if known is not None:
        return known
    if len(_STAND_INS) >= 0xFFFD or _SIZES is None:  # the plane is full: drawn as prompt_toolkit measures it
        return unit
    stand_in = chr(_PLANE + len(_STAND_INS))
    _SIZES[stand_in] = size  # prompt_toolkit's cache of each character's width: the width the terminal gives it
    _DRAWN_AS[stand_in] = unit
    _STAND_INS[unit] = stand_in
    return stand_in


def translating(output: Output) -> Output:
    """``output`` sending the terminal each stand-in's own text (:func:`laid_out`): prompt_toolkit writes a screen
    character by character, a stand-in alone."""
    write = output.write

    def write_drawn(data: str) -> None:
        write(_DRAWN_AS.get(data, data))

    output.write = write_drawn  # type: ignore[method-assign]
    return output


def banner_line(text: Callable[[], str | StyleAndTextTuples]) -> Window:
    """The banner: who asks, on as many lines as it takes. A server's title is as long as the server likes (and
    Chinese takes two cells a character): on one line cut at the edge, it hid "asks", the server's own name and
    how many questions wait, the very things the banner is there to say."""

    def fragments() -> StyleAndTextTuples:
        shown = text()
        return escaped([("class:banner", f" {shown} ")] if isinstance(shown, str) else shown, newlines=False)

    return Window(
        _WrappedText(fragments, indent=1), style="class:banner", wrap_lines=True, dont_extend_height=True
    )  # broken as a person reads it (never just after an opening bracket), each line a cell in, as the first


def sized_button(text: str, handler: Callable[[], None]) -> Button:
    """A button as wide as its words in terminal cells (a Chinese character takes two), plus its brackets."""
    return Button(text, handler=handler, width=get_cwidth(text) + 4)


def who_asks(request: ElicitationRequest, lang: Language) -> StyleAndTextTuples:
    """The banner's words: who asks (the server's text, a fragment of its own) and elicitor's own words."""
    name = server_name(request.server)
    words = lang._("asks") if not name else lang._("asks (server name: {name})", name=name)
    return [("class:banner", " "), ("class:banner", asker(request.server, lang)), ("class:banner", f" {words} ")]


def identity_warning(server: Implementation | None, lang: Language) -> AnyContainer:
    """A warning under the banner when the name the server gives itself could pass for another's (nothing else)."""
    warned = "\n".join(warning_text(warning, lang) for warning in identity_warnings(server))
    return ConditionalContainer(text_lines(lambda: [("class:warning", warned)]), Condition(lambda: bool(warned)))


def help_bar(text: str) -> Window:
    """The keys, at the bottom: on as many lines as they take (in Chinese they fill 62 cells, and a line cut at the
    edge of a narrower terminal hid "Esc 取消", how to leave)."""
    return Window(
        _WrappedText([("class:help", f" {text} ")], indent=1, items=" · "), style="class:help", wrap_lines=True,
        dont_extend_height=True,
    )  # broken only between keys: "Esc 取消" stays on one line  # fmt: skip


class _WrappedText(FormattedTextControl):
    """Text laid out in lines of the window's width as a person reads them (:func:`break_lines`): prompt_toolkit's
    own wrapping cuts at the last cell that fits, so a Chinese comma or full stop began the next line and an
    English word was split in two."""

    _width = 0

    def __init__(self, text: Any = "", indent: int = 0, items: str | None = None) -> None:
        super().__init__(text)
        self._indent = indent
        self._items = items

    def create_content(self, width: int, height: int | None) -> UIContent:
        self._width = width
        return super().create_content(width, height)

    def preferred_width(self, max_available_width: int) -> int:
        """The widest line of the text as written, not as last wrapped: a form is as wide as its widest line, so
        measuring the wrapped text kept it at the width it had, and an error wider than everything else on the
        form (an email address's, in Chinese) broke at the width of the buttons in a terminal with room to spare."""
        text = fragment_list_to_text(super()._get_formatted_text_cached())
        return max(get_cwidth(line) for line in text.split("\n"))

    def _get_formatted_text_cached(self) -> StyleAndTextTuples:
        return wrapped(super()._get_formatted_text_cached(), self._width, self._indent, self._items)


def wrapped(fragments: StyleAndTextTuples, width: int, indent: int = 0, items: str | None = None) -> StyleAndTextTuples:
    """``fragments`` with a newline where each of their lines breaks to fit ``width`` cells, every character's style
    kept; the spaces a line breaks at are dropped (they would overflow the line or start the next one). With
    ``indent``, the lines a break starts begin with that many spaces (a banner's or the keys' bar, whose first line
    starts with one: the next ones stood a cell left of it). With ``items``, lines break only after that
    separator (:func:`break_items`)."""
    if width <= 2 + indent:
        return fragments
    width -= indent
    styled = [(fragment[0], ch) for fragment in fragments for ch in fragment[1]]
    text = "".join(ch for _, ch in styled)
    out: list[tuple[str, str]] = []
    start = 0
    for number, line in enumerate(text.split("\n")):
        if number:
            out.append((styled[start - 1][0], "\n"))
        cuts = set(break_items(line, width, items) if items else break_lines(line, width))
        for i, ch in enumerate(line):
            if i in cuts:
                while out and out[-1][1] == " ":
                    out.pop()
                out.append((styled[start + i][0], "\n"))
                out += [(styled[start + i][0], " ")] * indent
            out.append((styled[start + i][0], ch))
        start += len(line) + 1
    merged: StyleAndTextTuples = []
    for style, ch in out:
        if merged and merged[-1][0] == style and ch != "\n" and merged[-1][1][-1:] != "\n":
            merged[-1] = (style, merged[-1][1] + ch)
        else:
            merged.append((style, ch))
    return merged


def text_lines(get: Callable[[], StyleAndTextTuples]) -> Window:
    return Window(_WrappedText(lambda: escaped(get())), dont_extend_height=True, wrap_lines=True)


def error_line(error: FieldError, lang: Language, form: Form[Any] | None = None) -> str:
    """One error as "field: what is wrong" (the whole form's without a name), the field named by its title, as
    the person saw it, when ``form`` has it (the error names it by its key in the schema)."""
    text = error_text(error, lang)
    if not error.field:
        return text
    label = next((f.label for f in form.fields if f.name == error.field), error.field) if form else error.field
    return f"{label}{lang._(': ')}{text}"


def not_accepted(request: ElicitationRequest, lang: Language) -> str:
    listed = lang._("; ").join(error_line(e, lang, request.form) for e in request.errors)
    return spaced(lang._("Your previous answer was not accepted:")) + listed
