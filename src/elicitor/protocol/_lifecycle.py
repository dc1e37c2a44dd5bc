"""MCP lifecycle, version negotiation and per-request metadata, without I/O.

Theory of operation
-------------------
A dual-era server (https://modelcontextprotocol.io/specification/2026-07-28/basic/versioning) decides per request
which era it is serving:

* A request whose ``params._meta`` carries ``io.modelcontextprotocol/protocolVersion`` is *stateless*: it is served
  statelessly from that metadata alone (:func:`parse_request_meta`), whatever happened before on the connection.
* Anything else belongs to the *handshake* era and is governed by :class:`Handshake`, the table below. An
  ``initialize`` request negotiates a revision (:func:`negotiate`) and scopes it to the stdio process or the
  HTTP session.

Handshake states (server side)::

    AWAITING_INIT --initialize--> INITIALIZING --notifications/initialized--> READY
    any state --close--> CLOSED

Before ``initialize`` only ``ping`` is served; a second ``initialize`` is refused. Requests in INITIALIZING are
served (many clients race the ``initialized`` notification; refusing them would help nobody).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Final

import msgspec

from .._exceptions import JSONRPCError
from ..types import (
    ACCEPTED_OLDER_REVISIONS,
    ALL_REVISIONS,
    HANDSHAKE_REVISIONS,
    INVALID_PARAMS,
    INVALID_REQUEST,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    STATELESS_REVISIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
    Implementation,
    JSONObject,
    JSONValue,
    LoggingLevel,
    Revision,
    has_elicitation,
)
from ..types import LOGGING_LEVELS as _LEVELS


class HandshakeState(enum.Enum):
    AWAITING_INIT = "awaiting-init"
    INITIALIZING = "initializing"
    READY = "ready"
    CLOSED = "closed"


_PRE_INIT_METHODS: Final = frozenset({"initialize", "ping"})


@dataclass(frozen=True, slots=True)
class ClientCapabilities:
    """What a client declared it can do, read once from the wire.

    ``elicitation_modes`` is ``{"form"}`` for a bare ``elicitation: {}`` (the spec's backwards-compatible
    reading), ``{"form", "url"}`` when both are declared, and empty when elicitation is not declared at all.
    """

    elicitation_modes: frozenset[str] = frozenset()
    sampling: bool = False
    roots: bool = False
    raw: JSONObject = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: object) -> ClientCapabilities:
        """Read a ``ClientCapabilities`` object; anything malformed counts as "not declared"."""
        if not isinstance(raw, dict):
            return cls()
        elicitation = raw.get("elicitation")
        modes: frozenset[str] = frozenset()
        if isinstance(elicitation, dict):
            declared = {m for m in ("form", "url") if isinstance(elicitation.get(m), dict)}
            modes = frozenset(declared or {"form"})
        return cls(
            elicitation_modes=modes,
            sampling=isinstance(raw.get("sampling"), dict),
            roots=isinstance(raw.get("roots"), dict),
            raw=raw,
        )


@dataclass(frozen=True, slots=True)
class RequestMeta:
    """Who asks and how, for one request: the revision, the client's capabilities and identity."""

    revision: str
    """The revision of the request: one elicitor speaks, or on a handshake session an older one its client asked for
    (2025-03-26, 2024-11-05: no elicitation)."""
    capabilities: ClientCapabilities
    client_info: Implementation | None
    log_level: LoggingLevel | None = None
    principal: str | None = None
    """The authenticated user, as the transport established it; never read from the message."""


def negotiate(requested: object) -> str:
    """Pick the handshake revision to answer an ``initialize`` with.

    The server echoes the client's version if it supports it, else offers its own latest; the client then decides
    whether to continue (lifecycle.mdx, "Version Negotiation"). A stateless revision asked through ``initialize`` is
    answered with the latest handshake revision: that path has no stateless semantics.

    A client of 2025-03-26 or 2024-11-05 gets its own revision back: offered a newer one, the clients of those years
    (the official SDKs among them) give up the connection. Neither revision has elicitation, so such a client is
    never asked (:meth:`Handshake.initialize`): a tool that asks gets ``ElicitationUnsupported``, which its caller
    reads as the tool's error.
    """
    if isinstance(requested, str) and (requested in HANDSHAKE_REVISIONS or requested in ACCEPTED_OLDER_REVISIONS):
        return requested
    return HANDSHAKE_REVISIONS[0]


def is_stateless_request(params: JSONObject | None) -> bool:
    """A request is stateless when its ``_meta`` names a protocol version (any: unknown ones get -32022)."""
    if not params:
        return False
    meta = params.get("_meta")
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta


def parse_request_meta(params: JSONObject | None, supported: tuple[Revision, ...] = STATELESS_REVISIONS) -> RequestMeta:
    """Read the per-request metadata of a 2026-07-28 request.

    Raises:
        JSONRPCError: -32602 when ``_meta`` or a required field is missing or malformed; -32022 (with
            ``data.supported`` and ``data.requested``) when the revision is not served.
    """
    meta = params.get("_meta") if params else None
    if not isinstance(meta, dict):
        raise JSONRPCError(INVALID_PARAMS, "Invalid params: missing _meta with the per-request protocol fields")
    version = meta.get(META_PROTOCOL_VERSION)
    if not isinstance(version, str):
        raise JSONRPCError(INVALID_PARAMS, f"Invalid params: _meta is missing {META_PROTOCOL_VERSION}")
    if version not in supported:
        data: JSONValue = {"supported": list(supported), "requested": version}
        raise JSONRPCError(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", data)
    capabilities = meta.get(META_CLIENT_CAPABILITIES)
    if not isinstance(capabilities, dict):
        raise JSONRPCError(INVALID_PARAMS, f"Invalid params: _meta is missing {META_CLIENT_CAPABILITIES}")
    level = meta.get(META_LOG_LEVEL)
    return RequestMeta(
        revision=version,
        capabilities=_parse_capabilities(capabilities),
        client_info=parse_implementation(meta.get(META_CLIENT_INFO)),
        log_level=level if level in _LEVELS else None,
    )


def _parse_capabilities(raw: JSONObject) -> ClientCapabilities:
    """``ClientCapabilities.parse`` for a request's ``_meta``: a 2026-07-28 client sends the same capabilities with
    every request (every round of a call), so each distinct set is read once (bounded cache), and the rounds of a
    call compare equal at the cost of an identity check."""
    key = _encode(raw)
    cached = _capabilities.get(key)
    if cached is None:
        if len(_capabilities) >= 64:
            _capabilities.clear()
        cached = _capabilities[key] = ClientCapabilities.parse(raw)
    return cached


def parse_implementation(raw: object) -> Implementation | None:
    """Read ``clientInfo``/``serverInfo`` leniently: a field of the wrong type is left out (a missing ``version``
    is ``""``); without a string ``name`` the whole is treated as absent.

    2026-07-28 clients send ``clientInfo`` with every request; each distinct one is read once (bounded cache).
    """
    if not isinstance(raw, dict):
        return None
    key = _encode(raw)
    cached = _implementations.get(key)
    if cached is not None:
        return cached
    info: Implementation | None
    try:
        info = msgspec.convert(raw, Implementation)
    except msgspec.ValidationError:  # keep each field that is a string (a ``title`` of another shape costs only it)
        kept = {key: raw[key] for key in _IMPLEMENTATION_FIELDS if isinstance(raw.get(key), str)}
        info = msgspec.convert(kept, Implementation) if "name" in kept else None
    if info is not None:
        if len(_implementations) >= 64:
            _implementations.clear()
        _implementations[key] = info
    return info


_encode = msgspec.json.Encoder().encode
_IMPLEMENTATION_FIELDS = tuple(field.encode_name for field in msgspec.structs.fields(Implementation))
_implementations: dict[bytes, Implementation] = {}
_capabilities: dict[bytes, ClientCapabilities] = {}


class Handshake:
    """The server side of the ``initialize`` handshake, as a table (see the module docstring)."""

    __slots__ = ("capabilities", "client_info", "revision", "state")

    def __init__(self) -> None:
        self.state = HandshakeState.AWAITING_INIT
        self.revision: str | None = None
        """The revision ``initialize`` settled on: one of ``HANDSHAKE_REVISIONS``, or an older one the client asked
        for (see :func:`negotiate`)."""
        self.capabilities = ClientCapabilities()
        self.client_info: Implementation | None = None

    def check(self, method: str) -> None:
        """Raise the JSON-RPC error to answer if a handshake-era request for ``method`` may not run now."""
        if self.state is HandshakeState.AWAITING_INIT and method not in _PRE_INIT_METHODS:
            raise JSONRPCError(
                INVALID_REQUEST,
                f"Invalid request: {method!r} before initialize. Send initialize first, or use the 2026-07-28 "
                f"per-request _meta ({META_PROTOCOL_VERSION}); supported versions: {', '.join(ALL_REVISIONS)}",
            )
        if method == "initialize" and self.state is not HandshakeState.AWAITING_INIT:
            raise JSONRPCError(INVALID_REQUEST, "Invalid request: the session is already initialized")

    def initialize(self, params: JSONObject | None) -> str:
        """Record an ``initialize`` request and return the negotiated revision."""
        params = params or {}
        self.revision = negotiate(params.get("protocolVersion"))
        self.capabilities = ClientCapabilities.parse(params.get("capabilities"))
        if not has_elicitation(self.revision) and self.capabilities.elicitation_modes:
            # Declared on a revision that has no elicitation/create: the client could not take the request.
            self.capabilities = dataclasses.replace(self.capabilities, elicitation_modes=frozenset())
        self.client_info = parse_implementation(params.get("clientInfo"))
        self.state = HandshakeState.INITIALIZING
        return self.revision

    def initialized(self) -> None:
        """Record ``notifications/initialized`` (a no-op in any other state: the spec gives it no error)."""
        if self.state is HandshakeState.INITIALIZING:
            self.state = HandshakeState.READY

    def close(self) -> None:
        self.state = HandshakeState.CLOSED
