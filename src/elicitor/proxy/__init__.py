"""``elicitor proxy``: elicitation that works whatever the client, the server and their protocol eras.

A :class:`Bridge` joins one client connection to the upstream server, forwarding faithfully and bridging what
the two cannot say to each other (see :mod:`elicitor.proxy._bridge`); :class:`ProxyServer` serves clients over
Streamable HTTP with elicitor's own HTTP app (``ProxyServer(connect).http_app()`` is an ASGI app to mount).
"""

from ._bridge import Bridge, static
from ._http import ProxyServer
from ._upstream import Connect

__all__ = ["Bridge", "Connect", "ProxyServer", "static"]
