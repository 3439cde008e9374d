#!/usr/bin/env python
"""Keyword index size and warm keyword search speed (issue 12), on temp copies of real vaults.

    python bench/bench_keyword.py [--vaults kgzh,doocs] [--runs 5] [--keep]

For each vault (``kgzh`` = vaults/knowledge-garden-zh, ``doocs`` = corpus/doocs-leetcode-md), in this process,
without an embedder (keyword + graph pass only):

- ``build_s``: cold keyword+graph index wall/CPU seconds (``Engine.index``);
- ``size``: the index database on disk (MB, after a checkpoint) and its bytes by table via ``dbstat`` (the FTS5
  shadow tables ``chunks_fts_data`` = postings, ``chunks_fts_content`` = FTS5's own copy of the text, if any);
- ``warm``: wall ms p50/p95 of ``engine.search(q, limit=10, mode="keyword")`` with and without the neighbour
  directory (the result builds it when first read, so ``search`` is what a caller showing hits pays), of the
  same plus the TUI search screen's one-line snippet of each of the 10 hits (``search + the TUI's 10 snippets``), of the
  same plus ``json.dumps(result.to_dict())`` (``search, JSON with neighbours``: what ``job search`` prints, the
  directory built), and of the keyword leg alone (``HybridSearcher.keyword_leg(q, 50)``); queries: the vault's zh/en
  queries from ``bench/queries.py`` plus 30 note titles (crc32 order); one warm-up pass, then ``--runs`` passes;
- ``keyword leg through FTS5`` (and ``search, keyword leg through FTS5``): the same with the in-memory scorer off (``MATCH`` + ``bm25()``), interleaved,
  and ``memory_scorer_same_scores_as_fts5``: queries whose 50 scores are identical rank by rank;
- ``after_a_save``: a note edited and re-indexed (``index_paths``, the watcher's path), then the next search
  (the scorer re-reads its row tables), and whether the new word is found;
- ``rss_mb``: resident set after the warm passes (``VmRSS``) and peak (``VmHWM``).

ReMe 0.4.1.8's figures on this host (issue 12, quiet): 7.6 / 20.0 MB on disk, warm keyword p50 0.90 / 1.09 ms.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (CORPUS, SHARED_DATA, bench_tmpdir, copy_tree, emit, loadavg, log, machine, open_engine,  # noqa: E402
                     stats, vmhwm_mb)
from queries import CORPUS_QUERIES, KGZH_QUERIES  # noqa: E402

VAULTS = {"kgzh": (SHARED_DATA / "vaults" / "knowledge-garden-zh", KGZH_QUERIES),
          "doocs": (CORPUS, CORPUS_QUERIES)}
REME = {"kgzh": {"disk_mb": 7.6, "p50_ms": 0.90}, "doocs": {"disk_mb": 20.0, "p50_ms": 1.09}}


def rss_mb() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def table_sizes(conn) -> dict[str, float]:
    """``{table: MB}`` of the main database (indexes counted with their table), via the dbstat virtual table."""
    rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat WHERE aggregate = FALSE GROUP BY name").fetchall()
    owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master"))
    out: dict[str, float] = {}
    for name, size in rows:
        t = owner.get(name, name)
        out[t] = out.get(t, 0.0) + size / 1e6
    return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1]) if v >= 0.005}


def one(label: str, tmp: Path, runs: int) -> dict:
    src, base_queries = VAULTS[label]
    vault = copy_tree(src, tmp / label)
    state = tmp / f"{label}-state"
    eng = open_engine(vault, state, embed=False)
    c0, t0 = time.process_time(), time.perf_counter()
    rep = eng.index()
    build = {"wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(time.process_time() - c0, 2)}
    conn = eng.store.conn
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db = eng.store.db_path
    size = {"disk_mb": round(db.stat().st_size / 1e6, 2), "tables_mb": table_sizes(conn)}
    counts = eng.store.counts()
    stems = sorted(p.stem for p in vault.rglob("*.md") if not any(x.startswith(".") for x in p.parts))
    stems.sort(key=lambda x: zlib.crc32(x.encode()))
    qs = list(base_queries) + stems[:30]
    from reme_tui.render import snippet

    s = eng.searcher
    for q in qs:  # warm-up: caches, the tokenizer's dictionary, SQLite pages
        eng.search(q, limit=10, mode="keyword")
    warm: dict[str, dict] = {}
    samples: dict[str, list[float]] = {"search": [], "search (no neighbours)": [], "search, JSON with neighbours": [],
                                       "keyword leg": [], "search + the TUI's 10 snippets": [],
                                       "keyword leg through FTS5": [], "search, keyword leg through FTS5": []}
    parity = 0
    for q in qs:  # the in-memory scorer against FTS5's bm25(): the same scores, rank by rank
        s.memory_bm25 = False
        a = s.keyword_leg(q, 50, None)
        s.memory_bm25 = True
        b = s.keyword_leg(q, 50, None)
        parity += [round(x[1], 9) for x in a] == [round(x[1], 9) for x in b]
    for _ in range(runs):  # interleaved, so load changes hit every figure alike
        for q in qs:
            t = time.perf_counter()
            eng.search(q, limit=10, mode="keyword")
            samples["search"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            eng.search(q, limit=10, mode="keyword", neighbors=False)
            samples["search (no neighbours)"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            json.dumps(eng.search(q, limit=10, mode="keyword").to_dict(), ensure_ascii=False)
            samples["search, JSON with neighbours"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            s.keyword_leg(q, 50, None)
            samples["keyword leg"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            for h in eng.search(q, limit=10, mode="keyword").hits:  # the search screen's row text (100 cells)
                snippet(h.text, 98, q)
            samples["search + the TUI's 10 snippets"].append((time.perf_counter() - t) * 1000)
            s.memory_bm25 = False
            t = time.perf_counter()
            s.keyword_leg(q, 50, None)
            samples["keyword leg through FTS5"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            eng.search(q, limit=10, mode="keyword")
            samples["search, keyword leg through FTS5"].append((time.perf_counter() - t) * 1000)
            s.memory_bm25 = True
    # a note saved: the next query re-reads the row tables and its terms' postings
    note = sorted(vault.rglob("*.md"))[7]
    note.write_text(note.read_text(encoding="utf-8") + "\n\nzyzzyva 新词\n", encoding="utf-8")
    t = time.perf_counter()
    eng.index_paths([note.relative_to(vault).as_posix()], vectors=False)
    t_save = (time.perf_counter() - t) * 1000
    after = []
    for q in qs[:10]:
        note.write_text(note.read_text(encoding="utf-8") + "x\n", encoding="utf-8")
        eng.index_paths([note.relative_to(vault).as_posix()], vectors=False)
        t = time.perf_counter()
        eng.search(q, limit=10, mode="keyword")
        after.append((time.perf_counter() - t) * 1000)
    found = any(h.path == note.relative_to(vault).as_posix() for h in eng.search("zyzzyva", mode="keyword").hits)
    parity_after = 0
    for q in qs:  # after the saves (rows applied in place): still FTS5's scores
        s.memory_bm25 = False
        a = s.keyword_leg(q, 50, None)
        s.memory_bm25 = True
        b = s.keyword_leg(q, 50, None)
        parity_after += [round(x[1], 9) for x in a] == [round(x[1], 9) for x in b]
    mem = s._memory()
    for k, v in samples.items():
        warm[k] = stats(v)
    out = {"files": counts["files"], "chunks": counts["chunks"], "build": build, "size": size,
           "queries": len(qs), "runs": runs, "warm_ms": warm,
           "memory_scorer_same_scores_as_fts5": f"{parity}/{len(qs)}",
           "after_a_save": {"index_paths_ms": round(t_save, 1), "next_search_ms": stats(after),
                            "new_word_found": found, "same_scores_as_fts5": f"{parity_after}/{len(qs)}",
                            "scorer_full_reads": mem.loads, "scorer_in_place_updates": mem.updates}, "rss_mb": rss_mb(), "peak_rss_mb": vmhwm_mb(),
           "reme_0_4_1_8 (issue 12)": REME[label],
           "ratio_disk_vs_reme": round(size["disk_mb"] / REME[label]["disk_mb"], 2),
           "ratio_p50_vs_reme": round(warm["search"]["p50"] / REME[label]["p50_ms"], 2)}
    eng.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vaults", default="kgzh,doocs")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    out: dict = {"machine": machine(), "loadavg_start": loadavg()}
    with bench_tmpdir("keyword", args.keep) as tmp:
        for label in args.vaults.split(","):
            log(f"{label}: indexing")
            out[label] = one(label, tmp, args.runs)
    out["loadavg_end"] = loadavg()
    emit(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
