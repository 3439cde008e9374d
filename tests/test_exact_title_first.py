"""A note named exactly like the query ranks above notes whose name only contains it, in keyword mode too (the
app answers from keywords while the model loads), however often the longer note repeats the word."""

from __future__ import annotations

from reme_engine.jobs import run_job


def test_exact_name_beats_a_longer_name_that_contains_it(open_engine, tmp_path):
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "少数派.md").write_text("一个科技媒体。\n", encoding="utf-8")
    (vault / "少数派创作手册.md").write_text("# 少数派创作手册\n\n" + "少数派的作者写作指南，少数派编辑部。\n" * 6,
                                         encoding="utf-8")
    (vault / "其他.md").write_text("这里提到少数派一次。\n", encoding="utf-8")
    e = open_engine(vault)
    e.index()
    res = run_job(e, "search", {"query": "少数派", "mode": "keyword"})
    assert res["success"], res
    paths = [h["path"] for h in res["hits"]]
    assert paths[:2] == ["少数派.md", "少数派创作手册.md"], paths
