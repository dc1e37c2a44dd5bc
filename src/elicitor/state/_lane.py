"""One connection to Redis on which the commands of a replica's hot path are pipelined: no pool, no per-call layers.

Why: on the handshake era's forwarded path, every hop through Redis is a process waking up and running Python, on
a machine whose cores the replicas, Redis, the balancer and the clients share, so CPU on the path is latency.
redis-py spends three to five times what the round trip itself costs on each call (a connection taken from and
given back to its pool under locks, a task per write for its timeout, observability hooks, its packing in Python).
A :class:`Lane` writes each command (packed in C by ``hiredis``) to one connection as soon as it is issued, and a
protocol callback hands each reply, parsed by ``hiredis``, to the caller next in line: Redis answers the commands
of one connection in the order they came.

Failures keep :class:`~elicitor.state.RedisStore`'s rules: a command waits at most ``timeout`` for its reply (then
the connection is closed, and every command waiting on it fails: a timed-out command may have run, and is never
sent again); a command sent on a connection that turns out broken (Redis restarted since it was last used) is
sent once more, at once, on a new one. Errors are redis-py's (``ConnectionError``, ``TimeoutError``,
``ResponseError``), so callers translate them as they translate redis-py's.

Only plain connections (``redis://``, ``unix://``) take a lane, and only with ``hiredis`` installed (the ``redis``
extra installs it): a store on ``rediss://``, or without ``hiredis``, uses redis-py for every command
(:func:`lane_for` returns ``None``), slower and otherwise the same.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from typing import cast

try:
    import hiredis
except ImportError:  # redis installed without it: every command goes through redis-py
    hiredis = None  # type: ignore[assignment]
from redis.asyncio.connection import parse_url
from redis.exceptions import ConnectionError as ConnectionLost
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as TimedOut
from redis.typing import EncodableT

Command = Sequence[EncodableT]


def _reply_error(message: str) -> Exception:
    """A reply that is an error, as redis-py raises it (``NOSCRIPT`` apart: a script to send whole)."""
    return NoScriptError(message) if message.startswith("NOSCRIPT") else ResponseError(message)


class _Connection(asyncio.Protocol):
    """One connection: replies matched in order to the futures of the commands written."""

    def __init__(self) -> None:
        self._parser = hiredis.Reader(replyError=_reply_error)
        self._waiting: deque[asyncio.Future[object]] = deque()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # uvloop's are not asyncio.Transport subclasses

    def data_received(self, data: bytes) -> None:
        self._parser.feed(data)
        waiting = self._waiting
        try:
            while (reply := self._parser.gets()) is not False:
                future = waiting.popleft()
                if not future.done():  # its caller may have been cancelled: the reply is dropped
                    future.set_result(reply)
        except (hiredis.ProtocolError, IndexError) as exc:  # not Redis speaking, or a reply nobody asked for
            self.close(ConnectionLost(f"Protocol error from Redis: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionLost(f"Connection to Redis lost: {exc or 'closed by the server'}"))

    def send(self, packed: bytes, count: int) -> list[asyncio.Future[object]]:
        """Write ``count`` packed commands; the futures of their replies, in order."""
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(count)]
        self._waiting.extend(futures)
        self.transport.write(packed)
        return futures

    def close(self, error: Exception) -> None:
        """Close the connection; every command still waiting fails with ``error``."""
        self._fail(error)
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, error: Exception) -> None:
        self.closed = True
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_exception(error)


def _retrieve(futures: list[asyncio.Future[object]]) -> None:
    """Mark the failures of a batch's futures as seen (the first one raised; asyncio would log the others)."""
    for future in futures:
        if future.done() and not future.cancelled():
            future.exception()


def _seen(future: asyncio.Future[_Connection]) -> None:
    """Mark an opening's failure as seen (its callers may all have been cancelled; asyncio would log it)."""
    if not future.cancelled():
        future.exception()


class Lane:
    """The commands of one store's hot path, pipelined on one connection (opened on first use, and again after a
    failure). See the module."""

    def __init__(self, connect: dict[str, object], timeout: float, name: str, *, resend: bool = True) -> None:
        self._connect = connect
        self._timeout = timeout
        self._name = name
        self._resend = resend
        self._connection: _Connection | None = None
        self._opening: asyncio.Future[_Connection] | None = None

    async def execute(self, commands: Sequence[Command]) -> list[object]:
        """Send ``commands`` together and return their replies, in order (an error reply is returned as a
        ``ResponseError``, not raised). Raises ``ConnectionError`` or ``TimeoutError`` as redis-py does."""
        packed = b"".join(hiredis.pack_command(tuple(command)) for command in commands)  # type: ignore[arg-type]
        for attempt in (1, 2):
            connection = self._connection
            fresh = connection is None or connection.closed or connection.loop is not asyncio.get_running_loop()
            if fresh or connection is None:
                connection = await self._open()
            futures = connection.send(packed, len(commands))
            try:
                async with asyncio.timeout(self._timeout):
                    await futures[-1]  # replies come in order: the last one in, all are
            except ConnectionLost:
                _retrieve(futures)
                if fresh or attempt == 2 or not self._resend:
                    raise
                continue
            except TimeoutError:
                connection.close(TimedOut("Timeout reading from Redis"))  # fails every command waiting on it
                _retrieve(futures)
                raise TimedOut("Timeout reading from Redis") from None
            except BaseException:  # cancelled (the replies still come, and are dropped), or failed otherwise
                for future in futures:
                    future.cancel()
                _retrieve(futures)
                raise
            return [future.result() for future in futures]
        raise AssertionError("unreachable")

    async def script(self, sha: str, source: bytes, keys: Sequence[EncodableT], args: Sequence[EncodableT]) -> object:
        """Run a Lua script by its digest, sending it whole if Redis does not know it (a restart, a flush)."""
        reply = (await self.execute([("EVALSHA", sha, len(keys), *keys, *args)]))[0]
        if isinstance(reply, NoScriptError):
            reply = (await self.execute([("EVAL", source, len(keys), *keys, *args)]))[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def _open(self) -> _Connection:
        """The connection being opened, or a new one: an opening that ended (failed while nobody waited for it,
        its caller cancelled) or belongs to another event loop is not reused."""
        opening = self._opening
        if opening is None or opening.done() or opening.get_loop() is not asyncio.get_running_loop():
            opening = self._opening = asyncio.ensure_future(self._connected())
            opening.add_done_callback(_seen)
        try:
            return await asyncio.shield(opening)
        finally:
            if opening.done() and self._opening is opening:
                self._opening = None

    async def _connected(self) -> _Connection:
        loop = asyncio.get_running_loop()
        options = self._connect
        connection: _Connection | None = None
        try:
            async with asyncio.timeout(self._timeout):
                if "path" in options:
                    _, connection = await loop.create_unix_connection(_Connection, str(options["path"]))
                else:
                    host, port = str(options.get("host", "localhost")), int(str(options.get("port", 6379)))
                    _, connection = await loop.create_connection(_Connection, host, port)
                hello: list[Command] = []
                if options.get("password") is not None:
                    user = options.get("username")
                    secret = str(options["password"])
                    hello.append(("AUTH", secret) if user is None else ("AUTH", str(user), secret))
                if int(str(options.get("db", 0))):
                    hello.append(("SELECT", int(str(options["db"]))))
                hello.append(("CLIENT", "SETNAME", self._name))
                packed = b"".join(hiredis.pack_command(tuple(command)) for command in hello)  # type: ignore[arg-type]
                for reply in [await future for future in connection.send(packed, len(hello))]:
                    if isinstance(reply, Exception):
                        raise ConnectionLost(f"Redis refused the connection: {reply}")
        except BaseException as exc:
            if connection is not None:
                connection.close(ConnectionLost("Connection to Redis not opened"))
            if isinstance(exc, TimeoutError):
                raise TimedOut("Timeout connecting to Redis") from None
            if isinstance(exc, OSError):
                raise ConnectionLost(f"Error connecting to Redis: {exc}") from exc
            raise
        self.close()  # one left by another event loop, if any
        self._connection = connection
        return connection

    def close(self) -> None:
        """Close the connection (a later command opens a new one)."""
        connection, self._connection = self._connection, None
        if connection is not None and not connection.loop.is_closed():
            connection.close(ConnectionLost("Connection to Redis closed"))


def lane_for(url: str, timeout: float, name: str, *, resend: bool = True) -> Lane | None:
    """A lane to the Redis at ``url``, or ``None`` for a TLS connection (``rediss://``) or without ``hiredis``:
    redis-py serves those.

    ``resend``: whether a command that met a broken connection is sent once more on a new one (not for a reader
    whose failure must end its iteration)."""
    if url.startswith("rediss://") or hiredis is None:
        return None
    return Lane(dict(parse_url(url)), timeout, name, resend=resend)
