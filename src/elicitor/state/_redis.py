"""The shared state of N replicas, in Redis: every port of :mod:`elicitor.state` on keys with a TTL.

Each replica opens one :class:`RedisStore` on the same Redis (``redis://``, ``rediss://`` or ``unix://``) and the
same ``prefix``; the load balancer may then send any message of any conversation to any of them.

Key layout (``P`` is the prefix, ``elicitor:`` by default; every key expires, so an abandoned deployment leaves
nothing behind for long):

* ``P replica:<replica id>`` — string ``1``: the replica's lease. TTL ``lease``, renewed every ``lease / 3``.
* ``P session:<session id>`` — hash: ``owner`` (a replica id), ``principal`` (absent for None, so ``""`` stays
  distinct). TTL ``session_ttl`` (a day), set by ``claim`` and renewed by the owner's heartbeat every quarter of it.
* ``P claims:<replica id>`` — set: the sessions the replica claimed. Its heartbeat counts them: fewer than it runs
  means Redis lost data, and it claims them all again; or, when its lease had lapsed while Redis kept its data,
  that the others released them (declared gone), and it ends those. TTL ``session_ttl``, renewed with the claims.
* ``P boot:`` — string: when (Redis's clock, ms) the first heartbeat after Redis lost its data wrote it (0 when a
  new deployment's first replica did). A lookup that finds no session within ``lease`` of it, or no mark at all,
  waits for the owners' heartbeats before it says "gone" (404). TTL a week, renewed by every heartbeat.
* ``P events:<stream>`` — sorted set: member ``<sequence>:<message>`` scored by the sequence, capped at the last
  ``events_per_stream`` members. TTL ``event_ttl``, renewed by each event.
* ``P url:<elicitation id>`` — hash: ``message``, ``url``, ``completed`` (``0``/``1``), and ``principal``,
  ``replica``, ``connection`` (each absent for None), ``completion`` (the token of the call that completed it). TTL
  ``url_ttl`` from creation (completing does not extend it).
* ``P asked:<connection>`` — hash: question → elicitation id, the (connection, question) dedupe index. TTL
  ``url_ttl``, renewed by each registration of that connection.
* ``P started:<connection>`` — set: every elicitation id the connection registered, for ``forget_connection``. TTL
  as ``asked``.
* ``P task:<task id>`` — hash: ``v`` (the record's version), ``d`` (the record as JSON), ``owner`` (the replica
  running it, absent when none; ``runner`` in records written before that name, still read). Expires at
  creation + the task's TTL (none without one).
* ``P queue:<queue>`` — stream: a replica's queue (``P queue:replica:<replica id>``), entries ``m`` → message,
  capped near ``queue_limit``, trimmed to what its reader has not handled yet. TTL ``queue_ttl``, renewed by
  each message.
* Channels (not keys): ``P bus:<channel>``, e.g. ``P bus:changes``: wake-ups whose loss is harmless.

Sessions end by :meth:`~RedisSessionDirectory.release`; their TTL only sweeps up after replicas that died.

Why each operation is atomic, and one round trip:

* ``lookup`` is a Lua script that reads the session hash and then its owner's lease key, so the answer is one
  snapshot; ``claim`` is ``DEL`` + ``HSET`` + ``PEXPIRE`` + ``SADD`` in one ``MULTI``/``EXEC`` (no reader sees a
  half-written record, nor the principal of a former claim); ``release`` one script (``DEL``, ``SREM``); the
  heartbeat one script (lease, boot mark, count of claims).
* ``store`` is ``ZADD`` + ``ZREMRANGEBYRANK`` + ``PEXPIRE`` in one ``MULTI``/``EXEC``: the bound and the expiry
  apply with the write, and writes may land in any order. The ``store`` and ``append`` calls made in one turn of
  the event loop share that ``MULTI``/``EXEC`` (:class:`_Writes`): an owner keeping an event and relaying it, or
  many sessions writing at once, cost one round trip. ``replay`` is one ``ZRANGEBYSCORE`` above ``after``
  (Redis filters and orders); ``discard`` one ``DEL``.
* ``add``, ``find``, ``complete`` and ``forget_connection`` are Lua scripts: Redis runs a script alone, so a
  question asked twice at once on one connection gets one record, and a completion raced from two replicas
  succeeds once. ``get`` is one ``HGETALL``.
* ``append`` is ``XADD`` + ``PEXPIRE`` in one ``MULTI``/``EXEC``; ``read`` is ``XREAD BLOCK`` from the last offset,
  with an ``XTRIM MINID`` pipelined before each read once a batch is handled (the acknowledgement: one round trip).
* ``forward`` (the store's) is one script: the session's owner, principal and the owner's lease are checked and the
  message appended to the owner's queue in the same step, so a replica that remembers an owner sends to it in one
  round trip, and never to one that no longer runs the session.
* ``publish`` is one ``PUBLISH``; a subscription holds its own connection (``SUBSCRIBE``) for its lifetime.
* The commands on the path of an answer across replicas (``forward``, ``lookup``, a task's creation, read and
  compare-and-swap, the batched ``store`` and ``append`` writes) go on one connection of their own, each written
  as soon as it is issued and its reply matched in order (:mod:`._lane`): none of redis-py's per-call layers on
  the path. Over TLS (``rediss://``) they go through redis-py as the others do.

Scripts reach keys named by the data (a session's owner, an indexed elicitation id), so they need every key on one
Redis: a single server, or a replicated/Sentinel pair — not Redis Cluster.

Failures: every Redis error (refused, reset, timed out, or a command refused by the server) surfaces as
:class:`~elicitor.state.StoreUnavailable`, and nothing waits longer than ``timeout`` on a socket. The client
reconnects by itself: a command whose pooled connection turns out broken (Redis restarted since it was last used)
is sent once more, at once, on a new connection, so the first calls after a restart succeed. Nothing else is
retried — a timed-out command never is, it may have run. Each operation tolerates that second send: ``claim``,
``release`` and ``discard`` write the same again, a repeated event is ignored, ``add`` returns the record the first
send wrote, ``complete`` carries a token unique to the call so its second send returns the record it completed
(the completion still counts once), ``forget_connection`` counts 0 the second time; only a ``publish`` whose reply
was lost may be delivered twice. Subscriptions never reconnect: a lost connection ends the iterator, so the caller
knows it may have missed messages and subscribes again. ``redis.asyncio`` runs on asyncio only: serve with anyio's
asyncio backend.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import replace
from types import TracebackType
from typing import cast
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.abc
import msgspec
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.client import Pipeline, PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as ConnectionLost
from redis.exceptions import RedisError
from redis.typing import EncodableT, FieldT

from ..telemetry import _state as _telemetry
from ._lane import Command, Lane, lane_for
from ._ports import Sealer, SessionRecord, StoreUnavailable, TaskRecord, UrlRecord, replica_channel
from ._supervise import supervised

__all__ = ["RedisStore", "RedisBus", "RedisEventStore", "RedisSessionDirectory", "RedisUrlRegistry"]

logger = logging.getLogger("elicitor.state")

_FAILURES = (RedisError, OSError)
"""What a Redis call raises when Redis cannot serve it (``TimeoutError`` and ``ConnectionResetError`` are OSErrors)."""


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _text(value: bytes | None) -> str | None:
    return value.decode() if value is not None else None


def _fields(flat: Sequence[bytes]) -> dict[bytes, bytes]:
    """``HGETALL`` as a script returns it (``[field, value, …]``), as a dictionary."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


_SEALED = b"\x00s1"
"""What begins a sealed value (JSON and msgpack never begin with a NUL byte)."""


class _Writes:
    """Writes issued in the same turn of the event loop, sent to Redis as one ``MULTI``/``EXEC``: one round trip.

    Why: on the handshake era's forwarded path, the owner of a session writes each event's history
    (:meth:`RedisEventStore.store`) and, in the same turn, the relay of that stream appends the event to the
    queue of the replica that relays it (:meth:`RedisBus.append`); sent apart, that is two round trips, each with
    redis-py's own cost per call. Each write is a transaction of its own either way, so sending several in one
    changes nothing a reader sees but the round trips; each caller gets its own outcome (a connection that fails
    fails every write of the batch, as it would have failed each). A caller cancelled before the batch left sends
    nothing; once it left, its write may have run, as any command that was sent.
    """

    def __init__(self, shared: _Shared) -> None:
        self._shared = shared
        self._pending: list[tuple[Sequence[Command], asyncio.Future[None]]] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def run(self, commands: Sequence[Command]) -> None:
        """Send ``commands`` with the writes issued in this turn of the event loop; raises what Redis or the
        connection raised for them."""
        loop = asyncio.get_running_loop()
        if not self._pending:
            loop.call_soon(self._flush)
        future: asyncio.Future[None] = loop.create_future()
        self._pending.append((commands, future))
        await future

    def _flush(self) -> None:
        batch = [(commands, future) for commands, future in self._pending if not future.done()]
        self._pending = []
        if batch:
            task = asyncio.ensure_future(self._send(batch))
            self._sending.add(task)  # held until done: the loop keeps only a weak reference to a task
            task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[tuple[Sequence[Command], asyncio.Future[None]]]) -> None:
        try:
            results = await self._execute([command for commands, _ in batch for command in commands])
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        start = 0
        for commands, future in batch:
            errors = [result for result in results[start : start + len(commands)] if isinstance(result, Exception)]
            start += len(commands)
            if future.done():
                continue
            if errors:
                future.set_exception(errors[0])
            else:
                future.set_result(None)

    async def _execute(self, commands: list[Command]) -> Sequence[object]:
        """The replies of ``commands`` run in one transaction (errors as values); raises if it did not run."""
        lane = self._shared.lane
        if lane is None:
            async with self._shared.client.pipeline(transaction=True) as pipe:
                for command in commands:
                    pipe.execute_command(*command)
                return cast("list[object]", await pipe.execute(raise_on_error=False))
        replies = await lane.execute([("MULTI",), *commands, ("EXEC",)])
        executed = replies[-1]
        if isinstance(executed, Exception):  # EXECABORT: a command was refused as queued, nothing ran
            raise executed
        return cast("list[object]", executed)


class _Shared:
    """What the ports of one store share: the clients, the key prefix, the error translation."""

    def __init__(
        self,
        client: Redis,
        listener: Redis,
        prefix: str,
        where: str,
        timeout: float,
        lane: Lane | None = None,
        reader_lane: Callable[[], Lane | None] = lambda: None,
    ) -> None:
        self.client = client
        """For commands: a broken connection is replaced and the command sent once more (see the module)."""
        self.listener = listener
        """For subscriptions only: never retries, so a lost connection ends the subscription."""
        self.prefix = prefix
        self.where = where
        self.timeout = timeout
        self.lane = lane
        self.reader_lane = reader_lane
        """A new lane for one queue reader (its blocking reads hold a connection), or ``None``: the listener's."""
        """Where the commands on the path of an answer go (see :mod:`._lane`); ``None``: through ``client``."""
        self.writes = _Writes(self)
        """Where the event history and the queues' appends are written (batched: see :class:`_Writes`)."""

    async def script(self, script: AsyncScript, keys: Sequence[str], args: Sequence[EncodableT]) -> object:
        """Run a registered script, on the lane if there is one."""
        if self.lane is None:
            return await script(keys=keys, args=args)
        source = script.script if isinstance(script.script, bytes) else str(script.script).encode()
        return await self.lane.script(script.sha, source, keys, args)

    def key(self, kind: str, name: str) -> str:
        return f"{self.prefix}{kind}:{name}"

    sealer: Sealer | None = None
    """What seals records at rest and messages between replicas (:meth:`RedisStore.seal_with`); none: in clear."""

    def seal(self, data: bytes, binding: str) -> bytes:
        return data if self.sealer is None else _SEALED + self.sealer.seal_bytes(data, binding.encode())

    def unseal(self, data: bytes, binding: str) -> bytes | None:
        """``data`` opened (or as it is, if in clear and nothing seals); ``None`` if it does not open."""
        if not data.startswith(_SEALED):
            return data if self.sealer is None else None
        if self.sealer is None:
            return None
        try:
            return self.sealer.open_bytes(data[len(_SEALED) :], binding.encode())
        except ValueError:
            return None

    @contextmanager
    def failing(self, doing: str, about: str | None = None) -> Iterator[None]:
        """Turn every Redis failure while ``doing`` into :class:`StoreUnavailable` (and time it, for telemetry).

        ``doing`` says what in words that name no session, task or replica: it is the metric's label, and a label
        naming a replica (a new id at every restart) would grow the series without end. ``about`` says which one,
        in the error only."""
        said = doing if about is None else f"{doing} {about!r}"
        if _telemetry.state.on:  # elicitor.store.operation.duration, by what was being done
            with self._timed(doing, said):
                yield
            return
        try:
            yield
        except _FAILURES as exc:
            raise StoreUnavailable(f"shared state unavailable ({said}): Redis at {self.where}: {exc}") from exc

    @contextmanager
    def _timed(self, doing: str, said: str) -> Iterator[None]:
        from ..telemetry import _hooks

        start = time.perf_counter()
        try:
            yield
        except _FAILURES as exc:
            _hooks.store_operation(doing, time.perf_counter() - start, exc)
            raise StoreUnavailable(f"shared state unavailable ({said}): Redis at {self.where}: {exc}") from exc
        _hooks.store_operation(doing, time.perf_counter() - start, None)


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

_FORWARD = """
local found = redis.call('HMGET', KEYS[1], 'owner', 'principal')
if found[1] ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  if found[2] then return 0 end
elseif found[2] ~= string.sub(ARGV[2], 2) then
  return 0
end
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'm', ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
return 1
"""
"""KEYS: the session hash, its expected owner's lease, that owner's queue. ARGV: the expected owner, ``=`` followed
by the expected principal (empty for None), the sealed message, the queue's cap, its TTL in ms. Appends the message
(as :meth:`RedisBus.append` does) only if the session is the owner's, the principal's, and the lease is current;
returns 1 if it did, 0 if not."""

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


class RedisEventStore:
    """The last ``per_stream`` events of each SSE stream, as a sorted set scored by sequence.

    Members are ``<sequence>:<message>``, so a store sent twice adds nothing, and writes that complete out of order
    (concurrent messages of one stream) are kept in sequence order all the same.
    """

    def __init__(self, shared: _Shared, *, per_stream: int, ttl: float) -> None:
        self._shared = shared
        self._per_stream = per_stream
        self._ttl = _ms(ttl)

    async def store(self, stream: str, sequence: int, message: bytes) -> None:
        """Keep ``message`` as event ``sequence``, dropping the oldest beyond the bound and renewing the TTL."""
        key = self._shared.key("events", stream)
        writes: list[Command] = [
            ("ZADD", key, sequence, b"%d:%s" % (sequence, message)),
            ("ZREMRANGEBYRANK", key, 0, -self._per_stream - 1),
            ("PEXPIRE", key, self._ttl),
        ]
        with self._shared.failing("storing an event"):
            await self._shared.writes.run(writes)

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]]:
        """The kept events after sequence ``after``, oldest first (Redis filters: one ``ZRANGEBYSCORE``)."""
        with self._shared.failing("replaying events"):
            found = await self._shared.client.zrangebyscore(self._shared.key("events", stream), f"({after}", "+inf")
        members = cast("list[bytes]", found or [])  # bytes: decode_responses is off
        events = []
        for member in members:
            sequence, _, message = member.partition(b":")
            events.append((int(sequence), message))
        return events

    async def discard(self, stream: str) -> None:
        """Forget ``stream``: its session ended."""
        with self._shared.failing("discarding events"):
            await self._shared.client.delete(self._shared.key("events", stream))


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


class _Messages:
    """The payloads arriving on one subscription, until its connection is lost (then iteration simply ends).

    Reading waits at most ``heartbeat`` seconds at a time; after a silent heartbeat it PINGs on the subscription's
    connection, and a second silent heartbeat means that connection is dead (a Redis that vanished without closing
    the socket), so even then the iterator ends within two heartbeats instead of hanging.
    """

    def __init__(self, pubsub: PubSub, heartbeat: float, shared: _Shared, channel: str) -> None:
        self._pubsub = pubsub
        self._heartbeat = heartbeat
        self._open = True
        self._shared = shared
        self._channel = channel

    def __aiter__(self) -> _Messages:
        return self

    async def __anext__(self) -> bytes:
        pinged = False
        while self._open:
            try:
                message = await self._pubsub.get_message(timeout=self._heartbeat)
                if message is None:
                    if pinged:
                        break
                    await self._pubsub.ping()
                    pinged = True
                    continue
            except _FAILURES:
                break
            pinged = False
            data = message.get("data")
            if message.get("type") == "message" and isinstance(data, bytes):
                opened = self._shared.unseal(data, self._channel)
                if opened is not None:
                    return opened
                logger.warning("dropped a message on %r that did not open with the deployment's keys", self._channel)
        self._open = False
        raise StopAsyncIteration


_SETTLE_TURNS = 3
"""Turns of the event loop a queue reader lets pass before it asks Redis for more, once a batch is handed out.

Why: the message just handed out woke work that is waiting for it (a session's dispatch and then the tool that
asked, or the response relaying a stream), a few hops of the loop away. Asking for more first (building and
sending ``XTRIM`` + ``XREAD``, a few hundred microseconds of redis-py) would put that cost on the path of every
forwarded answer and relayed event. Three turns cover the hops from the reader to the tool or to the HTTP
response; a message that arrives meanwhile waits in the queue (Redis keeps it) for as many turns."""


class _QueueReader:
    """The messages of one queue (a Redis stream) after an offset: ``XREAD BLOCK`` in turns shorter than the socket
    timeout, so a dead connection is noticed within ``timeout``; each batch read is acknowledged (``XTRIM MINID``)
    once handled, pipelined with the next read (one round trip for both). Any failure ends the iteration: read
    again from the last offset. The reads go on a lane of the reader's own (:mod:`._lane`: the reply of a wake-up
    reaches the reader without redis-py's layers), or on the listener's connections over TLS."""

    def __init__(self, shared: _Shared, key: str, after: str, lane: Lane | None) -> None:
        self._shared = shared
        self._key = key
        self._last = after
        self._batch: list[tuple[str, bytes]] = []
        self._trim = False
        self._block = _ms(shared.timeout / 2)
        self._lane = lane

    def __aiter__(self) -> _QueueReader:
        return self

    async def __anext__(self) -> tuple[str, bytes]:
        if not self._batch and self._trim:
            for _ in range(_SETTLE_TURNS):  # let what the last message woke run first (see _SETTLE_TURNS)
                await asyncio.sleep(0)
        while not self._batch:
            try:
                found = await self._read()
            except _FAILURES:
                raise StopAsyncIteration from None
            for _, entries in found:
                for raw_offset, fields in entries:
                    offset = raw_offset.decode()
                    opened = self._shared.unseal(fields.get(b"m", b""), self._key)
                    if opened is None:
                        logger.warning(
                            "dropped a message in %r that did not open with this deployment's keys", self._key
                        )
                        self._last, self._trim = offset, True
                        continue
                    self._batch.append((offset, opened))
            self._batch.reverse()
        offset, payload = self._batch.pop()
        self._last = offset
        self._trim = True
        return offset, payload

    async def _read(self) -> list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]:
        """One ``XREAD BLOCK`` after the last offset, with the ``XTRIM`` of what was handled if any is due."""
        trim, self._trim = self._trim, False
        if self._lane is not None:
            read: Command = ("XREAD", "COUNT", 256, "BLOCK", self._block, "STREAMS", self._key, self._last)
            commands: list[Command] = [("XTRIM", self._key, "MINID", self._last), read] if trim else [read]
            replies = await self._lane.execute(commands)
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
            streams = cast("list[tuple[bytes, list[tuple[bytes, list[bytes]]]]] | None", replies[-1]) or []
            return [(name, [(offset, _fields(flat)) for offset, flat in entries]) for name, entries in streams]
        listener = self._shared.listener
        if trim:  # what was read before is handled: Redis may forget it (sent with the read)
            async with listener.pipeline(transaction=False) as pipe:
                pipe.xtrim(self._key, minid=self._last, approximate=False)
                pipe.xread({self._key: self._last}, count=256, block=self._block)
                _, found = await pipe.execute()
        else:
            found = await listener.xread({self._key: self._last}, count=256, block=self._block)
        return cast("list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]", found or [])


class RedisBus:
    """Queues between replicas on Redis streams (kept until read, read from an offset), and channels on pub/sub
    (at most once, to whoever is subscribed now)."""

    def __init__(self, shared: _Shared, *, heartbeat: float, queue_limit: int, queue_ttl: float) -> None:
        self._shared = shared
        self._heartbeat = heartbeat
        self.queue_limit = queue_limit
        self.queue_ttl = _ms(queue_ttl)
        """In ms."""

    async def append(self, queue: str, payload: bytes) -> None:
        """``XADD`` (capped at ``queue_limit`` entries) and renew the queue's TTL, in one round trip."""
        key = self._shared.key("queue", queue)
        sealed = self._shared.seal(payload, key)
        writes: list[Command] = [
            ("XADD", key, "MAXLEN", "~", self.queue_limit, "*", "m", sealed),
            ("PEXPIRE", key, self.queue_ttl),
        ]
        with self._shared.failing("sending on a queue", queue):
            await self._shared.writes.run(writes)

    @asynccontextmanager
    async def read(self, queue: str, after: str) -> AsyncIterator[AsyncIterator[tuple[str, bytes]]]:
        """Read ``queue`` from ``after`` on a connection of its own (never retried: a failure ends it)."""
        lane = self._shared.reader_lane()
        try:
            yield _QueueReader(self._shared, self._shared.key("queue", queue), after, lane)
        finally:
            if lane is not None:
                lane.close()

    async def publish(self, channel: str, payload: bytes) -> int:
        """``PUBLISH`` ``payload``; returns how many subscriptions received it (a replica holds one per channel)."""
        with self._shared.failing("publishing on a channel", channel):
            key = self._shared.key("bus", channel)
            return int(await self._shared.client.publish(key, self._shared.seal(payload, key)))

    @asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[AsyncIterator[bytes]]:
        """Listen to ``channel`` on a connection of its own for the block; the subscription is live once entered.

        Entering raises :class:`StoreUnavailable` if Redis cannot be reached; once entered, a lost connection ends
        the iterator (subscribe again to resume: messages published meanwhile are gone, as pub/sub promises).
        """
        pubsub = self._shared.listener.pubsub()
        try:
            with self._shared.failing("subscribing to a channel", channel):
                await pubsub.subscribe(self._shared.key("bus", channel))
                while True:  # wait for the confirmation: a message published after this block starts reaches it
                    confirmation = await pubsub.get_message(timeout=self._shared.timeout)
                    if confirmation is None:
                        raise TimeoutError("no subscription confirmation")
                    if confirmation.get("type") == "subscribe":
                        break
            yield _Messages(pubsub, self._heartbeat, self._shared, self._shared.key("bus", channel))
        finally:
            with anyio.move_on_after(self._shared.timeout, shield=True):
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis leaves it unannotated


class _Running:
    """The context of :meth:`RedisStore.running`: a task renewing the lease, then the lease dropped and the
    connections closed. Exceptions of the block pass through unchanged (the task group never sees them)."""

    def __init__(self, store: RedisStore) -> None:
        self._store = store
        self._group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> None:
        _require_asyncio()
        await self._store._renew_lease()
        group = anyio.create_task_group()
        await group.__aenter__()
        group.start_soon(supervised, "the lease of this replica", self._store._keep_lease)
        self._group = group

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._group is not None:
            self._group.cancel_scope.cancel()
            await self._group.__aexit__(None, None, None)
            self._group = None
        with anyio.CancelScope(shield=True):  # even when the block was cancelled
            with anyio.move_on_after(2 * self._store._timeout):
                await self._store._drop_lease()
            await self._store.aclose()


def _require_asyncio() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("RedisStore needs asyncio (redis.asyncio): run on anyio's asyncio backend") from None


def _redacted(url: str) -> str:
    """``url`` without its credentials, for error messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return f"{parts.scheme}://{netloc}{parts.path}" if parts.scheme else urlunsplit(("", netloc, parts.path, "", ""))


class RedisStore:
    """Every port on one Redis shared by all replicas (``pip install 'elicitor[redis]'``).

    Args:
        url: ``redis://[user:password@]host:port/db``, ``rediss://`` for TLS, or ``unix://path``.
        prefix: put before every key and channel, so that several deployments can share one Redis.
        lease: seconds a replica's liveness lasts without renewal; :meth:`running` renews it every ``lease / 3``,
            so the sessions of a replica that died read as not alive at most ``lease`` seconds later.
        timeout: seconds any connect or command may take before it fails with :class:`StoreUnavailable`.
        heartbeat: seconds of silence after which a subscription checks its connection (a dead one ends it
            within two heartbeats).
        session_ttl: seconds a session record survives without renewal (its owner renews it every quarter of
            this; sessions end by ``release``; the TTL sweeps up after replicas that died without releasing).
        events_per_stream: how many recent events each SSE stream keeps for resumption.
        event_ttl: seconds a stream is kept after its last event.
        url_ttl: seconds a URL elicitation is kept after its creation (completed or not).
        max_connections: connections to Redis this replica opens at most for its commands (subscriptions use one
            more). A burst of requests beyond it waits up to ``timeout`` for a free connection rather than failing:
            a replica with hundreds of pending elicitations issues hundreds of short commands at once.
        queue_limit: messages a replica's queue keeps unread at most (beyond, Redis drops the oldest): far more
            than a replica that reads reaches; it bounds what a stalled one costs.
        queue_ttl: seconds a queue nobody appends to is kept (the queue of a replica that died goes with it).

    The client connects lazily and reconnects by itself: constructing needs no Redis, and calls work again as soon
    as a restarted Redis is back (its data is whatever Redis kept). Use it on asyncio (``redis.asyncio``).
    """

    shared = True

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "elicitor:",
        lease: float = 5.0,
        timeout: float = 3.0,
        heartbeat: float = 5.0,
        session_ttl: float = 86_400.0,
        events_per_stream: int = 256,
        event_ttl: float = 3600.0,
        url_ttl: float = 3600.0,
        max_connections: int = 64,
        queue_limit: int = 100_000,
        queue_ttl: float = 3600.0,
    ) -> None:
        for name, value in (
            ("lease", lease), ("timeout", timeout), ("heartbeat", heartbeat), ("session_ttl", session_ttl),
            ("events_per_stream", events_per_stream), ("event_ttl", event_ttl), ("url_ttl", url_ttl),
            ("max_connections", max_connections), ("queue_limit", queue_limit), ("queue_ttl", queue_ttl),
        ):  # fmt: skip
            if not value > 0:
                raise ValueError(f"{name} must be positive, not {value!r}")
        self.replica = secrets.token_hex(8)
        self._lease = lease
        self._timeout = timeout

        def connect(retries: int) -> Redis:
            retry = Retry(NoBackoff(), retries, supported_errors=(ConnectionLost,))
            name = f"elicitor-{self.replica}"
            pool = BlockingConnectionPool.from_url(
                url, max_connections=max_connections, timeout=timeout, socket_timeout=timeout,
                socket_connect_timeout=timeout, retry=retry, client_name=name,
            )  # fmt: skip
            return Redis.from_pool(pool)

        client = connect(retries=1)  # commands: a broken pooled connection is replaced, the command sent again
        listener = connect(retries=0)  # subscriptions: a lost connection ends them
        name = f"elicitor-{self.replica}"
        lane = lane_for(url, timeout, name)
        reader_lane = functools.partial(lane_for, url, timeout, name, resend=False)
        self._shared = _Shared(client, listener, prefix, _redacted(url), timeout, lane, reader_lane)
        self._lease_key = self._shared.key("replica", self.replica)
        self.sessions = RedisSessionDirectory(self._shared, self.replica, session_ttl, grace=restart_grace(lease))
        self.events = RedisEventStore(self._shared, per_stream=events_per_stream, ttl=event_ttl)
        self.urls = RedisUrlRegistry(self._shared, ttl=url_ttl)
        self.bus = RedisBus(self._shared, heartbeat=heartbeat, queue_limit=queue_limit, queue_ttl=queue_ttl)
        self.tasks = RedisTaskRegistry(self._shared, self.replica)
        self._forward = client.register_script(_FORWARD)

    @property
    def lease(self) -> float:
        """Seconds this replica's lease lasts unless renewed (renewed every third of it): how soon after it dies or
        stalls its sessions read as not alive."""
        return self._lease

    def seal_with(self, sealer: Sealer) -> None:
        """Seal task records at rest and every message between replicas with ``sealer`` (the server's key ring).

        Records are bound to their key and messages to their queue or channel, so neither can be moved; a message
        that does not open (another deployment's, or forged by whoever can write to Redis) is dropped and logged.
        """
        self._shared.sealer = sealer

    def running(self) -> _Running:
        """Hold this replica's lease for the block (renewed every ``lease / 3`` seconds, through Redis outages).

        On exit the lease is deleted — this replica's sessions read as not alive at once — and the connections
        are closed (they reopen if the store is used again; call :meth:`aclose` after such use).
        """
        return _Running(self)

    async def forward(self, session_id: str, expected: SessionRecord, payload: bytes) -> bool:
        """Append ``payload`` to ``expected.owner``'s queue if the session is still as ``expected`` says and its
        owner's lease is current: the check and the append in one script, one round trip (see :data:`_FORWARD`)."""
        queue = self._shared.key("queue", replica_channel(expected.owner))
        keys = [self._shared.key("session", session_id), self._shared.key("replica", expected.owner), queue]
        principal = "" if expected.principal is None else "=" + expected.principal
        sealed = self._shared.seal(payload, queue)
        with self._shared.failing("forwarding to a replica", expected.owner):
            sent = await self._shared.script(
                self._forward, keys, [expected.owner, principal, sealed, self.bus.queue_limit, self.bus.queue_ttl]
            )
        return bool(sent)

    async def check(self) -> None:
        """``PING`` Redis; raises :class:`StoreUnavailable` if it does not answer within ``timeout``."""
        _require_asyncio()
        with self._shared.failing("checking"):
            await self._shared.client.ping()

    async def aclose(self) -> None:
        """Close every connection of this store (:meth:`running` does it on exit)."""
        if self._shared.lane is not None:
            self._shared.lane.close()
        try:
            await self._shared.client.aclose()
        finally:
            await self._shared.listener.aclose()

    async def _renew_lease(self) -> None:
        with suppress(StoreUnavailable):  # Redis is away: renewed at the next tick once it is back
            await self.sessions.heartbeat(self._lease_key, _ms(self._lease))

    async def _keep_lease(self) -> None:
        while True:
            await anyio.sleep(self._lease / 3)
            await self._renew_lease()

    async def _drop_lease(self) -> None:
        try:
            with self._shared.failing("dropping this replica's lease"):
                await self._shared.client.delete(self._lease_key)
        except StoreUnavailable:
            pass  # it expires by itself within ``lease`` seconds
