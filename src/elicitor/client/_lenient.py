"""Reading what a server lists and answers, one entry at a time, so that one bad entry never costs the good ones.

Servers come from every era and every author: the official SDKs, FastMCP, hand-written ones, revisions from
2024-11-05 to 2026-07-28. A tool without ``inputSchema``, a content block of a type added after this client was
written, an ``annotations`` that is a string: each is one entry's problem, not the whole result's. The rules:

- An entry missing a required field, or with one of the wrong type, is left out of the list with a warning naming
  it and what was wrong (a tool: ``name`` and ``inputSchema``).
- An optional field of the wrong type is dropped from its entry with a warning; the entry stays.
- A content block the client cannot read (an unknown ``type``, or a known one missing a field) is kept, in its
  place, as :class:`~elicitor.types.UnknownContent` holding the block as sent and the reason.
- Fields the client does not know are ignored, as a newer revision's always are.

A result that is not an object, or whose list is not a list, is still a :class:`RemoteProtocolError`: nothing in
it can be told good from bad.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from .._exceptions import RemoteProtocolError
from ..types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    Tool,
    UnknownContent,
)

logger = logging.getLogger("elicitor.client")

S = TypeVar("S", bound=msgspec.Struct)

_BLOCKS: dict[str, type[ContentBlock]] = {
    "text": TextContent,
    "image": ImageContent,
    "audio": AudioContent,
    "resource": EmbeddedResource,
    "resource_link": ResourceLink,
}


def read_fields(raw: Mapping[str, Any], cls: type[S]) -> tuple[S | None, list[str]]:
    """``raw`` as ``cls``, dropping each optional field that does not fit; ``None`` when a required one does not.

    Returns the value and one message per problem (msgspec's, which names the field's path).
    """
    try:
        return msgspec.convert(raw, cls), []
    except msgspec.ValidationError:
        pass
    optional = [f.encode_name for f in msgspec.structs.fields(cls) if not f.required and f.encode_name in raw]
    base = {key: value for key, value in raw.items() if key not in optional}
    try:
        msgspec.convert(base, cls)
    except msgspec.ValidationError as exc:
        return None, [str(exc)]
    kept, problems = dict(base), []
    for name in optional:
        try:
            msgspec.convert({**base, name: raw[name]}, cls)
        except msgspec.ValidationError as exc:
            problems.append(f"{exc} (left out)")
        else:
            kept[name] = raw[name]
    return msgspec.convert(kept, cls), problems


def _label(raw: Mapping[str, Any]) -> str:
    """How a log names an entry: its name, or (without a string one) the start of the entry itself."""
    name = raw.get("name")
    if isinstance(name, str):
        return repr(name[:120])
    text = repr(raw)
    return f"without a string name ({text[:120]}{'...' if len(text) > 120 else ''})"


def read_tool(raw: Any, left_out: list[str] | None = None) -> Tool | None:
    """One ``tools/list`` entry, or ``None`` when it cannot be a tool: logged, and the reason appended to
    ``left_out`` when given."""
    if not isinstance(raw, dict):
        _leave_out(f"leaving out a tools/list entry that is a {type(raw).__name__}, not an object", left_out)
        return None
    tool, problems = read_fields(raw, Tool)
    name = _label(raw)
    if tool is None:
        _leave_out(f"leaving out tool {name}: {problems[0]}", left_out)
        return None
    for problem in problems:
        logger.warning("tool %s: %s", name, problem)
    return tool


def _leave_out(problem: str, left_out: list[str] | None) -> None:
    logger.warning("%s", problem)
    if left_out is not None:
        left_out.append(problem)


def read_block(raw: Any) -> ContentBlock | UnknownContent:
    """One content block; one the client cannot read is kept as :class:`UnknownContent`."""
    if not isinstance(raw, dict):
        return UnknownContent(raw=raw, problem=f"a content block must be an object, not a {type(raw).__name__}")
    kind = raw.get("type")
    cls = _BLOCKS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return UnknownContent(raw=raw, problem=f"unknown content type {kind!r}")
    block, problems = read_fields(raw, cls)
    if block is None:
        return UnknownContent(raw=raw, problem=f"a block of type {kind!r} that does not parse: {problems[0]}")
    for problem in problems:
        logger.warning("%s content block: %s", kind, problem)
    return block


def read_tool_result(raw: Any, what: str) -> CallToolResult:
    """A ``tools/call`` result (``what``: whose, for messages): lenient field by field and block by block."""
    if not isinstance(raw, dict):
        raise RemoteProtocolError(f"the server sent an invalid {what}: a {type(raw).__name__}, not an object")
    try:  # the common case, at msgspec's speed: every block known and well formed
        whole = msgspec.convert(raw, CallToolResult)
    except msgspec.ValidationError:
        pass
    else:  # a block the server itself tagged as ours is not one the client made: read block by block below
        if not any(isinstance(block, UnknownContent) for block in whole.content):
            return whole
    content = raw.get("content")
    if content is None:  # absent, or null (a Go server's empty slice)
        content = []
    if not isinstance(content, list):
        raise RemoteProtocolError(f"the server sent an invalid {what}: content is a {type(content).__name__}")
    rest = {key: value for key, value in raw.items() if key != "content"}
    result, problems = read_fields(rest, CallToolResult)
    assert result is not None  # every field is optional
    for problem in problems:
        logger.warning("%s: %s", what, problem)
    blocks = [read_block(block) for block in content]
    for block in blocks:
        if isinstance(block, UnknownContent):
            logger.warning("%s: keeping a content block it cannot read as it is: %s", what, block.problem)
    return msgspec.structs.replace(result, content=blocks)
