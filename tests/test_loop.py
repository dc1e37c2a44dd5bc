"""Starting a request's task in the reading callback (``elicitor._loop.EagerStarter``): the first step runs at
once, as a real task, and a coroutine that waits goes on in that task with everything a task gives it."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import warnings
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import pytest

from elicitor._loop import Carrier, EagerStarter

from .conftest import ASYNCIO_LOOPS, on_asyncio_loop

pytestmark = pytest.mark.anyio

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


anyio_backend = pytest.fixture(params=ASYNCIO_LOOPS)(on_asyncio_loop)


async def from_callback(
    starter: EagerStarter, make: Callable[[], Coroutine[Any, Any, None]]
) -> asyncio.Task[None] | None:
    """Start ``make()`` from a loop callback, as the stdio transport's reading callback does."""
    loop = asyncio.get_running_loop()
    started: asyncio.Future[asyncio.Task[None] | None] = loop.create_future()
    loop.call_soon(lambda: started.set_result(starter.start(make())))
    return await started


async def test_a_step_that_finishes_needs_no_task_and_runs_as_one() -> None:
    loop = asyncio.get_running_loop()
    starter = EagerStarter(loop)
    seen: list[object] = []

    async def answer() -> None:
        seen.append(asyncio.current_task())
        with anyio.CancelScope():  # needs a current task on asyncio
            seen.append("scoped")

    assert await from_callback(starter, answer) is None
    assert isinstance(seen[0], asyncio.Task) and seen[1] == "scoped"
    # The spare task is kept for the next request: the same one runs it.
    assert await from_callback(starter, answer) is None
    assert seen[2] is seen[0]
    starter.close()
    await asyncio.sleep(0)
    assert seen[0].cancelled()


async def test_a_coroutine_that_waits_goes_on_in_the_task_it_started_in() -> None:
    loop = asyncio.get_running_loop()
    starter = EagerStarter(loop)
    woken = asyncio.Event()
    tasks: list[object] = []
    values: list[str] = []

    async def waits() -> None:
        VAR.set("set in the first step")
        tasks.append(asyncio.current_task())
        async with asyncio.timeout(30):  # asyncio.timeout refuses to run outside a task
            await woken.wait()
        tasks.append(asyncio.current_task())
        values.append(VAR.get())

    task = await from_callback(starter, waits)
    assert task is not None and not task.done()
    assert tasks == [task]
    woken.set()
    await task
    assert tasks == [task, task]
    assert values == ["set in the first step"]
    assert VAR.get() == "unset"  # the request's context is its own

    # The next request gets a fresh spare: the one that carried a coroutine is not reused.
    async def quick() -> None:
        tasks.append(asyncio.current_task())

    assert await from_callback(starter, quick) is None
    assert tasks[2] is not task
    starter.close()


async def test_what_the_first_step_raises_the_task_raises() -> None:
    starter = EagerStarter(asyncio.get_running_loop())

    async def fails() -> None:
        raise LookupError("in the first step")

    task = await from_callback(starter, fails)
    assert task is not None
    with pytest.raises(LookupError, match="in the first step"):
        await task
    starter.close()


async def test_cancelling_a_waiting_coroutine_honours_an_anyio_shield() -> None:
    """Cancelled through its anyio cancel scope (as a peer's notifications/cancelled cancels a request), the
    coroutine sees the cancellation where it waits, and its shielded cleanup still runs to the end."""
    starter = EagerStarter(asyncio.get_running_loop())
    scope = anyio.CancelScope()
    events: list[str] = []

    async def waits() -> None:
        with scope:
            try:
                await anyio.sleep(30)
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.sleep(0.01)
                    events.append("cleaned up")
        events.append("after the scope")

    task = await from_callback(starter, waits)
    assert task is not None
    await asyncio.sleep(0)
    scope.cancel()
    with anyio.fail_after(10):
        await task
    assert events == ["cleaned up", "after the scope"]
    starter.close()


async def test_cancelled_before_its_task_first_woke() -> None:
    """A cancellation in the same pass as the start (the request and the peer's cancellation in one read): the
    task has not run yet, and the coroutine is the one cancelled, at the point it waits."""
    loop = asyncio.get_running_loop()
    starter = EagerStarter(loop)
    events: list[str] = []

    async def waits() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            events.append("cancelled where it waited")
            raise

    started: asyncio.Future[asyncio.Task[None] | None] = loop.create_future()

    def read() -> None:
        task = starter.start(waits())
        assert task is not None
        task.cancel()
        started.set_result(task)

    loop.call_soon(read)
    task = await started
    assert task is not None
    with pytest.raises(asyncio.CancelledError):
        await task
    assert events == ["cancelled where it waited"]
    starter.close()


async def test_a_step_that_cancels_its_own_task_leaves_no_spare_behind() -> None:
    starter = EagerStarter(asyncio.get_running_loop())
    tasks: list[asyncio.Task[Any] | None] = []

    async def cancels_itself() -> None:
        task = asyncio.current_task()
        tasks.append(task)
        assert task is not None
        task.cancel()

    assert await from_callback(starter, cancels_itself) is None
    assert await from_callback(starter, cancels_itself) is None
    assert tasks[0] is not tasks[1]  # the cancelled spare is not used again
    starter.close()


async def test_inside_a_task_it_starts_a_task_of_its_own() -> None:
    starter = EagerStarter(asyncio.get_running_loop())
    ran: list[object] = []

    async def records() -> None:
        ran.append(asyncio.current_task())

    task = starter.start(records())
    assert task is not None and ran == []  # not stepped inside the caller's task
    await task
    assert ran == [task]
    starter.close()


async def test_nothing_is_left_pending_when_closed() -> None:
    """The spare task ends with the starter: no "Task was destroyed but it is pending" at shutdown."""
    starter = EagerStarter(asyncio.get_running_loop())

    async def quick() -> None:
        pass

    assert await from_callback(starter, quick) is None
    starter.close()
    await asyncio.sleep(0)
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and "_Runner" in repr(t)]
    assert pending == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gc.collect()


async def carried(starter: EagerStarter, make: Callable[[], Coroutine[Any, Any, None]]) -> asyncio.Task[None]:
    task = await from_callback(starter, make)
    assert task is not None
    return task


def in_callback(action: Callable[[], None]) -> asyncio.Future[None]:
    """Run ``action`` from a loop callback (as the reading callback acts on a peer's answer)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def run() -> None:
        action()
        done.set_result(None)

    loop.call_soon(run)
    return done


async def test_an_answer_read_in_the_callback_wakes_its_requester_there() -> None:
    """The requester goes on in the callback that completed what it awaited, as its own task, up to where it waits
    next; the task then waits on that, and the coroutine goes on from there when it is done."""
    loop = asyncio.get_running_loop()
    starter = EagerStarter(loop)
    first: asyncio.Future[str] = loop.create_future()
    second: asyncio.Future[str] = loop.create_future()
    events: list[object] = []

    async def requester() -> None:
        events.append(await first)
        events.append(asyncio.current_task())
        events.append(await second)

    task = await carried(starter, requester)
    await asyncio.sleep(0)
    carrier = _carrier_of(task)

    def answer() -> None:
        first.set_result("first answer")
        starter.wake(carrier, first)
        events.append("callback returned")

    await in_callback(answer)
    assert events == ["first answer", task, "callback returned"]  # went on inside the callback, as its task
    second.set_result("second answer")  # completed from a task: the task wakes as usual
    await task
    assert events[-1] == "second answer"
    starter.close()


async def test_the_carrier_is_the_requesters_own_not_a_task_it_started() -> None:
    starter = EagerStarter(asyncio.get_running_loop())
    seen: list[object] = []

    async def child() -> None:
        seen.append(starter.carrier())

    async def requester() -> None:
        seen.append(starter.carrier())
        await asyncio.create_task(child())

    await (await carried(starter, requester))
    assert seen[0] is not None and seen[1] is None
    assert starter.carrier() is None  # not in a carried task at all
    starter.close()


async def test_a_requester_with_a_cancellation_due_is_not_woken_in_the_callback() -> None:
    loop = asyncio.get_running_loop()
    starter = EagerStarter(loop)
    answer: asyncio.Future[str] = loop.create_future()
    events: list[str] = []

    async def requester() -> None:
        try:
            events.append(await answer)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise

    task = await carried(starter, requester)
    await asyncio.sleep(0)

    def cancel_then_answer() -> None:
        task.cancel()  # cancels what the task awaits, the answer's future, too
        if not answer.done():  # as the session's waiter sets it
            answer.set_result("too late")
        starter.wake(_carrier_of(task), answer)
        events.append("callback returned")

    await in_callback(cancel_then_answer)
    with pytest.raises(asyncio.CancelledError), anyio.fail_after(10):
        await task
    assert events == ["callback returned", "cancelled"]
    starter.close()


async def test_cancelled_after_going_on_ahead_of_its_task() -> None:
    """Woken in the callback and cancelled before its task's next step: the coroutine is cancelled where it waits
    now, not where it waited before."""
    loop = asyncio.get_running_loop()
    starter = EagerStarter(loop)
    answer: asyncio.Future[str] = loop.create_future()
    events: list[str] = []

    async def requester() -> None:
        events.append(await answer)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            events.append("cancelled in the second wait")
            raise

    task = await carried(starter, requester)
    await asyncio.sleep(0)

    def answer_then_cancel() -> None:
        answer.set_result("answer")
        starter.wake(_carrier_of(task), answer)
        task.cancel()

    await in_callback(answer_then_cancel)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert events == ["answer", "cancelled in the second wait"]
    starter.close()


@pytest.mark.parametrize("ending", ["returns", "raises"])
async def test_a_requester_that_ends_in_the_callback_ends_its_task(ending: str) -> None:
    loop = asyncio.get_running_loop()
    starter = EagerStarter(loop)
    answer: asyncio.Future[str] = loop.create_future()

    async def requester() -> None:
        await answer
        if ending == "raises":
            raise LookupError("after the answer")

    task = await carried(starter, requester)
    await asyncio.sleep(0)

    def answer_it() -> None:
        answer.set_result("answer")
        starter.wake(_carrier_of(task), answer)

    await in_callback(answer_it)
    if ending == "raises":
        with pytest.raises(LookupError, match="after the answer"):
            await task
    else:
        await task
        assert task.result() is None
    starter.close()


async def test_answered_in_the_callback_that_started_it() -> None:
    """The request and its peer's answer to the request it makes in one read: woken before its task ever ran."""
    loop = asyncio.get_running_loop()
    starter = EagerStarter(loop)
    answer: asyncio.Future[str] = loop.create_future()
    later: asyncio.Future[str] = loop.create_future()
    events: list[str] = []

    async def requester() -> None:
        events.append(await answer)
        events.append(await later)

    tasks: list[asyncio.Task[None] | None] = []

    def read() -> None:
        tasks.append(starter.start(requester()))
        carrier = _carrier_of(tasks[0])
        answer.set_result("answer")
        starter.wake(carrier, answer)
        events.append("callback returned")

    await in_callback(read)
    assert events == ["answer", "callback returned"]
    later.set_result("later")
    task = tasks[0]
    assert task is not None
    with anyio.fail_after(10):
        await task
    assert events[-1] == "later"
    starter.close()


def _carrier_of(task: asyncio.Task[None] | None) -> Carrier:
    assert task is not None
    carrier = task.get_coro()
    assert isinstance(carrier, Carrier)
    return carrier
