"""The vector leg's faiss index with stable ids (ARCHITECTURE §5).

Exact inner-product search (``IndexIDMap2(IndexFlatIP)``) below ``ann_threshold`` vectors; above it an inverted
file index (``IndexIVFFlat``, nlist = 4·√N, nprobe = nlist/8 within 64–512, retrained when it doubles). IVF was chosen over HNSW after measuring both on the
synthetic scale set of ``bench/bench_search.py`` (real chunks replicated with small perturbations, i.e. many
near-duplicate clusters): HNSW (M=32, efSearch=256) fell to recall@10 0.60 at 300k; IVF-Flat measured 0.87 through
the engine (0.93 counting near-ties), at ~1 ms per query. Neither reaches 0.95 at 1M yet (bench/RESULTS.md). Removed ids are tombstoned and filtered at search time (``IndexIDMap2`` cannot compact an IVF);
the index is rebuilt when tombstones exceed 10 % of it. When it has doubled since training it is retrained in a background
thread on a snapshot (searches and adds go on; the changes made meanwhile are replayed before the swap; peak memory is
about three copies of the vectors during it).

Ids are the chunk ids of the store (63-bit ints); ``IndexIDMap2`` accepts the same id twice silently, so
``add`` removes an id before re-adding it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported lazily at run time (start-up cost of one-shot jobs)
    import numpy as np

import json
import os
import threading
from pathlib import Path


#: IVF probes per query: one list in ``IVF_PROBE_DIVISOR`` (nlist = 4·√N), at least ``IVF_NPROBE`` and at most
#: ``IVF_MAX_NPROBE``. Measured through the engine (bench/RESULTS.md): a fixed 64 probes gave recall@10 0.87 at
#: 300k and 0.80 at 1M; 256 probes 0.94 at 300k (5 ms) and 0.92 at 1M (18 ms).
IVF_NPROBE = 64
IVF_PROBE_DIVISOR = 8
IVF_MAX_NPROBE = 512
#: The IVF is retrained (nlist re-sized) when it has grown to this multiple of the size it was trained at: lists
#: trained for 200k vectors hold ever longer postings at 1M, and recall per probe falls.
IVF_RETRAIN_GROWTH = 2.0


def ivf_nprobe(nlist: int) -> int:
    """Probes for an IVF of ``nlist`` lists (see ``IVF_PROBE_DIVISOR``)."""
    return max(IVF_NPROBE, min(IVF_MAX_NPROBE, nlist // IVF_PROBE_DIVISOR))
#: Training sample per list (faiss warns below 39).
IVF_TRAIN_PER_LIST = 40


def _faiss():
    import faiss

    # Single queries run ~2x faster on one thread on 2-core machines (ARCHITECTURE §10.3).
    faiss.omp_set_num_threads(1)
    return faiss


class VectorIndex:
    """Vectors keyed by int64 id. Thread-safe (one lock). Vectors must be L2-normalised float32 of ``dim``."""

    def __init__(self, dim: int, ann_threshold: int = 200_000) -> None:
        self.dim = dim
        self.ann_threshold = ann_threshold
        self._lock = threading.RLock()
        self._ids: set[int] = set()
        self._tomb: set[int] = set()
        self._index = self._new_flat()
        self.kind = "flat"
        #: vectors the IVF was trained on (0 while flat)
        self.trained_for = 0
        #: adds/removes since a background retrain took its snapshot (None: no retrain running)
        self._changes: list | None = None
        self._retrain_thread = None

    def _new_flat(self):
        faiss = _faiss()
        return faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))

    def _new_ivf(self, train: "np.ndarray"):
        """An untrained-then-trained ``IndexIVFFlat`` (inner product) sized for ``len(train)`` vectors."""
        import numpy as np

        faiss = _faiss()
        nlist = max(16, int(4 * np.sqrt(len(train))))
        quantizer = faiss.IndexFlatIP(self.dim)
        inner = faiss.IndexIVFFlat(quantizer, self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
        rng = np.random.default_rng(0)
        n_train = min(len(train), nlist * IVF_TRAIN_PER_LIST)
        sample = train[rng.choice(len(train), n_train, replace=False)] if n_train < len(train) else train
        inner.train(np.ascontiguousarray(sample, dtype=np.float32))
        inner.nprobe = ivf_nprobe(nlist)
        return faiss.IndexIDMap2(inner)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def nprobe(self) -> int:
        """The IVF's probes per query (0 for the flat index)."""
        if self.kind != "ivf":
            return 0
        return _faiss().extract_index_ivf(self._index.index).nprobe

    def __contains__(self, vid: int) -> bool:
        return vid in self._ids

    def add(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        """Add (or replace) vectors. ``ids`` int64 (n,), ``vecs`` float32 (n, dim)."""
        import numpy as np
        ids = np.asarray(ids, dtype=np.int64)
        vecs = np.ascontiguousarray(vecs, dtype=np.float32)
        if len(ids) == 0:
            return
        if vecs.shape != (len(ids), self.dim):
            raise ValueError(f"vectors shape {vecs.shape} != ({len(ids)}, {self.dim})")
        with self._lock:
            again = [int(i) for i in ids if int(i) in self._ids]
            if again:
                self.remove(np.asarray(again, dtype=np.int64))
            if self._changes is not None:  # a retrain is running: it replays this onto the new index
                self._changes.append(("add", ids.copy(), vecs.copy()))
            # re-adding a tombstoned id to the ANN index: the old copy is tombstoned by id, so rebuild instead
            # (IndexIDMap2 cannot remove from an IVF: it assumes removal renumbers the inner ids, IVF does not)
            if self.kind != "flat" and any(int(i) in self._tomb for i in ids):
                self._rebuild(extra=(ids, vecs))
                return
            self._index.add_with_ids(vecs, ids)
            self._ids.update(int(i) for i in ids)
            if self.kind == "flat" and len(self._ids) >= self.ann_threshold:
                self._rebuild()
            elif self.kind == "ivf" and len(self._ids) >= IVF_RETRAIN_GROWTH * max(1, self.trained_for) \
                    and self._changes is None:
                self._start_retrain()

    def remove(self, ids: np.ndarray) -> None:
        """Remove ids (unknown ids are ignored)."""
        import numpy as np
        with self._lock:
            present = [int(i) for i in np.asarray(ids, dtype=np.int64) if int(i) in self._ids]
            if not present:
                return
            if self.kind == "flat":
                self._index.remove_ids(np.asarray(present, dtype=np.int64))
            else:
                self._tomb.update(present)
            self._ids.difference_update(present)
            if self._changes is not None:
                self._changes.append(("remove", np.asarray(present, dtype=np.int64), None))
            if self.kind != "flat" and len(self._tomb) > 0.1 * max(1, len(self._ids)):
                self._rebuild()

    def _start_retrain(self) -> None:
        """Re-train the IVF for its new size on a snapshot, in a background thread (caller holds the lock).

        Training and filling the new index take minutes at 1M vectors (~100 s at 800k here); searches and adds
        go on against the current index meanwhile, and the adds and removes made in between are replayed onto the
        new one before it is swapped in."""
        import threading as _t

        ids, vecs = self._all_vectors()
        self._changes = []
        self._retrain_thread = _t.Thread(target=self._retrain, args=(ids, vecs), name="reme-ivf-retrain",
                                         daemon=True)
        self._retrain_thread.start()

    def _retrain(self, ids: "np.ndarray", vecs: "np.ndarray") -> None:
        import logging
        import numpy as np

        try:
            index = self._new_ivf(vecs)
            index.add_with_ids(np.ascontiguousarray(vecs, dtype=np.float32), ids)
            with self._lock:
                live = set(int(i) for i in ids)
                tomb: set[int] = set()
                for op, cids, cvecs in self._changes or ():
                    if op == "remove":
                        gone = {int(i) for i in cids} & live
                        live -= gone
                        tomb |= gone
                        continue
                    if any(int(i) in live or int(i) in tomb for i in cids):
                        # a vector replaced meanwhile: IndexIDMap2 cannot drop its old copy from an IVF (it assumes
                        # removal renumbers inner ids), so fall back to rebuilding the current, up-to-date index
                        self._changes = None
                        self._rebuild()
                        return
                    index.add_with_ids(cvecs, cids)
                    live.update(int(i) for i in cids)
                self._index, self.kind, self.trained_for = index, "ivf", len(ids)
                self._tomb = tomb
                self._ids = live
        except Exception:  # the current index stays; the next growth step tries again
            logging.getLogger("reme.vectors").exception("IVF retrain failed")
        finally:
            with self._lock:
                self._changes = None

    def wait_retrain(self, timeout: float | None = None) -> bool:
        """Wait for a background retrain to finish (tests, shutdown). True when none is running."""
        t = self._retrain_thread
        if t is not None:
            t.join(timeout)
            return not t.is_alive()
        return True

    def _all_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np
        idmap = self._index
        n = idmap.ntotal
        all_ids = _faiss().vector_to_array(idmap.id_map).astype(np.int64)
        if n and self.kind == "ivf":
            _faiss().extract_index_ivf(idmap.index).make_direct_map()  # reconstruct needs it
        vecs = idmap.index.reconstruct_n(0, n) if n else np.zeros((0, self.dim), np.float32)
        keep = np.fromiter((int(i) not in self._tomb for i in all_ids), dtype=bool, count=len(all_ids))
        return all_ids[keep], vecs[keep]

    def _rebuild(self, extra: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        import numpy as np
        ids, vecs = self._all_vectors()
        if extra is not None:
            ids = np.concatenate([ids, extra[0]])
            vecs = np.vstack([vecs, extra[1]])
        self._tomb.clear()
        if len(ids) >= self.ann_threshold:
            self._index, self.kind, self.trained_for = self._new_ivf(vecs), "ivf", len(vecs)
        else:
            self._index, self.kind = self._new_flat(), "flat"
        if len(ids):
            self._index.add_with_ids(np.ascontiguousarray(vecs, dtype=np.float32), ids)
        self._ids = set(int(i) for i in ids)

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Top ``k`` ``(id, inner product)`` pairs, best first. ``allowed``: optional int64 ids to restrict to."""
        import numpy as np
        faiss = _faiss()
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dim)
        with self._lock:
            if not self._ids or k <= 0:
                return []
            fetch = min(k + len(self._tomb), self._index.ntotal)
            params = None
            if allowed is not None:
                allowed = np.asarray(allowed, dtype=np.int64)
                if len(allowed) == 0:
                    return []
                sel = faiss.IDSelectorBatch(allowed)
                params = faiss.SearchParametersIVF(sel=sel, nprobe=self.nprobe) if self.kind == "ivf" \
                    else faiss.SearchParameters(sel=sel)
                fetch = min(fetch, len(allowed) + len(self._tomb))
            scores, ids = self._index.search(q, fetch, params=params) if params else self._index.search(q, fetch)
        out: list[tuple[int, float]] = []
        for i, s in zip(ids[0], scores[0]):
            if i < 0 or int(i) in self._tomb:
                continue
            out.append((int(i), float(s)))
            if len(out) >= k:
                break
        return out

    # -- persistence -------------------------------------------------------------------------------------
    def save(self, path: Path, stamp: dict) -> None:
        """Write the index to ``path`` and ``stamp`` (JSON) beside it, atomically (temp + rename)."""
        faiss = _faiss()
        path = Path(path)
        with self._lock:
            # Tombstones are saved with the index, not compacted here: rebuilding an IVF costs ~30 s at 300k
            # vectors, and every save after a deleted or edited note would pay it (remove() rebuilds past 10 %).
            tmp = path.with_suffix(path.suffix + ".tmp")
            faiss.write_index(self._index, str(tmp))
            os.replace(tmp, path)
            meta = path.with_suffix(".json")
            tmpm = meta.with_suffix(".json.tmp")
            tmpm.write_text(json.dumps({**stamp, "count": len(self._ids), "kind": self.kind,
                                        "ntotal": int(self._index.ntotal),
                                        "trained_for": self.trained_for, "tombstones": sorted(self._tomb)}),
                            encoding="utf-8")
            os.replace(tmpm, meta)

    @classmethod
    def load(cls, path: Path, dim: int, ann_threshold: int) -> tuple["VectorIndex", dict] | None:
        """Load an index saved by :meth:`save`; None when missing or unreadable (the caller rebuilds)."""
        faiss = _faiss()
        path = Path(path)
        meta = path.with_suffix(".json")
        try:
            stamp = json.loads(meta.read_text(encoding="utf-8"))
            index = faiss.read_index(str(path))
        except (OSError, ValueError, RuntimeError):
            return None
        if index.d != dim:
            return None
        if "ntotal" in stamp and int(stamp["ntotal"]) != int(index.ntotal):
            return None  # killed between writing the index and its stamp: the pair does not belong together
        vi = cls(dim, ann_threshold)
        vi._index = index
        vi.kind = stamp.get("kind", "flat")
        vi._tomb = set(int(i) for i in stamp.get("tombstones", ()))
        vi._ids = set(int(i) for i in faiss.vector_to_array(index.id_map)) - vi._tomb
        if vi.kind == "ivf":
            ivf = faiss.extract_index_ivf(index.index)
            ivf.nprobe = ivf_nprobe(ivf.nlist)
            vi.trained_for = int(stamp.get("trained_for") or len(vi._ids))
        return vi, stamp


class VectorState:
    """The vector leg of one vault: an embedder, its :class:`VectorIndex` and their consistency with the store.

    The faiss file (``vectors-<space hash>.faiss``) carries a stamp ``{space, generation}``; the store's meta
    holds the generation of the last save. On :meth:`open` a missing, unreadable or stale file is rebuilt from
    the embedding cache (no re-embedding); tombstoned chunk ids (removed while the index was not loaded) are
    applied. ``ready`` is False until :meth:`open` has run.
    """

    def __init__(self, store, embedder, state_dir: Path, ann_threshold: int) -> None:
        import hashlib

        self.store = store
        self.embedder = embedder
        self.ann_threshold = ann_threshold
        tag = hashlib.sha256(embedder.space.encode()).hexdigest()[:12]
        self.path = Path(state_dir) / f"vectors-{tag}.faiss"
        self.index: VectorIndex | None = None
        self._lock = threading.RLock()
        self.error: str | None = None
        #: vectors restored from the embedding cache by the last rebuild (reported once, then reset)
        self.restored_from_cache = 0
        #: the store's ``vec_generation`` the in-memory index last matched (see :meth:`catch_up`)
        self._seen_gen: str | None = None
        #: True in a long-running process (the app, ``--serve``: set by ``Background.start``): every vector pass
        #: encodes in the embedder's child process, however small (one-shot jobs keep small passes here)
        self.live = False

    @property
    def dim(self) -> int:
        return self.embedder.dim

    @property
    def ready(self) -> bool:
        return self.index is not None

    def open(self) -> None:
        """Load or rebuild the index. Remote embedders with an unknown dimension stay unopened until known."""
        with self._lock:
            if self.index is not None:
                return
            if not self.dim:
                return
            # Another process has the index open (``--serve`` or the app in the middle of a vector pass, which
            # saves the file only at its end): build what this process needs in memory and write nothing. A
            # rebuild here rewrote every chunk's has_vec under the running pass (undoing its batches) and saved
            # a file on each one-shot `job search`: 8–15 s per search during a first embedding.
            shared = not self.store.sole_user()
            gen = self.store.get_meta(f"vec_generation:{self.embedder.space}")
            self._seen_gen = gen
            loaded = VectorIndex.load(self.path, self.dim, self.ann_threshold)
            if loaded is not None and gen is not None and loaded[1].get("generation") == int(gen) \
                    and loaded[1].get("space") == self.embedder.space:
                self.index = loaded[0]
                self.apply_tombstones()
                if shared:
                    self._top_up_from_cache()
                else:
                    self.reconcile()
                return
            if shared:
                self.index = VectorIndex(self.dim, self.ann_threshold)
                self._top_up_from_cache()
                return
            self._rebuild()

    def catch_up(self) -> None:
        """Bring a loaded index up to date with another process's saves since this one loaded or saved it (the
        store's generation moved): add the cached vectors of chunks it marked ``has_vec = 1``, drop those it
        unmarked. In memory only. A vector pass calls this on taking the embed lock, so its save keeps them."""
        with self._lock:
            if self.index is None:
                return
            gen = self.store.get_meta(f"vec_generation:{self.embedder.space}")
            if gen == self._seen_gen:
                return
            self._top_up_from_cache()
            self._seen_gen = gen

    def _top_up_from_cache(self) -> None:
        """In memory only: add the cached vectors of chunks marked ``has_vec = 1`` that the loaded index lacks and
        drop vectors of chunks no longer marked (what another process committed since its last save)."""
        import numpy as np
        index = self.index
        marked = {r[0] for r in self.store.conn.execute("SELECT id FROM chunks WHERE has_vec = 1")}
        orphans = [i for i in list(index._ids) if i not in marked]
        if orphans:
            index.remove(np.asarray(orphans, dtype=np.int64))
        missing = [i for i in marked if i not in index]
        expected = 4 * self.dim
        for k in range(0, len(missing), 500):
            part = missing[k : k + 500]
            rows = self.store.conn.execute(
                "SELECT c.id, e.vec FROM chunks c JOIN emb.embeddings e ON e.space = ? AND e.text_hash = c.text_hash"
                f" WHERE c.id IN ({','.join('?' * len(part))})", [self.embedder.space, *part]).fetchall()
            rows = [(cid, blob) for cid, blob in rows if blob is not None and len(blob) == expected]
            if rows:
                index.add(np.asarray([r[0] for r in rows], dtype=np.int64),
                          np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in rows]))
        self.restored_from_cache += len(missing)

    def reconcile(self) -> dict:
        """Make the loaded index hold exactly the vectors of the chunks marked ``has_vec = 1``: chunks marked but
        absent (killed between commit and save) go back to ``has_vec = 0`` (re-added from the cache by the next
        pass); vectors whose chunk no longer exists or no longer wants one (changed by another process while this
        one had the index loaded) are removed. Returns ``{"missing": n, "orphans": n}``; saves when it removed any."""
        import numpy as np
        with self._lock:
            if self.index is None:
                return {"missing": 0, "orphans": 0}
            marked = {r[0] for r in self.store.conn.execute("SELECT id FROM chunks WHERE has_vec=1")}
            missing = [i for i in marked if i not in self.index]
            orphans = [i for i in list(self.index._ids) if i not in marked]
            if missing:
                with self.store.write() as c:
                    c.executemany("UPDATE chunks SET has_vec=0 WHERE id=?", [(i,) for i in missing])
            if orphans:
                self.index.remove(np.asarray(orphans, dtype=np.int64))
                self.save()
            return {"missing": len(missing), "orphans": len(orphans)}

    def reset(self) -> None:
        """Forget the loaded index and its file (the store under it was replaced: corrupt or deleted)."""
        with self._lock:
            self.index = None
            self.error = None
            for p in (self.path, self.path.with_suffix(".json")):
                p.unlink(missing_ok=True)

    def _rebuild(self) -> None:
        """Recreate the index from the cache for every chunk; chunks without a cached vector get has_vec=0."""
        import numpy as np
        space = self.embedder.space
        index = VectorIndex(self.dim, self.ann_threshold)
        c = self.store.conn
        rows = c.execute(
            "SELECT c.id, e.vec FROM chunks c LEFT JOIN emb.embeddings e ON e.space = ? AND e.text_hash = c.text_hash"
            " WHERE c.has_vec != 2",
            (space,),
        )
        ids, vecs, missing = [], [], []
        expected = 4 * self.dim
        for cid, blob in rows:
            if blob is not None and len(blob) == expected:
                ids.append(cid)
                vecs.append(np.frombuffer(blob, dtype=np.float32))
                if len(ids) >= 50_000:
                    index.add(np.asarray(ids, dtype=np.int64), np.vstack(vecs))
                    ids, vecs = [], []
            else:
                missing.append(cid)
        if ids:
            index.add(np.asarray(ids, dtype=np.int64), np.vstack(vecs))
        self.restored_from_cache += len(index)
        with self.store.write() as cw:
            cw.execute("UPDATE chunks SET has_vec=1 WHERE has_vec != 2")
            cw.executemany("UPDATE chunks SET has_vec=0 WHERE id=?", [(i,) for i in missing])
            cw.execute("DELETE FROM vec_tombstones")
        self.index = index
        self.save()

    def apply_tombstones(self) -> None:
        """Remove ids recorded in ``vec_tombstones`` from the loaded index (kept in the table until saved)."""
        import numpy as np
        with self._lock:
            if self.index is None:
                return
            ids = [r[0] for r in self.store.conn.execute("SELECT id FROM vec_tombstones")]
            if ids:
                self.index.remove(np.asarray(ids, dtype=np.int64))

    def add(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        with self._lock:
            if self.index is None:
                if not self.dim:
                    self.embedder.dim = vecs.shape[1]  # remote embedder: learnt from the first reply
                self.open() if self.dim else None
                if self.index is None:
                    self.index = VectorIndex(self.dim, self.ann_threshold)
            self.index.add(ids, vecs)

    def save(self) -> None:
        """Persist the index, bump the generation, forget applied tombstones."""
        with self._lock:
            if self.index is None:
                return
            key = f"vec_generation:{self.embedder.space}"
            gen = int(self.store.get_meta(key) or 0) + 1
            tomb = [r[0] for r in self.store.conn.execute("SELECT id FROM vec_tombstones")]
            if tomb:
                # removals recorded by another process's sync (or ours, not applied yet) must be in the file
                # before their records go: otherwise those vectors would stay in it for good (orphans)
                import numpy as np

                self.index.remove(np.asarray(tomb, dtype=np.int64))
            self.index.save(self.path, {"space": self.embedder.space, "generation": gen})
            with self.store.write() as c:
                self.store.set_meta(key, str(gen))
                c.executemany("DELETE FROM vec_tombstones WHERE id=?", [(i,) for i in tomb])
            self._seen_gen = str(gen)

    def search(self, query_vec: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        if self.index is None:
            return []
        return self.index.search(query_vec, k, allowed)
