"""Title vectors: the dense leg's counterpart of the keyword leg's title field.

A chunk's vector stands for up to 2,000 bytes of text, so a note's title is a small part of it; a query that *is*
a title — in the note's language or another — matches the title far better than the body. So each Markdown note
also gets one vector for its title text (its first heading, its name unless that is a bare number or date, and up to
five aliases), held in memory here, and the vector leg scores a note's first chunk with ``max(chunk cosine, title
cosine)`` — when the title cosine beats what nonsense reaches among this vault's titles (:data:`TITLE_NULL_QUANTILE`):
short titles otherwise match anything. Measured in bench/RESULTS.md (cross-lingual, known-item, words sets).

The vectors are made with the vault's embedder and kept in the engine's embedding cache (``emb.embeddings``, keyed
by the text's hash like chunk texts), so only new or renamed titles are ever encoded. Building runs on a background
thread (a first search never waits for it: it just runs without title vectors); it is redone when the files table
changes (count or newest ``indexed_at``, checked at most every :data:`CHECK_EVERY_S`). Vaults with more than
:data:`MAX_NOTES` notes skip title vectors (a flat product over every title would cost more than the leg itself).

Each finished build is also kept next to the index (:data:`SNAPSHOT_NAME`: ids, vectors, null floor, the files
marker and the embedding space it was made for), written atomically; a build whose marker and space match the
snapshot loads it instead (a few ms for 3,000 notes, against ~0.4 s of cache reads and 48 null probes), which is
most of what a one-shot ``job search`` waited for.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time

#: Seconds between checks that the files table changed (a changed title is picked up this late at most).
CHECK_EVERY_S = 10.0
#: Notes above which title vectors are not built (flat search: ~1 ms per 10k titles per query).
MAX_NOTES = 50_000
#: A title cosine counts when above this quantile of the best title cosines of nonsense probes (:mod:`.null`).
TITLE_NULL_QUANTILE = 0.9
#: Titles encoded per embedder call while building.
BATCH = 64
#: The last build, beside the index database (``<state dir>/…``): a regenerable cache.
SNAPSHOT_NAME = "title-vectors.npz"
_BARE = re.compile(r"^[\d\s._\-]+$")


def title_text(name: str, stem: str, first_headings: list[str], aliases: list[str]) -> str:
    """The text embedded for a note's title: first heading, name (unless a bare number/date or the same as the
    heading), aliases (≤ 5), joined with `` · ``, at most 300 characters; "" when nothing is left. Pure."""
    parts: list[str] = []
    seen: set[str] = set()
    for p in [*(first_headings[:1]), name or stem, *aliases[:5]]:
        p = " ".join(str(p).split())
        k = p.casefold()
        if not p or _BARE.match(p) or k in seen:
            continue
        seen.add(k)
        parts.append(p)
    return " · ".join(parts)[:300]


class TitleVectors:
    """In-memory title vectors of one vault. ``search(qv, n, allowed)`` → ``[(first chunk id, cosine)]``.

    Thread-safe: the build thread swaps a complete ``(ids, matrix)`` pair in; readers take the pair they see."""

    def __init__(self, store, vectors) -> None:
        self.store = store
        self.vectors = vectors
        self._data = None  # (chunk ids int64 (n,), faiss IndexIDMap2 over the title vectors)
        self._marker = None
        self._checked = 0.0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        self.built = threading.Event()  # set after each finished build (tests wait on it)
        self._stop = threading.Event()
        #: title cosines below this do not count (the titles' null model, see _build)
        self.floor = 1.0
        #: the last build came from the snapshot file (:data:`SNAPSHOT_NAME`), not from the cache and the model
        self.from_snapshot = False

    def close(self, timeout: float = 5.0) -> None:
        """Stop a build under way (after its current batch) and wait for it up to ``timeout`` seconds: a thread
        still inside the model or faiss when the interpreter exits can crash it."""
        self._stop.set()
        t = self._thread
        if t is not None and t.is_alive():
            t.join(timeout)

    def _files_marker(self):
        return tuple(self.store.conn.execute("SELECT count(*), max(indexed_at) FROM files").fetchone())

    def refresh(self) -> None:
        """Start a background build when the files changed since the last one (checked at most every
        :data:`CHECK_EVERY_S`). Never blocks on the build."""
        now = time.monotonic()
        if self._stop.is_set() or (self._data is not None and now - self._checked < CHECK_EVERY_S):
            return
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            if self._data is not None and now - self._checked < CHECK_EVERY_S:
                return
            self._checked = now
            marker = self._files_marker()
            if marker == self._marker:
                return
            self._thread = threading.Thread(target=self._build, args=(marker,), name="reme-title-vectors",
                                            daemon=True)
            self._thread.start()

    def _build(self, marker) -> None:
        import numpy as np

        from ..index.embedder import EmbedderError
        from ..vault.io import text_hash

        try:
            vs = self.vectors
            if self._load_snapshot(marker, vs):
                return
            c = self.store.conn  # this thread's own connection
            rows = c.execute(
                "SELECT f.path, f.name, f.aliases, c.id, c.headings FROM files f JOIN chunks c ON c.file_id = f.id"
                " AND c.ord = (SELECT min(ord) FROM chunks WHERE file_id = f.id) WHERE f.kind = 'markdown'"
            ).fetchall()
            if len(rows) > MAX_NOTES:
                self._data, self._marker = None, marker
                return
            ids, texts = [], []
            for path, name, aliases, cid, headings in rows:
                stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
                try:
                    al = [str(a) for a in json.loads(aliases or "[]")]
                except ValueError:
                    al = []
                t = title_text(name, stem, json.loads(headings or "[]"), al)
                if t:
                    ids.append(cid)
                    texts.append(t)
            space = vs.embedder.space
            hashes = [text_hash(t) for t in texts]
            vecs: dict[str, np.ndarray] = {}
            uniq = list(dict.fromkeys(hashes))
            for i in range(0, len(uniq), 500):
                part = uniq[i:i + 500]
                for h, blob in c.execute(
                        f"SELECT text_hash, vec FROM emb.embeddings WHERE space = ? AND text_hash IN"
                        f" ({','.join('?' * len(part))})", [space, *part]):
                    if len(blob) == 4 * vs.dim:
                        vecs[h] = np.frombuffer(blob, dtype=np.float32)
            todo = [(h, t) for h, t in dict(zip(hashes, texts)).items() if h not in vecs]
            emb = vs.embedder
            if hasattr(emb, "embed_pass"):
                # a big build (a vault's first) encodes where a vector pass does, in the niced child process when
                # enabled: encoding ~3k titles here held the model and the GIL between queries (hybrid p50 at
                # load 6: 26 → 48 ms, p95 150 ms while it ran); a few new titles stay in this process
                def encode(batch):
                    return emb.embed_pass(batch, pass_texts=len(todo))
            else:
                encode = emb.embed
            for i in range(0, len(todo), BATCH):
                if self._stop.is_set():
                    return
                part = todo[i:i + BATCH]
                m = encode([t for _, t in part])
                try:
                    with self.store.write() as cw:
                        cw.executemany("INSERT OR REPLACE INTO emb.embeddings(space, text_hash, vec) VALUES (?,?,?)",
                                       [(space, h, m[j].tobytes()) for j, (h, _) in enumerate(part)])
                except sqlite3.Error:  # a read-only or busy store: keep the vectors in memory only
                    pass
                for j, (h, _) in enumerate(part):
                    vecs[h] = m[j]
            mat = np.vstack([vecs[h] for h in hashes]).astype(np.float32) if hashes else \
                np.zeros((0, vs.dim), dtype=np.float32)
            # the titles' own null model: short titles meet nonsense at high cosines (0.34–0.76 on 3k notes of
            # knowledge-garden-zh), so a title counts only above what most nonsense reaches among these titles
            # faiss, not numpy: a numpy mat-vec product wakes the BLAS thread pool, whose spinning threads cost
            # 10-30 ms of the next search on a busy 2-core machine (faiss runs single-threaded, index/vectors.py)
            from ..index.vectors import _faiss
            from .null import probe_vectors, quantile

            faiss = _faiss()
            index = faiss.IndexIDMap2(faiss.IndexFlatIP(vs.dim))
            id_arr = np.asarray(ids, dtype=np.int64)
            if len(mat):
                index.add_with_ids(np.ascontiguousarray(mat), id_arr)
                probes = probe_vectors(vs.embedder)
                best = [float(index.search(p.reshape(1, -1), 1)[0][0][0]) for p in probes]  # one by one: no BLAS
                self.floor = quantile(best, TITLE_NULL_QUANTILE)
            self._data = (id_arr, index)
            self._marker = marker
            self.error = None
            self.from_snapshot = False
            self._save_snapshot(marker, vs.embedder.space, id_arr, mat)
        except (EmbedderError, OSError, ValueError, RuntimeError) as exc:  # search goes on without titles
            self.error = str(exc)
        except Exception as exc:  # noqa: BLE001 — a sqlite3 error on a store being rebuilt: retry next check
            self.error = str(exc)
        finally:
            self.built.set()

    def _snapshot_path(self):
        db = getattr(self.store, "db_path", None)
        return None if db is None else db.parent / SNAPSHOT_NAME

    def _save_snapshot(self, marker, space: str, ids, mat) -> None:
        """Keep this build (atomically; a failure only costs the next process a full build)."""
        import io

        import numpy as np

        from ..vault.io import atomic_write

        path = self._snapshot_path()
        if path is None:
            return
        buf = io.BytesIO()
        np.savez(buf, ids=ids, mat=mat, floor=np.float64(self.floor),
                 key=np.array(json.dumps({"marker": list(marker), "space": space})))
        try:
            atomic_write(path, buf.getvalue())
        except OSError:
            pass

    def _load_snapshot(self, marker, vs) -> bool:
        """Take the snapshot when it was made for this ``marker`` and embedding space; False otherwise (or when it
        is unreadable: the build then runs and rewrites it)."""
        import numpy as np

        path = self._snapshot_path()
        if path is None or not path.exists():
            return False
        try:
            with np.load(path, allow_pickle=False) as z:
                key = json.loads(str(z["key"]))
                if key != {"marker": list(marker), "space": vs.embedder.space}:
                    return False
                ids, mat, floor = z["ids"].astype(np.int64), z["mat"].astype(np.float32), float(z["floor"])
        except (OSError, ValueError, KeyError, TypeError):
            return False
        if mat.ndim != 2 or mat.shape != (len(ids), vs.dim):
            return False
        from ..index.vectors import _faiss

        faiss = _faiss()
        index = faiss.IndexIDMap2(faiss.IndexFlatIP(vs.dim))
        if len(ids):
            index.add_with_ids(np.ascontiguousarray(mat), ids)
        self.floor = floor
        self._data = (ids, index)
        self._marker = marker
        self.error = None
        self.from_snapshot = True
        return True

    def search(self, qv, n: int, allowed=None) -> list[tuple[int, float]]:
        """Top ``n`` ``(first chunk id, title cosine)`` for the query vector ``qv`` (L2-normalised), only cosines
        ≥ :attr:`floor`; restricted to the chunk ids in ``allowed`` (int64 array) when given. ``[]`` before the
        first build."""
        import numpy as np

        from ..index.vectors import _faiss

        data = self._data
        if data is None or not len(data[0]) or n <= 0:
            return []
        ids, index = data
        q = np.ascontiguousarray(qv, dtype=np.float32).reshape(1, -1)
        k = min(n, len(ids))
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=np.int64)
            if not len(allowed):
                return []
            faiss = _faiss()
            scores, got = index.search(q, k, params=faiss.SearchParameters(sel=faiss.IDSelectorBatch(allowed)))
        else:
            scores, got = index.search(q, k)
        return [(int(i), float(c)) for i, c in zip(got[0], scores[0]) if i >= 0 and c >= self.floor]


def merge_title_hits(chunk_hits: list[tuple[int, float]], title_hits: list[tuple[int, float]],
                     n: int) -> tuple[list[tuple[int, float]], set[int]]:
    """The vector leg with title vectors: each id scored ``max(chunk cosine, title cosine)``, best first, top
    ``n``; and the ids whose score came from their title. Pure."""
    best = dict(chunk_hits)
    from_title: set[int] = set()
    for cid, s in title_hits:
        if s > best.get(cid, -2.0):
            best[cid] = s
            from_title.add(cid)
    ranked = sorted(best.items(), key=lambda kv: -kv[1])[:n]
    keep = {cid for cid, _ in ranked}
    return ranked, from_title & keep
