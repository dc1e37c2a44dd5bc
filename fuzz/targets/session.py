"""A server session fed a hostile client's lines, then asked a ``ping``: the stdio path without the pipe.

The input is a client's side of a stdio conversation, one message per line (cut by the real
:class:`~elicitor.protocol.LineFramer`), delivered to ``Server.serve`` over the in-memory transport.
Property: the session never raises (``serve`` would end the process on stdio), everything it sends is a JSON-RPC
object whose errors carry a peer's code (never -32603), nothing logs a caught exception, and afterwards it still
answers a ``ping``: the session keeps being served whatever came before.
Spec: basic/index, basic/lifecycle, server/tools, client/elicitation.
"""

from __future__ import annotations

import atheris

with atheris.instrument_imports(include=["elicitor"]):
    import anyio

    from elicitor.protocol import LineFramer
    from elicitor.transports import memory_pair
    from fuzz.targets._harness import build_server, check_no_traceback, check_reply, fuzz, keep, portal

PROBE_ID = "probe-\u2603-after-the-input"
PROBE = b'{"jsonrpc":"2.0","id":"' + PROBE_ID.encode() + b'","method":"ping"}'
MAX_LINES = 48

server = build_server()
_portal = None


async def converse(lines: list[bytes]) -> None:
    """Serve one connection: the lines, then the probe; check every message sent until the probe's answer."""
    server_end, client_end = memory_pair()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, server_end)
            for line in lines:
                await client_end.send(line)
            await client_end.send(PROBE)
            with anyio.fail_after(60):  # a guard against a hang, far above a busy machine's worst case
                while True:
                    message = check_reply(await client_end.receive())
                    if message.get("id") == PROBE_ID and "method" not in message:
                        assert message.get("result") == {}, f"the probe ping was answered with {message}"
                        break
            tg.cancel_scope.cancel()
    finally:
        await client_end.aclose()
        await server_end.aclose()
    check_no_traceback()


def TestOneInput(data: bytes) -> None:
    global _portal
    if _portal is None:
        _portal = keep(portal())
    framer = LineFramer(1 << 16)
    lines = [line for line in framer.feed(data + b"\n") if isinstance(line, bytes)][:MAX_LINES]
    _portal.call(converse, lines)


if __name__ == "__main__":
    fuzz(TestOneInput)
