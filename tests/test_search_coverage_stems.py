"""Line coverage of the second ranking stage counts English inflections of a query word (reme_engine.search.rerank):
a question and the turn that answers it rarely inflect a word alike ("paint" / "painting", "camped" / "camping")."""

from __future__ import annotations

import dataclasses

import pytest

from reme_engine.search import rerank
from reme_engine.search.fusion import FusionConfig, fuse, rank_key
from reme_engine.search.rerank import line_coverage, rerank_for, stem


def test_inflections_share_a_stem_and_other_words_do_not():
    for a, b in (("paint", "painting"), ("painted", "paints"), ("camped", "camping"), ("activities", "activity"),
                 ("hiking", "hike"), ("running", "run"), ("classes", "class"), ("kids", "kid")):
        assert stem(a) == stem(b), (a, b)
    for a, b in (("art", "artist"), ("class", "clas"), ("this", "thi"), ("bus", "bu")):
        assert stem(a) != stem(b), (a, b)
    assert stem("2023") == "2023" and stem("ok") == "ok"


def test_line_coverage_matches_an_inflected_word_in_the_same_line():
    text = "**Ana**: hello there\n**Ana**: we love painting together lately"
    w = {"ana": 1.0, "paint": 2.0}
    assert line_coverage(text, w) == pytest.approx(1.0)  # both in the second line
    assert line_coverage("**Ana**: an artist\nno paint here", {"art": 1.0, "ana": 1.0}) == pytest.approx(0.5)
    # CJK terms are matched as before (substrings), digits as whole runs
    assert line_coverage("上周的瓶颈\n2023年", {"瓶颈": 1.0, "2023": 1.0}) == pytest.approx(0.5)
    assert line_coverage("20234 items", {"2023": 1.0}) == 0.0


def _write(vault, rel, text):
    p = vault / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def _order(eng, query, cfg):
    s = eng.searcher
    run = s.run_legs(query, 50, mode="keyword")
    fused = fuse(run["legs"], cfg, idf_sum=run["idf_sum"], mode="keyword")
    rerank_for(s, fused, query, cfg)
    order = sorted(fused, key=lambda i: rank_key(i, fused[i]))
    rows = s._rows(order)
    return [rows[i][0] for i in order]


def test_the_turn_with_the_inflected_word_moves_up(open_engine, tmp_path, monkeypatch):
    v = tmp_path / "v"
    _write(v, "daily/2026-11-20/ana-ben.md", "# Ana & Ben\n\n**Ben**: How was the summer?\n\n"
           "**Ana**: We went camping by the lake with the kids, it rained twice.\n")
    # "Ana" more often, no camping: the keyword leg ranks it above the card
    _write(v, "notes/ana.md", "# Ana\n\nAna called. Ana will visit Ana's sister.\n")
    _write(v, "notes/scouts.md", "# Scouts\n\nThe scouts camped in the rain.\n")  # the query word itself
    eng = open_engine(v)
    eng.index()
    cfg = dataclasses.replace(FusionConfig(), rerank_coverage=0.5, rerank_lines=0.0, rerank_lines_chat=0.0)
    q = "Where has Ana camped?"
    monkeypatch.setattr(rerank, "STEM", False)
    before = _order(eng, q, cfg)
    assert before.index("notes/ana.md") < before.index("daily/2026-11-20/ana-ben.md")
    monkeypatch.setattr(rerank, "STEM", True)
    after = _order(eng, q, cfg)
    assert after.index("daily/2026-11-20/ana-ben.md") < after.index("notes/ana.md")
