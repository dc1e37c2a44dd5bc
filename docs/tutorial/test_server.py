"""Tutorial, step 3: test the tool in one process, on both protocol eras."""

import pytest
from server import server

from elicitor import ScriptedHandler
from elicitor.testing import connected


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_booking(protocol: str) -> None:
    answers = ScriptedHandler([{"party": 4, "seating": "indoor", "email": "bo@example.com"}, {"confirm": True}])
    async with connected(server, elicitation=answers, protocol=protocol) as client:
        result = await client.call_tool("book_table", {"restaurant": "Chez Nous"})
    assert result.text.startswith("Booked a table for 4 at Chez Nous")


@pytest.mark.anyio
async def test_declined() -> None:
    async with connected(server, elicitation=ScriptedHandler(["decline"])) as client:
        result = await client.call_tool("book_table", {"restaurant": "Chez Nous"})
    assert result.text == "You declined: no booking made."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
