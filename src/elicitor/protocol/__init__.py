"""The sans-I/O protocol core: framing, JSON-RPC correlation, lifecycle and negotiation. No event loop here."""

from ._connection import (
    MAX_DEPTH,
    Connection,
    ErrorReceived,
    Event,
    InvalidMessage,
    NotificationReceived,
    RequestCancelled,
    RequestReceived,
    ResultReceived,
    decode_json,
    error_reply,
    split_batch,
)
from ._framing import LineFramer, Oversized
from ._lifecycle import (
    ClientCapabilities,
    Handshake,
    HandshakeState,
    RequestMeta,
    is_stateless_request,
    negotiate,
    parse_implementation,
    parse_request_meta,
)
from ._peek import peek_envelope

__all__ = [
    "MAX_DEPTH",
    "ClientCapabilities",
    "Connection",
    "ErrorReceived",
    "Event",
    "Handshake",
    "HandshakeState",
    "InvalidMessage",
    "LineFramer",
    "NotificationReceived",
    "Oversized",
    "RequestCancelled",
    "RequestMeta",
    "RequestReceived",
    "ResultReceived",
    "decode_json",
    "error_reply",
    "is_stateless_request",
    "negotiate",
    "parse_implementation",
    "parse_request_meta",
    "peek_envelope",
    "split_batch",
]
