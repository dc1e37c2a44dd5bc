"""What an oversized message was, from its first and last bytes alone (sans-I/O).

A message over the size limit is dropped unread (:class:`~elicitor.protocol.Oversized`), but dropping it silently
strands whoever waits for it: a response the client dropped leaves its request waiting for ever, and a request the
server dropped leaves the peer's call waiting for an answer that never comes (JSON-RPC can only say "invalid request"
with a null id, which no peer can match to its call). Its envelope is in its first or last bytes: every SDK writes
``jsonrpc``, ``id`` and ``method``/``result``/``error`` before or after the one large member (``params``, ``result``),
some with ``id`` first (the Python SDKs, elicitor), some with it last (the TypeScript SDK). :func:`peek_envelope`
reads the object's top-level members from the start while they are whole, then looks for an ``id`` just before the
object's closing brace, and says what it found. A wrong guess costs little (a peer can answer any of our ids with
an error anyway), and nothing here raises, whatever the bytes.
"""

from __future__ import annotations

import re
from typing import Final, Literal, TypeAlias

import msgspec

from ..types import RequestId

Kind: TypeAlias = Literal["request", "notification", "response", "unknown"]

_WHITESPACE: Final = b" \t\r\n"
_TAIL_ID: Final = re.compile(
    rb'[,{][ \t\r\n]*"id"[ \t\r\n]*:[ \t\r\n]*(-?\d{1,20}|"(?:[^"\\]|\\.){0,256}")[ \t\r\n]*}[ \t\r\n]*\Z'
)
"""An ``id`` member just before the object's closing brace: where the TypeScript SDK writes it."""

_COMPOSITE: Final = object()
_decode = msgspec.json.decode


def peek_envelope(head: bytes, tail: bytes = b"") -> tuple[RequestId | None, Kind]:
    """The id (``None`` if not found) and kind of the JSON-RPC message that begins with ``head`` and ends with
    ``tail``.

    ``"request"``: a ``method`` and an ``id``; ``"notification"``: a ``method`` and no ``id`` anywhere it could be;
    ``"response"``: a ``result`` or an ``error``; ``"unknown"``: the members read say neither (a first member too
    large to read past, or not JSON).
    """
    try:
        members = _members(head)
    except Exception:
        members = {}
    request_id = _id(members.get("id"))
    id_seen = "id" in members
    if not id_seen:
        match = _TAIL_ID.search(tail)
        id_seen = match is not None
        if match is not None:
            try:
                request_id = _id(_decode(match.group(1)))
            except msgspec.DecodeError:
                request_id = None
    if "method" in members:
        if request_id is not None:
            return request_id, "request"
        return None, "unknown" if id_seen else "notification"
    if "result" in members or "error" in members:
        return request_id, "response"
    return request_id, "unknown"


def _id(value: object) -> RequestId | None:
    """``value`` if it can be a JSON-RPC id (a string, or an integer that is not a bool)."""
    if type(value) is int or type(value) is str:
        return value
    return None


def _members(data: bytes) -> dict[str, object]:
    """The top-level members of the JSON object at the start of ``data`` whose key is whole: a scalar value read
    whole, a composite one or one cut off by the end of ``data`` as :data:`_COMPOSITE`."""
    members: dict[str, object] = {}
    end = len(data)
    i = _skip(data, 0)
    if i >= end or data[i] != ord("{"):
        return members
    i += 1
    while True:
        i = _skip(data, i)
        if i >= end or data[i] != ord('"'):
            return members
        stop = _string_end(data, i)
        if stop < 0:
            return members
        key = _decode(data[i:stop])
        i = _skip(data, stop)
        if i >= end or data[i] != ord(":"):
            return members
        i = _skip(data, i + 1)
        if i >= end:
            members[key] = _COMPOSITE
            return members
        first = data[i]
        if first == ord('"'):
            stop = _string_end(data, i)
            if stop < 0:
                members[key] = _COMPOSITE
                return members
            members[key] = _decode(data[i:stop])
        elif first in b"{[":
            stop = _composite_end(data, i)
            members[key] = _COMPOSITE
            if stop < 0:
                return members
        else:
            stop = i
            while stop < end and data[stop] not in b",}" and data[stop] not in _WHITESPACE:
                stop += 1
            if stop >= end:
                members[key] = _COMPOSITE
                return members
            members[key] = _decode(data[i:stop])
        i = _skip(data, stop)
        if i >= end or data[i] != ord(","):
            return members
        i += 1


def _skip(data: bytes, i: int) -> int:
    end = len(data)
    while i < end and data[i] in _WHITESPACE:
        i += 1
    return i


def _string_end(data: bytes, i: int) -> int:
    """The index just past the string that opens at ``data[i]``, or -1 if ``data`` ends inside it."""
    i += 1
    end = len(data)
    while i < end:
        byte = data[i]
        if byte == 0x5C:  # a backslash: the next byte is escaped
            i += 2
            continue
        if byte == 0x22:
            return i + 1
        i += 1
    return -1


def _composite_end(data: bytes, i: int) -> int:
    """The index just past the object or array that opens at ``data[i]``, or -1 if ``data`` ends inside it."""
    depth = 0
    end = len(data)
    while i < end:
        byte = data[i]
        if byte == 0x22:
            i = _string_end(data, i)
            if i < 0:
                return -1
            continue
        if byte in b"{[":
            depth += 1
        elif byte in b"}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1
