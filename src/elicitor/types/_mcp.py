"""MCP wire structures elicitor decodes or encodes with a fixed shape.

Python names are snake_case; the wire is camelCase (``rename="camel"``). Unknown wire fields are tolerated
(a newer peer may add fields); missing optional fields are ``UNSET`` or ``None`` and are omitted on encode.
Shapes follow ``schema.ts`` of 2025-11-25 and 2026-07-28.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

ElicitAction: TypeAlias = Literal["accept", "decline", "cancel"]
LoggingLevel: TypeAlias = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]

LOGGING_LEVELS: tuple[LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


class _Wire(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, rename="camel"):
    pass


class Implementation(_Wire, frozen=True):
    """``clientInfo`` / ``serverInfo``: who is on the other end (self-reported, for display only)."""

    name: str
    version: str = ""
    title: str | None = None
    description: str | None = None
    website_url: str | None = None

    def display(self) -> str:
        """A one-line label for people: title (or name) and version."""
        label = self.title or self.name
        return f"{label} {self.version}".strip()


class TextContent(_Wire, frozen=True, tag="text", tag_field="type"):
    text: str
    annotations: dict[str, Any] | None = None


class ImageContent(_Wire, frozen=True, tag="image", tag_field="type"):
    data: str
    mime_type: str
    annotations: dict[str, Any] | None = None


class AudioContent(_Wire, frozen=True, tag="audio", tag_field="type"):
    data: str
    mime_type: str
    annotations: dict[str, Any] | None = None


class EmbeddedResource(_Wire, frozen=True, tag="resource", tag_field="type"):
    resource: dict[str, Any]
    annotations: dict[str, Any] | None = None


class ResourceLink(_Wire, frozen=True, tag="resource_link", tag_field="type"):
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    """The resource's size in bytes, when the server knows it (before any encoding)."""
    annotations: dict[str, Any] | None = None


ContentBlock: TypeAlias = TextContent | ImageContent | AudioContent | EmbeddedResource | ResourceLink
"""A content block of a tool result or prompt message, tagged by ``type``."""


class UnknownContent(msgspec.Struct, frozen=True, kw_only=True, tag="x-elicitor-unknown", tag_field="type"):
    """A content block of a server's result that the client could not read as any :data:`ContentBlock`.

    A ``type`` a newer (or a private) revision added, or a known ``type`` missing a required field: the rest of the
    result stays usable, and this block is kept for the caller to inspect or forward instead of failing the call.
    Only the client makes these; a server never sends one.
    """

    raw: Any
    """The block exactly as the server sent it (an object, unless the server sent something else)."""
    problem: str
    """Why it could not be read (an unknown ``type``, or what a known type's block is missing)."""

    @property
    def kind(self) -> str | None:
        """The block's ``type`` as sent, when it is a string."""
        kind = self.raw.get("type") if isinstance(self.raw, dict) else None
        return kind if isinstance(kind, str) else None


TaskSupport: TypeAlias = Literal["forbidden", "optional", "required"]


class ToolExecution(_Wire, frozen=True):
    """A tool's ``execution`` (2025-11-25 server/tools): how it may be run."""

    task_support: str | None = None
    """``"forbidden"`` (the default), ``"optional"`` or ``"required"``: whether a call may, or must, run as a task
    (basic/utilities/tasks, "Tool-Level Negotiation")."""


class Tool(_Wire, frozen=True):
    """A tool as ``tools/list`` describes it."""

    name: str
    input_schema: dict[str, Any]
    title: str | None = None
    description: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    execution: ToolExecution | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")
    """The tool's ``_meta``, as the server sent it."""

    @property
    def task_support(self) -> TaskSupport:
        """Whether a call of this tool may (``"optional"``) or must (``"required"``) run as a task; a value this
        client does not know counts as the default, ``"forbidden"``."""
        support = self.execution.task_support if self.execution is not None else None
        if support == "optional":
            return "optional"
        return "required" if support == "required" else "forbidden"


class CallToolResult(_Wire, frozen=True):
    """The final result of ``tools/call``: content blocks, optional structured content, and ``isError``."""

    content: list[ContentBlock | UnknownContent] = msgspec.field(default_factory=list)
    """The blocks in order; a block the client could not read is kept as :class:`UnknownContent`."""
    structured_content: Any = None
    is_error: bool = False
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")
    """The result's ``_meta``, as the server sent it."""

    @property
    def text(self) -> str:
        """The text blocks joined by newlines: convenient for tests and terminals."""
        return "\n".join(block.text for block in self.content if isinstance(block, TextContent))
