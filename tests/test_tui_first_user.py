"""Three dead ends of a fresh user's first hour, each with the behaviour that fixes it: ``r`` says which files it
wrote into the vault (and, in an existing vault, that ``reme/`` is the app's own folder); a read-only note says so
in its title before ``e`` is pressed, and ``e`` says why once; the agenda's date field shows today's date from the
first frame, never the ``YYYY-MM-DD`` placeholder."""

from __future__ import annotations

import stat

from reme_tui.app import create_app

from test_tui import main, open_and_wait, settle, started, wait_for

DEMO_DAY = "2026-11-28"


def _obsidian_vault(tmp_path):
    """An existing Obsidian vault (its own daily folder ``Journal``): app-owned files go to ``reme/``."""
    vault = tmp_path / "obs"
    (vault / "Journal").mkdir(parents=True)
    (vault / ".obsidian").mkdir()
    (vault / ".obsidian" / "daily-notes.json").write_text('{"folder": "Journal"}', encoding="utf-8")
    for d in ("2026-11-26", "2026-11-27"):
        (vault / "Journal" / f"{d}.md").write_text(f"# {d}\n\nSolar panels and the photovoltaic supply chain; "
                                                  "planning a trip to Hangzhou.\n", encoding="utf-8")
    return vault


async def test_refresh_in_an_existing_vault_names_what_it_wrote(tmp_path, make_engine):
    """``r`` on an Obsidian vault: the notification names every file written (under ``reme/proactive/``, the app
    folder of an existing vault — nothing in the user's daily folder) and says that folder is the app's."""
    vault = _obsidian_vault(tmp_path)
    journal_before = {p.name: p.read_bytes() for p in (vault / "Journal").iterdir()}
    eng = make_engine(vault, embed=False, layers={"daily_dir": "Journal"})
    eng.settings.today = lambda: "2026-11-28"
    eng.settings.proactive_refresh_cron = ""
    app = create_app(eng.settings, eng)
    async with app.run_test(size=(120, 30)) as pilot:
        m = await started(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: not m.agenda.refresh_running, timeout=30, what="refresh")
        await wait_for(pilot, lambda: any(n.title == "Refreshed" for n in pilot.app._notifications),
                       what="refresh notification")
        written = sorted(p.relative_to(vault).as_posix() for p in (vault / "reme").rglob("*") if p.is_file())
        assert written, "the refresh wrote nothing; the test needs a vault it writes into"
        msg = next(n.message for n in pilot.app._notifications if n.title == "Refreshed")
        for rel in written:
            assert rel.startswith("reme/proactive/") and rel in msg
        assert "reme/ is the app's own folder" in msg
    assert {p.name: p.read_bytes() for p in (vault / "Journal").iterdir()} == journal_before


async def test_refresh_in_a_reme_vault_names_the_daily_files(app_for, demo_vault):
    """In reme's own layout the files go to the daily folder (DESIGN §2) and are named, without the app-folder
    sentence."""
    app = app_for(today=DEMO_DAY)
    app.settings.proactive_refresh_cron = ""
    async with app.run_test(size=(120, 30)) as pilot:
        m = await started(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: any(n.title == "Refreshed" for n in pilot.app._notifications),
                       timeout=30, what="refresh notification")
        msg = next(n.message for n in pilot.app._notifications if n.title == "Refreshed")
        assert f"daily/{DEMO_DAY}/interests.yaml" in msg and "daily/_proactive.yaml" in msg
        assert "app's own folder" not in msg
        assert (demo_vault / "daily" / DEMO_DAY / "interests.yaml").exists()
        assert not m.agenda.refresh_running


async def test_read_only_note_says_so_and_e_explains_once(tmp_path, make_engine, monkeypatch):
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "mine.md").write_text("# Mine\n\nwritable\n", encoding="utf-8")
    ro = vault / "locked.md"
    ro.write_text("# Locked\n\nno write permission\n", encoding="utf-8")
    ro.chmod(stat.S_IRUSR | stat.S_IRGRP)
    monkeypatch.setenv("VISUAL", "false")  # never reached for the read-only note
    eng = make_engine(vault, embed=False)
    app = create_app(eng.settings, eng)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            m = await started(pilot)
            await open_and_wait(pilot, "mine.md")
            assert "read-only" not in str(m.note.border_title)
            await open_and_wait(pilot, "locked.md")
            assert str(m.note.border_title).endswith("· read-only")
            m.note.focus_body()
            await pilot.press("e")
            await pilot.press("e")
            await settle(pilot)
            told = [n for n in pilot.app._notifications if n.title == "Read-only"]
            assert len(told) == 2 and "no write permission" in told[0].message
            assert "no write permission" not in told[1].message  # the reason once, then a short reminder
            assert not any(n.title == "Editor" for n in pilot.app._notifications)
            assert ro.read_text(encoding="utf-8") == "# Locked\n\nno write permission\n"
    finally:
        ro.chmod(stat.S_IRUSR | stat.S_IWUSR)


async def test_agenda_date_is_today_from_the_first_frame(app_for):
    """The date field holds today's date before the first agenda answer arrives (it showed ``YYYY-MM-DD``)."""
    app = app_for(today=DEMO_DAY)
    seen: list[tuple[str, str]] = []
    async with app.run_test(size=(120, 30)) as pilot:
        m = main(pilot.app)
        # the first frame: the pane is mounted, the agenda's thread worker has not answered yet
        await wait_for(pilot, lambda: m.agenda.is_mounted, what="agenda mounted")
        seen.append((m.agenda.date_input.value, str(m.agenda.border_title)))
        await wait_for(pilot, lambda: m.agenda.date is not None, what="agenda loaded")
    assert seen[0] == (DEMO_DAY, "Agenda · today")


async def test_search_during_the_first_index_is_no_dead_end(app_for):
    """While the first keyword pass runs, a query with nothing found yet says the index is coming in and that it
    searches again (not "no hits for"); once the pass is done, "no hits for" is the true answer."""
    from reme_tui.screens.search import SearchScreen

    app = app_for()
    async with app.run_test(size=(120, 30)) as pilot:
        m = await started(pilot)
        m.first_pass_progress = (16, 3180)  # as on_index_progress keeps it during a first pass
        await pilot.press("slash", *"zzqxnotaword")
        s = pilot.app.screen
        assert isinstance(s, SearchScreen)
        await wait_for(pilot, lambda: s.result is not None and s.shown_seq == s.seq, what="results")
        info = str(s.info.render())
        assert "nothing yet" in info and "16 of 3180" in info and "no hits for" not in info
        m.first_pass_progress = None
        s.refresh_results()
        await wait_for(pilot, lambda: "no hits for" in str(s.info.render()), what="the final answer")


async def test_switcher_filters_once_for_a_burst_of_keys_and_enter_acts_on_the_typed_name(app_for):
    """Keys queued at once (a fast typist, a paste) and Enter right behind them: the list is filtered for the whole
    text (once, not per key) and Enter opens that text's best match, never a row of a shorter prefix."""
    from textual import events

    from reme_tui.screens.switcher import QuickSwitcherScreen

    app = app_for()
    async with app.run_test(size=(100, 30)) as pilot:
        m = await started(pilot)
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, QuickSwitcherScreen), what="switcher")
        s = pilot.app.screen
        await wait_for(pilot, lambda: s.matcher is not None and s.list.option_count > 0, what="note list")
        before = len(s.filter_ms)
        driver = pilot.app._driver
        for key in [*"光伏产业链", "enter"]:
            ev = events.Key(key, key if len(key) == 1 else None)
            ev.set_sender(pilot.app)
            driver.send_message(ev)
        await wait_for(pilot, lambda: m.note.path == "digest/wiki/光伏产业链.md", what="opened")
        assert pilot.app.screen is m
        assert len(s.filter_ms) - before < 5  # fewer filterings than keys
