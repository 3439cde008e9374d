"""Bounded reads, content hashes and atomic, conflict-checked writes (ARCHITECTURE §8)."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import hashlib
import logging
import os
import re
import stat
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("reme.vault")

#: Bytes sniffed for NUL to call a file binary.
SNIFF_BYTES = 8192
#: Seconds :func:`read_text` keeps re-reading a changing file (back-off 5, 10, 20, … 100 ms) before
#: :class:`FileBusy`.
STABLE_READ_MAX_WAIT_S = 1.0
#: seconds a checked write looks at the bytes it displaced once more before they are dropped (see _displaced_is);
#: an append whose open came before the swap lands within microseconds unless its process is preempted
DISPLACED_GRACE_S = 0.003
#: A file modified this recently (ns) may be mid-save (an editor between two writes); it is read again once
#: it has been quiet this long. Empty files wait longer: an in-place save truncates first, and a descheduled
#: writer can sit between the truncate and its first write for tens of milliseconds on a loaded machine.
_SETTLE_NS = 50_000_000
_SETTLE_EMPTY_NS = 400_000_000
#: Suffix of :func:`atomic_write`'s temp files; with the leading dot and the random part it names them alone.
TEMP_SUFFIX = ".reme-tmp"
_TEMP_RE = re.compile(r"^\..+\.[a-z0-9_]{8}\.reme-tmp$")
_OLD_TEMP_RE = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
_UMASK_LOCK = threading.Lock()


class SkipFile(Exception):
    """A file cannot be indexed or read as text; ``reason`` is short and user-facing."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WriteConflict(Exception):
    """The file changed on disk since it was read (its content hash differs); nothing was written."""


class FileBusy(SkipFile):
    """A file kept changing while it was read (a save in progress); nothing was taken from it. Try again."""

    def __init__(self, reason: str = "note is being written; try again") -> None:
        super().__init__(reason)


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


def read_text(path: Path, max_bytes: int, *, stable: bool = True) -> TextFile:
    """Read and decode ``path`` if it is at most ``max_bytes`` bytes.

    ``stable`` (default): the read counts only if the file's identity, size and mtime are the same before and
    after it and the bytes read match that size — so a save in progress (an editor that truncates and rewrites
    in place) is never taken as the note's content, least of all as the base of an edit. A changing file is
    re-read for up to :data:`STABLE_READ_MAX_WAIT_S` seconds, then :class:`FileBusy` is raised.

    Raises :class:`SkipFile` (oversized, binary, undecodable, not a regular file; :class:`FileBusy` when it kept
    changing) or ``OSError`` (``FileNotFoundError`` when it vanished meanwhile).
    """
    deadline = time.monotonic() + STABLE_READ_MAX_WAIT_S
    delay = 0.005
    while True:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise SkipFile("not a regular file")
        if st.st_size > max_bytes:
            raise SkipFile(f"too large ({st.st_size:,} bytes > limit {max_bytes:,})")
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
            after = os.fstat(fh.fileno())
        if len(data) > max_bytes:
            raise SkipFile(f"too large (grew past {max_bytes:,} bytes while reading)")
        if not stable or (_identity(st) == _identity(after) and len(data) == st.st_size
                          and _identity(os.stat(path)) == _identity(st) and not _just_written(st)):
            text, enc = decode_bytes(data)
            return TextFile(text=text, sha=content_hash(data), size=len(data), mtime=st.st_mtime, encoding=enc)
        if time.monotonic() + delay > deadline:
            raise FileBusy("note is being written (it kept changing while read); try again")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def file_hash(path: Path) -> str | None:
    """Content hash of the file at ``path``, or None when it does not exist."""
    try:
        with open(path, "rb") as fh:
            return content_hash(fh.read())
    except FileNotFoundError:
        return None


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)


def _just_written(st: os.stat_result) -> bool:
    """True while the file's mtime is within the settle time of now: a writer may be between two writes."""
    return 0 <= time.time_ns() - st.st_mtime_ns < (_SETTLE_NS if st.st_size else _SETTLE_EMPTY_NS)


def new_file_mode() -> int:
    """Permission bits for a file the app creates: ``0o666`` minus the process umask, as ``open()`` would give.

    ``mkstemp`` creates 0600 files; a vault shared with a sync tool or another user needs the umask honoured.
    Read from ``/proc/self/status`` where it exists (no thread-unsafe ``os.umask`` round trip).
    """
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


def is_app_temp(name: str) -> bool:
    """True for the names :func:`atomic_write` gives its temp files (and the older ``.<name>.<random>.tmp``
    form of earlier versions): the only names :func:`sweep_temp_files` may remove."""
    return bool(_TEMP_RE.match(name) or _OLD_TEMP_RE.match(name))


def sweep_temp_files(root: Path, *, older_than_s: float = 60.0, skip_hidden_dirs: bool = True) -> list[Path]:
    """Remove temp files a crashed write left under ``root``; returns the paths removed.

    Only names :func:`atomic_write` creates (see :func:`is_app_temp`) and only ones older than ``older_than_s``
    seconds (a write in flight in another process lasts milliseconds). Hidden folders (``.obsidian``, ``.git``,
    ``.trash``) are not entered: the app never writes there.
    """
    removed: list[Path] = []
    cutoff = time.time() - older_than_s
    for dirpath, dirnames, filenames in os.walk(root):
        if skip_hidden_dirs:
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if name.startswith(".") and is_app_temp(name):
                p = Path(dirpath) / name
                try:
                    st = os.lstat(p)
                    if stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff:
                        os.unlink(p)
                        removed.append(p)
                except OSError:
                    continue
    return removed


def fsync_path(path: Path) -> None:
    """fsync a file's bytes or a folder's entries (best effort: a file system without fsync is used as it is)."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def _conflict(path: Path, expected_sha: str | None) -> WriteConflict:
    if expected_sha is None:
        return WriteConflict(f"{path.name} already exists")
    return WriteConflict(f"{path.name} changed on disk since it was read")


def _has_bom(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(3) == b"\xef\xbb\xbf"
    except OSError:
        return False


def atomic_write(path: Path, text: str | bytes, *, expected_sha: str | None | bool = False,
                 keep_bom: bool = True) -> str:
    """Write ``text`` to ``path`` atomically and, unless ``expected_sha`` is ``False``, only over the bytes the
    caller edited (compare-and-swap); return the new content hash.

    ``expected_sha``: ``False`` = no check; ``None`` = the file must not exist; a hash = the file must still
    hold exactly the bytes with that hash. When it does not, :class:`WriteConflict` is raised and the file on
    disk is the user's, untouched.

    Protocol (ARCHITECTURE §8): the new bytes go to a temp file in the same folder, which is fsynced; only then is the
    target checked and the temp file published:

    - ``None``: ``link(temp, target)``, which fails if the target exists — no window at all.
    - a hash, on Linux: ``renameat2(RENAME_EXCHANGE)`` swaps temp and target in one atomic step, so the bytes
      that were replaced are still on disk under the temp name and are checked *after* the swap; if they were
      not the base (a save landed between the pre-check and the swap), the swap is undone and the user's bytes
      are back in place. An atomic save by another program can therefore never be lost. What remains: an
      editor that saves *in place* and holds the old file open across the swap may write its last bytes into
      the replaced file after it was checked; the check also re-reads that file's stat after hashing to shrink
      this to microseconds.
    - a hash, elsewhere (or a file system without exchange): the target is hashed immediately before
      ``os.replace``; the window is the few microseconds between the two calls.

    A target that is a symlink (inside the vault: callers resolve paths with :func:`~reme_engine.vault.paths.resolve`)
    is written through to the file it points to; the link stays. A target that is not a regular file (a folder,
    a FIFO) or has no write permission bits is refused with :class:`WriteConflict` before anything is read. New
    files get ``0o666`` minus the umask; a replaced file keeps its mode. Parent folders are created. Known limit:
    a file with several hard links is replaced, not rewritten in place, so its other names keep the old bytes.

    ``keep_bom``: a ``str`` written over a file that starts with a UTF-8 BOM keeps the BOM (callers work on
    BOM-less text; a user's editor chose it). ``bytes`` are written exactly as given.
    """
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise WriteConflict(f"{path.name} is {kind}; not written")
    if st is not None and not st.st_mode & 0o222:
        raise WriteConflict(f"{path.name} is read-only (no write permission bits)")
    if isinstance(text, str) and keep_bom and st is not None and not text.startswith("\ufeff") and _has_bom(path):
        text = "\ufeff" + text
    data = text.encode("utf-8") if isinstance(text, str) else text
    new_sha = content_hash(data)
    if expected_sha is not False and file_hash(path) != expected_sha:
        raise _conflict(path, expected_sha)  # early out: nothing to write
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=TEMP_SUFFIX, dir=path.parent)
    tmp = Path(tmp_name)
    published = False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            try:
                mode = os.stat(path).st_mode & 0o7777
            except FileNotFoundError:
                mode = new_file_mode()
            try:
                os.fchmod(fh.fileno(), mode)
            except OSError:
                pass
            os.fsync(fh.fileno())
        if expected_sha is None:
            published = _publish_new(tmp, path)
        elif expected_sha is False:
            os.replace(tmp, path)
            published = True
        else:
            published = _publish_over(tmp, path, expected_sha, new_sha)
    finally:
        if not published or tmp.exists():
            try:
                os.unlink(tmp)
            except OSError:
                pass
    fsync_path(path.parent)
    return new_sha


def _publish_new(tmp: Path, path: Path) -> bool:
    """Publish ``tmp`` at ``path`` only if ``path`` does not exist. Raises WriteConflict."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise _conflict(path, None) from None
    except OSError:  # no hard links on this file system: a checked rename
        if os.path.lexists(path):
            raise _conflict(path, None) from None
        os.rename(tmp, path)
    return True


def _publish_over(tmp: Path, path: Path, expected_sha: str, new_sha: str) -> bool:
    """Replace ``path`` by ``tmp`` if ``path`` still holds ``expected_sha``. Raises WriteConflict."""
    if _rename_exchange is not None:
        try:
            _rename_exchange(tmp, path)
        except FileNotFoundError:
            raise WriteConflict(f"{path.name} was removed since it was read") from None
        except OSError:
            pass  # no exchange on this file system: fall through to the checked replace
        else:
            # ``tmp`` now names the bytes that were at ``path`` an instant ago.
            if _displaced_is(tmp, expected_sha):
                return True
            _undo_exchange(tmp, path, new_sha)
            raise WriteConflict(f"{path.name} changed on disk since it was read")
    if file_hash(path) != expected_sha:
        raise WriteConflict(f"{path.name} changed on disk since it was read")
    os.replace(tmp, path)
    return True


def _displaced_is(tmp: Path, expected_sha: str) -> bool:
    """The displaced file holds ``expected_sha`` and no writer touched it while it was hashed.

    When it was modified within the settle time, a writer that opened it before the swap may still be writing
    into it; the check then waits until it has been quiet for the settle time, so such a save is seen and the
    swap undone instead of the save vanishing with the displaced file."""
    try:
        deadline = time.monotonic() + STABLE_READ_MAX_WAIT_S
        while True:
            before = os.stat(tmp)
            if file_hash(tmp) != expected_sha or _identity(os.stat(tmp)) != _identity(before):
                return False
            if not _just_written(before) or time.monotonic() > deadline:
                # A writer that opened the note an instant before the swap (``echo >> note``: open, then write)
                # writes into the displaced file right after it was hashed: look once more after a short grace,
                # so such an append undoes the swap (the caller retries) instead of vanishing with the file.
                time.sleep(DISPLACED_GRACE_S)
                return _identity(os.stat(tmp)) == _identity(before)
            time.sleep(0.01)
    except OSError:
        return False


def _undo_exchange(tmp: Path, path: Path, new_sha: str) -> None:
    """Put the user's bytes (now at ``tmp``) back at ``path``; ours go back to ``tmp`` and are discarded.

    If yet another save replaced our bytes at ``path`` after the swap, that save is the user's newest version
    and stays; swapping again would bury it.
    """
    for _ in range(8):
        if file_hash(path) != new_sha:
            return
        try:
            _rename_exchange(tmp, path)
        except OSError:
            return
        if file_hash(tmp) == new_sha:
            return
        # a save replaced our bytes between the hash and the swap: what just moved aside is that save; loop to
        # swap it back in
    # never reached in practice: keep what is displaced beside the note rather than drop a save
    keep = path.with_name(f"{path.stem} (conflict {time.strftime('%Y-%m-%d %H%M%S')}){path.suffix}")
    try:
        os.rename(tmp, keep)
        log.warning("%s kept changing during a conflicting save; a displaced copy is kept as %s", path, keep.name)
    except OSError:
        pass


def remove_if_unchanged(path: Path, expected_sha: str) -> None:
    """Delete the file at ``path`` only if it still holds ``expected_sha`` (:func:`content_hash`).

    The check and the removal are one step against other writers: the file is first renamed aside (atomic, same
    folder, a hidden ``.<name>.<random>.reme-deleting`` name the temp sweep never removes), the bytes renamed
    aside are checked as :func:`atomic_write` checks displaced bytes, and only then unlinked. When they are not
    ``expected_sha`` (the person saved meanwhile) they are put back, and when another file took the name in
    between, they are kept beside it as ``<stem> (conflict <time>)<suffix>``; a save is never lost.
    Raises WriteConflict (changed since read, or already gone); OSError from the rename/unlink.
    """
    import secrets

    aside = path.with_name(f".{path.name[:40]}.{secrets.token_hex(4)}.reme-deleting")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        raise WriteConflict(f"{path.name} was removed since it was read") from None
    if _displaced_is(aside, expected_sha):
        os.unlink(aside)
        fsync_path(path.parent)
        return
    try:
        os.link(aside, path)  # put back, unless a new file took the name meanwhile
        os.unlink(aside)
    except FileExistsError:
        keep = path.with_name(f"{path.stem} (conflict {time.strftime('%Y-%m-%d %H%M%S')}){path.suffix}")
        os.rename(aside, keep)
        log.warning("%s was replaced during a delete; the displaced copy is kept as %s", path, keep.name)
    except OSError:  # no hard links here: a checked rename back
        if not os.path.lexists(path):
            os.rename(aside, path)
    raise WriteConflict(f"{path.name} changed on disk since it was read")


def _load_renameat2(flag: int, name: str):
    """``renameat2(…, flag)`` from libc as ``f(a, b)`` raising OSError, or None where unavailable.

    ``flag``: a ``<linux/fs.h>`` rename flag (``RENAME_NOREPLACE`` 1, ``RENAME_EXCHANGE`` 2)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    at_fdcwd = -100  # <fcntl.h> AT_FDCWD

    def rename(a: Path, b: Path) -> None:
        if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), flag) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(b))

    rename.__name__ = name
    return rename


_rename_exchange = _load_renameat2(2, "exchange")


def rename_noreplace(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst`` without ever replacing an existing ``dst`` (a file someone saved meanwhile).

    Linux: one ``renameat2(…, RENAME_NOREPLACE)``; elsewhere, or on a file system without it, hard-link then
    unlink (``link`` fails if ``dst`` exists), else an ``os.rename`` checked just before. Raises
    FileExistsError when ``dst`` exists (nothing moved), FileNotFoundError when ``src`` is gone, OSError otherwise.
    """
    if _rename_noreplace_at is not None:
        try:
            _rename_noreplace_at(src, dst)
            fsync_path(dst.parent)
            return
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                raise FileExistsError(errno.EEXIST, "destination exists", str(dst)) from None
            if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
    try:
        os.link(src, dst)
    except FileExistsError:
        raise
    except OSError:
        if os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, "destination exists", str(dst)) from None
        os.rename(src, dst)
    else:
        os.unlink(src)
    fsync_path(dst.parent)


_rename_noreplace_at = _load_renameat2(1, "noreplace")
