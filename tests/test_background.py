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
