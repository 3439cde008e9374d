"""The engine's watcher and scheduler wired together on a real temp vault."""

import time



def _wait(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def test_external_edits_are_indexed_and_own_writes_not_reprocessed(make_engine, tmp_path):
    v = tmp_path / "v"
    (v / "digest/wiki").mkdir(parents=True)
    (v / "digest/wiki/a.md").write_text("# A\n\nalpha\n")
    e = make_engine(v, embed=False)
    e.index()
    batches = []
    e.start_background(on_indexed=lambda paths, rep: batches.append(paths), schedule=False)
    try:
        (v / "digest/wiki/b.md").write_text("# B\n\nbravo from another editor\n")
        assert _wait(lambda: e.search("bravo", mode="keyword").hits)
        (v / "digest/wiki/b.md").unlink()
        assert _wait(lambda: not e.search("bravo", mode="keyword").hits)
        n = len(batches)
        e.write("digest/wiki/c.md", "# C\n\ncharlie written by the app\n")
        assert e.search("charlie", mode="keyword").hits  # indexed directly
        time.sleep(1.5)
        assert all("digest/wiki/c.md" not in b for b in batches[n:])
    finally:
        e.stop_background()
    assert e.watcher is None and e.scheduler is None


def test_scheduler_runs_proactive_fallback_now(make_engine, demo_vault):
    e = make_engine(demo_vault, embed=False)
    e.index()
    events = []
    e.start_background(on_event=events.append, watch=False)
    try:
        nxt = e.scheduler.next_runs()
        assert set(nxt) == {"proactive_refresh", "auto_dream"}
        e.scheduler.run_now("auto_dream")  # no LLM: recorded as skipped, not failed
        assert _wait(lambda: "auto_dream" in e.scheduler.last_runs())
        last = e.scheduler.last_runs()["auto_dream"]
        assert "needs an LLM" in str(last.get("result") or last.get("error"))
    finally:
        e.stop_background()


class GatedEmbedder:
    """The real embedder behind a gate: ``embed`` blocks until the test opens it (a slow vector pass on cue)."""

    def __init__(self, inner):
        import threading

        self.inner, self.space, self.dim = inner, inner.space, inner.dim
        self.gate, self.entered = threading.Event(), threading.Event()

    def embed(self, texts):
        self.entered.set()
        assert self.gate.wait(30), "gate never opened"
        return self.inner.embed(texts)


def _engine_on(tmp_path, embedder, notes: dict[str, str]):
    """An Engine over a new vault of ``notes`` ({path: text}) with its own state dir and ``embedder``."""
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine

    v = tmp_path / "v"
    for rel, text in notes.items():
        (v / rel).parent.mkdir(parents=True, exist_ok=True)
        (v / rel).write_text(text)
    return v, Engine.open(load_settings({"vault": str(v), "state_dir": str(tmp_path / "st")}, env={}),
                          embedder=embedder)


def _vector_counts(e):
    c = e.store.conn
    return (c.execute("SELECT count(*) FROM chunks WHERE has_vec = 0").fetchone()[0],
            c.execute("SELECT count(*) FROM chunks WHERE has_vec = 1").fetchone()[0])


def test_writes_and_watcher_batches_never_wait_for_a_vector_pass(make_engine, tmp_path, embedder):
    import threading

    gated = GatedEmbedder(embedder)
    v, e = _engine_on(tmp_path, gated, {"digest/wiki/a.md": "# A\n\nalpha is the first note of this small vault\n"})
    try:
        e.index(vectors=False)
        e.vectors.open()
        # a vector pass that is stuck in the embedder (minutes of encoding on a big first index)
        pass_thread = threading.Thread(target=e.embed_pending, daemon=True)
        pass_thread.start()
        assert gated.entered.wait(10)
        # the app's own write is indexed at once, keyword-searchable while the pass is still encoding
        done = threading.Event()
        threading.Thread(target=lambda: (e.write("digest/wiki/b.md", "# B\n\nbravo written during the vector pass\n"),
                                         done.set()), daemon=True).start()
        assert done.wait(5), "the write waited for the vector pass"
        assert e.search("bravo", mode="keyword").hits
        # a watcher burst is keyword-searchable too; its vectors are left to the embed thread
        events: list[dict] = []
        e.start_background(schedule=False, on_event=events.append)
        for i in range(50):
            (v / "digest/wiki" / f"burst-{i:02d}.md").write_text(
                f"# Burst {i}\n\nburstword{i} arrived in a burst of edits\n")
        assert _wait(lambda: all(e.search(f"burstword{i}", mode="keyword").hits for i in (0, 25, 49)), timeout=10)
        assert _wait(lambda: e.store.conn.execute("SELECT count(*) FROM files").fetchone()[0] == 52, timeout=10)
        gated.gate.set()
        pass_thread.join(30)
        assert _wait(lambda: _vector_counts(e)[0] == 0, timeout=60)
        assert _vector_counts(e)[1] == 52  # one vector per chunk, none lost, none duplicated
        assert len(e.vectors.index) == 52
        assert _wait(lambda: any(ev["event"] == "vectors" for ev in events))  # the app is told (status line)
        kinds = [ev["event"] for ev in events]
        assert kinds.index("vectors_started") < kinds.index("vectors")
        hits = e.search("burst of edits", mode="vector", limit=5).hits
        assert hits and all(h.path.startswith("digest/wiki/burst-") for h in hits)
    finally:
        gated.gate.set()
        e.close()


def test_a_chunk_removed_during_its_encode_gets_no_vector(make_engine, tmp_path, embedder):
    import threading

    gated = GatedEmbedder(embedder)
    v, e = _engine_on(tmp_path, gated, {
        "digest/wiki/a.md": "# A\n\nalpha is a note that stays in the vault\n",
        "digest/wiki/gone.md": "# Gone\n\nthis note is deleted while it is being embedded\n"})
    try:
        e.index(vectors=False)
        e.vectors.open()
        t = threading.Thread(target=e.embed_pending, daemon=True)
        t.start()
        assert gated.entered.wait(10)
        (v / "digest/wiki/gone.md").unlink()
        e.index_paths(["digest/wiki/gone.md"], vectors=False)
        gated.gate.set()
        t.join(30)
        assert _vector_counts(e) == (0, 1)
        assert len(e.vectors.index) == 1
        assert all(h.path == "digest/wiki/a.md" for h in e.search("deleted while embedded", mode="vector").hits)
    finally:
        gated.gate.set()
        e.close()


def test_quitting_never_waits_for_another_threads_vector_pass(tmp_path, embedder):
    """A second vector pass (the app's re-index) waiting for a running one gives up when asked to stop."""
    import threading

    gated = GatedEmbedder(embedder)
    v, e = _engine_on(tmp_path, gated, {"digest/wiki/a.md": "# A\n\nalpha is the first note of this small vault\n"})
    try:
        e.index(vectors=False)
        e.vectors.open()
        t = threading.Thread(target=e.embed_pending, daemon=True)
        t.start()
        assert gated.entered.wait(10)
        stop = threading.Event()
        waiter = threading.Thread(target=lambda: e.embed_pending(should_stop=stop.is_set), daemon=True)
        waiter.start()
        time.sleep(0.3)
        assert waiter.is_alive()  # waiting its turn
        stop.set()
        waiter.join(2)
        assert not waiter.is_alive(), "the stopped pass kept waiting for the running one"
        # closing the engine while the other pass still runs: it stops after its batch, before the store closes
        gated.gate.set()
        e.close()
        t.join(5)
        assert not t.is_alive()
    finally:
        gated.gate.set()
        e.close()


def test_no_deadlock_between_a_writer_and_a_starting_vector_pass(tmp_path, embedder):
    """A writer holds the write lock and indexes its note while a vector pass has just taken the embed lock
    and waits for the write lock (the opposite order): the writer must not wait for the pass."""
    import threading

    v, e = _engine_on(tmp_path, embedder, {"digest/wiki/a.md": "# A\n\nalpha is the first note of this small vault\n"})
    try:
        e.index()
        done, holding, go = threading.Event(), threading.Event(), threading.Event()

        def writer():  # the app's write: holds the write lock, then indexes (and embeds) its note
            with e.write_lock:
                holding.set()
                go.wait(10)
                (v / "digest/wiki/b.md").write_text("# B\n\nbravo written while a pass starts\n")
                e.index_paths(["digest/wiki/b.md"])
            done.set()

        w = threading.Thread(target=writer, daemon=True)
        w.start()
        assert holding.wait(5)
        pass_thread = threading.Thread(target=e.embed_pending, daemon=True)
        pass_thread.start()
        deadline = time.monotonic() + 5
        while not e._embed_lock.locked() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert e._embed_lock.locked()  # the pass holds the embed lock and now waits for the write lock
        go.set()
        assert done.wait(5), "deadlock: the writer waited for the embed lock while holding the write lock"
        pass_thread.join(30)
        assert _wait(lambda: _vector_counts(e)[0] == 0, timeout=30)  # b's vector came from the pass's rerun
        assert e.search("bravo written", mode="vector", limit=1).hits[0].path == "digest/wiki/b.md"
    finally:
        e.close()


def test_a_restored_note_keeps_its_vector_after_a_stale_tombstone(tmp_path, embedder):
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine

    v = tmp_path / "v"
    (v / "digest/wiki").mkdir(parents=True)
    text = "# R\n\nthis note is deleted and then restored by undo\n"
    (v / "digest/wiki/r.md").write_text(text)
    (v / "digest/wiki/a.md").write_text("# A\n\nanother note that stays\n")
    e = Engine.open(load_settings({"vault": str(v), "state_dir": str(tmp_path / "st")}, env={}), embedder=embedder)
    try:
        e.index()
        cid = e.store.conn.execute("SELECT id FROM chunks WHERE text LIKE '%restored by undo%'").fetchone()[0]
        (v / "digest/wiki/r.md").unlink()
        e.index_paths(["digest/wiki/r.md"])  # delete only: tombstoned, not saved
        (v / "digest/wiki/r.md").write_text(text)
        e.index_paths(["digest/wiki/r.md"])  # restored: same chunk id, vector from the cache
        (v / "digest/wiki/a.md").write_text("# A\n\nanother note that stays, edited\n")
        e.index_paths(["digest/wiki/a.md"])  # a later sync applies the tombstones
        assert cid in e.vectors.index
        hits = e.search("deleted and then restored", mode="vector", limit=3).hits
        assert hits and hits[0].path == "digest/wiki/r.md"
    finally:
        e.close()


def test_day_page_index_follows_cards_changed_elsewhere(make_engine, demo_vault):
    """A card added, renamed or deleted in another editor: the day page's generated card list follows
    (between its markers only); a day without a page gets none."""
    e = make_engine(demo_vault, embed=False)
    e.index()
    page = demo_vault / "daily/2026-11-28.md"
    before = page.read_text(encoding="utf-8")
    head, tail = before.split("<!-- reme:day-index:start")[0], before.split("<!-- reme:day-index:end -->")[1]
    e.start_background(schedule=False)
    try:
        card = demo_vault / "daily/2026-11-28/zebra-fish.md"
        card.write_text("---\nname: Zebra fish tank\ndescription: set up the new aquarium\n---\n# Zebra\n\nfish\n")
        assert _wait(lambda: "Zebra fish tank" in page.read_text(encoding="utf-8"))
        card.rename(card.with_name("aquarium.md"))
        assert _wait(lambda: "aquarium" in page.read_text(encoding="utf-8")
                     and "zebra-fish" not in page.read_text(encoding="utf-8"))
        gone = next(p for p in (demo_vault / "daily/2026-11-28").glob("*.md") if p.name != "aquarium.md")
        gone_stem = gone.stem
        text_before_delete = page.read_text(encoding="utf-8")
        gone.unlink()
        assert f"/{gone_stem}|" in text_before_delete
        assert _wait(lambda: f"/{gone_stem}|" not in page.read_text(encoding="utf-8"))
        text = page.read_text(encoding="utf-8")
        assert text.startswith(head) and text.endswith(tail)  # nothing outside the markers touched
        assert e.search("Zebra fish tank", mode="keyword").hits  # the page itself was re-indexed
        (demo_vault / "daily/2026-11-20").mkdir()
        (demo_vault / "daily/2026-11-20/lonely.md").write_text("# Lonely card\n")
        assert _wait(lambda: e.store.file_info("daily/2026-11-20/lonely.md") is not None)
        time.sleep(0.5)
        assert not (demo_vault / "daily/2026-11-20.md").exists()
    finally:
        e.stop_background()


# -- the vector pass's encode child (issue 12: a key press never waits on the pass) ------------------------------
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="module")
def child_embedder():
    """An offline embedder whose every pass goes to its child (one child, model loaded once, for this module)."""
    from reme_engine.index.embedder import OfflineEmbedder

    e = OfflineEmbedder(child_min_texts=1)
    yield e
    e.close()


def _gone(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")  # exited (a zombie waits for its new parent to reap it)


def test_a_pass_through_the_child_gives_the_in_process_vectors(make_engine, demo_vault, embedder, child_embedder):
    import numpy as np

    from reme_engine.config import load_settings
    from reme_engine.engine import Engine
    from reme_engine.markdown.chunker import Chunk

    settings = load_settings({"vault": str(demo_vault), "state_dir": str(demo_vault.parent / "state-child")}, env={})
    with Engine.open(settings, embedder=child_embedder) as eng:
        rep = eng.index()
        assert rep.embedded > 0 and not rep.embed_error
        pid = child_embedder.child_pid
        assert pid is not None and pid != os.getpid()
        # the whole child is niced (its BLAS and encode threads included), not just one thread; niceness stops at
        # 19, so a suite that itself runs niced (nice -n 10) expects the cap
        assert os.getpriority(os.PRIO_PROCESS, pid) >= min(19, os.getpriority(os.PRIO_PROCESS, 0) + 10)
        rows = eng.store.conn.execute("SELECT c.text, c.headings, e.vec FROM chunks c JOIN emb.embeddings e "
                                      "ON e.text_hash = c.text_hash AND e.space = ?", (child_embedder.space,)).fetchall()
    assert len(rows) >= rep.embedded
    texts = [Chunk(0, 0, r[0], tuple(json.loads(r[1]))).embed_text() for r in rows]
    got = np.vstack([np.frombuffer(r[2], dtype=np.float32) for r in rows])
    want = embedder.embed(texts)  # the same model in this process
    assert np.abs(got - want).max() <= 1e-6


def test_setting_off_or_a_small_pass_keeps_encoding_in_process(monkeypatch):
    import numpy as np

    from reme_engine.config import load_settings
    from reme_engine.index.embedder import make_embedder

    calls = []

    def fake_embed(texts):
        calls.append(len(texts))
        return np.ones((len(texts), 512), dtype=np.float32)

    off = make_embedder(load_settings({"embedder": {"background_process": False}}, env={}))
    on = make_embedder(load_settings({}, env={}))
    assert not off.child_enabled and on.child_enabled
    for e, pass_texts in ((off, 10_000), (on, on.CHILD_MIN_TEXTS - 1)):
        monkeypatch.setattr(e, "embed", fake_embed)
        assert e.embed_pass(["some text"] * 64, pass_texts=pass_texts).shape == (64, 512)
        assert e.child_pid is None and e._child is None  # no process was started
    assert calls == [64, 64]


def test_a_crashed_child_is_restarted_once_then_the_pass_reports_the_error(demo_vault, child_embedder, monkeypatch):
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine
    from reme_engine.index.embedder import CHILD_FAULT_ENV, EmbedderError, OfflineEmbedder

    # killed between two batches: the next batch starts a new child and succeeds
    child_embedder.embed_pass(["warm"] * 2, pass_texts=2)
    pid = child_embedder.child_pid
    os.kill(pid, signal.SIGKILL)
    assert _wait(lambda: _gone(pid))
    before = child_embedder._child.restarts
    assert child_embedder.embed_pass(["after the crash"] * 3, pass_texts=3).shape == (3, 512)
    assert child_embedder._child.restarts == before + 1 and child_embedder.child_pid not in (None, pid)

    # a child that dies on every batch: one restart, then an EmbedderError, which the pass records
    monkeypatch.setenv(CHILD_FAULT_ENV, "exit")
    faulty = OfflineEmbedder(child_min_texts=1)
    with pytest.raises(EmbedderError, match="died"):
        faulty.embed_pass(["x"] * 5, pass_texts=5)
    assert faulty._child.restarts == 1
    settings = load_settings({"vault": str(demo_vault), "state_dir": str(demo_vault.parent / "state-fault")}, env={})
    with Engine.open(settings, embedder=faulty) as eng:
        rep = eng.index()
        assert "died" in (rep.embed_error or "") and rep.embedded == 0
        assert eng.search("demo", mode="keyword").hits  # keyword search is unaffected
    faulty.close()


def test_the_child_exits_when_the_app_is_killed(tmp_path):
    # the parent is killed with SIGKILL while its child loads the model and encodes (it reads no pipe then)
    script = (
        "import sys, threading, time\n"
        "from reme_engine.index.embedder import OfflineEmbedder\n"
        "e = OfflineEmbedder(child_min_texts=1)\n"
        "threading.Thread(target=lambda: e.embed_pass(['text %d' % i for i in range(400)], pass_texts=400),"
        " daemon=True).start()\n"
        "while e.child_pid is None: time.sleep(0.01)\n"
        "print(e.child_pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    app = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child = int(app.stdout.readline())
        assert not _gone(child)
        app.send_signal(signal.SIGKILL)
        app.wait(10)
        assert _wait(lambda: _gone(child), timeout=5)
    finally:
        app.kill()


def test_a_running_app_sends_every_vector_pass_to_the_child(make_engine, demo_vault):
    e = make_engine(demo_vault)
    assert not e.vectors.live  # a one-shot process: small passes stay in-process
    e.start_background(schedule=False)
    try:
        assert e.vectors.live
    finally:
        e.stop_background()


def test_the_child_starts_under_a_tui_whose_stderr_has_no_descriptor():
    # Textual replaces sys.stderr with an object whose fileno() is -1; multiprocessing's resource tracker then
    # failed with "bad value(s) in fds_to_keep" and the app's vector pass never ran
    script = (
        "import io, sys\n"
        "class Captured(io.StringIO):\n"
        "    def fileno(self): return -1\n"
        "sys.stderr = Captured()\n"
        "from reme_engine.index.embedder import EncodeChild\n"
        "c = EncodeChild(1, 16); c.start(); print(c.pid, flush=True); c.close()\n"
    )
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert int(p.stdout.split()[0]) > 0


def test_a_query_encodes_in_process_while_the_child_runs_a_pass(child_embedder):
    import threading

    child_embedder.load()  # the query model of this process (the child has its own)
    texts = [f"passage {i} about rivers, mountains and the sea" for i in range(96)]
    out = []
    bg = threading.Thread(target=lambda: out.append(child_embedder.embed_pass(texts, pass_texts=len(texts))))
    bg.start()
    try:
        assert _wait(lambda: child_embedder._child_lock.locked(), timeout=5)
        q = child_embedder.embed(["where are the mountains"])
        assert q.shape == (1, 512)
        assert bg.is_alive()  # answered while the pass's batch is still in the child: it never waited for it
    finally:
        bg.join(60)
    assert out and out[0].shape == (96, 512)


def test_stopping_a_pass_abandons_the_childs_batch_at_once():
    import threading

    from reme_engine.index.embedder import EmbedCancelled, OfflineEmbedder

    e = OfflineEmbedder(child_min_texts=1)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()  # while the child still loads its model
    t = time.monotonic()
    with pytest.raises(EmbedCancelled):
        e.embed_pass([f"text {i}" for i in range(400)], pass_texts=400, should_stop=stop.is_set)
    assert time.monotonic() - t < 0.5 + 2.5  # not the seconds a busy machine takes for the batch
    assert e.child_pid is None  # stopped: its reply would be stale
    e.close()
