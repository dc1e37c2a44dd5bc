"""``subscriptions/listen`` (2026-07-28): a request that stays open and carries the list changes and resource
updates a client asked for (basic/patterns/subscriptions), each tagged with the request's id.

The handshake era has no such request: its list changes go to every session, and resource updates to those that
subscribed (``ServerSession._forward_changes``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol import RequestReceived
from ..types import JSONObject

if TYPE_CHECKING:
    from ._dispatch import Notify
    from ._server import Server

_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
_LIST_CHANGED = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}


async def listen(server: Server, request: RequestReceived, notify: Notify) -> JSONObject:
    """``subscriptions/listen`` (2026-07-28): acknowledge the filter it can honor, then stream matching changes.

    The request stays open until the client cancels it (closes the stream, or ``notifications/cancelled``).
    """
    wanted = (request.params or {}).get("notifications")
    wanted = wanted if isinstance(wanted, dict) else {}
    capabilities = server.capabilities()
    agreed: JSONObject = {}
    for flag, method in _LIST_CHANGED.items():
        kind = method.split("/")[1]
        if wanted.get(flag) is True and capabilities.get(kind, {}).get("listChanged"):
            agreed[flag] = True
    uris = wanted.get("resourceSubscriptions")
    if isinstance(uris, list) and "resources" in capabilities:
        agreed["resourceSubscriptions"] = [u for u in uris if isinstance(u, str)]
    tag = {_SUBSCRIPTION_ID: request.id}
    with server._changes.listen() as changes:
        await notify("notifications/subscriptions/acknowledged", {"_meta": tag, "notifications": agreed})
        async for method, params in changes:
            if _delivers(agreed, method, params):
                await notify(method, {**params, "_meta": tag})
    return {"_meta": tag}


def _delivers(agreed: JSONObject, method: str, params: JSONObject) -> bool:
    if method == "notifications/resources/updated":
        return params.get("uri") in agreed.get("resourceSubscriptions", ())
    return any(agreed.get(flag) for flag, listed in _LIST_CHANGED.items() if listed == method)
