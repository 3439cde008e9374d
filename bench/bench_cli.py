#!/usr/bin/env python
"""One-shot CLI latency: ``reme-tui job search`` as a user runs it, on an already-indexed knowledge-garden-zh copy.

    python bench/bench_cli.py [--runs 5] [--quick] [--no-cache]

Each sample is a fresh ``reme-tui job search query=… [mode=keyword]`` process (wall time of the subprocess,
interpreter start-up included); one discarded warm-up run per mode first. Targets: keyword ≤ 0.5 s, default
hybrid ≤ 1.6 s. Also the 10 largest cumulative imports of each job (``PYTHONPROFILEIMPORTTIME``, i.e.
``python -X importtime``) and the bare interpreter start-up for reference. ``--runs`` defaults to 5 here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (VAULT_ZH, bench_tmpdir, copy_tree, emit, index_with_cache, loadavg, loaded_embedder,  # noqa: E402
                     log, machine, stats, target)
from queries import VAULT_QUERY  # noqa: E402


def reme_command() -> list[str]:
    exe = Path(sys.executable).with_name("reme-tui")
    if exe.is_file():
        return [str(exe)]
    found = shutil.which("reme-tui")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from reme_tui.cli import main; sys.exit(main())"]


def run(cmd: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return time.perf_counter() - t, p


def import_top(stderr: str, n: int = 10) -> dict:
    """Parse ``-X importtime`` output: the ``n`` largest cumulative imports (any depth) and top-level ones."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        parts = line[len("import time:"):].split("|", 2)
        if len(parts) != 3:
            continue
        try:
            rows.append((int(parts[1]), int(parts[0]), parts[2][1:].rstrip()))  # (cumulative, self, name)
        except ValueError:
            continue
    fmt = lambda r: {"module": r[2].strip(), "cumulative_ms": round(r[0] / 1000, 1),  # noqa: E731
                     "self_ms": round(r[1] / 1000, 1), "depth": (len(r[2]) - len(r[2].lstrip())) // 2}
    top_any = sorted(rows, key=lambda r: -r[0])[:n]
    top_level = sorted((r for r in rows if not r[2].startswith("  ")), key=lambda r: -r[0])[:n]
    return {"largest_cumulative": [fmt(r) for r in top_any], "largest_top_level": [fmt(r) for r in top_level],
            "total_import_ms": round(sum(r[1] for r in rows) / 1000, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="1/8 of the vault")
    ap.add_argument("--query", default=VAULT_QUERY)
    ap.add_argument("--no-cache", action="store_true", help="do not reuse/keep the vault's embedding cache")
    ap.add_argument("--profile", action="store_true", help="also cProfile one hybrid job (top entries in JSON)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    out: dict = {"bench": "cli", "quick": args.quick, "runs": args.runs, "machine": machine(), "query": args.query}
    with bench_tmpdir("cli", keep=args.keep) as tmp:
        vault = tmp / "vault"
        if args.quick:
            from bench_index import copy_subset

            copy_subset(VAULT_ZH, vault, 8)
        else:
            copy_tree(VAULT_ZH, vault)
        emb, _ = loaded_embedder()
        state, info = index_with_cache(vault, tmp / "state", emb, not args.no_cache, "cli-vault")
        out["index"] = info
        env = os.environ.copy()
        env.update({"REME_VAULT": str(vault), "REME_STATE_DIR": str(state)})
        for k in ("PYTHONPROFILEIMPORTTIME", "REME_EMBEDDER", "REME_CONFIG"):
            env.pop(k, None)
        reme = reme_command()
        out["command"] = reme
        base = []
        for _ in range(args.runs):
            dt, _p = run([sys.executable, "-c", "pass"], env)
            base.append(dt)
        out["python_startup_s"] = stats(base)
        cases = {"keyword": [f"query={args.query}", "mode=keyword"], "hybrid": [f"query={args.query}"]}
        for name, extra in cases.items():
            cmd = [*reme, "job", "search", *extra]
            warm, p = run(cmd, env)
            if p.returncode != 0:
                raise SystemExit(f"{cmd} failed: {p.stdout[-2000:]} {p.stderr[-2000:]}")
            res = json.loads(p.stdout)
            samples = []
            for i in range(args.runs):
                log(f"{name} {i + 1}/{args.runs}")
                dt, p = run(cmd, env)
                assert p.returncode == 0, p.stderr[-2000:]
                samples.append(dt)
            ienv = dict(env, PYTHONPROFILEIMPORTTIME="1")
            _, pi = run(cmd, ienv)
            limit = 0.5 if name == "keyword" else 1.6
            med = round(stats(samples)["median"], 3)
            out[name] = {
                "argv": ["reme-tui", "job", "search", *extra], "wall_s": stats(samples), "samples_s": [round(x, 3) for x in samples],
                **target(med, limit), "warmup_s": round(warm, 3), "hits": len(res.get("hits", [])),
                "engine_took_ms": res.get("took_ms"), "keyword_ms": res.get("keyword_ms"),
                "vector_ms": res.get("vector_ms"), "degraded": res.get("degraded"),
                "hits_with_vector_rank": sum(1 for h in res.get("hits", []) if h.get("vector_rank")),
                "importtime": import_top(pi.stderr), "loadavg": loadavg(),
            }
            if args.profile and reme[0].endswith("reme-tui"):
                import io
                import pstats

                prof = tmp / f"{name}.prof"
                _, pp = run([sys.executable, "-m", "cProfile", "-o", str(prof), reme[0], "job", "search", *extra], env)
                buf = io.StringIO()
                pstats.Stats(str(prof), stream=buf).sort_stats("cumulative").print_stats(25)
                out[name]["cprofile_top"] = [ln for ln in buf.getvalue().splitlines() if ln.strip()][:40]
    emit(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
