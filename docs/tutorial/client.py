"""Tutorial, step 2: a client that starts the server and answers its questions from a script."""

import anyio

from elicitor import Client, ScriptedHandler


async def main() -> None:
    answers = ScriptedHandler(
        [
            {"party": 2, "seating": "patio", "email": "ada@example.com"},  # the booking form
            {"confirm": True},  # "Book 2 people, Heated patio?"
        ]
    )
    async with Client.stdio(["python", "server.py"], elicitation=answers) as client:
        result = await client.call_tool("book_table", {"restaurant": "Chez Nous"})
        print(result.text)
        for request in answers.requests:
            print("asked:", request.message)


anyio.run(main)
