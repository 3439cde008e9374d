"""The four panes (Daily, Links, Agenda, Chat), the note view's additions, search filters, the palette, keys and
layout — pilot tests on temp copies of the demo vault and of knowledge-garden-zh (keyword-only engines)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import stat
import sys
import threading
from pathlib import Path

import pytest
from rich.cells import cell_len
from textual.widgets import TextArea

from reme_tui.app import ReMeApp, create_app
from reme_tui.messages import (
    AgendaLoaded,
    ChatSaved,
    ChatSubmitted,
    DayInfo,
    DaysLoaded,
    IndexProgress,
    OpenNote,
    StatusLoaded,
)
from reme_tui.screens.dialogs import IndexStatusScreen, LinkPickerScreen, NewNoteScreen, note_path_for
from reme_tui.screens.main import MainScreen
from reme_tui.screens.search import SearchScreen
from reme_tui.widgets.agenda import evidence_target, next_refresh_text
from reme_tui.widgets.daily import card_prompt, day_prompt

sys.path.insert(0, str(Path(__file__).parent))
from conftest import copy_vault, shared  # noqa: E402
from test_tui import link_groups, option_texts, settle, wait_for  # noqa: E402

GUANGFU = "digest/wiki/光伏产业链.md"
XINNENGYUAN = "digest/wiki/新能源.md"
DEMO_DAY = "2026-11-28"


# -- fixtures and helpers ---------------------------------------------------------------------------------------


def main(app: ReMeApp) -> MainScreen:
    assert app.main_screen is not None
    return app.main_screen


async def started(pilot) -> MainScreen:
    m = main(pilot.app)
    await wait_for(pilot, lambda: m.keyword_ready and m.note.path is not None and m.daily.days
                   and m.agenda.date is not None, what="startup")
    await settle(pilot)
    return m


async def open_and_wait(pilot, path: str) -> MainScreen:
    m = main(pilot.app)
    m.open_note(path)
    await wait_for(pilot, lambda: m.note.path == path and m.links.path == path, what=f"open {path}")
    await settle(pilot)
    return m


def texts(option_list) -> list[str]:
    return option_texts(option_list)


def visible(widget) -> bool:
    return bool(widget.display) and all(a.display for a in widget.ancestors if hasattr(a, "display")) \
        and widget.region.width > 0


@pytest.fixture(scope="session")
def zh_keyword_base(tmp_path_factory):
    """knowledge-garden-zh copied and keyword-indexed once (daily notes in ``Calendar/Daily notes``)."""
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine

    src = shared("vaults/knowledge-garden-zh")
    base = tmp_path_factory.mktemp("kgzh-kw")
    vault = copy_vault(src, base / "vault")
    settings = load_settings({"vault": str(vault), "state_dir": str(base / "state"), "embedder": {"kind": "none"},
                              "layers": {"daily_dir": "Calendar/Daily notes"}}, env={})
    with Engine.open(settings) as eng:
        eng.index(vectors=False)
    return base


@pytest.fixture
def zh_app(zh_keyword_base, tmp_path):
    """A ReMeApp over a private copy of the indexed zh vault (its state copied too: startup re-index is quick)."""
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine

    base = tmp_path / "kgzh"
    shutil.copytree(zh_keyword_base, base, symlinks=True)
    settings = load_settings({"vault": str(base / "vault"), "state_dir": str(base / "state"),
                              "embedder": {"kind": "none"}, "layers": {"daily_dir": "Calendar/Daily notes"}},
                             env={})
    eng = Engine.open(settings)
    yield create_app(settings, eng)
    eng.close()


# -- pure helpers -----------------------------------------------------------------------------------------------


def test_row_prompts_fit_their_cells():
    from reme_engine.vault.daily import DailyCard

    for width in (14, 20, 27, 40):
        for day in (DayInfo("2026-11-29", 0, False, True), DayInfo("2026-11-28", 12, True)):
            assert day_prompt(day, width).cell_len <= width
        card = DailyCard("daily/x/隆基.md", "隆基", "隆基 vs 通威：一体化与专业化的对比 😀", "周六上午和助手对比隆基绿能与通威股份",
                         "session", 1, 0.0)
        for line in card_prompt(card, width).plain.splitlines():
            assert cell_len(line) <= width
    assert day_prompt(DayInfo("2026-11-28", 2, True), 30).plain.endswith("2 cards")
    assert "today" in day_prompt(DayInfo("2026-11-29", 0, False, True), 30).plain


def test_evidence_targets_and_refresh_text():
    topics = {"t1": {"id": "t1", "evidence": "daily/2026-11-28/x.md", "paths": ["daily/a.md"]}}
    assert evidence_target({"topic_id": "t1", "linked_memory": ["digest/y.md"]}, topics) == "daily/2026-11-28/x.md"
    assert evidence_target({"topic_id": "zz", "linked_memory": ["[[digest/y]]"]}, topics) == "digest/y"
    assert evidence_target({"title": "t", "evidence": "the user said so", "paths": []}, {}) is None
    tz = _dt.timezone(_dt.timedelta(hours=8))
    now = _dt.datetime(2026, 11, 29, 9, 30, tzinfo=tz)
    assert next_refresh_text(_dt.datetime(2026, 11, 29, 18, 0, tzinfo=tz), now) == "today 18:00 (in 8 h 30 min)"
    assert next_refresh_text(_dt.datetime(2026, 11, 30, 18, 0, tzinfo=tz), now).startswith("tomorrow 18:00")
    assert note_path_for("灵感 idea") == "灵感 idea.md"
    assert note_path_for("digest/wiki/新词", "x") == "digest/wiki/新词.md"
    assert note_path_for("../escape") is None and note_path_for("  ") is None


# -- daily pane -------------------------------------------------------------------------------------------------


async def test_daily_pane_lists_today_first_with_counts_and_steps_days(app_for):
    app = app_for()
    async with app.run_test(size=(120, 36)) as pilot:
        m = await started(pilot)
        eng = app.engine
        today = app.settings.today()
        days = m.daily.days
        assert days[0].date == today and days[0].today
        others = [d.date for d in days[1:]]
        assert others == [d for d in eng.list_days() if d != today]  # newest first
        for d in days[1:]:
            assert d.cards == len(eng.daily_list(d.date)), d.date
        assert texts(m.daily.dates)[0].startswith(f"{today} ")
        assert "2026-11-27 Fri" in texts(m.daily.dates)[2] and texts(m.daily.dates)[2].endswith("3 cards")
        # today has no folder yet: the cards list offers to create its page
        assert m.daily.date == today
        assert texts(m.daily.day_cards)[0].startswith("＋ create the")
        # `[` steps to the day before and opens its page; the cards follow
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: m.note.path == f"daily/{DEMO_DAY}.md", what="day before")
        await wait_for(pilot, lambda: m.daily.page == f"daily/{DEMO_DAY}.md", what="day cards")
        cards = texts(m.daily.day_cards)
        assert cards[0].startswith(f"📅 {DEMO_DAY}")
        assert any("Retrieval eval plan" in c for c in cards) and any("隆基 vs 通威" in c for c in cards)
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: m.note.path == "daily/2026-11-27.md", what="two days before")
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: m.note.path == f"daily/{DEMO_DAY}.md", what="day after")
        # choosing a card opens it
        await wait_for(pilot, lambda: m.daily.date == DEMO_DAY and m.daily.cards, what="cards")
        m.daily.day_cards.focus()
        idx = next(i for i, t in enumerate(texts(m.daily.day_cards)) if "隆基 vs 通威" in t)
        m.daily.day_cards.highlighted = idx
        await pilot.press("enter")
        await wait_for(pilot, lambda: m.note.path == "daily/2026-11-28/session_d29f6b31.md", what="card")
        assert pilot.app._exception is None


async def test_cards_written_by_another_editor_appear_in_the_daily_pane(app_for, demo_vault):
    """The real watcher (app started with its background threads): a card saved elsewhere into the day on
    screen is listed, counted and searchable; deleting it elsewhere removes it again."""
    app = app_for()
    app.background = True
    async with app.run_test(size=(120, 36)) as pilot:
        m = await started(pilot)
        await wait_for(pilot, lambda: app.engine.watcher is not None, what="watcher")
        m.daily.request_day(DEMO_DAY)
        await wait_for(pilot, lambda: m.daily.date == DEMO_DAY and m.daily.cards, what="day cards")
        before = len(m.daily.cards)
        card = demo_vault / "daily" / DEMO_DAY / "from-obsidian.md"
        tmp = card.with_name(".from-obsidian.md.tmp")
        tmp.write_text("---\nname: Written in Obsidian\n---\n# Written in Obsidian\n\nzebracrossing idea\n")
        tmp.replace(card)  # an editor's atomic save
        await wait_for(pilot, lambda: len(m.daily.cards) == before + 1, timeout=10, what="new card listed")
        assert any("Written in Obsidian" in t for t in texts(m.daily.day_cards))
        await wait_for(pilot, lambda: m.daily.day_info(DEMO_DAY).cards == before + 1, what="count")
        assert app.engine.search("zebracrossing", mode="keyword").hits[0].path == f"daily/{DEMO_DAY}/from-obsidian.md"
        card.unlink()
        await wait_for(pilot, lambda: len(m.daily.cards) == before, timeout=10, what="card gone")
        assert not any("Written in Obsidian" in t for t in texts(m.daily.day_cards))
        assert pilot.app._exception is None


async def test_big_days_and_long_histories_are_paged(app_for, demo_vault):
    """A day of 250 imported cards and 150 days of notes: the lists show a page and a "more" row, so a
    refresh never lays out thousands of rows at once; Enter on the row shows the next page."""
    from reme_tui.widgets.daily import CARDS_PAGE, DATES_PAGE, MORE_CARDS, MORE_DATES

    big = demo_vault / "daily" / "2026-11-20"
    big.mkdir(parents=True)
    for i in range(250):
        (big / f"import-{i:03d}.md").write_text(f"# Imported {i}\n\ncard {i}\n")
    start = _dt.date(2026, 6, 1)
    for k in range(150):
        (demo_vault / "daily" / f"{start + _dt.timedelta(days=k)}.md").write_text("# a day\n")
    app = app_for()
    async with app.run_test(size=(120, 36)) as pilot:
        m = await started(pilot)
        n_days = len(m.daily.days)
        assert n_days > DATES_PAGE
        assert m.daily.dates.option_count == DATES_PAGE + 1
        more = m.daily.dates.get_option_at_index(DATES_PAGE)
        assert more.id == MORE_DATES and f"{n_days - DATES_PAGE:,} older days" in str(more.prompt)
        m.daily.request_day("2026-11-20")
        await wait_for(pilot, lambda: m.daily.date == "2026-11-20" and len(m.daily.cards) == 250, what="cards")
        rows = texts(m.daily.day_cards)
        assert len(rows) == 1 + CARDS_PAGE + 1 and "150 more cards" in rows[-1]
        m.daily.day_cards.focus()
        m.daily.day_cards.highlighted = m.daily.day_cards.option_count - 1
        await pilot.press("enter")
        await pilot.pause()
        rows = texts(m.daily.day_cards)
        assert len(rows) == 1 + 2 * CARDS_PAGE + 1 and "50 more cards" in rows[-1]
        assert m.daily.day_cards.get_option_at_index(m.daily.day_cards.option_count - 1).id == MORE_CARDS
        # stepping to an older day beyond the page extends the dates list instead of stopping
        oldest_shown = m.daily.days[DATES_PAGE - 1].date
        m.daily.request_day(oldest_shown)
        await pilot.pause()
        assert m.daily.step(+1) == m.daily.days[DATES_PAGE].date
        assert m.daily.dates.option_count > DATES_PAGE + 1
        assert pilot.app._exception is None


async def test_open_search_results_follow_notes_saved_elsewhere(app_for, demo_vault):
    app = app_for()
    app.background = True
    async with app.run_test(size=(120, 36)) as pilot:
        await started(pilot)
        await wait_for(pilot, lambda: app.engine.watcher is not None, what="watcher")
        await pilot.press("slash")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SearchScreen), what="search")
        screen = pilot.app.screen
        for ch in "quokkaword":
            await pilot.press(ch)
        await wait_for(pilot, lambda: screen.result is not None and screen.result.query == "quokkaword", what="search")
        assert not screen.result.hits
        (demo_vault / "digest/wiki/quokka.md").write_text("# Quokka\n\nthe quokkaword appears here\n")
        await wait_for(pilot, lambda: screen.result is not None and screen.result.hits, timeout=10,
                       what="results re-run after the watcher indexed the note")
        assert screen.result.hits[0].path == "digest/wiki/quokka.md"
        assert pilot.app._exception is None


async def test_t_creates_today_on_demand_and_opens_it(app_for, demo_vault):
    app = app_for()
    async with app.run_test(size=(120, 36)) as pilot:
        m = await started(pilot)
        today = app.settings.today()
        assert not (demo_vault / "daily" / f"{today}.md").exists()
        m.note.focus_body()
        await pilot.press("t")
        page = f"daily/{today}.md"
        await wait_for(pilot, lambda: m.note.path == page, what="today's page")
        assert (demo_vault / "daily" / today).is_dir()
        text = (demo_vault / "daily" / f"{today}.md").read_text(encoding="utf-8")
        assert f"# {today}" in text and "reme:day-index:start" in text
        await wait_for(pilot, lambda: m.daily.days[0].page and m.daily.page == page, what="daily refreshed")
        assert pilot.app.focused is m.daily.dates and m.left_switch.current == "daily"
        assert any("Created" in (n.title or "") + n.message for n in pilot.app._notifications)
        # a second `t` creates nothing new
        before = sorted(p.name for p in (demo_vault / "daily").iterdir())
        await pilot.press("t")
        await settle(pilot)
        assert sorted(p.name for p in (demo_vault / "daily").iterdir()) == before


async def test_startup_opens_todays_page_when_it_exists(app_for):
    app = app_for(today=DEMO_DAY)
    async with app.run_test(size=(120, 36)) as pilot:
        m = await started(pilot)
        assert m.note.path == f"daily/{DEMO_DAY}.md"
        assert m.daily.days[0].date == DEMO_DAY and m.daily.days[0].cards == 2


# -- note view --------------------------------------------------------------------------------------------------


async def test_frontmatter_provenance_links_and_link_picker(app_for):
    app = app_for()
    async with app.run_test(size=(140, 40)) as pilot:
        await started(pilot)
        m = await open_and_wait(pilot, "daily/2026-11-28/session_d29f6b31.md")
        assert m.note.summary.startswith("隆基 vs 通威：一体化与专业化的对比 — 周六上午")
        assert "#investing #新能源 #光伏" in m.note.summary
        assert m.note.prov_links == [("source_conversation", "session/dialog/d29f6b31.jsonl")]
        assert m.note.prov.display and "source_conversation: d29f6b31.jsonl" in str(m.note.prov.render())
        m.note.action_follow_provenance(0)  # what a click on the link runs
        await wait_for(pilot, lambda: m.note.path == "session/dialog/d29f6b31.jsonl", what="session record")
        assert m.note.doc.plain  # a .jsonl is shown as text
        await pilot.press("escape")
        await pilot.press("backspace")  # Back
        await wait_for(pilot, lambda: m.note.path == "daily/2026-11-28/session_d29f6b31.md", what="back")
        # keyboard link following: `f` lists the note's links
        m = await open_and_wait(pilot, GUANGFU)
        await pilot.press("f")
        assert isinstance(pilot.app.screen, LinkPickerScreen)
        picker = pilot.app.screen
        shown = [s for s, _t, _a in picker.links]
        assert shown[0] == "新能源" and "钙钛矿电池" in shown
        await pilot.press("enter")
        await wait_for(pilot, lambda: m.note.path == XINNENGYUAN, what="followed")
        assert [p for p, _ in m.history][-2:] == [GUANGFU, XINNENGYUAN]
        await pilot.press("alt+left")
        await wait_for(pilot, lambda: m.note.path == GUANGFU, what="back")
        await pilot.press("alt+right")
        await wait_for(pilot, lambda: m.note.path == XINNENGYUAN, what="forward")


async def test_edit_runs_editor_then_reindexes_the_note(app_for, demo_vault, tmp_path, monkeypatch):
    editor = tmp_path / "fake-editor.sh"
    editor.write_text("#!/bin/sh\nprintf '\\n## 编辑过\\n\\n独角兽词 zebracorn\\n' >> \"$1\"\n", encoding="utf-8")
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.delenv("VISUAL", raising=False)
    app = app_for()
    async with app.run_test(size=(120, 36)) as pilot:
        await started(pilot)
        m = await open_and_wait(pilot, GUANGFU)
        assert not app.engine.search("zebracorn", mode="keyword", neighbors=False).hits
        await pilot.press("e")
        await wait_for(pilot, lambda: "zebracorn" in m.note.markdown.source, what="reloaded after edit")
        assert "zebracorn" in (demo_vault / GUANGFU).read_text(encoding="utf-8")
        hits = app.engine.search("zebracorn", mode="keyword", neighbors=False).hits
        assert [h.path for h in hits] == [GUANGFU]  # re-indexed
        assert m.history[-1][0] == GUANGFU and len([p for p, _ in m.history if p == GUANGFU]) == 1


async def test_long_notes_plain_above_100kb_or_too_many_blocks(app_for, demo_vault):
    (demo_vault / "long.md").write_text("# 长\n\n" + "段落 paragraph text. " * 6000, encoding="utf-8")
    (demo_vault / "many.md").write_text("# 多\n\n" + ("一行中文 line.\n\n" * 1500), encoding="utf-8")
    (demo_vault / "mid.md").write_text("# 中\n\n" + ("一行中文 line.\n\n" * 300), encoding="utf-8")
    assert (demo_vault / "long.md").stat().st_size > 100 * 1024 > (demo_vault / "many.md").stat().st_size
    app = app_for()
    async with app.run_test(size=(120, 36)) as pilot:
        await started(pilot)
        m = await open_and_wait(pilot, "long.md")
        assert m.note.query_one("#note-plain", TextArea).display and not m.note.scroller.display
        assert "plain text" in str(m.note.border_subtitle) and "large file" in m.note.summary
        m = await open_and_wait(pilot, "many.md")  # small but 1,500 blocks: each frame would lay them all out
        assert m.note.doc.plain and "long note (1501 blocks)" in m.note.summary
        m = await open_and_wait(pilot, "mid.md")
        assert m.note.scroller.display and m.note.markdown.query("MarkdownH1")
        assert len(m.note.markdown.children) == 301


# -- neighbours pane --------------------------------------------------------------------------------------------


async def test_neighbours_grouped_sources_and_depth_two(app_for):
    app = app_for()
    async with app.run_test(size=(160, 48)) as pilot:
        await started(pilot)
        m = await open_and_wait(pilot, XINNENGYUAN)
        groups = link_groups(m.links)
        src = groups[("out", "Sources (daily notes)")]
        assert any(s.startswith("→ 光伏产业链学习笔记") for s in src)
        src_paths = {n.path for oid, n in m.links.entries.items() if oid.startswith("out-")
                     and n.path.startswith("daily/")}
        assert "daily/2026-11-28/session_d29f6b31.md" in src_paths
        assert ("in", "所属行业") in groups  # 光伏产业链 links here with a predicate
        # depth 2 with `x` (engine.traverse); entries name the note they are reached through
        await pilot.press("g")
        assert pilot.app.focused is m.links
        await pilot.press("x")
        await wait_for(pilot, lambda: m.links.hop2 is not None, what="depth 2")
        assert m.links.depth == 2 and str(m.links.border_title) == "Links · depth 2 (x: 1)"
        hop2 = link_groups(m.links)[("2", "hop2")]
        assert hop2 and all(e.startswith("⇢ ") for e in hop2)
        first = next(n for oid, n in m.links.entries.items() if oid.startswith("hop2-"))
        assert first.via and first.path not in {XINNENGYUAN}
        assert any("via " in t for t in texts(m.links))
        # navigating keeps depth 2
        m.links.highlighted = next(i for i, o in enumerate(m.links.options) if o.id == "hop2-0")
        target = m.links.entries["hop2-0"]
        if not target.dangling:
            await pilot.press("enter")
            await wait_for(pilot, lambda: m.note.path == target.path and m.links.hop2 is not None,
                           what="hop-2 opened")
            assert m.links.depth == 2
        await pilot.press("g", "x")
        await settle(pilot)
        assert m.links.depth == 1 and not any(k[0] == "2" for k in link_groups(m.links))


# -- agenda pane ------------------------------------------------------------------------------------------------


async def test_agenda_items_topics_and_evidence(app_for):
    app = app_for(today=DEMO_DAY)
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        assert m.agenda.date == DEMO_DAY and m.agenda.result.success and not m.agenda.result.skipped
        rows = texts(m.agenda.list)
        assert rows[0] == "Agenda (2)"
        first = rows[1].splitlines()
        # each field on its own line, a long one continued on an indented second line
        fields = [x for x in first[1:] if not x.startswith("    ")]
        assert first[0].startswith("1. 检索评测自动化与 reranker A/B")
        assert fields[0].startswith("  “ 上周的召回回归已经修好了")
        assert fields[1].startswith("  → Add the recall@10 gate")
        assert fields[2] == "  via in_conversation"
        assert fields[3].startswith("  why Fresh evidence today")
        assert len(first) <= 1 + 2 * len(fields)
        assert rows[2].startswith("2. 光伏龙头跟踪清单")
        assert rows[3] == "Topics (3)"
        assert rows[4].splitlines()[0] == "• 检索评测自动化与 reranker A/B"
        assert rows[4].splitlines()[1].startswith("  follow_up · 0.84 — The user fixed")
        assert rows[6].splitlines()[1].startswith("  wellbeing · 0.58 — ")
        assert "Agenda · today" in str(m.agenda.border_title)
        await pilot.press("a")
        assert pilot.app.focused is m.agenda.list
        await pilot.press("enter")  # the first item's evidence note
        await wait_for(pilot, lambda: m.note.path == "daily/2026-11-28/retrieval-eval-plan.md", what="evidence")
        # the date picker: another day by typing, then ←/→ on the list
        m.agenda.date_input.focus()
        m.agenda.date_input.value = ""
        await pilot.press(*"2026-11-26", "enter")
        await wait_for(pilot, lambda: m.agenda.date == "2026-11-26", what="picked day")
        assert not m.agenda.result.skipped and m.agenda.result.topics
        assert "Agenda · 2026-11-26" in str(m.agenda.border_title)
        assert pilot.app.focused is m.agenda.list
        await pilot.press("left")
        await wait_for(pilot, lambda: m.agenda.date == "2026-11-25", what="day before")
        assert texts(m.agenda.list)[0] == "No proactive refresh yet for 2026-11-25."
        await pilot.press("right", "right", "right")
        await wait_for(pilot, lambda: m.agenda.date == DEMO_DAY, what="back to today")


async def test_agenda_without_refresh_shows_next_scheduled_time(app_for):
    app = app_for(today="2026-11-29", timezone="Asia/Shanghai", proactive_refresh_cron="0 18 * * *")
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        assert m.agenda.result.skipped
        rows = texts(m.agenda.list)
        assert rows[0] == "No proactive refresh yet today."
        nxt = m.agenda.next_refresh
        assert nxt is not None and (nxt.hour, nxt.minute) == (18, 0)
        assert nxt.utcoffset() == _dt.timedelta(hours=8)
        assert nxt > _dt.datetime.now(nxt.tzinfo)
        assert rows[1].startswith("Next scheduled refresh: ") and "18:00" in rows[1]
        assert rows[2] == "Press r to refresh now."
    app = app_for(today="2026-11-29", proactive_refresh_cron="")
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        assert texts(m.agenda.list)[1] == "No refresh is scheduled."


async def test_refresh_now_writes_todays_interests_and_shows_them(app_for, demo_vault):
    app = app_for(today=DEMO_DAY)
    (demo_vault / "daily" / DEMO_DAY / "interests.yaml").unlink()
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        assert m.agenda.result.skipped
        await pilot.press("r")
        await wait_for(pilot, lambda: not m.refresh_running, timeout=60, what="refresh")
        await wait_for(pilot, lambda: m.agenda.result is not None and not m.agenda.result.skipped, what="agenda")
        assert (demo_vault / "daily" / DEMO_DAY / "interests.yaml").exists()
        assert m.agenda.result.topics
        assert any((n.title or "") in ("Refreshed", "Refresh") for n in pilot.app._notifications)
        assert pilot.app._exception is None


async def test_agenda_follows_a_refresh_by_another_process_and_a_goes_back_to_today(app_for, demo_vault, tmp_path,
                                                                                     make_engine):
    app = app_for(today=DEMO_DAY)
    app.background = True
    (demo_vault / "daily" / DEMO_DAY / "interests.yaml").unlink()
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        await wait_for(pilot, lambda: app.engine.watcher is not None, what="watcher")
        assert m.agenda.result.skipped
        # `reme-tui --refresh` (or --serve's cron) in another process writes today's file
        other = make_engine(demo_vault, embed=False, state_dir=str(tmp_path / "other-state"), timezone="UTC")
        assert other.proactive_refresh(DEMO_DAY).status == "written"
        await wait_for(pilot, lambda: m.agenda.result is not None and not m.agenda.result.skipped, timeout=10,
                       what="agenda reloaded")
        assert m.agenda.result.topics
        # another day on screen, then `a`: back to today
        m.load_agenda("2026-11-27")
        await wait_for(pilot, lambda: m.agenda.date == "2026-11-27", what="other day")
        await pilot.press("a")
        await wait_for(pilot, lambda: m.agenda.date == DEMO_DAY, what="today again")
        assert pilot.app._exception is None


# -- chat pane --------------------------------------------------------------------------------------------------


async def test_chat_message_saved_to_session_and_capture_card(app_for, demo_vault):
    posted: list = []
    app = app_for()
    async with app.run_test(size=(160, 48), message_hook=posted.append) as pilot:
        m = await started(pilot)
        assert "No LLM: quick capture" in str(m.chat.notice.render()) and "answers need an LLM" in str(m.chat.notice.render())
        await pilot.press("c")
        assert pilot.app.focused is m.chat.input
        await pilot.press(*"记一下 光伏跟踪表 q ")  # `q` is typed, not Quit
        m.chat.input.insert_text_at_cursor("😀：")  # (keys the pilot cannot press)
        await pilot.press("enter")
        await wait_for(pilot, lambda: any(isinstance(x, ChatSaved) and x.stage == "capture" for x in posted),
                       what="capture saved")
        await settle(pilot)
        text = "记一下 光伏跟踪表 q 😀："
        submitted = {id(x): x for x in posted if isinstance(x, ChatSubmitted)}  # the hook sees each hop
        assert [x.text for x in submitted.values()] == [text]
        assert m.chat.input.value == ""
        sid = m.session_id
        record = demo_vault / "session" / "dialog" / f"{sid}.jsonl"
        lines = [json.loads(x) for x in record.read_text(encoding="utf-8").splitlines()]
        assert [(x["role"], x["content"]) for x in lines] == [("user", text)]
        created = _dt.datetime.fromisoformat(lines[0]["created_at"])
        day = created.astimezone(app.settings.tzinfo()).date().isoformat()
        card = demo_vault / "daily" / day / "capture.md"
        body = card.read_text(encoding="utf-8")
        assert text in body and f"[[session/dialog/{sid}.jsonl|chat]]" in body
        bubble = m.chat.bubbles[lines[0]["id"]]
        assert bubble.text == text and bubble.status == "saved → capture.md"
        # the day shows its new card
        await wait_for(pilot, lambda: m.daily.day_info(day) is not None and m.daily.day_info(day).cards == 1,
                       what="card counted")
        # a second message goes to the same session and card
        await pilot.press(*"第二条", "enter")
        await wait_for(pilot, lambda: len({id(x) for x in posted if isinstance(x, ChatSaved)
                                           and x.stage == "capture"}) == 2, what="second saved")
        assert len(record.read_text(encoding="utf-8").splitlines()) == 2
        assert "第二条" in card.read_text(encoding="utf-8")
        await pilot.press("escape")
        assert m.note in pilot.app.focused.ancestors_with_self


async def test_chat_with_llm_configured_saves_session_only_and_streams(app_for, demo_vault):
    app = app_for(llm={"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9"})
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        assert app.settings.llm.configured
        assert "No LLM" not in str(m.chat.notice.render())
        await pilot.press("c", *"hello", "enter")
        await wait_for(pilot, lambda: m.session_id and any(b.status == "saved" for b in m.chat.bubbles.values()),
                       what="saved")
        assert (demo_vault / "session" / "dialog" / f"{m.session_id}.jsonl").exists()
        today = app.settings.today()
        assert not (demo_vault / "daily" / today / "capture.md").exists()
        # the streaming API a reply will use
        mid = m.chat.begin_stream("assistant")
        for chunk in ("光伏", "跟踪", "表 ✓"):
            m.chat.append_chunk(mid, chunk)
            await pilot.pause()
        assert m.chat.bubbles[mid].streaming and "▍" in str(m.chat.bubbles[mid].render())
        assert m.chat.end_stream(mid) == "光伏跟踪表 ✓"
        await pilot.pause()
        assert not m.chat.bubbles[mid].streaming
        assert m.chat.log_view.scroll_y == m.chat.log_view.max_scroll_y


# -- search filters -------------------------------------------------------------------------------------------


async def test_search_filters_layer_and_date_range(app_for):
    app = app_for()
    async with app.run_test(size=(140, 40)) as pilot:
        m = await started(pilot)
        await pilot.press("slash")
        s = pilot.app.screen
        assert isinstance(s, SearchScreen)
        await pilot.press(*"光伏")
        await wait_for(pilot, lambda: s.result is not None and s.result.query == "光伏", what="results")
        layers = {h.path.split("/")[0] for h in s.result.hits}
        assert {"digest", "daily"} <= layers
        s.layer_select.value = "digest"
        await wait_for(pilot, lambda: s.result is not None and s.shown_seq == s.seq and
                       all(h.path.startswith("digest/") for h in s.result.hits), what="layer filter")
        assert s.result.hits and "filter digest/" in str(s.info.render())
        s.layer_select.clear()
        await pilot.press("ctrl+f")
        assert pilot.app.focused is s.layer_select
        s.date_from.focus()
        await pilot.press(*"2026-11-26", "tab", *"2026-11-26")
        await wait_for(pilot, lambda: s.result is not None and s.shown_seq == s.seq
                       and s.date_to.value == "2026-11-26"
                       and all("2026-11-26" in h.path or h.path.startswith("session/")  # chat records: dated by their turns
                               for h in s.result.hits), what="date filter")
        assert s.result.hits and {h.path.split("/")[0] for h in s.result.hits} <= {"daily", "resource", "session"}
        s.date_to.value = "2026-13-01"
        await pilot.pause(0.3)
        await settle(pilot)
        assert "not a date" in str(s.info.render())
        await pilot.press("escape")
        assert pilot.app.screen is m


# -- palette, keys, status ------------------------------------------------------------------------------------


async def test_palette_commands_status_and_new_note(app_for, demo_vault):
    from reme_tui.commands import COMMANDS

    names = {c[0] for c in COMMANDS}
    assert {"Open today", "New note", "Search notes", "Re-index now", "Refresh now", "Toggle light/dark theme",
            "Show index status"} <= names
    app = app_for()
    async with app.run_test(size=(140, 40)) as pilot:
        m = await started(pilot)
        # every palette entry names an existing action
        for _name, action, _help in COMMANDS:
            if action.startswith("main('"):
                assert hasattr(m, "action_" + action[6:-2]), action
            else:
                assert hasattr(pilot.app, "action_" + action), action
        # through the real palette: type, Enter
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"index status")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, IndexStatusScreen), what="status modal")
        st = pilot.app.screen
        await wait_for(pilot, lambda: bool(st.rows), what="status read")
        body = "\n".join(f"{k}: {v}" for k, v in st.rows)
        assert "chunks" in body and "not configured" in body and "proactive_refresh" in body
        await pilot.press("escape")
        assert pilot.app.screen is m
        await pilot.app.run_action("main('new_note')")
        assert isinstance(pilot.app.screen, NewNoteScreen)
        await pilot.press(*"灵感 idea", "enter")
        await wait_for(pilot, lambda: m.note.path == "灵感 idea.md", what="new note")
        assert (demo_vault / "灵感 idea.md").read_text(encoding="utf-8") == "# 灵感 idea\n\n"  # no frontmatter
        assert app.engine.stat("灵感 idea.md").indexed
        await pilot.app.run_action("main('today')")
        await wait_for(pilot, lambda: m.note.path == f"daily/{app.settings.today()}.md", what="palette today")


async def test_default_keys_have_ids_and_remap(app_for):
    ids = ReMeApp.binding_ids()
    assert {"search", "chat", "today", "agenda", "neighbours", "edit", "refresh", "reindex", "help", "quit",
            "focus_main", "previous_day", "next_day", "links.depth"} <= ids
    keys = {b.id: b.key for b in MainScreen.BINDINGS}
    assert (keys["search"], keys["chat"], keys["today"], keys["agenda"], keys["neighbours"], keys["edit"],
            keys["refresh"], keys["reindex"]) == ("slash", "c", "t", "a", "g", "e", "r", "R")
    app = app_for(keymap={"today": "T", "agenda": "ctrl+a"})
    async with app.run_test(size=(140, 40)) as pilot:
        m = await started(pilot)
        m.note.focus_body()
        await pilot.press("ctrl+a")
        assert pilot.app.focused is m.agenda.list
        await pilot.press("escape")
        assert m.note in pilot.app.focused.ancestors_with_self
        await pilot.press("T")
        await wait_for(pilot, lambda: m.note.path == f"daily/{app.settings.today()}.md", what="remapped today")


async def test_status_line_shows_index_state(app_for):
    app = app_for()
    async with app.run_test(size=(160, 40)) as pilot:
        m = await started(pilot)
        text = m.status.render_text().plain
        counts = app.engine.status()
        assert f"{counts['files']} files · {counts['chunks']} chunks" in text
        assert "indexed " in text and "embedder: off" in text and "LLM: not configured" in text
        m.on_index_progress(IndexProgress("index", 5, 20))
        assert "indexing 5/20 (25%)" in m.status.render_text().plain


# -- layout -----------------------------------------------------------------------------------------------------


async def test_layout_80x24_shows_fewer_panes_and_keys_swap_them(app_for):
    app = app_for(today=DEMO_DAY)
    async with app.run_test(size=(80, 24)) as pilot:
        m = await started(pilot)
        assert m.has_class("-narrow")
        assert visible(m.daily) and visible(m.note)
        assert not visible(m.links) and not visible(m.agenda) and not visible(m.chat)
        await pilot.press("g")
        assert visible(m.links) and not visible(m.daily) and not visible(m.agenda)
        assert pilot.app.focused is m.links
        await wait_for(pilot, lambda: m.links._width == m.links._prompt_width(), what="re-cut")
        await pilot.press("a")
        assert visible(m.agenda) and not visible(m.links)
        await pilot.press("c")
        assert visible(m.chat) and pilot.app.focused is m.chat.input
        await pilot.press("escape", "t")
        assert visible(m.daily) and not visible(m.agenda)
        await pilot.press("f2")
        assert not visible(m.left) and visible(m.note)
        await pilot.press("f2")
        assert visible(m.daily)
        await pilot.press("f4")
        assert not visible(m.chat)
        # every visible row of the daily pane fits its width (CJK measured in cells)
        for line in texts(m.daily.day_cards):
            for part in line.splitlines():
                assert cell_len(part) <= m.daily.day_cards.scrollable_content_region.width
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert not m.has_class("-narrow")
        assert visible(m.daily) and visible(m.links) and visible(m.agenda) and visible(m.note)
        await pilot.press("f3")
        assert not visible(m.links) and not visible(m.agenda)


# -- thread safety ----------------------------------------------------------------------------------------------


async def test_background_results_while_the_user_types(app_for, demo_vault):
    """Worker-style posts from other threads (days, status, agenda, progress) while keys arrive: no exception,
    the typed text intact, the widgets holding the last state posted."""
    app = app_for(today=DEMO_DAY)
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        agenda_res = app.engine.proactive_read(DEMO_DAY)
        status = app.engine.status()
        stop = threading.Event()
        errors: list[BaseException] = []
        # One batch per thread per key, posted while the next key is on its way: every key races the posts.
        # (Posting on a 10 ms timer instead flooded the loop: ~1,200 agenda re-renders, ~25 s of CPU.)
        ticks = [threading.Semaphore(0) for _ in range(3)]

        def hammer(n: int) -> None:
            try:
                for i in range(1, 400):
                    while not ticks[n].acquire(timeout=0.05):
                        if stop.is_set():
                            return
                    if stop.is_set():
                        return
                    days = [DayInfo(DEMO_DAY, i % 5, True, True), DayInfo("2026-11-27", 3, True)]
                    # each to the pane whose workers post it (panes load their own data)
                    m.daily.post_message(DaysLoaded(DEMO_DAY, days))
                    m.status.post_message(StatusLoaded({**status, "files": status["files"] + n}))
                    m.agenda.post_message(AgendaLoaded(DEMO_DAY, DEMO_DAY, agenda_res))
                    m.post_message(IndexProgress("index", i % 100, 100))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        async def press(*keys: str) -> None:
            for key in keys:
                for t in ticks:
                    t.release()
                await pilot.press(key)

        threads = [threading.Thread(target=hammer, args=(k,), daemon=True) for k in range(3)]
        for t in threads:
            t.start()
        try:
            await press("c")
            typed = "并发测试 typing while workers post 结果"
            for ch in typed:
                await press(ch)
            assert m.chat.input.value == typed
            m.note.focus_body()
            await press("slash")
            s = pilot.app.screen
            await press(*"光伏")
            await wait_for(pilot, lambda: s.result is not None and s.result.query == "光伏", what="search")
            await press("escape")
        finally:
            stop.set()
            for t in threads:
                t.join(5)
        await settle(pilot)
        assert not errors and pilot.app._exception is None
        assert m.chat.input.value == typed
        assert [d.date for d in m.daily.days] == [DEMO_DAY, "2026-11-27"]
        assert m.agenda.date == DEMO_DAY and texts(m.agenda.list)[0] == "Agenda (2)"
        assert m.status.status["files"] >= status["files"]


# -- knowledge-garden-zh ----------------------------------------------------------------------------------------


async def test_zh_vault_daily_notes_search_and_links(zh_app):
    app = zh_app
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        days = [d for d in m.daily.days if not d.today]
        assert len(days) >= 15 and days[0].date > days[-1].date
        assert all(d.page for d in days)  # Calendar/Daily notes/<date>.md pages
        # open the newest day page from the dates list
        m.daily.dates.focus()
        m.daily.dates.highlighted = 1
        await pilot.press("enter")
        page = f"Calendar/Daily notes/{days[0].date}.md"
        await wait_for(pilot, lambda: m.note.path == page, what="zh day page")
        # search a Chinese word and open the top hit
        await pilot.press("slash")
        s = pilot.app.screen
        await pilot.press(*"笔记组织")
        await wait_for(pilot, lambda: s.result is not None and s.result.query == "笔记组织", timeout=30, what="hits")
        assert s.result.hits
        top = s.result.hits[0]
        await pilot.press("enter")
        await wait_for(pilot, lambda: m.note.path == top.path and m.links.path == top.path, what="zh hit")
        await settle(pilot)
        # Dataview `up:: [[…]]` links show under their predicate somewhere in the vault
        m = await open_and_wait(pilot, top.path)
        for line in texts(m.links):
            for part in line.splitlines():
                assert cell_len(part) <= m.links.scrollable_content_region.width
        assert pilot.app._exception is None


async def test_zh_vault_predicate_groups(zh_app):
    app = zh_app
    async with app.run_test(size=(160, 48)) as pilot:
        await started(pilot)
        row = app.engine.store.conn.execute(
            "SELECT f.path FROM links l JOIN files f ON f.id = l.src_id WHERE l.predicate = 'up' "
            "AND l.resolved IS NOT NULL ORDER BY f.path LIMIT 1").fetchone()
        assert row is not None
        m = await open_and_wait(pilot, row[0])
        groups = link_groups(m.links)
        assert ("out", "up") in groups and groups[("out", "up")][0].startswith("→ ")


@pytest.mark.skipif(os.name != "posix", reason="posix paths")
async def test_open_note_request_from_any_widget_bubbles_to_the_screen(app_for):
    app = app_for()
    async with app.run_test(size=(120, 36)) as pilot:
        m = await started(pilot)
        m.agenda.list.post_message(OpenNote(GUANGFU))
        await wait_for(pilot, lambda: m.note.path == GUANGFU, what="bubbled")


async def test_chat_answer_streams_from_the_llm_and_feeds_auto_memory(app_for, demo_vault):
    """With an LLM: the reply streams into the pane through the real SDK, is recorded in the session, and
    auto-memory writes the session's daily card."""
    from wire.server import ScriptedServer, openai_chat, openai_stream

    card = {"name": "光伏跟踪", "description": "The user is setting up a PV tracking sheet", "slug": "pv-tracking",
            "timeline": ["Started a PV tracking sheet"], "current_state": "Sheet started", "notes": []}
    script = [openai_stream(["Your notes say ", "the chain has five stages ", "[[digest/wiki/光伏产业链.md#L1-L9]]"]),
              openai_chat(json.dumps(card, ensure_ascii=False))]
    with ScriptedServer(script) as srv:
        app = app_for(llm={"provider": "openai", "model": "m", "base_url": srv.base_url, "api_key": "k"})
        async with app.run_test(size=(160, 48)) as pilot:
            m = await started(pilot)
            await pilot.press("c", *"光伏产业链", "enter")
            await wait_for(pilot, lambda: any(b.role == "assistant" and "five stages" in b.text and not b.streaming
                                              for b in m.chat.bubbles.values()), what="reply streamed", timeout=30)
            await wait_for(pilot, lambda: len(srv.requests) >= 2, what="auto-memory call", timeout=30)
            await settle(pilot)
            record = demo_vault / "session" / "dialog" / f"{m.session_id}.jsonl"
            roles = [json.loads(x)["role"] for x in record.read_text(encoding="utf-8").splitlines()]
            assert roles == ["user", "assistant"]
            assert "Context from the user's notes" in srv.requests[0]["body"]["messages"][-1]["content"]
            await wait_for(pilot, lambda: list((demo_vault / "daily").rglob("pv-tracking*.md")), what="card",
                           timeout=30)
            text = list((demo_vault / "daily").rglob("pv-tracking*.md"))[0].read_text(encoding="utf-8")
            assert f"session_id: {m.session_id}" in text and "Started a PV tracking sheet" in text


async def test_changes_view_lists_runs_shows_diffs_and_reverts(app_for, demo_vault):
    from reme_tui.screens.changes import ChangesScreen

    app = app_for()
    eng = app.engine
    run = eng.journal.start_run(eng.vault, "auto_dream", {"date": DEMO_DAY})
    target = "digest/wiki/新能源.md"
    before = (demo_vault / target).read_text(encoding="utf-8")
    _, sha = run.read(target)
    run.write(target, before + "\nA line the dream added.\n", step="integrate", expected_sha=sha)
    run.finish("ok", {"updated": 1})
    later = eng.journal.start_run(eng.vault, "auto_memory", {})  # a newer run above it in the list
    other = "digest/wiki/隆基绿能.md"
    _, osha = later.read(other)
    later.write(other, (demo_vault / other).read_text(encoding="utf-8") + "\nmemo\n", step="card", expected_sha=osha)
    later.finish("ok", {})
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        m.action_changes()
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ChangesScreen) and len(pilot.app.screen.runs) == 2,
                       what="runs listed")
        scr = pilot.app.screen
        diff = scr.query_one("#changes-diff")
        await pilot.press("down")  # the dream run
        await wait_for(pilot, lambda: "A line the dream added." in str(diff.render()), what="diff shown")
        await pilot.press("u")  # the first u asks
        await wait_for(pilot, lambda: scr.confirm_run == scr.runs[1]["run_id"], what="revert question")
        assert "u again reverts" in str(scr.query_one("#changes-box").border_subtitle)
        assert (demo_vault / target).read_text(encoding="utf-8") != before
        reverted_id = scr.runs[1]["run_id"]
        await pilot.press("u")
        await wait_for(pilot, lambda: (demo_vault / target).read_text(encoding="utf-8") == before, what="reverted")
        # the list reloads; the highlight stays on the run just reverted, never slides onto another run
        await wait_for(pilot, lambda: any(r.get("reverted_at") for r in scr.runs), what="list reloaded")
        ol = scr.query_one("#changes-runs")
        assert scr.runs[ol.highlighted]["run_id"] == reverted_id
        # the newer run's note was changed by hand since: nothing restored, said so, the run stays revertible
        (demo_vault / other).write_text((demo_vault / other).read_text(encoding="utf-8") + "mine\n", encoding="utf-8")
        ol.highlighted = [r["run_id"] for r in scr.runs].index(later.run_id)
        await settle(pilot)
        await pilot.press("u")
        await wait_for(pilot, lambda: scr.confirm_run == later.run_id, what="revert question for the memo run")
        await pilot.press("u")
        await wait_for(pilot, lambda: any("Nothing restored" in str(n.message) for n in pilot.app._notifications),
                       what="nothing restored, said so")
        assert (demo_vault / other).read_text(encoding="utf-8").endswith("memo\nmine\n")
        assert not next(r for r in scr.runs if r["run_id"] == later.run_id).get("reverted_at")
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(pilot.app.screen, ChangesScreen)


def test_chat_records_are_named_as_chats_in_link_rows():
    from reme_tui.widgets.neighbours import Hop2, display_name, neighbour_prompt

    sid = "d7f11c3e54524dcda514fd14628b4526"
    assert display_name(f"session/dialog/{sid}.jsonl", sid) == "💬 chat d7f11c3e"
    assert display_name("digest/wiki/a.md", "Alpha") == "Alpha"
    row = neighbour_prompt(Hop2(f"session/dialog/{sid}.jsonl", sid, "", False, "daily/2026-11-28/x.md", "X"), 60)
    assert "💬 chat d7f11c3e" in row.plain and sid not in row.plain


async def test_indexed_time_moves_when_the_watcher_indexes_an_external_edit(app_for, demo_vault):
    """"indexed HH:MM" in the status line: the engine's stamp is the last full sync, which an external edit does
    not run; the real watcher's batch brings the index up to date, so the time shown moves to that minute."""
    app = app_for()
    app.background = True
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        await wait_for(pilot, lambda: app.engine.watcher is not None, what="watcher")
        await wait_for(pilot, lambda: not m.index_running, what="the startup pass")
        with app.engine.store.write():
            app.engine.store.set_meta("last_sync", "2026-01-02T08:00:00+0000")  # a sync long ago
        m.status.load()
        await wait_for(pilot, lambda: "indexed 01-02" in m.status.render_text().plain, what="the old time")
        note = demo_vault / "edited-elsewhere.md"
        note.write_text("# Edited elsewhere\n\nquokkaharbour\n", encoding="utf-8")
        await wait_for(pilot, lambda: app.engine.search("quokkaharbour", mode="keyword").hits, timeout=10,
                       what="the watcher indexed the new note")
        now = _dt.datetime.now().astimezone()
        await wait_for(pilot, lambda: "indexed 01-02" not in m.status.render_text().plain, what="the time moved")
        shown = m.status.render_text().plain
        assert f"indexed {now:%H}:" in shown or f"indexed {(now + _dt.timedelta(minutes=1)):%H}:" in shown
        assert m.status.indexed_at() >= now - _dt.timedelta(minutes=1)
        assert pilot.app._exception is None


async def test_an_answer_that_shows_nothing_yet_says_how_long_it_has_waited(app_for):
    """A slow or silent LLM endpoint: the empty answer's bubble counts the seconds instead of a bare cursor;
    the first words clear it, the end of the answer sets its own status."""
    from reme_tui.widgets.chat import WAITING

    app = app_for()
    async with app.run_test(size=(120, 36)) as pilot:
        m = await started(pilot)
        mid = m.chat.begin_stream("assistant")
        bubble = m.chat.bubbles[mid]
        assert bubble.status == ""
        await wait_for(pilot, lambda: bubble.status.startswith(f"{WAITING} · "), timeout=10, what="waiting shown")
        assert bubble.status.endswith(" s") and int(bubble.status.split("· ")[1].split()[0]) >= 2
        m.chat.append_chunk(mid, "光伏")
        assert bubble.status == "" and bubble.text == "光伏"
        # sentinel: a second empty answer shows its wait, so ticks ran after the first one's words
        other = m.chat.bubbles[m.chat.begin_stream("assistant")]
        await wait_for(pilot, lambda: other.status.startswith(WAITING), timeout=10, what="sentinel")
        assert not bubble.status.startswith(WAITING)
        m.chat.end_stream(mid, "done")
        assert bubble.status == "done" and bubble.waiting_since is None
        assert pilot.app._exception is None
