"""Which event loop to run on (uvloop's when installed), and which one runs this task: the asyncio fast paths (a
bare future instead of ``anyio.Event``, a persistent selector registration instead of ``anyio.wait_readable``) need
the loop; every other backend uses anyio as is."""

from __future__ import annotations

import asyncio
import contextvars
import importlib.util
import sys
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar

import anyio
import sniffio

from .i18n._message import N_

_T = TypeVar("_T")


def event_loop(loop: str = "auto") -> str:
    """The asyncio event loop to run on: uvloop's when installed for ``"auto"`` (the ``[speed]`` extra; never on
    Windows, where uvloop does not exist), else as named.

    Raises:
        ValueError: an unknown name, or uvloop named and not installed (with what to install).
    """
    if loop not in ("auto", "uvloop", "asyncio"):
        raise ValueError(N_("unknown event loop {loop}: use 'auto', 'uvloop' or 'asyncio'", loop=repr(loop)))
    if loop == "auto":
        return "uvloop" if sys.platform != "win32" and _installed("uvloop") else "asyncio"
    if loop == "uvloop" and not _installed("uvloop"):
        raise ValueError(N_("loop='uvloop' needs uvloop: {install}", install="pip install 'elicitor[speed]'"))
    return loop


def run_on(func: Callable[..., Awaitable[_T]], *args: Any, loop: str = "auto") -> _T:
    """``anyio.run(func, *args)`` on asyncio with the event loop :func:`event_loop` picks for ``loop``.

    A stdio round trip is sequential, so each pass of the loop between a read and the answer's write is paid in
    full on every message; uvloop's passes cost less than asyncio's own (docs/benchmarks.md has the figures).
    """
    return anyio.run(func, *args, backend="asyncio", backend_options={"use_uvloop": event_loop(loop) == "uvloop"})


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


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
    """Starts tasks from a loop callback with their first step taken at once, in the callback, and wakes them there.

    For the transport's reading callback that starts the task answering what it just read: a handler that answers
    without waiting (a script, a cached answer, ``ping``) answers in the pass of the event loop that read the
    request, not on the next one, and no task is made for it. The step runs *as a task*:
    ``asyncio.current_task()`` is a real task, so anyio's cancel scopes, ``asyncio.timeout`` and context
    variables behave as in any task, and a coroutine that waits goes on in that same task, which is returned.
    Likewise a task so started that waits on a future the reading callback completes (a peer's answer to its
    request) is woken there (:meth:`wake`): it goes on in that pass, not on the next.

    The task is a spare one, made ahead and parked (it waits to be handed a coroutine): a step that finishes
    leaves it spare for the next request, so a request answered at once costs no task at all. What the step
    raises is raised by the task, as a task's own step would raise it. The step enters the task through the hooks
    asyncio documents for task implementations (``_enter_task``/``_leave_task``); inside a running task (not a
    loop callback) the coroutine gets a task of its own, started on the next pass as ``create_task`` starts it.
    """

    __slots__ = ("_loop", "_spare")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._spare: Carrier | None = None

    def start(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
        """Take ``coro``'s first step now; its task, or ``None`` if it finished in that step."""
        loop = self._loop
        if _enter_task is None or _leave_task is None or asyncio.current_task(loop) is not None:
            return loop.create_task(coro)
        carrier = self._spare
        if carrier is None or carrier.used():
            carrier = self._spare = Carrier(loop)
        task = carrier.task
        assert task is not None
        context = contextvars.copy_context()
        _enter_task(loop, task)
        try:
            yielded = context.run(coro.send, None)
        except StopIteration:
            return None
        except BaseException as exc:
            self._spare = None
            carrier.hand(coro, context, None, exc)
            return task
        finally:
            _leave_task(loop, task)
        self._spare = None
        carrier.hand(coro, context, yielded, None)
        return task

    def carrier(self) -> Carrier | None:
        """The carrier of the running task if a starter started it."""
        task = asyncio.current_task(self._loop)
        carrier = task.get_coro() if task is not None else None
        return carrier if type(carrier) is Carrier else None

    def wake(self, carrier: Carrier, future: asyncio.Future[Any]) -> None:
        """``future`` was just completed, from a loop callback: if ``carrier``'s coroutine waits on it, and
        nothing else is due to its task (a cancellation), let the coroutine go on now, up to where it waits
        next; its task, woken on the next pass by ``future``, then waits on that. Else the task wakes as usual."""
        loop, task = self._loop, carrier.task
        if (
            task is None
            or carrier.waits_on is not future
            or future.cancelled()
            or task.cancelling()
            or _enter_task is None
            or _leave_task is None
            or asyncio.current_task(loop) is not None
        ):
            return
        _enter_task(loop, task)
        try:
            carrier.go_on()
        finally:
            _leave_task(loop, task)

    def close(self) -> None:
        """End the spare task (a session ending)."""
        if self._spare is not None:
            if self._spare.task is not None:
                self._spare.task.cancel()
            self._spare = None


class Carrier(Coroutine[Any, Any, None]):
    """The coroutine of a task :class:`EagerStarter` makes, written out as one (a coroutine function's frame could
    not take a cancellation that comes before its first step).

    Parked, it awaits the future :meth:`hand` completes. Handed a coroutine, what that coroutine's first step
    awaited the task awaits, and what the task is sent or thrown the coroutine is, in the coroutine's own context.
    Gone on ahead of its task (:meth:`go_on`, from the reading callback), the task's next step gets what the
    coroutine awaits now (or its end) instead of resuming it again. Once the coroutine has ended, the carrier lets
    go of it and of its task (no reference cycle outlives the task: a finished call's memory is freed at once).
    """

    __slots__ = ("_ahead", "_context", "_coro", "_ended", "_handed", "_raised", "_yielded", "task", "waits_on")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._handed: asyncio.Future[None] | None = loop.create_future()
        self._coro: Coroutine[Any, Any, None] | None = None
        self._context: contextvars.Context | None = None
        """The coroutine's own context, entered for each of its steps (its task, made ahead, has another)."""
        self._yielded: Any = None
        self._raised: BaseException | None = None
        self._ahead = False
        self._ended = False
        """The coroutine ended in :meth:`go_on`, ahead of its task: the task's next step ends it too."""
        self.waits_on: Any = None
        """What the coroutine awaits now (a future), whether or not its task has been given it yet."""
        self.task: asyncio.Task[None] | None = loop.create_task(self)

    def used(self) -> bool:
        """Whether the parked task can no longer take a coroutine (a finished step's code cancelled it)."""
        return self.task is None or self.task.done() or self.task.cancelling() > 0

    def hand(
        self,
        coro: Coroutine[Any, Any, None],
        context: contextvars.Context,
        yielded: Any,
        raised: BaseException | None,
    ) -> None:
        self._coro, self._context, self._yielded, self._raised = coro, context, yielded, raised
        self.waits_on = yielded
        if raised is not None:
            self._end()
        handed = self._handed
        if handed is not None and not handed.done():
            handed.set_result(None)

    def _drive(self, method: Callable[[Any], Any], arg: Any) -> Any:
        """Step the coroutine (``send`` or ``throw``) in its context; what it awaits next."""
        assert self._context is not None
        try:
            self.waits_on = self._context.run(method, arg)
        except BaseException:
            self._end()
            raise
        return self.waits_on

    def _end(self) -> None:
        self._coro = self._context = self.waits_on = self.task = None

    def go_on(self) -> None:
        """Resume the coroutine now (what it waited on is done): see :meth:`EagerStarter.wake`."""
        assert self._coro is not None
        self._ahead = True
        try:
            self._yielded = self._drive(self._coro.send, None)
        except StopIteration:
            self._ended = True
        except BaseException as exc:
            self._raised = exc

    def _ahead_step(self) -> Any:
        """The task's step after :meth:`go_on` or :meth:`hand`: what the coroutine awaits now, or how it ended."""
        self._ahead = False
        if self._raised is not None:
            raised, self._raised = self._raised, None
            raise raised
        if self._ended:
            raise StopIteration
        yielded, self._yielded = self._yielded, None
        return yielded

    def send(self, value: Any) -> Any:
        if self._ahead:
            self._handed = None
            return self._ahead_step()
        handed = self._handed
        if handed is not None:  # the task's first step, or the one after the hand woke it
            if self._coro is None and self._raised is None:
                handed._asyncio_future_blocking = True  # as awaiting it does
                return handed
            self._handed = None
            return self._ahead_step()
        assert self._coro is not None
        return self._drive(self._coro.send, value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        exc = val if isinstance(val, BaseException) else typ
        if isinstance(exc, type):
            exc = exc()
        if self._raised is not None or self._ended:  # it ended before its task woke: nothing to throw into
            return self._ahead_step()
        if self._coro is None:  # cancelled while parked: the task ends
            self._handed = None
            raise exc
        # Handed, or gone on ahead (woken or not yet): the coroutine takes it where it waits.
        self._handed = self._yielded = None
        self._ahead = False
        return self._drive(self._coro.throw, exc)

    def close(self) -> None:
        if self._coro is not None:
            self._coro.close()

    def __await__(self) -> Generator[Any, Any, None]:
        raise TypeError("a task's carrier is driven by its task, not awaited")
