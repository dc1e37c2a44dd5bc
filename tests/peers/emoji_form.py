"""A form written with joined emoji and flags, asked in this process's terminal in Chinese (the full screen), for
the tests that look at it in a real terminal: who asks, the message, a description long enough to wrap, a text
field, a choice of flags and a yes/no box. ``python tests/peers/emoji_form.py`` under tmux."""

from __future__ import annotations

import sys

import anyio

from elicitor import Form, TerminalHandler
from elicitor.client import ElicitationRequest
from elicitor.types import Implementation

FAMILY = "👨\u200d👩\u200d👧"
SCHEMA = {
    "type": "object",
    "required": ["who"],
    "properties": {
        "who": {
            "type": "string",
            "title": f"{FAMILY} 家庭",
            "description": "🇨🇳🇹🇼 旗帜 🏳️\u200d🌈 说明文字在这里继续写很多字以便换行看看对齐是否正确",
        },
        "flag": {"type": "string", "title": "旗 🇯🇵", "oneOf": [{"const": "cn", "title": "🇨🇳 中国"}]},
        "ok": {"type": "boolean", "title": f"{FAMILY} 好吗"},
    },
}


async def main() -> None:
    request = ElicitationRequest(
        message=f"{FAMILY}{FAMILY} 一家人的问题：请回答。",
        form=Form.from_schema(SCHEMA),
        server=Implementation(name="desk", version="1", title=f"🇨🇳 家庭{FAMILY}服务台"),
    )
    outcome = await TerminalHandler(lang="zh")(request)
    print(f"\n{outcome!r}", file=sys.stderr)
    await anyio.sleep(60)  # the screen stays to be read until the test ends


if __name__ == "__main__":
    anyio.run(main)
