"""The task registry on Redis: task records with a version for compare-and-swap (``P task:``)."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import msgspec
from redis.typing import EncodableT

from .._ports import StoreUnavailable, TaskRecord
from ._shared import _ms, _Shared

_TASK_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'v', 0, 'd', ARGV[1])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'owner', ARGV[2]) end
if ARGV[3] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[3]) end
return 1
"""
"""KEYS: the task hash. ARGV: the record's JSON, its owner or '', its expiry (Unix ms) or ''. 0 if it exists."""

_TASK_GET = """
local found = redis.call('HMGET', KEYS[1], 'v', 'd', 'owner', 'runner')
if not found[1] then return false end
local owner = found[3] or found[4]
local alive = 0
if owner then alive = redis.call('EXISTS', ARGV[1] .. owner) end
return {found[1], found[2], alive}
"""
"""KEYS: the task hash. ARGV: the prefix of lease keys. Returns ``[version, JSON, owner alive 0/1]`` or nil
(the owner from ``runner`` in a record written before ``owner`` was named so)."""

_TASK_SWAP = """
local version = redis.call('HGET', KEYS[1], 'v')
if version ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', tonumber(version) + 1, 'd', ARGV[2])
redis.call('HDEL', KEYS[1], 'runner')
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'owner', ARGV[3]) else redis.call('HDEL', KEYS[1], 'owner') end
return 1
"""
"""KEYS: the task hash. ARGV: the expected version, the new JSON, the owner or ''. 0 if the version moved on."""


class RedisTaskRegistry:
    """Tasks as hashes that expire with the task's TTL; creation and every change are one Lua script each."""

    def __init__(self, shared: _Shared, replica: str) -> None:
        self._shared = shared
        self._replica = replica
        client = shared.client
        self._create = client.register_script(_TASK_CREATE)
        self._get = client.register_script(_TASK_GET)
        self._swap = client.register_script(_TASK_SWAP)

    async def create(self, record: TaskRecord) -> None:
        expires = "" if record.ttl is None else str(_ms(record.created + record.ttl))
        key = self._shared.key("task", record.id)
        args: list[EncodableT] = [self._shared.seal(_task_json(record, 0), key), record.owner or "", expires]
        with self._shared.failing("creating a task"):
            created = await self._shared.script(self._create, [key], args)
        if not created:
            raise ValueError(f"task {record.id!r} exists")

    async def get(self, task_id: str) -> TaskRecord | None:
        with self._shared.failing("reading a task"):
            found = await self._shared.script(
                self._get, [self._shared.key("task", task_id)], [self._shared.key("replica", "")]
            )
        if found is None:
            return None
        version, data, alive = cast("tuple[bytes, bytes, int]", found)
        opened = self._shared.unseal(data, self._shared.key("task", task_id))
        if opened is None:
            raise StoreUnavailable(f"task record {task_id!r} does not open with this deployment's keys")
        return TaskRecord.from_dict({**_task_decode(opened), "version": int(version)}, owner_alive=bool(alive))

    async def swap(self, record: TaskRecord) -> TaskRecord | None:
        key = self._shared.key("task", record.id)
        data = self._shared.seal(_task_json(record, record.version + 1), key)
        args: list[EncodableT] = [str(record.version), data, record.owner or ""]
        with self._shared.failing("updating a task"):
            swapped = await self._shared.script(self._swap, [key], args)
        if not swapped:
            return None
        return replace(record, version=record.version + 1, owner_alive=record.owner == self._replica)


_task_encode = msgspec.json.Encoder().encode
_task_decode = msgspec.json.Decoder(dict[str, object]).decode


def _task_json(record: TaskRecord, version: int) -> bytes:
    data = record.to_dict()
    data["version"] = version
    return _task_encode(data)
