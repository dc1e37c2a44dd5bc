"""How a tool's result reads to a person in ``elicitor connect`` (and the demo): every kind of content block.

A result is a list of blocks (server/tools "Tool Result"): text, an image, audio, a link to a resource, a resource
embedded with its text or its bytes, and, from a server this client cannot fully read, an
:class:`~elicitor.types.UnknownContent`; beside them structured content and ``isError``. Each block is one line
(text as its lines), in order, so a person sees that a result holds an image as surely as they see its text:

    Result: the chart for March
    [image image/png, 12.3 KB] saved as /tmp/elicitor-connect-x1y2/1-image.png
    [link Quarterly report, application/pdf] file:///reports/q1.pdf
    Structured content:
    {"rows": 3}

Bytes (an image, audio, a binary resource) are written to a folder of the person's (``--save``) or to a private
folder made under the system's temporary folder, under names elicitor chooses: a server's name for them (a URI, a
MIME type) never becomes a path. Everything a server wrote is escaped (:func:`~elicitor.client._present.printable`)
and its URIs isolated as URL mode shows them, so no block can act on the terminal.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import os
import tempfile
from pathlib import Path
from typing import Any

from ._sentences import recognise
from .client._present import LRI, PDI, isolated, printable
from .i18n import Language
from .types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    UnknownContent,
)


class Saver:
    """Where the bytes of a result's blocks are written: ``folder``, or a private temporary folder made on first
    need (mode 0700, kept after the session so the files can be opened)."""

    def __init__(self, folder: str | os.PathLike[str] | None = None) -> None:
        self._folder = Path(folder) if folder is not None else None
        self._count = 0

    def save(self, data: bytes, kind: str, mime: str | None) -> Path:
        """Write ``data`` to a new file (never over an existing one) and return its path; raises ``OSError``."""
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="elicitor-connect-"))
        self._folder.mkdir(parents=True, exist_ok=True)
        extension = _extension(mime.split(";")[0].strip().lower()) if mime else ".bin"
        while True:
            self._count += 1
            path = self._folder / f"{self._count}-{kind}{extension}"
            try:
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            with open(descriptor, "wb") as file:
                file.write(data)
            return path


_EXTENSIONS = {
    "image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp", "image/svg+xml": ".svg",
    "audio/wav": ".wav", "audio/x-wav": ".wav", "audio/mpeg": ".mp3", "audio/ogg": ".ogg", "audio/webm": ".webm",
    "application/pdf": ".pdf", "application/json": ".json", "text/plain": ".txt",
}  # fmt: skip
"""The types tools send most, named the same on every system (``mimetypes`` reads the system's own tables)."""


def _extension(mime: str) -> str:
    """The file name extension for a MIME type (``.bin`` for one nobody knows): from a table, never the server's
    own text, so a type such as ``../x`` cannot reach the path."""
    return _EXTENSIONS.get(mime) or mimetypes.guess_extension(mime, strict=False) or ".bin"


def result_text(result: CallToolResult, lang: Language, saver: Saver) -> str:
    """The whole result as lines for standard output: ``Result:`` (or ``Error:`` for an ``isError`` result) and
    each block in order, then the structured content as indented JSON."""
    t = lang._
    body = "\n".join(block_text(block, lang, saver) for block in result.content)
    if result.is_error and len(result.content) == 1 and isinstance(result.content[0], TextContent):
        body = _own_sentence(result.content[0].text, lang) or body
    lines = [t("Error: {reason}", reason=body) if result.is_error else t("Result: {result}", result=body)]
    if result.structured_content is not None:
        lines.append(t("Structured content:"))
        shown = json.dumps(result.structured_content, indent=2, ensure_ascii=False)
        lines.append(printable(shown, newlines=True))  # JSON escapes C0 controls; C1 and bidi controls it keeps
    return "\n".join(lines)


def _own_sentence(text: str, lang: Language) -> str | None:
    """A tool's error that is one of elicitor's own sentences (:mod:`elicitor._sentences`: a URL-mode step the
    person refused, arguments or an answer that did not fit, a capability the client lacks), in ``lang``: the
    tool's name and what the server added (the steps, a validator's detail) as sent, escaped. ``None`` for any
    other text, which is shown as sent."""
    sentence = recognise(text)
    return None if sentence is None else printable(lang.text(sentence), newlines=True)


def block_text(block: ContentBlock | UnknownContent, lang: Language, saver: Saver) -> str:
    """One block as a person reads it: text as sent (escaped), anything else as a bracketed line naming its kind."""
    t = lang._
    if isinstance(block, TextContent):
        return printable(block.text, newlines=True)
    if isinstance(block, ImageContent | AudioContent):
        kind, word = ("image", t("image")) if isinstance(block, ImageContent) else ("audio", t("audio"))
        return _bytes_line(word, kind, block.mime_type, block.data, lang, saver)
    if isinstance(block, ResourceLink):
        details = [isolated(block.title or block.name)]
        if block.mime_type:
            details.append(printable(block.mime_type))
        if block.size is not None and block.size >= 0:
            details.append(size_text(block.size, lang))
        line = _tag(t("link"), details, lang) + " " + _uri(block.uri)
        return line + (f"\n  {printable(block.description)}" if block.description else "")
    if isinstance(block, EmbeddedResource):
        return _resource(block.resource, lang, saver)
    known = block.kind in _KNOWN_KINDS  # a known type the block does not fit: the problem names the field
    why = printable(block.problem) if block.kind is None or known else t("unknown type {kind}", kind=block.kind)
    return t("[content this client cannot read: {why}]", why=printable(why))


_KNOWN_KINDS = frozenset({"text", "image", "audio", "resource", "resource_link"})


def _resource(resource: dict[str, Any], lang: Language, saver: Saver) -> str:
    """An embedded resource: its URI and type, then its text (indented) or where its bytes were saved."""
    t = lang._
    uri, mime, text, blob = (resource.get(key) for key in ("uri", "mimeType", "text", "blob"))
    mime = mime if isinstance(mime, str) else None
    shown = _uri(uri) if isinstance(uri, str) else t("(no URI)")
    if isinstance(blob, str):
        return _bytes_line(t("resource"), "resource", mime, blob, lang, saver, shown)
    head = _tag(t("resource"), [shown, *([printable(mime)] if mime else [])], lang)
    if not isinstance(text, str):
        return head + " " + t("(neither text nor bytes)")
    return head + "\n" + "\n".join("  " + line for line in printable(text, newlines=True).split("\n"))


def _bytes_line(
    word: str, kind: str, mime: str | None, data: str, lang: Language, saver: Saver, uri: str | None = None
) -> str:
    """A block of base64 bytes: its kind, type and size, and where it was saved (or why it was not)."""
    t = lang._
    details = [*([uri] if uri else []), printable(mime or t("unknown type"))]
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return _tag(word, details, lang) + " " + t("its data is not base64: not saved")
    details.append(size_text(len(raw), lang))
    try:
        path = saver.save(raw, kind, mime)
    except OSError as exc:
        return _tag(word, details, lang) + " " + t("not saved: {reason}", reason=printable(str(exc)))
    return _tag(word, details, lang) + " " + t("saved as {path}", path=printable(str(path)))


def _tag(word: str, details: list[str], lang: Language) -> str:
    """``[kind detail, detail]``: what a block is, in brackets, so it cannot pass for text the server wrote."""
    joined = lang._(", ").join(details)
    return f"[{word} {joined}]"


def _uri(uri: str) -> str:
    """A URI as URL mode shows one: escaped, and isolated left to right so nothing around it reorders it."""
    return f"{LRI}{printable(uri)}{PDI}"


def size_text(size: int, lang: Language) -> str:
    """A size in bytes as a person reads it: ``512 bytes``, ``12.3 KB``, ``4.5 MB`` (units of 1024)."""
    if size < 1024:
        return lang.n_("{n} byte", "{n} bytes", size)
    if size < 1024 * 1024:
        return lang._("{size} KB", size=round(size / 1024, 1))
    return lang._("{size} MB", size=round(size / (1024 * 1024), 1))
