from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from elicitor import TerminalHandler
from elicitor.testing import connected as connected  # re-exported for the tests

from .replicas import RedisServer

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING = [sys.executable, str(ROOT / "examples" / "everything_server.py"), "--stdio"]
REVISIONS = ["2025-06-18", "2025-11-25", "2026-07-28"]


@pytest.fixture(autouse=True)
def _language_of_the_process() -> Any:
    """Each test starts with no language chosen for the process, and leaves none: ``elicitor --lang`` run in the
    test process (``cli.main``), or the docs' CLI page made there, chooses one for every renderer made afterwards
    (``i18n.use``), which made the pages of a later test speak it whatever their browser asked."""
    from elicitor.i18n import _language

    kept = list(_language._PROCESS)
    _language._PROCESS.clear()
    yield
    _language._PROCESS[:] = kept


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


ASYNCIO_LOOPS = ["asyncio", "uvloop"]


def on_asyncio_loop(request: pytest.FixtureRequest) -> str | tuple[str, dict[str, bool]]:
    """``anyio_backend`` for code written for asyncio, on each of its event loops: asyncio's own, and uvloop's,
    which ``Server.run`` and the command line run on when it is installed (as it is in development). A module
    uses it as ``anyio_backend = pytest.fixture(params=ASYNCIO_LOOPS)(on_asyncio_loop)``."""
    return ("asyncio", {"use_uvloop": True}) if request.param == "uvloop" else "asyncio"


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server shared by one module's tests (a module that must stop or restart one of its own defines
    ``redis`` itself)."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@asynccontextmanager
async def serving(app: Any, **config: Any) -> AsyncIterator[str]:
    """Serve an ASGI app with uvicorn on a free loopback port for the block; yields the MCP endpoint URL.

    ``config``: more of uvicorn's settings (``ssl_certfile`` and ``ssl_keyfile``, say).
    """
    import uvicorn

    from elicitor._net import loopback_socket

    # IPPROTO_TCP named (see loopback_socket): a socket made with protocol 0 leaves TCP_NODELAY off on the accepted
    # connections, and every response uvicorn writes in two pieces waits ~40 ms for a delayed acknowledgement.
    with loopback_socket() as sock:  # closed however the block ends (a failed test too)
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", **config))
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: server.serve(sockets=[sock]))
            with anyio.fail_after(10):
                while not server.started:
                    await anyio.sleep(0.01)
            try:
                yield f"http://127.0.0.1:{port}/mcp"
            finally:
                server.should_exit = True


async def request_body(receive: Any) -> bytes:
    """The whole body of an ASGI request, read from ``receive`` (a test's gateway in front of an app)."""
    body = b""
    while True:
        message = await receive()
        body += bytes(message.get("body", b""))
        if not message.get("more_body"):
            return body


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_ISOLATES = dict.fromkeys(range(0x2066, 0x206A))  # LRI, RLI, FSI, PDI: the terminal's bidi isolates draw nothing


def unisolated(text: str) -> str:
    """The line renderer's output as a person reads it: without the invisible bidi isolates around a server's
    words (``tests/test_i18n.py`` checks they are there)."""
    return text.translate(_ISOLATES)


def scripted_terminal(lines: list[str], *, isolates: bool = False, **options: Any) -> tuple[TerminalHandler, list[str]]:
    """A TerminalHandler fed ``lines`` (EOF after them) that records every prompt and every line it shows, as a
    person reads them (the invisible bidi isolates around a server's words dropped, unless ``isolates``)."""
    shown: list[str] = []
    feed = iter(lines)

    def record(text: str) -> None:
        shown.append(text if isolates else text.translate(_ISOLATES))

    def read(prompt: str) -> str:
        record(prompt)
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    return TerminalHandler(read_line=read, write=record, **options), shown


class Later:
    """What a call started in the background returns: ``await later.value()`` once the test needs it."""

    def __init__(self) -> None:
        self._done = anyio.Event()
        self._value: Any = None

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def value(self, timeout: float = 20) -> Any:
        with anyio.fail_after(timeout):
            await self._done.wait()
        return self._value


def later(tg: anyio.abc.TaskGroup, function: Any, *args: Any) -> Later:
    """Start ``await function(*args)`` in ``tg``; its result arrives in the returned :class:`Later`."""
    result = Later()

    async def run() -> None:
        result._value = await function(*args)
        result._done.set()

    tg.start_soon(run)
    return result


def self_signed(host: str, directory: Path) -> tuple[Path, Path]:
    """A certificate for ``host`` and its key, made up for one test (the browser or client is told to trust it)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file
