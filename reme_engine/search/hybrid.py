"""Hybrid search: BM25 (SQLite FTS5 over our own tokens) + dense vectors (faiss), fused, then field-aware ranking.

Pipeline of one query: both legs fetch ``min(200, 5·limit)`` candidates (the vector leg on a worker thread) →
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
"""

from __future__ import annotations

import json
import math
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from ..markdown.links import parse_links
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

    ``score`` is the fused score (its scale depends on the fusion method; ``convex``: 0..1 plus any field boost);
    ``keyword_rank``/``vector_rank`` are 1-based ranks in each leg (None when the leg did not retrieve it),
    ``keyword_score`` the BM25 score (higher is better), ``vector_score`` the cosine similarity,
    ``keyword_rrf``/``vector_rrf`` each leg's share of ``score`` (named after the original RRF fusion)."""

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
    #: score added by the field-aware rule (the note's name, file stem or alias is/contains the query)
    field_boost: float = 0.0
    #: a generated day-index chunk placed just below a card it lists
    demoted: bool = False

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
    #: candidates hidden by the relative floor ("n weaker matches hidden"; search again with
    #: ``fusion=replace(cfg, relative_floor=0)`` to show them)
    hidden: int = 0

    def to_dict(self) -> dict:
        return {
            "query": self.query, "mode": self.mode, "hits": [h.to_dict() for h in self.hits],
            "neighbors": self.neighbors, "took_ms": round(self.took_ms, 3), "keyword_ms": round(self.keyword_ms, 3),
            "vector_ms": round(self.vector_ms, 3), "degraded": self.degraded, "hidden": self.hidden,
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


FUSION_METHODS = ("convex", "rrf", "interleave", "tmm", "choose")

#: FTS5's bm25() parameters (fixed in SQLite): used to bound a chunk's score by the query's IDF mass.
_BM25_FLOOR_IDF = 1e-6
_DAY_PAGE_RE = re.compile(r"(?:^|/)\d{4}-\d{2}-\d{2}\.md$")
_NORM_RE = re.compile(r"[\W_]+", re.UNICODE)
#: the marker of the app's generated day index (reme_engine.vault.daily.INDEX_START; not imported: layering)
_DAY_INDEX_MARK = "reme:day-index:"


@dataclass
class FusionConfig:
    """How the legs are fused and the fused list adjusted. Defaults are the measured choice (bench/RESULTS.md).

    ``method``: one of :data:`FUSION_METHODS`. ``convex``: ``α·kn + (1−α)·vn`` with ``α = keyword_share``,
    ``kn = min(1, bm25/Σidf)``, ``vn = clip((cos − cosine_lo)/(cosine_hi − cosine_lo), 0, 1)``. ``rrf``:
    ``Σ w/(k + rank)`` with ``vector_weight``/``keyword_weight``/``rrf_k``. ``interleave``: alternate the legs,
    keyword first. ``tmm``: ``α·bm25/max bm25 + (1−α)·cos/max cos``. ``choose``: the keyword leg's order when its
    best ``kn`` ≥ ``choose_threshold``, else the vector leg's (the other leg's hits follow).
    ``cosine_floor``: vector hits with a lower cosine are dropped before fusion (hybrid only). ``relative_floor``:
    hits scoring below this share of the best hit are hidden (counted in ``SearchResult.hidden``).
    ``title_boost``: added, as a share of the best score, to the best chunk of a note whose name, file stem or
    alias equals the query (half of it when one of them contains the query, ≥ 2 characters).
    ``demote_day_index``: a generated day-index chunk scores just below the best listed card it competes with.
    """

    method: str = "convex"
    keyword_share: float = 0.6
    cosine_lo: float = 0.1
    cosine_hi: float = 0.8
    vector_weight: float = 0.7
    keyword_weight: float = 0.3
    rrf_k: int = 60
    cosine_floor: float = 0.0
    relative_floor: float = 0.15
    title_boost: float = 0.5
    demote_day_index: bool = True
    choose_threshold: float = 0.5

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise ValueError(f"fusion method must be one of {', '.join(FUSION_METHODS)} (got {self.method!r})")
        if not self.cosine_hi > self.cosine_lo:
            raise ValueError("cosine_hi must be greater than cosine_lo")
        if self.rrf_k < 1:
            raise ValueError("rrf_k must be >= 1")


def fusion_from_settings(settings) -> FusionConfig:
    """The :class:`FusionConfig` of a :class:`reme_engine.config.Settings` (``search.*`` plus the RRF keys)."""
    ss = settings.search
    return FusionConfig(method=ss.fusion, keyword_share=ss.keyword_share, cosine_lo=ss.cosine_lo,
                        cosine_hi=ss.cosine_hi, vector_weight=settings.search_vector_weight,
                        keyword_weight=settings.search_keyword_weight, rrf_k=settings.rrf_k,
                        relative_floor=ss.relative_floor, title_boost=ss.title_boost,
                        demote_day_index=ss.demote_day_index)


def bm25_idf(df: int, n_rows: int) -> float:
    """FTS5's IDF of a term in ``df`` of ``n_rows`` rows: ``log((N − df + 0.5)/(df + 0.5))``, floored at 1e-6."""
    n_rows = max(n_rows, df)  # the row count may be a cached, older count: never log a negative
    v = math.log((n_rows - df + 0.5) / (df + 0.5)) if n_rows > 0 else 0.0
    return v if v > 0 else _BM25_FLOOR_IDF


def fuse(legs: dict[str, list[tuple[int, float]]], cfg: FusionConfig, *, idf_sum: float = 0.0,
         mode: str = "hybrid") -> dict[int, dict]:
    """Fuse ``legs`` ({"keyword"|"vector": [(id, raw score) best first]}) → {id: details}. Pure.

    Details: ``score`` (≥ 0; ids that would score 0 are left out), ``<leg>_rank`` (1-based), ``<leg>_score``
    (raw: BM25 higher-is-better, cosine) and ``<leg>_rrf`` (that leg's share of ``score``). ``idf_sum``: the
    query's Σ idf (keyword normalisation of ``convex``/``choose``). ``mode`` keyword|vector: that leg's own order
    (score = raw / best raw for BM25, the cosine for vectors) whatever the method.
    """
    kw = legs.get("keyword") or []
    vec = legs.get("vector") or []
    if mode == "hybrid" and cfg.cosine_floor > 0:
        vec = [(d, s) for d, s in vec if s >= cfg.cosine_floor]
    fused: dict[int, dict] = {}

    def put(leg: str, rank: int, doc: int, raw: float, part: float) -> None:
        d = fused.setdefault(doc, {"score": 0.0})
        d["score"] += part
        d[f"{leg}_rank"] = rank
        d[f"{leg}_score"] = raw
        d[f"{leg}_rrf"] = part

    if mode != "hybrid":
        ranked = kw if mode == "keyword" else vec
        leg = mode
        top = max((s for _, s in ranked), default=0.0)
        for rank, (doc, raw) in enumerate(ranked, 1):
            part = (raw / top if top > 0 else 1.0 / rank) if leg == "keyword" else max(raw, 1e-9)
            put(leg, rank, doc, raw, part)
        return fused
    m = cfg.method
    if m == "rrf":
        for leg, ranked, w in (("keyword", kw, cfg.keyword_weight), ("vector", vec, cfg.vector_weight)):
            for rank, (doc, raw) in enumerate(ranked, 1):
                put(leg, rank, doc, raw, w / (cfg.rrf_k + rank))
        return fused
    if m == "interleave":
        order: list[tuple[str, int, int, float]] = []
        for i in range(max(len(kw), len(vec))):
            for leg, ranked in (("keyword", kw), ("vector", vec)):
                if i < len(ranked):
                    order.append((leg, i + 1, *ranked[i]))
        pos = 0
        for leg, rank, doc, raw in order:
            if doc not in fused:
                pos += 1
                put(leg, rank, doc, raw, 1.0 / pos)
            else:  # already placed by the other leg: record its rank, no extra score
                fused[doc][f"{leg}_rank"] = rank
                fused[doc][f"{leg}_score"] = raw
                fused[doc].setdefault(f"{leg}_rrf", 0.0)
        return fused
    kn = {doc: min(1.0, raw / idf_sum) if idf_sum > 0 else 0.0 for doc, raw in kw}
    if m == "choose":
        first, second = (kw, vec) if max(kn.values(), default=0.0) >= cfg.choose_threshold else (vec, kw)
        pos = 0
        for ranked in (first, second):
            leg = "keyword" if ranked is kw else "vector"
            for rank, (doc, raw) in enumerate(ranked, 1):
                if doc in fused:
                    fused[doc][f"{leg}_rank"] = rank
                    fused[doc][f"{leg}_score"] = raw
                    fused[doc].setdefault(f"{leg}_rrf", 0.0)
                    continue
                pos += 1
                put(leg, rank, doc, raw, 1.0 / pos)
        return fused
    a = cfg.keyword_share
    if m == "tmm":
        kmax = max((s for _, s in kw), default=0.0)
        vmax = max((s for _, s in vec), default=0.0)
        for rank, (doc, raw) in enumerate(kw, 1):
            put("keyword", rank, doc, raw, a * (raw / kmax if kmax > 0 else 0.0))
        for rank, (doc, raw) in enumerate(vec, 1):
            put("vector", rank, doc, raw, (1 - a) * (max(raw, 0.0) / vmax if vmax > 0 else 0.0))
    else:  # convex
        lo, span = cfg.cosine_lo, cfg.cosine_hi - cfg.cosine_lo
        for rank, (doc, raw) in enumerate(kw, 1):
            put("keyword", rank, doc, raw, a * kn[doc])
        for rank, (doc, raw) in enumerate(vec, 1):
            put("vector", rank, doc, raw, (1 - a) * min(1.0, max(0.0, (raw - lo) / span)))
    return {doc: d for doc, d in fused.items() if d["score"] > 0}


def rank_key(doc: int, d: dict) -> tuple:
    """Sort key of a fused hit: score, then the keyword leg's rank, then the vector leg's, then the chunk id.

    Equal scores are common (``convex`` caps a keyword score at the query's Σ idf, and every keyword-only hit of a
    vault without vectors yet scores the same share): the legs' own orders break those ties, never the id."""
    inf = float("inf")
    return (-d["score"], d.get("keyword_rank", inf), d.get("vector_rank", inf), doc)


def impute_convex(fused: dict[int, dict], keyword: list[tuple[int, float]], waiting: set[int],
                  cfg: FusionConfig, idf_sum: float) -> None:
    """``convex`` counterpart of :func:`impute_missing_vectors`: a keyword hit whose chunk has no vector *yet*
    (in ``waiting``) gets the vector share it would have if the dense leg agreed with the keyword leg
    (``(1−α)·kn``). Mutates ``fused``."""
    a = cfg.keyword_share
    for doc, raw in keyword:
        d = fused.get(doc)
        if d is None or doc not in waiting or "vector_rank" in d:
            continue
        part = (1 - a) * (min(1.0, raw / idf_sum) if idf_sum > 0 else 0.0)
        d["score"] += part
        d["vector_rrf"] = part
        d["vector_imputed"] = True


def _alias_list(v) -> list[str]:
    if isinstance(v, str):
        try:
            v = json.loads(v or "[]")
        except ValueError:
            return []
    return [str(a) for a in v] if isinstance(v, list) else []


def normalise_name(text: str) -> str:
    """Case-folded ``text`` without punctuation, emoji or spaces (for title/alias equality). Pure."""
    return _NORM_RE.sub("", text.casefold())


def is_day_index_chunk(path: str, text: str) -> bool:
    """True for a chunk of a day page (``…/YYYY-MM-DD.md``) that is mostly a generated card list: it holds the
    app's day-index marker, or at least half of its non-blank lines are ``- [[…]]`` bullets. Pure."""
    if not _DAY_PAGE_RE.search(path):
        return False
    if _DAY_INDEX_MARK in text:
        return True
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return bool(lines) and sum(ln.startswith(("- [[", "* [[")) for ln in lines) * 2 >= len(lines)


def adjust(fused: dict[int, dict], rows: dict[int, tuple], query: str, cfg: FusionConfig) -> None:
    """Field-aware ranking on fused candidates. ``rows``: {id: (path, name, aliases (list or JSON text), text or
    None)}. Mutates ``fused`` (``score``; ``field_boost`` and ``demoted`` in the details). Pure apart from that.

    1. The best chunk of a note whose name, file stem or an alias equals the query (after
       :func:`normalise_name`) gains ``title_boost × best score``; half when one of them contains the query.
       Only keyword hits are checked: name, stem and aliases are indexed as the note's title field, so a note
       named like the query is always one.
    2. A generated day-index chunk (:func:`is_day_index_chunk`) that lists a note also among the candidates
       scores just below that note's best chunk: the page is a table of contents, the card is the answer.
    """
    if not fused:
        return
    order = sorted(fused, key=lambda i: rank_key(i, fused[i]))
    top = fused[order[0]]["score"]
    if cfg.title_boost > 0:
        q = normalise_name(query)
        seen: set[str] = set()
        for cid in order:
            r = rows.get(cid)
            if r is None or r[0] in seen or not q or "keyword_rank" not in fused[cid]:
                continue
            seen.add(r[0])
            stem = r[0].rsplit("/", 1)[-1].rsplit(".", 1)[0]
            names = {normalise_name(x) for x in (stem, r[1], *_alias_list(r[2])) if x}
            names.discard("")
            gain = 0.0
            if q in names:
                gain = cfg.title_boost
            elif len(q) >= 2 and any(q in n for n in names):
                gain = cfg.title_boost / 2
            if gain:
                fused[cid]["score"] += gain * top
                fused[cid]["field_boost"] = gain * top
    if cfg.demote_day_index:
        best_of: dict[str, float] = {}  # by path, and by file stem for basename links
        for cid, d in fused.items():
            r = rows.get(cid)
            if r is not None:
                stem = r[0].rsplit("/", 1)[-1].rsplit(".", 1)[0]
                for key in (r[0], stem):
                    best_of[key] = max(best_of.get(key, 0.0), d["score"])
        for cid, d in fused.items():
            r = rows.get(cid)
            if r is None or not r[3] or not is_day_index_chunk(r[0], r[3]):
                continue
            own = r[0].rsplit("/", 1)[-1].rsplit(".", 1)[0]
            targets = {t + ".md" if "/" in t else t
                       for t in (lk.target.strip() for lk in parse_links(r[3]) if lk.kind == "wikilink") if t}
            listed = [best_of[t] for t in targets if t in best_of and t not in (r[0], own)]
            if listed and max(listed) <= d["score"]:
                d["score"] = max(listed) * 0.999
                d["demoted"] = True


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
        self.weights = {"vector": vector_weight, "keyword": keyword_weight}
        self.k = rrf_k
        if fusion is None:
            fusion = FusionConfig(vector_weight=vector_weight, keyword_weight=keyword_weight, rrf_k=rrf_k)
        self.fusion = fusion
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reme-vector-leg")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

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
        if mode in ("hybrid", "vector"):
            if self.vectors is None:
                degraded = "no embedder configured: keyword search only"
            elif not self.vectors.ready:
                degraded = "vector index not loaded yet: keyword search only"
            else:
                def run_vec():
                    ts = time.perf_counter()
                    return self.vector_leg(query, n, filters), (time.perf_counter() - ts) * 1000

                vec_future = self._pool.submit(run_vec)
        if mode in ("hybrid", "keyword") or vec_future is None:
            ts = time.perf_counter()
            tokens = self.tokenizer.query_tokens(query)
            legs["keyword"] = self.keyword_leg(query, n, filters, tokens=tokens)
            kw_ms = (time.perf_counter() - ts) * 1000
        if vec_future is not None:
            try:
                legs["vector"], vec_ms = vec_future.result()
            except EmbedderError as exc:
                degraded = f"embedder failed, keyword search only: {exc}"
                if "keyword" not in legs:
                    legs["keyword"] = self.keyword_leg(query, n, filters)
        idf_sum = self.query_idf_sum(query, tokens) if legs.get("keyword") else 0.0
        waiting: set[int] = set()
        if "vector" in legs and legs.get("keyword") and self.vectors is not None and self.vectors.index is not None:
            waiting = self._waiting_for_vector([doc for doc, _ in legs["keyword"]])
        if degraded is None and waiting:
            # say it: a one-shot job or an MCP server on a vault nobody has embedded answers from keywords alone
            degraded = (f"{len(waiting)} of the keyword hits have no vector yet (ranked by keywords); the app, "
                        f"--serve or --refresh embeds them")
        return {"legs": legs, "idf_sum": idf_sum, "waiting": waiting, "keyword_ms": kw_ms, "vector_ms": vec_ms,
                "degraded": degraded}

    def rank(self, query: str, run: dict, *, limit: int = 10, mode: str = "hybrid",
             fusion: FusionConfig | None = None) -> tuple[list[Hit], int]:
        """``(hits best first, number hidden by the relative floor)`` from :meth:`run_legs` output: fusion,
        field-aware adjustments, floor. ``mode`` hybrid|keyword|vector (a single-leg mode uses that leg's order;
        when the vector leg is missing, hybrid ranks the keyword leg alone). ``fusion`` defaults to
        ``self.fusion``."""
        cfg = fusion or self.fusion
        legs = run["legs"]
        eff_mode = mode
        if mode == "hybrid" and "vector" not in legs:
            eff_mode = "keyword"
        elif mode == "vector" and "vector" not in legs:
            eff_mode = "keyword"  # degraded
        fused = fuse(legs, cfg, idf_sum=run["idf_sum"], mode=eff_mode)
        if eff_mode == "hybrid" and run["waiting"] and legs.get("keyword"):
            if cfg.method == "rrf":
                impute_missing_vectors(fused, legs["keyword"], lambda doc: doc not in run["waiting"],
                                       cfg.vector_weight, cfg.rrf_k)
            elif cfg.method in ("convex", "tmm"):
                impute_convex(fused, legs["keyword"], run["waiting"], cfg, run["idf_sum"])
        rows = self._meta(list(fused))
        fused = {cid: d for cid, d in fused.items() if cid in rows}  # stale vector ids: chunk vanished
        adjust(fused, rows, query, cfg)
        top = sorted(fused.items(), key=lambda kv: rank_key(*kv))
        hidden = 0
        if top and cfg.relative_floor > 0:
            cut = top[0][1]["score"] * cfg.relative_floor
            keep = [kv for kv in top if kv[1]["score"] >= cut]
            hidden = len(top) - len(keep)
            top = keep
        full = self._rows([cid for cid, _ in top[:limit]])
        hits = [self._hit(cid, d, full[cid]) for cid, d in top[:limit] if cid in full]
        return hits, hidden

    def search(self, query: str, *, limit: int = 10, mode: str = "hybrid", filters: SearchFilters | None = None,
               neighbors: bool = True, fusion: FusionConfig | None = None) -> SearchResult:
        """Search ``query``; ``mode`` is hybrid, keyword or vector; ``fusion`` overrides ``self.fusion`` for this
        call (e.g. ``relative_floor=0`` to show the weaker matches). Raises ValueError for a bad mode/limit/date.
        ``SearchResult.hidden`` counts the candidates the relative floor hid."""
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
        query = query.strip()
        if not query:
            return SearchResult(query, mode, [], took_ms=0.0)
        run = self.run_legs(query, min(200, 5 * limit), mode=mode, filters=filters)
        hits, hidden = self.rank(query, run, limit=limit, mode=mode, fusion=fusion)
        result = SearchResult(query, mode, hits, took_ms=0.0, keyword_ms=run["keyword_ms"],
                              vector_ms=run["vector_ms"], degraded=run["degraded"], hidden=hidden)
        if neighbors:
            for h in hits:
                if h.path not in result.neighbors:
                    result.neighbors[h.path] = neighborhood(self.store, h.path).to_dict()
        result.took_ms = (time.perf_counter() - t0) * 1000
        return result

    def _meta(self, ids: list[int]) -> dict[int, tuple]:
        """{id: (path, name, aliases JSON, text or None)} of live chunks, for :func:`adjust`; the text only of
        day-page chunks (the rest is not needed to rank, and fetching it cost ~4 ms a query)."""
        out: dict[int, tuple] = {}
        day: list[int] = []
        c = self.store.conn
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
        return out

    def _rows(self, ids: list[int]) -> dict[int, tuple]:
        """{id: (path, name, aliases JSON, text, start_line, end_line, headings JSON, description)} of live
        chunks."""
        out: dict[int, tuple] = {}
        c = self.store.conn
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            for r in c.execute(
                    "SELECT c.id, f.path, f.name, f.aliases, c.text, c.start_line, c.end_line, c.headings,"
                    " f.description FROM chunks c JOIN files f ON f.id = c.file_id"
                    f" WHERE c.id IN ({','.join('?' * len(part))})", part):
                out[r[0]] = (r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8])
        return out

    @staticmethod
    def _hit(cid: int, d: dict, r: tuple) -> Hit:
        return Hit(
            path=r[0], start_line=r[4], end_line=r[5], score=d["score"], text=r[3], headings=json.loads(r[6]),
            name=r[1], description=r[7], chunk_id=cid,
            keyword_rank=d.get("keyword_rank"), keyword_score=d.get("keyword_score"),
            vector_rank=d.get("vector_rank"), vector_score=d.get("vector_score"),
            keyword_rrf=d.get("keyword_rrf", 0.0), vector_rrf=d.get("vector_rrf", 0.0),
            vector_imputed=d.get("vector_imputed", False), field_boost=d.get("field_boost", 0.0),
            demoted=d.get("demoted", False),
        )
