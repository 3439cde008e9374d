"""The keyword index (issue 12): contentless FTS5 over dense row ids, deletes by re-derived tokens, and the
in-memory BM25 scorer that must rank exactly as FTS5's bm25() does."""

from __future__ import annotations

import sqlite3
import zlib

from conftest import copy_vault, shared

from reme_engine.index import store as db
from reme_engine.search.results import SearchFilters


def _write(p, text):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def _vocab(e, term: str) -> list[int]:
    """Row ids FTS5 itself holds postings for ``term`` under (stale ones included)."""
    c = e.store.conn
    c.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.t_vocab USING fts5vocab(main, chunks_fts, 'instance')")
    return sorted({r[0] for r in c.execute("SELECT doc FROM temp.t_vocab WHERE term = ?", (term,))})


def _paths(e, q, **kw):
    return {h.path for h in e.search(q, mode="keyword", limit=20, neighbors=False, **kw).hits}


def _both(e, q, n=50, filters=None):
    s = e.searcher
    s.memory_bm25 = False
    a = s.keyword_leg(q, n, filters)
    s.memory_bm25 = True
    b = s.keyword_leg(q, n, filters)
    return a, b


def test_schema_is_contentless_and_old_index_rebuilds(open_engine, tmp_path):
    """An index of the previous schema (FTS5 keeping its own copy of the text) is replaced by itself at open."""
    vault = tmp_path / "v"
    _write(vault / "a.md", "# 光伏\n\n多晶硅 工艺 polysilicon\n")
    state = tmp_path / "state0"
    state.mkdir()
    old = sqlite3.connect(state / "index.sqlite")
    old.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    old.execute("INSERT INTO meta VALUES ('schema_version', '3')")
    old.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(body, title)")
    old.execute("INSERT INTO chunks_fts(rowid, body, title) VALUES (7, 'stale words', 'x')")
    old.commit()
    old.close()
    e = open_engine(vault)
    sql = e.store.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()[0]
    assert "content = ''" in sql
    assert e.store.get_meta("schema_version") == str(db.SCHEMA_VERSION)
    e.index()
    assert _paths(e, "多晶硅") == {"a.md"}
    assert not _paths(e, "stale")
    # rows are dense small ids, chunk ids joined in
    assert [r[0] for r in e.store.conn.execute("SELECT fts_id FROM fts_rows ORDER BY 1")] == [1]


def test_edits_and_deletes_leave_no_postings(open_engine):
    e = open_engine()
    v = e.vault
    _write(v / "n/one.md", "---\ntitle: 独角兽笔记\ntags: [zoology]\n---\n# 神兽\n\n独角兽 unicorn 出现在森林\n")
    _write(v / "n/two.md", "# 其他\n\n森林 forest 里有 鹿\n")
    e.index()
    assert _paths(e, "unicorn") == {"n/one.md"}
    gone_row = _vocab(e, "unicorn")
    assert gone_row
    # edit: the removed word is no longer found, nor held by FTS5 at all; the new word is found at once
    _write(v / "n/one.md", "---\ntitle: 麒麟笔记\ntags: [myth]\n---\n# 神兽\n\n麒麟 qilin 出现在森林\n")
    e.index_paths(["n/one.md"], vectors=False)
    assert not _paths(e, "unicorn") and not _paths(e, "独角兽") and not _paths(e, "zoology")
    assert _vocab(e, "unicorn") == [] and _vocab(e, "zoology") == []
    assert _paths(e, "qilin") == {"n/one.md"} and _paths(e, "myth") == {"n/one.md"}
    assert _paths(e, "森林") == {"n/one.md", "n/two.md"}
    # delete: every posting of the file goes
    (v / "n/one.md").unlink()
    e.index_paths(["n/one.md"], vectors=False)
    assert _vocab(e, "qilin") == [] and _vocab(e, "myth") == []
    assert _paths(e, "森林") == {"n/two.md"}
    assert e.store.get_meta("fts_stale_rows") is None  # every delete re-derived its tokens exactly
    c = e.store.conn
    assert c.execute("SELECT count(*) FROM fts_rows").fetchone()[0] == e.store.counts()["chunks"]
    assert c.execute("SELECT count(*) FROM fts_titles").fetchone()[0] == e.store.counts()["files"]
    c.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 0)")


def test_tokenizer_change_drops_postings_made_by_the_old_one(open_engine):
    e = open_engine()
    _write(e.vault / "a.md", "# A\n\n钴 cobalt\n")
    _write(e.vault / "b.md", "# B\n\n镍 nickel\n")
    e.index()
    with e.store.write():
        e.store.set_meta("fts_tokenizer", "old-tokenizer")
        e.store.set_meta("tokenizer", "old-tokenizer")
    from reme_engine.index.indexer import Indexer

    Indexer(e.vault, e.settings, e.store, e.tokenizer).sync()
    c = e.store.conn
    assert c.execute("SELECT count(*) FROM chunks_fts").fetchone()[0] == e.store.counts()["chunks"] == 2
    assert len(_vocab(e, "cobalt")) == 1 and e.store.get_meta("fts_stale_rows") is None
    assert _paths(e, "nickel") == {"b.md"}


def test_a_row_whose_tokens_cannot_be_rederived_is_never_a_hit(open_engine):
    """Degraded path: the chunk text changed under the keyword row (not what the indexer does): the row is
    dropped with empty values, counted, and its leftover postings never surface."""
    e = open_engine()
    _write(e.vault / "a.md", "# A\n\nzebra stripes\n")
    e.index()
    with e.store.write() as c:
        c.execute("UPDATE chunks SET body = 'something else'")
    _write(e.vault / "a.md", "# A\n\nhorse\n")
    e.index_paths(["a.md"], vectors=False)
    assert e.store.get_meta("fts_stale_rows") == "1"
    assert not _paths(e, "zebra")
    assert _paths(e, "horse") == {"a.md"}


def test_memory_scorer_ranks_as_fts5_on_a_real_vault(open_engine, tmp_path):
    """Identical scores and order (up to ties) as FTS5's bm25() with the same column weights, on
    obsidian-tasks-docs-en: note titles and body words as queries, then again after edits."""
    vault = copy_vault(shared("vaults/obsidian-tasks-docs-en"), tmp_path / "tasks")
    e = open_engine(vault)
    e.index()
    stems = sorted(p.stem for p in vault.rglob("*.md"))
    stems.sort(key=lambda s: zlib.crc32(s.encode()))
    queries = stems[:40] + ["due date recurrence", "filter by tag", "query block", "priority", "done"]

    def check():
        for q in queries:
            a, b = _both(e, q)
            assert [round(s, 9) for _, s in a] == [round(s, 9) for _, s in b], q
            if len(a) < 50:
                assert {i for i, _ in a} == {i for i, _ in b}, q
            tied = {round(s, 9) for _, s in a}
            if len(tied) == len(a):  # no ties: the very same order
                assert [i for i, _ in a] == [i for i, _ in b], q

    check()
    assert e.searcher._mem.loads == 1
    # edits through the watcher path: the scorer follows at once
    target = sorted(vault.rglob("*.md"))[3]
    rel = target.relative_to(vault).as_posix()
    target.write_text(target.read_text(encoding="utf-8") + "\n\nxylophonic priority done\n", encoding="utf-8")
    e.index_paths([rel], vectors=False)
    assert rel in _paths(e, "xylophonic")
    check()
    mem = e.searcher._mem
    assert (mem.loads, mem.updates) == (1, 1)  # applied in place: cached terms ("priority", "done") caught up
    # more edits, a new note and a deletion, each followed at once, still FTS5's ranking
    others = sorted(vault.rglob("*.md"))
    others[5].write_text("# replaced\n\npriority only now\n", encoding="utf-8")
    (vault / "brand-new.md").write_text("# New\n\ndone done priority query block\n", encoding="utf-8")
    others[9].unlink()
    e.index_paths([p.relative_to(vault).as_posix() for p in (others[5], vault / "brand-new.md", others[9])],
                  vectors=False)
    check()
    assert "brand-new.md" in _paths(e, "done") and (mem.loads, mem.updates) == (1, 2)


def test_filters_go_through_fts5_and_agree(open_engine):
    e = open_engine()
    for i in range(6):
        _write(e.vault / f"{'daily/2026-01-0' + str(i + 1) if i % 2 else 'notes'}/n{i}.md",
               f"# N{i}\n\nshared word apple {'apple ' * i}\n")
    e.index()
    f = SearchFilters(path_prefix="notes/")
    a, b = _both(e, "apple", filters=f)
    assert a == b and len(a) == 3
    assert {h.path for h in e.search("apple", mode="keyword", filters=f, neighbors=False).hits} == \
        {"notes/n0.md", "notes/n2.md", "notes/n4.md"}
    dates = SearchFilters(date_from="2026-01-02", date_to="2026-01-04")
    assert {h.path for h in e.search("apple", mode="keyword", filters=dates, neighbors=False).hits} == \
        {"daily/2026-01-02/n1.md", "daily/2026-01-04/n3.md"}
    # unfiltered: from memory, the same ranking as FTS5 (more apples rank higher)
    a, b = _both(e, "apple")
    assert [round(s, 9) for _, s in a] == [round(s, 9) for _, s in b] and len(b) == 6


def test_titles_are_kept_only_when_the_files_row_cannot_give_them_back(open_engine, monkeypatch):
    """Title tokens are re-derived from the files row when that gives them back exactly (checked at insert), else
    stored. Either way renames and title edits leave no title postings behind."""
    e = open_engine()
    v = e.vault
    _write(v / "plain.md", "# P\n\nbody one\n")
    _write(v / "dated.md", "---\ntitle: walrus\ncreated: 2024-01-02\n---\nbody two\n")
    real = db._derived_title
    # as if the parse step made the titles some other way for dated.md: they must be stored
    def derived(c, fid, tok):
        path = c.execute("SELECT path FROM files WHERE id = ?", (fid,)).fetchone()[0]
        return None if path == "dated.md" else real(c, fid, tok)

    monkeypatch.setattr(db, "_derived_title", derived)
    e.index()
    monkeypatch.setattr(db, "_derived_title", real)
    c = e.store.conn
    stored = dict(c.execute("SELECT f.path, t.tokens IS NOT NULL FROM fts_titles t JOIN files f ON f.id = t.file_id"))
    assert stored == {"plain.md": 0, "dated.md": 1}
    (v / "plain.md").rename(v / "renamedpenguin.md")
    _write(v / "dated.md", "---\ntitle: narwhal\ncreated: 2024-01-02\n---\nbody two\n")
    e.index()
    assert _vocab(e, "plain") == [] and _vocab(e, "walrus") == []
    assert _paths(e, "renamedpenguin") == {"renamedpenguin.md"} and _paths(e, "narwhal") == {"dated.md"}
    assert e.store.get_meta("fts_stale_rows") is None
