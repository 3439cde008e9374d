#!/usr/bin/env python
"""Cost of turn-level vectors (``reme_engine.search.linevec``) at index time: a cold index of LoCoMo conversations
stored as daily cards (``locomo``) and as chat records (``locomo-chat``), built by ``bench/bench_quality.py``'s
builders (CC BY-NC data, evaluation only: the vaults stay in the bench cache, never in the repository), with the
line step off and on, interleaved, each in a fresh state dir (fresh embedding cache: everything is encoded).

Per variant: wall and CPU seconds (this process's; a big pass encodes in the embedder's child process, not
counted) of ``engine.index()`` (keyword + vector pass), the vector pass's own seconds,
chunks, line vectors, bytes of ``index.sqlite`` + ``embeddings.sqlite`` (+ WAL) and of the faiss file. Prints JSON.

Usage: ``python bench/bench_linevec.py [--conversations 2] [--rounds 2] [--sets locomo,locomo-chat]`` (4 cold
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--conversations", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sets", default="locomo,locomo-chat")
    args = ap.parse_args()
    import bench_quality as bq
    from _common import loaded_embedder

    emb, _ = loaded_embedder()
    out = {"machine": machine(), "loadavg_start": loadavg(), "sets": {}}
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
