"""Tutorial, step 4: the same server over Streamable HTTP (start it with `elicitor serve server:server`)."""

import sys

import anyio

from elicitor import Client, ScriptedHandler


async def main(url: str) -> None:
    answers = ScriptedHandler([{"party": 3, "seating": "indoor", "email": "cy@example.com"}, {"confirm": True}])
    async with Client.http(url, elicitation=answers) as client:
        print("protocol:", client.protocol_version)
        result = await client.call_tool("book_table", {"restaurant": "Chez Nous"})
        print(result.text)


anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp")
