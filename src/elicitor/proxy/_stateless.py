"""2026-07-28 clients: every request on its own, carrying who asks.

One :class:`Stateless` serves every 2026-07-28 request a proxy receives, whoever sends it: a stdio client, or any
number of clients of one ``--listen`` proxy. Nothing in it belongs to a client: each request brings its
:class:`~._downstream.Downstream` (its ``_meta`` and its principal), its upstream connection comes from
:class:`~._lanes.Lanes`, and what the server sends back about it reaches its own response (:class:`~._upstream.Route`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio.abc

from .._exceptions import JSONRPCError
from ..client._handlers import ElicitationHandler
from ..protocol import RequestReceived
from ..types import INTERNAL_ERROR, TASKS_EXTENSION, JSONObject
from ._downstream import Downstream
from ._held import HeldCalls, is_held
from ._lanes import Lanes
from ._owners import RoundStates, TaskOwners, own_key
from ._render import render
from ._upstream import Connect, Notify, Route, Upstream

MAX_ROUNDS = 64
"""Rounds of ``input_required`` the proxy follows itself (answering through ``--ui``) before the call fails."""


class Stateless:
    """Serves 2026-07-28 requests by forwarding (see the module docstring).

    Args:
        connect: opens an upstream connection.
        task_group: where upstream connections and held calls live.
        ui: answers what a client cannot (``None``: nothing).
        upstream_protocol: ``auto`` or a revision to insist on.
        elicitation_timeout: see :class:`~._held.HeldCalls`.
        mirrored: see :class:`~._upstream.Upstream`.
        first: the first upstream connection, opened already (see :class:`~._lanes.Lanes`).
        on_note: see :class:`~._lanes.Lanes`.
        owners: whose task is whose (:class:`~._owners.TaskOwners`), shared by the proxy's connections.
    """

    def __init__(
        self,
        connect: Connect,
        task_group: anyio.abc.TaskGroup,
        *,
        ui: ElicitationHandler | None,
        upstream_protocol: str,
        elicitation_timeout: float | None,
        mirrored: dict[str, dict[str, str]],
        first: Callable[[], Awaitable[Upstream]] | None = None,
        on_note: Callable[[str, JSONObject | None], Awaitable[None]] | None = None,
        owners: TaskOwners | None = None,
    ) -> None:
        self.ui = ui
        self.wanted = upstream_protocol
        self.in_rounds: set[str] = set()
        """Tools of a server that speaks both eras found to ask in rounds (2026-07-28 only): called there."""
        self.lanes = Lanes(
            connect, task_group, wanted=upstream_protocol, mirrored=mirrored, first=first, on_note=on_note
        )
        self.held = HeldCalls(self.lanes, task_group, elicitation_timeout=elicitation_timeout)
        self.owners = owners if owners is not None else TaskOwners()
        self.states = RoundStates()
        """The server's round states, bound to who they were given to."""

    async def serve(self, request: RequestReceived, notify: Notify | None, principal: str | None) -> JSONObject:
        """Serve one request; the server's notifications about it go to ``notify`` (its response stream)."""
        params = dict(request.params or {})
        if request.method == "tools/call":
            params = own_key(params, principal)
        down = Downstream.of_request(params, principal, self.ui)
        # A task is its creator's whatever the server's era: the server sees one client, the proxy (see _owners).
        self.owners.check(request.method, params, down.principal)
        first = await self.lanes.first(down)
        if first.stateless:
            if request.method == "subscriptions/listen":
                return await first.listen(params, Route(notify, request.id))
            if self._handshake_first(first, request.method, params):
                try:
                    return await self.held.serve(down, request.method, params, notify)
                except JSONRPCError as exc:
                    if "requestState" in params or not (self.lanes.no_handshake or asks_in_rounds(exc)):
                        raise
                    if asks_in_rounds(exc):
                        self.in_rounds.add(str(params.get("name")))
            result = await self._forward(first, down, request.method, params, notify)
            self.owners.created(result, down.principal)
            return result
        if request.method == "server/discover":
            return self.lanes.discovered()
        return await self.held.serve(down, request.method, params, notify)

    def _handshake_first(self, first: Upstream, method: str, params: JSONObject) -> bool:
        """Whether a call to a server that speaks both eras goes on the handshake era first: a tool call not pinned
        (``--upstream-protocol``), to a tool not known to ask in rounds, that is not a round of a call the server
        holds itself (its own ``requestState``), to a server that does not declare the tasks extension. See
        :func:`asks_in_rounds` for why that order.

        The route is chosen from what the server says, never from what the client declares (elicitor's own client
        always declares the tasks extension, to servers whose tools ask by pushing). A server that declares the
        2026-07-28 tasks extension (``io.modelcontextprotocol/tasks`` in ``server/discover``) is built for that
        era: its tasks ask through input requests (the multi-round-trip shape), and what it does only there (a
        ``CreateTaskResult``, -32021 for a capability or extension the client did not declare, input requests
        under keys of its own, results streamed on the request's response) the handshake era would take away
        from the client. All its calls go on 2026-07-28. A server that pushes and declares the extension too
        loses its pushing tools for 2026-07-28 clients; ``--upstream-protocol 2025-11-25`` pins it.
        """
        if method != "tools/call" or self.wanted != "auto" or self.lanes.no_handshake:
            return False
        extensions = first.capabilities.get("extensions")
        if isinstance(extensions, dict) and TASKS_EXTENSION in extensions:
            return False
        if str(params.get("name")) in self.in_rounds:
            return False
        return "requestState" not in params or is_held(params["requestState"])

    async def _forward(
        self, upstream: Upstream, down: Downstream, method: str, params: JSONObject, notify: Notify | None
    ) -> JSONObject:
        """2026-07-28 on both sides: as is (the client's own ``_meta``), unless the proxy answers some input
        requests itself (``--ui``): then it declares those modes upstream and follows those rounds. The server's
        ``requestState`` reaches the client bound to its principal (:class:`~._owners.RoundStates`)."""
        route = Route(notify, None)
        params = self.states.take(params, down.principal)
        if not down.ui_modes():
            return self.states.give(await upstream.request(method, params, route=route), down.principal)
        assert upstream.revision is not None
        params = down.with_meta(params, upstream.revision)
        for _ in range(MAX_ROUNDS):
            result = await upstream.request(method, params, route=route)
            requests = result.get("inputRequests")
            if result.get("resultType") != "input_required" or not isinstance(requests, dict):
                return self.states.give(result, down.principal)
            if not all(down.renders(r) for r in requests.values()):
                # The client must answer some of them: it gets them all, as the server sent them.
                return self.states.give(result, down.principal)
            answers = {key: await render(down, upstream, r) for key, r in requests.items() if isinstance(r, dict)}
            params = {**params, "inputResponses": answers, "requestState": result.get("requestState")}
            if params["requestState"] is None:
                del params["requestState"]
        raise JSONRPCError(
            INTERNAL_ERROR, f"Internal error: the server still asked for input after {MAX_ROUNDS} rounds"
        )


def asks_in_rounds(error: JSONRPCError) -> bool:
    """Whether a handshake-era call failed because the tool asked in rounds: it returned ``input_required``, which
    that era cannot carry (the official SDKs answer -32603 "Handler returned an invalid result").

    Why a server that speaks both eras gets a tool call on the handshake era first, and on 2026-07-28 only when
    this says so: a tool that asks by pushing (``ctx.elicit`` in the official SDK) fails on 2026-07-28 *when it
    asks*, after running up to that point, so calling it again on the other era could repeat what it did before
    asking. A tool that asks in rounds stops when it needs input and returns; on 2026-07-28 it is called again from
    the top on every round by design, so one more call from the top is what that era does anyway. So the only
    retry is the safe one, and a tool is never run twice with a side effect because of it.
    """
    return error.code == INTERNAL_ERROR and "invalid result" in error.message.lower()
