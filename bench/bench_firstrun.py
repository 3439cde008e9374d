#!/usr/bin/env python
"""First run on a fresh state dir (issue 12): the real ``reme-tui --serve`` over a temp copy of knowledge-garden-zh
plus generated pathological notes, probed from outside with the real one-shot ``reme-tui job search``.

    python bench/bench_firstrun.py [--parts serve,keys,keys-idle,keys-inproc,first-commit,throughput] [--child both|on|off]
                                   [--key-seconds 150] [--no-pathological] [--searches 5] [--timeout 900] [--keep]
                                   [--other-checkout DIR] [--rounds 2]

Prints one JSON object. Part ``keys`` (key press to paint in the real app, issue 12): the real ``reme-tui`` binary
in tmux (160×48) on a fresh state dir over a copy of knowledge-garden-zh plus the pathological notes; from its
first paint, for ``--key-seconds``, while the first index and embedding run, a cycle of keys every ~0.5 s — ``/``,
typing a query, Escape, Ctrl+O, typing a note's name, Down, Up, Enter (opens the note), ``t`` (today) — each
timed from the moment tmux is told to send it until ``capture-pane`` (polled every 5 ms through one tmux
control-mode client, ~1 ms a capture) shows that key's expected change. ``key_to_paint_ms``: p50/p95/max, overall
and by the phase the status line showed (``indexing``, ``embedding``); ``first_keyword_hit_s`` /
``first_hybrid_hit_s``: from launch until the app's search shows a hit / a hit with a vector rank (``vec #``);
``first_commit_s``: from launch until the index holds its first chunk (a read-only poll every 20 ms);
``rss_mb`` and ``cpu_s`` of the app and its encode child. ``--child both`` runs the app with
``embedder.background_process`` off ("before": encoding in the app's process) then on, in one sitting. Part
``throughput``: the vector pass's encode of the same texts in-process vs through the child (interleaved,
wall and CPU of both processes, RSS of both: the model is loaded twice). Part ``keys-idle``: the same key cycle
with the index and vectors already built (one ``job reindex`` of a copy of knowledge-garden-zh, no pathological
notes), so it times the app's own work (~2 min for ``--key-seconds 40``); with ``--other-checkout DIR`` (e.g. a
``git worktree`` of an older commit) the app of that checkout (``PYTHONPATH``) runs too, the two interleaved for
``--rounds`` rounds on the same index, so the before/after ratio is measured side by side. Part ``first-commit``:
the app's first-index child alone (``Engine.index(child=True)``, fresh process per run) until its first committed
batch — with ``--other-checkout``, interleaved with that checkout's. Part ``keys-inproc``: the key cycle under
``App.run_test`` on an indexed copy, the milliseconds of layout and compositor refreshes each key costs (see
:func:`keys_inproc_part`). Part ``serve`` (below):

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
from _common import VAULT_ZH, bench_tmpdir, copy_tree, emit, loadavg, log, machine, stats, target  # noqa: E402

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
    ap.add_argument("--parts", default="serve,keys,throughput")
    ap.add_argument("--child", default="both", choices=("both", "on", "off"),
                    help="keys part: the encode child off (before), on (after), or both in one sitting")
    ap.add_argument("--key-seconds", type=float, default=150.0, help="keys part: seconds of key presses per run")
    ap.add_argument("--texts", type=int, default=256, help="throughput part: texts per round")
    ap.add_argument("--hybrid-wait", type=float, default=240.0,
                    help="keys part: seconds to go on searching for the first hybrid hit after the key window")
    ap.add_argument("--other-checkout", type=Path, help="keys-idle: another checkout's app, interleaved")
    ap.add_argument("--rounds", type=int, default=2, help="keys-idle: rounds (each side once per round)")
    ap.add_argument("--index-from", type=Path,
                    help="keys-idle: a folder with vault/ and state/ already indexed (copied, not re-indexed)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    result: dict = {"bench": "firstrun", "machine": machine(), "args": vars(args)}
    if "keys" in parts:
        modes = {"both": (False, True), "on": (True,), "off": (False,)}[args.child]
        result["keys"] = {}
        # with --other-checkout: that checkout's app too (PYTHONPATH), the two interleaved for --rounds rounds
        sides = {"this": None} if not args.other_checkout else {"this": str(Path(__file__).resolve().parents[1]),
                                                               "other": str(args.other_checkout.resolve())}
        for r in range(args.rounds if args.other_checkout else 1):
            for side, root in sides.items():
                for child in modes:
                    with bench_tmpdir("firstrun-keys", keep=args.keep) as tmp:
                        name = "child" if child else "in_process"
                        if args.other_checkout:
                            name = f"{name}-{side}-{r + 1}"
                        log(f"keys: {name}")
                        result["keys"][name] = keys_run(tmp, child, args.key_seconds, not args.no_pathological,
                                                        args.hybrid_wait, pythonpath=root)
    if "keys-inproc" in parts:
        result["keys_inproc"] = keys_inproc_part(args)
    if "first-commit" in parts:
        result["first_commit"] = first_commit_part(args)
    if "keys-idle" in parts:
        result["keys_idle"] = keys_idle_part(args)
    if "throughput" in parts:
        with bench_tmpdir("firstrun-tp", keep=args.keep) as tmp:
            result["throughput"] = throughput_part(args.texts)
    if "serve" not in parts:
        emit(result)
        return
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


# -- part keys: key press to paint in the real app -------------------------------------------------------------
class Tmux:
    """One tmux server on its own socket, driven through a control-mode client (commands and captures cost ~1 ms,
    not a process start each)."""

    def __init__(self, sock: str, cmd: str, env: dict) -> None:
        self.sock = sock
        subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-x", "160", "-y", "48", cmd], check=True, env=env)
        self.ctl = subprocess.Popen(["tmux", "-S", sock, "-C", "attach"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True, bufsize=1, env=env)
        self._block()  # the attach's own reply
        self.cmd("refresh-client -f no-output")  # no %output stream: replies only

    def _block(self) -> list[str]:
        out: list[str] = []
        inside = False
        while True:
            line = self.ctl.stdout.readline()  # type: ignore[union-attr]
            if not line:
                raise RuntimeError("tmux control client ended")
            if line.startswith("%begin"):
                inside, out = True, []
            elif line.startswith(("%end", "%error")) and inside:
                return out
            elif inside:
                out.append(line.rstrip("\n"))

    def cmd(self, c: str) -> list[str]:
        self.ctl.stdin.write(c + "\n")  # type: ignore[union-attr]
        self.ctl.stdin.flush()  # type: ignore[union-attr]
        return self._block()

    def screen(self, escapes: bool = False) -> list[str]:
        return self.cmd("capture-pane -p" + (" -e" if escapes else ""))

    def send(self, key: str, literal: bool = False) -> None:
        if literal:
            self.cmd("send-keys -l " + json.dumps(key, ensure_ascii=False))
        else:
            self.cmd("send-keys " + key)

    def pane_pid(self) -> int:
        return int(self.cmd("display -p '#{pane_pid}'")[0])

    def close(self) -> None:
        try:
            self.ctl.stdin.close()  # type: ignore[union-attr]
            self.ctl.wait(5)
        except Exception:
            self.ctl.kill()
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)


def _proc_cpu_rss(pid: int) -> tuple[float, float] | None:
    """(CPU seconds utime+stime, RSS MB) of ``pid``, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        rss = next(int(line.split()[1]) for line in open(f"/proc/{pid}/status") if line.startswith("VmRSS"))
    except (OSError, StopIteration, ValueError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), rss / 1024


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _phase(lines: list[str]) -> str:
    status = lines[-2] if len(lines) >= 2 else ""
    for word in ("embedding", "linking", "indexing"):
        if word in status:
            return "indexing" if word == "linking" else word
    return "idle"


def keys_idle_part(args) -> dict:
    """Part keys-idle: the key cycle on an already indexed copy (see the module docstring); returns per side
    (``this`` and, with ``--other-checkout``, ``other``) the runs and the pooled per-key p50/p95/max."""
    sides = {"this": None}
    if args.other_checkout:
        sides["other"] = str(args.other_checkout.resolve())
    out: dict = {"sides": {k: v or str(Path(__file__).resolve().parents[1]) for k, v in sides.items()}, "runs": []}
    with bench_tmpdir("firstrun-idle", keep=args.keep) as tmp:
        state = tmp / "state"
        if args.index_from:
            vault = copy_tree(args.index_from / "vault", tmp / "vault")
            copy_tree(args.index_from / "state", state)
            # a no-op check (the copy keeps mtimes), so the app starts on an index in step with this copy
            subprocess.run([*cli("--vault", str(vault), "--state-dir", str(state), "--no-server", "job",
                                 "reindex")], check=True, capture_output=True)
        else:
            vault = copy_tree(VAULT_ZH, tmp / "vault")
            t = time.perf_counter()
            subprocess.run([*cli("--vault", str(vault), "--state-dir", str(state), "--no-server", "job",
                                 "reindex")], check=True, capture_output=True)
            out["reindex_s"] = round(time.perf_counter() - t, 1)
            log(f"keys-idle: index built in {out['reindex_s']} s")
        for r in range(args.rounds):
            for side, root in sides.items():
                log(f"keys-idle: round {r + 1} {side}")
                run = keys_run(tmp / f"run-{r}-{side}", True, args.key_seconds, False, 0.0,
                               prebuilt=(vault, state), pythonpath=root)
                run["side"], run["round"] = side, r + 1
                out["runs"].append(run)
    for side in sides:
        samples = [x for run in out["runs"] if run["side"] == side for x in run.pop("samples")]
        out[side] = {"key_to_paint_ms": stats([x["ms"] for x in samples], 1),
                     "by_key": {k: stats([x["ms"] for x in samples if x["key"] == k], 1)
                                for k in dict.fromkeys(x["key"] for x in samples)}}
    for run in out["runs"]:
        run.pop("samples", None)
    return out


def keys_run(tmp: Path, child: bool, seconds: float, patho: bool, hybrid_wait: float = 240.0,
             prebuilt: tuple[Path, Path] | None = None, pythonpath: str | None = None) -> dict:
    """One run of the real app with the encode child on or off; see the module docstring (part keys).
    ``prebuilt``: (vault, state dir) already indexed (part keys-idle); ``pythonpath``: run that checkout's app."""
    import re
    from datetime import date

    tmp.mkdir(parents=True, exist_ok=True)
    if prebuilt:
        vault, state = prebuilt
    else:
        vault = copy_tree(VAULT_ZH, tmp / "vault")
        if patho:
            make_pathological(vault / "zz-pathological")
        state = tmp / "state"
    config = tmp / "config.yaml"
    config.write_text(f"embedder:\n  background_process: {'true' if child else 'false'}\n", encoding="utf-8")
    env = {**os.environ, "TERM": "xterm-256color"}
    if pythonpath:
        # -P: no current directory on sys.path (it would put this checkout ahead of PYTHONPATH)
        exe = f"env PYTHONPATH={pythonpath} {sys.executable} -P -c 'from reme_tui.cli import main; main()'"
    else:
        exe = str(Path(sys.executable).parent / "reme-tui")
    cmd = f"env REME_CONFIG={config} {exe} --vault {vault} --state-dir {state}"
    today = date.today().isoformat()
    t0 = time.perf_counter()
    tm = Tmux(str(tmp / "tmux.sock"), cmd, env)
    out: dict = {"child_setting": child, "loadavg_start": loadavg()}
    samples: list[dict] = []
    hits_seen: dict = {}
    searches: list[dict] = []  # each query the cycle typed: when sent, when its result line showed, hits
    peak = {"app_rss_mb": 0.0, "child_rss_mb": 0.0}
    committed: dict = {}

    def watch_db() -> None:  # when the first note's row is committed (a read-only poll every 20 ms)
        while "first" not in committed and time.perf_counter() - t0 < 120:
            try:
                c = sqlite3.connect(f"file:{state / 'index.sqlite'}?mode=ro", uri=True, timeout=1)
                try:
                    if c.execute("SELECT 1 FROM chunks LIMIT 1").fetchone():
                        committed["first"] = time.perf_counter() - t0
                finally:
                    c.close()
            except sqlite3.Error:
                pass
            time.sleep(0.02)

    if not prebuilt:
        threading.Thread(target=watch_db, daemon=True).start()
    try:
        app = tm.pane_pid()
        while "Daily" not in "\n".join(tm.screen()):
            if time.perf_counter() - t0 > 60:
                raise SystemExit("the app did not paint within 60 s")
            time.sleep(0.005)
        out["first_paint_s"] = round(time.perf_counter() - t0, 3)

        def sample_memory() -> None:
            a = _proc_cpu_rss(app)
            if a:
                peak["app_rss_mb"] = max(peak["app_rss_mb"], a[1])
            for c in _children(app):
                r = _proc_cpu_rss(c)
                if r:
                    peak["child_rss_mb"] = max(peak["child_rss_mb"], r[1])

        def press(name: str, key: str, done, literal: bool = False, timeout: float = 10.0) -> dict:
            before = tm.screen()
            t = time.perf_counter()
            tm.send(key, literal)
            while True:
                now = tm.screen(escapes=name in ("down", "up"))
                dt = time.perf_counter() - t
                if done(now, before) or dt > timeout:
                    break
                time.sleep(0.005)
            rec = {"key": name, "at_s": round(t - t0, 2), "ms": round(dt * 1000, 1), "phase": _phase(before),
                   "timed_out": dt > timeout}
            samples.append(rec)
            return rec

        def results(timeout: float = 15.0) -> None:
            """After a query: wait for its result line; note the first keyword hit and first vector-ranked hit."""
            t = time.perf_counter()
            while time.perf_counter() - t < timeout:
                text = "\n".join(tm.screen())
                m = re.search(r"(\d+) hits · ", text)
                if m or "no hits for" in text:
                    at = round(time.perf_counter() - t0, 2)
                    searches.append({"typed_at_s": round(t - t0, 2), "shown_at_s": at,
                                     "hits": int(m.group(1)) if m else 0})
                    if m and int(m.group(1)) > 0:
                        hits_seen.setdefault("keyword", at)
                        if re.search(r"vec #\d", text):
                            hits_seen.setdefault("hybrid", at)
                    return
                time.sleep(0.02)

        def diff_from(ref: list[str]):
            return lambda now, before: now[:-2] != ref[:-2]

        def opened(now: list[str], before: list[str]) -> bool:
            # the switcher closed and the note pane's title changed (during the first index the best match for
            # the name may be another note: any note opening counts)
            return "╭─ Open note" not in "\n".join(now) and now[0] != before[0]

        # names that match several notes: with "MySQL" (one match) Down/Up changed nothing on screen and were
        # timed until an unrelated repaint (~1 s)
        names = ("Redis", "Python")
        cycle = 0
        next_at = time.perf_counter()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            note = names[cycle % 2]
            cycle += 1
            steps = [
                ("/", "/", lambda s, b: "╭─ Search" in "\n".join(s), False),
                ("type query", COMMON, lambda s, b: any(f"▊  {COMMON}" in x for x in s), True),
                ("escape", "Escape", lambda s, b: "╭─ Search" not in "\n".join(s), False),
                ("ctrl+o", "C-o", lambda s, b: "╭─ Open note" in "\n".join(s), False),
                ("type name", note, lambda s, b, n=note: any(f"▊  {n}" in x for x in s), True),
                ("down", "Down", None, False),
                ("up", "Up", None, False),
                ("enter (open note)", "Enter", opened, False),
                ("t (today)", "t", lambda s, b: today in s[0], False),
            ]
            for name, key, done, literal in steps:
                time.sleep(max(0.0, next_at - time.perf_counter()))
                if done is None:  # a list move: the highlight (colours) changes
                    ref = tm.screen(escapes=True)
                    done = diff_from(ref)
                press(name, key, done, literal)
                next_at = time.perf_counter() + 0.5
                if name == "type query":
                    results()
                    next_at = time.perf_counter() + 0.5
            sample_memory()
        # until the first hybrid hit (vectors arrive) if the window ended before it, at most hybrid_wait more
        while "hybrid" not in hits_seen and time.perf_counter() - t0 < seconds + hybrid_wait:
            time.sleep(5)
            tm.send("/")
            time.sleep(0.5)
            tm.send(COMMON, literal=True)
            results()
            tm.send("Escape")
            sample_memory()
        a = _proc_cpu_rss(app)
        kids = _children(app)
        out["app_cpu_s"] = None if a is None else round(a[0], 1)
        out["child_cpu_s"] = [round(r[0], 1) for r in map(_proc_cpu_rss, kids) if r] if kids else []
        out["child_processes"] = len(kids)
        out["pending_vectors_at_end"] = pending_vectors(state)
        tm.send("q")
        t_quit = time.perf_counter()
        while _proc_cpu_rss(app) is not None and time.perf_counter() - t_quit < 90:
            time.sleep(0.05)
        app_gone = _proc_cpu_rss(app) is None
        out["app_quit_s"] = round(time.perf_counter() - t_quit, 2) if app_gone else None
        t_gone = time.perf_counter()
        while app_gone and any(_proc_cpu_rss(k) is not None for k in kids) and time.perf_counter() - t_gone < 15:
            time.sleep(0.05)  # the encode child and multiprocessing's resource tracker follow the app
        # counted only once the app is gone (children of a live app are no orphans)
        out["children_gone_after_app_s"] = round(time.perf_counter() - t_gone, 2) if app_gone else None
        out["orphans_after_quit"] = sum(1 for k in kids if _proc_cpu_rss(k) is not None) if app_gone else None
    finally:
        tm.close()
    ms = [x["ms"] for x in samples]
    out["key_to_paint_ms"] = stats(ms, 1)
    out["by_phase"] = {ph: stats([x["ms"] for x in samples if x["phase"] == ph], 1)
                       for ph in ("indexing", "embedding", "idle") if any(x["phase"] == ph for x in samples)}
    out["by_key"] = {k: stats([x["ms"] for x in samples if x["key"] == k], 1)
                     for k in dict.fromkeys(x["key"] for x in samples)}
    out["timeouts"] = sum(x["timed_out"] for x in samples)
    out["slowest"] = sorted(samples, key=lambda x: -x["ms"])[:8]
    out["first_commit_s"] = None if "first" not in committed else round(committed["first"], 2)
    out["first_keyword_hit_s"] = hits_seen.get("keyword")
    out["first_hybrid_hit_s"] = hits_seen.get("hybrid")
    out["searches"] = searches[:12]
    out["peak_rss_mb"] = {k: round(v, 1) for k, v in peak.items()}
    out["loadavg_end"] = loadavg()
    if prebuilt:
        out["samples"] = samples
    out["targets"] = {"p95_ms": target(out["key_to_paint_ms"].get("p95"), 100.0),
                      "max_ms": target(out["key_to_paint_ms"].get("max"), 300.0)}
    return out


# -- part keys-inproc: the frames a key costs, in-process --------------------------------------------------------
_KEYS_INPROC = """
import asyncio, json, sys, time
from textual import screen as scr
from reme_engine.config import load_settings
from reme_engine.engine import Engine
from reme_tui.app import create_app
frames = []
depth = [0]
def timed(name):
    orig = getattr(scr.Screen, name)
    def w(self, *a, **k):
        depth[0] += 1
        t = time.perf_counter()
        try:
            return orig(self, *a, **k)
        finally:
            depth[0] -= 1
            if not depth[0]:  # a layout's own refresh is counted once, in the layout
                frames.append(time.perf_counter() - t)
    setattr(scr.Screen, name, w)
timed("_compositor_refresh"); timed("_refresh_layout")
async def main(cycles):
    s = load_settings({"vault": sys.argv[1], "state_dir": sys.argv[2], "embedder": {"kind": "none"}}, env={})
    e = Engine.open(s)
    app = create_app(s, e)
    out = {}
    async with app.run_test(size=(160, 48)) as pilot:
        m = app.main_screen
        t = time.perf_counter()
        while not (m.ctx.keyword_ready and m.note.path) and time.perf_counter() - t < 120:
            await pilot.pause(0.05)
        await pilot.pause(1.0)
        async def key(name, *keys, settle=0.4):
            frames.clear()
            t = time.perf_counter()
            await pilot.press(*keys)
            await pilot.pause(settle)
            out.setdefault(name, []).append(round(sum(frames) * 1000, 2))
        for _ in range(cycles):
            await key("/", "slash")
            await key("type query", *"知识", settle=0.8)
            await key("escape (search closes)", "escape")
            await key("ctrl+o", "ctrl+o")
            await key("type name", *"Redis", settle=0.6)
            await key("enter (open note)", "enter", settle=0.8)
            await key("t (today)", "t", settle=0.8)
    e.close()
    print(json.dumps(out))
asyncio.run(main(int(sys.argv[3])))
"""


def keys_inproc_part(args) -> dict:
    """The key cycle of part ``keys`` in the real app under ``App.run_test`` (160×48, headless), on an indexed
    copy of knowledge-garden-zh (keyword only): per key, the milliseconds the screen spent in layout and
    compositor refreshes (the frames) until the app settled — CPU of the UI thread's painting, less noisy on a
    loaded machine than a tmux round trip. Fresh process per run; with ``--other-checkout`` that checkout's app
    too, interleaved, ``--rounds`` rounds. Returns the runs and per side the median per key."""
    sides = {"this": str(Path(__file__).resolve().parents[1])}
    if args.other_checkout:
        sides["other"] = str(args.other_checkout.resolve())
    runs: list[dict] = []
    with bench_tmpdir("firstrun-inproc") as tmp:
        vault = copy_tree(VAULT_ZH, tmp / "vault")
        subprocess.run([*cli("--vault", str(vault), "--state-dir", str(tmp / "state0"), "--no-server", "job",
                             "reindex")], check=True, capture_output=True,
                       env={**os.environ, "REME_EMBEDDER": "none"})
        for r in range(args.rounds):
            for side, root in sides.items():
                state = copy_tree(tmp / "state0", tmp / f"state-{side}-{r}")
                la = loadavg()
                p = subprocess.run([sys.executable, "-P", "-c", _KEYS_INPROC, str(vault), str(state), "4"],
                                   capture_output=True, text=True, env={**os.environ, "PYTHONPATH": root},
                                   timeout=600, cwd=str(tmp))
                try:
                    got = json.loads(p.stdout.strip().splitlines()[-1])
                except (ValueError, IndexError):
                    got = {"error": p.stderr[-800:]}
                runs.append({"side": side, "round": r + 1, "loadavg": la, "frames_ms": got})
                log(f"keys-inproc: {side} round {r + 1}")
    out: dict = {"runs": runs}
    for side in sides:
        per: dict[str, list[float]] = {}
        for x in runs:
            if x["side"] == side and "error" not in x["frames_ms"]:
                for k, v in x["frames_ms"].items():
                    per.setdefault(k, []).extend(v)
        out[side] = {k: stats(v, 1) for k, v in per.items()}
    return out


# -- part first-commit: the first index's child process until its first committed batch -----------------------
_FIRST_COMMIT = """
import json, sys, time
from reme_engine.config import load_settings
from reme_engine.engine import Engine
s = load_settings({"vault": sys.argv[1], "state_dir": sys.argv[2], "embedder": {"kind": "none"}}, env={})
e = Engine.open(s)
seen = {}
def prog(stage, done, total, detail):
    now = time.perf_counter() - t0
    if stage == "index":
        seen.setdefault("scanned_s", now)
        if done:
            seen.setdefault("first_commit_s", now)
            seen.setdefault("first_batch_files", done)
t0 = time.perf_counter()
import reme_engine.index.indexer as ix
ix.PARALLEL_ENABLED = True  # as the reme-tui entry points set it
e.index(prog, vectors=False, child=True, cancelled=lambda: "first_commit_s" in seen)
e.close()
print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in seen.items()}))
"""


def first_commit_part(args) -> dict:
    """The app's first-index child (``Engine.index(child=True)``, parse pool enabled as ``reme-tui`` does) on a
    fresh copy of knowledge-garden-zh plus the pathological notes (over 16 MB: the parse pool is used): seconds from
    the call until the scan is done and until the first batch is committed (the first notes searchable); the
    child is stopped there. Each run is a fresh process; with ``--other-checkout`` that checkout's code runs too,
    interleaved, ``--rounds`` rounds. Returns the runs and the medians per side."""
    sides = {"this": str(Path(__file__).resolve().parents[1])}
    if args.other_checkout:
        sides["other"] = str(args.other_checkout.resolve())
    runs: list[dict] = []
    for r in range(args.rounds):
        for side, root in sides.items():
            with bench_tmpdir("firstrun-commit") as tmp:
                vault = copy_tree(VAULT_ZH, tmp / "vault")
                if not args.no_pathological:
                    make_pathological(vault / "zz-pathological")
                env = {**os.environ, "PYTHONPATH": root}
                la = loadavg()
                p = subprocess.run([sys.executable, "-P", "-c", _FIRST_COMMIT, str(vault), str(tmp / "state")],
                                   capture_output=True, text=True, env=env, timeout=300, cwd=str(tmp))
                try:
                    got = json.loads(p.stdout.strip().splitlines()[-1])
                except (ValueError, IndexError):
                    got = {"error": p.stderr[-500:]}
                runs.append({"side": side, "round": r + 1, "loadavg": la, **got})
                log(f"first-commit: {side} round {r + 1}: {got}")
    out: dict = {"runs": runs}
    for side in sides:
        vals = sorted(x["first_commit_s"] for x in runs if x["side"] == side and "first_commit_s" in x)
        out[side] = {"first_commit_s_median": vals[len(vals) // 2] if vals else None, "first_commit_s": vals}
    return out


# -- part throughput: the pass's encode in-process vs in the child ----------------------------------------------
def throughput_part(n: int) -> dict:
    """``n`` note-sized texts of knowledge-garden-zh encoded in 64-text batches as a vector pass does: in this
    process vs through the encode child, interleaved twice (after each has loaded its model). Wall seconds, CPU
    seconds of this process and of the child, RSS of both."""
    from reme_engine.index.embedder import OfflineEmbedder

    texts: list[str] = []
    for p in sorted(VAULT_ZH.rglob("*.md")):
        for para in p.read_text(encoding="utf-8", errors="replace").split("\n\n"):
            if len(para.strip()) > 80:
                texts.append(para.strip()[:1500])
            if len(texts) >= n:
                break
        if len(texts) >= n:
            break
    inproc = OfflineEmbedder(child=False)
    viachild = OfflineEmbedder(child_min_texts=1)
    rss0 = _proc_cpu_rss(os.getpid())[1]

    def run(e, use_child: bool) -> dict:
        pid = e.child_pid
        c0 = _proc_cpu_rss(pid)[0] if pid else 0.0
        t, cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(texts), 64):
            part = texts[i : i + 64]
            e.embed_pass(part, pass_texts=len(texts)) if use_child else e.embed(part)
        wall, own = time.perf_counter() - t, time.process_time() - cpu
        child_cpu = (_proc_cpu_rss(e.child_pid)[0] - c0) if use_child else 0.0
        return {"wall_s": round(wall, 2), "texts_per_s": round(len(texts) / wall, 1), "app_cpu_s": round(own, 2),
                "child_cpu_s": round(child_cpu, 2)}

    viachild.embed_pass(texts[:2], pass_texts=2)  # start the child and load its model
    rss_child_only = _proc_cpu_rss(os.getpid())[1]
    inproc.load()
    rounds = []
    for _ in range(2):
        rounds.append({"in_process": run(inproc, False), "child": run(viachild, True)})
    child_rss = _proc_cpu_rss(viachild.child_pid)[1]
    app_rss = _proc_cpu_rss(os.getpid())[1]
    viachild.close()
    return {"texts": len(texts), "loadavg": loadavg(), "rounds": rounds,
            "rss_mb": {"this_process_before_models": round(rss0, 1),
                       "this_process_child_started_no_model_here": round(rss_child_only, 1),
                       "this_process_with_its_model": round(app_rss, 1), "child": round(child_rss, 1),
                       "model_twice_total": round(app_rss + child_rss, 1)}}


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
