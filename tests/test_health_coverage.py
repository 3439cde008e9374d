"""`health_check` compares the vault with the index: files the index missed (a watcher batch lost while the disk
under the state dir was full) are named and indexed, so a note never stays unsearchable with health saying ok."""

from __future__ import annotations

from reme_engine.jobs import run_job


def test_health_check_indexes_what_the_index_missed(open_engine):
    e = open_engine()
    (e.vault / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    e.index()
    first = run_job(e, "health_check", {})
    assert first["ok"] and first["checks"]["coverage"].startswith("ok (1 indexable files"), first["checks"]
    for i in range(3):  # written while nothing watched (or the watcher's batch failed)
        (e.vault / f"missed{i}.md").write_text(f"# Missed {i}\n\nzebrastatefull{i}\n", encoding="utf-8")
    (e.vault / ".hidden.md").write_text("not indexed, by design\n", encoding="utf-8")
    assert not run_job(e, "search", {"query": "zebrastatefull1", "mode": "keyword"})["hits"]
    h = run_job(e, "health_check", {})
    assert h["ok"], h["checks"]
    cov = h["checks"]["coverage"]
    assert cov.startswith("repaired: 3 file(s)") and "missed0.md" in cov and ".hidden" not in cov, cov
    assert [x["path"] for x in run_job(e, "search", {"query": "zebrastatefull1", "mode": "keyword"})["hits"]] == \
        ["missed1.md"]
    assert run_job(e, "health_check", {})["checks"]["coverage"].startswith("ok (4 indexable files")
