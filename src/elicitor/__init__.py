"""elicitor: Model Context Protocol elicitation, end to end.

A server asks the person at the client for input in the middle of a tool call with ``await ctx.elicit(...)``; a
client answers through a handler. The same tool code serves protocol revisions 2025-06-18, 2025-11-25 and
2026-07-28. See README.md and docs/architecture.md.
"""

from ._exceptions import (
    ClientCapabilityMissing,
    ConnectionClosed,
    ElicitationUnsupported,
    ElicitorError,
    FieldError,
    FormDefinitionError,
    InvalidAnswer,
    JSONRPCError,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    TooManyRounds,
)
from ._outcomes import Accepted, Cancelled, Declined, Outcome
from ._version import __version__
from .client import Client, ElicitationHandler, ElicitationRequest, ScriptedHandler, TerminalHandler
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
from .server import Context, Server, StateSealer
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
)

__all__ = [
    "Accepted",
    "AudioContent",
    "BooleanField",
    "CallToolResult",
    "Cancelled",
    "Choices",
    "Client",
    "ClientCapabilityMissing",
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
    "InvalidAnswer",
    "JSONRPCError",
    "LocalProtocolError",
    "MultiEnumField",
    "NumberField",
    "Option",
    "Outcome",
    "ProtocolError",
    "RemoteProtocolError",
    "ResourceLink",
    "ScriptedHandler",
    "Server",
    "StateSealer",
    "StringField",
    "TerminalHandler",
    "TextContent",
    "TooManyRounds",
    "Tool",
    "Uri",
    "__version__",
]
