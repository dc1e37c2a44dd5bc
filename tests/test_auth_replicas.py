"""OAuth-protected replicas behind nginx, sharing Redis: ``elicitor serve`` checks tokens of elicitor's development
authorization server (``elicitor dev-auth``), all real processes. A replica dies while a person is signing in at
the browser: what they were doing goes on on another replica, and they sign in once."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import anyio
import pytest

from elicitor import Client
from elicitor.client.auth import LoopbackAuthorizer, OAuth
from elicitor.server import generate_key

from .replicas import MISSING, Deployment, Nginx, RedisServer, Replicas, free_port
from .test_auth_pace import Screen
from .test_dev_auth import person, started

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(bool(MISSING), reason=f"needs {' and '.join(MISSING)} (make test installs them)"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def protected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """Three replicas of ``tests.peers.replica_server`` under ``elicitor serve --auth-issuer``, the tokens' audience
    the balancer's URL (the resource their clients sign in for), behind nginx, with Redis and dev-auth."""
    folder = tmp_path_factory.mktemp("protected")
    auth_port = free_port()
    issuer = f"http://127.0.0.1:{auth_port}"
    dev_auth = [sys.executable, "-m", "elicitor", "dev-auth", "--port", str(auth_port), "--scope", "demo",
                "--scope", "admin"]  # fmt: skip
    with started(dev_auth, auth_port, folder / "auth.log"):
        redis = RedisServer(folder)
        redis.start()
        group = Replicas([], 3, folder, redis=redis.url, keys=generate_key())
        nginx = Nginx(group.ports, folder)
        group.command = [sys.executable, "-m", "elicitor", "serve", "tests.peers.replica_server:server",
                         "--auth-issuer", issuer, "--auth-scope", "demo", "--auth-audience", nginx.url]  # fmt: skip
        try:
            group.start()
            nginx.start()
            yield Deployment(redis, group, nginx)
        finally:
            nginx.stop()
            group.stop()
            redis.stop()


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_replica_killed_while_the_person_signs_in_for_more_scope(protected: Deployment, era: str) -> None:
    """Signed in for ``demo``, the person calls a tool that needs ``admin`` too (403: a step-up). While they are at
    the sign-in page, the replica that served them is killed (on 2025-11-25, the one running their session). Once
    they have signed in, the call goes on on another replica (on 2025-11-25 in a new session: the old one is
    gone) and the tool answers, the person signed in once for the step-up (twice in all, never asked again)."""
    replicas = protected.replicas
    screen = Screen()
    auth = OAuth(LoopbackAuthorizer(write=screen.write, open_browser=False))
    owner: int | None = None
    try:
        with anyio.fail_after(120):  # generous: the session is declared gone within 12 s of the kill
            async with anyio.create_task_group() as tg:

                async def at_the_browser() -> None:
                    await person(await screen.link(1), "ada")
                    await screen.link(2)  # the step-up's link: the person is at the sign-in page
                    assert owner is not None
                    replicas.kill(owner)
                    await person(screen.links[1], "ada")

                tg.start_soon(at_the_browser)
                async with Client.http(protected.nginx.url, auth=auth, protocol=era) as client:
                    served_by = int((await client.call_tool("replica")).text)
                    owner = replicas.pids().index(served_by)
                    result = await client.call_tool("manage")
                    survivor = int((await client.call_tool("replica")).text)
        assert result.text == "managed by ada"
        assert survivor != served_by and survivor in replicas.pids()
        assert len(screen.links) == 2  # signed in once, and once more for admin: never asked again
    finally:
        if owner is not None:
            replicas.start(owner)
