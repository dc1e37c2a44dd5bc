"""A protected MCP server and a small development authorization server, on one port: the whole sign-in loop.

    python examples/protected_server.py            # http://127.0.0.1:8000/mcp
    elicitor connect http://127.0.0.1:8000/mcp     # in another terminal: sign in in the browser, then call tools

The MCP endpoint is protected with ``Protection(JwtVerifier(...))``: a client without a token gets 401 and finds
the authorization server through ``/.well-known/oauth-protected-resource/mcp``. The authorization server at
``/auth`` (for development only: it asks your name and believes it) registers clients, shows a sign-in page,
and issues JWT access tokens (with PKCE, refresh tokens, and the resource as audience). Every elicitation is then
bound to the signed-in user: ``whoami`` asks a question and answers with ``ctx.principal``; ``connect_calendar``
is a URL-mode elicitation whose page only the same user can complete; ``admin_report`` needs the ``demo:admin``
scope, so calling it makes the client ask for more (403 ``insufficient_scope``).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import secrets
import sys
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode

from joserfc import jwt
from joserfc.jwk import ECKey, KeySet

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
        return
    if await server.complete_url_elicitation(elicitation_id, principal=user):
        await _page(send, 200, f"Connected, {html.escape(user)}. You can close this tab.")
    else:
        await _page(send, 403, "This link is unknown, used already, or someone else's.")


@dataclass
class Grant:
    user: str
    scopes: str
    resource: str


class Development:
    """The authorization server (under ``/auth``) in front of the protected MCP server (everything else)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.issuer = f"{base}/auth"
        self.key = ECKey.generate_key("P-256", parameters={"kid": secrets.token_hex(4)})
        self.codes: dict[str, tuple[str, Grant]] = {}
        self.refresh: dict[str, Grant] = {}
        resource = f"{base}/mcp"
        verifier = JwtVerifier(issuer=self.issuer, audience=resource, jwks_url=f"{self.issuer}/jwks")
        protection = Protection(
            verifier, resource, [self.issuer], scopes_supported=["demo", "demo:admin"], required_scopes=["demo"]
        )
        self.mcp = server.http_app(auth=protection)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(("/auth", "/.well-known/oauth-auth")):
            await self.mcp(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        if path == "/.well-known/oauth-authorization-server/auth":
            await _json(send, 200, self.metadata())
        elif path == "/auth/jwks":
            await _json(send, 200, dict(KeySet([self.key]).as_dict(private=False)))
        elif path == "/auth/register":
            await _json(send, 201, {"client_id": secrets.token_urlsafe(8), "token_endpoint_auth_method": "none"})
        elif path == "/auth/authorize" and scope["method"] == "GET":
            await self.sign_in_page(send, query)
        elif path == "/auth/authorize":
            await self.approve(send, form)
        elif path == "/auth/token":
            await self.token(send, form)
        else:
            await _page(send, 404, "Not found.")

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "registration_endpoint": f"{self.issuer}/register",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "authorization_response_iss_parameter_supported": True,
            "scopes_supported": ["demo", "demo:admin", "offline_access"],
        }

    async def sign_in_page(self, send: Any, query: dict[str, str]) -> None:
        if query.get("code_challenge_method") != "S256" or not query.get("redirect_uri", "").startswith(
            "http://127.0.0.1:"
        ):
            await _page(send, 400, "This sign-in needs PKCE (S256) and a loopback redirect.")
            return
        hidden = "".join(
            f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in query.items()
        )
        scopes = html.escape(query.get("scope", "(none)"))
        await _page(
            send,
            200,
            f'<form method="post">{hidden}<p>A program asks to act for you at {html.escape(self.base)} with '
            f'<b>{scopes}</b>.</p><p>Your name: <input name="user" autofocus> <button>Sign in</button></p></form>'
            "<p><small>Development authorization server: it believes the name you type.</small></p>",
        )

    async def approve(self, send: Any, form: dict[str, str]) -> None:
        user = form.get("user", "").strip()
        if not user:
            await _page(send, 400, "Type a name to sign in.")
            return
        code = secrets.token_urlsafe(16)
        self.codes[code] = (form["code_challenge"], Grant(user, form.get("scope", ""), form.get("resource", "")))
        location = f"{form['redirect_uri']}?" + urlencode(
            {"code": code, "state": form.get("state", ""), "iss": self.issuer}
        )
        await send({"type": "http.response.start", "status": 303, "headers": [(b"location", location.encode())]})
        await send({"type": "http.response.body", "body": b""})

    async def token(self, send: Any, form: dict[str, str]) -> None:
        if form.get("grant_type") == "authorization_code" and form.get("code") in self.codes:
            challenge, grant = self.codes.pop(form["code"])
            digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
            if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != challenge:
                await _json(send, 400, {"error": "invalid_grant", "error_description": "PKCE verifier mismatch"})
                return
        elif form.get("grant_type") == "refresh_token" and form.get("refresh_token") in self.refresh:
            grant = self.refresh.pop(form["refresh_token"])
        else:
            await _json(send, 400, {"error": "invalid_grant"})
            return
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": grant.resource, "sub": grant.user, "iat": now, "exp": now + 3600}
        access = jwt.encode({"alg": "ES256", "kid": self.key.kid}, {**claims, "scope": grant.scopes}, self.key)
        refresh = secrets.token_urlsafe(24)
        self.refresh[refresh] = grant
        answer = {"access_token": access, "token_type": "Bearer", "expires_in": 3600, "refresh_token": refresh}
        await _json(send, 200, {**answer, "scope": grant.scopes})


async def _json(send: Any, status: int, document: dict[str, Any]) -> None:
    body = json.dumps(document).encode()
    headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _page(send: Any, status: int, content: str) -> None:
    body = f"<!doctype html><meta charset=utf-8><title>calendar</title><body>{content}</body>".encode()
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/html; charset=utf-8")]}
    )
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    import uvicorn

    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 8000
    base = f"http://127.0.0.1:{port}"
    print(f"calendar: {base}/mcp, protected; sign in at {base}/auth (development only)", file=sys.stderr, flush=True)
    uvicorn.run(Development(base), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
