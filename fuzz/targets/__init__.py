"""One module per byte-level entry point; each defines ``test_one_input(data)`` and runs under atheris as a script.

Every target asserts a property, not just "no crash": what a peer sent is answered with the spec's error or
refused with a specific exception the caller handles, and the thing under test keeps serving afterwards.
"""

TARGETS = (
    "jsonrpc",
    "session",
    "http_app",
    "sse",
    "client_http",
    "http_response",
    "schema",
    "request_state",
    "urls",
    "meta",
    "auth",
)
"""Every target, by module name (``fuzz.targets.<name>``) and corpus directory (``fuzz/corpus/<name>``)."""
