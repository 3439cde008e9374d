"""The TUI for daily use (issue 15): dialogs that cannot kill the app, the quick switcher, the agenda without a
dead end, the note after ``$EDITOR``, and the paper cuts — pilot tests and 80×24 snapshots on temp copies of the
demo vault (keyword-only engines)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from textual import events

from reme_tui.app import ReMeApp, create_app
from reme_tui.screens.main import MainScreen

sys.path.insert(0, str(Path(__file__).parent))
from test_tui import option_texts, settle, wait_for  # noqa: E402

GUANGFU = "digest/wiki/光伏产业链.md"
DEMO_DAY = "2026-11-28"


@pytest.fixture
def app_for(demo_vault, make_engine):
    """``app_for(today=None, **settings)`` → a keyword-only ReMeApp on the demo vault copy; ``today`` pins
    ``settings.today()`` (shared with the engine)."""

    def make(*, today: str | None = None, vault: Path | None = None, **overrides) -> ReMeApp:
        eng = make_engine(vault or demo_vault, embed=False, **overrides)
        if today is not None:
            eng.settings.today = lambda: today  # type: ignore[method-assign]
        return create_app(eng.settings, eng)

    return make


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
