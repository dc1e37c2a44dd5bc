"""The 2026-07-28 multi-round-trip path on the wire: state sealing, binding, replay and every bad retry."""

from __future__ import annotations

import base64
import hashlib
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from elicitor import Accepted, Context, JSONRPCError, ScriptedHandler, Server, StateSealer
from elicitor.protocol import NotificationReceived, RequestReceived
from elicitor.session import Session, open_session
from elicitor.transports import memory_pair

from .conftest import connected

pytestmark = pytest.mark.anyio

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
clock = [1000.0]
server = Server("mrtr", "1.0", state=StateSealer(ttl=60, clock=lambda: clock[0]))
runs: list[str] = []


@server.tool()
async def hello(ctx: Context, greeting: str = "Hello") -> str:
    outcome = await ctx.elicit("What is your name?", NAME, key="user_name")
    return f"{greeting}, {outcome.data['name']}!" if isinstance(outcome, Accepted) else outcome.action


@server.tool()
async def two_steps(ctx: Context) -> str:
    runs.append("run")
    first = await ctx.elicit("Step 1: name?", NAME, key="step1")
    second = await ctx.elicit("Step 2: name again?", NAME, key="step2")
    return f"{first.action}/{second.action}"


waiting: list[int] = [0]
"""Runs of ``questions`` alive: parked, or running."""


@server.tool()
async def questions(ctx: Context, n: int) -> int:
    waiting[0] += 1
    try:
        return sum([isinstance(await ctx.elicit(f"Question {i}", NAME), Accepted) for i in range(n)])
    finally:
        waiting[0] -= 1


@server.tool()
async def ages(ctx: Context) -> str:
    outcome = await ctx.elicit("Age?", {"type": "object", "properties": {"age": {"type": "integer"}}})
    return f"age {outcome.data['age']}" if isinstance(outcome, Accepted) else outcome.action


stopped: list[str] = []
"""What ``slow_second`` saw happen to it."""


@server.tool()
async def slow_second(ctx: Context) -> str:
    """Asks, then takes its time before asking again (a retry can be cancelled while the run serves it)."""
    await ctx.elicit("Step 1: name?", NAME, key="step1")
    try:
        await anyio.sleep_forever()
    except BaseException:
        stopped.append("cancelled")
        raise
    return "never"


@server.tool()
async def fails_after_an_answer(ctx: Context, code: int) -> str:
    await ctx.elicit("Step 1: name?", NAME, key="step1")
    if code:
        raise JSONRPCError(code, "the tool refused the call")
    raise RuntimeError("the tool broke")


def meta(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}} if capabilities is None else capabilities,
    }


@asynccontextmanager
async def raw() -> AsyncIterator[Session]:
    server_end, client_end = memory_pair()

    async def no_requests(request: RequestReceived) -> dict[str, Any]:
        raise AssertionError(f"a 2026-07-28 server sent a request: {request}")

    async def ignore(note: NotificationReceived) -> None:
        pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, server_end)
        async with open_session(client_end, no_requests, ignore) as session:
            yield session
        tg.cancel_scope.cancel()


async def call(session: Session, name: str, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": extra.pop("arguments", {}), "_meta": meta(), **extra}
    return await session.request("tools/call", params)


async def test_basic_round_trip_and_server_info(anyio_backend: str) -> None:
    async with raw() as s:
        first = await call(s, "hello")
        assert first["resultType"] == "input_required"
        assert first["inputRequests"] == {
            "user_name": {
                "method": "elicitation/create",
                "params": {"mode": "form", "message": "What is your name?", "requestedSchema": NAME},
            }
        }
        assert first["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mrtr"
        done = await call(
            s,
            "hello",
            inputResponses={"user_name": {"action": "accept", "content": {"name": "Ada"}}},
            requestState=first["requestState"],
        )
        assert done["resultType"] == "complete"
        assert done["content"] == [{"type": "text", "text": "Hello, Ada!"}]


async def test_input_responses_on_a_first_call_without_state_are_used(anyio_backend: str) -> None:
    async with raw() as s:
        done = await call(
            s,
            "hello",
            inputResponses={
                "user_name": {"action": "accept", "content": {"name": "Bo"}},
                "extra": {"action": "accept"},
            },
        )
        assert done["content"][0]["text"] == "Hello, Bo!"


async def test_missing_or_malformed_responses_are_asked_again(anyio_backend: str) -> None:
    async with raw() as s:
        first = await call(s, "hello")
        for responses in (
            {},
            {"wrong": {"action": "accept"}},
            {"user_name": "yes"},
            {"user_name": {"action": "maybe"}},
        ):
            again = await call(s, "hello", inputResponses=responses, requestState=first["requestState"])
            assert again["resultType"] == "input_required"
            assert list(again["inputRequests"]) == ["user_name"]


async def test_input_responses_must_be_an_object(anyio_backend: str) -> None:
    async with raw() as s:
        with pytest.raises(JSONRPCError) as info:
            await call(s, "hello", inputResponses=["x"])
        assert info.value.code == -32602


async def test_multi_round_state_evolves_and_earlier_answers_are_kept(anyio_backend: str) -> None:
    runs.clear()
    async with raw() as s:
        r1 = await call(s, "two_steps")
        assert list(r1["inputRequests"]) == ["step1"]
        r2 = await call(
            s,
            "two_steps",
            inputResponses={"step1": {"action": "accept", "content": {"name": "a"}}},
            requestState=r1["requestState"],
        )
        assert list(r2["inputRequests"]) == ["step2"]
        assert r2["requestState"] != r1["requestState"]
        # The client sends only the current round's answer; the first lives in the sealed state.
        r3 = await call(
            s, "two_steps", inputResponses={"step2": {"action": "decline"}}, requestState=r2["requestState"]
        )
        assert r3["content"][0]["text"] == "accept/decline"
    # The run waited between rounds in this process: the tool body ran once.
    assert len(runs) == 1


async def test_rounds_on_different_connections_replay_from_the_sealed_state(anyio_backend: str) -> None:
    """Like replicas behind a load balancer: no round depends on memory of the one before."""
    runs.clear()
    async with raw() as a, raw() as b:
        r1 = await call(a, "two_steps")
        r2 = await call(
            b,
            "two_steps",
            inputResponses={"step1": {"action": "accept", "content": {"name": "a"}}},
            requestState=r1["requestState"],
        )
        assert list(r2["inputRequests"]) == ["step2"]
        # Back on the first connection: its parked run is a round behind this state, so the call replays.
        r3 = await call(a, "two_steps", inputResponses={"step2": {"action": "cancel"}}, requestState=r2["requestState"])
        assert r3["content"][0]["text"] == "accept/cancel"
    assert len(runs) == 3


async def test_a_call_whose_rounds_go_from_replica_to_replica_leaves_one_run_parked_on_each(anyio_backend: str) -> None:
    """Each round that lands where the call's run is not parked replays it there and parks the new run; the run it
    left behind on the other connection is replaced when the call comes back, instead of waiting out its time."""
    answer = {"action": "accept", "content": {"name": "a"}}
    async with raw() as a, raw() as b:
        result = await call(a, "questions", arguments={"n": 8})
        for number in range(1, 9):
            (key,) = result["inputRequests"]
            result = await call(
                (a, b)[number % 2], "questions", arguments={"n": 8}, inputResponses={key: answer},
                requestState=result["requestState"],
            )  # fmt: skip
        assert result["content"][0]["text"] == "8"
        with anyio.fail_after(30):  # a replaced run ends once it is cancelled (generous: a loaded machine)
            while waiting[0] > 1:
                await anyio.sleep(0.01)
        assert waiting[0] == 1  # the run parked on the connection that did not serve the last round
    assert waiting[0] == 0


async def test_retrying_the_same_round_twice(anyio_backend: str) -> None:
    async with raw() as s:
        r1 = await call(s, "two_steps")
        answer = {"step1": {"action": "accept", "content": {"name": "a"}}}
        first = await call(s, "two_steps", inputResponses=answer, requestState=r1["requestState"])
        again = await call(s, "two_steps", inputResponses=answer, requestState=r1["requestState"])
        assert list(first["inputRequests"]) == list(again["inputRequests"]) == ["step2"]
        for state in (first["requestState"], again["requestState"]):
            done = await call(s, "two_steps", inputResponses={"step2": {"action": "decline"}}, requestState=state)
            assert done["content"][0]["text"] == "accept/decline"


def test_answers_pack_compactly_and_round_trip() -> None:
    from elicitor.server._rounds import AnswerBook

    accept: dict[str, Any] = {"action": "accept", "content": {"name": "x"}}
    answers = {"q": accept, **{f"q~{i}": accept for i in range(2, 2001)}, "other": {"action": "decline"}, "z~1": accept}
    book = AnswerBook()
    for key, answer in answers.items():
        book.add(key, answer)
    packed = book.pack()
    assert len(packed["v"]) == 2
    assert packed["k"]["q"] == [0, 2000]  # 2,000 identical answers: one run
    assert AnswerBook.unpack(packed).answers == answers
    assert AnswerBook.unpack({"v": "x"}).answers == {}
    assert AnswerBook.unpack(None).answers == {}
    # Gaps (an occurrence left unanswered) survive, and filling one later re-encodes the runs.
    sparse = AnswerBook()
    sparse.add("r~3", accept)
    assert sparse.pack()["k"]["r"] == [-1, 2, 0, 1]
    sparse.add("r", accept)
    assert sparse.pack()["k"]["r"] == [0, 1, -1, 1, 0, 1]
    assert AnswerBook.unpack(sparse.pack()).answers == {"r": accept, "r~3": accept}
    assert AnswerBook.unpack({"v": [accept], "k": {"r": [0, 10**9]}}).answers == {}


def tamper(token: str) -> str:
    prefix, body = token[:3], token[3:]
    raw_bytes = bytearray(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    raw_bytes[-1] ^= 1
    return prefix + base64.urlsafe_b64encode(bytes(raw_bytes)).decode().rstrip("=")


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (tamper, "integrity"),
        (lambda t: t[:-4], "integrity|malformed"),
        (lambda t: "garbage", "not issued by this server"),
        (lambda t: "e1.!!!", "malformed"),
        (lambda t: 12, "must be a string"),
        (lambda t: "e1." + "A" * 70000, "too large"),
        (lambda t: StateSealer(ttl=60).seal({"a": {}, "m": {}}, b"x"), "unknown key"),
    ],
)
async def test_bad_request_state_is_refused_with_invalid_params(anyio_backend: str, mutate: Any, reason: str) -> None:
    async with raw() as s:
        first = await call(s, "hello")
        with pytest.raises(JSONRPCError, match=reason) as info:
            await call(
                s,
                "hello",
                inputResponses={"user_name": {"action": "decline"}},
                requestState=mutate(first["requestState"]),
            )
        assert info.value.code == -32602


async def test_state_is_bound_to_the_tool_and_its_arguments(anyio_backend: str) -> None:
    async with raw() as s:
        first = await call(s, "hello", arguments={"greeting": "Hi"})
        answer = {"user_name": {"action": "accept", "content": {"name": "Cy"}}}
        for name, arguments in (("hello", {"greeting": "Bye"}), ("ages", {})):
            with pytest.raises(JSONRPCError, match="integrity") as info:
                await call(s, name, arguments=arguments, inputResponses=answer, requestState=first["requestState"])
            assert info.value.code == -32602
        done = await call(
            s,
            "hello",
            arguments={"greeting": "Hi"},
            inputResponses=answer,
            requestState=first["requestState"],
        )
        assert done["content"][0]["text"] == "Hi, Cy!"


async def test_expired_state(anyio_backend: str) -> None:
    async with raw() as s:
        first = await call(s, "hello")
        clock[0] += 61
        try:
            with pytest.raises(JSONRPCError, match="expired"):
                await call(s, "hello", inputResponses={}, requestState=first["requestState"])
        finally:
            clock[0] -= 61


async def test_rotated_keys_still_open_old_tokens() -> None:
    old, new = b"o" * 32, b"n" * 32
    token = StateSealer([old]).seal({"x": 1}, b"bind")
    assert StateSealer([new, old]).open(token, b"bind") == {"x": 1}
    with pytest.raises(JSONRPCError, match="unknown key"):
        StateSealer([new]).open(token, b"bind")


async def test_invalid_content_never_crashes_the_tool(anyio_backend: str) -> None:
    async with raw() as s:
        done = await call(
            s,
            "ages",
            inputResponses={
                next(iter((await call(s, "ages"))["inputRequests"])): {
                    "action": "accept",
                    "content": {"age": "old"},
                }
            },
        )
        assert done["isError"] is True
        assert "age: expected a number" in done["content"][0]["text"]


async def test_no_elicitation_capability_gives_minus_32021(anyio_backend: str) -> None:
    async with raw() as s:
        with pytest.raises(JSONRPCError) as info:
            await s.request("tools/call", {"name": "hello", "arguments": {}, "_meta": meta({})})
        assert info.value.code == -32021
        assert info.value.data == {"requiredCapabilities": {"elicitation": {}}}


async def test_lists_never_return_input_required_and_removed_methods_are_unknown(anyio_backend: str) -> None:
    async with raw() as s:
        listed = await s.request("tools/list", {"_meta": meta()})
        assert listed["resultType"] == "complete"
        assert (listed["ttlMs"], listed["cacheScope"]) == (0, "public")
        for method in ("initialize", "ping", "logging/setLevel"):
            with pytest.raises(JSONRPCError) as info:
                await s.request(method, {"_meta": meta()})
            assert info.value.code == -32601
        discover = await s.request("server/discover", {"_meta": meta()})
        assert discover["supportedVersions"] == ["2026-07-28"]
        with pytest.raises(JSONRPCError) as info:
            await s.request("server/discover", {"_meta": {**meta(), "io.modelcontextprotocol/protocolVersion": "v9"}})
        assert (info.value.code, info.value.data) == (
            -32022,
            {"supported": ["2026-07-28"], "requested": "v9"},
        )


async def test_max_parked_runs_zero_replays_every_round(anyio_backend: str) -> None:
    """Nothing parked: each round re-runs the tool from the sealed state, as a retry on another replica does."""
    replaying = Server("replaying", max_parked_runs=0)
    effects: list[str] = []

    def charge() -> str:
        effects.append("charged")
        return "done"

    @replaying.tool()
    async def once_then_ask(ctx: Context) -> str:
        effects.append("run")
        await ctx.once("charge", charge)
        first = await ctx.elicit("Step 1: name?", NAME, key="step1")
        second = await ctx.elicit("Step 2: name again?", NAME, key="step2")
        effects.append("body")
        return f"{first.action}/{second.action}"

    handler = ScriptedHandler([{"name": "a"}, {"name": "a"}])
    async with connected(replaying, elicitation=handler, protocol="2026-07-28") as client:
        assert (await client.call_tool("once_then_ask")).text == "accept/accept"
    assert effects == ["run", "charged", "run", "run", "body"]  # three runs of the tool, one charge, one finish
    assert len(handler.requests) == 2


many = Server("many", max_parked_runs=0)  # every round replays from the sealed state alone


@many.tool()
async def survey(ctx: Context, questions: int) -> str:
    """Asks ``questions`` distinct questions at once, then one more: the second round's state carries them all."""
    names: list[str] = []

    async def ask(i: int) -> None:
        outcome = await ctx.elicit(f"Name {i}?", NAME, key=f"name-{i}")
        assert isinstance(outcome, Accepted)
        names.append(outcome.data["name"])

    async with anyio.create_task_group() as tg:
        for i in range(questions):
            tg.start_soon(ask, i)
    last = await ctx.elicit("And yours?", NAME, key="last")
    return f"{len(set(names))} names, then {last.action}"


def distinct_name(request: Any) -> dict[str, str]:
    """An answer no other question gets (random-looking, so it compresses no better than real answers)."""
    return {"name": base64.b32encode(request.message.encode()).decode()[::-1]}


async def test_a_call_carries_a_thousand_distinct_answers_in_its_state(anyio_backend: str) -> None:
    """The answers are compressed inside the sealed state: 1,000 distinct ones fit the default 64 KiB (about
    120 characters each uncompressed, which held about 540)."""
    handler = ScriptedHandler(otherwise=distinct_name)
    async with connected(many, elicitation=handler, protocol="2026-07-28") as client:
        result = await client.call_tool("survey", {"questions": 1000})
    assert result.text == "1000 names, then accept"


async def test_a_state_over_the_limit_is_refused_with_invalid_params_saying_why(anyio_backend: str) -> None:
    small = Server("small", max_parked_runs=0, state=StateSealer(max_size=2000))
    small.tool()(survey)
    handler = ScriptedHandler(otherwise=distinct_name)
    async with connected(small, elicitation=handler, protocol="2026-07-28") as client:
        with pytest.raises(JSONRPCError, match="more answers than its requestState may carry") as info:
            await client.call_tool("survey", {"questions": 200})
    assert info.value.code == -32602


def _plaintext(token: str, key: bytes, binding: bytes) -> bytes:
    raw = base64.urlsafe_b64decode(token[3:] + "=" * (-len(token[3:]) % 4))
    return AESGCM(key).decrypt(raw[4:16], raw[16:], binding)


def test_only_the_clients_answers_are_compressed() -> None:
    """What else the state holds (ctx.once values, which may be secret) stays plain JSON: compressed next to text
    the client chooses, its length would give it away."""
    key = b"k" * 32
    sealer = StateSealer(keys=[key])
    chosen = {"v": [f"chosen {i}" for i in range(200)]}  # over COMPRESS_FROM: compressed
    memo = {"secret": "s3cret" * 200}  # larger still, and never compressed
    token = sealer.seal({"a": chosen, "m": memo}, b"bound", compress=("a",))
    plain, separator, packed = _plaintext(token, key, b"bound").partition(b"\x00")
    assert b'"secret":"s3crets3cret' in plain and b"chosen" not in plain and separator and packed
    assert zlib.decompress(packed) == b'{"a":{"v":[' + b",".join(b'"chosen %d"' % i for i in range(200)) + b"]}}"
    assert sealer.open(token, b"bound") == {"a": chosen, "m": memo}


def test_a_few_answers_are_not_compressed_and_the_token_says_so() -> None:
    """Under COMPRESS_FROM bytes zlib costs more than it saves: the answers follow as JSON after a 0x01 flag."""
    key = b"k" * 32
    sealer = StateSealer(keys=[key])
    token = sealer.seal({"a": {"v": ["chosen"]}, "m": {"secret": "s3cret"}}, b"bound", compress=("a",))
    assert _plaintext(token, key, b"bound").endswith(b'}\x01{"a":{"v":["chosen"]}}')
    assert sealer.open(token, b"bound") == {"a": {"v": ["chosen"]}, "m": {"secret": "s3cret"}}
    # Nothing to compress: no flag at all.
    bare = sealer.seal({"m": {}}, b"bound", compress=("a",))
    assert b"\x00" not in _plaintext(bare, key, b"bound") and b"\x01" not in _plaintext(bare, key, b"bound")
    assert sealer.open(bare, b"bound") == {"m": {}}


def test_two_thousand_distinct_answers_fit_the_default_size() -> None:
    """The capacity the threshold must keep: 2,000 different answers to 2,000 different questions (keys as
    ``ctx.elicit`` derives them, answers that compress no better than real ones) in one 64 KiB token."""
    from elicitor.server._rounds import AnswerBook

    book = AnswerBook()
    for i in range(2000):
        digest = hashlib.sha256(f"Name {i}?".encode()).hexdigest()[:16]
        name = base64.b32encode(f"Name {i}?".encode()).decode()[::-1]  # as distinct_name answers
        book.add(f"elicit-{digest}", {"action": "accept", "content": {"name": name}})
    sealer = StateSealer()
    token = sealer.seal({"a": book.pack(), "m": {}, "r": "0" * 24, "n": 2}, b"bound", compress=("a",))
    assert len(token) < 64 * 1024
    assert AnswerBook.unpack(sealer.open(token, b"bound")["a"]).answers == book.answers


@pytest.mark.parametrize(
    "packed",
    [
        b"\x00not zlib", b"\x00" + zlib.compress(b"[1, 2]"), b"\x00" + zlib.compress(b"{")[:-2],
        b"\x01[1, 2]", b"\x01{", b"\x01" + zlib.compress(b"{}"),
    ],
)  # fmt: skip
def test_a_malformed_answers_part_is_refused_with_invalid_params(packed: bytes) -> None:
    key = b"k" * 32
    body = b'{"exp":9999999999,"p":{}}' + packed
    nonce = b"n" * 12
    key_id = hashlib.sha256(key).digest()[:4]
    token = "e1." + base64.urlsafe_b64encode(key_id + nonce + AESGCM(key).encrypt(nonce, body, b"b")).decode()
    with pytest.raises(JSONRPCError, match="malformed") as info:
        StateSealer(keys=[key]).open(token.rstrip("="), b"b")
    assert info.value.code == -32602


async def test_a_retry_the_client_cancels_stops_the_run_serving_it_and_is_not_answered(anyio_backend: str) -> None:
    """A retry whose run waits in this process is served by that run (no task of its own): the peer's
    ``notifications/cancelled`` for it stops the run as it would stop the request's task, and the session goes on."""
    stopped.clear()
    async with raw() as s:
        first = await call(s, "slow_second")
        answer = {"step1": {"action": "accept", "content": {"name": "Ada"}}}
        with anyio.move_on_after(0.5):  # the run waits forever after the answer: the request is cancelled
            await call(s, "slow_second", inputResponses=answer, requestState=first["requestState"])
            raise AssertionError("a run that never ends answered")
        with anyio.fail_after(30):
            while not stopped:
                await anyio.sleep(0.01)
        assert stopped == ["cancelled"]
        again = await call(s, "hello", arguments={"greeting": "Hi"})
        assert again["resultType"] == "input_required"


async def test_a_tool_failing_after_a_resumed_round_answers_that_request(anyio_backend: str) -> None:
    """What a resumed run raises answers the retry that resumed it: its JSON-RPC error as such, anything else as
    the tool's error result."""
    answer = {"step1": {"action": "accept", "content": {"name": "Ada"}}}
    async with raw() as s:
        first = await call(s, "fails_after_an_answer", arguments={"code": -32602})
        with pytest.raises(JSONRPCError) as caught:
            await call(
                s, "fails_after_an_answer", arguments={"code": -32602}, inputResponses=answer,
                requestState=first["requestState"],
            )  # fmt: skip
        assert caught.value.code == -32602 and "the tool refused the call" in str(caught.value)
        first = await call(s, "fails_after_an_answer", arguments={"code": 0})
        result = await call(
            s, "fails_after_an_answer", arguments={"code": 0}, inputResponses=answer,
            requestState=first["requestState"],
        )  # fmt: skip
        assert result["isError"] is True and "the tool broke" in result["content"][0]["text"]
        assert result["resultType"] == "complete" and result["_meta"]["io.modelcontextprotocol/serverInfo"]
