"""The pieces of a client's sign-in that its parts share: tokens, where they are kept, how a person authorizes.

The spec's Authorization section (basic/authorization.mdx, 2025-11-25 and 2026-07-28) has the client find the
authorization server from the MCP server's protected resource metadata, register, and run the authorization code
flow with PKCE. What differs between a script, a test and a person at a terminal is only where tokens are kept
(:class:`TokenStore`) and how the authorization URL reaches someone who can approve it (:class:`Authorizer`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Tokens:
    """What a sign-in yields for one MCP server, as kept between runs.

    ``expires_at`` is a Unix time (``None``: the server did not say); ``lifetime`` the seconds the access token
    was issued for (its ``expires_in``; ``None``: not said, or kept before this was kept), which scales how early
    it is refreshed. ``client_id``/``client_secret`` are the
    registration this client obtained from ``issuer`` (dynamic registration, or a Client ID Metadata Document URL),
    kept so that a refresh and the next sign-in reuse it.
    """

    access_token: str
    token_type: str = "Bearer"
    refresh_token: str | None = None
    expires_at: float | None = None
    scope: str | None = None
    issuer: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    lifetime: float | None = None


class TokenStore(Protocol):
    """Keeps :class:`Tokens` per MCP server (keyed by the server's resource URL). Never logs a token."""

    async def load(self, resource: str) -> Tokens | None:
        """The tokens kept for ``resource``, or ``None`` (also when what is kept cannot be read)."""
        ...

    async def save(self, resource: str, tokens: Tokens) -> None:
        """Keep ``tokens`` for ``resource``, replacing any kept before."""
        ...

    async def delete(self, resource: str) -> bool:
        """Forget ``resource``'s tokens; whether there were any."""
        ...


@dataclass(frozen=True, slots=True)
class AuthorizationResponse:
    """The authorization server's redirect back to the client: the code, the ``state`` echoed, and ``iss``
    (RFC 9207) when the server sends it."""

    code: str
    state: str | None = None
    iss: str | None = None


class Authorizer(Protocol):
    """Gets an authorization URL approved: a person in a browser with a loopback redirect, or (tests, the
    conformance harness) a headless client that follows the URL itself.

    Used as an async context manager: on entry ``redirect_uri`` is known (a loopback listener has its port), so it
    can go into the registration and the authorization URL.
    """

    @property
    def redirect_uri(self) -> str:
        """Where the authorization server sends the person back (known once the authorizer is entered)."""
        ...

    async def authorize(self, url: str, state: str) -> AuthorizationResponse:
        """Have ``url`` approved and return the redirect's parameters (raise :class:`~elicitor.AuthError` if the
        person refuses, the server answers with an error, or ``state`` does not match).

        A call cancelled part-way may be followed by another with the same ``url`` and ``state``: the same sign-in,
        resumed (the person may be on that page already), not a new one."""
        ...

    async def __aenter__(self) -> Authorizer: ...

    async def __aexit__(self, *exc: object) -> None: ...
