"""RedisStore: every port on one Redis, the replica's lease, and ``forward`` to a session's owner."""

from __future__ import annotations

import asyncio
import functools
import secrets
from contextlib import suppress
from types import TracebackType
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.abc
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as ConnectionLost

from .._lane import lane_for
from .._ports import Sealer, SessionRecord, StoreUnavailable, replica_channel
from .._supervise import supervised
from ._bus import RedisBus
from ._events import RedisEventStore
from ._sessions import RedisSessionDirectory, restart_grace
from ._shared import _ms, _Shared
from ._tasks import RedisTaskRegistry
from ._urls import RedisUrlRegistry

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
