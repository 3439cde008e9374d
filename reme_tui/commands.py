"""Command palette entries (Ctrl+P): search, re-index, toggle theme, open the README / first note."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


class ReMeCommands(Provider):
    """The app's own commands; each one calls an action of :class:`reme_tui.app.ReMeApp`."""

    def _commands(self) -> list[tuple[str, str, str]]:
        return [
            ("Search notes", "open_search", "Search the vault (keyword + semantic)"),
            ("Re-index now", "reindex", "Bring the index up to date with the vault"),
            ("Toggle light/dark theme", "toggle_theme", "Switch between the light and dark theme"),
            ("Open README / first note", "open_start", "Show the vault's README or its first note"),
            ("Back", "back", "Previous note in history"),
            ("Forward", "forward", "Next note in history"),
        ]

    async def discover(self) -> Hits:
        for name, action, help_text in self._commands():
            yield DiscoveryHit(name, partial(self.app.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, action, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), partial(self.app.run_action, action), help=help_text)
