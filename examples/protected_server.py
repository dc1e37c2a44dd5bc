"""A protected MCP server that trusts ``elicitor dev-auth``: the whole sign-in loop on your machine.

    elicitor dev-auth --port 9000 --scope demo --scope demo:admin   # the development authorization server
    python examples/protected_server.py                              # http://127.0.0.1:8000/mcp, protected
    elicitor connect http://127.0.0.1:8000/mcp                       # sign in in the browser, then call tools

This file is only the resource server (``--issuer URL`` to trust another authorization server than
``http://127.0.0.1:9000``, ``--port`` for another port): ``Protection(JwtVerifier(...))`` checks every request's
JWT against the issuer's keys (fetched on first use, so either may start first). A client without a token gets
401 and finds the authorization server through ``/.well-known/oauth-protected-resource/mcp``; ``elicitor
dev-auth`` registers it, asks the person their name (and believes it: development only), and issues the token.
Every elicitation is then bound to the signed-in user: ``whoami`` asks a question and answers with
``ctx.principal``; ``connect_calendar`` is a URL-mode elicitation whose page only the same user can complete;
``admin_report`` needs the ``demo:admin`` scope, so calling it makes the client ask for more (403
``insufficient_scope``, a step-up in the middle of the session).
"""

from __future__ import annotations

import argparse
import html
import sys
from typing import Any
from urllib.parse import parse_qs, urlsplit

from elicitor import Accepted, Context, JwtVerifier, Protection, Server, UrlElicitationRequired

server = Server("calendar", version="1.0.0")


@server.tool()
async def whoami(ctx: Context) -> str:
    """Ask the signed-in user a question; the answer is theirs alone."""
    outcome = await ctx.elicit(
        "Which colour do you like?", {"type": "object", "properties": {"colour": {"type": "string"}}}
    )
    colour = outcome.data.get("colour", "nothing") if isinstance(outcome, Accepted) else "nothing"
    return f"{ctx.principal} likes {colour}"


@server.tool()
async def connect_calendar(ctx: Context) -> str:
    """A URL-mode elicitation bound to the signed-in user: its page completes it only for that same user."""
    link = await ctx.url_elicitation("Connect your calendar.", server.page_url("/connect/{elicitation_id}"))
    if not link.completed:
        raise UrlElicitationRequired(link)  # -32042 on 2025-11-25, a URL input request on 2026-07-28
    return f"{ctx.principal}'s calendar is connected"


@server.tool(scopes=["demo:admin"])
async def admin_report(ctx: Context) -> str:
    """Needs the demo:admin scope: the client steps up (asks again for more scope) before it runs."""
    return f"report for {ctx.principal}: all is well"


@server.serve_pages
async def connect_page(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``/connect/<id>``: the person says who they are (a real page would know from its own sign-in cookie); the
    elicitation completes only if that is the user who started it, so a link sent to someone else is useless."""
    if scope["type"] != "http":
        return
    query = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
    elicitation_id = scope["path"].rsplit("/", 1)[-1]
    user = query.get("user", "").strip()
    if not user:
        await _page(send, 200, '<form><p>Connect your calendar as <input name="user"> <button>Connect</button></form>')
    elif await server.complete_url_elicitation(elicitation_id, principal=user):
        await _page(send, 200, f"Connected, {html.escape(user)}. You can close this tab.")
    else:
        await _page(send, 403, "This link is unknown, used already, or someone else's.")


async def _page(send: Any, status: int, content: str) -> None:
    body = f"<!doctype html><meta charset=utf-8><title>calendar</title><body>{content}</body>".encode()
    headers = [(b"content-type", b"text/html; charset=utf-8")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def protection(port: int, issuer: str) -> Protection:
    """Trust ``issuer``'s JWTs for this server's resource, ``demo`` for every request (``elicitor dev-auth``
    publishes its keys at ``/jwks``; another authorization server names its own in its metadata's ``jwks_uri``)."""
    resource = f"http://127.0.0.1:{port}/mcp"
    verifier = JwtVerifier(issuer=issuer, audience=resource, jwks_url=f"{issuer}/jwks")
    return Protection(verifier, resource, [issuer], scopes_supported=["demo", "demo:admin"], required_scopes=["demo"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A protected calendar server trusting an authorization server.")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--issuer", default="http://127.0.0.1:9000", help="the authorization server (elicitor dev-auth)"
    )
    args = parser.parse_args(argv)
    issuer = args.issuer.rstrip("/")
    print(f"calendar: http://127.0.0.1:{args.port}/mcp, protected by {issuer}", file=sys.stderr)
    print(
        f"  for development, run the authorization server with: elicitor dev-auth --port {urlsplit(issuer).port or 80}"
        " --scope demo --scope demo:admin",
        file=sys.stderr,
        flush=True,
    )
    server.run("http", port=args.port, auth=protection(args.port, issuer))


if __name__ == "__main__":
    main()
