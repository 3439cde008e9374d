"""Chat records chunked by turn, and time words in queries ("last week", "昨天") as date filters, on a temp vault
with dated chat records and daily notes, through the real index and searcher."""

import json
from datetime import date

import pytest

from reme_engine.search.chats import chunk_dialog, dialog_text
from reme_engine.search.hybrid import SearchFilters
from reme_engine.search.timeq import is_recall_only, parse_time_query

TODAY = date(2026, 12, 2)  # a Wednesday: last week = Mon 2026-11-23 .. Sun 2026-11-29


def _msg(i, role, content, at):
    return json.dumps({"id": f"m{i}", "role": role, "content": content, "created_at": at}, ensure_ascii=False)


@pytest.mark.parametrize("query, rest, span", [
    ("what did I talk about last week", "what did I talk about", ("2026-11-23", "2026-11-29")),
    ("上周聊了什么", "聊了什么", ("2026-11-23", "2026-11-29")),
    ("yesterday", "", ("2026-12-01", "2026-12-01")),
    ("昨天的聊天记录", "的聊天记录", ("2026-12-01", "2026-12-01")),
    ("sourdough last month", "sourdough", ("2026-11-01", "2026-11-30")),
    ("最近3天", "", ("2026-11-30", "2026-12-02")),
    ("上周三", "", ("2026-11-25", "2026-11-25")),
    ("this week", "", ("2026-11-30", "2026-12-02")),
    ("光伏产业", "光伏产业", None),
    ("Redis", "Redis", None),
])
def test_time_words_become_a_date_range(query, rest, span):
    got_rest, tr = parse_time_query(query, TODAY)
    assert got_rest == rest
    assert (tr and (tr.date_from, tr.date_to)) == span


def test_recall_only_questions_have_no_words_left():
    assert is_recall_only("what did I talk about") and is_recall_only("聊了什么") and is_recall_only("")
    assert is_recall_only("我 说了什么") and is_recall_only("的聊天记录")
    assert not is_recall_only("what did I say about sourdough") and not is_recall_only("光伏")


def test_chat_windows_are_whole_turns_of_one_day():
    raw = "\n".join([
        _msg(1, "user", "short question one", "2026-11-24T09:00:00+01:00"),
        _msg(2, "assistant", "short answer one", "2026-11-24T09:00:05+01:00"),
        "",
        _msg(3, "user", "x " * 400, "2026-11-24T09:01:00+01:00"),  # 800 bytes: alone in its window
        _msg(4, "assistant", "next day reply", "2026-11-25T10:00:00+01:00"),
        _msg(5, "user", "y" * 3000, "2026-11-25T10:01:00+01:00"),  # over chunk_bytes: sliced
    ]) + "\n"
    text = dialog_text(raw)[0]
    chunks = chunk_dialog(text, max_bytes=2000)
    lines = text.split("\n")
    spans = [(c.start_line, c.end_line) for c in chunks]
    assert spans[:3] == [(1, 2), (4, 4), (5, 5)], spans
    assert all(c.start_line == c.end_line == 6 for c in chunks[3:]) and len(chunks) >= 3 + 2
    for c in chunks[:3]:  # a window is exactly its file lines (line i of the search text = line i of the file)
        assert c.text == "\n".join(lines[c.start_line - 1:c.end_line])
    assert "".join(c.text for c in chunks[3:]) == lines[5]
    days = {c.text[c.text.index(" · ") + 3:][:10] for c in chunks[:3]}
    assert days == {"2026-11-24", "2026-11-25"}


@pytest.fixture
def chat_vault(tmp_path):
    v = tmp_path / "vault"
    (v / "session" / "dialog").mkdir(parents=True)
    (v / "daily" / "2026-11-24").mkdir(parents=True)
    turns = [
        ("user", "How long should the sourdough starter rest before baking?", "2026-11-24T20:00:00+01:00"),
        ("assistant", "Feed the starter the night before; bake when it has doubled.", "2026-11-24T20:00:09+01:00"),
        ("user", "我们上周讨论的光伏逆变器选型，还需要比较哪些参数？", "2026-11-27T21:10:00+01:00"),
        ("assistant", "比较最大转换效率、MPPT 路数和质保年限。", "2026-11-27T21:10:30+01:00"),
        ("user", "Remind me which sourdough flour we picked", "2026-12-01T08:30:00+01:00"),
        ("assistant", "The stone-ground rye.", "2026-12-01T08:30:04+01:00"),
    ]
    (v / "session" / "dialog" / "s1.jsonl").write_text(
        "\n".join(_msg(i, *t) for i, t in enumerate(turns)) + "\n", encoding="utf-8")
    (v / "daily" / "2026-11-24" / "bread.md").write_text("# Bread\n\nBaked a sourdough loaf with rye.\n",
                                                          encoding="utf-8")
    (v / "sourdough-guide.md").write_text("# Sourdough guide\n\nStarter, flour, water, salt.\n", encoding="utf-8")
    return v


def test_time_queries_filter_chats_and_daily_notes(make_engine, chat_vault):
    e = make_engine(chat_vault, embed=False)
    e.index()
    e.searcher.today = lambda: TODAY
    chat = "session/dialog/s1.jsonl"

    res = e.search("what did I talk about last week", neighbors=False)
    assert res.time_range == {"date_from": "2026-11-23", "date_to": "2026-11-29", "phrase": "last week",
                              "listing": True}
    got = [(h.path, h.start_line) for h in res.hits]
    # newest day first, chat turns first within a day; nothing from 2026-12-01, no undated note
    assert got == [(chat, 3), (chat, 1), ("daily/2026-11-24/bread.md", 1)], got
    assert res.hits[0].text.startswith("user · 2026-11-27 21:10: 我们上周讨论")

    zh = e.search("上周聊了什么", neighbors=False)
    assert [(h.path, h.start_line) for h in zh.hits] == got

    y = e.search("yesterday", neighbors=False)
    assert [(h.path, h.start_line) for h in y.hits] == [(chat, 5)]

    # time words plus content: the words rank, the range filters (the undated guide and 12-01 turns are out)
    s = e.search("what did I say about sourdough last week", mode="keyword", neighbors=False)
    assert s.time_range["listing"] is False
    assert {h.path for h in s.hits} == {chat, "daily/2026-11-24/bread.md"}
    assert all("2026-12-01" not in h.text for h in s.hits)

    # no time words: every layer, every day
    assert "sourdough-guide.md" in {h.path for h in e.search("sourdough", mode="keyword", neighbors=False).hits}
    # explicit date filters match a chat window's day too, and turn the parsing off
    f = e.search("sourdough yesterday", mode="keyword", neighbors=False,
                 filters=SearchFilters(date_from="2026-11-24", date_to="2026-11-24"))
    assert f.time_range is None and {h.path for h in f.hits} == {chat, "daily/2026-11-24/bread.md"}
    assert all("2026-11-24" in h.text or h.path.startswith("daily/") for h in f.hits)


def test_hybrid_time_query_on_chats(make_engine, chat_vault):
    """The vector leg honours the range as well (its id selector uses the same filter)."""
    e = make_engine(chat_vault)
    e.index()
    e.embed_pending()
    e.searcher.today = lambda: TODAY
    res = e.search("逆变器 参数 last week", neighbors=False)
    assert res.hits and res.hits[0].path == "session/dialog/s1.jsonl" and res.hits[0].start_line == 3
    assert all("2026-12-01" not in h.text for h in res.hits)


def test_chat_hits_come_with_the_turns_around_them(make_engine, tmp_path):
    """Ranked on small windows, returned with the same day's neighbouring windows (≤ chat_context_bytes); a
    second hit inside that context is not listed again, and the line range still maps to the record's lines."""
    from dataclasses import replace

    v = tmp_path / "v"
    (v / "session" / "dialog").mkdir(parents=True)
    words = ["apple", "banana", "cherry", "damson", "elder", "fig", "grape", "hazel", "iris", "juniper", "kale",
             "lemon"]
    lines = [_msg(i, "user" if i % 2 == 0 else "assistant",
                  f"turn {i} about {w} " + "and some more words to fill the turn " * 3, f"2026-11-24T10:{i:02d}:00Z")
             for i, w in enumerate(words)]
    lines.append(_msg(99, "user", "next day: grape again", "2026-11-25T09:00:00Z"))
    (v / "session" / "dialog" / "s.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    e = make_engine(v, embed=False)
    e.index()
    s = e.searcher
    narrow = s.search("hazel", mode="keyword", neighbors=False, parse_time=False,
                      fusion=replace(s.fusion, chat_context_bytes=0))
    wide = s.search("hazel", mode="keyword", neighbors=False, parse_time=False)
    n, w = narrow.hits[0], wide.hits[0]
    assert "hazel" in n.text and "hazel" in w.text and len(w.text) > 2 * len(n.text)
    assert w.start_line < n.start_line or w.end_line > n.end_line
    assert len(w.text.encode()) <= s.fusion.chat_context_bytes
    text = dialog_text((v / "session" / "dialog" / "s.jsonl").read_text(encoding="utf-8"))[0].split("\n")
    assert w.text == "\n".join(text[w.start_line - 1:w.end_line])
    assert "next day" not in w.text  # context stays on the hit's day
    both = s.search("hazel grape", mode="keyword", neighbors=False, parse_time=False)
    spans = [(h.start_line, h.end_line) for h in both.hits]
    assert all(a > pe or b < ps for i, (a, b) in enumerate(spans) for (ps, pe) in spans[:i]), spans  # no overlap


def test_time_words_count_in_the_configured_timezone(make_engine, tmp_path):
    """"yesterday" is the day before today *in the settings' timezone*: two zones 25 h apart never share a date,
    so each engine lists its own yesterday's note, whatever the machine's zone."""
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    v = tmp_path / "tzv"
    zones = ("Pacific/Kiritimati", "Pacific/Pago_Pago")  # UTC+14, UTC−11
    now = datetime.now(ZoneInfo("UTC"))
    yesterday = {z: (now.astimezone(ZoneInfo(z)).date() - timedelta(days=1)).isoformat() for z in zones}
    assert len(set(yesterday.values())) == 2
    for z, d in yesterday.items():
        (v / "daily" / d).mkdir(parents=True)
        (v / "daily" / d / "note.md").write_text(f"# Log\n\nWritten on {d}.\n", encoding="utf-8")
    for z in zones:
        e = make_engine(v, embed=False, timezone=z)
        e.index()
        res = e.search("yesterday", neighbors=False)
        assert res.time_range["date_from"] == res.time_range["date_to"] == yesterday[z]
        assert [h.path for h in res.hits] == [f"daily/{yesterday[z]}/note.md"]


def test_search_settings_reach_the_searcher(make_engine, tmp_path):
    """``search.chat_context_bytes``, ``search.null_floor_quantile`` and ``search.title_vectors`` from the settings
    change what a search returns; bad values are refused when the settings load."""
    from reme_engine.config import ConfigError, load_settings

    v = tmp_path / "cv"
    (v / "session" / "dialog").mkdir(parents=True)
    lines = [_msg(i, "user", f"turn {i} about {w} " + "with words to fill the turn " * 4, f"2026-11-24T10:{i:02d}:00Z")
             for i, w in enumerate(["apple", "banana", "cherry", "damson", "elder", "fig"])]
    (v / "session" / "dialog" / "s.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    wide_eng = make_engine(v, embed=False)
    wide_eng.index()
    wide = wide_eng.search("cherry", mode="keyword", neighbors=False).hits[0]
    narrow_eng = make_engine(v, embed=False, search={"chat_context_bytes": 0, "null_floor_quantile": 0.8,
                                                     "title_vectors": False})
    narrow_eng.index()
    narrow = narrow_eng.search("cherry", mode="keyword", neighbors=False).hits[0]
    assert "cherry" in narrow.text and len(narrow.text) < len(wide.text) and "apple" in wide.text
    assert narrow_eng.searcher.fusion.null_floor_quantile == 0.8 and narrow_eng.searcher.titles() is None
    for bad in ({"chat_context_bytes": -1}, {"null_floor_quantile": 1.5}):
        with pytest.raises(ConfigError, match="search\\."):
            load_settings({"vault": str(v), "search": bad}, env={})
