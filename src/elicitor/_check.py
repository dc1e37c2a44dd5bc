"""``elicitor check``: is a ``requestedSchema`` (or a Python form type) inside the subset, and for which revisions?

Reads a JSON file (a bare ``requestedSchema``, or ``elicitation/create`` params or request that hold one), ``-``
for standard input, or ``module:attribute`` naming a type ``Form.of`` accepts. Prints what a client will render,
field by field, and which protocol revisions can carry the form. Exit status: 0 inside the subset, 1 outside it
(the error says which field and why), 2 when the input cannot be read.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from ._exceptions import ElicitationUnsupported, FormDefinitionError
from .client._present import hint
from .forms import EnumField, Form, FormField, MultiEnumField
from .i18n import ENGLISH, N_, language
from .types import REV_2025_06_18, REV_2025_11_25, REV_2026_07_28

REVISIONS = (REV_2025_06_18, REV_2025_11_25, REV_2026_07_28)
_TODAY = "today is"
"""The start of a date field's hint that names today's date: about the day the person answers, not the field."""


class _Unreadable(Exception):
    pass


def load(target: str) -> Form[Any]:
    """The form ``target`` names. Raises FormDefinitionError (outside the subset) or _Unreadable."""
    if target == "-" or target.endswith(".json") or Path(target).is_file():
        try:
            text = sys.stdin.read() if target == "-" else Path(target).read_text(encoding="utf-8")
            document = json.loads(text)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _Unreadable(
                N_("cannot read {target} as JSON: {reason}", target=repr(target), reason=str(exc))
            ) from None
        return Form.from_schema(_schema_in(document))
    module_name, colon, attribute = target.partition(":")
    if not colon or not attribute:
        raise _Unreadable(
            N_("{target} is neither a JSON file nor module:attribute (e.g. myapp.forms:Booking)", target=repr(target))
        )
    sys.path.insert(0, ".")
    try:
        spec = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise _Unreadable(N_("cannot load {target}: {reason}", target=repr(target), reason=str(exc))) from None
    finally:
        sys.path.pop(0)
    return Form.of(spec)


def _schema_in(document: object) -> dict[str, Any]:
    """The requestedSchema in a document: the schema itself, or elicitation/create params, or the request."""
    if isinstance(document, dict) and isinstance(document.get("params"), dict):
        document = document["params"]
    if isinstance(document, dict) and isinstance(document.get("requestedSchema"), dict):
        document = document["requestedSchema"]
    if not isinstance(document, dict):
        raise _Unreadable(N_("the JSON must be an object: a requestedSchema, or elicitation/create params holding one"))
    return document


def report(form: Form[Any], out: TextIO) -> None:
    """What a client renders, and which revisions carry the form (with what each leaves out). The verdicts are in
    the person's language; the field-by-field listing stays English, in the words of the schema it describes."""
    t = language()._
    out.write(t("Inside the elicitation schema subset: {n} field(s).", n=str(len(form.fields))) + "\n\n")
    for f in form.fields:
        out.write(f"  {f.name}: {_kind(f)}, {'required' if f.required else 'optional'}\n")
        out.write(f"    shown as: {f.label}\n")
        if f.description:
            out.write(f"    description: {f.description}\n")
        rules = [part for part in hint(f, ENGLISH) if not part.startswith(_TODAY)]
        if rules:
            out.write(f"    accepts: {'; '.join(rules)}\n")
        default = getattr(f, "default", None)
        if default is not None:
            out.write(f"    default: {json.dumps(list(default) if isinstance(default, tuple) else default)}\n")
        if isinstance(f, EnumField | MultiEnumField):
            choices = ", ".join(o.value if o.label == o.value else f"{o.label} (sends {o.value!r})" for o in f.options)
            out.write(f"    choices: {choices}\n")
    out.write("\n" + t("Protocol revisions:") + "\n")
    full = form.schema(REV_2025_11_25)["properties"]
    for revision in REVISIONS:
        try:
            sent = form.schema(revision)["properties"]
        except ElicitationUnsupported as exc:
            out.write("  " + t("{revision}: no: {reason}", revision=revision, reason=_why_not(form, exc)) + "\n")
            continue
        assert isinstance(sent, dict) and isinstance(full, dict)
        dropped = [name for name, field in full.items() if "default" in field and "default" not in sent[name]]
        if dropped:
            line = t(
                "{revision}: yes (defaults of {fields} are not sent: this revision allows them on booleans only)",
                revision=revision,
                fields=", ".join(dropped),
            )
        else:
            line = t("{revision}: yes", revision=revision)
        out.write("  " + line + "\n")


def _why_not(form: Form[Any], exc: ElicitationUnsupported) -> str:
    """Why a revision cannot carry the form, said of the revision: no client is involved in a check (the server's
    own message, meant for a tool's call, speaks of the client)."""
    multi = [f.name for f in form.fields if isinstance(f, MultiEnumField)]
    if not multi:
        return str(exc)
    return language()._(
        "multi-select fields ({fields}) exist from 2025-11-25 on; a tool asking this form of a client "
        "on 2025-06-18 gets ElicitationUnsupported",
        fields=", ".join(multi),
    )


def _kind(f: FormField) -> str:
    if isinstance(f, MultiEnumField):
        return "multi-select"
    if isinstance(f, EnumField):
        return "single-select"
    fmt = getattr(f, "format", None)
    return f"{f.kind} ({fmt})" if fmt else f.kind


def main(target: str, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    try:
        form = load(target)
    except _Unreadable as exc:
        err.write("elicitor check" + language()._(": ") + language().text(exc.args[0]) + "\n")
        return 2
    except FormDefinitionError as exc:
        said = language()._("outside the elicitation schema subset: {reason}", reason=str(exc))
        err.write("elicitor check" + language()._(": ") + said + "\n")
        return 1
    try:
        report(form, out)
    except BrokenPipeError:  # piped into head: the reader has what it wanted
        sys.stderr.close()
    return 0
