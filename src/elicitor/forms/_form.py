"""``Form``: a validated, renderable elicitation form, and the conversion of answers to Python values."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast, overload

import msgspec

from .._exceptions import ElicitationUnsupported, FieldError, FormDefinitionError, InvalidAnswer
from .._sentences import MULTI_SELECT, said
from ..i18n._message import N_, Message
from ..types import REV_2025_06_18, REV_2025_11_25, JSONObject, JSONValue
from ._fields import FormField, MultiEnumField, Problem
from ._secrets import secret_reason

T = TypeVar("T")
_S = TypeVar("_S")
_canonical = msgspec.json.Encoder(order="sorted").encode
_exact = msgspec.json.Encoder().encode
"""The cache key of a schema keeps its properties' order: the order is the form's, so two schemas that differ only
in it are two forms (with sorted keys, the second would be shown in the first one's order)."""
_CACHE_SIZE = 256
_schema_cache: dict[tuple[bytes, bool], Form[dict[str, Any]]] = {}
_from_spec: Callable[[Any], Form[Any]] | None = None


class Form(Generic[T]):
    """An elicitation form: flat fields of the spec's restricted subset, and how to turn an answer into ``T``.

    Build one with :meth:`of` from a Python type (dataclass, TypedDict, pydantic model, msgspec Struct, or a
    single type such as ``bool``, an Enum or a ``Literal``) or from a raw ``requestedSchema`` dict. Forms are
    immutable; :meth:`of` caches per type, so defining a form costs once.

    The same :meth:`validate` runs on both sides: the client checks the person's answer before sending it, the
    server checks what arrived before the tool sees it.
    """

    __slots__ = ("_build", "_by_name", "_digests", "_schemas", "fields")

    def __init__(
        self,
        fields: tuple[FormField, ...],
        build: Callable[[dict[str, Any]], T] | None = None,
        *,
        check_secrets: bool = True,
        allow_secret: frozenset[str] = frozenset(),
    ) -> None:
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise FormDefinitionError(N_("duplicate field names in form: {names}", names=str(names)))
        if check_secrets:
            for f in fields:
                if f.name in allow_secret:
                    continue
                reason = secret_reason(f.name, f.title, f.description)
                if reason:
                    raise FormDefinitionError(
                        N_("field {name} looks like it asks for a secret ({reason}). Form mode must not be used for "
                           "passwords, API keys, tokens or payment details: use URL mode (ctx.elicit_url) so the "
                           "secret never passes through the client. If this is a false positive, annotate the field "
                           "with Field(not_secret=True).", name=repr(f.name), reason=repr(reason))
                    )  # fmt: skip
        self.fields = fields
        self._by_name = {f.name: f for f in fields}
        self._build: Callable[[dict[str, Any]], T] = build if build is not None else cast(Any, dict)
        self._schemas: dict[str, JSONObject] = {}
        self._digests: dict[str, str] = {}

    # ---- construction ---------------------------------------------------------------------------------------

    @overload
    @classmethod
    def of(cls, spec: type[_S]) -> Form[_S]: ...
    @overload
    @classmethod
    def of(cls, spec: Form[_S]) -> Form[_S]: ...
    @overload
    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> Form[dict[str, Any]]: ...
    @overload
    @classmethod
    def of(cls, spec: object) -> Form[Any]: ...

    @classmethod
    def of(cls, spec: Any) -> Form[Any]:
        """The form for ``spec``: a type, a raw ``requestedSchema`` mapping, or a ``Form`` (returned as is).

        Typed like ``ctx.elicit``: ``Form.of(IssueDetails)`` is a ``Form[IssueDetails]``, so a form defined once
        keeps its answer type wherever it is used.

        Raises:
            FormDefinitionError: the type or schema is outside the restricted subset, or asks for a secret.
        """
        global _from_spec
        if _from_spec is None:  # imported here once: _types builds on this module
            from ._types import form_from_spec

            _from_spec = form_from_spec
        return _from_spec(spec)

    @classmethod
    def from_schema(cls, schema: Mapping[str, Any], *, check_secrets: bool = True) -> Form[dict[str, Any]]:
        """Read a raw ``requestedSchema``; answers are plain dicts of validated values.

        ``check_secrets=False`` is for the receiving client, which renders what it was sent.
        """
        # Servers ask the same questions again and again: parse each distinct schema once (bounded cache).
        key = (_exact(schema), check_secrets)
        form = _schema_cache.get(key)
        if form is None:
            from ._schema import fields_from_schema  # here, not per call: an import statement costs a microsecond

            if len(_schema_cache) >= _CACHE_SIZE:
                _schema_cache.clear()
            form = _schema_cache[key] = Form(fields_from_schema(schema), check_secrets=check_secrets)
        return form

    # ---- what goes on the wire --------------------------------------------------------------------------------

    def schema(self, revision: str = REV_2025_11_25) -> JSONObject:
        """The ``requestedSchema`` for ``revision``.

        On 2025-06-18, defaults are sent only for booleans and titled enums go as legacy ``enumNames``, as that
        revision's schema allows.

        Raises:
            ElicitationUnsupported: a multi-select field on 2025-06-18, which has no way to express it.
        """
        cached = self._schemas.get(revision)
        if cached is not None:
            return cached
        if revision == REV_2025_06_18:
            multi = [f.name for f in self.fields if isinstance(f, MultiEnumField)]
            if multi:
                raise ElicitationUnsupported(said(MULTI_SELECT, fields=", ".join(multi)))
        schema: JSONObject = {
            "type": "object",
            "properties": {f.name: f.to_schema(revision) for f in self.fields},
        }
        required: list[JSONValue] = [f.name for f in self.fields if f.required]
        if required:
            schema["required"] = required
        self._schemas[revision] = schema
        return schema

    def digest(self, message: str) -> str:
        """A short digest of the question (message and schema), stable across processes and versions."""
        digest = self._digests.get(message)
        if digest is None:
            blob = _canonical([message, self.schema(REV_2025_11_25)])
            digest = hashlib.sha256(blob).hexdigest()[:16]
            if len(self._digests) >= _CACHE_SIZE:
                self._digests.clear()
            self._digests[message] = digest
        return digest

    # ---- answers -------------------------------------------------------------------------------------------

    def field(self, name: str) -> FormField:
        """The field called ``name`` (``KeyError`` if the form has none)."""
        return self._by_name[name]

    def with_defaults(self, content: Mapping[str, Any]) -> dict[str, Any]:
        """``content`` with each absent field that has a schema default filled in."""
        out = dict(content)
        for f in self.fields:
            if f.name not in out and f.default is not None:
                out[f.name] = list(f.default) if isinstance(f.default, tuple) else f.default
        return out

    def validate(self, content: object) -> dict[str, JSONValue]:
        """Check an accepted answer against the form and return the cleaned content.

        Unknown keys are dropped; a ``null`` for an optional field counts as absent; absent fields with a default
        get it; whole-number floats for integer fields become ints.

        Raises:
            InvalidAnswer: with one :class:`FieldError` per problem.
        """
        if type(content) is not dict and not isinstance(content, Mapping):  # a dict, as decoded: no ABC check
            raise InvalidAnswer([_error(None, N_("accepted content must be an object"))])
        errors: list[FieldError] = []
        out: dict[str, Any] = {}
        for f in self.fields:
            value = content.get(f.name)
            if value is None:
                if f.default is not None:
                    out[f.name] = list(f.default) if isinstance(f.default, tuple) else f.default
                elif f.required:
                    errors.append(_error(f.name, N_("is required")))
                continue
            try:
                out[f.name] = f.check(value)
            except Problem as exc:
                errors.append(_error(f.name, exc.message))
        if errors:
            raise InvalidAnswer(errors)
        return out

    def parse(self, content: object) -> T:
        """Validate ``content`` and build the Python value (the dataclass, model, Enum member, ...).

        Raises:
            InvalidAnswer: the content does not satisfy the form (or the target type's own validation).
        """
        clean = self.validate(content)
        try:
            return self._build(clean)
        except (ValueError, TypeError) as exc:
            raise InvalidAnswer([FieldError(None, str(exc))]) from exc

    def __repr__(self) -> str:
        return f"Form({', '.join(f'{f.name}:{f.kind}' for f in self.fields)})"


def _error(name: str | None, message: Message | str) -> FieldError:
    return FieldError(name, str(message), message if isinstance(message, Message) else None)
