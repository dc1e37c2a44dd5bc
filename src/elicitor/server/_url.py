"""URL-mode elicitation on the server: out-of-band interactions, their ids, and their completion.

Spec: https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-mode-elicitation-requests —
the server sends a URL the person opens in a browser; nothing but the URL passes through the client (credentials,
payments, third-party OAuth). The server MUST bind each elicitation to the client and user that started it and
verify that the person who completes it is that user; ``notifications/elicitation/complete`` goes to the initiating
client only; a tool that cannot go on without it returns error -32042 listing what to open. 2026-07-28 keeps URL
mode inside multi-round-trip rounds and drops the ids, the notification and -32042.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .._exceptions import ElicitorError

ID_PLACEHOLDER = "{elicitation_id}"
"""Write this in a URL to have the elicitation's id put there (the page can then tell which one it completes)."""

LOCAL_HOSTNAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class UnsafeUrl(ElicitorError, ValueError):
    """A URL a server must not send: not absolute http(s), credentials in it, or plain http off loopback."""


def check_url(url: str, *, allow_http: bool = False) -> None:
    """Refuse URLs the spec's safe-URL rules forbid a server to send.

    Raises:
        UnsafeUrl: not an absolute ``http``/``https`` URL; userinfo present; ``http`` to a non-loopback host
            (unless ``allow_http``: development only).
    """
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise UnsafeUrl(f"not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeUrl(f"URL-mode elicitation needs an absolute http(s) URL, not {url!r}")
    if parts.username is not None or parts.password is not None:
        raise UnsafeUrl("a URL must not carry credentials (user:password@): they would pass through the client")
    if parts.scheme == "http" and parts.hostname not in LOCAL_HOSTNAMES and not allow_http:
        raise UnsafeUrl(f"use https for {parts.hostname} (plain http is only for loopback, or allow_http=True)")


@dataclass(eq=False)
class UrlElicitation:
    """One out-of-band interaction: what the person is asked to open, and who asked for it."""

    id: str
    message: str
    url: str
    principal: str | None
    notify: Callable[[str, dict[str, Any]], Awaitable[None]] | None = field(default=None, repr=False)
    created: float = field(default_factory=time.monotonic)
    completed: bool = False
    owner: tuple[object, str] | None = field(default=None, repr=False)

    def to_wire(self) -> dict[str, Any]:
        """``ElicitRequestURLParams`` (2025-11-25), as in ``elicitation/create`` and the -32042 error's data."""
        return {"mode": "url", "message": self.message, "url": self.url, "elicitationId": self.id}


class UrlElicitationRequired(ElicitorError):
    """Raise in a tool that cannot go on until the person completes one or more URL-mode elicitations.

    On 2025-11-25 the call ends with error -32042 listing them; the client has the person open them and calls
    again. On 2026-07-28 the same code turns into URL input requests; when the person says they are done, the tool
    runs again (so it should check, first thing, whether what it waits for has happened).
    """

    def __init__(self, elicitations: UrlElicitation | Sequence[UrlElicitation], message: str | None = None) -> None:
        self.elicitations = [elicitations] if isinstance(elicitations, UrlElicitation) else list(elicitations)
        super().__init__(message or "This request requires more information.")


class UrlElicitations:
    """The server's URL elicitations, by id: bounded in number and age, completed ones kept until they expire.

    ``complete`` is how code outside the tool (the HTTP route a third party calls back) says one is done; it tells
    the initiating client, and only it, once. Asking the same question again on the same connection returns the
    same elicitation (open or completed), so a tool can check ``completed`` instead of minting new links.
    """

    def __init__(self, *, limit: int = 10_000, ttl: float = 3600.0) -> None:
        self._known: OrderedDict[str, UrlElicitation] = OrderedDict()
        self._owned: dict[tuple[object, str], str] = {}
        self._limit = limit
        self._ttl = ttl

    def new(
        self,
        message: str,
        url: str,
        *,
        principal: str | None,
        notify: Callable[[str, dict[str, Any]], Awaitable[None]] | None,
        allow_http: bool = False,
        elicitation_id: str | None = None,
        owner: tuple[object, str] | None = None,
    ) -> UrlElicitation:
        """Register an elicitation with a fresh unguessable id (``{elicitation_id}`` in ``url`` is replaced by it).

        Passing the ``elicitation_id`` of a known elicitation returns that one (a 2026-07-28 round replaying), and
        so does an ``owner`` (connection, question) that already has one.

        Raises:
            UnsafeUrl: the URL breaks the safe-URL rules.
        """
        self._expire()
        if elicitation_id is None and owner is not None:
            elicitation_id = self._owned.get(owner)
        if elicitation_id is not None and elicitation_id in self._known:
            return self._known[elicitation_id]
        elicitation_id = elicitation_id or secrets.token_urlsafe(24)
        url = url.replace(ID_PLACEHOLDER, elicitation_id)
        check_url(url, allow_http=allow_http)
        while len(self._known) >= self._limit:
            self._forget_oldest()
        elicitation = UrlElicitation(elicitation_id, message, url, principal, notify, owner=owner)
        self._known[elicitation_id] = elicitation
        if owner is not None:
            self._owned[owner] = elicitation_id
        return elicitation

    def get(self, elicitation_id: str) -> UrlElicitation | None:
        self._expire()
        return self._known.get(elicitation_id)

    async def complete(self, elicitation_id: str, *, principal: str | None = None) -> bool:
        """Mark an elicitation done and notify the client that started it.

        Returns ``False`` — and does nothing — for an unknown, expired or already completed id, or when the
        elicitation belongs to another user than ``principal`` (a forged or phished completion).
        """
        elicitation = self.get(elicitation_id)
        if elicitation is None or elicitation.completed:
            return False
        if elicitation.principal is not None and elicitation.principal != principal:
            return False
        elicitation.completed = True
        if elicitation.notify is not None:
            await elicitation.notify("notifications/elicitation/complete", {"elicitationId": elicitation_id})
        return True

    def forget_connection(self, connection: object) -> int:
        """Drop the elicitations a closed connection started (nobody is left to notify); returns how many."""
        gone = [(owner, eid) for owner, eid in self._owned.items() if owner[0] is connection]
        for owner, elicitation_id in gone:
            del self._owned[owner]
            self._known.pop(elicitation_id, None)
        return len(gone)

    def _expire(self) -> None:
        now = time.monotonic()
        while self._known:
            oldest = next(iter(self._known.values()))
            if now - oldest.created < self._ttl:
                return
            self._forget_oldest()

    def _forget_oldest(self) -> None:
        _, elicitation = self._known.popitem(last=False)
        if elicitation.owner is not None:
            self._owned.pop(elicitation.owner, None)
