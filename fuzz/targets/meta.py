"""A 2026-07-28 request's ``_meta`` and the shapes of ``inputResponses`` answers, as the server reads them.

Property: :func:`parse_request_meta` raises nothing but :class:`JSONRPCError` -32602 (malformed) or -32022 (an
unsupported revision, with ``data.supported`` and ``data.requested``); what it accepts names a served revision.
:func:`usable_response` decides for any value whether it answers an input request, raising nothing.
Spec: 2026-07-28 basic/index ("_meta"), basic/lifecycle (versions), basic/mrtr ("inputResponses").
"""

from __future__ import annotations

import atheris

with atheris.instrument_imports(include=["elicitor"]):
    import msgspec

    from elicitor import JSONRPCError
    from elicitor.protocol import decode_json, parse_request_meta
    from elicitor.server._rounds import usable_response
    from elicitor.types import STATELESS_REVISIONS
    from fuzz.targets._harness import fuzz

METHODS = ("elicitation/create", "roots/list", "sampling/createMessage", "other/method")


def TestOneInput(data: bytes) -> None:
    try:
        params = decode_json(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return
    try:
        meta = parse_request_meta(params if isinstance(params, dict) else None)
    except JSONRPCError as exc:
        assert exc.code in (-32602, -32022), exc
        if exc.code == -32022:
            assert isinstance(exc.data, dict) and "supported" in exc.data and "requested" in exc.data
    else:
        assert meta.revision in STATELESS_REVISIONS
    responses = params.get("inputResponses") if isinstance(params, dict) else params
    for response in responses.values() if isinstance(responses, dict) else [responses]:
        for method in METHODS:
            assert isinstance(usable_response(method, response), bool)


if __name__ == "__main__":
    fuzz(TestOneInput)
