"""``elicitor proxy``: elicitation that works whatever the client, the server and their protocol eras.

A :class:`Bridge` joins one client connection to one server connection, forwarding faithfully and bridging what
the two cannot say to each other (see :mod:`elicitor.proxy._bridge`); :class:`ProxyServer` serves clients over
Streamable HTTP with elicitor's own HTTP app (``ProxyServer(connect).http_app()`` is an ASGI app to mount).
"""

from ._bridge import HELD_CALL_TTL, Bridge, Connect, static
from ._http import ProxyServer

__all__ = ["HELD_CALL_TTL", "Bridge", "Connect", "ProxyServer", "static"]
