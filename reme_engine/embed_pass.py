"""The embed-lock protocol: one vector pass at a time, and requests made during a pass are never lost.

:class:`EmbedCoordinator` owns the lock every vector pass holds. The write lock is taken per committed batch only
(inside :meth:`reme_engine.index.indexer.Indexer.embed_pending`), so the app's writes and the watcher's syncs
never queue behind minutes of embedding. Lock order: a caller may hold the write lock (the app's writes) when it
asks for a pass, so a non-waiting request never blocks on the embed lock; it sets a flag that makes the running
pass go round once more instead.

Across processes (the app or ``--serve`` and a ``--refresh`` on the same state dir) a pass also holds a
non-blocking ``flock`` on ``<state dir>/embed.lock``. A process that finds it held skips its pass
(``report.embed_busy`` says so): the holder embeds every chunk still without a vector, and two passes at once
would double the CPU and leave each process's faiss file without the other's vectors while the store's
``has_vec`` flags claimed them. On taking the lock a pass first catches its in-memory index up with what
another process saved meanwhile (:meth:`~reme_engine.index.vectors.VectorState.catch_up`), so its save never
drops those vectors.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from .index.indexer import Indexer, IndexReport, Progress
    from .index.vectors import VectorState


#: Why a pass was skipped: another process holds the vault's embed lock (one line, user-facing).
BUSY = "skipped: another process is embedding this vault (it will finish the vectors)"


class EmbedCoordinator:
    """Runs vector passes for one vault.

    ``vectors``: the vault's :class:`~reme_engine.index.vectors.VectorState` (None: no embedder, every pass is a
    no-op); ``indexer`` does the pass; ``write_lock`` is the engine's; ``closed()`` is True once the engine
    closes (a running pass then stops after its batch).
    """

    def __init__(self, vectors: VectorState | None, indexer: Indexer, write_lock: threading.RLock,
                 closed: Callable[[], bool]) -> None:
        self.vectors = vectors
        self.indexer = indexer
        self.write_lock = write_lock
        self.closed = closed
        #: held by the running pass (tests and :meth:`wait_idle` look at it)
        self.lock = threading.Lock()
        self._state = threading.Lock()  # guards _more and the release of ``lock``
        self._more = False

    def run(self, progress: Progress | None = None, report: IndexReport | None = None,
            should_stop: Callable[[], bool] | None = None, *, wait: bool = True) -> IndexReport:
        """One vector pass (the caller's ``report`` gains ``embedded``/``embed_cached``/``embed_error``).

        ``wait=False``: when a pass is already running, return at once; that pass runs again before it ends,
        picking up the new chunks. ``should_stop`` is polled between batches (and while waiting for the lock)."""
        from .index.indexer import IndexReport

        report = report or IndexReport()
        if self.vectors is None or self.closed():
            return report
        caller_stop = should_stop

        def stop_now() -> bool:
            return self.closed() or (caller_stop is not None and caller_stop())

        if wait:
            # a waiting caller polls, so quitting never waits for someone else's pass
            while not self.lock.acquire(timeout=0.2):
                if stop_now():
                    return report
        else:
            with self._state:
                if not self.lock.acquire(blocking=False):
                    self._more = True  # the running pass goes round once more
                    return report
        held = True
        fd: int | None = None
        try:
            fd = self._process_lock()
            if fd is None:
                report.embed_busy = BUSY
                return report
            with self.write_lock:
                self.vectors.catch_up()
            while True:
                with self._state:
                    self._more = False  # requests made before the pass reads its rows are covered by it
                with self.write_lock:
                    self.vectors.open()
                    report.embed_cached += self.vectors.restored_from_cache
                    self.vectors.restored_from_cache = 0
                self.indexer.embed_pending(progress, report, stop_now, lock=self.write_lock)
                with self._state:
                    if not self._more or report.embed_error or stop_now():
                        # released under _state: a request either sees the lock free or sets the flag first
                        fd = self._release_process_lock(fd)
                        self.lock.release()
                        held = False
                        return report
        finally:
            self._release_process_lock(fd)
            if held:
                self.lock.release()

    def _process_lock(self) -> int | None:
        """The cross-process embed lock: an open descriptor holding it (-1: no lock file possible here, single
        process use), or None when another process (or another engine in this one) holds it."""
        from .lock import try_flock

        state_dir = self.vectors.path.parent
        if not os.access(state_dir, os.W_OK):
            return -1
        return try_flock(state_dir / "embed.lock", create=True)

    @staticmethod
    def _release_process_lock(fd: int | None) -> None:
        if fd is not None and fd >= 0:
            os.close(fd)  # releases the flock
        return None

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a running pass to finish its batch; True when none is running."""
        if not self.lock.acquire(timeout=timeout):
            return False
        self.lock.release()
        return True
