"""A sans-I/O JSON-RPC 2.0 connection, as MCP uses it.

Theory of operation
-------------------
A :class:`Connection` turns one framed message (bytes) into one :data:`Event`, and turns outgoing requests,
notifications and responses into bytes. It performs no I/O and imports no event loop: the session layer reads,
calls :meth:`Connection.receive`, acts on the event, and writes what the ``send_*`` methods return.

It keeps exactly the state that JSON-RPC correlation needs:

* ``outgoing`` — ids of requests we sent and await; a response to any other id is a stray
  (:class:`InvalidMessage` with no reply: responses are never answered), except one to a request we cancelled
  lately (``abandoned``, the last :data:`MAX_ABANDONED`): that answer crossed our cancellation and is passed on as
  an ordinary one that nobody awaits.
* ``incoming`` — ids of peer requests we have not answered; a duplicate in-flight id is rejected with -32600,
  answering twice raises :class:`LocalProtocolError`, and ``notifications/cancelled`` for an in-flight id becomes
  :class:`RequestCancelled` (cancelling anything else is ignored, as the spec says).

Every malformed input becomes an :class:`InvalidMessage` carrying the error reply to send (-32700 for bytes that
are not UTF-8 JSON or nest deeper than :data:`MAX_DEPTH`, -32600 for JSON that is not a message, a batch, or a bad
id), never an exception: a peer's mistake must not take the session down.
Spec: https://modelcontextprotocol.io/specification/2026-07-28/basic/index
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias, cast

import msgspec

from .._exceptions import JSONRPCError, MessageTooLarge, RemoteProtocolError
from ..types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    JSONObject,
    JSONValue,
    RequestId,
)
from ._framing import Oversized
from ._peek import peek_envelope

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode

CANCELLED_METHOD = "notifications/cancelled"
MAX_ABANDONED = 1024
"""How many ids of requests we cancelled are remembered, so that a late answer to one is not taken for a stray."""

MAX_DEPTH = 128
"""How deeply a peer's JSON may nest (objects and arrays). An MCP message needs a handful of levels; without a
bound, a single line of a few kilobytes of ``[[[[...`` exhausts the interpreter's recursion limit in the decoder,
or later, wherever the message is encoded again (a digest, a reply) further down the stack."""


def decode_json(data: bytes | str) -> Any:
    """Decode a peer's JSON text, refusing nesting deeper than :data:`MAX_DEPTH` (every transport decodes here).

    Raises:
        msgspec.DecodeError: not JSON, or nested too deeply.
        UnicodeDecodeError: not UTF-8.
    """
    try:
        value = _decode(data)
    except RecursionError:
        raise msgspec.DecodeError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    # Counting brackets is cheap and bounds the depth from above: only a text with many needs the exact walk.
    brackets = data.count(b"[") + data.count(b"{") if isinstance(data, bytes) else data.count("[") + data.count("{")
    if brackets > MAX_DEPTH and _depth_exceeds(value, MAX_DEPTH):
        raise msgspec.DecodeError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return value


def _depth_exceeds(value: object, limit: int) -> bool:
    """Whether ``value`` nests containers more than ``limit`` deep (iterative: it must not recurse itself)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if type(item) is dict else item if type(item) is list else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if type(child) is dict or type(child) is list)
    return False


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """The peer sent a request; answer it with :meth:`Connection.send_result` or ``send_error``."""

    id: RequestId
    method: str
    params: JSONObject | None


@dataclass(frozen=True, slots=True)
class NotificationReceived:
    """The peer sent a notification (never answered)."""

    method: str
    params: JSONObject | None


@dataclass(frozen=True, slots=True)
class ResultReceived:
    """The peer answered our request ``id`` with ``result``."""

    id: RequestId
    result: JSONObject


@dataclass(frozen=True, slots=True)
class ErrorReceived:
    """The peer answered our request ``id`` with an error."""

    id: RequestId
    error: JSONRPCError | MessageTooLarge
    """What the peer answered, or :class:`MessageTooLarge` for an answer dropped for its size."""


@dataclass(frozen=True, slots=True)
class RequestCancelled:
    """The peer cancelled its in-flight request ``id``: stop work and do not answer it."""

    id: RequestId
    reason: str | None
    params: JSONObject | None = field(default=None, compare=False)
    """The notification's params as sent (its ``_meta`` may name the trace it belongs to)."""


@dataclass(frozen=True, slots=True)
class InvalidMessage:
    """The peer sent something that is not a valid message. Send ``reply`` if it is not ``None``."""

    error: RemoteProtocolError
    reply: bytes | None


Event: TypeAlias = (
    RequestReceived | NotificationReceived | ResultReceived | ErrorReceived | RequestCancelled | InvalidMessage
)
"""What :meth:`Connection.receive` returns."""


MAX_BATCH = 1024
"""The most messages one batch may hold (see :func:`split_batch`)."""


def split_batch(data: bytes) -> list[bytes] | None:
    """The messages of a JSON-RPC batch (an array of messages), each encoded on its own; ``None`` if ``data`` is
    not a non-empty array of objects of at most :data:`MAX_BATCH`.

    Revision 2025-03-26 let both sides send batches and said each side must take them; 2025-06-18 removed them. A
    client that speaks with a server of that revision reads each message of a batch as if it came alone
    (``Session.batches``).
    """
    try:
        value = decode_json(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if type(value) is not list or not value or len(value) > MAX_BATCH or any(type(one) is not dict for one in value):
        return None
    return [_encode(one) for one in value]


def error_reply(id: RequestId | None, code: int, message: str, data: JSONValue = None) -> bytes:
    """Bytes of an error response; ``id`` is ``None`` when the request's id could not be read."""
    error: dict[str, JSONValue] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return _encode({"jsonrpc": "2.0", "id": id, "error": error})


class Connection:
    """JSON-RPC correlation state for one peer. See the module docstring for the rules it enforces.

    Args:
        max_incoming: how many peer requests may be in flight at once; beyond that new ones are refused with
            an error (the peer may retry), so a peer cannot make us hold unbounded work.
    """

    __slots__ = ("_abandoned", "_incoming", "_max_incoming", "_next_id", "_outgoing")

    def __init__(self, *, max_incoming: int = 65536) -> None:
        self._next_id = 0
        self._outgoing: set[RequestId] = set()
        self._abandoned: dict[RequestId, None] = {}  # insertion-ordered: the oldest goes first
        self._incoming: set[RequestId] = set()
        self._max_incoming = max_incoming

    # ---- inbound -------------------------------------------------------------------------------------------

    def receive(self, data: bytes) -> Event:
        """Classify one framed message. Never raises for anything the peer sent.

        Returns one of :class:`RequestReceived`, :class:`NotificationReceived`, :class:`ResultReceived`,
        :class:`ErrorReceived`, :class:`RequestCancelled` or :class:`InvalidMessage`.
        """
        try:
            message = decode_json(data)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            return _invalid(None, PARSE_ERROR, f"Parse error: {exc}")
        if type(message) is not dict:
            if type(message) is list:
                return _invalid(None, INVALID_REQUEST, "Invalid request: batches are not supported")
            return _invalid(None, INVALID_REQUEST, "Invalid request: a message must be a JSON object")
        return self._classify(message)

    def receive_decoded(self, message: dict[str, Any]) -> Event:
        """Like :meth:`receive`, for a message the transport already decoded (HTTP reads the body to route it)."""
        return self._classify(message)

    def _classify(self, message: dict[str, Any]) -> Event:
        raw_id = message.get("id")
        has_id = "id" in message
        id_ok = type(raw_id) is int or type(raw_id) is str
        reply_id: RequestId | None = raw_id if id_ok else None
        if message.get("jsonrpc") != "2.0":
            return _invalid(reply_id, INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"')
        method = message.get("method")
        if method is not None:
            if type(method) is not str or not method:
                return _invalid(reply_id, INVALID_REQUEST, 'Invalid request: "method" must be a non-empty string')
            params = message.get("params")
            if params is not None and type(params) is not dict:
                return _invalid(reply_id, INVALID_REQUEST, 'Invalid request: "params" must be an object')
            if not has_id:
                if method == CANCELLED_METHOD:
                    return self._cancelled(params)
                return NotificationReceived(method, params)
            if not id_ok:
                return _invalid(None, INVALID_REQUEST, 'Invalid request: "id" must be a string or an integer')
            assert raw_id is not None
            if raw_id in self._incoming:
                return _invalid(None, INVALID_REQUEST, f"Invalid request: id {raw_id!r} is already in flight")
            if len(self._incoming) >= self._max_incoming:
                return _invalid(raw_id, INTERNAL_ERROR, "Too many requests in flight; retry later")
            self._incoming.add(raw_id)
            return RequestReceived(raw_id, method, params)
        if "result" in message or "error" in message:
            if not id_ok or (raw_id not in self._outgoing and raw_id not in self._abandoned):
                return InvalidMessage(RemoteProtocolError(f"response to unknown request id {raw_id!r}"), None)
            assert raw_id is not None
            self._outgoing.discard(raw_id)
            self._abandoned.pop(raw_id, None)  # a late answer to a request we cancelled: nobody waits for it
            if "error" in message:
                return ErrorReceived(raw_id, _parse_error(message["error"]))
            result = message["result"]
            if type(result) is not dict:
                error = JSONRPCError(INTERNAL_ERROR, "peer sent a result that is not an object", result)
                return ErrorReceived(raw_id, error)
            return ResultReceived(raw_id, result)
        return _invalid(reply_id, INVALID_REQUEST, "Invalid request: neither a request, a notification nor a response")

    def receive_oversized(self, message: Oversized) -> Event:
        """Classify a message dropped for its size, from what its first and last bytes say it was
        (:func:`~elicitor.protocol.peek_envelope`): an answer to a request of ours fails that request
        (:class:`ErrorReceived` with :class:`MessageTooLarge`, nothing sent back: responses are never answered);
        a request is refused under its own id (-32600, so the peer's call ends instead of waiting); a
        notification is only reported; anything else is refused with a null id, as JSON-RPC says for a request
        whose id cannot be read.
        """
        request_id, kind = peek_envelope(message.head, message.tail)
        limit = f" over the limit of {message.limit:,} bytes" if message.limit else " over the size limit"
        text = f"Invalid request: message too large ({message.size:,} bytes,{limit})"
        if kind == "response":
            if request_id is not None and (request_id in self._outgoing or request_id in self._abandoned):
                self._outgoing.discard(request_id)
                self._abandoned.pop(request_id, None)
                return ErrorReceived(request_id, MessageTooLarge(message.size, message.limit))
            return InvalidMessage(RemoteProtocolError(text), None)
        if kind == "request":
            assert request_id is not None
            if request_id in self._incoming:  # the id is in flight: an answer under it would answer that request
                return InvalidMessage(RemoteProtocolError(text), error_reply(None, INVALID_REQUEST, text))
            return InvalidMessage(RemoteProtocolError(text), error_reply(request_id, INVALID_REQUEST, text))
        if kind == "notification":
            return InvalidMessage(RemoteProtocolError(text), None)
        return InvalidMessage(RemoteProtocolError(text), error_reply(None, INVALID_REQUEST, text))

    def _cancelled(self, params: JSONObject | None) -> Event:
        request_id = params.get("requestId") if params else None
        reason = params.get("reason") if params else None
        if not (type(request_id) is int or type(request_id) is str):
            # Spec: invalid cancellation notifications are ignored; we still surface it for logging.
            return InvalidMessage(RemoteProtocolError("notifications/cancelled without a valid requestId"), None)
        if request_id not in self._incoming:
            # Unknown or already finished: ignore (the response may have crossed the notification).
            return NotificationReceived(CANCELLED_METHOD, params)
        self._incoming.discard(request_id)
        return RequestCancelled(request_id, reason if isinstance(reason, str) else None, params)

    # ---- outbound ------------------------------------------------------------------------------------------

    def send_request(self, method: str, params: JSONObject | None = None) -> tuple[RequestId, bytes]:
        """Allocate an id, remember it, and return it with the request's bytes."""
        self._next_id += 1
        request_id = self._next_id
        self._outgoing.add(request_id)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        return request_id, _encode(message)

    def send_notification(self, method: str, params: JSONObject | None = None) -> bytes:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return _encode(message)

    def send_result(self, request_id: RequestId, result: JSONObject) -> bytes | None:
        """Answer peer request ``request_id``. Returns ``None`` if it was cancelled meanwhile (send nothing)."""
        if not self._finish(request_id):
            return None
        return _encode({"jsonrpc": "2.0", "id": request_id, "result": result})

    def send_error(self, request_id: RequestId, error: JSONRPCError) -> bytes | None:
        """Answer peer request ``request_id`` with an error; ``None`` if it was cancelled meanwhile."""
        if not self._finish(request_id):
            return None
        return _encode({"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()})

    def _finish(self, request_id: RequestId) -> bool:
        try:
            self._incoming.remove(request_id)
        except KeyError:
            return False
        return True

    def awaits(self, request_id: RequestId) -> bool:
        """Whether our request ``request_id`` still waits for its answer (a cancellation of it is due)."""
        return request_id in self._outgoing

    def cancel_request(
        self, request_id: RequestId, reason: str | None = None, meta: JSONObject | None = None
    ) -> bytes | None:
        """Give up on our request ``request_id``; returns the ``notifications/cancelled`` to send, if still due
        (with ``meta`` as its ``_meta``: the trace context it is sent in).

        A response may still cross the notification (basic/utilities/cancellation: the receiver may have finished
        first, and the sender "SHOULD ignore any response to the request that arrives afterward"): the last
        ``MAX_ABANDONED`` cancelled ids are remembered, so such a response is classified as an ordinary answer that
        no one awaits, not as a protocol error to warn about.
        """
        if request_id not in self._outgoing:
            return None
        self._outgoing.discard(request_id)
        self._abandoned[request_id] = None
        if len(self._abandoned) > MAX_ABANDONED:
            del self._abandoned[next(iter(self._abandoned))]
        params: JSONObject = {"requestId": request_id}
        if reason:
            params["reason"] = reason
        if meta:
            params["_meta"] = meta
        return self.send_notification(CANCELLED_METHOD, params)

    def forget_incoming(self, request_id: RequestId) -> None:
        """Drop peer request ``request_id`` without answering (its handler was cancelled: no answer is due)."""
        self._incoming.discard(request_id)

    def is_answering(self, request_id: RequestId) -> bool:
        """Whether peer request ``request_id`` is in flight and still owed an answer."""
        return request_id in self._incoming

    @property
    def awaiting(self) -> int:
        """How many of our requests await an answer."""
        return len(self._outgoing)

    @property
    def answering(self) -> int:
        """How many peer requests are in flight here."""
        return len(self._incoming)


def _invalid(reply_id: RequestId | None, code: int, message: str) -> InvalidMessage:
    return InvalidMessage(RemoteProtocolError(message), error_reply(reply_id, code, message))


def _parse_error(error: object) -> JSONRPCError:
    if isinstance(error, dict):
        code = error.get("code")
        message = error.get("message")
        if type(code) is int and isinstance(message, str):
            return JSONRPCError(code, message, error.get("data"))
    return JSONRPCError(INTERNAL_ERROR, "peer sent a malformed error object", cast(JSONValue, error))
