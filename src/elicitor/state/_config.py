"""Choosing a store: memory unless a ``redis://`` URL is given, in code or in the environment."""

from __future__ import annotations

import os

from ..i18n._message import N_
from ._memory import MemoryStore
from ._ports import Store

REDIS_URL_ENV = "ELICITOR_REDIS_URL"
"""Environment variable naming the Redis every replica shares (``redis://host:port/db``, ``rediss://`` for TLS)."""


def open_store(url: str | None = None) -> Store:
    """The store for ``url`` (``redis://`` or ``rediss://``), else ``ELICITOR_REDIS_URL``, else memory.

    Raises:
        ValueError: a URL that names no store elicitor knows.
        ModuleNotFoundError: a Redis URL without the ``redis`` package (install ``elicitor[redis]``).
    """
    url = url if url is not None else (os.environ.get(REDIS_URL_ENV, "").strip() or None)
    if url is None or url == "memory:":
        return MemoryStore()
    if url.startswith(("redis://", "rediss://", "unix://")):
        try:
            from ._redis import RedisStore
        except ModuleNotFoundError as exc:
            if exc.name == "redis":
                raise ModuleNotFoundError(
                    "a Redis store needs the redis package: pip install 'elicitor[redis]'", name="redis"
                ) from None
            raise
        return RedisStore(url)
    raise ValueError(N_("unknown state store {url}: use a redis:// URL, or nothing for memory", url=repr(url)))
