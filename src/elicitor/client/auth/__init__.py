"""Signing in to protected MCP servers (the spec's Authorization section): see :class:`OAuth`."""

from ._challenge import Challenge, parse_challenge
from ._oauth import BearerToken, HeadlessAuthorizer, MemoryTokenStore, OAuth
from ._types import AuthorizationResponse, Authorizer, Tokens, TokenStore

__all__ = [
    "AuthorizationResponse",
    "Authorizer",
    "BearerToken",
    "Challenge",
    "HeadlessAuthorizer",
    "MemoryTokenStore",
    "OAuth",
    "TokenStore",
    "Tokens",
    "parse_challenge",
]
