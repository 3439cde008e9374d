"""Queries no keyword matches: vector hits below what nonsense reaches in this vault are hidden (reme_engine.search.null)."""

import shutil
from dataclasses import replace

from conftest import shared

from reme_engine.search.null import nonsense, quantile

NOTES = {
    "sourdough.md": "# Sourdough\n\nFeed the starter the night before, then bake the loaf at 250 degrees.\n",
    "solar.md": "# Solar inverters\n\nCompare peak efficiency, MPPT trackers and the warranty years.\n",
    "habits.md": "# Habits\n\nSmall daily actions compound; make the cue obvious and the reward immediate.\n",
    "rust.md": "# Rust ownership\n\nEach value has one owner; borrowing lends access without moving it.\n",
    "tea.md": "# 绿茶\n\n龙井用八十度的水冲泡，第一泡三十秒。\n",
    "run.md": "# 跑步\n\n每周三次慢跑，心率保持在有氧区间。\n",
}


def test_nonsense_probes_are_deterministic_and_mixed():
    a, b = nonsense(8), nonsense(8)
    assert a == b and len(set(a)) == 8
    assert any("\u4e00" <= ch <= "\u9fff" for ch in a[3]) and a[0].isascii()
    assert quantile([0.3, 0.1, 0.2], 0.5) == 0.2 and quantile([], 0.5) == 0.0


def test_gibberish_without_keyword_hits_is_hidden_real_queries_are_not(make_engine, tmp_path):
    """On 120 notes of knowledge-garden-zh (every 25th) plus a few English ones."""
    src = shared("vaults/knowledge-garden-zh")
    v = tmp_path / "v"
    notes = sorted(p for p in src.rglob("*.md") if not any(x.startswith(".") for x in p.relative_to(src).parts))
    for p in notes[:3000:25]:
        t = v / p.relative_to(src)
        t.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(p, t)
    for name, text in NOTES.items():
        (v / name).write_text(text, encoding="utf-8")
    e = make_engine(v)
    e.index()
    s = e.searcher
    assert s.wait_titles()
    floor = s.null_floor(s.fusion.null_floor_quantile)
    assert 0.0 < floor < 1.0
    gib = nonsense(40, seed=3)
    off = replace(s.fusion, null_floor_quantile=0.0)
    shown_off = sum(len(s.search(g, neighbors=False, fusion=off).hits) for g in gib)
    results = [s.search(g, neighbors=False) for g in gib]
    shown_on = sum(len(r.hits) for r in results)
    assert shown_on < 0.7 * shown_off and sum(not r.hits for r in results) >= 10, (shown_on, shown_off)
    no_kw = [r for r in results if all(h.keyword_rank is None for h in r.hits)]
    assert all(h.vector_score >= floor for r in no_kw for h in r.hits)
    assert any(r.hidden for r in results if not r.hits)
    # a query with keyword hits is untouched by the floor, a paraphrase with none still finds its note
    assert s.search("starter loaf", neighbors=False).hits[0].path == "sourdough.md"
    para = s.search("what makes a behaviour stick every day", neighbors=False)
    assert para.hits and para.hits[0].path == "habits.md", [(h.path, h.vector_score) for h in para.hits]


def test_the_floor_is_reprobed_off_the_query_path(make_engine, tmp_path):
    """Once known, a stale floor (the index grew, title vectors were rebuilt) still answers at once while the
    re-probe runs on a background thread; the probes are embedded once per embedder."""
    import time

    from reme_engine.search.null import probe_vectors

    v = tmp_path / "v"
    v.mkdir()
    for name, text in NOTES.items():
        (v / name).write_text(text, encoding="utf-8")
    e = make_engine(v)
    e.index()
    s = e.searcher
    s.wait_titles()
    q = s.fusion.null_floor_quantile
    fresh = s.null_floor(q)
    assert probe_vectors(s.vectors.embedder) is probe_vectors(s.vectors.embedder)
    s._null = (1, [0.99] * 5, None)  # as if probed when the index held one chunk and no titles
    assert s.null_floor(q) == 0.99  # the previous floor answers, nothing waits
    deadline = time.monotonic() + 30
    while s._null[0] == 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert s._null[0] == len(s.vectors.index) and s.null_floor(q) == fresh
