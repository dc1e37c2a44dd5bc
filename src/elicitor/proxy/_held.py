"""A 2026-07-28 client in front of a handshake-era server: calls held open upstream across the client's rounds.

The server pushes ``elicitation/create`` (or sampling, roots) while it serves a call; a 2026-07-28 client has no
back channel to receive it. So the proxy runs the upstream call on a connection of its own (a lane, see
:mod:`._lanes`: whatever the server pushes there belongs to this call and no other) and ends the client's request
with ``input_required``: the pushed requests as input requests, and a ``requestState`` of the proxy's own, sealed
and bound to the call and to the principal, naming the held call and its round. The client's retry answers the
pushed requests upstream and the call goes on, until its result.

**Time without progress.** A held call ends (cancelled upstream) after ``elicitation_timeout`` seconds *without
progress*: each round handed to the client, each retry that answers one, each question the server pushes and
each progress notification it sends starts the time again. A tool reporting progress every minute runs as long
as it needs; a call whose client never comes back is cancelled upstream after the limit. It is the same setting,
and the same word, as the server's ``Server(elicitation_timeout=...)``: how long a question may wait for a person.

**URL required (-32042).** A handshake-era server that needs a URL elicitation first answers -32042; on 2026-07-28
that is a URL input request, so the proxy asks it in a round (or through ``--ui`` when the client did not declare
URL mode; never to a client that did not). When the client's retry says the person is done, the proxy calls again
at once; the server answers -32042 again if the step is not finished, and the person is asked again.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeGuard

import anyio
import anyio.abc

from .._exceptions import ConnectionClosed, FormDefinitionError, JSONRPCError
from ..client._answer import request_form
from ..protocol import RequestReceived
from ..server._sealing import StateSealer, request_binding
from ..telemetry import _state as _telemetry
from ..types import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, URL_ELICITATION_REQUIRED, JSONObject
from ._downstream import Downstream, strip_meta
from ._lanes import Lanes
from ._render import render
from ._upstream import Notify, Route, Upstream, upstream_ended

logger = logging.getLogger("elicitor.proxy")

_INPUT_METHODS = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
"""The requests a 2026-07-28 round may carry as input requests, and the capability each needs."""
HELD_STATE = "proxy."
"""How the ``requestState`` of a held call begins (the proxy's own, not the server's: see :func:`is_held`)."""
MAX_HELD_CALLS = 256
"""Calls held at once; beyond it the oldest of the asker's own is cancelled upstream (with none, the new call is
refused: another person's are never ended for it)."""
MAX_HELD_PER_PERSON = 32
"""Calls one signed-in person (one principal) may have held at once: a fair share of :data:`MAX_HELD_CALLS` (each
holds an upstream connection while it runs), so that one person's many calls never leave another none. Anonymous
callers (no sign-in) cannot be told apart and are held to :data:`MAX_HELD_CALLS` only. Beyond it the
oldest of their own calls that they are not waiting on (their client is away between rounds, or never came back
for it) is cancelled; when they are waiting on every one, the new call is refused, saying so."""
SETTLE = 0.05
"""Seconds without a new pushed question before a held call's round is complete (questions asked together go
out together)."""
CACHEABLE = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"})
"""2026-07-28 results that carry ``ttlMs`` and ``cacheScope``."""


@dataclass
class _Pushed:
    """A request the upstream server pushed mid-call, waiting for the client's answer."""

    method: str
    params: JSONObject
    answer: JSONObject | None = None
    done: anyio.Event = field(default_factory=anyio.Event)


class _Held:
    """An upstream call kept open across a 2026-07-28 client's rounds."""

    def __init__(self, down: Downstream, method: str, params: JSONObject, timeout: float | None) -> None:
        self.id = secrets.token_urlsafe(12)
        self.down = down
        self.method = method
        self.params = params
        self.timeout = timeout
        self.url_required: list[JSONObject] = []
        """-32042: the URL elicitations the server needs before it can run the call (asked as input requests)."""
        self.round = 0
        self.result: JSONObject | None = None
        self.error: BaseException | None = None
        self.finished = anyio.Event()
        self.asked: dict[str, _Pushed] = {}
        """Questions of the current round, by input-request key."""
        self.arrived = anyio.Event()
        self.scope = anyio.CancelScope()
        self.dropped: str | None = None
        """Why the proxy cancelled it (too many held calls), if it did (not the time limit)."""
        self.attended = 0
        """Requests of the client being served for this call now (0: the client is away between rounds)."""
        self.route = Route(None, None, self.touch)
        self.notify: Notify | None = None
        """The response stream of the client's request being served, while it is open (its logs go there)."""
        self.last = anyio.current_time()
        self._keys = itertools.count(1)
        self.origin: dict[str, str] | None = None
        """The span of the client's first request for this call (telemetry), which every later round links to."""
        if _telemetry.state.on:
            from ..telemetry import _hooks

            self.origin = _hooks.first_round(None)
        self.touch()

    def touch(self) -> None:
        """Progress: the time without it starts again."""
        self.last = anyio.current_time()
        if self.timeout is not None and not self.finished.is_set():
            self.scope.deadline = self.last + self.timeout

    async def note(self, method: str, params: JSONObject | None) -> None:
        """A notification naming no call on this call's own connection: the server's log messages about it go to
        the client's request being served, when the client asked for them; nothing else does (a 2026-07-28
        client hears of list changes through ``subscriptions/listen``), nor anything while the client is away."""
        if method == "notifications/message" and self.down.log_level is not None and self.notify is not None:
            await self.notify(method, params or {})

    def push(self, pushed: _Pushed) -> None:
        self.asked[f"q{next(self._keys)}"] = pushed
        self.touch()
        self.arrived.set()

    def stale(self, now: float) -> bool:
        """Finished, and its client has not come back for it within the limit."""
        return self.finished.is_set() and self.timeout is not None and now - self.last > self.timeout


class HeldCalls:
    """The held calls of a proxy's 2026-07-28 clients (see the module docstring).

    Args:
        lanes: where each call gets its upstream connection.
        task_group: where held calls run (they outlive the request that started them).
        elicitation_timeout: seconds a held call may go without progress (``None``: no limit).
    """

    def __init__(self, lanes: Lanes, task_group: anyio.abc.TaskGroup, *, elicitation_timeout: float | None) -> None:
        self._lanes = lanes
        self._tg = task_group
        self._timeout = elicitation_timeout
        self._sealer = StateSealer()  # the proxy's own: held calls live in this process only
        self._held: dict[str, _Held] = {}
        self._dropped: dict[str, str] = {}
        """Why each call the proxy cancelled to make room was cancelled, for its client's next round (the last
        :data:`MAX_HELD_CALLS` of them)."""
        self._task_ttl = int((elicitation_timeout or 3600.0) * 1000)
        """A task the proxy creates upstream lives as long as a held call may go without progress."""

    async def serve(self, down: Downstream, method: str, params: JSONObject, notify: Notify | None) -> JSONObject:
        """One 2026-07-28 request: a new call held upstream, or the retry of one that answers its questions."""
        binding = request_binding(method, params, down.principal)
        if "requestState" not in params:
            held = self._hold(down, method, strip_meta(params), notify)
            with _attending(held):
                return await self._round(held, binding)
        token = params["requestState"]
        if not is_held(token):
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: this requestState was not issued for this call")
        state = self._sealer.open(token[len(HELD_STATE) :], binding)
        found = self._held.get(str(state.get("h")))
        if found is None and str(state.get("h")) in self._dropped:
            # The state is sealed and bound to this person: the call was theirs, and they are told what ended it.
            raise JSONRPCError(
                INTERNAL_ERROR, f"Internal error: the call was cancelled: {self._dropped[str(state['h'])]}"
            )
        if found is None or found.round != state.get("n") or found.down.principal != down.principal:
            raise JSONRPCError(
                INVALID_PARAMS, "Invalid params: this call's state has expired or was already used; call again"
            )
        held = found
        held.touch()
        if _telemetry.state.on:  # a client that sends each round in a trace of its own: linked to the first
            from ..telemetry import _hooks

            _hooks.first_round(held.origin)
        _point(held, params, notify)
        responses = params.get("inputResponses")
        responses = responses if isinstance(responses, dict) else {}
        if held.url_required:
            return await self._afterurl_required(held, responses, binding, notify)
        for key, pushed in held.asked.items():
            answer = responses.get(key)
            pushed.answer = answer if isinstance(answer, dict) else {"action": "cancel"}
            pushed.done.set()
        held.asked = {}
        held.arrived = anyio.Event()
        if held.finished.is_set():  # it ended while the client was away (the server gone, say): nothing to wait for
            held.arrived.set()
        with _attending(held):
            return await self._round(held, binding)

    async def _afterurl_required(
        self, held: _Held, responses: JSONObject, binding: bytes, notify: Notify | None
    ) -> JSONObject:
        """The client answered the URL elicitations a -32042 listed: accepted (the person says they are done),
        the call is made again at once; a declined one ends the call as the server's own 2026-07-28 path would
        end it: a tool error."""
        self._held.pop(held.id, None)
        answers = [responses.get(f"u{index}") for index in range(1, len(held.url_required) + 1)]
        if not all(isinstance(a, dict) and a.get("action") == "accept" for a in answers):
            return declined(held.url_required)
        again = self._hold(held.down, held.method, held.params, notify)
        again.origin = held.origin  # the same call, made again: its rounds still link to its first
        return await self._round(again, binding)

    def _hold(self, down: Downstream, method: str, params: JSONObject, notify: Notify | None) -> _Held:
        now = anyio.current_time()
        for stale in [h for h in self._held.values() if h.stale(now)]:
            self._held.pop(stale.id, None)
        # Without a sign-in nobody can be told apart: every anonymous caller would share one person's share, so
        # only the proxy's overall bound applies to them.
        mine = [h for h in self._held.values() if h.down.principal == down.principal]
        if down.principal is not None and len(mine) >= MAX_HELD_PER_PERSON:
            # The asker's fair share is used: room is made from their own calls they are not waiting on, else
            # the new call is refused (a call the client waits for is never ended for another of the same client).
            away = [h for h in mine if not h.attended]
            if not away:
                raise JSONRPCError(
                    INTERNAL_ERROR,
                    f"Internal error: {len(mine)} of your calls are in progress through the proxy, the most one "
                    "person may have at once; retry when one of them has ended",
                    {"heldCalls": len(mine), "maxPerPerson": MAX_HELD_PER_PERSON},
                )
            for evicted in away[: len(mine) - MAX_HELD_PER_PERSON + 1]:
                self._drop(evicted, f"you had {MAX_HELD_PER_PERSON} calls held through the proxy, the most one "
                                   "person may have at once, and a newer one of yours needed room")  # fmt: skip
        while len(self._held) >= MAX_HELD_CALLS:
            # Room is made from the asker's own calls only: one person's many calls never end another's.
            oldest = next((h for h in self._held.values() if h.down.principal == down.principal), None)
            if oldest is None:
                raise JSONRPCError(
                    INTERNAL_ERROR, f"Internal error: {MAX_HELD_CALLS} calls are held through the proxy; retry later"
                )
            self._drop(oldest, f"{MAX_HELD_CALLS} calls were held through the proxy")
        held = _Held(down, method, params, self._timeout)
        _point(held, params, notify)
        self._held[held.id] = held
        self._tg.start_soon(self._call, held)
        return held

    def _drop(self, held: _Held, why: str) -> None:
        """Cancel a held call upstream to make room (``why``: what its client is told)."""
        del self._held[held.id]
        held.dropped = why
        self._dropped[held.id] = why
        while len(self._dropped) > MAX_HELD_CALLS:
            del self._dropped[next(iter(self._dropped))]
        held.scope.cancel()

    async def _call(self, held: _Held) -> None:
        try:
            with held.scope:
                async with self._lanes.lane(held.down) as upstream:

                    async def pushed(request: RequestReceived) -> JSONObject:
                        return await self._pushed(held, upstream, request)

                    upstream.on_push = pushed
                    upstream.on_note = held.note
                    try:
                        await upstream.set_log_level(held.down.log_level)
                        if held.method == "tools/call":
                            held.result = await upstream.call_tool(held.params, held.route, ttl_ms=self._task_ttl)
                        else:
                            held.result = await upstream.request(held.method, held.params or None, route=held.route)
                    except ConnectionClosed:
                        if not await upstream.ended_under():
                            raise
                        # The server ended mid-call: the call is not made again (it may have done part of it, and
                        # the person answered its questions), its client is told how the server ended.
                        raise upstream_ended(await upstream.why_gone()) from None
            if held.result is None and held.error is None:
                if held.dropped is not None:
                    held.error = ConnectionClosed(f"the call was cancelled: {held.dropped}")
                else:
                    held.error = TimeoutError(f"no progress in {held.timeout:g} s")
        except Exception as exc:
            held.error = exc
        finally:
            held.finished.set()
            held.arrived.set()
            held.last = anyio.current_time()

    async def _pushed(self, held: _Held, upstream: Upstream, request: RequestReceived) -> JSONObject:
        """A request the server pushed on this call's own connection: answered by ``--ui`` when the client cannot,
        else asked of the client in the call's next round."""
        params = dict(request.params or {})
        question: JSONObject = {"method": request.method, "params": params}
        if held.down.renders(question):
            held.touch()
            try:
                return await render(held.down, upstream, question)
            finally:
                held.touch()
        if request.method not in _INPUT_METHODS or (
            request.method != "elicitation/create" and _INPUT_METHODS[request.method] not in held.down.capabilities
        ):
            # Only these can be input requests on 2026-07-28, and only what the client declared: anything else
            # would end the client's call as the server's protocol error, which is the server's to hear.
            raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: {request.method} (the client did not declare it)")
        if request.method == "elicitation/create" and params.get("mode", "form") not in held.down.modes():
            # Never forwarded to a client that did not declare the mode (what our own client answers, too).
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: the client did not declare this elicitation mode")
        if request.method == "elicitation/create":
            # The client's answer will be an input response, which cannot say what was wrong with the request: a
            # request no client may be asked is refused here, with the reason, as elicitor's client refuses it.
            _check_elicitation(params)
        pushed = _Pushed(request.method, params)
        held.push(pushed)
        await pushed.done.wait()
        assert pushed.answer is not None
        return pushed.answer

    async def _round(self, held: _Held, binding: bytes) -> JSONObject:
        """Wait for the held call's result, or for its next questions (gathered while more keep coming)."""
        while True:
            await held.arrived.wait()
            while not held.finished.is_set():
                seen = len(held.asked)
                with anyio.move_on_after(SETTLE):
                    await held.finished.wait()
                if len(held.asked) == seen:
                    break
            if not held.finished.is_set() or held.asked:
                return self._next_round(
                    held, binding, {k: {"method": p.method, "params": p.params} for k, p in held.asked.items()}
                )
            self._held.pop(held.id, None)
            required = url_required(held.error)
            if not required:
                return _outcome(held)
            modes = held.down.modes()
            if all(held.down.renders({"method": "elicitation/create", "params": e}) for e in required):
                # The client cannot open URLs, the proxy's renderer can: the person is asked here, and the call
                # made again as soon as they say they are done.
                upstream = await self._lanes.first(held.down)
                for elicitation in required:
                    answer = await render(held.down, upstream, {"method": "elicitation/create", "params": elicitation})
                    if answer.get("action") != "accept":
                        return declined(required)
                held = self._hold(held.down, held.method, held.params, held.route.notify)
                continue
            if "url" not in modes:
                assert isinstance(held.error, JSONRPCError)
                raise held.error  # never a URL request to a client that did not declare URL mode
            # -32042 on the handshake era is a URL input request on 2026-07-28: ask it in a round.
            held.url_required = required
            self._held[held.id] = held
            requests = {
                f"u{index}": {"method": "elicitation/create", "params": elicitation}
                for index, elicitation in enumerate(required, 1)
            }
            return self._next_round(held, binding, requests)

    def _next_round(self, held: _Held, binding: bytes, requests: JSONObject) -> JSONObject:
        held.round += 1
        held.touch()  # the person's time starts now
        token = HELD_STATE + self._sealer.seal({"h": held.id, "n": held.round}, binding)
        return {"resultType": "input_required", "inputRequests": requests, "requestState": token}


def _check_elicitation(params: JSONObject) -> None:
    """Refuse (-32602, saying why) an ``elicitation/create`` outside the spec: a message that is not a string, a
    form outside the restricted subset, a URL request without its URL."""
    message = params.get("message")
    if not isinstance(message, str):
        raise JSONRPCError(INVALID_PARAMS, "Invalid params: elicitation message must be a string")
    if params.get("mode", "form") == "url":
        if not isinstance(params.get("url"), str) or not params["url"]:
            raise JSONRPCError(INVALID_PARAMS, "Invalid params: a URL-mode elicitation needs a url")
        return
    try:
        request_form(params.get("requestedSchema"), message)
    except FormDefinitionError as exc:
        raise JSONRPCError(INVALID_PARAMS, f"Invalid params: requestedSchema is not a valid form: {exc}") from None


def is_held(token: object) -> TypeGuard[str]:
    """Whether a ``requestState`` is a held call's (the proxy's), rather than the upstream server's own."""
    return isinstance(token, str) and token.startswith(HELD_STATE)


def _point(held: _Held, params: JSONObject, notify: Notify | None) -> None:
    """Point a held call's progress and logs at this round's request (its response stream, its own progress
    token)."""
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    held.route.notify = notify if isinstance(token, str | int) else None
    held.route.token = token if isinstance(token, str | int) else None
    held.notify = notify


@contextmanager
def _attending(held: _Held) -> Iterator[None]:
    """While a request of the client is served: once it is answered, its response stream is closed, and what the
    server says about the call until the next round has nowhere to go."""
    held.attended += 1
    try:
        yield
    finally:
        held.attended -= 1
        held.notify = None
        held.route.notify = None


def _outcome(held: _Held) -> JSONObject:
    if held.error is not None:
        if isinstance(held.error, JSONRPCError):
            raise held.error
        if isinstance(held.error, TimeoutError):
            raise JSONRPCError(
                INTERNAL_ERROR,
                f"Internal error: the call was cancelled upstream after {held.timeout:g} s without progress",
            )
        raise JSONRPCError(INTERNAL_ERROR, f"Internal error: {held.error}")
    assert held.result is not None
    result: JSONObject = {**held.result, "resultType": "complete"}
    if held.method in CACHEABLE:
        # 2026-07-28 requires caching hints on these results; a handshake-era server gives none: do not cache,
        # and never share between users what it said to one.
        result.setdefault("ttlMs", 0)
        result.setdefault("cacheScope", "private")
    return result


def declined(required: list[JSONObject]) -> JSONObject:
    steps = "; ".join(str(e.get("message", "")) for e in required)
    text = f"The call needs a step the person declined or cancelled: {steps}"
    return {"content": [{"type": "text", "text": text}], "isError": True, "resultType": "complete"}


def url_required(error: BaseException | None) -> list[JSONObject]:
    """The URL elicitations a -32042 error lists (empty for any other error)."""
    if (
        not isinstance(error, JSONRPCError)
        or error.code != URL_ELICITATION_REQUIRED
        or not isinstance(error.data, dict)
    ):
        return []
    listed = error.data.get("elicitations")
    if not isinstance(listed, list):
        return []
    return [e for e in listed if isinstance(e, dict) and e.get("mode") == "url"]
