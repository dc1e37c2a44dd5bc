"""URL-mode elicitation on the server: out-of-band interactions, their ids, and their completion.

Spec: https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#url-mode-elicitation-requests —
the server sends a URL the person opens in a browser; nothing but the URL passes through the client (credentials,
payments, third-party OAuth). The server MUST bind each elicitation to the client and user that started it and
verify that the person who completes it is that user; ``notifications/elicitation/complete`` goes to the initiating
client only; a tool that cannot go on without it returns error -32042 listing what to open. 2026-07-28 keeps URL
mode inside multi-round-trip rounds and drops the ids, the notification and -32042.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import msgspec

from .._exceptions import ElicitorError
from ..state import Backoff, Store, StoreUnavailable, UrlRecord, replica_channel
from ..telemetry import _state as _telemetry
from ._hold import StoreHold

logger = logging.getLogger("elicitor.server")

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]


class UrlComplete(msgspec.Struct, tag="url-complete", frozen=True, omit_defaults=True):
    """On the bus to the replica holding ``connection``: tell it that elicitation ``elicitation`` is done."""

    connection: str
    elicitation: str
    trace: str | None = None
    """The ``traceparent`` of the completion (its ``elicitation complete`` span), so that the notice the holding
    replica sends is in the call's trace too; replicas without it ignore it, and without it the notice is sent
    as before."""


_encode_notice = msgspec.msgpack.Encoder().encode

ID_PLACEHOLDER = "{elicitation_id}"
"""Write this in a URL to have the elicitation's id put there (the page can then tell which one it completes)."""

REGISTER_PATIENCE = 15.0
"""Seconds registering a URL-mode elicitation waits for a store that cannot be reached (a restart, a failover, a
pause: ``docs/deploying.md`` promises up to 10 s) before the call fails with the retryable error."""
REGISTER_RETRY = 0.5
"""Seconds between two tries at registering it."""
COMPLETE_PATIENCE = 15.0
"""Seconds a completion (``Server.complete_url_elicitation``, from the page the person finished on) waits for a
store that cannot be reached before it raises: the person has done their part, and failing at once would make them
do it again for a Redis restart of two seconds."""

LOCAL_HOSTNAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class UnsafeUrl(ElicitorError, ValueError):
    """A URL a server must not send: not absolute http(s), credentials in it, or plain http off loopback."""


def check_url(url: str, *, allow_http: bool = False) -> None:
    """Refuse URLs the spec's safe-URL rules forbid a server to send.

    Raises:
        UnsafeUrl: not an absolute ``http``/``https`` URL; userinfo present; ``http`` to a non-loopback host
            (unless ``allow_http``: development only).
    """
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise UnsafeUrl(f"not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeUrl(f"URL-mode elicitation needs an absolute http(s) URL, not {url!r}")
    if parts.username is not None or parts.password is not None:
        raise UnsafeUrl("a URL must not carry credentials (user:password@): they would pass through the client")
    if parts.scheme == "http" and parts.hostname not in LOCAL_HOSTNAMES and not allow_http:
        raise UnsafeUrl(f"use https for {parts.hostname} (plain http is only for loopback, or allow_http=True)")


@dataclass(frozen=True, slots=True)
class UrlElicitation:
    """One out-of-band interaction: what the person is asked to open, who asked for it, and whether it is done.

    A snapshot: ``completed`` is as of when it was read (``ctx.url_elicitation`` reads it afresh each call).
    """

    id: str
    message: str
    url: str
    principal: str | None
    completed: bool = False

    @classmethod
    def from_record(cls, record: UrlRecord) -> UrlElicitation:
        return cls(record.id, record.message, record.url, record.principal, record.completed)

    def to_wire(self) -> dict[str, Any]:
        """``ElicitRequestURLParams`` (2025-11-25), as in ``elicitation/create`` and the -32042 error's data."""
        return {"mode": "url", "message": self.message, "url": self.url, "elicitationId": self.id}


def _moves(known: UrlRecord, asking: UrlRecord) -> bool:
    """Whether ``asking`` (a connection asking again for the elicitation ``known``, by its id) takes it over: an
    open one of another connection of the same user, on the handshake era (where completions are notified)."""
    return (
        not known.completed
        and known.connection is not None
        and asking.connection is not None
        and asking.replica is not None
        and known.connection != asking.connection
        and known.principal == asking.principal
    )


class UrlElicitationRequired(ElicitorError):
    """Raise in a tool that cannot go on until the person completes one or more URL-mode elicitations.

    On 2025-11-25 the call ends with error -32042 listing them; the client has the person open them and calls
    again. On 2026-07-28 the same code turns into URL input requests; when the person says they are done, the tool
    runs again (so it should check, first thing, whether what it waits for has happened).
    """

    def __init__(self, elicitations: UrlElicitation | Sequence[UrlElicitation], message: str | None = None) -> None:
        self.elicitations = [elicitations] if isinstance(elicitations, UrlElicitation) else list(elicitations)
        super().__init__(message or "This request requires more information.")


class UrlElicitations:
    """The server's URL elicitations: records in the shared state, completion notices to wherever the asker is.

    ``complete`` is how code outside the tool (the HTTP route a third party calls back) says one is done; it tells
    the initiating client, and only it, once — on whichever replica that client's connection lives (the notice
    travels on the bus to that replica). Asking the same question again on the same connection returns the same
    elicitation (open or completed), so a tool can check ``completed`` instead of minting new links.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._connections: dict[str, Notify] = {}
        self._leaving = False
        self.hold = StoreHold()
        """The completions waiting for a store away for a moment (at most ``hold.max_waiting`` at once: each keeps
        the page request that made it; past that one raises at once)."""

    def attach(self, connection: str, notify: Notify) -> None:
        """Route completion notices for ``connection`` (a handshake-era connection on this replica) to ``notify``."""
        self._connections[connection] = notify

    def leave(self, leaving: bool = True) -> None:
        """This replica is shutting down: the connections it closes from now on keep what they started (``False``:
        it serves again, as it did before).

        Their clients' calls go on on another replica (a call kept under its idempotency key finds the pages it
        asked for in its record), and a person may be finishing one of those pages right now: deleting it would
        answer them "unknown" and show them another. With a shared store the records expire with their TTL."""
        self._leaving = leaving and self._store.shared

    async def detach(self, connection: str) -> int:
        """The connection closed: drop what it started (nobody is left to notify); returns how many (0 when this
        replica is shutting down: see :meth:`leave`)."""
        self._connections.pop(connection, None)
        if self._leaving:
            return 0
        try:
            return await self._store.urls.forget_connection(connection)
        except StoreUnavailable:
            return 0  # they expire with their TTL

    async def new(
        self,
        message: str,
        url: str,
        *,
        principal: str | None,
        connection: str | None = None,
        question: str | None = None,
        allow_http: bool = False,
        elicitation_id: str | None = None,
    ) -> UrlElicitation:
        """Register an elicitation with a fresh unguessable id (``{elicitation_id}`` in ``url`` is replaced by it).

        Passing the ``elicitation_id`` of a known elicitation returns that one (a 2026-07-28 round replaying, a kept
        call's retry on a new connection), and so does a ``question`` that ``connection`` already asked (first:
        a client that sends each -32042 retry as a new call gets the page it was shown, not a new id each time).

        A store that cannot be reached is waited for, up to :data:`REGISTER_PATIENCE`: the call that asks has just
        begun, and failing it would fail the person's call for a Redis restart of two seconds (a ``tools/call`` is
        never sent again). A try after one that failed so registers nothing twice: it first looks for what the
        earlier try may have stored (by ``question`` for ``connection``, then by the id, chosen once).

        Raises:
            UnsafeUrl: the URL breaks the safe-URL rules.
            StoreUnavailable: the shared state could not be reached within :data:`REGISTER_PATIENCE`.
        """
        indexed = connection is not None and question is not None
        look_up = elicitation_id is not None
        elicitation_id = elicitation_id or secrets.token_urlsafe(24)
        url = url.replace(ID_PLACEHOLDER, elicitation_id)
        check_url(url, allow_http=allow_http)
        replica = self._store.replica if connection is not None else None
        trace = None
        if _telemetry.state.on:  # the span asking it (the tool's): its completion, wherever it happens, joins it
            from ..telemetry import _hooks

            trace = _hooks.current_traceparent()
        record = UrlRecord(elicitation_id, message, url, principal, replica, connection, trace=trace)
        give_up_at = anyio.current_time() + REGISTER_PATIENCE
        while True:
            try:
                return await self._register(record, question if indexed else None, look_up=look_up)
            except StoreUnavailable:
                if anyio.current_time() + REGISTER_RETRY >= give_up_at:
                    raise
                look_up = True  # the try that failed may have stored it all the same
                await anyio.sleep(REGISTER_RETRY)

    async def _register(self, record: UrlRecord, question: str | None, *, look_up: bool) -> UrlElicitation:
        """One try of :meth:`new`: the elicitation already registered for ``question`` (or, with ``look_up``, under
        ``record``'s id), else ``record`` stored."""
        urls = self._store.urls
        known = None
        if question is not None and record.connection is not None:
            known = await urls.find(record.connection, question)
        if known is None and look_up:
            known = await urls.get(record.id)
            if known is not None and _moves(known, record):
                # A kept call's retry on a new session (its replica gone) waits here for the page it was shown:
                # its completion notice must come here, not to the connection that asked first.
                assert known.connection is not None and record.replica is not None and record.connection is not None
                known = await urls.move(record.id, known.connection, record.replica, record.connection, question)
        if known is not None:
            return UrlElicitation.from_record(known)
        return UrlElicitation.from_record(await urls.add(record, question))

    async def get(self, elicitation_id: str) -> UrlElicitation | None:
        """The elicitation as it stands now, or ``None`` if unknown or expired."""
        record = await self._store.urls.get(elicitation_id)
        return UrlElicitation.from_record(record) if record is not None else None

    async def complete(self, elicitation_id: str, *, principal: str | None = None) -> bool:
        """Mark an elicitation done, once, and notify the client that started it.

        Returns ``False`` — and does nothing — for an unknown, expired or already completed id, or when the
        elicitation belongs to another user than ``principal`` (a forged or phished completion). Once the
        completion counted, this returns ``True`` whatever becomes of the notice: it is put in the queue of the
        replica holding the connection (durable: read however late that replica reads), retried for a while if
        the store is away; a notice that still cannot be sent is logged, and the client learns of the completion
        when it asks again (the elicitation reads completed).

        A store that cannot be reached is waited for, tried every half second up to :data:`COMPLETE_PATIENCE`
        (within ``hold``'s bound on completions waiting at once): a completion made meanwhile is not lost. Every
        try names the same attempt, so a try after one whose answer was lost (Redis ran it, the reply timed out)
        finds its own completion and returns ``True``, telling the client once; a second completion of the same
        elicitation (the page loaded twice) still returns ``False``.

        Raises:
            StoreUnavailable: the shared state could not be reached within :data:`COMPLETE_PATIENCE`, or too many
                completions wait for it already; completing it again once the store is back counts (unless the
                last try reached the store after all: then the elicitation reads completed, and the client learns
                so when it asks again).
        """
        if _telemetry.state.on:  # a span saying what became of it, in the trace of the call that asked for it
            from ..telemetry import _hooks

            with _hooks.completing_url() as completing:

                def completed(record: UrlRecord) -> None:  # before the client is told: its notice is under the span
                    local = record.replica == self._store.replica
                    completing.settle(record.trace, "none" if record.connection is None else "connection" if local
                                      else "replica")  # fmt: skip

                record = await self._complete(elicitation_id, principal, completed, completing.refuse)
            return record is not None
        return await self._complete(elicitation_id, principal) is not None

    async def _complete(
        self,
        elicitation_id: str,
        principal: str | None,
        completed: Callable[[UrlRecord], None] | None = None,
        refused: Callable[[], None] | None = None,
    ) -> UrlRecord | None:
        """Complete it (see :meth:`complete`). Telemetry: ``completed`` is told the record before the client is, and
        ``refused`` is told a refusal before it is logged (the log line names the span that records it)."""
        attempt = secrets.token_hex(8)
        try:
            record = await self.hold.patiently(
                lambda: self._store.urls.complete(elicitation_id, principal, attempt),
                anyio.current_time() + COMPLETE_PATIENCE,
            )
        except StoreUnavailable:
            if refused is not None:
                refused()
            logger.warning("URL elicitation %.8s... not completed: the shared state is unavailable", elicitation_id)
            raise
        if record is None:
            if refused is not None:
                refused()
            await self._explain_refusal(elicitation_id, principal)
            return None
        if completed is not None:
            completed(record)
        await self._tell(record)
        return record

    async def _tell(self, record: UrlRecord) -> None:
        """Tell the client that started ``record`` that it is completed, on its connection here or through the
        replica holding it; never raises (a notice that cannot be sent is logged)."""
        if record.connection is None:
            return
        try:
            if record.replica == self._store.replica:
                await self.notify_local(record.connection, record.id)
            elif record.replica is not None:
                traced = None
                if _telemetry.state.on:
                    from ..telemetry import _hooks

                    traced = _hooks.current_traceparent()
                await self._send_notice(record.replica, UrlComplete(record.connection, record.id, traced))
        except Exception:
            logger.exception("URL elicitation %.8s... completed, but its client could not be told", record.id)

    async def _send_notice(self, replica: str, notice: UrlComplete) -> None:
        backoff = Backoff(first=0.1, most=1.0)
        with anyio.fail_after(10):
            while True:
                try:
                    await self._store.bus.append(replica_channel(replica), _encode_notice(notice))
                    return
                except StoreUnavailable:
                    await backoff.pause()

    async def _explain_refusal(self, elicitation_id: str, principal: str | None) -> None:
        """Log why a completion was refused (never silently: the client would only see the question again)."""
        shown = f"{elicitation_id[:8]}..."
        try:
            record = await self._store.urls.get(elicitation_id)
        except StoreUnavailable:
            logger.warning("URL elicitation %s not completed (the store cannot be read to say why)", shown)
            return
        if record is None:
            logger.warning("URL elicitation %s not completed: unknown or expired", shown)
        elif record.completed:
            if record.principal is None or record.principal == principal:
                # Its user's page, again: tell the client again. A completion whose write reached the store after
                # its page was told the store was away (its reply lost) counted, and nobody told the client; the
                # person reloading the page is then its only chance. A client ignores a notice for an elicitation
                # it already knows completed (2025-11-25 client/elicitation), so a page loaded twice costs one
                # notice more.
                logger.info("URL elicitation %s not completed again: it already was (its client is told again)", shown)
                await self._tell(record)
            else:
                logger.info("URL elicitation %s not completed again: it already was", shown)
        elif principal is None:
            logger.warning(
                "URL elicitation %s not completed: it belongs to a signed-in user, and the completion named none "
                "(call complete_url_elicitation(id, principal=...) with the user signed in on that page)",
                shown,
            )
        else:
            # Not who tried: a user's name is theirs to keep out of the log (docs/observability.md).
            logger.warning(
                "URL elicitation %s not completed: it belongs to another user than the one completing it", shown
            )

    async def notify_local(self, connection: str, elicitation_id: str) -> None:
        """Send ``notifications/elicitation/complete`` on a connection of this replica, if it is still open."""
        notify = self._connections.get(connection)
        if notify is not None:
            await notify("notifications/elicitation/complete", {"elicitationId": elicitation_id})
