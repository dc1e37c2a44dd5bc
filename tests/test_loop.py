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

from elicitor._loop import EagerStarter

pytestmark = pytest.mark.anyio

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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
