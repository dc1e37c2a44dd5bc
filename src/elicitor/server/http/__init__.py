"""Streamable HTTP for a server: the ASGI app, the handshake era's sessions, the stateless era's exchanges."""

from ._app import DEFAULT_MAX_BODY, LOCAL_HOSTS, HttpApp

__all__ = ["DEFAULT_MAX_BODY", "LOCAL_HOSTS", "HttpApp"]
