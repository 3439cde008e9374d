"""The state dir deleted while the app runs: the index is rebuilt from the vault and the vectors follow, as on a
first run (search stayed keyword-only until the user pressed R)."""

from __future__ import annotations

import os
import shutil
import time

import pytest


@pytest.mark.parametrize("rebuilt_by", ["the state watch", "an edit"])
def test_a_deleted_state_dir_gets_its_vectors_back(tmp_path, make_engine, rebuilt_by):
    v = tmp_path / "v"
    v.mkdir()
    for i in range(4):
        (v / f"n{i}.md").write_text(f"# Note {i}\n\nOtters swim in river number {i} every spring morning.\n",
                                    encoding="utf-8")
    past = time.time() - 3600  # written long before the app started: the watcher's catch-up has nothing to report
    for p in v.iterdir():
        os.utime(p, (past, past))
    e = make_engine(v)
    e.index()
    assert e.status()["chunks_with_vectors"] == 4
    events: list[dict] = []
    e.start_background(on_event=events.append, schedule=False)
    shutil.rmtree(e.settings.state_dir)
    if rebuilt_by == "an edit":  # a note saved meanwhile: the watcher's batch finds the index gone and rebuilds it
        (v / "fresh.md").write_text("# Fresh\n\nA new note about otters written after the deletion.\n",
                                    encoding="utf-8")
    want = 5 if rebuilt_by == "an edit" else 4
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not any(ev.get("event") == "index_repaired" for ev in events):
        time.sleep(0.05)
    assert any(ev.get("event") == "index_repaired" for ev in events), events
    while time.monotonic() < deadline and e.status()["chunks_with_vectors"] < want:
        time.sleep(0.05)
    st = e.status()
    assert st["chunks"] == want and st["chunks_with_vectors"] == want and st["chunks_without_vectors"] == 0, st
    hits = e.search("otters river", mode="vector", limit=want).hits
    assert len(hits) == want, hits
