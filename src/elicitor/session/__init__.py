"""Sessions on anyio: a task per peer request, an event per awaited response, one task group per session."""

from ._session import NotificationHandler, RequestHandler, Session, open_session

__all__ = ["NotificationHandler", "RequestHandler", "Session", "open_session"]
