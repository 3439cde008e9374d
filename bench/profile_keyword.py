#!/usr/bin/env python
"""Where the keyword leg's time goes as the store grows, and what cheaper query plans would cost in quality.

    python bench/profile_keyword.py [--runs 3] [--quick] [--sizes 100000,300000]

Indexes the doocs-leetcode corpus (keyword pass only), then builds replicated stores like ``bench_search.py``
(same rows, FTS postings ×R). For each size and each of the 50 benchmark queries it measures the engine's
``HybridSearcher.keyword_leg`` (BM25 top 50) and relates it to the number of query terms, the postings they
touch (``fts5vocab`` document counts) and the rows matched. It then times alternative query plans — run here as
plain SQL, the engine is not modified — and reports their top-10 overlap with the engine's ranking:

- ``no_bigrams``: jieba words + Latin words only (the CJK character bigrams dropped from the query);
- ``df_pruned``: terms matching more than 5 % of the chunks dropped (the rarest term always kept);
- ``rank_column``: ``ORDER BY rank`` with the same bm25 weights configured as the table's rank function.

Prints one JSON object. Uses private tokenizer internals (``_cut``): a profiling tool, not an API.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CORPUS, bench_tmpdir, copy_tree, emit, loadavg, log, machine, open_engine, pct, stats  # noqa: E402
from queries import CORPUS_QUERIES  # noqa: E402


def query_variants(tok, query: str, df: dict, n_chunks: int) -> dict[str, list[str]]:
    from reme_engine.index.tokenizer import _CJK_RUN_RE, ZH_STOPWORDS

    base = tok.query_tokens(query)  # also loads the segmenter (lazy)
    words = set()
    for m in _CJK_RUN_RE.finditer(query):
        for w in tok._cut(m.group()):
            if len(w) > 1 and w not in ZH_STOPWORDS:
                words.add(w)
    no_bigrams = [t for t in base if not (_CJK_RUN_RE.fullmatch(t) and len(t) == 2 and t not in words)] or base
    present = [t for t in base if df.get(t, 0) > 0]
    pruned = [t for t in present if df[t] <= 0.05 * n_chunks]
    if not pruned and present:
        pruned = [min(present, key=lambda t: df[t])]
    return {"engine": base, "no_bigrams": no_bigrams, "df_pruned": pruned or base}


def run_size(db: Path, label: str, runs: int) -> dict:
    from reme_engine.index.tokenizer import default_tokenizer
    from reme_engine.search.hybrid import BM25_WEIGHTS, fts_query

    tok = default_tokenizer()
    con = sqlite3.connect(db)
    n_chunks = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
    con.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, chunks_fts, 'row')")
    df = dict(con.execute("SELECT term, doc FROM temp.vocab"))
    sql = (f"SELECT rowid, bm25(chunks_fts, {BM25_WEIGHTS[0]}, {BM25_WEIGHTS[1]}) AS s FROM chunks_fts"
           " WHERE chunks_fts MATCH ? ORDER BY s LIMIT 50")
    per_q = []
    for q in CORPUS_QUERIES:
        v = query_variants(tok, q, df, n_chunks)
        row = {"query": q, "terms": len(v["engine"]), "postings": sum(df.get(t, 0) for t in v["engine"]),
               "matched": con.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",
                                      (fts_query(v["engine"]),)).fetchone()[0]}
        ref = None
        for name in ("engine", "no_bigrams", "df_pruned"):
            terms = v[name]
            times = []
            for _ in range(runs):
                t = time.perf_counter()
                top = [r[0] for r in con.execute(sql, (fts_query(terms),))]
                times.append((time.perf_counter() - t) * 1000)
            row[f"{name}_ms"] = round(sorted(times)[len(times) // 2], 3)
            row[f"{name}_postings"] = sum(df.get(t, 0) for t in terms)
            if ref is None:
                ref = top[:10]
            else:
                row[f"{name}_overlap10"] = len(set(top[:10]) & set(ref)) / max(1, len(ref))
        per_q.append(row)
    # rank column (same weights configured as the table's rank function) — on a copy of the connection state
    con.execute(f"INSERT INTO chunks_fts(chunks_fts, rank) VALUES('rank', 'bm25({BM25_WEIGHTS[0]}, {BM25_WEIGHTS[1]})')")
    rank_ms = []
    for q in CORPUS_QUERIES:
        terms = tok.query_tokens(q)
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            con.execute("SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT 50",
                        (fts_query(terms),)).fetchall()
            times.append((time.perf_counter() - t) * 1000)
        rank_ms.append(sorted(times)[len(times) // 2])
    con.rollback() if con.in_transaction else None
    con.close()
    import numpy as np

    ms = np.array([r["engine_ms"] for r in per_q])
    post = np.array([r["postings"] for r in per_q], dtype=float)
    corr = float(np.corrcoef(ms, post)[0, 1]) if len(ms) > 2 else None
    slow = sorted(per_q, key=lambda r: -r["engine_ms"])[:5]
    summary = {"chunks": n_chunks,
               "engine_keyword_ms": stats([r["engine_ms"] for r in per_q]),
               "ms_per_1k_postings_p50": round(pct([r["engine_ms"] / max(1, r["postings"]) * 1000 for r in per_q], 50), 4),
               "corr_ms_vs_postings": round(corr, 3) if corr is not None else None,
               "terms_per_query_p50": pct([r["terms"] for r in per_q], 50),
               "matched_rows_p50": pct([r["matched"] for r in per_q], 50),
               "matched_fraction_p50": round(pct([r["matched"] / n_chunks for r in per_q], 50), 3)}
    for name in ("no_bigrams", "df_pruned"):
        summary[name] = {"ms": stats([r[f"{name}_ms"] for r in per_q]),
                         "postings_vs_engine_p50": round(pct([r[f"{name}_postings"] / max(1, r["postings"]) for r in per_q], 50), 3),
                         "top10_overlap_with_engine_mean": round(sum(r[f"{name}_overlap10"] for r in per_q) / len(per_q), 3)}
    summary["rank_column"] = {"ms": stats(rank_ms)}
    summary["slowest_queries"] = [{k: r[k] for k in ("query", "terms", "postings", "matched", "engine_ms")} for r in slow]
    summary["loadavg"] = loadavg()
    log(f"{label}: engine keyword p50 {summary['engine_keyword_ms']['p50']} ms")
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", default=None, help="replicated sizes (default 100000,300000; quick 10000)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    from bench_search import build_sqlite

    sizes = [int(x) for x in (args.sizes or ("10000" if args.quick else "100000,300000")).split(",") if x]
    out: dict = {"bench": "profile_keyword", "quick": args.quick, "runs": args.runs, "machine": machine(),
                 "sizes": {}}
    with bench_tmpdir("kwprof", keep=args.keep) as tmp:
        corpus = tmp / "corpus"
        if args.quick:
            from bench_index import copy_subset

            copy_subset(CORPUS, corpus, 8)
        else:
            copy_tree(CORPUS, corpus)
        state = tmp / "state"
        eng = open_engine(corpus, state, embed=False)
        log("keyword pass over the corpus")
        eng.indexer.sync()
        eng.close()
        out["sizes"]["corpus"] = run_size(state / "index.sqlite", "corpus", args.runs)
        for size in sizes:
            d = tmp / f"s{size}"
            d.mkdir()
            log(f"building {size}")
            info = build_sqlite(state / "index.sqlite", d / "index.sqlite", size)
            out["sizes"][str(size)] = {**run_size(d / "index.sqlite", str(size), args.runs),
                                       "sqlite_build_s": info["sqlite_build_s"]}
            (d / "index.sqlite").unlink()
    emit(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
