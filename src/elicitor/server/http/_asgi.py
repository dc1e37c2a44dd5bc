"""ASGI plumbing shared by both eras' endpoints: request headers, bodies, and the shapes of every response.

Every refusal is a specific HTTP status with a JSON-RPC error body, so that a client (or a person reading a log)
learns what was wrong from the response alone.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import msgspec

from ..._loop import running_asyncio_loop
from ...protocol import decode_json as decode_json
from ...protocol import error_reply
from ...telemetry import _state as _telemetry
from ...types import INTERNAL_ERROR, JSONObject, RequestId

logger = logging.getLogger("elicitor.http")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

encode_json = msgspec.json.Encoder().encode
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
"""An event stream's response headers (``X-Accel-Buffering: no`` keeps nginx from holding events back)."""


if TYPE_CHECKING:
    from ._auth import AccessToken


class Headers:
    """Request headers by lowercase name (the last one wins).

    Leading and trailing spaces and tabs are not part of a field value (RFC 9110, section 5.5); some HTTP parsers
    (httptools) leave them in, so they are stripped here.
    """

    __slots__ = ("_mixed", "_raw", "principal", "token")

    def __init__(self, scope: Scope) -> None:
        self._raw: list[tuple[bytes, bytes]] = scope.get("headers", [])
        """The ASGI server's own list, read where asked: a request waiting on a person holds this object, and a
        dict of every header decoded took about 0.9 KiB more per waiting request (tracemalloc)."""
        self._mixed: bool | None = None
        """Whether some name in the list is not in lowercase (looked at once, at the first lookup)."""
        self.principal: str | None = None
        self.token: AccessToken | None = None
        """The verified access token, when the app checks tokens (``HttpApp(auth=...)``)."""

    def get(self, name: str) -> str | None:
        """The value of the last header called ``name`` (lowercase), or ``None``.

        ASGI servers give header names in lowercase (uvicorn, hypercorn, granian do): a list whose names all are
        is searched as is, and only one with a name in another case compares case-insensitively (lowering every
        name at every lookup made about 40 copies per request).
        """
        key = name.encode("latin-1")
        raw = self._raw
        if self._mixed is None:
            self._mixed = any(field != field.lower() for field, _ in raw)
        if self._mixed:
            for field, value in reversed(raw):
                if field.lower() == key:
                    return value.decode("latin-1").strip(" \t")
        else:
            for field, value in reversed(raw):
                if field == key:
                    return value.decode("latin-1").strip(" \t")
        return None


def hostname(netloc: str) -> str:
    netloc = netloc.rsplit("@", 1)[-1].strip().lower()
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")] if "]" in netloc else netloc
    return netloc.split(":", 1)[0]


def request_id_of(message: JSONObject) -> RequestId | None:
    value = message.get("id")
    return value if type(value) is int or type(value) is str else None


async def read_body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def respond_json(send: Send, status: int, body: bytes, *, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


async def refuse(
    send: Send,
    status: int,
    request_id: RequestId | None,
    code: int,
    message: str,
    *,
    allow: bool = False,
    reference: str | None = None,
    cause: BaseException | None = None,
) -> None:
    """Answer with ``status`` and a JSON-RPC error body; a 503 says when to try again (``Retry-After``, seconds),
    in the body too (``data.retryable``, ``data.retryAfter``), as a handler's retryable error does: a client that
    reads only the JSON-RPC error (ours hands the body of any JSON answer to the request) still knows it may retry.
    Whether anything ran is the caller's to know: most 503s refuse a request before it reached a session (see
    :func:`refuse_unavailable` for the store away), but a relayed stream the owner closed with 503 before its first
    message (the relay fell behind) is a request that runs on, its events kept for a resume.

    A POSTed message refused before it reached its session is a span, with ``code`` as its ``error.type`` and
    ``cause`` (the store's error, say) as an ``exception`` event (``telemetry/_hooks/``, ``refused``)."""
    if _telemetry.state.on:
        from ...telemetry import _hooks

        _hooks.refused(cause, status, code, message)
    extra = [(b"allow", b"GET, POST, DELETE")] if allow else None
    data: JSONObject | None = None
    if status == 503:
        extra = RETRY_AFTER
        data = {"retryable": True, "retryAfter": RETRY_AFTER_SECONDS}
        if reference is not None:
            data["reference"] = reference
    await respond_json(send, status, error_reply(request_id, code, message, data), extra=extra)


async def refuse_unavailable(send: Send, request_id: RequestId | None, exc: BaseException, doing: str) -> None:
    """Answer 503 (``Retry-After``) for a store that cannot be reached while ``doing``, once the request waited
    for it as long as it may (:class:`~elicitor.server._hold.StoreHold`).

    Nothing ran on this replica. One thing may still happen elsewhere: a message for another replica's session
    whose last try timed out (Redis paused, not down) may be run by Redis late and reach the session's owner. An
    answer or notification is then delivered, and a second copy sent by the client is ignored as an answer already
    given; a request runs once, its answer going nowhere; a GET's stream starts and is stopped (this replica
    follows the GET with a detach); a DELETE ends the session (the client's retry gets 404).
    ``docs/deploying.md`` says so too.

    The exception's text names the store's address: it goes to this server's log (WARNING, no traceback: the
    store was away, nothing is wrong with the code) with a reference the client's error carries, never to the client.
    """
    reference = secrets.token_hex(6)
    logger.warning("%s: the shared state could not be reached (reference %s): %s", doing, reference, exc)
    message = f"Service unavailable: the shared state cannot be reached now; retry (reference {reference})"
    await refuse(send, 503, request_id, INTERNAL_ERROR, message, reference=reference, cause=exc)


RETRY_AFTER_SECONDS = 1
RETRY_AFTER = [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())]
"""What every 503 carries: the refusals are for moments (the store reconnecting, a replica restarting)."""


async def respond_empty(send: Send, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


@asynccontextmanager
async def until_disconnect(receive: Receive) -> AsyncIterator[anyio.CancelScope]:
    """Run the body until it ends or the client goes away, whichever comes first (then the body is cancelled).

    Knowing that the client left takes awaiting ``receive()`` beside the work, so a second task. On asyncio that is
    a bare asyncio task, cancelled when the body ends: an anyio task group for it cost about 45 µs per request, a
    tenth of a 2026-07-28 round's server time (``bench/``), and more memory per open stream. Elsewhere (trio under
    an ASGI server that runs it) a task group does the same. Yields the scope the body runs in: cancelling it ends
    the body as the client's leaving would.
    """
    with anyio.CancelScope() as scope:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            scope.cancel()

        loop = running_asyncio_loop()
        if loop is not None:
            watcher = loop.create_task(watch())
            try:
                yield scope
            finally:
                watcher.cancel()  # it only ever waits on receive(): it ends at its next step, with nothing to undo
        else:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                yield scope
                tg.cancel_scope.cancel()


class Stoppable(Protocol):
    """What :func:`until_gone` gives the body: ``cancel()`` stops it as the client's leaving would."""

    def cancel(self) -> None: ...


def until_gone(receive: Receive) -> AbstractAsyncContextManager[Stoppable]:
    """:func:`until_disconnect` for a body with no shielded cleanup inside (a response delivering a stream).

    What a waiting response holds matters there: a call waiting on a person keeps its response open for as long as
    the person takes, so thousands may be open at once. On asyncio this costs no cancel scope, context manager
    generator or coroutine of ours: one task runs the ASGI server's own ``receive()`` and its completion stops the
    body (:class:`_Watched`), 2.0 KiB less per waiting call than :func:`until_disconnect` (tracemalloc,
    ``bench/http_memory.py``). Elsewhere it is :func:`until_disconnect`.
    """
    loop = running_asyncio_loop()
    if loop is None:
        return until_disconnect(receive)
    return _Watched(loop, receive)


class _Watched:
    """The asyncio side of :func:`until_gone`: stopping is cancelling the body's task, undone on the way out.

    The same protocol as ``asyncio.timeout``: the body's task is cancelled (the task's own cancellation, counted),
    and leaving the block uncancels it once and swallows that ``CancelledError`` only if no other cancellation is
    still pending, so a cancellation from anywhere else (an enclosing anyio scope, the server shutting down) goes
    on. Nothing in the body may be shielded: a task's own cancellation does not honour anyio's shields.
    """

    __slots__ = ("_cancelling", "_inside", "_loop", "_receive", "_stopping", "_task", "_watcher")

    def __init__(self, loop: asyncio.AbstractEventLoop, receive: Receive) -> None:
        self._loop = loop
        self._receive = receive
        self._task: asyncio.Task[Any] | None = None
        self._watcher: asyncio.Future[Message] | None = None
        self._inside = False
        self._stopping = False
        self._cancelling = 0

    async def __aenter__(self) -> _Watched:
        self._task = asyncio.current_task()
        assert self._task is not None
        self._cancelling = self._task.cancelling()
        self._inside = True
        self._watch()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        self._inside = False
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.remove_done_callback(self._received)
            watcher.cancel()  # it only ever waits on receive(): it ends at its next step, with nothing to undo
        if self._stopping:
            assert self._task is not None
            return self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError
        return False

    def cancel(self) -> None:
        """Stop the body at its next step (at once if it is waiting); nothing once it has ended."""
        if self._inside and not self._stopping:
            self._stopping = True
            assert self._task is not None
            self._task.cancel()

    def _watch(self) -> None:
        watcher = self._watcher = asyncio.ensure_future(self._receive(), loop=self._loop)
        watcher.add_done_callback(self._received)

    def _received(self, watcher: asyncio.Future[Message]) -> None:
        if not self._inside or watcher.cancelled():
            return
        error = watcher.exception()
        if error is None and watcher.result()["type"] != "http.disconnect":
            self._watch()  # not the client leaving (a body this endpoint does not read): keep listening
            return
        self._watcher = None
        self.cancel()  # the client left (or the server cannot tell us any more): stop delivering


class Listening:
    """A response's own task listening to the client while it has nothing to send, on asyncio, interruptibly.

    The task awaits the ASGI server's ``receive()`` itself (it learns at once that the client left), and
    :meth:`wake` interrupts that wait when there is something to send: one task per waiting response where
    :func:`until_gone` takes two. :meth:`cancel` stops the delivery (a resume superseded it), at once if it waits.

    Both are the task's own counted cancellation, as in ``asyncio.timeout``: what this object asked for is undone
    (``uncancel``), and a cancellation from anywhere else (the server shutting down) goes on. Only a wait on
    ``receive()`` is ever interrupted by :meth:`wake`, and the ASGI servers' ``receive()`` keeps what arrived in
    the meantime for the next call (uvicorn answers ``http.disconnect`` again; an ``asyncio.Queue`` keeps its
    item). Nothing in the delivering code may be shielded: a task's own cancellation does not honour anyio's
    shields.
    """

    __slots__ = ("_asked", "_cancelling", "_task", "stopping", "waiting")

    def __init__(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._cancelling = task.cancelling()
        self._asked = 0
        """Cancellations of the task this object asked for and has not undone yet."""
        self.waiting = False
        """Whether the task waits on ``receive()`` now (the delivering code says so)."""
        self.stopping = False

    def wake(self) -> None:
        """Interrupt the wait on ``receive()``, if the task is in it: there is something to send."""
        if self.waiting and not self._asked:
            self._asked += 1
            self._task.cancel()

    def cancel(self) -> None:
        """Stop the delivery at its next step (at once if it waits); nothing after the first time."""
        if not self.stopping:
            self.stopping = True
            self._asked += 1
            self._task.cancel()

    def woken(self) -> bool:
        """For a ``CancelledError`` out of ``receive()``: whether :meth:`wake` alone caused it (then it is undone
        and the delivery goes on); otherwise it must propagate."""
        if self.stopping or not self._asked:
            return False
        self._asked -= 1
        self._task.uncancel()
        return self._task.cancelling() <= self._cancelling

    def settle(self) -> bool:
        """For a ``CancelledError`` ending the delivery: undo what this object asked for, and say whether the
        error is only that (then it is swallowed, and the response ends normally)."""
        while self._asked:
            self._asked -= 1
            self._task.uncancel()
        return self._task.cancelling() <= self._cancelling
