"""The person-facing half of signing in: the loopback redirect receiver, the token file, ``elicitor logout``."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest

from elicitor import AuthError
from elicitor.cli import main as cli
from elicitor.client.auth import FileTokenStore, LoopbackAuthorizer, Tokens

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_the_redirect_with_the_right_state_ends_the_wait_and_nothing_else_does(anyio_backend: str) -> None:
    shown: list[str] = []
    waited: list[bool] = []
    authorizer = LoopbackAuthorizer(write=shown.append, open_browser=False, on_wait=lambda: waited.append(True))
    async with authorizer:
        callback = authorizer.redirect_uri
        assert callback.startswith("http://127.0.0.1:") and callback.endswith("/callback")
        result: list[Any] = []

        async def wait() -> None:
            result.append(await authorizer.authorize("https://auth.example/authorize?x=1", "s1"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            while not waited:
                await anyio.sleep(0.01)
            async with httpx.AsyncClient() as http:
                root = callback.removesuffix("/callback")
                assert (await http.get(f"{root}/other?code=c&state=s1")).status_code == 404
                assert (await http.post(f"{callback}?code=c&state=s1")).status_code == 404
                assert (await http.get(f"{callback}?code=c&state=forged")).status_code == 400
                assert (await http.get(f"{callback}?state=s1")).status_code == 400
                with anyio.fail_after(5):  # raw junk on the port: answered or dropped, never the end of the wait
                    junk = await anyio.connect_tcp("127.0.0.1", int(root.rsplit(":", 1)[1]))
                    await junk.send(b"\x00\xffNOT HTTP\r\n\r\n")
                    await junk.aclose()
                assert not result
                page = await http.get(f"{callback}?code=the-code&state=s1&iss=https%3A%2F%2Fauth.example")
                assert page.status_code == 200 and "close this tab" in page.text
    assert result[0].code == "the-code" and result[0].iss == "https://auth.example"
    assert shown[:2] == ["Sign in to continue, at auth.example:", "  https://auth.example/authorize?x=1"]


async def test_a_refusal_or_silence_ends_the_sign_in_with_an_error(anyio_backend: str) -> None:
    authorizer = LoopbackAuthorizer(write=lambda line: None, open_browser=False, timeout=0.3)
    async with authorizer:
        with pytest.raises(AuthError, match=r"no sign-in within 0\.3 s"):
            await authorizer.authorize("https://auth.example/a", "s")
    authorizer = LoopbackAuthorizer(write=lambda line: None, open_browser=False)
    async with authorizer, anyio.create_task_group() as tg:
        errors: list[AuthError] = []

        async def wait() -> None:
            try:
                await authorizer.authorize("https://auth.example/a", "s")
            except AuthError as exc:
                errors.append(exc)

        tg.start_soon(wait)
        async with httpx.AsyncClient() as http:
            while not errors:
                await http.get(f"{authorizer.redirect_uri}?error=access_denied&state=s")
                await anyio.sleep(0.05)
    assert errors[0].error == "access_denied"


async def test_an_interrupted_wait_keeps_its_listener_until_resumed_or_the_authorizer_goes(anyio_backend: str) -> None:
    """A wait cancelled part-way keeps the loopback listener (a browser on its way back waits in its queue), the
    same ``state`` resumes it there without opening the browser again, and a listener kept for a sign-in that is
    never resumed is closed when its authorizer goes (no socket left behind)."""
    import gc
    import socket

    shown: list[str] = []
    authorizer = LoopbackAuthorizer(write=shown.append, open_browser=False)
    async with authorizer:
        callback = authorizer.redirect_uri
        with anyio.move_on_after(0.2):
            await authorizer.authorize("https://auth.example/a", "kept")
    port = int(callback.split(":")[2].split("/")[0])
    back = socket.create_connection(("127.0.0.1", port), timeout=5)  # the browser comes back: queued, not refused
    back.sendall(f"GET /callback?code=c1&state=kept HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    async with authorizer:
        assert authorizer.redirect_uri == callback
        with anyio.fail_after(10):
            answer = await authorizer.authorize("https://auth.example/a", "kept")
    assert answer.code == "c1"
    assert b"200" in back.recv(4096).split(b"\r\n", 1)[0]
    back.close()
    assert shown.count("  https://auth.example/a") == 2  # the same link shown again

    async with authorizer:
        with anyio.move_on_after(0.2):
            await authorizer.authorize("https://auth.example/b", "left")
    port = int(authorizer.redirect_uri.split(":")[2].split("/")[0])
    socket.create_connection(("127.0.0.1", port), timeout=5).close()  # still kept
    del authorizer
    gc.collect()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)


async def test_the_token_file_is_private_atomic_and_forgiving(anyio_backend: str, tmp_path: Path) -> None:
    path = tmp_path / "conf" / "elicitor" / "tokens.json"
    store = FileTokenStore(path)
    assert await store.load("https://a/mcp") is None
    await store.save("https://a/mcp", Tokens("secret-a", refresh_token="r", issuer="https://as"))
    await store.save("https://b/mcp", Tokens("secret-b"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["tokens.json"]  # no temporary file left behind
    loaded = await store.load("https://a/mcp")
    assert loaded is not None and loaded.refresh_token == "r" and loaded.issuer == "https://as"
    path.chmod(0o644)
    assert await store.load("https://b/mcp") == Tokens("secret-b")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # made private again
    assert await store.delete("https://a/mcp") is True
    assert await store.delete("https://a/mcp") is False
    assert set(json.loads(path.read_text())) == {"https://b/mcp"}
    path.write_text("{not json")
    assert await store.load("https://b/mcp") is None  # unreadable: sign in again, never crash
    path.write_text(json.dumps({"https://c/mcp": {"access_token": 5, "unknown": 1}}))
    assert await store.load("https://c/mcp") is None


def test_logout_forgets_a_servers_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    anyio.run(FileTokenStore().save, "https://a.example/mcp", Tokens("secret"))
    assert cli(["logout", "https://a.example/mcp"]) == 0
    assert "Signed out of https://a.example/mcp" in capsys.readouterr().out
    assert cli(["logout", "https://a.example/mcp"]) == 0
    assert "No sign-in was kept for https://a.example/mcp" in capsys.readouterr().out
    assert "secret" not in (tmp_path / "elicitor" / "tokens.json").read_text()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio
async def test_elicitor_connect_signs_in_through_the_browser_once(anyio_backend: str, tmp_path: Path) -> None:
    """``elicitor connect URL`` to a protected server: the sign-in link is shown, the "browser" follows it (the
    authorization server approves and redirects to the loopback listener), the person answers the tool's question;
    the next run uses the kept tokens and shows no link. ``elicitor logout`` then forgets them."""
    import os
    import re
    import subprocess
    import sys

    from .test_auth_client import deployed

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}

    async with deployed(jwt=True) as (deployment, url):

        def connect() -> subprocess.Popen[str]:
            command = [sys.executable, "-m", "elicitor", "connect", "--ui", "lines", "--no-browser", url]
            return subprocess.Popen(
                command, cwd=root, env=env, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip

        first = connect()
        assert first.stderr is not None

        def sign_in_link() -> str | None:
            assert first.stderr is not None
            for line in first.stderr:
                found = re.search(r"^\s+(http://127\.0\.0\.1:\d+/as/authorize\?\S+)", line)
                if found:
                    return found.group(1)
            return None

        link = await anyio.to_thread.run_sync(sign_in_link)
        assert link is not None and "code_challenge_method=S256" in link
        async with httpx.AsyncClient(follow_redirects=True) as browser:
            page = await browser.get(link)
        assert page.status_code == 200 and "You are signed in" in page.text
        out, rest = await anyio.to_thread.run_sync(lambda: first.communicate("greet\n\nAda\n\n\n", timeout=60))
        assert first.returncode == 0, rest
        assert "Result: hello Ada" in out and "You are signed in." in rest, rest
        kept = json.loads((tmp_path / "elicitor" / "tokens.json").read_text())
        assert set(kept) == {url}
        assert stat.S_IMODE((tmp_path / "elicitor" / "tokens.json").stat().st_mode) == 0o600

        again = connect()
        out, shown = await anyio.to_thread.run_sync(lambda: again.communicate("greet\n\nGrace\n\n\n", timeout=60))
        assert again.returncode == 0, shown
        assert "Sign in" not in shown and "Result: hello Grace" in out, shown
        assert len(deployment.authorizations) == 1

    logout = subprocess.run(
        [sys.executable, "-m", "elicitor", "logout", url], cwd=root, env=env, capture_output=True, text=True
    )
    assert logout.returncode == 0 and f"Signed out of {url}" in logout.stdout


def test_tokens_go_to_the_platform_keyring_when_there_is_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import keyring
    import keyring.backend
    from keyring.backends import fail
    from keyring.errors import PasswordDeleteError

    from elicitor.client.auth import KeyringTokenStore, default_token_store

    class Memory(keyring.backend.KeyringBackend):
        priority = 1.0

        def __init__(self) -> None:
            super().__init__()
            self.entries: dict[tuple[str, str], str] = {}

        def get_password(self, service: str, username: str) -> str | None:
            return self.entries.get((service, username))

        def set_password(self, service: str, username: str, password: str) -> None:
            self.entries[(service, username)] = password

        def delete_password(self, service: str, username: str) -> None:
            if self.entries.pop((service, username), None) is None:
                raise PasswordDeleteError(username)

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    previous = keyring.get_keyring()
    try:
        keyring.set_keyring(fail.Keyring())
        assert isinstance(default_token_store(), FileTokenStore)  # a headless machine: the private file
        memory = Memory()
        keyring.set_keyring(memory)
        store = default_token_store()
        assert isinstance(store, KeyringTokenStore)
        anyio.run(store.save, "https://a.example/mcp", Tokens("secret", refresh_token="r"))
        assert anyio.run(store.load, "https://a.example/mcp") == Tokens("secret", refresh_token="r")
        assert not (tmp_path / "elicitor").exists()  # nothing written to a file
        memory.entries[("elicitor", "https://b.example/mcp")] = "not json"
        assert anyio.run(store.load, "https://b.example/mcp") is None
        assert cli(["logout", "https://a.example/mcp"]) == 0
        assert ("elicitor", "https://a.example/mcp") not in memory.entries
        assert anyio.run(store.delete, "https://a.example/mcp") is False
    finally:
        keyring.set_keyring(previous)


def _until(stream: Any, pattern: str, seen: list[str]) -> str:
    """Read ``stream`` line by line until ``pattern`` matches; its first group."""
    import re

    for line in stream:
        seen.append(line)
        found = re.search(pattern, line)
        if found:
            return found.group(1)
    raise AssertionError(f"{pattern!r} never appeared in:\n" + "".join(seen))


def _sign_in(link: str, user: str) -> str:
    """A person in a browser: open ``elicitor dev-auth``'s sign-in page, type a name, follow the redirects."""
    import html
    import re

    with httpx.Client(follow_redirects=True) as browser:
        page = browser.get(link)
        fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page.text))
        fields = {html.unescape(k): html.unescape(v) for k, v in fields.items()}
        return browser.post(link.split("?")[0], data={**fields, "user": user}).text


@contextmanager
def _protected_example() -> Iterator[tuple[str, int, int]]:
    """``elicitor dev-auth`` and examples/protected_server.py trusting it, as the example's docstring says to run
    them: the MCP endpoint's URL, its port and the authorization server's port."""
    import subprocess
    import sys

    from .replicas import free_port, wait_for_port

    root = Path(__file__).resolve().parent.parent
    auth_port, port = free_port(), free_port()
    commands = [
        [sys.executable, "-m", "elicitor", "dev-auth", "--port", str(auth_port), "--scope", "demo",
         "--scope", "demo:admin"],
        [sys.executable, str(root / "examples" / "protected_server.py"), "--port", str(port),
         "--issuer", f"http://127.0.0.1:{auth_port}"],
    ]  # fmt: skip
    started: list[subprocess.Popen[bytes]] = []
    try:
        for command, listens in zip(commands, (auth_port, port), strict=True):
            process = subprocess.Popen(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            started.append(process)
            wait_for_port(listens, process)
        yield f"http://127.0.0.1:{port}/mcp", port, auth_port
    finally:
        for process in started:
            process.terminate()
        for process in started:
            process.wait(timeout=10)


def test_the_protected_example_the_whole_loop(tmp_path: Path) -> None:
    """examples/protected_server.py with ``elicitor connect``: sign in as grace through the browser, an
    elicitation answered by her, a URL elicitation that mallory's visit cannot complete and grace's does, and a
    tool needing more scope, for which the client asks again."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    with _protected_example() as (url, port, auth_port):
        env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "BROWSER": "/nonexistent/browser"}
        connect = subprocess.Popen(
            [sys.executable, "-m", "elicitor", "connect", "--ui", "lines", "--no-browser", url], cwd=root, env=env,
            text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert connect.stdin is not None and connect.stderr is not None
        seen: list[str] = []
        link = _until(connect.stderr, rf"^\s+(http://127\.0\.0\.1:{auth_port}/authorize\?\S+)", seen)
        assert "You are signed in" in _sign_in(link, "grace")
        connect.stdin.write("whoami\n\nblue\n\nconnect_calendar\ny\n")
        connect.stdin.flush()
        page = _until(connect.stderr, rf"(http://127\.0\.0\.1:{port}/connect/[^\s\u2069]+)", seen)
        assert httpx.get(page, params={"user": "mallory"}).status_code == 403  # not hers to complete
        assert httpx.get(page, params={"user": "grace"}).status_code == 200
        connect.stdin.write("\nadmin_report\n")
        connect.stdin.flush()
        link = _until(connect.stderr, rf"^\s+(http://127\.0\.0\.1:{auth_port}/authorize\?\S+)", seen)
        assert "demo%3Aadmin" in link  # the step-up asks for the tool's scope
        assert "You are signed in" in _sign_in(link, "grace")
        out, rest = connect.communicate("\n", timeout=60)
        shown = "".join(seen) + rest
        assert connect.returncode == 0, shown
        assert "Result: grace likes blue" in out
        assert "Result: grace's calendar is connected" in out
        assert "Result: report for grace: all is well" in out


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_elicitor_proxy_signs_in_to_a_protected_upstream(
    anyio_backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``elicitor proxy URL`` in front of the protected example: the person at the proxy signs in through the link
    it prints on stderr (stdout is the protocol); the client behind it never sees a token."""
    import os
    import sys

    from elicitor import Client, ScriptedHandler

    read, write = os.pipe()
    stderr = None
    try:
        with _protected_example() as (url, _, auth_port):
            env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "BROWSER": "/nonexistent/browser"}
            command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", url]
            seen: list[str] = []
            stderr = os.fdopen(read, "r")
            read = -1

            def person() -> None:
                link = _until(stderr, rf"^\s+(http://127\.0\.0\.1:{auth_port}/authorize\?\S+)", seen)
                assert "You are signed in" in _sign_in(link, "noor")

            handler = ScriptedHandler([{"colour": "green"}])
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, person)
                async with Client.stdio(
                    command, env=env, stderr=write, elicitation=handler, protocol="2025-11-25"
                ) as client:
                    with anyio.fail_after(60):
                        assert (await client.call_tool("whoami")).text == "noor likes green"
            assert url in json.loads((tmp_path / "elicitor" / "tokens.json").read_text())  # kept for the next run
    finally:
        os.close(write)
        if stderr is not None:
            stderr.close()
        elif read != -1:
            os.close(read)
