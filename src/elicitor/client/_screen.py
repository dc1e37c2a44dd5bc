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
"""

from __future__ import annotations

import sys
import threading
from bisect import bisect_right
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from prompt_toolkit.application import Application
from prompt_toolkit.application.current import get_app
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.input import Input, create_input
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.key_binding.bindings.focus import focus_next, focus_previous
from prompt_toolkit.key_binding.key_processor import KeyPressEvent
from prompt_toolkit.layout import (
    AnyContainer,
    ConditionalContainer,
    FormattedTextControl,
    HSplit,
    Layout,
    ScrollablePane,
    VSplit,
    Window,
)
from prompt_toolkit.layout.processors import Processor, Transformation, TransformationInput
from prompt_toolkit.layout.utils import explode_text_fragments
from prompt_toolkit.output import ColorDepth, Output, create_output
from prompt_toolkit.styles import Style
from prompt_toolkit.utils import get_cwidth
from prompt_toolkit.widgets import Box, Button, Checkbox, CheckboxList, RadioList, TextArea

from .._exceptions import FieldError, InvalidAnswer
from .._outcomes import Accepted, Cancelled, Declined
from ..forms import BooleanField, EnumField, FormField, MultiEnumField, NumberField
from ..forms._fields import Problem
from ..i18n import ENGLISH, N_, Language
from ..types import Implementation
from ._handlers import ElicitationOutcome, ElicitationRequest
from ._present import (
    asker,
    error_text,
    hint,
    identity_warnings,
    parse_text,
    printable,
    queue_text,
    server_name,
    show,
    warning_text,
    yes_no,
)
from ._url import UrlElicitationRequest

T = TypeVar("T")

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
            output=self._output or create_output(stdout=sys.stderr),
        )


async def run_screen(app: Application[T], on_cancel: T) -> T:
    """Run ``app`` in a worker thread; if the caller is cancelled, make it exit and wait until it has."""
    stop = threading.Event()
    finished = threading.Event()

    def run() -> T:
        try:
            return app.run(pre_run=lambda: _exit(app, on_cancel) if stop.is_set() else None, handle_sigint=False)
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
            loop.call_soon_threadsafe(_exit, app, on_cancel)
        with anyio.CancelScope(shield=True):  # give the terminal back before anything else draws on it
            await anyio.to_thread.run_sync(finished.wait, 5.0)
        raise


def _exit(app: Application[T], result: T) -> None:
    """Exit with ``result`` unless the application already has one (a second press is ignored)."""
    future = app.future
    if app.is_running and future is not None and not future.done():
        app.exit(result=result)


def _bindings(on_escape: Callable[[KeyPressEvent], None]) -> KeyBindings:
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


def _escaped(fragments: StyleAndTextTuples, newlines: bool = True) -> StyleAndTextTuples:
    """``fragments`` with their text escaped (:func:`printable`). prompt_toolkit draws C0 and C1 controls as
    ``^[`` or ``<9b>`` but hands bidi controls and zero-width characters to the terminal as they are, where they
    reorder or hide what a person reads; every window that shows text from a server draws it through here."""
    return [(fragment[0], printable(fragment[1], newlines=newlines)) for fragment in fragments]


class _ShowEscaped(Processor):
    """Shows what a text field holds the way every other text is shown (:func:`printable`), for a value that came
    from the server (a default, or an earlier answer); what the field holds and sends is unchanged."""

    def apply_transformation(self, ti: TransformationInput) -> Transformation:
        chars = explode_text_fragments(ti.fragments)
        if all(printable(fragment[1]) == fragment[1] for fragment in chars):
            return Transformation(ti.fragments)
        shown: StyleAndTextTuples = []
        starts: list[int] = []  # where each source character starts on screen
        column = 0
        for fragment in chars:
            starts.append(column)
            text = printable(fragment[1])
            shown.append((fragment[0], text))
            column += len(text)
        starts.append(column)  # the cursor may stand after the last character

        def to_display(position: int) -> int:
            return starts[position] if position < len(starts) else column + position - len(chars)

        def to_source(position: int) -> int:
            return max(bisect_right(starts, position) - 1, 0)

        return Transformation(shown, source_to_display=to_display, display_to_source=to_source)


def _banner(text: Callable[[], str | StyleAndTextTuples]) -> Window:
    def fragments() -> StyleAndTextTuples:
        shown = text()
        return _escaped([("class:banner", f" {shown} ")] if isinstance(shown, str) else shown, newlines=False)

    return Window(FormattedTextControl(fragments), height=1, style="class:banner")


def _button(text: str, handler: Callable[[], None]) -> Button:
    """A button as wide as its words in terminal cells (a Chinese character takes two), plus its brackets."""
    return Button(text, handler=handler, width=get_cwidth(text) + 4)


def _asks(request: ElicitationRequest, lang: Language) -> StyleAndTextTuples:
    """The banner's words: who asks (the server's text, a fragment of its own) and elicitor's own words."""
    name = server_name(request.server)
    words = lang._("asks") if not name else lang._("asks (server name: {name})", name=name)
    return [("class:banner", " "), ("class:banner", asker(request.server, lang)), ("class:banner", f" {words} ")]


def _identity(server: Implementation | None, lang: Language) -> AnyContainer:
    """A warning under the banner when the name the server gives itself could pass for another's (nothing else)."""
    warned = "\n".join(warning_text(warning, lang) for warning in identity_warnings(server))
    return ConditionalContainer(_lines(lambda: [("class:warning", warned)]), Condition(lambda: bool(warned)))


def _help(text: str) -> Window:
    return Window(FormattedTextControl([("class:help", f" {text} ")]), height=1, style="class:help")


def _lines(get: Callable[[], StyleAndTextTuples]) -> Window:
    return Window(FormattedTextControl(lambda: _escaped(get())), dont_extend_height=True, wrap_lines=True)


def _error_line(error: FieldError, lang: Language) -> str:
    """One error as "field: what is wrong" (the whole form's without a name)."""
    text = error_text(error, lang)
    return f"{error.field}{lang._(': ')}{text}" if error.field else text


def _not_accepted(request: ElicitationRequest, lang: Language) -> str:
    listed = lang._("; ").join(_error_line(e, lang) for e in request.errors)
    return lang._("Your previous answer was not accepted:") + " " + listed


class _Row:
    """One field on screen: its widget, how to read its value, and what is wrong with it right now."""

    def __init__(self, f: FormField, value: Any, attempted: Callable[[], bool], lang: Language) -> None:
        self.field = f
        self.lang = lang
        self._attempted = attempted
        self.forced_error = ""  # an error from the form's validator, until the value changes
        self._forced_for: Any = None
        self.text: TextArea | None = None
        self.radio: RadioList[str | None] | None = None
        self.checks: CheckboxList[str] | None = None
        self.box: Checkbox | None = None
        widget: AnyContainer
        if isinstance(f, BooleanField):
            self.box = Checkbox(text=printable(f.label), checked=bool(value))
            widget = self.box
        elif isinstance(f, EnumField):
            choices: list[tuple[str | None, str]] = [(o.value, printable(o.label)) for o in f.options]
            if value not in f.values:  # an earlier answer that was not one of the choices: nothing chosen
                value = None
            if value is None or not f.required:  # an optional choice can always go back to no answer
                choices.insert(0, (None, lang._("(none)") if not f.required else lang._("(not chosen)")))
            self.radio = RadioList(choices, default=value, show_scrollbar=False)
            widget = self.radio
        elif isinstance(f, MultiEnumField):
            kept = [v for v in value if v in f.values] if isinstance(value, list | tuple) else []
            self.checks = CheckboxList([(o.value, printable(o.label)) for o in f.options], default_values=kept)
            self.checks.show_scrollbar = False
            widget = self.checks
        else:
            shown = "" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))
            self.text = TextArea(
                text=shown, multiline=False, height=1, style="class:input", prompt=[("class:hint", "› ")],
                accept_handler=_next, input_processors=[_ShowEscaped()],
            )  # fmt: skip
            self.text.buffer.cursor_position = len(shown)  # typing adds to a default; Ctrl-U clears it
            widget = self.text
        self.focus_target: Any = widget
        header: StyleAndTextTuples = [("class:label", printable(f.label))]
        if f.required:
            header.append(("class:required", " *"))
        parts: list[AnyContainer] = []
        if not isinstance(f, BooleanField):
            parts.append(Window(FormattedTextControl(header), height=1))
        if f.description:
            parts.append(_lines(lambda: [("class:hint", f.description or "")]))
        parts.append(widget)
        keys = {EnumField: [lang._("↑↓ then Space")], MultiEnumField: [lang._("↑↓ then Space to tick")]}.get(
            type(f), []
        )
        parts.append(_lines(self._status(" · ".join([*hint(f, lang), *keys]))))
        self.container = HSplit([*parts, Window(height=1)])

    def _status(self, words: str) -> Callable[[], StyleAndTextTuples]:
        def status() -> StyleAndTextTuples:
            error = self.error()
            if error:
                return [("class:error", f"✗ {error}")]
            return [("class:hint", words)] if words else []

        return status

    def raw(self) -> Any:
        """What the widget holds now (``None`` when nothing is chosen or typed)."""
        if self.box is not None:
            return self.box.checked
        if self.radio is not None:
            return self.radio.current_value
        if self.checks is not None:
            order = [o.value for o in self.field.options]  # type: ignore[union-attr]
            return sorted(self.checks.current_values, key=order.index)
        assert self.text is not None
        text = self.text.text
        return None if text.strip() == "" else text

    def value(self) -> Any:
        """The checked value, ``None`` when left empty; raises ``Problem`` when it cannot be sent."""
        raw = self.raw()
        if raw is None or (self.checks is not None and raw == [] and not self.field.required):
            if self.field.required:
                raise Problem(N_("this field is required"))
            return None
        if self.text is not None:
            return parse_text(self.field, raw.strip() if isinstance(self.field, NumberField) else raw, self.lang)
        return self.field.check(raw)

    def error(self) -> str:
        raw = self.raw()
        if self.forced_error and raw == self._forced_for:
            return self.forced_error
        if (raw is None or raw == []) and not self._attempted():
            return ""  # an empty field is pointed out when the person asks to review, not while they start
        try:
            self.value()
        except Problem as exc:
            return self.lang.text(exc.message)
        return ""

    def force(self, message: str) -> None:
        self.forced_error, self._forced_for = message, self.raw()


def _next(buffer: Any) -> bool:
    get_app().layout.focus_next()
    return True  # keep the text


class FormScreen:
    """The form and its review step for one request; ``app.run()`` returns the outcome."""

    def __init__(
        self,
        request: ElicitationRequest,
        terminal: Terminal,
        waiting: Callable[[], int],
        banner: str | None = None,
    ) -> None:
        self.request = request
        self.lang = lang = terminal.lang
        t = lang._
        self.reviewing = False
        self.attempted = False
        self.answer: dict[str, Any] = {}
        self.summary = ""
        form = request.form
        values = form.with_defaults(request.previous or {})
        self.rows = [_Row(f, values.get(f.name), lambda: self.attempted, lang) for f in form.fields]
        for error in request.errors:
            row = self._row(error.field)
            if row is not None:
                row.force(error_text(error, lang))

        def asks() -> str | StyleAndTextTuples:
            return banner if banner is not None else _asks(request, lang)

        def queue() -> StyleAndTextTuples:
            return [("class:waiting", queue_text(waiting(), lang))]

        top: list[AnyContainer] = [_lines(queue), _lines(lambda: [("class:message", request.message)])]
        if request.errors:
            top.append(_lines(lambda: [("class:error", _not_accepted(request, lang))]))
        top.append(Window(height=1))

        self.review_button = _button(t("Review"), self._review)
        actions = VSplit(
            [self.review_button, _button(t("Decline"), self._decline), _button(t("Cancel"), self._cancel)], padding=2
        )
        form_body = HSplit(
            [*top, *(r.container for r in self.rows), _lines(lambda: [("class:error", self.summary)]), actions]
        )
        self.submit_button = _button(t("Submit"), self._submit)
        review_actions = VSplit(
            [self.submit_button, _button(t("Edit"), self._edit), _button(t("Decline"), self._decline),
             _button(t("Cancel"), self._cancel)],
            padding=2,
        )  # fmt: skip
        review_body = HSplit(
            [_lines(lambda: [("class:message", t("Review your answer before it is sent"))]), Window(height=1),
             _lines(self._review_lines), Window(height=1), review_actions]
        )  # fmt: skip
        body = HSplit(
            [
                _banner(asks),
                _identity(request.server, lang),
                ConditionalContainer(
                    ScrollablePane(Box(form_body, padding=0, padding_left=1).__pt_container__()),
                    Condition(lambda: not self.reviewing),
                ),
                ConditionalContainer(
                    ScrollablePane(Box(review_body, padding=0, padding_left=1).__pt_container__()),
                    Condition(lambda: self.reviewing),
                ),
                _help(t("Tab / Shift-Tab move · Space ticks · Enter next or press · Esc cancel")),
            ]
        )
        first = self.rows[0].focus_target if self.rows else self.review_button
        self.app: Application[ElicitationOutcome] = terminal.application(
            Layout(body, focused_element=first), _bindings(lambda event: self._cancel())
        )

    def _row(self, name: str | None) -> _Row | None:
        return next((r for r in self.rows if r.field.name == name), None)

    def _review_lines(self) -> StyleAndTextTuples:
        """Each field and its answer, "label: answer", laid out by terminal cells (prompt_toolkit's wcwidth)."""
        colon = self.lang._(": ")
        out: StyleAndTextTuples = []
        for row in self.rows:
            f = row.field
            out += [("class:label", printable(f.label) + colon), ("", show(f, self.answer.get(f.name), self.lang))]
            out.append(("", "\n"))
        return out

    def _review(self) -> None:
        self.attempted = True
        values: dict[str, Any] = {}
        bad: list[_Row] = []
        for row in self.rows:
            try:
                value = row.value()
            except Problem:
                bad.append(row)
                continue
            if value is not None:
                values[row.field.name] = value
        if not bad:
            try:
                self.answer = self.request.form.validate(self.request.form.with_defaults(values))
            except InvalidAnswer as exc:
                for error in exc.errors:
                    found = self._row(error.field)
                    if found is not None:
                        found.force(error_text(error, self.lang))
                        bad.append(found)
                if not bad:
                    self.summary = self.lang._("; ").join(_error_line(e, self.lang) for e in exc.errors)
                    return
        if bad:
            self.summary = self.lang.n_("Please fix {n} field marked ✗.", "Please fix {n} fields marked ✗.", len(bad))
            self.app.layout.focus(bad[0].focus_target)
            return
        self.summary = ""
        self.reviewing = True
        self.app.layout.focus(self.submit_button)

    def _edit(self) -> None:
        self.reviewing = False
        self.app.layout.focus(self.rows[0].focus_target if self.rows else self.review_button)

    def _submit(self) -> None:
        _exit(self.app, Accepted(self.answer))

    def _decline(self) -> None:
        _exit(self.app, Declined())

    def _cancel(self) -> None:
        _exit(self.app, Cancelled())


class YesNoScreen:
    """A yes/no question (:func:`yes_no`, what ``ctx.confirm`` sends) on one screen; ``app.run()`` returns the outcome.

    The question, then Yes, No, Decline and Cancel. No has the focus, so Enter answers No (the answer that changes
    nothing); ``y`` and ``n`` answer at once, Esc cancels. The answer is the whole reply, so there is no review.
    """

    def __init__(self, request: ElicitationRequest, terminal: Terminal, waiting: Callable[[], int]) -> None:
        field = yes_no(request.form)
        assert field is not None, "a yes/no screen needs a form whose only field is a boolean"
        self.field = field
        lang = terminal.lang
        t = lang._

        question: StyleAndTextTuples = []
        if field.label != request.message:  # labelled with the message itself: it is on the screen already
            question = [("class:label", f"{printable(field.label).rstrip('?')}?")]
        if field.description:
            question += [("", "\n"), ("class:hint", printable(field.description, newlines=True))]
        self.no_button = _button(t("No"), lambda: self._answer(False))
        actions = VSplit(
            [_button(t("Yes"), lambda: self._answer(True)), self.no_button,
             _button(t("Decline"), lambda: self._done(Declined())),
             _button(t("Cancel"), lambda: self._done(Cancelled()))],
            padding=2,
        )  # fmt: skip
        parts: list[AnyContainer] = [
            _banner(lambda: _asks(request, lang)),
            _identity(request.server, lang),
            _lines(lambda: [("class:waiting", queue_text(waiting(), lang))]),
            _lines(lambda: [("class:message", request.message)]),
        ]
        if request.errors:
            parts.append(_lines(lambda: [("class:error", _not_accepted(request, lang))]))
        parts += [Window(height=1), _lines(lambda: question), Window(height=1), actions, Window()]
        parts.append(_help(t("y Yes · n or Enter No · Tab moves · Esc cancel")))
        bindings = _bindings(lambda event: self._done(Cancelled()))
        bindings.add("y")(lambda event: self._answer(True))
        bindings.add("n")(lambda event: self._answer(False))
        self.app: Application[ElicitationOutcome] = terminal.application(
            Layout(HSplit(parts), focused_element=self.no_button), bindings
        )

    def _answer(self, yes: bool) -> None:
        self._done(Accepted({self.field.name: yes}))

    def _done(self, outcome: ElicitationOutcome) -> None:
        _exit(self.app, outcome)


class UrlScreen:
    """The URL-mode consent screen; ``app.run()`` returns ``Accepted(None)`` only when the person chose Open."""

    def __init__(self, request: UrlElicitationRequest, terminal: Terminal) -> None:
        lang = terminal.lang
        t = lang._
        url, host, span = request.url, request.host, request.host_span
        shown = _escaped(
            [("", url[: span[0]]), ("class:host", url[span[0] : span[1]]), ("", url[span[1] :])]
            if span
            else [("", url)],
            newlines=False,
        )
        details: StyleAndTextTuples = [
            ("class:label", t("Host:") + " "),
            ("class:host", host or t("(none)")),
            ("", "\n"),
        ]
        for warning in request.warnings:
            details += [("class:warning", warning_text(warning, lang)), ("", "\n")]
        details.append(("", t("Nothing has been opened or fetched.")))
        if not request.openable:
            details.append(("class:warning", "\n" + t("This is not a web address: it will not be opened from here.")))
        self.url_window = Window(FormattedTextControl(shown, focusable=True), dont_extend_height=True, wrap_lines=True)
        buttons = [_button(t("Decline"), lambda: self._done(Declined())),
                   _button(t("Cancel"), lambda: self._done(Cancelled()))]  # fmt: skip
        if request.openable:
            buttons.insert(0, _button(t("Open in browser"), lambda: self._done(Accepted(None))))
        actions = VSplit(buttons, padding=2)
        body = HSplit(
            [
                _banner(
                    lambda: [
                        ("class:banner", " " + asker(request.server, lang)),
                        ("class:banner", " " + t("asks you to open a web page") + " "),
                    ]
                ),
                _identity(request.server, lang),
                _lines(lambda: [("class:message", request.message)]),
                Window(height=1),
                _lines(lambda: [("class:label", t("URL:"))]),
                self.url_window,
                Window(height=1),
                _lines(lambda: details),
                Window(height=1),
                actions,
                Window(),
                _help(t("Tab to a button · Enter presses it · Esc cancel")),
            ]
        )
        self.app: Application[ElicitationOutcome] = terminal.application(
            Layout(body, focused_element=self.url_window), _bindings(lambda event: self._done(Cancelled()))
        )

    def _done(self, outcome: ElicitationOutcome) -> None:
        _exit(self.app, outcome)


class WaitScreen:
    """While the person works in the browser: ``app.run()`` returns when they say they are done (Enter or Esc)."""

    def __init__(self, request: UrlElicitationRequest, terminal: Terminal) -> None:
        lang = terminal.lang
        t = lang._
        button = _button(t("I'm done"), self._done)
        body = HSplit(
            [
                _banner(
                    lambda: [
                        ("class:banner", " " + asker(request.server, lang)),
                        ("class:banner", " · " + t("finish in your browser") + " "),
                    ]
                ),
                _lines(lambda: [("", _waiting_text(request, lang))]),
                _lines(
                    lambda: [
                        ("class:hint", t("If no browser opened, open this yourself:")),
                        ("", " "),
                        ("class:hint", request.url),
                    ]
                ),
                Window(height=1),
                button,
                Window(),
                _help(t("Enter or Esc when you have finished")),
            ]
        )
        self.app: Application[None] = terminal.application(
            Layout(body, focused_element=button), _bindings(lambda event: self._done())
        )

    def _done(self) -> None:
        _exit(self.app, None)


def _waiting_text(request: UrlElicitationRequest, lang: Language) -> str:
    """What the wait is for: the server's completion notice (2025-11-25), or only the person (2026-07-28, which has
    no notice: "I'm done" retries the call and the server asks again if the step is not finished)."""
    if request.completion_notice:
        return lang._("Waiting for the server to see that you have finished.")
    return lang._(
        "When you have finished there, choose I'm done to retry now\n(the server asks again if it is not finished)."
    )
