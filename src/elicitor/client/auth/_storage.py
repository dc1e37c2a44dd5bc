"""Keeping tokens: in this process only (:class:`MemoryTokenStore`, the default), or between runs in the
platform's keyring where there is one, else in a JSON file only its owner reads.

``elicitor connect`` signs a person in once per server; the tokens (and the client registration they came with)
are kept in ``$XDG_CONFIG_HOME/elicitor/tokens.json`` (``~/.config/elicitor/tokens.json``), created with mode
0600 and written atomically (a temporary file in the same folder, then a rename), so a crash never leaves half a
file and no other user can read it. A file that others can read is made private again, with a warning.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import anyio.to_thread

from ._types import Tokens

logger = logging.getLogger("elicitor.auth")

_FIELDS = {f.name for f in fields(Tokens)}


def default_token_file() -> Path:
    """``$XDG_CONFIG_HOME/elicitor/tokens.json``, else ``~/.config/elicitor/tokens.json``."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "elicitor" / "tokens.json"


class FileTokenStore:
    """A :class:`TokenStore` in one JSON file, readable by its owner only (default :func:`default_token_file`)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_token_file()

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self.path)!r})"

    async def load(self, resource: str) -> Tokens | None:
        """The tokens in the file for ``resource``, or ``None`` (an unreadable entry is logged and ignored)."""
        entry = (await anyio.to_thread.run_sync(self._read)).get(resource)
        if not isinstance(entry, dict):
            return None
        known = {k: v for k, v in entry.items() if k in _FIELDS}
        if not isinstance(known.get("access_token"), str) or not isinstance(known.get("extra", {}), dict):
            logger.warning("the stored tokens for %s are unreadable; signing in again", resource)
            return None
        try:
            return Tokens(**known)
        except TypeError:
            logger.warning("the stored tokens for %s are unreadable; signing in again", resource)
            return None

    async def save(self, resource: str, tokens: Tokens) -> None:
        """Write ``tokens`` for ``resource`` into the file (atomically, readable by its owner only)."""
        await anyio.to_thread.run_sync(self._update, resource, asdict(tokens))

    async def delete(self, resource: str) -> bool:
        """Forget ``resource``'s tokens; whether there were any."""
        return await anyio.to_thread.run_sync(self._update, resource, None)

    # ---- blocking parts, run in a worker thread --------------------------------------------------------------

    def _read(self) -> dict[str, Any]:
        try:
            mode = self.path.stat().st_mode
        except FileNotFoundError:
            return {}
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            logger.warning("%s was readable by other users: it is private again (mode 0600)", self.path)
            self.path.chmod(0o600)
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            logger.warning("%s is unreadable (%s): no stored tokens are used", self.path, exc)
            return {}
        return document if isinstance(document, dict) else {}

    def _update(self, resource: str, entry: dict[str, Any] | None) -> bool:
        document = self._read()
        existed = resource in document
        if entry is None:
            if not existed:
                return False
            del document[resource]
        else:
            document[resource] = entry
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, temporary = tempfile.mkstemp(prefix=".tokens-", dir=self.path.parent)  # created 0600
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump(document, file, indent=1, sort_keys=True)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return existed


KEYRING_SERVICE = "elicitor"
"""The keyring service name under which tokens are kept (one entry per server, the server's URL as user name)."""


class KeyringTokenStore:
    """A :class:`TokenStore` in the platform's keyring (macOS Keychain, Windows Credential Locker, the Secret
    Service on Linux) through the ``keyring`` package (``pip install 'elicitor[keyring]'``)."""

    def __init__(self, service: str = KEYRING_SERVICE) -> None:
        import keyring

        self._keyring = keyring
        self.service = service

    def __repr__(self) -> str:
        return f"KeyringTokenStore({self.service!r})"

    async def load(self, resource: str) -> Tokens | None:
        """The tokens in the keyring for ``resource``, or ``None`` (an unreadable entry is logged and ignored)."""
        text = await anyio.to_thread.run_sync(self._keyring.get_password, self.service, resource)
        if text is None:
            return None
        try:
            entry = json.loads(text)
        except ValueError:
            entry = None
        known = {k: v for k, v in entry.items() if k in _FIELDS} if isinstance(entry, dict) else {}
        if not isinstance(known.get("access_token"), str) or not isinstance(known.get("extra", {}), dict):
            logger.warning("the keyring's tokens for %s are unreadable; signing in again", resource)
            return None
        return Tokens(**known)

    async def save(self, resource: str, tokens: Tokens) -> None:
        """Keep ``tokens`` for ``resource`` in the keyring, as one JSON entry under this store's service."""
        text = json.dumps(asdict(tokens), sort_keys=True)
        await anyio.to_thread.run_sync(self._keyring.set_password, self.service, resource, text)

    async def delete(self, resource: str) -> bool:
        """Forget ``resource``'s tokens; whether there were any."""
        from keyring.errors import PasswordDeleteError

        try:
            await anyio.to_thread.run_sync(self._keyring.delete_password, self.service, resource)
        except PasswordDeleteError:
            return False
        return True


def usable_keyring() -> bool:
    """Whether ``keyring`` is installed and has a real backend (not the "fail" or "null" ones of a headless box)."""
    try:
        import keyring
    except ImportError:
        return False
    try:
        backend = keyring.get_keyring()
        priority = float(backend.priority)
    except Exception:
        return False
    return priority > 0 and type(backend).__module__.split(".")[-1] not in ("fail", "null")


def default_token_store() -> KeyringTokenStore | FileTokenStore:
    """The keyring when one is usable (see :func:`usable_keyring`), else :class:`FileTokenStore`."""
    return KeyringTokenStore() if usable_keyring() else FileTokenStore()


class MemoryTokenStore:
    """Tokens kept in this process only (the default: nothing is written anywhere)."""

    def __init__(self) -> None:
        self._tokens: dict[str, Tokens] = {}

    async def load(self, resource: str) -> Tokens | None:
        """The tokens kept for ``resource`` in this process, or ``None``."""
        return self._tokens.get(resource)

    async def save(self, resource: str, tokens: Tokens) -> None:
        """Keep ``tokens`` for ``resource`` until the process ends."""
        self._tokens[resource] = tokens

    async def delete(self, resource: str) -> bool:
        """Forget ``resource``'s tokens; whether there were any."""
        return self._tokens.pop(resource, None) is not None
