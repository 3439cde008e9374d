"""The help modal: the keys in effect (after the user's keymap) and what they do. Dismisses with None."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from .modal import Dialog
from textual.widgets import Static

#: Keys that are not bindings of ours but worth knowing.
EXTRA_KEYS = [
    ("ctrl+p", "command palette (today, new note, search, re-index, refresh, theme, index status…)"),
    ("tab / shift+tab", "next / previous pane"),
    ("escape (chat)", "while an answer streams: cancel it (binding id cancel_reply)"),
    ("enter", "open the selected day, card, link, agenda item's evidence; expand a folder"),
    ("← / →", "agenda: the day before / after · tree: collapse / expand"),
    ("x", "links pane: depth 1 ↔ 2"),
    ("click a link", "follow a wikilink or a provenance link in the note (f: pick one by keyboard)"),
]


class HelpScreen(Dialog):
    """``rows``: ``(keys, description, binding id)`` collected from the screen underneath when help was asked for."""

    BINDINGS = [
        Binding("escape,q,question_mark", "close", "Close", id="help.close"),
    ]

    def __init__(self, rows: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self.rows = rows

    def table(self, width: int) -> Table:
        """The keys table for ``width`` columns: below 100 the binding ids go (they would squeeze the
        descriptions to a word per line) and long descriptions wrap in their own column."""
        wide = width >= 100
        table = Table(box=None, show_header=True, header_style="bold", expand=True, pad_edge=False)
        table.add_column("key", no_wrap=True, max_width=max(12, width // 4))
        table.add_column("does", ratio=1)
        if wide:
            table.add_column("binding id (keymap: in config.yaml)", style="dim", no_wrap=True)
        for keys, desc, bid in self.rows:
            table.add_row(keys, desc, *([bid] if wide else []))
        for keys, desc in EXTRA_KEYS:
            table.add_row(Text(keys, style="dim"), Text(desc, style="dim"), *([""] if wide else []))
        return table

    def compose(self) -> ComposeResult:
        self.body = Static(self.table(self.app.size.width), id="help-table")
        box = VerticalScroll(id="help-box")
        box.border_title = "Keys"
        box.border_subtitle = "Esc closes · remap keys: `keymap: {id: key}` in the config"
        with box:
            yield self.body

    def on_resize(self) -> None:
        self.body.update(self.table(self.app.size.width))

    def action_close(self) -> None:
        self.dismiss(None)


def collect_rows(app) -> list[tuple[str, str, str]]:
    """The app's own bindings active on the current screen, one row per binding id, keymap applied.

    Bindings without an id (a focused widget's scrolling keys and the like) are left out: they cannot be
    remapped and would bury the ones that matter."""
    by_id: dict[str, tuple[list[str], str]] = {}
    order: list[str] = []
    for key, active in app.active_bindings.items():
        b = active.binding
        if not b.description or not b.id:
            continue
        bid = b.id
        if bid not in by_id:
            by_id[bid] = ([], b.tooltip or b.description)
            order.append(bid)
        shown = app.get_key_display(b.with_key(key))
        if shown not in by_id[bid][0]:
            by_id[bid][0].append(shown)
    return [(" / ".join(by_id[i][0]), by_id[i][1], i) for i in order]
