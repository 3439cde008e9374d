"""The title vectors' snapshot next to the index: a new process on an unchanged index loads the last build instead
of rebuilding it (what a one-shot `job search` waited for), with identical title matches; a changed note rebuilds."""

from __future__ import annotations

from reme_engine.config import load_settings
from reme_engine.engine import Engine


def _open(vault, state, embedder):
    return Engine.open(load_settings({"vault": str(vault), "state_dir": str(state)}, env={}), embedder=embedder)


def test_an_unchanged_index_loads_the_title_snapshot(tmp_path, embedder):
    vault = tmp_path / "v"
    vault.mkdir()
    for name, text in (("光伏产业链", "# 光伏产业链\n\n硅料、硅片、电池片、组件。\n"),
                       ("Hybrid retrieval", "# Hybrid retrieval\n\nBM25 and dense vectors fused.\n"),
                       ("读书笔记", "# 读书笔记\n\n认知与习惯。\n")):
        (vault / f"{name}.md").write_text(text, encoding="utf-8")
    state = tmp_path / "state"
    with _open(vault, state, embedder) as e:
        e.index()
        assert e.searcher.wait_titles()
        tv = e.searcher.titles()
        assert not tv.from_snapshot
        qv = embedder.embed(["solar photovoltaic industry chain"])[0]
        first, floor = tv.search(qv, 3), tv.floor
    with _open(vault, state, embedder) as e:
        e.index()  # nothing changed
        assert e.searcher.wait_titles()
        tv = e.searcher.titles()
        assert tv.from_snapshot and tv.floor == floor and tv.search(qv, 3) == first
    (vault / "新笔记.md").write_text("# 新笔记\n\n一个新的想法。\n", encoding="utf-8")
    with _open(vault, state, embedder) as e:
        e.index()
        assert e.searcher.wait_titles()
        assert not e.searcher.titles().from_snapshot  # the files changed: built again, and kept for next time
