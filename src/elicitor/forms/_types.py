"""Build forms from Python types: dataclasses, TypedDicts, pydantic models, msgspec Structs, single types."""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from datetime import date, datetime
from typing import Any, Literal, TypeAlias, Union, get_args, get_origin

import msgspec

from .._exceptions import FormDefinitionError
from ..i18n._message import N_, Message
from ._annotations import Field
from ._fields import (
    BooleanField,
    EnumField,
    EnumStyle,
    FormField,
    MultiEnumField,
    NumberField,
    Option,
    StringField,
)
from ._form import Form

try:  # annotated_types ships with pydantic; understood when present, never required.
    import annotated_types as _at
except ImportError:  # pragma: no cover - depends on the environment
    _at = None  # type: ignore[assignment]

_MISSING = dataclasses.MISSING
_cache: dict[Any, Form[Any]] = {}
SINGLE_FIELD = "value"
"""The field name used when a form is a single type (``ctx.elicit("Proceed?", bool)``)."""


def form_from_spec(spec: Any) -> Form[Any]:
    if isinstance(spec, type):  # the usual case, asked for on every ctx.elicit: a class seen before
        try:
            return _cache[spec]
        except (KeyError, TypeError):  # TypeError: a metaclass that makes its classes unhashable
            pass
    if isinstance(spec, Form):
        return spec
    if isinstance(spec, Mapping):
        return Form.from_schema(spec)
    try:
        return _cache[spec]
    except KeyError:
        pass
    except TypeError:  # unhashable
        return _build_form(spec)
    form = _cache[spec] = _build_form(spec)
    return form


def _hints(spec: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(spec, include_extras=True)
    except NameError as exc:
        raise FormDefinitionError(
            N_("cannot resolve the annotations of {spec}: {reason} (define the types it uses at module level)",
               spec=_name(spec), reason=str(exc))
        ) from None  # fmt: skip


def _build_form(spec: Any) -> Form[Any]:
    if isinstance(spec, type) and dataclasses.is_dataclass(spec):
        hints = _hints(spec)
        rows: list[_Row] = []
        for f in dataclasses.fields(spec):
            if not f.init:
                continue
            default = f.default
            if default is _MISSING and f.default_factory is not _MISSING:
                default = f.default_factory()
            rows.append((f.name, hints[f.name], default, None))
        return _object_form(spec, rows, lambda data: spec(**data))
    if isinstance(spec, type) and issubclass(spec, msgspec.Struct):
        hints = _hints(spec)
        rows = []
        for sf in msgspec.structs.fields(spec):
            default = sf.default
            if default is msgspec.NODEFAULT and sf.default_factory is not msgspec.NODEFAULT:
                default = sf.default_factory()
            rows.append((sf.name, hints[sf.name], _MISSING if default is msgspec.NODEFAULT else default, None))
        return _object_form(spec, rows, lambda data: msgspec.convert(data, spec, from_attributes=False))
    if _is_typeddict(spec):
        hints = _hints(spec)
        required_keys = spec.__required_keys__
        rows = [(name, hint, _MISSING, bool(name in required_keys)) for name, hint in hints.items()]
        return _object_form(spec, rows, dict)
    if isinstance(spec, type) and hasattr(spec, "model_fields") and hasattr(spec, "model_validate"):
        return _pydantic_form(spec)
    # A single type: one field named "value"; the answer is the bare value.
    field, convert = _field_for(SINGLE_FIELD, spec, _MISSING, None)
    return Form((field,), lambda data: convert(data[SINGLE_FIELD]) if SINGLE_FIELD in data else None)


_Row: TypeAlias = tuple[str, Any, Any, bool | None]
"""A field to build: name, annotation, default (``_MISSING`` if none), required (``None``: infer)."""


def _object_form(spec: Any, rows: list[_Row], construct: Callable[[dict[str, Any]], Any]) -> Form[Any]:
    fields: list[FormField] = []
    converters: dict[str, Callable[[Any], Any]] = {}
    allow_secret = set()
    for name, hint, default, required in rows:
        try:
            field, convert = _field_for(name, hint, default, required)
        except FormDefinitionError as exc:
            raise FormDefinitionError(N_("{spec}: {reason}", spec=_name(spec), reason=said(exc))) from None
        fields.append(field)
        converters[name] = convert
        if _marker(hint).not_secret:
            allow_secret.add(name)

    converting = [(name, convert) for name, convert in converters.items() if convert is not _identity]

    def build(data: dict[str, Any]) -> Any:
        """The value of ``spec`` from validated content (a dict of its own, which this converts in place)."""
        for name, convert in converting:
            if name in data:
                data[name] = convert(data[name])
        return construct(data)

    try:
        return Form(tuple(fields), build, allow_secret=frozenset(allow_secret))
    except FormDefinitionError as exc:
        raise FormDefinitionError(N_("{spec}: {reason}", spec=_name(spec), reason=said(exc))) from None


def _pydantic_form(model: Any) -> Form[Any]:
    rows: list[_Row] = []
    for name, info in model.model_fields.items():
        hint = info.annotation
        extras = [*info.metadata]
        if info.title or info.description:
            extras.append(Field(title=info.title, description=info.description))
        if extras:
            hint = typing.Annotated[(hint, *extras)]
        default = _MISSING if info.is_required() else info.get_default(call_default_factory=True)
        alias = info.alias or name
        rows.append((alias, hint, default, None))
    return _object_form(model, rows, model.model_validate)


def _field_for(name: str, hint: Any, default: Any, required: bool | None) -> tuple[FormField, Callable[[Any], Any]]:
    base, meta = _unwrap(hint)
    optional = False
    if _is_union(base):
        members = [a for a in get_args(base) if a is not type(None)]
        optional = len(members) < len(get_args(base))
        if len(members) != 1:
            raise _refused(name, N_("a union of several types cannot be a form field"))
        base, more = _unwrap(members[0])
        meta = _merge(meta, more)
    if required is None:
        required = default is _MISSING and not optional
    if default is _MISSING or default is None:
        default = None
    common: dict[str, Any] = {
        "name": name,
        "title": meta.get("title"),
        "description": meta.get("description"),
        "required": required,
    }
    identity: Callable[[Any], Any] = _identity

    if base is bool:
        _only(name, meta, set())
        return BooleanField(**common, default=_wire(default)), identity
    if base is int or base is float:
        _only(name, meta, {"minimum", "maximum"})
        integer = base is int
        field = NumberField(
            **common,
            integer=integer,
            minimum=meta.get("minimum"),
            maximum=meta.get("maximum"),
            default=default,
        )
        return field, (_identity if integer else float)
    if base is str or base is date or base is datetime:
        fmt = meta.get("format")
        convert: Callable[[Any], Any] = identity
        if base is date:
            fmt, convert = "date", date.fromisoformat
        elif base is datetime:
            fmt, convert = "date-time", _parse_datetime
        _only(name, meta, {"min_length", "max_length", "format"})
        field_s = StringField(
            **common,
            min_length=meta.get("min_length"),
            max_length=meta.get("max_length"),
            format=fmt,
            default=_wire(default),
        )
        return field_s, convert
    choice = _choice(name, base)
    if choice is not None:
        options, titled, to_python = choice
        _only(name, meta, {"enum_names"})
        style: EnumStyle = "legacy" if meta.get("enum_names") else ("titled" if titled else "untitled")
        return EnumField(**common, options=options, style=style, default=_wire(default)), to_python
    origin = get_origin(base)
    if origin in (list, set, frozenset, tuple) or base in (list, set, frozenset):
        args = [a for a in get_args(base) if a is not Ellipsis]
        if origin is tuple and len(get_args(base)) != 2:
            raise _refused(name, N_("use tuple[X, ...] for a multi-select"))
        inner = _choice(name, _unwrap(args[0])[0]) if len(args) == 1 else None
        if inner is None:
            raise _refused(
                name,
                N_("lists may only hold choices (Literal strings or an Enum) — arrays of other items are outside the "
                   "elicitation subset"),
            )  # fmt: skip
        options, titled, to_python = inner
        _only(name, meta, {"min_items", "max_items"})
        container: Callable[[Any], Any] = origin or base
        field_m = MultiEnumField(
            **common,
            options=options,
            titled=titled,
            min_items=meta.get("min_items"),
            max_items=meta.get("max_items"),
            default=tuple(_wire(d) for d in default) if default is not None else None,
        )
        return field_m, lambda values: container(to_python(v) for v in values)
    what = getattr(base, "__name__", repr(base))
    if isinstance(base, type) and (dataclasses.is_dataclass(base) or _is_typeddict(base) or issubclass(base, dict)):
        raise _refused(name, N_("nested objects ({type}) are not allowed; forms are flat", type=what))
    raise _refused(
        name,
        N_("type {type} is outside the elicitation subset ({allowed})", type=what,
           allowed="str, int, float, bool, date, datetime, Literal, Enum, list[Literal/Enum]"),
    )  # fmt: skip


def _choice(name: str, base: Any) -> tuple[tuple[Option, ...], bool, Callable[[Any], Any]] | None:
    if get_origin(base) is Literal:
        values = get_args(base)
        if not all(isinstance(v, str) for v in values):
            raise _refused(name, N_("Literal choices must be strings"))
        return tuple(Option(v) for v in values), False, _identity
    if isinstance(base, type) and issubclass(base, enum.Enum):
        options = []
        titled = False
        for member in base:
            if not isinstance(member.value, str):
                raise _refused(
                    name,
                    N_("enum {enum} must have string values (elicitation choices are strings)", enum=base.__name__),
                )
            title = getattr(member, "title", None)
            if not isinstance(title, str):
                title = None
            titled = titled or title is not None
            options.append(Option(member.value, title))
        return tuple(options), titled, base
    return None


def _unwrap(hint: Any) -> tuple[Any, dict[str, Any]]:
    meta: dict[str, Any] = {}
    while get_origin(hint) is typing.Annotated:
        args = get_args(hint)
        hint = args[0]
        for extra in args[1:]:
            meta = _merge(meta, _read_meta(extra))
    return hint, meta


def _read_meta(extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(extra, Field):
        for f in dataclasses.fields(Field):
            value = getattr(extra, f.name)
            if value is not None and value is not False:
                out[f.name] = value
        return out
    if isinstance(extra, msgspec.Meta):
        mapping = {
            "ge": "minimum",
            "le": "maximum",
            "min_length": "min_length",
            "max_length": "max_length",
            "title": "title",
            "description": "description",
        }
        for src, dst in mapping.items():
            value = getattr(extra, src)
            if value is not None:
                out[dst] = value
        if extra.gt is not None or extra.lt is not None:
            raise FormDefinitionError(_EXCLUSIVE)
        return out
    if _at is not None:
        if isinstance(extra, _at.Ge):
            return {"minimum": extra.ge}
        if isinstance(extra, _at.Le):
            return {"maximum": extra.le}
        if isinstance(extra, _at.Interval):
            if extra.gt is not None or extra.lt is not None:
                raise FormDefinitionError(_EXCLUSIVE)
            return {k: v for k, v in (("minimum", extra.ge), ("maximum", extra.le)) if v is not None}
        if isinstance(extra, _at.MinLen):
            return {"min_length": extra.min_length, "min_items": extra.min_length}
        if isinstance(extra, _at.MaxLen):
            return {"max_length": extra.max_length, "max_items": extra.max_length}
        if isinstance(extra, _at.Len):
            found = {"min_length": extra.min_length, "min_items": extra.min_length}
            if extra.max_length is not None:
                found.update(max_length=extra.max_length, max_items=extra.max_length)
            return found
        if isinstance(extra, _at.Gt | _at.Lt):
            raise FormDefinitionError(_EXCLUSIVE)
    return out


def _only(name: str, meta: dict[str, Any], allowed: set[str]) -> None:
    """Refuse constraints that do not apply to the field's kind (a silent no-op would mislead)."""
    general = {"title", "description", "not_secret"}
    # annotated_types length constraints map to both length and item counts; keep the applicable one.
    for pair in (("min_length", "min_items"), ("max_length", "max_items")):
        if pair[0] in meta and pair[1] in meta:
            keep = pair[0] if pair[0] in allowed else pair[1]
            for k in pair:
                if k != keep:
                    meta.pop(k)
    extra = set(meta) - allowed - general
    if extra:
        raise _refused(
            name, N_("{constraints} does not apply to this kind of field", constraints=", ".join(sorted(extra)))
        )


_EXCLUSIVE = N_("exclusive bounds (gt/lt) are not in the elicitation subset; use ge/le")


def _refused(name: str, rule: Message) -> FormDefinitionError:
    """Why the field ``name`` cannot be in a form (English in ``str()``, translated where it is shown)."""
    return FormDefinitionError(N_("field {name}: {rule}", name=repr(name), rule=rule))


def said(exc: BaseException) -> Message | str:
    """What an exception says: its deferred sentence when it was raised with one, else its text."""
    return exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], Message) else str(exc)


def _marker(hint: Any) -> Field:
    for extra in get_args(hint)[1:] if get_origin(hint) is typing.Annotated else ():
        if isinstance(extra, Field):
            return extra
    return Field()


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {**a, **b}


def _is_union(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType)


def _is_typeddict(spec: Any) -> bool:
    return isinstance(spec, type) and issubclass(spec, dict) and hasattr(spec, "__required_keys__")


def _wire(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def _parse_datetime(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))


def _identity(value: Any) -> Any:
    return value


def _name(spec: Any) -> str:
    return getattr(spec, "__name__", repr(spec))
