"""The client's sign-in (client/auth/): the challenge parser, and OAuth end to end against a real authorization
server and a protected elicitor server on loopback (the conformance harness's auth/* scenarios are in
scripts/conformance.py)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import itertools
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet

from elicitor import (
    Accepted,
    AuthError,
    Client,
    Context,
    IntrospectionVerifier,
    JSONRPCError,
    JwtVerifier,
    Protection,
    ScriptedHandler,
    Server,
)
from elicitor.client.auth import Challenge, ClientCredentials, MemoryTokenStore, OAuth, parse_challenge
from elicitor.client.auth._headless import parse_redirect

from .conftest import serving

# ---- the challenge parser ------------------------------------------------------------------------------------


def test_a_bearer_challenge_is_read_among_others() -> None:
    header = 'Basic realm="x", Bearer error="insufficient_scope", scope="a b", resource_metadata="https://s/m"'
    assert parse_challenge([header]) == Challenge("https://s/m", "a b", "insufficient_scope")
    assert parse_challenge(["Bearer"]) == Challenge()
    assert parse_challenge(['Bearer scope="quoted \\"q\\""']).scope == 'quoted "q"'
    assert parse_challenge(["Digest nonce=1", 'Bearer scope="s"']).scopes == ["s"]


@given(st.text(max_size=300))
def test_the_challenge_parser_takes_any_text(header: str) -> None:
    challenge = parse_challenge([header])  # never raises, always ends
    assert isinstance(challenge, Challenge)


_value = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40)


@given(_value, _value, st.sampled_from(["invalid_token", "insufficient_scope"]))
def test_quoted_values_round_trip(scope: str, metadata: str, error: str) -> None:
    def quote(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    header = f"Bearer error={error}, scope={quote(scope)}, resource_metadata={quote(metadata)}"
    assert parse_challenge([header]) == Challenge(metadata, scope, error)


def test_a_redirect_must_carry_the_state_and_a_code() -> None:
    assert parse_redirect("http://127.0.0.1/cb?code=c&state=s&iss=i", "s").iss == "i"
    with pytest.raises(AuthError, match="state does not match"):
        parse_redirect("http://127.0.0.1/cb?code=c&state=other", "s")
    with pytest.raises(AuthError, match="access_denied") as refused:
        parse_redirect("http://127.0.0.1/cb?error=access_denied&state=s", "s")
    assert refused.value.error == "access_denied"
    with pytest.raises(AuthError, match="no code"):
        parse_redirect("http://127.0.0.1/cb?state=s", "s")
    with pytest.raises(AuthError, match="not a valid URL"):  # found by fuzz/targets/auth.py: was a ValueError
        parse_redirect("http://1l[ba\x00ck?code=c&state=s", "s")


# ---- a real authorization server and a protected server, on one loopback port ------------------------------

server = Server("protected")
SIGNING_KEY = ECKey.generate_key("P-256", parameters={"kid": "as"})
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.tool()
async def greet(ctx: Context) -> str:
    outcome = await ctx.elicit("Your name?", NAME)
    return f"hello {outcome.data['name']}" if isinstance(outcome, Accepted) else outcome.action


@server.tool(scopes=["mcp:admin"])
async def admin(ctx: Context) -> str:
    return f"admin done for {ctx.principal}" if ctx.principal else "admin done"


@dataclass
class Grant:
    scopes: list[str]
    resource: str
    subject: str = "ada"


@dataclass
class Deployment:
    """An authorization server at ``/as`` and the elicitor server at ``/mcp`` behind a bearer check."""

    base: str = ""
    jwt: bool = False
    introspect: bool = False
    """Opaque tokens checked by elicitor's HttpApp(auth=Protection(IntrospectionVerifier)) through /as/introspect."""
    """Issue JWTs and put elicitor's own HttpApp(auth=Protection(JwtVerifier)) at /mcp (else an opaque-token check)."""
    wrong_iss: bool = False
    resource_override: str | None = None
    counter: itertools.count[int] = field(default_factory=itertools.count)
    registrations: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[dict[str, str]] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    codes: dict[str, tuple[str, Grant]] = field(default_factory=dict)
    access: dict[str, Grant] = field(default_factory=dict)
    refresh: dict[str, Grant] = field(default_factory=dict)
    introspections: list[str] = field(default_factory=list)
    introspection_cache: float = 60.0
    lifetime: int = 3600
    """The ``expires_in`` of the access tokens issued."""

    @property
    def issuer(self) -> str:
        return f"{self.base}/as"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.mcp(scope, receive, send)
            return None
        path = scope["path"]
        body = b""
        while scope["method"] == "POST":
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if path == "/as/introspect":
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            self.introspections.append(form["token"])
            if headers.get("authorization") != "Basic " + base64.b64encode(b"rs:rs-secret").decode():
                return await _json(send, 401, {"error": "invalid_client"})
            found = self.access.get(form["token"])
            if found is None:
                return await _json(send, 200, {"active": False})
            answer = {"active": True, "sub": found.subject, "scope": " ".join(found.scopes), "aud": found.resource}
            return await _json(send, 200, {**answer, "exp": int(time.time()) + 600})
        if (self.jwt or self.introspect) and path in ("/mcp", "/.well-known/oauth-protected-resource/mcp"):
            await self.guarded(scope, _replay(body, receive), send)
            return None
        if path == "/.well-known/oauth-protected-resource/mcp":
            return await _json(
                send,
                200,
                {
                    "resource": self.resource_override or f"{self.base}/mcp",
                    "authorization_servers": [self.issuer],
                    "scopes_supported": ["mcp:basic"],
                },
            )
        if path == "/.well-known/oauth-authorization-server/as":
            return await _json(
                send,
                200,
                {
                    "issuer": self.issuer,
                    "authorization_endpoint": f"{self.issuer}/authorize",
                    "token_endpoint": f"{self.issuer}/token",
                    "registration_endpoint": f"{self.issuer}/register",
                    "code_challenge_methods_supported": ["S256"],
                    "authorization_response_iss_parameter_supported": True,
                    "token_endpoint_auth_methods_supported": ["none"],
                    "scopes_supported": ["mcp:basic", "mcp:admin", "offline_access"],
                },
            )
        if path == "/as/jwks":
            return await _json(send, 200, dict(KeySet([SIGNING_KEY]).as_dict(private=False)))
        if path == "/as/register":
            self.registrations.append(json.loads(body))
            return await _json(send, 201, {"client_id": f"client-{next(self.counter)}"})
        if path == "/as/authorize":
            self.authorizations.append(query)
            assert query["code_challenge_method"] == "S256"
            code = f"code-{next(self.counter)}"
            self.codes[code] = (query["code_challenge"], Grant(query.get("scope", "").split(), query["resource"]))
            iss = "https://elsewhere.example" if self.wrong_iss else self.issuer
            location = f"{query['redirect_uri']}?" + urlencode({"code": code, "state": query["state"], "iss": iss})
            await send({"type": "http.response.start", "status": 302, "headers": [(b"location", location.encode())]})
            await send({"type": "http.response.body", "body": b""})
            return None
        if path == "/as/token":
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            self.token_requests.append(form)
            if form["grant_type"] == "authorization_code":
                challenge, grant = self.codes.pop(form["code"])
                digest = hashlib.sha256(form["code_verifier"].encode()).digest()
                if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != challenge:
                    return await _json(send, 400, {"error": "invalid_grant"})
            elif form["grant_type"] == "client_credentials":
                expected = "Basic " + base64.b64encode(b"svc:svc-secret").decode()
                if headers.get("authorization") != expected:
                    return await _json(send, 401, {"error": "invalid_client"})
                grant = Grant(form.get("scope", "").split(), form["resource"], subject="svc")
            elif form["refresh_token"] in self.refresh:
                grant = self.refresh[form["refresh_token"]]
            else:  # revoked, or never issued
                return await _json(send, 400, {"error": "invalid_grant"})
            token, refresh = f"at-{next(self.counter)}", f"rt-{next(self.counter)}"
            if self.jwt:
                claims = {
                    "iss": self.issuer,
                    "aud": grant.resource,
                    "sub": grant.subject,
                    "exp": int(time.time()) + 600,
                }
                token = jwt.encode(
                    {"alg": "ES256", "kid": "as"}, {**claims, "scope": " ".join(grant.scopes)}, SIGNING_KEY
                )
            self.access[token], self.refresh[refresh] = grant, grant
            issued = {"access_token": token, "token_type": "Bearer", "expires_in": self.lifetime}
            return await _json(send, 200, {**issued, "refresh_token": refresh})
        if path == "/mcp":
            metadata = f'resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp"'
            token = headers.get("authorization", "").removeprefix("Bearer ")
            held = self.access.get(token)
            if held is None:
                return await _json(send, 401, {"error": "invalid_token"}, f'Bearer {metadata}, scope="mcp:basic"')
            if body and json.loads(body).get("params", {}).get("name") == "admin" and "mcp:admin" not in held.scopes:
                challenge = f'Bearer error="insufficient_scope", scope="mcp:admin", {metadata}'
                return await _json(send, 403, {"error": "insufficient_scope"}, challenge)
            await self.mcp(scope, _replay(body, receive), send)
            return None
        return await _json(send, 404, {"error": "not_found"})

    mcp = server.http_app()

    def __post_init__(self) -> None:
        self.guarded: Any = None

    def protect(self) -> None:
        """Put elicitor's protection in front of the server, now that the URL (the resource) is known."""
        resource = f"{self.base}/mcp"
        verifier: JwtVerifier | IntrospectionVerifier = JwtVerifier(
            issuer=self.issuer, audience=resource, jwks_url=f"{self.issuer}/jwks"
        )
        if self.introspect:
            url = f"{self.issuer}/introspect"
            verifier = IntrospectionVerifier(
                url=url,
                client_id="rs",
                client_secret="rs-secret",
                audience=resource,
                cache_for=self.introspection_cache,
            )
        protection = Protection(
            verifier,
            resource,
            [self.issuer],
            scopes_supported=["mcp:basic", "mcp:admin"],
            required_scopes=["mcp:basic"],
        )
        self.guarded = server.http_app(auth=protection)


def _replay(body: bytes, receive: Any) -> Any:
    sent = False

    async def again() -> dict[str, Any]:
        nonlocal sent
        if sent:
            message: dict[str, Any] = await receive()
            return message
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


async def _json(send: Any, status: int, document: dict[str, Any], challenge: str | None = None) -> None:
    headers = [(b"content-type", b"application/json")]
    if challenge is not None:
        headers.append((b"www-authenticate", challenge.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(document).encode()})


@asynccontextmanager
async def deployed(**options: Any) -> AsyncIterator[tuple[Deployment, str]]:
    deployment = Deployment(**options)
    async with serving(deployment) as url:
        deployment.base = url.removesuffix("/mcp")
        if deployment.jwt or deployment.introspect:
            deployment.protect()
            async with deployment.guarded.lifespan():
                yield deployment, url
        else:
            yield deployment, url


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn runs on asyncio


@pytest.mark.anyio
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_the_client_signs_in_when_asked_and_elicits(anyio_backend: str, revision: str) -> None:
    store = MemoryTokenStore()
    async with deployed() as (deployment, url):
        auth = OAuth(store=store)
        async with Client.http(url, auth=auth, elicitation=ScriptedHandler([{"name": "Ada"}]), protocol=revision) as c:
            assert (await c.call_tool("greet")).text == "hello Ada"
        assert len(deployment.registrations) == len(deployment.authorizations) == 1  # once for every request
        registration = deployment.registrations[0]
        assert registration["application_type"] == "native" and "refresh_token" in registration["grant_types"]
        request = deployment.authorizations[0]
        assert request["resource"] == url and request["scope"] == "mcp:basic offline_access"
        assert [t["grant_type"] for t in deployment.token_requests] == ["authorization_code"]
        kept = await store.load(url)
        assert kept is not None and kept.issuer == deployment.issuer and kept.refresh_token is not None
        assert kept.access_token not in repr(auth)


@pytest.mark.anyio
@pytest.mark.parametrize("ours", [False, True], ids=["test-check", "elicitor-protection"])
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_an_expired_token_is_refreshed_and_more_scope_is_asked_for_on_403(
    anyio_backend: str, ours: bool, revision: str
) -> None:
    """``ours``: elicitor's Protection with introspection (no cache, so a revoked token is refused at once)."""
    options: dict[str, Any] = {"introspect": True, "introspection_cache": 0.0} if ours else {}
    async with deployed(**options) as (deployment, url):
        async with Client.http(url, auth=OAuth(), protocol=revision) as client:
            assert (await client.call_tool("admin")).text.startswith("admin done")  # 401: sign in; 403: step up
            scopes = [set(a["scope"].split()) for a in deployment.authorizations]
            assert scopes == [{"mcp:basic", "offline_access"}, {"mcp:basic", "mcp:admin", "offline_access"}]
            deployment.access.clear()  # every access token expires
            assert (await client.call_tool("admin")).text.startswith("admin done")
        assert len(deployment.authorizations) == 2  # the refresh needed no person
        assert deployment.token_requests[-1]["grant_type"] == "refresh_token"
        assert deployment.token_requests[-1]["resource"] == url


@pytest.mark.anyio
async def test_a_token_that_lives_30_seconds_is_not_refreshed_before_every_request(anyio_backend: str) -> None:
    """An authorization server issuing access tokens for 30 s: the client refreshed any token with under 30 s
    left, so before every request. The margin is now a quarter of the lifetime at most (7.5 s here): the token is
    used for its first three quarters, and refreshed once it is within the margin of its end."""
    store = MemoryTokenStore()
    async with deployed(lifetime=30) as (deployment, url):
        handler = ScriptedHandler([{"name": "Ada"}, {"name": "Bo"}, {"name": "Cy"}])
        async with Client.http(url, auth=OAuth(store=store), elicitation=handler) as client:
            for name in ("Ada", "Bo", "Cy"):
                assert (await client.call_tool("greet")).text == f"hello {name}"
        assert [t["grant_type"] for t in deployment.token_requests] == ["authorization_code"]
        kept = await store.load(url)
        assert kept is not None and kept.lifetime == 30
        await store.save(url, dataclasses.replace(kept, expires_at=time.time() + 3))  # within the margin
        async with Client.http(url, auth=OAuth(store=store), elicitation=ScriptedHandler([{"name": "Di"}])) as c:
            assert (await c.call_tool("greet")).text == "hello Di"
        assert [t["grant_type"] for t in deployment.token_requests] == ["authorization_code", "refresh_token"]
        assert len(deployment.authorizations) == 1  # the refresh needed no person


@pytest.mark.anyio
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_a_kept_token_past_its_time_whose_refresh_is_refused_signs_the_person_in_again_once(
    anyio_backend: str, revision: str
) -> None:
    """Tokens kept from an earlier run: the access token's time is up and the authorization server no longer
    knows the refresh token (it expired, or was revoked). The client refreshed before sending, and a refused
    refresh failed the call ("signing in to the server failed"); now the request goes out, the server's 401 signs
    the person in again, once, and the call and its question go on."""
    store = MemoryTokenStore()
    async with deployed() as (deployment, url):
        async with Client.http(url, auth=OAuth(store=store), elicitation=ScriptedHandler([{"name": "Ada"}])) as c:
            assert (await c.call_tool("greet")).text == "hello Ada"
        kept = await store.load(url)
        assert kept is not None and kept.refresh_token is not None and kept.expires_at is not None
        await store.save(url, dataclasses.replace(kept, expires_at=time.time() - 60))
        deployment.access.clear()
        deployment.refresh.clear()
        handler = ScriptedHandler([{"name": "Bo"}])
        async with Client.http(url, auth=OAuth(store=store), elicitation=handler, protocol=revision) as c:
            assert (await c.call_tool("greet")).text == "hello Bo"
        assert [t["grant_type"] for t in deployment.token_requests] == [
            "authorization_code", "refresh_token", "authorization_code"
        ]  # fmt: skip
        assert len(deployment.authorizations) == 2  # the person was sent to sign in once more, not twice
        fresh = await store.load(url)
        assert fresh is not None and fresh.access_token in deployment.access
        assert fresh.refresh_token in deployment.refresh


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"wrong_iss": True}, "comes from issuer 'https://elsewhere.example'"),
        ({"resource_override": "https://evil.example/mcp"}, "is for 'https://evil.example/mcp'"),
    ],
)
async def test_a_mixed_up_issuer_or_resource_stops_the_sign_in(
    anyio_backend: str, options: dict[str, Any], reason: str
) -> None:
    async with deployed(**options) as (deployment, url):
        with pytest.raises(JSONRPCError, match=f"signing in to the server failed: .*{reason}"):
            async with Client.http(url, auth=OAuth(), protocol="2025-11-25") as client:
                await client.call_tool("greet")
        assert not deployment.access  # no token was issued, or none reached the server
        if "resource_override" in options:
            assert not deployment.authorizations


@pytest.mark.anyio
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_our_client_signs_in_to_our_protected_server(anyio_backend: str, revision: str) -> None:
    """Both halves: elicitor's OAuth client against elicitor's Protection with JWTs from a real authorization
    server: discovery from our metadata document, our 401 challenge, our 403 for a tool's scope, the subject."""
    async with deployed(jwt=True) as (deployment, url):
        handler = ScriptedHandler([{"name": "Ada"}])
        async with Client.http(url, auth=OAuth(), elicitation=handler, protocol=revision) as client:
            assert (await client.call_tool("greet")).text == "hello Ada"
            assert (await client.call_tool("admin")).text == "admin done for ada"
        scopes = [set(a["scope"].split()) for a in deployment.authorizations]
        assert scopes == [{"mcp:basic", "offline_access"}, {"mcp:basic", "mcp:admin", "offline_access"}]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_official_sdks_oauth_client_signs_in_to_our_protected_server(anyio_backend: str, mode: str) -> None:
    """A peer we did not write: the official Python SDK's OAuthClientProvider discovers our metadata document,
    answers our challenge, gets a JWT from the authorization server, and elicits with it."""
    import httpx2
    from mcp import Client as McpClient
    from mcp import types
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

    class Memory:
        tokens: OAuthToken | None = None
        client: OAuthClientInformationFull | None = None

        async def get_tokens(self) -> OAuthToken | None:
            return self.tokens

        async def set_tokens(self, tokens: OAuthToken) -> None:
            self.tokens = tokens

        async def get_client_info(self) -> OAuthClientInformationFull | None:
            return self.client

        async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
            self.client = client_info

    redirect = "http://127.0.0.1:33418/callback"
    location: list[str] = []

    async def follow(url: str) -> None:  # the authorization server approves at once: read its redirect
        async with httpx2.AsyncClient() as http:
            location.append((await http.get(url)).headers["location"])

    async def callback() -> AuthorizationCodeResult:
        query = {k: v[0] for k, v in parse_qs(urlsplit(location[-1]).query).items()}
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with deployed(jwt=True) as (deployment, url):
        metadata = OAuthClientMetadata(redirect_uris=[redirect], client_name="official")  # type: ignore[list-item]
        provider = OAuthClientProvider(url, metadata, Memory(), follow, callback)
        async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
            transport = streamable_http_client(url, http_client=http)
            async with McpClient(transport, elicitation_callback=answer, mode=mode) as client:
                result = await client.call_tool("greet", {})
                assert result.content[0].text == "hello Ada"  # type: ignore[union-attr]
        assert deployment.authorizations and deployment.authorizations[0]["resource"] == url


@pytest.mark.anyio
async def test_a_program_signs_in_with_client_credentials(anyio_backend: str) -> None:
    async with deployed(jwt=True) as (deployment, url):
        async with Client.http(url, auth=ClientCredentials("svc", "svc-secret"), protocol="2025-11-25") as client:
            assert (await client.call_tool("admin")).text == "admin done for svc"  # 401, then 403 for more scope
        grants = [t["grant_type"] for t in deployment.token_requests]
        assert grants == ["client_credentials", "client_credentials"] and not deployment.authorizations
        assert deployment.token_requests[-1]["scope"].split() == ["mcp:basic", "mcp:admin"]
        with pytest.raises(JSONRPCError, match="invalid_client"):
            async with Client.http(url, auth=ClientCredentials("svc", "wrong"), protocol="2025-11-25") as client:
                await client.call_tool("admin")


@pytest.mark.anyio
async def test_opaque_tokens_are_checked_by_introspection(anyio_backend: str) -> None:
    """IntrospectionVerifier (RFC 7662) in front of elicitor's server, authenticating as the resource server:
    sign-in, a call, a step-up for a tool's scope, and each token asked about once (answers are cached)."""
    async with deployed(introspect=True) as (deployment, url):
        handler = ScriptedHandler([{"name": "Ada"}, {"name": "Ada"}])
        async with Client.http(url, auth=OAuth(), elicitation=handler, protocol="2025-11-25") as client:
            assert (await client.call_tool("greet")).text == "hello Ada"
            assert (await client.call_tool("admin")).text == "admin done for ada"
            asked = len(deployment.introspections)
            assert asked == len(set(deployment.introspections))  # each token asked about once
