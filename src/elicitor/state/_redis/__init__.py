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

from ._bus import RedisBus
from ._events import RedisEventStore
from ._sessions import RedisSessionDirectory, restart_grace
from ._store import RedisStore
from ._tasks import RedisTaskRegistry
from ._urls import RedisUrlRegistry

__all__ = [
    "RedisBus",
    "RedisEventStore",
    "RedisSessionDirectory",
    "RedisStore",
    "RedisTaskRegistry",
    "RedisUrlRegistry",
    "restart_grace",
]
