"""``elicitor proxy``: elicitation that works whatever the client, the server and their protocol eras.

A :class:`Bridge` joins one client connection to one server connection, forwarding faithfully and bridging what
the two cannot say to each other (see :mod:`elicitor.proxy._bridge`).
"""

from ._bridge import HELD_CALL_TTL, Bridge, Connect, static

__all__ = ["HELD_CALL_TTL", "Bridge", "Connect", "static"]
