"""Key press to paint (issue 12): the keys of the first-run benchmark's cycle never run an engine call on the UI
thread, ``t`` does not re-read what did not change, a burst of cursor moves loads one preview — pilot tests on temp
copies of the demo vault (keyword-only engines)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_tui import settle, wait_for  # noqa: E402


class ThreadRecorder:
    """Wraps an Engine: every method call is recorded as ``(name, thread name, on the main thread)``."""

    def __init__(self, engine) -> None:
        self._engine = engine
        self.calls: list[tuple[str, str, bool]] = []

    def __getattr__(self, name):
        value = getattr(self._engine, name)
        if not callable(value) or name.startswith("_") or isinstance(value, type):
            return value

        def call(*a, **kw):
            t = threading.current_thread()
            self.calls.append((name, t.name, t is threading.main_thread()))
            return value(*a, **kw)

        return call

    def on_main(self) -> list[str]:
        return [name for name, _t, main in self.calls if main]


def recorded_app(app_for, **kw):
    app = app_for(**kw)
    rec = ThreadRecorder(app.engine)
    app.engine = rec
    return app, rec


async def started(pilot):
    m = pilot.app.main_screen
    await wait_for(pilot, lambda: m.keyword_ready and m.note.path is not None and m.note_index is not None,
                   what="startup")
    await settle(pilot)
    return m


async def test_the_benchmark_key_cycle_runs_no_engine_call_on_the_ui_thread(app_for):
    from reme_tui.screens.search import SearchScreen
    from reme_tui.screens.switcher import QuickSwitcherScreen

    app, rec = recorded_app(app_for, today="2026-11-28")
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        rec.calls.clear()
        # `/`, a query, Escape
        await pilot.press("slash")
        await wait_for(pilot, lambda: isinstance(app.screen, SearchScreen), what="search")
        await pilot.press(*"光伏")
        await wait_for(pilot, lambda: app.screen.result is not None, what="results")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is m, what="search closed")
        # Ctrl+O, a name, Down, Up, Enter
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, QuickSwitcherScreen), what="switcher")
        await pilot.press(*"光伏", "down", "up", "enter")
        await wait_for(pilot, lambda: app.screen is m and m.note.path == "digest/wiki/光伏产业链.md"
                       and m.links.path == m.note.path, what="note opened")
        # t (today), Down/Up in the dates
        await pilot.press("t")
        await wait_for(pilot, lambda: m.note.path == "daily/2026-11-28.md", what="today")
        await pilot.press("down", "up")
        await settle(pilot)
        assert rec.calls, "the keys made no engine call at all: the recorder is not in the path"
        assert rec.on_main() == []


async def test_stat_of_a_missing_note_builds_no_suggestions(open_engine, monkeypatch):
    """``t`` on a vault without today's page asked ``stat`` three times; each miss built a "did you mean" text over
    every note (~250 ms on 3,000 notes) that stat then dropped."""
    from reme_engine.vault import files

    eng = open_engine()
    (Path(eng.vault) / "notes").mkdir()
    (Path(eng.vault) / "notes" / "Redis.md").write_text("# Redis\n", encoding="utf-8")
    eng.index()

    def boom(*a, **kw):
        raise AssertionError("stat built a suggestion")

    monkeypatch.setattr(files, "missing_note", boom)
    assert eng.stat("daily/2026-11-28.md").exists is False
    st = eng.stat("notes/Redis")  # `.md` left out still finds the note
    assert st.exists and st.path == "notes/Redis.md"


def test_full_collections_wait_for_the_user_to_pause():
    """No full collection while keys come; one when they stop (only new objects walked: the rest is frozen);
    a deep one after a long pause; one anyway when the user never pauses; stop() gives the interpreter its own
    settings back."""
    import gc

    from reme_tui.gc_idle import NEVER, IdleCollector

    saved = gc.get_threshold()
    now = [1000.0]
    c = IdleCollector(clock=lambda: now[0])
    c.min_young = 0
    try:
        c.start()
        assert gc.get_threshold()[2] == NEVER  # the interpreter never starts a full collection itself
        for _ in range(5):  # typing: a key every 0.3 s
            now[0] += 0.3
            c.input_seen()
            assert c.tick() is None
        now[0] += c.idle_s
        assert c.tick() == "idle"
        assert gc.get_freeze_count() > 0  # the survivors are left out of the next collections
        now[0] += c.deep_every_s
        c.input_seen()
        now[0] += c.deep_idle_s
        assert c.tick() == "deep"
        for _ in range(int(c.force_after_s / 0.3) + 1):  # never pausing: one collection in force_after_s
            now[0] += 0.3
            c.input_seen()
            c.tick()
        assert [k for k, _ms in c.collections] == ["idle", "deep", "forced"]
    finally:
        c.stop()
    assert gc.get_threshold() == saved and gc.get_freeze_count() == 0


async def test_the_app_collects_when_idle_and_restores_the_collector_when_it_exits(app_for):
    import gc

    from reme_tui.gc_idle import IdleCollector

    saved = gc.get_threshold()
    app = app_for()
    app.idle_gc = IdleCollector()
    app.idle_gc.min_young = 0
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot)
        assert gc.get_threshold()[2] != saved[2]
        await pilot.press("down")
        app.idle_gc.last_input -= app.idle_gc.idle_s  # as if the user paused since
        await wait_for(pilot, lambda: app.idle_gc.collections, what="an idle collection")
    assert gc.get_threshold() == saved and gc.get_freeze_count() == 0


async def test_focus_moves_keep_the_footer_and_a_keymap_change_rebuilds_it(app_for):
    """A focus move (``t``, Escape, Tab between panes) used to rebuild the whole footer (a widget per key,
    restyled, the screen laid out again) though it shows the same keys; a change of what it shows still does."""
    from textual.widgets._footer import FooterKey

    app = app_for(today="2026-11-28")
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        keys_before = list(m.footer.query(FooterKey))
        assert any(k.key == "slash" for k in keys_before)
        for key in ("t", "escape", "ctrl+l", "d", "escape"):
            await pilot.press(key)
            await settle(pilot)
        assert list(m.footer.query(FooterKey)) == keys_before  # the same widgets: no rebuild
        app.set_keymap({"search": "ctrl+s"})
        await wait_for(pilot, lambda: any(k.key == "ctrl+s" for k in m.footer.query(FooterKey)),
                       what="the footer shows the new key")
        assert not any(k.key == "slash" for k in m.footer.query(FooterKey))


async def test_search_reopens_as_new_and_does_not_search_while_closed(app_for):
    """``/`` reuses one search screen (composing ~25 widgets was most of its time to paint): a reopened search
    shows nothing of the last one (text, results, mode, filters), and a vault change while it is closed runs no
    search."""
    from reme_tui.context import VaultChange
    from reme_tui.screens.search import SearchScreen

    app, rec = recorded_app(app_for, today="2026-11-28")
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        await pilot.press("slash")
        await wait_for(pilot, lambda: isinstance(app.screen, SearchScreen), what="search")
        first = app.screen
        await pilot.press(*"光伏")
        await wait_for(pilot, lambda: first.result is not None and first.result.hits, what="results")
        await pilot.press("ctrl+t")  # keyword mode
        first.date_from.value = "2026-11-01"
        await settle(pilot)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is m, what="closed")
        rec.calls.clear()
        m.publish_change(VaultChange(["digest/wiki/光伏产业链.md"], None))
        await settle(pilot)
        assert "search" not in [name for name, _t, _main in rec.calls], rec.calls
        await pilot.press("slash")
        await wait_for(pilot, lambda: isinstance(app.screen, SearchScreen), what="search again")
        s = app.screen
        assert s is first
        assert (s.input.value, s.result, s.results.option_count, s.mode, s.date_from.value, s.filters()) == \
            ("", None, 0, "hybrid", "", None)
        assert app.focused is s.input
        await pilot.press(*"光伏", "enter")
        await wait_for(pilot, lambda: app.screen is m and m.note.path == "digest/wiki/光伏产业链.md",
                       what="the hit opened")


async def test_progress_on_the_status_line_lays_out_nothing(app_for):
    """A pass reports progress many times a second; each step relaid the whole screen (Static's default)."""
    app = app_for()
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        layouts = []
        real = m._refresh_layout
        m._refresh_layout = lambda *a, **kw: (layouts.append(a), real(*a, **kw))[1]
        for i in range(20):
            m.status.show_progress("indexing", i, 20)
            await pilot.pause()
        await settle(pilot)
        assert "19/20" in str(m.status.render())  # what the widget paints
        assert layouts == []


async def test_a_kept_search_screen_takes_a_theme_changed_while_it_was_closed(app_for):
    """The search screen is kept between openings and not restyled on each push (screens/modal.py StyledOnce);
    a theme picked while it was closed still reaches it at the next opening, and the main screen follows too."""
    from reme_tui.app import LIGHT
    from reme_tui.screens.search import SearchScreen

    app = app_for()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("slash")
        await wait_for(pilot, lambda: isinstance(app.screen, SearchScreen))
        box = app.screen.query_one("#search-box")
        dark_surface = box.styles.background
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, SearchScreen))
        app.theme = LIGHT
        await wait_for(pilot, lambda: app.current_theme.name == LIGHT)
        await pilot.pause()
        await pilot.press("slash")
        await wait_for(pilot, lambda: isinstance(app.screen, SearchScreen))
        want = app.get_css_variables()["surface"]
        await wait_for(pilot, lambda: box.styles.background.hex.lower() == want.lower(), what="the light surface")
        assert box.styles.background != dark_surface
        # opened again with no theme change: the same styles, not restyled
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, SearchScreen))
        await pilot.press("slash")
        await wait_for(pilot, lambda: isinstance(app.screen, SearchScreen))
        assert box.styles.background.hex.lower() == want.lower()
        assert pilot.app._exception is None


def test_key_specs_that_name_no_key_are_told_apart():
    from reme_tui.app import is_key_spec

    for good in ("ctrl+o", "slash", "question_mark", "f5", "escape", "pageup", "shift+tab", "ctrl+shift+k", "é",
                 "x", "ctrl+o,ctrl+p", "space"):
        assert is_key_spec(good), good
    for bad in ("ctrl+nonsense", "nonsense", "ctl+o", "", "ctrl+", "+", "ctrl+o,bogus"):
        assert not is_key_spec(bad), bad


async def test_a_keymap_entry_that_is_no_key_is_said_and_the_default_key_stays(app_for):
    """``keymap: {search: ctrl+nonsense}`` used to replace ``/`` by a key nobody can press, silently."""
    from reme_tui.screens.search import SearchScreen

    app = app_for()
    app.settings.keymap = {"search": "ctrl+nonsense", "nosuchid": "x"}
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.main_screen is not None and app.main_screen.is_attached, what="main")
        messages = [n.message for n in app._notifications]
        assert any("not a key" in m and "search: 'ctrl+nonsense'" in m for m in messages), messages
        assert any("unknown binding ids nosuchid" in m for m in messages), messages
        await pilot.press("slash")  # the default key of search still opens it
        await wait_for(pilot, lambda: isinstance(app.screen, SearchScreen), what="search opened with /")
        assert pilot.app._exception is None
