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
from ..render import fit_text, one_line, plain_inline, truncate_cells



def neighbour_prompt(n, width: int = 80) -> Text:
    """The prompt of one ``reme_engine.search.graph.Neighbor``: how it is linked and its name on the first line,
    its description on the second, each cut to ``width`` cells so every entry takes exactly two lines."""
    head = Text()
    head.append("→ " if n.direction == "out" else "← ", style="dim")
    head.append(n.predicate or "link", style="bold underline" if n.predicate else "italic dim")
    if n.embed:
        head.append(" ⎘embed", style="dim")
    head.append(" ")
    name = one_line(n.name or n.path.rsplit("/", 1)[-1])
    head.append(name, style="dim strike" if n.dangling else "bold")
    if n.dangling:
        head.append(" (missing)", style="dim italic")
    if n.ambiguous:
        head.append(" (ambiguous)", style="dim italic")
    head = fit_text(head, width)
    desc = plain_inline(n.description or "")
    if n.dangling and not desc:
        desc = n.path
    t = head
    if desc:
        t = head + Text("\n  " + truncate_cells(desc, max(1, width - 2)), style="dim")
    return t


class NeighboursList(OptionList):
    """Outlinks then backlinks; ``entries`` maps option id → the Neighbor it shows."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.path: str | None = None
        self.entries: dict[str, object] = {}
        self.hood = None  # the Neighborhood shown (kept to re-cut the lines when the pane is resized)
        self._width = 0

    def on_mount(self) -> None:
        self.border_title = "Links"

    def _prompt_width(self) -> int:
        return max(8, self.scrollable_content_region.width - 1)

    def on_resize(self) -> None:
        if self.hood is not None and self._prompt_width() != self._width:
            keep = self.highlighted
            self.show(self.path, self.hood)
            if keep is not None and keep < self.option_count:
                self.highlighted = keep

    def show_message(self, text: str) -> None:
        self.hood = None
        self.entries = {}
        self.set_options([Option(Text(text, style="dim italic"), disabled=True)])

    def show(self, path: str, hood) -> None:
        """Fill from a ``Neighborhood`` of ``path``."""
        self.path = path
        self.hood = hood
        self.entries = {}
        self._width = width = self._prompt_width()
        options: list = []
        for title, items, total, key in (("Outlinks", hood.outlinks, hood.outlinks_total, "out"),
                                         ("Backlinks", hood.inlinks, hood.inlinks_total, "in")):
            more = f" ({len(items)} of {total})" if total > len(items) else f" ({total})"
            options.append(Option(Text(title + more, style="bold underline", no_wrap=True, overflow="ellipsis"),
                                  id=f"hdr-{key}", disabled=True))
            if not items:
                options.append(Option(Text("  none", style="dim italic"), disabled=True))
            for i, n in enumerate(items):
                oid = f"{key}-{i}"
                self.entries[oid] = n
                options.append(Option(neighbour_prompt(n, width), id=oid))
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
