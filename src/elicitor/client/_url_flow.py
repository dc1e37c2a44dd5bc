"""URL mode's waits on the client: which URL interactions are under way, and waiting until one is finished.

On 2025-11-25 a URL-mode request carries an ``elicitationId``; when the person has finished on the page, the server
MAY send ``notifications/elicitation/complete`` naming it (client/elicitation, "Completion Notifications"). The
client listens for that id before the handler shows the URL (the page may finish before the handler returns) and,
where the call cannot go on until the interaction ends (-32042, "URL Elicitation Required Error"), waits for the
first of: the notice, the person saying they are done (a handler's ``wait_done``), or ``url_timeout`` for a handler
that offers neither; an automated handler (a script) has nobody to wait for, and the call is retried at once.
Clients MUST NOT wait for the notice indefinitely; ids nobody waits for are bounded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from ._url import UrlElicitationRequest

MAX_PENDING_URL_ELICITATIONS = 1024
"""URL elicitations whose completion the client remembers at once (the oldest are forgotten first)."""

WaitDone = Callable[[UrlElicitationRequest], Awaitable[None]]
"""A handler's ``wait_done``: returns when the person says the out-of-band interaction is finished."""


class UrlFlow:
    """The URL interactions under way with one server, each an event set by its completion notice."""

    __slots__ = ("_pending", "timeout")

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        """Seconds to wait for a completion notice when no person can say they are done (``url_timeout``)."""
        self._pending: dict[str, anyio.Event] = {}

    def expect(self, elicitation_id: str) -> None:
        """Listen for the completion of ``elicitation_id`` (the oldest id is dropped past the bound)."""
        if elicitation_id in self._pending:
            return
        if len(self._pending) >= MAX_PENDING_URL_ELICITATIONS:  # nobody waited for the oldest: drop it
            self._pending.pop(next(iter(self._pending)))
        self._pending[elicitation_id] = anyio.Event()

    def forget(self, elicitation_id: str | None) -> None:
        """Stop listening for ``elicitation_id``."""
        if elicitation_id is not None:
            self._pending.pop(elicitation_id, None)

    def completed(self, elicitation_id: str) -> None:
        """The server's completion notice: unknown or already completed ids are ignored (2025-11-25)."""
        done = self._pending.get(elicitation_id)
        if done is not None:
            done.set()

    async def wait_completion(self, elicitation_id: str) -> None:
        """Until the server's completion notice for ``elicitation_id`` (unbounded: the caller bounds it)."""
        await self._pending.setdefault(elicitation_id, anyio.Event()).wait()

    async def wait_done(self, request: UrlElicitationRequest, handler: object) -> None:
        """Until the server says the interaction is complete, or the person says so (``handler.wait_done``, if the
        handler has one; without one, at most :attr:`timeout` seconds). An automated handler (``automated = True``,
        :class:`~elicitor.ScriptedHandler`) has nobody to wait for: its acceptance is final, and this returns at
        once."""
        elicitation_id = str(request.elicitation_id)
        if getattr(handler, "automated", False) or self._pending.setdefault(elicitation_id, anyio.Event()).is_set():
            self.forget(elicitation_id)
            return
        wait_done: WaitDone | None = getattr(handler, "wait_done", None)
        limit = self.timeout if wait_done is None else None
        with anyio.move_on_after(limit):
            async with anyio.create_task_group() as tg:

                async def notified() -> None:
                    await self.wait_completion(elicitation_id)
                    tg.cancel_scope.cancel()

                async def person(wait_done: WaitDone) -> None:
                    await wait_done(request)
                    tg.cancel_scope.cancel()

                tg.start_soon(notified)
                if wait_done is not None:
                    tg.start_soon(person, wait_done)
        self.forget(elicitation_id)
