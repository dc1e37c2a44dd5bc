"""What signing in reads from peers: a server's ``WWW-Authenticate`` challenge, an authorization server's redirect,
and (on a protected server) a client's ``Authorization`` header.

Property: :func:`parse_challenge` returns a :class:`Challenge` for any header values, whatever they hold;
:func:`parse_redirect` returns the code only when the ``state`` matches and there is a code, and otherwise raises
:class:`AuthError` and nothing else; :meth:`Protection.check` answers any header with a verdict, never an
exception, and passes the token to the verifier only when it is a ``Bearer`` credential. Spec: basic/authorization
(2025-11-25, 2026-07-28), RFC 6750 §3, RFC 9207, RFC 9728 §5.1.
"""

from __future__ import annotations

import anyio
import atheris

with atheris.instrument_imports(include=["elicitor"]):
    from elicitor import AuthError
    from elicitor.client.auth import Challenge, parse_challenge
    from elicitor.client.auth._headless import parse_redirect
    from elicitor.server.http._auth import AccessToken, Protection
    from fuzz.targets._harness import fuzz


class Recording:
    """A verifier that accepts the token "good" for ada and records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def verify(self, token: str) -> AccessToken | None:
        self.asked.append(token)
        return AccessToken("ada", frozenset({"mcp"})) if token == "good" else None


def TestOneInput(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    header, _, rest = text.partition("\n")
    challenge = parse_challenge([header, rest])
    assert isinstance(challenge, Challenge)
    assert all(isinstance(scope, str) and scope for scope in challenge.scopes)
    state = rest[:16]
    try:
        answer = parse_redirect(header, state)
    except AuthError:
        pass
    else:
        assert answer.code and answer.state == state
    verifier = Recording()
    protection = Protection(verifier, "http://127.0.0.1/mcp", ["https://as.example"], required_scopes=["mcp"])
    verdict = anyio.run(protection.check, header)
    assert isinstance(verdict, AccessToken) or verdict in ("", "invalid_token", "insufficient_scope"), verdict
    assert all(header.strip().lower().startswith("bearer ") for _ in verifier.asked)


if __name__ == "__main__":
    fuzz(TestOneInput)
