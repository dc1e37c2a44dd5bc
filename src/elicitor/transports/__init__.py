"""Transports: stdio (both ends) and in-memory pairs. Streamable HTTP lives beside them."""

from ._base import Transport
from ._memory import MemoryTransport, memory_pair
from ._stdio import (
    CLIENT_MAX_MESSAGE_SIZE,
    DEFAULT_MAX_MESSAGE_SIZE,
    StdioClientTransport,
    StdioServerTransport,
    stdout_kept_for_protocol,
)

__all__ = [
    "CLIENT_MAX_MESSAGE_SIZE",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "MemoryTransport",
    "StdioClientTransport",
    "StdioServerTransport",
    "Transport",
    "memory_pair",
    "stdout_kept_for_protocol",
]
