"""The client side: ``Client``, the elicitation handler interface, and the built-in handlers."""

from ._browser import BrowserHandler
from ._client import Client
from ._handlers import ElicitationHandler, ElicitationOutcome, ElicitationRequest, ScriptedHandler, UrlHandler
from ._rounds import DEFAULT_MAX_ROUNDS
from ._sdk import sdk_call_tool, sdk_elicitation_callback
from ._tasks import TaskHandle
from ._terminal import TerminalHandler
from ._url import UrlElicitationRequest, url_warnings

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "BrowserHandler",
    "Client",
    "ElicitationHandler",
    "ElicitationOutcome",
    "ElicitationRequest",
    "ScriptedHandler",
    "TaskHandle",
    "TerminalHandler",
    "UrlElicitationRequest",
    "UrlHandler",
    "sdk_call_tool",
    "sdk_elicitation_callback",
    "url_warnings",
]
