"""What the server tells the client unasked: log messages, progress, URL completions; the callbacks they feed.

``notifications/message`` goes to ``on_log`` (or Python logging), ``notifications/progress`` to the progress
callback of the call whose token it names (2025-11-25 basic/utilities/progress; tokens are ours, one per call that
asked for progress), ``notifications/elicitation/complete`` to the URL flow, ``notifications/tools/list_changed``
to the tools (what they declare is listed again when next needed). Anything heard restarts the request clock
(``request_timeout``). Callbacks run off the connection's read loop, in order, through :class:`CallbackQueue`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..protocol import NotificationReceived
from ..types import LOGGING_LEVELS, JSONObject, JSONValue, LoggingLevel
from ._pace import Pace
from ._quiet import QuietClock
from ._url_flow import UrlFlow

logger = logging.getLogger("elicitor.client")

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]
"""Receives a call's progress: ``progress``, ``total`` (or ``None``), ``message`` (or ``None``)."""
LogCallback = Callable[[LoggingLevel, JSONValue, str | None], Awaitable[None]]
"""Receives the server's log messages: ``level``, ``data``, ``logger`` (or ``None``). ``level`` is always one of
the eight syslog levels (see :func:`log_level`)."""

_LEVELS: dict[str, LoggingLevel] = {level: level for level in LOGGING_LEVELS}


def log_level(raw: object) -> LoggingLevel:
    """A log message's ``level`` as one of the eight: a known one in any case (``"WARNING"``), else ``"info"`` (a
    level of the server's own, ``"trace"`` or ``5``, or none)."""
    return _LEVELS.get(raw.lower(), "info") if isinstance(raw, str) else "info"


def progress_key(params: JSONObject) -> str | None:
    """The progress token a request carries, as the callbacks are keyed (``None`` without one)."""
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return None if token is None else str(token)


class Progress:
    """The progress callbacks of the calls under way, by the token each call's request carries."""

    __slots__ = ("_callbacks", "_next", "by_token")

    def __init__(self, callbacks: CallbackQueue) -> None:
        self._callbacks = callbacks
        self._next = 0
        self.by_token: dict[str, ProgressCallback] = {}

    def attach(self, params: JSONObject, callback: ProgressCallback | None) -> str | None:
        """Give the request ``params`` a new progress token for ``callback`` (in ``_meta``); ``None`` without one."""
        if callback is None:
            return None
        self._next += 1
        token = f"p{self._next}"
        self.by_token[token] = callback
        params["_meta"] = {"progressToken": token}
        return token

    def end(self, token: str | None) -> None:
        """The call with ``token`` has ended: no more of its progress is delivered once what is queued is."""
        if token is not None:
            self.by_token.pop(token, None)
            self._callbacks.forget(token)


class Notifications:
    """Routes each notification from the server to where it belongs."""

    __slots__ = ("_callbacks", "_on_log", "_pace", "_progress", "_quiet", "_tools_changed", "_urls")

    def __init__(
        self,
        *,
        callbacks: CallbackQueue,
        progress: Progress,
        urls: UrlFlow,
        quiet: QuietClock | None,
        on_log: LogCallback | None,
        tools_changed: Callable[[], None] | None = None,
        pace: Pace | None = None,
    ) -> None:
        self._callbacks = callbacks
        self._pace = pace
        """Told of every notification (a log message during the handshake keeps it alive: client/_pace.py)."""
        self._tools_changed = tools_changed
        self._progress = progress
        self._urls = urls
        self._quiet = quiet
        self._on_log = on_log

    async def __call__(self, note: NotificationReceived) -> None:
        if self._quiet is not None:
            self._quiet.heard_from_server()
        if self._pace is not None:
            self._pace.heard()
        params = note.params or {}
        if note.method == "notifications/message":
            level = log_level(params.get("level"))
            data = params.get("data")
            source = params.get("logger")
            if self._on_log is not None:
                self._callbacks.put(None, self._on_log, level, data, source if isinstance(source, str) else None)
            else:
                logging.getLogger("elicitor.server_log").info("%s: %s", level, data)
        elif note.method == "notifications/elicitation/complete":
            self._urls.completed(str(params.get("elicitationId")))
        elif note.method == "notifications/tools/list_changed":
            if self._tools_changed is not None:
                self._tools_changed()
        elif note.method == "notifications/progress":
            key = str(params.get("progressToken"))
            callback = self._progress.by_token.get(key)
            progress = params.get("progress")
            if callback is not None and isinstance(progress, int | float):
                total = params.get("total")
                text = params.get("message")
                self._callbacks.put(
                    key,
                    callback,
                    progress,
                    total if isinstance(total, int | float) else None,
                    text if isinstance(text, str) else None,
                )


MAX_QUEUED_CALLBACKS = 4096
"""How many progress and log callbacks may wait for delivery before new ones are dropped (with a warning)."""


class CallbackQueue:
    """Delivers the application's progress and log callbacks in order, off the connection's read loop.

    A callback that takes its time (a slow terminal, a callback that awaits I/O) must not hold up the messages
    behind it: run inline, it would keep the client from reading the server's next request, and the server would
    give up on an elicitation the person already answered. Here one task delivers them in arrival order. A call
    waits for its own progress callbacks and the log callbacks that arrived before its result
    (:meth:`caught_up`), so they still come before its return, and no other call waits on them. If callbacks fall
    :data:`MAX_QUEUED_CALLBACKS` behind, new ones are dropped with a warning: progress and logs are informational,
    and memory stays bounded whatever the server sends.
    """

    __slots__ = ("_delivered", "_dropping", "_finished", "_queued", "_receive", "_send", "_wake")

    def __init__(self) -> None:
        self._send: MemoryObjectSendStream[tuple[str | None, Any, tuple[Any, ...]]] | None = None
        self._receive: MemoryObjectReceiveStream[tuple[str | None, Any, tuple[Any, ...]]] | None = None
        self._queued: dict[str | None, int] = {}  # per progress token (None: logs), how many were queued
        self._delivered: dict[str | None, int] = {}
        self._finished: set[str] = set()  # tokens of calls that ended with callbacks still queued
        self._dropping = False
        self._wake: anyio.Event | None = None  # made in the event loop, by the first waiter

    def open(self) -> None:
        """Make the queue (when the client connects: streams left open would be reported unclosed)."""
        self._send, self._receive = anyio.create_memory_object_stream[tuple[str | None, Any, tuple[Any, ...]]](
            MAX_QUEUED_CALLBACKS
        )

    def close(self) -> None:
        """Drop what is still queued (the client is leaving)."""
        if self._send is not None and self._receive is not None:
            self._send.close()
            self._receive.close()

    def put(self, key: str | None, callback: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Queue ``callback(*args)`` for ``key`` (a progress token, or ``None`` for logs); dropped (and said once
        per backlog) when the queue is full."""
        if self._send is None:
            return
        try:
            self._send.send_nowait((key, callback, args))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        except anyio.WouldBlock:
            if not self._dropping:
                self._dropping = True
                logger.warning(
                    "progress and log callbacks are %d behind: dropping new ones until they catch up",
                    MAX_QUEUED_CALLBACKS,
                )
            return
        self._queued[key] = self._queued.get(key, 0) + 1

    async def run(self) -> None:
        """Deliver queued callbacks until cancelled (the client's exit); a failing callback is logged."""
        assert self._receive is not None, "open() first"
        async for key, callback, args in self._receive:
            try:
                await callback(*args)
            except Exception:
                logger.exception("a progress or log callback failed")
            delivered = self._delivered[key] = self._delivered.get(key, 0) + 1
            if delivered == self._queued.get(key):
                self._dropping = False
                if key in self._finished:  # its call has ended: nothing more will come for it
                    self._finished.discard(key)
                    del self._queued[key], self._delivered[key]
            wake, self._wake = self._wake, None
            if wake is not None:
                wake.set()

    def forget(self, token: str) -> None:
        """The call with progress ``token`` has ended: drop its counts once its queued callbacks are delivered."""
        if self._queued.get(token, 0) == self._delivered.get(token, 0):
            self._queued.pop(token, None)
            self._delivered.pop(token, None)
        else:
            self._finished.add(token)

    async def caught_up(self, token: str | None) -> None:
        """Wait until the callbacks for ``token`` and the log callbacks queued so far have been delivered."""
        keys = (None,) if token is None else (None, token)
        marks = [(key, self._queued.get(key, 0)) for key in keys]
        while any(self._delivered.get(key, 0) < mark for key, mark in marks):
            if self._wake is None:
                self._wake = anyio.Event()
            await self._wake.wait()
