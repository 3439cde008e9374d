"""A query term of one or two letters ("vitamin e", "press y") in the second stage's line match: it ends, and finds
the letter as a word. The stem prefix of "e" or "y" was empty, and the scan for it never advanced: such a search
never returned."""

from __future__ import annotations

import threading

from reme_engine.search import rerank as R


def test_line_coverage_of_single_letter_terms_ends():
    text = "Vitamin E and zinc\npress y to confirm\nnothing here"
    assert R.line_coverage("no such letter here", {"e": 1.0}) == 0.0
    assert R.line_coverage("vitamin e and zinc", {"vitamin": 1.0, "e": 1.0}) == 1.0
    assert R.line_coverage(text, {"y": 1.0}) == 1.0
    assert R.line_coverage("we be by my ye", {"be": 1.0, "ye": 1.0}) == 1.0
    assert R.line_coverage("we went camping", {"camped": 1.0}) == 1.0  # inflections still match


def test_a_search_with_a_single_letter_term_returns(open_engine):
    e = open_engine()
    (e.vault / "food.md").write_text("# Food\n\nVitamin E is in nuts and seeds.\n", encoding="utf-8")
    (e.vault / "keys.md").write_text("# Keys\n\nPress y to confirm a delete.\n", encoding="utf-8")
    e.index()
    out: dict = {}

    def run():
        out["e"] = [h.path for h in e.search("vitamin e", mode="keyword").hits]
        out["y"] = [h.path for h in e.search("press y", mode="keyword").hits]

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the search did not return"
    assert out["e"][0] == "food.md" and out["y"][0] == "keys.md"
