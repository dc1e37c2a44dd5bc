"""The session directory on Redis: which replica runs each handshake-era session, and the heartbeat that keeps
a replica's lease and claims (``P replica:``, ``P session:``, ``P claims:``, ``P boot:``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast

import anyio
import anyio.abc
from redis.asyncio.client import Pipeline
from redis.typing import EncodableT, FieldT

from .._ports import SessionRecord
from ._shared import _ms, _Shared, _text, logger

_LOOKUP = """
local found = redis.call('HMGET', KEYS[1], 'owner', 'principal')
if not found[1] then
  local boot = redis.call('GET', KEYS[2])
  local now = redis.call('TIME')
  local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  if not boot or ms - tonumber(boot) < tonumber(ARGV[2]) then return {} end
  return false
end
return {found[1], found[2], redis.call('EXISTS', ARGV[1] .. found[1])}
"""
"""KEYS: the session hash, the deployment's boot mark. ARGV: the prefix of lease keys, the grace in ms. Returns
``[owner, principal or nil, 0/1]``; nil if there is no such session; an empty list if there is none *yet*: Redis
lost its data moments ago (no boot mark, or a fresh one) and the owner may not have claimed it again."""

_RELEASE = """
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner then redis.call('SREM', ARGV[1] .. owner, ARGV[2]) end
return redis.call('DEL', KEYS[1])
"""
"""KEYS: the session hash. ARGV: the prefix of claim sets, the session id. Deletes the record and its claim."""

_HEARTBEAT = """
local lapsed = 1 - redis.call('EXISTS', KEYS[1])
local kept = redis.call('EXISTS', KEYS[2])
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
if kept == 0 then
  local mark = 0
  if ARGV[3] == '1' then
    local now = redis.call('TIME')
    mark = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  end
  redis.call('SET', KEYS[2], mark, 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return {redis.call('SCARD', KEYS[3]), lapsed, kept, redis.call('GET', KEYS[2])}
"""
"""KEYS: this replica's lease, the deployment's boot mark, this replica's claim set. ARGV: the lease and the boot
mark's TTL in ms, ``1`` if this replica saw a boot mark before. Renews both and returns how many claims Redis holds
for this replica (fewer than it runs: Redis lost data, and the replica claims its sessions again; or the replica
stalled past its lease and the others released some), whether its lease had lapsed, and whether the boot mark was
there, and its value. A missing mark is written as now if this replica had seen one (Redis lost its data: lookups
hold back their "gone" for a moment), as 0 if not (a new deployment: nothing to restore). A mark there but not the
one this replica saw last was written since by another replica: Redis lost its data while this one was not
looking (stopped across the restart)."""


_BOOT_TTL = 7 * 86_400_000
"""The boot mark's TTL in ms (a week, renewed by every heartbeat): it must outlive any pause of a deployment."""


def restart_grace(lease: float) -> float:
    """Seconds after Redis lost its data during which a session with no record is taken as not claimed again *yet*
    (``lookup`` waits for its owner's heartbeat): two leases and two seconds, 12 s with the 5 s lease.

    As long as the other replicas give an owner whose lease lapsed before they take its sessions as gone (a lease,
    then ``gone_after``: a lease and a check of 2 s, see :mod:`elicitor.server.http._handshake`). An owner that is
    slow to renew just after the restart (a loaded machine, a stall, a Redis connection of its own to make again)
    must not lose its live sessions to a 404 a replica that renewed first answers meanwhile: with one lease, a
    replica stopped for a few seconds across a restart lost every session it ran.
    """
    return 2 * lease + 2.0


class RedisSessionDirectory:
    """Which replica runs each handshake-era session: a hash per session, read together with its owner's lease.

    Claims are renewed with the heartbeat, not set once: every heartbeat counts this replica's claims in Redis, and
    if Redis holds fewer than the replica runs (it restarted without persistence, or failed over to a replica that
    had not seen them) they are written again at once; every ``ttl / 4`` they are written again anyway, renewing
    their TTL, so a session that lives for days keeps its record. Just after Redis lost its data, a session with no
    record may only not be claimed again *yet*: :meth:`lookup` then waits for the owners' next heartbeat instead
    of answering at once that the session is gone.
    """

    def __init__(self, shared: _Shared, replica: str, ttl: float, grace: float) -> None:
        self._shared = shared
        self._replica = replica
        self._ttl = _ms(ttl)
        self._renew_every = ttl / 4
        self._renewed = time.monotonic()
        self._grace = _ms(grace)
        self._seen = False
        """Whether a heartbeat of this replica has written or renewed the boot mark."""
        self._mark: bytes | None = None
        """The boot mark as this replica's last heartbeat found or wrote it."""
        self._mine: dict[str, str | None] = {}
        """The sessions this replica claimed and has not released, with their principals."""
        self._claims = shared.key("claims", replica)
        self._ended: Callable[[list[str]], None] | None = None
        """Told of the sessions the others declared gone while this replica stalled (see :meth:`heartbeat`)."""
        self._lookup = shared.client.register_script(_LOOKUP)
        self._release = shared.client.register_script(_RELEASE)
        self._heartbeat = shared.client.register_script(_HEARTBEAT)

    def _write(self, pipe: Pipeline, session_id: str, principal: str | None) -> None:
        key = self._shared.key("session", session_id)
        record: dict[FieldT, EncodableT] = {"owner": self._replica}
        if principal is not None:
            record["principal"] = principal
        pipe.delete(key)
        pipe.hset(key, mapping=record)
        pipe.pexpire(key, self._ttl)
        pipe.sadd(self._claims, session_id)

    async def claim(self, session_id: str, principal: str | None) -> None:
        """Record that this replica runs ``session_id`` for ``principal`` (replacing any former record, atomically)."""
        with self._shared.failing("claiming a session"):
            async with self._shared.client.pipeline(transaction=True) as pipe:
                self._write(pipe, session_id, principal)
                pipe.pexpire(self._claims, self._ttl)
                await pipe.execute()
        self._mine[session_id] = principal

    async def lookup(self, session_id: str) -> SessionRecord | None:
        """The session's owner and principal, and whether the owner's lease is current — one snapshot.

        Just after Redis lost its data, a session with no record may only not be claimed again *yet*: the lookup
        then waits for its owner's heartbeat (at most :func:`restart_grace` after the first heartbeat that saw the
        data gone) before it answers that there is none.

        Raises:
            StoreUnavailable: Redis cannot be reached.
        """
        keys = [self._shared.key("session", session_id), self._shared.key("boot", "")]
        waited = 0.0
        while True:
            with self._shared.failing("looking up a session"):
                found = await self._shared.script(self._lookup, keys, [self._shared.key("replica", ""), self._grace])
            if found is None:
                return None
            if found:
                break
            if waited * 1000 > self._grace:
                return None
            await anyio.sleep(0.2)
            waited += 0.2
        owner, principal, alive = cast("tuple[bytes, bytes | None, int]", found)
        return SessionRecord(owner.decode(), _text(principal), alive=bool(alive))

    async def release(self, session_id: str) -> None:
        """Forget ``session_id``: it ended."""
        self._mine.pop(session_id, None)
        with self._shared.failing("releasing a session"):
            await self._release(
                keys=[self._shared.key("session", session_id)], args=[self._shared.key("claims", ""), session_id]
            )

    def on_gone(self, ended: Callable[[list[str]], None]) -> None:
        self._ended = ended

    async def heartbeat(self, lease_key: str, lease: int) -> None:
        """Renew the lease; claim this replica's sessions again if Redis lost them, or when their TTL is due.

        Fewer claims in Redis than this replica runs has two causes, told apart by the lease and the boot mark. Redis
        lost its data (a restart without persistence, a failover to a copy that had not seen them; the lease is
        usually still there; or the mark is a new one, written by another replica while this one was stopped
        across the restart): the sessions are claimed again. Or this replica stalled past its lease (a SIGSTOP, a
        paused VM) while Redis kept everything, and another replica, finding the lease lapsed twice, released the
        sessions it was asked about and answered 404 for them: those sessions are over for their clients, who start
        new ones, so they are ended here (:meth:`on_gone`) instead of coming back to life under the same id.
        """
        keys = [lease_key, self._shared.key("boot", ""), self._claims]
        with self._shared.failing("renewing this replica's lease"):
            found = await self._heartbeat(keys=keys, args=[lease, _BOOT_TTL, "1" if self._seen else "0"])
            held, lapsed, kept = (int(x) for x in found[:3])
            seen, self._seen = self._seen, True
            # A mark other than the one seen last: Redis lost its data, and another replica's heartbeat wrote the
            # new mark while this one was stopped. Its sessions are then missing because Redis lost them, not
            # because the others released them: they are claimed again below, not ended.
            mark, last = found[3], self._mark
            self._mark = mark
            restarted = last is not None and mark != last
            if held < len(self._mine) and lapsed and kept and seen and not restarted:
                await self._end_released()
            due = time.monotonic() - self._renewed >= self._renew_every
            if held < len(self._mine) or due:
                await self._claim_all()

    async def _end_released(self) -> None:
        """The sessions of this replica missing from its claim set while Redis kept its data: released by another
        replica while this one's lease had lapsed. Forgotten here, and their ends told (see :meth:`heartbeat`)."""
        mine = list(self._mine)
        gone: list[str] = []
        for start in range(0, len(mine), 500):
            batch = mine[start : start + 500]
            present = await self._shared.client.smismember(self._claims, batch)
            gone += [session_id for session_id, there in zip(batch, present, strict=True) if not there]
        for session_id in gone:
            self._mine.pop(session_id, None)
        if gone:
            logger.warning(
                "this replica's lease lapsed (a stall?) and %d of its sessions were declared gone meanwhile: "
                "ending them",
                len(gone),
            )
            if self._ended is not None:
                self._ended(gone)

    async def _claim_all(self) -> None:
        """Write every claim of this replica again (in batches, each one round trip)."""
        mine = list(self._mine.items())
        for start in range(0, len(mine), 500):
            async with self._shared.client.pipeline(transaction=False) as pipe:
                for session_id, principal in mine[start : start + 500]:
                    self._write(pipe, session_id, principal)
                pipe.pexpire(self._claims, self._ttl)
                await pipe.execute()
        self._renewed = time.monotonic()
