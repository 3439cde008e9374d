"""The main screen's layout: which columns show at the terminal's size and what the user asked to see, and the
focus moves between panes. A mixin of :class:`~reme_tui.screens.main.MainScreen` (it uses the screen's panes).

At :data:`WIDE_MIN` columns and more all three columns show (the chat from :data:`CHAT_AUTO_ROWS` rows); below
that the note shares the screen with one side column — the Daily/Vault pane or the Links/Agenda pane, whichever
was asked for last. ``F2``/``F3``/``F4`` collapse and restore the left column, the right column and the chat.
"""

from __future__ import annotations

from pathlib import Path

#: Columns from which the three columns (left │ note │ right) show side by side.
WIDE_MIN = 110
#: Rows from which the chat shows below the note without being asked for (in the wide layout).
CHAT_AUTO_ROWS = 32


class PaneLayout:
    """Layout state: ``show_left``/``show_right`` (the user's F2/F3), ``show_chat`` (None: automatic),
    ``narrow_side`` (left/right: the side column of the narrow layout), ``right_pane`` (links/agenda)."""

    def _init_layout(self) -> None:
        self.show_left = True
        self.show_right = True
        self.show_chat: bool | None = None
        self.narrow_side = "left"
        self.right_pane = "links"

    def on_resize(self) -> None:
        self._apply_layout()

    @property
    def wide(self) -> bool:
        return self.size.width >= WIDE_MIN

    def _apply_layout(self) -> None:
        """Show/hide the columns for the screen size and what the user asked for."""
        wide = self.wide
        self.set_class(not wide, "-narrow")
        if wide:
            self.left.display, self.right.display = self.show_left, self.show_right
            self.links.display = self.agenda.display = True
        else:
            self.left.display = self.show_left and self.narrow_side == "left"
            self.right.display = self.show_right and self.narrow_side == "right"
            self.links.display = self.right_pane == "links"
            self.agenda.display = self.right_pane == "agenda"
        auto = wide and self.size.height >= CHAT_AUTO_ROWS
        self.chat.display = self.show_chat if self.show_chat is not None else auto
        self.footer.show_command_palette = wide
        self.call_after_refresh(self._refit)
        focused = self.app.focused if self.is_attached else None
        if focused is not None and (not focused.display or any(
                not a.display for a in focused.ancestors if hasattr(a, "display"))):
            self.note.focus_body()

    def _refit(self) -> None:
        """Panes cut their rows to their width; one shown after being hidden must re-cut them."""
        for pane in (self.daily, self.links, self.agenda):
            if pane.display and pane.is_mounted:
                pane.refit()

    def _reveal(self, pane: str) -> None:
        """Make ``pane`` (left/links/agenda/chat) visible (the narrow layout swaps the side column)."""
        if pane == "left":
            self.show_left, self.narrow_side = True, "left"
        elif pane in ("links", "agenda"):
            self.show_right, self.narrow_side, self.right_pane = True, "right", pane
        elif pane == "chat":
            self.show_chat = True
        self._apply_layout()

    def _left_title(self) -> None:
        daily = self.left_switch.current == "daily"
        self.left.border_title = "Daily" if daily else (Path(self.engine.vault).name or "Vault")
        self.left.border_subtitle = self.daily.summary() if daily else "d: back to Daily"

    def _show_left(self, which: str) -> None:
        self.left_switch.current = which
        self._left_title()
        self._reveal("left")

    def action_toggle_left(self) -> None:
        if self.wide or self.narrow_side == "left":
            self.show_left = not self.show_left
        else:
            self.show_left, self.narrow_side = True, "left"
        self._apply_layout()

    def action_toggle_right(self) -> None:
        if self.wide or self.narrow_side == "right":
            self.show_right = not self.show_right
        else:
            self.show_right, self.narrow_side = True, "right"
        self._apply_layout()

    def action_toggle_chat(self) -> None:
        self.show_chat = not self.chat.display
        self._apply_layout()

    # -- focus ----------------------------------------------------------------------------------------------
    # The pane holding the focus has an accent border and title. Not a ``:focus-within`` rule: Textual restyles
    # the whole subtree of such a pane on every focus move (a long note: hundreds of blocks, most of the quick
    # switcher's opening); an inline border repaints the pane's frame only.
    _lit_pane = None

    def watch_focused(self, focused) -> None:
        panes = (self.left, self.note, self.links, self.agenda, self.chat)
        pane = next((n for n in focused.ancestors_with_self if n in panes), None) if focused is not None else None
        if pane is self._lit_pane:
            return
        if self._lit_pane is not None:
            inline = self._lit_pane.styles.inline
            cleared = [inline.clear_rule(r) for r in
                       ("border_top", "border_right", "border_bottom", "border_left", "border_title_color",
                        "auto_border_title_color")]
            if any(cleared):
                self._lit_pane.refresh()
        self._lit_pane = pane
        if pane is not None:
            self._light_pane(pane)

    def _light_pane(self, pane) -> None:
        accent = self.app.get_css_variables().get("accent", "ansi_bright_blue")
        pane.styles.border = ("round", accent)
        pane.styles.border_title_color = accent
        pane.styles.auto_border_title_color = False  # the CSS's muted title is "auto 60%"

    def _relight_pane(self, _theme=None) -> None:
        """A theme change: the lit pane takes the new accent."""
        if self._lit_pane is not None:
            self._light_pane(self._lit_pane)

    def action_focus_main(self) -> None:
        self.note.focus_body()

    def action_daily(self) -> None:
        self._show_left("daily")
        self.daily.focus_dates()

    def action_focus_tree(self) -> None:
        self._show_left("tree")
        self.vault_tree.focus()

    def action_focus_links(self) -> None:
        self.action_neighbours()

    def action_neighbours(self) -> None:
        self._reveal("links")
        self.links.focus()

    def action_agenda(self) -> None:
        """Show and focus today's agenda."""
        self._reveal("agenda")
        self.agenda.focus_list()
        self.agenda.pending = None
        self.agenda.load("")  # today's, always (other days: the date field); today may have changed

    def action_chat(self) -> None:
        self._reveal("chat")
        self.chat.focus_input()
