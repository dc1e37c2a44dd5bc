"""The HTTP+SSE transport of revision 2024-11-05, which many servers still run: the client's side of it.

The client GETs the server's URL and keeps the event stream it answers with open for the whole connection. The
stream's first event, ``endpoint``, names the URL to POST every message to; each POST is acknowledged at once
(202) and whatever the server sends, answers and its own requests alike, comes as a ``message`` event on the one
stream. Nothing resumes that stream: once it ends, no answer can come, so the requests under way fail at once and
the connection ends.

The client finds such a server the way the spec says (2025-11-25 and 2026-07-28, transports, "Backwards
Compatibility"): its first POST is refused with 400, 404 or 405 and a body that is not a JSON-RPC error (a server
of today says why it refuses a request with one), and a GET then opens a stream whose first event is ``endpoint``
(:func:`falls_back`). ``HttpClientTransport`` decides when; this module speaks the old transport.

Two things are checked that the old transport never said: the ``endpoint`` URL must be of the server's own origin
(:func:`message_url`), since every POST carries the client's headers (its ``Authorization`` among them) and a
stream must not send them to another host; and the stream is read with the same limit on a message's size as
every other SSE stream the client reads.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing

import anyio
import anyio.abc
import httpx2 as httpx
import msgspec

from .._exceptions import AuthError, LegacyRefused
from ..protocol import decode_json
from ..telemetry import _state as _telemetry
from ..transports._sse import SSEDecoder
from ..types import JSONValue, RequestId
from . import _local as local
from ._endpoint import Endpoint, Response
from ._local import said
from ._pace import Pace
from ._transport import SIGN_IN_FAILED

logger = logging.getLogger("elicitor.http_client")

FALLBACK_STATUSES = frozenset({400, 404, 405})
"""What a server of the old transport answers a POST to its stream's URL with (the spec's list)."""

ENDPOINT_WAIT = 30.0
"""Seconds the server has to answer the GET and send its ``endpoint`` event (a person signing in meanwhile, on the
GET's 401, is not counted)."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
_CLOSED_HERE = "the client closed it"


def falls_back(status: int, body: bytes) -> bool:
    """Whether an answer of HTTP ``status`` with ``body`` to the first POST means the server may run the old
    transport: 400, 404 or 405, with a body that is not a JSON-RPC error (a Streamable HTTP server refusing the
    request says why with one: no session yet, a version it does not speak, a header it wanted)."""
    if status not in FALLBACK_STATUSES:
        return False
    try:
        message = decode_json(body) if body else None
    except (msgspec.DecodeError, UnicodeDecodeError):
        return True
    return not (isinstance(message, dict) and "jsonrpc" in message and isinstance(message.get("error"), dict))


def message_url(server: str, endpoint: str) -> str:
    """The URL the ``endpoint`` event names, resolved against the server's URL; it must be of the same origin
    (scheme, host and port): a stream that could point the client's POSTs elsewhere would hand its credentials to
    whoever it names.

    Raises:
        LegacyRefused: an empty or unreadable URL, credentials in it, or another origin.
    """
    text = endpoint.strip()
    if not text or any(c in text for c in "\r\n\0"):
        raise LegacyRefused(f"the server's endpoint event names no usable URL: {endpoint[:200]!r}")
    base = httpx.URL(server)
    try:
        target = base.join(text)
    except (httpx.InvalidURL, ValueError) as exc:
        raise LegacyRefused(f"the server's endpoint event names no usable URL: {text[:200]!r} ({exc})") from None
    if target.userinfo:
        raise LegacyRefused("the server's endpoint event names a URL with credentials in it; refused")
    if _origin(target) != _origin(base):
        raise LegacyRefused(
            f"the server's endpoint event names another origin ({_shown(target)}) than the server's "
            f"({_shown(base)}); refused: the client's messages and credentials go to the server only"
        )
    return str(target.copy_with(fragment=None))


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host.lower(), url.port or _DEFAULT_PORTS.get(url.scheme)


def _shown(url: httpx.URL) -> str:
    port = url.port or _DEFAULT_PORTS.get(url.scheme)
    return f"{url.scheme}://{url.host}:{port}"


class OldTransport:
    """One connection over the 2024-11-05 HTTP+SSE transport: the stream (open it with :meth:`start`) and the
    message URL it named.

    ``put`` hands a message read on the stream to the client; ``fail`` answers a request locally with an error;
    ``ended`` is called once when the stream is over (nothing more can come); ``heard`` is told of bytes that
    carry no message (the server is there); ``pace`` stops the endpoint's wait while a person signs in.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        headers: dict[str, str],
        *,
        put: Callable[[bytes], None],
        fail: Callable[[RequestId, str, JSONValue], None],
        ended: Callable[[], None],
        heard: Callable[[], Callable[[], None] | None],
        max_message: int = 4 << 20,
        pace: Pace | None = None,
    ) -> None:
        self._stream = endpoint
        self._pace = pace if pace is not None else Pace()
        self._headers = headers
        self._put = put
        self._fail = fail
        self._ended = ended
        self._heard = heard
        self._max_message = max_message
        self._messages: Endpoint | None = None
        self.pending: set[RequestId] = set()
        """Requests sent whose answer has not come on the stream yet: they fail when it ends."""
        self.gone: str | None = None
        """Why the stream ended, once it has."""

    async def start(self, tg: anyio.abc.TaskGroup) -> None:
        """GET the stream and wait for its ``endpoint`` event; the stream is then read in ``tg`` until it ends.

        The server has :data:`ENDPOINT_WAIT` seconds for both: with ``transport="sse"`` this runs before the
        client's handshake and its deadline, and a server that takes the connection and then says nothing must not
        hold the client for ever. They are the server's seconds: a GET answered 401 waits for a person to sign in,
        who may take minutes, and the clock stops meanwhile (the sign-in has its own bound).

        Raises:
            LegacyRefused: no event stream, a first event that is not ``endpoint``, or an endpoint of another origin.
            AuthError: signing in failed.
            httpx.HTTPError: the server could not be reached.
        """
        target = None
        with self._pace.deadline(ENDPOINT_WAIT) as wait:
            target = await tg.start(self._read)
        if wait.cancelled_caught or target is None:
            raise LegacyRefused(f"the server's event stream sent no endpoint event in {ENDPOINT_WAIT:g} s")
        self._messages = self._stream.at(target)

    async def _read(self, *, task_status: anyio.abc.TaskStatus[str]) -> None:
        headers = {**self._headers, "accept": "text/event-stream", "cache-control": "no-store"}
        response = await self._stream.open("GET", headers)
        async with aclosing(response):
            decoder = SSEDecoder(self._max_message)
            chunks = response.aiter_raw()
            target = await self._first(response, decoder, chunks)
            task_status.started(target)
            reason = "the server closed it"
            try:
                async for chunk in chunks:
                    events = decoder.feed(chunk)
                    if not events:
                        heard = self._heard()
                        if heard is not None:
                            heard()
                    for event in events:
                        if event.event == "message" and event.data:
                            self._receive(event.data.encode())
                        elif event.event == "endpoint":
                            logger.debug("the server named its message URL again; the first one is kept")
            except ValueError as exc:
                reason = f"it sent {exc}"
            except httpx.HTTPError as exc:
                reason = f"it was cut: {exc}"
            except Exception as exc:  # nothing may escape into the transport's task group
                reason = f"reading it failed: {exc!r}"
            except BaseException:
                self._end(_CLOSED_HERE)
                raise
            self._end(reason)

    async def _first(self, response: Response, decoder: SSEDecoder, chunks: AsyncIterator[bytes]) -> str:
        """Check the GET's answer and read up to the ``endpoint`` event; the message URL it names."""
        kind = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
        if response.status_code != 200 or kind != "text/event-stream":
            raise LegacyRefused(f"a GET of the server's URL answered HTTP {response.status_code} ({kind or 'untyped'})")
        try:
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    raise LegacyRefused("the server's event stream ended before its endpoint event") from None
                events = decoder.feed(chunk)
                if events:
                    break
        except ValueError as exc:
            raise LegacyRefused(f"the server's event stream sent {exc}") from None
        except httpx.HTTPError as exc:
            raise LegacyRefused(f"the server's event stream was cut before its endpoint event: {exc}") from None
        first, *rest = events
        if first.event != "endpoint":
            raise LegacyRefused(f"the server's event stream began with a {first.event[:64]!r} event, not endpoint")
        target = message_url(str(self._stream.url), first.data)
        for event in rest:  # messages in the same chunk as the endpoint event
            if event.event == "message" and event.data:
                self._receive(event.data.encode())
        return target

    def _receive(self, data: bytes) -> None:
        if self.pending:
            try:
                message = decode_json(data)
            except (msgspec.DecodeError, UnicodeDecodeError):
                message = None
            if isinstance(message, dict) and "method" not in message:
                request_id = message.get("id")
                if isinstance(request_id, str | int):
                    self.pending.discard(request_id)
        self._put(data)

    def _end(self, reason: str) -> None:
        if self.gone is not None:
            return
        self.gone = reason
        if reason != _CLOSED_HERE:
            logger.info("the server's event stream (HTTP+SSE) ended: %s", reason)
        for request_id in sorted(self.pending, key=str):
            self._fail(request_id, said(local.OLD_STREAM_ENDED, detail=reason), None)
        self.pending.clear()
        self._ended()

    async def send(self, message: bytes, request_id: RequestId | None) -> None:
        """POST ``message`` to the message URL; the server acknowledges it (202) and answers on the stream.

        A request refused (any other status, the server unreachable, a sign-in that failed) is answered locally
        with an error; a refused answer or notification is logged.
        """
        if self.gone is not None:
            if request_id is not None:
                self._fail(request_id, said(local.OLD_STREAM_GONE, detail=self.gone), None)
            else:
                logger.info("a message was not sent: the server's event stream has ended")
            return
        assert self._messages is not None
        if request_id is not None:
            self.pending.add(request_id)
        headers = {**self._headers, "content-type": "application/json"}
        try:
            response = await self._messages.open("POST", headers, message, brief=True)
            if _telemetry.state.on:  # the CLIENT span says the HTTP version (see telemetry/_hooks/_requests.py)
                from ..telemetry import _hooks

                _hooks.http_responded(response)
            async with aclosing(response):
                body = await response.aread()
        except AuthError as exc:
            self._refused(request_id, said(local.SIGNING_IN_FAILED, detail=exc), SIGN_IN_FAILED)
            return
        except httpx.HTTPError as exc:
            self._refused(request_id, said(local.HTTP_FAILED, detail=exc), None)
            return
        if response.status_code >= 300:
            text = body[:200].decode("utf-8", "replace")
            self._refused(request_id, said(local.REFUSED, status=response.status_code, detail=text), None)

    def _refused(self, request_id: RequestId | None, reason: str, data: JSONValue) -> None:
        if request_id is None:
            logger.warning("a message was not delivered: %s", reason)
            return
        if request_id in self.pending:
            self.pending.discard(request_id)
            self._fail(request_id, reason, data)
