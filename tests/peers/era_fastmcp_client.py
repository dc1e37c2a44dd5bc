"""A client built with an old release of FastMCP (PyPI ``fastmcp`` 2.10.6 or 2.14.5), run in the environment of
the official SDK release it came with, under ``.cache/peers/``, against elicitor's server (``tests/test_eras.py``).

Usage: ``python era_fastmcp_client.py stdio COMMAND...`` or ``python era_fastmcp_client.py http URL``. FastMCP's
client builds a Python type from each ``requestedSchema`` and hands it to the handler, which fills it in: the first
option of a choice, the default of a field that has one, otherwise a fixed value by type. It calls
``test_elicitation`` twice (accepted, then declined) and ``test_elicitation_sep1330_enums`` once, and prints one
JSON object: each call's error flag and text, in order.
"""

import json
import sys
from typing import Any

import anyio
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult

declines = [False, True, False]


def value(field: dict[str, Any]) -> Any:
    if "default" in field:
        return field["default"]
    if "enum" in field:
        return field["enum"][0]
    if "oneOf" in field:
        return field["oneOf"][0]["const"]
    if field.get("type") == "array":
        items = field.get("items", {})
        return [items["enum"][0]] if "enum" in items else [items["anyOf"][0]["const"]]
    return {"string": "ada", "integer": 3, "number": 3.5, "boolean": True}[field.get("type", "string")]


async def answer(message: str, response_type: Any, params: Any, context: Any) -> Any:
    if declines.pop(0):
        return ElicitResult(action="decline")
    properties = params.requestedSchema.get("properties", {})
    return response_type(**{name: value(field) for name, field in properties.items()})


async def main() -> None:
    kind, *target = sys.argv[1:]
    if kind == "stdio":
        from fastmcp.client.transports import StdioTransport

        transport: Any = StdioTransport(target[0], target[1:])
    else:
        from fastmcp.client.transports import StreamableHttpTransport

        transport = StreamableHttpTransport(target[0])
    calls = []
    async with Client(transport, elicitation_handler=answer) as client:
        for name, arguments in (
            ("test_elicitation", {"message": "Who are you?"}),
            ("test_elicitation", {"message": "Who are you?"}),
            ("test_elicitation_sep1330_enums", {}),
        ):
            with anyio.fail_after(60):
                result = await client.call_tool(name, arguments, raise_on_error=False)
            calls.append(
                {"is_error": result.is_error, "text": " ".join(getattr(b, "text", "") for b in result.content)}
            )
    print(json.dumps(calls), flush=True)


if __name__ == "__main__":
    anyio.run(main)
