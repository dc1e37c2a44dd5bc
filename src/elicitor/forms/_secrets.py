"""The form-mode secret rule.

Spec (2025-11-25 and 2026-07-28, client/elicitation "Form Mode Security"): servers MUST NOT request passwords,
API keys, access tokens or payment credentials through form mode; they MUST use URL mode, so that the secret
never passes through the client. A field whose name, title or description reads like one of those is refused when
the form is defined; ``Field(not_secret=True)`` overrides a false positive, on that field only.
"""

from __future__ import annotations

import re

_WORD_SPLIT = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|[_\-./]+")
_SECRET = re.compile(
    r"\b("
    r"password|passwd|passphrase|passcode|pwd|"
    r"api ?key|apikey|access ?key|secret( key)?|client secret|"
    r"(access |auth |bearer |refresh |api |session )?token|"
    r"credit ?card|card ?number|cvv|cvc|security code|iban|"
    r"private key|ssh key|otp|one time (pass)?code|pin( code)?"
    r")s?\b"
)


def secret_reason(*texts: str | None) -> str | None:
    """Return the phrase that makes these texts look like a request for a secret, or ``None``."""
    for text in texts:
        if not text:
            continue
        words = _WORD_SPLIT.sub(" ", text).lower()
        match = _SECRET.search(words)
        if match:
            return match.group(0)
    return None
