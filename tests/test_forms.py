"""Forms: built from Python types and raw schemas, emitted per revision, validated on both sides."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal, TypedDict, assert_type

import mcp_types._v2025_11_25 as wire1125
import mcp_types._v2026_07_28 as wire0728
import msgspec
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elicitor import (
    BooleanField,
    Choices,
    ElicitationUnsupported,
    Email,
    EnumField,
    Field,
    Form,
    FormDefinitionError,
    InvalidAnswer,
    MultiEnumField,
    NumberField,
    Option,
    StringField,
    Uri,
)


class Seating(Choices):
    INDOOR = "indoor", "Indoor"
    PATIO = "patio", "Patio"


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Everything:
    name: Annotated[str, Field(title="Name", min_length=1, max_length=20)]
    age: Annotated[int, Field(minimum=0, maximum=150)]
    score: float
    ok: bool
    email: Email
    site: Uri
    day: date
    when: datetime
    seating: Seating
    color: Color
    size: Literal["s", "m", "l"]
    legacy: Annotated[Seating, Field(enum_names=True)]
    tags: Annotated[list[Literal["a", "b", "c"]], Field(min_items=1, max_items=2)]
    places: set[Seating] = field(default_factory=set)
    note: str | None = None


@dataclass
class Address:
    street: str


@dataclass
class Order:
    address: Address


class TestBuilder:
    def test_every_kind_from_a_dataclass(self) -> None:
        schema = Form.of(Everything).schema("2025-11-25")
        props = schema["properties"]
        assert props["name"] == {"type": "string", "title": "Name", "minLength": 1, "maxLength": 20}
        assert props["age"] == {"type": "integer", "minimum": 0, "maximum": 150}
        assert props["score"] == {"type": "number"}
        assert props["ok"] == {"type": "boolean"}
        assert props["email"] == {"type": "string", "format": "email"}
        assert props["site"]["format"] == "uri"
        assert props["day"]["format"] == "date"
        assert props["when"]["format"] == "date-time"
        assert props["seating"] == {
            "type": "string",
            "oneOf": [{"const": "indoor", "title": "Indoor"}, {"const": "patio", "title": "Patio"}],
        }
        assert props["color"] == {"type": "string", "enum": ["red", "blue"]}
        assert props["size"] == {"type": "string", "enum": ["s", "m", "l"]}
        assert props["legacy"] == {
            "type": "string",
            "enum": ["indoor", "patio"],
            "enumNames": ["Indoor", "Patio"],
        }
        assert props["tags"] == {
            "type": "array",
            "minItems": 1,
            "maxItems": 2,
            "items": {"type": "string", "enum": ["a", "b", "c"]},
        }
        assert props["places"] == {
            "type": "array",
            "default": [],
            "items": {"anyOf": [{"const": "indoor", "title": "Indoor"}, {"const": "patio", "title": "Patio"}]},
        }
        assert "note" not in schema["required"]
        assert "places" not in schema["required"]
        assert "name" in schema["required"]

    def test_answer_is_converted_to_python_types(self) -> None:
        value = Form.of(Everything).parse(
            {
                "name": "Ada",
                "age": 36.0,
                "score": 9,
                "ok": False,
                "email": "ada@example.com",
                "site": "https://x.org",
                "day": "2026-01-02",
                "when": "2026-01-02T03:04:05Z",
                "seating": "patio",
                "color": "red",
                "size": "m",
                "legacy": "indoor",
                "tags": ["a"],
                "places": ["indoor", "patio"],
                "unknown": 1,
            }
        )
        assert value.age == 36 and isinstance(value.age, int)
        assert value.score == 9.0 and isinstance(value.score, float)
        assert value.day == date(2026, 1, 2)
        assert value.when == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
        assert value.seating is Seating.PATIO
        assert value.color is Color.RED
        assert value.places == {Seating.INDOOR, Seating.PATIO}
        assert value.note is None

    def test_typeddict_msgspec_and_pydantic(self) -> None:
        class TD(TypedDict, total=False):
            name: str

        class St(msgspec.Struct):
            n: Annotated[int, msgspec.Meta(ge=1, le=3)]
            label: str = "x"

        class Model(pydantic.BaseModel):
            name: str = pydantic.Field(title="Your name", min_length=2)
            count: Annotated[int, pydantic.Field(ge=0)] = 0

        assert Form.of(TD).schema()["properties"] == {"name": {"type": "string"}}
        assert "required" not in Form.of(TD).schema()
        assert Form.of(St).schema()["properties"]["n"] == {"type": "integer", "minimum": 1, "maximum": 3}
        assert Form.of(St).parse({"n": 2}) == St(n=2)
        model_schema = Form.of(Model).schema()
        assert model_schema["properties"]["name"] == {"type": "string", "title": "Your name", "minLength": 2}
        assert model_schema["properties"]["count"] == {"type": "integer", "minimum": 0, "default": 0}
        assert Form.of(Model).parse({"name": "Al"}) == Model(name="Al", count=0)
        with pytest.raises(InvalidAnswer):
            Form.of(Model).parse({"name": "A"})

    @pytest.mark.parametrize(
        ("spec", "answer", "expected"),
        [
            (bool, True, True),
            (int, 3, 3),
            (Color, "blue", Color.BLUE),
            (Literal["x", "y"], "y", "y"),
            (list[Color], ["red"], [Color.RED]),
            (str, "hi", "hi"),
        ],
    )
    def test_single_types(self, spec: Any, answer: Any, expected: Any) -> None:
        form = Form.of(spec)
        assert [f.name for f in form.fields] == ["value"]
        assert form.parse({"value": answer}) == expected

    @pytest.mark.parametrize(
        ("spec", "message"),
        [
            (dict[str, int], "outside the elicitation subset"),
            (list[int], "lists may only hold choices"),
            (Literal[1, 2], "must be strings"),
            (Annotated[int, msgspec.Meta(gt=0)], "exclusive bounds"),
            (Annotated[str, Field(minimum=1)], "does not apply"),
            (int | str, "union of several types"),
        ],
    )
    def test_outside_the_subset_is_refused_at_definition(self, spec: Any, message: str) -> None:
        with pytest.raises(FormDefinitionError, match=message):
            Form.of(spec)

    def test_nested_object_names_the_field(self) -> None:
        with pytest.raises(FormDefinitionError, match=r"Order: field 'address': nested objects"):
            Form.of(Order)

    @pytest.mark.parametrize(
        "name", ["password", "api_key", "apiKey", "github_token", "card_number", "client_secret", "cvv"]
    )
    def test_secrets_are_refused_with_a_pointer_to_url_mode(self, name: str) -> None:
        with pytest.raises(FormDefinitionError, match="URL mode"):
            Form.from_schema({"type": "object", "properties": {name: {"type": "string"}}})

    def test_secret_in_description_and_the_override(self) -> None:
        @dataclass
        class Login:
            user: Annotated[str, Field(description="Your GitHub personal access token")]

        with pytest.raises(FormDefinitionError, match="secret"):
            Form.of(Login)

        @dataclass
        class Budget:
            token_count: Annotated[int, Field(not_secret=True)]

        assert Form.of(Budget).fields[0].name == "token_count"

    def test_unresolvable_annotations_are_a_definition_error(self) -> None:
        class Inner(enum.Enum):
            A = "a"

        @dataclass
        class Local:
            where: Inner

        with pytest.raises(FormDefinitionError, match="module level"):
            Form.of(Local)

    def test_forms_are_cached_per_type(self) -> None:
        assert Form.of(Everything) is Form.of(Everything)


class TestRawSchemas:
    @pytest.mark.parametrize(
        ("schema", "message"),
        [
            ({"type": "array"}, '"type": "object"'),
            ({"type": "object", "$ref": "#/x"}, "flat list"),
            ({"type": "object", "properties": {"a": {"type": "object"}}}, "nested objects"),
            ({"type": "object", "properties": {"a": {"$ref": "#/x"}}}, "'\\$ref' is not allowed"),
            ({"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}}, "unknown format"),
            (
                {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object"}}}},
                "string choices",
            ),
            ({"type": "object", "properties": {"a": {"type": "string", "enum": []}}}, "non-empty"),
            (
                {
                    "type": "object",
                    "properties": {"a": {"type": "string", "enum": ["x"], "enumNames": ["1", "2"]}},
                },
                "one per",
            ),
            (
                {"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "default": "y"}}},
                "default 'y' is invalid",
            ),
            ({"type": "object", "properties": {}, "required": ["b"]}, "do not exist"),
            (
                {"type": "object", "properties": {"a": {"type": "integer", "minimum": 5, "maximum": 1}}},
                "greater",
            ),
            ({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}, "unsupported type"),
        ],
    )
    def test_errors_name_the_field_and_rule(self, schema: dict[str, Any], message: str) -> None:
        with pytest.raises(FormDefinitionError, match=message):
            Form.from_schema(schema)

    def test_pattern_and_annotations_are_ignored(self) -> None:
        form = Form.from_schema(
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x", "examples": ["x"]}}}
        )
        assert form.schema()["properties"]["a"] == {"type": "string"}


class TestRevisions:
    def test_2025_06_18_drops_non_boolean_defaults_and_downgrades_titled_enums(self) -> None:
        form = Form.from_schema(
            {
                "type": "object",
                "properties": {
                    "n": {"type": "integer", "default": 3},
                    "s": {"type": "string", "oneOf": [{"const": "a", "title": "A"}], "default": "a"},
                    "b": {"type": "boolean", "default": True},
                },
            }
        )
        props = form.schema("2025-06-18")["properties"]
        assert props["n"] == {"type": "integer"}
        assert props["s"] == {"type": "string", "enum": ["a"], "enumNames": ["A"]}
        assert props["b"] == {"type": "boolean", "default": True}

    def test_multi_select_is_unsupported_on_2025_06_18(self) -> None:
        with pytest.raises(ElicitationUnsupported, match="2025-11-25"):
            Form.of(list[Color]).schema("2025-06-18")


class TestValidation:
    form = Form.from_schema(
        {
            "type": "object",
            "required": ["n", "e", "m"],
            "properties": {
                "n": {"type": "integer", "minimum": 1, "maximum": 5},
                "x": {"type": "number"},
                "e": {"type": "string", "format": "email"},
                "d": {"type": "string", "format": "date"},
                "t": {"type": "string", "format": "date-time"},
                "u": {"type": "string", "format": "uri"},
                "m": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 1},
                "b": {"type": "boolean", "default": False},
            },
        }
    )

    def test_every_problem_is_reported_per_field(self) -> None:
        with pytest.raises(InvalidAnswer) as info:
            self.form.validate(
                {
                    "n": 9,
                    "x": True,
                    "e": "nope",
                    "d": "2026-13-01",
                    "t": "2026-01-01T00:00:00",
                    "u": "not a uri",
                    "m": ["a", "b"],
                }
            )
        fields = {e.field for e in info.value.errors}
        assert fields == {"n", "x", "e", "d", "t", "u", "m"}

    def test_missing_required_and_not_an_object(self) -> None:
        with pytest.raises(InvalidAnswer, match="n: is required"):
            self.form.validate({"e": "a@b.co", "m": []})
        with pytest.raises(InvalidAnswer, match="must be an object"):
            self.form.validate(["x"])

    def test_defaults_fill_absent_fields_and_nulls_count_as_absent(self) -> None:
        assert self.form.validate({"n": 2.0, "e": "a@b.co", "m": [], "x": None}) == {
            "n": 2,
            "e": "a@b.co",
            "m": [],
            "b": False,
        }


# ---- property tests -----------------------------------------------------------------------------------------

names = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8).filter(
    lambda n: n not in ("otp", "pin", "pwd", "iban", "cvv", "cvc")
)
words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
values = st.lists(st.text("abcdefghij", min_size=1, max_size=5), min_size=1, max_size=5, unique=True)


@st.composite
def form_fields(draw: st.DrawFn, name: str) -> Any:
    kind = draw(
        st.sampled_from(["string", "number", "integer", "boolean", "enum", "titled", "legacy", "multi", "titled-multi"])
    )
    common: dict[str, Any] = {"name": name, "required": draw(st.booleans()), "title": draw(st.none() | words)}
    if kind == "string":
        low = draw(st.none() | st.integers(0, 5))
        high = draw(st.none() | st.integers(low or 0, 10))
        fmt: Any = draw(st.none() | st.sampled_from(["email", "uri", "date", "date-time"]))
        if fmt is not None:
            low = high = None
        return StringField(**common, min_length=low, max_length=high, format=fmt)
    if kind in ("number", "integer"):
        low = draw(st.none() | st.integers(-100, 100))
        high = draw(st.none() | st.integers(low if low is not None else -100, 200))
        return NumberField(**common, integer=kind == "integer", minimum=low, maximum=high)
    if kind == "boolean":
        return BooleanField(**common, default=draw(st.none() | st.booleans()))
    opts = draw(values)
    titled = kind in ("titled", "legacy", "titled-multi")
    options = tuple(Option(v, draw(words) if titled else None) for v in opts)
    if kind in ("enum", "titled", "legacy"):
        style: Any = {"enum": "untitled", "titled": "titled", "legacy": "legacy"}[kind]
        return EnumField(**common, options=options, style=style, default=draw(st.none() | st.sampled_from(opts)))
    high = draw(st.none() | st.integers(1, len(opts)))
    return MultiEnumField(**common, options=options, titled=kind == "titled-multi", max_items=high)


@st.composite
def forms(draw: st.DrawFn) -> Form[dict[str, Any]]:
    field_names = draw(st.lists(names, min_size=1, max_size=6, unique=True))
    # Generated titles may read like "token": the secret check is tested on its own, not here.
    return Form(tuple(draw(form_fields(n)) for n in field_names), check_secrets=False)


def value_for(draw: Any, f: Any) -> Any:
    if isinstance(f, StringField):
        if f.format == "email":
            return draw(st.from_regex(r"\A[a-z]{1,5}@[a-z]{1,5}\.[a-z]{2,3}\Z"))
        if f.format == "uri":
            return draw(st.from_regex(r"\Ahttps://[a-z]{1,8}\.org/[a-z]{0,5}\Z"))
        if f.format == "date":
            return draw(st.dates()).isoformat()
        if f.format == "date-time":
            return draw(st.datetimes(timezones=st.just(UTC))).isoformat()
        return draw(st.text(min_size=f.min_length or 0, max_size=f.max_length if f.max_length is not None else 20))
    if isinstance(f, NumberField):
        low = f.minimum if f.minimum is not None else -1e6
        high = f.maximum if f.maximum is not None else 1e6
        if f.integer:
            return draw(st.integers(int(low), int(high)))
        return draw(st.floats(low, high, allow_nan=False))
    if isinstance(f, BooleanField):
        return draw(st.booleans())
    if isinstance(f, EnumField):
        return draw(st.sampled_from(f.values))
    return draw(st.lists(st.sampled_from(f.values), max_size=f.max_items if f.max_items is not None else 5))


@given(forms(), st.data())
@settings(max_examples=150, deadline=None)
def test_every_value_generated_from_a_form_validates(form: Form[dict[str, Any]], data: st.DataObject) -> None:
    content = {f.name: value_for(data.draw, f) for f in form.fields if f.required or data.draw(st.booleans())}
    clean = form.validate(content)
    assert set(content) <= set(clean)
    # What validates on the server validates again on the client: the cleaned content is a fixed point.
    assert form.validate(clean) == clean


@given(forms())
@settings(max_examples=150, deadline=None)
def test_emitted_requests_are_accepted_by_the_official_wire_models(form: Form[dict[str, Any]]) -> None:
    for revision, wire in (("2025-11-25", wire1125), ("2026-07-28", wire0728)):
        params = {"mode": "form", "message": "m", "requestedSchema": form.schema(revision)}
        parsed = wire.ElicitRequestFormParams.model_validate(params)
        assert parsed.requested_schema.properties.keys() == {f.name for f in form.fields}
        any_primitive = pydantic.TypeAdapter(wire.PrimitiveSchemaDefinition)
        for f in form.fields:
            prop = parsed.requested_schema.properties[f.name]
            expected = {
                StringField: "StringSchema",
                NumberField: "NumberSchema",
                BooleanField: "BooleanSchema",
            }.get(type(f), "")
            if isinstance(f, EnumField):
                expected = {
                    "untitled": "UntitledSingleSelectEnumSchema",
                    "titled": "TitledSingleSelectEnumSchema",
                    "legacy": "LegacyTitledEnumSchema",
                }[f.style]
            elif isinstance(f, MultiEnumField):
                expected = "TitledMultiSelectEnumSchema" if f.titled else "UntitledMultiSelectEnumSchema"
            model = getattr(wire, expected)
            # The property is a valid instance of the variant it claims to be, with no key left unread ...
            instance = model.model_validate(prop)
            assert set(prop) <= {info.alias or name for name, info in model.model_fields.items()}, (
                expected,
                prop,
            )
            assert instance.model_dump(by_alias=True, exclude_none=True) == prop
            # ... and of the revision's PrimitiveSchemaDefinition union.
            any_primitive.validate_python(prop)
    # The raw schema reads back into the same fields: server and client see one form.
    assert Form.from_schema(form.schema(), check_secrets=False).fields == form.fields


@given(forms())
@settings(max_examples=80, deadline=None)
def test_2025_06_18_emission_stays_inside_that_revision(form: Form[dict[str, Any]]) -> None:
    if any(isinstance(f, MultiEnumField) for f in form.fields):
        with pytest.raises(ElicitationUnsupported):
            form.schema("2025-06-18")
        return
    for prop in form.schema("2025-06-18")["properties"].values():
        assert "oneOf" not in prop
        assert prop["type"] in ("string", "number", "integer", "boolean")
        if prop["type"] != "boolean":
            assert "default" not in prop


def test_form_of_keeps_the_answer_type() -> None:
    """``make typecheck`` checks these ``assert_type``s: a form defined once keeps its type for mypy and pyright."""

    @dataclass
    class IssueDetails:
        title: str

    form = Form.of(IssueDetails)
    assert_type(form, Form[IssueDetails])
    assert_type(Form.of(form), Form[IssueDetails])
    assert_type(Form.of({"type": "object", "properties": {}}), Form[dict[str, Any]])
    assert Form.of(form) is form
