"""A keyword + graph sync in a separate process, for a long-running front end (the app) whose UI must keep the GIL.

A first index (or a re-index after a tokenizer/chunking change) parses, tokenises and writes thousands of notes:
tens of seconds of pure Python. Run on a thread of the app's process it shares the GIL with Textual's event loop,
so keys wait (p95 ~400 ms) and a search during the pass waits behind it (its keyword leg took 0.4–1.4 s instead of
~50 ms). :func:`sync_in_child` runs the same :meth:`Indexer.sync` in a spawned process over the same database
(the index's file lock and WAL already let processes share it: ``--serve`` and one-shot jobs do), reports progress
through a pipe and returns the child's :class:`IndexReport`. The parent then only applies vector tombstones.

The child opens its own :class:`Store` and :class:`Indexer` (no embedder, no model): ~0.3 s of imports before it
starts. It exits when the parent goes away (a watchdog thread), and a cancelled pass terminates it: batches it
committed stay valid (the interrupted-sync marker makes the next sync finish the rest).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable

from .report import IndexReport, Progress

log = logging.getLogger("reme.indexer")

#: Files at least this many of which need (re)reading make the app's startup pass run in a child process; below
#: it (the usual start: a few notes edited while the app was closed) the spawn (~0.3–0.5 s) costs more than it saves.
CHILD_MIN_STALE_FILES = 200
#: Niceness added to the child once its first batch is committed (the parse workers, started after it, inherit it).
#: Until then it runs at the app's priority: niced from the start, next to one busy process per core it got ~10 %
#: of a core, and a fresh vault's first search hit came seconds late.
CHILD_NICE = 10
#: Seconds between checks of the cancel flag and the child's liveness while it works.
POLL_S = 0.1


class SyncChildFailed(RuntimeError):
    """The child process could not run the sync (failed to start, died, or raised); the message says why."""


def stale_files(store) -> int | None:
    """How much a sync of ``store``'s index would re-read, cheaply: None for an index with no files yet or one
    whose last sync was interrupted (everything, or unknown), else the number of rows whose content hash was
    forgotten (a tokenizer or chunking change). One SQL count; never raises for a missing table."""
    import sqlite3

    from .indexer import SYNC_MARKER

    try:
        conn = store.conn
        if store.get_meta(SYNC_MARKER) is not None:
            return None
        n = conn.execute("SELECT count(*) FROM files").fetchone()[0]
        if n == 0:
            return None
        return conn.execute("SELECT count(*) FROM files WHERE sha = ''").fetchone()[0]
    except sqlite3.Error:
        return 0


def _has_files(vault, n: int) -> bool:
    """True when ``vault`` holds at least ``n`` files outside hidden folders (stops counting there: ~10 ms)."""
    seen = 0
    for _root, dirs, files in os.walk(vault):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        seen += len(files)
        if seen >= n:
            return True
    return False


def wants_child(store, vault=None) -> bool:
    """True when a full sync of ``store`` is a big one (see :data:`CHILD_MIN_STALE_FILES`): a first index (or an
    interrupted one) of a ``vault`` with at least that many files, or that many files to re-read."""
    n = stale_files(store)
    if n is None:
        return vault is None or _has_files(vault, CHILD_MIN_STALE_FILES)
    return n >= CHILD_MIN_STALE_FILES


def _watch_parent(parent: int) -> None:
    # getppid changes (to init or a subreaper) when the parent dies: a child sync must never outlive the app
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(3)


def _lower_priority() -> None:
    """Add :data:`CHILD_NICE` to this thread's niceness (on Linux a thread attribute: call it from the thread
    that syncs; the parse workers it starts afterwards inherit it)."""
    try:
        os.nice(CHILD_NICE)
    except (OSError, AttributeError):
        pass


def _child_main(conn, vault: str, settings, db_path: str, emb_path: str, parallel: bool, parent: int,
                log_path: str | None = None) -> None:
    """Child entry point: open the index, sync with progress sent as ``("progress", stage, done, total,
    detail)``, then send ``("done", report)`` or ``("error", text)``. Its stdout and stderr go to ``log_path``
    (appended; None: nowhere)."""
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    try:
        # the inherited stdout/stderr may be the app's terminal: nothing may write over the TUI
        fd = os.open(log_path or os.devnull, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    except OSError:
        pass
    try:
        from . import indexer as ix_mod
        from .indexer import Indexer
        from .store import Store
        from .tokenizer import default_tokenizer

        ix_mod.PARALLEL_ENABLED = parallel
        store = Store(db_path, emb_path)
        try:
            ix = Indexer(vault, settings, store, default_tokenizer(), None)
            niced = False  # full speed until the first batch is in (CHILD_NICE)

            def progress(stage: str, done: int, total: int, detail: str) -> None:
                nonlocal niced
                conn.send(("progress", stage, done, total, detail))
                if not niced and (done or stage != "index"):
                    niced = True
                    _lower_priority()

            report = ix.sync(progress)
            with store.write():
                store.set_meta("last_sync", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        finally:
            store.close()
        conn.send(("done", report))
    except BaseException as exc:  # reported to the parent, which falls back to syncing itself
        try:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        except Exception:
            pass
    finally:
        conn.close()


def sync_in_child(indexer, progress: Progress | None = None,
                  should_stop: Callable[[], bool] | None = None, *, log_path: str | None = None) -> IndexReport:
    """Run ``indexer.sync(progress)`` in a spawned process over the same vault and database; returns its report.

    ``progress`` is called on this thread with what the child reports (an exception it raises, e.g. to cancel,
    terminates the child and propagates); ``should_stop`` is polled every :data:`POLL_S` seconds and, when True,
    terminates the child and returns the report so far (an empty one). The child's output goes to ``log_path``
    (appended; None: discarded), never to this process's terminal. Vector tombstones the sync recorded are
    applied to ``indexer.vectors`` afterwards, as an in-process sync does. Raises :class:`SyncChildFailed` when
    the child cannot start, dies or fails (the caller may then sync in-process)."""
    import multiprocessing

    from . import indexer as ix_mod

    from .embedder import _ensure_resource_tracker

    ctx = multiprocessing.get_context("spawn")  # never fork a multi-threaded process
    try:
        _ensure_resource_tracker()  # under Textual sys.stderr has no descriptor: the spawn would fail
    except (OSError, ValueError) as exc:
        raise SyncChildFailed(f"could not start the sync process: {exc}") from exc
    recv, send = ctx.Pipe(duplex=False)
    store = indexer.store
    proc = ctx.Process(target=_child_main, name="reme-sync",
                       args=(send, str(indexer.vault), indexer.settings, str(store.db_path), str(store.emb_path),
                             ix_mod.PARALLEL_ENABLED, os.getpid(), log_path))
    try:
        proc.start()
    except (OSError, ValueError) as exc:
        raise SyncChildFailed(f"could not start the sync process: {exc}") from exc
    finally:
        send.close()  # the child holds the only writing end: EOF here means it is gone
    report: IndexReport | None = None
    try:
        while True:
            if should_stop is not None and should_stop():
                return IndexReport()
            try:
                ready = recv.poll(POLL_S)
            except (EOFError, OSError):
                ready = True
            if not ready:
                continue
            try:
                msg = recv.recv()
            except (EOFError, OSError):
                raise SyncChildFailed(f"the sync process ended without a report (exit code {proc.exitcode})")
            if msg[0] == "progress":
                if progress is not None:
                    progress(*msg[1:])
            elif msg[0] == "done":
                report = msg[1]
                break
            else:
                raise SyncChildFailed(str(msg[1]))
    finally:
        recv.close()
        if report is None and proc.is_alive():
            proc.terminate()  # SQLite rolls its open transaction back; committed batches stay
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
    if report.repaired:
        indexer.repairs.append(report.repaired)
    vectors = indexer.vectors
    if vectors is not None and vectors.ready and store.conn.execute(
            "SELECT 1 FROM vec_tombstones LIMIT 1").fetchone():
        vectors.apply_tombstones()
    return report


def index_in_child(engine, progress: Progress | None, cancelled, log_path: str | None = None):
    """The engine's keyword + graph sync in a child process when a big one is ahead (:func:`wants_child`), else
    None (the caller syncs in its own process). Returns the IndexReport; None as well when the child failed
    (logged: the caller then syncs itself). Holds ``engine.write_lock`` throughout.

    While thousands of rows arrive, the in-memory keyword scorer would re-derive each search's new rows in the
    calling process (~1 s a search, holding the GIL), and its first search after the pass would read every row
    (1.8–3.5 s at load 4); FTS5 answers from SQLite, which releases the GIL, in a few ms. So the scorer is off for
    the rest of this engine's life once a child pass ran (the same ranking up to ties); the next start uses it."""
    with engine.write_lock:
        if not wants_child(engine.store, engine.vault):
            return None
        if not engine._swept:  # what Engine.index does before its first full sync
            engine._swept = True
            engine.sweep_temp_files()
        searcher = engine.searcher
        memory = searcher.memory_bm25
        searcher.memory_bm25 = False
        try:
            report = sync_in_child(engine.indexer, progress, cancelled, log_path=log_path)
        except SyncChildFailed as exc:
            searcher.memory_bm25 = memory
            log.warning("keyword pass in a child process failed (%s): indexing here", exc)
            return None
        return report
