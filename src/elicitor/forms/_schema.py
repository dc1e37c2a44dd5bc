"""Read a raw ``requestedSchema`` into fields, refusing what the restricted subset does not allow.

Structural JSON Schema features (``$ref``, composition, nested objects, arrays of anything but string choices,
unknown formats) are errors that name the field and the rule. Keywords that only annotate (``examples``,
``pattern``, ``$comment``...) are ignored: ``pattern`` appears in one spec example but in no revision's schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._exceptions import FormDefinitionError
from ..i18n._message import N_, Message
from ._fields import (
    STRING_FORMATS,
    BooleanField,
    EnumField,
    FormField,
    MultiEnumField,
    NumberField,
    Option,
    StringField,
)

_STRUCTURAL = frozenset(
    {
        "$ref",
        "$defs",
        "definitions",
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "properties",
        "patternProperties",
        "additionalProperties",
        "dependentSchemas",
        "prefixItems",
        "contains",
        "$dynamicRef",
        "unevaluatedProperties",
        "unevaluatedItems",
    }
)
_TOP_LEVEL_REFUSED = frozenset({"$ref", "$defs", "definitions", "allOf", "anyOf", "oneOf", "not", "if"})


def fields_from_schema(schema: Mapping[str, Any]) -> tuple[FormField, ...]:
    """Turn a ``requestedSchema`` into fields.

    Raises:
        FormDefinitionError: the schema is outside the subset; the message names the field and the rule.
    """
    if not isinstance(schema, Mapping):
        raise FormDefinitionError(N_("requestedSchema must be an object"))
    if schema.get("type") != "object":
        raise FormDefinitionError(N_('requestedSchema must have "type": "object"'))
    for key in _TOP_LEVEL_REFUSED & schema.keys():
        raise FormDefinitionError(
            N_("requestedSchema may not use {key}: forms are a flat list of primitive fields", key=repr(key))
        )
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise FormDefinitionError(N_('requestedSchema "properties" must be an object'))
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise FormDefinitionError(N_('requestedSchema "required" must be a list of property names'))
    unknown = [r for r in required if r not in properties]
    if unknown:
        raise FormDefinitionError(N_('"required" names properties that do not exist: {names}', names=str(unknown)))
    return tuple(_field(str(name), prop, name in required) for name, prop in properties.items())


def _field(name: str, prop: object, required: bool) -> FormField:
    def fail(rule: Message) -> FormDefinitionError:
        return FormDefinitionError(N_("field {name}: {rule}", name=repr(name), rule=rule))

    if not isinstance(prop, Mapping):
        raise fail(N_("a property schema must be an object"))
    for key in _STRUCTURAL & prop.keys():
        raise fail(N_("{key} is not allowed; elicitation fields are flat primitives (string, number, boolean, enum)",
                       key=repr(key)))  # fmt: skip
    kind = prop.get("type")
    common: dict[str, Any] = {
        "name": name,
        "title": _opt_str(prop, "title", fail),
        "description": _opt_str(prop, "description", fail),
        "required": required,
    }
    field: FormField
    if kind == "string":
        if "enum" in prop:
            return _single_enum(prop, common, fail)
        if "oneOf" in prop:
            return _titled_enum(prop, common, fail)
        if "anyOf" in prop:
            raise fail(N_('"anyOf" is only allowed in the "items" of a multi-select'))
        fmt = prop.get("format")
        if fmt is not None and not _known_format(fmt):
            raise fail(N_("unknown format {format}; allowed: email, uri, date, date-time", format=repr(fmt)))
        min_length = _opt_count(prop, "minLength", fail)
        max_length = _opt_count(prop, "maxLength", fail)
        if min_length is not None and max_length is not None and min_length > max_length:
            raise fail(N_("minLength is greater than maxLength"))
        field = StringField(
            **common,
            min_length=min_length,
            max_length=max_length,
            format=fmt,
            default=_opt_str(prop, "default", fail),
        )
    elif kind in ("number", "integer"):
        minimum = _opt_number(prop, "minimum", fail)
        maximum = _opt_number(prop, "maximum", fail)
        if minimum is not None and maximum is not None and minimum > maximum:
            raise fail(N_("minimum is greater than maximum"))
        for bad in ("exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
            if bad in prop:
                raise fail(N_("{key} is not in the elicitation subset; use minimum/maximum", key=repr(bad)))
        field = NumberField(
            **common,
            integer=kind == "integer",
            minimum=minimum,
            maximum=maximum,
            default=_opt_number(prop, "default", fail),
        )
    elif kind == "boolean":
        default = prop.get("default")
        if default is not None and not isinstance(default, bool):
            raise fail(N_("default must be true or false"))
        field = BooleanField(**common, default=default)
    elif kind == "array":
        return _multi_enum(prop, common, fail)
    elif kind == "object":
        raise fail(N_("nested objects are not allowed; elicitation forms are flat"))
    else:
        raise fail(N_("unsupported type {type}; allowed: string, number, integer, boolean, array of choices",
                       type=repr(kind)))  # fmt: skip
    _check_default(field, fail)
    return field


def _known_format(value: object) -> bool:
    """Whether ``value`` names a format of the subset (a server may send any JSON here, even an unhashable ``{}``)."""
    return isinstance(value, str) and value in STRING_FORMATS


def _single_enum(prop: Mapping[str, Any], common: dict[str, Any], fail: Any) -> EnumField:
    values = prop["enum"]
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise fail(N_('"enum" must be a non-empty list of strings'))
    names = prop.get("enumNames")
    if names is not None:
        if not isinstance(names, list) or len(names) != len(values) or not all(isinstance(n, str) for n in names):
            raise fail(N_('"enumNames" must be a list of strings, one per "enum" value'))
        options = tuple(Option(v, n) for v, n in zip(values, names, strict=True))
        field = EnumField(**common, options=options, style="legacy", default=_opt_str(prop, "default", fail))
    else:
        options = tuple(Option(v) for v in values)
        field = EnumField(**common, options=options, style="untitled", default=_opt_str(prop, "default", fail))
    _check_unique(field.values, fail)
    _check_default(field, fail)
    return field


def _const_options(items: object, keyword: str, fail: Any) -> tuple[Option, ...]:
    if not isinstance(items, list) or not items:
        raise fail(N_('"{keyword}" must be a non-empty list of objects with "const" and "title"', keyword=keyword))
    options = []
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("const"), str):
            raise fail(
                N_('each "{keyword}" entry must be an object with a string "const" (and a "title")', keyword=keyword)
            )
        title = item.get("title")
        if title is not None and not isinstance(title, str):
            raise fail(N_('"{keyword}" titles must be strings', keyword=keyword))
        options.append(Option(item["const"], title))
    return tuple(options)


def _titled_enum(prop: Mapping[str, Any], common: dict[str, Any], fail: Any) -> EnumField:
    options = _const_options(prop["oneOf"], "oneOf", fail)
    field = EnumField(**common, options=options, style="titled", default=_opt_str(prop, "default", fail))
    _check_unique(field.values, fail)
    _check_default(field, fail)
    return field


def _multi_enum(prop: Mapping[str, Any], common: dict[str, Any], fail: Any) -> MultiEnumField:
    items = prop.get("items")
    if not isinstance(items, Mapping):
        raise fail(N_('an array field needs "items" with string choices ("enum" or "anyOf" of const/title)'))
    if "anyOf" in items:
        options = _const_options(items["anyOf"], "anyOf", fail)
        titled = True
    elif items.get("type") == "string" and "enum" in items:
        values = items["enum"]
        if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
            raise fail(N_('"items.enum" must be a non-empty list of strings'))
        options = tuple(Option(v) for v in values)
        titled = False
    else:
        raise fail(N_("arrays may only hold string choices: items {enum} or items {any_of}",
                       enum="{type: string, enum: [...]}", any_of="{anyOf: [...]}"))  # fmt: skip
    min_items = _opt_count(prop, "minItems", fail)
    max_items = _opt_count(prop, "maxItems", fail)
    if min_items is not None and max_items is not None and min_items > max_items:
        raise fail(N_("minItems is greater than maxItems"))
    default = prop.get("default")
    if default is not None and (not isinstance(default, list) or not all(isinstance(d, str) for d in default)):
        raise fail(N_("default must be a list of strings"))
    field = MultiEnumField(
        **common,
        options=options,
        titled=titled,
        min_items=min_items,
        max_items=max_items,
        default=tuple(default) if default is not None else None,
    )
    _check_unique(field.values, fail)
    _check_default(field, fail)
    return field


def _check_unique(values: tuple[str, ...], fail: Any) -> None:
    if len(set(values)) != len(values):
        raise fail(N_("choices must be unique"))


def _check_default(field: FormField, fail: Any) -> None:
    from ._fields import Problem

    if field.default is None:
        return
    value = list(field.default) if isinstance(field.default, tuple) else field.default
    try:
        field.check(value)
    except Problem as exc:
        raise fail(N_("default {value} is invalid: {reason}", value=repr(value), reason=exc.message)) from None


def _opt_str(prop: Mapping[str, Any], key: str, fail: Any) -> str | None:
    value = prop.get(key)
    if value is not None and not isinstance(value, str):
        raise fail(N_('"{key}" must be a string', key=key))
    return value


def _opt_count(prop: Mapping[str, Any], key: str, fail: Any) -> int | None:
    value = prop.get(key)
    if value is None:
        return None
    # float(value) would overflow on a huge integer: only floats are asked whether they are whole.
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise fail(N_('"{key}" must be a non-negative whole number', key=key))
    if isinstance(value, float) and not value.is_integer():
        raise fail(N_('"{key}" must be a non-negative whole number', key=key))
    return int(value)


def _opt_number(prop: Mapping[str, Any], key: str, fail: Any) -> float | None:
    value = prop.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(N_('"{key}" must be a number', key=key))
    return value
