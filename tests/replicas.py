"""Real components for the replica tests: redis-server, uvicorn replicas as separate processes, nginx in front.

Each helper starts one real process on a free loopback port, waits until it serves, and stops it (the whole
process group) on exit. The nginx configuration is ``deploy/nginx.conf`` itself with the upstream ports and the
listen port put in, run from a test's temporary folder as its header says, so the tests run what users deploy.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
REDIS = shutil.which("redis-server")
MISSING = [name for name, path in (("nginx", NGINX), ("redis-server", REDIS)) if path is None]
"""What `make test` would have installed; the replica tests skip, saying so, when it is not there."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes] | None = None, *, timeout: float = 30.0) -> None:
    """Until something accepts connections on ``port`` (or the process that should have died)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"the process for port {port} exited with {process.returncode}") from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on port {port} after {timeout} s") from None
            time.sleep(0.05)


def one_response(sock: socket.socket) -> bytes:
    """One whole HTTP/1.1 response read from ``sock`` (its body as long as Content-Length says), or what came before
    the connection ended (``b""`` if it was reset or closed at once): a test that stops a process between two
    requests on one connection asserts on what this returns."""
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    except ConnectionResetError:
        return data
    return head + b"\r\n\r\n" + body


def _stop(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    if process is None or process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


class RedisServer:
    """``redis-server`` without persistence on a loopback port: a restart loses everything, as such a Redis does."""

    def __init__(self, folder: Path, *, appendonly: bool = False) -> None:
        self.port = free_port()
        self.folder = folder
        self.appendonly = appendonly
        """``appendonly yes``: every write logged to disk, so a restart keeps the data."""
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert REDIS is not None
        command = [REDIS, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        command += ["--appendonly", "yes" if self.appendonly else "no"]
        with (self.folder / "redis.log").open("ab") as log:
            self._process = subprocess.Popen(command, cwd=self.folder, stdout=log, stderr=log, start_new_session=True)
        wait_for_port(self.port, self._process)

    def stop(self) -> None:
        _stop(self._process)

    def restart(self) -> None:
        self.stop()
        self.start()


class Replicas:
    """N replicas of one server, each in its own process, sharing a Redis and the state keys.

    ``command`` starts one replica when ``--port N`` is added to it (``elicitor serve module:server``, or a script
    whose main calls ``server.run("http", port=...)``).
    """

    def __init__(self, command: Sequence[str], count: int, folder: Path, *, redis: str | None, keys: str) -> None:
        self.command = list(command)
        self.ports = [free_port() for _ in range(count)]
        self.folder = folder
        self.env = {
            **os.environ,
            "ELICITOR_STATE_KEYS": keys,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        if redis is not None:
            self.env["ELICITOR_REDIS_URL"] = redis
        self._processes: list[subprocess.Popen[bytes] | None] = [None] * count

    def start(self, index: int | None = None) -> None:
        """Start replica ``index`` (default: all) and wait until it serves."""
        for i in range(len(self.ports)) if index is None else [index]:
            command = [*self.command, "--port", str(self.ports[i])]
            with self.log(i).open("ab") as log:
                self._processes[i] = subprocess.Popen(
                    command, cwd=ROOT, env=self.env, stdout=log, stderr=log, start_new_session=True
                )
        for i in range(len(self.ports)) if index is None else [index]:
            wait_for_port(self.ports[i], self._processes[i])

    def kill(self, index: int) -> None:
        """``kill -9``: the replica dies mid-whatever, without a chance to tidy up."""
        _stop(self._processes[index], signal.SIGKILL)

    def terminate(self, index: int) -> None:
        """SIGTERM: a graceful shutdown."""
        _stop(self._processes[index], signal.SIGTERM)

    def stop(self) -> None:
        for process in self._processes:
            _stop(process)

    def pids(self) -> list[int]:
        """The process id of each replica (-1 for one not running)."""
        return [p.pid if p is not None and p.poll() is None else -1 for p in self._processes]

    def log(self, index: int) -> Path:
        return self.folder / f"replica-{index}.log"

    def index_of(self, upstream: str) -> int:
        """Which replica ``host:port`` (nginx's ``$upstream_addr``) is."""
        return self.ports.index(int(upstream.rsplit(":", 1)[1]))

    def logs(self) -> str:
        return "\n".join(f"--- replica {i}\n{self.log(i).read_text(errors='replace')}" for i in range(len(self.ports)))


class Nginx:
    """nginx running ``deploy/nginx.conf`` in front of ``upstreams``, from a test's temporary folder.

    The file is the shipped one with only its addresses changed (the upstream servers, the listen port: what every
    deployment edits), run as its header says: ``nginx -p FOLDER -c FILE``, everything it writes under FOLDER.
    """

    def __init__(self, upstreams: Sequence[int], folder: Path) -> None:
        self.port = free_port()
        self.folder = folder
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.base = f"http://127.0.0.1:{self.port}"
        (folder / "logs").mkdir(parents=True, exist_ok=True)
        (folder / "nginx.conf").write_text(with_addresses(SHIPPED_NGINX.read_text(), upstreams, self.port))
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert NGINX is not None
        # daemon off: this test's child, stopped with its process group (the file itself is left as shipped)
        command = [NGINX, "-p", str(self.folder), "-c", str(self.folder / "nginx.conf"), "-g", "daemon off;"]
        with (self.folder / "nginx.out").open("ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
        wait_for_port(self.port, self._process)

    def stop(self) -> None:
        _stop(self._process, signal.SIGQUIT)

    def upstreams(self) -> list[tuple[str, str]]:
        """``(request, upstream address)`` for every request logged so far, in order."""
        log = (self.folder / "logs" / "access.log").read_text()
        return re.findall(r'"(\w+ \S+)" \d+ upstream=(\S+)', log)


SHIPPED_NGINX = ROOT / "deploy" / "nginx.conf"


def with_addresses(config: str, upstreams: Sequence[int], port: int) -> str:
    """``config`` (deploy/nginx.conf) with its upstream servers and listen port replaced, and nothing else."""
    servers = "".join(f"        server 127.0.0.1:{upstream} max_fails=1 fail_timeout=5s;\n" for upstream in upstreams)
    config, found = re.subn(r"(?m)^        server 127\.0\.0\.1:800\d[^\n]*\n", "", config)
    assert found, "deploy/nginx.conf has no upstream server lines to replace"
    config = config.replace("    upstream elicitor {\n", "    upstream elicitor {\n" + servers, 1)
    assert "listen 8000;" in config, "deploy/nginx.conf no longer listens on 8000"
    return config.replace("listen 8000;", f"listen 127.0.0.1:{port};")


@contextlib.contextmanager
def deployment(command: Sequence[str], folder: Path, *, replicas: int = 3, redis: bool = True) -> Iterator[Deployment]:
    """Redis, ``replicas`` replicas started by ``command`` and nginx in front, all started; all stopped after."""
    from elicitor.server import generate_key

    folder.mkdir(parents=True, exist_ok=True)
    store = RedisServer(folder) if redis else None
    if store is not None:
        store.start()
    group = Replicas(command, replicas, folder, redis=store.url if store else None, keys=generate_key())
    nginx = Nginx(group.ports, folder)
    try:
        group.start()
        nginx.start()
        yield Deployment(store, group, nginx)
    finally:
        nginx.stop()
        group.stop()
        if store is not None:
            store.stop()


class Deployment:
    """What :func:`deployment` started."""

    def __init__(self, redis: RedisServer | None, replicas: Replicas, nginx: Nginx) -> None:
        self.redis = redis
        self.replicas = replicas
        self.nginx = nginx
