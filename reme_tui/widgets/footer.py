"""The key footer, rebuilt only when what it shows changes.

Textual's ``Footer`` recomposes (removes and mounts one widget per key, restyles them, relayouts the screen) on
every focus move, since any focus move may change the active bindings. Here the bindings the main screen shows
are the same from pane to pane (the panes' own keys are hidden), so a focus move (``t``, Escape, Tab, opening a
note) paid ~20 % of its time rebuilding an identical footer. :class:`KeyFooter` compares what it would show with
what it shows and recomposes only on a difference.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class KeyFooter(Footer):
    """A ``Footer`` that skips the recompose when the shown keys (key, label, action, enabled, tooltip, group)
    and the palette key are unchanged."""

    _shown: tuple | None = None

    def shown_keys(self) -> tuple:
        """What :meth:`compose` would show, as a comparable tuple."""
        app = self.app
        rows = tuple((b.key, app.get_key_display(b), b.description, b.action, enabled, tooltip,
                      b.group.description if b.group is not None else None, b.group is not None and b.group.compact)
                     for (_node, b, enabled, tooltip) in self.screen.active_bindings.values() if b.show)
        palette = None
        if self.show_command_palette and app.ENABLE_COMMAND_PALETTE:
            got = self.screen.active_bindings.get(app.COMMAND_PALETTE_BINDING)
            if got is not None:
                _node, b, enabled, tooltip = got
                palette = (b.key, app.get_key_display(b), b.description, b.action, enabled, b.tooltip)
        return rows, palette, self.compact

    def compose(self):
        if self._bindings_ready:
            self._shown = self.shown_keys()
        yield from super().compose()

    def bindings_changed(self, screen: Screen) -> None:
        if self._bindings_ready and self.is_attached and screen is self.screen and screen.app.app_focus \
                and self._shown is not None and self.shown_keys() == self._shown:
            return  # the same keys: nothing to rebuild
        super().bindings_changed(screen)
