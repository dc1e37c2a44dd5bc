"""A tool's ``inputSchema`` as the arguments form of ``elicitor connect`` (``elicitor._arguments``).

The schemas come from the generators a server author actually uses: this library's ``@server.tool``, pydantic, and
the official MCP Python SDK; plus the other nullable spellings JSON Schema allows. What needs JSON stays JSON.
"""

from __future__ import annotations

import enum
import subprocess
import sys
from typing import Any, Literal

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitor import FormDefinitionError, Server
from elicitor._arguments import argument_form, arguments_from
from elicitor.forms import BooleanField, EnumField, Form, MultiEnumField, NumberField, StringField

from .conftest import ROOT, connected


class Label(enum.Enum):
    BUG = "bug"
    DOCS = "docs"


async def create_issue(
    title: str,
    body: str | None = None,
    priority: int | None = 3,
    weight: float | None = None,
    urgent: bool | None = None,
    label: Label = Label.BUG,
    kind: Literal["task", "story"] = "task",
    area: Literal["ui", "api"] | None = None,
    labels: list[Label] | None = None,
    assignee: str | None = None,  # see the signature below: required, yet it may be null
) -> str:
    return title


class CreateIssue(pydantic.BaseModel):
    title: str
    body: str | None = None
    priority: int | None = 3
    weight: float | None = None
    urgent: bool | None = None
    label: Label = Label.BUG
    kind: Literal["task", "story"] = "task"
    area: Literal["ui", "api"] | None = None
    labels: list[Label] | None = None
    assignee: str | None


async def elicitor_schema() -> dict[str, Any]:
    server = Server("issues")

    @server.tool()
    async def create_issue(
        title: str,
        assignee: str | None,
        body: str | None = None,
        priority: int | None = 3,
        weight: float | None = None,
        urgent: bool | None = None,
        label: Label = Label.BUG,
        kind: Literal["task", "story"] = "task",
        area: Literal["ui", "api"] | None = None,
        labels: list[Label] | None = None,
    ) -> str:
        return title

    async with connected(server) as client:
        (tool,) = await client.list_tools()
    return dict(tool.input_schema)


async def sdk_schema() -> dict[str, Any]:
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("issues")

    @app.tool()
    async def create_issue(
        title: str,
        assignee: str | None,
        body: str | None = None,
        priority: int | None = 3,
        weight: float | None = None,
        urgent: bool | None = None,
        label: Label = Label.BUG,
        kind: Literal["task", "story"] = "task",
        area: Literal["ui", "api"] | None = None,
        labels: list[Label] | None = None,
    ) -> str:
        return title

    (tool,) = await app.list_tools()
    return dict(tool.input_schema)


async def pydantic_schema() -> dict[str, Any]:
    return CreateIssue.model_json_schema()


def fields_of(form: Form[Any]) -> dict[str, Any]:
    return {field.name: field for field in form.fields}


@pytest.mark.anyio
@pytest.mark.parametrize("generator", [elicitor_schema, pydantic_schema, sdk_schema])
async def test_python_signatures_become_ordinary_form_fields(anyio_backend: str, generator: Any) -> None:
    schema = await generator()
    with pytest.raises(FormDefinitionError):  # as generated, outside the subset (anyOf, $ref): JSON before
        Form.from_schema(schema, check_secrets=False)
    flat = argument_form(schema)
    assert flat is not None
    form, nulls = flat
    fields = fields_of(form)
    assert isinstance(fields["title"], StringField) and fields["title"].required
    assert isinstance(fields["body"], StringField) and not fields["body"].required and fields["body"].default is None
    assert isinstance(fields["priority"], NumberField) and fields["priority"].integer
    assert fields["priority"].default == 3 and not fields["priority"].required
    assert isinstance(fields["weight"], NumberField) and not fields["weight"].integer
    assert isinstance(fields["urgent"], BooleanField) and not fields["urgent"].required
    assert isinstance(fields["label"], EnumField) and fields["label"].default == "bug"
    assert {o.value for o in fields["label"].options} == {"bug", "docs"}
    assert isinstance(fields["kind"], EnumField) and {o.value for o in fields["kind"].options} == {"task", "story"}
    assert isinstance(fields["area"], EnumField) and not fields["area"].required
    assert isinstance(fields["labels"], MultiEnumField) and {o.value for o in fields["labels"].options} == {
        "bug",
        "docs",
    }
    # Required yet nullable: asked as an optional field, sent as null when left empty.
    assert isinstance(fields["assignee"], StringField) and not fields["assignee"].required
    assert nulls == {"assignee"}
    # What a person filling only the title sends: the title, and null for the key the schema requires.
    answer = form.validate({"title": "Crash on start", "body": None})
    defaults = {"priority": 3, "label": "bug", "kind": "task"}
    assert arguments_from(answer, nulls) == {"title": "Crash on start", "assignee": None, **defaults}
    filled = form.validate({"title": "t", "assignee": "ada", "labels": ["docs"], "priority": 1, "area": "ui"})
    assert arguments_from(filled, nulls) == {**filled, "assignee": "ada"}


@pytest.mark.parametrize(
    ("prop", "kind", "nullable"),
    [
        ({"type": ["string", "null"]}, StringField, True),
        ({"type": ["null", "integer"], "minimum": 1}, NumberField, True),
        ({"oneOf": [{"type": "number"}, {"type": "null"}]}, NumberField, True),
        ({"anyOf": [{"type": "null"}, {"type": "boolean"}], "default": None}, BooleanField, True),
        ({"enum": ["low", "high", None]}, EnumField, True),
        ({"type": ["string", "null"], "enum": ["low", "high", None]}, EnumField, True),
        ({"anyOf": [{"$ref": "#/definitions/Level"}, {"type": "null"}]}, EnumField, True),
        ({"type": "array", "items": {"$ref": "#/definitions/Level"}}, MultiEnumField, False),
        ({"type": "string", "format": "date"}, StringField, False),
    ],
)
def test_every_nullable_spelling_of_one_type(prop: dict[str, Any], kind: type, nullable: bool) -> None:
    schema = {
        "type": "object",
        "properties": {"x": prop},
        "required": ["x"],
        "definitions": {"Level": {"title": "Level", "enum": ["low", "high"]}},
    }
    flat = argument_form(schema)
    assert flat is not None, prop
    form, nulls = flat
    (field,) = form.fields
    assert isinstance(field, kind)
    assert field.required is not nullable
    assert nulls == ({"x"} if nullable else set())
    if nullable:
        assert arguments_from({"x": None}, nulls) == {"x": None}  # left empty, the required key is sent as null
    if isinstance(field, EnumField):
        assert [o.value for o in field.options] == ["low", "high"]


@pytest.mark.parametrize(
    "prop",
    [
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},  # a real union: which one would "3" be?
        {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
        {"type": ["string", "integer", "null"]},
        {"type": "object", "properties": {"a": {"type": "string"}}},  # nested object
        {"anyOf": [{"type": "object"}, {"type": "null"}]},
        {"enum": [1, 2, 3]},  # integer enum: the subset's enums are strings
        {"$ref": "#/$defs/Missing"},  # unresolvable reference
        {"$ref": "#/$defs/Loop"},  # a reference that never ends
        {"type": "array", "items": {"type": "integer"}},  # a list of numbers
    ],
)
def test_what_really_needs_json_stays_json(prop: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"x": prop}, "$defs": {"Loop": {"$ref": "#/$defs/Loop"}}}
    assert argument_form(schema) is None


def test_a_schema_without_arguments_is_an_empty_form() -> None:
    flat = argument_form({"type": "object"})
    assert flat is not None and flat[0].fields == () and flat[1] == frozenset()
    assert argument_form({"type": "object", "properties": []}) is None  # malformed: not guessed at


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
def test_connect_asks_optional_arguments_field_by_field(protocol: str) -> None:
    """``elicitor connect`` over stdio on a server whose tool takes ``str | None`` and kin: a form, no JSON prompt."""
    lines = [
        "create_issue",
        "Crash on start",  # title (required)
        "",  # body: left empty, so left out
        "",  # priority: keeps its default, 3
        "docs",  # labels: one of the choices
        "create_issue", "Typo", "In the README", "1", "-",  # every optional field given, or left empty with '-'
        "q",
    ]  # fmt: skip
    command = [sys.executable, "-m", "elicitor", "connect", "--ui", "lines", "--protocol", protocol]
    run = subprocess.run(
        [*command, sys.executable, str(ROOT / "examples" / "url_pages.py")],
        input="".join(line + "\n" for line in lines), capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "as a JSON object" not in run.stderr
    shown = run.stderr.replace("\u2068", "").replace("\u2069", "")  # labels in bidi isolates (the server's text)
    assert "body (optional)" in shown and "priority (optional)" in shown
    assert "Result: Filed 'Crash on start' (priority 3, labels: docs)." in run.stdout
    assert "Result: Filed 'Typo' (priority 1, labels: none): In the README" in run.stdout


def test_long_tool_descriptions_wrap_at_word_boundaries_in_the_menu() -> None:
    from elicitor._connect import menu_line
    from elicitor.types import Tool

    about = "Book a table at any restaurant in town, asking the person for the party size, the time and the seating"
    tool = Tool(name="book_table", description=about + "\nSecond line, not shown.", input_schema={"type": "object"})
    lines = menu_line(3, tool, width=60).splitlines()
    assert lines[0].startswith("  3. book_table: Book a table")
    assert all(len(line) <= 59 for line in lines) and len(lines) > 1
    assert all(line.startswith(" " * 17) and not line[17].isspace() for line in lines[1:])  # under the text
    assert " ".join(line.strip() for line in lines) == "3. book_table: " + about  # no word was cut
    assert menu_line(1, Tool(name="x", input_schema={"type": "object"}), width=60) == "  1. x"


def test_a_chinese_description_wraps_by_cells_between_characters() -> None:
    """Chinese has no spaces to break at and each character takes two cells: the menu breaks between characters,
    never before a closing mark, and no line is wider than the terminal (it was one line of 101 cells at 60)."""
    from prompt_toolkit.utils import get_cwidth

    from elicitor._connect import menu_line
    from elicitor.types import Tool

    ask = "为您预订餐厅的座位，需要提供日期、时间、人数以及联系方式，"
    about = ask + "我们会在确认后通过电子邮件通知您预订结果和注意事项。"
    lines = menu_line(2, Tool(name="订餐", description=about, input_schema={"type": "object"}), width=60).splitlines()
    assert lines[0].startswith("  2. 订餐: 为您预订") and len(lines) == 3
    assert all(get_cwidth(line) <= 59 for line in lines)
    assert all(line.startswith(" " * 11) and line[11] not in "，。、" for line in lines[1:])  # under the text
    assert "".join(line.strip() for line in lines) == "2. 订餐: " + about


WRAPPED = st.text(
    st.sampled_from("ab Zé\u0301 中文字，。（）😀 -/"), max_size=200
)  # letters, a combining mark, Chinese with its punctuation, an emoji, spaces


@given(text=WRAPPED, width=st.integers(4, 80))
def test_wrapped_lines_fit_their_cells_and_keep_every_character(text: str, width: int) -> None:
    from prompt_toolkit.utils import get_cwidth

    from elicitor.client._present import wrap

    lines = wrap(text, width, indent="  ")
    assert all(get_cwidth(line) <= width for line in lines)
    assert "".join(line.replace(" ", "") for line in lines) == text.replace(" ", "")
