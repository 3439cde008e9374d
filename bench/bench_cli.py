#!/usr/bin/env python
"""One-shot CLI latency: ``reme-tui job search`` as a user runs it, on an already-indexed knowledge-garden-zh copy.

    python bench/bench_cli.py [--runs 5] [--quick] [--no-cache] [--no-served] [--no-embedding]

Each sample is a fresh ``reme-tui job search query=… [mode=keyword]`` process (wall time of the subprocess,
interpreter start-up included, and its CPU time); one discarded warm-up run per case first. Cases:

- ``keyword`` / ``hybrid``: no server runs, the job opens the index (and for hybrid loads the model) itself;
  ``--no-server`` is passed so a server of the user's cannot answer. Targets: keyword ≤ 0.5 s, hybrid ≤ 1.2 s.
- ``hybrid_served``: a ``reme-tui --serve`` runs on the same vault and state dir (vectors complete) and answers
  over its local socket. Target ≤ 0.3 s. Also the server's CPU per request (``/proc/<pid>/stat``).
- ``hybrid_served_embedding`` (and ``hybrid_embedding_no_server`` for comparison): a second copy of the vault with
  a fresh state dir; ``--serve`` starts, finishes its keyword pass and the samples run while its first vector pass
  runs (each sample says whether the pass was still running when it ended). Target ≤ 1 s (issue 12).

With ``--other-checkout DIR`` (e.g. ``git worktree add <tmp>/base <rev>``) the one-shot cases also run side by side,
interleaved run by run, as ``python -m reme_tui.cli`` with ``PYTHONPATH`` set to this checkout and to ``DIR``
(``side_by_side``: medians, per-pair ratios this/other). This checkout's hybrid case runs twice: with the model's
fast-load cache (made by the discarded warm-up, in the bench's own ``XDG_CACHE_HOME``) and without it
(``REME_MODEL_CACHE=off``: the package's stock load).

Also the 10 largest cumulative imports of each job (``PYTHONPROFILEIMPORTTIME``, i.e. ``python -X importtime``) and
the bare interpreter start-up for reference. ``--runs`` defaults to 5 here.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

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


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd: list[str], env: dict, cwd: str | None = None) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    return time.perf_counter() - t, p


def run_cpu(cmd: list[str], env: dict, cwd: str | None = None) -> tuple[float, float, subprocess.CompletedProcess]:
    """``(wall s, CPU s of the child, process)`` of one run (CPU from the waited child's rusage)."""
    c0 = _children_cpu()
    dt, p = run(cmd, env, cwd)
    return dt, _children_cpu() - c0, p


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a running process (all its threads) from ``/proc/<pid>/stat``."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Serve:
    """``reme-tui --serve`` as a user runs it; its stderr lines gathered on a thread for :meth:`wait_for`."""

    def __init__(self, reme: list[str], env: dict) -> None:
        self.proc = subprocess.Popen([*reme, "--serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.lines: list[str] = []
        self.cond = threading.Condition()
        self.t0 = time.perf_counter()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stderr:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.lines.append("<exit>")
            self.cond.notify_all()

    def seen(self, needle: str) -> bool:
        with self.cond:
            return any(needle in ln for ln in self.lines)

    def wait_for(self, needle: str, timeout: float = 3600) -> float:
        """Seconds since start when a line containing ``needle`` appeared; SystemExit when the server ended."""
        with self.cond:
            self.cond.wait_for(lambda: any(needle in ln or ln == "<exit>" for ln in self.lines), timeout)
            if not any(needle in ln for ln in self.lines):
                raise SystemExit("--serve never logged %r: %s" % (needle, "\n".join(self.lines[-20:])))
        return time.perf_counter() - self.t0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def sample(name: str, cmd: list[str], env: dict, runs: int, *, server: "Serve | None" = None,
           still: Callable[[], bool] | None = None) -> dict:
    """``runs`` timed runs of ``cmd`` after one discarded warm-up: wall and CPU stats, the server's CPU per request
    when ``server``, and per sample whether ``still()`` (e.g. the vector pass runs) held when it ended."""
    warm, _c, p = run_cpu(cmd, env)
    if p.returncode != 0:
        raise SystemExit(f"{cmd} failed: {p.stdout[-2000:]} {p.stderr[-2000:]}")
    walls, cpus, server_cpus, during = [], [], [], []
    res: dict = {}
    for i in range(runs):
        log(f"{name} {i + 1}/{runs}")
        s0 = proc_cpu(server.proc.pid) if server else 0.0
        dt, cpu, p = run_cpu(cmd, env)
        if server:
            server_cpus.append(proc_cpu(server.proc.pid) - s0)
        assert p.returncode == 0, p.stderr[-2000:]
        res = json.loads(p.stdout)
        walls.append(dt)
        cpus.append(cpu)
        if still is not None:
            during.append(still())
    out = {"argv": ["reme-tui", *cmd[cmd.index("job"):]], "wall_s": stats(walls),
           "samples_s": [round(x, 3) for x in walls], "cpu_s": stats(cpus), "warmup_s": round(warm, 3),
           "hits": len(res.get("hits", [])), "engine_took_ms": res.get("took_ms"), "keyword_ms": res.get("keyword_ms"),
           "vector_ms": res.get("vector_ms"), "degraded": res.get("degraded"),
           "hits_with_vector_rank": sum(1 for h in res.get("hits", []) if h.get("vector_rank")),
           "loadavg": loadavg()}
    if server:
        out["server_cpu_s"] = stats(server_cpus)
    if still is not None:
        out["samples_while_embedding"] = sum(during)
    return out


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


def side_by_side(cases: dict, env: dict, other: Path, runs: int) -> dict:
    """The one-shot ``cases`` for this checkout and ``other``, interleaved run by run (``python -m reme_tui.cli``
    with ``PYTHONPATH`` on each): wall/CPU stats and per-pair ratios this/other. This checkout's hybrid case also
    runs with the model cache off (``hybrid_stock_load``)."""
    import tempfile

    from _common import REPO

    # cwd outside both checkouts: `python -m` puts the working directory before PYTHONPATH on sys.path
    cwd = tempfile.gettempdir()
    sides = {"this": str(REPO), "other": str(other)}
    runs_of: list[tuple[str, str, list[str], dict]] = []
    for name, extra in cases.items():
        for side, root in sides.items():
            runs_of.append((name, side, extra, dict(env, PYTHONPATH=root)))
        if name == "hybrid":
            runs_of.append(("hybrid_stock_load", "this", extra, dict(env, PYTHONPATH=sides["this"],
                                                                     REME_MODEL_CACHE="off")))
    cmd_of = lambda extra: [sys.executable, "-m", "reme_tui.cli", "job", "search", *extra, "--no-server"]  # noqa: E731
    for side, root in sides.items():  # check that each side imports its own checkout's code
        code = "import reme_engine, os; print(os.path.dirname(os.path.dirname(reme_engine.__file__)))"
        _d, p = run([sys.executable, "-c", code], dict(env, PYTHONPATH=root), cwd)
        assert os.path.samefile(p.stdout.strip(), root), (side, p.stdout, p.stderr)
    for name, side, extra, e in runs_of:  # warm-ups (this side's first hybrid run writes the model cache)
        _w, _c, p = run_cpu(cmd_of(extra), e, cwd)
        if p.returncode != 0:
            raise SystemExit(f"{side} {name} failed: {p.stderr[-2000:]}")
    got: dict = {}
    for i in range(runs):
        log(f"side by side {i + 1}/{runs}")
        for name, side, extra, e in runs_of:
            dt, cpu, p = run_cpu(cmd_of(extra), e, cwd)
            assert p.returncode == 0, p.stderr[-2000:]
            res = json.loads(p.stdout)
            g = got.setdefault(f"{name}/{side}", {"wall": [], "cpu": [], "hits": [], "load": [], "took_ms": [],
                                                  "vector_ms": []})
            g["took_ms"].append(res.get("took_ms") or 0.0)
            g["vector_ms"].append(res.get("vector_ms") or 0.0)
            g["wall"].append(dt)
            g["cpu"].append(cpu)
            g["hits"].append([h["path"] for h in res.get("hits", [])])
            g["load"].append(loadavg()[0])
    out: dict = {"other_checkout": "<other worktree>", "loadavg_during": None}
    loads = []
    for key, g in got.items():
        out[key] = {"wall_s": stats(g["wall"]), "cpu_s": stats(g["cpu"]), "samples_s": [round(x, 3) for x in g["wall"]],
                    "engine_took_ms": stats(g["took_ms"], 1), "vector_ms": stats(g["vector_ms"], 1)}
        loads += g["load"]
    for name in cases:
        a, b = got.get(f"{name}/this"), got.get(f"{name}/other")
        if a and b:
            out[f"{name}_ratio_this_over_other"] = {
                "wall": stats([x / y for x, y in zip(a["wall"], b["wall"])]),
                "cpu": stats([x / y for x, y in zip(a["cpu"], b["cpu"])]),
                "same_hits": all(x == y for x, y in zip(a["hits"], b["hits"]))}
    out["loadavg_during"] = stats(loads)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="1/8 of the vault")
    ap.add_argument("--query", default=VAULT_QUERY)
    ap.add_argument("--no-cache", action="store_true", help="do not reuse/keep the vault's embedding cache")
    ap.add_argument("--profile", action="store_true", help="also cProfile one hybrid job (top entries in JSON)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--no-served", action="store_true", help="skip the case with a running --serve")
    ap.add_argument("--no-embedding", action="store_true", help="skip the cases during a first vector pass")
    ap.add_argument("--other-checkout", type=Path, help="another checkout to compare the one-shot cases with")
    ap.add_argument("--only-side-by-side", action="store_true", help="with --other-checkout: nothing else")
    ap.add_argument("--cases", default="keyword,hybrid", help="side-by-side cases (default keyword,hybrid)")
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
        if args.other_checkout:
            chosen = {k: v for k, v in cases.items() if k in args.cases.split(",")}
            out["side_by_side"] = side_by_side(chosen, env, args.other_checkout.resolve(), args.runs)
            if args.only_side_by_side:
                emit(out)
                return 0
        for name, extra in cases.items():
            cmd = [*reme, "job", "search", *extra, "--no-server"]
            out[name] = sample(name, cmd, env, args.runs)
            ienv = dict(env, PYTHONPROFILEIMPORTTIME="1")
            _, pi = run(cmd, ienv)
            out[name].update(target(out[name]["wall_s"]["median"], 0.5 if name == "keyword" else 1.2))
            out[name]["importtime"] = import_top(pi.stderr)
            if args.profile and reme[0].endswith("reme-tui"):
                import io
                import pstats

                prof = tmp / f"{name}.prof"
                _, pp = run([sys.executable, "-m", "cProfile", "-o", str(prof), reme[0], "job", "search", *extra], env)
                buf = io.StringIO()
                pstats.Stats(str(prof), stream=buf).sort_stats("cumulative").print_stats(25)
                out[name]["cprofile_top"] = [ln for ln in buf.getvalue().splitlines() if ln.strip()][:40]
        cmd = [*reme, "job", "search", f"query={args.query}"]
        if not args.no_served:
            serve = Serve(reme, env)
            try:
                ready = serve.wait_for("vectors up to date")
                out["hybrid_served"] = sample("hybrid_served", cmd, env, args.runs, server=serve)
                out["hybrid_served"]["server_ready_s"] = round(ready, 3)
                out["hybrid_served"].update(target(out["hybrid_served"]["wall_s"]["median"], 0.3))
                _, pi = run(cmd, dict(env, PYTHONPROFILEIMPORTTIME="1"))
                mods = [ln.rsplit("|", 1)[-1].strip() for ln in pi.stderr.splitlines() if ln.startswith("import time:")]
                out["hybrid_served"]["importtime"] = import_top(pi.stderr)
                out["hybrid_served"]["client_imported_engine_or_numpy"] = sorted(
                    m for m in mods if m in ("numpy", "reme_engine.engine", "reme_engine.jobs", "faiss"))
            finally:
                serve.stop()
        if not args.no_embedding:
            # a fresh state dir: --serve runs the first keyword pass, then its first vector pass over every chunk
            env2 = dict(env, REME_STATE_DIR=str(tmp / "state-fresh"))
            serve = Serve(reme, env2)
            try:
                indexed = serve.wait_for("files indexed")
                running = lambda: not serve.seen("vectors up to date")  # noqa: E731
                for name, c in (("hybrid_served_embedding", cmd), ("hybrid_embedding_no_server", [*cmd, "--no-server"])):
                    out[name] = sample(name, c, env2, args.runs, server=serve, still=running)
                    out[name].update(target(out[name]["wall_s"]["median"], 1.0))
                out["hybrid_served_embedding"]["keyword_pass_done_s"] = round(indexed, 3)
                out["hybrid_served_embedding"]["vector_pass_still_running_at_end"] = running()
            finally:
                serve.stop()
    emit(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
