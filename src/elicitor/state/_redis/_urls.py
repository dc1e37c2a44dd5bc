"""The URL registry on Redis: URL-mode elicitations, indexed by (connection, question) (``P url:``, ``P asked:``,
``P started:``)."""

from __future__ import annotations

import secrets
from typing import cast

from .._ports import UrlRecord
from ._shared import _fields, _ms, _Shared, _text

_ADD = """
if ARGV[5] == '1' then
  local known = redis.call('HGET', KEYS[2], ARGV[4])
  if known then
    local record = redis.call('HGETALL', ARGV[1] .. known)
    if #record > 0 then return {known, record} end
  end
end
local record = redis.call('HGETALL', KEYS[1])
if #record > 0 then return {ARGV[3], record} end
redis.call('HSET', KEYS[1], unpack(ARGV, 6))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if KEYS[3] then
  redis.call('SADD', KEYS[3], ARGV[3])
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
  if ARGV[5] == '1' then
    redis.call('HSET', KEYS[2], ARGV[4], ARGV[3])
    redis.call('PEXPIRE', KEYS[2], ARGV[2])
  end
end
return false
"""
"""KEYS: the record, then (with a connection) the connection's index and set. ARGV: the record key prefix, the TTL
in ms, the id, the question, ``1`` to use the index, the record's fields and values. Returns ``[id, fields]`` of the
record already there (by question, then by id), or nil once the new one is written."""

_FIND = """
local known = redis.call('HGET', KEYS[1], ARGV[2])
if not known then return false end
local record = redis.call('HGETALL', ARGV[1] .. known)
if #record == 0 then return false end
return {known, record}
"""
"""KEYS: the connection's index. ARGV: the record key prefix, the question. Returns ``[id, fields]`` or nil."""

_COMPLETE = """
local record = redis.call('HGETALL', KEYS[1])
if #record == 0 then return false end
local fields = {}
for i = 1, #record, 2 do fields[record[i]] = record[i + 1] end
if fields['completed'] == '1' then
  if fields['completion'] == ARGV[3] then return record end
  return false
end
local bound = fields['principal']
if bound and (ARGV[1] == '0' or bound ~= ARGV[2]) then return false end
redis.call('HSET', KEYS[1], 'completed', '1', 'completion', ARGV[3])
return record
"""
"""KEYS: the record. ARGV: ``1`` if a principal completes, that principal, a token unique to this call. Returns the
fields before completion, or nil (and changes nothing) if unknown, already completed, or bound to another principal.
The same call sent twice (a retry on a new connection) finds its own token and gets the record again: a completion
counts once, and the caller that made it learns it."""

_MOVE = """
local record = redis.call('HGETALL', KEYS[1])
if #record == 0 then return false end
local fields = {}
for i = 1, #record, 2 do fields[record[i]] = record[i + 1] end
if fields['completed'] == '1' or fields['connection'] ~= ARGV[1] then return record end
redis.call('HSET', KEYS[1], 'replica', ARGV[2], 'connection', ARGV[3])
redis.call('SREM', KEYS[2], ARGV[4])
if redis.call('HGET', KEYS[3], ARGV[5]) == ARGV[4] then redis.call('HDEL', KEYS[3], ARGV[5]) end
redis.call('SADD', KEYS[4], ARGV[4])
redis.call('PEXPIRE', KEYS[4], ARGV[6])
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[5], ARGV[5], ARGV[4])
  redis.call('PEXPIRE', KEYS[5], ARGV[6])
end
return redis.call('HGETALL', KEYS[1])
"""
"""KEYS: the record, the old connection's set and index, the new connection's set and index. ARGV: the old
connection, the new replica and connection, the id, the question (``""``: none), the TTL in ms. Returns the record's
fields as they then stand (unchanged if completed or no longer the old connection's), or nil if it is gone."""

_FORGET = """
local gone = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  gone = gone + redis.call('DEL', ARGV[1] .. id)
end
redis.call('DEL', KEYS[1], KEYS[2])
return gone
"""
"""KEYS: the connection's set and index. ARGV: the record key prefix. Returns how many records were deleted."""


class RedisUrlRegistry:
    """URL-mode elicitations as hashes with a TTL, indexed by (connection, question); changes are Lua scripts."""

    def __init__(self, shared: _Shared, *, ttl: float) -> None:
        self._shared = shared
        self._ttl = _ms(ttl)
        client = shared.client
        self._add = client.register_script(_ADD)
        self._find = client.register_script(_FIND)
        self._complete = client.register_script(_COMPLETE)
        self._forget = client.register_script(_FORGET)
        self._move = client.register_script(_MOVE)

    async def add(self, record: UrlRecord, question: str | None = None) -> UrlRecord:
        """Store ``record`` unless its connection already asked ``question`` (or its id is taken): then that one.

        The check and the write are one script, so the same question asked at once from two requests gets one
        record.
        """
        keys = [self._shared.key("url", record.id)]
        if record.connection is not None:
            keys += [self._shared.key("asked", record.connection), self._shared.key("started", record.connection)]
        indexed = question is not None and record.connection is not None
        values = {
            "message": record.message,
            "url": record.url,
            "completed": "1" if record.completed else "0",
            "principal": record.principal,
            "replica": record.replica,
            "connection": record.connection,
            "trace": record.trace,
        }
        fields = [part for name, value in values.items() if value is not None for part in (name, value)]
        args = [self._shared.key("url", ""), self._ttl, record.id, question or "", "1" if indexed else "0", *fields]
        with self._shared.failing("registering a URL elicitation"):
            known = await self._add(keys=keys, args=args)
        return record if known is None else self._decode(known[0], _fields(known[1]))

    async def get(self, elicitation_id: str) -> UrlRecord | None:
        """The record, or ``None`` if unknown or expired."""
        with self._shared.failing("reading a URL elicitation"):
            found = await self._shared.client.hgetall(self._shared.key("url", elicitation_id))
        fields = cast("dict[bytes, bytes]", found)  # bytes: decode_responses is off
        return self._decode(elicitation_id.encode(), fields) if fields else None

    async def find(self, connection: str, question: str) -> UrlRecord | None:
        """The live record ``connection`` registered for ``question``, if any (index and record read together)."""
        with self._shared.failing("finding a URL elicitation"):
            known = await self._find(
                keys=[self._shared.key("asked", connection)], args=[self._shared.key("url", ""), question]
            )
        return None if known is None else self._decode(known[0], _fields(known[1]))

    async def complete(
        self, elicitation_id: str, principal: str | None, attempt: str | None = None
    ) -> UrlRecord | None:
        """Mark it completed and return it, in one script: of two racing completions exactly one gets the record.

        ``None`` (nothing changed) if it is unknown, expired, already completed, or bound to another principal; a
        record bound to no principal may be completed by anyone. A try under the ``attempt`` that completed it
        gets the record again (the token is random when none is given: redis-py's own resend is then the only
        retry).
        """
        token = attempt or secrets.token_hex(8)
        args = ["0", "", token] if principal is None else ["1", principal, token]
        with self._shared.failing("completing a URL elicitation"):
            before = await self._complete(keys=[self._shared.key("url", elicitation_id)], args=args)
        if before is None:
            return None
        fields = _fields(before)
        fields[b"completed"] = b"1"  # the script returns the record as it found it: open
        return self._decode(elicitation_id.encode(), fields)

    async def move(
        self, elicitation_id: str, was: str, replica: str, connection: str, question: str | None = None
    ) -> UrlRecord | None:
        """Point it at ``connection`` on ``replica``, and let ``was`` go of it, in one script: a completion racing
        it reads the record before or after, never between (the notice goes to one of the two, the one the record
        named when it completed)."""
        key = self._shared.key
        keys = [key("url", elicitation_id), key("started", was), key("asked", was)]
        keys += [key("started", connection), key("asked", connection)]
        args: list[str | int] = [was, replica, connection, elicitation_id, question or "", self._ttl]
        with self._shared.failing("moving a URL elicitation"):
            fields = await self._move(keys=keys, args=args)
        return None if fields is None else self._decode(elicitation_id.encode(), _fields(fields))

    async def forget_connection(self, connection: str) -> int:
        """Delete every record ``connection`` registered (with or without a question) and its index: it closed."""
        keys = [self._shared.key("started", connection), self._shared.key("asked", connection)]
        with self._shared.failing("forgetting a connection's URL elicitations"):
            gone = await self._forget(keys=keys, args=[self._shared.key("url", "")])
        return int(gone)

    @staticmethod
    def _decode(elicitation_id: bytes, fields: dict[bytes, bytes]) -> UrlRecord:
        return UrlRecord(
            id=elicitation_id.decode(),
            message=fields[b"message"].decode(),
            url=fields[b"url"].decode(),
            principal=_text(fields.get(b"principal")),
            replica=_text(fields.get(b"replica")),
            connection=_text(fields.get(b"connection")),
            completed=fields.get(b"completed") == b"1",
            trace=_text(fields.get(b"trace")),
        )
