"""Tutorial, step 5: URL mode. The person signs in on a page of the server's own, never through the client."""

import sys
from typing import Any

from elicitor import Context, Server, UrlElicitationRequired

server = Server("calendar-desk", "1.0.0")


@server.tool()
async def connect_calendar(ctx: Context) -> str:
    """Connect your calendar: you approve it on the calendar's page."""
    link = await ctx.url_elicitation("Approve access to your calendar.", server.page_url("/approve/{elicitation_id}"))
    if not link.completed:
        raise UrlElicitationRequired(link)  # the client has the person open the page, then calls again
    return "Your calendar is connected."


@server.serve_pages
async def approve_page(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """`GET /approve/<id>` shows a button; `POST` approves, which completes the elicitation `<id>`."""
    elicitation_id = scope["path"].rpartition("/")[2]
    if scope["method"] == "POST" and await server.complete_url_elicitation(elicitation_id):
        body = b"<p>Approved. You can close this tab.</p>"
    else:
        body = b'<form method="post"><button>Approve</button></form>'
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
    await send({"type": "http.response.body", "body": body})


if __name__ == "__main__":
    server.run("http", port=int(sys.argv[1]) if len(sys.argv) > 1 else 8000)
