"""Streamable HTTP for a server: the ASGI app, the handshake era's sessions, the stateless era's exchanges."""

from ._app import DEFAULT_MAX_BODY, LOCAL_HOSTS, HttpApp
from ._auth import AccessToken, IntrospectionVerifier, JwtVerifier, Protection, TokenVerifier

__all__ = [
    "DEFAULT_MAX_BODY",
    "LOCAL_HOSTS",
    "AccessToken",
    "HttpApp",
    "IntrospectionVerifier",
    "JwtVerifier",
    "Protection",
    "TokenVerifier",
]
