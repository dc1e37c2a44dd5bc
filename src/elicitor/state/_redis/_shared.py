"""What the Redis ports of one store share: the clients, the key prefix, sealing, error translation, and the
writes of one turn of the event loop batched into one ``MULTI``/``EXEC``.

The key layout, and why each operation is atomic, are in the package's docstring (:mod:`elicitor.state._redis`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import cast

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError
from redis.typing import EncodableT

from ...telemetry import _state as _telemetry
from .._lane import Command, Lane
from .._ports import Sealer, StoreUnavailable

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
        """Where the commands on the path of an answer go (see :mod:`.._lane`); ``None``: through ``client``."""
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
        from ...telemetry import _hooks

        start = time.perf_counter()
        try:
            yield
        except _FAILURES as exc:
            _hooks.store_operation(doing, time.perf_counter() - start, exc)
            raise StoreUnavailable(f"shared state unavailable ({said}): Redis at {self.where}: {exc}") from exc
        _hooks.store_operation(doing, time.perf_counter() - start, None)
