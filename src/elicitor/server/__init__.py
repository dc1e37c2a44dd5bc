"""The server side: ``Server``, tools, ``Context`` with ``elicit``, and the 2026-07-28 round driver."""

from ._context import Context
from ._dispatch import ServerSession
from ._pages import PagesNotServed
from ._sealing import KEYS_ENV, StateSealer, generate_key
from ._server import Server
from ._tools import Header, ToolDef
from ._url import ID_PLACEHOLDER, UnsafeUrl, UrlElicitation, UrlElicitationRequired, UrlElicitations, check_url
from .http import AccessToken, HttpApp, IntrospectionVerifier, JwtVerifier, Protection, TokenVerifier

__all__ = [
    "ID_PLACEHOLDER",
    "KEYS_ENV",
    "AccessToken",
    "Context",
    "Header",
    "HttpApp",
    "IntrospectionVerifier",
    "JwtVerifier",
    "PagesNotServed",
    "Protection",
    "Server",
    "ServerSession",
    "StateSealer",
    "TokenVerifier",
    "ToolDef",
    "UnsafeUrl",
    "UrlElicitation",
    "UrlElicitationRequired",
    "UrlElicitations",
    "check_url",
    "generate_key",
]
