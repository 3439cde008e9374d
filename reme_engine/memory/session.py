"""The chat session record: ``<session_dir>/dialog/<session_id>.jsonl``, one message per line (ARCHITECTURE §2, §6).

The TUI's chat pane calls :func:`append_messages` the moment a message is sent (and again when a reply settles);
auto-memory reads the record back with :func:`read_session`.

Line format (UTF-8 JSON, one object per line)::

    {"id": "…", "role": "user" | "assistant" | "system", "content": "…", "created_at": "2026-11-28T09:40:12+08:00"}

Unknown extra keys are ignored on read. Writers only ever append; a crash can at worst leave a truncated last
line, which readers skip (and count) and the next append starts on a fresh line. A failed append (a full disk, a
file size limit, a read-only folder) leaves the record as it was: a new record is published whole or not at all
(temp file + checked link), an append that fails midway is truncated back to its previous length
(:class:`RecordWriteError`).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import threading
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any, Iterable

from ..config import LayerSettings
from ..errors import EngineError, os_error_message
from ..markdown.links import format_link
from ..vault.app_folder import legacy_session_rel
from ..vault.io import WriteConflict, atomic_write
from ..vault.paths import resolve

log = logging.getLogger("reme.session")

ROLES = ("user", "assistant", "system")

#: Longest accepted session id (file names stay well under common 255-byte limits).
MAX_SESSION_ID = 128
#: Longest accepted message id.
MAX_MESSAGE_ID = 200
#: Longest record line read (bytes): a longer line (a damaged or foreign file: one line of gigabytes) is skipped
#: and counted without being held in memory. 16 MiB is twice the largest note the index reads (max_file_bytes).
MAX_LINE_BYTES = 16 * 1024 * 1024

_SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")

# One lock per session file: dedup-then-append must not interleave between threads of this process.
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(str(path), threading.Lock())


def valid_session_id(session_id: Any) -> str:
    """Return ``session_id`` if it is safe as a file name, else raise ``ValueError``.

    Accepted: 1–128 characters from ``A-Z a-z 0-9 _ -``, starting with a letter or digit (uuid4 hex, uuid
    strings with dashes and the demo's short ids all qualify). Anything that could escape the dialog folder
    (``/``, ``..``, NUL) or hide the file (a leading ``.``) is refused.
    """
    if not isinstance(session_id, str):
        raise ValueError(f"invalid session id {session_id!r}: expected a string")
    if not session_id or len(session_id) > MAX_SESSION_ID:
        raise ValueError(f"invalid session id {session_id!r}: expected 1-{MAX_SESSION_ID} characters")
    if not _SESSION_ID_RE.match(session_id):
        raise ValueError(f"invalid session id {session_id!r}: use letters, digits, '_' and '-' only")
    return session_id


def new_session_id() -> str:
    """A fresh session id (uuid4 hex, 32 characters)."""
    return uuid.uuid4().hex


def session_rel(layers: LayerSettings, session_id: str, vault: Path | None = None) -> str:
    """Vault-relative path of a session record: ``<session_dir>/dialog/<session_id>.jsonl``. ValueError for bad ids.

    With ``vault``: a session whose record is still in the old place (``session/dialog/``, before the app folder,
    :mod:`reme_engine.vault.app_folder`) and not in the new one keeps that path, so one session stays one file."""
    sid = valid_session_id(session_id)
    rel = f"{layers.session_dir.strip('/')}/dialog/{sid}.jsonl"
    if vault is not None:
        old = legacy_session_rel(layers, sid)
        if old is not None and not (Path(vault) / rel).exists() and (Path(vault) / old).is_file():
            return old
    return rel


def session_link(layers: LayerSettings, session_id: str, vault: Path | None = None) -> str:
    """The ``source_conversation`` backlink: ``[[<session_dir>/dialog/<id>.jsonl]]`` (the record's path as
    :func:`session_rel` finds it)."""
    return format_link(session_rel(layers, session_id, vault))


def now_iso(tz: tzinfo | None = None) -> str:
    """The current time as ISO 8601 with a UTC offset (seconds precision); ``tz`` defaults to the system zone."""
    return datetime.now(tz).astimezone(tz).isoformat(timespec="seconds")


def parse_time(value: str, tz: tzinfo | None = None) -> datetime:
    """Parse an ISO 8601 timestamp; a naive one is taken to be in ``tz`` (system zone when None). ValueError."""
    dt = datetime.fromisoformat(value.strip())
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=tz) if tz is not None else dt.astimezone()
    return dt


@dataclass
class ChatMessage:
    """One chat message. ``created_at``: ISO 8601 with offset (e.g. ``2026-11-28T09:40:12+08:00``)."""

    id: str
    role: str
    content: str
    created_at: str

    @classmethod
    def create(cls, role: str, content: str, *, tz: tzinfo | None = None, id: str | None = None) -> "ChatMessage":
        """A new message stamped now (in ``tz``) with a uuid4-hex id. ValueError for an unknown role."""
        msg = cls(id or uuid.uuid4().hex, role, content, now_iso(tz))
        msg.validate()
        return msg

    @classmethod
    def from_dict(cls, d: Any) -> "ChatMessage":
        """Build and validate from a mapping (extra keys ignored). ValueError when a field is missing or bad."""
        if not isinstance(d, dict):
            raise ValueError("message is not a JSON object")
        try:
            msg = cls(d["id"], d["role"], d["content"], d["created_at"])
        except KeyError as exc:
            raise ValueError(f"message lacks {exc.args[0]!r}") from exc
        msg.validate()
        return msg

    def validate(self) -> None:
        """Raise ValueError unless id/role/content/created_at are well-formed."""
        if not isinstance(self.id, str) or not self.id.strip() or len(self.id) > MAX_MESSAGE_ID:
            raise ValueError(f"bad message id {self.id!r}")
        if self.role not in ROLES:
            raise ValueError(f"bad role {self.role!r} (expected one of {', '.join(ROLES)})")
        if not isinstance(self.content, str):
            raise ValueError("message content must be a string")
        if not isinstance(self.created_at, str):
            raise ValueError("created_at must be an ISO 8601 string")
        parse_time(self.created_at)

    def time(self, tz: tzinfo | None = None) -> datetime:
        """``created_at`` as an aware datetime converted to ``tz`` (naive stamps are read in ``tz``)."""
        dt = parse_time(self.created_at, tz)
        return dt.astimezone(tz) if tz is not None else dt

    def to_dict(self) -> dict:
        return asdict(self)


class SessionMessages(list):
    """``read_session``'s result: a list of :class:`ChatMessage` in file order, plus ``skipped`` (bad or truncated
    lines) and ``duplicates`` (repeated ids, first occurrence kept)."""

    skipped: int = 0
    duplicates: int = 0


def _path(vault: Path, layers: LayerSettings, session_id: str) -> Path:
    return resolve(Path(vault), session_rel(layers, session_id, vault)).abs


def read_session(vault: Path, layers: LayerSettings, session_id: str) -> SessionMessages:
    """The messages of a session, in file order, deduplicated by id (first wins).

    A missing record gives an empty list. Lines that are not JSON objects with valid fields (a truncated last line
    after a crash, a hand-edited line) or longer than :data:`MAX_LINE_BYTES` are skipped and counted in
    ``.skipped``. Raises ``ValueError`` for an invalid session id and ``OSError`` when the file cannot be read.
    """
    out = SessionMessages()
    path = _path(vault, layers, session_id)
    try:
        fh = os.fdopen(_open_record(path, os.O_RDONLY), "rb")
    except FileNotFoundError:
        return out
    seen: set[str] = set()
    with fh:
        for raw in _bounded_lines(fh):
            if raw is None:
                out.skipped += 1
                continue
            if not raw.strip():
                continue
            try:
                msg = ChatMessage.from_dict(json.loads(raw.decode("utf-8")))
            except (ValueError, UnicodeDecodeError):
                out.skipped += 1
                continue
            if msg.id in seen:
                out.duplicates += 1
                continue
            seen.add(msg.id)
            out.append(msg)
    return out


def _as_message(m: ChatMessage | dict) -> ChatMessage:
    if isinstance(m, ChatMessage):
        m.validate()
        return m
    return ChatMessage.from_dict(m)


def _bounded_lines(fh):
    """The lines of binary file ``fh``, each at most :data:`MAX_LINE_BYTES`; None for a longer one, whose bytes
    are read past in 1 MiB steps (never held)."""
    while True:
        line = fh.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) <= MAX_LINE_BYTES:
            yield line
            continue
        while line and not line.endswith(b"\n"):
            line = fh.readline(1 << 20)
        yield None


class RecordWriteError(EngineError, OSError):
    """The chat record could not be written (disk full, file too large for a limit, read-only folder, no
    permission); the record is exactly as it was (no empty file, no partial line). Both an :class:`EngineError`
    (its text is one user-facing line: ``cannot save the chat message to <rel>: <reason>; nothing was written``)
    and an ``OSError`` (``errno`` of the cause). ``rel``: the record's vault path; ``reason``: the short reason
    (``no space left on the disk``); ``messages``: the messages not written, so a caller can keep them."""

    def __init__(self, rel: str, cause: OSError, messages: list["ChatMessage"]) -> None:
        text = os_error_message(cause, rel, "save the chat message to") + "; nothing was written"
        OSError.__init__(self, cause.errno, text)
        self.text, self.rel, self.messages = text, rel, list(messages)
        self.reason = text.split(": ", 1)[-1].removesuffix("; nothing was written")

    def __str__(self) -> str:
        return self.text


def append_messages(vault: Path, layers: LayerSettings, session_id: str,
                    messages: Iterable[ChatMessage | dict]) -> int:
    """Append ``messages`` to the session record (created with its folders on first use); return how many were new.

    Messages whose id is already in the record (or earlier in ``messages``) are skipped, so the chat pane may call
    this again after a reply settles. All new lines go out in one ``write`` on an ``O_APPEND`` descriptor followed by
    ``fsync``, under a per-file lock (a thread lock plus ``flock`` where available), so concurrent appenders never
    interleave half lines. If the file ends in a truncated line, the new lines start on a fresh line.

    Failure-atomic: a new record is written to a temp file and published with a checked link (it appears whole or
    not at all); an append that fails midway (or at ``fsync``: delayed allocation reports a full disk there) is
    truncated back to the record's previous length; folders this call created are removed again. Raises
    ``ValueError`` (bad session id or message) before writing anything, :class:`RecordWriteError` (an OSError and
    an EngineError) on I/O failure, the record unchanged.
    """
    batch = [_as_message(m) for m in messages]  # validate everything first: all or nothing
    path = _path(vault, layers, session_id)
    rel = session_rel(layers, session_id, vault)
    with _lock_for(path):
        created: list[Path] = []
        try:
            created = _make_dirs(path.parent)
            return _append_locked(vault, layers, session_id, path, batch)
        except OSError as exc:
            for d in reversed(created):  # only folders this call made, and only while empty
                try:
                    os.rmdir(d)
                except OSError:
                    break
            if isinstance(exc, RecordWriteError):
                raise
            raise RecordWriteError(rel, exc, batch) from exc


def _make_dirs(folder: Path) -> list[Path]:
    """``mkdir -p folder``; returns the folders created, outermost first."""
    missing: list[Path] = []
    cur = folder
    while not cur.exists():
        missing.append(cur)
        if cur.parent == cur:
            break
        cur = cur.parent
    folder.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))


def _new_lines(batch: list[ChatMessage], seen: set[str]) -> list[str]:
    lines = []
    for m in batch:
        if m.id in seen:
            continue
        seen.add(m.id)
        lines.append(json.dumps(m.to_dict(), ensure_ascii=False) + "\n")
    return lines


def _append_locked(vault: Path, layers: LayerSettings, session_id: str, path: Path, batch: list[ChatMessage]) -> int:
    """The body of :func:`append_messages` under its thread lock; raises OSError with the record unchanged."""
    for _ in range(5):
        try:
            fd = _open_record(path, os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:
            lines = _new_lines(batch, set())
            if not lines:
                return 0
            try:  # a new record: whole or not at all (a 0-byte record was what a full disk left before)
                atomic_write(path, "".join(lines).encode("utf-8"), expected_sha=None)
            except WriteConflict:
                continue  # another process created it meanwhile: append to that one
            return len(lines)
        try:
            _flock(fd)
            lines = _new_lines(batch, {m.id for m in read_session(vault, layers, session_id)})
            if not lines:
                return 0
            data = "".join(lines).encode("utf-8")
            if not _ends_with_newline(path):
                data = b"\n" + data
            size = os.fstat(fd).st_size  # under the flock: no other appender can move it
            try:
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                os.fsync(fd)
            except OSError:
                _truncate_back(fd, size, path)
                raise
            return len(lines)
        finally:
            os.close(fd)  # also drops the flock
    raise OSError(errno.EAGAIN, "the record kept being created and removed while appending", str(path))


def _open_record(path: Path, flags: int):
    """The record opened with ``flags`` (a descriptor, blocking again), refusing anything but a regular file: opened
    non-blocking first, since a FIFO at the record's name would block a reader (or a writer) until its other end
    opens. OSError (``EINVAL`` "not a regular file"; ``ENXIO`` for a FIFO nobody reads)."""
    import stat as _stat

    fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not _stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "the chat record is not a regular file", str(path))
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _truncate_back(fd: int, size: int, path: Path) -> None:
    """Cut a failed append off again (what was written of it is a partial line of ours, never the user's)."""
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError as exc:  # a partial last line then stays; readers skip it and the next append starts fresh
        log.warning("%s: a failed append could not be cut off (%s)", path, exc)


def _flock(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: the thread lock alone
        return
    fcntl.flock(fd, fcntl.LOCK_EX)


def _ends_with_newline(path: Path) -> bool:
    """True for an empty file or one whose last byte is a newline."""
    with os.fdopen(_open_record(path, os.O_RDONLY), "rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() == 0:
            return True
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"
