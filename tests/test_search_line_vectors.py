"""Turn-level vectors (reme_engine.search.linevec): built by the vector pass for daily cards (chat records on request),
read by the second ranking stage without encoding at query time. Real temp vault, real index, real embedder."""

from __future__ import annotations

import dataclasses
import json

from reme_engine.search import linevec
from reme_engine.search.fusion import FusionConfig, fuse
from reme_engine.search.rerank import rerank_for

TURNS = ["**Ana**: I finally finished restoring the old wooden sailboat my grandfather left me.",
         "**Ben**: That sounds like months of sanding and varnish, well done!",
         "**Ana**: Next weekend I want to take it out on the lake for the first time.",
         "**Ben**: My sister started a pottery class downtown, she makes mugs now.",
         "**Ana**: ok"]


def _write(vault, rel, text):
    p = vault / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def _vault(tmp_path):
    v = tmp_path / "v"
    _write(v, "daily/2026-11-20/ana-ben.md", "# Ana & Ben\n\n" + "\n\n".join(TURNS) + "\n")
    msgs = [{"id": "m1", "role": "user", "content": "Which train goes to the airport on Sundays?",
             "created_at": "2026-11-21T09:00:00"},
            {"id": "m2", "role": "assistant", "content": "The S8 line runs every twenty minutes on Sundays.",
             "created_at": "2026-11-21T09:00:30"}]
    _write(v, "session/dialog/c1.jsonl", "\n".join(json.dumps(m) for m in msgs) + "\n")
    _write(v, "notes/boats.md", "# Boats\n\nA long paragraph about restoring a wooden sailboat and varnish.\n")
    return v


def test_which_files_and_lines_get_vectors():
    assert linevec.wants_lines("daily/2026-11-20/card.md")
    assert not linevec.wants_lines("session/dialog/x.jsonl")  # chat windows are near turn level already
    assert linevec.wants_lines("session/dialog/x.jsonl", chats=True)
    assert not linevec.wants_lines("daily/2026-11-20.md")  # the day page only lists cards
    assert not linevec.wants_lines("notes/boats.md")
    assert not linevec.wants_lines("other/dialog/x.jsonl", chats=True)
    assert linevec.wants_lines("journal/2026-11-20/c.md", daily_dir="journal")
    lines = linevec.chunk_lines("# Ana & Ben\n\n" + "\n\n".join(TURNS)
                                + "\nuser · 2026-11-21 09:00: Which train goes to the airport?")
    assert lines[:4] == TURNS[:4]  # the heading and the two-letter turn are left out
    assert lines[-1] == "Which train goes to the airport?"  # a chat line without its role/time prefix


def test_vector_pass_builds_line_vectors_once_and_only_for_conversations(make_engine, tmp_path):
    eng = make_engine(_vault(tmp_path))
    rep = eng.index()
    c = eng.store.conn
    space = eng.vectors.embedder.space
    texts = {p: [r[0] for r in c.execute("SELECT c.text FROM chunks c JOIN files f ON f.id = c.file_id"
                                         " WHERE f.path = ?", (p,))]
             for p in ("daily/2026-11-20/ana-ben.md", "session/dialog/c1.jsonl", "notes/boats.md")}
    assert linevec.missing_lines(c, space, texts["daily/2026-11-20/ana-ben.md"]) == []
    assert len(linevec.missing_lines(c, space, texts["session/dialog/c1.jsonl"])) == 2  # chats: none by default
    assert len(linevec.missing_lines(c, space, texts["notes/boats.md"])) == 1  # a note gets none
    assert rep.embedded_lines == 4  # the 4 card turns
    assert eng.index().__dict__.get("embedded_lines", 0) == 0  # nothing new: nothing encoded again
    # an index from before line vectors (no marker) catches up on its next pass
    with eng.store.write() as cw:
        cw.execute("DELETE FROM meta WHERE key = ?", (f"line_vectors:{space}",))
        cw.execute("DELETE FROM emb.embeddings WHERE text_hash = ?", (linevec.line_key(TURNS[2]),))
    assert eng.index().embedded_lines == 1


def test_second_stage_scores_the_best_turn_without_encoding(make_engine, tmp_path, monkeypatch):
    eng = make_engine(_vault(tmp_path))
    eng.index()
    s = eng.searcher
    q = "taking the restored boat onto the lake"
    run = s.run_legs(q, 50, mode="hybrid")
    cfg = dataclasses.replace(FusionConfig(), rerank_lines=0.4, rerank_lines_chat=0.0, rerank_coverage=0.0)
    fused = fuse(run["legs"], cfg, idf_sum=run["idf_sum"], mode="hybrid")
    calls = []
    real = eng.vectors.embedder.embed
    monkeypatch.setattr(eng.vectors.embedder, "embed", lambda texts: calls.append(texts) or real(texts))
    rerank_for(s, fused, q, cfg)
    # the query vector of the vector leg is reused, lines come from the cache (title vectors and the null probes
    # may encode on their own threads meanwhile: not this stage)
    assert not any(t in (q, *TURNS) for c in calls for t in c)
    rows = s._rows(list(fused))
    by_path = {rows[cid][0]: d for cid, d in fused.items()}
    gain = by_path["daily/2026-11-20/ana-ben.md"].get("rerank_lines", 0.0)
    assert gain > 0
    assert "rerank_lines" not in by_path.get("notes/boats.md", {})  # notes have no line vectors
    # the gain is the normalised cosine of the best turn, as a share of the best score
    qv = s.last_query_vec[1]
    best = max(float(real([t])[0] @ qv) for t in TURNS[:4])
    top = max(d["score"] - d.get("rerank_lines", 0.0) for d in fused.values())
    vn = min(1.0, max(0.0, (best - cfg.cosine_lo) / (cfg.cosine_hi - cfg.cosine_lo)))
    assert abs(gain - 0.4 * top * vn) < 1e-4 * max(1.0, top)
    # keyword mode computes no query vector for a new query: the signal is simply absent
    q2 = "pottery class downtown"
    run2 = s.run_legs(q2, 50, mode="keyword")
    fused2 = fuse(run2["legs"], cfg, idf_sum=run2["idf_sum"], mode="keyword")
    rerank_for(s, fused2, q2, cfg)
    assert not any(t in (q2, *TURNS) for c in calls for t in c)
    assert not any("rerank_lines" in d for d in fused2.values())


def test_a_configured_daily_folder_gets_turn_vectors_and_their_score(make_engine, tmp_path):
    v = tmp_path / "v"
    _write(v, "Journal/2026-11-20/ana-ben.md", "# Ana & Ben\n\n" + "\n\n".join(TURNS) + "\n")
    _write(v, "notes/boats.md", "# Boats\n\nA long paragraph about restoring a wooden sailboat and varnish.\n")
    eng = make_engine(v, layers={"daily_dir": "Journal"})
    assert eng.settings.layers.daily_dir == "Journal"
    assert eng.index().embedded_lines == 4
    s = eng.searcher
    q = "taking the restored boat onto the lake"
    run = s.run_legs(q, 50, mode="hybrid")
    cfg = FusionConfig()  # the defaults: cards 0.3
    fused = fuse(run["legs"], cfg, idf_sum=run["idf_sum"], mode="hybrid")
    rerank_for(s, fused, q, cfg)
    rows = s._rows(list(fused))
    gains = {rows[cid][0]: d.get("rerank_lines", 0.0) for cid, d in fused.items()}
    assert gains["Journal/2026-11-20/ana-ben.md"] > 0 and gains.get("notes/boats.md", 0.0) == 0.0
