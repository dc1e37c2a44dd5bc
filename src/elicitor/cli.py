"""The ``elicitor`` command."""

from __future__ import annotations

import argparse
import io
import os
import sys
from contextlib import suppress
from typing import Any

import anyio

from ._connect import UI_CHOICES
from ._version import __version__
from .i18n import N_, NP_

_ARGPARSE_SAYS = frozenset(
    message.msgid
    for message in (
        N_("usage: "),
        N_("%(prog)s: error: %(message)s\n"),
        N_("argument %(argument_name)s: %(message)s"),
        N_("unrecognized arguments: %s"),
        N_("the following arguments are required: %s"),
        N_("one of the arguments %s is required"),
        N_("not allowed with argument %s"),
        N_("ignored explicit argument %r"),
        N_("expected one argument"),
        N_("expected at most one argument"),
        N_("expected at least one argument"),
        NP_("expected %s argument", "expected %s arguments", 2),
        N_("ambiguous option: %(option)s could match %(matches)s"),
        N_("invalid %(type)s value: %(value)r"),
        N_("invalid choice: %(value)r (choose from %(choices)s)"),
        N_("can't open '%(filename)s': %(error)s"),
        N_("positional arguments"),
        N_("options"),
        N_("show this help message and exit"),
    )
)
"""argparse's own words in a usage error or the help (it asks ``gettext`` for them, in its own domain): the
catalogs have them, so a person who mistypes an option reads why in their language, and ``--help`` is theirs."""


def _(msgid: str, /) -> str:
    """Marks a help text of the command line for the catalogs and returns it as it is: the parser (and the
    documentation's page made from it) keeps the English, and :class:`_Help` says it in the person's language
    when ``--help`` prints it."""
    return msgid


def _said(text: str) -> str:
    """A help text, or a heading of the help, in the person's language (``--lang``, else their environment's)."""
    from .i18n import language

    return language().catalog.gettext(text)


class _Help(argparse.HelpFormatter):
    """``--help`` in the person's language, wrapped by terminal cells: ``textwrap`` counts code points and breaks
    only at spaces, so a Chinese help text (two cells a character, no spaces) ran past the terminal's edge."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        return _said(text) if text else text

    def _format_text(self, text: str) -> str:
        return super()._format_text(_said(text))

    def start_section(self, heading: str | None) -> None:
        if heading:
            heading = _said(heading)
            self._headings = [*getattr(self, "_headings", []), heading]
        super().start_section(heading)

    def format_help(self) -> str:
        """The help, each heading followed by the colon of the person's language (argparse writes an ASCII one, which
        Chinese writes full-width)."""
        text = super().format_help()
        colon = _said(": ").rstrip()
        if colon == ":":
            return text
        headings = {f"{heading}:" for heading in getattr(self, "_headings", [])}
        return "\n".join(line[:-1] + colon if line in headings else line for line in text.split("\n"))

    def _format_usage(self, usage: Any, actions: Any, groups: Any, prefix: str | None) -> str:
        """The usage, its continuation lines lined up under the first by cells: argparse indents them by the
        length of "usage: " in code points, which in Chinese is three short of the six cells it takes."""
        from prompt_toolkit.utils import get_cwidth

        if prefix is None:
            prefix = argparse._("usage: ")  # type: ignore[attr-defined]
        extra = " " * (get_cwidth(prefix) - len(prefix))
        self._width -= len(extra)  # the lines, moved right, still fit
        try:
            text = super()._format_usage(usage, actions, groups, prefix)
        finally:
            self._width += len(extra)
        if not extra:
            return text
        first, *rest = text.split("\n")
        return "\n".join([first, *(extra + line if line.startswith(" ") else line for line in rest)])

    def _split_lines(self, text: str, width: int) -> list[str]:
        if text.isascii():
            return super()._split_lines(text, width)
        from .client._present import wrap

        return wrap(" ".join(text.split()), width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.isascii():
            return super()._fill_text(text, width, indent)
        from .client._present import wrap

        return "\n".join(indent + line for line in wrap(" ".join(text.split()), width - len(indent)))


_UI_HELP = _(
    "where to answer elicitations: terminal (full-screen forms; one question per line when the terminal cannot "
    "draw them), lines (always one question per line), browser (pages on 127.0.0.1)"
)

HTTP_TRANSPORTS = ("auto", "streamable-http", "sse")
"""``--transport`` of ``connect`` and ``proxy``: ``Client.http(transport=)``'s choices."""
_TRANSPORT_HELP = _(
    "for an http(s) URL: auto (default: Streamable HTTP, or the HTTP+SSE transport of 2024-11-05 when the server "
    "refuses the first POST as such a server does; a URL ending in /sse tries that one first), streamable-http "
    "only, or sse (the transport of 2024-11-05) only"
)


_FORWARDED_HELP = _(
    "over HTTP: believe the X-Forwarded-For and X-Forwarded-Proto headers of these balancers only (addresses or "
    "networks, comma-separated; * for any peer), so that traces name each client's own address; default: "
    "$FORWARDED_ALLOW_IPS, else nobody's"
)


_GRACE_HELP = _(
    "over HTTP: seconds the calls in flight get to finish after SIGTERM or Ctrl-C before they are ended (default "
    "30); give the orchestrator's grace period (Kubernetes' terminationGracePeriodSeconds) 15 s more"
)


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser: every command and option (the documentation's CLI page is generated from it)."""
    parser = argparse.ArgumentParser(
        prog="elicitor",
        description=_("MCP elicitation, end to end: servers that ask, clients that answer."),
        formatter_class=_Help,
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0, help=_("show the version and what changed in it, then exit")
    )
    parser.add_argument(
        "--lang",
        metavar="LANG",
        help=_(
            "the language of the forms and messages: en, zh or zh-CN (Simplified Chinese), zh-TW or zh-Hant "
            "(Traditional Chinese), or ar "
            "(default: from LANGUAGE, LC_ALL, LC_MESSAGES, LANG; each browser page follows the browser)"
        ),
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help=_("run the table-booking demo: a server that asks, you answer"),
        description=_(
            "Start the demo server (a table-booking desk whose tools ask you questions) and answer it here: "
            "a guided booking, connecting a calendar in your browser (URL mode), then its tools to try yourself."
        ),
    )
    demo.add_argument("--protocol", default="auto", help=_("auto (default), 2026-07-28, 2025-11-25 or 2025-06-18"))
    demo.add_argument("--ui", choices=UI_CHOICES, default="terminal", help=_UI_HELP)
    serve = commands.add_parser(
        "serve",
        help=_("serve a Server object: elicitor serve package.module:server"),
        description=_(
            "Serve an elicitor Server over Streamable HTTP (loopback by default) or stdio. "
            "Exit 2 when the target cannot be loaded or its configuration cannot work (say, --redis without "
            "ELICITOR_STATE_KEYS)."
        ),
    )
    serve.add_argument("target", help=_("module:attribute naming an elicitor Server (or a function returning one)"))
    serve.add_argument("--transport", choices=["http", "stdio"], default="http")
    serve.add_argument("--host", default="127.0.0.1", help=_("HTTP: the interface to bind (default loopback only)"))
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--path", default="/mcp", help=_("HTTP: the MCP endpoint's path"))
    serve.add_argument(
        "--redis",
        metavar="URL",
        help=_(
            "HTTP: share sessions and state with other replicas through this Redis (redis://host:port/db; "
            "default: $ELICITOR_REDIS_URL). Every replica needs the same ELICITOR_STATE_KEYS."
        ),
    )
    serve.add_argument(
        "--allowed-host", action="append", default=None, help=_("HTTP: a Host to accept besides loopback (repeatable)")
    )
    serve.add_argument(
        "--pages-url",
        metavar="URL",
        help=_(
            "where browsers reach the server's URL-mode pages (Server.serve_pages) when that is not where it "
            "listens, e.g. behind a proxy (default: the address it listens on; a loopback port on stdio)"
        ),
    )
    serve.add_argument(
        "--keep-alive",
        type=int,
        metavar="SECONDS",
        help=_(
            "HTTP: how long an idle connection stays open (default 5); behind a balancer, longer than it keeps idle "
            "connections to the replicas (deploy/nginx.conf: 4 s)"
        ),
    )
    serve.add_argument("--forwarded-allow-ips", metavar="IPS", help=_FORWARDED_HELP)
    serve.add_argument("--shutdown-grace", type=int, metavar="SECONDS", help=_GRACE_HELP)
    serve.add_argument(
        "--loop",
        choices=["auto", "uvloop", "asyncio"],
        default="auto",
        help=_("the event loop (default: uvloop if installed, with pip install 'elicitor[speed]')"),
    )
    serve.add_argument(
        "--http",
        choices=["auto", "httptools", "h11"],
        default="auto",
        help=_("HTTP: the request parser (default: httptools if installed, as it is with elicitor)"),
    )
    observe = serve.add_argument_group(
        _("telemetry (OpenTelemetry)"),
        _(
            "Traces and metrics (docs/observability.md). --telemetry native and --metrics need the SDK: "
            "pip install 'elicitor[otel]'."
        ),
    )
    observe.add_argument(
        "--telemetry",
        choices=["native", "propagation_only", "off"],
        help=_(
            "native: spans and metrics, exported over OTLP/HTTP as the OTEL_* variables say "
            "(OTEL_EXPORTER_OTLP_ENDPOINT, default http://localhost:4318); propagation_only: only carry trace context; "
            "off: nothing. Default: $ELICITOR_TELEMETRY_MODE, else native exporting only through an SDK already set up"
        ),
    )
    observe.add_argument(
        "--metrics",
        metavar="[HOST:]PORT",
        help=_("also serve the metrics for Prometheus at http://HOST:PORT/metrics (HOST default 127.0.0.1)"),
    )
    observe.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help=_("json: elicitor's log records on stderr as JSON lines carrying trace and span ids (default text)"),
    )
    protect = serve.add_argument_group(
        _("protection (HTTP)"),
        _(
            "Require OAuth access tokens (the spec's Authorization section): the endpoint answers 401 with its "
            "protected resource metadata, and each token's subject becomes the user of the call."
        ),
    )
    protect.add_argument("--auth-issuer", metavar="URL", help=_("the authorization server clients sign in with"))
    protect.add_argument(
        "--auth-jwks", metavar="URL", help=_("its JWT signing keys (default: jwks_uri from the issuer's metadata)")
    )
    protect.add_argument(
        "--auth-introspect",
        metavar="URL",
        help=_("check tokens by introspection (RFC 7662) at URL instead of as JWTs; needs --auth-client-id/-secret"),
    )
    protect.add_argument("--auth-client-id", metavar="ID", help=_("this server's client id, for introspection"))
    protect.add_argument("--auth-client-secret", metavar="SECRET", help=_("its secret, for introspection"))
    protect.add_argument(
        "--auth-audience",
        metavar="URL",
        help=_(
            "this server's resource URL as clients reach it, the audience tokens must name "
            "(default: http://HOST:PORT/PATH)"
        ),
    )
    protect.add_argument(
        "--auth-scope", metavar="SCOPE", action="append", help=_("a scope every request needs (repeatable)")
    )
    dev_auth = commands.add_parser(
        "dev-auth",
        help=_("a development OAuth authorization server on loopback (believes any name: never for real users)"),
        description=_(
            "Run an OAuth authorization server for development on 127.0.0.1: dynamic registration, PKCE, "
            "JWT access tokens for the resource asked. It asks for a name and believes it: for trying out a "
            "protected server (elicitor serve --auth-issuer ...), never for real users."
        ),
    )
    dev_auth.add_argument("--port", type=int, default=9000)
    dev_auth.add_argument(
        "--scope",
        action="append",
        default=None,
        help=_("a scope to offer (repeatable), e.g. the server's --auth-scope"),
    )
    check = commands.add_parser(
        "check",
        help=_("is a requestedSchema or form inside the spec's subset, and for which revisions?"),
        description=_(
            "Check a requestedSchema (a JSON file, or - for stdin) or a Python form type (module:attribute): "
            "exit 0 inside the subset, 1 outside it, 2 when the input cannot be read."
        ),
    )
    check.add_argument("target", help=_("schema.json, -, or module:attribute (a dataclass, TypedDict, model...)"))
    connect = commands.add_parser(
        "connect",
        help=_("an interactive client: list tools, call one, answer its questions"),
        description=_(
            "Connect to an MCP server (a command run over stdio, or a Streamable HTTP URL), call its tools "
            "and answer their elicitations here (full-screen terminal forms by default) or in your browser."
        ),
    )
    connect.add_argument("target", nargs=argparse.REMAINDER, help=_("a command and its arguments, or an http(s) URL"))
    connect.add_argument("--protocol", default="auto", help=_("auto (default), 2026-07-28, 2025-11-25 or 2025-06-18"))
    connect.add_argument("--ui", choices=UI_CHOICES, default="terminal", help=_UI_HELP)
    connect.add_argument("--transport", choices=HTTP_TRANSPORTS, default="auto", help=_TRANSPORT_HELP)
    connect.add_argument(
        "--timeout", type=float, default=30.0, help=_("seconds to wait for the MCP handshake (default 30)")
    )
    connect.add_argument(
        "--no-browser",
        action="store_true",
        help=_("when the server asks you to sign in, show the link without opening a browser"),
    )
    connect.add_argument(
        "--save",
        metavar="DIR",
        help=_(
            "where to write the images, audio and binary resources of results (default: a new private folder "
            "in the system's temporary folder, made when the first one arrives)"
        ),
    )
    logout = commands.add_parser(
        "logout",
        help=_("forget the sign-in kept for a server"),
        description=_(
            "Delete the tokens `elicitor connect` keeps for a server (in the platform's keyring with "
            "elicitor[keyring], else in $XDG_CONFIG_HOME/elicitor/tokens.json or ~/.config/elicitor/tokens.json)."
        ),
    )
    logout.add_argument("url", help=_("the server's http(s) URL, as given to elicitor connect"))
    proxy = commands.add_parser(
        "proxy",
        help=_("stand between any MCP client and any server: elicitation works whatever their protocol eras"),
        description=_(
            "Serve an MCP client on stdio (start this in place of the server), or over HTTP (--listen), and "
            "forward to UPSTREAM, a "
            "command run over stdio or an http(s) URL: everything passes through, the two protocol eras are bridged "
            "both ways, and elicitations the client cannot show are asked here (--ui)."
        ),
    )
    proxy.add_argument("target", nargs=argparse.REMAINDER, help=_("the upstream server: a command, or an http(s) URL"))
    proxy.add_argument(
        "--ui",
        choices=["browser", "terminal", "none"],
        help=_(
            "who answers elicitations the client did not declare: pages in your browser (the default, but with "
            "--listen), the controlling terminal, or nobody (capabilities forwarded as declared; the default with "
            "--listen, where this machine would answer for every client)"
        ),
    )
    proxy.add_argument(
        "--upstream-protocol",
        default="auto",
        help=(
            _(
                "the era spoken to the server: auto (default: chosen from what the server says; for a server of both "
                "eras, a 2026-07-28 client's tool call goes on the handshake era first and on 2026-07-28 when the tool "
                "asks in rounds or the server declares the tasks extension; see docs/proxy.md), or one revision to "
                "insist on: 2026-07-28, 2025-11-25 or 2025-06-18"
            )
        ),
    )
    proxy.add_argument("--transport", choices=HTTP_TRANSPORTS, default="auto", help=_TRANSPORT_HELP)
    proxy.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help=_("serve clients over Streamable HTTP at http://HOST:PORT/mcp instead of stdio (e.g. 127.0.0.1:8808)"),
    )
    proxy.add_argument("--forwarded-allow-ips", metavar="IPS", help=_FORWARDED_HELP)
    proxy.add_argument("--shutdown-grace", type=int, metavar="SECONDS", help=_GRACE_HELP)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                command.formatter_class = _Help
    return parser


def _write_what_the_terminal_cannot() -> None:
    """Standard output writes a character its encoding lacks as an escape (``\\U00020bb7``), as standard error
    does, instead of stopping the command: in a Big5 locale (``zh_TW.Big5``) a result holding 𠮷 or a Simplified
    character (简) ended ``connect`` with a UnicodeEncodeError. The protocol's own streams are bytes: untouched."""
    stdout = sys.stdout
    if isinstance(stdout, io.TextIOWrapper) and stdout.errors == "strict":
        stdout.reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    """The ``elicitor`` command: its exit status.

    A reader of standard output that stops early (``elicitor --version | head -1``, a result piped to a pager
    quit at once) is no error of the person's: the command ends with status 1 and nothing more, not a
    ``BrokenPipeError`` traceback, nor Python's "Exception ignored" when it flushes what is left at exit.
    """
    try:
        status = _main(argv)
        sys.stdout.flush()  # here, where a reader gone is caught, not at exit
        return status
    except BrokenPipeError:
        _stdout_to_nowhere()
        return 1


def _stdout_to_nowhere() -> None:
    """Point standard output at the null device, so what it still holds goes nowhere when Python exits."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # no file descriptor behind it (replaced, or closed)
        pass


def _main(argv: list[str] | None) -> int:
    _write_what_the_terminal_cannot()
    _speak_in_usage_errors(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.lang is not None:
        from .i18n import use

        try:
            use(args.lang)
        except ValueError:  # said in the environment's language, the one asked for being unknown
            from .i18n import available

            languages = t(", ").join(available())
            parser.error(
                t(
                    "--lang: elicitor has no catalog for {lang}; it speaks {languages}",
                    lang=repr(args.lang),
                    languages=languages,
                )
            )
    if args.command == "proxy":
        if not args.target:
            _command(parser, "proxy").error(
                t("give the upstream server: a command to run (e.g. python server.py) or an http(s) URL")
            )
        from .proxy._run import UI
        from .proxy._run import main as proxy_main

        # Behind --listen several people's clients may share the proxy: this machine's browser or terminal would
        # show each one's questions to whoever sits here, and answer them for that person. Asked for, it does.
        ui: UI = args.ui if args.ui is not None else "none" if args.listen is not None else "browser"
        if args.shutdown_grace is not None and args.shutdown_grace < 0:
            _command(parser, "proxy").error(t("--shutdown-grace must be a whole number of seconds, 0 or more"))
        return proxy_main(
            args.target, ui, args.upstream_protocol, args.listen, transport=args.transport,
            forwarded_allow_ips=args.forwarded_allow_ips,
            shutdown_grace=30 if args.shutdown_grace is None else args.shutdown_grace,
        )  # fmt: skip
    if args.command == "demo":
        from .demo import main as demo_main

        demo_main(["client", "--protocol", args.protocol, "--ui", args.ui])
        return 0
    if args.command == "serve":
        return _serve(args)
    if args.command == "dev-auth":
        from .devauth import main as dev_auth_main

        return dev_auth_main(args.port, args.scope)
    if args.command == "connect":
        if not args.target:
            _command(parser, "connect").error(t("give a command to run (e.g. python server.py) or an http(s) URL"))
        from ._connect import main as connect_main

        return connect_main(
            args.target, args.protocol, args.ui, args.timeout, browser=not args.no_browser, save=args.save,
            transport=args.transport,
        )  # fmt: skip
    if args.command == "logout":
        from .client.auth import default_token_store

        store = default_token_store()
        if anyio.run(store.delete, args.url):
            print(t("Signed out of {url} (its tokens are deleted from {store}).", url=args.url, store=repr(store)))
        else:
            print(t("No sign-in was kept for {url}.", url=args.url))
        return 0
    if args.command == "check":
        from ._check import main as check_main

        return check_main(args.target)
    parser.print_help(sys.stderr)
    return 2


def t(msgid: str, /, **args: Any) -> str:
    """One of the command's own sentences in the person's language (``--lang``, else their environment's); the
    catalogs are read only when there is something to say."""
    from .i18n import language

    return language()._(msgid, **args)


def t_of(said: object) -> str:
    """What the library said, in the person's language when it is a deferred sentence (a :class:`Message`, or an
    exception raised with one), else as it is: an exception's detail from elsewhere stays as written."""
    from .i18n import Message, language

    if isinstance(said, BaseException) and len(said.args) == 1:
        said = said.args[0]
    return language().text(said) if isinstance(said, Message) else str(said)


def _elicitors_own(exc: BaseException) -> bool:
    """Whether ``exc`` is one of elicitor's own refusals (raised with a deferred sentence: a malformed
    ``ELICITOR_STATE_KEYS`` met while the server's module made its Server), not a mistake in the module."""
    from .i18n import Message

    return len(exc.args) == 1 and isinstance(exc.args[0], Message)


def _speak_in_usage_errors(argv: list[str]) -> None:
    """Have argparse's usage errors said in the person's language: the one ``--lang`` names (read here, before
    the parsing that may fail), else their environment's. Only the sentences of :data:`_ARGPARSE_SAYS` are looked
    up, and only when argparse says one, so a command line without a mistake reads no catalog."""
    from .i18n import use

    for index, arg in enumerate(argv):
        if arg == "--":
            break
        spec = arg.partition("=")[2] if arg.startswith("--lang=") else None
        if arg == "--lang" and index + 1 < len(argv):
            spec = argv[index + 1]
        if spec is not None:
            with suppress(ValueError):  # said by main once parsed
                use(spec)
            break

    def gettext(message: str) -> str:
        from .i18n import language

        return language().catalog.gettext(message) if message in _ARGPARSE_SAYS else message

    def ngettext(singular: str, plural: str, n: int) -> str:
        from .i18n import language

        if singular in _ARGPARSE_SAYS:
            return language().catalog.ngettext(singular, plural, n)
        return singular if n == 1 else plural

    argparse._ = gettext  # type: ignore[attr-defined]
    argparse.ngettext = ngettext  # type: ignore[attr-defined]


def _command(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of one command, to report its usage errors with its own usage line."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[name]
            return found
    raise KeyError(name)


class _Version(argparse.Action):
    """``--version``: the version, then its changelog entry (shipped in the package), so a person can see what a
    new version changed without looking it up. The changelog is written in English only: in another language a
    line in the person's words says what follows and that it is English, rather than English text unannounced
    under a Chinese usage line."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        from ._version import changes
        from .i18n import language

        print(f"elicitor {__version__}")
        notes = changes(__version__)
        if notes:
            print()
            if language().tag != "en":
                print(
                    t("What changed in {version}, from the changelog (written in English only):", version=__version__)
                )
            print(notes)
        sys.stdout.flush()  # a reader gone is said in main(), not when Python flushes at exit
        parser.exit()


def _serve_says(text: str) -> None:
    """One line of ``elicitor serve`` to the person on standard error, after the command's name and the colon of
    their language, as argparse's own errors have it (in Chinese a full-width one, where an ASCII colon stood
    before a Chinese sentence)."""
    print("elicitor serve" + t(": ") + text, file=sys.stderr)


def _serve(args: argparse.Namespace) -> int:
    import importlib

    from .server import Server
    from .server._server import http_stack
    from .server.http import LOCAL_HOSTS
    from .state._config import REDIS_URL_ENV

    module_name, _, attribute = args.target.partition(":")
    sys.path.insert(0, ".")
    try:
        target = getattr(importlib.import_module(module_name), attribute or "server")
    except (ImportError, AttributeError) as exc:
        _serve_says(t("cannot load {target}: {reason}", target=repr(args.target), reason=exc))
        return 2
    except ValueError as exc:
        if not _elicitors_own(exc):
            raise  # a mistake in the module itself: its traceback says where
        _serve_says(t("cannot load {target}: {reason}", target=repr(args.target), reason=t_of(exc)))
        return 2
    server = target
    if not isinstance(server, Server) and callable(server):
        try:
            server = server()  # a factory returning the Server
        except Exception as exc:
            failed = t(
                "{target} is not an elicitor Server (calling it failed: {reason})", target=repr(args.target), reason=exc
            )
            _serve_says(failed)
            return 2
    if not isinstance(server, Server):
        _serve_says(t("{target} is not an elicitor Server", target=repr(args.target)))
        return 2
    if args.pages_url:
        if server.pages is None:
            _serve_says(t("--pages-url given, but {target} serves no pages", target=repr(args.target)))
            return 2
        server.serve_pages(server.pages, url=args.pages_url)
    if args.telemetry or args.metrics:
        from .telemetry._command import serve_telemetry

        try:
            serve_telemetry(args.telemetry, args.metrics, str(server.info["name"]))
        except ValueError as exc:
            _serve_says(t_of(exc))
            return 2
    if args.log_format == "json":
        from .telemetry._command import json_logs

        json_logs()
    try:
        http_stack(args.loop, args.http)  # a named one that is not installed: say so before anything starts
    except ValueError as exc:
        _serve_says(t_of(exc))
        return 2
    if args.transport == "stdio":
        server.run("stdio", loop=args.loop)
    else:
        hosts = [*LOCAL_HOSTS, *(args.allowed_host or [])]
        try:
            redis = args.redis or os.environ.get(REDIS_URL_ENV, "").strip()
            if redis:
                server.share(redis)
        except ValueError as exc:
            _serve_says(t_of(exc))
            return 2
        problem = server._misconfigured()
        if problem is not None:
            _serve_says(t("not starting: {reason}", reason=t_of(problem)))
            return 2
        options: dict[str, Any] = {"forwarded_allow_ips": args.forwarded_allow_ips}
        if args.keep_alive is not None:
            if args.keep_alive < 1:
                _serve_says(t("--keep-alive must be a whole number of seconds, 1 or more"))
                return 2
            options["keep_alive"] = args.keep_alive
        if args.shutdown_grace is not None:
            if args.shutdown_grace < 0:
                _serve_says(t("--shutdown-grace must be a whole number of seconds, 0 or more"))
                return 2
            options["shutdown_grace"] = args.shutdown_grace
        if args.auth_issuer or args.auth_introspect:
            try:
                options["auth"] = _protection(args)
            except ValueError as exc:
                _serve_says(str(exc))
                return 2
        server.run(
            "http", host=args.host, port=args.port, path=args.path, allowed_hosts=hosts,
            loop=args.loop, http=args.http, **options,
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())


def _protection(args: argparse.Namespace) -> object:
    """``Protection`` from ``elicitor serve``'s ``--auth-*`` options (``ValueError`` saying what is missing)."""
    from .server.http import IntrospectionVerifier, JwtVerifier, Protection

    host = f"[{args.host}]" if ":" in args.host else args.host
    resource = args.auth_audience or f"http://{host}:{args.port}{args.path}"
    scopes = list(args.auth_scope or [])
    verifier: IntrospectionVerifier | JwtVerifier
    if args.auth_introspect:
        if not (args.auth_client_id and args.auth_client_secret):
            raise ValueError(t("--auth-introspect needs --auth-client-id and --auth-client-secret"))
        verifier = IntrospectionVerifier(
            url=args.auth_introspect, client_id=args.auth_client_id, client_secret=args.auth_client_secret,
            audience=resource,
        )  # fmt: skip
        issuer = args.auth_issuer or args.auth_introspect
    else:
        issuer = args.auth_issuer
        verifier = JwtVerifier(issuer=issuer, audience=resource, jwks_url=args.auth_jwks or _jwks_of(issuer))
    return Protection(verifier, resource, [issuer], scopes_supported=scopes or None, required_scopes=scopes)


def _jwks_of(issuer: str) -> str:
    """The issuer's ``jwks_uri``, from its metadata (RFC 8414 §3, then OpenID discovery)."""
    from urllib.parse import urlsplit

    import httpx2 as httpx

    parts = urlsplit(issuer)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    for url in (
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ):
        try:
            document = httpx.get(url, timeout=10).json()
        except (httpx.HTTPError, ValueError):
            continue
        if (
            isinstance(document, dict)
            and document.get("issuer") == issuer
            and isinstance(document.get("jwks_uri"), str)
        ):
            return str(document["jwks_uri"])
    raise ValueError(
        t("cannot read the jwks_uri of {issuer} from its metadata: is it running? (or give --auth-jwks)", issuer=issuer)
    )
