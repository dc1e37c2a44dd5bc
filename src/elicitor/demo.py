"""The demo: a table-booking desk whose tool asks the person for the details, and a terminal client.

``elicitor demo`` (what ``make demo`` runs) starts the server as a child process over stdio and answers its
questions in this terminal. ``python -m elicitor.demo server`` runs only the server.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Literal

import anyio

from ._outcomes import Accepted, Cancelled, Declined
from .client import Client, TerminalHandler
from .forms import Choices, Email, Field
from .server import Context, Server

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


async def run_client(protocol: str) -> None:
    command = [sys.executable, "-m", "elicitor.demo", "server"]
    async with Client.stdio(command, elicitation=TerminalHandler(), protocol=protocol) as client:
        label = client.server_info.display() if client.server_info else "the server"
        print(f"Connected to {label} over stdio, protocol {client.protocol_version}.", file=sys.stderr)
        for tool in await client.list_tools():
            print(f"  tool {tool.name}: {tool.description}", file=sys.stderr)
        print("Calling book_table ...", file=sys.stderr)
        result = await client.call_tool("book_table", {"restaurant": "Chez Elicitor"})
        print("", file=sys.stderr)
        print(("Error: " if result.is_error else "Result: ") + result.text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="elicitor demo", description="The table-booking demo.")
    parser.add_argument("role", nargs="?", choices=["client", "server"], default="client")
    parser.add_argument("--protocol", default="auto", help="auto, 2026-07-28, 2025-11-25 or 2025-06-18")
    args = parser.parse_args(argv)
    if args.role == "server":
        server.run()
    else:
        try:
            anyio.run(run_client, args.protocol)
        except KeyboardInterrupt:
            print("\nBye.", file=sys.stderr)


if __name__ == "__main__":
    main()
