"""Handshake-era calls that survive their replica: a ``tools/call`` kept in the shared store under its idempotency key.

On 2026-07-28 a call whose replica died goes on elsewhere from its sealed ``requestState``. On 2025-06-18 and
2025-11-25 the call lives in the replica's session: when the replica dies, the client opens a new session and may
send the call again. Unless the server remembers it, the person is asked again what they already answered, and a
side effect done before the death is done twice. So, with a shared store, a ``tools/call`` that carries an
idempotency key (``_meta["dev.elicitor/idempotencyKey"]``, elicitor's client sends one with every handshake-era
call and the same one when it sends the call again) is kept as a record (the task registry's, with a kind of its
own): the answers given so far, the ``ctx.once`` steps, and once it ends its result. The record's id is a digest of
the principal, the key, the tool and its arguments, so only the same user's retry of the same call finds it.

A retry claims the record (raising its epoch, :mod:`._journal`): its questions already answered return at once
from the record, its ``ctx.once`` steps already done are not done again, a call that had finished returns its
result without running. The first attempt, if its replica only stalled, can no longer write: its next answer or step
cancels it. The server declares this with the ``dev.elicitor/idempotentCalls`` experimental capability; a client
sends a call again after a lost session only to such a server (otherwise it reports the outcome as unknown).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from contextlib import suppress
from typing import TYPE_CHECKING

import anyio
import msgspec

from .._exceptions import JSONRPCError
from ..session import Session
from ..state import StoreUnavailable, TaskRecord, TaskRegistry
from ..types import INTERNAL_ERROR, META_IDEMPOTENCY_KEY, JSONObject, JSONValue, RequestId
from ._askers import PushAsker
from ._journal import Apply, Claim, OnceSteps, act, change, patient
from ._rounds import AnswerBook

if TYPE_CHECKING:
    from ._server import Server

logger = logging.getLogger("elicitor.server")

CALL_TTL = 3600.0
"""Seconds a kept call's record lasts from its first attempt (a retry comes within seconds of a replica's death)."""
KEEP_PATIENCE = 15.0
"""Seconds a kept call waits for a store that cannot be reached before it runs unkept (``docs/deploying.md``
promises to ride out a Redis restart, failover or pause of up to 10 s)."""
KEEP_RETRY = 0.5
"""Seconds between two tries at keeping it."""
KIND = "call"
"""``TaskRecord.call["kind"]`` of a kept call (never a task: ``tasks/*`` do not find it)."""
_canonical = msgspec.json.Encoder(order="sorted").encode


def call_key(params: JSONObject) -> str | None:
    """The idempotency key a ``tools/call`` carries, if a usable one (a string of 16 to 128 characters)."""
    meta = params.get("_meta")
    key = meta.get(META_IDEMPOTENCY_KEY) if isinstance(meta, dict) else None
    return key if isinstance(key, str) and 16 <= len(key) <= 128 else None


class KeptCall:
    """One attempt of a kept call: its claim on the record, the answers known when it started."""

    __slots__ = ("_last", "_registry", "answers", "claim", "result")

    def __init__(self, registry: TaskRegistry, claim: Claim, record: TaskRecord) -> None:
        self._registry = registry
        self.claim = claim
        self.answers = AnswerBook.unpack(record.answers.get("a"))
        """Every answer this attempt knows: the record's as it claimed it, and each one given since."""
        self.result: JSONObject | None = dict(record.result) if record.status == "completed" and record.result else None
        """The call's result, if an earlier attempt finished it."""
        self._last = record
        """The record as this attempt last stored or read it: its next write is tried on it first (a question's
        answer costs one round trip, not a read and a write), and checked against the stored version."""

    async def write(self, record_id: str, apply: Apply) -> TaskRecord | None:
        stored = await change(self._registry, record_id, apply)
        if stored is not None:
            self._last = stored
        return stored

    async def _write_from_last(self, record_id: str, apply: Apply) -> TaskRecord | None:
        stored = await change(self._registry, record_id, apply, known=self._last)
        if stored is not None:
            self._last = stored
        return stored

    async def _act(self, apply: Apply) -> TaskRecord | None:
        return await act(patient(self._write_from_last), self.claim, apply)

    def asker(self, session: Session, related: RequestId, timeout: float | None) -> PushAsker:
        """The attempt's asker: answers known return at once, new ones are recorded; ``ctx.once`` is journaled."""
        asker = _KeptAsker(session, related, timeout)
        asker.kept = self
        asker.journal = OnceSteps(self.write, self.claim)
        return asker

    async def remember(self, key: str, answer: JSONObject) -> None:
        """Record the person's answer to question ``key`` (fenced: a superseded attempt is cancelled instead)."""
        self.answers.add(key, answer)

        def apply(current: TaskRecord) -> TaskRecord | None:
            if current is self._last:  # the record as this attempt stored it: its answers are all in self.answers
                book_now = self.answers.pack()  # copied: the stored record must not change with the book
                packed = {"v": list(book_now["v"]), "k": {base: list(runs) for base, runs in book_now["k"].items()}}
            else:  # written by someone else since: merge into what is stored
                book = AnswerBook.unpack(current.answers.get("a"))
                if book.get(key) is not None:
                    return None
                book.add(key, answer)
                packed = book.pack()
            return dataclasses.replace(current, answers={**current.answers, "a": packed}, updated=time.time())

        with suppress(StoreUnavailable):  # the call goes on; a retry after a loss now would ask this again
            await self._act(apply)

    async def finish(self, result: JSONObject) -> None:
        """Record the result, so a retry of a call that finished returns it without running."""

        def apply(current: TaskRecord) -> TaskRecord | None:
            if current.terminal:
                return None
            return dataclasses.replace(current, status="completed", result=result, updated=time.time(), owner=None)

        with suppress(StoreUnavailable):  # a retry would run the call again (its steps kept)
            await self._act(apply)


class _KeptAsker(PushAsker):
    """A :class:`PushAsker` whose answers are kept for a retry of the call (see :class:`KeptCall`)."""

    __slots__ = ("journal", "kept")
    kept: KeptCall

    async def ask(self, method: str, params: JSONObject, key: str) -> JSONObject:
        known = self.kept.answers.get(key)
        if known is not None:
            return known
        answer = await self._push(method, params)
        if isinstance(answer, dict):
            await self.kept.remember(key, answer)
        return answer


def _digest(principal: str | None, key: str, tool: str, arguments: JSONValue) -> str:
    return hashlib.sha256(_canonical([principal or "", key, tool, arguments])).hexdigest()[:40]


def kept_task_id(server: Server, params: JSONObject, tool: str, principal: str | None) -> str | None:
    """The id of the task a 2025-11-25 task-augmented call creates, when the call is kept (shared store, an
    idempotency key): derived from the key, so the call sent again finds the task instead of making another."""
    key = call_key(params)
    if key is None or not server.store.shared:
        return None
    return f"task-{_digest(principal, key, tool, params.get('arguments'))}"


async def keep_call(
    server: Server, params: JSONObject, tool: str, arguments: JSONValue, principal: str | None
) -> KeptCall | None:
    """The kept record of this call (created, or claimed from an earlier attempt), or ``None`` when the call is not
    kept (no shared store, no idempotency key) or the store could not be reached within :data:`KEEP_PATIENCE` (the
    call then runs as it is).

    A store away for a moment (a Redis restart, a failover) is waited for: a call run unkept keeps none of its
    ``ctx.once`` steps, so if its replica then died, the client's retry would run them again. A try after one whose
    write reached the store finds the record and claims it (the same attempt, under a newer epoch)."""
    key = call_key(params)
    if key is None or not server.store.shared:
        return None
    record_id = f"call-{_digest(principal, key, tool, arguments)}"
    give_up_at = anyio.current_time() + KEEP_PATIENCE
    while True:
        try:
            return await _keep(server, record_id, tool, principal)
        except StoreUnavailable:
            if anyio.current_time() + KEEP_RETRY >= give_up_at:
                logger.warning("call %s: the shared state is unavailable; it runs unkept", record_id)
                return None
            await anyio.sleep(KEEP_RETRY)


async def _keep(server: Server, record_id: str, tool: str, principal: str | None) -> KeptCall | None:
    """One try of :func:`keep_call` (``None``: too many records)."""
    registry = server.store.tasks
    replica = str(server.store.replica)
    try:
        now = time.time()
        record = TaskRecord(
            id=record_id, principal=principal, connection=None, status="working", created=now, updated=now,
            ttl=CALL_TTL, poll_interval=1.0, call={"kind": KIND, "name": tool}, owner=replica, epoch=0,
        )  # fmt: skip
        try:
            await registry.create(record)
        except ValueError:  # sent before: claim it from the earlier attempt
            claimed = await change(registry, record_id, lambda current: _claim(current, principal, replica))
            if claimed is None:
                raise JSONRPCError(INTERNAL_ERROR, "Internal error: this call's record expired meanwhile") from None
            record = claimed
    except OverflowError:
        return None
    return KeptCall(registry, Claim(record_id, record.epoch), record)


def _claim(current: TaskRecord, principal: str | None, replica: str) -> TaskRecord | None:
    if current.principal != principal or current.call.get("kind") != KIND:
        raise JSONRPCError(INTERNAL_ERROR, "Internal error: this call's idempotency key belongs to another call")
    if current.terminal:
        return dataclasses.replace(current, epoch=current.epoch + 1)  # fences a stalled first attempt all the same
    return dataclasses.replace(current, owner=replica, epoch=current.epoch + 1)
