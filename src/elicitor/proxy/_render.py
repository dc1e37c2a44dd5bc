"""The proxy asking the person itself (``--ui``): what the client cannot show, with every check a client applies."""

from __future__ import annotations

from ..client._answer import answer_elicitation
from ..protocol import parse_implementation
from ..types import Implementation, JSONObject, JSONValue
from ._downstream import Downstream
from ._upstream import Upstream


async def render(down: Downstream, upstream: Upstream, request: JSONObject) -> JSONObject:
    """Ask ``down.ui`` the elicitation ``request`` (``{"method", "params"}``) and return the wire answer; the
    person sees the upstream server's name, never the proxy's."""
    assert down.ui is not None
    params = request.get("params")
    return await answer_elicitation(
        down.ui, params if isinstance(params, dict) else {}, implementation(upstream.server),
        modes=down.ui_modes(), stateless=upstream.stateless,
    )  # fmt: skip


def implementation(raw: JSONValue) -> Implementation | None:
    """The upstream server's ``serverInfo``, read as elicitor's client reads it (a malformed field costs only it)."""
    return parse_implementation(raw)
