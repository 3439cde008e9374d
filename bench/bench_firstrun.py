#!/usr/bin/env python
"""First run on a fresh state dir (issue 12): the real ``reme-tui --serve`` over a temp copy of knowledge-garden-zh
plus generated pathological notes, probed from outside with the real one-shot ``reme-tui job search``.

    python bench/bench_firstrun.py [--no-pathological] [--searches 5] [--timeout 900] [--keep]

Prints one JSON object:

- ``sync_started_s``: from starting ``--serve`` until its first sync holds the index lock (probes start then);
- ``small_note_searchable_s``: from starting ``--serve`` until ``job search mode=keyword`` finds a small new note
  (its unique word) — target ≤ 3 s; ``first_keyword_hit_s``: until a common word gets any hit — target ≤ 3 s;
  each probe is a whole ``job search`` process (interpreter, engine open, search), ``probe_s`` lists them;
  ``small_note_committed_s``: until the note's row is committed (a read-only poll of the index every 50 ms);
- ``keyword_pass_s``: until ``--serve`` logs that its keyword + graph pass is done;
- ``search_during_embedding``: wall times of ``job search`` (default mode: hybrid) while chunks still wait for a
  vector (``chunks.has_vec = 0``) — target ≤ 1 s; each one-shot process loads the model itself;
- ``pathological``: the generated notes (5 MB single line, 200,000-link note, 5 MB unclosed code fence, 20 MB
  file) with what the index made of them (chunks, links, warning or skip reason) — ≤ 2 s per MB of input is
  checked by ``parse_s_per_mb`` (the parse of each, timed in this process after the run, in a thread while this
  thread ticks every 5 ms: ``max_stall_ms`` is the longest the parse kept the GIL from it — target ≤ 100 ms);
- ``machine`` (CPU model, load average at start and end).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import VAULT_ZH, bench_tmpdir, copy_tree, emit, log, machine, target  # noqa: E402

MARKER = "zyxquokkafirstrun"
COMMON = "知识"


def make_pathological(folder: Path) -> dict[str, int]:
    """The notes of issue 12 under ``folder``; returns ``{vault-relative name: bytes}``."""
    folder.mkdir(parents=True, exist_ok=True)
    notes = {
        "single-line-5mb.md": "word " * 1_000_000,
        "links-200k.md": "# Links\n" + "".join(f"[[n{i}]] " for i in range(200_000)) + "\n",
        "unclosed-fence-5mb.md": "# Fence\n```python\n" + "x = [[a]] `b` **c** more text\n" * 166_000,
    }
    out = {}
    for name, text in notes.items():
        (folder / name).write_text(text, encoding="utf-8")
        out[f"{folder.name}/{name}"] = len(text.encode())
    with open(folder / "big-20mb.md", "w", encoding="utf-8") as f:  # over max_file_bytes: skipped with a reason
        line = "alpha beta gamma [[link]] **bold** delta\n"
        f.write(line * (20_000_000 // len(line)))
    out[f"{folder.name}/big-20mb.md"] = (folder / "big-20mb.md").stat().st_size
    return out


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "reme_tui.cli", *args]


def job_search(vault: Path, state: Path, query: str, mode: str | None = None) -> tuple[float, list[str]]:
    """One real ``reme-tui job search`` process: (wall seconds, hit paths)."""
    cmd = cli("job", "search", f"query={query}", "limit=5", "--vault", str(vault), "--state-dir", str(state))
    if mode:
        cmd.insert(5, f"mode={mode}")
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    dt = time.perf_counter() - t
    try:
        out = json.loads(p.stdout)
    except ValueError:
        return dt, []
    return dt, [h.get("path") for h in out.get("hits", [])]


def sync_running(state: Path) -> bool:
    """True while some process holds ``<state>/index.lock`` (a sync runs); probed without waiting."""
    import fcntl

    try:
        fd = os.open(state / "index.lock", os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops a lock this probe took
    return False


def pending_vectors(state: Path) -> int | None:
    try:
        c = sqlite3.connect(f"file:{state / 'index.sqlite'}?mode=ro", uri=True, timeout=5)
        try:
            return c.execute("SELECT count(*) FROM chunks WHERE has_vec = 0").fetchone()[0]
        finally:
            c.close()
    except sqlite3.Error:
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-pathological", action="store_true")
    ap.add_argument("--searches", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    result: dict = {"bench": "firstrun", "machine": machine()}
    with bench_tmpdir("firstrun", keep=args.keep) as tmp:
        vault = copy_tree(VAULT_ZH, tmp / "vault")
        state = tmp / "state"
        patho = {} if args.no_pathological else make_pathological(vault / "zz-pathological")
        (vault / "inbox").mkdir(exist_ok=True)
        (vault / "inbox" / "first-run-note.md").write_text(f"# First run\n\nA small new note: {MARKER}.\n",
                                                           encoding="utf-8")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        t0 = time.perf_counter()
        serve = subprocess.Popen(cli("--serve", "--vault", str(vault), "--state-dir", str(state)), env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines: list[tuple[float, str]] = []

        def read_log() -> None:
            for line in serve.stderr:  # type: ignore[union-attr]
                lines.append((time.perf_counter() - t0, line.rstrip()))

        threading.Thread(target=read_log, daemon=True).start()
        committed: dict = {}

        def watch_db() -> None:  # when the small note's row is committed (a read-only poll every 50 ms)
            while "small" not in committed and time.perf_counter() - t0 < args.timeout:
                try:
                    c = sqlite3.connect(f"file:{state / 'index.sqlite'}?mode=ro", uri=True, timeout=1)
                    try:
                        if c.execute("SELECT 1 FROM files WHERE path = 'inbox/first-run-note.md'").fetchone():
                            committed["small"] = time.perf_counter() - t0
                    finally:
                        c.close()
                except sqlite3.Error:
                    pass
                time.sleep(0.05)

        threading.Thread(target=watch_db, daemon=True).start()
        probes: list[dict] = []
        small_at = common_at = None
        try:
            # Probe once the serve's first sync holds the index lock: a `job search` that starts before it, on a
            # never-indexed vault, runs a sync of its own (and the two then take turns).
            while not sync_running(state) and time.perf_counter() - t0 < 30 and serve.poll() is None:
                time.sleep(0.02)
            result["sync_started_s"] = round(time.perf_counter() - t0, 2)
            while (small_at is None or common_at is None) and time.perf_counter() - t0 < args.timeout:
                if serve.poll() is not None:
                    raise SystemExit(f"--serve exited: {lines[-5:]}")
                for query, which in ((MARKER, "small"), (COMMON, "common")):
                    if (which == "small" and small_at is not None) or (which == "common" and common_at is not None):
                        continue
                    dt, hits = job_search(vault, state, query, "keyword")
                    at = time.perf_counter() - t0
                    probes.append({"query": which, "at_s": round(at, 2), "probe_s": round(dt, 2), "hits": len(hits)})
                    if which == "small" and "inbox/first-run-note.md" in hits:
                        small_at = at
                    if which == "common" and hits:
                        common_at = at
            result["small_note_searchable_s"] = None if small_at is None else round(small_at, 2)
            result["first_keyword_hit_s"] = None if common_at is None else round(common_at, 2)
            result["small_note_committed_s"] = None if "small" not in committed else round(committed["small"], 2)
            result["probes"] = probes
            result["targets"] = {"small_note_searchable": target(small_at, 3.0),
                                 "first_keyword_hit": target(common_at, 3.0)}
            # keyword pass done: the serve log says so
            while time.perf_counter() - t0 < args.timeout and not any("files indexed" in m for _, m in lines):
                time.sleep(0.2)
            done = next((t for t, m in lines if "files indexed" in m), None)
            result["keyword_pass_s"] = None if done is None else round(done, 2)
            timings = []
            for q in ("光伏 产业链", "如何 学习 英语", "kubernetes 部署", "读书 笔记", "时间 管理")[: args.searches]:
                before = pending_vectors(state)
                if not before:
                    break
                dt, hits = job_search(vault, state, q)
                timings.append({"query": q, "wall_s": round(dt, 2), "hits": len(hits), "pending_before": before,
                                "pending_after": pending_vectors(state)})
            result["search_during_embedding"] = timings
            if timings:
                walls = sorted(t["wall_s"] for t in timings)
                result["search_during_embedding_p50_s"] = walls[len(walls) // 2]
                result["targets"]["search_during_embedding"] = target(walls[len(walls) // 2], 1.0)
        finally:
            serve.send_signal(signal.SIGINT)
            try:
                serve.wait(60)
            except subprocess.TimeoutExpired:
                serve.kill()
        result["serve_log"] = [f"{t:.2f}s {m[20:]}" for t, m in lines[:12]]
        if patho:
            result["pathological"] = describe(vault, state, patho)
    emit(result)


def parse_with_ticker(ix, entry) -> tuple[float, float]:
    """Parse ``entry`` in a thread (as the app's index worker does) while this thread ticks every 5 ms, as an event
    loop would: (parse seconds, longest gap between ticks in ms — how long the parse kept the GIL from the UI)."""
    done = threading.Event()
    box: dict = {}

    def run() -> None:
        t = time.perf_counter()
        ix.parse(entry)
        box["s"] = time.perf_counter() - t
        done.set()

    th = threading.Thread(target=run)
    last = time.perf_counter()
    worst = 0.0
    th.start()
    while not done.is_set():
        time.sleep(0.005)
        now = time.perf_counter()
        worst = max(worst, now - last)
        last = now
    th.join()
    return box["s"], round(worst * 1000, 1)


def describe(vault: Path, state: Path, patho: dict[str, int]) -> dict:
    """What the index holds for each pathological note, and its parse time here (s per MB of input)."""
    from reme_engine.config import load_settings
    from reme_engine.index.indexer import Indexer, ScanEntry
    from reme_engine.index.tokenizer import default_tokenizer

    c = sqlite3.connect(f"file:{state / 'index.sqlite'}?mode=ro", uri=True)
    settings = load_settings({"vault": str(vault), "state_dir": str(state), "embedder": {"kind": "none"}}, env={})
    ix = Indexer.__new__(Indexer)
    ix.vault, ix.settings, ix.tokenizer = vault, settings, default_tokenizer()
    layers = settings.layers
    ix._text_roots = tuple(f"{d}/" for d in (layers.resource_dir, layers.daily_dir, layers.digest_dir))
    ix._dialog_root = f"{layers.session_dir}/dialog/"
    out = {}
    # The tokenizer's dictionary loads on first use, holding the GIL (a one-time stall, reported on its own).
    t = time.perf_counter()
    ix.tokenizer.tokenize("warm up 预热")
    out["tokenizer_first_use_s"] = round(time.perf_counter() - t, 2)
    for rel, size in patho.items():
        row = c.execute("SELECT id, warning FROM files WHERE path = ?", (rel,)).fetchone()
        entry: dict = {"mb": round(size / 1e6, 2)}
        if row:
            entry["chunks"] = c.execute("SELECT count(*) FROM chunks WHERE file_id = ?", (row[0],)).fetchone()[0]
            entry["links"] = c.execute("SELECT count(*) FROM links WHERE src_id = ?", (row[0],)).fetchone()[0]
            entry["warning"] = row[1]
            p = vault / rel
            st = p.stat()
            dt, stall = parse_with_ticker(ix, ScanEntry(rel, p, st.st_mtime, st.st_size))
            entry["max_stall_ms"] = stall
            entry["stall_target"] = target(stall, 100.0)
            entry["parse_s"] = round(dt, 2)
            entry["parse_s_per_mb"] = round(dt / (size / 1e6), 2)
            entry["target"] = target(entry["parse_s_per_mb"], 2.0)
        else:
            skip = c.execute("SELECT reason FROM skipped WHERE path = ?", (rel,)).fetchone()
            entry["skipped"] = skip[0] if skip else "not indexed"
        out[rel] = entry
    c.close()
    log("pathological notes described")
    return out


if __name__ == "__main__":
    main()
