"""URL mode on the full screen: the consent screen (the URL with its host set apart, every warning, an Open
button never focused first) and the wait while the person works in the browser."""

from __future__ import annotations

from prompt_toolkit.application import Application
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.layout import (
    FormattedTextControl,
    HSplit,
    Layout,
    VSplit,
    Window,
)

from .._outcomes import Accepted, Cancelled, Declined
from ..i18n import Language
from ._handlers import ElicitationOutcome
from ._present import (
    asker,
    spaced,
    warning_text,
)
from ._screen import (
    Terminal,
    banner_line,
    escaped,
    exit_with,
    help_bar,
    identity_warning,
    key_bindings,
    sized_button,
    text_lines,
)
from ._url import UrlElicitationRequest


class UrlScreen:
    """The URL-mode consent screen; ``app.run()`` returns ``Accepted(None)`` only when the person chose Open."""

    def __init__(self, request: UrlElicitationRequest, terminal: Terminal) -> None:
        lang = terminal.lang
        t = lang._
        url, host, span = request.url, request.host, request.host_span
        shown = escaped(
            [("", url[: span[0]]), ("class:host", url[span[0] : span[1]]), ("", url[span[1] :])]
            if span
            else [("", url)],
            newlines=False,
        )
        details: StyleAndTextTuples = [
            ("class:label", spaced(t("Host:"))),
            ("class:host", host or t("(none)")),
            ("", "\n"),
        ]
        for warning in request.warnings:
            details += [("class:warning", warning_text(warning, lang)), ("", "\n")]
        details.append(("", t("Nothing has been opened or fetched.")))
        if not request.openable:
            details.append(("class:warning", "\n" + t("This is not a web address: it will not be opened from here.")))
        self.url_window = Window(FormattedTextControl(shown, focusable=True), dont_extend_height=True, wrap_lines=True)
        buttons = [sized_button(t("Decline"), lambda: self._done(Declined())),
                   sized_button(t("Cancel"), lambda: self._done(Cancelled()))]  # fmt: skip
        if request.openable:
            buttons.insert(0, sized_button(t("Open in browser"), lambda: self._done(Accepted(None))))
        actions = VSplit(buttons, padding=2)
        body = HSplit(
            [
                banner_line(
                    lambda: [
                        ("class:banner", " " + asker(request.server, lang)),
                        ("class:banner", " " + t("asks you to open a web page") + " "),
                    ]
                ),
                identity_warning(request.server, lang),
                text_lines(lambda: [("class:message", request.message)]),
                Window(height=1),
                text_lines(lambda: [("class:label", t("URL:"))]),
                self.url_window,
                Window(height=1),
                text_lines(lambda: details),
                Window(height=1),
                actions,
                Window(),
                help_bar(t("Tab to a button · Enter presses it · Esc cancel")),
            ]
        )
        self.app: Application[ElicitationOutcome] = terminal.application(
            Layout(body, focused_element=self.url_window), key_bindings(lambda event: self._done(Cancelled()))
        )

    def _done(self, outcome: ElicitationOutcome) -> None:
        exit_with(self.app, outcome)


class WaitScreen:
    """While the person works in the browser: ``app.run()`` returns when they say they are done (Enter or Esc)."""

    def __init__(self, request: UrlElicitationRequest, terminal: Terminal) -> None:
        lang = terminal.lang
        t = lang._
        button = sized_button(t("I'm done"), self._done)
        body = HSplit(
            [
                banner_line(
                    lambda: [
                        ("class:banner", " " + asker(request.server, lang)),
                        ("class:banner", " · " + t("finish in your browser") + " "),
                    ]
                ),
                text_lines(lambda: [("", _waiting_text(request, lang))]),
                text_lines(
                    lambda: [
                        ("class:hint", t("If no browser opened, open this yourself:")),
                        ("", " "),
                        ("class:hint", request.url),
                    ]
                ),
                Window(height=1),
                button,
                Window(),
                help_bar(t("Enter or Esc when you have finished")),
            ]
        )
        self.app: Application[None] = terminal.application(
            Layout(body, focused_element=button), key_bindings(lambda event: self._done())
        )

    def _done(self) -> None:
        exit_with(self.app, None)


def _waiting_text(request: UrlElicitationRequest, lang: Language) -> str:
    """What the wait is for: the server's completion notice (2025-11-25), or only the person (2026-07-28, which has
    no notice: "I'm done" retries the call and the server asks again if the step is not finished)."""
    if request.completion_notice:
        return lang._("Waiting for the server to see that you have finished.")
    return lang._(
        "When you have finished there, choose I'm done to retry now\n(the server asks again if it is not finished)."
    )
