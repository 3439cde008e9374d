"""The warm search path's shortcuts change nothing a user sees: cached per-term BM25 scores, one freshness check per
search, and the title vectors searched beside the chunk vectors (reme_engine.search.bm25mem / hybrid)."""

import reme_engine.index.store as store_mod


def _write(p, text):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def _fts5(e, q, n=50):
    """The keyword leg through FTS5's bm25() (the in-memory scorer off), for comparison."""
    s = e.searcher
    s.memory_bm25 = False
    try:
        return s.keyword_leg(q, n, None)
    finally:
        s.memory_bm25 = True


def test_cached_term_scores_stay_fts5s_and_follow_a_save(open_engine, monkeypatch):
    e = open_engine()
    v = e.settings.vault
    for i in range(12):
        _write(v / f"n{i}.md", f"# Note {i}\n\nalpha beta {'gamma ' * (i % 4)}delta {i}\n\n" + "filler words " * i)
    e.index()
    s = e.searcher
    queries = ["alpha gamma", "beta delta", "gamma", "alpha beta gamma delta"]
    for q in queries * 2:  # the second round reads the per-term scores cached by the first
        assert [round(x, 9) for _, x in s.keyword_leg(q, 50, None)] == [round(x, 9) for _, x in _fts5(e, q)], q
    mem = s._memory()
    assert "gamma" in mem._scored

    # one freshness check (an SQL read of the postings' generation) per search, however often it asks the scorer
    calls = []
    real = store_mod.postings_gen
    monkeypatch.setattr(store_mod, "postings_gen", lambda c: calls.append(1) or real(c))
    e.search("alpha gamma", mode="keyword", limit=5)
    assert len(calls) == 1
    assert not getattr(mem._tl, "pinned", False)  # unpinned after the search: the next one checks again

    # a save between two searches: the next search sees the new word and the changed statistics
    _write(v / "n3.md", "# Note 3\n\nzyzzyva gamma gamma gamma\n")
    e.index_paths(["n3.md"], vectors=False)
    hits = e.search("zyzzyva", mode="keyword").hits
    assert [h.path for h in hits] == ["n3.md"]
    for q in queries:
        assert [round(x, 9) for _, x in s.keyword_leg(q, 50, None)] == [round(x, 9) for _, x in _fts5(e, q)], q


def test_title_vectors_searched_beside_chunk_vectors_rank_as_one_after_the_other(make_engine, tmp_path,
                                                                                 monkeypatch):
    """The hybrid path searches the title vectors on the calling thread while the worker searches the chunk
    vectors; the merged leg is the same as the sequential ``vector_leg``, title cosines and all."""
    v = tmp_path / "v"
    notes = {"习惯的力量": "每天重复的小行动会积累成大的改变。", "Spaced repetition": "Review cards at growing intervals.",
             "番茄工作法": "二十五分钟专注，然后休息五分钟。", "Deep work": "Long stretches of focus without distraction.",
             "复利效应": "小的优势随时间指数增长。", "Zettelkasten": "Atomic notes linked to each other."}
    for title, body in notes.items():
        _write(v / f"{title}.md", f"# {title}\n\n{body}\n")
    e = make_engine(v)
    e.index()
    s = e.searcher
    assert s.wait_titles()
    import reme_engine.search.hybrid as hybrid

    for q, split in [(q, split) for q in ["habits", "focus", "间隔重复", "compound interest", "卡片盒笔记"]
                     for split in (True, False)]:
        monkeypatch.setattr(hybrid, "SPLIT_TITLE_SEARCH", split)
        run = s.run_legs(q, 50, mode="hybrid")
        seq, title_ids = s._vector_leg(q, 50, None)
        assert run["legs"]["vector"] == seq, q
        assert run["title_ids"] == title_ids, q
        assert run["vector_ms"] > 0
    assert any(s.run_legs(q, 50)["title_ids"] for q in ["habits", "Deep work"])


def test_result_snippets_cut_long_chunks_as_before():
    """The search screen's one-line snippet measures only the head of a long chunk: same text as measuring it all
    (CJK, emoji, combining marks), on real chunks of knowledge-garden-zh."""
    from rich.cells import cell_len, set_cell_size

    from conftest import shared
    from reme_tui.render import snippet, truncate_cells

    def reference(text, width, ellipsis="…"):
        if width <= 0:
            return ""
        if cell_len(text) <= width:
            return text
        keep = width - cell_len(ellipsis)
        if keep <= 0:
            return ellipsis[:width]
        return set_cell_size(text, keep).rstrip(" ") + ellipsis

    notes = sorted(shared("vaults/knowledge-garden-zh").rglob("*.md"))[::60]
    samples = [p.read_text(encoding="utf-8") for p in notes]
    samples += ["e\u0301" * 500, "👩‍👩‍👧" * 300, "宽" * 1000 + "x", "a" * 100]
    for text in samples:
        flat = " ".join(text.split())
        for width in (1, 2, 10, 37, 80, 200):
            assert truncate_cells(flat, width) == reference(flat, width), (width, flat[:40])
    cut = snippet("# T\n\n" + "习惯 " * 300 + "关键词 尾巴", 40, "关键词")
    assert cut.startswith("…") and "关键词" in cut and cell_len(cut) <= 40


def test_second_stage_sees_an_edited_line_at_the_next_search(open_engine):
    """The second stage's per-text line index (``rerank._text_lines``, kept across searches) is keyed by the chunk's
    text: a save that brings the query's words (one of them inflected) onto one line raises that hit's coverage share
    at the next search, and moving them apart again lowers it."""
    from reme_engine.search.rerank import line_coverage

    e = open_engine()
    v = e.settings.vault
    for i in range(6):
        _write(v / f"f{i}.md", f"# Filler {i}\n\northogonal things {i}\n\nsome paint here\n")
    apart = "# Target\n\northogonal ideas\n\nwe were painting walls\n"
    together = "# Target\n\northogonal painting of walls\n"
    _write(v / "target.md", apart)
    e.index()

    def boost():
        hits = e.search("orthogonal paint", mode="keyword", limit=10).hits
        got = [h for h in hits if h.path == "target.md"]
        assert got, [h.path for h in hits]
        return got[0]

    before = boost()
    assert line_coverage(before.text, {"orthogonal": 1.0, "paint": 1.0}) == 0.5
    for text, want in ((together, 1.0), (apart, 0.5)):
        _write(v / "target.md", text)
        e.index_paths(["target.md"], vectors=False)
        hit = boost()
        assert ("orthogonal painting" in hit.text) == (want == 1.0)  # the hit shows the saved text
        assert line_coverage(hit.text, {"orthogonal": 1.0, "paint": 1.0}) == want
        if want == 1.0:
            assert hit.field_boost > before.field_boost
        else:
            assert hit.field_boost == before.field_boost


def test_neighbour_directory_follows_link_edits_from_this_thread_and_others(open_engine):
    """Hit files' hop-2 directories are remembered per connection while the database is unchanged
    (``graph.db_version``): a saved link, on this thread or another one, shows at the next search."""
    import threading

    from reme_engine.search import graph

    e = open_engine()
    v = e.settings.vault
    _write(v / "a.md", "# A\n\nquokka facts, see [[b]]\n")
    _write(v / "b.md", "# B\n\nnothing here\n")
    _write(v / "c.md", "# C\n\nunrelated\n")
    e.index()

    def directory():
        res = e.search("quokka", mode="keyword", limit=5)
        assert [h.path for h in res.hits] == ["a.md"]
        nb = res.neighbors["a.md"]
        return [n["path"] for n in nb["outlinks"]], [n["path"] for n in nb["inlinks"]]

    assert directory() == (["b.md"], [])
    assert directory() == (["b.md"], [])  # answered from the remembered directory
    assert any(("a.md", graph.MAX_OUTLINKS, graph.MAX_INLINKS) in entry[2] for entry in graph._DIRS.values())

    _write(v / "c.md", "# C\n\nnow about [[a]]\n")
    e.index_paths(["c.md"], vectors=False)  # this thread's connection
    assert directory() == (["b.md"], ["c.md"])

    def save():
        _write(v / "b.md", "# B\n\nback to [[a]]\n")
        e.index_paths(["b.md"], vectors=False)

    t = threading.Thread(target=save)  # another thread: its own connection
    t.start()
    t.join(30)
    assert not t.is_alive()
    assert directory() == (["b.md"], ["b.md", "c.md"])


def test_legs_run_one_after_the_other_unless_the_keyword_leg_is_long(make_engine, tmp_path, monkeypatch):
    """Hybrid search runs the vector leg on the worker thread only when the keyword leg's CPU time (moving average)
    reaches ``hybrid.CONCURRENT_LEGS_MS``; either way the hits, scores and each hit's "why" are the same."""
    import reme_engine.search.hybrid as hybrid

    v = tmp_path / "v"
    for i, (title, body) in enumerate([("Solar power", "Photovoltaic panels turn light into current."),
                                       ("光伏产业", "上游是硅料，下游是电站。"), ("Tea", "Green tea and oolong."),
                                       ("Bikes", "A chain that squeaks needs oil.")]):
        _write(v / f"n{i}.md", f"# {title}\n\n{body}\n")
    e = make_engine(v)
    e.index()
    s = e.searcher
    assert s.wait_titles()  # built on a background thread: both sides must see the same title vectors
    e.search("solar", mode="keyword")
    assert s._kw_cpu_ms is not None and s._kw_cpu_ms >= 0.0  # measured on every keyword leg
    submitted = []
    real = s._pool.submit
    monkeypatch.setattr(s._pool, "submit", lambda *a, **k: submitted.append(1) or real(*a, **k))

    def why(q):
        return [(h.path, h.start_line, h.score, h.keyword_rank, h.vector_rank, h.vector_score, h.field_boost)
                for h in e.search(q, limit=5).hits]

    for q in ("solar panels", "光伏", "oolong tea", "squeaky chain"):
        s._kw_cpu_ms = 0.0
        serial = why(q)
        assert not submitted, q
        s._kw_cpu_ms = hybrid.CONCURRENT_LEGS_MS * 10
        concurrent = why(q)
        assert submitted, q
        submitted.clear()
        assert serial == concurrent and any(h[4] for h in serial), q
