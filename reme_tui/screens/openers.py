"""What the main screen opens on top of itself: the new-note dialog (and the note it creates), the Changes view,
the index status, search and the quick switcher. A mixin of :class:`~reme_tui.screens.main.MainScreen` (it uses
the screen's engine, panes and history); each dialog's answer comes back as a callback on the UI thread.
"""

from __future__ import annotations

from textual import work

from .. import loaders
from ..messages import NoteCreated, OpenNote


class ScreenOpeners:
    """Actions that push a screen, and the new note's worker."""

    def action_new_note(self) -> None:
        from .dialogs import NewNoteScreen

        self.app.push_screen(NewNoteScreen(), lambda path: path and self.create_note(path))

    @work(thread=True, group="new-note", exit_on_error=False)
    def create_note(self, path: str) -> None:
        """Create the note ``path`` (never over an existing file): just its title as a heading — no frontmatter
        the user did not ask for (the file name already names it)."""
        title = path.rsplit("/", 1)[-1][:-3]
        text = f"# {title}\n\n"
        try:
            res = self.engine.write(path, text, overwrite=False)
        except Exception as exc:
            self.post_message(NoteCreated(None, loaders.error_text(exc)))
            return
        self.post_message(NoteCreated(res.path))

    def on_note_created(self, message: NoteCreated) -> None:
        self.note_index = None
        if message.error or not message.path:
            self.notify(message.error or "not created", title="New note", severity="error")
            return
        self.notify(f"{message.path} — press e to write in it", title="Created", timeout=4)
        self.post_message(OpenNote(message.path, focus=True))
        self.vault_tree.load_root()
        self.daily.load_days()

    def action_changes(self) -> None:
        """Open the Changes view; after a revert, reload what the screen shows."""
        from .changes import ChangesScreen

        def done(reverted: list | None) -> None:
            if reverted:
                self.daily.load_days()
                if self.note.path in reverted:
                    self.post_message(OpenNote(self.note.path, history=False))
                self.agenda.load(self.agenda.date or "")

        self.app.push_screen(ChangesScreen(self.engine), done)

    def action_show_status(self) -> None:
        from .dialogs import IndexStatusScreen

        self.app.push_screen(IndexStatusScreen(self.engine, self.schedule_rows))

    def schedule_rows(self) -> list[tuple[str, str, str]]:
        """(Worker thread.) ``(job, next run, last run)`` rows for the status modal."""
        nxt = self.engine.next_run("proactive_refresh")
        return [("proactive_refresh", nxt.strftime("%Y-%m-%d %H:%M %Z") if nxt is not None else "disabled", "")]

    def action_search(self, initial: str = "") -> None:
        from .search import SearchScreen

        def done(hit) -> None:
            if hit is not None:
                self.post_message(OpenNote(hit.path, hit.start_line, end_line=hit.end_line, focus=True))

        s = self.search_screen
        if s is not None and s in self.app.screen_stack:
            return  # already open (the one instance cannot be pushed twice)
        if s is None:
            s = self.search_screen = SearchScreen(self.engine, initial=initial, layers=self.settings.layers,
                                                  vault_changed=self.vault_changed,
                                                  folders=self.vault_tree.top_dirs)
            # installed: closing keeps it mounted, so later openings skip composing and styling it
            self.app.install_screen(s, name=f"search-{id(self)}")
        else:
            s.reopen(initial, self.vault_tree.top_dirs)
        self.app.push_screen(s, done)

    def recent_paths(self) -> list[str]:
        """Notes opened in this session, most recent first (the switcher lists them first)."""
        return list(dict.fromkeys(([self.note.path] if self.note.path else []) + self.history.recent()))

    def action_quick_switch(self, initial: str = "") -> None:
        """Open a note by name (Ctrl+O); a name no note has can be created from there."""
        from .switcher import QuickSwitcherScreen

        def done(choice) -> None:
            if choice is not None:
                kind, path = choice
                self.create_note(path) if kind == "create" else self.post_message(OpenNote(path, focus=True))

        s = self.switcher
        if isinstance(self.app.screen, QuickSwitcherScreen) or (s is not None and s in self.app.screen_stack):
            return  # already open (the one instance cannot be pushed twice)
        if s is None:
            s = self.switcher = QuickSwitcherScreen(self.engine, keep_index=lambda index: setattr(self, "note_index", index))
            # installed: closing keeps it mounted, so later openings skip building and laying out the dialog
            self.app.install_screen(s, name=f"quick-switcher-{id(self)}")
        s.reopen(self.recent_paths(), initial, index=self.note_index)
        self.app.push_screen(s, done)

