"""The demo index template (``tests/conftest.py``): a seeded state dir opens clean and up to date, so an app's
startup pass parses nothing, and it holds what a cold index of the same vault holds."""

from __future__ import annotations

import pytest


def _rows(eng) -> tuple:
    c = eng.store.conn
    files = sorted(c.execute("SELECT path, mtime, size, sha FROM files").fetchall())
    chunks = c.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    return files, chunks


def test_a_seeded_state_opens_clean_and_its_first_sync_parses_nothing(app_for, make_engine, demo_vault, tmp_path):
    app = app_for()
    eng = app.engine
    assert not eng.store.unclean and eng.recovered == [] and eng._open_repairs == []
    assert not eng.child_index_ahead()
    report = eng.index(vectors=False)
    assert (report.added, report.modified, report.removed, report.renamed) == (0, 0, 0, 0)
    assert report.unchanged == report.scanned == 34 and report.changed_paths == []
    # the same vault indexed from nothing: same files (mtime, size, sha) and chunks
    cold = make_engine(demo_vault, embed=False)
    assert cold.index(vectors=False).added == 34
    assert _rows(cold) == _rows(eng)


def test_a_note_changed_before_the_app_opens_is_re_read(app_for, demo_vault):
    (demo_vault / "digest/wiki/新能源.md").write_text("# 新能源\n\n钙钛矿 tandem cells\n", encoding="utf-8")
    (demo_vault / "new-note.md").write_text("# fresh\n", encoding="utf-8")
    eng = app_for().engine
    report = eng.index(vectors=False)
    assert report.added == 1 and report.modified == 1 and report.unchanged == 33
    assert eng.search("钙钛矿", mode="keyword").hits[0].path == "digest/wiki/新能源.md"


@pytest.mark.cold_index
def test_cold_index_marker_starts_on_an_empty_state_dir(app_for):
    eng = app_for().engine
    assert eng.child_index_ahead() is False  # the demo vault is small: an in-process first index
    assert eng.index(vectors=False).added == 34
