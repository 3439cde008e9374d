"""The state dir deleted while the app runs: the index is rebuilt from the vault and the vectors follow, as on a
first run (search stayed keyword-only until the user pressed R)."""

from __future__ import annotations

import shutil
import time


def test_a_deleted_state_dir_gets_its_vectors_back(tmp_path, make_engine):
    v = tmp_path / "v"
    v.mkdir()
    for i in range(4):
        (v / f"n{i}.md").write_text(f"# Note {i}\n\nOtters swim in river number {i} every spring morning.\n",
                                    encoding="utf-8")
    e = make_engine(v)
    e.index()
    assert e.status()["chunks_with_vectors"] == 4
    events: list[dict] = []
    e.start_background(on_event=events.append, schedule=False)
    shutil.rmtree(e.settings.state_dir)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not any(ev.get("event") == "index_repaired" for ev in events):
        time.sleep(0.05)
    assert any(ev.get("event") == "index_repaired" for ev in events), events
    while time.monotonic() < deadline and e.status()["chunks_with_vectors"] < 4:
        time.sleep(0.05)
    st = e.status()
    assert st["chunks"] == 4 and st["chunks_with_vectors"] == 4 and st["chunks_without_vectors"] == 0, st
    hits = e.search("otters river", mode="vector", limit=4).hits
    assert len(hits) == 4, hits
