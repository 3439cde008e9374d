"""The note pane follows a note another process wrote *and indexed* (an agent over MCP, `reme-tui job edit`): the
app's own sync then finds nothing new, so the pane compares the bytes it shows with the file's (real app through
`App.run_test()`, real engine and files)."""

from __future__ import annotations

from test_tui import open_and_wait, settle, started, wait_for

from reme_tui.context import VaultChange

NOTE = "digest/wiki/光伏产业链.md"


async def test_a_note_another_process_indexed_is_shown_as_it_is_now(app_for):
    app = app_for()
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        await open_and_wait(pilot, NOTE)
        eng = app.engine
        f = eng.vault / NOTE
        f.write_text(f.read_text(encoding="utf-8") + "\nEDITED-BY-AGENT line\n", encoding="utf-8")
        eng.index_paths([NOTE])  # the other process indexed it
        rep = eng.index_paths([NOTE])  # what the app's watcher batch then finds: nothing changed
        assert NOTE not in rep.changed_paths
        m.publish_change(VaultChange([NOTE], rep))
        await wait_for(pilot, lambda: m.note.doc is not None and "EDITED-BY-AGENT" in m.note.doc.body,
                       what="the pane shows the new text")

        # deleted (or renamed) by the other process: said once, the text kept on screen to read
        f.unlink()
        eng.index_paths([NOTE])
        rep = eng.index_paths([NOTE])
        notes_before = len(app._notifications)
        m.publish_change(VaultChange([NOTE], rep))
        await wait_for(pilot, lambda: any("was removed or renamed" in n.message
                                          for n in list(app._notifications)[notes_before:]),
                       what="a notice that the note is gone")
        m.publish_change(VaultChange([NOTE], rep))
        await settle(pilot)
        assert sum("was removed or renamed" in n.message for n in app._notifications) == 1
