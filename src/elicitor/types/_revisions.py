"""Protocol revisions and the per-request ``_meta`` keys of 2026-07-28.

Spec: https://modelcontextprotocol.io/specification/2026-07-28/basic/versioning
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

Revision: TypeAlias = Literal["2025-06-18", "2025-11-25", "2026-07-28"]
"""A protocol revision elicitor speaks."""

REV_2025_06_18: Final = "2025-06-18"
REV_2025_11_25: Final = "2025-11-25"
REV_2026_07_28: Final = "2026-07-28"

HANDSHAKE_REVISIONS: Final[tuple[Revision, ...]] = ("2025-11-25", "2025-06-18")
"""Revisions with an ``initialize`` handshake, newest first."""

STATELESS_REVISIONS: Final[tuple[Revision, ...]] = ("2026-07-28",)
"""Stateless revisions: version, capabilities and client info travel in every request's ``_meta``."""

ALL_REVISIONS: Final[tuple[Revision, ...]] = STATELESS_REVISIONS + HANDSHAKE_REVISIONS
"""Every revision elicitor speaks, newest first."""

ACCEPTED_OLDER_REVISIONS: Final = ("2025-03-26", "2024-11-05")
"""A server may offer these in ``initialize``; the client goes on with them. They have no elicitation at all: a
client on one of them accepts no ``elicitation/create`` (-32601), whatever it declared when it offered a newer
revision, because the server chose a revision where the capability does not exist."""

META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"


def is_stateless(revision: str) -> bool:
    """Tell whether ``revision`` is a stateless (multi-round-trip) revision."""
    return revision in STATELESS_REVISIONS


def has_elicitation(revision: str) -> bool:
    """Elicitation exists from 2025-06-18 on (not in the older revisions a client still accepts)."""
    return revision not in ACCEPTED_OLDER_REVISIONS


def supports_url_mode(revision: str) -> bool:
    """URL-mode elicitation exists from 2025-11-25 on."""
    return revision != REV_2025_06_18 and has_elicitation(revision)


def supports_rich_enums(revision: str) -> bool:
    """SEP-1330 enums (titled ``oneOf``, multi-select) and SEP-1034 defaults exist from 2025-11-25 on."""
    return revision != REV_2025_06_18 and has_elicitation(revision)


TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
META_IDEMPOTENCY_KEY: Final = "dev.elicitor/idempotencyKey"
"""``_meta`` key of a handshake-era ``tools/call``: random per call, the same when the call is sent again after its
session was lost, so a server that keeps calls in a shared store (it declares :data:`IDEMPOTENT_CALLS`) continues
the call where it was (answers given, ``ctx.once`` steps done, or its result) instead of starting it anew."""
IDEMPOTENT_CALLS: Final = "dev.elicitor/idempotentCalls"
"""The server capability (under ``experimental``) saying a ``tools/call`` may be sent again with the same
:data:`META_IDEMPOTENCY_KEY` after its session was lost."""
"""The tasks extension of 2026-07-28, as named in capabilities' ``extensions`` (ext-tasks "Extension Identifier")."""
