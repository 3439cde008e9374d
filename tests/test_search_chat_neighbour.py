"""Adjacent matching windows of one chat record lift each other (reme_engine.search.rerank.NEIGHBOUR_CHAT, on by
default since session 22); notes get no such lift by default. Real temp vault, real keyword index."""

from __future__ import annotations

import json

from reme_engine.search import rerank
from reme_engine.search.fusion import FusionConfig, fuse, rank_key
from reme_engine.search.rerank import rerank_for


def _write(vault, rel, text):
    p = vault / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def _msgs(texts, day="2023-05-02"):
    return "".join(json.dumps({"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": t,
                               "created_at": f"{day}T10:{i:02d}:00"}) + "\n" for i, t in enumerate(texts))


def _ranked(eng, query):
    s = eng.searcher
    run = s.run_legs(query, 50, mode="keyword")
    fused = fuse(run["legs"], s.fusion, idf_sum=run["idf_sum"], mode="keyword")
    rerank_for(s, fused, query, s.fusion)
    return fused


def test_neighbouring_chat_windows_lift_each_other_notes_do_not(make_engine, tmp_path):
    assert rerank.NEIGHBOUR_CHAT > 0 and FusionConfig().rerank_neighbour == 0.0
    v = tmp_path / "v"
    long = " and more words to fill the window" * 8  # ~300 bytes a turn: one or two turns per 500-byte window
    exchange = [f"The glacier hike starts at dawn{long}", f"Pack ropes for the glacier hike{long}",
                f"Unrelated talk about bread{long}", f"Unrelated talk about chess{long}",
                f"Still unrelated, tea and maps{long}", f"A lone glacier hike photo{long}"]
    _write(v, "session/dialog/c1.jsonl", _msgs(exchange))
    _write(v, "notes/a.md", "# A\n\nglacier hike notes, part one.\n")
    for i, topic in enumerate(("tea", "maps", "rain", "bread", "chess")):
        _write(v, f"notes/{topic}.md", f"# {topic}\n\nA short note about {topic}, number {i}.\n")
    eng = make_engine(v, embed=False)
    eng.index()
    rows = eng.store.conn.execute("SELECT c.id, c.start_line FROM chunks c JOIN files f ON f.id = c.file_id"
                                  " WHERE f.path = 'session/dialog/c1.jsonl' ORDER BY c.ord").fetchall()
    assert len(rows) >= 4  # windows of whole turns
    fused = _ranked(eng, "glacier hike")
    lifted = {cid for cid, d in fused.items() if d.get("rerank_neighbour")}
    first_two = {rows[0][0], rows[1][0]} if rows[1][1] <= 2 else {rows[0][0]}
    assert first_two <= lifted  # the two adjacent matching windows (turns 1 and 2)
    lone = next(cid for cid, start in rows if start == 6)
    assert lone not in lifted  # its neighbours do not match
    note = eng.store.conn.execute("SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id"
                                  " WHERE f.path = 'notes/a.md'").fetchall()
    assert all(not fused.get(r[0], {}).get("rerank_neighbour") for r in note)
    order = sorted(fused, key=lambda i: rank_key(i, fused[i]))
    assert order.index(rows[0][0]) < order.index(lone)
