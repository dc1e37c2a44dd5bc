"""URL-mode elicitation on the client: what a handler is shown, and what looks suspicious about a URL.

Spec (2025-11-25 and 2026-07-28, client/elicitation "Safe URL Handling"): clients MUST NOT prefetch the URL, MUST
NOT open it without explicit consent, MUST show the full URL first, SHOULD highlight the domain and SHOULD warn
about ambiguous or suspicious URIs (Punycode, for example).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit
from warnings import warn

from ..i18n import N_, Message
from ..types import Implementation
from ._present import server_label

_DEFAULT_PORTS = {"http": 80, "https": 443}


def url_warnings(url: str) -> list[Message]:
    """What a person should know before opening ``url``, most serious first (empty if nothing stands out).

    Each is a deferred :class:`~elicitor.i18n.Message`: ``str()`` reads it in English, a renderer in the person's
    language."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return [N_("this is not a valid URL")]
    host = parts.hostname or ""
    warnings: list[Message] = []
    if parts.scheme not in ("http", "https"):
        scheme = f"{parts.scheme}:" if parts.scheme else N_("no scheme")
        warnings.append(N_("it is not a web address ({scheme})", scheme=scheme))
    if parts.username is not None or parts.password is not None:
        warnings.append(N_("it contains a user name or password before the host, a trick to disguise the real host"))
    if any(label.startswith("xn--") for label in host.split(".")) or not host.isascii():
        warnings.append(N_("the host uses international characters (Punycode), which can imitate another site's name"))
    try:
        ipaddress.ip_address(host)
        warnings.append(N_("the host is a bare IP address, not a name"))
    except ValueError:
        pass
    if parts.scheme == "http":
        warnings.append(N_("the connection is not encrypted (http, not https)"))
    if port is not None and port != _DEFAULT_PORTS.get(parts.scheme):
        warnings.append(N_("it uses an unusual port ({port})", port=str(port)))
    return warnings


@dataclass(frozen=True, slots=True)
class UrlElicitationRequest:
    """A server asks the person to open a URL (URL mode), as a handler sees it.

    Attributes:
        message: what the server asks and why.
        url: the full URL, exactly as it will be opened — show all of it.
        server: who asks (self-reported).
        elicitation_id: the server's id for it (2025-11-25; ``None`` on 2026-07-28).
        warnings: what looks suspicious about the URL (see :func:`url_warnings`).
        completion_notice: whether the server can say when the person has finished (2025-11-25, whose requests
            carry an ``elicitationId`` that ``notifications/elicitation/complete`` names). 2026-07-28 has neither
            (its changelog removes both): the client learns the outcome only by retrying the call, so a handler
            waiting for the person should offer to retry now rather than wait for the server.
    """

    message: str
    url: str
    server: Implementation | None
    elicitation_id: str | None = None
    warnings: tuple[Message, ...] = field(default=())
    mode: Literal["url"] = "url"
    completion_notice: bool = False

    @classmethod
    def from_params(
        cls,
        params: dict[str, Any],
        server: Implementation | None,
        *,
        stateless: bool = False,
        modern: bool | None = None,
    ) -> UrlElicitationRequest:
        """The request as a handler sees it, from ``elicitation/create`` params (warnings worked out here).

        ``stateless``: the request came in a 2026-07-28 round, where no completion notice exists whatever it carries.
        ``modern`` is its deprecated former name.
        """
        if modern is not None:
            warn("from_params(modern=) is deprecated: use stateless=", DeprecationWarning, stacklevel=2)
            stateless = modern
        message, url, elicitation_id = params.get("message"), params.get("url"), params.get("elicitationId")
        url = url if isinstance(url, str) else ""
        elicitation_id = elicitation_id if isinstance(elicitation_id, str) else None
        return cls(
            message=message if isinstance(message, str) else "", url=url, server=server,
            elicitation_id=elicitation_id, warnings=tuple(url_warnings(url)),
            completion_notice=elicitation_id is not None and not stateless,
        )  # fmt: skip

    @property
    def host(self) -> str:
        """The host the URL leads to: the part to highlight (subdomain tricks hide in the rest)."""
        try:
            return urlsplit(self.url).hostname or ""
        except ValueError:
            return ""

    @property
    def host_span(self) -> tuple[int, int] | None:
        """Where the host stands in ``url`` (after any user info), to highlight exactly that part."""
        host, url = self.host, self.url
        start = url.find("//")
        if not host or start < 0:
            return None
        start += 2
        end = min((i for i in (url.find(c, start) for c in "/?#") if i >= 0), default=len(url))
        at = url.rfind("@", start, end)
        begin = url.lower().find(host, at + 1 if at >= 0 else start, end)
        return (begin, begin + len(host)) if begin >= 0 else None

    @property
    def openable(self) -> bool:
        """Whether a client should offer to open it at all: only web addresses (http, https) with a host.

        Anything else (``file:``, ``javascript:``, an app's own scheme) would hand the server's string to whatever
        the system registered for it, so it is shown but never opened.
        """
        try:
            parts = urlsplit(self.url)
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and bool(parts.hostname)

    @property
    def server_label(self) -> str:
        """Who asks, ready to show: title (or name) and version on one line, control characters escaped."""
        return server_label(self.server)
