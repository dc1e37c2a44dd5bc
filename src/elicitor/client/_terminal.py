"""The terminal handler: a full-screen form on a terminal (see ``_screen``), one question per line elsewhere.

The line-based mode asks one question per field, then shows a review step; it works over any dumb terminal or pipe.
A yes/no question (a form whose only field is a boolean, as ``ctx.confirm`` sends) is one prompt instead, with No
on Enter.

The person always sees which server asks, can decline or cancel at the first prompt and at the review, and
reviews every answer before it is sent (the spec's client MUSTs). Each field is checked as it is typed, with the
same validator the server uses; defaults are pre-filled (Enter keeps them).

URL mode (client/elicitation "Safe URL Handling"): the full URL is shown with its host set apart, with every
warning; nothing is fetched; the browser opens only after the person types an explicit yes.
"""

from __future__ import annotations

import sys
import threading
import webbrowser
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from .._outcomes import Accepted, Cancelled, Declined
from ..forms import BooleanField, EnumField, Form, FormField, MultiEnumField
from ..forms._fields import Problem
from ..i18n import Language, language
from ._handlers import ElicitationOutcome, ElicitationRequest, OneAtATime
from ._present import (
    FSI,
    LRI,
    PDI,
    asker,
    command_typed,
    error_text,
    hint,
    identity_warnings,
    isolated,
    parse_text,
    printable,
    queue_text,
    server_name,
    show,
    spaced,
    warning_text,
    yes_no,
)
from ._tty import colours_allowed, is_tty, read_stdin, wait_for_enter
from ._url import UrlElicitationRequest

T = TypeVar("T")

if TYPE_CHECKING:  # prompt_toolkit is imported only when a full screen is drawn (servers never pay for it)
    from prompt_toolkit.application import Application
    from prompt_toolkit.input import Input
    from prompt_toolkit.output import Output

    from ._screen import Terminal


class _Cancel(Exception):
    pass


class TerminalHandler:
    """Ask the person in the terminal.

    Args:
        read_line: reads one line after showing a prompt (default: prompt on stderr, read stdin); EOF means cancel.
        write: shows text (default: print to stderr, so a program's stdout stays clean).
        open_url: opens a URL the person agreed to open, returning whether it could (default: the system
            browser, :func:`webbrowser.open`). Never called without consent.
        url_mode: offer URL mode to servers (default ``True``).
        screen: ``True`` for the full-screen form (prompt_toolkit), ``False`` for one question per line. By default
            the full screen is used when stdin and stderr are both a terminal (``TERM`` not ``dumb``, its encoding
            UTF-8) and neither ``read_line`` nor ``write`` is given; pipes, dumb terminals and terminals in another
            encoding (GB18030, Big5) get lines.
        input: prompt_toolkit input for the full screen (default: this process's terminal); giving it selects the
            full screen. Tests pass a pipe input here.
        output: prompt_toolkit output for the full screen (default: drawn on stderr); giving it selects the full
            screen.
        lang: the language of elicitor's own words, numbers and dates (``"zh"``, ``"ar"``, a
            :class:`~elicitor.i18n.Language`); by default the environment's (``LANGUAGE``, ``LC_ALL``,
            ``LC_MESSAGES``, ``LANG``). What the server wrote is shown as sent.

    The line mode is the path for screen readers and braille displays: one sentence per line, nothing conveyed by
    colour, position or box drawing. It is what ``TERM=dumb`` gets; ``NO_COLOR`` turns colour off everywhere.
    """

    def __init__(
        self,
        read_line: Callable[[str], str] | None = None,
        write: Callable[[str], None] | None = None,
        *,
        open_url: Callable[[str], bool] | None = None,
        url_mode: bool = True,
        screen: bool | None = None,
        input: Input | None = None,
        output: Output | None = None,
        lang: str | Language | None = None,
    ) -> None:
        self.lang = language(lang)
        if screen is None:
            screen = input is not None or output is not None or (read_line is None and write is None and is_tty())
        self._screen: Terminal | None = None
        if screen:
            from ._screen import Terminal

            self._screen = Terminal(input, output, self.lang)
        self._turns = OneAtATime()
        reader = read_line or read_stdin
        self._read: Callable[[str], str] = reader  # prompts are composed of escaped parts (see _say)
        self._custom_reader = read_line is not None
        self._out = write or (lambda text: print(text, file=sys.stderr, flush=True))
        self._held: list[str] | None = None  # lines written while a full screen is up, shown when it closes
        self._held_lock = threading.Lock()  # lines may come from other threads (a server's stderr)
        self._open = open_url or webbrowser.open
        self._bold = write is None and sys.stderr.isatty() and colours_allowed()
        self.modes = frozenset({"form", "url"}) if url_mode else frozenset({"form"})

    async def url(self, request: UrlElicitationRequest) -> ElicitationOutcome:
        """Show a URL-mode request; open the URL only if the person says yes (accept means they consented)."""
        async with self._turns.turn():
            if self._screen is None:
                return await anyio.to_thread.run_sync(self._ask_url, request)
            from ._url_screens import UrlScreen

            outcome = await self._on_screen(UrlScreen(request, self._screen).app, Cancelled())
            if isinstance(outcome, Accepted):  # in a thread: some openers wait for the browser they start
                await anyio.to_thread.run_sync(self._open_consented, request.url, abandon_on_cancel=True)
            return outcome

    async def wait_done(self, request: UrlElicitationRequest) -> None:
        """Return when the person presses Enter to say they have finished in the browser.

        On 2025-11-25 the client races this against the server's completion notification and cancels the loser;
        on 2026-07-28 no notification exists (``request.completion_notice`` is false), so Enter is the only way on:
        it retries the call, and the server asks again if the step is not finished. The default reader polls, so a
        cancelled wait leaves no thread behind to swallow the next answer.
        """
        async with self._turns.turn():
            if self._screen is not None:
                from ._url_screens import WaitScreen

                await self._on_screen(WaitScreen(request, self._screen).app, None)
                return
            t = self.lang._
            self._say(
                t("Waiting for the server to see that you are done (or press Enter when you have finished).")
                if request.completion_notice
                else t(
                    "Press Enter when you have finished in the browser to retry now "
                    "(if that step is not finished yet, the server asks again)."
                )
            )
            if self._custom_reader:
                await anyio.to_thread.run_sync(self._read, "", abandon_on_cancel=True)
                return
            stop = threading.Event()
            try:
                await anyio.to_thread.run_sync(wait_for_enter, stop, abandon_on_cancel=True)
            finally:
                stop.set()

    def _ask_url(self, request: UrlElicitationRequest) -> ElicitationOutcome:
        w, say, t = self._write, self._say, self.lang._
        w("")
        say(t("── {server} asks you to open a web page ──", server=self._who(request)))
        self._warn_identity(request)
        w(request.message)
        w("")
        host, url, span = request.host, request.url, request.host_span
        # The two labels padded to one width in cells, so the URL and its host start in one column:
        # "URL:  " and "Host: " in English; in Chinese no space follows the full-width colons.
        from prompt_toolkit.utils import get_cwidth

        url_is, host_is, none = spaced(t("URL:")), spaced(t("Host:")), t("(none)")
        width = max(get_cwidth(url_is), get_cwidth(host_is))
        url_is, host_is = (label + " " * (width - get_cwidth(label)) for label in (url_is, host_is))
        if span is not None and self._bold:  # the host in bold: each part escaped first, then this styling only
            before, marked, after = (
                printable(part) for part in (url[: span[0]], url[span[0] : span[1]], url[span[1] :])
            )
            self._emit(f"  {url_is}{LRI}{before}\x1b[1;4m{marked}\x1b[0m{after}{PDI}")
        else:
            say(f"  {url_is}{LRI}{printable(url)}{PDI}")
        say(f"  {host_is}{LRI}{printable(host)}{PDI}" if host else f"  {host_is}{none}")
        for warning in request.warnings:
            say(f"  {warning_text(warning, self.lang)}")
        say("  " + t("Nothing has been opened or fetched."))
        if not request.openable:
            say("  " + t("This is not a web address: it will not be opened from here."))
        question = (
            t("Open it in your browser? y = open, n = decline, c = cancel: ")
            if request.openable
            else t("n = decline, c = cancel: ")
        )
        try:
            while True:
                choice = command_typed(self._line(question))
                if choice in ("y", "yes", "o", "open", t("yes")) and request.openable:
                    break
                if choice in ("n", "no", "d", "decline", t("no"), t("decline")):
                    return Declined()
                if choice in ("c", "cancel", t("cancel")):
                    raise _Cancel
        except (_Cancel, EOFError, KeyboardInterrupt):
            say(t("Cancelled."))
            return Cancelled()
        opened = self._open_consented(request.url)
        say(t("Opened in your browser.") if opened else t("Could not open a browser: copy the URL above into one."))
        return Accepted(None)

    def _write(self, text: str) -> None:
        """Show a line, escaped (:func:`printable`: a server's text cannot act on the terminal; line breaks stay);
        while a full screen is up, hold it until the screen closes (it would draw over it)."""
        self._emit(printable(text, newlines=True))

    def _say(self, text: str) -> None:
        """Show a line of elicitor's own words, in which any text from a server is already escaped and isolated
        (:func:`isolated`), so its direction cannot reorder the sentence around it."""
        self._emit(text)

    def _who(self, request: ElicitationRequest | UrlElicitationRequest) -> str:
        """Who asks, isolated for a sentence of elicitor's own."""
        return (
            isolated(asker(request.server, self.lang))
            if request.server is not None
            else self.lang._("an unnamed server")
        )

    def _warn_identity(self, request: ElicitationRequest | UrlElicitationRequest) -> None:
        for warning in identity_warnings(request.server):
            self._say(warning_text(warning, self.lang))

    def _emit(self, text: str) -> None:
        """Show ``text`` exactly as given: only escaped text and this handler's own styling come here."""
        with self._held_lock:
            if self._held is not None:
                self._held.append(text)
                return
        self._out(text)

    async def _on_screen(self, app: Application[T], on_cancel: T) -> T:
        """Run a screen with other output held back, then show what was held."""
        from ._screen import run_screen

        with self._held_lock:
            self._held = []
        try:
            return await run_screen(app, on_cancel)
        finally:
            with self._held_lock:
                held, self._held = self._held or [], None
            for line in held:
                self._out(line)

    def _open_consented(self, url: str) -> bool:
        try:
            return bool(self._open(url))
        except Exception:  # a broken opener must not lose the person's consent
            return False

    async def __call__(self, request: ElicitationRequest) -> ElicitationOutcome:
        async with self._turns.turn():  # a person answers one request at a time; the others wait their turn
            if self._screen is not None:
                from ._form_screens import FormScreen, YesNoScreen

                def waiting() -> int:
                    return self._turns.waiting

                screen = (
                    YesNoScreen(request, self._screen, waiting)
                    if yes_no(request.form) is not None
                    else FormScreen(request, self._screen, waiting)
                )
                return await self._on_screen(screen.app, Cancelled())
            return await anyio.to_thread.run_sync(self._ask, request)

    async def fill_in(self, message: str, form: Form[Any], *, banner: str) -> ElicitationOutcome:
        """Have the person fill a form no server sent (a tool's arguments, say): the same screen, review and
        choices as an elicitation, under ``banner`` instead of "<server> asks"; one question per line off a
        terminal."""
        async with self._turns.turn():
            if self._screen is not None:
                from ._form_screens import FormScreen

                screen = FormScreen(ElicitationRequest(message, form, None), self._screen, lambda: 0, banner)
                return await self._on_screen(screen.app, Cancelled())
            self._write(banner)
            values = form.with_defaults({})
            try:
                for f in form.fields:
                    await anyio.to_thread.run_sync(self._fill, f, values)
            except EOFError:
                return Cancelled()
            return Accepted({k: v for k, v in values.items() if v is not None})

    @property
    def waiting(self) -> int:
        """Requests queued behind the one being answered (shown to the person with each question)."""
        return self._turns.waiting

    def _ask(self, request: ElicitationRequest) -> ElicitationOutcome:
        try:
            return self._session(request)
        except (_Cancel, EOFError, KeyboardInterrupt):
            self._say(self.lang._("Cancelled."))
            return Cancelled()

    def _session(self, request: ElicitationRequest) -> ElicitationOutcome:
        w, say, t = self._write, self._say, self.lang._
        w("")
        name = server_name(request.server)
        if name:
            say(t("── {server} asks (server name: {name}) ──", server=self._who(request), name=isolated(name)))
        else:
            say(t("── {server} asks ──", server=self._who(request)))
        self._warn_identity(request)
        if self._turns.waiting:
            say(f"({queue_text(self._turns.waiting, self.lang)})")
        w(request.message)
        if request.errors:
            say(t("Your previous answer was not accepted:"))
            for error in request.errors:
                label = next((f.label for f in request.form.fields if f.name == error.field), error.field)
                text = error_text(error, self.lang)
                say(f"  • {isolated(label)}{t(': ')}{text}" if label else f"  • {text}")
        question = yes_no(request.form)
        if question is not None:
            return self._yes_no(question)
        choice = command_typed(self._line(t("Answer now? [Enter] yes, d = decline, c = cancel: ")))
        if choice in ("d", "decline", t("decline")):
            return Declined()
        if choice in ("c", "cancel", t("cancel")):
            raise _Cancel
        values: dict[str, Any] = request.form.with_defaults(request.previous or {})
        fields = request.form.fields
        for f in fields:
            self._fill(f, values)
        while True:
            w("")
            say(t("Review:"))
            for i, f in enumerate(fields, 1):
                shown = show(f, values.get(f.name), self.lang)
                say(f"  {self.lang.number(i)}. {isolated(f.label)}{t(': ')}{FSI}{shown}{PDI}")
            choice = command_typed(self._line(t("[Enter] submit, a number to edit, d = decline, c = cancel: ")))
            if choice == "":
                return Accepted({k: v for k, v in values.items() if v is not None})
            if choice in ("d", "decline", t("decline")):
                return Declined()
            if choice in ("c", "cancel", t("cancel")):
                raise _Cancel
            if choice.isdigit() and 1 <= int(choice) <= len(fields):
                self._fill(fields[int(choice) - 1], values)

    def _yes_no(self, f: BooleanField) -> ElicitationOutcome:
        """A yes/no question (:func:`yes_no`) answered at one prompt: the answer is the reply, so there is nothing
        to review. Enter means No, the answer that changes nothing."""
        t = self.lang._
        if f.description:
            self._write(f"  {f.description}")
        question = isolated(printable(f.label).rstrip("?") + "?")
        prompt = t("{question} y = yes, n or Enter = no, d = decline, c = cancel: ", question=question)
        while True:
            choice = command_typed(self._line(prompt))
            if choice in ("y", "yes", t("yes")):
                return Accepted({f.name: True})
            if choice in ("", "n", "no", t("no")):
                return Accepted({f.name: False})
            if choice in ("d", "decline", t("decline")):
                return Declined()
            if choice in ("c", "cancel", t("cancel")):
                raise _Cancel
            self._say("  " + t("Answer y or n (or d to decline, c to cancel)."))

    def _line(self, prompt: str) -> str:
        return self._read(prompt).strip()

    def _fill(self, f: FormField, values: dict[str, Any]) -> None:
        w, say, t = self._write, self._say, self.lang._
        w("")
        mark = t("(required)") if f.required else t("(optional)")
        say(spaced(isolated(f.label), mark) + mark)
        if f.description:
            w(f"  {f.description}")
        hint = _hint(f, self.lang)
        if hint:
            say(f"  {hint}")
        if isinstance(f, EnumField | MultiEnumField):
            for i, option in enumerate(f.options, 1):
                say(f"   {self.lang.number(i)}) {isolated(option.label)}")
        current = values.get(f.name)
        while True:
            shown = f" [{FSI}{show(f, current, self.lang)}{PDI}]" if current is not None else ""
            text = self._line(f"> {shown} ".replace(">  ", "> "))
            if text == "":
                if current is not None or not f.required:
                    return
                say("  " + t("This field is required."))
                continue
            if command_typed(text) == "-" and not f.required:
                values.pop(f.name, None)
                return
            try:
                values[f.name] = parse_text(f, text, self.lang)
                return
            except Problem as exc:
                say(f"  {self.lang.text(exc.message)}")


def _hint(f: FormField, lang: Language) -> str:
    parts = hint(f, lang)
    if isinstance(f, BooleanField):
        parts.append(lang._("y or n"))
    elif isinstance(f, EnumField):
        parts.append(lang._("type its number or its name"))
    elif isinstance(f, MultiEnumField):
        parts.insert(0, lang._("numbers or names separated by commas"))
    if not f.required:
        parts.append(lang._("'-' to leave empty"))
    return lang._("; ").join(parts)
