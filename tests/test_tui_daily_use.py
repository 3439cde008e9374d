"""The TUI for daily use: dialogs that cannot kill the app, the quick switcher, the agenda without a
dead end, the note after ``$EDITOR``, and the paper cuts — pilot tests and 80×24 snapshots on temp copies of the
demo vault (keyword-only engines)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from textual import events

from reme_tui.app import ReMeApp
from reme_tui.screens.main import MainScreen

sys.path.insert(0, str(Path(__file__).parent))
from test_tui import option_texts, settle, wait_for  # noqa: E402

GUANGFU = "digest/wiki/光伏产业链.md"
DEMO_DAY = "2026-11-28"


def main(app: ReMeApp) -> MainScreen:
    assert app.main_screen is not None
    return app.main_screen


async def started(pilot) -> MainScreen:
    m = main(pilot.app)
    await wait_for(pilot, lambda: m.keyword_ready and m.note.path is not None and m.agenda.date is not None,
                   what="startup")
    await settle(pilot)
    return m


async def open_and_wait(pilot, path: str) -> MainScreen:
    m = main(pilot.app)
    m.open_note(path)
    await wait_for(pilot, lambda: m.note.path == path and m.links.path == path, what=f"open {path}")
    await settle(pilot)
    return m


async def press_together(pilot, *keys: str) -> None:
    """Queue ``keys`` at once, as a fast typist does (``pilot.press`` waits for idle between keys, which hides
    races between a dialog's first dismissal and the next key)."""
    driver = pilot.app._driver
    for key in keys:
        ev = events.Key(key, None)
        ev.set_sender(pilot.app)
        driver.send_message(ev)
    await pilot.pause()
    await settle(pilot)


async def app_alive(pilot, m: MainScreen) -> None:
    """The main screen is on top and answers its keys (``/`` opens search, Escape closes it)."""
    from reme_tui.screens.search import SearchScreen

    await wait_for(pilot, lambda: pilot.app.screen is m, what="main screen on top")
    assert m in pilot.app.screen_stack
    await pilot.press("slash")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, SearchScreen), what="search opens")
    await pilot.press("escape")
    await wait_for(pilot, lambda: pilot.app.screen is m, what="search closed")


# -- 1. dialogs that cannot kill the app ------------------------------------------------------------------------


async def test_enter_enter_and_escape_escape_in_every_dialog_keep_the_main_screen(app_for):
    from reme_tui.screens.changes import ChangesScreen
    from reme_tui.screens.dialogs import IndexStatusScreen, LinkPickerScreen, NewNoteScreen
    from reme_tui.screens.help import HelpScreen
    from reme_tui.screens.search import SearchScreen

    app = app_for()
    async with app.run_test(size=(120, 36)) as pilot:
        m = await started(pilot)
        await open_and_wait(pilot, GUANGFU)
        openers = {
            NewNoteScreen: m.action_new_note,
            SearchScreen: m.action_search,
            LinkPickerScreen: m.action_follow_link,
            IndexStatusScreen: m.action_show_status,
            ChangesScreen: m.action_changes,
            HelpScreen: pilot.app.action_help,
        }
        for keys in (("enter", "enter"), ("escape", "escape")):
            for cls, opener in openers.items():
                opener()
                await wait_for(pilot, lambda cls=cls: isinstance(pilot.app.screen, cls), what=cls.__name__)
                await pilot.pause()
                dialog = pilot.app.screen
                await press_together(pilot, *keys)
                if isinstance(pilot.app.screen, cls):  # Enter does nothing in some (empty new-note title)
                    await press_together(pilot, "escape")
                await wait_for(pilot, lambda: pilot.app.screen is m, what="main screen on top")
                # whatever the dialog opened (a link, a hit) is the only thing on top of the main screen
                assert pilot.app.screen_stack[-1] is m, (cls.__name__, keys, pilot.app.screen_stack)
                assert dialog.dismissed
        # two queued submissions reach the dialog before its first dismissal is processed: the second is a no-op
        for cls, opener in openers.items():
            opener()
            await wait_for(pilot, lambda cls=cls: isinstance(pilot.app.screen, cls), what=cls.__name__)
            dialog = pilot.app.screen
            dialog.dismiss(None)
            dialog.dismiss(None)
            await wait_for(pilot, lambda: pilot.app.screen is m, what="main screen on top")
        await app_alive(pilot, m)
        assert pilot.app._exception is None


async def test_new_note_and_search_submitted_twice_act_once(app_for):
    from reme_tui.screens.dialogs import NewNoteScreen
    from reme_tui.screens.search import SearchScreen

    app = app_for()
    async with app.run_test(size=(120, 36)) as pilot:
        m = await started(pilot)
        m.action_new_note()
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, NewNoteScreen), what="new note")
        await pilot.press(*"Idea")
        await press_together(pilot, "enter", "enter")
        await wait_for(pilot, lambda: m.note.path == "Idea.md", what="note created and opened")
        assert (Path(app.engine.vault) / "Idea.md").exists()
        await app_alive(pilot, m)
        # search: Enter before the results are in, twice, opens the top hit once
        m.action_search()
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SearchScreen), what="search")
        await press_together(pilot, *"光伏", "enter", "enter")
        await wait_for(pilot, lambda: m.note.path == GUANGFU, what="hit opened")
        await app_alive(pilot, m)


async def test_main_screen_that_leaves_the_stack_is_pushed_back(app_for):
    app = app_for()
    async with app.run_test(size=(100, 30)) as pilot:
        m = await started(pilot)
        assert pilot.app.pop_screen() is not None and pilot.app.screen is m  # refused: nothing under it
        from textual.screen import Screen

        pilot.app.switch_screen(Screen())  # the main screen leaves the stack anyway
        await wait_for(pilot, lambda: pilot.app.screen is m, what="main screen back")
        assert m.is_attached and m.note.path is not None
        await app_alive(pilot, m)


# -- 2. quick switcher ------------------------------------------------------------------------------------------


def test_switcher_matcher_cjk_aliases_paths_and_recency():
    from reme_engine.engine import NoteTitle
    from reme_tui.switcher import NoteMatcher

    notes = [NoteTitle("digest/wiki/光伏产业链.md", "光伏产业链", ("PV value chain", "光伏"), 3.0),
             NoteTitle("digest/wiki/hybrid-retrieval.md", "Hybrid retrieval", ("混合检索",), 2.0),
             NoteTitle("digest/wiki/新能源.md", "新能源", ("New energy",), 1.0),
             NoteTitle("daily/2026-11-27/光伏周报.md", "光伏周报", (), 0.5)]
    m = NoteMatcher(notes, recent=["digest/wiki/新能源.md"])

    def top(q):
        return [x.note.path for x in m.match(q)]

    assert top("")[0] == "digest/wiki/新能源.md"  # recently opened first
    assert top("光链") == ["digest/wiki/光伏产业链.md"]  # ordered characters of a Chinese title
    assert top("产业")[0] == "digest/wiki/光伏产业链.md"  # substring
    assert set(top("光伏")) == {"digest/wiki/光伏产业链.md", "daily/2026-11-27/光伏周报.md"}
    assert top("hyret") == ["digest/wiki/hybrid-retrieval.md"]
    assert top("检索") == ["digest/wiki/hybrid-retrieval.md"] and m.match("检索")[0].field == "alias"
    assert top("ＰＶ value")[0] == "digest/wiki/光伏产业链.md"  # full-width folded, terms anywhere
    assert top("daily 周报") == ["daily/2026-11-27/光伏周报.md"]  # a path term and a title term
    assert top("zzz") == []
    assert m.exact("新能源") and m.exact("new energy") and not m.exact("新能")


async def test_ctrl_o_opens_a_note_by_name_and_offers_to_create_a_missing_one(app_for):
    from reme_tui.screens.switcher import LIMIT, QuickSwitcherScreen

    app = app_for()
    async with app.run_test(size=(100, 30)) as pilot:
        m = await started(pilot)
        # the note list was read in a worker once the index opened: the first Ctrl+O does not wait for it
        assert m.note_index is not None and len(m.note_index) == len(app.engine.note_titles()) > 20
        await open_and_wait(pilot, "digest/wiki/新能源.md")
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, QuickSwitcherScreen), what="switcher")
        s = pilot.app.screen
        await wait_for(pilot, lambda: s.matcher is not None and s.list.option_count > 0, what="note list")
        assert s.matches[0].note.path == "digest/wiki/新能源.md"  # the recent note first
        assert len(s.matcher) == len(app.engine.note_titles()) > 20
        await pilot.press(*"光链")
        await wait_for(pilot, lambda: s.input.value == "光链", what="typed")
        assert s.matches[0].note.path == GUANGFU
        assert option_texts(s.list)[-1].startswith("+ Create 光链.md")  # no note is called that
        await pilot.press("enter")
        await wait_for(pilot, lambda: m.note.path == GUANGFU, what="opened")
        assert pilot.app.screen is m
        # the same dialog comes back (kept mounted: no rebuild), emptied, with the note just opened first
        first = s
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, QuickSwitcherScreen), what="switcher")
        s = pilot.app.screen
        assert s is first and s.input.value == "" and not s.dismissed
        await wait_for(pilot, lambda: s.matches and s.matches[0].note.path == GUANGFU, what="recent first again")
        assert s.list.option_count <= LIMIT
        # an alias finds its note; a missing name is created at the vault root and opened
        await pilot.press(*"混合检索")
        await wait_for(pilot, lambda: s.matcher is not None and s.input.value == "混合检索" and s.matches,
                       what="alias match")
        assert s.matches[0].note.path == "digest/wiki/hybrid-retrieval.md" and s.create_path is None
        s.input.value = "全新的想法"
        await wait_for(pilot, lambda: s.create_path == "全新的想法.md" and not s.matches, what="create row")
        assert "no note matches" in str(s.info.render())
        await pilot.press("enter")
        await wait_for(pilot, lambda: m.note.path == "全新的想法.md", what="created")
        # just the file with that name and its heading: no frontmatter the user did not ask for
        assert (Path(app.engine.vault) / "全新的想法.md").read_text(encoding="utf-8") == "# 全新的想法\n\n"
        # the new note is in the next opening's list (read again after the vault changed)
        await wait_for(pilot, lambda: m.note_index is not None and "全新的想法.md" in m.note_index.by_path,
                       what="note list read again")


async def test_switcher_enter_enter_and_escape_escape_keep_the_main_screen(app_for):
    """Escape twice at once, and Enter twice at once (before the list is in), close the switcher once and never
    pop the main screen; the first Ctrl+O after startup finds the note list already read."""
    from reme_tui.screens.switcher import QuickSwitcherScreen

    app = app_for()
    async with app.run_test(size=(100, 30)) as pilot:
        m = await started(pilot)
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, QuickSwitcherScreen), what="switcher")
        s = pilot.app.screen
        assert s.cached_index is m.note_index is not None  # no read at the first opening
        await press_together(pilot, "escape", "escape")
        await wait_for(pilot, lambda: pilot.app.screen is m, what="closed")
        assert pilot.app.screen_stack[-1] is m and s.dismissed
        m.note_index = None  # the vault changed: this opening reads the list itself
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, QuickSwitcherScreen), what="switcher again")
        await press_together(pilot, *"光伏产业", "enter", "enter")
        await wait_for(pilot, lambda: m.note.path == GUANGFU and pilot.app.screen is m, what="opened once")
        assert pilot.app.screen_stack[-1] is m
        await app_alive(pilot, m)
        assert pilot.app._exception is None





def send_at_once(pilot, keys) -> None:
    """A fast typist on a busy machine: every ``(key, character)`` of ``keys`` queued on the driver at once, before
    the app has handled the first."""
    driver = pilot.app._driver
    for key, ch in keys:
        ev = events.Key(key, ch)
        ev.set_sender(pilot.app)
        driver.send_message(ev)


async def test_keys_typed_right_after_ctrl_o_go_into_the_switcher(app_for):
    """A fast typist on a busy machine: Ctrl+O and the next keys arrive before the switcher is up. Every key after
    Ctrl+O reaches the switcher's input, none acts on the main screen (R would re-index, a the agenda), and an
    Enter among them opens the note the typed name finds, not the first recent one."""
    from reme_tui.screens.switcher import QuickSwitcherScreen

    app = app_for()
    async with app.run_test(size=(100, 30)) as pilot:
        m = await started(pilot)
        acted: list[str] = []
        m.action_reindex = lambda: acted.append("reindex")
        m.action_agenda = lambda: acted.append("agenda")

        async def type_at_once(*keys: tuple[str, str | None]) -> None:
            send_at_once(pilot, keys)
            await pilot.pause()
            await settle(pilot)

        await type_at_once(("ctrl+o", None), ("R", "R"), ("a", "a"), ("g", "g"))
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, QuickSwitcherScreen), what="switcher")
        s = pilot.app.screen
        await wait_for(pilot, lambda: s.input.value == "Rag", what="typed ahead")
        assert acted == []
        await pilot.press("escape")
        await wait_for(pilot, lambda: pilot.app.screen is m, what="closed")
        await type_at_once(("ctrl+o", None), *((c, c) for c in "光伏产业"), ("enter", None))
        await wait_for(pilot, lambda: m.note.path == GUANGFU and pilot.app.screen is m, what="opened the named note")
        assert acted == [] and pilot.app._exception is None
        await pilot.press("R")  # held keys are released: the main screen's keys work again
        await wait_for(pilot, lambda: acted == ["reindex"], what="R after the switcher")


async def test_keys_typed_right_after_slash_go_into_search(app_for):
    """The same for `/`: a burst `/` + a query reaches the search input whole, none of it acts on the main screen."""
    from reme_tui.screens.search import SearchScreen

    app = app_for()
    async with app.run_test(size=(100, 30)) as pilot:
        m = await started(pilot)
        acted: list[str] = []
        m.action_reindex = lambda: acted.append("reindex")
        send_at_once(pilot, (("slash", "/"), *((c, c) for c in "Rag光伏")))
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SearchScreen), what="search")
        s = pilot.app.screen
        await wait_for(pilot, lambda: s.input.value == "Rag光伏", what="typed ahead")
        assert acted == []
        await pilot.press("escape")
        await wait_for(pilot, lambda: pilot.app.screen is m, what="closed")
        await pilot.press("R")
        await wait_for(pilot, lambda: acted == ["reindex"], what="R after search")


async def test_palette_finds_notes_by_title(app_for):
    from textual.command import CommandPalette

    app = app_for()
    async with app.run_test(size=(100, 30)) as pilot:
        m = await started(pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, CommandPalette), what="palette")
        palette = pilot.app.screen
        await pilot.press(*"光伏产业")
        from textual.command import CommandList

        hits = palette.query_one(CommandList)
        await wait_for(pilot, lambda: any(GUANGFU in t for t in option_texts(hits)), what="note hit")
        idx = next(i for i, t in enumerate(option_texts(hits)) if GUANGFU in t)
        hits.highlighted = idx
        await pilot.press("enter")
        await wait_for(pilot, lambda: m.note.path == GUANGFU and pilot.app.screen is m, what="opened from palette")


# -- 3. the agenda on a day without a refresh -------------------------------------------------------------------


async def test_fresh_day_shows_carried_topics_and_r_re_evaluates_them(app_for, demo_vault):
    """A refresh on the demo's last day leaves open topics in the truth source; two days later (no daily note
    since) the agenda lists them as carried forward, and ``r`` writes that day's file from them — never the
    "no daily notes changed" dead end."""
    app = app_for(today="2026-11-30")
    app.engine.proactive_refresh(DEMO_DAY)  # keyword fallback: the truth source now holds open topics
    assert (demo_vault / "daily" / "_proactive.yaml").exists()
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        await wait_for(pilot, lambda: m.agenda.carried is not None, what="carried topics")
        assert m.agenda.result.skipped
        rows = option_texts(m.agenda.list)
        assert rows[0] == "No proactive refresh yet today."
        assert "Press r to refresh (re-evaluates the open topics)." in rows
        n = len(m.agenda.carried.topics)
        assert f"Carried forward ({n})" in rows and "carried" in str(m.agenda.border_subtitle)
        await pilot.press("r")
        await wait_for(pilot, lambda: not m.refresh_running, timeout=60, what="refresh")
        await wait_for(pilot, lambda: m.agenda.result is not None and not m.agenda.result.skipped, what="agenda")
        assert (demo_vault / "daily" / "2026-11-30" / "interests.yaml").exists()
        assert m.agenda.result.topics
        assert any("carried forward" in n.message for n in pilot.app._notifications)
        assert not any("No daily notes changed" in n.message for n in pilot.app._notifications)


# -- 4. the note after $EDITOR ----------------------------------------------------------------------------------


async def test_note_shows_the_edited_text_once_saved_and_indexed(app_for, demo_vault, tmp_path, monkeypatch):
    """The editor's text goes back through the engine's checked write, which indexes the note: the status line
    says so while it runs, and the new text is shown (and found) when it returns."""
    import stat
    import threading

    editor = tmp_path / "fake-editor.sh"
    editor.write_text("#!/bin/sh\nprintf '\\n## 编辑过\\n\\n独角兽词 zebracorn\\n' >> \"$1\"\n", encoding="utf-8")
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.delenv("VISUAL", raising=False)
    app = app_for()
    release = threading.Event()
    real = app.engine.index_paths

    def slow_index_paths(paths, **kw):  # the save's index is held until the test has seen the status
        release.wait(30)
        return real(paths, **kw)

    async with app.run_test(size=(120, 36)) as pilot:
        m = await started(pilot)
        await open_and_wait(pilot, GUANGFU)
        monkeypatch.setattr(app.engine, "index_paths", slow_index_paths)
        await pilot.press("e")
        try:
            await wait_for(pilot, lambda: "saving" in m.status.work, what="saving status")
        finally:
            release.set()
        await wait_for(pilot, lambda: "zebracorn" in m.note.markdown.source, what="new text")
        await wait_for(pilot, lambda: m.status.work == "", what="save done")
        assert [h.path for h in app.engine.search("zebracorn", mode="keyword", neighbors=False).hits] == [GUANGFU]


# -- 5. paper cuts ----------------------------------------------------------------------------------------------


async def test_three_quick_arrows_in_the_agenda_move_three_days(app_for):
    app = app_for(today=DEMO_DAY)
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        assert m.agenda.date == DEMO_DAY
        m.agenda.focus_list()
        await pilot.pause()
        await press_together(pilot, "left", "left", "left")
        await wait_for(pilot, lambda: m.agenda.date == "2026-11-25", what="three days back")
        await press_together(pilot, "right", "right")
        await wait_for(pilot, lambda: m.agenda.date == "2026-11-27", what="two days forward")
        assert m.agenda.pending is None


# -- snapshots at 80×24 -----------------------------------------------------------------------------------------


def _snap(app_for, monkeypatch, *, today: str = DEMO_DAY, then=None):
    """(app, run_before): the demo on ``today`` with 光伏产业链 open, the status clock pinned, then ``then(pilot,
    m)`` puts the screen in the state to picture; notifications are cleared before the shot."""
    from reme_tui.widgets import status_line

    monkeypatch.setattr(status_line, "_short_time", lambda stamp: "09:00" if stamp else "")
    app = app_for(today=today)

    async def run_before(pilot) -> None:
        m = await started(pilot)
        await open_and_wait(pilot, GUANGFU)
        if then is not None:
            await then(pilot, m)
        await settle(pilot)
        pilot.app.clear_notifications()
        # the cursor shown, not caught in its blink (the shot would depend on how long the settling took)
        from textual.widgets import Input

        for screen in pilot.app.screen_stack:
            for field in screen.query(Input):
                field.cursor_blink = False
        await pilot.pause()

    return app, run_before


def test_snapshot_quick_switcher_80x24(app_for, snap_compare, monkeypatch):
    """The quick switcher over the main screen: "光伏" typed; 光伏产业链 first with its matched characters
    underlined and its path dimmed, the other notes naming 光伏 below, the count line, and the box's key hints."""
    from reme_tui.screens.switcher import QuickSwitcherScreen

    async def then(pilot, m):
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, QuickSwitcherScreen)
                       and pilot.app.screen.matcher is not None, what="switcher")
        await pilot.press(*"光伏")
        await wait_for(pilot, lambda: pilot.app.screen.input.value == "光伏", what="typed")

    app, run_before = _snap(app_for, monkeypatch, then=then)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_snapshot_help_80x24(app_for, snap_compare, monkeypatch):
    """Help at 80×24: two columns (key, what it does) whose descriptions wrap as sentences, not a word per
    line; no binding-id column at this width."""

    async def then(pilot, m):
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == "HelpScreen", what="help")

    app, run_before = _snap(app_for, monkeypatch, then=then)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_snapshot_changes_empty_80x24(app_for, snap_compare, monkeypatch):
    """The Changes view of a vault no pipeline has touched: "No runs yet." on the left and the sentence saying
    what will appear there (and that u reverts) on the right."""

    async def then(pilot, m):
        m.action_changes()
        await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == "ChangesScreen"
                       and pilot.app.screen.runs_list.option_count and "No runs" in option_texts(
                           pilot.app.screen.runs_list)[0], what="empty changes")

    app, run_before = _snap(app_for, monkeypatch, then=then)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_snapshot_changes_with_a_run_asking_to_revert_80x24(app_for, snap_compare, monkeypatch, demo_vault):
    """The Changes view with one auto_dream run highlighted: its diff on the right (the added line in green),
    and after one u the box's subtitle asks "Revert this run? u again reverts it · Esc cancels"."""

    app, run_before = _snap(app_for, monkeypatch)
    eng = app.engine
    run = eng.journal.start_run(eng.vault, "auto_dream", {"date": DEMO_DAY})
    target = "digest/wiki/新能源.md"
    text, sha = run.read(target)
    run.write(target, text + "\nA line the dream added.\n", step="integrate", expected_sha=sha)
    run.finish("ok", {"updated": 1})
    from reme_tui.screens import changes

    monkeypatch.setattr(changes.time, "localtime", lambda _t=None: changes.time.gmtime(1764320400))  # pinned

    async def then(pilot, m):
        m.action_changes()
        await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == "ChangesScreen" and pilot.app.screen.runs,
                       what="runs")
        s = pilot.app.screen
        await wait_for(pilot, lambda: "A line the dream added." in str(s.diff_view.render()), what="diff")
        await pilot.press("u")
        await wait_for(pilot, lambda: s.confirm_run is not None, what="question")

    inner = run_before

    async def before(pilot):
        await inner(pilot)
        await then(pilot, main(pilot.app))
        pilot.app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_snapshot_link_picker_80x24(app_for, snap_compare, monkeypatch):
    """The link picker of 光伏产业链 with "光" typed in its filter: only the links naming 光 listed (光伏产业链入门
    …), the filter line on top."""
    from reme_tui.screens.dialogs import LinkPickerScreen

    async def then(pilot, m):
        m.action_follow_link()
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, LinkPickerScreen), what="picker")
        await pilot.press("光")
        await wait_for(pilot, lambda: pilot.app.screen.filter.value == "光", what="filtered")

    app, run_before = _snap(app_for, monkeypatch, then=then)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_snapshot_agenda_filled_80x24(app_for, snap_compare, monkeypatch):
    """The Agenda pane of the demo's last day (2026-11-28) beside the note: "Agenda · today", the agenda
    items numbered with their opener and next action, then the topics."""

    async def then(pilot, m):
        await pilot.press("a")
        await wait_for(pilot, lambda: m.agenda.display and m.agenda.date == DEMO_DAY, what="agenda")

    app, run_before = _snap(app_for, monkeypatch, then=then)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


@pytest.mark.cold_index  # its proactive refresh runs before the app, on the state it starts with
def test_snapshot_agenda_carried_forward_80x24(app_for, snap_compare, monkeypatch):
    """A fresh day (2026-11-30) after a refresh on 11-28: "No proactive refresh yet today.", the next-refresh
    line, "Press r to refresh (re-evaluates the open topics).", then "Carried forward (N)" and the topics."""

    app, run_before = _snap(app_for, monkeypatch, today="2026-11-30")
    app.engine.proactive_refresh(DEMO_DAY)
    app.settings.proactive_refresh_cron = ""

    async def before(pilot):
        await run_before(pilot)
        m = main(pilot.app)
        await pilot.press("a")
        await wait_for(pilot, lambda: m.agenda.display and m.agenda.carried is not None, what="carried")
        await settle(pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


async def test_link_picker_filters_as_you_type_and_help_fits_80_columns(app_for):
    from reme_tui.screens.dialogs import LinkPickerScreen
    from reme_tui.screens.help import HelpScreen

    app = app_for()
    async with app.run_test(size=(80, 24)) as pilot:
        m = await started(pilot)
        await open_and_wait(pilot, GUANGFU)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, LinkPickerScreen), what="picker")
        p = pilot.app.screen
        every = option_texts(p.options)
        await pilot.press(*"钙钛")
        await wait_for(pilot, lambda: p.filter.value == "钙钛", what="typed")
        rows = option_texts(p.options)
        assert len(rows) < len(every) and all("钙钛" in r for r in rows)
        await pilot.press("enter")  # follows the (only) match: a dangling link offers to create the note
        await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == "NewNoteScreen", what="create offer")
        await pilot.press("escape")
        await wait_for(pilot, lambda: pilot.app.screen is m, what="back on the main screen")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, HelpScreen), what="help")
        table = pilot.app.screen.table(80)
        assert len(table.columns) == 2  # the binding ids give way at 80 columns
        assert len(pilot.app.screen.table(120).columns) == 3


# -- the note pane says who owns what (ARCHITECTURE §8 "Ownership"), callouts and footnotes ---------------------------

RUNNING = "digest/personal/晨跑计划.md"


def running_note() -> str:
    """A note the user wrote, with a callout, a footnote and a block reme proposed (its real marker hash)."""
    from reme_engine.vault.provenance import render_block

    block = render_block("- half marathon in April: see [[half-marathon-training]]\n- a taper week before it")
    return ("---\nname: 晨跑计划\ndescription: my own plan for the spring\n---\n# 晨跑计划\n\n"
            "I run three mornings a week[^1], slow.\n\n> [!warning] Knee\n> Long runs under 15 km.\n\n"
            f"{block}\nMy own line after the block.\n\n[^1]: Monday, Wednesday, Saturday.\n")


async def test_note_pane_says_who_owns_what_and_marks_reme_lines(app_for, demo_vault):
    from reme_engine.vault.provenance import stamp
    from reme_tui.widgets.note_view import ReMeMarker

    (demo_vault / RUNNING).write_text(running_note(), encoding="utf-8")
    (demo_vault / "digest/wiki/by-reme.md").write_text(stamp("---\nname: by reme\n---\nA node reme wrote.\n"),
                                                      encoding="utf-8")
    (demo_vault / "digest/wiki/broken.md").write_text("---\nname: [unclosed\n---\nBody.\n", encoding="utf-8")
    app = app_for()
    async with app.run_test(size=(120, 40)) as pilot:
        m = await started(pilot)
        await open_and_wait(pilot, RUNNING)
        note = m.note
        assert note.border_title == f"{RUNNING} · yours"
        owner = str(note.owner_line.render())
        assert note.owner_line.display and owner.startswith("✎ yours: reme maintains 1 section here (marked ▎)")
        assert "written by you; 1 block" in note.owner_line.tooltip  # the engine's reason, whole
        # the block's lines (markers included) carry the gutter class; the user's lines do not
        marked = [b for b in note.markdown.children if b.has_class("-app")]
        assert [type(b).__name__ for b in marked] == ["ReMeMarker", "MarkdownBulletList", "ReMeMarker"]
        assert "reme proposes" in str(marked[0].render()) and "end of reme's block" in str(marked[-1].render())
        mine = [b for b in note.markdown.children if not b.has_class("-app")]
        assert any("My own line after the block." in str(b.render()) for b in mine)
        # the callout shows its icon and title in the warning style, the footnote as ¹ followed to its line
        callout = next(b for b in note.markdown.children if b.has_class("callout"))
        assert callout.has_class("-callout-warning") and "⚠ Knee" in str(callout.query("*").first().render())
        assert "[^1]" not in note.markdown.source and "¹" in note.markdown.source
        def_line = running_note().split("\n").index("[^1]: Monday, Wednesday, Saturday.") + 1
        assert note.doc.footnotes == {"1": def_line}
        assert note.follow_footnote("1")
        assert any(b.has_class("hit-block") and "Monday" in str(b.render()) for b in note.markdown.children)

        # the user edits inside the block: it is theirs now, no longer marked
        text = (demo_vault / RUNNING).read_text(encoding="utf-8").replace("a taper week", "two taper weeks")
        (demo_vault / RUNNING).write_text(text, encoding="utf-8")
        m.open_note(RUNNING, history=False)
        await wait_for(pilot, lambda: any("reme block you edited: yours now" in str(b.render())
                                          for b in note.markdown.query(ReMeMarker)), what="edited block shown")
        assert "you edited 1 reme section" in str(note.owner_line.render())
        assert not any(b.has_class("-app") for b in note.markdown.children)

        await open_and_wait(pilot, "digest/wiki/by-reme.md")
        assert note.border_title.endswith("· reme's") and "reme's: written by reme" in str(
            note.owner_line.render())
        assert all(b.has_class("-app") for b in note.markdown.children)

        await open_and_wait(pilot, "digest/wiki/broken.md")
        assert "⚠" in str(note.meta.render()) and not note.owner_line.display

        await open_and_wait(pilot, GUANGFU)  # a note the user wrote, nothing of reme's in it: the title says so
        assert note.border_title.endswith("· yours") and not note.owner_line.display


def test_snapshot_user_note_with_a_reme_block_80x24(app_for, snap_compare, monkeypatch, demo_vault):
    """A note the user wrote (晨跑计划) with a block reme proposed: the title ends "· yours", the header line says
    "✎ yours: reme maintains 1 section here (marked ▎)", the block's two marker lines read "┄ reme proposes …"
    and "┄ end of reme's block", and the block's lines (markers and its two bullets) have a dim left gutter
    that the user's own lines (the heading, the paragraph with ¹, the ⚠ Knee callout, "My own line") lack."""
    (demo_vault / RUNNING).write_text(running_note(), encoding="utf-8")

    async def then(pilot, m):
        await open_and_wait(pilot, RUNNING)
        m.show_left = m.show_right = False  # as F2/F3 do: at 80 columns a side column leaves the note little room
        m._apply_layout()
        await wait_for(pilot, lambda: not m.query_one("#left").display and not m.query_one("#right").display,
                       what="side columns collapsed")

    app, run_before = _snap(app_for, monkeypatch, then=then)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


# -- the theme picked is kept -------------------------------------------------------------------------------------


async def test_theme_picked_is_kept_in_the_config_file(app_for, tmp_path):
    config = tmp_path / "config.yaml"
    mine = "# my settings\nvault: ~/Notes   # where I write\ntheme: textual-dark  # dark for now\nkeymap:\n  search: ctrl+f\n"
    config.write_text(mine, encoding="utf-8")
    app = app_for()
    app.settings.config_path = config
    app.persist_settings = True  # as the real app (tests otherwise never touch a config file)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot)
        pilot.app.theme = "nord"  # what the palette's theme picker does
        await wait_for(pilot, lambda: "theme: nord" in config.read_text(encoding="utf-8"), what="theme saved")
        assert config.read_text(encoding="utf-8") == mine.replace("theme: textual-dark", "theme: nord")
        await wait_for(pilot, lambda: any("kept in" in n.message for n in pilot.app._notifications),
                       what="said so")
    from reme_engine.config import load_settings

    assert load_settings({"config": str(config)}, env={}).theme == "nord"
    # a config file without the key gets one line appended; the next start uses it
    bare = tmp_path / "bare.yaml"
    bare.write_text("vault: ~/Notes", encoding="utf-8")
    from reme_tui.config_file import save_setting

    save_setting(bare, "theme", "gruvbox")
    assert bare.read_text(encoding="utf-8") == "vault: ~/Notes\ntheme: gruvbox\n"
    app2 = app_for(theme="gruvbox")
    async with app2.run_test(size=(100, 30)) as pilot:
        await started(pilot)
        assert pilot.app.theme == "gruvbox"


# -- chat citations open the cited lines ----------------------------------------------------------------------------

CITED = "digest/wiki/光伏产业链.md#L10-L12"


def _chat_script():
    from wire.server import openai_chat, openai_stream

    card = {"name": "光伏跟踪", "description": "The user asked about the PV chain", "slug": "pv-chain",
            "timeline": ["Asked about the PV chain"], "current_state": "Asked", "notes": []}
    return [openai_stream(["The chain has five stages ", f"[[{CITED}]]"]),
            openai_chat(json.dumps(card, ensure_ascii=False))]


async def _ask(pilot, m, srv) -> object:
    await pilot.press("c", *"光伏产业链", "enter")
    await wait_for(pilot, lambda: any(b.role == "assistant" and b.citations and not b.streaming
                                      for b in m.chat.bubbles.values()), what="answer", timeout=30)
    await wait_for(pilot, lambda: len(srv.requests) >= 2, what="auto-memory call", timeout=30)
    await settle(pilot)
    return [b for b in m.chat.bubbles.values() if b.role == "assistant"][-1]  # this answer, not a restored one


async def test_chat_citations_open_the_cited_lines(app_for):
    from rich.cells import cell_len
    from wire.server import ScriptedServer

    from reme_tui.screens.dialogs import LinkPickerScreen

    with ScriptedServer(_chat_script()) as srv:
        app = app_for(llm={"provider": "openai", "model": "m", "base_url": srv.base_url, "api_key": "k",
                           "max_retries": 0})
        async with app.run_test(size=(160, 48)) as pilot:
            m = await started(pilot)
            await open_and_wait(pilot, "digest/wiki/新能源.md")
            bubble = await _ask(pilot, m, srv)
            assert bubble.citations == [(f"[[{CITED}]]", "digest/wiki/光伏产业链.md", "L10-L12")]
            # a click on the citation opens the note at the cited lines
            x = cell_len("reme The chain has five stages ") + 3
            await pilot.click(bubble, offset=(x, 0))
            await wait_for(pilot, lambda: m.note.path == GUANGFU, what="cited note opened")
            await wait_for(pilot, lambda: any(n.message.endswith("L10–L12") for n in pilot.app._notifications),
                           what="at the cited lines")
            assert any(b.has_class("hit-block") for b in m.note.markdown.children)
            # the keyboard way: f in the transcript lists the answer's citations
            await open_and_wait(pilot, "digest/wiki/新能源.md")
            m.chat.log_view.focus()
            await pilot.press("f")
            await wait_for(pilot, lambda: isinstance(pilot.app.screen, LinkPickerScreen), what="citations")
            assert pilot.app.screen.title_text == "Citations of the answer"
            await pilot.press("enter")
            await wait_for(pilot, lambda: m.note.path == GUANGFU, what="opened by keyboard")


def test_snapshot_chat_with_an_answer_80x24(app_for, snap_compare, monkeypatch):
    """The chat pane at 80×24 after one question (光伏产业链) answered through the scripted LLM server: "you
    光伏产业链 saved", then "reme The chain has five stages [[digest/wiki/光伏产业链.md#L10-L12]]" with the
    citation underlined (clickable) and the status "… note(s) retrieved · remembered"; the note above."""
    from wire.server import ScriptedServer

    from reme_tui.widgets import status_line

    monkeypatch.setattr(status_line, "_short_time", lambda stamp: "09:00" if stamp else "")
    with ScriptedServer(_chat_script()) as srv:
        app = app_for(today=DEMO_DAY, llm={"provider": "openai", "model": "m", "base_url": srv.base_url,
                                           "api_key": "k", "max_retries": 0})

        async def run_before(pilot) -> None:
            m = await started(pilot)
            await open_and_wait(pilot, GUANGFU)
            m.show_left = m.show_right = False  # the note and the chat only: 80 columns are few
            m._apply_layout()
            await wait_for(pilot, lambda: m.chat.restored is not None, what="earlier chat restored")
            await _ask(pilot, m, srv)
            m.chat.log_view.focus()
            await settle(pilot)
            m.chat.log_view.scroll_end(animate=False)  # the end of the transcript, whatever arrived last
            await settle(pilot)
            pilot.app.clear_notifications()
            await pilot.pause()

        assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_snapshot_search_with_hits_80x24(app_for, snap_compare, monkeypatch):
    """Search at 80×24 with "光伏" typed (hybrid, no embedder: keyword search): "N hits · 2 ms · hybrid", the hits
    listed with 光伏产业链 first, each hit its path and lines, a snippet with the query in it and the dim "why"
    line (kw rank, vec —, fused score); the filter row (layer, dates) and the key hints. (Ranking changes move
    the rows: regenerate with --snapshot-update after checking them.)"""
    from reme_tui.screens.search import SearchScreen

    async def then(pilot, m):
        await pilot.press("slash")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SearchScreen), what="search")
        s = pilot.app.screen
        await pilot.press(*"光伏")
        await wait_for(pilot, lambda: s.result is not None and s.result.query == "光伏" and s.result.hits,
                       what="hits")

    app, run_before = _snap(app_for, monkeypatch, then=then)
    search = app.engine.search

    def pinned(*a, **kw):  # the measured time would change the picture on every run
        res = search(*a, **kw)
        res.took_ms = 2.0
        return res

    monkeypatch.setattr(app.engine, "search", pinned)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
