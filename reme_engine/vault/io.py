"""Bounded reads, content hashes and atomic, conflict-checked writes (ARCHITECTURE §8)."""

from __future__ import annotations

import atexit
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
#: Bytes set aside by a checked write (``.reme-swap``: the temp file just before its rename exchange, then the
#: bytes it displaced) or a checked delete (``.reme-deleting``), named ``.<note name>.<tag>.<random>.<suffix>`` so
#: that a crash leaves enough to settle them (:func:`sweep_temp_files`): ``tag`` holds the first 16 hex digits of
#: each content hash whose bytes may be dropped (the base and our new bytes; the base of a delete), and the note's
#: name is the whole name unless that would pass 255 bytes.
SWAP_SUFFIX, DELETING_SUFFIX = ".reme-swap", ".reme-deleting"
_ASIDE_RE = re.compile(r"^\.(?P<name>.+)\.(?P<tag>(?:[0-9a-f]{16})+)\.[0-9a-f]{8}(?P<suffix>\.reme-swap|\.reme-deleting)$")
_UMASK_LOCK = threading.Lock()


class SkipFile(Exception):
    """A file cannot be indexed or read as text; ``reason`` is short and user-facing."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WriteConflict(Exception):
    """The file changed on disk since it was read (its content hash differs); nothing was written.

    ``kept``: the conflict copy (``<stem> (conflict <time>)<suffix>`` beside the note, see :func:`keep_conflict_copy`)
    holding a save of the person's that the write displaced and could not put back because yet another save holds
    the note now; None when nothing had to be kept. The message names it too."""

    def __init__(self, message: str, kept: Path | None = None) -> None:
        super().__init__(message)
        self.kept = kept


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
        with _open_regular(path) as fh:
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
    """Content hash of the file at ``path``, or None when it does not exist. Something that is not a regular file
    (a FIFO or device put there meanwhile) is never read — opening a FIFO would block — and hashes to
    :data:`NOT_REGULAR`, which no content hash equals."""
    try:
        with _open_regular(path) as fh:
            return content_hash(fh.read())
    except FileNotFoundError:
        return None
    except SkipFile:
        return NOT_REGULAR


#: What :func:`file_hash` gives for a path that is not a regular file (not hex: equal to no content hash).
NOT_REGULAR = "not a regular file"


def _open_regular(path: Path):
    """``open(path, "rb")`` that never blocks on a FIFO nor reads a device: opened non-blocking, then the open
    descriptor itself must be a regular file (a check of the path before the open can be raced). Raises
    :class:`SkipFile` ("not a regular file") or OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SkipFile("not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


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

    Bytes a crash left set aside (:data:`SWAP_SUFFIX`, :data:`DELETING_SUFFIX`; see :func:`settle_aside`) are
    settled, never simply removed: dropped (and listed) only when their hash is one the name says may go, else put
    back at the note's name when it is free, else kept beside it as a conflict copy.
    """
    removed: list[Path] = []
    cutoff = time.time() - older_than_s
    for dirpath, dirnames, filenames in os.walk(root):
        if skip_hidden_dirs:
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if not name.startswith("."):
                continue
            aside = _ASIDE_RE.match(name)
            if not aside and not is_app_temp(name):
                continue
            p = Path(dirpath) / name
            try:
                st = os.lstat(p)
                if not stat.S_ISREG(st.st_mode) or st.st_mtime >= cutoff:
                    continue
                if aside:
                    if settle_aside(p) is None:
                        removed.append(p)
                    continue
                os.unlink(p)
                removed.append(p)
            except OSError:
                continue
    return removed


def _aside_name(name: str, shas: tuple[str, ...], suffix: str) -> str:
    """``.<name>.<tag>.<random>.<suffix>`` (see :data:`SWAP_SUFFIX`), ``name`` cut to keep within 255 bytes."""
    import secrets

    tag = "".join(sha[:16] for sha in shas)
    tail = f".{tag}.{secrets.token_hex(4)}{suffix}"
    room = 255 - 1 - len(tail.encode("utf-8"))
    while len(name.encode("utf-8")) > room:
        name = name[:-1]
    return f".{name}{tail}"


def settle_aside(aside: Path) -> Path | None:
    """Settle bytes a crashed write or delete left set aside (a name matching :data:`SWAP_SUFFIX` /
    :data:`DELETING_SUFFIX`); returns where they are kept, None when they were dropped.

    Dropped only when they hash to one of the hashes the name carries (the base of the write or delete, or our own
    new bytes: nothing of the person's). Otherwise they are a save of the person's that the crash left hidden:
    put back at the note's name when nothing is there, else kept beside it as a conflict copy. OSError."""
    m = _ASIDE_RE.match(aside.name)
    if m is None:
        raise ValueError(f"not an aside name: {aside.name}")
    tag = m["tag"]
    sha = file_hash(aside)
    if sha is None:
        return None
    if any(sha[:16] == tag[i:i + 16] for i in range(0, len(tag), 16)):
        os.unlink(aside)
        return None
    note = aside.with_name(m["name"])
    try:
        rename_noreplace(aside, note)
        log.warning("%s: a save a crash had left set aside is back at its name", note)
        return note
    except FileExistsError:
        return keep_conflict_copy(aside, note)


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
        with _open_regular(path) as fh:
            return fh.read(3) == b"\xef\xbb\xbf"
    except (OSError, SkipFile):
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
    - a hash, on Linux: the temp file is renamed to a ``.reme-swap`` name that carries the base's and the new
      bytes' hashes (a crash from here on leaves the displaced bytes to :func:`settle_aside`, never to a plain
      removal), then ``renameat2(RENAME_EXCHANGE)`` swaps it and the target in one atomic step, so the bytes
      that were replaced are still on disk under the temp name and are checked *after* the swap; if they were
      not the base (a save landed between the pre-check and the swap), the swap is undone and the user's bytes
      are back in place; when yet another save holds the note by then (an append onto our bytes), the displaced
      save is kept beside it as a conflict copy (:attr:`WriteConflict.kept`). Bytes displaced by a swap are only
      ever unlinked when they are ours, the base, or what the note holds (:func:`_drop_or_keep`); an append that
      lands in the displaced base after its check is kept the same way. An atomic save by another program can
      therefore never be lost. What remains: an
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
    tmp = _Temp(Path(tmp_name))
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
            published = _publish_new(tmp.path, path)
        elif expected_sha is False:
            os.replace(tmp.path, path)
            published = True
        else:
            published = _publish_over(tmp, path, expected_sha, new_sha)
    finally:
        if tmp.ours_only:  # only our own bytes (or a second name of the published file) can be at the temp name
            try:
                os.unlink(tmp.path)
            except OSError:
                pass
    fsync_path(path.parent)
    return new_sha


class _Temp:
    """An :func:`atomic_write` temp file: ``ours_only`` while the bytes at ``path`` can only be ours (until a rename
    exchange puts the person's bytes there; from then on :func:`_drop_or_keep` decides, never a plain unlink)."""

    def __init__(self, path: Path) -> None:
        self.path, self.ours_only = path, True


def _publish_new(tmp: Path, path: Path) -> bool:
    """Publish ``tmp`` at ``path`` only if ``path`` does not exist. Raises WriteConflict."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise _conflict(path, None) from None
    except OSError:  # no hard links on this file system: a rename that never replaces (renameat2 where it works)
        try:
            rename_noreplace(tmp, path)
        except FileExistsError:
            raise _conflict(path, None) from None
    return True


def _publish_over(tmp: _Temp, path: Path, expected_sha: str, new_sha: str) -> bool:
    """Replace ``path`` by ``tmp`` if ``path`` still holds ``expected_sha``. Raises WriteConflict (its ``kept``: a
    displaced save of the person's kept as a conflict copy, see :func:`_drop_or_keep`)."""
    if _rename_exchange is not None:
        # under a name that says which bytes may be dropped, so a crash between the swap and its settling leaves
        # the displaced bytes to sweep_temp_files to settle (an .reme-tmp is simply removed)
        swap = path.with_name(_aside_name(path.name, (expected_sha, new_sha), SWAP_SUFFIX))
        os.rename(tmp.path, swap)
        tmp.path = swap
        try:
            _rename_exchange(tmp.path, path)
        except FileNotFoundError:
            raise WriteConflict(f"{path.name} was removed since it was read") from None
        except OSError:
            pass  # no exchange on this file system: fall through to the checked replace
        else:
            # ``tmp`` now names the bytes that were at ``path`` an instant ago: the person's, never simply unlinked
            tmp.ours_only = False
            ok = False
            try:
                ok = _displaced_is(tmp.path, expected_sha)
                if not ok:
                    _undo_exchange(tmp.path, path, new_sha)
            finally:
                # success: the base we edited is droppable (an append that still landed in it is kept); failure: our
                # own bytes are. Anything else is a save of the person's that is not at the note: kept beside it.
                kept = _drop_or_keep(tmp.path, path, expected_sha if ok else new_sha, watch=ok)
            if ok:
                return True
            msg = f"{path.name} changed on disk since it was read"
            if kept is not None:
                msg += f"; another save holds it now, so the displaced one is kept as {kept.name!r}"
            raise WriteConflict(msg, kept=kept)
    if file_hash(path) != expected_sha:
        raise WriteConflict(f"{path.name} changed on disk since it was read")
    os.replace(tmp.path, path)
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
    """Put the person's bytes (now at ``tmp``) back at ``path`` while ours are still there; ours go to ``tmp``.

    If yet another save replaced (or appended to) our bytes at ``path`` after the swap, that save is the newest
    version and stays; swapping again would bury it. Whatever ends up at ``tmp`` is the caller's to settle with
    :func:`_drop_or_keep` (dropped only when it is ours or what the note holds), so no save is lost on any branch.
    """
    if file_hash(path) != new_sha:
        return  # a later save holds the note: the displaced one at tmp is kept by the caller
    try:
        _rename_exchange(tmp, path)
    except OSError:
        return
    if file_hash(tmp) in (new_sha, None):
        return
    # A save replaced ours between the hash and this swap: it is newer than the one just put back, so it goes to
    # the note and the earlier one to tmp (kept by the caller as a conflict copy).
    try:
        _rename_exchange(tmp, path)
    except OSError:
        pass


def conflict_copy_name(path: Path, n: int = 1) -> Path:
    """``<stem> (conflict <YYYY-MM-DD HHMMSS>)<suffix>`` beside ``path`` (the convention of every conflict copy);
    ``n`` > 1 adds `` n`` before the parenthesis closes. The stem is cut so the name stays within 255 bytes."""
    tag = f" (conflict {time.strftime('%Y-%m-%d %H%M%S')}{'' if n == 1 else f' {n}'})"
    stem, suffix = path.stem, path.suffix
    room = 255 - len((tag + suffix).encode("utf-8"))
    while len(stem.encode("utf-8")) > room:
        stem = stem[:-1]
    return path.with_name(stem + tag + suffix)


def keep_conflict_copy(aside: Path, path: Path) -> Path:
    """Rename ``aside`` (bytes of the person's that are not at ``path``) to a free :func:`conflict_copy_name` beside
    ``path``, never over an existing file (an earlier conflict copy of the same second gets a counter). Logs a
    warning and returns the copy's path. OSError when it cannot be renamed (``aside`` is then left where it is)."""
    for n in range(1, 1000):
        keep = conflict_copy_name(path, n)
        try:
            rename_noreplace(aside, keep)
        except FileExistsError:
            continue
        log.warning("%s: a save that could not stay at the note is kept as %s", path, keep.name)
        return keep
    raise FileExistsError(errno.EEXIST, "no free conflict copy name", str(path))


def _drop_or_keep(aside: Path, path: Path, droppable: str, *, watch: bool = False) -> Path | None:
    """Settle bytes displaced from ``path`` (now at ``aside``): unlinked when they hash to ``droppable`` (our own
    bytes, or the base the caller edited) or equal what ``path`` holds now; otherwise a save of the person's is
    there and it is kept as a conflict copy (:func:`keep_conflict_copy`), returned. None when dropped or gone.

    ``watch`` (the base of a successful write or delete): the dropped file stays open for
    :data:`DISPLACED_WATCH_S` seconds, so bytes a writer that still holds it open writes into it later are kept
    (see :class:`_OrphanWatch`)."""
    try:
        try:
            fh = _open_regular(aside)
        except FileNotFoundError:
            return None
        except SkipFile:  # not a regular file (raced in): never ours to drop
            return keep_conflict_copy(aside, path)
        held = False
        try:
            st = os.fstat(fh.fileno())
            sha = content_hash(fh.read())
            if sha == droppable or sha == file_hash(path):
                os.unlink(aside)
                if watch and sha == droppable:
                    _ORPHANS.watch(fh, st, path)
                    held = True
                return None
        finally:
            if not held:
                fh.close()
        return keep_conflict_copy(aside, path)
    except OSError as exc:  # left at its hidden name (never swept: the temp sweep only removes what is ours)
        log.warning("%s: displaced bytes left at %s (%s)", path, aside.name, exc)
        return None


#: Seconds the base a checked write displaced (or a checked delete removed) stays open after its name is gone: a
#: program that holds the old file open and writes into it later (streamed output ``cmd > note.md`` with pauses,
#: ``tee -a``, an editor saving in place) would write into a file nobody can reach; what it writes within this
#: time is kept (:class:`_OrphanWatch`). Its descriptor is the only cost.
DISPLACED_WATCH_S = 2.0
#: Most displaced files watched at once (each holds a descriptor); beyond it the oldest is checked at once.
DISPLACED_WATCH_MAX = 64


class _OrphanWatch:
    """Displaced files kept open after their unlink, each checked once its :data:`DISPLACED_WATCH_S` have passed
    (and all of them at interpreter exit, so a one-shot CLI job checks too): one whose size or mtime changed was
    written to by a program that still had it open, and its whole content is kept — back at the note's name when
    that is free (a deleted note), else as a conflict copy beside it. One daemon thread, started on demand."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[tuple[float, object, tuple, Path]] = []
        self._thread: threading.Thread | None = None

    def watch(self, fh, st: os.stat_result, path: Path) -> None:
        overflow = []
        with self._lock:
            self._items.append((time.monotonic() + DISPLACED_WATCH_S, fh, _identity(st), path))
            while len(self._items) > DISPLACED_WATCH_MAX:
                overflow.append(self._items.pop(0))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="reme-displaced-watch", daemon=True)
                self._thread.start()
        for item in overflow:
            self._check(item)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._items:
                    self._thread = None
                    return
                now = time.monotonic()
                due = [it for it in self._items if it[0] <= now]
                self._items = [it for it in self._items if it[0] > now]
                nxt = min((it[0] for it in self._items), default=now)
            for item in due:
                self._check(item)
            time.sleep(min(0.25, max(0.01, nxt - time.monotonic())))

    def check_all(self) -> None:
        """Check every watched file now (at exit)."""
        with self._lock:
            items, self._items = self._items, []
        for item in items:
            self._check(item)

    @staticmethod
    def _check(item) -> None:
        _, fh, ident, path = item
        try:
            if _identity(os.fstat(fh.fileno())) == ident:
                return
            fh.seek(0)
            data = fh.read()
            kept = _publish_copy(path, data)
            log.warning("%s: a program wrote into the note's old file after the app replaced it; those bytes are "
                        "kept as %s", path, kept.name)
        except (OSError, WriteConflict) as exc:
            log.warning("%s: late writes into the note's old file could not be kept (%s)", path, exc)
        finally:
            fh.close()


def _publish_copy(path: Path, data: bytes) -> Path:
    """Write ``data`` at ``path`` if nothing is there, else at a free :func:`conflict_copy_name`; returns where."""
    try:
        atomic_write(path, data, expected_sha=None)
        return path
    except WriteConflict:
        pass
    for n in range(1, 1000):
        keep = conflict_copy_name(path, n)
        try:
            atomic_write(keep, data, expected_sha=None)
            return keep
        except WriteConflict:
            continue
    raise WriteConflict(f"no free conflict copy name beside {path.name}")


_ORPHANS = _OrphanWatch()
atexit.register(_ORPHANS.check_all)


def remove_if_unchanged(path: Path, expected_sha: str) -> None:
    """Delete the file at ``path`` only if it still holds ``expected_sha`` (:func:`content_hash`).

    The check and the removal are one step against other writers: the file is first renamed aside (atomic, same
    folder, a hidden ``.<name>.<base hash>.<random>.reme-deleting`` name: after a crash the sweep deletes it only
    when it still holds ``expected_sha``, else puts it back, see :func:`settle_aside`), the bytes renamed aside
    are checked as :func:`atomic_write` checks displaced bytes, and only then unlinked. When they are not
    ``expected_sha`` (the person saved meanwhile) they are put back, and when another file took the name in
    between, they are kept beside it as ``<stem> (conflict <time>)<suffix>``; a save is never lost.
    Raises WriteConflict (changed since read, or already gone); OSError from the rename/unlink.
    """
    aside = path.with_name(_aside_name(path.name, (expected_sha,), DELETING_SUFFIX))
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        raise WriteConflict(f"{path.name} was removed since it was read") from None
    if _displaced_is(aside, expected_sha):
        # an append that still landed in it after the check is a save: kept as a conflict copy, not unlinked
        kept = _drop_or_keep(aside, path, expected_sha, watch=True)
        fsync_path(path.parent)
        if kept is not None:
            log.warning("%s was written to while it was deleted; that save is kept as %s", path, kept.name)
        return
    kept = None
    try:
        rename_noreplace(aside, path)  # put back, unless a new file took the name meanwhile
    except FileExistsError:
        kept = keep_conflict_copy(aside, path)
    msg = f"{path.name} changed on disk since it was read"
    if kept is not None:
        msg += f"; another file took its name meanwhile, so it is kept as {kept.name!r}"
    raise WriteConflict(msg, kept=kept)


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
        unlink_second_name(src, dst)
    fsync_path(dst.parent)


def unlink_second_name(name: Path, other: Path) -> None:
    """Remove ``name``, a hard link to the file at ``other``, without ever removing a file that replaced it
    meanwhile (an editor's atomic save onto ``name`` between the ``link`` and now).

    ``name`` is first renamed aside (atomic: whatever it names at that instant moves); only when that is the same
    file as ``other`` is it unlinked — a second name of a file that lives on as ``other``. A different file is a
    save of the person's: put back at ``name``, or kept as a conflict copy when ``name`` was taken again. OSError
    from the renames."""
    aside = name.with_name(_aside_name(name.name, (file_hash(other) or "0" * 16,), DELETING_SUFFIX))
    os.rename(name, aside)
    try:
        same = os.path.samestat(os.lstat(aside), os.lstat(other))
    except FileNotFoundError:
        same = False
    if same:
        os.unlink(aside)
        return
    log.warning("%s was saved again while it was renamed; that save stays at its name", name)
    try:
        rename_noreplace(aside, name)
    except FileExistsError:
        keep_conflict_copy(aside, name)


_rename_noreplace_at = _load_renameat2(1, "noreplace")
