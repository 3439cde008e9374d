"""A first index ends with the keyword index merged and the database file rewritten without free pages, so the
index a new user keeps on disk is as small as its content; searches are the same before and after."""

import os
import shutil
from pathlib import Path


def _db_bytes(state: Path) -> int:
    return sum(p.stat().st_size for p in state.iterdir() if p.name.startswith("index.sqlite"))


def test_first_index_is_compacted_and_searches_the_same(make_engine, tmp_path, monkeypatch):
    from reme_engine.index import indexer as ix

    v = tmp_path / "v"
    (v / "notes").mkdir(parents=True)
    for i in range(120):  # more files than one batch: a first index commits batch by batch
        (v / f"notes/n{i:03d}.md").write_text(f"# Note {i}\n\nThe heron count on day {i} was {i * 7}; "
                                             f"wetland survey notes, marsh {i % 9}.\n")
    monkeypatch.setattr(ix, "BATCH_FILES", 20)
    eng = make_engine(v, embed=False)
    rep = eng.indexer.sync()
    assert rep.compacted
    c = eng.store.conn
    assert c.execute("PRAGMA freelist_count").fetchone()[0] == 0
    # one FTS5 segment after optimize: the structure record lists a single level with one segment
    hits = eng.search("heron marsh", mode="keyword", limit=5)
    assert hits.hits and all("heron" in h.text for h in hits.hits)
    (v / "notes/n000.md").write_text("# Note 0\n\nAn egret instead.\n")
    rep2 = eng.indexer.sync()
    assert not rep2.compacted  # only a first index pays for it
    assert any(h.path == "notes/n000.md" for h in eng.search("egret", mode="keyword").hits)
    assert not any(h.path == "notes/n000.md" for h in eng.search("heron", mode="keyword", limit=200).hits)


def test_compaction_shrinks_a_real_vaults_index(make_engine, tmp_path):
    from conftest import shared

    v = shutil.copytree(shared("vaults/obsidian-tasks-docs-en"), tmp_path / "v")
    eng = make_engine(v, embed=False)
    eng.store.compact = lambda: False  # the same first index without compaction, for its size
    eng.indexer.sync()
    eng.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    loose = _db_bytes(Path(eng.settings.state_dir))
    del eng.store.compact
    assert eng.store.compact()
    eng.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert _db_bytes(Path(eng.settings.state_dir)) < loose
    assert os.path.exists(Path(eng.settings.state_dir) / "index.sqlite")
