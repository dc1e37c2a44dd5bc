"""The full-screen form (each field a row: its widget, its value, what is wrong with it now), its review step, and
the one-screen yes/no question; drawn from the pieces in ``_screen`` and run there."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.application.current import get_app
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.layout import (
    AnyContainer,
    ConditionalContainer,
    Dimension,
    FormattedTextControl,
    HSplit,
    Layout,
    ScrollablePane,
    VSplit,
    Window,
)
from prompt_toolkit.layout.processors import Processor, Transformation, TransformationInput
from prompt_toolkit.layout.utils import explode_text_fragments
from prompt_toolkit.widgets import Box, Checkbox, CheckboxList, RadioList, TextArea

from .._exceptions import InvalidAnswer
from .._outcomes import Accepted, Cancelled, Declined
from ..forms import BooleanField, EnumField, FormField, MultiEnumField, NumberField
from ..forms._fields import Problem
from ..i18n import N_, Language
from ._handlers import ElicitationOutcome, ElicitationRequest
from ._present import (
    error_text,
    hint,
    parse_text,
    printable,
    queue_text,
    show,
    shown_characters,
    units,
    yes_no,
)
from ._screen import (
    Terminal,
    banner_line,
    drawn,
    error_line,
    exit_with,
    help_bar,
    identity_warning,
    key_bindings,
    laid_out,
    not_accepted,
    sized_button,
    text_lines,
    who_asks,
)


class _ShowEscaped(Processor):
    """Shows what a text field holds the way every other text is shown (:func:`printable`, :func:`laid_out`), for
    a value that came from the server (a default, or an earlier answer) or an emoji typed in; what the field holds
    and sends is unchanged."""

    def apply_transformation(self, ti: TransformationInput) -> Transformation:
        chars = explode_text_fragments(ti.fragments)
        text = "".join(fragment[1] for fragment in chars)
        if drawn(text) == text:
            return Transformation(ti.fragments)
        each = shown_characters(text)
        shown: StyleAndTextTuples = []
        starts: list[int] = []  # where each source character starts on screen
        column = 0
        for unit in units(text):
            first = len(starts)
            pieces = each[first : first + len(unit)]
            whole = laid_out(unit) if "".join(pieces) == unit else None
            if whole is not None and whole != unit:  # one stand-in for the whole unit: the cursor goes round it
                starts += [column] * len(unit)
                shown.append((chars[first][0], whole))
                column += len(whole)
                continue
            for offset, piece in enumerate(pieces):
                starts.append(column)
                shown.append((chars[first + offset][0], piece))
                column += len(piece)
        starts.append(column)  # the cursor may stand after the last character

        def to_display(position: int) -> int:
            return starts[position] if position < len(starts) else column + position - len(chars)

        def to_source(position: int) -> int:
            return max(bisect_right(starts, position) - 1, 0)

        return Transformation(shown, source_to_display=to_display, display_to_source=to_source)


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
            self.box = Checkbox(text=drawn(f.label), checked=bool(value))
            self.box.show_scrollbar = False  # a box of one line has nothing to scroll: its "^" stood at the edge
            widget = self.box
        elif isinstance(f, EnumField):
            choices: list[tuple[str | None, str]] = [(o.value, drawn(o.label)) for o in f.options]
            if value not in f.values:  # an earlier answer that was not one of the choices: nothing chosen
                value = None
            if value is None or not f.required:  # an optional choice can always go back to no answer
                choices.insert(0, (None, lang._("(none)") if not f.required else lang._("(not chosen)")))
            self.radio = RadioList(choices, default=value, show_scrollbar=False)
            widget = self.radio
        elif isinstance(f, MultiEnumField):
            kept = [v for v in value if v in f.values] if isinstance(value, list | tuple) else []
            self.checks = CheckboxList([(o.value, drawn(o.label)) for o in f.options], default_values=kept)
            self.checks.show_scrollbar = False
            widget = self.checks
        else:
            shown = "" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))
            # One line of input that grows by whole lines as it wraps (by cells): at one row high, an answer
            # longer than the terminal showed only its last line, so a sentence typed in Chinese (two cells a
            # character) lost its start, the prompt mark too, after thirty characters.
            self.text = TextArea(
                text=shown, multiline=False, dont_extend_height=True, style="class:input",
                prompt=[("class:hint", "› ")], accept_handler=_next, input_processors=[_ShowEscaped()],
            )  # fmt: skip
            self.text.window.height = Dimension(min=1)  # TextArea makes a single-line input exactly one row high
            self.text.buffer.cursor_position = len(shown)  # typing adds to a default; Ctrl-U clears it
            widget = self.text
        self.focus_target: Any = widget
        header: StyleAndTextTuples = [("class:label", drawn(f.label))]
        if f.required:
            header.append(("class:required", " *"))
        parts: list[AnyContainer] = []
        if not isinstance(f, BooleanField):
            parts.append(Window(FormattedTextControl(header), height=1))
        if f.description:
            parts.append(text_lines(lambda: [("class:hint", f.description or "")]))
        parts.append(widget)
        keys = {EnumField: [lang._("↑↓ then Space")], MultiEnumField: [lang._("↑↓ then Space to tick")]}.get(
            type(f), []
        )
        parts.append(text_lines(self._status(" · ".join([*hint(f, lang), *keys]))))
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
            return banner if banner is not None else who_asks(request, lang)

        def queue() -> StyleAndTextTuples:
            return [("class:waiting", queue_text(waiting(), lang))]

        top: list[AnyContainer] = [text_lines(queue), text_lines(lambda: [("class:message", request.message)])]
        if request.errors:
            top.append(text_lines(lambda: [("class:error", not_accepted(request, lang))]))
        top.append(Window(height=1))

        self.review_button = sized_button(t("Review"), self._review)
        actions = VSplit(
            [self.review_button, sized_button(t("Decline"), self._decline), sized_button(t("Cancel"), self._cancel)],
            padding=2,
        )
        form_body = HSplit(
            [*top, *(r.container for r in self.rows), text_lines(lambda: [("class:error", self.summary)]), actions]
        )
        self.submit_button = sized_button(t("Submit"), self._submit)
        review_actions = VSplit(
            [self.submit_button, sized_button(t("Edit"), self._edit), sized_button(t("Decline"), self._decline),
             sized_button(t("Cancel"), self._cancel)],
            padding=2,
        )  # fmt: skip
        review_body = HSplit(
            [text_lines(lambda: [("class:message", t("Review your answer before it is sent"))]), Window(height=1),
             text_lines(self._review_lines), Window(height=1), review_actions]
        )  # fmt: skip
        body = HSplit(
            [
                banner_line(asks),
                identity_warning(request.server, lang),
                ConditionalContainer(
                    ScrollablePane(Box(form_body, padding=0, padding_left=1).__pt_container__()),
                    Condition(lambda: not self.reviewing),
                ),
                ConditionalContainer(
                    ScrollablePane(Box(review_body, padding=0, padding_left=1).__pt_container__()),
                    Condition(lambda: self.reviewing),
                ),
                help_bar(t("Tab / Shift-Tab move · Space ticks · Enter next or press · Esc cancel")),
            ]
        )
        first = self.rows[0].focus_target if self.rows else self.review_button
        self.app: Application[ElicitationOutcome] = terminal.application(
            Layout(body, focused_element=first), key_bindings(lambda event: self._cancel())
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
                    self.summary = self.lang._("; ").join(
                        error_line(e, self.lang, self.request.form) for e in exc.errors
                    )
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
        exit_with(self.app, Accepted(self.answer))

    def _decline(self) -> None:
        exit_with(self.app, Declined())

    def _cancel(self) -> None:
        exit_with(self.app, Cancelled())


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
        self.no_button = sized_button(t("No"), lambda: self._answer(False))
        actions = VSplit(
            [sized_button(t("Yes"), lambda: self._answer(True)), self.no_button,
             sized_button(t("Decline"), lambda: self._done(Declined())),
             sized_button(t("Cancel"), lambda: self._done(Cancelled()))],
            padding=2,
        )  # fmt: skip
        parts: list[AnyContainer] = [
            banner_line(lambda: who_asks(request, lang)),
            identity_warning(request.server, lang),
            text_lines(lambda: [("class:waiting", queue_text(waiting(), lang))]),
            text_lines(lambda: [("class:message", request.message)]),
        ]
        if request.errors:
            parts.append(text_lines(lambda: [("class:error", not_accepted(request, lang))]))
        parts += [Window(height=1), text_lines(lambda: question), Window(height=1), actions, Window()]
        parts.append(help_bar(t("y Yes · n or Enter No · Tab moves · Esc cancel")))
        bindings = key_bindings(lambda event: self._done(Cancelled()))
        for yes, no in (("y", "n"), ("Y", "N"), ("\uff59", "\uff4e"), ("\uff39", "\uff2e")):  # fullwidth too (an IME)
            bindings.add(yes)(lambda event: self._answer(True))
            bindings.add(no)(lambda event: self._answer(False))
        self.app: Application[ElicitationOutcome] = terminal.application(
            Layout(HSplit(parts), focused_element=self.no_button), bindings
        )

    def _answer(self, yes: bool) -> None:
        self._done(Accepted({self.field.name: yes}))

    def _done(self, outcome: ElicitationOutcome) -> None:
        exit_with(self.app, outcome)
