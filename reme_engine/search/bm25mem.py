"""In-memory BM25 over the keyword index's postings: FTS5's ``bm25()`` ranking without a query through FTS5.

Why: a warm keyword query through FTS5 (``MATCH`` + ``bm25()`` + ``ORDER BY … LIMIT``) cost ~1.7 ms on
knowledge-garden-zh, most of it scoring every matching row in SQLite's virtual-table machinery. Here each query term's
postings are numpy arrays (row ids, column-weighted term frequency), read once from FTS5's own vocabulary
(``fts5vocab`` ``instance`` table: the durable store stays SQLite) and kept until the postings change; a query is a
few vectorised operations over them.

Scores are FTS5's exactly (``fts5_aux.c``: for each query term ``idf · f·(k1+1) / (f + k1·(1 − b + b·D/avgdl))``
with ``f`` = Σ column weight × occurrences, ``D`` the row's tokens over all columns, ``avgdl`` and the row count from
FTS5's averages record, ``idf = ln((N − n + 0.5)/(n + 0.5))`` floored at 1e-6, k1 = 1.2, b = 0.75), so rankings
match FTS5's up to ties (ties: lower row id first).

Freshness: every write of postings bumps ``postings_gen`` in the index's meta table in the same transaction
(:func:`reme_engine.index.store.delete_postings` / ``insert_postings``); each query compares it (one indexed read).
When it moved, the rows written since are applied in place (deleted rows leave; new rows — ids are never reused, so
they are the ids above the old maximum — come in with term counts re-derived from their chunk text, checked
against the stored hash and FTS5's per-column sizes), and cached terms catch up lazily; a bigger change (> 2,000
rows) or a failed check reads everything again. So a word of a note saved a moment ago (the watcher's
``index_paths``, another process's sync) is found by the next query, without re-reading every term. Memory: the row tables (~16 bytes per keyword row) plus at most
:data:`MAX_CACHED_POSTINGS` cached postings (~12 bytes each), least recently used terms evicted first. Each term's
per-row BM25 scores are kept too (8 bytes a posting, the same bound), valid for the snapshot they were computed on:
the score depends only on the term's postings, the row lengths and counts, so a query sums cached arrays.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict

import numpy as np

K1 = 1.2
B = 0.75
#: Postings entries (row, term) kept in memory at most (~12 bytes each).
MAX_CACHED_POSTINGS = 2_000_000
#: A change of more keyword rows than this is read again in full rather than applied in place.
MAX_DELTA_ROWS = 2_000
#: Changes kept for cached terms to catch up with; a term older than that is read again.
MAX_DELTAS = 64


def _varints(blob: bytes) -> list[int]:
    """SQLite/FTS5 varints of ``blob`` (big-endian 7-bit groups, high bit = more)."""
    out, v = [], 0
    for byte in blob:
        v = (v << 7) | (byte & 0x7F)
        if not byte & 0x80:
            out.append(v)
            v = 0
    return out


class MemoryBM25:
    """FTS5-identical BM25 top-k over ``chunks_fts`` from memory (see module doc).

    ``weights``: the column weights (body, title), as given to ``bm25()``. Thread-safe: reads use the calling
    thread's connection of ``store``; the cached arrays are replaced, never mutated, under a lock.
    """

    def __init__(self, store, weights: tuple[float, float]) -> None:
        self.store = store
        self.weights = tuple(float(w) for w in weights)
        self._lock = threading.Lock()
        # one refresh (:meth:`_update` / :meth:`_load_rows`) at a time: two built from the same base would both
        # append a delta, and a catch-up through both would leave a term's row ids unsorted and past the tables
        self._refresh = threading.Lock()
        self._key: tuple | None = None  # (database inode, postings_gen) the tables below belong to
        self._dl: np.ndarray | None = None  # float64[row id] tokens of the row, all columns (0: no row)
        self._chunk: np.ndarray | None = None  # int64[row id] chunk id (0: no row)
        self._n_rows = 0
        self._avgdl = 1.0
        self._terms: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._cached = 0
        self._side: dict = {}
        self._epoch = 0  # bumped by each load or update; cached terms remember the one they are current at
        self._deltas: list[tuple[int, tuple]] = []  # (epoch, (deleted row ids, {term: (new rows, freq)}))
        #: full reads / in-place updates of the row tables (tests, benchmarks)
        self.loads = 0
        self.updates = 0
        # term -> (postings docs, row lengths, row count, mean length, per-row BM25 term score): a term's score
        # depends only on these, so it is computed once per postings snapshot, not once per query
        self._scored: dict[str, tuple] = {}
        self._scored_n = 0
        #: per thread: True inside :meth:`pinned` (freshness checked once for the whole search)
        self._tl = threading.local()

    # -- freshness ---------------------------------------------------------------------------------------------
    def _current(self, c) -> None:
        """Follow the postings when they changed since they were read: the rows written since, applied in place
        (:meth:`_update`), else everything read again."""
        if getattr(self._tl, "pinned", False):
            return  # checked at the start of this thread's search: one snapshot for all of it
        from ..index.store import postings_gen

        key = (self.store._inode, postings_gen(c))
        if key == self._key:
            return
        with self._refresh:
            if key == self._key:
                return  # another thread followed them meanwhile
            if self._key is not None and self._key[0] == key[0] and self._chunk is not None:
                try:
                    if self._update(c):
                        return
                except Exception:  # noqa: BLE001 - anything unexpected: read everything again
                    pass
            self._load_rows(c, key)

    def _update(self, c) -> bool:
        """Apply the keyword rows written since the tables were read: deleted rows leave, rows with ids above the
        old maximum (ids are never reused) come in with their term counts re-derived from their chunk text, the
        way the store re-derives them to delete (checked against the stored hash and FTS5's own per-column
        sizes). Cached terms catch up lazily (:meth:`_postings`). False when it cannot (too many new rows, a check
        failed, another tokenizer): the caller reads everything again."""
        import zlib

        from ..index import store as db
        from ..index.tokenizer import default_tokenizer

        tok = default_tokenizer()
        old_chunk, old_dl = self._chunk, self._dl
        old_max = len(old_chunk) - 1
        own = not c.in_transaction
        if own:
            c.execute("BEGIN")
        try:
            key = (self.store._inode, db.postings_gen(c))
            fp = c.execute("SELECT value FROM meta WHERE key = 'fts_tokenizer'").fetchone()
            if fp is None or fp[0] != tok.fingerprint:
                return False
            # every live row id in one string: parsed in C (a Python list of 20k rows cost ~10 ms)
            joined = c.execute("SELECT group_concat(fts_id) FROM fts_rows").fetchone()[0] or ""
            ids = np.array(joined.split(","), dtype=np.int64) if joined else np.zeros(0, dtype=np.int64)
            if int((ids > old_max).sum()) > MAX_DELTA_ROWS:
                return False
            rows = c.execute("SELECT r.fts_id, r.chunk_id, r.file_id, r.body_hash, k.text, k.headings, d.sz"
                             " FROM fts_rows r LEFT JOIN chunks k ON k.id = r.chunk_id"
                             " LEFT JOIN chunks_fts_docsize d ON d.id = r.fts_id WHERE r.fts_id > ? ORDER BY r.fts_id",
                             (old_max,)).fetchall()
            titles: dict[int, str | None] = {}
            for r in rows:
                fid = r[2]
                if fid not in titles:
                    t = c.execute("SELECT tokens FROM fts_titles WHERE file_id = ?", (fid,)).fetchone()
                    titles[fid] = None if t is None else (
                        db._derived_title(c, fid, tok) if t[0] is None else zlib.decompress(t[0]).decode("utf-8"))
            avg = c.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()
        finally:
            if own:
                c.execute("COMMIT")
        added: dict[str, dict[int, float]] = {}
        top = max([old_max, *(r[0] for r in rows)])
        chunk = np.zeros(top + 1, dtype=np.int64)
        dl = np.zeros(top + 1, dtype=np.float64)
        still = ids[ids <= old_max]
        chunk[still] = old_chunk[still]
        dl[still] = old_dl[still]
        present = np.zeros(old_max + 1, dtype=bool)
        present[still] = True
        deleted = np.flatnonzero((old_chunk != 0) & ~present)
        wb, wt = self.weights
        for fts_id, cid, _fid, bhash, text, headings, sz in rows:
            title = titles.get(_fid)
            if text is None or title is None or sz is None:
                return False
            body = db.body_tokens(tok.tokenize, text, headings)
            if db._tokens_hash(body, title) != bhash:
                return False
            btoks, ttoks = body.split(), title.split()
            if _varints(sz)[:2] != [len(btoks), len(ttoks)]:
                return False  # FTS5 split them otherwise: its own postings are the truth
            for w, toks in ((wb, btoks), (wt, ttoks)):
                for t in toks:
                    d = added.setdefault(t, {})
                    d[fts_id] = d.get(fts_id, 0.0) + w
            chunk[fts_id] = cid
            dl[fts_id] = len(btoks) + len(ttoks)
        vals = _varints(avg[0]) if avg is not None else []
        n_rows, total = (vals[0], sum(vals[1:])) if vals else (0, 0)
        delta = (deleted, {t: (np.fromiter(d.keys(), np.int64, len(d)), np.fromiter(d.values(), np.float64, len(d)))
                           for t, d in added.items()})
        gone_chunks = set(old_chunk[deleted].tolist())
        with self._lock:
            self._dl, self._chunk = dl, chunk
            self._n_rows = n_rows
            self._avgdl = total / n_rows if n_rows else 1.0
            self._epoch += 1
            self._deltas.append((self._epoch, delta))
            self._scored, self._scored_n = {}, 0
            if len(self._deltas) > MAX_DELTAS:
                del self._deltas[0]
            for part in self._side.values():  # rows of the files written: their chunk ids are the deleted rows'
                for cid in gone_chunks:
                    part.pop(cid, None)
            self._key = key
            self.updates += 1
        return True

    def _load_rows(self, c, key: tuple) -> None:
        """Row lengths, row → chunk ids, row count and mean length, read in one snapshot."""
        own = not c.in_transaction
        if own:
            c.execute("BEGIN")
        try:
            from ..index.store import postings_gen

            key = (self.store._inode, postings_gen(c))  # the generation of this snapshot
            ids = c.execute("SELECT fts_id, chunk_id FROM fts_rows").fetchall()
            sizes = c.execute("SELECT id, sz FROM chunks_fts_docsize").fetchall()
            avg = c.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()
        finally:
            if own:
                c.execute("COMMIT")
        top = max((r[0] for r in ids), default=0)
        top = max(top, max((r[0] for r in sizes), default=0))
        chunk = np.zeros(top + 1, dtype=np.int64)
        if ids:
            a = np.array(ids, dtype=np.int64)
            chunk[a[:, 0]] = a[:, 1]
        dl = np.zeros(top + 1, dtype=np.float64)
        for rid, sz in sizes:
            if len(sz) == 2 and sz[0] < 0x80 and sz[1] < 0x80:  # the common case: both columns < 128 tokens
                dl[rid] = sz[0] + sz[1]
            else:
                dl[rid] = sum(_varints(sz))
        n_rows, total = 0, 0
        if avg is not None:
            vals = _varints(avg[0])
            n_rows, total = (vals[0], sum(vals[1:])) if vals else (0, 0)
        with self._lock:
            self._dl, self._chunk = dl, chunk
            self._n_rows = n_rows
            self._avgdl = total / n_rows if n_rows else 1.0
            self._terms = OrderedDict()
            self._cached = 0
            self._side = {}
            self._epoch += 1
            self._deltas = []
            self._scored, self._scored_n = {}, 0
            self._key = key
            self.loads += 1

    def pin(self) -> None:
        """Check freshness now, then not again on this thread until :meth:`unpin`: a search asks the scorer
        several times (document frequencies, top-k, the row caches, the second stage), and each check is an SQL
        read (~40 µs). Writes committed meanwhile are seen by the next search."""
        self._tl.pinned = False
        self._current(self.store.conn)
        self._tl.pinned = True

    def unpin(self) -> None:
        """End :meth:`pin` on this thread (freshness is checked on every call again)."""
        self._tl.pinned = False

    def side_cache(self) -> dict:
        """A dict for the caller's own per-chunk data, emptied whenever the postings change (every change of a
        file's rows — path, name, aliases, text — rewrites its postings). Bounded by the caller."""
        self._current(self.store.conn)
        return self._side

    # -- postings ----------------------------------------------------------------------------------------------
    def _postings(self, c, term: str) -> tuple[np.ndarray, np.ndarray]:
        """``(row ids, weighted frequency)`` of ``term`` (empty arrays when absent)."""
        got = self._terms.get(term)
        if got is not None:
            docs, freq, epoch = got
            if epoch != self._epoch:
                with self._lock:  # the deltas and the epoch they reach, as one pair
                    deltas, now = list(self._deltas), self._epoch
                caught = self._catch_up(term, docs, freq, epoch, deltas)
                if caught is None:
                    got = None  # older than the deltas kept: read again
                else:
                    docs, freq = caught
                    with self._lock:
                        self._terms[term] = (docs, freq, now)
            if got is not None:
                with self._lock:
                    if term in self._terms:
                        self._terms.move_to_end(term)
                return docs, freq
        with self._lock:  # the tables and epoch the rows below are cut to and labelled with, as one pair
            dl, epoch = self._dl, self._epoch
        try:
            rows = c.execute("SELECT doc, col = 'title', count(*) FROM temp.reme_bm25_vocab WHERE term = ?"
                             " GROUP BY doc, col", (term,)).fetchall()
        except Exception:  # first use on this connection
            c.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.reme_bm25_vocab"
                      " USING fts5vocab(main, chunks_fts, 'instance')")
            rows = c.execute("SELECT doc, col = 'title', count(*) FROM temp.reme_bm25_vocab WHERE term = ?"
                             " GROUP BY doc, col", (term,)).fetchall()
        if rows:
            a = np.array(rows, dtype=np.int64)
            w = np.where(a[:, 1] == 1, self.weights[1], self.weights[0]) * a[:, 2]
            docs, inv = np.unique(a[:, 0], return_inverse=True)
            freq = np.bincount(inv, weights=w)
            if dl is not None and len(docs) and docs[-1] >= len(dl):
                # rows written after the row tables were read (the generation moved: the next query reloads)
                keep = docs < len(dl)
                docs, freq = docs[keep], freq[keep]
        else:
            docs, freq = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        with self._lock:
            self._terms[term] = (docs, freq, epoch)
            self._cached += len(docs)
            while self._cached > MAX_CACHED_POSTINGS and len(self._terms) > 1:
                _, (d, _f, _e) = self._terms.popitem(last=False)
                self._cached -= len(d)
            behind = epoch != self._epoch
        if behind and term in self._terms:
            return self._postings(c, term)  # the tables moved during the read: catch up through the deltas
        return docs, freq

    @staticmethod
    def _catch_up(term: str, docs: np.ndarray, freq: np.ndarray, epoch: int, deltas: list):
        """``term``'s cached postings brought from ``epoch`` through ``deltas`` (``[(epoch, delta)]``, in epoch
        order, as :meth:`_update` appends them); None when they do not reach back that far."""
        if not deltas or deltas[0][0] > epoch + 1:
            return None
        for e, (deleted, added) in deltas:
            if e <= epoch:
                continue
            if len(deleted) and len(docs):
                keep = ~np.isin(docs, deleted)
                docs, freq = docs[keep], freq[keep]
            new = added.get(term)
            if new is not None:  # new row ids are above every old one: the arrays stay sorted
                docs, freq = np.concatenate([docs, new[0]]), np.concatenate([freq, new[1]])
        return docs, freq

    def doc_freqs(self, terms: list[str]) -> dict[str, int]:
        """``{term: rows containing it}`` for the present ones among ``terms``."""
        c = self.store.conn
        self._current(c)
        out = {}
        for t in terms:
            n = len(self._postings(c, t)[0])
            if n:
                out[t] = n
        return out

    # -- scoring -----------------------------------------------------------------------------------------------
    def top(self, terms: list[str], n: int, op: str = "OR") -> list[tuple[int, float]]:
        """The ``n`` best chunks for ``terms`` as ``[(chunk id, score)]``, score = −bm25() (higher is better),
        rows matching any term (``op`` "OR") or every term ("AND"), best first, ties by lower row id."""
        if n <= 0 or not terms:
            return []
        c = self.store.conn
        self._current(c)
        with self._lock:
            dl, chunk, n_rows, avgdl = self._dl, self._chunk, self._n_rows, self._avgdl
        parts, scores = [], []
        for t in dict.fromkeys(terms):
            docs, f = self._postings(c, t)
            if not len(docs):
                if op == "AND":
                    return []
                continue
            got = self._scored.get(t)
            if got is not None and got[0] is docs and got[1] is dl and got[2] == n_rows and got[3] == avgdl:
                parts.append(docs)
                scores.append(got[4])
                continue
            whole = docs
            if docs[-1] >= len(dl):  # postings are sorted by row id
                # another thread applied newer rows after the snapshot above: score against that snapshot (the
                # next search sees them)
                keep = docs < len(dl)
                docs, f = docs[keep], f[keep]
                if not len(docs):
                    if op == "AND":
                        return []
                    continue
            hit = len(docs)
            # N never below df: the row count of the snapshot may be older than these postings (a concurrent
            # save), and FTS5's log((N - df + 0.5) / (df + 0.5)) is undefined below it
            idf = math.log((max(n_rows, hit) - hit + 0.5) / (hit + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            norm = K1 * (1.0 - B + B * dl[docs] / avgdl)
            sc = idf * f * (K1 + 1.0) / (f + norm)
            parts.append(docs)
            scores.append(sc)
            if docs is whole:  # the whole postings scored: reusable while this snapshot lasts
                if self._scored_n > MAX_CACHED_POSTINGS:
                    self._scored, self._scored_n = {}, 0
                self._scored[t] = (docs, dl, n_rows, avgdl, sc)
                self._scored_n += len(docs)
        if not parts:
            return []
        if len(parts) == 1:
            docs, acc = parts[0], scores[0]
        elif len(dl) <= 4_000_000:  # row ids are dense: sum straight into one slot per row (no sort)
            alld = np.concatenate(parts)
            total = np.bincount(alld, weights=np.concatenate(scores), minlength=len(dl))
            if op == "AND":
                docs = np.flatnonzero(np.bincount(alld, minlength=len(dl)) == len(parts))
            else:
                docs = np.unique(alld) if len(alld) * 16 < len(dl) else np.flatnonzero(total)
            acc = total[docs]
        else:
            alld = np.concatenate(parts)
            docs, inv = np.unique(alld, return_inverse=True)
            acc = np.bincount(inv, weights=np.concatenate(scores))
            if op == "AND":
                keep = np.bincount(inv) == len(parts)
                docs, acc = docs[keep], acc[keep]
        live = chunk[docs] != 0  # rows whose chunk is gone (a stale posting) are never hits
        docs, acc = docs[live], acc[live]
        if len(docs) > n:
            cut = np.argpartition(-acc, n - 1)[:n]
            kth = acc[cut].min()
            cut = np.flatnonzero(acc >= kth)  # every row tied with the n-th, so ties resolve by row id below
            docs, acc = docs[cut], acc[cut]
        order = np.lexsort((docs, -acc))[:n]
        return list(zip(chunk[docs[order]].tolist(), acc[order].tolist()))
