"""`e` on a note whose file was removed or renamed since it was opened says so and opens no editor: before, the
editor came up empty and saving recreated the old name with only the editor's text (real app, real files)."""

from __future__ import annotations

from test_tui import open_and_wait, started, wait_for

NOTE = "digest/wiki/光伏产业链.md"


async def test_edit_of_a_note_gone_since_it_was_opened_is_refused(app_for, tmp_path, monkeypatch):
    marker = tmp_path / "editor-ran"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\ntouch "{marker}"\nprintf "typed\\n" >> "$1"\n', encoding="utf-8")
    editor.chmod(0o755)
    monkeypatch.setenv("VISUAL", str(editor))
    app = app_for()
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        await open_and_wait(pilot, NOTE)
        f = app.engine.vault / NOTE
        f.rename(f.with_name("光伏产业链 renamed.md"))  # by another program; the app has not synced yet
        m.note.focus_body()
        await pilot.press("e")
        await wait_for(pilot, lambda: any("removed or renamed" in n.message for n in pilot.app._notifications),
                       what="the refusal")
        assert not f.exists() and not marker.exists()
        assert f.with_name("光伏产业链 renamed.md").exists()
