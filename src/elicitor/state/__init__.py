"""Shared state: what a conversation depends on beyond one request, behind ports that replicas can share.

The default, :class:`MemoryStore`, keeps everything in this process. :class:`RedisStore` (``elicitor[redis]``)
keeps it in Redis so that any number of replicas behind a plain load balancer serve every conversation, whichever
replica each message lands on. :func:`open_store` picks one from a URL, or from ``ELICITOR_REDIS_URL``.
"""

from typing import TYPE_CHECKING, Any

from ._config import REDIS_URL_ENV, open_store
from ._memory import (
    MemoryBus,
    MemoryEventStore,
    MemorySessionDirectory,
    MemoryStore,
    MemoryTaskRegistry,
    MemoryUrlRegistry,
)
from ._ports import (
    Bus,
    EventStore,
    Sealer,
    SessionDirectory,
    SessionRecord,
    Store,
    StoreUnavailable,
    TaskRecord,
    TaskRegistry,
    UrlRecord,
    UrlRegistry,
    replica_channel,
)
from ._supervise import Backoff, Subscription, supervised

if TYPE_CHECKING:
    from ._redis import RedisStore

__all__ = [
    "REDIS_URL_ENV",
    "Backoff",
    "Bus",
    "EventStore",
    "MemoryBus",
    "MemoryEventStore",
    "MemorySessionDirectory",
    "MemoryStore",
    "MemoryTaskRegistry",
    "MemoryUrlRegistry",
    "RedisStore",
    "Sealer",
    "SessionDirectory",
    "SessionRecord",
    "Store",
    "StoreUnavailable",
    "Subscription",
    "TaskRecord",
    "TaskRegistry",
    "UrlRecord",
    "UrlRegistry",
    "open_store",
    "replica_channel",
    "supervised",
]


def __getattr__(name: str) -> Any:
    if name == "RedisStore":  # imported on first use: the redis package is an extra (elicitor[redis])
        from ._redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
