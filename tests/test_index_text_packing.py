"""Chunk text stored deflated (issue 12): ``chunks.body`` holds zlib of the text, ``chunks.text`` reads it back
exactly; edits and deletes re-derive postings from it; an index of the previous schema rebuilds itself."""

from __future__ import annotations

import sqlite3

from conftest import copy_vault, shared

from reme_engine.index import store as db
from reme_engine.markdown.chunker import chunk_markdown


def _write(p, text):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def _paths(e, q):
    return {h.path for h in e.search(q, mode="keyword", limit=20, neighbors=False).hits}


LONG = "# 光伏\n\n" + "多晶硅 工艺 polysilicon wafer 🌞 — the same words again and again.\n\n" * 40
SHORT = "# S\n\ntiny\n"


def test_text_reads_back_exactly_and_long_texts_are_deflated(open_engine):
    e = open_engine()
    _write(e.vault / "long.md", LONG)
    _write(e.vault / "short.md", SHORT)
    e.index()
    c = e.store.conn
    rows = c.execute("SELECT f.path, c.text, c.body FROM chunks c JOIN files f ON f.id = c.file_id"
                     " ORDER BY f.path, c.ord").fetchall()
    want = {p: [ch.text for ch in chunk_markdown(t, max_bytes=e.settings.chunk_bytes)]
            for p, t in (("long.md", LONG), ("short.md", SHORT))}
    got: dict[str, list[str]] = {}
    for path, text, _body in rows:
        got.setdefault(path, []).append(text)
    assert got == want
    kinds = {(p, type(b).__name__) for p, _t, b in rows}
    assert ("long.md", "bytes") in kinds and ("short.md", "str") in kinds  # short ones are kept as they are
    packed = sum(len(b) for p, _t, b in rows if p == "long.md")
    raw = sum(len(t.encode()) for p, t, _b in rows if p == "long.md")
    assert packed < raw / 3
    # what a search shows is the text itself
    hit = e.search("polysilicon", mode="keyword", limit=1, neighbors=False).hits[0]
    assert hit.path == "long.md" and hit.text in want["long.md"]


def test_pack_round_trip_odd_text():
    for text in ("", "x", "a" * 95, "a" * 96, "é" * 500, "\udcff lone surrogate " * 20, "🌞" * 300):
        body = db.pack_text(text)
        assert db.chunk_text(body) == text
        assert isinstance(body, str) == (len(text.encode("utf-8", "surrogatepass")) < db.PACK_MIN_BYTES
                                         or body == text)


def test_edits_and_deletes_rederive_postings_from_packed_text(open_engine):
    e = open_engine()
    _write(e.vault / "a.md", LONG.replace("polysilicon", "zebra"))
    _write(e.vault / "b.md", LONG)
    e.index()
    assert _paths(e, "zebra") == {"a.md"}
    _write(e.vault / "a.md", LONG.replace("polysilicon", "horse"))
    e.index_paths(["a.md"], vectors=False)
    (e.vault / "b.md").unlink()
    e.index()
    assert e.store.get_meta("fts_stale_rows") is None  # every old row's tokens came back exactly
    assert not _paths(e, "zebra")
    assert _paths(e, "horse") == {"a.md"}
    assert _paths(e, "polysilicon") == set()


def test_bare_connections_read_text_with_the_registered_function(open_engine):
    e = open_engine()
    _write(e.vault / "long.md", LONG)
    e.index()
    want = sorted(e.store.conn.execute("SELECT id, text FROM chunks"))
    assert e.store.quick_check() is None
    bare = db.register_functions(sqlite3.connect(e.store.db_path))
    try:
        assert sorted(bare.execute("SELECT id, text FROM chunks")) == want
        assert bare.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    finally:
        bare.close()
    plain = sqlite3.connect(e.store.db_path)  # without it: every other column still reads
    try:
        assert len(plain.execute("SELECT id, text_hash, has_vec FROM chunks").fetchall()) == len(want)
    finally:
        plain.close()


def test_an_index_of_schema_5_rebuilds_itself(open_engine, tmp_path):
    vault = tmp_path / "v"
    _write(vault / "a.md", "# 光伏\n\n多晶硅 工艺 polysilicon\n")
    state = tmp_path / "state0"
    state.mkdir()
    old = sqlite3.connect(state / "index.sqlite")
    old.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    old.execute("INSERT INTO meta VALUES ('schema_version', '5')")
    old.execute("CREATE TABLE chunks (id INTEGER PRIMARY KEY, file_id INTEGER, ord INTEGER, start_line INTEGER,"
                " end_line INTEGER, headings TEXT, text TEXT, text_hash TEXT, has_vec INTEGER)")
    old.execute("INSERT INTO chunks VALUES (1, 1, 0, 1, 1, '[]', 'stale text', 'h', 0)")
    old.commit()
    old.close()
    e = open_engine(vault)
    cols = [r[1] for r in e.store.conn.execute("PRAGMA table_xinfo(chunks)")]
    assert "body" in cols and "text" in cols
    assert e.store.get_meta("schema_version") == str(db.SCHEMA_VERSION)
    e.index()
    assert _paths(e, "polysilicon") == {"a.md"}
    assert [t for (t,) in e.store.conn.execute("SELECT text FROM chunks")] == ["# 光伏\n\n多晶硅 工艺 polysilicon"]


def test_real_vault_texts_identical_and_smaller(open_engine, tmp_path):
    """obsidian-tasks-docs-en: every chunk's text reads back as the chunker made it; the stored bodies are well
    under half the text's bytes."""
    vault = copy_vault(shared("vaults/obsidian-tasks-docs-en"), tmp_path / "tasks")
    e = open_engine(vault)
    e.index()
    rows = e.store.conn.execute("SELECT text, body FROM chunks").fetchall()
    assert rows and all(db.chunk_text(b) == t for t, b in rows)
    raw = sum(len(t.encode()) for t, _b in rows)
    stored = sum(len(b) if isinstance(b, bytes) else len(b.encode()) for _t, b in rows)
    assert stored < raw * 0.5
