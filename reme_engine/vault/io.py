"""Bounded reads, content hashes and atomic, conflict-checked writes (DESIGN §8)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: Bytes sniffed for NUL to call a file binary.
SNIFF_BYTES = 8192


class SkipFile(Exception):
    """A file cannot be indexed or read as text; ``reason`` is short and user-facing."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WriteConflict(Exception):
    """The file changed on disk since it was read (its content hash differs); nothing was written."""


@dataclass(frozen=True)
class TextFile:
    """Decoded file: ``text`` without BOM (newlines kept), ``sha`` of the raw bytes, ``size`` in bytes."""

    text: str
    sha: str
    size: int
    mtime: float
    encoding: str


def content_hash(data: bytes) -> str:
    """Hex BLAKE2b-128 digest of ``data`` (32 hex chars)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def text_hash(text: str) -> str:
    """Content hash of ``text`` encoded as UTF-8."""
    return content_hash(text.encode("utf-8"))


def decode_bytes(data: bytes) -> tuple[str, str]:
    """Decode file bytes as text; returns ``(text, encoding)``.

    Accepts UTF-8 (BOM stripped) and UTF-16 with a BOM. Raises :class:`SkipFile` for NUL bytes in the first
    8 KiB (binary) or bytes that are not valid UTF-8.
    """
    if data.startswith(b"\xff\xfe") or data.startswith(b"\xfe\xff"):
        try:
            return data.decode("utf-16"), "utf-16"
        except UnicodeDecodeError as exc:
            raise SkipFile(f"invalid UTF-16 ({exc.reason})") from exc
    if b"\x00" in data[:SNIFF_BYTES]:
        raise SkipFile("binary file (NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkipFile(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from exc
    if text.startswith("\ufeff"):
        return text[1:], "utf-8-sig"
    if "\x00" in text:
        raise SkipFile("binary file (NUL bytes)")
    return text, "utf-8"


def read_text(path: Path, max_bytes: int) -> TextFile:
    """Read and decode ``path`` if it is at most ``max_bytes`` bytes.

    Raises :class:`SkipFile` (oversized, binary, undecodable, not a regular file) or ``OSError``
    (``FileNotFoundError`` when it vanished meanwhile).
    """
    st = os.stat(path)
    if not os.path.isfile(path):
        raise SkipFile("not a regular file")
    if st.st_size > max_bytes:
        raise SkipFile(f"too large ({st.st_size:,} bytes > limit {max_bytes:,})")
    with open(path, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise SkipFile(f"too large (grew past {max_bytes:,} bytes while reading)")
    text, enc = decode_bytes(data)
    return TextFile(text=text, sha=content_hash(data), size=len(data), mtime=st.st_mtime, encoding=enc)


def file_hash(path: Path) -> str | None:
    """Content hash of the file at ``path``, or None when it does not exist."""
    try:
        with open(path, "rb") as fh:
            return content_hash(fh.read())
    except FileNotFoundError:
        return None


def atomic_write(path: Path, text: str | bytes, *, expected_sha: str | None | bool = False) -> str:
    """Write ``text`` to ``path`` atomically (temp file in the same folder, fsync, rename); return the new hash.

    ``expected_sha``: ``False`` = no check; ``None`` = the file must not exist; a hash = the file's current
    content must still have that hash, otherwise :class:`WriteConflict` is raised and nothing is written.
    The check-then-rename window is tiny but not zero; callers that merge should re-check afterwards.
    Parent folders are created.
    """
    path = Path(path)
    data = text.encode("utf-8") if isinstance(text, str) else text
    if expected_sha is not False:
        current = file_hash(path)
        if current != expected_sha:
            if expected_sha is None:
                raise WriteConflict(f"{path.name} already exists")
            raise WriteConflict(f"{path.name} changed on disk since it was read")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            try:
                os.chmod(tmp, os.stat(path).st_mode & 0o7777)
            except OSError:
                pass
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return content_hash(data)
