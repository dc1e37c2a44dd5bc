"""Which event loop runs this task: the asyncio fast paths (a bare future instead of ``anyio.Event``, a persistent
selector registration instead of ``anyio.wait_readable``) need the loop; every other backend uses anyio as is."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Generator
from typing import Any

import sniffio


def running_asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop if this task runs on asyncio, else ``None`` (call once, then keep it)."""
    try:
        if sniffio.current_async_library() == "asyncio":
            return asyncio.get_running_loop()
    except sniffio.AsyncLibraryNotFoundError:
        pass
    return None


_enter_task: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None] | None = getattr(
    asyncio.tasks, "_enter_task", None
)
_leave_task: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None] | None = getattr(
    asyncio.tasks, "_leave_task", None
)
"""asyncio's hooks for task implementations (documented under "Extending asyncio", Python 3.11 to 3.14); without
them a request's task starts on the loop's next pass, as ``create_task`` starts it."""


class EagerStarter:
    """Starts tasks from a loop callback with their first step taken at once, in the callback.

    For the transport's reading callback that starts the task answering what it just read: a handler that answers
    without waiting (a script, a cached answer, ``ping``) answers in the pass of the event loop that read the
    request, not on the next one, and no task is made for it. The step runs *as a task*:
    ``asyncio.current_task()`` is a real task, so anyio's cancel scopes, ``asyncio.timeout`` and context
    variables behave as in any task, and a coroutine that waits goes on in that same task, which is returned.

    The task is a spare one, made ahead and parked (it waits to be handed a coroutine): a step that finishes
    leaves it spare for the next request, so a request answered at once costs no task at all. What the step
    raises is raised by the task, as a task's own step would raise it. The step enters the task through the hooks
    asyncio documents for task implementations (``_enter_task``/``_leave_task``); inside a running task (not a
    loop callback) the coroutine gets a task of its own, started on the next pass as ``create_task`` starts it.
    """

    __slots__ = ("_loop", "_spare")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._spare: _Runner | None = None

    def start(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
        """Take ``coro``'s first step now; its task, or ``None`` if it finished in that step."""
        loop = self._loop
        if _enter_task is None or _leave_task is None or asyncio.current_task(loop) is not None:
            return loop.create_task(coro)
        runner = self._spare
        if runner is None or runner.used():
            runner = self._spare = _Runner(loop)
        task = runner.task
        context = contextvars.copy_context()
        _enter_task(loop, task)
        try:
            yielded = context.run(coro.send, None)
        except StopIteration:
            return None
        except BaseException as exc:
            self._spare = None
            runner.hand(coro, context, None, exc)
            return task
        finally:
            _leave_task(loop, task)
        self._spare = None
        runner.hand(coro, context, yielded, None)
        return task

    def close(self) -> None:
        """End the spare task (a session ending)."""
        if self._spare is not None:
            self._spare.task.cancel()
            self._spare = None


class _Runner:
    """A parked task (waiting to be handed a coroutine, see :class:`EagerStarter`), and, once handed one, the
    task that carries it on from where its first step left it."""

    __slots__ = ("_carrier", "task")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._carrier = _Carrier(loop.create_future())
        self.task: asyncio.Task[None] = loop.create_task(self._carrier)

    def used(self) -> bool:
        """Whether the parked task can no longer take a coroutine (a finished step's code cancelled it)."""
        return self.task.done() or self.task.cancelling() > 0

    def hand(
        self,
        coro: Coroutine[Any, Any, None],
        context: contextvars.Context,
        yielded: Any,
        raised: BaseException | None,
    ) -> None:
        self._carrier.hand(coro, context, yielded, raised)


class _Carrier(Coroutine[Any, Any, None]):
    """The coroutine of a :class:`_Runner`'s task, written out as one (a coroutine function's frame could not take
    a cancellation that comes before its first step): parked, it awaits the future :meth:`hand` completes; handed
    a coroutine, what that coroutine's first step awaited the task awaits, and what the task is sent or thrown the
    coroutine is, in the coroutine's own context."""

    __slots__ = ("_context", "_coro", "_handed", "_raised", "_yielded")

    def __init__(self, handed: asyncio.Future[None]) -> None:
        self._handed: asyncio.Future[None] | None = handed
        self._coro: Coroutine[Any, Any, None] | None = None
        self._context: contextvars.Context | None = None
        self._yielded: Any = None
        self._raised: BaseException | None = None

    def hand(
        self,
        coro: Coroutine[Any, Any, None],
        context: contextvars.Context,
        yielded: Any,
        raised: BaseException | None,
    ) -> None:
        self._coro, self._context, self._yielded, self._raised = coro, context, yielded, raised
        handed = self._handed
        if handed is not None and not handed.done():
            handed.set_result(None)

    def send(self, value: Any) -> Any:
        handed = self._handed
        if handed is not None:  # the task's first step, or the one after the hand woke it
            if self._coro is None:
                handed._asyncio_future_blocking = True  # as awaiting it does
                return handed
            self._handed = None
            if self._raised is not None:
                raised, self._raised = self._raised, None
                raise raised
            yielded, self._yielded = self._yielded, None
            return yielded
        assert self._coro is not None and self._context is not None
        return self._context.run(self._coro.send, value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        exc = val if isinstance(val, BaseException) else typ
        if isinstance(exc, type):
            exc = exc()
        if self._coro is None:  # cancelled while parked: the task ends
            self._handed = None
            raise exc
        if self._raised is not None:  # the first step raised, and the task had not woken to raise it yet
            raised, self._raised = self._raised, None
            raise raised
        # Handed (woken or not yet): the coroutine takes it where it waits.
        self._handed = self._yielded = self._raised = None
        assert self._context is not None
        return self._context.run(self._coro.throw, exc)

    def close(self) -> None:
        if self._coro is not None:
            self._coro.close()

    def __await__(self) -> Generator[Any, Any, None]:
        raise TypeError("a task's carrier is driven by its task, not awaited")
