"""The ports through which a server keeps what several replicas must share: data in, data out, all async.

A deployment of N replicas behind a plain load balancer shares exactly five things, each a small interface here:

* :class:`SessionDirectory` — which replica runs a handshake-era session, and whose it is. Ownership is a lease:
  every replica renews its own liveness while it lives, so the sessions of a replica that died read as not alive
  within seconds, and nobody waits on them.
* :class:`EventStore` — the recent messages of every SSE stream, numbered, so that a client resuming with
  ``Last-Event-ID`` is served on whichever replica its GET lands (2025-11-25 resumability).
* :class:`UrlRegistry` — URL-mode elicitations as records: who started them, from which connection on which
  replica, whether they are done. Completion is atomic, so a completion that arrives twice, or on two replicas at
  once, counts once.
* :class:`TaskRegistry` — tasks (tool calls running on their own) as records: status, the answers gathered, the
  questions open, the result. Any replica can answer a poll, take an answer, or go on with the work.
* :class:`Bus` — messages between replicas: durable queues with offsets to one replica (``replica:<id>``: a message
  for a session it runs, a stream it relays, a URL completion for a connection it holds), and at-most-once channels
  for harmless wake-ups (``changes``: list-changed notifications, to all).

Live objects (tasks, sockets, waiting futures) never cross a port: each replica keeps its own in a table, and the
ports carry ids and bytes. :class:`~elicitor.state.MemoryStore` implements them in one process (the default:
nothing to install), :class:`~elicitor.state.RedisStore` on Redis for replicas.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._exceptions import TemporarilyUnavailable


class StoreUnavailable(TemporarilyUnavailable):
    """The shared state cannot be reached (Redis down or restarting): the request is refused, not lost or hung.

    A :class:`~elicitor.TemporarilyUnavailable`: a request that meets it is answered with a retryable error."""


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """Where a handshake-era session runs and whose it is."""

    owner: str
    """The id of the replica that runs the session."""
    principal: str | None
    """The user who created it; only their requests find it."""
    alive: bool
    """Whether that replica renewed its lease recently (a dead replica's sessions are gone)."""


@dataclass(frozen=True, slots=True)
class UrlRecord:
    """A URL-mode elicitation, as every replica sees it."""

    id: str
    message: str
    url: str
    principal: str | None
    """The user it is bound to: only they can complete it."""
    replica: str | None = None
    """The replica holding the connection to notify on completion (handshake era); ``None`` on 2026-07-28."""
    connection: str | None = None
    """That connection's id on its replica."""
    completed: bool = False
    trace: str | None = None
    """The W3C ``traceparent`` of the span it was registered in (telemetry): its completion joins that trace."""


class SessionDirectory(Protocol):
    """Which replica runs each handshake-era session (``Mcp-Session-Id``)."""

    async def claim(self, session_id: str, principal: str | None) -> None:
        """Record that this replica runs ``session_id``, created by ``principal``."""
        ...

    async def lookup(self, session_id: str) -> SessionRecord | None:
        """The session's record, or ``None`` if no replica runs it (ended, expired, never existed)."""
        ...

    async def release(self, session_id: str) -> None:
        """Forget ``session_id`` (it ended)."""
        ...

    def on_gone(self, ended: Callable[[list[str]], None]) -> None:
        """Call ``ended`` with the sessions of this replica that the others declared gone while it was stalled past
        its lease (they answered 404 for them): the replica must end them, not take them back."""
        ...


class EventStore(Protocol):
    """Keeps recent events per stream so that a client can resume with ``Last-Event-ID``.

    Example::

        store = MemoryEventStore(per_stream=100)
        await store.store("k1", 1, b'{"jsonrpc":"2.0",...}')
        assert await store.replay("k1", after=0) == [(1, b'{"jsonrpc":"2.0",...}')]
    """

    async def store(self, stream: str, sequence: int, message: bytes) -> None:
        """Remember ``message`` as event ``sequence`` of ``stream``.

        Stores of one stream may arrive out of order (concurrent messages) or twice (a retried write): the store
        keeps each sequence once and replays in sequence order."""
        ...

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]]:
        """The events of ``stream`` after ``after``, oldest first (those still kept)."""
        ...

    async def discard(self, stream: str) -> None:
        """Forget ``stream`` (its session ended)."""
        ...


class UrlRegistry(Protocol):
    """URL-mode elicitations by id, and by the (connection, question) that asked, bounded in age."""

    async def add(self, record: UrlRecord, question: str | None = None) -> UrlRecord:
        """Store ``record``; if ``question`` (connection-scoped) already has one, return that one instead."""
        ...

    async def get(self, elicitation_id: str) -> UrlRecord | None:
        """The record, or ``None`` if unknown or expired."""
        ...

    async def find(self, connection: str, question: str) -> UrlRecord | None:
        """The elicitation ``connection`` registered for ``question``, if any."""
        ...

    async def complete(
        self, elicitation_id: str, principal: str | None, attempt: str | None = None
    ) -> UrlRecord | None:
        """Mark it completed, atomically, and return it — or ``None`` (and change nothing) if it is unknown,
        expired, already completed, or bound to another user than ``principal``.

        ``attempt`` names this completion: a try with the same ``attempt`` that finds the record completed by it
        (an earlier try whose answer was lost) gets the record again, so the completion counts once and its caller
        still learns that it made it."""
        ...

    async def move(
        self, elicitation_id: str, was: str, replica: str, connection: str, question: str | None = None
    ) -> UrlRecord | None:
        """Point an open elicitation of connection ``was`` at ``connection`` on ``replica`` (under ``question``
        there), atomically, and return it as it then stands; ``None`` if it is unknown or expired. A completed one,
        or one no longer ``was``'s, is returned unchanged.

        A call kept under its idempotency key that goes on on a new session (its replica gone) waits there for the
        page it was shown: the completion notice must go there. ``was`` lets go of it, so that its closing (a
        stalled replica waking to end it) does not drop it."""
        ...

    async def forget_connection(self, connection: str) -> int:
        """Drop every record ``connection`` registered, with or without a question (it closed: nobody is left to
        notify); returns how many."""
        ...


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """A task (a tool call running on its own, tasks extension and 2025-11-25 tasks), as every replica sees it.

    Everything needed to go on with the task on any replica is here: the call, the answers gathered so far, the
    questions still open. Records change only through :meth:`TaskRegistry.swap`, which compares ``version``.
    """

    id: str
    """Unguessable: it is the only thing a client needs to reach the task."""
    principal: str | None
    """The user who created it; ``None`` when the transport authenticates nobody (then ``connection`` binds it)."""
    connection: str | None
    """The connection that created it, for tasks of no principal; ``None`` when any connection of the user may."""
    status: str
    """``working``, ``input_required``, ``completed``, ``failed`` or ``cancelled``."""
    created: float
    """Unix time of creation (seconds)."""
    updated: float
    """Unix time of the last change of status or message."""
    ttl: float | None
    """Seconds from creation the task is kept; ``None`` for no limit."""
    poll_interval: float
    """Seconds a client should wait between polls."""
    call: Mapping[str, Any]
    """The request that created it: tool name, arguments, revision, client capabilities and information."""
    message: str | None = None
    """The ``statusMessage`` to show."""
    answers: Mapping[str, Any] = field(default_factory=dict)
    """The answers gathered and ``ctx.once`` values recorded so far (what a replay needs)."""
    asks: Mapping[str, Any] = field(default_factory=dict)
    """The input requests still open, by key (keys are never reused over the task's life)."""
    inbox: Mapping[str, Any] = field(default_factory=dict)
    """Answers delivered by the client and not yet taken by a run of the task."""
    result: Mapping[str, Any] | None = None
    """The final result (``completed``)."""
    error: Mapping[str, Any] | None = None
    """The JSON-RPC error (``failed``)."""
    owner: str | None = None
    """The replica running the task now (its owner), if any. Records written before this name read theirs from
    ``runner``."""
    owner_alive: bool = False
    """Whether the owner's lease is current (filled in by :meth:`TaskRegistry.get`)."""
    epoch: int = 0
    """The fencing token of the one run allowed to act for the task: raised by every claim (a takeover, a replay),
    checked by every write of a run in the same compare-and-swap, so a run that stalled past its claim cannot write
    (Kleppmann, "How to do distributed locking")."""
    version: int = 0

    @property
    def terminal(self) -> bool:
        """Whether the task has ended (completed, failed or cancelled): nothing changes it any more."""
        return self.status in TERMINAL_STATUSES

    def expired(self, now: float) -> bool:
        """Whether the task's time to live has passed at ``now`` (``time.time()``)."""
        return self.ttl is not None and now >= self.created + self.ttl

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-able data (``owner_alive`` is not stored: it is read from the owner's lease)."""
        data = {name: getattr(self, name) for name in _TASK_FIELDS}
        del data["owner_alive"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, owner_alive: bool = False) -> TaskRecord:
        """A record from :meth:`to_dict`'s data, or from a record stored before ``owner`` was named so (``runner``)."""
        known = {name: data[name] for name in _TASK_FIELDS if name in data and name != "owner_alive"}
        if "owner" not in known and "runner" in data:
            known["owner"] = data["runner"]
        return cls(**known, owner_alive=owner_alive)


TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
_TASK_FIELDS = tuple(TaskRecord.__dataclass_fields__)


class TaskRegistry(Protocol):
    """Task records by id, bounded in age by each task's TTL; every change is a compare-and-swap."""

    async def create(self, record: TaskRecord) -> None:
        """Store a new record (version 0). Once this returns, :meth:`get` on any replica finds it."""
        ...

    async def get(self, task_id: str) -> TaskRecord | None:
        """The record, with ``owner_alive`` read at the same moment; ``None`` if unknown or expired."""
        ...

    async def swap(self, record: TaskRecord) -> TaskRecord | None:
        """Store ``record`` in place of version ``record.version`` and return it as stored (version + 1).

        ``None`` (nothing changed) if the stored record is no longer at that version, or is gone: read it again
        and decide again.
        """
        ...


def replica_channel(replica: str) -> str:
    """The bus channel on which replica ``replica`` listens for messages meant for it."""
    return f"replica:{replica}"


class Bus(Protocol):
    """Messages between replicas: durable queues for what carries data, channels for wake-ups.

    A **queue** (:meth:`append`, :meth:`read`) keeps what is appended, in order, each message with an offset, until
    its reader has read past it: a reader that lost its connection reads again from the last offset it handled
    and misses nothing. Everything that carries data between replicas goes this way (an answer, a stream's
    messages, a URL completion). A **channel** (:meth:`publish`, :meth:`subscribe`) is at most once, to whoever
    listens now: only for notices whose loss is harmless (list-changed).
    """

    async def append(self, queue: str, payload: bytes) -> None:
        """Add ``payload`` to ``queue``; once this returns, it is in the store, for the queue's reader.

        Raises:
            StoreUnavailable: it could not be added (nothing was).
        """
        ...

    def read(self, queue: str, after: str) -> AbstractAsyncContextManager[AsyncIterator[tuple[str, bytes]]]:
        """Read ``queue`` from offset ``after`` (``"0"``: from the start) for the block, each message with its
        offset, waiting for new ones; the iterator ends if the connection is lost (read again from the last offset
        handled). Reading past a message acknowledges it: the store may then forget it."""
        ...

    async def publish(self, channel: str, payload: bytes) -> int:
        """Send ``payload`` to the listeners of ``channel``; returns how many replicas received it."""
        ...

    def subscribe(self, channel: str) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """Listen to ``channel`` for the duration of the block (the iterator ends if the connection is lost)."""
        ...


class Sealer(Protocol):
    """Authenticated encryption with the deployment's key ring (a server's
    :class:`~elicitor.server.StateSealer`): what a shared store seals at rest and between replicas."""

    def seal_bytes(self, data: bytes, binding: bytes) -> bytes:
        """``data`` encrypted and authenticated, bound to ``binding``."""
        ...

    def open_bytes(self, blob: bytes, binding: bytes) -> bytes:
        """What :meth:`seal_bytes` sealed under ``binding``; raises ``ValueError`` for anything else."""
        ...


class Store(Protocol):
    """The shared state of one deployment, as one replica sees it."""

    @property
    def replica(self) -> str:
        """This replica's id: random, new at every start."""
        ...

    @property
    def sessions(self) -> SessionDirectory:
        """Which replica runs each handshake-era session."""
        ...

    @property
    def events(self) -> EventStore:
        """The SSE history kept for resumption."""
        ...

    @property
    def urls(self) -> UrlRegistry:
        """The URL-mode elicitations in flight."""
        ...

    @property
    def bus(self) -> Bus:
        """Messages between replicas."""
        ...

    @property
    def tasks(self) -> TaskRegistry:
        """The tasks' records."""
        ...

    @property
    def shared(self) -> bool:
        """Whether other processes see this state (then every replica must share the ``requestState`` keys)."""
        ...

    def running(self) -> AbstractAsyncContextManager[None]:
        """Keep this replica's lease and connections alive for the duration of the block."""
        ...

    def seal_with(self, sealer: Sealer) -> None:
        """Seal what leaves this process with ``sealer`` from now on: task and kept-call records at rest (their
        arguments, answers and results), and every message between replicas (authenticated: one that does not
        open is dropped). A store in this process has nothing to seal."""
        ...

    async def forward(self, session_id: str, expected: SessionRecord, payload: bytes) -> bool:
        """Append ``payload`` to the queue of ``expected.owner`` (:func:`replica_channel`) if, at that moment,
        ``session_id`` is still that replica's session for ``expected.principal`` and its lease is current: what a
        replica that remembers a session's owner sends there, checked against the directory in the same step.

        Returns whether it was appended; ``False`` (nothing was) if the session ended, is someone else's, or its
        owner's lease lapsed: look the session up again.

        Raises:
            StoreUnavailable: the shared state cannot be reached (nothing was appended, or it may have been if the
                reply was lost).
        """
        ...

    async def check(self) -> None:
        """Raise :class:`StoreUnavailable` if the shared state cannot be reached now (readiness checks)."""
        ...
