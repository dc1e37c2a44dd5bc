"""Choosing a backend: memory unless a ``redis://`` URL is given, in code or in the environment."""

from __future__ import annotations

import os

from ._memory import MemoryBackend
from ._ports import Backend

REDIS_URL_ENV = "ELICITOR_REDIS_URL"
"""Environment variable naming the Redis every replica shares (``redis://host:port/db``, ``rediss://`` for TLS)."""


def open_backend(url: str | None = None) -> Backend:
    """The backend for ``url`` (``redis://`` or ``rediss://``), else ``ELICITOR_REDIS_URL``, else memory.

    Raises:
        ValueError: a URL that names no backend elicitor knows.
        ModuleNotFoundError: a Redis URL without the ``redis`` package (install ``elicitor[redis]``).
    """
    url = url if url is not None else (os.environ.get(REDIS_URL_ENV, "").strip() or None)
    if url is None or url == "memory:":
        return MemoryBackend()
    if url.startswith(("redis://", "rediss://", "unix://")):
        try:
            from ._redis import RedisBackend
        except ModuleNotFoundError as exc:
            if exc.name == "redis":
                raise ModuleNotFoundError(
                    "a Redis backend needs the redis package: pip install 'elicitor[redis]'", name="redis"
                ) from None
            raise
        return RedisBackend(url)
    raise ValueError(f"unknown state backend {url!r}: use a redis:// URL, or nothing for memory")
