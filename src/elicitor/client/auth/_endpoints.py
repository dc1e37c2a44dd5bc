"""Requests to an authorization server's endpoints (basic/authorization.mdx, steps 3 and 5): a JSON post (client
registration, RFC 7591) and the token request, authenticated as the registration says; an answer that refuses or
cannot be read becomes an :class:`~elicitor.AuthError` that says which request it was.
"""

from __future__ import annotations

import base64
import time
from typing import Any
from urllib.parse import quote

import httpx2 as httpx

from ..._exceptions import AuthError
from ._discovery import MAX_DOCUMENT, AuthorizationServer
from ._types import Tokens


async def post_json(http: httpx.AsyncClient, url: str, body: dict[str, Any], what: str) -> dict[str, Any]:
    try:
        response = await http.post(url, json=body)
    except httpx.HTTPError as exc:
        raise AuthError(f"{what} failed: {exc}") from None
    return _answer(response, what)


def _answer(response: httpx.Response, what: str) -> dict[str, Any]:
    try:
        document = response.json() if len(response.content) <= MAX_DOCUMENT else None
    except ValueError:
        document = None
    if response.status_code >= 400 or not isinstance(document, dict):
        error = document.get("error") if isinstance(document, dict) else None
        detail = document.get("error_description") if isinstance(document, dict) else None
        text = f"{what} was refused: HTTP {response.status_code}"
        if isinstance(error, str):
            text += f" {error}" + (f" ({detail})" if isinstance(detail, str) else "")
        raise AuthError(text, error if isinstance(error, str) else None)
    return document


async def token_request(
    http: httpx.AsyncClient,
    server: AuthorizationServer,
    form: dict[str, str],
    client_id: str,
    client_secret: str | None,
    method: str,
) -> Tokens:
    headers = {"accept": "application/json"}
    if method == "client_secret_basic" and client_secret is not None:
        pair = f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}"  # RFC 6749 §2.3.1
        headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    else:
        form = {**form, "client_id": client_id}
        if method == "client_secret_post" and client_secret is not None:
            form["client_secret"] = client_secret
    try:
        response = await http.post(server.token_endpoint, data=form, headers=headers)
    except httpx.HTTPError as exc:
        raise AuthError(f"the token request failed: {exc}") from None
    document = _answer(response, "the token request")
    access = document.get("access_token")
    if not isinstance(access, str) or not access:
        raise AuthError("the token response has no access_token")
    kind = document.get("token_type")
    if isinstance(kind, str) and kind.lower() != "bearer":
        raise AuthError(f"the token response's token_type is {kind[:40]!r}, not Bearer")
    expires = document.get("expires_in")
    lifetime = float(expires) if isinstance(expires, int | float) and not isinstance(expires, bool) else None
    if lifetime is not None and lifetime <= 0:
        lifetime = None
    refresh = document.get("refresh_token")
    scope = document.get("scope")
    return Tokens(
        access_token=access,
        refresh_token=refresh if isinstance(refresh, str) else None,
        expires_at=time.time() + lifetime if lifetime is not None else None,
        scope=scope if isinstance(scope, str) else None,
        lifetime=lifetime,
    )
