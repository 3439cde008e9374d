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
(:func:`reme_engine.index.store.delete_postings` / ``insert_postings``); each query compares it (one indexed read)
and drops what it holds when it moved, so a word of a note saved a moment ago (the watcher's ``index_paths``, another
process's sync) is found by the next query. Memory: the row tables (~16 bytes per keyword row) plus at most
:data:`MAX_CACHED_POSTINGS` cached postings (~12 bytes each), least recently used terms evicted first.
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
        self._key: tuple | None = None  # (database inode, postings_gen) the tables below belong to
        self._dl: np.ndarray | None = None  # float64[row id] tokens of the row, all columns (0: no row)
        self._chunk: np.ndarray | None = None  # int64[row id] chunk id (0: no row)
        self._n_rows = 0
        self._avgdl = 1.0
        self._terms: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._cached = 0
        self._side: dict = {}
        #: loads of the row tables (tests, benchmarks)
        self.loads = 0

    # -- freshness ---------------------------------------------------------------------------------------------
    def _current(self, c) -> None:
        """Drop everything when the postings changed since it was read."""
        from ..index.store import postings_gen

        key = (self.store._inode, postings_gen(c))
        if key != self._key:
            self._load_rows(c, key)

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
            self._key = key
            self.loads += 1

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
            with self._lock:
                if term in self._terms:
                    self._terms.move_to_end(term)
            return got
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
            dl = self._dl
            if dl is not None and len(docs) and docs[-1] >= len(dl):
                # rows written after the row tables were read (the generation moved: the next query reloads)
                keep = docs < len(dl)
                docs, freq = docs[keep], freq[keep]
        else:
            docs, freq = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        with self._lock:
            self._terms[term] = (docs, freq)
            self._cached += len(docs)
            while self._cached > MAX_CACHED_POSTINGS and len(self._terms) > 1:
                _, (d, _f) = self._terms.popitem(last=False)
                self._cached -= len(d)
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
            hit = len(docs)
            idf = math.log((n_rows - hit + 0.5) / (hit + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            norm = K1 * (1.0 - B + B * dl[docs] / avgdl)
            parts.append(docs)
            scores.append(idf * f * (K1 + 1.0) / (f + norm))
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
        return [(int(chunk[d]), float(s)) for d, s in zip(docs[order], acc[order])]
