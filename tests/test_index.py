"""Incremental indexing on real files: added / modified / removed / renamed, hashes, bad input, vectors."""

import json
import os
import time
import unicodedata
from pathlib import Path

import pytest


def _write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


@pytest.fixture
def vault(tmp_path):
    v = tmp_path / "vault"
    _write(v / "digest/wiki/cobalt.md", "---\nname: 钴\ndescription: 电池正极材料\ntags: [新能源]\n---\n# 钴\n\n"
           "钴是锂电池正极的关键原料。\n\n相关技术:: [[digest/wiki/battery]]\n")
    _write(v / "digest/wiki/battery.md", "# Battery\n\nLithium batteries use cobalt cathodes. See [[cobalt]].\n")
    _write(v / "daily/2026-11-28/notes.md", "# 今天\n\n调研了 [[digest/wiki/cobalt|钴]] 的供应链。\n")
    _write(v / "Other/plain note.md", "Just an ordinary Obsidian note linking [[missing page]].\n")
    _write(v / "resource/2026-11-27/data.json", '{"k": "光伏 组件 价格"}\n')
    _write(v / "elsewhere/data.json", '{"ignored": true}\n')
    _write(v / ".obsidian/workspace.md", "hidden")
    return v


def test_cold_index_counts_and_scope(make_engine, vault):
    e = make_engine(vault, embed=False)
    r = e.index()
    assert r.added == 5 and r.removed == 0 and not r.skipped
    paths = {row[0] for row in e.store.conn.execute("SELECT path FROM files")}
    assert "resource/2026-11-27/data.json" in paths
    assert "elsewhere/data.json" not in paths  # non-Markdown outside the layers is not indexed
    assert ".obsidian/workspace.md" not in paths
    info = e.store.file_info("digest/wiki/cobalt.md")
    assert info["name"] == "钴" and info["description"] == "电池正极材料"
    assert e.store.file_info("daily/2026-11-28/notes.md")["date"] == "2026-11-28"


def test_noop_and_touch_and_modify(make_engine, vault):
    e = make_engine(vault, embed=False)
    e.index()
    r = e.index()
    assert (r.added, r.modified, r.removed, r.unchanged) == (0, 0, 0, 5)
    p = vault / "digest/wiki/battery.md"
    os.utime(p, (time.time() + 5, time.time() + 5))  # touched, same content
    r = e.index()
    assert r.modified == 0 and r.unchanged == 5
    p.write_text(p.read_text() + "\nSodium-ion is cheaper.\n")
    r = e.index()
    assert r.modified == 1 and r.changed_paths == ["digest/wiki/battery.md"]
    assert e.search("sodium", mode="keyword").hits[0].path == "digest/wiki/battery.md"


def test_delete_and_rename_keep_graph_right(make_engine, vault):
    e = make_engine(vault, embed=False)
    e.index()
    assert any(n.path == "daily/2026-11-28/notes.md" for n in e.neighbors("digest/wiki/cobalt.md").inlinks)
    (vault / "digest/wiki/cobalt.md").rename(vault / "digest/wiki/cobalt-metal.md")
    r = e.index()
    assert r.renamed == 1 and r.added == 0 and r.removed == 0
    # [[cobalt]] by stem no longer resolves; the full-path link dangles too
    out = e.neighbors("daily/2026-11-28/notes.md").outlinks
    assert out[0].dangling
    (vault / "digest/wiki/cobalt-metal.md").rename(vault / "digest/wiki/cobalt.md")
    e.index()
    assert not e.neighbors("daily/2026-11-28/notes.md").outlinks[0].dangling
    (vault / "digest/wiki/battery.md").unlink()
    r = e.index()
    assert r.removed == 1
    assert e.search("lithium", mode="keyword").hits == []


def test_dangling_link_becomes_real_when_file_appears(make_engine, vault):
    e = make_engine(vault, embed=False)
    e.index()
    out = e.neighbors("Other/plain note.md").outlinks
    assert out[0].dangling
    _write(vault / "Other/missing page.md", "now here")
    e.index()
    out = e.neighbors("Other/plain note.md").outlinks
    assert not out[0].dangling and out[0].path == "Other/missing page.md"


def test_typed_predicates_on_edges(make_engine, vault):
    e = make_engine(vault, embed=False)
    e.index()
    out = e.neighbors("digest/wiki/cobalt.md").outlinks
    assert [(n.path, n.predicate) for n in out] == [("digest/wiki/battery.md", "相关技术")]
    inl = e.neighbors("digest/wiki/battery.md").inlinks
    assert ("digest/wiki/cobalt.md", "相关技术") in [(n.path, n.predicate) for n in inl]


BAD = {
    "bad/invalid-yaml.md": ("---\nname: [unclosed\n---\n# Body\nstill indexed 独角兽\n", None),
    "bad/list-yaml.md": ("---\n- a\n- b\n---\nbody words zebra\n", None),
    "bad/bom-crlf.md": ("\ufeff---\r\nname: BOM note\r\n---\r\n# T\r\n\r\nkangaroo line\r\n", None),
    "bad/rule.md": ("---\n\nnot frontmatter, a thematic break\n\nplatypus paragraph\n", None),
    "bad/brackets.md": ("[" * 40000 + " wombat\n", None),
    "bad/oneline.md": ("x" * 3_000_000 + " echidna\n", None),
}


def test_bad_input_is_indexed_or_skipped_with_reason(make_engine, tmp_path):
    v = tmp_path / "v"
    for rel, (text, _) in BAD.items():
        _write(v / rel, text)
    (v / "bad").mkdir(exist_ok=True)
    (v / "bad/binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (v / "bad/latin1.md").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (v / "bad/huge.md").write_bytes(b"a" * (9 * 1024 * 1024))
    (v / "loop").mkdir()
    (v / "loop/self").symlink_to(v / "loop")
    (v / "out.md").symlink_to(tmp_path / "outside.md")
    (tmp_path / "outside.md").write_text("secret")
    nfd = unicodedata.normalize("NFD", "bad/café.md")
    _write(v / nfd, "nfd named note llama")
    e = make_engine(v, embed=False)
    r = e.index()
    reasons = {s["path"]: s["reason"] for s in r.skipped}
    assert "binary" in reasons["bad/binary.md"]
    assert "UTF-8" in reasons["bad/latin1.md"]
    assert "too large" in reasons["bad/huge.md"]
    assert "leaves the vault" in reasons["out.md"]
    for word, path in [("独角兽", "bad/invalid-yaml.md"), ("zebra", "bad/list-yaml.md"),
                       ("kangaroo", "bad/bom-crlf.md"), ("platypus", "bad/rule.md"), ("wombat", "bad/brackets.md"),
                       ("echidna", "bad/oneline.md"), ("llama", unicodedata.normalize("NFC", "bad/café.md"))]:
        hits = e.search(word, mode="keyword").hits
        assert hits and hits[0].path == path, word
    assert e.store.file_info("bad/bom-crlf.md")["name"] == "BOM note"
    assert e.store.file_info("bad/invalid-yaml.md")["warning"]
    h = e.search("kangaroo", mode="keyword").hits[0]
    assert (h.start_line, h.end_line) == (4, 6) or h.start_line <= 6 <= h.end_line
    health = e.health_check()
    assert {s["path"] for s in health["skipped"]} >= {"bad/binary.md", "bad/latin1.md", "bad/huge.md"}
    # skipped files stay skipped without re-reading; a fixed file is indexed
    (v / "bad/latin1.md").write_text("café au lait fixed", encoding="utf-8")
    r = e.index()
    assert r.added == 1 and "bad/latin1.md" not in {s["path"] for s in e.store.skipped()}


def test_file_vanishing_during_index_is_not_fatal(make_engine, vault, monkeypatch):
    e = make_engine(vault, embed=False)
    from reme_engine.index import indexer as ix

    real_parse = ix.Indexer.parse

    def flaky(self, entry):
        if entry.rel == "digest/wiki/battery.md":
            entry.abs.unlink()
        return real_parse(self, entry)

    monkeypatch.setattr(ix.Indexer, "parse", flaky)
    r = e.index()
    assert r.added == 4
    assert e.store.file_info("digest/wiki/battery.md") is None


def test_vectors_cache_and_rebuild(make_engine, vault, tmp_path):
    e = make_engine(vault)
    r = e.index()
    n = r.chunks_total
    assert r.embedded == n and e.vectors.ready and len(e.vectors.index) == n
    hits = e.search("cathode material for lithium batteries", mode="vector").hits
    assert hits[0].vector_rank == 1
    # deleting the index but keeping the embedding cache: nothing is re-embedded
    state = e.state_dir
    e.close()
    for name in os.listdir(state):
        if name.startswith("index.sqlite") or name.startswith("vectors-"):
            os.unlink(state / name)
    from reme_engine.engine import Engine

    e2 = Engine.open(e.settings, embedder=e.embedder)
    try:
        r2 = e2.index()
        assert r2.embedded == 0 and r2.embed_cached == n
        assert len(e2.vectors.index) == n
    finally:
        e2.close()


def test_stale_vector_file_is_rebuilt_from_cache(make_engine, vault):
    e = make_engine(vault)
    e.index()
    path = e.vectors.path
    e.close()
    path.write_bytes(b"garbage")
    from reme_engine.engine import Engine

    e2 = Engine.open(e.settings, embedder=e.embedder)
    try:
        r = e2.search("钴 电池", mode="vector")
        assert r.hits and r.degraded is None
        assert e2.embed_pending().embedded == 0
    finally:
        e2.close()


def test_tokenizer_change_rebuilds_keyword_index(make_engine, vault):
    e = make_engine(vault, embed=False)
    e.index()
    with e.store.write():
        e.store.set_meta("tokenizer", "old-fingerprint")
    from reme_engine.index.indexer import Indexer

    ix = Indexer(e.vault, e.settings, e.store, e.tokenizer)
    r = ix.sync()
    assert r.modified == 5  # every file re-tokenised
    assert e.store.get_meta("tokenizer") == e.tokenizer.fingerprint
    fts = e.store.conn.execute("SELECT count(*) FROM chunks_fts").fetchone()[0]
    assert fts == e.store.counts()["chunks"]
    assert e.search("钴", mode="keyword").hits


def test_connections_are_reused_across_short_lived_threads(make_engine, vault):
    """Textual runs each worker on a new thread; the store must not open a connection per thread forever."""
    import threading

    e = make_engine(vault, embed=False)
    e.index()
    results = []

    def work():
        results.append(len(e.search("钴", mode="keyword").hits))

    for _ in range(50):
        t = threading.Thread(target=work)
        t.start()
        t.join()
    assert results == [results[0]] * 50 and results[0] > 0
    assert len(e.store._owned) <= 3


def test_concurrent_search_while_indexing(make_engine, vault):
    import threading

    e = make_engine(vault, embed=False)
    e.index()
    errors = []
    stop = threading.Event()

    def searcher():
        while not stop.is_set():
            try:
                e.search("battery", mode="keyword")
            except Exception as exc:  # pragma: no cover - the assertion reports it
                errors.append(exc)

    threads = [threading.Thread(target=searcher) for _ in range(3)]
    for t in threads:
        t.start()
    for i in range(20):
        (vault / f"digest/wiki/gen{i}.md").write_text(f"# Gen {i}\n\nbattery note {i}\n")
        e.index_paths([f"digest/wiki/gen{i}.md"])
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    assert len(e.search("battery", mode="keyword", limit=50).hits) >= 21


def test_text_inside_invalid_frontmatter_stays_searchable(make_engine, tmp_path):
    v = tmp_path / "v"
    _write(v / "n.md", "---\nthis is prose with an aardvark: but: not yaml: [\n---\nbody text\n")
    e = make_engine(v, embed=False)
    e.index()
    hits = e.search("aardvark", mode="keyword").hits
    assert hits and hits[0].path == "n.md" and hits[0].start_line == 1
    assert e.store.file_info("n.md")["warning"]


def test_parallel_parse_gives_the_same_index(make_engine, tmp_path, monkeypatch):
    """The process-pool path (big syncs) and the serial path produce identical rows."""
    from reme_engine.index import indexer as ix

    v = tmp_path / "v"
    for i in range(40):
        _write(v / f"notes/n{i}.md", f"---\nname: 笔记{i}\n---\n# 标题 {i}\n\n内容 content {i} [[notes/n{(i + 1) % 40}]]\n")
    _write(v / "notes/bad.md", "caf\xe9")
    (v / "notes/bad.md").write_bytes("caf\xe9".encode("latin-1"))
    rows = []
    pools = []
    real_pool = ix._parse_pool
    monkeypatch.setattr(ix, "_parse_pool", lambda *a: pools.append(real_pool(*a)) or pools[-1])
    monkeypatch.setattr(ix, "POOL_MAX_LOAD_PER_CPU", 1e9)  # whatever the machine's load
    for threshold in (10_000, 5):
        monkeypatch.setattr(ix, "PARALLEL_MIN_FILES", threshold)
        monkeypatch.setattr(ix, "PARALLEL_ENABLED", True)
        monkeypatch.setattr(ix, "PARALLEL_MIN_BYTES", 0)
        monkeypatch.setattr(ix, "INLINE_HEAD_FILES", 4)  # the first files parse in-process, the rest in the pool
        e = make_engine(v, embed=False)
        r = e.index()
        assert r.added == 40 and len(r.skipped) == 1
        rows.append((sorted(e.store.conn.execute("SELECT id, start_line, end_line, text FROM chunks")),
                     sorted(e.store.conn.execute("SELECT rowid, body, title FROM chunks_fts")),
                     sorted(e.store.conn.execute("SELECT target, resolved FROM links"))))
    assert rows[0] == rows[1]
    assert pools[0] is None and pools[-1] is not None  # serial first, then the pool


def test_no_parse_pool_on_a_busy_machine(monkeypatch):
    """With every core busy (1-minute load at POOL_MAX_LOAD_PER_CPU per CPU) a big sync parses in-process."""
    from reme_engine.index import indexer as ix

    monkeypatch.setattr(ix, "PARALLEL_ENABLED", True)
    monkeypatch.delenv("REME_NO_PARALLEL_INDEX", raising=False)
    monkeypatch.setattr(ix.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(ix.os, "getloadavg", lambda: (2.0, 0.0, 0.0))
    assert ix._parse_pool(10_000, 1 << 30) is None
    monkeypatch.setattr(ix.os, "getloadavg", lambda: (0.5, 0.0, 0.0))
    pool = ix._parse_pool(10_000, 1 << 30)
    try:
        assert pool is not None
    finally:
        pool.shutdown()


def test_index_paths_finds_nfd_names_on_disk(make_engine, tmp_path):
    v = tmp_path / "v"
    nfd = unicodedata.normalize("NFD", "daily/café.md")
    _write(v / nfd, "croissant note")
    e = make_engine(v, embed=False)
    e.index()
    nfc = unicodedata.normalize("NFC", "daily/café.md")
    (v / nfd).write_text("croissant note, edited with brioche")
    r = e.index_paths([nfc])
    assert r.modified == 1 and r.removed == 0
    assert e.search("brioche", mode="keyword").hits[0].path == nfc


def test_links_follow_writes_and_deletes(make_engine, tmp_path):
    """Link resolution tracks files created and deleted through jobs (no stale path list)."""
    v = tmp_path / "v"
    _write(v / "notes/b.md", "see [[c]]\n")
    e = make_engine(v, embed=False)
    e.index()
    assert e.neighbors("notes/b.md").outlinks[0].dangling
    e.write("notes/c.md", "# C\n")
    assert not e.neighbors("notes/b.md").outlinks[0].dangling
    res = e.delete("notes/c.md")
    assert [n["path"] for n in res.surviving_inlinks] == ["notes/b.md"]
    assert e.neighbors("notes/b.md").outlinks[0].dangling
    e.index()
    assert e.neighbors("notes/b.md").outlinks[0].dangling


def test_non_utf8_file_names_are_skipped_not_fatal(make_engine, tmp_path):
    import os

    v = tmp_path / "v"
    _write(v / "good.md", "goodword\n")
    os.makedirs(v, exist_ok=True)
    with open(os.path.join(os.fsencode(v), b"caf\xe9.md"), "wb") as fh:
        fh.write(b"bad name")
    with open(os.path.join(os.fsencode(v), b"r\xe9sum\xe9.png"), "wb") as fh:
        fh.write(b"png")
    e = make_engine(v, embed=False)
    r = e.index()
    assert r.added == 1
    assert any("not valid UTF-8" in s["reason"] for s in r.skipped)
    assert e.search("goodword", mode="keyword").hits
    assert any("not valid UTF-8" in s["reason"] for s in e.health_check()["skipped"])


@pytest.mark.parametrize("which", ["index.sqlite", "embeddings.sqlite"])
def test_corrupt_database_is_moved_aside_and_rebuilt(make_engine, vault, which):
    e = make_engine(vault, embed=False)
    e.index()
    state, settings = e.state_dir, e.settings
    e.close()
    (state / which).write_bytes(b"this is not a database" * 100)
    from reme_engine.engine import Engine

    e2 = Engine.open(settings)
    try:
        assert any(which in r for r in e2.store.recovered)
        assert list(state.glob(which + ".corrupt-*"))
        e2.index()
        assert e2.search("钴", mode="keyword").hits
    finally:
        e2.close()


def _links_state(e) -> dict:
    return {r[0]: r[1:] for r in e.store.conn.execute("SELECT id, resolved, ambiguous, virtual FROM links")}


def _links_from_scratch(e) -> dict:
    """What a full re-resolution with a freshly built resolver gives for every link."""
    resolver = e.indexer.build_resolver()
    out = {}
    for lid, target, src in e.store.conn.execute(
            "SELECT l.id, l.target, f.path FROM links l JOIN files f ON f.id = l.src_id"):
        if not target:
            out[lid] = (src, 0, src)
        else:
            r = resolver.resolve(target, src)
            out[lid] = (r.path, int(r.ambiguous), r.path or r.virtual)
    return out


def test_incremental_link_resolution_matches_a_full_one(make_engine, demo_vault):
    """Watcher-sized syncs re-resolve only the links that can change; after every kind of change the links
    table equals a from-scratch resolution (names, stems, aliases, ambiguity, renames, another process)."""
    import shutil as _sh

    v = demo_vault
    e = make_engine(v, embed=False)
    e.index()
    (v / "notes").mkdir()
    (v / "notes/src.md").write_text(
        "# Src\n\n[[Brand New]] [[brand new]] [[Twin]] [[folder/Twin]] [[nick name]] [[Moved]] [[img.png]]\n"
        "see:: [[Elsewhere Note]]\n")
    e.index_paths(["notes/src.md"])
    steps = [
        ("create a note named by dangling links", lambda: (v / "Brand New.md").write_text("# Brand New\n"),
         ["Brand New.md"]),
        ("a second note with the same stem", lambda: ((v / "a").mkdir(), (v / "a/Twin.md").write_text("x\n")),
         ["a/Twin.md"]),
        ("a third, making it ambiguous", lambda: ((v / "folder").mkdir(), (v / "folder/Twin.md").write_text("y\n")),
         ["folder/Twin.md"]),
        ("delete one of them", lambda: (v / "a/Twin.md").unlink(), ["a/Twin.md"]),
        ("add an alias", lambda: (v / "notes/target.md").write_text("---\naliases: [Nick Name]\n---\n# T\n"),
         ["notes/target.md"]),
        ("remove the alias", lambda: (v / "notes/target.md").write_text("# T, no alias now\n"),
         ["notes/target.md"]),
        ("alias comes back on another note", lambda: (v / "Brand New.md").write_text(
            "---\naliases:\n  - nick name\n---\n# Brand New\n"), ["Brand New.md"]),
        ("rename a note (same content)", lambda: (v / "Brand New.md").rename(v / "notes/Moved.md"),
         ["Brand New.md", "notes/Moved.md"]),
        ("an attachment appears", lambda: (v / "notes/img.png").write_bytes(b"\x89PNG\r\n"), ["notes/img.png"]),
        ("the linking note changes", lambda: (v / "notes/src.md").write_text(
            "# Src\n\n[[Moved]] [[Twin]] [[Elsewhere Note]]\n"), ["notes/src.md"]),
    ]
    for what, act, paths in steps:
        act()
        e.index_paths(paths)
        assert _links_state(e) == _links_from_scratch(e), what
    moved = [r for r in e.neighbors("notes/src.md").outlinks if r.path == "notes/Moved.md"]
    assert moved and not moved[0].dangling
    # another process (its own engine on the same state dir) changes the vault's names: ours notices
    other = make_engine(v, embed=False, state_dir=str(e.state_dir))
    (v / "Elsewhere Note.md").write_text("# Elsewhere\n")
    other.index_paths(["Elsewhere Note.md"])
    (v / "notes/src.md").write_text("# Src\n\n[[Elsewhere Note]] [[Moved]] [[Twin]] and more\n")
    e.index_paths(["notes/src.md"])
    assert _links_state(e) == _links_from_scratch(e)
    assert any(r.path == "Elsewhere Note.md" and not r.dangling for r in e.neighbors("notes/src.md").outlinks)
    _sh.rmtree(v / "folder")
    e.index()  # a full scan after a folder vanished
    assert _links_state(e) == _links_from_scratch(e)


def test_symlink_loop_in_a_batch_is_skipped_and_the_rest_indexed(make_engine, vault):
    e = make_engine(vault, embed=False)
    e.index()
    day = vault / "daily/2026-11-28"
    os.symlink("loopB.md", day / "loopA.md")
    os.symlink("loopA.md", day / "loopB.md")
    (day / "newcard.md").write_text("# New\n\nloopcompanion word\n")
    rep = e.index_paths(["daily/2026-11-28/loopA.md", "daily/2026-11-28/loopB.md", "daily/2026-11-28/newcard.md"])
    assert e.search("loopcompanion", mode="keyword").hits[0].path == "daily/2026-11-28/newcard.md"
    reasons = {s["path"]: s["reason"] for s in rep.skipped}
    assert "symlink loop" in reasons["daily/2026-11-28/loopA.md"]
    skipped = {r[0] for r in e.store.conn.execute("SELECT path FROM skipped")}
    assert {"daily/2026-11-28/loopA.md", "daily/2026-11-28/loopB.md"} <= skipped  # health_check lists them
    # an indexed note replaced by a looping symlink leaves the index
    (vault / "Other/plain note.md").unlink()
    os.symlink("plain note.md", vault / "Other/plain note.md")
    e.index_paths(["Other/plain note.md"])
    assert e.store.file_info("Other/plain note.md") is None
    assert not e.search("ordinary Obsidian", mode="keyword").hits
    # the jobs answer with an error, not a traceback
    from reme_engine.jobs import run_job

    out = run_job(e, "read", {"path": "Other/plain note.md"})
    assert out["success"] is False and "symlink loop" in out["error"]


def test_renamed_heading_updates_the_trail_and_the_vector_of_unchanged_chunks(make_engine, tmp_path):
    v = tmp_path / "v"
    body = "intro text of the note body. " * 60  # sections over the chunk budget: one chunk each
    subtext = "the sub section keeps its text. " * 60
    _write(v / "n.md", f"# Alpha\n\n{body}\n\n## Sub\n\n{subtext}\n")
    e = make_engine(v)
    e.index()
    sub = lambda: e.store.conn.execute(  # noqa: E731
        "SELECT id, headings, has_vec FROM chunks WHERE text LIKE '%keeps its text%'").fetchone()
    cid, heads, has_vec = sub()
    assert json.loads(heads) == ["Alpha", "Sub"] and has_vec == 1
    before = e.vectors.index._index.reconstruct(int(cid)) if e.vectors.index.kind == "flat" else None
    (v / "n.md").write_text(f"# Beta renamed\n\n{body}\n\n## Sub\n\n{subtext}\n")
    e.index_paths(["n.md"])
    cid2, heads, has_vec = sub()
    assert cid2 == cid and json.loads(heads) == ["Beta renamed", "Sub"] and has_vec == 1
    assert e.search("Beta renamed", mode="keyword").hits
    if before is not None:  # the vector was re-embedded from the new heading trail
        import numpy as np

        assert not np.allclose(before, e.vectors.index._index.reconstruct(int(cid)))


def test_pathological_notes_index_with_bounded_work(make_engine, tmp_path, monkeypatch):
    """ARCHITECTURE §8, issue 12: a line of 60,000 '[', a note with more links than MAX_LINKS_PER_FILE and an
    unclosed 1 MB fence index fully, with bounded per-file work (asserted on work done, wall time is the bench's):
    the description looks at a bounded prefix, the graph keeps the first MAX_LINKS_PER_FILE links and the file's
    warning says where it stops."""
    from reme_engine.index import parse as ix

    monkeypatch.setattr(ix, "MAX_LINKS_PER_FILE", 2_000)
    v = tmp_path / "vault"
    _write(v / "brackets.md", "[" * 60_000 + "] tail words\n")
    _write(v / "links.md", "# Index\n" + "".join(f"[[n{i}]] " for i in range(30_000)) + "\n" + "[[late]]\n")
    _write(v / "fence.md", "# F\n\n```\n" + "code [[not a link]] line\n" * 40_000)
    _write(v / "small.md", "# Small\n\nordinary quokka words\n")
    seen = []
    real = ix.plain_line
    monkeypatch.setattr(ix, "plain_line", lambda s: seen.append(len(s)) or real(s))
    e = make_engine(v, embed=False)
    r = e.index()
    assert r.added == 4 and not r.skipped
    assert seen and max(seen) <= ix.SUMMARY_SCAN_CHARS
    c = e.store.conn
    n_links = dict(c.execute("SELECT f.path, count(l.id) FROM files f LEFT JOIN links l ON l.src_id = f.id"
                             " GROUP BY f.path").fetchall())
    assert n_links["links.md"] == 2_000 and n_links["fence.md"] == 0
    warn = c.execute("SELECT warning FROM files WHERE path='links.md'").fetchone()[0]
    assert "indexed partially" in warn and "line 2" in warn
    assert c.execute("SELECT warning FROM files WHERE path='small.md'").fetchone()[0] is None
    assert e.search("quokka", mode="keyword").hits[0].path == "small.md"
    assert e.search("tail", mode="keyword").hits[0].path == "brackets.md"


def test_first_sync_commits_small_recent_notes_first(make_engine, tmp_path, monkeypatch):
    """Issue 12: a multi-batch sync commits a small first batch of the newest small notes, so they are searchable
    (from another connection, as `job search` is) while the rest, big files last, is still being indexed;
    ``Store.index_state`` says a sync is under way until the end."""
    import sqlite3

    from reme_engine.index import indexer as ix

    monkeypatch.setattr(ix, "BATCH_FILES", 8)
    monkeypatch.setattr(ix, "FIRST_BATCH_FILES", 4)
    v = tmp_path / "vault"
    now = time.time()
    for i in range(30):
        p = _write(v / f"notes/n{i:02d}.md", f"# N{i}\n\nwords of note {i} zebra{i}\n")
        os.utime(p, (now - 1000 + i, now - 1000 + i))  # n29 is the newest
    _write(v / "big.md", "# Big\n\n" + "bulky words here\n" * 6000)  # > SMALL_FIRST_BYTES: last
    e = make_engine(v, embed=False)
    seen: list[tuple[int, set, dict]] = []

    def progress(stage, done, total, detail):
        if stage == "index" and 0 < done < total:
            ro = sqlite3.connect(f"file:{e.store.db_path}?mode=ro", uri=True)
            try:
                paths = {r[0] for r in ro.execute("SELECT path FROM files")}
            finally:
                ro.close()
            seen.append((done, paths, e.store.index_state()))

    r = e.indexer.sync(progress)
    assert r.added == 31
    done, first, state = seen[0]
    assert done == 4 and first == {f"notes/n{i:02d}.md" for i in (29, 28, 27, 26)}
    assert state["syncing"] and not state["keyword_ready"]
    assert all("big.md" not in paths for _, paths, _ in seen[:-1])
    end = e.store.index_state()
    assert (end["syncing"], end["files"], end["keyword_ready"]) == (False, 31, True)
    assert end["vectors_pending"] > 0  # no embedder here: keyword-only, and the state says so
    assert e.search("zebra29", mode="keyword").hits[0].path == "notes/n29.md"


def test_changing_chunk_bytes_rechunks_an_existing_index(make_engine, tmp_path):
    """Issue 12: chunk_bytes is in the index fingerprint; reopening with another value re-chunks every file at the
    next sync (it used to do nothing until `job reindex clear=true`)."""
    v = tmp_path / "vault"
    _write(v / "long.md", "# Long\n\n" + "\n\n".join(f"paragraph {i} " + "lorem ipsum dolor " * 12 for i in range(40)))
    _write(v / "short.md", "# Short\n\nfew words\n")
    e = make_engine(v, embed=False, chunk_bytes=2000)
    e.index()
    before = e.store.counts()["chunks"]
    e.close()
    e2 = make_engine(v, embed=False, chunk_bytes=400, state_dir=str(e.state_dir))
    r = e2.index()
    assert r.modified == 2 and r.unchanged == 0
    sizes = [len(t.encode()) for (t,) in e2.store.conn.execute("SELECT text FROM chunks")]
    assert e2.store.counts()["chunks"] > before and max(sizes) <= 400
    assert e2.index().unchanged == 2  # and the new fingerprint is kept: the next sync is a no-op


def test_reindex_clear_starts_a_fresh_file_and_keeps_catalogs(make_engine, vault):
    """Issue 12: `reindex clear=true` replaces the database by a fresh file (no DELETE of every posting) keeping the
    pipelines' catalogs; while another process has the index open it falls back to deleting rows."""
    from reme_engine.index.store import Store

    e = make_engine(vault, embed=False)
    e.index()
    e.store.catalog_set("auto_resource", {"resource/2026-11-27/data.json": "abc"})
    ino = os.stat(e.store.db_path).st_ino
    r = e.reindex(clear=True, vectors=False)
    assert r.added == 5 and os.stat(e.store.db_path).st_ino != ino
    assert e.store.catalog_get("auto_resource") == {"resource/2026-11-27/data.json": "abc"}
    assert e.search("sodium OR cobalt", mode="keyword").hits
    assert not list(e.store.db_path.parent.glob("*.fresh*"))
    other = Store(e.store.db_path, e.store.emb_path)  # a second user of the index (the app, --serve)
    try:
        ino = os.stat(e.store.db_path).st_ino
        r = e.reindex(clear=True, vectors=False)
        assert r.added == 5 and os.stat(e.store.db_path).st_ino == ino
        assert other.counts()["files"] == 5
    finally:
        other.close()


def test_description_from_the_head_matches_the_whole_text_scan():
    """The first prose line found in the first SUMMARY_HEAD_CHARS characters is the one the whole text's lines give:
    a line cut by the boundary, a "\\r\\n" split by it, 200 skipped lines and prose only after the head."""
    from reme_engine.index import parse as ix

    head = ix.SUMMARY_HEAD_CHARS

    def whole(text: str) -> str:
        return ix._summary_of(text[: 200 * ix.SUMMARY_SCAN_CHARS].splitlines()[:200], 120) or ""

    cases = ["x" * (head + 10), "#\n" * 2100 + "prose after the cap", "<p>\n" * 2000 + "late prose line\n",
             "# h\n" + "y" * (head - 5) + "\r\nnext", "#" * (head - 1) + "\r\nprose", "\n" * (head + 1) + "z",
             "## T\n\n- [[Note|shown]] and **bold**\n" + "filler\n" * 1000, "| a |\n" * 900 + "tail"]
    for text in cases:
        assert len(text) > head
        assert ix._first_line_summary(text) == whole(text), text[:40]
    assert ix._first_line_summary("# T\n\n- [[Note|shown]] and **bold**\n" + "f\n" * 3000) == "shown and bold"


def test_dangling_symlink_is_skipped_as_missing(make_engine, tmp_path):
    """A note symlink whose target does not exist is skipped with that reason (not "indexed there")."""
    v = tmp_path / "v"
    _write(v / "odd/real.md", "real quokka note\n")
    (v / "odd/dangling.md").symlink_to("nowhere.md")
    e = make_engine(v, embed=False)
    r = e.index()
    assert {s["path"]: s["reason"] for s in r.skipped} == {"odd/dangling.md": "symlink to a missing file"}
    assert r.added == 1


def test_wants_vector_counts_content_characters_of_the_first_200():
    """wants_vector stops at the 12th content character; the answer is the count over the first 200 characters."""
    import random

    from reme_engine.index import parse as ix

    def by_count(t: str) -> bool:
        return len(ix._NON_CONTENT_RE.sub("", t[:200])) >= ix.MIN_VECTOR_CHARS

    alphabet = " \t\n#>*_`|-=~[]()!:.,;ab中\u3000\xa0é"
    rnd = random.Random(4)
    for _ in range(20_000):
        t = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 260)))
        assert ix.wants_vector(t) == by_count(t), t
    assert not ix.wants_vector("# -- " + "-" * 300 + "abcdefghijkl")  # content past the first 200 characters
    assert ix.wants_vector("- [ ] " + "word " * 3)
