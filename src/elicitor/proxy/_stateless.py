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
from ..types import INTERNAL_ERROR, JSONObject
from ._downstream import Downstream
from ._held import HeldCalls
from ._lanes import Lanes
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
    ) -> None:
        self.ui = ui
        self.lanes = Lanes(connect, task_group, wanted=upstream_protocol, mirrored=mirrored, first=first)
        self.held = HeldCalls(self.lanes, task_group, elicitation_timeout=elicitation_timeout)

    async def serve(self, request: RequestReceived, notify: Notify | None, principal: str | None) -> JSONObject:
        """Serve one request; the server's notifications about it go to ``notify`` (its response stream)."""
        params = dict(request.params or {})
        down = Downstream.of_request(params, principal, self.ui)
        first = await self.lanes.first(down)
        if first.modern:
            if request.method == "subscriptions/listen":
                return await first.listen(params, Route(notify, request.id))
            return await self._forward(first, down, request.method, params, notify)
        if request.method == "server/discover":
            return self.lanes.discovered()
        return await self.held.serve(down, request.method, params, notify)

    async def _forward(
        self, upstream: Upstream, down: Downstream, method: str, params: JSONObject, notify: Notify | None
    ) -> JSONObject:
        """2026-07-28 on both sides: as is (the client's own ``_meta``), unless the proxy answers some input
        requests itself (``--ui``): then it declares those modes upstream and follows those rounds."""
        route = Route(notify, None)
        if not down.ui_modes():
            return await upstream.request(method, params, route=route)
        assert upstream.revision is not None
        params = down.with_meta(params, upstream.revision)
        for _ in range(MAX_ROUNDS):
            result = await upstream.request(method, params, route=route)
            requests = result.get("inputRequests")
            if result.get("resultType") != "input_required" or not isinstance(requests, dict):
                return result
            if not all(down.renders(r) for r in requests.values()):
                return result  # the client must answer some of them: it gets them all, as the server sent them
            answers = {key: await render(down, upstream, r) for key, r in requests.items() if isinstance(r, dict)}
            params = {**params, "inputResponses": answers, "requestState": result.get("requestState")}
            if params["requestState"] is None:
                del params["requestState"]
        raise JSONRPCError(
            INTERNAL_ERROR, f"Internal error: the server still asked for input after {MAX_ROUNDS} rounds"
        )
