"""Where an HTTP transport's requests go, and by which road: the caller's or its own ``httpx`` client, or the
lean path straight to the connection pool (``_pool``), which a cookie or a proxy from the environment rules out.

The transport (``_http``) decides what to send and what an answer means; this module only gets a request to the
server and its response back, unread.
"""

from __future__ import annotations

import ipaddress
import logging
import urllib.request
from collections.abc import AsyncIterator, Mapping
from typing import Protocol

import httpx2 as httpx

from ._connection import check_header
from ._pool import PooledTransport, Target, Timeouts

_TIMEOUTS: Timeouts = {"connect": 30.0, "write": 30.0, "pool": 30.0, "read": None}
"""The lean path's timeouts, as the own ``httpx`` client's: a response may take as long as a person does."""
_BRIEF_TIMEOUTS: Timeouts = {"connect": 30.0, "write": 30.0, "pool": 30.0, "read": 30.0}
"""For an answer or a notification, which the server acknowledges at once (202 Accepted): 30 s for everything."""


_CHECKED = 256
"""The most headers :class:`Endpoint` keeps checked at once."""

_REDIRECTS = 3
"""The most 307/308 redirects one request follows (see :meth:`Endpoint.open`)."""
_DEFAULT_PORTS = {"http": 80, "https": 443}

logger = logging.getLogger("elicitor.http_client")


class _Headers(Protocol):
    def get(self, key: str, /) -> str | None: ...


class Response(Protocol):
    """What an HTTP transport reads of a response: ``httpx.Response`` or the lean path's ``RawResponse``."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> _Headers: ...
    @property
    def http_version(self) -> str: ...
    def aiter_raw(self) -> AsyncIterator[bytes]: ...
    async def aread(self) -> bytes: ...
    async def aclose(self) -> None: ...


class Endpoint:
    """One MCP endpoint's URL and the road its requests take (see :meth:`open`)."""

    def __init__(
        self, url: str, http: httpx.AsyncClient, lean: PooledTransport | None, fixed: Mapping[str, str] | None
    ) -> None:
        self.url = url
        self.http = http
        self.lean = lean
        """The pool under ``http`` when requests may skip ``httpx``'s models (see :meth:`open`), else ``None``."""
        self._target = Target(url) if lean is not None else None
        self._fixed = dict(check_header(name, value) for name, value in (fixed or {}).items())
        """What the lean path sends on every request besides ``Host`` and ``Content-Length`` (the caller's ``Host``
        replaces the URL's): the own client's headers, checked and encoded once, by lowercase name."""
        self._checked: dict[tuple[str, str], tuple[bytes, bytes]] = {}
        """Headers already checked and encoded (:func:`check_header`), by name and value: most requests repeat
        them all (``Accept``, the revision, ``Mcp-Method``, the tool's name), so each is checked once."""

    def at(self, url: str) -> Endpoint:
        """The same road to another URL of the same server (the message URL of the 2024-11-05 HTTP+SSE
        transport): the same client, pool and headers; a road that has moved to ``httpx``'s path stays there."""
        other = Endpoint(url, self.http, self.lean, None)
        other._fixed = self._fixed
        other._checked = self._checked
        return other

    async def open(
        self, method: str, headers: dict[str, str], content: bytes = b"", *, brief: bool = False
    ) -> Response:
        """Send a request to the endpoint and return its response, unread (close it once done).

        A 307 or 308 to another path of the same origin is followed, and the endpoint moves there for good: servers
        of the official Python SDK before 1.12 serve ``/mcp/`` and redirect ``/mcp`` to it, and both codes keep
        the method and the body. A redirect to another origin is not followed (the request carries the client's
        credentials): its response is returned as it is.
        """
        for _ in range(_REDIRECTS):
            response = await self._open(method, headers, content, brief=brief)
            if response.status_code not in (307, 308):
                return response
            target = self._same_origin(response.headers.get("location"))
            if target is None:
                return response
            await response.aclose()
            logger.info("the server moved %s to %s (HTTP %d); following it", self.url, target, response.status_code)
            self.url = target
            if self._target is not None:
                self._target = Target(target)
        return await self._open(method, headers, content, brief=brief)

    def _same_origin(self, location: str | None) -> str | None:
        """The URL a redirect names, resolved against the endpoint's, if it is of the same origin."""
        if not location or any(c in location for c in "\r\n\0"):
            return None
        base = httpx.URL(self.url)
        try:
            target = base.join(location.strip())
        except (httpx.InvalidURL, ValueError):
            return None
        if target.userinfo or _origin(target) != _origin(base) or target == base:
            return None
        return str(target.copy_with(fragment=None))

    async def _open(self, method: str, headers: dict[str, str], content: bytes, *, brief: bool) -> Response:
        """Send one request (see :meth:`open`).

        ``brief``: the server acknowledges it at once (an answer, a notification): its response has 30 s to come.

        With the client's own connections, no ``auth`` and no proxy, the request goes straight to the pool
        (:meth:`PooledTransport.request`): building ``httpx``'s request and response models, merging its URL,
        headers and cookies and running its auth and redirect steps cost about 180 µs of CPU per request, more
        than twice the round trip itself, and every answer to a server's question is a request. A server that
        sets a cookie (a balancer's affinity, say) moves this transport to ``httpx``'s path, whose jar sends it
        back from then on.
        """
        lean = self.lean
        if lean is None:
            timeout = httpx.Timeout(30.0) if brief else httpx.USE_CLIENT_DEFAULT
            body = content or None
            request = self.http.build_request(method, self.url, content=body, headers=headers, timeout=timeout)
            return await self.http.send(request, stream=True)
        assert self._target is not None
        pairs = self._fixed.copy()
        checked = self._checked
        for header in headers.items():
            pair = checked.get(header)
            if pair is None:
                pair = check_header(*header)
                if len(checked) >= _CHECKED:  # values that change (a mirrored argument) do not pile up
                    checked.clear()
                checked[header] = pair
            pairs[pair[0]] = pair[1]
        timeouts = _BRIEF_TIMEOUTS if brief else _TIMEOUTS
        response = await lean.request(self._target, method.encode("ascii"), list(pairs.items()), content, timeouts)
        if "set-cookie" in response.headers:
            self.lean = None
            request = httpx.Request(method, self.url)
            self.http.cookies.extract_cookies(
                httpx.Response(response.status_code, headers=response.raw_headers, request=request)
            )
        return response


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host.lower(), url.port or _DEFAULT_PORTS.get(url.scheme)


def environment_proxies(url: str) -> bool:
    """Whether the environment names a proxy for HTTP: as ``httpx`` reads it (``urllib.request.getproxies``: the
    ``*_PROXY`` variables, else the system's settings), for ``http``, ``https`` or ``all``.

    A server on this machine (``localhost``, a loopback address) is never reached through one, whatever
    ``NO_PROXY`` says, as Go's and most browsers' clients do: a proxy elsewhere cannot reach it, and a local server
    is the usual development setup (``elicitor connect http://127.0.0.1:8000/mcp``).
    """
    host = httpx.URL(url).host
    if host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        if ipaddress.ip_address(host).is_loopback:
            return False
    except ValueError:
        pass
    proxies = urllib.request.getproxies()
    return any(proxies.get(scheme) for scheme in ("http", "https", "all"))
