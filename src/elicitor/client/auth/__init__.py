"""Signing in to protected MCP servers (the spec's Authorization section): see :class:`OAuth`."""

from ._challenge import Challenge, parse_challenge
from ._headless import HeadlessAuthorizer
from ._loopback import LoopbackAuthorizer
from ._oauth import BearerToken, ClientCredentials, OAuth
from ._storage import (
    FileTokenStore,
    KeyringTokenStore,
    MemoryTokenStore,
    default_token_file,
    default_token_store,
    usable_keyring,
)
from ._types import AuthorizationResponse, Authorizer, Tokens, TokenStore

__all__ = [
    "AuthorizationResponse",
    "Authorizer",
    "BearerToken",
    "Challenge",
    "ClientCredentials",
    "FileTokenStore",
    "HeadlessAuthorizer",
    "KeyringTokenStore",
    "LoopbackAuthorizer",
    "MemoryTokenStore",
    "OAuth",
    "TokenStore",
    "Tokens",
    "default_token_file",
    "default_token_store",
    "parse_challenge",
    "usable_keyring",
]
