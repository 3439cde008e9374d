"""The neighbours list (right pane): outlinks and backlinks of the open note, from ``engine.neighbors``.

Each entry shows how it is linked — the predicate of a typed ``key:: [[X]]`` link or "link", ⎘ for embeds —
then the other note's name, dimmed "(missing)" when the link is dangling, and its description.

Posts :class:`~reme_tui.messages.OpenNote` when an existing note is chosen (Enter or click); choosing a missing
one only shows a notice.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ..messages import OpenNote
from ..render import one_line, truncate_cells

#: Description cells per entry (the list wraps the rest; a long description must not push others away).
DESC_CELLS = 80


def neighbour_prompt(n) -> Text:
    """The two-line prompt of one ``reme_engine.search.graph.Neighbor``."""
    t = Text(no_wrap=False)
    arrow = "→ " if n.direction == "out" else "← "
    t.append(arrow, style="dim")
    t.append(n.predicate or "link", style="bold" if n.predicate else "italic dim")
    if n.embed:
        t.append(" ⎘embed", style="dim")
    t.append("  ")
    name = one_line(n.name or n.path.rsplit("/", 1)[-1])
    if n.dangling:
        t.append(name, style="dim strike")
        t.append(" (missing)", style="dim italic")
    else:
        t.append(name, style="bold")
    if n.ambiguous:
        t.append(" (ambiguous)", style="dim italic")
    desc = one_line(n.description or "")
    if desc:
        t.append("\n   " + truncate_cells(desc, DESC_CELLS), style="dim")
    return t


class NeighboursList(OptionList):
    """Outlinks then backlinks; ``entries`` maps option id → the Neighbor it shows."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.path: str | None = None
        self.entries: dict[str, object] = {}

    def on_mount(self) -> None:
        self.border_title = "Links"

    def show_message(self, text: str) -> None:
        self.entries = {}
        self.set_options([Option(Text(text, style="dim italic"), disabled=True)])

    def show(self, path: str, hood) -> None:
        """Fill from a ``Neighborhood`` of ``path``."""
        self.path = path
        self.entries = {}
        options: list = []
        for title, items, total, key in (("Outlinks", hood.outlinks, hood.outlinks_total, "out"),
                                         ("Backlinks", hood.inlinks, hood.inlinks_total, "in")):
            more = f" (first {len(items)} of {total})" if total > len(items) else f" ({total})"
            options.append(Option(Text(title + more, style="bold underline"), id=f"hdr-{key}", disabled=True))
            if not items:
                options.append(Option(Text("  none", style="dim italic"), disabled=True))
            for i, n in enumerate(items):
                oid = f"{key}-{i}"
                self.entries[oid] = n
                options.append(Option(neighbour_prompt(n), id=oid))
        self.set_options(options)
        self.border_subtitle = f"{hood.outlinks_total} out · {hood.inlinks_total} in"
        # land on the first real entry so Enter works right away
        for idx, opt in enumerate(self.options):
            if not opt.disabled:
                self.highlighted = idx
                break

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        n = self.entries.get(event.option.id or "")
        if n is None:
            return
        if n.dangling:
            self.notify(f"{n.name or n.path} does not exist yet (a dangling link)", severity="warning")
            return
        line = n.line if n.direction == "in" and n.line else None
        self.post_message(OpenNote(n.path, line))
