"""Resources, resource templates, prompts and completion: registered functions and their wire shapes.

Spec: https://modelcontextprotocol.io/specification/2025-11-25/server/resources, .../server/prompts,
.../server/utilities/completion. A handler may take a :class:`Context` parameter (and ask the person things: on
2026-07-28, ``prompts/get`` and ``resources/read`` may answer ``input_required`` like ``tools/call``).
"""

from __future__ import annotations

import base64
import inspect
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..types import JSONObject

_to_builtins = msgspec.to_builtins
_TEMPLATE_VAR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _context_param(fn: Callable[..., Any], context_type: type) -> tuple[str | None, list[inspect.Parameter]]:
    hints = typing.get_type_hints(fn)
    context = None
    others = []
    for param in inspect.signature(fn).parameters.values():
        hint = hints.get(param.name)
        if isinstance(hint, type) and issubclass(hint, context_type):
            context = param.name
        else:
            others.append(param)
    return context, others


@dataclass(frozen=True, slots=True)
class ResourceDef:
    """A resource at a fixed URI, or a template whose ``{variables}`` become the function's arguments."""

    uri: str
    name: str
    fn: Callable[..., Any]
    title: str | None
    description: str
    mime_type: str | None
    context_param: str | None
    variables: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = field(default=None, compare=False)

    @property
    def is_template(self) -> bool:
        return self.pattern is not None

    def describe(self) -> JSONObject:
        out: JSONObject = {"uriTemplate" if self.is_template else "uri": self.uri, "name": self.name}
        if self.title:
            out["title"] = self.title
        out["description"] = self.description
        if self.mime_type:
            out["mimeType"] = self.mime_type
        return out

    def match(self, uri: str) -> dict[str, str] | None:
        """The template variables if ``uri`` is one of this resource's URIs, else ``None``."""
        if self.pattern is None:
            return {} if uri == self.uri else None
        found = self.pattern.fullmatch(uri)
        return found.groupdict() if found else None

    def contents(self, uri: str, value: Any) -> JSONObject:
        """Turn what the function returned into ``ReadResourceResult``: text, bytes, contents dicts or a list."""
        items = value if isinstance(value, list) else [value]
        contents = []
        for item in items:
            if isinstance(item, str):
                entry: JSONObject = {"uri": uri, "text": item}
            elif isinstance(item, bytes | bytearray):
                entry = {"uri": uri, "blob": base64.b64encode(item).decode()}
            elif isinstance(item, Mapping):
                entry = {"uri": uri, **item}
            else:
                raise TypeError(f"resource {self.name!r} returned {type(item).__name__}; return str, bytes or a dict")
            if self.mime_type and "mimeType" not in entry:
                entry["mimeType"] = self.mime_type
            contents.append(entry)
        return {"contents": contents}


def make_resource(
    fn: Callable[..., Any],
    uri: str,
    *,
    name: str | None,
    title: str | None,
    description: str | None,
    mime_type: str | None,
    context_type: type,
) -> ResourceDef:
    context, params = _context_param(fn, context_type)
    variables = tuple(_TEMPLATE_VAR.findall(uri))
    pattern = None
    if variables:
        missing = set(variables) - {p.name for p in params}
        if missing:
            raise TypeError(f"resource template {uri!r}: the function takes no parameter for {sorted(missing)}")
        regex = "".join(
            f"(?P<{part}>[^/]+)" if index % 2 else re.escape(part)
            for index, part in enumerate(_TEMPLATE_VAR.split(uri))
        )
        pattern = re.compile(regex)
    elif params:
        raise TypeError(f"resource {uri!r} is not a template, so its function takes no arguments (besides Context)")
    return ResourceDef(
        uri=uri,
        name=name or fn.__name__,
        fn=fn,
        title=title,
        description=description if description is not None else (inspect.getdoc(fn) or ""),
        mime_type=mime_type,
        context_param=context,
        variables=variables,
        pattern=pattern,
    )


@dataclass(frozen=True, slots=True)
class PromptDef:
    """A prompt: its arguments (strings) come from the function's parameters."""

    name: str
    fn: Callable[..., Any]
    title: str | None
    description: str | None
    context_param: str | None
    arguments: tuple[tuple[str, bool], ...]  # (name, required)
    argument_descriptions: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> JSONObject:
        out: JSONObject = {"name": self.name}
        if self.title:
            out["title"] = self.title
        if self.description:
            out["description"] = self.description
        out["arguments"] = [
            {"name": name, "required": required, **_maybe("description", self.argument_descriptions.get(name))}
            for name, required in self.arguments
        ]
        return out

    def bind(self, arguments: object) -> dict[str, Any]:
        """Check the arguments (strings, required ones present); raises ``ValueError`` saying what is wrong."""
        arguments = arguments or {}
        if not isinstance(arguments, Mapping):
            raise ValueError("prompt arguments must be an object of strings")
        known = {name for name, _ in self.arguments}
        kwargs: dict[str, Any] = {}
        for name, required in self.arguments:
            value = arguments.get(name)
            if value is None:
                if required:
                    raise ValueError(f"missing required argument {name!r}")
                continue
            if not isinstance(value, str):
                raise ValueError(f"argument {name!r} must be a string")
            kwargs[name] = value
        unknown = set(arguments) - known
        if unknown:
            raise ValueError(f"unknown arguments: {sorted(unknown)}")
        return kwargs

    def result(self, value: Any) -> JSONObject:
        """Turn what the function returned into ``GetPromptResult``: text, content blocks, messages, or a list."""
        items = value if isinstance(value, list) else [value]
        messages = []
        for item in items:
            if isinstance(item, str):
                messages.append({"role": "user", "content": {"type": "text", "text": item}})
            elif isinstance(item, Mapping) and "role" in item:
                messages.append(dict(item))
            elif isinstance(item, msgspec.Struct | Mapping):
                messages.append({"role": "user", "content": _to_builtins(item)})
            else:
                raise TypeError(
                    f"prompt {self.name!r} returned {type(item).__name__}; return text, content or messages"
                )
        result: JSONObject = {"messages": messages}
        if self.description:
            result["description"] = self.description
        return result


def make_prompt(
    fn: Callable[..., Any],
    *,
    name: str | None,
    title: str | None,
    description: str | None,
    argument_descriptions: Mapping[str, str] | None,
    context_type: type,
) -> PromptDef:
    context, params = _context_param(fn, context_type)
    arguments = tuple((p.name, p.default is inspect.Parameter.empty) for p in params)
    return PromptDef(
        name=name or fn.__name__,
        fn=fn,
        title=title,
        description=description if description is not None else inspect.getdoc(fn),
        context_param=context,
        arguments=arguments,
        argument_descriptions=dict(argument_descriptions or {}),
    )


def completion_result(values: list[str]) -> JSONObject:
    """``CompleteResult``: at most 100 values, with the total and whether more exist."""
    return {"completion": {"values": values[:100], "total": len(values), "hasMore": len(values) > 100}}


def _maybe(key: str, value: str | None) -> dict[str, str]:
    return {key: value} if value else {}
