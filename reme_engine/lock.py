"""The single-writer lock of a vault (ARCHITECTURE §7.2).

Anything that writes to a vault through the LLM pipelines (the cron worker, ``reme-tui --refresh``, palette actions)
takes this lock first, so two app instances, or a cron run and ``--refresh``, never dream at once.

Mechanism: one file per vault, ``<state dir>/writer.lock``, locked with ``fcntl.flock(LOCK_EX | LOCK_NB)`` on a file
descriptor kept open for as long as the lock is held. The kernel drops a flock when its last descriptor closes, so
a holder that crashes or is killed (``kill -9``) releases the lock by itself: there is no stale lock to clean up.
The holder also writes who it is (``pid``, ``hostname``, ``started_at``, ``purpose``) into the file so others can
say who holds it; that text is informational only — the flock alone decides. A leftover file naming a dead
process (the holder crashed) is simply overwritten by the next holder, and :meth:`WriterLock.holder` reports no
holder for it. The file is never deleted: unlinking a flock file lets two processes lock two different inodes.

Semantics and limits:

- Not reentrant. Each :class:`WriterLock` *instance* has its own descriptor, and flock locks conflict between
  descriptors even inside one process, so two instances in one process exclude each other like two processes.
  Acquiring an instance that the calling thread already holds raises ``RuntimeError``; another thread waits
  (``blocking=True``) or gets ``False``.
- The descriptor is opened close-on-exec, so programs started with ``subprocess`` do not inherit the lock; a bare
  ``os.fork()`` child does (it shares the descriptor) and keeps the lock until it exits.
- POSIX only (Linux, macOS); the state dir must be on a local file system (flock over NFS is emulated).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import threading
import time
from datetime import datetime
from pathlib import Path

#: File name of the lock inside the vault's state dir.
LOCK_FILE = "writer.lock"
#: Seconds between attempts of a blocking :meth:`WriterLock.acquire` (flock itself has no timeout).
POLL_SECONDS = 0.05


def try_flock(path: str | os.PathLike[str], *, create: bool = False) -> int | None:
    """An exclusive ``flock`` on ``path`` without waiting: the open descriptor holding it (close it to release), or
    None when another descriptor holds it or the file cannot be opened. ``create``: make the file (mode 0600) if
    missing. Close-on-exec. The one non-blocking flock helper; :class:`WriterLock` adds holder info on top."""
    flags = (os.O_RDWR | os.O_CREAT if create else os.O_RDONLY) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


class LockHeld(Exception):
    """The writer lock is held by someone else. ``str(exc)`` is user-facing and names the holder.

    ``holder``: the holder's info dict (``pid``, ``hostname``, ``started_at``, ``purpose``) or ``None`` when it
    could not be read (e.g. the holder is a process whose recorded pid is gone but which passed the lock on).
    """

    def __init__(self, holder: dict | None) -> None:
        self.holder = holder
        super().__init__(describe_holder(holder))


def describe_holder(holder: dict | None) -> str:
    """``"writer lock held by pid 1234 (cron:auto_dream) since 2026-11-29T03:30:00+01:00"`` (host added if remote)."""
    if not holder:
        return "writer lock held by another process"
    text = f"writer lock held by pid {holder.get('pid', '?')} ({holder.get('purpose') or 'unknown purpose'})"
    if holder.get("started_at"):
        text += f" since {holder['started_at']}"
    host = holder.get("hostname")
    if host and host != socket.gethostname():
        text += f" on host {host}"
    return text


def pid_alive(pid: int) -> bool:
    """True when process ``pid`` exists on this host and is not a zombie."""
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    except OSError:
        return False
    try:  # Linux: a killed but not yet reaped child is a zombie; it holds no descriptors any more
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z"
    except OSError:
        return True


class WriterLock:
    """The cross-process writer lock of one vault.

    ``state_dir``: the vault's state dir (created if missing); ``purpose``: a short label recorded for "who holds
    it" messages (e.g. ``"cron:auto_dream"``, ``"refresh"``, ``"palette:dream"``).

    Use as a context manager (non-blocking; raises :class:`LockHeld`)::

        with WriterLock(state_dir, "refresh"):
            ...
    """

    def __init__(self, state_dir: str | os.PathLike[str], purpose: str = "writer") -> None:
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / LOCK_FILE
        self.purpose = purpose
        self._fd: int | None = None
        self._info: dict | None = None
        self._owner: int | None = None  # thread ident of the holder
        self._guard = threading.Lock()

    # -- acquire / release -------------------------------------------------------------------------------
    @property
    def held(self) -> bool:
        """True while this instance holds the lock."""
        return self._fd is not None

    def acquire(self, blocking: bool = False, timeout: float | None = None, *, purpose: str | None = None) -> bool:
        """Take the lock; True on success, False when someone else holds it.

        ``blocking``: keep trying (every ``POLL_SECONDS``) until it is free or ``timeout`` seconds pass
        (``None`` = wait forever). ``purpose`` overrides the instance's label for this hold.
        Raises ``RuntimeError`` when the calling thread already holds this instance (not reentrant) and
        ``OSError`` when the lock file cannot be created or locked for another reason (permissions, no flock).
        """
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            with self._guard:
                if self._fd is None:
                    if self._try_lock(purpose or self.purpose):
                        return True
                elif self._owner == threading.get_ident():
                    held_for = self._info["purpose"] if self._info else "?"
                    raise RuntimeError(f"writer lock already held by this thread ({held_for}); it is not reentrant")
            if not blocking or (deadline is not None and time.monotonic() >= deadline):
                return False
            wait = POLL_SECONDS if deadline is None else min(POLL_SECONDS, max(0.0, deadline - time.monotonic()))
            time.sleep(wait)

    def acquire_or_raise(self, blocking: bool = False, timeout: float | None = None, *,
                         purpose: str | None = None) -> None:
        """Like :meth:`acquire` but raises :class:`LockHeld` (naming the holder) instead of returning False."""
        if not self.acquire(blocking, timeout, purpose=purpose):
            raise LockHeld(self.holder(wait=True))

    def _try_lock(self, purpose: str) -> bool:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(5):  # retried only if the file was replaced between open and flock
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return False
                raise
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if not same:  # someone deleted/replaced the file: our lock is on an orphaned inode
                os.close(fd)
                continue
            info = {
                "pid": os.getpid(),
                "hostname": socket.gethostname(),
                "started_at": datetime.now().astimezone().isoformat(timespec="seconds"),
                "purpose": purpose,
            }
            try:
                data = (json.dumps(info) + "\n").encode("utf-8")
                os.ftruncate(fd, 0)
                os.pwrite(fd, data, 0)
            except OSError:
                pass  # the info is advisory; the flock is what counts
            self._fd, self._info, self._owner = fd, info, threading.get_ident()
            return True
        return False

    def release(self) -> None:
        """Release the lock (no-op when not held). The file stays; its holder info is cleared."""
        with self._guard:
            fd = self._fd
            if fd is None:
                return
            self._fd, self._info, self._owner = None, None, None
            try:
                os.ftruncate(fd, 0)  # while still locked, so nobody reads our info after we let go
            except OSError:
                pass
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def __enter__(self) -> "WriterLock":
        self.acquire_or_raise()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self) -> None:  # a dropped instance must not keep the vault locked
        try:
            self.release()
        except Exception:
            pass

    # -- who holds it ------------------------------------------------------------------------------------
    def holder(self, *, wait: bool = False) -> dict | None:
        """Info of the current holder ``{pid, hostname, started_at, purpose}``, or None when nobody holds it.

        Read from the lock file without touching the flock (probing it would make a concurrent acquire fail).
        A recorded holder on this host whose pid is dead is stale and reported as None. ``wait``: retry for up
        to ~0.2 s when the file is empty, for a holder that has locked but not yet written its info.
        """
        if self._info is not None:
            return dict(self._info)
        for attempt in range(5 if wait else 1):
            info = self._read_info()
            if info is not None:
                if info.get("hostname") == socket.gethostname() and not pid_alive(int(info.get("pid") or 0)):
                    return None
                return info
            if wait:
                time.sleep(0.04)
        return None

    def _read_info(self) -> dict | None:
        try:
            raw = self.path.read_bytes()
        except OSError:
            return None
        try:
            info = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return None
        if not isinstance(info, dict) or "pid" not in info:
            return None
        try:
            info["pid"] = int(info["pid"])
        except (TypeError, ValueError):
            return None
        return info


class LockTimeout(Exception):
    """A :class:`SharedFlock` was not free within the time the caller would wait. ``str(exc)`` is user-facing."""


class SharedFlock:
    """A short-held exclusive lock shared by the processes of one state dir (``flock`` on ``path``, created 0600
    and never deleted, as :class:`WriterLock`), reentrant for the thread holding it; the threads of one process
    queue on an ``RLock`` first, so one descriptor per process ever waits on the file.

    Use :func:`shared_flock` (one instance per path in a process) and ``with lock.hold(timeout): …``. Meant for
    critical sections of milliseconds (a capture's catalog check, append and catalog write; a read-modify-write
    of a small state file): a holder that dies releases it (the kernel drops a flock with its descriptor).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._rlock = threading.RLock()
        self._fd: int | None = None
        self._depth = 0

    def hold(self, timeout: float) -> "_Held":
        """A context manager holding the lock; waits up to ``timeout`` seconds (polling every
        :data:`POLL_SECONDS`), then raises :class:`LockTimeout`."""
        return _Held(self, timeout)

    def _acquire(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        if not self._rlock.acquire(timeout=max(0.0, timeout)):
            raise LockTimeout(f"{self.path.name} held by another thread for {timeout:g} s")
        if self._depth:
            self._depth += 1
            return
        while True:
            fd = try_flock(self.path, create=True)
            if fd is not None:
                self._fd, self._depth = fd, 1
                return
            if time.monotonic() >= deadline:
                self._rlock.release()
                raise LockTimeout(f"{self.path.name} held by another process for {timeout:g} s")
            time.sleep(POLL_SECONDS)

    def _release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._rlock.release()


class _Held:
    def __init__(self, lock: SharedFlock, timeout: float) -> None:
        self.lock, self.timeout = lock, timeout

    def __enter__(self) -> SharedFlock:
        self.lock._acquire(self.timeout)
        return self.lock

    def __exit__(self, *exc) -> None:
        self.lock._release()


_SHARED: dict[str, SharedFlock] = {}
_SHARED_GUARD = threading.Lock()


def shared_flock(path: str | os.PathLike[str]) -> SharedFlock:
    """The process's one :class:`SharedFlock` for ``path`` (created on first use; the folder must exist)."""
    key = os.path.abspath(os.fspath(path))
    with _SHARED_GUARD:
        lock = _SHARED.get(key)
        if lock is None:
            lock = _SHARED[key] = SharedFlock(key)
        return lock
