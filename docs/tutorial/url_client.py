"""Tutorial, step 5: a client for URL mode. Here a script plays the person who opens the page and approves."""

import sys
from typing import Literal

import anyio
import httpx2 as httpx

from elicitor import Client, ElicitationRequest, ScriptedHandler, UrlElicitationRequest


async def open_and_approve(request: ElicitationRequest | UrlElicitationRequest) -> Literal["accept", "decline"]:
    if not isinstance(request, UrlElicitationRequest):
        return "decline"  # this script only plays the person for the URL step
    print("the server asks to open:", request.url, "on", request.host)
    async with httpx.AsyncClient() as browser:
        await browser.post(request.url)  # what the person's browser does when they press Approve
    return "accept"


async def main(url: str) -> None:
    person = ScriptedHandler([open_and_approve], modes=frozenset({"form", "url"}))
    async with Client.http(url, elicitation=person) as client:
        result = await client.call_tool("connect_calendar")
        print(result.text)


anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp")
