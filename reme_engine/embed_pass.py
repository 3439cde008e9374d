"""The embed-lock protocol: one vector pass at a time, and requests made during a pass are never lost.

:class:`EmbedCoordinator` owns the lock every vector pass holds. The write lock is taken per committed batch only
(inside :meth:`reme_engine.index.indexer.Indexer.embed_pending`), so the app's writes and the watcher's syncs
never queue behind minutes of embedding. Lock order: a caller may hold the write lock (the app's writes) when it
asks for a pass, so a non-waiting request never blocks on the embed lock; it sets a flag that makes the running
pass go round once more instead.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from .index.indexer import Indexer, IndexReport, Progress
    from .index.vectors import VectorState


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
        try:
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
                        self.lock.release()
                        held = False
                        return report
        finally:
            if held:
                self.lock.release()

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a running pass to finish its batch; True when none is running."""
        if not self.lock.acquire(timeout=timeout):
            return False
        self.lock.release()
        return True
