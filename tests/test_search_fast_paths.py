"""The warm search's shortcuts change nothing a caller sees: ranking, scores and each hit's "why" are those of a
cold searcher, the neighbour directory built on first read equals the eager one, and cached texts follow edits."""

import dataclasses
import json

from reme_engine.jobs import run_job
from reme_engine.search.graph import neighborhoods

QUERIES = ["光伏", "光伏产业链 上游", "红烧肉 做法", "hybrid retrieval", "行业研究方法", "隆基绿能 通威股份",
           "新能源", "daily note"]
WHY = ("path", "start_line", "end_line", "score", "keyword_rank", "keyword_score", "vector_rank", "vector_score",
       "keyword_rrf", "vector_rrf", "field_boost", "demoted", "vector_title", "vector_imputed", "text")


def ranking(res):
    return [tuple(getattr(h, k) for k in WHY) for h in res.hits]


def test_warm_ranking_equals_a_cold_searchers(make_engine, demo_vault):
    e = make_engine(demo_vault)
    e.index()
    e.searcher.wait_titles(60)
    modes = ("keyword", "hybrid")
    warm = {}
    for _ in range(2):  # the second pass answers from the searcher's caches (rows, texts, postings)
        warm = {(q, m): ranking(e.search(q, limit=10, mode=m)) for q in QUERIES for m in modes}
    assert any(warm[(q, "hybrid")] for q in QUERIES) and any(warm[(q, "keyword")] for q in QUERIES)
    titles = e.searcher._titles
    for q in QUERIES:
        for m in modes:
            e.searcher._pool.shutdown(wait=False)  # not close(): that would stop the shared title vectors
            e._searcher = None  # a new searcher: every cache empty, texts read from SQLite
            if titles is not None:
                e.searcher._titles = titles  # the same title vectors (their build is not what is compared)
            assert ranking(e.search(q, limit=10, mode=m)) == warm[(q, m)], (q, m)


def test_neighbour_directory_is_built_on_first_read(make_engine, demo_vault):
    e = make_engine(demo_vault, embed=False)
    e.index()
    res = e.search("光伏", mode="keyword")
    assert res.hits and callable(res.__dict__["_neighbors"])  # not built by the search itself
    want = neighborhoods(e.store, [h.path for h in res.hits])
    assert res.neighbors == want and set(want) == {h.path for h in res.hits}
    assert res.__dict__["_neighbors"] is res.neighbors  # built once, kept
    assert res.to_dict()["neighbors"] == want
    assert e.search("光伏", mode="keyword", neighbors=False).neighbors == {}
    out = run_job(e, "search", {"query": "光伏", "mode": "keyword", "render": "true"})
    assert out["neighbors"] == want
    if any(v["outlinks"] or v["inlinks"] for v in want.values()):
        assert "links (" in out["text"]  # the rendered text lists them too
    json.dumps(out, ensure_ascii=False)  # JSON as the job prints it


def test_hit_dict_is_the_dataclass_fields(make_engine, demo_vault):
    e = make_engine(demo_vault, embed=False)
    e.index()
    h = e.search("光伏", mode="keyword").hits[0]
    d = h.to_dict()
    assert d == dataclasses.asdict(h) and list(d) == [f.name for f in dataclasses.fields(h)]
    d["headings"].append("x")
    assert "x" not in h.headings  # a copy, as asdict gave


def test_cached_texts_follow_an_edit(make_engine, demo_vault):
    e = make_engine(demo_vault, embed=False)
    e.index()
    s = e.searcher
    res = e.search("红烧肉 做法", mode="keyword")
    cid, path = res.hits[0].chunk_id, res.hits[0].path
    assert s.chunk_texts([cid])[cid][2] == res.hits[0].text  # cached now
    note = demo_vault / path
    note.write_text(note.read_text(encoding="utf-8") + "\n\n红烧肉 做法 zyzzyva 新加的一行\n", encoding="utf-8")
    e.index_paths([path], vectors=False)
    res2 = e.search("红烧肉 做法 zyzzyva", mode="keyword")
    hit = next(h for h in res2.hits if h.path == path and "zyzzyva" in h.text)
    assert s.chunk_texts([hit.chunk_id])[hit.chunk_id][2] == hit.text
    gone = e.store.conn.execute("SELECT count(*) FROM chunks WHERE id = ?", (cid,)).fetchone()[0]
    if not gone:  # the old chunk was rewritten: the cache no longer answers for it
        assert cid not in s.chunk_texts([cid])


def test_ranked_ids_orders_as_rank_key():
    """``fusion.ranked_ids`` (the key tuples sorted directly) gives the order of ``sorted(key=rank_key)``: ties on
    the score broken by the keyword rank, then the vector rank, then the id, a missing rank last."""
    import random

    from reme_engine.search.fusion import rank_key, ranked_ids

    rnd = random.Random(3)
    for _ in range(500):
        fused = {}
        for _ in range(rnd.randint(0, 60)):
            d = {"score": rnd.choice([0.5, 0.25, rnd.random()])}
            if rnd.random() < 0.7:
                d["keyword_rank"] = rnd.randint(1, 50)
            if rnd.random() < 0.5:
                d["vector_rank"] = rnd.randint(1, 50)
            fused[rnd.randint(1, 2**62)] = d
        assert ranked_ids(fused) == sorted(fused, key=lambda i: rank_key(i, fused[i]))
    assert ranked_ids({3: {"score": 1.0}, 1: {"score": 1.0, "vector_rank": 2}, 2: {"score": 1.0, "keyword_rank": 9},
                       4: {"score": 2.0}}) == [4, 2, 1, 3]


def test_a_query_of_punctuation_only_finds_nothing_in_any_mode(make_engine, demo_vault):
    """``(`` or ``%`` has no word: every mode answers no hits and says why, as ``"`` or ``*`` did already (the vector
    leg used to return its nearest neighbours for some of them); an emoji is still searched."""
    from reme_engine.search.hybrid import no_words

    e = make_engine(demo_vault)
    e.index()
    for q in ("(", "%", '"', "*", "'", "\\", "_", "()[]", "%%  ''", "，。！？"):
        for mode in ("keyword", "hybrid", "vector"):
            res = e.search(q, mode=mode, limit=3)
            assert res.hits == [] and res.degraded == "no words to search for in the query", (q, mode)
    assert not no_words("🍅") and not no_words("c++") and not no_words("光伏") and no_words("(+)")
    assert e.search("光伏", mode="keyword", limit=3).degraded is None
