"""Hybrid search: BM25 (SQLite FTS5 over our own tokens) + dense vectors (faiss), fused by weighted RRF.

Fusion (Cormack, Clarke & Büttcher 2009, "Reciprocal Rank Fusion outperforms Condorcet and individual rank
learning methods"; weights from seed 003 §4.2)::

    score(d) = Σ_leg  w_leg / (k + rank_leg(d))      k = 60, w_vector = 0.7, w_keyword = 0.3

over ``min(200, 5·limit)`` candidates per leg. Only documents a leg actually retrieved get a rank in it:
keyword hits need at least one matching term (FTS5 never returns zero-score rows), so BM25 never ranks a
non-matching document (PITFALLS: ranking zero-score hits wrecked recall). Each hit keeps both legs' ranks and
raw scores so the UI can say why it ranked.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from .graph import neighborhood

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


@dataclass
class SearchFilters:
    """Restrict a search. ``path_prefix`` (folder or path start), ``paths`` (exact), ``date_from``/``date_to``
    (inclusive YYYY-MM-DD, matched against a date path segment), ``frontmatter`` ({key: value}; a list-valued
    key matches when it contains the value)."""

    path_prefix: str | None = None
    paths: list[str] | None = None
    date_from: str | None = None
    date_to: str | None = None
    frontmatter: dict[str, Any] | None = None

    def empty(self) -> bool:
        return not (self.path_prefix or self.paths or self.date_from or self.date_to or self.frontmatter)

    def sql(self) -> tuple[str, list]:
        """A WHERE fragment over ``files f`` and its parameters."""
        conds, params = [], []
        if self.path_prefix:
            conds.append("substr(f.path, 1, ?) = ?")
            params += [len(self.path_prefix), self.path_prefix]
        if self.paths:
            conds.append(f"f.path IN ({','.join('?' * len(self.paths))})")
            params += list(self.paths)
        if self.date_from:
            conds.append("f.date >= ?")
            params.append(self.date_from)
        if self.date_to:
            conds.append("f.date <= ?")
            params.append(self.date_to)
        for key, value in (self.frontmatter or {}).items():
            jp = "$." + json.dumps(str(key), ensure_ascii=False)
            conds.append(
                "(json_extract(f.frontmatter, ?) = ? OR EXISTS (SELECT 1 FROM json_each(f.frontmatter, ?) j"
                " WHERE j.value = ?))"
            )
            v = value if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
            params += [jp, v, jp, v]
        return (" AND ".join(conds) or "1"), params


@dataclass
class Hit:
    """One fused result: a chunk of ``path`` covering file lines ``start_line``..``end_line`` (1-based, inclusive).

    ``score`` is the fused RRF score; ``keyword_rank``/``vector_rank`` are 1-based ranks in each leg (None when
    the leg did not retrieve it), ``keyword_score`` the BM25 score (higher is better), ``vector_score`` the
    cosine similarity, ``keyword_rrf``/``vector_rrf`` each leg's share of ``score``."""

    path: str
    start_line: int
    end_line: int
    score: float
    text: str
    headings: list[str]
    name: str
    description: str
    chunk_id: int
    keyword_rank: int | None = None
    keyword_score: float | None = None
    vector_rank: int | None = None
    vector_score: float | None = None
    keyword_rrf: float = 0.0
    vector_rrf: float = 0.0
    #: the chunk has no vector yet (saved, not embedded): ``vector_rrf`` was imputed from its keyword rank
    #: (see :func:`impute_missing_vectors`)
    vector_imputed: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class SearchResult:
    """Hits best first, the hop-2 neighbour directory per hit file, timings (ms) and what degraded, if anything."""

    query: str
    mode: str
    hits: list[Hit]
    neighbors: dict[str, dict] = field(default_factory=dict)
    took_ms: float = 0.0
    keyword_ms: float = 0.0
    vector_ms: float = 0.0
    degraded: str | None = None

    def to_dict(self) -> dict:
        return {
            "query": self.query, "mode": self.mode, "hits": [h.to_dict() for h in self.hits],
            "neighbors": self.neighbors, "took_ms": round(self.took_ms, 3), "keyword_ms": round(self.keyword_ms, 3),
            "vector_ms": round(self.vector_ms, 3), "degraded": self.degraded,
        }


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


def rrf(legs: dict[str, list[tuple[int, float]]], weights: dict[str, float], k: int = 60) -> dict[int, dict]:
    """Weighted reciprocal rank fusion. ``legs``: {leg: [(id, raw score) best first]} → {id: details}.

    Details: ``score`` (Σ w/(k+rank)), ``<leg>_rank`` (1-based), ``<leg>_score`` (raw) and ``<leg>_rrf``.
    Pure function, no I/O.
    """
    fused: dict[int, dict] = {}
    for leg, ranked in legs.items():
        w = weights.get(leg, 0.0)
        for rank, (doc, raw) in enumerate(ranked, start=1):
            d = fused.setdefault(doc, {"score": 0.0})
            part = w / (k + rank)
            d["score"] += part
            d[f"{leg}_rank"] = rank
            d[f"{leg}_score"] = raw
            d[f"{leg}_rrf"] = part
    return fused


def impute_missing_vectors(fused: dict[int, dict], keyword: list[tuple[int, float]], has_vector,
                           weight: float, k: int = 60) -> None:
    """Give keyword hits that cannot appear in the vector leg *yet* (``has_vector(id)`` False: saved, not embedded
    yet) the vector share they would have if the dense leg agreed with the keyword leg: ``weight/(k+rank)``
    at their keyword rank. Without it a note saved a moment ago — searchable by keyword at once, embedded a few
    seconds to minutes later — ranks below ~80 vector hits in hybrid search even as the only exact match
    (weights 0.7/0.3: a rank-1 keyword share is 0.3/61, the 80th vector share 0.7/140). Mutates ``fused``
    (adds ``vector_rrf``, ``vector_imputed``); ``has_vector(id) -> bool``. Pure apart from that call.
    """
    for rank, (doc, _score) in enumerate(keyword, start=1):
        d = fused.get(doc)
        if d is None or "vector_rank" in d or has_vector(doc):
            continue
        part = weight / (k + rank)
        d["score"] += part
        d["vector_rrf"] = part
        d["vector_imputed"] = True


class HybridSearcher:
    """Runs both legs (the vector leg on a worker thread, concurrently) and fuses them."""

    def __init__(self, store, tokenizer, vectors=None, *, vector_weight: float = 0.7, keyword_weight: float = 0.3,
                 rrf_k: int = 60) -> None:
        self.store = store
        self.tokenizer = tokenizer
        self.vectors = vectors
        self._n_chunks: tuple[int, float] | None = None  # (count, when)
        self.weights = {"vector": vector_weight, "keyword": keyword_weight}
        self.k = rrf_k
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reme-vector-leg")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- legs ---------------------------------------------------------------------------------------------
    def keyword_leg(self, query: str, n: int, filters: SearchFilters | None) -> list[tuple[int, float]]:
        """BM25 top ``n`` as ``[(chunk id, score)]``, score = −bm25() so higher is better."""
        tokens = self.tokenizer.query_tokens(query)
        if not tokens:
            return []
        where, params = ("1", [])
        if filters is not None and not filters.empty():
            where, params = filters.sql()
            where = f"chunks_fts.rowid IN (SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE {where})"
        sql = (f"SELECT rowid, bm25(chunks_fts, {BM25_WEIGHTS[0]}, {BM25_WEIGHTS[1]}) AS s FROM chunks_fts"
               f" WHERE chunks_fts MATCH ? AND {where} ORDER BY s LIMIT ?")
        c = self.store.conn
        n_chunks = self._chunk_count()
        if n_chunks >= COMMON_TERM_MIN_CHUNKS:
            terms, op = select_terms(tokens[:MAX_QUERY_TERMS], self._doc_freqs(tokens[:MAX_QUERY_TERMS]), n_chunks)
            rows = c.execute(sql, [fts_query(terms, op), *params, n]).fetchall()
            if op == "OR" or len(rows) >= min(n, 10):
                return [(r[0], -r[1]) for r in rows]
            # the common terms hardly co-occur: the full OR (slow, rare) rather than next to nothing
        rows = c.execute(sql, [fts_query(tokens), *params, n]).fetchall()
        return [(r[0], -r[1]) for r in rows]

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
        return self._n_chunks[0]

    def _doc_freqs(self, terms: list[str]) -> dict[str, int]:
        """``{term: chunks containing it}`` from FTS5's own vocabulary (``fts5vocab``, one per connection)."""
        c = self.store.conn
        q = f"SELECT term, doc FROM temp.chunks_vocab WHERE term IN ({','.join('?' * len(terms))})"
        try:
            return dict(c.execute(q, terms).fetchall())
        except Exception:  # first use on this connection
            c.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_vocab USING fts5vocab(main, chunks_fts, 'row')")
            return dict(c.execute(q, terms).fetchall())

    def allowed_ids(self, filters: SearchFilters):
        """int64 array of chunk ids passing ``filters`` (for the vector leg's faiss ID selector)."""
        import numpy as np

        where, params = filters.sql()
        rows = self.store.conn.execute(
            f"SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE {where}", params).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def vector_leg(self, query: str, n: int, filters: SearchFilters | None) -> list[tuple[int, float]]:
        """Dense top ``n`` as ``[(chunk id, cosine)]``. Raises EmbedderError when the embedder fails."""
        vs = self.vectors
        if vs is None or not vs.ready:
            return []
        qv = vs.embedder.embed([query])[0]
        allowed = None
        if filters is not None and not filters.empty():
            # own connection per thread: this runs on the worker
            allowed = self.allowed_ids(filters)
        return vs.search(qv, n, allowed)

    # -- search -------------------------------------------------------------------------------------------
    def search(self, query: str, *, limit: int = 10, mode: str = "hybrid", filters: SearchFilters | None = None,
               neighbors: bool = True) -> SearchResult:
        """Search ``query``; ``mode`` is hybrid, keyword or vector. Raises ValueError for a bad mode/limit."""
        from ..index.embedder import EmbedderError

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
        if limit < 1:
            raise ValueError("limit must be >= 1")
        t0 = time.perf_counter()
        n = min(200, 5 * limit)
        degraded = None
        query = query.strip()
        legs: dict[str, list[tuple[int, float]]] = {}
        kw_ms = vec_ms = 0.0
        if not query:
            return SearchResult(query, mode, [], took_ms=0.0)
        vec_future = None
        use_vec = mode in ("hybrid", "vector")
        if use_vec:
            if self.vectors is None:
                degraded = "no embedder configured: keyword search only"
            elif not self.vectors.ready:
                degraded = "vector index not loaded yet: keyword search only"
            else:
                def run_vec():
                    ts = time.perf_counter()
                    return self.vector_leg(query, n, filters), (time.perf_counter() - ts) * 1000

                vec_future = self._pool.submit(run_vec)
        if mode in ("hybrid", "keyword"):
            ts = time.perf_counter()
            legs["keyword"] = self.keyword_leg(query, n, filters)
            kw_ms = (time.perf_counter() - ts) * 1000
        if vec_future is not None:
            try:
                legs["vector"], vec_ms = vec_future.result()
            except EmbedderError as exc:
                degraded = f"embedder failed, keyword search only: {exc}"
                if mode == "vector":
                    legs["keyword"] = self.keyword_leg(query, n, filters)
        weights = dict(self.weights)
        if mode != "hybrid":
            weights = {"keyword": 1.0, "vector": 1.0}
        fused = rrf(legs, weights, self.k)
        if mode == "hybrid" and "vector" in legs and legs.get("keyword") and self.vectors is not None \
                and self.vectors.index is not None:
            waiting = self._waiting_for_vector([doc for doc, _ in legs["keyword"]])
            impute_missing_vectors(fused, legs["keyword"], lambda doc: doc not in waiting,
                                   weights.get("vector", 0.0), self.k)
        top = sorted(fused.items(), key=lambda kv: (-kv[1]["score"], kv[0]))
        hits = self._materialize(top, limit)
        result = SearchResult(query, mode, hits, took_ms=0.0, keyword_ms=kw_ms, vector_ms=vec_ms, degraded=degraded)
        if neighbors:
            for h in hits:
                if h.path not in result.neighbors:
                    result.neighbors[h.path] = neighborhood(self.store, h.path).to_dict()
        result.took_ms = (time.perf_counter() - t0) * 1000
        return result

    def _materialize(self, top: list[tuple[int, dict]], limit: int) -> list[Hit]:
        """Join fused ids with chunk rows; ids whose chunk vanished (stale vectors) are skipped."""
        hits: list[Hit] = []
        c = self.store.conn
        i = 0
        while len(hits) < limit and i < len(top):
            part = top[i : i + limit * 2]
            i += len(part)
            ids = [cid for cid, _ in part]
            rows = {r[0]: r for r in c.execute(
                "SELECT c.id, f.path, c.start_line, c.end_line, c.text, c.headings, f.name, f.description"
                f" FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id IN ({','.join('?' * len(ids))})", ids)}
            for cid, d in part:
                r = rows.get(cid)
                if r is None:
                    continue
                hits.append(Hit(
                    path=r[1], start_line=r[2], end_line=r[3], score=d["score"], text=r[4],
                    headings=json.loads(r[5]), name=r[6], description=r[7], chunk_id=cid,
                    keyword_rank=d.get("keyword_rank"), keyword_score=d.get("keyword_score"),
                    vector_rank=d.get("vector_rank"), vector_score=d.get("vector_score"),
                    keyword_rrf=d.get("keyword_rrf", 0.0), vector_rrf=d.get("vector_rrf", 0.0),
                    vector_imputed=d.get("vector_imputed", False),
                ))
                if len(hits) >= limit:
                    break
        return hits
