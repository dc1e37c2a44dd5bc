"""What answers elicitations on the client: the request a handler sees, and the built-in handlers."""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, TypeAlias, runtime_checkable

import anyio

from .._exceptions import FieldError, InvalidScriptedAnswer
from .._outcomes import Accepted, Cancelled, Declined, Outcome
from ..forms import Form
from ..types import Implementation
from ._present import server_label
from ._url import UrlElicitationRequest


@dataclass(frozen=True, slots=True)
class ElicitationRequest:
    """One question from a server, as a handler sees it.

    Attributes:
        message: what the server asks and why.
        form: the fields to fill (a typed description of the ``requestedSchema``); ``form.fields`` for rendering,
            ``form.validate`` to check an answer.
        server: who asks (self-reported name, title, version) — show it: the spec says clients MUST.
        mode: ``"form"``.
        errors: when an earlier answer to this same request failed validation, what was wrong with it.
        previous: that earlier answer, to pre-fill the form with.
    """

    message: str
    form: Form[dict[str, Any]]
    server: Implementation | None
    mode: Literal["form"] = "form"
    errors: tuple[FieldError, ...] = ()
    previous: dict[str, Any] | None = None

    @property
    def server_label(self) -> str:
        """Who asks, ready to show: title (or name) and version on one line, control characters escaped."""
        return server_label(self.server)


ElicitationOutcome: TypeAlias = Outcome[Any]
"""What a handler returns: ``Accepted(content)`` (``Accepted(None)`` for a URL), ``Declined()`` or ``Cancelled()``."""


@runtime_checkable
class ElicitationHandler(Protocol):
    """Answers elicitations for a :class:`~elicitor.Client`.

    Return ``Accepted(content)``, ``Declined()`` or ``Cancelled()``. URL-mode requests go to the handler's ``url``
    method (see :class:`UrlHandler`) when its ``modes`` include ``"url"``. The client fills
    schema defaults into accepted form content, validates it with the same validator the server uses, and calls the
    handler again with ``errors`` set instead of sending an invalid answer. Concurrent requests reach the handler
    concurrently: a handler that shows them to a person presents them one at a time (as :class:`TerminalHandler`
    does). A handler may also offer ``async wait_done(request)``, returning when the person says an out-of-band
    interaction is finished (the server's completion notification is optional).

    A handler may set ``modes`` (default ``{"form"}``): the client declares exactly those modes (on 2025-06-18,
    which has no URL mode, form mode alone), and a request in any other mode is refused with -32602 before it reaches
    the handler.

    Who is behind a handler decides how a URL interaction ends (2025-11-25, -32042): a person's handler offers
    ``wait_done``, and the call waits until the server's completion notice or the person says they are done; an
    automated handler sets ``automated = True`` (as :class:`ScriptedHandler` does), and its acceptance is final: the
    call is retried at once, with nobody to wait for. Any other handler waits for the notice at most
    ``Client(url_timeout=...)``.

    Example::

        async def ask_person(request: ElicitationRequest) -> ElicitationOutcome:
            print(f"{request.server_label} asks: {request.message}")
            return Declined()

        async with Client.stdio(["python", "server.py"], elicitation=ask_person) as client: ...
    """

    async def __call__(self, request: ElicitationRequest) -> ElicitationOutcome: ...


class UrlHandler(Protocol):
    """The URL-mode part of a handler whose ``modes`` include ``"url"``.

    ``url`` shows the request (the full URL, its host highlighted, its warnings) and opens the URL only after the
    person consents, returning ``Accepted(None)``; ``wait_done`` (optional) returns when the person says the
    out-of-band interaction is finished.
    """

    async def url(self, request: UrlElicitationRequest) -> ElicitationOutcome:
        """Show ``request`` to the person and open its URL only if they consent: ``Accepted(None)``, ``Declined()``
        or ``Cancelled()``."""
        ...


Answer: TypeAlias = (
    "ElicitationOutcome | dict[str, Any] | Literal['accept', 'decline', 'cancel']"
    " | Callable[[ElicitationRequest | UrlElicitationRequest], Answer | Awaitable[Answer]]"
)


class OneAtATime:
    """Concurrent requests shown to a person one at a time; ``waiting`` counts those queued behind the current one.

    The built-in renderers take a turn for every screen or page they show, and show ``waiting`` with it.
    """

    def __init__(self) -> None:
        self._lock = anyio.Lock()
        self.waiting = 0

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        self.waiting += 1
        queued = True
        try:
            async with self._lock:
                self.waiting -= 1
                queued = False
                yield
        finally:
            if queued:  # cancelled while still in the queue
                self.waiting -= 1


@dataclass
class ScriptedHandler:
    """A handler for tests and automation: answers from a queue, and records every request it was asked.

    Each queued answer is an outcome, a dict (shorthand for ``Accepted(dict)``), ``"accept"`` (``Accepted(None)``,
    for URLs), ``"decline"``, ``"cancel"``, or a function of the request (plain or ``async``) returning one of
    those. When the queue is empty, ``otherwise`` answers (by default nothing does: the handler raises
    ``LookupError``). Set ``modes`` to ``{"form", "url"}`` to take URL-mode requests too.

    The client validates an accepted answer before sending it. A person would be asked again with the errors; a
    script cannot correct itself, so an invalid scripted answer raises :class:`~elicitor.InvalidScriptedAnswer`
    naming the question, the answer and each field's problem (``retry_invalid=True`` instead answers the retry from
    the queue, to exercise a client's validation loop). Either exception is raised by the ``Client`` method that
    led to the question (``call_tool``...), on every revision.

    Example::

        handler = ScriptedHandler([{"name": "Ada"}, "decline"], otherwise=Accepted({}))
        ...
        assert handler.requests[0].message == "Your name?"
    """

    automated: ClassVar[bool] = True
    """Answers come from a script: a URL acceptance is final, and no call waits for a person to finish one."""

    answers: Iterable[Answer] = ()
    otherwise: Answer | None = None
    modes: frozenset[str] = frozenset({"form"})
    requests: list[ElicitationRequest] = field(default_factory=list)
    retry_invalid: bool = False
    url_requests: list[UrlElicitationRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._queue: deque[Answer] = deque(self.answers)

    def add(self, *answers: Answer) -> None:
        """Queue more answers after those already queued."""
        self._queue.extend(answers)

    async def __call__(self, request: ElicitationRequest) -> ElicitationOutcome:
        self.requests.append(request)
        if request.errors and not self.retry_invalid:
            raise InvalidScriptedAnswer(request.message, request.previous, request.errors)
        return await self._next(request)

    async def url(self, request: UrlElicitationRequest) -> ElicitationOutcome:
        """URL mode (when ``modes`` include ``"url"``): answered from the same queue; nothing is opened, and an
        acceptance is final (the call does not wait for the server's completion notice: see ``automated``)."""
        self.url_requests.append(request)
        outcome = await self._next(request)
        return Accepted(None) if isinstance(outcome, Accepted) else outcome

    async def _next(self, request: ElicitationRequest | UrlElicitationRequest) -> ElicitationOutcome:
        if self._queue:
            answer = self._queue.popleft()
        elif self.otherwise is not None:
            answer = self.otherwise
        else:
            raise LookupError(f"ScriptedHandler has no answer left for: {request.message!r}")
        return await _resolve(answer, request)


async def _resolve(answer: Answer, request: ElicitationRequest | UrlElicitationRequest) -> ElicitationOutcome:
    """Turn a scripted answer into an outcome, calling (and awaiting) answer functions until one gives a value."""
    while callable(answer) and not isinstance(answer, Accepted | Declined | Cancelled):
        made = answer(request)
        answer = await made if inspect.isawaitable(made) else made
    if isinstance(answer, Accepted | Declined | Cancelled):
        return answer
    if answer == "accept":
        return Accepted(None)
    if answer == "decline":
        return Declined()
    if answer == "cancel":
        return Cancelled()
    if isinstance(answer, dict):
        return Accepted(answer)
    raise TypeError(f"not an answer: {answer!r}")
