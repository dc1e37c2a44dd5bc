"""A server's ``requestedSchema`` read into a form by the client, and a person's answer validated against it.

The input is two JSON texts on two lines: the schema, then the answer's ``content``.
Property: :meth:`Form.from_schema` (as the client calls it, ``check_secrets=False``) raises nothing but
:class:`FormDefinitionError`; a form it builds renders a schema for every revision that has its field types,
which reads back into the same fields; :meth:`Form.validate` raises nothing but :class:`InvalidAnswer`, what it
accepts it accepts again unchanged (validation is idempotent), and :meth:`Form.parse` takes it.
Spec: 2025-11-25 and 2026-07-28 client/elicitation ("Supported Schema Types", "Response Actions").
"""

from __future__ import annotations

import atheris

with atheris.instrument_imports(include=["elicitor"]):
    import msgspec

    from elicitor import ElicitationUnsupported, FormDefinitionError, InvalidAnswer
    from elicitor.forms import Form
    from elicitor.protocol import decode_json
    from elicitor.types import ALL_REVISIONS
    from fuzz.targets._harness import fuzz


def TestOneInput(data: bytes) -> None:
    schema_text, _, content_text = data.partition(b"\n")
    try:
        schema = decode_json(schema_text)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return
    try:
        form = Form.from_schema(schema if isinstance(schema, dict) else {}, check_secrets=False)
    except FormDefinitionError:
        return
    for revision in ALL_REVISIONS:
        try:
            rendered = form.schema(revision)
        except ElicitationUnsupported:  # multi-select on 2025-06-18: refused by name, as documented
            continue
        again = Form.from_schema(rendered, check_secrets=False)
        assert [f.name for f in again.fields] == [f.name for f in form.fields], (schema, rendered)
    try:
        content = decode_json(content_text)
    except (msgspec.DecodeError, UnicodeDecodeError):
        content = {}
    try:
        valid = form.validate(content)
    except InvalidAnswer:
        return
    assert form.validate(valid) == valid, (schema, content, valid)
    form.parse(valid)


if __name__ == "__main__":
    fuzz(TestOneInput)
