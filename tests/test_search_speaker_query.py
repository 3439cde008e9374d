"""Speaker names out of the vector leg's query (reme_engine.search.speakers): the dense leg embeds a question
without the names of the vault's conversation speakers; the keyword leg keeps them. Real temp vault, real index."""

from __future__ import annotations

import json

import numpy as np

from reme_engine.search.speakers import strip_names, word_core

CARD = ("# Ana & Ben\n\n**Ana**: How was your weekend, anything new?\n\n"
        "**Ben**: I finally repaired the old sailboat engine with my brother.\n\n"
        "**Ana**: That is great news, enjoy the lake.\n")


def _write(vault, rel, text):
    p = vault / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def test_strip_names_drops_name_words_only():
    names = frozenset({"ana", "ben", "tim", "smith"})
    assert word_core("Ana's?") == "ana" and word_core("“Ben,”") == "ben"
    assert strip_names("What did Ana's brother repair?", names) == "What did brother repair?"
    assert strip_names("When did Tim Smith and Ben go sailing?", names) == "When did and go sailing?"
    # nothing but names: embedded unchanged (nothing else to go on); no name: unchanged
    assert strip_names("Ana Ben", names) == "Ana Ben"
    assert strip_names("what is a sailboat", names) == "what is a sailboat"
    assert strip_names("What did Ana do?", frozenset()) == "What did Ana do?"


def test_names_come_from_conversations_and_follow_the_index(make_engine, tmp_path):
    v = tmp_path / "v"
    _write(v, "daily/2026-11-20/ana-ben-1.md", CARD)
    # a `**Term**:` line in a note is no turn: "term" must not become a name; nor one-off labels in a daily card
    _write(v, "notes/glossary.md", "# Glossary\n\n**Term**: a word with a meaning\n\n**Sailboat**: a boat\n")
    _write(v, "daily/2026-11-21/fix.md", "# Fix\n\n**Fix**: retry the save\n\n**Cause**: a stale lock\n")
    eng = make_engine(v, embed=False)
    eng.index()
    s = eng.searcher
    assert s.vector_query("What did Ana repair?") == "What did repair?"
    assert s.vector_query("what is a Term or a Sailboat") == "what is a Term or a Sailboat"
    assert s.vector_query("how to fix the cause of the lock") == "how to fix the cause of the lock"
    # a chat record whose messages name their speaker (an imported group chat) adds its speakers (its windows
    # hold one long turn each: the changes of speaker are counted across them)
    turns = (("Cleo", "the ferry left at noon"), ("Dan", "was it late?"), ("Cleo", "ten minutes"))
    _write(v, "session/dialog/g1.jsonl", "".join(
        json.dumps({"role": "user", "content": f"{who}: {text}" + " and so on" * 50,
                    "created_at": f"2026-11-21T09:0{i}:00"}) + "\n" for i, (who, text) in enumerate(turns)))
    eng.index()
    assert s.vector_query("When did Cleo take the ferry?") == "When did take the ferry?"
    # the card removed: its speakers are no longer names
    (v / "daily/2026-11-20/ana-ben-1.md").unlink()
    eng.index()
    assert s.vector_query("What did Ana repair?") == "What did Ana repair?"
    s.speakers_out = False
    assert s.vector_query("When did Cleo take the ferry?") == "When did Cleo take the ferry?"


def test_the_vector_leg_embeds_the_question_without_names_and_keywords_keep_them(make_engine, tmp_path, embedder):
    v = tmp_path / "v"
    _write(v, "daily/2026-11-20/ana-ben-1.md", CARD)
    for i, topic in enumerate(("tea", "maps", "rain", "bread")):
        _write(v, f"notes/{topic}.md", f"# {topic}\n\nA short note about {topic} and nothing else, number {i}.\n")
    eng = make_engine(v)
    eng.index()
    s = eng.searcher
    q = "What engine has Ben repaired?"
    res = s.search(q, limit=5, neighbors=False)
    got = s.last_query_vec
    assert got[0] == q
    assert np.allclose(got[1], embedder.embed(["What engine has repaired?"])[0])
    top = res.hits[0]
    assert top.path == "daily/2026-11-20/ana-ben-1.md"
    assert top.keyword_rank is not None and top.vector_rank is not None  # both legs' "why" kept
    # vector mode embeds the same text (one leg, the same rule)
    vec = s.search(q, limit=5, mode="vector", neighbors=False)
    assert vec.hits and np.allclose(s.last_query_vec[1], got[1])
    assert all(h.keyword_rank is None for h in vec.hits)
    # keyword mode is unchanged: "ben" alone still finds the card
    assert [h.path for h in s.search("Ben", mode="keyword", neighbors=False).hits] == ["daily/2026-11-20/ana-ben-1.md"]


def test_a_query_naming_a_speaker_is_fused_with_the_named_weights(make_engine, tmp_path):
    from dataclasses import replace

    from reme_engine.search.fusion import FusionConfig, for_named_query

    cfg = FusionConfig()
    named = for_named_query(cfg)
    assert (named.keyword_share, named.cosine_lo, named.cosine_hi) == (
        cfg.named_keyword_share, cfg.named_cosine_lo, cfg.named_cosine_hi)
    same = replace(cfg, named_keyword_share=cfg.keyword_share, named_cosine_lo=cfg.cosine_lo,
                   named_cosine_hi=cfg.cosine_hi)
    assert for_named_query(same) is same

    v = tmp_path / "v"
    _write(v, "daily/2026-11-20/ana-ben-1.md", CARD)
    _write(v, "notes/boat.md", "# Boat\n\nThe old sailboat engine needed a new part.\n")
    eng = make_engine(v)
    eng.index()
    s = eng.searcher
    # named share 1.0: the vector leg adds nothing to a query naming Ben; a query naming nobody keeps it
    only_kw = replace(s.fusion, named_keyword_share=1.0, relative_floor=0.0)
    q = "What engine has Ben repaired?"
    run = s.run_legs(q, 50)
    assert run["vector_text"] == "What engine has repaired?"
    hits, _ = s.rank(q, run, limit=5, fusion=only_kw)
    assert hits and all(h.vector_rrf == 0.0 for h in hits)
    assert all(h.keyword_rrf > 0 for h in hits)
    q2 = "What engine was repaired?"
    run2 = s.run_legs(q2, 50)
    assert run2["vector_text"] == q2
    hits2, _ = s.rank(q2, run2, limit=5, fusion=only_kw)
    assert any(h.vector_rrf > 0 for h in hits2)


def test_a_one_off_label_restricts_no_line_coverage(make_engine, tmp_path):
    from reme_engine.search.fusion import fuse
    from reme_engine.search.rerank import rerank_for

    v = tmp_path / "v"
    # "fix" opens one line of a daily card, but nobody talks there: the cause line still covers the query
    _write(v, "daily/2026-11-21/fix.md", "# Lock\n\n**Fix**: retry it\n\n**Cause**: the stale lock file fix\n")
    _write(v, "daily/2026-11-22/other.md", "# Other\n\nA stale lock again.\n")
    _write(v, "daily/2026-11-20/ana-ben-1.md", CARD)
    eng = make_engine(v, embed=False)
    eng.index()
    s = eng.searcher
    assert s.speaker_names() == frozenset({"ana", "ben"})
    q = "stale lock file fix"
    card = eng.store.conn.execute("SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id"
                                  " WHERE f.path = 'daily/2026-11-21/fix.md'").fetchone()[0]

    def coverage():
        run = s.run_legs(q, 50, mode="keyword")
        fused = fuse(run["legs"], s.fusion, idf_sum=run["idf_sum"], mode="keyword")
        top = max(d["score"] for d in fused.values())
        rerank_for(s, fused, q, s.fusion)
        return fused[card]["rerank_coverage"] / (s.fusion.rerank_coverage * top)

    # the whole query is in the **Cause** line: full coverage
    assert abs(coverage() - 1.0) < 1e-9
    # were "fix" a speaker, only the **Fix** line (and unlabelled ones) would count for the card
    s.speaker_names = lambda: frozenset({"ana", "ben", "fix"})
    assert coverage() < 0.9
