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


async def test_an_edit_elsewhere_shows_while_the_watcher_is_not_running_yet(app_for):
    """The engine's watcher starts after the first index pass (minutes on a big vault under load); until then the
    note pane looks at the shown note's file itself, so another editor's save still shows within about a second."""
    app = app_for()  # no background threads: no watcher, as during a first index
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        await open_and_wait(pilot, NOTE)
        assert app.engine.watcher is None
        f = app.engine.vault / NOTE
        assert m.note._seen_signature is not None and m.note._seen_signature[0] == NOTE  # the file as read
        tmp = f.with_name(".光伏产业链.md.tmp")
        tmp.write_text(f.read_text(encoding="utf-8") + "\nSAVED-IN-OBSIDIAN line\n", encoding="utf-8")
        tmp.replace(f)  # an editor's atomic save
        await wait_for(pilot, lambda: m.note.doc is not None and "SAVED-IN-OBSIDIAN" in m.note.doc.body,
                       timeout=10, what="the pane shows the saved text")
        assert m.note.path == NOTE
        assert pilot.app._exception is None
