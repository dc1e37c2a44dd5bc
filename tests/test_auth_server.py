"""A protected server (HttpApp(auth=Protection(...))): the challenges, the metadata document, JWT checks, per-tool
scopes, and the token's subject as the principal, over real uvicorn with JWTs signed by a key the test holds."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2 as httpx
import pytest
import uvicorn
from hypothesis import given
from hypothesis import strategies as st
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet

from elicitor import (
    Accepted,
    BearerToken,
    Client,
    Context,
    JSONRPCError,
    JwtVerifier,
    Protection,
    ScriptedHandler,
    Server,
)
from elicitor.server.http._auth import AccessToken
from elicitor.types import INTERNAL_ERROR

pytestmark = pytest.mark.anyio

server = Server("guarded")
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
KEY = ECKey.generate_key("P-256", parameters={"kid": "k1"})
OTHER_KEY = ECKey.generate_key("P-256", parameters={"kid": "k9"})
ISSUER = "https://as.example"


@server.tool()
async def whoami(ctx: Context) -> str:
    outcome = await ctx.elicit("Your name?", NAME)
    name = outcome.data["name"] if isinstance(outcome, Accepted) else outcome.action
    return f"{ctx.principal} says {name}"


@server.tool()
async def claims(ctx: Context) -> str:
    """What a tool sees of the caller's token, before and after asking a question."""
    before = ctx.access_token
    await ctx.elicit("Your name?", NAME)
    after = ctx.access_token
    assert before is not None and after is not None and before.subject == after.subject == ctx.principal
    return f"{after.subject} {sorted(after.scopes)} {after.claims.get('tier')}"


@server.tool(scopes=["mcp:admin"])
async def admin() -> str:
    return "admin done"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn runs on asyncio


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def protected() -> AsyncIterator[str]:
    """The server at /mcp, its authorization server's keys at /jwks, on one loopback port."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    verifier = JwtVerifier(issuer=ISSUER, audience=url, jwks_url=f"http://127.0.0.1:{port}/jwks")
    protection = Protection(verifier, url, [ISSUER], scopes_supported=["mcp", "mcp:admin"], required_scopes=["mcp"])
    app = server.http_app(auth=protection)
    keys = json.dumps(KeySet([KEY]).as_dict(private=False)).encode()

    async def both(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/jwks":
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": keys})
            return
        await app(scope, receive, send)

    config = uvicorn.Config(both, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    uv = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(uv.serve)
        with anyio.fail_after(10):
            while not uv.started:
                await anyio.sleep(0.01)
        try:
            yield url
        finally:
            uv.should_exit = True


def token(url: str, subject: str = "ada", scope: str = "mcp", key: ECKey = KEY, **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": url, "sub": subject, "exp": now + 600, "iat": now, "scope": scope, **claims}
    return jwt.encode({"alg": "ES256", "kid": key.kid}, body, key)


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def test_without_a_token_the_server_challenges_and_publishes_its_metadata(anyio_backend: str) -> None:
    async with protected() as url, httpx.AsyncClient() as http:
        refused = await http.post(url, json=INIT, headers=HEADERS)
        assert refused.status_code == 401
        metadata_url = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        assert refused.headers["www-authenticate"] == f'Bearer scope="mcp", resource_metadata="{metadata_url}"'
        assert "error" not in refused.json()  # RFC 6750 §3.1: no credentials, no error code (header or body)
        document = (await http.get(metadata_url)).json()
        assert document["resource"] == url and document["authorization_servers"] == [ISSUER]
        assert document["scopes_supported"] == ["mcp", "mcp:admin"]


@pytest.mark.parametrize(
    "case",
    ["wrong audience", "expired", "wrong issuer", "unknown key", "no subject", "garbage", "basic", "missing scope"],
)
async def test_a_token_that_is_not_for_this_server_is_refused(anyio_backend: str, case: str) -> None:
    async with protected() as url, httpx.AsyncClient() as http:
        bad = {
            "wrong audience": lambda: f"Bearer {token('https://other.example/mcp')}",
            "expired": lambda: f"Bearer {token(url, exp=int(time.time()) - 3600)}",
            "wrong issuer": lambda: f"Bearer {token(url, iss='https://evil.example')}",
            "unknown key": lambda: f"Bearer {token(url, key=OTHER_KEY)}",
            "no subject": lambda: f"Bearer {token(url, sub='')}",
            "garbage": lambda: "Bearer not.a.jwt",
            "basic": lambda: "Basic YTpi",
            "missing scope": lambda: f"Bearer {token(url, scope='other')}",
        }[case]()
        refused = await http.post(url, json=INIT, headers={**HEADERS, "authorization": bad})
        error = "insufficient_scope" if case == "missing scope" else "invalid_token"
        assert refused.status_code == (403 if case == "missing scope" else 401)
        assert refused.headers["www-authenticate"].startswith(f'Bearer error="{error}", scope="mcp"')
        assert refused.json()["error"] == error


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_the_tokens_subject_is_the_principal_of_the_call(anyio_backend: str, revision: str) -> None:
    async with protected() as url:
        handler = ScriptedHandler([{"name": "Ada"}])
        async with Client.http(url, auth=BearerToken(token(url)), elicitation=handler, protocol=revision) as client:
            assert (await client.call_tool("whoami")).text == "ada says Ada"


async def test_a_tool_scope_missing_gets_403_naming_it_and_a_token_with_it_calls(anyio_backend: str) -> None:
    async with protected() as url, httpx.AsyncClient() as http:
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "admin", "arguments": {}}}
        plain = {**HEADERS, "authorization": f"Bearer {token(url)}", "mcp-protocol-version": "2025-11-25"}
        opened = await http.post(url, json=INIT, headers=plain)
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        refused = await http.post(url, json=call, headers={**plain, **session})
        assert refused.status_code == 403
        assert 'error="insufficient_scope", scope="mcp mcp:admin"' in refused.headers["www-authenticate"]
    async with protected() as url, Client.http(url, auth=BearerToken(token(url, scope="mcp mcp:admin"))) as client:
        assert (await client.call_tool("admin")).text == "admin done"


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_a_client_whose_fixed_token_lacks_a_tools_scope_is_told_which(anyio_backend: str, revision: str) -> None:
    """A fixed token (no sign-in to ask for more) lacking the tool's scope: the call fails saying why, with the
    scopes the server named; it failed with an empty message, the 403's OAuth body taken for a JSON-RPC answer."""
    async with protected() as url, Client.http(url, auth=BearerToken(token(url)), protocol=revision) as client:
        with pytest.raises(JSONRPCError) as refused:
            await client.call_tool("admin")
        assert refused.value.code == INTERNAL_ERROR
        assert "HTTP 403: insufficient_scope" in refused.value.message
        assert "(scope needed: mcp mcp:admin)" in refused.value.message


async def test_another_users_token_cannot_reach_a_session(anyio_backend: str) -> None:
    async with protected() as url, httpx.AsyncClient() as http:
        ada = {**HEADERS, "authorization": f"Bearer {token(url, 'ada')}", "mcp-protocol-version": "2025-11-25"}
        opened = await http.post(url, json=INIT, headers=ada)
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        bob = {**ada, "authorization": f"Bearer {token(url, 'bob')}", **session}
        listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
        assert (await http.post(url, json=listing, headers=bob)).status_code == 404  # as if it did not exist
        assert (await http.post(url, json=listing, headers={**ada, **session})).status_code == 200


@given(st.text(max_size=200))
def test_any_authorization_header_is_answered_without_raising(header: str) -> None:
    class Never:
        async def verify(self, token: str) -> AccessToken | None:
            return None

    protection = Protection(Never(), "http://127.0.0.1/mcp", ["https://as"])
    assert anyio.run(protection.check, header) in ("invalid_token", "")


async def test_sealed_state_from_one_users_round_does_not_open_for_another(anyio_backend: str) -> None:
    """2026-07-28: the requestState sealed for ada's round is refused (-32602) when bob's token brings it back;
    ada's own retry completes the call."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    stateless = {**HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "whoami"}
    async with protected() as url, httpx.AsyncClient() as http:
        ada = {**stateless, "authorization": f"Bearer {token(url, 'ada')}"}
        bob = {**stateless, "authorization": f"Bearer {token(url, 'bob')}"}
        first = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "whoami", "_meta": meta}}
        asked = (await http.post(url, json=first, headers=ada)).json()["result"]
        assert asked["resultType"] == "input_required"
        key = next(iter(asked["inputRequests"]))
        params = {
            **first["params"],  # type: ignore[dict-item]
            "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}},
            "requestState": asked["requestState"],
        }
        retry = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
        stolen = (await http.post(url, json=retry, headers=bob)).json()
        assert stolen["error"]["code"] == -32602, stolen
        done = (await http.post(url, json=retry, headers=ada)).json()
        assert done["result"]["content"][0]["text"] == "ada says Ada"


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_a_tool_sees_the_callers_token_and_its_claims(anyio_backend: str, revision: str) -> None:
    async with protected() as url:
        auth = BearerToken(token(url, "ada", scope="mcp mcp:admin", tier="gold"))
        handler = ScriptedHandler([{"name": "Ada"}])
        async with Client.http(url, auth=auth, elicitation=handler, protocol=revision) as client:
            assert (await client.call_tool("claims")).text == "ada ['mcp', 'mcp:admin'] gold"


async def test_introspection_refuses_inactive_foreign_and_expired_tokens(anyio_backend: str) -> None:
    """IntrospectionVerifier's reading of the authorization server's answers (RFC 7662 §2.2)."""
    from elicitor import IntrospectionVerifier

    answers: dict[str, dict[str, Any]] = {
        "good": {"active": True, "sub": "ada", "scope": "mcp", "aud": "http://r/mcp", "exp": time.time() + 60},
        "inactive": {"active": False, "sub": "ada"},
        "foreign": {"active": True, "sub": "ada", "aud": ["http://other/mcp"]},
        "expired": {"active": True, "sub": "ada", "exp": time.time() - 1},
        "nobody": {"active": True},
    }

    async def introspect(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = (await receive())["body"].decode()
        answer = answers.get(body.split("token=")[1].split("&")[0], {"active": False})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})

    from .conftest import serving

    async with serving(introspect) as url:
        verifier = IntrospectionVerifier(url=url, client_id="rs", client_secret="s", audience="http://r/mcp")
        good = await verifier.verify("good")
        assert good is not None and good.subject == "ada" and good.scopes == frozenset({"mcp"})
        for token in ("inactive", "foreign", "expired", "nobody", "unknown"):
            assert await verifier.verify(token) is None, token
