"""Who a forwarded request comes from, and what the proxy declares upstream on their behalf.

A handshake-era client says who it is once, in ``initialize``: its connection keeps one :class:`Downstream`. A
2026-07-28 request says it in its own ``_meta`` (2026-07-28 basic/lifecycle: no connection, every request carries
its protocol version, capabilities and client information), so each such request gets a :class:`Downstream` of its
own, made from that request and the principal the HTTP app authenticated. Nothing about one client is ever kept
where another client's request could read it: that is what keeps two users of one proxy apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..client._handlers import ElicitationHandler
from ..types import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    JSONObject,
    JSONValue,
    is_stateless,
)

PROXY_INFO: JSONObject = {"name": "elicitor-proxy", "version": "1"}
_PER_REQUEST_META = (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL)


@dataclass(frozen=True, slots=True, eq=False)
class Downstream:
    """One client as the proxy serves it: its protocol revision, declared capabilities, ``clientInfo``, and the
    principal it authenticated as (``None`` without authentication)."""

    revision: str | None = None
    capabilities: JSONObject = field(default_factory=dict)
    client: JSONValue = None
    principal: str | None = None
    ui: ElicitationHandler | None = None
    """What answers the elicitations this client cannot (``--ui``), if anything."""
    log_level: str | None = None
    """The log level the client asked for (a 2026-07-28 request's ``_meta``; a handshake-era client's
    ``logging/setLevel``), stamped on what goes to a 2026-07-28 server and set on a handshake-era call's own
    connection: without it a server sends no log messages about the call."""

    @classmethod
    def of_request(cls, params: JSONObject, principal: str | None, ui: ElicitationHandler | None) -> Downstream:
        """The client of one 2026-07-28 request, from its ``_meta``."""
        meta = params.get("_meta")
        meta = meta if isinstance(meta, dict) else {}
        caps = meta.get(META_CLIENT_CAPABILITIES)
        level = meta.get(META_LOG_LEVEL)
        return cls(
            str(meta.get(META_PROTOCOL_VERSION)),
            caps if isinstance(caps, dict) else {},
            meta.get(META_CLIENT_INFO),
            principal,
            ui,
            level if isinstance(level, str) else None,
        )

    @property
    def stateless(self) -> bool:
        return self.revision is not None and is_stateless(self.revision)

    def modes(self) -> frozenset[str]:
        """The elicitation modes the client declared (an empty ``elicitation`` object means form, 2025-11-25)."""
        elicitation = self.capabilities.get("elicitation")
        if not isinstance(elicitation, dict):
            return frozenset()
        return frozenset(m for m in ("form", "url") if isinstance(elicitation.get(m), dict)) or frozenset({"form"})

    def ui_modes(self) -> frozenset[str]:
        """Modes the proxy answers itself: those the client did not declare, when a ``ui`` is set."""
        if self.ui is None:
            return frozenset()
        modes = {"form"} | ({"url"} if hasattr(self.ui, "url") else set())
        return frozenset(modes) - self.modes()

    def renders(self, request: object) -> bool:
        """Whether the proxy answers this (input) request itself rather than the client."""
        if not isinstance(request, dict) or request.get("method") != "elicitation/create":
            return False
        params = request.get("params")
        mode = params.get("mode", "form") if isinstance(params, dict) else None
        return mode in self.ui_modes()

    def upstream_capabilities(self) -> JSONObject:
        """What the client declared, plus the elicitation modes the proxy renders itself: never wider.

        A 2025-11-25 client's ``tasks`` (``tasks.requests.elicitation.create``: the server may run its questions as
        tasks on the client) stays downstream: the proxy relays questions, not the ``tasks/*`` requests to a client.
        """
        declared = {key: value for key, value in self.capabilities.items() if key != "tasks"}
        extra = self.ui_modes()
        if not extra:
            return declared
        modes = self.modes() | extra
        return {**declared, "elicitation": {mode: {} for mode in sorted(modes)}}

    def with_meta(self, params: JSONObject, version: str) -> JSONObject:
        """``params`` with the 2026-07-28 per-request fields for the upstream server, from this client's."""
        own = params.get("_meta")
        meta = dict(own) if isinstance(own, dict) else {}
        meta[META_PROTOCOL_VERSION] = version
        meta[META_CLIENT_CAPABILITIES] = self.upstream_capabilities()
        meta[META_CLIENT_INFO] = self.client if isinstance(self.client, dict) else PROXY_INFO
        if self.log_level is not None:
            meta[META_LOG_LEVEL] = self.log_level
        return {**params, "_meta": meta}

    def client_info(self) -> JSONObject:
        return self.client if isinstance(self.client, dict) else PROXY_INFO


def strip_meta(params: JSONObject) -> JSONObject:
    """A 2026-07-28 request as a handshake-era server reads it: without the per-request protocol fields, and
    without a ``task`` (a 2025-11-25 task request: 2026-07-28 has none, and a server there ignores one, so it must
    not turn the call into a 2025-11-25 task upstream; the proxy adds one itself for a task-required tool)."""
    meta = params.get("_meta")
    if "task" in params:
        params = {k: v for k, v in params.items() if k != "task"}
    if not isinstance(meta, dict):
        return params
    kept = {k: v for k, v in meta.items() if k not in _PER_REQUEST_META}
    stripped = {k: v for k, v in params.items() if k != "_meta"}
    if kept:
        stripped["_meta"] = kept
    return stripped
