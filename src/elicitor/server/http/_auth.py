"""Protecting the HTTP endpoint with OAuth access tokens (the spec's Authorization section, server side).

basic/authorization.mdx (2025-11-25, 2026-07-28): the MCP server is an OAuth resource server. It publishes its
protected resource metadata (RFC 9728) at the well-known URL derived from its endpoint; answers a request without
a valid token with 401 and ``WWW-Authenticate: Bearer resource_metadata="…"`` (plus ``scope`` when it knows which
scopes are needed, and ``error="invalid_token"`` when a token was sent); answers a token that lacks a scope with
403 ``error="insufficient_scope"`` naming the scopes needed; and accepts only tokens issued for it (the audience is
this resource, RFC 8707), never passing them on.

A :class:`TokenVerifier` turns the bearer token into an :class:`AccessToken`: :class:`JwtVerifier` checks a JWT
against the authorization server's keys (joserfc), :class:`IntrospectionVerifier` asks the authorization server
(RFC 7662). The token's subject becomes the request's principal, the user that sessions, sealed ``requestState``,
URL-mode elicitations and tasks are bound to.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

logger = logging.getLogger("elicitor.auth")

_MAX_TOKEN = 16 * 1024
_JWKS_MIN_INTERVAL = 30.0


@dataclass(frozen=True, slots=True)
class AccessToken:
    """A verified access token: who it is for (``subject``), what it allows (``scopes``), and its claims."""

    subject: str
    scopes: frozenset[str] = frozenset()
    client_id: str | None = None
    expires_at: float | None = None
    claims: Mapping[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"AccessToken(subject={self.subject!r}, scopes={sorted(self.scopes)!r})"


class TokenVerifier(Protocol):
    """Checks a bearer token; returns ``None`` (or raises :class:`~elicitor.AuthError`) when it is not valid
    for this resource. Called for every request that carries a token: cache what is costly."""

    async def verify(self, token: str) -> AccessToken | None: ...


def _scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    """``scope`` (RFC 8693 §4.2, space-separated) or ``scp`` (a list, as some servers send)."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return frozenset(scope.split())
    scp = claims.get("scp")
    if isinstance(scp, list):
        return frozenset(s for s in scp if isinstance(s, str))
    return frozenset()


class JwtVerifier:
    """Verifies JWT access tokens (RFC 9068) with the authorization server's published keys.

    Checks the signature (keys from ``jwks_url``, fetched on first use and again, at most every 30 s, when a token
    names a key not yet seen), ``iss`` = ``issuer``, ``aud`` contains ``audience`` (this server's resource URL),
    ``exp`` (and ``nbf``) with ``leeway`` seconds, and a ``sub``.
    """

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks_url: str,
        algorithms: Sequence[str] = ("RS256", "ES256", "PS256", "EdDSA"),
        leeway: float = 30.0,
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self.jwks_url = jwks_url
        self._algorithms = list(algorithms)
        self._leeway = leeway
        self._keys: Any = None
        self._fetched_at = -_JWKS_MIN_INTERVAL
        self._lock = anyio.Lock()

    async def _key_set(self, refresh: bool) -> Any:
        from joserfc.jwk import KeySet

        async with self._lock:
            now = time.monotonic()
            if self._keys is None or (refresh and now - self._fetched_at >= _JWKS_MIN_INTERVAL):
                import httpx2 as httpx

                self._fetched_at = now
                try:
                    async with httpx.AsyncClient(timeout=10.0) as http:
                        response = await http.get(self.jwks_url)
                    response.raise_for_status()
                    self._keys = KeySet.import_key_set(response.json())
                except Exception as exc:  # the keys stay as they were; tokens they cannot check are refused
                    logger.warning("fetching the authorization server's keys from %s failed: %s", self.jwks_url, exc)
            return self._keys

    async def verify(self, token: str) -> AccessToken | None:
        """The token's claims if its signature, issuer, audience, times and subject check out, else ``None``."""
        from joserfc import jwt
        from joserfc.errors import InvalidKeyIdError, JoseError

        keys = await self._key_set(refresh=False)
        if keys is None:
            return None
        try:
            try:
                decoded = jwt.decode(token, keys, algorithms=self._algorithms)
            except InvalidKeyIdError:  # a new signing key: fetch the set again (rate-limited)
                keys = await self._key_set(refresh=True)
                decoded = jwt.decode(token, keys, algorithms=self._algorithms)
            claims = decoded.claims
            registry = jwt.JWTClaimsRegistry(
                leeway=int(self._leeway),
                iss={"essential": True, "value": self.issuer},
                aud={"essential": True, "value": self.audience},
                exp={"essential": True},
                sub={"essential": True},
            )
            registry.validate(claims)
        except (JoseError, ValueError, TypeError) as exc:
            logger.info("a token was refused: %s", exc)
            return None
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            return None
        client = claims.get("client_id")
        expires = claims.get("exp")
        return AccessToken(
            subject=subject,
            scopes=_scopes(claims),
            client_id=client if isinstance(client, str) else None,
            expires_at=float(expires) if isinstance(expires, int | float) else None,
            claims=dict(claims),
        )


class IntrospectionVerifier:
    """Asks the authorization server whether a token is active (RFC 7662), authenticating with this resource's
    own client credentials; accepts it only if it is active, unexpired, and (when the answer names an audience)
    issued for ``audience``. Answers are cached for ``cache_for`` seconds (never past the token's expiry)."""

    def __init__(
        self,
        *,
        url: str,
        client_id: str,
        client_secret: str,
        audience: str | None = None,
        cache_for: float = 60.0,
    ) -> None:
        self.url = url
        self.audience = audience
        self._credentials = (client_id, client_secret)
        self._cache_for = cache_for
        self._cache: dict[str, tuple[float, AccessToken | None]] = {}

    def __repr__(self) -> str:
        return f"IntrospectionVerifier(url={self.url!r})"

    async def verify(self, token: str) -> AccessToken | None:
        """What the authorization server says of the token (cached up to a minute, never past its expiry), or
        ``None`` when it is inactive or meant for another audience."""
        now = time.time()
        cached = self._cache.get(token)
        if cached is not None and cached[0] > now:
            return cached[1]
        import httpx2 as httpx

        try:
            async with httpx.AsyncClient(timeout=10.0, auth=httpx.BasicAuth(*self._credentials)) as http:
                response = await http.post(self.url, data={"token": token, "token_type_hint": "access_token"})
            answer = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError) as exc:
            logger.warning("token introspection at %s failed: %s", self.url, exc)
            return None
        result = self._read(answer, now)
        if len(self._cache) > 10_000:
            self._cache.clear()
        until = now + self._cache_for
        if result is not None and result.expires_at is not None:
            until = min(until, result.expires_at)
        self._cache[token] = (until, result)
        return result

    def _read(self, answer: object, now: float) -> AccessToken | None:
        if not isinstance(answer, dict) or answer.get("active") is not True:
            return None
        expires = answer.get("exp")
        if isinstance(expires, int | float) and expires <= now:
            return None
        audience = answer.get("aud")
        if self.audience is not None and audience is not None:
            listed = audience if isinstance(audience, list) else [audience]
            if self.audience not in listed:
                return None
        subject = answer.get("sub")
        if not isinstance(subject, str) or not subject:
            return None
        client = answer.get("client_id")
        return AccessToken(
            subject=subject,
            scopes=_scopes(answer),
            client_id=client if isinstance(client, str) else None,
            expires_at=float(expires) if isinstance(expires, int | float) else None,
            claims=dict(answer),
        )


@dataclass(frozen=True, slots=True)
class Protection:
    """``HttpApp(auth=...)``: how the endpoint checks tokens, and what its protected resource metadata says.

    Args:
        verifier: checks each request's bearer token.
        resource: this server's resource URL, exactly as clients reach the endpoint (``https://mcp.example.com/mcp``);
            the audience tokens must be issued for, and the ``resource`` of the metadata document.
        authorization_servers: the issuers clients should sign in with (the first is used by most clients).
        scopes_supported: scopes listed in the metadata document.
        required_scopes: scopes every request needs (named in the 401 challenge, so clients ask for them).
    """

    verifier: TokenVerifier
    resource: str
    authorization_servers: Sequence[str]
    scopes_supported: Sequence[str] | None = None
    required_scopes: Sequence[str] = ()
    resource_name: str | None = None

    def metadata(self) -> dict[str, Any]:
        """The protected resource metadata document (RFC 9728 §2)."""
        document: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": list(self.authorization_servers),
            "bearer_methods_supported": ["header"],
        }
        if self.scopes_supported is not None:
            document["scopes_supported"] = list(self.scopes_supported)
        if self.resource_name is not None:
            document["resource_name"] = self.resource_name
        return document

    def metadata_path(self, endpoint_path: str) -> str:
        """Where the document is served: the well-known prefix inserted before the endpoint's path (RFC 9728 §3.1)."""
        suffix = "" if endpoint_path == "/" else endpoint_path
        return "/.well-known/oauth-protected-resource" + suffix

    def challenge(self, metadata_url: str, *, error: str | None = None, scopes: Sequence[str] = ()) -> str:
        """The ``WWW-Authenticate`` value for a 401 or 403."""
        parts = []
        if error is not None:
            parts.append(f'error="{error}"')
        needed = list(dict.fromkeys([*self.required_scopes, *scopes]))
        if needed:
            parts.append(f'scope="{" ".join(needed)}"')
        parts.append(f'resource_metadata="{metadata_url}"')
        return "Bearer " + ", ".join(parts)

    async def check(self, authorization: str | None) -> AccessToken | str:
        """The verified token of an ``Authorization`` header, or the ``error`` to challenge with ("" for none)."""
        if authorization is None:
            return ""
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or len(token) > _MAX_TOKEN:
            return "invalid_token"
        try:
            verified = await self.verifier.verify(token)
        except Exception as exc:  # a verifier's failure refuses the token, never the server
            # The verifier is the application's: its error may quote the token it was given, which no log keeps.
            logger.warning("the token verifier failed: %s", str(exc).replace(token, "<the token>"))
            verified = None
        if verified is None:
            return "invalid_token"
        if not set(self.required_scopes) <= verified.scopes:
            return "insufficient_scope"
        return verified
