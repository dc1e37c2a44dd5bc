"""The client's request layer: every request to the server goes through :meth:`Requests.request`.

It stamps the 2026-07-28 per-request ``_meta``, waits under ``request_timeout`` (a quiet clock, not a deadline: see
:mod:`elicitor.client._quiet`; on expiry the server is sent ``notifications/cancelled``), and when the server has
forgotten our HTTP session (404 for our ``Mcp-Session-Id``, reported as :data:`~._transport.SESSION_EXPIRED`)
initializes a new session and retries once, as 2025-11-25 basic/transports "Session Management" requires. A request
that was under way when its session ended (:data:`~._transport.SESSION_LOST`: the server may have acted on it) is
sent again only if that is safe: anything but ``tools/call``, or a ``tools/call`` to a server that keeps calls under
their idempotency key (``dev.elicitor/idempotentCalls``); otherwise the caller gets :class:`OutcomeUnknown`. Several
requests failing together renew the session once.
Listing (``tools/list`` and the others) follows ``nextCursor`` to the last page (basic/utilities/pagination).
"""

from __future__ import annotations

import logging
import secrets

import anyio

from .._exceptions import JSONRPCError, OutcomeUnknown, RemoteProtocolError
from .._sentences import SESSION_ENDED
from ..session import Session
from ..types import IDEMPOTENT_CALLS, META_IDEMPOTENCY_KEY, JSONObject
from ._era import Era
from ._pace import Pace
from ._quiet import QuietClock
from ._transport import SESSION_EXPIRED, SESSION_LOST, UNANSWERED

logger = logging.getLogger("elicitor.client")


def keyed(params: JSONObject) -> JSONObject:
    """A handshake-era ``tools/call``'s ``params`` with an idempotency key in ``_meta`` (a new one unless it has one):
    the key names the call, so whatever sends it again (a lost session, a -32042 retry) sends the same one."""
    meta = params.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta.setdefault(META_IDEMPOTENCY_KEY, secrets.token_urlsafe(18))
    return {**params, "_meta": meta}


class Requests:
    """Sends requests on one connection (:attr:`session`, set once connected)."""

    __slots__ = ("_era", "_generation", "_handshake_timeout", "_pace", "_renewing", "quiet", "session")

    def __init__(self, era: Era, *, request_timeout: float | None, handshake_timeout: float | None, pace: Pace) -> None:
        self._era = era
        self._pace = pace
        self._handshake_timeout = handshake_timeout
        self.quiet = QuietClock(request_timeout) if request_timeout is not None else None
        """The request clock (``None``: requests wait as long as the connection lasts)."""
        self.session: Session | None = None
        self._renewing = anyio.Lock()
        self._generation = 0
        """How many times the HTTP session was renewed: a request that failed on an older one need not renew it."""

    def require(self) -> Session:
        """The connection's session; ``RuntimeError`` before the client is entered."""
        if self.session is None:
            raise RuntimeError("the Client is not connected: use `async with Client(...) as client`")
        return self.session

    async def request(self, method: str, params: JSONObject | None = None) -> JSONObject:
        """Send any request and return its raw result (see :meth:`Client.request`)."""
        params = dict(params or {})
        if self._era.stateless:
            params = self._era.stamp(params)
        elif method == "tools/call":
            params = keyed(params)
        generation = self._generation
        try:
            return await self._send(method, params or None)
        except JSONRPCError as exc:
            if exc.data == UNANSWERED and method == "tools/call" and self._keeps_calls():
                # A balancer answered 502/504 for the replica running the call (it died, or stalled, with the call
                # under way). Kept under its key, the call is safe to send again: it goes on where it was, on this
                # session if it lives, else (404) on a new one, below.
                logger.info("the balancer answered for the server while the call ran; sending it again")
                try:
                    return await self._send(method, params)
                except JSONRPCError as again:
                    exc = again
            if exc.data not in (SESSION_EXPIRED, SESSION_LOST) or self._era.protocol_version is None:
                raise exc
            lost = exc.data == SESSION_LOST
        # The server forgot our session (HTTP 404): start a new one, as the spec requires, and retry once.
        await self._renew(generation)
        if lost and method == "tools/call" and not self._keeps_calls():
            raise OutcomeUnknown(method, str(SESSION_ENDED))
        return await self._send(method, params or None)

    async def _renew(self, generation: int) -> None:
        """Initialize a new session, unless another request already did since ``generation``."""
        async with self._renewing:
            if self._generation != generation:
                return
            logger.info("the server ended the session; initializing a new one")
            with self._pace.deadline(self._handshake_timeout, quiet=True) as deadline:  # a person's time not counted
                await self._era.initialize(self.require(), self._era.protocol_version or "")
            if deadline.cancelled_caught:
                raise TimeoutError(f"the server did not complete a new handshake in {self._handshake_timeout:g} s")
            self._generation += 1

    def _keeps_calls(self) -> bool:
        """Whether the server keeps calls under their idempotency key (then sending one again is safe)."""
        experimental = self._era.server_capabilities.get("experimental")
        return isinstance(experimental, dict) and isinstance(experimental.get(IDEMPOTENT_CALLS), dict)

    async def _send(self, method: str, params: JSONObject | None) -> JSONObject:
        """One request under ``request_timeout``."""
        session = self.require()
        quiet = self.quiet
        if quiet is None:
            return await session.request(method, params)
        with quiet.request():
            return await session.request(method, params)  # cancelled: the server is told (notifications/cancelled)
        raise TimeoutError(f"the server sent nothing for {quiet.timeout:g} s while {method} waited")

    async def list_all(self, method: str, key: str, left_out: list[str] | None = None) -> list[JSONObject]:
        """Every item of a paginated list (``tools/list``...): the objects under ``key`` of every page.

        An entry that is not an object is left out, and a ``nextCursor`` that is not a string or was already
        followed ends the listing, each with a warning (also appended to ``left_out``, when given, so a caller
        can tell a person the list is incomplete); what was listed so far is kept.
        """
        said = left_out.append if left_out is not None else lambda problem: None
        items: list[JSONObject] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            result = await self.request(method, {"cursor": cursor} if cursor else {})
            page = result.get(key)
            if page is None:  # absent, or null (a Go server's empty slice)
                page = []
            if not isinstance(page, list):
                raise RemoteProtocolError(f"the server sent an invalid {method} result: {key} is not a list")
            for item in page:
                if isinstance(item, dict):
                    items.append(item)
                else:
                    problem = f"leaving out a {method} entry that is a {type(item).__name__}, not an object"
                    logger.warning("%s", problem)
                    said(problem)
            next_cursor = result.get("nextCursor")
            if next_cursor is None or next_cursor == "":
                return items
            if not isinstance(next_cursor, str):
                problem = f"{method}: nextCursor is a {type(next_cursor).__name__}, not a string: listing ends here"
                logger.warning("%s", problem)
                said(problem)
                return items
            if next_cursor in seen:  # a server that hands out the same cursor again would be listed forever
                problem = f"{method}: nextCursor {next_cursor[:80]!r} was already followed: listing ends here"
                logger.warning("%s", problem)
                said(problem)
                return items
            seen.add(next_cursor)
            cursor = next_cursor
