"""Tools from typed async functions: the input schema from the signature, arguments validated by msgspec."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from ..types import CallToolResult, JSONObject
from ..types._mcp import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent

_BLOCKS = (TextContent, ImageContent, AudioContent, EmbeddedResource, ResourceLink)

_to_builtins = msgspec.to_builtins
_json = msgspec.json.encode


def Header(name: str) -> msgspec.Meta:
    """Mirror a tool parameter into the ``Mcp-Param-{name}`` HTTP header (2026-07-28, SEP-2243)::

        async def run_query(region: Annotated[str, Header("Region")], query: str) -> str: ...

    Clients then send the value in that header too, so gateways can route on it; the server checks that the
    header matches the body. Only for string, integer and boolean parameters.
    """
    return msgspec.Meta(extra_json_schema={"x-mcp-header": name})


@dataclass(frozen=True, slots=True)
class ToolDef:
    """A registered tool: what ``tools/list`` says of it and how to call it."""

    name: str
    fn: Callable[..., Any]
    description: str | None
    title: str | None
    input_schema: JSONObject
    output_schema: JSONObject | None
    annotations: JSONObject | None
    context_param: str | None
    arguments: type[msgspec.Struct]
    is_async: bool
    task: str = "never"
    """Whether calls run as tasks (2026-07-28 tasks extension): ``never``, ``optional`` or ``required``."""
    defer_task: bool = False
    """The task starts at ``ctx.run_as_task()``, after questions asked in ordinary rounds (else at the call)."""
    scopes: tuple[str, ...] = ()
    """OAuth scopes a caller's token must hold to call it over HTTP with ``auth=`` (403 ``insufficient_scope``)."""

    @property
    def header_params(self) -> dict[str, str]:
        """Parameters mirrored into ``Mcp-Param-*`` headers: parameter name to header name."""
        properties = self.input_schema.get("properties")
        if not isinstance(properties, dict):
            return {}
        return {
            name: schema["x-mcp-header"]
            for name, schema in properties.items()
            if isinstance(schema, dict) and isinstance(schema.get("x-mcp-header"), str)
        }

    def describe(self) -> JSONObject:
        """This tool as ``tools/list`` shows it: name, input schema, and title, description, output schema and
        annotations when it has them."""
        out: JSONObject = {"name": self.name, "inputSchema": self.input_schema}
        if self.title:
            out["title"] = self.title
        if self.description:
            out["description"] = self.description
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if self.annotations:
            out["annotations"] = self.annotations
        return out

    def bind(self, arguments: object) -> dict[str, Any]:
        """Validate ``arguments`` against the signature; returns keyword arguments for the function.

        Raises:
            ValueError: with msgspec's message naming the argument and the problem.
        """
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise ValueError("arguments must be an object")
        try:
            parsed = msgspec.convert(arguments, self.arguments)
        except msgspec.ValidationError as exc:
            raise ValueError(str(exc).replace("$.", "")) from None
        return {f: getattr(parsed, f) for f in self.arguments.__struct_fields__}


def make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    title: str | None,
    description: str | None,
    annotations: JSONObject | None,
    context_type: type,
) -> ToolDef:
    tool_name = name or fn.__name__
    hints = typing.get_type_hints(fn, include_extras=True)
    fields: list[Any] = []
    context_param = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {tool_name!r}: *args and **kwargs cannot be described as tool inputs")
        hint = hints.get(param.name, Any)
        if isinstance(hint, type) and issubclass(hint, context_type):
            context_param = param.name
            continue
        if param.default is inspect.Parameter.empty:
            fields.append((param.name, hint))
        else:
            fields.append((param.name, hint, param.default))
    struct = msgspec.defstruct(f"{tool_name}_arguments", fields, kw_only=True)
    input_schema = _inline(msgspec.json.schema(struct))
    input_schema.pop("title", None)
    returns = hints.get("return")
    output_schema = None
    if _is_structured(returns):
        output_schema = _inline(msgspec.json.schema(returns))
    return ToolDef(
        name=tool_name,
        fn=fn,
        description=description if description is not None else inspect.getdoc(fn),
        title=title,
        input_schema=input_schema,
        output_schema=output_schema,
        annotations=annotations,
        context_param=context_param,
        arguments=struct,
        is_async=inspect.iscoroutinefunction(fn),
    )


def _inline(schema: dict[str, Any]) -> JSONObject:
    """Turn msgspec's ``{"$ref": ..., "$defs": ...}`` into the referenced object schema, keeping other defs."""
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    defs = dict(schema.get("$defs", {}))
    top = dict(defs.pop(ref.rsplit("/", 1)[-1]))
    if defs:
        top["$defs"] = defs
    top.setdefault("properties", {})
    return top


def _is_structured(tp: Any) -> bool:
    if isinstance(tp, type) and issubclass(tp, (*_BLOCKS, CallToolResult)):
        return False  # content, not structured output
    return isinstance(tp, type) and (
        dataclasses.is_dataclass(tp)
        or issubclass(tp, msgspec.Struct)
        or (issubclass(tp, dict) and hasattr(tp, "__required_keys__"))
    )


def to_call_result(value: Any, structured: bool) -> JSONObject:
    """Turn what a tool returned into a ``CallToolResult``.

    ``str`` becomes a text block; content blocks and ``CallToolResult`` pass through; structured values
    (dataclass, Struct, TypedDict, dict) become ``structuredContent`` plus their JSON as text (spec: structured
    output SHOULD also be serialized into a text block); anything else becomes its text.
    """
    if isinstance(value, CallToolResult):
        return typing.cast(JSONObject, _to_builtins(value))
    if value is None:
        return {"content": []}
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}]}
    if isinstance(value, _BLOCKS):
        return {"content": [_to_builtins(value)]}
    if isinstance(value, list) and value and all(isinstance(v, _BLOCKS) for v in value):
        return {"content": [_to_builtins(v) for v in value]}
    if structured or isinstance(value, dict) or dataclasses.is_dataclass(value) or isinstance(value, msgspec.Struct):
        data = _to_builtins(value)
        if isinstance(data, dict):
            return {"content": [{"type": "text", "text": _json(data).decode()}], "structuredContent": data}
    if isinstance(value, bool | int | float):
        return {"content": [{"type": "text", "text": _json(value).decode()}]}
    return {"content": [{"type": "text", "text": _json(_to_builtins(value)).decode()}]}


def error_result(message: str) -> JSONObject:
    """A ``CallToolResult`` with ``isError`` (spec: tool and input-validation failures are results, not errors)."""
    return {"content": [{"type": "text", "text": message}], "isError": True}
