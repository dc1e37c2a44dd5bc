"""Approving a sign-in without a person: an :class:`~elicitor.client.auth.Authorizer` that follows the
authorization URL itself, and the reading of the redirect back to the client."""

from __future__ import annotations

from urllib.parse import parse_qs

import httpx2 as httpx

from ..._exceptions import AuthError
from .._local import AUTH_REFUSED, AUTH_REFUSED_WHY, FORGED, said
from ._discovery import split_url
from ._types import AuthorizationResponse


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
    query = {name: values[0] for name, values in parse_qs(split_url(location, "the redirect").query).items() if values}
    if "error" in query:
        detail = query.get("error_description")
        refused = said(AUTH_REFUSED_WHY, error=query["error"], detail=detail) if detail else None
        raise AuthError(refused or said(AUTH_REFUSED, error=query["error"]), query["error"])
    if query.get("state") != state:
        raise AuthError(said(FORGED))
    code = query.get("code")
    if not code:
        raise AuthError("the authorization response has no code")
    return AuthorizationResponse(code=code, state=query.get("state"), iss=query.get("iss"))
