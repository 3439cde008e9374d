"""A one-shot `reme-tui job search` (no app or --serve to ask) ranks with title vectors as the running app does:
it builds them before searching (from the embedding cache once built), so both give the same answer (real engine,
real offline embedder, temp vault)."""

from reme_engine.jobs import run_job


def _vault(tmp_path):
    v = tmp_path / "v"
    (v / "notes").mkdir(parents=True)
    (v / "notes/笔记软件的选择.md").write_text("# 笔记软件的选择\n\n选了很久，最后留下两个工具。\n", encoding="utf-8")
    (v / "notes/日常.md").write_text("# 日常\n\n今天整理了书桌，读了一会儿书。\n", encoding="utf-8")
    (v / "notes/花园.md").write_text("# 花园\n\n院子里的番茄熟了。\n", encoding="utf-8")
    return v


def test_one_shot_search_matches_the_long_running_answer(make_engine, tmp_path):
    v = _vault(tmp_path)
    e = make_engine(v)
    e.index()
    assert not e.vectors.live  # a one-shot process: nothing builds title vectors in the background
    r = run_job(e, "search", {"query": "笔记软件", "mode": "vector", "limit": 3, "neighbors": False})
    assert r["success"] and r["degraded"] is None, r
    assert e.searcher.titles()._data is not None  # built before the search ran
    one_shot = [(h["path"], h["score"]) for h in r["hits"]]
    assert one_shot[0][0] == "notes/笔记软件的选择.md", one_shot

    # what a long-running process answers once its background build is done
    e.vectors.live = True
    assert e.searcher.wait_titles()
    again = run_job(e, "search", {"query": "笔记软件", "mode": "vector", "limit": 3, "neighbors": False})
    assert [(h["path"], h["score"]) for h in again["hits"]] == one_shot


def test_keyword_search_never_builds_title_vectors(make_engine, tmp_path):
    e = make_engine(_vault(tmp_path))
    e.index()
    assert run_job(e, "search", {"query": "番茄", "mode": "keyword", "neighbors": False})["success"]
    assert e.searcher._titles is None
