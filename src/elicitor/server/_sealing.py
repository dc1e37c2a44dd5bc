"""Sealed ``requestState`` for the 2026-07-28 multi-round-trip path.

Spec: https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr — the client echoes
``requestState`` byte-exact and MUST NOT inspect it; the server MUST treat it as attacker-controlled, SHOULD
integrity-protect it, and SHOULD bind it to the principal, a short TTL and the request.

Format: ``"e1." + base64url(key_id[4] || nonce[12] || AES-256-GCM(ciphertext || tag))``. The plaintext is JSON with
an expiry, optionally followed by the parts of the payload that are the client's own answers, after a flag byte: NUL
for a zlib stream, 0x01 for JSON as is (neither byte occurs in the JSON before it: msgspec escapes control
characters in strings). The answers are compressed only when it pays: from ``COMPRESS_FROM`` bytes of JSON up (a
call that gathered hundreds of distinct answers would otherwise outgrow the size limit; about 2,000 fit the default
64 KiB), and only if the result is shorter. Below that, zlib's setup per call (about 10 µs) costs more than the
few bytes it saves, and a few answers are where every round of a typical call stays. Only what the client already
knows is ever compressed: compressing a server secret next to text the client chooses would let the token's length
give the secret away (the CRIME attack), so everything else stays plain JSON, whatever its size. The associated data
binds the token to the method, a digest of the params (without ``inputResponses``, ``requestState`` and ``_meta``)
and the principal, so a token replayed on another call, tool, argument set or user fails to open. Keys form a ring:
the first seals, all open — rotate by putting the new key first and keeping the old one until its tokens have
expired.

Every refusal, on either side, is -32602 (Invalid params) with the reason: a token that cannot be opened, and a
state that would outgrow ``max_size`` (the call has gathered more answers than one token may carry).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import time
import zlib
from collections.abc import Callable, Collection, Sequence
from typing import Any

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .._exceptions import JSONRPCError
from ..i18n._message import N_
from ..types import INVALID_PARAMS, JSONObject

PREFIX = "e1."
KEYS_ENV = "ELICITOR_STATE_KEYS"
"""Environment variable with comma-separated base64url 32-byte keys, newest first, shared by every replica."""
GENERATE_KEY = "python -c 'import elicitor.server as s; print(s.generate_key())'"
"""The command that prints a new key for :data:`KEYS_ENV`."""

DEFAULT_TTL = 3600.0
"""Seconds a ``requestState`` stays valid: a person may take a while to answer a form."""

DEFAULT_MAX_SIZE = 64 * 1024
"""Largest ``requestState`` accepted or produced, in characters."""

_encode = msgspec.json.Encoder(order="sorted").encode
_decode = msgspec.json.Decoder(dict[str, Any]).decode
_DEFLATED = b"\x00"  # the answers follow as a zlib stream (the only form before the threshold existed)
_AS_IS = b"\x01"  # the answers follow as JSON, uncompressed
COMPRESS_FROM = 1024
"""Bytes of the answers' JSON from which they are compressed (when that makes them shorter)."""
_MAX_INFLATED = 16 * 1024 * 1024
"""Most bytes the compressed part may inflate to (it was sealed by us, so this only bounds a leaked key's misuse)."""
_NOT_BOUND = ("inputResponses", "requestState", "_meta")


def generate_key() -> str:
    """A new random 32-byte key, base64url-encoded: put it in ``ELICITOR_STATE_KEYS`` on every replica."""
    return base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def request_binding(method: str, params: JSONObject | None, principal: str | None) -> bytes:
    """What a token is bound to: the method, the params that define the request, and who asks."""
    bound = {k: v for k, v in (params or {}).items() if k not in _NOT_BOUND}
    digest = hashlib.sha256(_encode(bound)).digest()
    return b"elicitor/state/1\x00" + method.encode() + b"\x00" + digest + b"\x00" + (principal or "").encode()


class StateSealer:
    """Seals and opens ``requestState`` tokens with AES-256-GCM.

    Args:
        keys: raw 32-byte keys or base64url strings, newest first. Default: ``ELICITOR_STATE_KEYS`` if set, else
            one random key for this process — fine for one process; replicas must share keys.
        ttl: seconds a token stays valid.
        max_size: largest token, in characters, sealed or accepted.
        clock: the time source (tests pass a fake one).
    """

    def __init__(
        self,
        keys: Sequence[bytes | str] | None = None,
        *,
        ttl: float = DEFAULT_TTL,
        max_size: int = DEFAULT_MAX_SIZE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ephemeral = False
        """Whether the key is this process's own random one (no other process can open its tokens)."""
        from_env = keys is None
        if keys is None:
            env = os.environ.get(KEYS_ENV, "").strip()
            keys = [k.strip() for k in env.split(",") if k.strip()] if env else [os.urandom(32)]
            self.ephemeral = not env
        if not keys:
            raise ValueError("StateSealer needs at least one key")
        ring: dict[bytes, AESGCM] = {}
        for key in keys:
            try:
                raw = _b64decode(key) if isinstance(key, str) else key
            except (binascii.Error, ValueError):
                raw = b""
            if len(raw) != 32 and from_env:  # the person's environment: elicitor serve says it in their language
                raise ValueError(N_("{name} must hold keys of 32 bytes in base64 (AES-256), such as {command} prints",
                                    name=KEYS_ENV, command=GENERATE_KEY))  # fmt: skip
            if len(raw) != 32:
                raise ValueError("requestState keys must be 32 bytes (AES-256)")
            ring.setdefault(hashlib.sha256(raw).digest()[:4], AESGCM(raw))
        self._ring = ring
        self._current = next(iter(ring))
        self._ttl = ttl
        self._max_size = max_size
        self._clock = clock

    def seal(self, payload: JSONObject, binding: bytes, *, compress: Collection[str] = ()) -> str:
        """Encrypt ``payload`` bound to ``binding``, with an expiry.

        Args:
            payload: what the next round needs, as JSON.
            binding: what the token is bound to (:func:`request_binding`).
            compress: keys of ``payload`` whose values may be compressed. Only for what the client itself sent or
                already knows (its answers): see the module's note on compression and secrets.

        Raises:
            JSONRPCError: -32602 if the sealed state would exceed ``max_size`` (the call has gathered more answers
                than one token may carry).
        """
        packed = {k: v for k, v in payload.items() if k in compress}
        plain = {k: v for k, v in payload.items() if k not in compress} if packed else payload
        body = _encode({"exp": self._clock() + self._ttl, "p": plain})
        if packed:
            answers = _encode(packed)
            deflated = zlib.compress(answers, 6) if len(answers) >= COMPRESS_FROM else None
            if deflated is not None and len(deflated) < len(answers):
                body += _DEFLATED + deflated
            else:
                body += _AS_IS + answers
        nonce = os.urandom(12)
        sealed = self._ring[self._current].encrypt(nonce, body, binding)
        token = PREFIX + base64.urlsafe_b64encode(self._current + nonce + sealed).decode().rstrip("=")
        if len(token) > self._max_size:
            raise _invalid(
                f"this call has gathered more answers than its requestState may carry ({len(token)} characters, "
                f"over the {self._max_size} limit); call the tool again with fewer questions in one call"
            )
        return token

    def seal_bytes(self, data: bytes, binding: bytes) -> bytes:
        """Encrypt and authenticate ``data`` bound to ``binding`` with the current key (no expiry, no size cap):
        what the shared store keeps at rest and what replicas send each other (:class:`~elicitor.state.Sealer`)."""
        nonce = os.urandom(12)
        return self._current + nonce + self._ring[self._current].encrypt(nonce, data, binding)

    def open_bytes(self, blob: bytes, binding: bytes) -> bytes:
        """Decrypt what :meth:`seal_bytes` sealed with any key of the ring.

        Raises:
            ValueError: not sealed by a key of this ring, tampered with, or bound to something else.
        """
        aead = self._ring.get(blob[:4]) if len(blob) >= 4 + 12 + 16 else None
        if aead is None:
            raise ValueError("sealed with an unknown key (rotated out, or another deployment), or malformed")
        try:
            return aead.decrypt(blob[4:16], blob[16:], binding)
        except InvalidTag:
            raise ValueError("failed its integrity check (tampered with, or moved)") from None

    def open(self, token: object, binding: bytes) -> JSONObject:
        """Decrypt and check a token.

        Raises:
            JSONRPCError: -32602 with the reason (malformed, too large, tampered, bound to another request or
                key, expired). Never anything else.
        """
        if not isinstance(token, str):
            raise _invalid("requestState must be a string")
        if len(token) > self._max_size:
            raise _invalid("requestState is too large")
        if not token.startswith(PREFIX):
            raise _invalid("requestState was not issued by this server")
        try:
            raw = _b64decode(token[len(PREFIX) :])
        except (binascii.Error, ValueError):
            raise _invalid("requestState is malformed") from None
        if len(raw) < 4 + 12 + 16:
            raise _invalid("requestState is malformed")
        aead = self._ring.get(raw[:4])
        if aead is None:
            raise _invalid("requestState was sealed with an unknown key (rotated out, or another server)")
        try:
            body = aead.decrypt(raw[4:16], raw[16:], binding)
        except InvalidTag:
            raise _invalid("requestState failed its integrity check (tampered, or for another request)") from None
        cut = body.find(_DEFLATED)
        if cut < 0:
            cut = body.find(_AS_IS)
        text = body if cut < 0 else body[:cut]
        try:
            envelope = _decode(text)
        except msgspec.DecodeError:
            raise _invalid("requestState is malformed") from None
        exp = envelope.get("exp")
        if not isinstance(exp, (int, float)) or exp < self._clock():
            raise _invalid("requestState has expired; call the tool again to start over")
        payload = envelope.get("p")
        if not isinstance(payload, dict):
            raise _invalid("requestState is malformed")
        if cut >= 0:
            payload = {**payload, **_answers(body[cut : cut + 1], body[cut + 1 :])}
        return payload


def _answers(flag: bytes, packed: bytes) -> JSONObject:
    """The answers' part of a token: a JSON object, compressed or not as ``flag`` says, at most
    ``_MAX_INFLATED`` bytes once inflated."""
    try:
        if flag == _AS_IS:
            return _decode(packed)
        inflater = zlib.decompressobj()
        raw = inflater.decompress(packed, _MAX_INFLATED)
        if inflater.unconsumed_tail or not inflater.eof:
            raise _invalid("requestState is malformed")
        return _decode(raw)
    except (zlib.error, msgspec.DecodeError):
        raise _invalid("requestState is malformed") from None


def _invalid(reason: str) -> JSONRPCError:
    return JSONRPCError(INVALID_PARAMS, f"Invalid params: {reason}")
