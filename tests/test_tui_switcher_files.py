"""The quick switcher and files the index left out: a binary or oversized note is offered to open (opening it says
why it is not shown), never to "create" (which failed with an API message); a typed path that is a note's exact
path offers no "create" row."""

from __future__ import annotations

from test_tui import option_texts, started, wait_for

from reme_tui.screens.switcher import QuickSwitcherScreen


async def test_a_file_left_out_of_the_index_is_offered_to_open(app_for, demo_vault):
    (demo_vault / "odd").mkdir()
    (demo_vault / "odd" / "big.md").write_bytes(b"\x00\x01binary\x00" * 100)
    app = app_for()
    async with app.run_test(size=(120, 36)) as pilot:
        m = await started(pilot)
        assert "odd/big.md" not in {n.path for n in app.engine.note_titles()}
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, QuickSwitcherScreen), what="switcher")
        s = pilot.app.screen
        await wait_for(pilot, lambda: s.matcher is not None, what="note list")
        s.input.value = "digest/wiki/新能源"
        await wait_for(pilot, lambda: s.matches and s.input.value == "digest/wiki/新能源", what="path match")
        assert s.create_path is None and not any(t.startswith("+ Create") for t in option_texts(s.list))
        s.input.value = "odd/big"
        await wait_for(pilot, lambda: s.file_path == "odd/big.md", what="open row")
        assert s.create_path is None and option_texts(s.list)[-1].startswith("↪ Open odd/big.md")
        await pilot.press("enter")
        # the pane says why it cannot show the file (and nothing is created or written)
        await wait_for(pilot, lambda: any("binary file" in n.message for n in pilot.app._notifications),
                       what="the reason")
        assert pilot.app.screen is m
        assert (demo_vault / "odd" / "big.md").read_bytes() == b"\x00\x01binary\x00" * 100
