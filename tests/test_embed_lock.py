"""The cross-process embed lock: a second engine on the same state dir (another process: the app and a
``--refresh``) skips its vector pass while one runs, and no engine's save drops another's vectors."""

import threading

from test_background import GatedEmbedder, _vector_counts


def _open(v, st, embedder):
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine

    return Engine.open(load_settings({"vault": str(v), "state_dir": str(st)}, env={}), embedder=embedder)


def _notes(v, n, start=0):
    (v / "digest/wiki").mkdir(parents=True, exist_ok=True)
    for i in range(start, start + n):
        (v / f"digest/wiki/n{i}.md").write_text(f"# Note {i}\n\nshort note number {i} about topic {i % 7}\n")


def _file_ids(st, embedder):
    """Chunk ids in the saved faiss file, read by a fresh engine's loader (what a restart sees)."""
    import hashlib

    from reme_engine.index.vectors import VectorIndex

    tag = hashlib.sha256(embedder.space.encode()).hexdigest()[:12]
    loaded = VectorIndex.load(st / f"vectors-{tag}.faiss", embedder.dim, 200_000)
    assert loaded is not None
    return loaded[0]._ids


def test_second_engine_skips_its_pass_while_another_embeds(tmp_path, embedder):
    v, st = tmp_path / "v", tmp_path / "st"
    _notes(v, 50)
    gated = GatedEmbedder(embedder)
    a = _open(v, st, gated)
    b = None
    try:
        a.index(vectors=False)
        done = threading.Event()
        t = threading.Thread(target=lambda: (a.embed_pending(), done.set()), daemon=True)
        t.start()
        assert gated.entered.wait(30)  # a's pass is encoding its first batch
        b = _open(v, st, embedder)
        rep = b.index()
        assert rep.embed_busy and "another process" in rep.embed_busy
        assert rep.embedded == 0 and rep.embed_cached == 0
        assert _vector_counts(b)[1] == 0  # b wrote no flags
        gated.gate.set()
        assert done.wait(60)
        t.join(10)
        assert _vector_counts(a) == (0, 50)
        # the flags and the saved file agree (what a restart or `job health_check` reads)
        ids = {r[0] for r in a.store.conn.execute("SELECT id FROM chunks")}
        assert _file_ids(st, embedder) == ids
        # the lock is free again: b's next pass runs (nothing left to do)
        assert b.embed_pending().embed_busy is None
    finally:
        gated.gate.set()
        if b is not None:
            b.close()
        a.close()


def test_a_pass_keeps_the_vectors_another_engine_saved_meanwhile(tmp_path, embedder):
    v, st = tmp_path / "v", tmp_path / "st"
    _notes(v, 5)
    a = _open(v, st, embedder)
    b = None
    try:
        a.index()
        assert a.vectors.ready and len(a.vectors.index) == 5
        b = _open(v, st, embedder)
        _notes(v, 3, start=5)
        assert b.index().embedded == 3  # b embeds and saves while a holds the older index in memory
        _notes(v, 2, start=8)
        a.index()  # a's pass saves its index: it must not drop b's 3 vectors
        ids = {r[0] for r in a.store.conn.execute("SELECT id FROM chunks")}
        assert len(ids) == 10 and _vector_counts(a) == (0, 10)
        assert a.vectors.index._ids == ids
        assert _file_ids(st, embedder) == ids
    finally:
        if b is not None:
            b.close()
        a.close()


def test_refresh_says_in_one_line_that_it_left_the_vectors_to_the_running_pass(tmp_path, embedder):
    """The real ``reme-tui --refresh`` in a subprocess, on the state dir of an engine in the middle of a pass."""
    import os
    import subprocess
    import sys

    v, st = tmp_path / "v", tmp_path / "st"
    _notes(v, 20)
    gated = GatedEmbedder(embedder)
    a = _open(v, st, gated)
    try:
        a.index(vectors=False)
        t = threading.Thread(target=a.embed_pending, daemon=True)
        t.start()
        assert gated.entered.wait(30)
        env = {k: val for k, val in os.environ.items() if not k.startswith(("REME_", "ANTHROPIC_", "OPENAI_"))}
        env.update(REME_STATE_DIR=str(st), XDG_DATA_HOME=str(tmp_path / "data"),
                   XDG_CONFIG_HOME=str(tmp_path / "config"), COLUMNS="120")
        r = subprocess.run([sys.executable, "-m", "reme_tui.cli", "--refresh", "--vault", str(v)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("vectors ")]
        assert len(lines) == 1, r.stdout
        assert "0 of 20 chunks have a vector" in lines[0] and "embedded 0" in lines[0]
        assert "another process is embedding this vault" in lines[0]
        gated.gate.set()
        t.join(60)
        assert _vector_counts(a) == (0, 20)
        assert _file_ids(st, embedder) == {r[0] for r in a.store.conn.execute("SELECT id FROM chunks")}
    finally:
        gated.gate.set()
        a.close()


def test_watcher_chunks_skipped_as_busy_are_embedded_once_the_other_pass_ends(tmp_path, embedder):
    """The other process's pass read its rows when it began: a note this engine's watcher indexed meanwhile gets its
    vector from this engine's embed thread, which tries again once the embed lock is free."""
    from test_background import _wait

    v, st = tmp_path / "v", tmp_path / "st"
    _notes(v, 10)
    gated = GatedEmbedder(embedder)
    a = _open(v, st, gated)
    b = None
    try:
        a.index(vectors=False)
        t = threading.Thread(target=a.embed_pending, daemon=True)
        t.start()
        assert gated.entered.wait(30)
        b = _open(v, st, embedder)
        b.vectors.open()
        events = []
        b.start_background(on_event=events.append, schedule=False)
        _notes(v, 1, start=10)  # an edit from another editor, seen by b's watcher
        assert _wait(lambda: _vector_counts(b)[0] == 11, timeout=30)
        gated.gate.set()
        t.join(60)
        assert _wait(lambda: _vector_counts(b) == (0, 11), timeout=30)
        assert _wait(lambda: any(e.get("event") == "vectors" for e in events), timeout=30)
        b.stop_background()
        assert _file_ids(st, embedder) == {r[0] for r in b.store.conn.execute("SELECT id FROM chunks")}
    finally:
        gated.gate.set()
        if b is not None:
            b.close()
        a.close()
