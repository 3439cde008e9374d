#!/usr/bin/env python
"""Start-up cost of a one-shot ``reme-tui job``: what the façade's modules cost a keyword-only job.

    python bench/bench_job_startup.py [--runs 15] [--other-checkout DIR]

Times, on an indexed temp copy of the bundled demo vault (embedder none, so no model or faiss is ever loaded):
``job search query=memory mode=keyword`` as fresh processes (wall and CPU seconds of each child, from
``os.wait4``), and ``python -X importtime -c "import reme_engine.jobs"`` (cumulative µs of ``reme_engine.jobs``).
With ``--other-checkout DIR`` the same figures for another checkout of the repository (e.g. a ``git worktree``
of an older commit), run alternately with this one, and the per-pair CPU ratio this/other.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, bench_tmpdir, emit, loadavg, log, machine, stats  # noqa: E402


def _child(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall s, user+sys CPU s) of one child process."""
    import time

    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return wall, ru.ru_utime + ru.ru_stime


def _import_us(env: dict) -> int:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import reme_engine.jobs"], env=env,
                         capture_output=True, text=True, check=True).stderr
    return int(re.search(r"\|\s*(\d+) \| reme_engine\.jobs$", out, re.M).group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--other-checkout", type=Path, help="a second checkout to compare with (PYTHONPATH)")
    args = ap.parse_args()
    out: dict = {"bench": "job_startup", "machine": machine(), "loadavg_start": loadavg(), "runs": args.runs}
    with bench_tmpdir("startup") as tmp:
        vault = tmp / "vault"
        shutil.copytree(REPO / "reme_engine" / "demo" / "vault", vault)
        sides = {"this": str(REPO)}
        if args.other_checkout:
            sides["other"] = str(args.other_checkout.resolve())
        envs, cmds = {}, {}
        for side, root in sides.items():
            envs[side] = {**os.environ, "PYTHONPATH": root}
            base = [sys.executable, "-m", "reme_tui.cli", "job"]
            flags = ["--vault", str(vault), "--state-dir", str(tmp / f"state-{side}"), "--embedder", "none"]
            subprocess.run(base + ["reindex", "vectors=false"] + flags, env=envs[side], check=True,
                           stdout=subprocess.DEVNULL)
            cmds[side] = base + ["search", "query=memory", "mode=keyword"] + flags
            _child(cmds[side], envs[side])  # warm-up
        samples: dict = {s: {"wall": [], "cpu": [], "import_us": []} for s in sides}
        ratios = []
        for i in range(args.runs):
            for side in sides:  # alternate, so drift of a shared machine hits both
                wall, cpu = _child(cmds[side], envs[side])
                samples[side]["wall"].append(wall)
                samples[side]["cpu"].append(cpu)
                samples[side]["import_us"].append(_import_us(envs[side]))
            if "other" in sides:
                ratios.append(samples["this"]["cpu"][-1] / samples["other"]["cpu"][-1])
            log(f"run {i + 1}/{args.runs}")
        for side in sides:
            out[side] = {"checkout": sides[side], "keyword_job_wall_s": stats(samples[side]["wall"]),
                         "keyword_job_cpu_s": stats(samples[side]["cpu"]),
                         "import_jobs_ms": stats([u / 1000 for u in samples[side]["import_us"]], 1)}
        if ratios:
            out["cpu_ratio_this_over_other"] = stats(ratios)
    emit(out)


if __name__ == "__main__":
    main()
