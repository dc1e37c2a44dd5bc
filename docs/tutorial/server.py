"""Tutorial, step 1: a server whose tool asks the person for what it needs."""

from dataclasses import dataclass
from typing import Annotated

from elicitor import Accepted, Choices, Context, Declined, Email, Field, Server

server = Server("booking-desk", "1.0.0", title="Booking desk")


class Seating(Choices):
    INDOOR = "indoor", "Indoor dining room"
    PATIO = "patio", "Heated patio"


@dataclass
class Booking:
    party: Annotated[int, Field(title="Party size", minimum=1, maximum=12)]
    seating: Seating
    email: Annotated[Email, Field(title="Where to send the confirmation")]
    notes: str | None = None


@server.tool()
async def book_table(ctx: Context, restaurant: str) -> str:
    """Book a table, asking the person for the details."""
    outcome = await ctx.elicit(f"Book a table at {restaurant}?", Booking)
    if isinstance(outcome, Declined):
        return "You declined: no booking made."
    if not isinstance(outcome, Accepted):
        return "Cancelled: no booking made."
    booking = outcome.data
    if not await ctx.confirm(f"Book {booking.party} people, {booking.seating.title}?"):
        return "Not confirmed: no booking made."
    return f"Booked a table for {booking.party} at {restaurant} ({booking.seating.title}); we wrote to {booking.email}."


if __name__ == "__main__":
    server.run()  # stdio: a client starts this file and talks to it over stdin and stdout
