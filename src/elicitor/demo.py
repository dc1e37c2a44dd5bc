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
import secrets
import sys
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any, Literal
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
from .server import Context, Server, UrlElicitationRequired
from .transports import StdioServerTransport

server = Server("booking-desk", "1.0.0", title="Chez Elicitor booking desk")


class Seating(Choices):
    INDOOR = "indoor", "Indoor dining room"
    PATIO = "patio", "Heated patio"
    BAR = "bar", "At the bar"


Diet = Literal["vegetarian", "vegan", "gluten-free", "nut allergy"]


@dataclass
class Booking:
    party: Annotated[int, Field(title="Party size", description="How many people, you included", minimum=1, maximum=12)]
    day: Annotated[date, Field(title="Date")]
    seating: Annotated[Seating, Field(title="Seating")]
    email: Annotated[Email, Field(title="Contact email", description="Where the confirmation goes")]
    diet: Annotated[list[Diet], Field(title="Dietary needs", max_items=4)]
    notes: Annotated[str | None, Field(title="Notes for the kitchen", max_length=200)] = None


@server.tool()
async def book_table(ctx: Context, restaurant: str = "Chez Elicitor") -> str:
    """Book a table: asks the person for the details, then for a final confirmation."""
    match await ctx.elicit(f"Let's book your table at {restaurant}.", Booking):
        case Accepted(data=booking):
            pass
        case Declined():
            return "No booking made: you declined."
        case Cancelled():
            return "No booking made: cancelled."
    summary = f"{booking.party} at {restaurant} on {booking.day:%A %d %B %Y}, {booking.seating.title}" + (
        f", {', '.join(booking.diet)}" if booking.diet else ""
    )
    if not await ctx.confirm(f"Confirm the booking: {summary}?"):
        return "No booking made: not confirmed."
    code = await ctx.once("reservation", lambda: secrets.token_hex(3).upper())
    return f"Booked: {summary}. Reservation {code}; confirmation sent to {booking.email}."


class Main(Choices):
    HAKE = "hake", "Line-caught hake with sea herbs"
    DUCK = "duck", "Roast duck with cherries"
    RISOTTO = "risotto", "Wild mushroom risotto"


@server.tool(task="optional")
async def plan_tasting_menu(ctx: Context, guests: int = 2) -> str:
    """Plan a tasting menu: a few seconds of work shown as progress, a question half-way, then more work.

    It runs as a task when the client can take one (a long call the client follows, answering its question while
    it runs); otherwise as an ordinary call. The code is the same.
    """
    for step in ("Checking this morning's market", "Pairing the wines"):
        await ctx.report_progress(0, 4, f"{step}...")
        await anyio.sleep(1)
    choice = await ctx.elicit(
        "The market is out of turbot. Which main course instead?", Annotated[Main, Field(title="Main course")]
    )
    if not isinstance(choice, Accepted):
        return "No menu planned: no main course chosen."
    for step in ("Writing the menu", "Telling the kitchen"):
        await ctx.report_progress(3, 4, f"{step}...")
        await anyio.sleep(1)
    return f"Tasting menu for {guests}: seasonal starters, {choice.data.title.lower()}, chocolate soufflé."


class Contact(Choices):
    EMAIL = "email", "By email"
    PHONE = "phone", "By phone"
    NEVER = "never", "Please don't"


Course = Literal["starters", "mains", "desserts", "wine"]


@dataclass
class Profile:
    name: Annotated[str, Field(title="Display name", min_length=2, max_length=40)]
    favourites: Annotated[list[Course], Field(title="Favourite courses", min_items=1, max_items=3)]
    contact: Annotated[Contact, Field(title="How may we contact you?")] = Contact.EMAIL
    spice: Annotated[
        float, Field(title="Spice tolerance", description="0 is mild, 10 is fiery", minimum=0, maximum=10)
    ] = 5.0
    newsletter: Annotated[bool, Field(title="Send me the monthly menu")] = False
    birthday: Annotated[date | None, Field(title="Birthday", description="For a dessert on the house")] = None
    website: Annotated[Uri | None, Field(title="Your website")] = None


@server.tool()
async def update_profile(ctx: Context) -> str:
    """Update your guest profile: a form with every kind of field (text, numbers, choices, dates, yes/no)."""
    outcome = await ctx.elicit("Tell the restaurant about yourself (everything is optional but your name).", Profile)
    if not isinstance(outcome, Accepted):
        return f"Profile unchanged: you {outcome.action}d." if outcome.action == "decline" else "Profile unchanged."
    p = outcome.data
    return (
        f"Profile saved for {p.name}: likes {', '.join(p.favourites)}, spice {p.spice:g}/10, "
        f"contact: {p.contact.value}" + (", monthly menu" if p.newsletter else "") + "."
    )


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
            return await _page(send, 404, "Not found", "<p>There is nothing here.</p>")
        elicitation_id = parts[1]
        elicitation = await server.url_elicitations.get(elicitation_id)
        if elicitation is None or elicitation.completed:
            return await _page(send, 410, "Link expired", "<p>This link has expired or was used already.</p>")
        user = self._user(headers)
        if method == "POST" and form.get("signin"):
            name = form["signin"].strip()[:64].replace(".", "_") or "guest"
            cookie = f"calendar_user={self._cookie(name)}; Path=/; HttpOnly; SameSite=Strict"
            return await _redirect(send, path, cookie)
        if user is None:
            guess = html.escape(getpass.getuser())
            return await _page(send, 200, "Example Calendar: sign in", (
                "<p>Sign in to Example Calendar.</p>"
                f'<form method="post"><label>User name <input name="signin" value="{guess}" autofocus></label>'
                " <button>Sign in</button></form>"
                "<p><small>Signing in as someone else shows the server refusing to complete the link.</small></p>"
            ))  # fmt: skip
        if method == "POST" and form.get("decision") == "allow":
            if await server.complete_url_elicitation(elicitation_id, principal=user):
                return await _page(send, 200, "Calendar connected", (
                    f"<p>Booking desk can now add events to <b>{html.escape(user)}</b>'s calendar.</p>"
                    "<p>You can close this tab and return to your terminal.</p>"
                ))  # fmt: skip
            return await _page(send, 403, "Not allowed", (
                f"<p>This link was not created for <b>{html.escape(user)}</b>. Nothing was connected.</p>"
            ))  # fmt: skip
        if method == "POST":
            return await _page(send, 200, "Not connected", "<p>Nothing was connected. Return to your terminal.</p>")
        return await _page(send, 200, "Example Calendar: allow access?", (
            f"<p>Signed in as <b>{html.escape(user)}</b>.</p>"
            f"<p><b>Chez Elicitor booking desk</b> asks: {html.escape(elicitation.message)}</p>"
            '<form method="post"><button name="decision" value="allow">Allow</button> '
            '<button name="decision" value="deny">Deny</button></form>'
        ))  # fmt: skip


async def _page(send: Any, status: int, title: str, body: str) -> None:
    text = (
        f"<!doctype html><meta charset=utf-8><title>{title}</title>"
        f"<body style='font-family:sans-serif;max-width:36em;margin:3em auto'><h1>{title}</h1>{body}</body>"
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


@server.tool()
async def add_to_calendar(ctx: Context, event: str = "Dinner at Chez Elicitor") -> str:
    """Add an event to the person's calendar; they connect the calendar in their browser first (URL mode)."""
    link = await ctx.url_elicitation("Connect your calendar so the booking desk can add the dinner.", pages.link())
    if not link.completed:
        raise UrlElicitationRequired(link)  # -32042 on 2025-11-25, a URL input request on 2026-07-28
    return f"Added {event!r} to the calendar."


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
    try:
        async with answering(ui, console.terminal) as answers:
            with server_stderr(console.write) as stderr:
                async with Client.stdio(command, elicitation=answers, protocol=protocol, stderr=stderr) as client:
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
    if result.is_error or not result.text.startswith("Booked"):
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
