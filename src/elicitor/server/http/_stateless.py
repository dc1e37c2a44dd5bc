"""2026-07-28 over Streamable HTTP: one POST, one request, no session.

Spec: https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http — each request is
validated against its mirrored headers (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``:
-32020 with HTTP 400, SEP-2243), served from its own ``_meta``, and answered with JSON, or with SSE once it emits a
notification. Closing the response stream cancels the request. Nothing here is kept between requests, which is
why any replica serves any round: what a multi-round-trip call needs travels in its sealed ``requestState``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING

import anyio

from ..._exceptions import JSONRPCError
from ...protocol import Connection, RequestReceived
from ...session import internal_error
from ...telemetry import _state as _telemetry
from ...transports._sse import encode_event
from ...types import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    META_PROTOCOL_VERSION,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    JSONObject,
)
from ._asgi import SSE_HEADERS, Headers, Receive, Send, respond_json, until_disconnect

if TYPE_CHECKING:
    from .._dispatch import ServerSession
    from .._server import Server

logger = logging.getLogger("elicitor.http")

NAMED_METHODS = {
    "tools/call": "name", "prompts/get": "name", "resources/read": "uri",
    "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",  # ext-tasks "Routing Headers"
}  # fmt: skip
"""Methods whose ``Mcp-Name`` header mirrors a field of the params."""
BAD_REQUEST_CODES = {
    PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
}  # fmt: skip
"""JSON-RPC errors that say the request itself was wrong: HTTP 400."""


class StatelessExchange:
    """One 2026-07-28 POST: serve the request, stream its notifications if any, stop when the client leaves."""

    def __init__(
        self,
        session: ServerSession,
        connection: Connection,
        request: RequestReceived,
        receive: Receive,
        send: Send,
        principal: str | None,
        listens: set[anyio.CancelScope] | None = None,
    ) -> None:
        self._listens = listens
        """Where a ``subscriptions/listen`` puts its scope: a replica shutting down ends its listens (see
        :meth:`HttpApp.drain`)."""
        self._session = session
        self._principal = principal
        self._connection = connection
        self._request = request
        self._receive = receive
        self._send = send
        self._streaming = False

    async def notify(self, method: str, params: JSONObject) -> None:
        if _telemetry.state.on:  # a CLIENT span, its context in params._meta (as a session's notifications)
            from ...telemetry import _hooks

            await _hooks.send_notification(functools.partial(self._stream, method), method, params, "http")
            return
        await self._stream(method, params)

    async def _stream(self, method: str, params: JSONObject | None) -> None:
        """Put a notification on the response stream (starting it)."""
        data = self._connection.send_notification(method, params)
        if not self._streaming:
            self._streaming = True
            await self._send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await self._send({"type": "http.response.body", "body": encode_event(data), "more_body": True})

    async def comment(self, text: str) -> None:
        """An SSE comment on the response stream (starting it): parsers ignore it, read timeouts start again."""
        if not self._streaming:
            self._streaming = True
            await self._send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        line = b": " + " ".join(text.splitlines()).encode() + b"\n\n"
        await self._send({"type": "http.response.body", "body": line, "more_body": True})

    def _serve(self, request: RequestReceived) -> Awaitable[JSONObject]:
        return self._session.serve_stateless(request, self.notify, self._principal, keepalive=self.comment)

    async def run(self) -> None:
        request = self._request
        reply: bytes | None = None
        status = 200
        listens = self._listens if request.method == "subscriptions/listen" else None
        ended = anyio.CancelScope()
        if listens is not None:
            listens.add(ended)
        try:
            with ended:
                reply, status = await self._run(request)
        finally:
            if listens is not None:
                listens.discard(ended)
        if ended.cancelled_caught:  # the replica shuts down: the stream ends without the graceful close, so the
            if self._streaming:  # client knows to listen again (elsewhere) and refetch what it depends on
                await self._send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        if reply is None:
            return
        if self._streaming:
            await self._send({"type": "http.response.body", "body": encode_event(reply), "more_body": False})
        else:
            await respond_json(self._send, status, reply)

    async def _run(self, request: RequestReceived) -> tuple[bytes | None, int]:
        reply: bytes | None = None
        status = 200
        async with until_disconnect(self._receive):  # closing the response stream cancels the request (2026-07-28)
            try:
                if _telemetry.state.on:  # a SERVER span, parented by the context in params._meta
                    from ...telemetry import _hooks, _peer

                    result = await _hooks.serve_request(self._serve, request, request.method, request.params,
                                                        request.id, "http", peer=_peer.current())  # fmt: skip
                else:
                    result = await self._session.serve_stateless(
                        request, self.notify, self._principal, keepalive=self.comment
                    )
            except JSONRPCError as exc:
                reply = self._connection.send_error(request.id, exc)
                status = 404 if exc.code == METHOD_NOT_FOUND else 400 if exc.code in BAD_REQUEST_CODES else 200
            except Exception as exc:
                reply = self._connection.send_error(request.id, internal_error(exc, f"handler for {request.method}"))
            else:
                reply = self._connection.send_result(request.id, result)
        return reply, status


def check_headers(headers: Headers, request: RequestReceived, server: Server) -> str | None:
    """What is wrong with a 2026-07-28 request's mirrored headers, if anything (SEP-2243)."""
    params = request.params or {}
    meta = params.get("_meta")
    body_version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    version = headers.get("mcp-protocol-version")
    if version is None:
        return "the MCP-Protocol-Version header is required"
    if body_version is not None and version != body_version:
        return f"MCP-Protocol-Version {version!r} does not match _meta protocolVersion {body_version!r}"
    method = headers.get("mcp-method")
    if method is None:
        return "the Mcp-Method header is required"
    if method != request.method:
        return f"Mcp-Method {method!r} does not match the body's method {request.method!r}"
    field = NAMED_METHODS.get(request.method)
    if field is not None:
        name = headers.get("mcp-name")
        if name is None:
            return f"the Mcp-Name header is required for {request.method}"
        decoded = _decode_header(name)
        if decoded is None:
            return "Mcp-Name is not a valid header value"
        if decoded != params.get(field):
            return f"Mcp-Name {decoded!r} does not match the body's {field} {params.get(field)!r}"
    if request.method == "tools/call":
        mirrored = server.mirrored_headers(str(params.get("name")))
        arguments = params.get("arguments")
        if mirrored is not None and isinstance(arguments, dict):
            return _check_param_headers(headers, mirrored, arguments)
    return None


def _check_param_headers(headers: Headers, mirrored: dict[str, str], arguments: JSONObject) -> str | None:
    """Each argument mirrored into ``Mcp-Param-{name}`` must be there, decodable, and equal to the body's."""
    for parameter, name in mirrored.items():
        value = arguments.get(parameter)
        header = headers.get(f"mcp-param-{name.lower()}")
        if value is None:
            continue  # absent or null in the body: the client omits the header, and nothing is expected
        if header is None:
            return f"the Mcp-Param-{name} header is required: {parameter!r} is in the body"
        decoded = _decode_header(header)
        if decoded is None:
            return f"Mcp-Param-{name} is not a valid header value"
        if isinstance(value, bool):
            expected = "true" if value else "false"
        elif isinstance(value, int):
            try:
                same = float(decoded) == value
            except ValueError:
                same = False
            if not same:
                return f"Mcp-Param-{name} {decoded!r} does not match the body's {parameter} {value!r}"
            continue
        else:
            expected = str(value)
        if decoded != expected:
            return f"Mcp-Param-{name} {decoded!r} does not match the body's {parameter} {value!r}"
    return None


def _decode_header(value: str) -> str | None:
    """A mirrored header value, Base64 sentinel (``=?base64?...?=``) decoded; ``None`` if malformed."""
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
    if any(not (0x20 <= ord(c) <= 0x7E or c == "\t") for c in value):
        return None
    return value
