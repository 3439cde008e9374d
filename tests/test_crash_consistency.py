"""A crash-consistent index (ARCHITECTURE §8): a sync killed anywhere leaves the previous consistent state or one the
next open repairs; a corrupt database is moved aside and rebuilt; orphan vectors are dropped; a deleted state dir is
rebuilt while the background runs.

Kills are real: a ``reme-tui --refresh`` subprocess dies by SIGKILL at a named crash point
(``REME_CRASH_AT``, :mod:`reme_engine.crashpoints`), then a second ``--refresh`` runs, and the index is compared
with a clean index of the same vault.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest


def _write(p: Path, text: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


@pytest.fixture
def big_vault(tmp_path) -> Path:
    """300 linked notes (more than one sync batch) plus an attachment: links by stem, by path, and dangling."""
    from reme_engine.index.indexer import BATCH_FILES

    v = tmp_path / "vault"
    n = BATCH_FILES + 44
    for i in range(n):
        _write(v / f"notes/n{i:03d}.md", f"# Note {i}\n\nabout topic{i % 7} and [[n{(i + 1) % n:03d}]], "
               f"[[notes/n{(i * 7) % n:03d}|seven]], [[missing {i % 5}]] ![[pic.png]]\n")
    (v / "pic.png").write_bytes(b"\x89PNG")
    return v


@pytest.fixture
def small_vault(tmp_path) -> Path:
    v = tmp_path / "small"
    for i in range(12):
        _write(v / f"notes/s{i:02d}.md", f"# Small {i}\n\nA paragraph about subject {i} with enough words to embed. "
               f"See [[s{(i + 1) % 12:02d}]] and [[nowhere]].\n")
    return v


def _refresh(vault: Path, state: Path, crash_at: str | None = None, embedder: str = "none"):
    env = {k: v for k, v in os.environ.items() if k != "REME_CRASH_AT"}
    env["REME_NO_PARALLEL_INDEX"] = "1"
    if crash_at:
        env["REME_CRASH_AT"] = crash_at
    return subprocess.run([sys.executable, "-m", "reme_tui.cli", "--refresh", "--vault", str(vault),
                           "--state-dir", str(state), "--embedder", embedder, "--date", "2026-11-30"],
                          env=env, capture_output=True, text=True, timeout=300)


def _snapshot(state: Path) -> dict:
    """Everything derived from the vault, with no row ids (they differ between index histories)."""
    c = sqlite3.connect(state / "index.sqlite")
    try:
        files = sorted(c.execute("SELECT path, sha FROM files"))
        chunks = sorted(c.execute("SELECT c.id, f.path, c.text_hash FROM chunks c JOIN files f ON f.id=c.file_id"))
        links = sorted(c.execute("SELECT f.path, l.target, l.line, l.resolved, l.ambiguous, l.virtual "
                                 "FROM links l JOIN files f ON f.id=l.src_id"))
        fts = c.execute("SELECT count(*) FROM chunks_fts").fetchone()[0]
        marker = c.execute("SELECT value FROM meta WHERE key='sync_interrupted'").fetchone()
    finally:
        c.close()
    return {"files": files, "chunks": chunks, "links": links, "fts": fts, "marker": marker,
            "dangling": sum(1 for x in links if x[3] is None)}


def _clean(vault: Path, tmp: Path) -> dict:
    """A clean index of ``vault`` (fresh state dir, in this process)."""
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine

    state = tmp / "clean-state"
    with Engine.open(load_settings({"vault": str(vault), "state_dir": str(state), "embedder": {"kind": "none"}},
                                   env={})) as e:
        e.index(vectors=False)
    return _snapshot(state)


@pytest.mark.parametrize("point", ["sync.after_batch", "sync.in_links", "sync.after_links"])
def test_cold_refresh_killed_anywhere_is_whole_after_one_restart(big_vault, tmp_path, point):
    state = tmp_path / "state"
    p = _refresh(big_vault, state, crash_at=point)
    assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr[-2000:])
    after_crash = _snapshot(state)
    # batches committed (search works early), but the link pass did not: the marker says so
    assert after_crash["files"] and after_crash["marker"] is not None
    p = _refresh(big_vault, state)
    assert p.returncode == 0, p.stderr
    got = _snapshot(state)
    want = _clean(big_vault, tmp_path)
    assert got == want
    assert want["dangling"] == len(want["files"])  # one [[missing k]] per note: the only dangling ones
    if after_crash["marker"] is not None:
        assert "repair     index repaired: the last sync was interrupted" in p.stdout, p.stdout


def test_incremental_sync_killed_keeps_the_previous_state(big_vault, tmp_path):
    """A sync that fits in one transaction, killed before its commit, leaves the index exactly as it was."""
    state = tmp_path / "state"
    assert _refresh(big_vault, state).returncode == 0
    before = _snapshot(state)
    (big_vault / "notes/n001.md").rename(big_vault / "notes/renamed.md")
    (big_vault / "notes/n002.md").unlink()
    _write(big_vault / "notes/n003.md", "# Three\n\nnow links [[renamed]] and [[n002]]\n")
    for point in ("sync.in_links", "sync.after_links"):
        p = _refresh(big_vault, state, crash_at=point)
        assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]
        assert _snapshot(state) == before, point
    assert _refresh(big_vault, state).returncode == 0
    assert _snapshot(state) == _clean(big_vault, tmp_path)


def test_open_repairs_links_of_an_interrupted_sync(big_vault, tmp_path, make_engine):
    """The engine's open finishes the link pass a killed sync left (not only the next --refresh)."""
    state = tmp_path / "state"
    p = _refresh(big_vault, state, crash_at="sync.after_keyword")
    assert p.returncode == -signal.SIGKILL
    assert _snapshot(state)["dangling"] == _snapshot(state)["links"].__len__()  # the bug: everything dangling
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine

    e = Engine.open(load_settings({"vault": str(big_vault), "state_dir": str(state), "embedder": {"kind": "none"}},
                                  env={}))
    try:
        assert e.repair_notice and "interrupted" in e.repair_notice
        assert "interrupted" in e.status()["repair_notice"]
        chk = e.indexer.check_links(sample=None)
        assert chk["stale"] == 0 and chk["mismatched"] == 0 and chk["checked"] == chk["links"] > 0
        hc = e.health_check()
        assert hc["ok"] and hc["checks"]["sync"].startswith("ok") and hc["checks"]["links"].startswith("ok")
        assert hc["checks"]["store"].startswith("ok")
    finally:
        e.close()


def test_vector_pass_killed_after_commit_is_whole_after_restart(small_vault, tmp_path):
    """Killed between a vector batch's commit and the faiss save: the restart gives every embedded chunk its
    vector and keeps no vector without a chunk."""
    state = tmp_path / "state"
    p = _refresh(small_vault, state, crash_at="embed.after_commit", embedder="offline")
    assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]
    p = _refresh(small_vault, state, embedder="offline")
    assert p.returncode == 0, p.stderr
    import faiss

    faiss_files = list(state.glob("vectors-*.faiss"))
    assert len(faiss_files) == 1
    idx = faiss.read_index(str(faiss_files[0]))
    stamp = json.loads(faiss_files[0].with_suffix(".json").read_text())
    ids = set(int(i) for i in faiss.vector_to_array(idx.id_map)) - set(stamp.get("tombstones", ()))
    c = sqlite3.connect(state / "index.sqlite")
    marked = {r[0] for r in c.execute("SELECT id FROM chunks WHERE has_vec=1")}
    pending = c.execute("SELECT count(*) FROM chunks WHERE has_vec=0").fetchone()[0]
    c.close()
    assert ids == marked and pending == 0 and ids


def _scribble(path: Path) -> None:
    """Random bytes into every page of a database file but the first (the header stays readable)."""
    import random

    size = path.stat().st_size
    rnd = random.Random(9)
    with open(path, "r+b") as f:
        for off in range(4096, size, 4096):
            f.seek(off + 4096 - 600)  # cell content sits at the end of a b-tree page
            f.write(bytes(rnd.randrange(256) for _ in range(512)))


def test_corrupt_database_is_detected_at_open_moved_aside_and_rebuilt(small_vault, tmp_path):
    state = tmp_path / "state"
    assert _refresh(small_vault, state).returncode == 0
    _scribble(state / "index.sqlite")
    p = _refresh(small_vault, state)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    assert "repair     index repaired: index.sqlite was corrupt: moved aside" in p.stdout, p.stdout
    assert list(state.glob("index.sqlite.corrupt-*"))
    assert _snapshot(state) == _clean(small_vault, tmp_path)


def test_reindex_clear_on_a_corrupt_database_rebuilds(small_vault, tmp_path):
    """Corruption the open check does not see (its stamp matches): ``job reindex clear=true`` still rebuilds."""
    state = tmp_path / "state"
    assert _refresh(small_vault, state).returncode == 0
    _scribble(state / "index.sqlite")
    from reme_engine.index.store import Store

    (state / "index.sqlite.clean").write_text(json.dumps(Store._stamp(_StampOf(state))))
    env = {k: v for k, v in os.environ.items() if k != "REME_CRASH_AT"}
    p = subprocess.run([sys.executable, "-m", "reme_tui.cli", "job", "reindex", "clear=true", "vectors=false",
                        "--vault", str(small_vault), "--state-dir", str(state), "--embedder", "none"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    out = json.loads(p.stdout)
    assert out["success"], out
    assert list(state.glob("index.sqlite.corrupt-*"))
    assert _snapshot(state) == _clean(small_vault, tmp_path)


class _StampOf:
    """Just enough of a Store for ``Store._stamp`` (the stamp a clean close would write)."""

    def __init__(self, state: Path) -> None:
        self.db_path = state / "index.sqlite"
        self.emb_path = state / "embeddings.sqlite"


def test_orphan_vectors_of_chunks_changed_elsewhere_are_dropped(make_engine, small_vault, embedder):
    """Another process (here: a second engine) rewrites notes while this one has the vectors loaded; the
    saves of this one and the next open keep no vector whose chunk is gone."""
    from reme_engine.engine import Engine

    a = make_engine(small_vault)
    a.index()
    notes = sorted(small_vault.rglob("*.md"))[:5]
    b = Engine.open(a.settings, embedder=embedder)
    try:
        for i, p in enumerate(notes):
            p.write_text(p.read_text(encoding="utf-8") + f"\n\nA new closing paragraph number {i} here.\n",
                         encoding="utf-8")
            b.index_paths([str(p.relative_to(small_vault))], vectors=False)  # b never loads the vectors
    finally:
        b.close()
    a.index()  # a: finds them unchanged (b indexed them), embeds the new chunks, saves
    live = {r[0] for r in a.store.conn.execute("SELECT id FROM chunks WHERE has_vec=1")}
    assert set(a.vectors.index._ids) == live
    a.close()
    c = Engine.open(a.settings, embedder=embedder)
    try:
        c.vectors.open()
        assert set(c.vectors.index._ids) == {r[0] for r in c.store.conn.execute("SELECT id FROM chunks WHERE has_vec=1")}
        assert c.health_check()["checks"]["vectors"].startswith("ok")
    finally:
        c.close()


def test_orphans_already_in_the_file_are_dropped_at_open(make_engine, small_vault, embedder):
    import numpy as np

    from reme_engine.engine import Engine

    a = make_engine(small_vault)
    a.index()
    ghost = np.asarray([123456789], dtype=np.int64)
    vec = np.ones((1, a.vectors.dim), dtype=np.float32)
    a.vectors.index.add(ghost, vec / np.linalg.norm(vec))  # as a stale process's save would have left it
    a.vectors.save()
    a.close()
    b = Engine.open(a.settings, embedder=embedder)
    try:
        b.vectors.open()
        assert 123456789 not in b.vectors.index
    finally:
        b.close()


def test_deleted_state_dir_is_rebuilt_while_the_background_runs(make_engine, demo_vault, monkeypatch):
    import shutil
    import time

    from reme_engine.engine import Engine

    monkeypatch.setattr(Engine, "STATE_WATCH_S", 0.1)
    e = make_engine(demo_vault, embed=False)
    e.index()
    n_files = e.store.counts()["files"]
    events: list[dict] = []
    e.start_background(on_event=events.append, watch=True, schedule=False)
    shutil.rmtree(e.state_dir)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (e.state_dir / "index.sqlite").exists():
        time.sleep(0.05)
    while time.monotonic() < deadline and not any(ev.get("event") == "index_repaired" for ev in events):
        time.sleep(0.05)
    assert any(ev.get("event") == "index_repaired" for ev in events)
    assert "deleted or replaced: rebuilt from the vault" in e.repair_notice
    c = sqlite3.connect(e.state_dir / "index.sqlite")
    try:
        assert c.execute("SELECT count(*) FROM files").fetchone()[0] == n_files  # a new file others can read
    finally:
        c.close()
    # and indexing goes on: a new note reaches the rebuilt index through the watcher
    _write(demo_vault / "after-rebuild.md", "# After\n\nzanzibarword\n")
    while time.monotonic() < deadline and not e.search("zanzibarword", mode="keyword").hits:
        time.sleep(0.05)
    assert e.search("zanzibarword", mode="keyword").hits


def test_cron_run_refused_by_the_writer_lock_is_recorded_as_skipped(make_engine, demo_vault):
    e = make_engine(demo_vault, embed=False)
    e.start_background(watch=False, schedule=True)
    held = e.writer_lock("test holder")
    assert held.acquire(blocking=False)
    try:
        rec = e.scheduler.run_now("proactive_refresh")
    finally:
        held.release()
    assert rec["status"] == "skipped", rec
    assert rec["result"]["skipped"].startswith("another run holds the lock"), rec
    assert e.scheduler.last_runs()["proactive_refresh"]["status"] == "skipped"


def test_health_check_finds_and_repairs_corruption_the_open_did_not_see(make_engine, small_vault):
    from reme_engine.engine import Engine
    from reme_engine.index.store import Store

    e = make_engine(small_vault, embed=False)
    e.index()
    state, settings = e.state_dir, e.settings
    e.close()
    _scribble(state / "index.sqlite")
    (state / "index.sqlite.clean").write_text(json.dumps(Store._stamp(_StampOf(state))))  # looks clean
    e2 = Engine.open(settings)
    try:
        hc = e2.health_check()  # never raises
        assert hc["ok"], hc
        assert list(state.glob("index.sqlite.corrupt-*"))
        assert hc["checks"]["store"].startswith(("ok", "repaired")) and "repair" in hc["checks"], hc["checks"]
        e2.index()
        assert e2.search("subject", mode="keyword").hits
        assert e2.health_check()["checks"]["links"].startswith("ok")
    finally:
        e2.close()


# -- a dream run killed midway (issue 9) -------------------------------------------------------------------------
DREAM_DAY = "2026-11-30"
_USER_NOTES = {  # bucket/name → bytes the user wrote (CRLF, BOM, no final newline included)
    "personal/工作偏好.md": "---\ndescription: 我的工作习惯\n---\n# 工作偏好\n\n早上写作，下午开会。\n- 不用 Slack\n".encode(),
    "procedure/Deploy steps.md": b"# Deploy steps\r\n\r\n1. build\r\n2. ship\r\n",
    "wiki/Pinning.md": b"\xef\xbb\xbf# Pinning\n\nPin every version.\n",
    "wiki/Caching.md": b"# Caching\n\nCache reads, never writes.",
}
_USER_ACTIONS = {"工作偏好": "CREATE", "Deploy steps": "CORROBORATE", "Pinning": "REFINE", "Caching": "CORRECT"}
_APP_ACTIONS = {"Topic 0": "REFINE", "Topic 1": "CORRECT"}


def _dream_script(phase: dict):
    """A scripted model: the same reply for a unit whatever the run (so a killed and resumed run can be compared
    with an unkilled one byte for byte). ``phase["seed"]``: the first run only creates the two app notes."""
    import re

    from reme_engine.dream.safety import slugify
    from wire.server import openai_chat

    def handler(path, body):
        msg = body["messages"][-1]["content"]
        days = sorted(set(re.findall(r"^=== FILE: (.*?) ===$", msg, re.M)))
        unit = re.search(r"^UNIT\nname: (.*)$", msg, re.M)
        phase["calls"].append(unit.group(1) if unit else "extract")
        if unit is None:
            names = ["Topic 0", "Topic 1"] + ([] if phase["seed"] else [*_USER_ACTIONS, "Fresh idea"])
            return openai_chat(json.dumps({"units": [{"name": n, "bucket": "wiki", "summary": f"about {n}",
                                                      "paths": days} for n in names]}, ensure_ascii=False))
        name = unit.group(1)
        offered = re.findall(r"^=== NODE: (.*?) \((?:editable|append-only)", msg, re.M)
        mine = [p for p in offered if Path(p).stem in (name, slugify(name))]
        action = "CREATE" if phase["seed"] else {**_USER_ACTIONS, **_APP_ACTIONS}.get(name, "CREATE")
        if action != "CREATE" and not mine:
            action = "CREATE"
        material = f"- {'seed' if phase['seed'] else 'new'} material about {name}"
        reply = {"action": action, "target": mine[0] if action != "CREATE" else f"digest/wiki/{slugify(name)}.md",
                 "name": name, "description": f"{name} ({action})", "body": f"# {name}\n\nrewritten\n\n{material}",
                 "update": material, "evidence": f"{action.lower()} {name}", "sources": days}
        return openai_chat(json.dumps(reply, ensure_ascii=False))

    return handler


def _dream_vault(root: Path) -> Path:
    v = root / "vault"
    for rel, data in _USER_NOTES.items():
        (v / "digest" / rel).parent.mkdir(parents=True, exist_ok=True)
        (v / "digest" / rel).write_bytes(data)
    _write(v / "daily/2026-11-29/notes.md", "# 29\n\n- Topic 0 and Topic 1\n")
    _write(v / f"daily/{DREAM_DAY}/notes.md", "# 30\n\n- " + "\n- ".join([*_USER_ACTIONS, "Topic 0", "Fresh idea"]))
    return v


def _dream_job(vault: Path, state: Path, base_url: str, crash_at: str | None = None):
    env = {k: v for k, v in os.environ.items() if k != "REME_CRASH_AT" and not k.startswith("REME_LLM_")}
    env.update(REME_STATE_DIR=str(state), REME_EMBEDDER="none", REME_LLM_PROVIDER="openai", REME_LLM_MODEL="m",
               REME_LLM_BASE_URL=base_url, REME_LLM_API_KEY="k", REME_NO_PARALLEL_INDEX="1")
    if crash_at:
        env["REME_CRASH_AT"] = crash_at
    return subprocess.run([sys.executable, "-m", "reme_tui.cli", "--vault", str(vault), "job", "auto_dream",
                           f"date={DREAM_DAY}"], env=env, capture_output=True, text=True, timeout=300)


def _digest(vault: Path) -> dict[str, bytes]:
    return {p.relative_to(vault).as_posix(): p.read_bytes() for p in sorted((vault / "digest").rglob("*"))
            if p.is_file()}


def test_dream_run_killed_at_each_step_resumes_to_what_an_unkilled_run_writes(tmp_path):
    """One dream run over 7 units — CREATE of a user note's name, CORROBORATE, REFINE and CORRECT of user notes,
    REFINE and CORRECT (body rewrites) of app notes, a new node — killed with SIGKILL at each step in turn: after
    extract, before a write is published, between publishing and journaling, after a write, after the journal
    run is closed, after the checkpoint. Each next run resumes; the end state is byte for byte the unkilled run's,
    no user line is lost, no unit's LLM call is repeated except the one cut at its write, the journal holds one
    finished run whose revert gives back the vault as it was, and the index equals a clean one (the restart's sync
    has nothing left to do)."""
    import shutil

    from reme_engine.config import LLMSettings, load_settings
    from reme_engine.engine import Engine
    from reme_engine.llm.client import make_client
    from test_provenance import lost_lines
    from wire.server import ScriptedServer

    phase = {"seed": True, "calls": []}
    template = _dream_vault(tmp_path / "t")
    tstate = tmp_path / "t" / "state"
    with ScriptedServer(default=_dream_script(phase)) as srv:
        llm = make_client(LLMSettings(provider="openai", model="m", base_url=srv.base_url, api_key="k",
                                      max_retries=0))

        def in_process(vault: Path, state: Path, date: str) -> dict:
            s = load_settings({"vault": str(vault), "state_dir": str(state), "embedder": {"kind": "none"}}, env={})
            with Engine.open(s) as e:
                return e.auto_dream(date, llm=llm).to_dict()

        assert in_process(template, tstate, "2026-11-29")["created"] == 2  # the app notes
        phase["seed"] = False
        before = _digest(template)
        ref_vault, ref_state = tmp_path / "ref" / "vault", tmp_path / "ref" / "state"
        shutil.copytree(template, ref_vault)
        shutil.copytree(tstate, ref_state)
        ref = in_process(ref_vault, ref_state, DREAM_DAY)
        assert ref["status"] == "ok" and ref["units"] == 7 and ref["failed"] == 0, ref
        assert (ref["created"], ref["corroborated"], ref["refined"], ref["corrected"]) == (1, 1, 3, 2), ref
        want = _digest(ref_vault)

        vault, state = tmp_path / "v" / "vault", tmp_path / "v" / "state"
        shutil.copytree(template, vault)
        shutil.copytree(tstate, state)
        phase["calls"].clear()
        points = ["dream.after_extract", "dream.before_write_1", "journal.after_publish", "dream.after_write_3",
                  "dream.after_run_closed", "dream.after_checkpoint"]
        for point in points:
            p = _dream_job(vault, state, srv.base_url, crash_at=point)
            assert p.returncode == -signal.SIGKILL, (point, p.returncode, p.stdout[-500:], p.stderr[-1500:])
            now = _digest(vault)
            for rel, data in _USER_NOTES.items():  # after every kill: every user line there, byte for byte
                assert lost_lines(data, now[f"digest/{rel}"]) == [], (point, rel)
            assert all(now.get(k) in (before.get(k), want[k]) for k in want), point  # old or new bytes only
        p = _dream_job(vault, state, srv.base_url)
        assert p.returncode == 0, p.stderr[-1500:]
        assert json.loads(p.stdout)["status"] == "nothing changed"  # the killed run had checkpointed at the end
    assert _digest(vault) == want
    # one extract; each unit asked once, except unit 1: killed before its write was published, it is asked again
    # (that run is then killed between publishing and journaling, and the next run settles the write as done)
    assert phase["calls"].count("extract") == 1, phase["calls"]
    asked = [c for c in phase["calls"] if c != "extract"]
    assert len(asked) == 7 + 1, asked
    assert not (state / "dream" / "auto_dream.progress.json").exists()
    with Engine.open(load_settings({"vault": str(vault), "state_dir": str(state), "embedder": {"kind": "none"}},
                                   env={})) as e:
        runs = [r for r in e.dream_log()["runs"] if r["params"].get("date") == DREAM_DAY]
        assert [(r["status"], r["changes"]) for r in runs] == [("ok", 7)], runs
        assert e.index(vectors=False).modified == 0  # each resumed run kept the index current
        assert _snapshot(state) == _clean(vault, tmp_path)
        assert e.revert(runs[0]["run_id"])["refused"] == []
    assert _digest(vault) == before  # the journal had every write, the one cut before journaling included


def test_killed_dream_whose_inputs_changed_since_is_closed_and_done_afresh(tmp_path):
    """A crash record the next run cannot resume (the daily note was edited since the kill): its journal run is
    closed as ``interrupted`` (not left ``running``), the record dropped, and the new run extracts again; an
    unreadable record is dropped the same way."""
    import shutil

    from reme_engine.config import LLMSettings, load_settings
    from reme_engine.dream.resume import progress_path
    from reme_engine.engine import Engine
    from reme_engine.llm.client import make_client
    from test_provenance import lost_lines
    from wire.server import ScriptedServer

    phase = {"seed": False, "calls": []}
    vault = _dream_vault(tmp_path)
    state = tmp_path / "state"
    shutil.rmtree(vault / "daily" / "2026-11-29")
    with ScriptedServer(default=_dream_script(phase)) as srv:
        p = _dream_job(vault, state, srv.base_url, crash_at="dream.after_write_0")
        assert p.returncode == -signal.SIGKILL, p.stderr[-1500:]
        assert progress_path(state, "auto_dream").is_file()
        with open(vault / f"daily/{DREAM_DAY}/notes.md", "a", encoding="utf-8") as f:
            f.write("\n- one more thing\n")
        llm = make_client(LLMSettings(provider="openai", model="m", base_url=srv.base_url, api_key="k",
                                      max_retries=0))
        s = load_settings({"vault": str(vault), "state_dir": str(state), "embedder": {"kind": "none"}}, env={})
        with Engine.open(s) as e:
            phase["calls"].clear()
            rep = e.auto_dream(DREAM_DAY, llm=llm).to_dict()
            assert rep["status"] == "ok" and not rep["resumed"] and phase["calls"][0] == "extract", rep
            runs = e.dream_log()["runs"]
            assert sorted(r["status"] for r in runs) == ["interrupted", "ok"], runs
            assert not progress_path(state, "auto_dream").exists()
            # an unreadable record (a disk error, a hand edit) is dropped, never trusted
            progress_path(state, "auto_dream").write_text("{not json", encoding="utf-8")
            with open(vault / f"daily/{DREAM_DAY}/notes.md", "a", encoding="utf-8") as f:
                f.write("- and another\n")
            assert e.auto_dream(DREAM_DAY, llm=llm).status == "ok"
            assert not progress_path(state, "auto_dream").exists()
    for rel, data in _USER_NOTES.items():
        assert lost_lines(data, (vault / "digest" / rel).read_bytes()) == [], rel
