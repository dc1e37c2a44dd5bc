"""A tool's ``inputSchema`` as a form, for ``elicitor connect`` to ask a tool's arguments field by field.

An ``inputSchema`` is any JSON Schema (2026-07-28 allows every 2020-12 keyword; earlier revisions an object schema),
while a form is the elicitation subset: flat primitive fields (spec ``client/elicitation``, "Supported Schema
Types"). Python signatures produce a few shapes outside that subset for fields a form can ask perfectly well, and
this module rewrites exactly those:

- optional values: ``title: str | None = None`` is ``{"anyOf": [{"type": "string"}, {"type": "null"}],
  "default": null}``; other generators write ``oneOf``, ``"type": ["string", "null"]`` or an ``enum`` listing
  ``null``. Each becomes the plain field, not required (a value left empty is left out, or sent as ``null`` when
  the schema requires the key);
- enums: ``{"$ref": "#/$defs/Colour"}`` pointing to ``{"enum": [...]}`` (no ``type``) becomes a string choice, in a
  single field or in the ``items`` of a list.

Anything else outside the subset (nested objects, unions of two real types, integer enums, unknown formats) is left
as it is, so building the form fails and the person types JSON instead: nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._exceptions import FormDefinitionError
from .forms import Form

_DEFINITIONS = ("$defs", "definitions")
_MAX_REF_DEPTH = 8


class _NotAForm(Exception):
    """The schema needs JSON (an unresolvable ``$ref``, say)."""


def argument_form(schema: Mapping[str, Any]) -> tuple[Form[Any], frozenset[str]] | None:
    """The form that asks for a tool's arguments, and the names to send as ``null`` when left empty.

    Returns ``None`` when the schema is not a flat form even after the rewrites above (the caller asks for JSON).
    """
    try:
        rewritten, nulls = _flatten(schema)
        return Form.from_schema(rewritten, check_secrets=False), nulls
    except (_NotAForm, FormDefinitionError):
        return None


def arguments_from(answer: Mapping[str, Any], nulls: frozenset[str]) -> dict[str, Any]:
    """The ``arguments`` to send from a filled form: empty fields left out, or ``null`` where the key is required."""
    arguments = {k: v for k, v in answer.items() if v is not None}
    for name in nulls:
        arguments.setdefault(name, None)
    return arguments


def _flatten(schema: Mapping[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
    if not isinstance(schema, Mapping):
        raise _NotAForm
    definitions: dict[str, Any] = {}
    for key in _DEFINITIONS:
        found = schema.get(key)
        if isinstance(found, Mapping):
            definitions.update({f"#/{key}/{name}": value for name, value in found.items()})
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return dict(schema), frozenset()  # let the form say what is wrong
    fields: dict[str, Any] = {}
    still_required: list[Any] = []
    nulls: set[str] = set()
    for name, prop in properties.items():
        field, nullable = _field(prop, definitions)
        fields[name] = field
        if name in required:
            if nullable:
                nulls.add(name)  # the key must be there, and null is a value it takes: an empty field sends null
            else:
                still_required.append(name)
    rewritten = {k: v for k, v in schema.items() if k not in _DEFINITIONS}
    rewritten["properties"] = fields
    rewritten["required"] = still_required
    return rewritten, frozenset(nulls)


def _field(prop: object, definitions: dict[str, Any]) -> tuple[object, bool]:
    """One property with references resolved and the null alternative taken out; whether null was allowed."""
    if not isinstance(prop, Mapping):
        return prop, False
    prop = _resolve(prop, definitions)
    nullable = False
    for keyword in ("anyOf", "oneOf"):
        branches = prop.get(keyword)
        if not isinstance(branches, list):
            continue
        others = [b for b in branches if not _is_null(b)]
        if len(others) == len(branches) or len(others) != 1 or not isinstance(others[0], Mapping):
            continue  # not "one type or null": a titled enum's oneOf, or a real union (JSON)
        outer = {k: v for k, v in prop.items() if k != keyword}
        prop = {**_resolve(others[0], definitions), **outer}
        nullable = True
        break
    kind = prop.get("type")
    if isinstance(kind, list) and "null" in kind:
        rest = [k for k in kind if k != "null"]
        if len(rest) == 1:
            prop = {**prop, "type": rest[0]}
            nullable = True
    values = prop.get("enum")
    if isinstance(values, list) and None in values:
        prop = {**prop, "enum": [v for v in values if v is not None]}
        nullable = True
    prop = _typed_enum(prop)
    if prop.get("type") == "array" and isinstance(prop.get("items"), Mapping):
        prop = {**prop, "items": _typed_enum(_resolve(prop["items"], definitions))}
    if "default" in prop and prop["default"] is None:
        prop = {k: v for k, v in prop.items() if k != "default"}
    return prop, nullable


def _resolve(prop: Mapping[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """``prop`` with a local ``$ref`` replaced by its definition (whose ``title`` names a type, not the field)."""
    resolved = dict(prop)
    for _ in range(_MAX_REF_DEPTH):
        ref = resolved.get("$ref")
        if ref is None:
            return resolved
        target = definitions.get(ref) if isinstance(ref, str) else None
        if not isinstance(target, Mapping):
            raise _NotAForm
        outer = {k: v for k, v in resolved.items() if k != "$ref"}
        resolved = {**{k: v for k, v in target.items() if k != "title"}, **outer}
    raise _NotAForm


def _typed_enum(prop: dict[str, Any]) -> dict[str, Any]:
    """An ``enum`` of strings without a ``type`` (what an Enum or a ``Literal`` becomes) is a string choice."""
    values = prop.get("enum")
    if "type" not in prop and isinstance(values, list) and values and all(isinstance(v, str) for v in values):
        return {**prop, "type": "string"}
    return prop


def _is_null(branch: object) -> bool:
    return isinstance(branch, Mapping) and branch.get("type") == "null"
