"""Finding where to sign in (basic/authorization.mdx, steps 1 and 2): the server's protected resource metadata
(RFC 9728) and its authorization server's metadata (RFC 8414, OpenID discovery), each checked before it is used.

A document is refused, and sign-in stops, when it names another resource or another issuer than the one asked:
a token for one server must never be requested for another. A server without any metadata is signed in to by the
2025-03-26 rules (its origin is the authorization server, with the default endpoints).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, urlsplit

import httpx2 as httpx

from ..._exceptions import AuthError
from .._local import NO_METADATA, said
from ._challenge import Challenge

logger = logging.getLogger("elicitor.auth")


MAX_DOCUMENT = 256 * 1024


@dataclass(slots=True)
class AuthorizationServer:
    """What discovery found for one authorization server."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None
    metadata: dict[str, Any] = field(default_factory=dict)

    def supports(self, key: str, value: str) -> bool:
        listed = self.metadata.get(key)
        return isinstance(listed, list) and value in listed


def split_url(url: str, what: str) -> SplitResult:
    """``urlsplit``, with a URL from a peer that cannot be parsed (``http://[x``) refused as an :class:`AuthError`."""
    try:
        return urlsplit(url)
    except ValueError:
        raise AuthError(f"{what} is not a valid URL: {url[:200]!r}") from None


def origin_of(url: str) -> str:
    parts = split_url(url, "the URL")
    return f"{parts.scheme}://{parts.netloc}"


async def _get_json(http: httpx.AsyncClient, url: str) -> dict[str, Any] | None:
    """A JSON object from ``url``, or ``None`` when there is none there (any 4xx, a non-object)."""
    try:
        response = await http.get(url, headers={"accept": "application/json"})
    except httpx.HTTPError as exc:
        logger.debug("fetching %s failed: %s", url, exc)
        return None
    if response.status_code != 200 or len(response.content) > MAX_DOCUMENT:
        return None
    try:
        document = response.json()
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


async def resource_metadata(
    http: httpx.AsyncClient, server_url: str, challenge: Challenge
) -> tuple[str, dict[str, Any] | None]:
    """The resource to ask a token for, and the server's protected resource metadata (``None``: it has none)."""
    parts = split_url(server_url, "the server's URL")
    origin = f"{parts.scheme}://{parts.netloc}"
    candidates = []
    if challenge.resource_metadata:
        candidates.append(challenge.resource_metadata)
    path = parts.path.rstrip("/")
    if path:
        candidates.append(f"{origin}/.well-known/oauth-protected-resource{path}")
    candidates.append(f"{origin}/.well-known/oauth-protected-resource")
    for url in candidates:
        document = await _get_json(http, url)
        if document is None:
            continue
        resource = document.get("resource")
        if not isinstance(resource, str) or not _names(resource, server_url):
            raise AuthError(
                f"the protected resource metadata at {url} is for {str(resource)[:200]!r}, not {server_url}: "
                "not signing in (a token must only be asked for the server it is used with)"
            )
        return resource, document
    return server_url, None


def _names(resource: str, server_url: str) -> bool:
    """Whether ``resource`` identifies ``server_url``: the same origin, and its path a prefix of the server's."""
    theirs, ours = split_url(resource, "the metadata's resource"), split_url(server_url, "the server's URL")
    if (theirs.scheme.lower(), theirs.netloc.lower()) != (ours.scheme.lower(), ours.netloc.lower()):
        return False
    prefix = theirs.path.rstrip("/")
    return ours.path == prefix or ours.path.startswith(prefix + "/") or not prefix


async def authorization_server(http: httpx.AsyncClient, issuer: str, *, legacy: bool) -> AuthorizationServer:
    parts = split_url(issuer, "the authorization server's issuer")
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if path:
        candidates = [
            f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration",
        ]
    else:
        candidates = [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]
    for url in candidates:
        document = await _get_json(http, url)
        if document is None:
            continue
        named = document.get("issuer")
        if legacy and isinstance(named, str) and origin_of(named) == origin:
            # 2025-03-26 has no resource metadata: the server's origin hosts the metadata, and it names the issuer.
            issuer = named
        if named != issuer:
            raise AuthError(
                f"the authorization server metadata at {url} names issuer {str(document.get('issuer'))[:200]!r}, "
                f"not {issuer!r}: not using it (RFC 8414 §3.3)"
            )
        authorization, token = document.get("authorization_endpoint"), document.get("token_endpoint")
        if not isinstance(authorization, str) or not isinstance(token, str):
            raise AuthError(f"the authorization server metadata at {url} lacks its endpoints")
        methods = document.get("code_challenge_methods_supported")
        if isinstance(methods, list) and "S256" not in methods:
            raise AuthError(f"the authorization server {issuer} does not support PKCE with S256")
        registration = document.get("registration_endpoint")
        return AuthorizationServer(
            issuer, authorization, token, registration if isinstance(registration, str) else None, document
        )
    if legacy:  # 2025-03-26: no metadata at all, the default endpoints at the server's origin
        return AuthorizationServer(issuer, f"{origin}/authorize", f"{origin}/token", f"{origin}/register")
    raise AuthError(said(NO_METADATA, issuer=issuer))
