"""Incremental indexing of a vault: scan → diff by content hash → parse/chunk/tokenize → store; then vectors.

Two passes (ARCHITECTURE §9: the embedder, not the keyword pass, bounds a cold index):

1. :meth:`Indexer.sync` — the keyword + graph pass. Walks the vault, classifies files as added / modified /
   removed / renamed / unchanged (mtime+size as a fast path, the content hash decides), and applies each file's
   new rows (file, chunks, FTS postings, links) in a transaction. Keyword search and the graph are complete
   when it returns.
2. :meth:`Indexer.embed_pending` — the vector pass. Embeds chunks that have no vector yet, reusing the
   embedding cache (keyed by embedding space + text hash) so moved or re-indexed text is never re-embedded.

The steps live in their own modules (mixins of :class:`Indexer`): :mod:`.scan`, :mod:`.parse`, :mod:`.apply`,
:mod:`.links_step`, :mod:`.embed_step`; their public names are re-exported here.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import sqlite3
import stat as stat_mod
import threading
import time
import unicodedata
from pathlib import Path
from typing import Iterable

from ..config import Settings
from ..crashpoints import crash_point
from ..vault.paths import is_hidden
from .apply import ApplyStep
from .embed_step import EMBED_BATCH, EmbedStep
from .links_step import LinksStep
from .report import IndexReport, Progress
from .parse import (MAX_LINKS_PER_FILE, MIN_VECTOR_CHARS, NO_VECTOR, SUMMARY_SCAN_CHARS, ParsedFile, ParseStep,
                    chunk_vid, plain_line, wants_vector)
from .scan import MARKDOWN_EXTS, TEXT_EXTS, ScanEntry, ScanStep, _index_file_lock, path_date
from .store import Store

__all__ = ["BATCH_BYTES", "BATCH_FILES", "BATCH_SECONDS", "CRASH_POINTS", "EMBED_BATCH", "FIRST_BATCH_FILES",
           "MARKDOWN_EXTS", "MAX_LINKS_PER_FILE", "MIN_VECTOR_CHARS", "NO_VECTOR", "SMALL_FIRST_BYTES",
           "SUMMARY_SCAN_CHARS", "SYNC_MARKER", "TEXT_EXTS", "IndexReport", "Indexer", "ParsedFile", "Progress",
           "ScanEntry", "chunk_vid", "first_sync_order", "path_date", "plain_line", "wants_vector"]

log = logging.getLogger("reme.indexer")


#: Files committed per transaction during a big sync (each file's rows are still applied atomically). A sync with
#: more files than this commits batch by batch (search sees the first notes early) under the ``sync_interrupted``
#: marker; the links, removals and the path list land with the marker's removal, in the last transaction.
BATCH_FILES = 256
#: A multi-batch sync (a first index) commits its first batch after this many files and doubles the batch up to
#: :data:`BATCH_FILES`; a batch also ends at :data:`BATCH_BYTES` of input or :data:`BATCH_SECONDS` of parsing. With
#: small and recent notes first (:func:`first_sync_order`) a fresh vault is searchable within a second.
FIRST_BATCH_FILES = 16
BATCH_BYTES = 2 * 1024 * 1024
BATCH_SECONDS = 0.5
#: Notes up to this size go first in a multi-batch sync, newest first; bigger files follow, smallest first.
SMALL_FIRST_BYTES = 64 * 1024
#: Meta key set while a multi-transaction sync is under way; found at open with no sync running, it means a sync
#: was killed: :meth:`Indexer.repair_interrupted` re-resolves every link against the vault's files.
SYNC_MARKER = "sync_interrupted"


#: Crash points of a sync and a vector pass (``REME_CRASH_AT=<name>``, see :mod:`reme_engine.crashpoints`; tests and
#: ``bench/bench_chaos.py`` only): after the marker of a multi-batch sync, after its first batch, after the keyword
#: pass, inside the link update, before the last commit, after a vector batch's commit, before the vector save.
CRASH_POINTS = ("sync.after_marker", "sync.after_batch", "sync.after_keyword", "sync.in_links", "sync.after_links",
                "embed.after_commit", "embed.before_save")

#: A sync with at least this many files to parse uses a process pool (parsing is CPU-bound pure Python:
#: markdown-it, YAML, tokenising). Below it, worker start-up (~0.3 s of imports) costs more than it saves.
PARALLEL_MIN_FILES = 600
#: ... and at least this many bytes: on 2 cores the pool lost on the 4 MB vault (4.3 s vs 3.8 s sequential)
#: and won on the 33 MB corpus (14.8 s vs 16.8 s) — bench/RESULTS.md.
PARALLEL_MIN_BYTES = 16 * 1024 * 1024
#: Opt-in: spawned workers re-import the caller's ``__main__``, which breaks scripts without a
#: ``if __name__ == "__main__"`` guard. The ``reme-tui`` entry points switch it on.
PARALLEL_ENABLED = False
#: A pool only when the 1-minute load average (this process included) is below this many runnable tasks per CPU.
#: Parsing in workers costs ~18 % more CPU than in-process (each spawned worker imports the engine and loads the
#: segmenter's dictionary; every parsed file is pickled across): on the 33 MB corpus with 2 workers, 17.0 s of
#: CPU against 14.5 s, and at load 6-9 on 2 cores it was slower as well (50.9 s wall against 40.8 s), since no
#: core was free for the workers (bench/RESULTS.md, "Cold keyword pass CPU, session 21").
POOL_MAX_LOAD_PER_CPU = 1.0
#: Files a pooled sync parses in its own process first, while the workers start.
INLINE_HEAD_FILES = 64
_WORKER_INDEXERS: dict = {}


def _parse_pool(n_files: int, n_bytes: int = 1 << 62):
    """A spawn-context process pool for a big sync, or None (small syncs, one core, a busy machine: see
    :data:`POOL_MAX_LOAD_PER_CPU`, or pools unavailable)."""
    cpus = os.cpu_count() or 1
    if (not PARALLEL_ENABLED or n_files < PARALLEL_MIN_FILES or n_bytes < PARALLEL_MIN_BYTES or cpus < 2
            or os.environ.get("REME_NO_PARALLEL_INDEX")):
        return None
    try:
        if os.getloadavg()[0] >= POOL_MAX_LOAD_PER_CPU * cpus:  # busy machine: no free core to gain
            return None
    except OSError:  # no load average on this platform
        pass
    try:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: the app forks from a worker thread of a multi-threaded process otherwise.
        return ProcessPoolExecutor(max_workers=min(cpus, 4), mp_context=multiprocessing.get_context("spawn"))
    except (OSError, ValueError, ImportError):
        return None


def _parse_in_worker(args) -> tuple["ParsedFile | None", str | None]:
    """Pool entry point: parse one file with a per-process parser (no store)."""
    vault, settings, entry = args
    key = (str(vault), id(settings))
    ix = _WORKER_INDEXERS.get(key)
    if ix is None:
        from .tokenizer import default_tokenizer

        ix = Indexer.__new__(Indexer)
        ix.vault, ix.settings, ix.tokenizer = Path(vault), settings, default_tokenizer()
        _WORKER_INDEXERS.clear()
        _WORKER_INDEXERS[key] = ix
    return ix._parse_safe(entry)



def first_sync_order(item: tuple[ScanEntry, int | None]) -> tuple:
    """Sort key of a multi-batch sync's work: notes up to :data:`SMALL_FIRST_BYTES`, newest first, then bigger
    files, smallest first (what a user opens first is searchable first; pathological files come last)."""
    e = item[0]
    if e.size <= SMALL_FIRST_BYTES:
        return (0, -e.mtime, e.rel)
    return (1, e.size, e.rel)


class Indexer(ScanStep, ParseStep, ApplyStep, LinksStep, EmbedStep):
    """Keeps the store (and the vector index) in step with the vault. Thread-safe: one writer at a time."""

    def __init__(self, vault: Path, settings: Settings, store: Store, tokenizer, vectors=None) -> None:
        self.vault = Path(vault)
        self.settings = settings
        self.store = store
        self.tokenizer = tokenizer
        self.vectors = vectors  # VectorState or None
        self.lock = threading.RLock()
        self._file_lock = _index_file_lock(store.db_path.parent)
        # Every file of the vault (attachments too) and a link resolver over it, kept in memory between syncs
        # and valid while the store's ``names_gen`` is the one they were loaded at (another process's sync
        # changes it). Only sync touches them, under ``self.lock``.
        self._paths: set[str] | None = None
        self._paths_gen: str | None = None
        self._resolver = None
        #: user-facing lines of what syncs of this process repaired (interrupted sync, corrupt/deleted index)
        self.repairs: list[str] = []
        layers = settings.layers
        self._text_roots = tuple(f"{d}/" for d in (layers.resource_dir, layers.daily_dir, layers.digest_dir))
        self._dialog_root = f"{layers.session_dir}/dialog/"  # chat records (reme_engine.search.chats)
        self._check_tokenizer()

    # -- scanning -----------------------------------------------------------------------------------------
    def chunking_fingerprint(self) -> str:
        """Every setting and rule that decides a file's chunks and rows (``chunk_bytes``, the chunker's linear-parse
        threshold, the per-file link cap, the summary scan): a change re-reads every file at the next sync."""
        from ..markdown import chunker

        return json.dumps({"chunk_bytes": self.settings.chunk_bytes, "linear_parse_bytes": chunker.LINEAR_PARSE_BYTES,
                           "max_links": MAX_LINKS_PER_FILE, "summary_chars": SUMMARY_SCAN_CHARS, "rules": 2},
                          sort_keys=True)

    def _check_tokenizer(self) -> None:
        """Forget the content hashes of files whose rows were made by another tokenizer or chunking (the next sync
        re-reads them). A corrupt database is left to the open check / health check that moves it aside."""
        from .store import brief, is_corruption

        try:
            self._check_fingerprints()
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):
                raise
            log.warning("index fingerprints not checked: %s", brief(exc))

    def _check_fingerprints(self) -> None:
        chunking = self.chunking_fingerprint()
        if self.store.get_meta("chunking") != chunking:
            with self.store.write() as c:
                c.execute("UPDATE files SET sha = '', mtime = -1")
                self.store.set_meta("chunking", chunking)
        fp = self.store.get_meta("tokenizer")
        if fp != self.tokenizer.fingerprint:
            with self.store.write() as c:
                if fp is not None:
                    # Different tokens: every file must be re-tokenised. Forget hashes so sync re-reads all.
                    c.execute("UPDATE files SET sha = '', mtime = -1")
                self.store.set_meta("tokenizer", self.tokenizer.fingerprint)
        from ..search.chats import CHUNKING

        if self.store.get_meta("dialog_chunking") != CHUNKING:  # chat records chunk by turn: re-read them
            with self.store.write() as c:
                c.execute("UPDATE files SET sha = '', mtime = -1 WHERE substr(path, -6) = '.jsonl'")
                self.store.set_meta("dialog_chunking", CHUNKING)

    # -- the keyword + graph pass ---------------------------------------------------------------------------
    def sync(self, progress: Progress | None = None, *, paths: Iterable[str] | None = None) -> IndexReport:
        """Bring files, chunks, postings and links up to date with the vault.

        ``paths``: limit the work to these vault-relative paths (a watcher batch or the app's own writes);
        ``None`` = full scan. Never raises for a bad file: it is skipped with a reason.
        """
        from .store import brief, is_corruption

        with self.lock, self._file_lock:
            notice = None
            if self.store.gone():
                # the state dir (or the database) was deleted under us: start again, from the vault
                self.store.reopen()
                self._reset_derived()
                notice = "index database was deleted or replaced: rebuilt from the vault"
                paths = None
            try:
                report = self._sync(progress, paths)
            except sqlite3.DatabaseError as exc:
                if not is_corruption(exc):
                    raise
                log.warning("index database is corrupt (%s): moved aside, rebuilding from the vault", brief(exc))
                self.store.recover_corrupt(exc)
                self._reset_derived()
                notice = f"index was corrupt ({brief(exc)}): moved aside and rebuilt from the vault"
                report = self._sync(progress, None)
            if notice:
                report.repaired = notice if not report.repaired else f"{notice}; {report.repaired}"
            if report.repaired:
                self.repairs.append(report.repaired)
            return report

    def clear(self) -> None:
        """Drop every indexed row (files, chunks, postings, links, skips) and the vector file; the embedding cache
        and the pipelines' catalogs stay. A fresh database file when this process is the index's only user
        (:meth:`Store.fresh_file`), else DELETEs. A database too damaged to delete from is moved aside instead
        (:meth:`Store.recover_corrupt`)."""
        from .store import brief, is_corruption

        with self.lock, self._file_lock:
            try:
                # A fresh file is as fast as a cold index; DELETEs of every row and posting took 1.7x longer.
                if self.store.fresh_file(drop_meta=(SYNC_MARKER, "all_paths_cache", "last_sync")):
                    self._reset_derived()
                    return
                with self.store.write() as c:
                    from .store import clear_postings

                    clear_postings(c)  # a contentless FTS5 table refuses DELETE
                    for t in ("links", "chunks", "files", "skipped", "vec_tombstones"):
                        c.execute(f"DELETE FROM {t}")
                    c.execute("DELETE FROM meta WHERE key IN (?, ?, ?)", (SYNC_MARKER, "all_paths_cache", "last_sync"))
            except sqlite3.DatabaseError as exc:
                if not is_corruption(exc):
                    raise
                self.store.recover_corrupt(exc)
                self.repairs.append(f"index was corrupt ({brief(exc)}): moved aside and rebuilt from the vault")
            self._reset_derived()

    def _reset_derived(self) -> None:
        """Forget in-memory state derived from a database that was replaced (corrupt, deleted)."""
        self._paths = self._paths_gen = self._resolver = None
        self._check_tokenizer()
        if self.vectors is not None:
            self.vectors.reset()

    def _sync(self, progress: Progress | None, paths: Iterable[str] | None) -> IndexReport:
        """:meth:`sync` under the locks. One transaction when the work fits in one batch; otherwise batches
        under :data:`SYNC_MARKER`, the links and the path list in the last transaction with the marker's removal."""
        t0 = time.perf_counter()
        report = IndexReport()
        prog = progress or (lambda *a: None)
        interrupted = self.store.get_meta(SYNC_MARKER)
        if interrupted is not None:
            report.repaired = "the last sync was interrupted: finished it, every link re-resolved"
            paths = None  # the path list may predate the interrupted sync's files: rescan the vault
        with contextlib.ExitStack() as txn:
            known = self.store.file_rows() if paths is None else None
            if paths is None:
                entries, all_paths = self.scan(report)
                scope = set(entries) | set(known)
            else:
                entries = {}
                path_set = set(self._vault_paths())
                scope = set()
                root = self.vault.resolve()
                from ..vault.paths import VaultPathError, resolve

                for rel in paths:
                    rel = unicodedata.normalize("NFC", rel.strip("/"))
                    if not rel or is_hidden(rel) or not self.is_indexable(rel):
                        continue
                    scope.add(rel)  # an indexed note that became unusable (e.g. a symlink loop) is dropped
                    try:
                        p = resolve(root, rel).abs  # finds an NFD spelling on disk too
                    except VaultPathError as exc:
                        if os.path.lexists(root / rel):
                            report.skipped.append({"path": rel, "reason": f"unreadable: {exc}"})
                        path_set.discard(rel)
                        continue
                    try:
                        st = os.stat(p)
                        real = p.resolve()
                        twin = self._indexed_target(real, root) if real != p else None
                        if twin is not None and twin != rel and stat_mod.S_ISREG(st.st_mode):
                            report.skipped.append({"path": rel, "reason": f"symlink to {twin}: indexed there"})
                        elif stat_mod.S_ISREG(st.st_mode) and real.is_relative_to(root):
                            entries[rel] = ScanEntry(rel, p, st.st_mtime, st.st_size)
                        elif stat_mod.S_ISREG(st.st_mode):
                            report.skipped.append({"path": rel, "reason": "symlink leaves the vault"})
                    except (OSError, RuntimeError):
                        pass
                    if rel in entries:
                        path_set.add(rel)
                    else:
                        path_set.discard(rel)
                all_paths = path_set
            if known is None:
                known = self.store.file_rows(scope)
            report.scanned = len(entries)
            prior_skips = {r[0]: (r[1], r[2], r[3]) for r in self.store.conn.execute(
                "SELECT path, reason, size, mtime FROM skipped")}
            todo: list[tuple[ScanEntry, int | None]] = []
            for rel in sorted(scope):
                e = entries.get(rel)
                k = known.get(rel)
                if e is None:
                    continue
                if k is not None and k[1] == e.mtime and k[2] == e.size and k[3]:
                    report.unchanged += 1
                    continue
                ps = prior_skips.get(rel)
                if k is None and ps is not None and ps[1] == e.size and ps[2] == e.mtime:
                    report.skipped.append({"path": rel, "reason": ps[0]})  # still bad, unchanged since
                    continue
                todo.append((e, k[0] if k else None))
            removed = [rel for rel in scope if rel in known and rel not in entries]
            removed_by_sha: dict[str, list[str]] = {}
            for rel in removed:
                removed_by_sha.setdefault(known[rel][3], []).append(rel)
            paths_changed = bool(removed)
            aliased: list[str] = []  # modified files with aliases: links elsewhere may resolve to them anew
            total = len(todo)
            prog("index", 0, total, "")
            done = 0
            batch: list[tuple[ScanEntry, int | None, ParsedFile | None, str | None]] = []
            # One transaction for the whole sync when it fits in one batch (watcher batches, the app's writes,
            # an incremental refresh): it is opened lazily, after the first batch is parsed, and joined by every
            # write below. A bigger sync commits per batch, announced by the marker first.
            single = total <= BATCH_FILES
            if not single:
                todo.sort(key=first_sync_order)
                with self.store.write():
                    self.store.set_meta(SYNC_MARKER, json.dumps({"pid": os.getpid(), "at": time.time()}))
                crash_point("sync.after_marker")

            def flush(parsed: list[tuple[ScanEntry, int | None, ParsedFile | None, str | None]]) -> None:
                nonlocal paths_changed
                if single and not self.store.conn.in_transaction:
                    txn.enter_context(self.store.write())
                with self.store.write() as c:
                    for e, fid, pf, reason in parsed:
                        if pf is None:
                            if fid is not None:
                                ids = self._remove(c, e.rel, fid)
                                report.chunks_removed += len(ids)
                                report.removed += 1
                                report.removed_paths.append(e.rel)
                                paths_changed = True
                            if reason != "__vanished__":
                                self._record_skip(c, e.rel, reason, e, report)
                            continue
                        if fid is not None and known[e.rel][3] == pf.sha:
                            # Touched, not changed: refresh the fast-path stamp only.
                            c.execute("UPDATE files SET mtime=?, size=? WHERE id=?", (pf.mtime, pf.size, fid))
                            report.unchanged += 1
                            continue
                        old = None
                        if fid is None and removed_by_sha.get(pf.sha):
                            # A removed file with the same content: a rename. Reuse its row (and vectors'
                            # cache entries through the text hash).
                            src = removed_by_sha[pf.sha].pop(0)
                            removed.remove(src)
                            old = known[src][0]
                            report.renamed += 1
                            report.removed_paths.append(src)
                            paths_changed = True
                        elif fid is None:
                            report.added += 1
                            paths_changed = True
                        else:
                            report.modified += 1
                        target = fid if fid is not None else old
                        had_aliases = fid is not None and c.execute(
                            "SELECT aliases != '[]' FROM files WHERE id=?", (fid,)).fetchone()[0]
                        self._apply(c, pf, target, report)
                        report.changed_paths.append(pf.rel)
                        if had_aliases or (fid is not None and pf.aliases):
                            aliased.append(pf.rel)

            limit = self.settings.max_file_bytes
            pool = _parse_pool(len(todo), sum(e.size for e, _ in todo if e.size <= limit))
            if pool is None:
                outcome_iter = (self._parse_safe(e) for e, _ in todo)
            else:
                # The first batches parse here while the spawned workers import (seconds on a busy machine), so
                # the first notes are searchable at once; the workers take the rest.
                # The workers start after the first commit (or once the head is parsed): started with the sync,
                # two interpreters importing and loading the tokenizer's dictionary took the cores from the first
                # batch (a fresh vault's first hit came seconds later on 2 cores).
                head = INLINE_HEAD_FILES
                pooled: dict = {}

                def start_pool() -> None:
                    if "it" not in pooled:
                        pooled["it"] = pool.map(_parse_in_worker,
                                                [(self.vault, self.settings, e) for e, _ in todo[head:]],
                                                chunksize=16)

                def rest():
                    start_pool()
                    yield from pooled["it"]

                outcome_iter = itertools.chain((self._parse_safe(e) for e, _ in todo[:head]), rest())
            try:
                # Results arrive in order; with a pool, workers keep parsing ahead while this thread writes.
                cap, nbytes, since = FIRST_BATCH_FILES, 0, time.monotonic()
                for (e, fid), (pf, reason) in zip(todo, outcome_iter):
                    batch.append((e, fid, pf, reason))
                    nbytes += e.size
                    if not single and (len(batch) >= cap or nbytes >= BATCH_BYTES
                                       or time.monotonic() - since >= BATCH_SECONDS):
                        flush(batch)
                        crash_point("sync.after_batch")
                        done += len(batch)
                        prog("index", done, total, e.rel)
                        if pool is not None:
                            start_pool()  # after prog: a child sync lowers its priority there first
                        batch, nbytes, cap, since = [], 0, min(BATCH_FILES, 2 * cap), time.monotonic()
                if batch:
                    flush(batch)
                    done += len(batch)
                    prog("index", done, total, "")
            finally:
                if pool is not None:
                    pool.shutdown(cancel_futures=True)
            crash_point("sync.after_keyword")
            # The last transaction (the only one of a single-batch sync): removals, skips, links, path list, and
            # the marker's removal land together.
            txn.enter_context(self._final_txn())
            if removed:
                with self.store.write() as c:
                    for rel in removed:
                        ids = self._remove(c, rel, known[rel][0])
                        report.chunks_removed += len(ids)
                        report.removed += 1
                        report.removed_paths.append(rel)
                        c.execute("DELETE FROM skipped WHERE path=?", (rel,))
            # Files skipped earlier that no longer exist are forgotten; skips found by the scan (or, for a batch,
            # by resolving its paths: symlinks, loops, names) are recorded so health_check lists them too.
            with self.store.write() as c:
                if paths is None:
                    gone = [p for p in prior_skips if p not in entries]
                    c.executemany("DELETE FROM skipped WHERE path=?", [(p,) for p in gone])
                now = time.time()
                if report.skipped:
                    c.executemany("INSERT OR REPLACE INTO skipped(path, reason, size, mtime, at) VALUES (?,?,?,?,?)",
                                  [(sk["path"], sk["reason"], None, None, now) for sk in report.skipped
                                   if sk["path"] not in entries])
            prog("links", 0, 1, "")
            self.resolve_links(all_paths=all_paths, only_changed=not paths_changed and not aliased,
                               changed=report.changed_paths, removed=report.removed_paths,
                               rebuild=interrupted is not None)
            if interrupted is not None or not single:
                self.store.conn.execute("DELETE FROM meta WHERE key = ?", (SYNC_MARKER,))
            crash_point("sync.after_links")
            txn.close()  # commit
            if not single and not known and paths is None and interrupted is None:
                # a first index (or reindex clear=true): its batch commits left half-filled pages and many FTS5
                # segments; merged and rewritten once, ~7 % smaller (Store.compact)
                report.compacted = self.store.compact()
            prog("links", 1, 1, "")
        if self.vectors is not None and self.vectors.ready and (
                report.chunks_removed or removed
                or self.store.conn.execute("SELECT 1 FROM vec_tombstones LIMIT 1").fetchone()):
            # also removals recorded by another process's sync of a file this one then found unchanged
            self.vectors.apply_tombstones()
        counts = self.store.counts()
        report.chunks_total = counts["chunks"]
        report.links_total = counts["links"]
        report.seconds_keyword = time.perf_counter() - t0
        return report

    def sync_in_progress(self) -> bool:
        """True while a sync of this index runs, in this process or another (its ``index.lock`` is held): what is
        committed so far is searchable, and a caller that would sync first (a one-shot ``job search`` on a
        never-indexed vault) should search at once instead of waiting for it. Never blocks."""
        if not self.lock.acquire(blocking=False):
            return True
        try:
            if not self._file_lock.try_enter():
                return True
            self._file_lock.__exit__(None, None, None)
            return False
        finally:
            self.lock.release()

    @contextlib.contextmanager
    def _final_txn(self):
        """The sync's last transaction; on failure the in-memory path set and resolver (updated as the links
        are resolved) are dropped, so they never describe rows that were rolled back."""
        try:
            with self.store.write():
                yield
        except BaseException:
            self._paths = self._paths_gen = self._resolver = None
            raise

    # -- consistency ----------------------------------------------------------------------------------------
    def repair_interrupted(self) -> str | None:
        """When a sync was killed (its :data:`SYNC_MARKER` is set and no sync holds the index lock), bring the
        links back in step with the vault at once: rescan the file list and re-resolve every link in one
        transaction that also drops the marker. Files the killed sync had not reached yet stay as they were
        indexed (the next sync takes them). Returns a user-facing line, or None when nothing was interrupted.
        Cheap (~0.5 s for 3k notes / 7k links); never blocks on a running sync."""
        if self.store.get_meta(SYNC_MARKER) is None:
            return None
        if not self.lock.acquire(blocking=False):
            return None
        try:
            if not self._file_lock.try_enter():
                return None  # another process is syncing: its marker is live
            try:
                if self.store.get_meta(SYNC_MARKER) is None:
                    return None
                _, all_paths = self.scan()
                with self._final_txn():
                    n = self.resolve_links(all_paths=all_paths, only_changed=False, changed=[], rebuild=True)
                    self.store.conn.execute("DELETE FROM meta WHERE key = ?", (SYNC_MARKER,))
                return f"the last sync was interrupted: links repaired ({n} re-resolved)"
            finally:
                self._file_lock.__exit__(None, None, None)
        finally:
            self.lock.release()
