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
from datetime import date
from pathlib import Path
from typing import Any, TextIO

from ._exceptions import ElicitationUnsupported, FormDefinitionError
from .client._present import hint, printable
from .forms import EnumField, Form, FormField, MultiEnumField
from .i18n import N_, Message, language
from .types import REV_2025_06_18, REV_2025_11_25, REV_2026_07_28

REVISIONS = (REV_2025_06_18, REV_2025_11_25, REV_2026_07_28)


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
    """What a client renders, field by field, and which revisions carry the form (with what each leaves out), in
    the person's language; what the schema itself says (names, titles, descriptions, choices, defaults) as
    written."""
    lang = language()
    t = lang._
    today = t("today is {iso}, {words}", iso=date.today().isoformat(), words=lang.date(date.today()))  # not a rule
    inside = lang.n_(
        "Inside the elicitation schema subset: {n} field.", "Inside the elicitation schema subset: {n} fields.",
        len(form.fields),
    )  # fmt: skip
    out.write(inside + "\n\n")
    for f in form.fields:
        kind = lang.text(_kind(f))
        out.write("  " + (t("{name}: {kind}, required", name=f.name, kind=kind) if f.required else
                          t("{name}: {kind}, optional", name=f.name, kind=kind)) + "\n")  # fmt: skip
        out.write("    " + t("shown as: {label}", label=printable(f.label)) + "\n")
        if f.description:
            out.write("    " + t("description: {text}", text=printable(f.description, newlines=True)) + "\n")
        rules = [part for part in hint(f, lang) if part != today]
        if rules:
            out.write("    " + t("accepts: {rules}", rules=t("; ").join(rules)) + "\n")
        default = getattr(f, "default", None)
        if default is not None:
            shown = json.dumps(list(default) if isinstance(default, tuple) else default, ensure_ascii=False)
            out.write("    " + t("default: {value}", value=shown) + "\n")
        if isinstance(f, EnumField | MultiEnumField):
            choices = t(", ").join(
                printable(o.value)
                if o.label == o.value
                else t("{label} (sends {value})", label=printable(o.label), value=printable(repr(o.value)))
                for o in f.options
            )
            out.write("    " + t("choices: {choices}", choices=choices) + "\n")
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


def _kind(f: FormField) -> Message:
    if isinstance(f, MultiEnumField):
        return N_("multi-select")
    if isinstance(f, EnumField):
        return N_("single-select")
    kinds = {"string": N_("string"), "number": N_("number"), "integer": N_("integer"), "boolean": N_("boolean")}
    fmt = getattr(f, "format", None)
    return N_("{kind} ({format})", kind=kinds[f.kind], format=fmt) if fmt else kinds[f.kind]


def said_in(exc: BaseException) -> str:
    """Why a definition is refused, in the person's language (the library raises it with a deferred sentence)."""
    reason = exc.args[0] if len(exc.args) == 1 else str(exc)
    return language().text(reason) if isinstance(reason, Message) else str(reason)


def main(target: str, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    try:
        form = load(target)
    except _Unreadable as exc:
        err.write("elicitor check" + language()._(": ") + language().text(exc.args[0]) + "\n")
        return 2
    except FormDefinitionError as exc:
        said = language()._("outside the elicitation schema subset: {reason}", reason=said_in(exc))
        err.write("elicitor check" + language()._(": ") + said + "\n")
        return 1
    try:
        report(form, out)
    except BrokenPipeError:  # piped into head: the reader has what it wanted
        sys.stderr.close()
    return 0
