"""Command palette entries (Ctrl+P): open today, new note, search, re-index, refresh, theme, index status, panes."""

from __future__ import annotations

import asyncio
from functools import partial

from rich.text import Text
from textual.command import DiscoveryHit, Hit, Hits, Provider

#: ``(name, action of ReMeApp, help)``; ``main('x')`` runs the main screen's ``action_x``.
COMMANDS: list[tuple[str, str, str]] = [
    ("Open today", "main('today')", "Today's daily page (created on first use) and its cards"),
    ("New note", "main('new_note')", "Create a note and open it"),
    ("Open note by name… (quick switcher)", "main('quick_switch')", "Ctrl+O: fuzzy over titles, aliases and paths"),
    ("Search notes", "open_search", "Search the vault (keyword + semantic, filters for layer and dates)"),
    ("Re-index now", "reindex", "Bring the index up to date with the vault"),
    ("Refresh now", "main('refresh')", "Run today's proactive refresh (agenda) now"),
    ("Toggle light/dark theme", "toggle_theme", "Switch between the light and dark theme"),
    ("Show index status", "main('show_status')", "Files, chunks, vectors, embedder, LLM, scheduled jobs"),
    ("Changes (reme and agents)", "main('changes')", "Runs of auto-memory/resource/dream/refresh and agent writes over MCP: diffs and revert"),
    ("Edit note in $EDITOR", "main('edit')", "Open the current note in your editor, then re-index it"),
    ("Follow a link…", "main('follow_link')", "Choose one of the open note's links"),
    ("Agenda", "main('agenda')", "Show today's proactive agenda"),
    ("Chat / quick capture", "main('chat')", "Write in the chat pane"),
    ("Toggle left pane (Daily/Vault)", "main('toggle_left')", "Collapse or restore the left column"),
    ("Toggle right pane (Links/Agenda)", "main('toggle_right')", "Collapse or restore the right column"),
    ("Toggle chat pane", "main('toggle_chat')", "Collapse or restore the chat below the note"),
    ("Vault tree", "main('focus_tree')", "Browse all folders and files"),
    ("Open README / first note", "open_start", "Show the vault's README or its first note"),
    ("Back", "back", "Previous note in history"),
    ("Forward", "forward", "Next note in history"),
]


class ReMeCommands(Provider):
    """The app's own commands; each one runs an action of :class:`reme_tui.app.ReMeApp`."""

    def _commands(self) -> list[tuple[str, str, str]]:
        return COMMANDS

    async def discover(self) -> Hits:
        for name, action, help_text in self._commands():
            yield DiscoveryHit(name, partial(self.app.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, action, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), partial(self.app.run_action, action), help=help_text)


class NoteCommands(Provider):
    """Notes by name in the palette: typing a title, alias or path lists the best matching notes (the quick
    switcher's matcher); choosing one opens it. The note list is read once per palette opening, off the UI
    thread (``engine.note_titles()``)."""

    _matcher = None

    async def startup(self) -> None:
        from .switcher import NoteIndex, NoteMatcher

        engine = getattr(self.app, "engine", None)
        m = getattr(self.app, "main_screen", None)
        if engine is None or m is None:
            return
        index = m.note_index  # the quick switcher's, when it is still current
        if index is None:
            try:
                index = await asyncio.to_thread(lambda: NoteIndex(engine.note_titles()))
            except Exception:  # a closed store: the palette still lists the commands
                return
            m.note_index = index
        self._matcher = NoteMatcher(index, m.recent_paths())

    async def search(self, query: str) -> Hits:
        if self._matcher is None or not query.strip():
            return
        for m in self._matcher.match(query, 8):
            path = m.note.path
            yield Hit(min(1.0, m.score / 150), Text.assemble((m.note.title, "bold"), "  ", (path, "dim")),
                      partial(self.app.open_path, path), text=m.note.title, help=f"open {path}")
