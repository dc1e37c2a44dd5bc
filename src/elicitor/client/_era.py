"""Which revision a client speaks with a server, and what each side said of itself.

With ``protocol="auto"`` the client probes with ``server/discover`` (2026-07-28 basic/lifecycle) and falls back to
the ``initialize`` handshake when the server does not know it, times out, or offers no stateless revision we
speak; -32022 (unsupported version) lists the server's revisions, and the newest both speak is tried once. On the
handshake revisions the server's capabilities, info and instructions come from ``initialize``; on 2026-07-28 from
``server/discover``, and every request carries the client's own version, capabilities and info in ``_meta``
(:meth:`Era.stamp`, built once per revision). What the client declares is exactly what it can do
(:class:`Declared`): nothing without a handler for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import msgspec

from .._exceptions import ConnectionClosed, ElicitorError, JSONRPCError
from ..protocol import parse_implementation
from ..session import Session
from ..transports import Transport
from ..types import (
    ACCEPTED_OLDER_REVISIONS,
    ALL_REVISIONS,
    HANDSHAKE_REVISIONS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    REV_2025_06_18,
    REV_2025_11_25,
    STATELESS_REVISIONS,
    TASKS_EXTENSION,
    UNSUPPORTED_PROTOCOL_VERSION,
    Implementation,
    JSONObject,
    LoggingLevel,
    has_elicitation,
    is_stateless,
)
from ._pace import Pace
from ._transport import SIGN_IN_FAILED, HttpAware

logger = logging.getLogger("elicitor.client")

PROBE_TIMEOUT = 10.0
"""Seconds a server may stay silent on ``server/discover`` (``protocol="auto"``) before it is taken for one of the
handshake era: such a server may never answer a method it does not know. ``Client``'s default ``probe_timeout``,
and ``elicitor proxy``'s limit for its own probe upstream."""


@dataclass(frozen=True, slots=True)
class Declared:
    """What this client can do, from which its capabilities are declared on each revision."""

    modes: frozenset[str]
    """Elicitation modes the handler takes (empty: no handler)."""
    sampling: bool = False
    roots: bool = False
    tasks: bool = True
    """Follow a server's tasks (declares the 2026-07-28 tasks extension) and, on 2025-11-25, run the server's
    elicitations as tasks when it asks (``tasks.requests.elicitation.create``)."""

    def modes_for(self, version: str | None) -> frozenset[str]:
        """The elicitation modes declared on ``version``, which are exactly the modes accepted: 2025-06-18 knows
        form mode only (its capability is a bare ``elicitation: {}``), so a URL request there is refused (-32602)
        before any handler sees it; the older revisions a server may choose (2025-03-26, 2024-11-05) know none."""
        if version is not None and not has_elicitation(version):
            return frozenset()
        if version == REV_2025_06_18:
            return self.modes & {"form"}
        return self.modes

    def capabilities(self, version: str) -> JSONObject:
        """The ``capabilities`` object for ``version``."""
        capabilities: JSONObject = {}
        modes = self.modes_for(version)
        if modes:
            if version == REV_2025_06_18:
                capabilities["elicitation"] = {}
            else:
                capabilities["elicitation"] = {mode: {} for mode in sorted(modes)}
        if self.sampling:
            capabilities["sampling"] = {}
        if self.roots:
            capabilities["roots"] = {}
        if self.tasks and is_stateless(version):
            capabilities["extensions"] = {TASKS_EXTENSION: {}}
        elif self.tasks and modes and version == REV_2025_11_25:
            # The server may ask its questions as tasks this client runs (client/_elicitation_tasks.py).
            capabilities["tasks"] = {"cancel": {}, "requests": {"elicitation": {"create": {}}}}
        return capabilities


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class Era:
    """The negotiated revision and what the server told of itself; the ``_meta`` every 2026-07-28 request carries."""

    def __init__(
        self, declared: Declared, client_info: Implementation, *, protocol: str, probe_timeout: float, pace: Pace
    ) -> None:
        self.declared = declared
        self.client_info = client_info
        self.transport: Transport | None = None
        """The connection's transport, told the revision when it is known (HTTP headers and sessions depend on it)."""
        self.log_level: LoggingLevel | None = None
        """Sent in every 2026-07-28 request's ``_meta`` once set."""
        self.protocol_version: str | None = None
        self.server_info: Implementation | None = None
        self.server_capabilities: JSONObject = {}
        self.instructions: str | None = None
        self._protocol = protocol
        self._probe_timeout = probe_timeout
        self._pace = pace
        self._meta_cache: dict[str, JSONObject] = {}
        self.probe_lost = False
        """``server/discover`` got no answer (``protocol="auto"``): the connection ended, or the server stayed
        silent. Old servers (the official Python SDK 1.6, say) stop serving on a method they do not know and end
        the connection only when the next line reaches them; ``Client`` then starts a stdio server again."""
        self.skip_probe = False
        """Begin with ``initialize`` even on ``auto``: this server ended the connection on ``server/discover``."""

    @property
    def stateless(self) -> bool:
        """Whether the revision in use is of the stateless era (2026-07-28)."""
        return self.protocol_version is not None and is_stateless(self.protocol_version)

    def adopt(self, version: str) -> None:
        """The revision is known: tell the transport."""
        self.protocol_version = version
        if isinstance(self.transport, HttpAware):
            self.transport.adopt(version)

    async def negotiate(self, session: Session) -> None:
        """Agree on a revision with the server (see the module's docstring)."""
        wanted = self._protocol
        if wanted == "auto" and self.skip_probe:
            await self.initialize(session, HANDSHAKE_REVISIONS[0])
        elif wanted == "auto" or is_stateless(wanted):
            version = STATELESS_REVISIONS[0] if wanted == "auto" else wanted
            # The probe's own limit is for telling a handshake-era server (which may never answer an unknown
            # method) from a slow one; a revision asked for by name has nothing to fall back to, so only the
            # handshake's limit applies (a stdio server still starting on a loaded machine is not a wrong era).
            # It counts the server's silence: a server that says it is there meanwhile (a proxy waiting on a person
            # beyond it sends SSE comments on the probe's stream) is working on the probe, whatever its era.
            limit = self._probe_timeout if wanted == "auto" else None
            try:
                with self._pace.deadline(limit, quiet=True) as probe:  # a person signing in is not counted
                    result = await self.discover(session, version)
                if probe.cancelled_caught:
                    raise TimeoutError(f"server/discover got no answer in {self._probe_timeout:g} s")
            except JSONRPCError as exc:
                if exc.code == UNSUPPORTED_PROTOCOL_VERSION and isinstance(exc.data, dict):
                    supported = exc.data.get("supported")
                    common = [v for v in STATELESS_REVISIONS if isinstance(supported, list) and v in supported]
                    if common:
                        await self.discover(session, common[0])
                        return
                if exc.data == SIGN_IN_FAILED:
                    raise  # a sign-in that failed says nothing of the server's era: never asked again for initialize
                if wanted != "auto":
                    raise JSONRPCError(
                        exc.code, f"{exc.message} (the server's answer to server/discover: it does not speak {wanted})",
                        exc.data,
                    ) from None  # fmt: skip
                logger.debug("server/discover failed (%s); falling back to initialize", exc)
            except TimeoutError:
                if wanted != "auto":
                    raise
                logger.debug("server/discover timed out; falling back to initialize")
                self.probe_lost = True
            except ConnectionClosed:
                self.probe_lost = wanted == "auto"
                raise
            else:
                if result:
                    return
                if wanted != "auto":
                    # A server of the handshake era may answer any method it does not know with an empty result:
                    # asked for by name, the revision is not replaced by another one in silence.
                    raise ElicitorError(f"the server does not speak {wanted}: its server/discover does not list it")
            await self.initialize(session, HANDSHAKE_REVISIONS[0])
        else:
            await self.initialize(session, wanted)

    async def discover(self, session: Session, version: str) -> bool:
        """``server/discover`` at ``version``: whether the server speaks it (then it is adopted)."""
        result = await session.request("server/discover", self.stamp({}, version))
        versions = result.get("supportedVersions")
        if not isinstance(versions, list) or version not in versions:
            return False
        self.adopt(version)
        self.server_capabilities = _dict(result.get("capabilities"))
        self.server_info = parse_implementation(_dict(result.get("_meta")).get(META_SERVER_INFO))
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None
        return True

    async def initialize(self, session: Session, version: str) -> None:
        """The ``initialize`` handshake offering ``version`` (again, when the server forgot our HTTP session)."""
        result = await session.request(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": self.declared.capabilities(version),
                "clientInfo": self._info(),
            },
        )
        offered = result.get("protocolVersion")
        if offered not in HANDSHAKE_REVISIONS + ACCEPTED_OLDER_REVISIONS:
            raise ElicitorError(
                f"the server offered protocol version {offered!r}; elicitor speaks {', '.join(ALL_REVISIONS)} "
                f"(and accepts {', '.join(ACCEPTED_OLDER_REVISIONS)}, without elicitation)"
            )
        self.adopt(str(offered))
        self.server_capabilities = _dict(result.get("capabilities"))
        self.server_info = parse_implementation(result.get("serverInfo"))
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None
        await session.notify("notifications/initialized")
        if isinstance(self.transport, HttpAware):
            self.transport.start_listening()

    def _info(self) -> JSONObject:
        return msgspec.to_builtins(self.client_info)  # type: ignore[no-any-return]

    def stamp(self, params: JSONObject, version: str | None = None) -> JSONObject:
        """``params`` with the 2026-07-28 per-request ``_meta`` (built once per version: it goes on every request)."""
        version = version or self.protocol_version
        assert version is not None
        base = self._meta_cache.get(version)
        if base is None:
            base = self._meta_cache[version] = {
                META_PROTOCOL_VERSION: version,
                META_CLIENT_CAPABILITIES: self.declared.capabilities(version),
                META_CLIENT_INFO: self._info(),
            }
        own = params.get("_meta")
        meta = {**own, **base} if isinstance(own, dict) else dict(base)
        if self.log_level is not None:
            meta[META_LOG_LEVEL] = self.log_level
        return {**params, "_meta": meta}
