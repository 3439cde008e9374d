"""Hybrid search: BM25 (SQLite FTS5 over our own tokens) + dense vectors (faiss), fused, then field-aware ranking.

Pipeline of one query: both legs fetch ``min(200, 5·limit)`` candidates (the vector leg on a worker thread; its
query without the names of the vault's conversation speakers, :mod:`.speakers`) →
:func:`fuse` combines them (method chosen by :class:`FusionConfig`; measured by ``bench/bench_quality.py``) →
:func:`adjust` applies the field-aware rules (a note whose name/file stem/alias is the query is lifted; generated
day-index pages never outrank the cards they list) → a relative floor hides weak tails → hits.

Default fusion, ``convex`` (a score-normalised convex combination, Bruch, Gai & Ingber 2023, "An Analysis of
Fusion Functions for Hybrid Retrieval", with *absolute* rather than per-list normalisation)::

    score(d) = α · min(1, bm25(d) / Σ_t idf(t))  +  (1 − α) · clip((cos(d) − lo) / (hi − lo), 0, 1)

``bm25(d) / Σ idf`` is about the IDF-weighted share of the query's terms the chunk contains (one occurrence in a
chunk of average length scores ``idf``), so it is comparable across queries: a query whose words appear nowhere
(cross-lingual) gives ~0 to every keyword hit instead of 1 to the best of them, and a vector hit whose cosine is noise
(below ``lo``) adds nothing. The reference's weighted RRF (ARCHITECTURE §11.3.3; ``Σ w_leg / (k + rank_leg)``, k = 60,
0.7/0.3) stays available as ``method="rrf"``; ``interleave``, ``tmm`` (per-list max normalisation) and ``choose`` (one
leg per query) are the other measured candidates.

Only documents a leg actually retrieved get a score from it: keyword hits need at least one matching term (FTS5
never returns non-matching rows) and fused scores of 0 are never ranked (ARCHITECTURE §10.10: ranking zero-score hits
wrecked recall). Each hit keeps both legs' ranks and raw scores so the UI can say why it ranked.

Modules: this one runs the legs and orders the steps (:class:`HybridSearcher`); the scoring is pure functions in
:mod:`.fusion` (fusion) and :mod:`.fields` (field rules); the result types are in :mod:`.results`. The names
callers used to import from here are re-exported.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import date

from .chats import chunk_date_sql, line_date
from .fields import _DAY_PAGE_RE, adjust, exact_names_first, is_day_index_chunk, normalise_name  # noqa: F401 (re-exported)
from .fusion import (  # noqa: F401
    FUSION_METHODS,
    FusionConfig,
    bm25_idf,
    for_named_query,
    fuse,
    fusion_from_settings,
    impute_convex,
    impute_missing_vectors,
    rank_key,
    ranked_ids,
    rrf,
)
from .graph import neighborhoods
from .results import Hit, SearchFilters, SearchResult
from .rerank import rerank_for
from .timeq import content_words, is_recall_only, parse_time_query
from .titles import merge_title_hits

#: FTS5 column weights for bm25(): chunk body, then the note's title fields (file stem, name, aliases, tags…).
BM25_WEIGHTS = (1.0, 1.5)
#: Query terms sent to FTS5 at most (long pasted queries would otherwise scan most postings).
MAX_QUERY_TERMS = 32
MODES = ("hybrid", "keyword", "vector")
#: Common-terms rule (Lucene's ``CommonTermsQuery`` / Elasticsearch's ``cutoff_frequency``): on big indexes,
#: terms found in more than this fraction of chunks do not select candidates. FTS5 scores every row matching any
#: OR'ed term before ``ORDER BY … LIMIT``, so one frequent term (a CJK bigram of a common word, "edit" in every
#: docs page) makes a query cost as much as the chunks it touches (0.8 ms per 1,000 postings here). Measured on
#: the 300k-chunk store: p50 34.7 → 10.7 ms at 0.05 (bench/profile_keyword.py).
COMMON_TERM_CUTOFF = 0.05
#: …applied only from this many chunks on: below it the full OR query costs a few ms and ranking stays exact.
COMMON_TERM_MIN_CHUNKS = 50_000
#: Hybrid search: the calling thread searches the title vectors while the worker searches the chunk vectors
#: (False: the worker searches both, one after the other). Same results either way.
SPLIT_TITLE_SEARCH = False  # measured at load 12: serial 33.7 ms vs split 36.4 (bench_search.py --title-split-ab)


#: Hybrid search runs its legs concurrently (the vector leg on the worker) only when the keyword leg takes at least
#: this much CPU (ms, moving average), else one after the other on the calling thread. The query embedding (~2-5 ms)
#: is partly pure Python, so the two threads mostly take turns on the GIL, and the hand-off to the worker and back
#: costs a wake-up each: on knowledge-garden-zh (keyword leg ~0.1 ms) serial legs measured wall p50 8.33 vs 10.35 ms
#: concurrent, CPU 5.68 vs 6.17 ms, at load 5-8 (``bench/bench_search.py --legs-ab``; bench/RESULTS.md, "Warm search
#: path, session 21 (A)"). A leg of ≥ 1 ms (big vaults: 6.7 ms at 100k chunks) is worth hiding behind the
#: embedding when a core is free.
CONCURRENT_LEGS_MS = 1.0


class _Deferred:
    """A future-like of a function run on the calling thread when its result is first asked (serial legs)."""

    def __init__(self, fn) -> None:
        self._fn = fn

    def done(self) -> bool:
        return False

    def result(self):
        return self._fn()


def fts_query(tokens: list[str], op: str = "OR") -> str:
    """An FTS5 MATCH expression joining the (already tokenised) terms with ``op`` (OR | AND), each quoted."""
    return f" {op} ".join('"' + t.replace('"', '""') + '"' for t in tokens[:MAX_QUERY_TERMS])


def select_terms(tokens: list[str], df: dict[str, int], n_chunks: int,
                 cutoff: float = COMMON_TERM_CUTOFF) -> tuple[list[str], str]:
    """``(terms, op)`` that select the keyword candidates: the query's rare terms (document frequency ≤
    ``cutoff·n_chunks``, and present) OR'ed; when every present term is common, all of them AND'ed (Lucene's
    common-terms rule); when none is present, the tokens unchanged (no match either way). Pure."""
    present = [t for t in tokens if df.get(t, 0) > 0]
    if not present:
        return tokens, "OR"
    rare = [t for t in present if df[t] <= cutoff * n_chunks]
    if rare:
        return rare, "OR"
    return present, "AND"



def no_words(query: str) -> bool:
    """True when ``query`` holds only punctuation, spaces, control characters and ASCII symbols (``(``, ``%``,
    ``"``, ``*``…): no word for the keyword leg, and whatever the vector leg returned would be noise. Emoji and other
    symbols (Unicode ``So``) count as words: a title may hold them. Pure."""
    import string
    import unicodedata

    return all(ch in string.punctuation or unicodedata.category(ch)[0] in "PZC" for ch in query)


class HybridSearcher:
    """Runs both legs (the vector leg on a worker thread, concurrently), fuses them and ranks the result.

    ``fusion`` (a :class:`FusionConfig`) picks the method and the ranking rules; the legacy keyword arguments
    (``vector_weight``, ``keyword_weight``, ``rrf_k``) set the ``rrf`` method's parameters.
    """

    def __init__(self, store, tokenizer, vectors=None, *, vector_weight: float = 0.7, keyword_weight: float = 0.3,
                 rrf_k: int = 60, fusion: FusionConfig | None = None) -> None:
        self.store = store
        self.tokenizer = tokenizer
        self.vectors = vectors
        self._n_chunks: tuple[int, float] | None = None  # (count, when)
        self._df_cache: dict[str, int] = {}  # term -> document frequency, valid with _n_chunks
        self._null: tuple | None = None  # (vectors when probed, nonsense probes' best cosines, title data used)
        #: unfiltered keyword queries scored from memory (:mod:`.bm25mem`, FTS5's ranking); off = through FTS5
        self.memory_bm25 = True
        self._mem = None
        #: title vectors in the dense leg (:mod:`.titles`); off = chunk vectors only
        self.title_vectors = True
        self._titles = None
        #: speaker names of the vault's conversations left out of the vector leg's query (:mod:`.speakers`)
        self.speakers_out = True
        self._speakers = None
        #: dates written in the query left out of the vector leg's query (:mod:`.dates`; the date rule ranks them)
        self.dates_out = False
        self.weights = {"vector": vector_weight, "keyword": keyword_weight}
        self.k = rrf_k
        if fusion is None:
            fusion = FusionConfig(vector_weight=vector_weight, keyword_weight=keyword_weight, rrf_k=rrf_k)
        self.fusion = fusion
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reme-vector-leg")
        #: per thread: inside a search, the row caches' snapshot taken by its first lookup
        self._tl = threading.local()
        #: the user's local date, for time words in queries (the engine may set a zone-aware one)
        self.today = date.today
        #: moving average of the keyword leg's CPU ms (picks serial or concurrent legs, :meth:`concurrent_legs`)
        self._kw_cpu_ms: float | None = None

    def concurrent_legs(self) -> bool:
        """Whether a hybrid search runs the vector leg on the worker thread while the keyword leg runs here: only
        once the keyword leg's CPU time (a moving average) reaches :data:`CONCURRENT_LEGS_MS`."""
        return self._kw_cpu_ms is not None and self._kw_cpu_ms >= CONCURRENT_LEGS_MS

    def close(self) -> None:
        """Stop the worker thread and a title-vector build under way (waits for it up to 5 s)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._titles is not None:
            self._titles.close()

    # -- legs ---------------------------------------------------------------------------------------------
    def keyword_leg(self, query: str, n: int, filters: SearchFilters | None, *,
                    tokens: list[str] | None = None) -> list[tuple[int, float]]:
        """BM25 top ``n`` as ``[(chunk id, score)]``, score = −bm25() so higher is better. ``tokens``: the
        query's tokens when the caller has them already."""
        if tokens is None:
            tokens = self.tokenizer.query_tokens(query)
        if not tokens:
            return []
        where, params = ("1", [])
        if filters is not None and not filters.empty():
            where, params = filters.sql()
            where = (f"chunks_fts.rowid IN (SELECT r.fts_id FROM fts_rows r JOIN chunks c ON c.id = r.chunk_id"
                     f" JOIN files f ON f.id = c.file_id WHERE {where})")
        # keyword rows have small ids of their own (store.fts_rows): the chunk id is joined in
        sql = (f"SELECT r.chunk_id, bm25(chunks_fts, {BM25_WEIGHTS[0]}, {BM25_WEIGHTS[1]}) AS s FROM chunks_fts"
               f" CROSS JOIN fts_rows r ON r.fts_id = chunks_fts.rowid WHERE chunks_fts MATCH ? AND {where}"
               " ORDER BY s LIMIT ?")  # CROSS JOIN: FTS5 is the outer loop (else one MATCH per fts_rows row)
        c = self.store.conn
        n_chunks = self._chunk_count()
        if self.memory_bm25 and (filters is None or filters.empty()):
            mem = self._memory()
            if n_chunks >= COMMON_TERM_MIN_CHUNKS:
                terms, op = select_terms(tokens[:MAX_QUERY_TERMS], mem.doc_freqs(tokens[:MAX_QUERY_TERMS]), n_chunks)
                hits = mem.top(terms, n, op)
                if op == "OR" or len(hits) >= min(n, 10):
                    return hits
            return mem.top(tokens[:MAX_QUERY_TERMS], n)
        if n_chunks >= COMMON_TERM_MIN_CHUNKS:
            terms, op = select_terms(tokens[:MAX_QUERY_TERMS], self._doc_freqs(tokens[:MAX_QUERY_TERMS]), n_chunks)
            rows = c.execute(sql, [fts_query(terms, op), *params, n]).fetchall()
            if op == "OR" or len(rows) >= min(n, 10):
                return [(r[0], -r[1]) for r in rows]
            # the common terms hardly co-occur: the full OR (slow, rare) rather than next to nothing
        rows = c.execute(sql, [fts_query(tokens), *params, n]).fetchall()
        return [(r[0], -r[1]) for r in rows]

    def _memory(self):
        """The in-memory BM25 scorer (:mod:`.bm25mem`), made on first use."""
        if self._mem is None:
            from .bm25mem import MemoryBM25

            self._mem = MemoryBM25(self.store, BM25_WEIGHTS)
        return self._mem

    def _waiting_for_vector(self, ids: list[int]) -> set[int]:
        """Those of ``ids`` whose vector is still to come (``has_vec = 0``). Chunks too short to ever get one
        (heading-only, frontmatter-only) are not among them: imputing for those ranked empty chunks first."""
        if not ids:
            return set()
        return {r[0] for r in self.store.conn.execute(
            f"SELECT id FROM chunks WHERE has_vec = 0 AND id IN ({','.join('?' * len(ids))})", ids)}

    def _chunk_count(self) -> int:
        """Chunks in the index (re-counted at most every 10 s: it only picks the query plan)."""
        now = time.monotonic()
        if self._n_chunks is None or now - self._n_chunks[1] > 10.0:
            self._n_chunks = (self.store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0], now)
            self._df_cache = {}
        return self._n_chunks[0]

    def _doc_freqs(self, terms: list[str]) -> dict[str, int]:
        """``{term: chunks containing it}`` (absent terms left out) from FTS5's own vocabulary (``fts5vocab``, one
        per connection). Present terms are remembered for as long as the chunk count is (≤ 10 s): the counts only
        normalise scores and pick the query plan, and the vocabulary query was ~1 ms of each warm search; absent
        terms are asked again each time (a new note's word is found at once)."""
        if self.memory_bm25:  # exact and current (the postings' generation), and the scorer needs them anyway
            return self._memory().doc_freqs(list(dict.fromkeys(terms)))
        self._chunk_count()
        cache = self._df_cache
        todo = [t for t in dict.fromkeys(terms) if t not in cache]  # absent ones: asked each time
        got: dict[str, int] = {}
        if todo:
            c = self.store.conn
            q = f"SELECT term, doc FROM temp.chunks_vocab WHERE term IN ({','.join('?' * len(todo))})"
            try:
                got = dict(c.execute(q, todo).fetchall())
            except Exception:  # first use on this connection
                c.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_vocab USING fts5vocab(main, chunks_fts, 'row')")
                got = dict(c.execute(q, todo).fetchall())
            if len(cache) > 20_000:
                cache.clear()
            cache.update(got)  # present terms only: a term that appears in a note saved a moment ago is looked up
        out = {}
        for t in terms:
            v = got.get(t) or cache.get(t)
            if v:
                out[t] = v
        return out

    def allowed_ids(self, filters: SearchFilters):
        """int64 array of chunk ids passing ``filters`` (for the vector leg's faiss ID selector)."""
        import numpy as np

        where, params = filters.sql()
        rows = self.store.conn.execute(
            f"SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE {where}", params).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def vector_leg(self, query: str, n: int, filters: SearchFilters | None) -> list[tuple[int, float]]:
        """Dense top ``n`` as ``[(chunk id, cosine)]`` (title vectors included, :mod:`.titles`). Raises
        EmbedderError when the embedder fails."""
        return self._vector_leg(query, n, filters, embed_text=self.vector_query(query))[0]

    def vector_query(self, query: str) -> str:
        """The text the vector leg embeds for ``query``: ``query`` without the words naming a speaker of the
        vault's conversations (:mod:`.speakers`; unchanged when there are none or ``speakers_out`` is off). The
        names are brought up to date when the index's postings changed (one SQL read of their counter)."""
        if self.dates_out:
            from .dates import strip_dates

            query = strip_dates(query)
        if not self.speakers_out:
            return query
        from .speakers import strip_names

        return strip_names(query, self.speaker_names())

    def speaker_names(self) -> frozenset[str]:
        """The lower-case words naming the speakers of the vault's conversations (:class:`.speakers.SpeakerNames`),
        brought up to date when the index's postings changed (one SQL read of their counter)."""
        from ..index.store import postings_gen
        from .speakers import SpeakerNames

        if self._speakers is None:
            self._speakers = SpeakerNames(self.store)
        daily, session = getattr(self, "line_dirs", ("daily", "session"))
        return self._speakers.names(postings_gen(self.store.conn), daily, session)

    def _vector_leg(self, query: str, n: int, filters: SearchFilters | None, *,
                    split: dict | None = None, embed_text: str | None = None) -> tuple[list[tuple[int, float]], set]:
        """``(vector leg, ids whose score is their note's title cosine)``. With ``split`` (a dict holding a
        ``threading.Event`` under ``"ready"``): the query vector and the filter's allowed ids are put in it
        (``"qv"``, ``"allowed"``) and the event set as soon as they are known, and only the chunk vectors are
        searched: the caller searches the title vectors and merges (:func:`.titles.merge_title_hits`).
        ``embed_text``: what to embed instead of ``query`` (:meth:`vector_query`); the query vector is still
        remembered under ``query`` for the second stage."""
        vs = self.vectors
        if vs is None or not vs.ready:
            return [], set()
        qv = vs.embedder.embed([embed_text or query])[0]
        self.last_query_vec = (query, qv)  # the second stage's line vectors score against it (search/rerank.py)
        allowed = None
        if filters is not None and not filters.empty():
            # own connection per thread: this runs on the worker
            allowed = self.allowed_ids(filters)
        if split is not None:
            split["qv"], split["allowed"] = qv, allowed
            split["ready"].set()
            return vs.search(qv, n, allowed), set()
        hits = vs.search(qv, n, allowed)
        tv = self.titles()
        if tv is None:
            return hits, set()
        tv.refresh()
        th = tv.search(qv, n, allowed)
        if not th:
            return hits, set()
        return merge_title_hits(hits, th, n)

    def titles(self):
        """The vault's :class:`~.titles.TitleVectors` (made on first use), or None when ``title_vectors`` is off
        or there are no vectors."""
        if not self.title_vectors or self.vectors is None or not self.vectors.ready:
            return None
        if self._titles is None:
            from .titles import TitleVectors

            self._titles = TitleVectors(self.store, self.vectors)
        return self._titles

    def wait_titles(self, timeout: float = 60.0) -> bool:
        """Start the title-vector build if due and wait for it (benchmarks, tests). True when built."""
        tv = self.titles()
        if tv is None:
            return False
        tv.built.clear()
        tv.refresh()
        t = tv._thread
        if t is not None and t.is_alive():
            return tv.built.wait(timeout)
        return tv._data is not None

    # -- search -------------------------------------------------------------------------------------------
    def query_idf_sum(self, query: str, tokens: list[str] | None = None) -> float:
        """Σ FTS5 idf over the query's terms (absent terms count with the idf of a term in no row): the BM25
        score of a chunk holding each query term once at average length, the keyword leg's normaliser."""
        if tokens is None:
            tokens = self.tokenizer.query_tokens(query)
        tokens = tokens[:MAX_QUERY_TERMS]
        if not tokens:
            return 0.0
        n_rows = self._chunk_count()
        df = self._doc_freqs(tokens)
        return sum(bm25_idf(df.get(t, 0), n_rows) for t in tokens)

    def run_legs(self, query: str, n: int, *, mode: str = "hybrid",
                 filters: SearchFilters | None = None) -> dict:
        """Both legs' top ``n`` for ``query`` (stripped, non-empty): ``{"legs": {leg: [(id, raw)]}, "idf_sum",
        "waiting" (keyword ids still waiting for a vector), "keyword_ms", "vector_ms", "degraded"}``. The vector
        leg runs on the worker thread while the keyword leg runs here. Raises nothing for an embedder failure
        (search degrades to keyword, named in ``degraded``)."""
        from ..index.embedder import EmbedderError

        degraded = None
        legs: dict[str, list[tuple[int, float]]] = {}
        kw_ms = vec_ms = 0.0
        vec_future = None
        tokens = None
        title_ids: set[int] = set()
        vq = None
        if mode in ("hybrid", "vector"):
            if self.vectors is None:
                degraded = "no embedder configured: keyword search only"
            elif not self.vectors.ready:
                degraded = "vector index not loaded yet: keyword search only"
            else:
                # the worker embeds the query and searches the chunk vectors; this thread searches the title
                # vectors meanwhile (faiss releases the GIL: both are memory-bound scans, ~0.3-1 ms each)
                split = {"ready": threading.Event()} if SPLIT_TITLE_SEARCH else None
                vq = self.vector_query(query)  # before the worker starts: the names are shared state

                def run_vec():
                    ts = time.perf_counter()
                    try:
                        return (self._vector_leg(query, n, filters, split=split, embed_text=vq),
                                (ts, time.perf_counter()))
                    finally:
                        if split is not None:
                            split["ready"].set()

                # on the worker only when the keyword leg is long enough to hide behind the query embedding;
                # else here, after it (see CONCURRENT_LEGS_MS)
                vec_future = self._pool.submit(run_vec) if split is not None or self.concurrent_legs() \
                    else _Deferred(run_vec)
        if mode in ("hybrid", "keyword") or vec_future is None:
            ts, tc = time.perf_counter(), time.thread_time()
            tokens = self.tokenizer.query_tokens(query)
            legs["keyword"] = self.keyword_leg(query, n, filters, tokens=tokens)
            kw_ms = (time.perf_counter() - ts) * 1000
            # this thread's CPU, not its wall time: waiting for the GIL beside the worker is not the leg's cost
            cpu_ms = (time.thread_time() - tc) * 1000
            self._kw_cpu_ms = cpu_ms if self._kw_cpu_ms is None else 0.8 * self._kw_cpu_ms + 0.2 * cpu_ms
        # what needs only the keyword leg is done while the query embedding runs on the worker (numpy releases
        # the GIL: on a free core this hides it)
        idf_sum = self.query_idf_sum(query, tokens) if legs.get("keyword") else None
        waiting: set[int] = set()
        if vec_future is not None and legs.get("keyword") and self.vectors.index is not None:
            waiting = self._waiting_for_vector([doc for doc, _ in legs["keyword"]])
        if vec_future is not None:
            try:
                while split is not None and not split["ready"].wait(0.25):  # set once the query is embedded
                    if vec_future.done():  # (or the leg failed)
                        break
                th, t_end = None, 0.0
                if split is not None and "qv" in split:
                    tv = self.titles()
                    if tv is not None:
                        tv.refresh()
                        th = tv.search(split["qv"], n, split["allowed"])
                        t_end = time.perf_counter()
                (hits, title_ids), (t_start, t_stop) = vec_future.result()
                if th:
                    hits, title_ids = merge_title_hits(hits, th, n)
                legs["vector"] = hits
                vec_ms = (max(t_stop, t_end) - t_start) * 1000
            except EmbedderError as exc:
                degraded = f"embedder failed, keyword search only: {exc}"
                waiting = set()
                if "keyword" not in legs:
                    legs["keyword"] = self.keyword_leg(query, n, filters)
        if idf_sum is None:
            idf_sum = self.query_idf_sum(query, tokens) if legs.get("keyword") else 0.0
        if "vector" not in legs or self.vectors is None or self.vectors.index is None:
            waiting = set()
        if degraded is None and waiting:
            # say it: a one-shot job or an MCP server on a vault nobody has embedded answers from keywords alone
            degraded = (f"{len(waiting)} of the keyword hits have no vector yet (ranked by keywords); the app, "
                        f"--serve or --refresh embeds them")
        return {"legs": legs, "idf_sum": idf_sum, "waiting": waiting, "keyword_ms": kw_ms, "vector_ms": vec_ms,
                "degraded": degraded, "title_ids": title_ids if "vector" in legs else set(),
                "vector_text": vq if "vector" in legs else None}

    def rank(self, query: str, run: dict, *, limit: int = 10, mode: str = "hybrid",
             fusion: FusionConfig | None = None) -> tuple[list[Hit], int]:
        """``(hits best first, number hidden by the relative floor)`` from :meth:`run_legs` output: fusion,
        field-aware adjustments, floor. ``mode`` hybrid|keyword|vector (a single-leg mode uses that leg's order;
        when the vector leg is missing, hybrid ranks the keyword leg alone). ``fusion`` defaults to
        ``self.fusion``."""
        cfg = fusion or self.fusion
        legs = run["legs"]
        null_hidden = 0
        if mode == "hybrid" and cfg.null_floor_quantile > 0 and legs.get("vector") and not legs.get("keyword"):
            floor = self.null_floor(cfg.null_floor_quantile)
            kept = [(d, c) for d, c in legs["vector"] if c >= floor]
            null_hidden = len(legs["vector"]) - len(kept)
            legs = {**legs, "vector": kept}
        eff_mode = mode
        if mode == "hybrid" and "vector" not in legs:
            eff_mode = "keyword"
        elif mode == "vector" and "vector" not in legs:
            eff_mode = "keyword"  # degraded
        if eff_mode == "hybrid" and cfg.method == "convex" and run.get("vector_text") not in (None, query):
            # the query named a conversation's speaker and its vector left the names out (.speakers): that leg
            # weighs as much as the keyword leg there, on its own cosine range (fusion.FusionConfig, named_*)
            cfg = for_named_query(cfg)
        fused = fuse(legs, cfg, idf_sum=run["idf_sum"], mode=eff_mode)
        if eff_mode == "hybrid" and run["waiting"] and legs.get("keyword"):
            if cfg.method == "rrf":
                impute_missing_vectors(fused, legs["keyword"], lambda doc: doc not in run["waiting"],
                                       cfg.vector_weight, cfg.rrf_k)
            elif cfg.method in ("convex", "tmm"):
                impute_convex(fused, legs["keyword"], run["waiting"], cfg, run["idf_sum"])
        for cid in run.get("title_ids") or ():
            if cid in fused and "vector_rank" in fused[cid]:
                fused[cid]["vector_title"] = True
        rows = self._meta(list(fused))
        fused = {cid: d for cid, d in fused.items() if cid in rows}  # stale vector ids: chunk vanished
        adjust(fused, rows, query, cfg)
        if cfg.date_boost > 0 and fused and mode == "hybrid":
            self._lift_dated(fused, query, cfg.date_boost)
        rerank_for(self, fused, query, cfg)  # the second stage (search/rerank.py); a no-op when it is off
        exact_names_first(fused)
        if cfg.collapse_day_index:
            # a day page listing a card that is a candidate too: the card is the answer, the page a repeat of its
            # summary (LoCoMo as daily cards: 18 % of the top-10 slots; R@5 0.81 → 0.83, bench/RESULTS.md)
            fused = {cid: d for cid, d in fused.items() if not d.get("collapsed")}
        top = [(cid, fused[cid]) for cid in ranked_ids(fused)]
        hidden = 0
        if top and cfg.relative_floor > 0:
            cut = top[0][1]["score"] * cfg.relative_floor
            keep = [kv for kv in top if kv[1]["score"] >= cut]
            hidden = len(top) - len(keep)
            top = keep
        if cfg.chat_context_bytes > 0:
            return self._with_chat_context(top, limit, cfg.chat_context_bytes), hidden + null_hidden
        full = self._rows([cid for cid, _ in top[:limit]])
        hits = [self._hit(cid, d, full[cid]) for cid, d in top[:limit] if cid in full]
        return hits, hidden + null_hidden

    def _with_chat_context(self, top: list[tuple[int, dict]], limit: int, budget: int) -> list[Hit]:
        """The first ``limit`` hits of ``top``, chat-record hits widened to the neighbouring windows of their
        record on the same day (next, then previous, alternately, while the text stays within ``budget`` UTF-8
        bytes); a hit whose
        chunk an earlier hit already shows is skipped, so the slot goes to the next one. Ranking stays on the small
        windows (precise), the reader gets the conversation around them."""
        hits: list[Hit] = []
        shown: set[int] = set()
        pos = 0
        c = self.store.conn
        while len(hits) < limit and pos < len(top):
            batch = [kv for kv in top[pos:pos + limit] if kv[0] not in shown]
            pos += limit
            full = self._rows([cid for cid, _ in batch])
            for cid, d in batch:
                if len(hits) >= limit:
                    break
                if cid in shown or cid not in full:
                    continue
                h = self._hit(cid, d, full[cid])
                if h.path.endswith(".jsonl"):
                    rows = c.execute("SELECT id, start_line, end_line, text FROM chunks WHERE file_id ="
                                     " (SELECT file_id FROM chunks WHERE id = ?) ORDER BY ord", (cid,)).fetchall()
                    i = next((k for k, r in enumerate(rows) if r[0] == cid), None)
                    if i is not None:
                        a = b = i
                        day = line_date(rows[i][3])  # the same day only: date filters stay true
                        size = len(rows[i][3].encode("utf-8"))
                        grew = True
                        while grew:
                            grew = False
                            for j in (b + 1, a - 1):
                                if 0 <= j < len(rows) and rows[j][0] not in shown \
                                        and line_date(rows[j][3]) == day:
                                    n = len(rows[j][3].encode("utf-8")) + 1
                                    if size + n <= budget:
                                        size += n
                                        a, b = min(a, j), max(b, j)
                                        grew = True
                        parts = [rows[a][3]]
                        for k in range(a + 1, b + 1):
                            parts.append("\n" * max(1, rows[k][1] - rows[k - 1][2]) + rows[k][3])
                        h.text = "".join(parts)
                        h.start_line, h.end_line = rows[a][1], rows[b][2]
                        shown.update(r[0] for r in rows[a:b + 1])
                shown.add(cid)
                hits.append(h)
        return hits

    def _lift_dated(self, fused: dict[int, dict], query: str, share: float) -> None:
        """The date rule: when ``query`` writes calendar dates or months (:func:`.dates.query_dates`), each
        candidate whose day (its file's date, or a chat window's) lies in one gains ``share`` × the best score
        (added to its ``field_boost``; ``dated`` set). One SQL read of the candidates' days, dated queries only."""
        from .dates import query_dates

        spans = query_dates(query)
        if not spans:
            return
        top = max(d["score"] for d in fused.values())
        if top <= 0:
            return
        ids = list(fused)
        days: dict[int, str] = {}
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            days.update(self.store.conn.execute(
                f"SELECT c.id, COALESCE(f.date, {chunk_date_sql()}) FROM chunks c JOIN files f ON f.id = c.file_id"
                f" WHERE c.id IN ({','.join('?' * len(part))})", part).fetchall())
        gain = share * top
        for cid, day in days.items():
            if day and any(a <= day[:10] <= b for a, b in spans):
                d = fused[cid]
                d["score"] += gain
                d["field_boost"] = d.get("field_boost", 0.0) + gain
                d["dated"] = True

    def null_floor(self, q: float) -> float:
        """The cosine below which a vector hit of a query with no keyword hit is hidden: the ``q`` quantile of the
        best cosines of nonsense probes against this vault's vectors (:mod:`.null`). Probed once per index size
        (again after ±10 % or a new title-vector build: the probes go through the same leg); the first probe runs
        here, a re-probe on a background thread while the previous floor still applies (a search never waits for
        it); 0.0 when there are no vectors or the embedder fails."""
        from ..index.embedder import EmbedderError

        vs = self.vectors
        if vs is None or not vs.ready or vs.index is None:
            return 0.0
        n = len(vs.index)
        tv = self.titles()
        tdata = tv._data if tv is not None else None
        cached = self._null
        if cached is None:
            try:
                cached = self._probe_null(n, tdata)
            except EmbedderError:
                return 0.0
        elif abs(n - cached[0]) > 0.1 * max(cached[0], 1) or cached[2] is not tdata:
            self._reprobe_null(n, tdata)
        from .null import quantile

        return quantile(cached[1], q)

    def _probe_null(self, n: int, tdata) -> tuple:
        """Probe the null model now and remember it: ``(index size, best cosines, title data)``."""
        from .null import probe_vectors

        vs, tv = self.vectors, self._titles
        tops = []
        for row in probe_vectors(vs.embedder):
            best = [c for _, c in vs.search(row, 1)]
            if tdata is not None and tv is not None:
                best += [c for _, c in tv.search(row, 1)]
            if best:
                tops.append(max(best))
        self._null = (n, tops, tdata)
        return self._null

    def _reprobe_null(self, n: int, tdata) -> None:
        """:meth:`_probe_null` on a daemon thread, one at a time (errors keep the previous floor)."""
        import threading

        t = getattr(self, "_null_thread", None)
        if t is not None and t.is_alive():
            return

        def run():
            try:
                self._probe_null(n, tdata)
            except Exception:  # noqa: BLE001 — the previous floor stays; the next search tries again
                pass

        self._null_thread = threading.Thread(target=run, name="reme-null-floor", daemon=True)
        self._null_thread.start()

    def search(self, query: str, *, limit: int = 10, mode: str = "hybrid", filters: SearchFilters | None = None,
               neighbors: bool = True, fusion: FusionConfig | None = None, parse_time: bool = True) -> SearchResult:
        """Search ``query``; ``mode`` is hybrid, keyword or vector; ``fusion`` overrides ``self.fusion`` for this
        call (e.g. ``relative_floor=0`` to show the weaker matches). Raises ValueError for a bad mode/limit/date.
        ``SearchResult.hidden`` counts the candidates the relative floor hid. ``neighbors``: the hits' hop-2
        directory, built on first read of ``SearchResult.neighbors`` (from the index as it is then).

        ``parse_time``: relative time words ("yesterday", "last week", "上周", :mod:`.timeq`, relative to
        ``self.today()``) become a date filter, unless ``filters`` already has dates; the words are taken out of
        the query, and a query that only asks "what did I talk about" then lists what is dated in the range
        (chat turns of those days, daily notes), newest day first. ``SearchResult.time_range`` says so."""
        tl = self._tl
        tl.in_search, tl.side = True, None
        mem = self._memory() if self.memory_bm25 else None
        try:
            if mem is not None:
                mem.pin()  # one freshness check for the whole search (it asks the scorer ~4 times)
            return self._search(query, limit=limit, mode=mode, filters=filters, neighbors=neighbors, fusion=fusion,
                                parse_time=parse_time)
        finally:
            tl.in_search, tl.side = False, None
            if mem is not None:
                mem.unpin()

    def _search(self, query: str, *, limit: int, mode: str, filters: SearchFilters | None, neighbors: bool,
                fusion: FusionConfig | None, parse_time: bool) -> SearchResult:
        """The body of :meth:`search` (the caller keeps the per-search cache snapshot)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        if filters is not None:
            for name in ("date_from", "date_to"):
                value = getattr(filters, name)
                if value:
                    try:
                        from datetime import date as _date

                        _date.fromisoformat(value)
                    except ValueError:
                        raise ValueError(f"{name} must be a real date YYYY-MM-DD (got {value!r})") from None
            if filters.date_from and filters.date_to and filters.date_from > filters.date_to:
                raise ValueError(f"date_from {filters.date_from} is after date_to {filters.date_to}: no date can "
                                 "match (swap them?)")
        if limit < 1:
            raise ValueError("limit must be >= 1")
        t0 = time.perf_counter()
        query = query.strip()
        if not query:
            return SearchResult(query, mode, [], took_ms=0.0)
        if not any(ch.isalnum() for ch in query) and no_words(query):
            # "(" or "%" has no word to match, yet the vector leg always has a nearest neighbour: nothing to show
            return SearchResult(query, mode, [], took_ms=0.0, degraded="no words to search for in the query")
        asked, time_range, listing = query, None, False
        if parse_time and (filters is None or not (filters.date_from or filters.date_to)):
            rest, tr = parse_time_query(query, self.today())
            if tr is not None:
                filters = replace(filters or SearchFilters(), date_from=tr.date_from, date_to=tr.date_to)
                listing = is_recall_only(rest)
                query = content_words(rest) or rest
                time_range = {**tr.to_dict(), "listing": listing}
        if listing:
            hits, hidden = self.dated(filters, limit)
            result = SearchResult(asked, mode, hits, hidden=hidden, time_range=time_range)
        else:
            run = self.run_legs(query, min(200, 5 * limit), mode=mode, filters=filters)
            hits, hidden = self.rank(query, run, limit=limit, mode=mode, fusion=fusion)
            result = SearchResult(asked, mode, hits, took_ms=0.0, keyword_ms=run["keyword_ms"],
                                  vector_ms=run["vector_ms"], degraded=run["degraded"], hidden=hidden,
                                  time_range=time_range)
        if neighbors:
            # built on first read (SearchResult.neighbors): the TUI and most callers never show it
            paths = [h.path for h in hits]
            result.neighbors = lambda: neighborhoods(self.store, paths)
        result.took_ms = (time.perf_counter() - t0) * 1000
        return result

    def dated(self, filters: SearchFilters, limit: int) -> tuple[list[Hit], int]:
        """``(hits, how many more)``: the chunks passing ``filters`` (a date range), newest day first; within a
        day chat turns first, in record order, then notes by path and line. Scores are 1/position (no query)."""
        where, params = filters.sql()
        day = f"COALESCE(f.date, {chunk_date_sql()})"
        base = f"FROM chunks c JOIN files f ON f.id = c.file_id WHERE {where} AND {day} IS NOT NULL"
        c = self.store.conn
        total = c.execute(f"SELECT count(*) {base}", params).fetchone()[0]
        rows = c.execute(
            "SELECT c.id, f.path, f.name, f.aliases, c.text, c.start_line, c.end_line, c.headings, f.description"
            f" {base} ORDER BY {day} DESC, substr(f.path, -6) = '.jsonl' DESC, f.path, c.start_line LIMIT ?",
            [*params, limit]).fetchall()
        hits = [self._hit(r[0], {"score": 1.0 / i}, r[1:]) for i, r in enumerate(rows, 1)]
        return hits, max(0, total - len(hits))

    def _cached(self, name: str, ids: list[int]) -> tuple[dict | None, dict[int, tuple], list[int]]:
        """``(cache, found, missing ids)`` for the per-chunk row cache ``name``, kept while the postings are unchanged
        (the in-memory keyword scorer's side cache); ``(None, {}, ids)`` when that scorer is off."""
        if not self.memory_bm25:
            return None, {}, ids
        tl = self._tl
        side = getattr(tl, "side", None)
        if side is None:
            side = self._memory().side_cache()  # checks the postings' generation: one SQL read (~50 µs)
            if getattr(tl, "in_search", False):
                tl.side = side  # the rest of this search on this thread uses the same snapshot
        cache = side.setdefault(name, {})
        out: dict[int, tuple] = {}
        missing = []
        for i in ids:
            got = cache.get(i)
            if got is None:
                missing.append(i)
            else:
                out[i] = got
        return cache, out, missing

    def _meta(self, ids: list[int]) -> dict[int, tuple]:
        """{id: (path, name, aliases JSON, text or None)} of live chunks, for :func:`adjust`; the text only of
        day-page chunks (the rest is not needed to rank, and fetching it cost ~4 ms a query)."""
        day: list[int] = []
        c = self.store.conn
        cache, out, ids = self._cached("meta", ids)  # ~0.5 ms of a warm query otherwise
        if not ids:
            return out
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            for r in c.execute("SELECT c.id, f.path, f.name, f.aliases FROM chunks c JOIN files f ON f.id = c.file_id"
                               f" WHERE c.id IN ({','.join('?' * len(part))})", part):
                out[r[0]] = (r[1], r[2], r[3], None)
                if _DAY_PAGE_RE.search(r[1]):
                    day.append(r[0])
        if day:
            for cid, text in c.execute(f"SELECT id, text FROM chunks WHERE id IN ({','.join('?' * len(day))})", day):
                r = out[cid]
                out[cid] = (r[0], r[1], r[2], text)
        if cache is not None:
            if len(cache) > 100_000:
                cache.clear()
            cache.update((i, out[i]) for i in ids if i in out)
        return out

    def chunk_texts(self, ids: list[int]) -> dict[int, tuple[int, int, str, str]]:
        """``{chunk id: (file id, ordinal in the file, text, vault-relative path)}`` of the live chunks among
        ``ids``, as :func:`.rerank.chunk_texts` reads them, remembered while the postings are unchanged: the second
        stage re-reads ~25 candidates a query, and their decompression was ~0.8 ms of a warm search."""
        from .rerank import chunk_texts

        cache, out, ids = self._cached("texts", ids)
        if ids:
            got = chunk_texts(self.store.conn, ids)
            out.update(got)
            if cache is not None:
                if len(cache) > 5_000:  # texts up to a few KB each
                    cache.clear()
                cache.update(got)
        return out

    def _rows(self, ids: list[int]) -> dict[int, tuple]:
        """{id: (path, name, aliases JSON, text, start_line, end_line, headings tuple, description)} of live
        chunks (headings parsed once: the cache keeps them)."""
        c = self.store.conn
        cache, out, ids = self._cached("rows", ids)  # the shown hits' rows
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            for r in c.execute(
                    "SELECT c.id, f.path, f.name, f.aliases, c.text, c.start_line, c.end_line, c.headings,"
                    " f.description FROM chunks c JOIN files f ON f.id = c.file_id"
                    f" WHERE c.id IN ({','.join('?' * len(part))})", part):
                out[r[0]] = (r[1], r[2], r[3], r[4], r[5], r[6], tuple(json.loads(r[7])), r[8])
        if cache is not None and ids:
            if len(cache) > 5_000:  # texts up to a few KB each
                cache.clear()
            cache.update((i, out[i]) for i in ids if i in out)
        return out

    @staticmethod
    def _hit(cid: int, d: dict, r: tuple) -> Hit:
        return Hit(
            path=r[0], start_line=r[4], end_line=r[5], score=d["score"], text=r[3],
            headings=json.loads(r[6]) if r[6].__class__ is str else list(r[6]),
            name=r[1], description=r[7], chunk_id=cid,
            keyword_rank=d.get("keyword_rank"), keyword_score=d.get("keyword_score"),
            vector_rank=d.get("vector_rank"), vector_score=d.get("vector_score"),
            keyword_rrf=d.get("keyword_rrf", 0.0), vector_rrf=d.get("vector_rrf", 0.0),
            vector_imputed=d.get("vector_imputed", False), field_boost=d.get("field_boost", 0.0),
            demoted=d.get("demoted", False), vector_title=d.get("vector_title", False),
        )
