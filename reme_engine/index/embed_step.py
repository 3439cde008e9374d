"""Vector step: give every chunk without a vector one (embedding cache first, then the embedder), batch by batch,
never holding the engine's write lock while the embedder runs.

A mixin of :class:`reme_engine.index.indexer.Indexer` (``self.store``, ``self.vectors``).
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import TYPE_CHECKING, Callable

from ..crashpoints import crash_point

if TYPE_CHECKING:
    from .report import IndexReport, Progress

EMBED_BATCH = 64
#: chunks of each file encoded in the first round of a pass; a file's later chunks wait until every file has had
#: its first ones (a 5 MB one-line note is ~3,300 chunks: minutes of encoding that must not delay the vault)
FIRST_CHUNKS_PER_FILE = 32


def encode_order(rows: list[tuple]) -> list[tuple]:
    """``rows`` ``[(id, text_hash, text, headings, ord, mtime, …), …]`` in the order the vector pass encodes them:
    every file's first :data:`FIRST_CHUNKS_PER_FILE` chunks (by ``ord``), newest file (``mtime``, seconds) first,
    then the remaining chunks in the same order. Pure; a new list."""
    return sorted(rows, key=lambda r: (r[4] >= FIRST_CHUNKS_PER_FILE, -r[5], r[4]))


class EmbedStep:
    """The vector pass."""

    def embed_pending(self, progress: Progress | None = None, report: IndexReport | None = None,
                      should_stop: Callable[[], bool] | None = None,
                      lock: "contextlib.AbstractContextManager | None" = None) -> IndexReport:
        """Give every chunk without a vector one (cache first, then the embedder). Saves the faiss index.

        ``lock`` (the engine's write lock) is held only while a batch is committed, never while the embedder
        runs, so keyword syncs of watcher batches and the app's own writes go on during a long vector pass. A
        chunk removed or replaced while its batch was being encoded gets no vector (its id no longer has
        ``has_vec = 0``); its embedding still goes to the cache.

        Embedder failures are recorded in ``report.embed_error`` (search then degrades to keyword-only for
        the missing chunks); they never raise.
        """
        import numpy as np

        from ..markdown.chunker import Chunk
        from .embedder import EmbedCancelled, EmbedderError

        from .report import IndexReport

        report = report or IndexReport()
        if self.vectors is None:
            return report
        guard = lock if lock is not None else contextlib.nullcontext()
        t0 = time.perf_counter()
        prog = progress or (lambda *a: None)
        vs = self.vectors
        space = vs.embedder.space
        c = self.store.conn
        rows = c.execute("SELECT c.id, c.text_hash, c.text, c.headings, c.ord, f.mtime, f.path FROM chunks c"
                         " JOIN files f ON f.id = c.file_id WHERE c.has_vec = 0").fetchall()
        total = len(rows)
        prog("embed", 0, total, "")
        done = 0
        dirty = False

        def commit(ids: list[int], vecs) -> int:
            """Under ``guard``: add the vectors of the chunks still waiting for one; returns how many."""
            nonlocal dirty
            live = set()
            for i in range(0, len(ids), 500):
                part = ids[i : i + 500]
                live.update(r[0] for r in c.execute(
                    f"SELECT id FROM chunks WHERE has_vec = 0 AND id IN ({','.join('?' * len(part))})", part))
            keep = [j for j, x in enumerate(ids) if x in live]
            if keep:
                with self.store.write() as cw:
                    cw.executemany("UPDATE chunks SET has_vec=1 WHERE id=?", [(ids[j],) for j in keep])
                    # a chunk deleted and restored (same id) before the index was saved: its old tombstone
                    # must not remove the vector added now (add() replaces the old copy anyway)
                    cw.executemany("DELETE FROM vec_tombstones WHERE id=?", [(ids[j],) for j in keep])
                vs.add(np.asarray([ids[j] for j in keep], dtype=np.int64), vecs[keep])
                dirty = True
                crash_point("embed.after_commit")
            return len(keep)

        # 1) cache hits, in bulk
        pending = []
        for i in range(0, len(rows), 500):
            part = rows[i : i + 500]
            hashes = list({r[1] for r in part})
            cached = {h: v for h, v in c.execute(
                f"SELECT text_hash, vec FROM emb.embeddings WHERE space=? AND text_hash IN ({','.join('?' * len(hashes))})",
                [space, *hashes])}
            hit_ids, hit_vecs = [], []
            for r in part:
                blob = cached.get(r[1])
                if blob is not None and len(blob) == 4 * vs.dim:
                    hit_ids.append(r[0])
                    hit_vecs.append(np.frombuffer(blob, dtype=np.float32))
                else:
                    pending.append(r)
            if hit_ids:
                with guard:
                    report.embed_cached += commit(hit_ids, np.vstack(hit_vecs))
                done += len(hit_ids)
                prog("embed", done, total, "")
        pending = encode_order(pending)
        # 2) encode the rest in batches (recent notes and every note's opening first); commit each batch so progress survives interruption. A big pass goes to
        # the offline embedder's child process (embed_pass), so the UI's process keeps the GIL for its event loop.
        bulk = getattr(vs.embedder, "embed_pass", None)
        stopped = False
        for i in range(0, len(pending), EMBED_BATCH):
            if should_stop is not None and should_stop():
                break
            part = pending[i : i + EMBED_BATCH]
            texts = [Chunk(0, 0, r[2], tuple(json.loads(r[3]))).embed_text() for r in part]
            try:
                if bulk is None:
                    m = vs.embedder.embed(texts)
                else:
                    m = bulk(texts, pass_texts=len(pending), live=vs.live, should_stop=should_stop)
            except EmbedCancelled:  # asked to stop mid-batch (quitting): not an error
                stopped = True
                break
            except EmbedderError as exc:
                report.embed_error = str(exc)
                stopped = True
                break
            with guard:
                with self.store.write() as cw:
                    cw.executemany(
                        "INSERT OR REPLACE INTO emb.embeddings(space, text_hash, vec) VALUES (?,?,?)",
                        [(space, r[1], m[j].tobytes()) for j, r in enumerate(part)],
                    )
                report.embedded += commit([r[0] for r in part], m)
            done += len(part)
            prog("embed", done, total, "")
        if not stopped and not (should_stop is not None and should_stop()):
            # 3) turn-level vectors of conversation-shaped chunks (search/linevec.py), after every chunk has its
            # own: the second ranking stage reads them; a line left without one is just not scored
            self._embed_lines(rows, guard, bulk, report, should_stop)
        if dirty:
            crash_point("embed.before_save")
            with guard:
                vs.save()
        report.seconds_vector = time.perf_counter() - t0
        return report

    def _embed_lines(self, rows: list[tuple], guard, bulk, report: IndexReport,
                     should_stop: Callable[[], bool] | None) -> None:
        """Encode and cache the line vectors (:mod:`reme_engine.search.linevec`) of the conversation-shaped chunks
        among ``rows`` (``(id, text_hash, text, headings, ord, mtime, path)``) that the cache lacks. Counts them in
        ``report.embedded_lines``; an embedder failure is recorded like the chunk pass's and ends this step."""
        from ..search import linevec
        from .embedder import EmbedCancelled, EmbedderError

        layers = getattr(getattr(self, "settings", None), "layers", None)
        daily = getattr(layers, "daily_dir", "daily") or "daily"
        session = getattr(layers, "session_dir", "session") or "session"
        vs = self.vectors
        space = vs.embedder.space
        meta_key = f"line_vectors:{space}"
        caught_up = self.store.get_meta(meta_key) == linevec.RULES
        if not caught_up:
            # an index built before line vectors (or under other line rules): every conversation-shaped chunk once
            chats = "f.path LIKE '%.jsonl' OR " if linevec.CHAT_LINES else ""
            rows = self.store.conn.execute(
                "SELECT c.id, c.text_hash, c.text, c.headings, c.ord, f.mtime, f.path FROM chunks c"
                f" JOIN files f ON f.id = c.file_id WHERE {chats}f.path LIKE ?",
                (f"{daily.strip('/')}/%",)).fetchall()
        texts = [r[2] for r in rows if len(r) > 6 and linevec.wants_lines(r[6], daily, session)]
        todo = linevec.missing_lines(self.store.conn, space, texts) if texts else []
        for i in range(0, len(todo), EMBED_BATCH):
            if should_stop is not None and should_stop():
                return
            part = todo[i:i + EMBED_BATCH]
            batch = [ln for _, ln in part]
            try:
                m = vs.embedder.embed(batch) if bulk is None else bulk(batch, pass_texts=len(todo), live=vs.live,
                                                                        should_stop=should_stop)
            except EmbedCancelled:
                return
            except EmbedderError as exc:
                report.embed_error = str(exc)
                return
            with guard:
                with self.store.write() as cw:
                    cw.executemany("INSERT OR REPLACE INTO emb.embeddings(space, text_hash, vec) VALUES (?,?,?)",
                                   [(space, k, m[j].tobytes()) for j, (k, _) in enumerate(part)])
            report.embedded_lines = getattr(report, "embedded_lines", 0) + len(part)
        if not caught_up:
            with guard:
                with self.store.write() as cw:
                    cw.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (meta_key, linevec.RULES))
