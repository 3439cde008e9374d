"""Watcher and app-idle figures (ARCHITECTURE §7): edit-to-searchable latency, bursts vs the UI thread, idle CPU.

Three parts, each on copies of knowledge-garden-zh (never the shared data itself):

``latency``  A note is written the way editors do it and ``engine.search(token, mode="keyword")`` is polled every
             5 ms from the main thread until it finds the note's unique token; latency = from the moment the file
             is in place to the first hit. Operations: ``create`` (new note in today's folder, temp file + rename),
             ``modify`` (an existing note rewritten by temp file + rename), ``inplace`` (an existing note rewritten
             in place). Vaults of 30 / 300 / 3,176 notes (the first N files of the vault) and 31,760 (the vault
             ten times); keyword + graph only (``embedder: none``): that is the whole path between a save and a
             search hit, the vectors follow on the engine's embed thread. Target: p95 ≤ 1 s.

``burst``    The real app (``ReMeApp`` in ``App.run_test()``, watcher and embed thread on, offline embedder with
             the vault's vectors restored from the bench cache) while a child process writes 20 / 200 / 2,000 new
             notes into today's daily folder (the Daily pane then lists every one of them). A task on the app's
             event loop sleeps 5 ms in a loop and records how late it wakes: that lateness is how long the UI
             thread could not process input or paint. Reported per burst: loop lag p50 / p99 / max, wakes later
             than 100 ms, and the times until every note is keyword-searchable and until every chunk has a
             vector. Target: no stall (no lag over 100 ms; max lag is the quoted figure).

``idle``     The real binary (``reme-tui --vault …``) in a tmux pane at 160×48 with its index and vectors in place;
             after it settles, CPU seconds (utime + stime from /proc) over ``--idle-seconds``. Target: < 1 %.

Prints one JSON object; ``--parts`` selects parts, ``--quick`` runs the small sizes only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (VAULT_ZH, bench_tmpdir, copy_tree, emit, index_with_cache, loaded_embedder, log,  # noqa: E402
                     machine, open_engine, stats, target)

POLL_S = 0.005


# -- vaults ------------------------------------------------------------------------------------------------------
def _md_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.md") if not any(part.startswith(".") for part in p.relative_to(root).parts))


def make_vault(dst: Path, n: int) -> tuple[Path, int]:
    """A vault of about ``n`` notes from knowledge-garden-zh: its first ``n`` files, or whole copies side by side."""
    files = _md_files(VAULT_ZH)
    if n <= len(files):
        for p in files[:n]:
            q = dst / p.relative_to(VAULT_ZH)
            q.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, q)
        return dst, n
    reps = -(-n // len(files))
    copy_tree(VAULT_ZH, dst)
    for k in range(1, reps):
        shutil.copytree(VAULT_ZH, dst / f"copy-{k}", symlinks=True,
                        ignore=shutil.ignore_patterns(".*"))
    return dst, len(files) * reps


def atomic_save(path: Path, text: str) -> None:
    """What editors do: write a temp file beside the note, then rename it over the note."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# -- part 1: edit to searchable -------------------------------------------------------------------------------
def wait_hit(eng, token: str, timeout: float = 10.0) -> float | None:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if eng.search(token, mode="keyword", limit=1).hits:
            return time.perf_counter() - t0
        time.sleep(POLL_S)
    return None


def latency_part(tmp: Path, sizes: list[int], trials: int) -> list[dict]:
    out = []
    for n in sizes:
        vault, real_n = make_vault(tmp / f"lat-{n}", n)
        (vault / "daily").mkdir(exist_ok=True)  # daily/ is the daily folder (not one found in the copy)
        eng = open_engine(vault, tmp / f"lat-{n}-state", embed=False)
        t = time.perf_counter()
        eng.index()
        index_s = time.perf_counter() - t
        eng.start_background(schedule=False)
        today = date.today().isoformat()
        day = vault / "daily" / today
        day.mkdir(parents=True, exist_ok=True)
        existing = [p for p in _md_files(vault) if "/daily/" not in p.as_posix()][:trials]
        time.sleep(1.0)  # the watch is in place and the day folder's own event has flushed
        res: dict[str, list[float]] = {"create": [], "modify": [], "inplace": []}
        misses = {k: 0 for k in res}
        for i in range(trials):
            for op in res:
                token = f"zq{op}{n}x{i}w"
                if op == "create":
                    atomic_save(day / f"bench-{i:03d}.md", f"# Bench {i}\n\nA new card about {token}.\n")
                else:
                    p = existing[i % len(existing)]
                    text = p.read_text(encoding="utf-8") + f"\n\nEdited: {token}.\n"
                    atomic_save(p, text) if op == "modify" else p.write_text(text, encoding="utf-8")
                lat = wait_hit(eng, token)
                if lat is None:
                    misses[op] += 1
                else:
                    res[op].append(lat)
                time.sleep(0.3)
        eng.stop_background()
        eng.close()
        allv = [x for v in res.values() for x in v]
        row = {"notes": real_n, "cold_index_s": round(index_s, 2), "trials_per_op": trials,
               **{op: stats(v) for op, v in res.items()}, "misses": misses,
               "all_ops": stats(allv), "p95_target": target(round(max(stats(v)["p95"] for v in res.values()), 3), 1.0)}
        log(f"latency {real_n} notes: p50 {row['all_ops']['p50']} s, p95 {row['all_ops']['p95']} s, misses {misses}")
        out.append(row)
        shutil.rmtree(vault, ignore_errors=True)
    return out


# -- part 2: bursts against the UI thread ----------------------------------------------------------------------
WRITER = r"""
import os, sys
from pathlib import Path
d, n, tag = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
d.mkdir(parents=True, exist_ok=True)
for i in range(n):
    (d / f"{tag}-{i:04d}.md").write_text(
        f"# {tag} card {i}\n\nImported card {i} about {tag}w{i}, photovoltaic supply chains and 储能 policy.\n"
        f"\nrelates_to:: [[digest/wiki/新能源]]\n", encoding="utf-8")
"""


def burst_part(tmp: Path, bursts: list[int]) -> dict:
    from reme_engine.config import load_settings
    from reme_tui.app import ReMeApp

    vault = copy_tree(VAULT_ZH, tmp / "burst-vault")
    (vault / "daily").mkdir(exist_ok=True)  # the bursts land in daily/<today>/, the Daily pane's folder
    emb, _ = loaded_embedder()
    state, cache_info = index_with_cache(vault, tmp / "burst-state", emb, True, "cli-vault")
    settings = load_settings({"vault": str(vault), "state_dir": str(state)}, env={})
    from reme_engine.engine import Engine

    eng = Engine.open(settings, embedder=emb)
    app = ReMeApp(settings, eng, background=True)
    today = date.today().isoformat()
    results: list[dict] = []

    def counts(prefix: str) -> tuple[int, int]:
        c = eng.store.conn
        files = c.execute("SELECT count(*) FROM files WHERE path LIKE ?", (prefix + "%",)).fetchone()[0]
        novec = c.execute("SELECT count(*) FROM chunks WHERE has_vec = 0").fetchone()[0]
        return files, novec

    async def scenario() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            m = app.main_screen
            deadline = time.monotonic() + 120
            while not (m is not None and m.keyword_ready and m.note.path and eng.watcher is not None
                       and counts("")[1] == 0):
                if time.monotonic() > deadline:
                    raise SystemExit("the app never finished its startup index")
                await pilot.pause(0.05)
                m = app.main_screen
            await asyncio.sleep(2.0)
            for n in bursts:
                tag = f"burst{n}"
                lags: list[float] = []
                stop = asyncio.Event()

                async def monitor() -> None:
                    while not stop.is_set():
                        t = time.perf_counter()
                        await asyncio.sleep(POLL_S)
                        lags.append(time.perf_counter() - t - POLL_S)

                marks: dict[str, float] = {}

                def poll(t0: float) -> None:  # off the event loop, so polling does not add lag
                    while True:
                        files, novec = counts(f"daily/{today}/{tag}-")
                        now = time.perf_counter() - t0
                        if files >= n and "keyword_all_s" not in marks:
                            marks["keyword_all_s"] = now
                        if files >= n and novec == 0:
                            marks["vectors_all_s"] = now
                            return
                        if now > 900:
                            return
                        time.sleep(0.05)

                mon = asyncio.create_task(monitor())
                await asyncio.sleep(0.5)
                t0 = time.perf_counter()
                # the writer must not block the loop being measured: awaited, not subprocess.run
                proc = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(vault / "daily" / today),
                                                            str(n), tag)
                if await proc.wait() != 0:
                    raise SystemExit("the burst writer failed")
                write_s = time.perf_counter() - t0
                poller = threading.Thread(target=poll, args=(t0,), daemon=True)
                poller.start()
                while poller.is_alive():
                    await asyncio.sleep(0.05)
                # the Daily pane's reload after the last batch, then a quiet second
                await asyncio.sleep(1.5)
                stop.set()
                await mon
                ms = [x * 1000 for x in lags]
                st = stats(ms, 1)
                hit = eng.search(f"{tag}w{n - 1}", mode="keyword", limit=1).hits
                day_cards = len(m.daily.cards) if hasattr(m.daily, "cards") else None
                row = {"files": n, "write_s": round(write_s, 2), **{k: round(v, 2) for k, v in marks.items()},
                       "last_note_found": bool(hit), "daily_pane_cards": day_cards,
                       "loop_lag_ms": {"p50": st["p50"], "p99": round(_pct(ms, 99), 1), "max": st["max"],
                                       "samples": st["n"], "over_100ms": sum(x > 100 for x in ms),
                                       "over_250ms": sum(x > 250 for x in ms)},
                       "no_stall_target": target(st["max"], 100.0)}
                log(f"burst {n}: keyword {marks.get('keyword_all_s')} s, vectors {marks.get('vectors_all_s')} s, "
                    f"lag max {st['max']} ms p99 {row['loop_lag_ms']['p99']} ms")
                results.append(row)
                await asyncio.sleep(1.0)

    asyncio.run(scenario())
    eng.close()
    return {"vault_notes": len(_md_files(vault)), "embedding": cache_info.get("embedding"), "bursts": results}


def _pct(xs: list[float], q: float) -> float:
    from _common import pct

    return pct(xs, q)


# -- part 3: idle CPU of the real binary ------------------------------------------------------------------------
def _cpu_ticks(pid: int) -> int:
    """utime + stime of ``pid`` and its threads, in clock ticks (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def idle_part(tmp: Path, seconds: float) -> dict:
    if shutil.which("tmux") is None:
        return {"skipped": "tmux not installed"}
    vault = copy_tree(VAULT_ZH, tmp / "idle-vault")
    emb, _ = loaded_embedder()
    state, _ = index_with_cache(vault, tmp / "idle-state", emb, True, "cli-vault")
    exe = shutil.which("reme-tui", path=str(Path(sys.executable).parent)) or "reme-tui"
    sock = str(tmp / "tmux.sock")
    env = {**os.environ, "TERM": "xterm-256color"}
    subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-x", "160", "-y", "48",
                    f"{exe} --vault {vault} --state-dir {state}"], check=True, env=env)
    try:
        pid = int(subprocess.run(["tmux", "-S", sock, "list-panes", "-F", "#{pane_pid}"], capture_output=True,
                                 text=True, check=True).stdout.split()[0])
        hz = os.sysconf("SC_CLK_TCK")
        # settle: wait until a 5 s window uses < 5 % CPU (start-up, index check, first paint done), at most 120 s
        t_end = time.time() + 120
        while time.time() < t_end:
            a = _cpu_ticks(pid)
            time.sleep(5)
            if (_cpu_ticks(pid) - a) / hz / 5 < 0.05:
                break
        threads = len(os.listdir(f"/proc/{pid}/task"))
        a, t = _cpu_ticks(pid), time.perf_counter()
        time.sleep(seconds)
        used = (_cpu_ticks(pid) - a) / hz
        wall = time.perf_counter() - t
        screen = subprocess.run(["tmux", "-S", sock, "capture-pane", "-p"], capture_output=True, text=True).stdout
    finally:
        subprocess.run(["tmux", "-S", sock, "send-keys", "q"], capture_output=True)
        time.sleep(1.0)
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
    pct_cpu = round(100 * used / wall, 3)
    return {"seconds": round(wall, 1), "cpu_seconds": round(used, 3), "cpu_percent": pct_cpu,
            "threads": threads, "app_on_screen": "Daily" in screen, "target": target(pct_cpu, 1.0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="latency,burst,idle")
    ap.add_argument("--sizes", default="30,300,3000,30000", help="vault sizes (notes) for the latency part")
    ap.add_argument("--bursts", default="20,200,2000", help="files per burst")
    ap.add_argument("--trials", type=int, default=15, help="trials per operation and size")
    ap.add_argument("--idle-seconds", type=float, default=30.0)
    ap.add_argument("--quick", action="store_true", help="small sizes: 30,300 notes; bursts of 20,200; 10 s idle")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--runs", type=int, default=1, help="accepted for symmetry with the other scripts (one run)")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.bursts, args.trials, args.idle_seconds = "30,300", "20,200", 8, 10.0
    parts = set(args.parts.split(","))
    out: dict = {"bench": "watch", "machine": machine(), "args": vars(args)}
    with bench_tmpdir("watch", args.keep) as tmp:
        if "latency" in parts:
            out["latency"] = latency_part(tmp, [int(x) for x in args.sizes.split(",")], args.trials)
        if "burst" in parts:
            out["burst"] = burst_part(tmp, [int(x) for x in args.bursts.split(",")])
        if "idle" in parts:
            out["idle"] = idle_part(tmp, args.idle_seconds)
    emit(out)


if __name__ == "__main__":
    main()
