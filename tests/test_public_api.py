import elicitor


def test_all_is_sorted_and_exported() -> None:
    assert elicitor.__all__ == sorted(elicitor.__all__, key=str.casefold) or elicitor.__all__ == sorted(
        elicitor.__all__
    )
    for name in elicitor.__all__:
        assert hasattr(elicitor, name), name


def test_all_lists_every_public_member() -> None:
    public = {
        name
        for name, value in vars(elicitor).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("elicitor")
    }
    assert public <= set(elicitor.__all__)


# The public API, pinned: adding or removing a name is a decision, made here on purpose.
PUBLIC = [
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


def test_the_public_api_is_exactly_this() -> None:
    assert elicitor.__all__ == PUBLIC


def test_importing_the_package_leaves_the_user_interface_and_http_client_libraries_for_later() -> None:
    """A server imports elicitor without the terminal UI (prompt_toolkit) or the HTTP client (httpx2)."""
    import subprocess
    import sys

    code = "import sys, elicitor; print(sorted(m for m in ('prompt_toolkit', 'httpx2', 'uvicorn') if m in sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_help_on_client_shows_what_the_server_told() -> None:
    """``help(Client)`` documents what a connected client knows about its server, not only its methods."""
    import pydoc

    text = pydoc.plain(pydoc.render_doc(elicitor.Client))
    for name in ("protocol_version", "server_info", "server_capabilities", "instructions", "stateless"):
        documented = getattr(elicitor.Client, name).__doc__
        assert documented, name
        assert f"\n |  {name}\n |      {documented.splitlines()[0]}" in text, name
