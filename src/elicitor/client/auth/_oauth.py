"""Signing in to a protected MCP server: the spec's Authorization flow as an ``httpx`` auth hook.

basic/authorization.mdx (2025-11-25, 2026-07-28), in the order the client meets it:

1. The server answers 401 with a ``WWW-Authenticate`` challenge. The client finds the protected resource metadata
   (RFC 9728): the challenge's ``resource_metadata`` URL, else the path-based then the root well-known URL. Its
   ``resource`` must name this server (the same origin, and a prefix of its path), else sign-in stops: a token for
   another resource must never be requested for this one.
2. Its first ``authorization_servers`` entry is the issuer. The client fetches the issuer's metadata from the
   well-known URLs the spec lists (RFC 8414 and OpenID discovery, path-inserted then path-appended) and uses it
   only if its ``issuer`` is exactly the issuer it asked (RFC 8414 §3.3). A server without metadata falls back to
   the 2025-03-26 rules: the server's origin is the authorization server, with ``/authorize``, ``/token`` and
   ``/register``.
3. The client identifies itself in the spec's order: pre-registered credentials, else a Client ID Metadata Document
   URL when the server supports them, else dynamic registration (RFC 7591). A registration belongs to its issuer:
   when the resource moves to another authorization server the client registers again.
4. Authorization code with PKCE S256 (RFC 7636) and the resource indicator (RFC 8707), through an
   :class:`Authorizer` (a person's browser, or a headless client in tests). The redirect's ``state`` must match;
   its ``iss`` (RFC 9207) must equal the issuer by plain string comparison when present, and must be present when
   the server advertises it. A sign-in whose request is cancelled part-way is kept: the next request that needs
   the same sign-in shows the same link (same ``state``, same PKCE verifier), for :data:`SIGN_IN_KEPT_FOR`.
5. The token request authenticates as the registration says (``client_secret_basic``, ``client_secret_post`` or
   ``none``). Later 401s refresh the token when there is a refresh token; a 403 ``insufficient_scope`` asks again
   for the union of the scopes held and the scopes challenged ("Scope Challenge Handling"), a bounded number of
   times.

Scopes come from the challenge, else from the resource metadata's ``scopes_supported``, else are left out;
``offline_access`` is added when the authorization server lists it (SEP-2207), to get a refresh token.

Steps 1 and 2 are ``_discovery``'s, the requests of steps 3 and 5 ``_endpoints``'; this module is the flow that
ties them, the registration and the PKCE sign-in, and the tokens it holds and refreshes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
from authlib.common.security import generate_token
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from ..._exceptions import AuthError
from ._challenge import Challenge, parse_challenge
from ._discovery import AuthorizationServer, authorization_server, origin_of, resource_metadata
from ._endpoints import post_json, token_request
from ._headless import HeadlessAuthorizer
from ._storage import MemoryTokenStore
from ._types import AuthorizationResponse, Authorizer, Tokens, TokenStore

if TYPE_CHECKING:
    from .._pace import Pace

logger = logging.getLogger("elicitor.auth")

MAX_STEP_UPS = 2
"""Re-authorizations for more scope per request: a server that keeps answering 403 gets its 403."""

SIGN_IN_KEPT_FOR = 600.0
"""Seconds after a sign-in link is first shown during which a sign-in interrupted part-way (the request that
needed it was cancelled or timed out by its caller) is offered again, the same link, to the next request."""

EXPIRY_MARGIN = 30.0
"""Seconds before its expiry an access token is refreshed, at most: a request sent with it just before then still
reaches the server in time."""
EXPIRY_FRACTION = 0.25
"""The part of a token's lifetime that margin is at most: a token that lives 30 s or less (some authorization
servers issue such) is refreshed once most of its life is over, not before every request."""


def refresh_due(tokens: Tokens, now: float) -> bool:
    """Whether ``tokens``' access token is to be refreshed before it is sent (at ``now``, a Unix time): within
    :data:`EXPIRY_MARGIN` of its expiry, or a quarter of its lifetime when that is shorter."""
    if tokens.expires_at is None:
        return False
    margin = EXPIRY_MARGIN if tokens.lifetime is None else min(EXPIRY_MARGIN, tokens.lifetime * EXPIRY_FRACTION)
    return tokens.expires_at < now + margin


class BearerToken(httpx.Auth):
    """A fixed access token on every request (a token you obtained elsewhere)."""

    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def __repr__(self) -> str:
        return "BearerToken(…)"

    def auth_flow(self, request: httpx.Request) -> Any:
        request.headers["Authorization"] = self._header
        yield request


@dataclass(slots=True)
class _Pending:
    """A sign-in shown to a person and not finished: its link, ``state`` and PKCE verifier, offered again to the
    next request that needs the same sign-in (the same issuer, resource, client, scopes and redirect URI) until
    ``until``, so a person who opened the link before the request was cancelled can still complete it there."""

    key: tuple[str, str, str, str, str]
    url: str
    state: str
    verifier: str
    until: float
    answer: AuthorizationResponse | None = None
    """The redirect's code, once it came back: a cancellation before the token request spends it next time."""

    @classmethod
    def start(cls, key: tuple[str, str, str, str, str], endpoint: str, scopes: list[str]) -> _Pending:
        _, resource, client_id, _, redirect_uri = key
        state, verifier = generate_token(32), generate_token(64)
        url = prepare_grant_uri(
            endpoint,
            client_id,
            "code",
            redirect_uri=redirect_uri,
            scope=" ".join(scopes) if scopes else None,
            state=state,
            code_challenge=create_s256_code_challenge(verifier),
            code_challenge_method="S256",
            resource=resource,
        )
        return cls(key, url, state, verifier, time.monotonic() + SIGN_IN_KEPT_FOR)


class OAuth(httpx.Auth):
    """Sign in to a protected MCP server when it asks (401), per the spec's Authorization section.

    Pass it as ``Client.http(url, auth=OAuth(...))``; one ``OAuth`` per server (it holds that server's tokens).

    Args:
        authorizer: how the authorization URL gets approved (default :class:`HeadlessAuthorizer`, for servers that
            approve without a person; ``elicitor connect`` uses a browser with a loopback redirect).
        store: where tokens are kept between runs (default: in memory).
        client_id: a pre-registered client id (used first, when given).
        client_secret: the pre-registered client's secret, if it has one.
        client_metadata_url: this client's Client ID Metadata Document URL, used as its ``client_id`` where the
            authorization server supports such documents.
        client_name: shown by the authorization server when the client registers.
        scopes: scopes to ask for when the server's challenge and metadata name none.
    """

    requires_response_body = False

    def __init__(
        self,
        authorizer: Authorizer | None = None,
        *,
        store: TokenStore | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        client_metadata_url: str | None = None,
        client_name: str = "elicitor",
        scopes: list[str] | None = None,
    ) -> None:
        self._authorizer: Authorizer = authorizer if authorizer is not None else HeadlessAuthorizer()
        self._store: TokenStore = store if store is not None else MemoryTokenStore()
        self._client_id = client_id
        self._client_secret = client_secret
        self._client_metadata_url = client_metadata_url
        self._client_name = client_name
        self._scopes = scopes
        self._lock = anyio.Lock()
        """One sign-in at a time: a request that meets a 401 meanwhile waits for it and uses its token."""
        self._tokens: Tokens | None = None
        self._loaded = False
        self._requested: list[str] = []
        self._registrations: dict[str, tuple[str, str | None, str]] = {}
        """Dynamic registrations by issuer: one per authorization server, whatever becomes of the sign-in."""
        self._paces: list[Pace] = []
        self._pending: _Pending | None = None
        """The sign-in shown and not finished, if any (see :class:`_Pending`)."""

    def __repr__(self) -> str:
        return f"OAuth(client_name={self._client_name!r})"

    def pace_with(self, pace: Pace) -> Callable[[], None]:
        """Stop ``pace``'s deadlines while a person signs in (``Client.http(auth=...)`` does this: a client's probe,
        handshake and request clocks are about the server, and a person may take minutes); returns the undo."""
        self._paces.append(pace)

        def stop() -> None:
            with suppress(ValueError):
                self._paces.remove(pace)

        return stop

    @contextmanager
    def _person(self) -> Iterator[None]:
        with ExitStack() as stack:
            for pace in list(self._paces):
                stack.enter_context(pace.person())
            yield

    # ---- the hook --------------------------------------------------------------------------------------------

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        server_url = str(request.url.copy_with(query=None, fragment=None))
        tokens = await self._current(server_url)
        if tokens is not None:
            request.headers["Authorization"] = f"Bearer {tokens.access_token}"
        response = yield request
        signed_in = step_ups = 0
        while True:
            challenge = parse_challenge(response.headers.get_list("www-authenticate"))
            if response.status_code == 401 and signed_in < 2:
                # First 401: refresh when possible, else sign in; a second: sign in afresh; a third is the answer.
                signed_in += 1
                tokens = await self._after_401(server_url, request, challenge, may_refresh=signed_in == 1)
            elif response.status_code == 403 and challenge.error == "insufficient_scope" and step_ups < MAX_STEP_UPS:
                step_ups += 1
                tokens = await self._sign_in(server_url, challenge, step_up=True)
            else:
                return
            request.headers["Authorization"] = f"Bearer {tokens.access_token}"
            response = yield request

    async def _current(self, server_url: str) -> Tokens | None:
        """The token to send, loaded from the store the first time; refreshed first when it has expired.

        A refresh the authorization server refuses (the refresh token expired or was revoked: the usual case for
        tokens kept since yesterday) is no reason to fail the request: the expired token is sent, without its
        refresh token, and the server's 401 signs the person in again, once, as any 401 does."""
        if not self._loaded:
            self._loaded = True
            self._tokens = await self._store.load(server_url)
        tokens = self._tokens
        if tokens is not None and refresh_due(tokens, time.time()):
            if tokens.refresh_token is not None:
                async with self._lock:
                    if self._tokens is tokens:
                        try:
                            await self._refresh(server_url, tokens)
                        except AuthError as exc:
                            logger.info("refreshing the token failed (%s); signing in again if the server asks", exc)
                            self._tokens = replace(tokens, refresh_token=None)  # not tried again on its 401
            return self._tokens
        return tokens

    async def _after_401(
        self, server_url: str, request: httpx.Request, challenge: Challenge, *, may_refresh: bool
    ) -> Tokens:
        sent = request.headers.get("authorization", "")
        async with self._lock:
            tokens = self._tokens
            if tokens is not None and sent != f"Bearer {tokens.access_token}":
                return tokens  # another request signed in meanwhile
            if tokens is not None and tokens.refresh_token is not None and may_refresh:
                try:
                    return await self._refresh(server_url, tokens)
                except AuthError as exc:
                    logger.info("refreshing the token failed (%s); signing in again", exc)
            return await self._guarded(server_url, challenge, step_up=False)

    async def _sign_in(self, server_url: str, challenge: Challenge, *, step_up: bool) -> Tokens:
        async with self._lock:
            return await self._guarded(server_url, challenge, step_up=step_up)

    async def _guarded(self, server_url: str, challenge: Challenge, *, step_up: bool) -> Tokens:
        """Sign in; whatever a peer's documents make go wrong ends as an :class:`AuthError`, never another error."""
        try:
            with self._person():  # the person's time, not the server's: the client's clocks stop meanwhile
                return await self._sign_in_locked(server_url, challenge, step_up=step_up)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise AuthError(f"an answer during sign-in could not be used: {exc!r}"[:300]) from None

    # ---- discovery -------------------------------------------------------------------------------------------

    async def _sign_in_locked(self, server_url: str, challenge: Challenge, *, step_up: bool) -> Tokens:
        async with httpx.AsyncClient(timeout=30.0, follow_redirects=False) as http:
            resource, metadata = await resource_metadata(http, server_url, challenge)
            issuers = metadata.get("authorization_servers") if metadata is not None else None
            if metadata is not None and (
                not isinstance(issuers, list) or not issuers or not isinstance(issuers[0], str)
            ):
                raise AuthError("the server's protected resource metadata names no authorization server")
            issuer = issuers[0] if isinstance(issuers, list) else origin_of(server_url)
            server = await authorization_server(http, issuer, legacy=metadata is None)
            scopes = self._choose_scopes(challenge, metadata, server, step_up)
            async with self._authorizer as authorizer:  # first: a loopback listener's port goes in the registration
                client_id, client_secret, method = await self._identify(http, server)
                redirect_uri = authorizer.redirect_uri
                key = (server.issuer, resource, client_id, " ".join(scopes), redirect_uri)
                pending = self._pending
                if pending is None or pending.key != key or pending.until < time.monotonic():
                    pending = self._pending = _Pending.start(key, server.authorization_endpoint, scopes)
                try:
                    answer = pending.answer
                    if answer is None:  # else the person came back before a cancellation: spend that code
                        answer = pending.answer = await authorizer.authorize(pending.url, pending.state)
                    _check_iss(answer, server)
                    form = {
                        "grant_type": "authorization_code",
                        "code": answer.code,
                        "redirect_uri": redirect_uri,
                        "code_verifier": pending.verifier,
                        "resource": resource,
                    }
                    tokens = await token_request(http, server, form, client_id, client_secret, method)
                except Exception:
                    self._pending = None  # refused, timed out, or broken: the next sign-in starts afresh
                    raise
                self._pending = None  # done: a cancellation (a BaseException) alone keeps the sign-in for next time
        tokens = replace(
            tokens,
            scope=tokens.scope or (" ".join(scopes) if scopes else None),
            issuer=server.issuer,
            client_id=client_id,
            client_secret=client_secret,
            extra={"resource": resource, "token_endpoint": server.token_endpoint, "auth_method": method},
        )
        self._requested = scopes
        self._tokens = tokens
        await self._store.save(server_url, tokens)
        return tokens

    def _choose_scopes(
        self, challenge: Challenge, metadata: Mapping[str, Any] | None, server: AuthorizationServer, step_up: bool
    ) -> list[str]:
        supported = metadata.get("scopes_supported") if metadata is not None else None
        if challenge.scopes:
            scopes = challenge.scopes
        elif isinstance(supported, list) and all(isinstance(s, str) for s in supported) and supported:
            scopes = list(supported)
        else:
            scopes = list(self._scopes or [])
        if step_up:  # keep what was granted: a step-up must not lose the scopes other operations need
            scopes = list(dict.fromkeys([*self._requested, *scopes]))
        if scopes and server.supports("scopes_supported", "offline_access") and "offline_access" not in scopes:
            scopes.append("offline_access")
        return scopes

    async def _identify(self, http: httpx.AsyncClient, server: AuthorizationServer) -> tuple[str, str | None, str]:
        """client_id, client_secret and token endpoint auth method, in the spec's order of preference."""
        if self._client_id is not None:
            method = "none"
            if self._client_secret is not None:
                method = "client_secret_post" if _only(server, "client_secret_post") else "client_secret_basic"
            return self._client_id, self._client_secret, method
        known = self._tokens
        if known is not None and known.issuer == server.issuer and known.client_id is not None:
            return known.client_id, known.client_secret, known.extra.get("auth_method", "none")
        if self._client_metadata_url is not None and server.metadata.get("client_id_metadata_document_supported"):
            return self._client_metadata_url, None, "none"
        registered = self._registrations.get(server.issuer)
        if registered is not None:  # a sign-in that did not finish still registered us: one registration
            return registered
        if server.registration_endpoint is None:
            raise AuthError(
                f"the authorization server {server.issuer} offers no registration, and no client_id was given"
            )
        registered = self._registrations[server.issuer] = await self._register(http, server)
        return registered

    async def _register(self, http: httpx.AsyncClient, server: AuthorizationServer) -> tuple[str, str | None, str]:
        assert server.registration_endpoint is not None
        supported = server.metadata.get("token_endpoint_auth_methods_supported")
        wanted = "none"
        if isinstance(supported, list) and "none" not in supported:
            wanted = next((m for m in ("client_secret_basic", "client_secret_post") if m in supported), "none")
        body = {
            "client_name": self._client_name,
            "redirect_uris": [self._authorizer.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": wanted,
            "application_type": "native",
        }
        document = await post_json(http, server.registration_endpoint, body, "client registration")
        client_id = document.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise AuthError("the client registration answer has no client_id")
        secret = document.get("client_secret")
        method = document.get("token_endpoint_auth_method")
        if not isinstance(method, str):
            method = wanted if wanted != "none" or not isinstance(secret, str) else "client_secret_basic"
        return client_id, secret if isinstance(secret, str) else None, method

    async def _refresh(self, server_url: str, tokens: Tokens) -> Tokens:
        assert tokens.refresh_token is not None
        endpoint = tokens.extra.get("token_endpoint")
        if endpoint is None or tokens.client_id is None:
            raise AuthError("the stored token cannot be refreshed (its authorization server is unknown)")
        server = AuthorizationServer(tokens.issuer or "", "", endpoint, None)
        form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token}
        if "resource" in tokens.extra:
            form["resource"] = tokens.extra["resource"]
        method = tokens.extra.get("auth_method", "none")
        async with httpx.AsyncClient(timeout=30.0) as http:
            fresh = await token_request(http, server, form, tokens.client_id, tokens.client_secret, method)
        fresh = replace(
            tokens,
            access_token=fresh.access_token,
            token_type=fresh.token_type,
            refresh_token=fresh.refresh_token or tokens.refresh_token,
            expires_at=fresh.expires_at,
            lifetime=fresh.lifetime,
            scope=fresh.scope or tokens.scope,
        )
        self._tokens = fresh
        await self._store.save(server_url, fresh)
        return fresh


# ---- the documents -------------------------------------------------------------------------------------------


def _only(server: AuthorizationServer, method: str) -> bool:
    listed = server.metadata.get("token_endpoint_auth_methods_supported")
    return isinstance(listed, list) and listed == [method]


def _check_iss(answer: AuthorizationResponse, server: AuthorizationServer) -> None:
    """RFC 9207: a present ``iss`` must be the issuer exactly (no normalisation); required when advertised."""
    if answer.iss is not None:
        if answer.iss != server.issuer:
            raise AuthError(
                f"the authorization response comes from issuer {answer.iss[:200]!r}, not {server.issuer!r} "
                "(a mix-up attack?): not using its code"
            )
    elif server.metadata.get("authorization_response_iss_parameter_supported") is True:
        raise AuthError("the authorization response lacks the iss parameter its server advertises (RFC 9207)")


class ClientCredentials(OAuth):
    """Sign in as a program, not a person: the client credentials grant (OAuth 2.1 §4.2) with pre-registered
    credentials, after the same discovery as :class:`OAuth` (resource metadata, issuer metadata, the resource
    indicator and scope selection). For services and scripts talking to a protected server on their own behalf.
    """

    def __init__(
        self,
        client_id: str,
        client_secret: str,
        *,
        store: TokenStore | None = None,
        scopes: list[str] | None = None,
    ) -> None:
        super().__init__(store=store, client_id=client_id, client_secret=client_secret, scopes=scopes)

    def __repr__(self) -> str:
        return f"ClientCredentials(client_id={self._client_id!r})"

    async def _sign_in_locked(self, server_url: str, challenge: Challenge, *, step_up: bool) -> Tokens:
        assert self._client_id is not None and self._client_secret is not None
        async with httpx.AsyncClient(timeout=30.0, follow_redirects=False) as http:
            resource, metadata = await resource_metadata(http, server_url, challenge)
            issuers = metadata.get("authorization_servers") if metadata is not None else None
            if not isinstance(issuers, list) or not issuers or not isinstance(issuers[0], str):
                if metadata is not None:
                    raise AuthError("the server's protected resource metadata names no authorization server")
                issuers = [origin_of(server_url)]
            server = await authorization_server(http, issuers[0], legacy=metadata is None)
            scopes = [s for s in self._choose_scopes(challenge, metadata, server, step_up) if s != "offline_access"]
            method = "client_secret_post" if _only(server, "client_secret_post") else "client_secret_basic"
            form = {"grant_type": "client_credentials", "resource": resource}
            if scopes:
                form["scope"] = " ".join(scopes)
            tokens = await token_request(http, server, form, self._client_id, self._client_secret, method)
        tokens = replace(
            tokens,
            refresh_token=None,  # a program asks again rather than refreshing
            scope=tokens.scope or (" ".join(scopes) if scopes else None),
            issuer=server.issuer,
            client_id=self._client_id,
            extra={"resource": resource, "token_endpoint": server.token_endpoint, "auth_method": method},
        )
        self._requested = scopes
        self._tokens = tokens
        await self._store.save(server_url, tokens)
        return tokens
