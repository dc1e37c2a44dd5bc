"""A server with its own sign-in page for URL mode, served on stdio and HTTP alike.

``connect_account`` needs the person to sign in to an (imaginary) issue tracker in their browser: a URL-mode
elicitation points them at ``/sign-in/<id>``, a page this server serves itself with ``server.serve_pages``; the
page completes the elicitation, and the tool, asked again, finds it done. ``create_issue`` takes the optional
arguments most Python signatures have (``elicitor connect`` asks them as an ordinary form).

Run it any of these ways (the page is reachable in each)::

    elicitor connect python examples/url_pages.py        # stdio: the page on a free loopback port
    elicitor serve examples.url_pages:server             # HTTP: the page next to /mcp on port 8000
    elicitor serve examples.url_pages:server --transport stdio
"""

from __future__ import annotations

import enum
import html
import sys
from typing import Any
from urllib.parse import parse_qs

from elicitor import Context, Server, UrlElicitationRequired

server = Server("issue-tracker", version="1.0.0")
signed_in: dict[str, str] = {}
"""Who signed in through each completed sign-in link (a real server would keep a token per user)."""


class Label(enum.Enum):
    BUG = "bug"
    DOCS = "docs"


@server.tool()
async def create_issue(
    title: str, body: str | None = None, priority: int | None = 3, labels: list[Label] | None = None
) -> str:
    """File an issue (only the title is required)."""
    names = ", ".join(label.value for label in labels or []) or "none"
    return f"Filed {title!r} (priority {priority}, labels: {names})" + (f": {body}" if body else ".")


@server.tool()
async def connect_account(ctx: Context) -> str:
    """Connect your tracker account: you sign in on the tracker's page, never through the client."""
    link = await ctx.url_elicitation("Sign in to the issue tracker.", server.page_url("/sign-in/{elicitation_id}"))
    if not link.completed:
        raise UrlElicitationRequired(link)  # -32042 on 2025-11-25, a URL input request on 2026-07-28
    return f"Connected as {signed_in.get(link.id, 'someone')}."


@server.serve_pages
async def sign_in_page(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``GET /sign-in/<id>``: a sign-in form; ``POST``: sign in, which completes the elicitation ``<id>``."""
    if scope["type"] != "http":
        return None
    parts = scope["path"].strip("/").split("/")
    elicitation = await server.url_elicitations.get(parts[1]) if len(parts) == 2 and parts[0] == "sign-in" else None
    if elicitation is None or elicitation.completed:
        return await page(send, 404, "<p>This sign-in link is unknown, expired or used already.</p>")
    if scope["method"] != "POST":
        return await page(send, 200, (
            f"<p>{html.escape(elicitation.message)}</p>"
            '<form method="post"><label>User name <input name="user" autofocus></label> <button>Sign in</button></form>'
        ))  # fmt: skip
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body") or len(body) > 4096:
            break
    user = parse_qs(body.decode("utf-8", "replace")).get("user", [""])[0].strip()[:64] or "guest"
    signed_in[elicitation.id] = user
    if not await server.complete_url_elicitation(elicitation.id):
        return await page(send, 409, "<p>This sign-in link was used already.</p>")
    return await page(send, 200, f"<p>Signed in as <b>{html.escape(user)}</b>. You can close this tab.</p>")


async def page(send: Any, status: int, body: str) -> None:
    text = f"<!doctype html><meta charset=utf-8><title>Issue tracker</title><h1>Issue tracker</h1>{body}".encode()
    headers = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(text)).encode())]
    headers.append((b"content-security-policy", b"default-src 'none'; form-action 'self'"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": text})


if __name__ == "__main__":
    if sys.argv[1:2] == ["--port"]:
        server.run("http", port=int(sys.argv[2]))
    else:
        server.run("stdio")
