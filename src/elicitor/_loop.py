"""Which event loop runs this task: the asyncio fast paths (a bare future instead of ``anyio.Event``, a persistent
selector registration instead of ``anyio.wait_readable``) need the loop; every other backend uses anyio as is."""

from __future__ import annotations

import asyncio

import sniffio


def running_asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop if this task runs on asyncio, else ``None`` (call once, then keep it)."""
    try:
        if sniffio.current_async_library() == "asyncio":
            return asyncio.get_running_loop()
    except sniffio.AsyncLibraryNotFoundError:
        pass
    return None
