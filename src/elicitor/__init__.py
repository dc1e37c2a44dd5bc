"""elicitor: Model Context Protocol elicitation, end to end.

A server asks the person at the client for input in the middle of a tool call with ``await ctx.elicit(...)``; a
client answers through a handler. The same tool code serves protocol revisions 2025-06-18, 2025-11-25 and
2026-07-28. See README.md and docs/architecture.md.
"""

from typing import TYPE_CHECKING, Any

from ._exceptions import (
    AuthError,
    ClientCapabilityMissing,
    ConnectionClosed,
    ElicitationUnsupported,
    ElicitorError,
    FieldError,
    FormDefinitionError,
    InvalidAnswer,
    InvalidScriptedAnswer,
    JSONRPCError,
    LegacyRefused,
    LocalProtocolError,
    MessageTooLarge,
    OutcomeUnknown,
    ProtocolError,
    RemoteProtocolError,
    TaskCancelled,
    TemporarilyUnavailable,
    TooManyRounds,
)
from ._outcomes import Accepted, Cancelled, Declined, Outcome
from ._version import __version__
from .client import (
    BrowserHandler,
    Client,
    ElicitationHandler,
    ElicitationRequest,
    ScriptedHandler,
    TaskHandle,
    TerminalHandler,
    UrlElicitationRequest,
    sdk_elicitation_callback,
)
from .forms import (
    BooleanField,
    Choices,
    Email,
    EnumField,
    Field,
    Form,
    FormField,
    MultiEnumField,
    NumberField,
    Option,
    StringField,
    Uri,
)
from .server import (
    AccessToken,
    Context,
    IntrospectionVerifier,
    JwtVerifier,
    Protection,
    Server,
    StateSealer,
    UnsafeUrl,
    UrlElicitation,
    UrlElicitationRequired,
)
from .types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    Implementation,
    ResourceLink,
    TextContent,
    Tool,
    UnknownContent,
)

if TYPE_CHECKING:
    from .client.auth import BearerToken, ClientCredentials, OAuth

_LATER = dict.fromkeys(("BearerToken", "ClientCredentials", "OAuth"), "elicitor.client.auth")
"""Names imported on first use: they need the HTTP client library, which a server never loads."""


def __getattr__(name: str) -> Any:
    if name in _LATER:
        import importlib

        value = getattr(importlib.import_module(_LATER[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'elicitor' has no attribute {name!r}")


__all__ = [
    "Accepted",
    "AccessToken",
    "AudioContent",
    "AuthError",
    "BearerToken",
    "BooleanField",
    "BrowserHandler",
    "CallToolResult",
    "Cancelled",
    "Choices",
    "Client",
    "ClientCapabilityMissing",
    "ClientCredentials",
    "ConnectionClosed",
    "ContentBlock",
    "Context",
    "Declined",
    "ElicitationHandler",
    "ElicitationRequest",
    "ElicitationUnsupported",
    "ElicitorError",
    "Email",
    "EmbeddedResource",
    "EnumField",
    "Field",
    "FieldError",
    "Form",
    "FormDefinitionError",
    "FormField",
    "ImageContent",
    "Implementation",
    "IntrospectionVerifier",
    "InvalidAnswer",
    "InvalidScriptedAnswer",
    "JSONRPCError",
    "JwtVerifier",
    "LegacyRefused",
    "LocalProtocolError",
    "MessageTooLarge",
    "MultiEnumField",
    "NumberField",
    "OAuth",
    "Option",
    "Outcome",
    "OutcomeUnknown",
    "Protection",
    "ProtocolError",
    "RemoteProtocolError",
    "ResourceLink",
    "ScriptedHandler",
    "Server",
    "StateSealer",
    "StringField",
    "TaskCancelled",
    "TaskHandle",
    "TemporarilyUnavailable",
    "TerminalHandler",
    "TextContent",
    "TooManyRounds",
    "Tool",
    "UnknownContent",
    "UnsafeUrl",
    "Uri",
    "UrlElicitation",
    "UrlElicitationRequest",
    "UrlElicitationRequired",
    "__version__",
    "sdk_elicitation_callback",
]
