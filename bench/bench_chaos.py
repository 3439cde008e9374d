"""Chaos benchmark: kill -9 at random points, restart once, compare with a clean index (ARCHITECTURE §8).

Sections (``--only a,b``; default all):

- ``refresh`` — ``reme-tui --refresh`` on a temp copy of a real vault (a subset of knowledge-garden-zh: Cards,
  Calendar, Atlas and the top-level notes, ~1,300 notes) is killed with SIGKILL at a random moment of one of its
  stages — keyword pass, link pass, vector pass, day pages (the proactive stage that writes the day's
  ``interests.yaml``) — then ``--refresh`` runs once more, and the index is compared with a clean index of the same
  vault (fresh state dir): files (path, sha), chunks (id, file, text hash, has_vec), links (source, target, line,
  resolved, ambiguous, virtual; resolved and dangling counts), vectors (the ids in the faiss file), and the top 5 of
  fixed queries (keyword, vector, hybrid). Two kinds of trial alternate: ``cold`` (fresh state dir, the embedding
  cache missing a random 10 % (``--drop``) of the vectors so the vector pass embeds for seconds) and ``incremental`` (the state
  of a clean index of the vault before 60 notes were renamed, deleted, edited or added).

  The moment: the stage is drawn uniformly; the child's progress lines on stderr mark where a stage starts
  (``index: N to do`` keyword, ``index: N/N`` links, ``embed: M to do`` vectors, ``embed: M/M`` day pages); the
  kill comes a uniform fraction of that stage's duration (measured by an unkilled calibration run of each kind)
  after its start. A child that finishes before the kill is not a trial (it is counted as ``missed`` and drawn
  again).

- ``jobs`` — ``reme-tui job move`` (a note with 300 inbound links), ``job write`` and ``job edit`` (a 3,000-line
  note) killed at a uniform moment of their run, then one restart; the move must be complete or never have
  happened, the note must hold the old or the new bytes, no intent record may be left, and the index must equal a
  clean index of the vault.

- ``dream`` — ``reme-tui job auto_dream`` through the scripted OpenAI-compatible wire server (tests/wire; every
  reply delayed ``--latency`` s) killed with SIGKILL at a uniform moment of its unkilled run time (two calibration
  runs, which must be byte-identical). The vault: 12 real notes of knowledge-garden-zh as user notes in
  ``digest/{personal,procedure,wiki}/`` (CRLF, BOM, no final newline among them), 5 app notes from a seed run, and
  daily notes (a list of the topics plus two real daily notes). The run has 20 units: CREATE of a user note's name
  in another bucket, CORROBORATE, REFINE and CORRECT of user notes, CORROBORATE and REFINE/CORRECT body rewrites
  of app notes, and CREATE of 3 new names. After the kill, one restart (``--refresh --no-vectors``, no LLM); then:
  every user line is still there byte for byte (a subsequence), every digest file holds its old or its new bytes,
  no app temp file is left after the sweep, the index equals a clean index (files, chunks, links). Then a second
  ``job auto_dream`` of the same day: it must succeed, leave the digest byte for byte as the unkilled run did
  (nothing applied twice, nothing skipped), and leave no journal run ``running``.

Racing savers are ``bench/bench_race.py``; dream actions on user notes are ``bench/bench_provenance.py``.

Prints one JSON object: per section ``trials``, ``survived``, ``lost`` (and why), by stage and kind.

    $PY bench/bench_chaos.py --only refresh --trials 50      # ~10 min on 2 cores
    $PY bench/bench_chaos.py --only dream --trials 50        # ~15 min on a quiet machine
    $PY bench/bench_chaos.py --quick                          # 8 trials
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the scripted LLM wire server
from _common import (VAULT_ZH, bench_tmpdir, cache_root, emit, loadavg, loaded_embedder, log, machine,  # noqa: E402
                     open_engine, tree_digest)

DATE = "2023-02-22"  # a day with a daily note in the vault: the day-pages stage has material
SUBSET = ("Cards", "Calendar", "Atlas")
QUERIES = ("笔记方法", "时间管理", "写作 发布", "Obsidian 插件", "读书")
STAGES = ("keyword", "links", "vectors", "day_pages")


# -- the vault ---------------------------------------------------------------------------------------------
def make_subset(dst: Path) -> Path:
    """The subset of knowledge-garden-zh (mtimes kept), never written in place."""
    dst.mkdir(parents=True)
    for name in SUBSET:
        shutil.copytree(VAULT_ZH / name, dst / name, symlinks=True)
    for p in VAULT_ZH.iterdir():
        if p.is_file() and p.suffix == ".md":
            shutil.copy2(p, dst / p.name)
    return dst


def mutate(vault: Path, seed: int = 7) -> dict:
    """A fixed set of changes (renames, deletions, edits that add links, new notes linking to old ones)."""
    rng = random.Random(seed)
    notes = sorted(p for p in vault.rglob("*.md"))
    picks = rng.sample(notes, 60)
    renamed, deleted, edited, added = picks[:15], picks[15:30], picks[30:45], []
    names = [p.stem for p in notes]
    for p in renamed:
        p.rename(p.with_name(f"{p.stem} (renamed).md"))
    for p in deleted:
        p.unlink()
    for p in edited:
        with open(p, "a", encoding="utf-8") as f:
            f.write(f"\n\n补充：参见 [[{rng.choice(names)}]] 与 [[{rng.choice(names)}]]。\n")
    for i in range(15):
        p = vault / "Cards" / f"新卡片 {i}.md"
        p.write_text(f"# 新卡片 {i}\n\n关于 [[{rng.choice(names)}]] 的一些新想法，链接到 [[{renamed[i].stem}]]。\n",
                     encoding="utf-8")
        added.append(p)
    return {"renamed": len(renamed), "deleted": len(deleted), "edited": len(edited), "added": len(added)}


# -- the index, read raw ------------------------------------------------------------------------------------
def snapshot(state: Path) -> dict:
    """Everything the index derives from the vault, without row ids (they depend on the index's history).
    Pipeline checkpoints (``catalog``) are not derived data and are left out."""
    import faiss

    c = sqlite3.connect(f"file:{state / 'index.sqlite'}?mode=ro", uri=True)
    try:
        files = sorted(c.execute("SELECT path, sha FROM files"))
        chunks = sorted(c.execute("SELECT c.id, f.path, c.text_hash, c.has_vec FROM chunks c "
                                  "JOIN files f ON f.id = c.file_id"))
        links = sorted(c.execute("SELECT f.path, l.target, l.line, l.resolved, l.ambiguous, l.virtual "
                                 "FROM links l JOIN files f ON f.id = l.src_id"), key=repr)
        fts = c.execute("SELECT count(*) FROM chunks_fts").fetchone()[0]
        marker = c.execute("SELECT value FROM meta WHERE key = 'sync_interrupted'").fetchone()
    finally:
        c.close()
    vec_ids: list[int] = []
    faiss_files = sorted(state.glob("vectors-*.faiss"))
    if faiss_files:
        idx = faiss.read_index(str(faiss_files[0]))
        stamp = json.loads(faiss_files[0].with_suffix(".json").read_text(encoding="utf-8"))
        vec_ids = sorted(set(int(i) for i in faiss.vector_to_array(idx.id_map)) - set(stamp.get("tombstones", ())))
    return {"files": files, "chunks": chunks, "links": links, "fts_rows": fts, "marker": marker,
            "links_resolved": sum(1 for x in links if x[3] is not None),
            "links_dangling": sum(1 for x in links if x[3] is None), "vectors": vec_ids}


def top5(vault: Path, state: Path, emb) -> dict:
    eng = open_engine(vault, state, emb)
    try:
        out = {}
        for q in QUERIES:
            for mode in ("keyword", "vector", "hybrid"):
                hits = eng.search(q, limit=5, mode=mode, neighbors=False).hits
                out[f"{mode}:{q}"] = [(h.path, h.start_line) for h in hits]
        return out
    finally:
        eng.close()


def diff(a: dict, b: dict) -> list[str]:
    """Names of the fields that differ, with a short description each."""
    out = []
    for k in a:
        if a[k] != b.get(k):
            if isinstance(a[k], list) and isinstance(b.get(k), list):
                sa, sb = set(map(repr, a[k])), set(map(repr, b[k]))
                out.append(f"{k}: {len(a[k])} vs {len(b[k])} (only in trial {len(sa - sb)}, only in clean {len(sb - sa)})")
            else:
                out.append(f"{k}: {str(a[k])[:80]} vs {str(b.get(k))[:80]}")
    return out


# -- running reme-tui ---------------------------------------------------------------------------------------
def refresh_cmd(vault: Path, state: Path) -> list[str]:
    return [sys.executable, "-m", "reme_tui.cli", "--refresh", "--vault", str(vault), "--state-dir", str(state),
            "--embedder", "offline", "--date", DATE]


class Child:
    """A ``--refresh`` child whose stderr progress lines are timestamped as they arrive."""

    def __init__(self, vault: Path, state: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "REME_CRASH_AT"}
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(refresh_cmd(vault, state), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env)
        self.lines: list[tuple[float, str]] = []
        self.cond = threading.Condition()
        self.out = ""
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()
        self._o = threading.Thread(target=self._read_out, daemon=True)
        self._o.start()

    def _read(self) -> None:
        for line in self.p.stderr:
            with self.cond:
                self.lines.append((time.monotonic() - self.t0, line.rstrip("\n")))
                self.cond.notify_all()
        with self.cond:
            self.lines.append((time.monotonic() - self.t0, "<eof>"))
            self.cond.notify_all()

    def _read_out(self) -> None:
        self.out = self.p.stdout.read()

    def wait_for(self, pred, timeout: float = 300) -> float | None:
        """Seconds since start of the first stderr line matching ``pred``; None at EOF or timeout."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self.cond:
            while True:
                for t, line in self.lines[seen:]:
                    if line == "<eof>":
                        return None
                    if pred(line):
                        return t
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def finish(self, timeout: float = 600) -> int:
        rc = self.p.wait(timeout)
        self._t.join(5)
        self._o.join(5)
        return rc


def _is(stage: str):
    """The stderr line that marks the start of ``stage``."""
    def index_done(line: str) -> bool:
        if not line.startswith("index: ") or "/" not in line:
            return False
        d, t = line[7:].split("/", 1)
        return d == t
    def embed_done(line: str) -> bool:
        if not line.startswith("embed: ") or "/" not in line:
            return False
        d, t = line[7:].split("/", 1)
        return d == t
    return {"keyword": lambda line: line.startswith("index: ") and line.endswith(" to do"),
            "links": index_done,
            "vectors": lambda line: line.startswith("embed: ") and line.endswith(" to do"),
            "day_pages": embed_done}[stage]


def calibrate(vault: Path, state: Path) -> dict:
    """Stage windows (seconds) of one unkilled run."""
    ch = Child(vault, state)
    marks = {s: ch.wait_for(_is(s)) for s in STAGES}
    rc = ch.finish()
    end = time.monotonic() - ch.t0
    if rc != 0 or any(v is None for v in marks.values()):
        raise SystemExit(f"calibration run failed (rc {rc}, marks {marks}):\n{ch.out[-2000:]}")
    order = list(STAGES) + ["end"]
    marks["end"] = end
    return {s: round(marks[order[i + 1]] - marks[s], 3) for i, s in enumerate(STAGES)} | {"total": round(end, 3)}


# -- the refresh section -------------------------------------------------------------------------------------
def section_refresh(args, work: Path) -> dict:
    work.mkdir(parents=True)
    emb, _ = loaded_embedder()
    vault_a = make_subset(work / "vault-A")
    digest, nfiles, nbytes = tree_digest(vault_a)
    vault_b = work / "vault-B"
    shutil.copytree(vault_a, vault_b, symlinks=True)
    changes = mutate(vault_b)
    log(f"vault subset: {nfiles} files, {nbytes} bytes; incremental trials change {changes}")

    # Clean indexes of A and B with vectors. Their embeddings persist between bench runs (cache_root()).
    cdir = cache_root() / f"chaos-{digest}-{emb.space.replace('/', '_')[:40]}"
    clean_a, clean_b = work / "clean-A", work / "clean-B"
    for vault, state, name in ((vault_a, clean_a, "A"), (vault_b, clean_b, "B")):
        state.mkdir()
        cached = cdir / f"embeddings-{name}.sqlite"
        if cached.is_file():
            shutil.copy2(cached, state / "embeddings.sqlite")
        elif name == "B":
            shutil.copy2(clean_a / "embeddings.sqlite", state / "embeddings.sqlite")
        eng = open_engine(vault, state, emb)
        t = time.perf_counter()
        rep = eng.index()
        log(f"clean index {name}: {rep.chunks_total} chunks, {rep.links_total} links, embedded {rep.embedded} "
            f"(cache {rep.embed_cached}) in {time.perf_counter() - t:.1f}s")
        eng.close()
        cdir.mkdir(parents=True, exist_ok=True)
        if not cached.is_file():
            shutil.copy2(state / "embeddings.sqlite", cached)
    full_cache = clean_b / "embeddings.sqlite"  # A's vectors and B's

    def trial_dirs(kind: str, tag: str, rng: random.Random) -> tuple[Path, Path]:
        vault, state = work / f"v-{tag}", work / f"s-{tag}"
        shutil.copytree(vault_a if kind == "cold" else vault_b, vault, symlinks=True)
        if kind == "cold":
            state.mkdir()
            shutil.copy2(full_cache, state / "embeddings.sqlite")
            c = sqlite3.connect(state / "embeddings.sqlite")
            keys = [r[0] for r in c.execute("SELECT text_hash FROM embeddings")]
            drop = rng.sample(keys, int(len(keys) * args.drop))
            c.executemany("DELETE FROM embeddings WHERE text_hash = ?", [(k,) for k in drop])
            c.commit()
            c.close()
        else:
            shutil.copytree(clean_a, state)
        return vault, state

    rng = random.Random(args.seed)
    windows = {}
    for kind in ("cold", "incremental"):
        v, s = trial_dirs(kind, f"cal-{kind}", rng)
        windows[kind] = calibrate(v, s)
        shutil.rmtree(v)
        shutil.rmtree(s)
        log(f"stage windows ({kind}): {windows[kind]}")

    results = []
    missed = 0
    t_start = time.perf_counter()
    while len(results) < args.trials:
        n = len(results)
        kind = "cold" if n % 2 == 0 else "incremental"
        stage = STAGES[rng.randrange(len(STAGES))]
        frac = rng.random()
        tag = f"{n:03d}-{missed}"
        vault, state = trial_dirs(kind, tag, rng)
        ch = Child(vault, state)
        at = ch.wait_for(_is(stage))
        killed = False
        if at is not None:
            time.sleep(frac * windows[kind][stage])
            try:
                ch.p.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
        rc = ch.finish()
        killed = rc == -signal.SIGKILL
        if not killed:
            missed += 1
            log(f"trial {tag} {kind}/{stage}: finished before the kill (rc {rc}); drawn again")
            shutil.rmtree(vault)
            shutil.rmtree(state)
            if missed > 5 * args.trials:
                raise SystemExit("too many missed kills: stage windows too short?")
            continue
        after_kill = snapshot(state) if (state / "index.sqlite").exists() else None
        restart = subprocess.run(refresh_cmd(vault, state), capture_output=True, text=True, timeout=900,
                                 env={k: v for k, v in os.environ.items() if k != "REME_CRASH_AT"})
        rec = {"trial": n, "kind": kind, "stage": stage, "fraction": round(frac, 3),
               "killed_at_s": round(time.monotonic() - ch.t0, 3) if at is None else round(at + frac * windows[kind][stage], 3),
               "marker_after_kill": bool(after_kill and after_kill["marker"]),
               "restart_rc": restart.returncode,
               "repair_line": next((ln for ln in restart.stdout.splitlines() if ln.startswith("repair")), None)}
        problems: list[str] = []
        if restart.returncode != 0:
            problems.append(f"restart failed rc {restart.returncode}: {restart.stderr[-300:]}")
        if "Traceback" in restart.stderr:
            problems.append("traceback in restart: " + restart.stderr[-300:])
        if not problems:
            got = snapshot(state)
            clean = work / f"c-{tag}"
            clean.mkdir()
            shutil.copy2(full_cache, clean / "embeddings.sqlite")
            eng = open_engine(vault, clean, emb)
            eng.index()
            eng.close()
            want = snapshot(clean)
            problems += diff(got, want)
            if not problems:
                q_got, q_want = top5(vault, state, emb), top5(vault, clean, emb)
                problems += [f"top5 {k}" for k in q_got if q_got[k] != q_want[k]]
            rec.update({"files": len(got["files"]), "chunks": len(got["chunks"]),
                        "links_resolved": got["links_resolved"], "links_dangling": got["links_dangling"],
                        "vectors": len(got["vectors"])})
            shutil.rmtree(clean)
        rec["survived"] = not problems
        rec["problems"] = problems
        results.append(rec)
        log(f"trial {n} {kind}/{stage} at {rec['killed_at_s']}s: {'ok' if not problems else problems}"
            + (f"  [{rec['repair_line']}]" if rec["repair_line"] else ""))
        shutil.rmtree(vault)
        shutil.rmtree(state)

    def tally(key: str) -> dict:
        out: dict = {}
        for r in results:
            d = out.setdefault(r[key], {"trials": 0, "survived": 0})
            d["trials"] += 1
            d["survived"] += r["survived"]
        return out

    survived = sum(r["survived"] for r in results)
    return {"vault": {"source": "knowledge-garden-zh", "subset": list(SUBSET) + ["top-level notes"],
                      "files": nfiles, "bytes": nbytes, "incremental_changes": changes},
            "stage_windows_s": windows, "trials": len(results), "survived": survived,
            "lost": len(results) - survived, "missed_kills_redrawn": missed,
            "by_stage": tally("stage"), "by_kind": tally("kind"),
            "restarts_with_repair_line": sum(1 for r in results if r["repair_line"]),
            "killed_with_marker_set": sum(1 for r in results if r["marker_after_kill"]),
            "seconds": round(time.perf_counter() - t_start, 1), "loadavg": loadavg(), "results": results}


# -- the jobs section ----------------------------------------------------------------------------------------
N_LINKERS = 300


def _jobs_vault(root: Path) -> Path:
    """A vault where one note has ``N_LINKERS`` inbound links (a move rewrites 300 files: seconds of work)."""
    v = root / "vault"
    (v / "notes").mkdir(parents=True)
    (v / "notes" / "alpha.md").write_text("---\naliases: [Alpha Note]\n---\n# Alpha\n\nbody " + "x " * 200 + "\n")
    (v / "notes" / "big.md").write_text("# Big\n\n" + "".join(f"line {i} of a long note\n" for i in range(3000)))
    for i in range(N_LINKERS):
        (v / "notes" / f"l{i:03d}.md").write_text(
            f"# Linker {i}\n\n- plain [[alpha]]\n- anchored [[notes/alpha#Alpha|the alpha]]\n- alias [[Alpha Note]]\n")
    return v


def _job(vault: Path, state: Path, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "REME_CRASH_AT"}
    env.update(REME_STATE_DIR=str(state), REME_EMBEDDER="none")
    return subprocess.Popen([sys.executable, "-m", "reme_tui.cli", "--vault", str(vault), "job", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _restart(vault: Path, state: Path) -> subprocess.Popen:
    """What the next start does: the app and ``--serve`` open the engine (finishing an interrupted move) and run a
    full sync; ``--refresh`` is the same without a UI."""
    env = {k: v for k, v in os.environ.items() if k != "REME_CRASH_AT"}
    env.update(REME_STATE_DIR=str(state), REME_EMBEDDER="none")
    return subprocess.Popen([sys.executable, "-m", "reme_tui.cli", "--refresh", "--no-vectors", "--vault", str(vault)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _link_targets(vault: Path) -> set[tuple[str, ...]]:
    from reme_engine.markdown.links import parse_links

    return {tuple(lk.target for lk in parse_links(p.read_text())) for p in (vault / "notes").glob("l*.md")}


def section_jobs(args, work: Path) -> dict:
    """``job move`` (300 linking notes), ``job write`` and ``job edit`` (a 3,000-line note) killed with SIGKILL at a
    uniform moment of their run, then one restart (``--refresh``: it opens the engine, which finishes an
    interrupted move, and syncs the vault, as the app and ``--serve`` do at start); checked: the move is complete or never happened (every linking note points at the one
    path the file is at), no intent record is left, the written note holds exactly the old or the new bytes, and
    the index equals a clean index of the same vault (files, chunks, links resolved and dangling)."""
    from reme_engine.vault.io import sweep_temp_files

    work.mkdir(parents=True)
    rng = random.Random(args.seed + 1)
    template = _jobs_vault(work / "template")
    big_old = (template / "notes" / "big.md").read_text()
    big_new = big_old.replace("line 1000 of", "LINE ONE THOUSAND of")
    ops = {
        "move": ("move", "src=notes/alpha.md", "dst=notes/gamma.md"),
        "write": ("write", "path=notes/big.md", f"content={big_new}"),
        "edit": ("edit", "path=notes/big.md", "old=line 1000 of", "new=LINE ONE THOUSAND of"),
    }
    windows: dict[str, float] = {}
    for name, argv in ops.items():  # calibration: how long each job runs, unkilled
        v = work / f"cal-{name}"
        shutil.copytree(template, v / "vault")
        st = v / "state"
        _job(v / "vault", st, "reindex").communicate(timeout=600)
        t0 = time.monotonic()
        p = _job(v / "vault", st, *argv)
        _, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"calibration of {name} failed: {err[-800:]}")
        windows[name] = round(time.monotonic() - t0, 3)
    log(f"job windows: {windows}")
    results, missed = [], 0
    t_start = time.perf_counter()
    while len(results) < args.trials:
        name = list(ops)[len(results) % len(ops)]
        t = work / f"t{len(results):03d}"
        shutil.copytree(template, t / "vault")
        vault, state = t / "vault", t / "state"
        _job(vault, state, "reindex").communicate(timeout=600)
        delay = rng.uniform(0, windows[name])
        p = _job(vault, state, *ops[name])
        time.sleep(delay)  # the kill moment itself is what is drawn at random
        if p.poll() is not None:
            p.communicate()
            missed += 1
            shutil.rmtree(t)
            continue
        p.send_signal(signal.SIGKILL)
        p.communicate()
        r = _restart(vault, state)
        out, err = r.communicate(timeout=600)
        problems = []
        if r.returncode != 0:
            problems.append(f"restart failed: {err[-300:]}")
        if list((state / "intents").glob("*.json")):
            problems.append("intent record left")
        if name == "move":
            at_src, at_dst = (vault / "notes/alpha.md").exists(), (vault / "notes/gamma.md").exists()
            targets = _link_targets(vault)
            want = {("alpha", "notes/alpha", "Alpha Note")} if at_src else {("gamma", "notes/gamma", "Alpha Note")}
            if at_src == at_dst:
                problems.append(f"note at src {at_src} and at dst {at_dst}")
            elif targets != want:
                problems.append(f"links half rewritten: {len(targets)} distinct target sets")
        else:
            text = (vault / "notes/big.md").read_text()
            if text not in (big_old, big_new):
                problems.append(f"note neither old nor new ({len(text)} chars)")
        temps = sweep_temp_files(vault, older_than_s=0)  # what a start a minute later removes
        # bytes set aside by a killed checked write/delete are settled by the sweep; nobody else saved here, so
        # none may be left hidden and none may have become a conflict copy (the base and our bytes are dropped)
        aside = [q.name for q in vault.rglob(".*") if q.name.endswith((".reme-swap", ".reme-deleting"))]
        copies = [q.name for q in vault.rglob("* (conflict *)*")]
        if aside or copies:
            problems.append(f"left set aside {aside[:3]}, conflict copies {copies[:3]}")
        trial = snapshot(state)
        clean_state = t / "clean-state"
        _job(vault, clean_state, "reindex").communicate(timeout=600)
        d = diff({k: trial[k] for k in ("files", "chunks", "links", "links_resolved", "links_dangling")},
                 snapshot(clean_state))
        problems += d
        results.append({"job": name, "kill_after_s": round(delay, 3), "survived": not problems,
                        "problems": problems, "temp_files_swept": len(temps)})
        log(f"trial {len(results)} {name} at {delay:.2f}s: {'ok' if not problems else problems}")
        shutil.rmtree(t)
    survived = sum(r["survived"] for r in results)
    by_job = {n: {"trials": sum(1 for r in results if r["job"] == n),
                  "survived": sum(1 for r in results if r["job"] == n and r["survived"])} for n in ops}
    return {"job_windows_s": windows, "trials": len(results), "survived": survived, "lost": len(results) - survived,
            "missed_kills_redrawn": missed, "by_job": by_job,
            "temp_files_swept": sum(r["temp_files_swept"] for r in results),
            "seconds": round(time.perf_counter() - t_start, 1), "loadavg": loadavg(), "results": results}


# -- the dream section ---------------------------------------------------------------------------------------
DREAM_SEED, DREAM_DATE = "2026-11-30", "2026-12-01"
#: 12 user notes + 5 app notes + 3 new names = 20 units, the default per-run unit budget (no overflow).
N_USER, N_APP, N_NEW = 12, 5, 3
BUCKETS = ("personal", "procedure", "wiki")
USER_ACTIONS = ("CREATE", "CORROBORATE", "REFINE", "CORRECT")  # CREATE of the user note's own name
APP_ACTIONS = ("CORROBORATE", "REFINE", "CORRECT")  # REFINE/CORRECT of an app note rewrite its body


class DreamScript:
    """The scripted model of the dream section: a deterministic reply per unit name, whatever the run, so an
    unkilled run and a killed-then-resumed one can be compared byte for byte. ``phase``: ``seed`` (create the
    app notes) or ``main``; ``latency``: seconds slept before each reply (the run must last long enough for a
    timed kill to land in every stage)."""

    def __init__(self, users: list[dict], latency: float) -> None:
        self.users = {Path(u["path"]).stem: u for u in users}
        self.latency = latency
        self.phase = "seed"
        self.calls = 0

    def _units(self, days: list[str]) -> list[dict]:
        app = [{"name": f"主题 {k}", "bucket": BUCKETS[k % 3], "summary": f"关于主题 {k} 的整理", "paths": days}
               for k in range(N_APP)]
        if self.phase == "seed":
            return app
        users = [{"name": stem, "bucket": BUCKETS[(BUCKETS.index(u["bucket"]) + 1) % 3],  # another bucket
                  "summary": f"更新 {stem}", "paths": days} for stem, u in self.users.items()]
        new = [{"name": f"新主题 {k}", "bucket": "wiki", "summary": f"新发现 {k}", "paths": days} for k in range(N_NEW)]
        return users + app + new

    def __call__(self, path: str, body: dict):
        import re

        from reme_engine.dream.safety import slugify
        from wire.server import Delay, openai_chat

        self.calls += 1
        msg = body["messages"][-1]["content"]
        unit = re.search(r"^UNIT\nname: (.*)$", msg, re.M)
        days = sorted(set(re.findall(r"^=== FILE: (.*?) ===$", msg, re.M)))
        if unit is None:  # extract
            reply = {"units": self._units(days)}
        else:
            name = unit.group(1)
            offered = re.findall(r"^=== NODE: (.*?) \((?:editable|append-only)", msg, re.M)
            mine = [p for p in offered if Path(p).stem in (name, slugify(name))]
            if name in self.users:
                u = self.users[name]
                action = USER_ACTIONS[list(self.users).index(name) % 4]
                target = u["path"]
                other = BUCKETS[(BUCKETS.index(u["bucket"]) + 1) % 3]
            elif name.startswith("主题"):
                k = int(name.split()[-1])
                action = "CREATE" if self.phase == "seed" else APP_ACTIONS[k % 3]
                target = mine[0] if mine else ""
                other = BUCKETS[k % 3]
            else:
                action, target, other = "CREATE", "", "wiki"
            if action != "CREATE" and target not in offered:
                action = "CREATE"  # recall did not offer it: a CREATE of its name (code turns it into an update)
            material = f"- {DREAM_DATE if self.phase == 'main' else DREAM_SEED} 关于 {name} 的新材料"
            if action == "CREATE":
                reply = {"action": "CREATE", "target": f"digest/{other}/{slugify(name)}.md", "name": name,
                         "description": f"{name} 的要点", "body": f"# {name}\n\n{material}"}
            else:
                reply = {"action": action, "target": target, "name": name, "description": f"{name}（{action}）",
                         "body": f"# {name}\n\n重写的正文（{action}）\n\n{material}", "update": material,
                         "evidence": f"{action.lower()} {name}"}
            reply["sources"] = days
        return 200, Delay(self.latency, openai_chat(json.dumps(reply, ensure_ascii=False))[1])


def _dream_vault(root: Path) -> tuple[Path, list[dict]]:
    """User notes (real notes of knowledge-garden-zh, their bytes as they are; one in four CRLF, one in four with a
    BOM, one in four without a final newline) in ``digest/{personal,procedure,wiki}/``; daily notes of both
    dates (a note naming the topics plus two real daily notes of the vault)."""
    from bench_provenance import pick_notes

    v = root / "vault"
    users = []
    for i, src in enumerate(pick_notes(N_USER, 11)):
        data = src.read_bytes()
        if i % 4 == 1:
            data = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        elif i % 4 == 2:
            data = b"\xef\xbb\xbf" + data
        elif i % 4 == 3:
            data = data.rstrip(b"\r\n")
        rel = f"digest/{BUCKETS[i % 3]}/{src.name}"
        (v / rel).parent.mkdir(parents=True, exist_ok=True)
        (v / rel).write_bytes(data)
        users.append({"path": rel, "bucket": BUCKETS[i % 3], "user": data})
    real_days = sorted((VAULT_ZH / "Calendar" / "Daily notes").glob("*.md"))
    for date, picks in ((DREAM_SEED, real_days[:2]), (DREAM_DATE, real_days[2:4])):
        d = v / "daily" / date
        d.mkdir(parents=True)
        (d / "notes.md").write_text(f"# {date}\n\n" + "\n".join(f"- {Path(u['path']).stem}" for u in users) + "\n",
                                    encoding="utf-8")
        for p in picks:
            shutil.copy2(p, d / p.name)
    return v, users


def _dream_env(state: Path, base_url: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "REME_CRASH_AT" and not k.startswith("REME_LLM_")}
    env.update(REME_STATE_DIR=str(state), REME_EMBEDDER="none")
    if base_url:
        env.update(REME_LLM_PROVIDER="openai", REME_LLM_MODEL="m", REME_LLM_BASE_URL=base_url, REME_LLM_API_KEY="k")
    return env


def _dream_job(vault: Path, state: Path, base_url: str, date: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "reme_tui.cli", "--vault", str(vault), "job", "auto_dream",
                             f"date={date}"], env=_dream_env(state, base_url), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _digest_bytes(vault: Path) -> dict[str, bytes]:
    return {p.relative_to(vault).as_posix(): p.read_bytes() for p in sorted((vault / "digest").rglob("*"))
            if p.is_file()}


def _journal_runs(state: Path) -> list[tuple[str, str]]:
    c = sqlite3.connect(f"file:{state / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        return list(c.execute("SELECT run_id, status FROM runs ORDER BY started_at"))
    finally:
        c.close()


def _dream_stages(results: list[dict], units: int) -> dict:
    """Trials by where the kill landed, from the LLM requests the server had received: none (start-up: imports,
    open, scan), the extract call, a unit's integrate call (recall, decide, write), all of them (the last unit's
    write, finish)."""
    def stage(calls: int) -> str:
        return ("start-up" if calls == 0 else "extract" if calls == 1 else
                "integrate" if calls <= units else "last unit or finish")
    out: dict = {}
    for r in results:
        d = out.setdefault(stage(r["llm_calls_before_kill"]), {"trials": 0, "survived": 0})
        d["trials"] += 1
        d["survived"] += r["survived"]
    return out


def section_dream(args, work: Path) -> dict:
    """``reme-tui job auto_dream`` through the scripted OpenAI-compatible server killed with SIGKILL at a uniform
    moment of its unkilled run time, then one restart (``--refresh --no-vectors``, no LLM: what the app does at
    start), then the checks; then a second ``job auto_dream`` of the same day, then the checks again (see
    bench/RESULTS.md § Crash consistency, "Dream runs killed midway")."""
    from bench_provenance import lost_lines

    from reme_engine.vault.io import is_app_temp, sweep_temp_files
    from wire.server import ScriptedServer

    work.mkdir(parents=True)
    rng = random.Random(args.seed + 2)
    tvault, users = _dream_vault(work / "template")
    tstate = work / "template" / "state"
    script = DreamScript(users, args.latency)
    with ScriptedServer(default=script) as srv:
        p = _dream_job(tvault, tstate, srv.base_url, DREAM_SEED)  # the app notes the main run will update
        out, err = p.communicate(timeout=600)
        seed = json.loads(out) if p.returncode == 0 else None
        if not seed or seed.get("created") != N_APP:
            raise SystemExit(f"seed run failed (rc {p.returncode}): {out[-800:]} {err[-800:]}")
        script.phase = "main"
        template = _digest_bytes(tvault)

        def fresh(tag: str) -> tuple[Path, Path]:
            t = work / tag
            shutil.copytree(tvault, t / "vault", symlinks=True)
            shutil.copytree(tstate, t / "state")
            return t / "vault", t / "state"

        refs, windows, cpu = [], [], []
        for i in range(2):  # calibration, twice: the unkilled run's time, and that it is deterministic
            v, s = fresh(f"cal-{i}")
            r0 = os.times()
            t0 = time.monotonic()
            p = _dream_job(v, s, srv.base_url, DREAM_DATE)
            out, err = p.communicate(timeout=600)
            windows.append(time.monotonic() - t0)
            r1 = os.times()
            cpu.append(round(r1.children_user + r1.children_system - r0.children_user - r0.children_system, 2))
            rep = json.loads(out) if p.returncode == 0 else {}
            if rep.get("status") != "ok" or rep.get("units") != N_USER + N_APP + N_NEW:
                raise SystemExit(f"calibration dream run failed (rc {p.returncode}): {out[-1500:]} {err[-800:]}")
            refs.append(_digest_bytes(v))
            calib_report = {k: rep.get(k) for k in ("units", "created", "corroborated", "refined", "corrected",
                                                    "failed")} | {"llm_calls": rep.get("llm", {}).get("calls")}
            shutil.rmtree(v.parent)
        ref = refs[0]
        if refs[0] != refs[1]:
            raise SystemExit(f"two unkilled runs differ: {sorted(k for k in ref if refs[1].get(k) != ref[k])}")
        window = max(windows)
        log(f"dream: seed {seed['created']} app notes; unkilled run {[round(w, 2) for w in windows]} s "
            f"(cpu {cpu} s), {calib_report}; {len(ref)} digest files after it")

        def check(vault: Path, final: bool) -> list[str]:
            """User lines kept; each digest file old or new (or exactly the unkilled run's result when final)."""
            probs = []
            now = _digest_bytes(vault)
            for u in users:
                lost = lost_lines(u["user"], now.get(u["path"], b""))
                if lost:
                    probs.append(f"{u['path']}: {lost} user lines lost")
            for k in sorted(set(now) | set(ref)):
                if final:
                    if now.get(k) != ref.get(k):
                        probs.append(f"{k}: differs from an unkilled run" + (" (missing)" if k not in now else ""))
                elif k in now and now[k] not in (template.get(k), ref.get(k)):
                    probs.append(f"{k}: neither old nor new bytes ({len(now[k])} bytes)")
            return probs

        results, missed = [], 0
        t_start = time.perf_counter()
        r_start = os.times()
        while len(results) < args.trials:
            if args.max_minutes and time.perf_counter() - t_start > 60 * args.max_minutes:
                log(f"dream: stopping after {len(results)} trials (--max-minutes {args.max_minutes})")
                break
            n = len(results)
            tag = f"t{n:03d}-{missed}"
            vault, state = fresh(tag)
            delay = rng.uniform(0, window)
            srv.requests.clear()
            p = _dream_job(vault, state, srv.base_url, DREAM_DATE)
            time.sleep(delay)
            if p.poll() is not None:
                p.communicate()
                missed += 1
                shutil.rmtree(vault.parent)
                if missed > 3 * args.trials:
                    raise SystemExit("too many missed kills")
                continue
            p.send_signal(signal.SIGKILL)
            p.communicate()
            calls_before_kill = sum(1 for r in srv.requests if r["path"].endswith("/chat/completions"))
            written = sum(1 for k, b in _digest_bytes(vault).items() if template.get(k) != b)
            rst = subprocess.run([sys.executable, "-m", "reme_tui.cli", "--refresh", "--no-vectors", "--vault",
                                  str(vault)], env=_dream_env(state, None), capture_output=True, text=True,
                                 timeout=600)
            problems = []
            if rst.returncode != 0 or "Traceback" in rst.stderr:
                problems.append(f"restart failed rc {rst.returncode}: {rst.stderr[-300:]}")
            problems += check(vault, final=False)
            temps = [q for q in vault.rglob(".*") if q.is_file() and is_app_temp(q.name)]
            sweep_temp_files(vault, older_than_s=0)  # what a start a minute later removes
            if [q for q in vault.rglob(".*") if q.is_file() and is_app_temp(q.name)]:
                problems.append("temp files left after the sweep")
            trial = snapshot(state)
            clean_state = vault.parent / "clean-state"
            eng = open_engine(vault, clean_state, embed=False)  # a clean index, in this process
            try:
                eng.index(vectors=False)
            finally:
                eng.close()
            keys = ("files", "chunks", "links", "links_resolved", "links_dangling")
            problems += diff({k: trial[k] for k in keys}, {k: v for k, v in snapshot(clean_state).items() if k in keys})
            # the second run: of the same day, so the killed run's inputs (never checkpointed) are done again
            srv.requests.clear()
            p2 = _dream_job(vault, state, srv.base_url, DREAM_DATE)
            out2, err2 = p2.communicate(timeout=600)
            rep2 = json.loads(out2) if p2.returncode == 0 else {}
            # "nothing changed": the kill came after the run had checkpointed its inputs (it was complete)
            if rep2.get("status") not in ("ok", "nothing changed"):
                problems.append(f"second run: rc {p2.returncode} status {rep2.get('status')}: {err2[-300:]}")
            second = check(vault, final=True)
            problems += [f"after the second run: {x}" for x in second]
            running = [r for r in _journal_runs(state) if r[1] == "running"]
            if running:
                problems.append(f"{len(running)} journal run(s) left 'running'")
            rec = {"trial": n, "kill_after_s": round(delay, 3), "llm_calls_before_kill": calls_before_kill,
                   "digest_files_written_before_kill": written, "temp_files_left_by_kill": len(temps),
                   "second_run_status": rep2.get("status"), "second_run_resumed": rep2.get("resumed"),
                   "second_run_llm_calls": rep2.get("llm", {}).get("calls"),
                   "second_run": {k: rep2.get(k) for k in ("units", "created", "corroborated", "refined",
                                                           "corrected", "failed")},
                   "restart_recovered": [ln for ln in rst.stdout.splitlines() if ln.startswith(("recovered",
                                                                                              "repair"))],
                   "survived": not problems, "problems": problems}
            results.append(rec)
            log(f"trial {n} kill at {delay:.2f}s (after {calls_before_kill} LLM calls, {written} files written): "
                f"{'ok' if not problems else problems[:4]}")
            shutil.rmtree(vault.parent)
    r_end = os.times()
    survived = sum(r["survived"] for r in results)
    return {"vault": {"user_notes": N_USER, "app_notes": N_APP, "new_names": N_NEW,
                      "user_lines": sum(len(u["user"].splitlines()) for u in users),
                      "daily_notes_per_day": 3},
            "llm_latency_s": args.latency, "unkilled_run_s": [round(w, 2) for w in windows],
            "unkilled_run_cpu_s": cpu, "unkilled_run": calib_report,
            "trials": len(results), "survived": survived, "lost": len(results) - survived,
            "missed_kills_redrawn": missed,
            "user_lines_lost": sum(1 for r in results for x in r["problems"] if "user lines lost" in x),
            "kills_by_llm_calls_done": {str(k): sum(1 for r in results if r["llm_calls_before_kill"] == k)
                                        for k in sorted({r["llm_calls_before_kill"] for r in results})},
            "kills_by_stage": _dream_stages(results, N_USER + N_APP + N_NEW),
            "temp_files_left_by_kills": sum(r["temp_files_left_by_kill"] for r in results),
            "second_runs": {"resumed": sum(1 for r in results if r["second_run_resumed"]),
                            "nothing_changed": sum(1 for r in results if r["second_run_status"] == "nothing changed"),
                            "fresh": sum(1 for r in results if r["second_run_status"] == "ok"
                                         and not r["second_run_resumed"]),
                            "llm_calls": sum(r["second_run_llm_calls"] or 0 for r in results)},
            "seconds": round(time.perf_counter() - t_start, 1),
            "children_cpu_s": round(r_end.children_user + r_end.children_system
                                    - r_start.children_user - r_start.children_system, 1),
            "loadavg": loadavg(), "results": results}


SECTIONS = {"refresh": section_refresh, "jobs": section_jobs, "dream": section_dream}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections ({', '.join(SECTIONS)})")
    ap.add_argument("--trials", type=int, default=50, help="kill trials per section (default 50)")
    ap.add_argument("--quick", action="store_true", help="8 trials per section")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--drop", type=float, default=0.1,
                    help="cold trials: share of the vectors missing from the embedding cache (default 0.1)")
    ap.add_argument("--latency", type=float, default=0.15,
                    help="dream: seconds the scripted LLM server waits before each reply (default 0.15)")
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="dream: draw no new trial after this many minutes (0: no limit)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = ap.parse_args()
    if args.quick:
        args.trials = 8
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        raise SystemExit(f"unknown section(s): {', '.join(unknown)} (known: {', '.join(SECTIONS)})")
    with bench_tmpdir("chaos", args.keep) as tmp:
        out = {"machine": machine(), "command": " ".join(["bench/bench_chaos.py", *sys.argv[1:]]), "sections": {}}
        for name in names:
            log(f"section {name}")
            out["sections"][name] = SECTIONS[name](args, tmp / name)
        out["trials"] = sum(s["trials"] for s in out["sections"].values())
        out["survived"] = sum(s["survived"] for s in out["sections"].values())
        out["lost"] = sum(s["lost"] for s in out["sections"].values())
        emit(out)


if __name__ == "__main__":
    main()
