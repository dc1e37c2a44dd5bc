"""Sessions on anyio: a task per peer request, a waiter per awaited response, one task group per session."""

from ._errors import internal_error
from ._session import MAX_INCOMING, NotificationHandler, RequestHandler, Session, open_session
from ._waiter import Waiter

__all__ = [
    "MAX_INCOMING",
    "NotificationHandler",
    "RequestHandler",
    "Session",
    "Waiter",
    "internal_error",
    "open_session",
]
