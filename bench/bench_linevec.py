#!/usr/bin/env python
"""Cost of turn-level vectors (``reme_engine.search.linevec``) at index time: a cold index of LoCoMo conversations
stored as daily cards (``locomo``) and as chat records (``locomo-chat``), built by ``bench/bench_quality.py``'s
builders (CC BY-NC data, evaluation only: the vaults stay in the bench cache, never in the repository), with the
line step off and on, interleaved, each in a fresh state dir (fresh embedding cache: everything is encoded).

Per variant: wall and CPU seconds (this process's; a big pass encodes in the embedder's child process, not
counted) of ``engine.index()`` (keyword + vector pass), the vector pass's own seconds,
chunks, line vectors, bytes of ``index.sqlite`` + ``embeddings.sqlite`` (+ WAL) and of the faiss file. Prints JSON.

``--query-cost N``: instead, the query-time CPU of the stage with vs without turn vectors (:func:`query_cost`).
``--stage-cost REV [--queries N]``: instead, the second stage's CPU now vs at git revision REV, interleaved, and
whether the rankings differ (:func:`stage_cost`).

Usage: ``python bench/bench_linevec.py [--query-cost 60] [--conversations 2] [--rounds 2]
[--sets locomo,locomo-chat]`` (4 cold
indexes per conversation and round; minutes each on a loaded machine, where the niced encode child waits for a
core).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, loadavg, log, machine, open_engine, stats  # noqa: E402


def _bytes(state: Path) -> dict:
    out = {"sqlite": 0, "faiss": 0}
    for p in state.iterdir():
        if p.name.startswith(("index.sqlite", "embeddings.sqlite")):
            out["sqlite"] += p.stat().st_size
        elif p.suffix == ".faiss":
            out["faiss"] += p.stat().st_size
    return out


def one(vault: Path, emb, lines: bool) -> dict:
    import reme_engine.search.linevec as lv

    real = lv.wants_lines
    if not lines:
        lv.wants_lines = lambda *a, **k: False
    state = Path(tempfile.mkdtemp(prefix="reme-linevec-"))
    try:
        eng = open_engine(vault, state, emb)
        t, c = time.perf_counter(), time.process_time()
        rep = eng.index()
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        conn = eng.store.conn
        out = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
               "vector_pass_s": round(rep.seconds_vector, 2),
               "chunks": conn.execute("SELECT count(*) FROM chunks").fetchone()[0],
               "line_vectors": getattr(rep, "embedded_lines", 0)}
        eng.close()
        out.update(_bytes(state))
        return out
    finally:
        lv.wants_lines = real
        shutil.rmtree(state, ignore_errors=True)


def query_cost(emb, n: int) -> dict:
    """CPU ms of ``HybridSearcher.rank`` (fusion, field rules, second stage, hits) with the turn vectors on (the
    defaults) vs off, interleaved per query (legs fetched once), on one conversation of each LoCoMo set (the bench
    cache's index, its turn vectors built on open) and on knowledge-garden-zh (``known`` queries: no conversation
    files, so only a path check per candidate)."""
    from dataclasses import replace

    import bench_quality as bq

    out = {}
    for name, build in (("locomo", bq.build_locomo), ("locomo-chat", bq.build_locomo_chat),
                        ("kgzh", bq.build_known)):
        roots, queries = build(False)
        key = sorted(roots)[0]
        qs = [q for q in queries if q["vault"] == key][:n]
        state = roots[key] / "state"
        eng = open_engine(roots[key] / "vault", state, emb)
        eng.index()
        s = eng.searcher
        if not s.vectors.ready:
            s.vectors.open()
        s.wait_titles(600)
        on = s.fusion
        off = replace(on, rerank_lines=0.0, rerank_lines_chat=0.0)
        t_on, t_off = [], []
        for rnd in range(3):
            for i, q in enumerate(qs):
                text = q["text"].strip()
                run = s.run_legs(text, 50, mode="hybrid")
                for cfg, acc in ((on, t_on), (off, t_off)) if (i + rnd) % 2 else ((off, t_off), (on, t_on)):
                    c = time.process_time()
                    s.rank(text, run, limit=10, fusion=cfg)
                    if rnd:  # the first round fills the caches (chunk texts, line matrices)
                        acc.append((time.process_time() - c) * 1000)
        out[name] = {"conversation_or_vault": key, "queries": len(qs), "rank_cpu_ms_on": stats(t_on),
                     "rank_cpu_ms_off": stats(t_off)}
        eng.close()
    return out


def stage_cost(emb, rev: str, n: int) -> dict:
    """CPU ms of the second stage alone (``rerank_for``) as it is now vs as it was at git revision ``rev``
    (``search/rerank.py`` of that revision loaded beside the current one), interleaved per query on the same fused
    candidates (legs, fusion and field rules run once per query), on knowledge-garden-zh (``known`` queries + the
    bench queries) in keyword and hybrid mode, and on one LoCoMo conversation as cards. Also how many queries'
    top 10 differ between the two (with stemming off in the current one: the speed-ups must change nothing)."""
    import copy
    import importlib.util
    import subprocess
    from dataclasses import replace

    import bench_quality as bq
    from _common import REPO
    from queries import KGZH_QUERIES

    import reme_engine.search.rerank as cur
    from reme_engine.search.fields import adjust
    from reme_engine.search.fusion import fuse, rank_key

    src = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:reme_engine/search/rerank.py"], check=True,
                         capture_output=True, text=True).stdout
    tmp = Path(tempfile.mkdtemp()) / "rerank_base.py"
    tmp.write_text(src, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("reme_engine.search._rerank_base", tmp)
    base = importlib.util.module_from_spec(spec)
    base.__package__ = "reme_engine.search"
    spec.loader.exec_module(base)
    out = {"base_rev": rev}
    for name, build in (("kgzh", bq.build_known), ("locomo", bq.build_locomo)):
        roots, queries = build(False)
        key = sorted(roots)[0]
        qs = [q["text"] for q in queries if q["vault"] == key][:n]
        if name == "kgzh":
            qs = [q if isinstance(q, str) else q[0] for q in KGZH_QUERIES] + qs
        eng = open_engine(roots[key] / "vault", roots[key] / "state", emb)
        eng.index()
        s = eng.searcher
        if not s.vectors.ready:
            s.vectors.open()
        s.wait_titles(600)
        for mode in ("keyword", "hybrid"):
            t_new, t_base, differ, differ_stem = [], [], 0, 0
            for rnd in range(3):
                for i, q in enumerate(qs):
                    run = s.run_legs(q, 50, mode=mode)
                    cfg = s.fusion
                    eff = mode if run["legs"].get("vector") or mode == "keyword" else "keyword"
                    fused = fuse(run["legs"], cfg, idf_sum=run["idf_sum"], mode=eff)
                    rows = s._meta(list(fused))
                    fused = {c: d for c, d in fused.items() if c in rows}
                    adjust(fused, rows, q, cfg)
                    got = {}
                    pairs = [("new", cur.rerank_for, t_new), ("base", base.rerank_for, t_base)]
                    for label, fn, acc in (pairs if (i + rnd) % 2 else pairs[::-1]):
                        f = copy.deepcopy(fused)
                        c = time.process_time()
                        fn(s, f, q, cfg)
                        if rnd:  # the first round fills the caches (chunk texts, folded texts, line matrices)
                            acc.append((time.process_time() - c) * 1000)
                        got[label] = sorted(f, key=lambda k: rank_key(k, f[k]))[:10]
                    if rnd == 0:
                        differ_stem += got["new"] != got["base"]
                        cur.STEM = False
                        f = copy.deepcopy(fused)
                        cur.rerank_for(s, f, q, cfg)
                        cur.STEM = True
                        differ += sorted(f, key=lambda k: rank_key(k, f[k]))[:10] != got["base"]
            out[f"{name}/{mode}"] = {"queries": len(qs), "stage_cpu_ms_now": stats(t_new),
                                     "stage_cpu_ms_base": stats(t_base),
                                     "top10_differ_stemming_off": differ, "top10_differ_now": differ_stem}
            log(f"{name}/{mode}: {out[f'{name}/{mode}']}")
        eng.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--conversations", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sets", default="locomo,locomo-chat")
    ap.add_argument("--query-cost", type=int, default=0, metavar="N",
                    help="only the query-time cost: N queries per set, rank() CPU with turn vectors on vs off")
    ap.add_argument("--stage-cost", metavar="REV", help="only the second stage's CPU now vs at git revision REV")
    ap.add_argument("--queries", type=int, default=60, help="queries per vault for --stage-cost")
    args = ap.parse_args()
    import bench_quality as bq
    from _common import loaded_embedder

    emb, _ = loaded_embedder()
    out = {"machine": machine(), "loadavg_start": loadavg(), "sets": {}}
    if args.stage_cost:
        out["stage_cost"] = stage_cost(emb, args.stage_cost, args.queries)
        out["loadavg_end"] = loadavg()
        emit(out)
        return
    if args.query_cost:
        out["query_cost"] = query_cost(emb, args.query_cost)
        out["loadavg_end"] = loadavg()
        emit(out)
        return
    for name, build in (("locomo", bq.build_locomo), ("locomo-chat", bq.build_locomo_chat)):
        if name not in args.sets.split(","):
            continue
        roots, _ = build(False)
        keys = sorted(roots)[:args.conversations]
        runs: dict[str, list[dict]] = {"off": [], "on": []}
        for rnd in range(args.rounds):
            for variant in (("off", "on") if rnd % 2 == 0 else ("on", "off")):
                for k in keys:
                    r = one(roots[k] / "vault", emb, variant == "on")
                    r["conversation"] = k
                    runs[variant].append(r)
                    log(f"{name} {k} {variant}: {r}")
        summ = {}
        for v, rows in runs.items():
            summ[v] = {f: stats([r[f] for r in rows]) for f in ("wall_s", "cpu_s", "vector_pass_s")}
            first = [r for r in rows if r["conversation"] in keys][:len(keys)]
            summ[v].update({f: sum(r[f] for r in first) for f in ("chunks", "line_vectors", "sqlite", "faiss")})
        out["sets"][name] = {"conversations": keys, "summary": summ, "runs": runs}
    out["loadavg_end"] = loadavg()
    emit(out)


if __name__ == "__main__":
    main()
