"""Speakers in conversations: a question naming one person is answered by that person's own turns
(reme_engine.search.linevec.speaker_labels, the second stage's line coverage in reme_engine.search.rerank).
Real temp vault and real index, keyword mode (no model needed)."""

from __future__ import annotations

import json

from reme_engine.search import rerank
from reme_engine.search.linevec import speaker_labels
from reme_engine.search.rerank import line_coverage

# Two cards of one conversation, each one chunk: in the first Ben says the words and Ana only hears them, in the
# second Ana says them. Padding keeps the cards the same size, so BM25 cannot tell them apart by length.
CARD_BEN = ("# Ana & Ben\n\n**Ana**: How was your weekend, anything new?\n\n"
            "**Ben**: I finally repaired the old sailboat engine with my brother.\n\n"
            "**Ana**: That is great news, enjoy the lake.\n")
CARD_ANA = ("# Ana & Ben\n\n**Ben**: How was your weekend, anything new?\n\n"
            "**Ana**: I finally repaired the old sailboat engine with my sister.\n\n"
            "**Ben**: That is great news, enjoy the lake.\n")


def _write(vault, rel, text):
    p = vault / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def test_speaker_labels_of_cards_and_chat_lines():
    text = ("**Melanie**: I painted a sunset\n\n**Caroline**: lovely\n"
            "user · 2026-11-21 09:00: Tim Smith: the train was late\n"
            "assistant · 2026-11-21 09:01: no label here\n"
            "**Step 2**: not a name\nplain: not a turn")
    assert speaker_labels(text) == {0: frozenset({"melanie"}), 2: frozenset({"caroline"}),
                                    3: frozenset({"tim", "smith"})}
    assert speaker_labels("no labels\nat all") == {}


def test_coverage_counts_only_the_named_speakers_lines():
    low = CARD_BEN.lower()
    w = {"ana": 0.1, "repaired": 2.0, "sailboat": 2.0}
    # without a named speaker, Ben's line holds both rare words
    assert line_coverage(low, w) == (2.0 + 2.0) / 4.1
    # Ana named: Ben's line no longer counts; Ana's own lines hold only her name
    assert line_coverage(low, w, frozenset({"ana"})) == 0.1 / 4.1
    # a line without a label (the heading) still counts
    assert line_coverage("# sailboat repaired\n**ben**: hi", w, frozenset({"ana"})) == 4.0 / 4.1


def test_a_question_about_one_speaker_ranks_their_own_turn_first(make_engine, tmp_path):
    v = tmp_path / "v"
    _write(v, "daily/2026-11-20/ana-ben-1.md", CARD_BEN)
    _write(v, "daily/2026-11-21/ana-ben-2.md", CARD_ANA)
    _write(v, "notes/boat.md", "# Boat\n\n**Ana**: a label in a note\n\n**Ben**: repaired the sailboat engine\n")
    for i, topic in enumerate(("tea", "maps", "rain", "bread", "chess", "glass", "cats", "trains")):
        _write(v, f"notes/{topic}.md", f"# {topic}\n\nA short note about {topic} and nothing else, number {i}.\n")
    eng = make_engine(v, embed=False)
    eng.index()
    q = "what sailboat part has Ana repaired"
    s = eng.searcher
    run = s.run_legs(q, 50, mode="keyword")
    hits, _ = s.rank(q, run, limit=10, mode="keyword")
    paths = [h.path for h in hits]
    assert paths.index("daily/2026-11-21/ana-ben-2.md") < paths.index("daily/2026-11-20/ana-ben-1.md")
    # the same query with the rule off: Ben's card loses only what Ben's line gave it
    old = rerank.SPEAKERS
    rerank.SPEAKERS = False
    try:
        off, _ = s.rank(q, run, limit=10, mode="keyword")
    finally:
        rerank.SPEAKERS = old
    by = {h.path: h.score for h in off}
    on = {h.path: h.score for h in hits}
    assert on["daily/2026-11-20/ana-ben-1.md"] < by["daily/2026-11-20/ana-ben-1.md"]
    assert on["daily/2026-11-21/ana-ben-2.md"] == by["daily/2026-11-21/ana-ben-2.md"]  # Ana's own turn: as before
    # a note is no conversation: its labelled lines keep counting
    assert abs(on["notes/boat.md"] - by["notes/boat.md"]) < 1e-12


def test_chat_records_with_named_speakers(make_engine, tmp_path):
    v = tmp_path / "v"
    msgs = [("user", "Ana: how was the trip to the coast?"),
            ("assistant", "Ben: I lost my camera on the ferry, sadly."),
            ("user", "Ana: oh no! I bought a new camera at the ferry port last year."),
            ("assistant", "Ben: the weather was great though.")]
    lines = [json.dumps({"id": f"m{i}", "role": r, "content": c, "created_at": f"2026-11-21T09:0{i}:00"})
             for i, (r, c) in enumerate(msgs)]
    _write(v, "session/dialog/c1.jsonl", "\n".join(lines) + "\n")
    eng = make_engine(v, embed=False)
    eng.index()
    s = eng.searcher
    text = s.store.conn.execute("SELECT text FROM chunks").fetchone()[0]
    assert set(speaker_labels(text.lower()).values()) == {frozenset({"ana"}), frozenset({"ben"})}
    low = text.lower()
    w = {"lost": 1.0, "camera": 1.0}
    assert line_coverage(low, w, frozenset({"ben"})) == 1.0  # Ben's turn holds both words
    assert line_coverage(low, w, frozenset({"ana"})) == 0.5  # Ana's turn only "camera"
