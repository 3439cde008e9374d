"""Keyword rows are handed to FTS5 together at the end of a write transaction (issue 12: inserting them one by
one between other statements wrote a tiny FTS5 segment per chunk). What a search sees must not change: rows land
with the commit, never after a rollback, and a delete in the same transaction still finds the row it deletes."""

from __future__ import annotations

import pytest

from reme_engine.index import store as db


def _fts_rows(e) -> int:
    return e.store.conn.execute("SELECT count(*) FROM chunks_fts_docsize").fetchone()[0]


def _hits(e, q: str) -> set[str]:
    return {h.path for h in e.search(q, mode="keyword", limit=20, neighbors=False).hits}


def _note(e, rel: str, text: str) -> None:
    p = e.vault / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def test_rows_land_with_the_commit_and_edits_in_one_sync_stay_consistent(open_engine):
    e = open_engine()
    for i in range(40):
        _note(e, f"n{i}.md", f"# note {i}\n\nquokka{i} shared words\n\n" + "filler line\n" * (i % 5))
    e.index()
    assert _fts_rows(e) == e.store.conn.execute("SELECT count(*) FROM fts_rows").fetchone()[0] > 0
    assert _hits(e, "quokka7") == {"n7.md"} and len(_hits(e, "shared")) == 20
    # edits re-derive and delete the rows inserted by the first sync
    _note(e, "n7.md", "# note 7\n\nwombat now\n")
    (e.vault / "n8.md").unlink()
    e.index()
    assert _hits(e, "quokka7") == set() and _hits(e, "wombat") == {"n7.md"} and _hits(e, "quokka8") == set()
    assert e.store.conn.execute("SELECT value FROM meta WHERE key = 'fts_stale_rows'").fetchone() is None
    assert _fts_rows(e) == e.store.conn.execute("SELECT count(*) FROM fts_rows").fetchone()[0]


def test_a_rolled_back_transaction_leaves_no_queued_rows(open_engine):
    e = open_engine()
    _note(e, "a.md", "# a\n\nalpha\n")
    e.index()
    before = _fts_rows(e)
    fid = e.store.conn.execute("SELECT id FROM files WHERE path = 'a.md'").fetchone()[0]
    with pytest.raises(RuntimeError), e.store.write() as c:
        db.insert_chunks(c, [(4242, fid, 9, 9, 9, "[]", "ghost", "h", 2)])
        db.insert_postings(c, [(4242, "ghost", "a")])
        raise RuntimeError("abort")
    with e.store.write():
        pass  # a later commit must not hand the aborted row to FTS5
    assert _fts_rows(e) == before and _hits(e, "ghost") == set()


def test_delete_in_the_same_transaction_sees_the_queued_row(open_engine):
    e = open_engine()
    _note(e, "a.md", "# a\n\nalpha\n")
    e.index()
    before = _fts_rows(e)
    fid = e.store.conn.execute("SELECT id FROM files WHERE path = 'a.md'").fetchone()[0]
    from reme_engine.index.tokenizer import default_tokenizer

    tok = default_tokenizer()
    with e.store.write() as c:
        db.insert_chunks(c, [(4242, fid, 9, 9, 9, "[]", "ghost", "h", 2)])
        # the file's title tokens, as its other rows have them (re-derived from its files row)
        db.insert_postings(c, [(4242, db.body_tokens(tok.tokenize, "ghost", "[]"), db._derived_title(c, fid, tok))])
        assert _fts_rows(e) == before  # queued, not yet in FTS5
        db.delete_postings(c, [4242])
        db.delete_chunks(c, [4242])
    assert _fts_rows(e) == before and _hits(e, "ghost") == set()
    assert e.store.conn.execute("SELECT value FROM meta WHERE key = 'fts_stale_rows'").fetchone() is None
