"""Shared state: what a conversation depends on beyond one request, behind ports that replicas can share.

The default, :class:`MemoryBackend`, keeps everything in this process. :class:`RedisBackend` (``elicitor[redis]``)
keeps it in Redis so that any number of replicas behind a plain load balancer serve every conversation, whichever
replica each message lands on. :func:`open_backend` picks one from a URL, or from ``ELICITOR_REDIS_URL``.
"""

from ._config import REDIS_URL_ENV, open_backend
from ._memory import MemoryBackend, MemoryBus, MemoryEventStore, MemorySessionDirectory, MemoryUrlRegistry
from ._ports import (
    Backend,
    BackendUnavailable,
    Bus,
    EventStore,
    SessionDirectory,
    SessionRecord,
    UrlRecord,
    UrlRegistry,
)

__all__ = [
    "REDIS_URL_ENV",
    "Backend",
    "BackendUnavailable",
    "Bus",
    "EventStore",
    "MemoryBackend",
    "MemoryBus",
    "MemoryEventStore",
    "MemorySessionDirectory",
    "MemoryUrlRegistry",
    "SessionDirectory",
    "SessionRecord",
    "UrlRecord",
    "UrlRegistry",
    "open_backend",
]
