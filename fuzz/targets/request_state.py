"""The ``requestState`` opener: whatever a client sends back as the state of a multi-round-trip call.

Property: :meth:`StateSealer.open` raises nothing but :class:`JSONRPCError` -32602 for any token (a string, or any
JSON value), and what it opens is an object; :meth:`AnswerBook.unpack` of any JSON reads
malformed parts as no answers. Spec: 2026-07-28 basic/mrtr ("requestState" is opaque, the server MUST validate it).
"""

from __future__ import annotations

import atheris

with atheris.instrument_imports(include=["elicitor"]):
    import msgspec

    from elicitor import JSONRPCError, StateSealer
    from elicitor.protocol import decode_json
    from elicitor.server._rounds import AnswerBook
    from elicitor.server._sealing import request_binding
    from fuzz.targets._harness import fuzz

sealer = StateSealer(keys=[b"k" * 32], max_size=4096)
BINDING = request_binding("tools/call", {"name": "ask", "arguments": {}}, None)


def TestOneInput(data: bytes) -> None:
    token: object = data.decode("utf-8", "surrogateescape")
    try:
        opened = sealer.open(token, BINDING)
    except JSONRPCError as exc:
        assert exc.code == -32602, exc
    else:  # only a token sealed here for this request opens (the seed corpus has one; forging one is AES-GCM's job)
        assert isinstance(opened, dict) and isinstance(token, str) and token.startswith("e1."), opened
    try:
        value = decode_json(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return
    try:
        sealer.open(value, BINDING)
    except JSONRPCError as exc:
        assert exc.code == -32602, exc
    book = AnswerBook.unpack(value)
    assert all(isinstance(answer, dict) for answer in book.answers.values())
    try:
        sealed = sealer.seal({"answers": book.pack()}, BINDING)
    except JSONRPCError as exc:  # a book too large to carry is refused by name, as documented
        assert exc.code == -32602 and "limit" in exc.message, exc
        return
    assert sealer.open(sealed, BINDING) == {"answers": book.pack()}
    try:  # as the server seals them: the answers compressed
        sealed = sealer.seal({"answers": book.pack(), "memo": {}}, BINDING, compress=("answers",))
    except JSONRPCError as exc:
        assert exc.code == -32602 and "limit" in exc.message, exc
        return
    assert sealer.open(sealed, BINDING) == {"answers": book.pack(), "memo": {}}


if __name__ == "__main__":
    fuzz(TestOneInput)
