"""Dates written in a query lift the candidates dated inside them (reme_engine.search.dates, the date rule of
HybridSearcher.rank). Real temp vault with chat records and daily cards, real index (keyword leg; no model)."""

from __future__ import annotations

import json
from dataclasses import replace

from reme_engine.search.dates import query_dates, strip_dates


def _write(vault, rel, text):
    p = vault / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def test_query_dates_days_and_months():
    assert query_dates("What did Ana show Ben on October 13, 2023?") == [("2023-10-13", "2023-10-13")]
    assert query_dates("on 1st February, 2023 and 2023-03-04") == [("2023-02-01", "2023-02-01"),
                                                                    ("2023-03-04", "2023-03-04")]
    assert query_dates("what happened in July 2023") == [("2023-07-01", "2023-07-31")]
    assert query_dates("Feb 2024 plans") == [("2024-02-01", "2024-02-29")]
    assert query_dates("2023年5月3日的会议") == [("2023-05-03", "2023-05-03")]
    assert query_dates("2023年5月的会议") == [("2023-05-01", "2023-05-31")]
    # no range worth lifting: a year alone, a month without a year, an impossible day, no date at all
    for q in ("in 2023", "camping in June", "February 30, 2023", "you may go", "13 apples"):
        assert query_dates(q) == [], q
    # the text a vector leg would embed without them (HybridSearcher.dates_out, off by default)
    assert strip_dates("What did Ana paint on October 13, 2023 and in July 2023?") == "What did Ana paint and ?"
    assert strip_dates("2023-10-13") == "2023-10-13" and strip_dates("no date") == "no date"


def _dialog(day: str, texts: list[str]) -> str:
    return "".join(json.dumps({"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": t,
                               "created_at": f"{day}T10:0{i}:00"}) + "\n" for i, t in enumerate(texts))


def test_a_written_date_lifts_that_days_chat_and_card(make_engine, tmp_path):
    v = tmp_path / "v"
    _write(v, "session/dialog/a.jsonl", _dialog("2023-11-13", ["We talked about the ferry timetable again.",
                                                              "The ferry timetable changed for winter."]))
    _write(v, "session/dialog/b.jsonl", _dialog("2023-10-13", ["A note on the ferry.", "ok"]))
    _write(v, "daily/2023-10-13/trip.md", "# Trip\n\nWaited for the ferry in the rain.\n")
    for i, topic in enumerate(("tea", "maps", "rain", "bread", "chess")):
        _write(v, f"notes/{topic}.md", f"# {topic}\n\nA short note about {topic}, number {i}.\n")
    eng = make_engine(v, embed=False)
    eng.index()
    s = eng.searcher
    plain = s.search("ferry timetable", limit=5, neighbors=False).hits
    assert plain[0].path == "session/dialog/a.jsonl"
    q = "what about the ferry timetable on October 13, 2023"
    hits = s.search(q, limit=5, neighbors=False).hits
    order = [h.path for h in hits]
    # the window of that day, holding one of the words, now comes before the full match of a month later (the
    # keyword leg alone cannot tell them apart by the date: both lines hold "2023" and "13")
    assert order[0] == "session/dialog/b.jsonl"
    assert hits[0].score > 0 and order.index("session/dialog/b.jsonl") < order.index("session/dialog/a.jsonl")
    assert hits[0].field_boost > 0  # the lift is part of the share each hit shows
    # off: the words decide again; keyword mode is that leg's own order
    off = s.search(q, limit=5, neighbors=False, fusion=replace(s.fusion, date_boost=0.0)).hits
    assert off[0].path == "session/dialog/a.jsonl"
    assert s.search(q, limit=5, neighbors=False, mode="keyword").hits[0].path == "session/dialog/a.jsonl"
