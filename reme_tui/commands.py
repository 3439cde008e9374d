"""Command palette entries (Ctrl+P): open today, new note, search, re-index, refresh, theme, index status, panes."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

#: ``(name, action of ReMeApp, help)``; ``main('x')`` runs the main screen's ``action_x``.
COMMANDS: list[tuple[str, str, str]] = [
    ("Open today", "main('today')", "Today's daily page (created on first use) and its cards"),
    ("New note", "main('new_note')", "Create a note and open it"),
    ("Search notes", "open_search", "Search the vault (keyword + semantic, filters for layer and dates)"),
    ("Re-index now", "reindex", "Bring the index up to date with the vault"),
    ("Refresh now", "main('refresh')", "Run today's proactive refresh (agenda) now"),
    ("Toggle light/dark theme", "toggle_theme", "Switch between the light and dark theme"),
    ("Show index status", "main('show_status')", "Files, chunks, vectors, embedder, LLM, scheduled jobs"),
    ("Changes (memory pipelines)", "main('changes')", "Runs of auto-memory/resource/dream/refresh: diffs and revert"),
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
