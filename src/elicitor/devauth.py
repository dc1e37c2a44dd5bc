"""``elicitor dev-auth``: an OAuth authorization server for development, to protect a server before a real one.

FOR DEVELOPMENT ONLY. It listens on loopback only, asks the person for a name and believes it, and keeps
everything in memory. What it does is what a client needs from an authorization server under the spec's
Authorization section (basic/authorization.mdx): metadata at ``/.well-known/oauth-authorization-server``
(RFC 8414), dynamic client registration (RFC 7591), the authorization code flow with PKCE S256 only, loopback
redirects only (RFC 8252 §7.3), ``iss`` on the redirect (RFC 9207), JWT access tokens (RFC 9068) whose audience is
the ``resource`` asked for (RFC 8707), refresh tokens, and its keys at ``/jwks``. Point a server at it::

    elicitor dev-auth --port 9000
    elicitor serve app:server --auth-issuer http://127.0.0.1:9000 --auth-scope demo

and ``elicitor connect http://127.0.0.1:8000/mcp`` signs in through it.

Its pages speak the person's language (the one ``elicitor --lang`` names, else their browser's
``Accept-Language``), as elicitor's own pages do; its JSON errors are for programs, in English.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import json
import secrets
import sys
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from joserfc import jwt
from joserfc.jwk import ECKey, KeySet

from .i18n import N_, Language, Message

CANNOT_LISTEN = N_("cannot listen on {address}: {reason}")
"""A command that cannot have its port (in use, not permitted): said before anything else, and it exits 1."""
WARNING = N_("development authorization server: it believes any name typed into it. Never use it for real users.")
_MAX_BODY = 64 * 1024
_LIFETIME = 3600


@dataclass(frozen=True, slots=True)
class _Grant:
    user: str
    scope: str
    resource: str
    client_id: str


class DevAuthorizationServer:
    """The authorization server as an ASGI app at ``issuer`` (``http://127.0.0.1:PORT``); see the module."""

    def __init__(self, issuer: str, scopes: list[str] | None = None) -> None:
        self.issuer = issuer.rstrip("/")
        self.scopes = list(scopes or [])
        self._key = ECKey.generate_key("P-256", parameters={"kid": secrets.token_hex(4)})
        self._clients: dict[str, list[str]] = {}
        self._codes: dict[str, tuple[str, str, _Grant]] = {}
        self._refresh: dict[str, _Grant] = {}

    def metadata(self) -> dict[str, Any]:
        """The authorization server metadata document (RFC 8414 §2)."""
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
            "scopes_supported": [*self.scopes, "offline_access"],
        }

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        lang = _language(scope)
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > _MAX_BODY:
                await _page(send, 413, N_("Too large."), lang)
                return
            if not message.get("more_body"):
                break
        path, method = scope.get("path", ""), scope["method"]
        query = _pairs(scope.get("query_string", b"").decode("latin-1"))
        if path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
            await _json(send, 200, self.metadata())
        elif path == "/jwks":
            await _json(send, 200, dict(KeySet([self._key]).as_dict(private=False)))
        elif path == "/register" and method == "POST":
            await self._register(send, body)
        elif path == "/authorize" and method == "GET":
            await self._sign_in_page(send, query, lang)
        elif path == "/authorize" and method == "POST":
            await self._approve(send, _pairs(body.decode("utf-8", "replace")), lang)
        elif path == "/token" and method == "POST":
            await self._token(send, _pairs(body.decode("utf-8", "replace")))
        else:
            await _page(send, 404, N_("Not found."), lang)

    async def _register(self, send: Any, body: bytes) -> None:
        try:
            document = json.loads(body)
        except ValueError:
            document = None
        uris = document.get("redirect_uris") if isinstance(document, dict) else None
        if not isinstance(uris, list) or not uris or not all(isinstance(u, str) and _loopback(u) for u in uris):
            await _json(send, 400, {"error": "invalid_redirect_uri", "error_description": "loopback redirects only"})
            return
        client_id = secrets.token_urlsafe(12)
        self._clients[client_id] = uris
        await _json(send, 201, {"client_id": client_id, "redirect_uris": uris, "token_endpoint_auth_method": "none"})

    def _problem(self, query: dict[str, str]) -> Message | None:
        if query.get("client_id") not in self._clients:
            return N_("This program is not registered here (it must register first).")
        if query.get("response_type") != "code" or query.get("code_challenge_method") != "S256":
            return N_("This sign-in needs the authorization code flow with PKCE (S256).")
        if not query.get("code_challenge") or not _loopback(query.get("redirect_uri", "")):
            return N_("This sign-in needs a code challenge and a loopback redirect.")
        return None

    async def _sign_in_page(self, send: Any, query: dict[str, str], lang: Language) -> None:
        problem = self._problem(query)
        if problem is not None:
            await _page(send, 400, problem, lang)
            return
        hidden = "".join(
            f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in query.items()
        )
        # What the program asked for is shown as it asked, isolated (<bdi>) inside the sentence of this language.
        asked = _bdi(query.get("scope")) if query.get("scope") else html.escape(lang._("(no scope)"))
        resource = _bdi(query.get("resource")) if query.get("resource") else html.escape(lang._("(no resource named)"))
        sentence = html.escape(
            lang._("A program asks to act for you at {resource} with {scope}.", resource="\0", scope="\1")
        )
        sentence = sentence.replace("\0", f"<b>{resource}</b>").replace("\1", f"<b>{asked}</b>")
        # No "required" on the input: the browser would say why in its own language, not the page's; the server
        # says it (Type a name to sign in.) in the page's.
        name, sign_in = html.escape(lang._("Your name:")), html.escape(lang._("Sign in"))
        form = (
            f'<form method="post">{hidden}<p>{sentence}</p><p><label for=user>{name}</label> '
            f'<input id=user name="user" autofocus> <button>{sign_in}</button></p></form>'
        )
        await _page(send, 200, form, lang)

    async def _approve(self, send: Any, form: dict[str, str], lang: Language) -> None:
        problem = self._problem(form)
        user = form.get("user", "").strip()
        if problem is None and not user:
            problem = N_("Type a name to sign in.")
        if problem is not None:
            await _page(send, 400, problem, lang)
            return
        code = secrets.token_urlsafe(24)
        grant = _Grant(user, form.get("scope", ""), form.get("resource", ""), form["client_id"])
        self._codes[code] = (form["code_challenge"], form["redirect_uri"], grant)
        location = (
            form["redirect_uri"] + "?" + urlencode({"code": code, "state": form.get("state", ""), "iss": self.issuer})
        )
        await send({"type": "http.response.start", "status": 303, "headers": [(b"location", location.encode())]})
        await send({"type": "http.response.body", "body": b""})

    async def _token(self, send: Any, form: dict[str, str]) -> None:
        kind = form.get("grant_type")
        if kind == "authorization_code" and form.get("code") in self._codes:
            challenge, redirect, grant = self._codes.pop(form["code"])
            digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
            if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != challenge:
                await _json(send, 400, {"error": "invalid_grant", "error_description": "the PKCE verifier is wrong"})
                return
            if form.get("redirect_uri") != redirect or form.get("client_id") != grant.client_id:
                await _json(send, 400, {"error": "invalid_grant", "error_description": "not this client's code"})
                return
        elif kind == "refresh_token" and form.get("refresh_token") in self._refresh:
            grant = self._refresh.pop(form["refresh_token"])
        else:
            await _json(send, 400, {"error": "invalid_grant"})
            return
        now = int(time.time())
        claims = {
            "iss": self.issuer, "aud": grant.resource, "sub": grant.user, "client_id": grant.client_id,
            "iat": now, "exp": now + _LIFETIME, "scope": grant.scope, "jti": secrets.token_urlsafe(12),
        }  # fmt: skip
        access = jwt.encode({"alg": "ES256", "kid": self._key.kid, "typ": "at+jwt"}, claims, self._key)
        refresh = secrets.token_urlsafe(32)
        self._refresh[refresh] = grant
        await _json(
            send,
            200,
            {"access_token": access, "token_type": "Bearer", "expires_in": _LIFETIME, "refresh_token": refresh,
             "scope": grant.scope},
        )  # fmt: skip


def _loopback(uri: str) -> bool:
    try:
        parts = urlsplit(uri)
    except ValueError:
        return False
    return parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1")


def _pairs(text: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(text).items() if values}


async def _json(send: Any, status: int, document: dict[str, Any]) -> None:
    body = json.dumps(document).encode()
    headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _language(scope: dict[str, Any]) -> Language:
    """The person's language: the one ``elicitor --lang`` chose, else their browser's (``Accept-Language``)."""
    from .i18n import chosen, negotiate

    picked = chosen()
    if picked is not None:
        return picked
    said = b",".join(value for name, value in scope.get("headers") or () if name.lower() == b"accept-language")
    return negotiate(said.decode("latin-1"))


def _bdi(text: str | None) -> str:
    return f"<bdi>{html.escape(text or '')}</bdi>"


async def _page(send: Any, status: int, content: str | Message, lang: Language) -> None:
    """A page in the person's language (``lang`` and ``dir`` on it); ``content`` is markup, or a sentence."""
    if isinstance(content, Message):
        content = f"<p>{html.escape(lang.text(content))}</p>"
    title, only = html.escape(lang._("Development sign-in")), html.escape(lang._("Development only:"))
    body = (
        f"<!doctype html><html lang={lang.tag} dir={lang.direction}><meta charset=utf-8><title>{title}</title>"
        "<body style='font-family:system-ui,sans-serif;max-width:40em;margin:3em auto'>"
        f"<p style='background:#fde68a;padding:.5em'><b>{only}</b> {html.escape(lang.text(WARNING))}</p>"
        f"{content}</body></html>"
    ).encode()
    headers = [(b"content-type", b"text/html; charset=utf-8"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main(port: int = 9000, scopes: list[str] | None = None) -> int:
    """Serve on 127.0.0.1:``port`` until interrupted (loopback only, whatever is asked)."""
    import uvicorn

    from ._net import bound_socket
    from .i18n import language

    lang = language()
    try:
        sock = bound_socket("127.0.0.1", port)
    except OSError as exc:
        address, reason = f"127.0.0.1:{port}", exc.strerror or str(exc)
        print(lang._(CANNOT_LISTEN.msgid, address=address, reason=reason), file=sys.stderr)
        return 1
    issuer = f"http://127.0.0.1:{sock.getsockname()[1]}"  # port 0: the one it got, which the metadata names
    print("elicitor dev-auth" + lang._(": ") + f"{issuer}  ** {lang.text(WARNING)} **", file=sys.stderr, flush=True)
    command = f"elicitor serve module:server --auth-issuer {issuer}" + "".join(
        f" --auth-scope {s}" for s in scopes or []
    )
    print("  " + lang._("protect a server with: {command}", command=command), file=sys.stderr, flush=True)
    served = uvicorn.Server(uvicorn.Config(DevAuthorizationServer(issuer, scopes), log_level="warning"))
    with contextlib.suppress(KeyboardInterrupt):
        served.run(sockets=[sock])
    return 0 if served.started else 3  # as uvicorn.run: a server that never started failed
