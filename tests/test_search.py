"""Hybrid search on real vaults: quality (expected note in the top 5), fusion details, filters, rendering."""

import dataclasses

import pytest

from reme_engine.search.hybrid import SearchFilters, rrf
from reme_engine.search.render import render_search

# Queries written against knowledge-garden-zh: (query, expected path, mode). Paraphrases, not titles.
ZH_QUERIES = [
    ("金字塔原理 结构化表达 情景 冲突", "Cards/永久笔记/🔡SCQA.md", "hybrid"),
    ("叔本华 人生幸福 价值取向", "Cards/永久笔记/价值序列.md", "hybrid"),
    ("健身补剂 谷氨酰胺 需要额外补充吗", "Spaces/2-Area/运动与健康/谷氨酰胺.md", "hybrid"),
    ("同形异义字 网址欺骗", "Cards/永久笔记/IDN欺骗.md", "hybrid"),
    ("结构化表达", "Cards/永久笔记/🔡SCQA.md", "keyword"),  # an alias in the frontmatter
    ("Redis", "Redis.md", "keyword"),  # an empty note found by its file name
]


def _top(result, n=5):
    return [h.path for h in result.hits[:n]]


@pytest.mark.slow
@pytest.mark.parametrize("query, expected, mode", ZH_QUERIES)
def test_chinese_queries_find_the_note(zh_vault_index, query, expected, mode):
    res = zh_vault_index.search(query, limit=10, mode=mode, neighbors=False)
    assert expected in _top(res), (query, _top(res))


@pytest.mark.slow
def test_hits_explain_themselves(zh_vault_index):
    res = zh_vault_index.search("同形异义字 网址欺骗", limit=5)
    h = res.hits[0]
    assert h.keyword_rank is not None and h.vector_rank is not None
    assert h.score == pytest.approx(h.keyword_rrf + h.vector_rrf + h.field_boost)
    cfg = zh_vault_index.searcher.fusion  # convex: each leg's share of the score, from its raw score
    assert 0 < h.keyword_rrf <= cfg.keyword_share
    assert h.vector_rrf == pytest.approx((1 - cfg.keyword_share) * min(1.0, max(0.0, (h.vector_score - cfg.cosine_lo)
                                                                                 / (cfg.cosine_hi - cfg.cosine_lo))))
    assert 1 <= h.start_line <= h.end_line
    lines = (zh_vault_index.vault / h.path).read_text(encoding="utf-8").splitlines()
    assert h.text.strip().splitlines()[0] in lines[h.start_line - 1 : h.end_line]


@pytest.mark.slow
def test_neighbors_of_hits_with_predicates(zh_vault_index):
    res = zh_vault_index.search("叔本华 人生幸福 价值取向", limit=5)
    nb = res.neighbors["Cards/永久笔记/价值序列.md"]
    preds = {(n["path"], n["predicate"]) for n in nb["outlinks"]}
    assert any(p == "x" for _, p in preds)  # x:: [[人生选择]]
    assert len(nb["outlinks"]) <= 10 and len(nb["inlinks"]) <= 10
    text = render_search(res)
    assert "==========" in text and "outlinks (" in text and "via predicate=x" in text


@pytest.mark.slow
def test_date_and_prefix_filters(zh_vault_index):
    res = zh_vault_index.search("读书", limit=20, mode="keyword",
                                filters=SearchFilters(path_prefix="Calendar/", date_from="2023-01-01",
                                                      date_to="2023-12-31"))
    assert res.hits
    for h in res.hits:
        assert h.path.startswith("Calendar/")
        assert "2023-" in h.path
    res = zh_vault_index.search("读书", limit=5, filters=SearchFilters(path_prefix="Cards/"))
    assert res.hits and all(h.path.startswith("Cards/") for h in res.hits)


@pytest.mark.slow
def test_frontmatter_filter(zh_vault_index):
    res = zh_vault_index.search("表达", limit=10, mode="keyword",
                                filters=SearchFilters(frontmatter={"tags": "复习回顾"}))
    assert res.hits
    for h in res.hits:
        fm = zh_vault_index.store.file_info(h.path)["frontmatter"]
        assert "复习回顾" in (fm.get("tags") or [])


def test_english_vault_queries(make_engine, tmp_path, embedder):
    from conftest import copy_vault, shared

    v = copy_vault(shared("vaults/obsidian-tasks-docs-en"), tmp_path / "tasks")
    e = make_engine(v)
    e.index()
    cases = [
        ("how do I make a task repeat every week", "recurring"),
        ("filter tasks by due date in a query", "filters"),
        ("priority emoji signifiers", "priority"),
    ]
    for query, needle in cases:
        top = [h.path.lower() for h in e.search(query, limit=5).hits]
        assert any(needle in p for p in top), (query, top)


def test_rrf_is_pure_and_weighted():
    fused = rrf({"keyword": [(1, 9.0), (2, 5.0)], "vector": [(2, 0.9), (3, 0.8)]},
                {"keyword": 0.3, "vector": 0.7}, k=60)
    assert fused[2]["score"] == pytest.approx(0.3 / 62 + 0.7 / 61)
    assert fused[1]["keyword_rank"] == 1 and "vector_rank" not in fused[1]
    order = sorted(fused, key=lambda d: -fused[d]["score"])
    assert order[0] == 2


def test_keyword_never_ranks_non_matching_documents(make_engine, demo_vault):
    e = make_engine(demo_vault, embed=False)
    e.index()
    res = e.search("zzzqqq nonexistentterm", mode="keyword")
    assert res.hits == []


def test_hybrid_without_embedder_degrades_clearly(make_engine, demo_vault):
    e = make_engine(demo_vault, embed=False)
    e.index()
    res = e.search("光伏", mode="hybrid")
    assert res.hits and res.degraded and "keyword" in res.degraded


def test_demo_vault_bilingual_search(make_engine, demo_vault):
    e = make_engine(demo_vault)
    e.index()
    res = e.search("photovoltaic supply chain", limit=5)  # English query, Chinese notes
    assert any("光伏" in h.path or "光伏" in h.text for h in res.hits)
    res = e.search("红烧肉", limit=5, mode="keyword")
    assert res.hits


def test_a_note_without_its_vector_yet_still_leads_hybrid_search(make_engine, demo_vault):
    """Saved a moment ago: keyword-searchable at once, embedded later. Hybrid search must not bury the only
    exact match under the vector leg's neighbours of a nonsense-looking token."""
    from reme_tui.render import why_line

    e = make_engine(demo_vault)
    e.index()
    (demo_vault / "digest/wiki/fresh.md").write_text("# Fresh\n\nThe yakwombat protocol was decided today.\n")
    e.index_paths(["digest/wiki/fresh.md"], vectors=False)
    hit = e.search("yakwombat", limit=10).hits[0]
    assert hit.path == "digest/wiki/fresh.md" and hit.vector_imputed and hit.vector_rank is None
    assert "no vector yet" in why_line(hit)
    e.embed_pending()
    hit = e.search("yakwombat", limit=10).hits[0]
    assert hit.path == "digest/wiki/fresh.md" and not hit.vector_imputed


def test_imputation_is_pure_and_only_for_chunks_without_vectors():
    from reme_engine.search.hybrid import impute_missing_vectors

    legs = {"keyword": [(1, 9.0), (2, 5.0), (3, 1.0)], "vector": [(2, 0.9), (4, 0.8)]}
    fused = rrf(legs, {"keyword": 0.3, "vector": 0.7}, 60)
    impute_missing_vectors(fused, legs["keyword"], lambda i: i in (2, 3, 4), 0.7, 60)
    assert fused[1]["vector_imputed"] and fused[1]["vector_rrf"] == pytest.approx(0.7 / 61)
    assert fused[1]["score"] == pytest.approx(0.3 / 61 + 0.7 / 61)
    assert "vector_imputed" not in fused[2] and "vector_imputed" not in fused[3]  # has a vector: no help


def test_common_terms_rule_is_pure():
    from reme_engine.search.hybrid import select_terms

    df = {"edit": 950, "distance": 40, "dynamic": 300, "programming": 280, "zz": 0}
    assert select_terms(["edit", "distance", "dynamic"], df, 1000, 0.05) == (["distance"], "OR")
    assert select_terms(["edit", "dynamic", "programming"], df, 1000, 0.05) == (["edit", "dynamic", "programming"], "AND")
    assert select_terms(["edit", "zz"], df, 1000, 0.05) == (["edit"], "AND")  # absent terms are dropped
    assert select_terms(["zz"], df, 1000, 0.05) == (["zz"], "OR")


@pytest.mark.slow
@pytest.mark.parametrize("query, expected, mode", ZH_QUERIES)
def test_common_terms_rule_keeps_the_quality_queries(zh_vault_index, monkeypatch, query, expected, mode):
    """The rule is on from 50k chunks; forced on for the 3k-note vault, the quality queries still find their
    note in the top 5 (keyword leg alone and hybrid)."""
    from reme_engine.search import hybrid

    monkeypatch.setattr(hybrid, "COMMON_TERM_MIN_CHUNKS", 0)
    monkeypatch.setattr(hybrid, "COMMON_TERM_CUTOFF", 0.01)  # 3k notes: make some of their terms "common"
    zh_vault_index.searcher._n_chunks = None
    res = zh_vault_index.search(query, limit=10, mode=mode, neighbors=False)
    assert expected in _top(res), (query, _top(res))


def test_chunks_that_never_get_a_vector_are_not_imputed(make_engine, tmp_path):
    """Heading-only chunks (too short for a vector) must not be lifted by the imputation."""
    v = tmp_path / "v"
    (v / "digest/wiki").mkdir(parents=True)
    (v / "digest/wiki/empty.md").write_text("# 卡片笔记\n")
    (v / "digest/wiki/full.md").write_text("# 方法\n\n卡片笔记是一种把想法写成小卡片、再用链接连起来的方法。\n")
    e = make_engine(v)
    e.index()
    assert e.store.conn.execute("SELECT count(*) FROM chunks WHERE has_vec = 2").fetchone()[0] >= 1
    hits = e.search("卡片笔记", limit=5).hits
    assert not any(h.vector_imputed for h in hits)


# -- fusion and field-aware ranking (ARCHITECTURE §5; figures in bench/RESULTS.md, bench/bench_quality.py) --------

def test_convex_fusion_never_ranks_zero_scores_and_cuts_noise_vectors():
    """Pure: a keyword row scoring 0 and a vector hit below the cosine floor of the scale add nothing and are not
    ranked; a full keyword match outranks a vector hit at noise cosine."""
    from reme_engine.search.hybrid import FusionConfig, fuse

    cfg = FusionConfig(method="convex", keyword_share=0.5, cosine_lo=0.1, cosine_hi=0.6)
    legs = {"keyword": [(1, 4.0), (2, 0.0)], "vector": [(3, 0.15), (4, 0.05), (1, 0.12)]}
    fused = fuse(legs, cfg, idf_sum=4.0)
    assert 2 not in fused and 4 not in fused
    assert fused[1]["keyword_rrf"] == pytest.approx(0.5)  # bm25 = Σidf: the whole query matched
    assert fused[3]["score"] == pytest.approx(0.5 * 0.05 / 0.5)
    assert max(fused, key=lambda d: fused[d]["score"]) == 1
    # a cross-lingual query: no query term in the vault (Σidf large, bm25 tiny) → the vector hit wins
    fused = fuse({"keyword": [(1, 0.8)], "vector": [(3, 0.55), (1, 0.2)]}, cfg, idf_sum=30.0)
    assert max(fused, key=lambda d: fused[d]["score"]) == 3
    # the reference RRF (ARCHITECTURE §11.3.3) is still available and unchanged
    fused = fuse(legs, FusionConfig(method="rrf"))
    assert fused[3]["score"] == pytest.approx(0.7 / 61)


def test_day_index_chunks_are_recognised():
    from reme_engine.search.hybrid import is_day_index_chunk

    page = "# 2026-11-26\n\n<!-- reme:day-index:start -->\n- [[daily/2026-11-26/a|A]] — x\n<!-- reme:day-index:end -->"
    assert is_day_index_chunk("daily/2026-11-26.md", page)
    assert is_day_index_chunk("Calendar/2023-01-02.md", "- [[光伏产业链]]\n- [[新能源]]\nsome words")
    assert not is_day_index_chunk("daily/2026-11-26.md", "Went running.\nRead about [[光伏产业链]] today.\nTired.")
    assert not is_day_index_chunk("digest/wiki/x.md", page)


@pytest.fixture(scope="module")
def demo_engine(tmp_path_factory, embedder):
    """The demo vault copied and indexed with vectors once for this module (read-only use)."""
    from conftest import copy_vault

    from reme_engine.config import load_settings
    from reme_engine.demo import demo_vault_source
    from reme_engine.engine import Engine

    base = tmp_path_factory.mktemp("demo-ranked")
    vault = copy_vault(demo_vault_source(), base / "vault")
    eng = Engine.open(load_settings({"vault": str(vault), "state_dir": str(base / "state")}, env={}),
                      embedder=embedder)
    eng.index()
    yield eng
    eng.close()


def test_cards_outrank_the_day_page_that_lists_them(demo_engine):
    """光伏产业: the wiki note and the cards are the answers; the generated day page (a list of those cards) came
    first before and the wiki note 6th."""
    paths = [h.path for h in demo_engine.search("光伏产业", limit=10, neighbors=False).hits]
    assert "digest/wiki/光伏产业链.md" in paths[:3], paths
    day = paths.index("daily/2026-11-26.md") if "daily/2026-11-26.md" in paths else len(paths)
    for card in ("daily/2026-11-26/光伏产业链入门.md", "daily/2026-11-26/session_b7d402fe.md"):
        assert card in paths and paths.index(card) < day, paths
    # the day page lists cards already shown: it is collapsed into them (no slot of its own) unless asked for
    assert "daily/2026-11-26.md" not in paths, paths
    s = demo_engine.searcher
    kept = [h for h in s.search("光伏产业", limit=10, neighbors=False,
                                fusion=dataclasses.replace(s.fusion, collapse_day_index=False)).hits]
    page = [h for h in kept if h.path == "daily/2026-11-26.md"]
    assert page and [h.path for h in kept if h.path != "daily/2026-11-26.md"][:3] == paths[:3]


def test_a_note_named_like_the_query_comes_first(make_engine, tmp_path):
    v = tmp_path / "v"
    (v / "notes").mkdir(parents=True)
    (v / "notes/Zettelkasten.md").write_text("---\naliases: [卡片盒笔记法]\n---\n\nA way to keep notes: one idea per card.\n")
    for i in range(4):
        (v / f"notes/other{i}.md").write_text(
            f"# Reading log {i}\n\nZettelkasten, zettelkasten, Zettelkasten: I keep reading about the zettelkasten "
            f"method and the zettelkasten of Luhmann in book {i}.\n")
    e = make_engine(v)
    e.index()
    for q in ("Zettelkasten", "zettelkasten", "卡片盒笔记法"):
        hit = e.search(q, limit=5, neighbors=False).hits[0]
        assert hit.path == "notes/Zettelkasten.md" and hit.field_boost > 0, q


def test_weak_vector_hits_are_cut_and_hidden_counted(demo_engine):
    """红烧肉 is in three notes; the vector leg's neighbours of a dish name (a running plan, team notes at cosine
    0.04–0.07) are noise and must not be listed after them."""
    res = demo_engine.search("红烧肉", limit=20, neighbors=False)
    assert res.hits and all(h.keyword_rank is not None for h in res.hits), [(h.path, h.vector_score) for h in res.hits]
    assert res.hits[0].path in ("digest/procedure/红烧肉做法.md", "daily/2026-11-27/红烧肉.md")
    shown = demo_engine.searcher.search("红烧肉", limit=20, neighbors=False,
                                        fusion=dataclasses.replace(demo_engine.searcher.fusion, relative_floor=0.0))
    assert len(shown.hits) == len(res.hits) + res.hidden


def test_cross_lingual_hit_survives_incidental_keyword_matches(make_engine, tmp_path):
    """A Chinese question about an English note: the English twin is found although another note shares the
    question's only Latin words (nums, target) and the vector leg alone is what knows the answer."""
    v = tmp_path / "v"
    v.mkdir()
    (v / "two-sum.md").write_text("# Two Sum\n\nGiven an array of integers nums and an integer target, return the "
                                  "indices of the two numbers such that they add up to target.\n")
    (v / "rotate.md").write_text("# Rotate\n\nRotate the list in place.\n\n```python\ndef rotate(nums, target):\n"
                                 "    nums[:] = nums[-target:] + nums[:-target]\n    return nums, target\n```\n")
    (v / "bread.md").write_text("# Sourdough\n\nFeed the starter the night before, then bake at 250 degrees.\n")
    e = make_engine(v)
    e.index()
    hits = e.search("给定一个整数数组 nums 和一个整数目标值 target，找出和为目标值的那两个整数的下标", limit=5,
                    neighbors=False).hits
    assert hits[0].path == "two-sum.md", [(h.path, h.score) for h in hits]


def test_chat_records_are_searchable_with_their_turns_marked(demo_engine):
    """session/dialog/*.jsonl: one readable line per message (assistant turns marked); the line numbers point at
    the message's line in the record. The file has no date of its own: date filters match each window's day
(tests/test_search_time.py)."""
    res = demo_engine.search("recall dropped after the index rebuild, mixed Chinese English queries", limit=10,
                             neighbors=False, filters=SearchFilters(path_prefix="session/"))
    assert res.hits and res.hits[0].path == "session/dialog/a1f3c9e2.jsonl", [h.path for h in res.hits]
    h = res.hits[0]
    lines = (demo_engine.vault / h.path).read_text(encoding="utf-8").splitlines()
    first = h.text.splitlines()[0]
    assert first.startswith(("user · 2026-11-25", "assistant · 2026-11-25"))
    assert first.split(": ", 1)[1][:40] in lines[h.start_line - 1]
    assert any(t.startswith("assistant · ") for t in h.text.splitlines())
    assert demo_engine.store.file_info(h.path)["date"] is None


def test_equal_fused_scores_keep_the_keyword_order():
    """Keyword hits whose fused scores tie (no vectors yet, or capped BM25) come out in the keyword leg's order."""
    from reme_engine.search.hybrid import FusionConfig, fuse, rank_key

    kw = [(30, 9.0), (10, 8.0), (20, 7.5), (5, 7.0)]  # all above the query's Σ idf: kn caps at 1 for each
    fused = fuse({"keyword": kw, "vector": []}, FusionConfig(), idf_sum=2.0)
    assert len({round(d["score"], 9) for d in fused.values()}) == 1
    assert sorted(fused, key=lambda i: rank_key(i, fused[i])) == [30, 10, 20, 5]
