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
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, parse_qs, quote, urlsplit

import anyio
import httpx2 as httpx
from authlib.common.security import generate_token
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from ..._exceptions import AuthError
from ._challenge import Challenge, parse_challenge
from ._types import AuthorizationResponse, Authorizer, Tokens, TokenStore

if TYPE_CHECKING:
    from .._pace import Pace

logger = logging.getLogger("elicitor.auth")

MAX_STEP_UPS = 2
"""Re-authorizations for more scope per request: a server that keeps answering 403 gets its 403."""

SIGN_IN_KEPT_FOR = 600.0
"""Seconds after a sign-in link is first shown during which a sign-in interrupted part-way (the request that
needed it was cancelled or timed out by its caller) is offered again, the same link, to the next request."""

_MAX_DOCUMENT = 256 * 1024
_EXPIRY_MARGIN = 30.0


class MemoryTokenStore:
    """Tokens kept in this process only (the default: nothing is written anywhere)."""

    def __init__(self) -> None:
        self._tokens: dict[str, Tokens] = {}

    async def load(self, resource: str) -> Tokens | None:
        """The tokens kept for ``resource`` in this process, or ``None``."""
        return self._tokens.get(resource)

    async def save(self, resource: str, tokens: Tokens) -> None:
        """Keep ``tokens`` for ``resource`` until the process ends."""
        self._tokens[resource] = tokens

    async def delete(self, resource: str) -> bool:
        """Forget ``resource``'s tokens; whether there were any."""
        return self._tokens.pop(resource, None) is not None


class HeadlessAuthorizer:
    """An :class:`Authorizer` that approves by following the authorization URL itself.

    For tests and the conformance harness, whose authorization servers approve at once and redirect: it GETs the
    URL without following the redirect and reads ``code``, ``state`` and ``iss`` (or ``error``) from ``Location``.
    """

    def __init__(self, redirect_uri: str = "http://127.0.0.1:33418/callback") -> None:
        self._redirect_uri = redirect_uri

    @property
    def redirect_uri(self) -> str:
        """The redirect URI given at construction; nothing listens there."""
        return self._redirect_uri

    async def __aenter__(self) -> HeadlessAuthorizer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def authorize(self, url: str, state: str) -> AuthorizationResponse:
        """GET ``url`` and read the redirect's parameters (:class:`~elicitor.AuthError` if there is no redirect,
        it carries an error, or its ``state`` is not ``state``)."""
        async with httpx.AsyncClient(timeout=30.0, follow_redirects=False) as http:
            try:
                response = await http.get(url)
            except httpx.HTTPError as exc:
                raise AuthError(f"the authorization request failed: {exc}") from None
        location = response.headers.get("location")
        if response.status_code not in (301, 302, 303, 307, 308) or not location:
            raise AuthError(f"the authorization server answered HTTP {response.status_code} without a redirect")
        return parse_redirect(location, state)


def parse_redirect(location: str, state: str) -> AuthorizationResponse:
    """The parameters of the redirect back to the client; :class:`AuthError` for an error or a wrong ``state``."""
    query = {name: values[0] for name, values in parse_qs(_split(location, "the redirect").query).items() if values}
    if "error" in query:
        detail = query.get("error_description")
        raise AuthError(f"authorization refused: {query['error']}" + (f" ({detail})" if detail else ""), query["error"])
    if query.get("state") != state:
        raise AuthError("the authorization response's state does not match the request (a forged redirect?)")
    code = query.get("code")
    if not code:
        raise AuthError("the authorization response has no code")
    return AuthorizationResponse(code=code, state=query.get("state"), iss=query.get("iss"))


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


@dataclass(slots=True)
class _Server:
    """What discovery found for one authorization server."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None
    metadata: dict[str, Any] = field(default_factory=dict)

    def supports(self, key: str, value: str) -> bool:
        listed = self.metadata.get(key)
        return isinstance(listed, list) and value in listed


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
        """The token to send, loaded from the store the first time; refreshed first when it has expired."""
        if not self._loaded:
            self._loaded = True
            self._tokens = await self._store.load(server_url)
        tokens = self._tokens
        if tokens is not None and tokens.expires_at is not None and tokens.expires_at < time.time() + _EXPIRY_MARGIN:
            if tokens.refresh_token is not None:
                async with self._lock:
                    if self._tokens is tokens:
                        await self._refresh(server_url, tokens)
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
            resource, metadata = await _resource_metadata(http, server_url, challenge)
            issuers = metadata.get("authorization_servers") if metadata is not None else None
            if metadata is not None and (
                not isinstance(issuers, list) or not issuers or not isinstance(issuers[0], str)
            ):
                raise AuthError("the server's protected resource metadata names no authorization server")
            issuer = issuers[0] if isinstance(issuers, list) else _origin(server_url)
            server = await _authorization_server(http, issuer, legacy=metadata is None)
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
                    tokens = await _token_request(http, server, form, client_id, client_secret, method)
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
        self, challenge: Challenge, metadata: Mapping[str, Any] | None, server: _Server, step_up: bool
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

    async def _identify(self, http: httpx.AsyncClient, server: _Server) -> tuple[str, str | None, str]:
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

    async def _register(self, http: httpx.AsyncClient, server: _Server) -> tuple[str, str | None, str]:
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
        document = await _post_json(http, server.registration_endpoint, body, "client registration")
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
        server = _Server(tokens.issuer or "", "", endpoint, None)
        form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token}
        if "resource" in tokens.extra:
            form["resource"] = tokens.extra["resource"]
        method = tokens.extra.get("auth_method", "none")
        async with httpx.AsyncClient(timeout=30.0) as http:
            fresh = await _token_request(http, server, form, tokens.client_id, tokens.client_secret, method)
        fresh = replace(
            tokens,
            access_token=fresh.access_token,
            token_type=fresh.token_type,
            refresh_token=fresh.refresh_token or tokens.refresh_token,
            expires_at=fresh.expires_at,
            scope=fresh.scope or tokens.scope,
        )
        self._tokens = fresh
        await self._store.save(server_url, fresh)
        return fresh


# ---- the documents -------------------------------------------------------------------------------------------


def _split(url: str, what: str) -> SplitResult:
    """``urlsplit``, with a URL from a peer that cannot be parsed (``http://[x``) refused as an :class:`AuthError`."""
    try:
        return urlsplit(url)
    except ValueError:
        raise AuthError(f"{what} is not a valid URL: {url[:200]!r}") from None


def _origin(url: str) -> str:
    parts = _split(url, "the URL")
    return f"{parts.scheme}://{parts.netloc}"


def _only(server: _Server, method: str) -> bool:
    listed = server.metadata.get("token_endpoint_auth_methods_supported")
    return isinstance(listed, list) and listed == [method]


async def _get_json(http: httpx.AsyncClient, url: str) -> dict[str, Any] | None:
    """A JSON object from ``url``, or ``None`` when there is none there (any 4xx, a non-object)."""
    try:
        response = await http.get(url, headers={"accept": "application/json"})
    except httpx.HTTPError as exc:
        logger.debug("fetching %s failed: %s", url, exc)
        return None
    if response.status_code != 200 or len(response.content) > _MAX_DOCUMENT:
        return None
    try:
        document = response.json()
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


async def _post_json(http: httpx.AsyncClient, url: str, body: dict[str, Any], what: str) -> dict[str, Any]:
    try:
        response = await http.post(url, json=body)
    except httpx.HTTPError as exc:
        raise AuthError(f"{what} failed: {exc}") from None
    return _answer(response, what)


def _answer(response: httpx.Response, what: str) -> dict[str, Any]:
    try:
        document = response.json() if len(response.content) <= _MAX_DOCUMENT else None
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


async def _resource_metadata(
    http: httpx.AsyncClient, server_url: str, challenge: Challenge
) -> tuple[str, dict[str, Any] | None]:
    """The resource to ask a token for, and the server's protected resource metadata (``None``: it has none)."""
    parts = _split(server_url, "the server's URL")
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
    theirs, ours = _split(resource, "the metadata's resource"), _split(server_url, "the server's URL")
    if (theirs.scheme.lower(), theirs.netloc.lower()) != (ours.scheme.lower(), ours.netloc.lower()):
        return False
    prefix = theirs.path.rstrip("/")
    return ours.path == prefix or ours.path.startswith(prefix + "/") or not prefix


async def _authorization_server(http: httpx.AsyncClient, issuer: str, *, legacy: bool) -> _Server:
    parts = _split(issuer, "the authorization server's issuer")
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
        if legacy and isinstance(named, str) and _origin(named) == origin:
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
        return _Server(issuer, authorization, token, registration if isinstance(registration, str) else None, document)
    if legacy:  # 2025-03-26: no metadata at all, the default endpoints at the server's origin
        return _Server(issuer, f"{origin}/authorize", f"{origin}/token", f"{origin}/register")
    raise AuthError(f"no authorization server metadata found for {issuer}")


def _check_iss(answer: AuthorizationResponse, server: _Server) -> None:
    """RFC 9207: a present ``iss`` must be the issuer exactly (no normalisation); required when advertised."""
    if answer.iss is not None:
        if answer.iss != server.issuer:
            raise AuthError(
                f"the authorization response comes from issuer {answer.iss[:200]!r}, not {server.issuer!r} "
                "(a mix-up attack?): not using its code"
            )
    elif server.metadata.get("authorization_response_iss_parameter_supported") is True:
        raise AuthError("the authorization response lacks the iss parameter its server advertises (RFC 9207)")


async def _token_request(
    http: httpx.AsyncClient,
    server: _Server,
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
    refresh = document.get("refresh_token")
    scope = document.get("scope")
    return Tokens(
        access_token=access,
        refresh_token=refresh if isinstance(refresh, str) else None,
        expires_at=time.time() + expires if isinstance(expires, int | float) and expires > 0 else None,
        scope=scope if isinstance(scope, str) else None,
    )


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
            resource, metadata = await _resource_metadata(http, server_url, challenge)
            issuers = metadata.get("authorization_servers") if metadata is not None else None
            if not isinstance(issuers, list) or not issuers or not isinstance(issuers[0], str):
                if metadata is not None:
                    raise AuthError("the server's protected resource metadata names no authorization server")
                issuers = [_origin(server_url)]
            server = await _authorization_server(http, issuers[0], legacy=metadata is None)
            scopes = [s for s in self._choose_scopes(challenge, metadata, server, step_up) if s != "offline_access"]
            method = "client_secret_post" if _only(server, "client_secret_post") else "client_secret_basic"
            form = {"grant_type": "client_credentials", "resource": resource}
            if scopes:
                form["scope"] = " ".join(scopes)
            tokens = await _token_request(http, server, form, self._client_id, self._client_secret, method)
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
