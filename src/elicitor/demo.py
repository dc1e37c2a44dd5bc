"""The demo: a table-booking desk whose tools ask the person for input, and a terminal client.

``book_table`` asks for the booking details with a form, then for a confirmation. ``add_to_calendar`` needs the
person's calendar connected first: something that must not pass through the client, so it uses URL mode. The
server serves a small "calendar provider" on loopback; the person signs in there and allows access in their
browser, and the server tells the client the interaction is complete.

``elicitor demo`` (what ``make demo`` runs) starts the server as a child process over stdio and answers its
questions in this terminal. ``python -m elicitor.demo server`` runs only the server.
"""

from __future__ import annotations

import argparse
import getpass
import hashlib
import hmac
import html
import os
import secrets
import sys
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any
from urllib.parse import parse_qs

import anyio

from ._connect import UI_CHOICES, Console, Progress, answering, menu_line, server_stderr, tool_menu
from ._exceptions import JSONRPCError, TooManyRounds
from ._loop import run_on
from ._net import loopback_socket
from ._outcomes import Accepted, Cancelled, Declined
from .client import Client
from .client._present import printable
from .forms import Choices, Email, Field, Uri
from .i18n import language
from .server import Context, Server, UrlElicitationRequired
from .transports import StdioServerTransport

LANG_ENV = "ELICITOR_DEMO_LANG"
"""The language the demo's server speaks: the client's (``--lang`` or its environment's), handed to the child."""
speaks = language(os.environ.get(LANG_ENV) or None)
"""The demo desk is elicitor's own server, so it asks in the person's language; any other server says what it
says. Its words are chosen when the module is imported, as a server of its own would write them."""
_ = speaks._
t = speaks.catalog.gettext  # a sentence whose {names} a page fills in itself (in bold)

server = Server("booking-desk", "1.0.0", title=_("Chez Elicitor booking desk"))


class Seating(Choices):
    INDOOR = "indoor", _("Indoor dining room")
    PATIO = "patio", _("Heated patio")
    BAR = "bar", _("At the bar")


class Diet(Choices):
    VEGETARIAN = "vegetarian", _("vegetarian")
    VEGAN = "vegan", _("vegan")
    GLUTEN_FREE = "gluten-free", _("gluten-free")
    NUT_ALLERGY = "nut allergy", _("nut allergy")


@dataclass
class Booking:
    party: Annotated[
        int, Field(title=_("Party size"), description=_("How many people, you included"), minimum=1, maximum=12)
    ]
    day: Annotated[date, Field(title=_("Date"))]
    seating: Annotated[Seating, Field(title=_("Seating"))]
    email: Annotated[Email, Field(title=_("Contact email"), description=_("Where the confirmation goes"))]
    diet: Annotated[list[Diet], Field(title=_("Dietary needs"), max_items=4)]
    notes: Annotated[str | None, Field(title=_("Notes for the kitchen"), max_length=200)] = None


def _day(day: date) -> str:
    """A day in words, its weekday too (English as it always read: Thursday 24 December 2026)."""
    if speaks.tag == "en":
        return f"{day:%A %d %B %Y}"
    from babel.dates import format_date

    return format_date(day, format="full", locale=speaks.locale)


@server.tool(description=_("Book a table: asks the person for the details, then for a final confirmation."))
async def book_table(ctx: Context, restaurant: str = "Chez Elicitor") -> str:
    """Book a table: asks the person for the details, then for a final confirmation."""
    match await ctx.elicit(_("Let's book your table at {restaurant}.", restaurant=restaurant), Booking):
        case Accepted(data=booking):
            pass
        case Declined():
            return _("No booking made: you declined.")
        case Cancelled():
            return _("No booking made: cancelled.")
    choices = [c.title or c.value for c in (booking.seating, *booking.diet)]
    summary = _("{party} at {restaurant} on {day}, {choices}", party=booking.party, restaurant=restaurant,
                day=_day(booking.day), choices=_(", ").join(choices))  # fmt: skip
    if not await ctx.confirm(_("Confirm the booking: {summary}?", summary=summary)):
        return _("No booking made: not confirmed.")
    code = await ctx.once("reservation", lambda: secrets.token_hex(3).upper())
    return _("Booked: {summary}. Reservation {code}; confirmation sent to {email}.", summary=summary, code=code,
             email=booking.email)  # fmt: skip


class Main(Choices):
    HAKE = "hake", _("Line-caught hake with sea herbs")
    DUCK = "duck", _("Roast duck with cherries")
    RISOTTO = "risotto", _("Wild mushroom risotto")


@server.tool(
    task="optional",
    description=_("Plan a tasting menu: a few seconds of work shown as progress, a question half-way, then more work."),
)
async def plan_tasting_menu(ctx: Context, guests: int = 2) -> str:
    """Plan a tasting menu: a few seconds of work shown as progress, a question half-way, then more work.

    It runs as a task when the client can take one (a long call the client follows, answering its question while
    it runs); otherwise as an ordinary call. The code is the same.
    """
    for step in (_("Checking this morning's market..."), _("Pairing the wines...")):
        await ctx.report_progress(0, 4, step)
        await anyio.sleep(1)
    choice = await ctx.elicit(
        _("The market is out of turbot. Which main course instead?"), Annotated[Main, Field(title=_("Main course"))]
    )
    if not isinstance(choice, Accepted):
        return _("No menu planned: no main course chosen.")
    for step in (_("Writing the menu..."), _("Telling the kitchen...")):
        await ctx.report_progress(3, 4, step)
        await anyio.sleep(1)
    main = choice.data.title.lower()
    return _("Tasting menu for {guests}: seasonal starters, {main}, chocolate soufflé.", guests=guests, main=main)


class Contact(Choices):
    EMAIL = "email", _("By email")
    PHONE = "phone", _("By phone")
    NEVER = "never", _("Please don't")


class Course(Choices):
    STARTERS = "starters", _("starters")
    MAINS = "mains", _("mains")
    DESSERTS = "desserts", _("desserts")
    WINE = "wine", _("wine")


@dataclass
class Profile:
    name: Annotated[str, Field(title=_("Display name"), min_length=2, max_length=40)]
    favourites: Annotated[list[Course], Field(title=_("Favourite courses"), min_items=1, max_items=3)]
    contact: Annotated[Contact, Field(title=_("How may we contact you?"))] = Contact.EMAIL
    spice: Annotated[
        float, Field(title=_("Spice tolerance"), description=_("0 is mild, 10 is fiery"), minimum=0, maximum=10)
    ] = 5.0
    newsletter: Annotated[bool, Field(title=_("Send me the monthly menu"))] = False
    birthday: Annotated[date | None, Field(title=_("Birthday"), description=_("For a dessert on the house"))] = None
    website: Annotated[Uri | None, Field(title=_("Your website"))] = None


@server.tool(
    description=_("Update your guest profile: a form with every kind of field (text, numbers, choices, dates, yes/no).")
)
async def update_profile(ctx: Context) -> str:
    """Update your guest profile: a form with every kind of field (text, numbers, choices, dates, yes/no)."""
    outcome = await ctx.elicit(_("Tell the restaurant about yourself (everything is optional but your name)."), Profile)
    if not isinstance(outcome, Accepted):
        return _("Profile unchanged: you declined.") if outcome.action == "decline" else _("Profile unchanged.")
    p = outcome.data
    said = {
        "name": p.name,
        "likes": _(", ").join(c.title or c.value for c in p.favourites),
        "spice": f"{p.spice:g}",
        "contact": (p.contact.title or p.contact.value).lower(),
    }
    if p.newsletter:
        return _("Profile saved for {name}: likes {likes}, spice {spice}/10, contact: {contact}, monthly menu.", **said)
    return _("Profile saved for {name}: likes {likes}, spice {spice}/10, contact: {contact}.", **said)


# ---- URL mode: connecting a calendar -----------------------------------------------------------------------------


class CalendarPages:
    """The pages the person opens in their browser: sign in, then allow the booking desk into the calendar.

    Who may complete an elicitation: its id in the link is an unguessable, single-use token that expires with the
    server's registry; and the person signed in here must be the user the elicitation was created for
    (``complete_url_elicitation(..., principal=...)`` refuses anyone else). The sign-in cookie is signed with a
    key that lives only in this process, ``HttpOnly`` and ``SameSite=Strict`` (no cross-site form posts).
    """

    def __init__(self) -> None:
        self.base = ""
        self._key = secrets.token_bytes(32)

    def link(self) -> str:
        return f"{self.base}/connect/{{elicitation_id}}"

    def _cookie(self, user: str) -> str:
        tag = hmac.new(self._key, user.encode(), hashlib.sha256).hexdigest()
        return f"{user}.{tag}"

    def _user(self, headers: dict[bytes, bytes]) -> str | None:
        for part in headers.get(b"cookie", b"").decode("latin-1").split(";"):
            name, _, value = part.strip().partition("=")
            if name == "calendar_user":
                user = value.rpartition(".")[0]
                if user and hmac.compare_digest(self._cookie(user), value):
                    return user
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return None
        headers = dict(scope["headers"])
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body") or len(body) > 4096:
                break
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        path, method = scope["path"], scope["method"]
        parts = path.strip("/").split("/")
        if len(parts) != 2 or parts[0] != "connect":
            return await _page(send, 404, _("Not found"), _p(_("There is nothing here.")))
        elicitation_id = parts[1]
        elicitation = await server.url_elicitations.get(elicitation_id)
        if elicitation is None or elicitation.completed:
            return await _page(send, 410, _("Link expired"), _p(_("This link has expired or was used already.")))
        user = self._user(headers)
        if method == "POST" and form.get("signin"):
            name = form["signin"].strip()[:64].replace(".", "_") or "guest"
            cookie = f"calendar_user={self._cookie(name)}; Path=/; HttpOnly; SameSite=Strict"
            return await _redirect(send, path, cookie)
        if user is None:
            guess = html.escape(getpass.getuser())
            name, sign_in = _h(_("User name")), _h(_("Sign in"))
            someone = _h(_("Signing in as someone else shows the server refusing to complete the link."))
            return await _page(send, 200, _("Example Calendar: sign in"), (
                _p(_("Sign in to Example Calendar."))
                + f'<form method="post"><label>{name} <input name="signin" value="{guess}" autofocus></label>'
                f" <button>{sign_in}</button></form><p><small>{someone}</small></p>"
            ))  # fmt: skip
        if method == "POST" and form.get("decision") == "allow":
            if await server.complete_url_elicitation(elicitation_id, principal=user):
                return await _page(send, 200, _("Calendar connected"), (
                    _p(t("Booking desk can now add events to {user}'s calendar."), user=user)
                    + _p(_("You can close this tab and return to your terminal."))
                ))  # fmt: skip
            return await _page(send, 403, _("Not allowed"), (
                _p(t("This link was not created for {user}. Nothing was connected."), user=user)
            ))  # fmt: skip
        if method == "POST":
            return await _page(send, 200, _("Not connected"), _p(_("Nothing was connected. Return to your terminal.")))
        title = str(server.info.get("title") or "")
        allow, deny = _h(_("Allow")), _h(_("Deny"))
        return await _page(send, 200, _("Example Calendar: allow access?"), (
            _p(t("Signed in as {user}."), user=user)
            + _p(t("{desk} asks: {said}"), elicitation.message, desk=title)
            + f'<form method="post"><button name="decision" value="allow">{allow}</button> '
            f'<button name="decision" value="deny">{deny}</button></form>'
        ))  # fmt: skip


def _h(text: str) -> str:
    return html.escape(text, quote=True)


def _p(sentence: str, said: str = "", **names: str) -> str:
    """A paragraph: ``sentence`` escaped, each ``{name}`` in it a name in bold and ``{said}`` as it is (escaped)."""
    parts = {key: f"<b>{_h(value)}</b>" for key, value in names.items()}
    return "<p>" + _h(sentence).format(said=_h(said), **parts) + "</p>"


async def _page(send: Any, status: int, title: str, body: str) -> None:
    text = (
        f"<!doctype html><html lang={speaks.tag} dir={speaks.direction}><meta charset=utf-8><title>{_h(title)}</title>"
        f"<body style='font-family:sans-serif;max-width:36em;margin:3em auto'><h1>{_h(title)}</h1>{body}</body>"
    ).encode()
    headers = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(text)).encode())]
    headers.append((b"content-security-policy", b"default-src 'none'; style-src 'unsafe-inline'; form-action 'self'"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": text})


async def _redirect(send: Any, location: str, cookie: str) -> None:
    headers = [(b"location", location.encode()), (b"set-cookie", cookie.encode()), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


pages = CalendarPages()


@server.tool(
    description=_("Add an event to the person's calendar; they connect the calendar in their browser first (URL mode).")
)
async def add_to_calendar(ctx: Context, event: str = _("Dinner at Chez Elicitor")) -> str:
    """Add an event to the person's calendar; they connect the calendar in their browser first (URL mode)."""
    link = await ctx.url_elicitation(_("Connect your calendar so the booking desk can add the dinner."), pages.link())
    if not link.completed:
        raise UrlElicitationRequired(link)  # -32042 on 2025-11-25, a URL input request on 2026-07-28
    return _("Added {event} to the calendar.", event=repr(event))


async def serve_with_pages() -> None:
    """The server over stdio for the signed-in OS user, and the calendar pages on a loopback port."""
    import uvicorn

    sock = loopback_socket()
    pages.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    web = uvicorn.Server(uvicorn.Config(pages, log_level="warning", access_log=False, lifespan="off"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(web.serve, [sock])
        await server.serve(StdioServerTransport(), principal=getpass.getuser())
        web.should_exit = True


async def run_client(protocol: str, ui: str = "terminal") -> None:
    """The guided tour (a booking, then the calendar), then the tool menu for the person to explore."""
    console = Console(ui)
    command = [sys.executable, "-m", "elicitor.demo", "server"]
    env = {**os.environ, LANG_ENV: str(console.lang.locale)}  # the desk asks in the language the person reads
    try:
        async with answering(ui, console.terminal) as answers:
            with server_stderr(console.write) as stderr:
                async with Client.stdio(
                    command, env=env, elicitation=answers, protocol=protocol, stderr=stderr
                ) as client:
                    await _tour(client, console)
                    t = console.lang._
                    console.write(
                        "\n" + t("Now try the tools yourself (update_profile asks with every kind of field).")
                    )
                    await tool_menu(client, console)
    finally:
        console.close()


async def _tour(client: Client, console: Console) -> None:
    say, t = console.write, console.lang._

    label = printable(client.server_info.display()) if client.server_info else t("the server")
    version = client.protocol_version
    say(t("Connected to {server} over stdio, protocol {version}.", server=label, version=version))
    for number, tool in enumerate(await client.list_tools(), 1):
        say(menu_line(number, tool))
    say(t("Calling {tool} ...", tool="book_table"))
    result = await client.call_tool("book_table", {"restaurant": "Chez Elicitor"})
    say("")
    console.tool_result(result)
    booked = speaks.catalog.gettext("Booked: {summary}. Reservation {code}; confirmation sent to {email}.")
    if result.is_error or not result.text.startswith(booked.partition("{")[0]):  # declined, or not confirmed
        return
    say("\n" + t("Calling {tool} (a long call that asks half-way) ...", tool="plan_tasting_menu"))
    follow = Progress(say, console.lang)
    handle = await client.start_tool("plan_tasting_menu", {"guests": 2}, progress=follow.progress)
    console.tool_result(await handle.wait(on_status=follow.status if handle.id is not None else None))
    if "url" not in client.elicitation_modes:
        return
    say("\n" + t("Calling {tool} ...", tool="add_to_calendar"))
    try:
        result = await client.call_tool("add_to_calendar")
    except (JSONRPCError, TooManyRounds) as exc:
        say(t("Not added to the calendar: {reason}", reason=printable(str(exc))))
        return
    console.tool_result(result)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="elicitor demo", description="The table-booking demo.")
    parser.add_argument("role", nargs="?", choices=["client", "server"], default="client")
    parser.add_argument("--protocol", default="auto", help="auto, 2026-07-28, 2025-11-25 or 2025-06-18")
    parser.add_argument("--ui", choices=UI_CHOICES, default="terminal")
    args = parser.parse_args(argv)
    if args.role == "server":
        run_on(serve_with_pages)
    else:
        try:
            run_on(run_client, args.protocol, args.ui)
        except KeyboardInterrupt:
            from .i18n import language

            print("\n" + language()._("Bye."), file=sys.stderr)  # the console is closed by now


if __name__ == "__main__":
    main()
