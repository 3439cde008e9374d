"""Fusion of the two legs as pure scoring functions (no I/O): :class:`FusionConfig`, :func:`fuse`, :func:`rrf`,
the imputations for chunks still waiting for a vector, and :func:`rank_key` (the sort key every ranking uses).

The methods, their formulas and why ``convex`` is the default are described in :mod:`reme_engine.search.hybrid`
and measured by ``bench/bench_quality.py`` (bench/RESULTS.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


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
    ``collapse_day_index``: such a chunk (one that lists a card also among the candidates) is left out of the hits
    altogether, so its slot goes to the next answer (needs ``demote_day_index``).
    ``null_floor_quantile``: when the keyword leg found nothing (hybrid), vector hits whose cosine is below this
    quantile of what nonsense probes reach in this vault are hidden (:mod:`.null`; 0 = off).
    ``chat_context_bytes``: a chat-record hit (ranked as a small window of turns) is returned with the turns around
    it, up to this many UTF-8 bytes; a later hit already inside it is dropped (0 = off).
    ``rerank_depth``, ``rerank_coverage``, ``rerank_neighbour``, ``rerank_spread``: the second stage of
    :mod:`.rerank` on the best ``rerank_depth`` candidates — shares of the best score added for the query's
    IDF-weighted coverage by one line of the chunk and for a candidate neighbouring chunk, and the per-file
    discount of the greedy diversification (0 = that signal off; all 0 = no second stage). Default: coverage 0.2
    alone (bench/RESULTS.md, "Issue 11, fourth round": never below the first stage on any set; neighbour and
    spread lost on other sets and stay settings). ``rerank_lines``: share of the best score × the normalised cosine
    of the candidate's best turn (line vectors of daily cards, :mod:`.linevec`; 0 = off); ``rerank_lines_chat``: the
    same for chat-record windows (≤ 4 turns: their own vector is near turn level already; 0 by default, and their
    turn vectors are built only with :data:`.linevec.CHAT_LINES`: they bought nothing, bench/RESULTS.md, "Issue
    11, sixth round"). Chosen on the dev split of LoCoMo (bench/RESULTS.md, "Issue 11, fifth round").
    ``named_keyword_share``, ``named_cosine_lo``, ``named_cosine_hi``: ``convex``'s α and cosine range for a query
    that names a speaker of the vault's conversations, whose vector leg embedded it without the names
    (:mod:`.speakers`): that leg then matches what the question is about as well as the keyword leg does, and its
    cosines run lower (no name shared with every turn). Chosen over every set of the harness, dev split
    (bench/RESULTS.md, "Issue 11, session 22 (A)"); other queries use ``keyword_share``/``cosine_lo``/``cosine_hi``.
    ``date_boost``: a query that writes a calendar date or month (:mod:`.dates`) lifts each candidate dated inside
    it (a daily note's or chat window's day) by this share of the best score, before the second stage (0 = off).
    0.8: the smallest share at which the lift stops gaining on LoCoMo's cards and chats (dev split; 0.8, 1.0 and
    2.0 tie), bench/RESULTS.md, "Issue 11, session 22 (A)".
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
    collapse_day_index: bool = True
    choose_threshold: float = 0.5
    null_floor_quantile: float = 0.5
    chat_context_bytes: int = 1500
    rerank_depth: int = 30
    rerank_coverage: float = 0.2
    rerank_neighbour: float = 0.0
    rerank_spread: float = 0.0
    rerank_lines: float = 0.3
    rerank_lines_chat: float = 0.0
    named_keyword_share: float = 0.5
    named_cosine_lo: float = 0.05
    named_cosine_hi: float = 0.5
    date_boost: float = 0.8

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise ValueError(f"fusion method must be one of {', '.join(FUSION_METHODS)} (got {self.method!r})")
        if not self.cosine_hi > self.cosine_lo:
            raise ValueError("cosine_hi must be greater than cosine_lo")
        if not self.named_cosine_hi > self.named_cosine_lo:
            raise ValueError("named_cosine_hi must be greater than named_cosine_lo")
        if not (0.0 <= self.keyword_share <= 1.0 and 0.0 <= self.named_keyword_share <= 1.0):
            raise ValueError("keyword_share and named_keyword_share must be within 0..1")
        if self.rrf_k < 1:
            raise ValueError("rrf_k must be >= 1")
        if self.chat_context_bytes < 0:
            raise ValueError("chat_context_bytes must be >= 0")
        if not 0.0 <= self.null_floor_quantile <= 1.0:
            raise ValueError("null_floor_quantile must be within 0..1")
        if self.date_boost < 0:
            raise ValueError("date_boost must be >= 0")
        if self.rerank_depth < 0:
            raise ValueError("rerank_depth must be >= 0")
        if not (self.rerank_coverage >= 0 and self.rerank_neighbour >= 0 and self.rerank_lines >= 0
                and self.rerank_lines_chat >= 0):
            raise ValueError("rerank_coverage and rerank_neighbour must be >= 0")
        if not 0.0 <= self.rerank_spread < 1.0:
            raise ValueError("rerank_spread must be within 0..1 (1 excluded)")


def fusion_from_settings(settings) -> FusionConfig:
    """The :class:`FusionConfig` of a :class:`reme_engine.config.Settings` (``search.*`` plus the RRF keys)."""
    ss = settings.search
    return FusionConfig(method=ss.fusion, keyword_share=ss.keyword_share, cosine_lo=ss.cosine_lo,
                        cosine_hi=ss.cosine_hi, vector_weight=settings.search_vector_weight,
                        keyword_weight=settings.search_keyword_weight, rrf_k=settings.rrf_k,
                        relative_floor=ss.relative_floor, title_boost=ss.title_boost,
                        demote_day_index=ss.demote_day_index,
                        null_floor_quantile=getattr(ss, "null_floor_quantile", 0.5),
                        chat_context_bytes=getattr(ss, "chat_context_bytes", 1500),
                        **{k: getattr(ss, k) for k in _RERANK_KEYS if hasattr(ss, k)})


#: Second-stage settings read from ``search:`` when the settings have them (``FusionConfig`` defaults otherwise).
_RERANK_KEYS = ("rerank_depth", "rerank_coverage", "rerank_neighbour", "rerank_spread", "rerank_lines",
                "rerank_lines_chat", "named_keyword_share", "named_cosine_lo", "named_cosine_hi", "date_boost")


def for_named_query(cfg: FusionConfig) -> FusionConfig:
    """``cfg`` with ``convex``'s α and cosine range replaced by the ``named_*`` ones (a query whose speaker names
    were left out of its vector, :mod:`.speakers`); ``cfg`` itself when they are the same. Pure."""
    if (cfg.named_keyword_share, cfg.named_cosine_lo, cfg.named_cosine_hi) == (cfg.keyword_share, cfg.cosine_lo,
                                                                                cfg.cosine_hi):
        return cfg
    from dataclasses import replace

    return replace(cfg, keyword_share=cfg.named_keyword_share, cosine_lo=cfg.named_cosine_lo,
                   cosine_hi=cfg.named_cosine_hi)


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
    return (-d["score"], d.get("keyword_rank", _INF), d.get("vector_rank", _INF), doc)


_INF = float("inf")


def ranked_ids(fused: dict[int, dict]) -> list[int]:
    """The ids of ``fused`` best first, in :func:`rank_key` order: the key tuples themselves are sorted (every id
    is in its own, so no two are equal), which spares two Python calls per candidate of ``sorted(key=…)``. Pure."""
    return [t[3] for t in sorted([(-d["score"], d.get("keyword_rank", _INF), d.get("vector_rank", _INF), doc)
                                  for doc, d in fused.items()])]


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
