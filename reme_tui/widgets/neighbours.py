"""The neighbours pane (right): the digest graph around the open note, from ``engine.neighbors`` (and
``engine.traverse`` at depth 2).

Outlinks and backlinks are grouped under their predicate — the key of a typed ``key:: [[X]]`` link — or "link"
for plain links; the links of a digest node's ``## Sources`` section (back to the daily notes it was distilled
from) get a group of their own. Each entry shows the other note's name (⎘ for embeds, struck through and
"(missing)" when the link is dangling) and its description. At depth 2 the notes two hops away follow, each with
the note it is reached through.

It loads its own data (``loaders.neighbours`` and ``engine.traverse`` in thread workers, for the note given to
:meth:`NeighboursList.load`) and reloads when the vault changes (the context's ``vault_changed`` signal). Posts
:class:`~reme_tui.messages.OpenNote` when an existing note is chosen (Enter or click; choosing a missing one only
shows a notice) and :class:`~reme_tui.messages.NeighbourDepthChanged` when ``x`` toggles depth 1 ↔ 2.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from .. import loaders
from ..messages import NeighbourDepthChanged, NeighboursLoaded, OpenNote, TraverseLoaded
from ..render import fit_text, one_line, plain_inline, row_width, truncate_cells

SOURCES_GROUP = "Sources"
PLAIN_GROUP = "link"


@dataclass
class Hop2:
    """A note two hops away (from ``engine.traverse``): ``via`` is the depth-1 note it is reached through."""

    path: str
    name: str
    description: str
    dangling: bool
    via: str
    via_name: str
    predicate: str | None = None


def display_name(path: str, name: str | None) -> str:
    """What a row calls a note: its name, else its file name; a chat record (``…/<32-hex id>.jsonl``, whose name is
    its id) reads "💬 chat <first 8 hex>" instead of a bare session id."""
    stem = path.rsplit("/", 1)[-1]
    if stem.endswith(".jsonl") and (not name or name == stem[:-6]):
        sid = stem[:-6]
        if len(sid) == 32 and all(c in "0123456789abcdef" for c in sid):
            return f"💬 chat {sid[:8]}"
    return name or stem


def neighbour_prompt(n, width: int = 80, arrow: str | None = None) -> Text:
    """One ``reme_engine.search.graph.Neighbor`` (or :class:`Hop2`): arrow and name on the first line (⎘ for an
    embed, "(missing)" for a dangling link), the description dimmed on the second; each cut to ``width`` cells."""
    head = Text("  ")
    if arrow is None:
        arrow = "→ " if getattr(n, "direction", "out") == "out" else "← "
    head.append(arrow, style="dim")
    name = one_line(display_name(n.path, n.name))
    head.append(name, style="dim strike" if n.dangling else "bold")
    if getattr(n, "embed", False):
        head.append(" ⎘ embed", style="dim")
    if n.dangling:
        head.append(" (missing)", style="dim italic")
    if getattr(n, "ambiguous", False):
        head.append(" (ambiguous)", style="dim italic")
    head = fit_text(head, width)
    desc = plain_inline(n.description or "")
    if isinstance(n, Hop2):
        via = f"via {one_line(display_name(n.via, n.via_name))}"
        desc = f"{via} · {desc}" if desc else via
    if n.dangling and not desc:
        desc = n.path
    if desc:
        return head + Text("\n    " + truncate_cells(desc, max(1, width - 4)), style="dim")
    return head


def group_neighbours(items: list, sources: set[str] | frozenset = frozenset()) -> list[tuple[str, list]]:
    """``[(group label, neighbours)]``: typed predicates in order of appearance, then plain links, then the
    ``## Sources`` links (``sources``: their resolved paths; only for outlinks)."""
    groups: dict[str, list] = {}
    plain, src = [], []
    for n in items:
        if n.direction == "out" and not n.predicate and n.path in sources:
            src.append(n)
        elif n.predicate:
            groups.setdefault(n.predicate, []).append(n)
        else:
            plain.append(n)
    out = list(groups.items())
    if plain:
        out.append((PLAIN_GROUP, plain))
    if src:
        out.append((SOURCES_GROUP, src))
    return out


def hop2_from_traverse(result, start: str) -> list[Hop2]:
    """The depth-2 nodes of a ``TraverseResult`` with the depth-1 note each is reached through."""
    nodes = {n["path"]: n for n in result.nodes}
    first = {p for p, n in nodes.items() if n.get("depth") == 1}
    out: list[Hop2] = []
    seen: set[str] = set()
    for e in result.edges:
        for near, far in ((e["src"], e["dst"]), (e["dst"], e["src"])):
            n = nodes.get(far)
            if near in first and n is not None and n.get("depth") == 2 and far not in seen and far != start:
                seen.add(far)
                via = nodes[near]
                out.append(Hop2(far, n.get("name") or far, n.get("description") or "", bool(n.get("dangling")),
                                near, via.get("name") or near, e.get("predicate")))
    return out


class NeighboursList(OptionList):
    """Outlinks, backlinks (grouped), then at depth 2 the second hop. ``entries`` maps option id → the
    ``Neighbor``/:class:`Hop2` it shows; ``depth`` is 1 or 2."""

    BINDINGS = [
        Binding("x", "toggle_depth", "Depth 1↔2", show=False, id="links.depth",
                tooltip="Links pane: show the notes two hops away too (or not)"),
    ]

    def __init__(self, ctx=None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ctx = ctx  # PaneContext (None: a bare view filled by show)
        self.wanted: str | None = None  # the note asked for last (answers for another one are dropped)
        self._wanted_sources: list[str] = []
        self.path: str | None = None
        self.entries: dict[str, object] = {}
        self.hood = None  # the Neighborhood shown (kept to re-cut the lines when the pane is resized)
        self.sources: frozenset[str] = frozenset()
        self.hop2: list[Hop2] | None = None
        self._pending_hop2: tuple[str, list[Hop2] | None] | None = None
        self.depth = 1
        self._width = 0

    def on_mount(self) -> None:
        self.border_title = "Links"
        if self.ctx is not None:
            self.ctx.vault_changed.subscribe(self, self._vault_changed)

    # -- loading (thread workers → messages to itself) ------------------------------------------------------
    def load(self, path: str, sources: list[str] | None = None, *, hop2: bool = True) -> None:
        """Show the links of ``path`` (``sources``: the targets of its ``## Sources`` section, kept for reloads
        of the same note); at depth 2 the second hop too (unless ``hop2`` is False)."""
        if sources is not None or path != self.wanted:
            self._wanted_sources = list(sources or [])
        self.wanted = path
        self._load(path, self._wanted_sources)
        if hop2 and self.depth == 2:
            self._load_traverse(path)

    @work(thread=True, exclusive=True, group="neighbours", exit_on_error=False)
    def _load(self, path: str, sources: list[str]) -> None:
        try:
            hood, resolved = loaders.neighbours(self.ctx.engine, path, sources)
        except Exception as exc:
            self.post_message(NeighboursLoaded(path, None, loaders.error_text(exc)))
            return
        self.post_message(NeighboursLoaded(path, hood, sources=resolved))

    def on_neighbours_loaded(self, message: NeighboursLoaded) -> None:
        message.stop()
        if message.path != self.wanted:
            return
        if message.error:
            self.show_message(f"links unavailable: {message.error}")
        elif not self.ctx.keyword_ready and not (message.neighborhood.outlinks or message.neighborhood.inlinks):
            self.show_message("Links appear when indexing finishes…")
        else:
            self.show(message.path, message.neighborhood, message.sources)

    @work(thread=True, exclusive=True, group="traverse", exit_on_error=False)
    def _load_traverse(self, path: str) -> None:
        try:
            res = self.ctx.engine.traverse(path, depth=2)
        except Exception as exc:
            self.post_message(TraverseLoaded(path, 2, None, loaders.error_text(exc)))
            return
        self.post_message(TraverseLoaded(path, 2, res))

    def on_traverse_loaded(self, message: TraverseLoaded) -> None:
        message.stop()
        if message.path != self.wanted or self.depth != 2:
            return
        if message.error:
            self.notify(f"depth 2 unavailable: {message.error}", severity="warning")
            self.show_hop2(message.path, [])
            return
        self.show_hop2(message.path, hop2_from_traverse(message.result, message.path))

    def on_neighbour_depth_changed(self, message: NeighbourDepthChanged) -> None:
        if self.ctx is not None:
            message.stop()
            if message.depth == 2 and self.wanted:
                self._load_traverse(self.wanted)

    def _vault_changed(self, change) -> None:
        if self.wanted:
            self.load(self.wanted, hop2=False)  # links may have resolved meanwhile

    def _prompt_width(self) -> int:
        return row_width(self.scrollable_content_region.width)

    def on_resize(self) -> None:
        self.refit()

    def refit(self) -> None:
        """Re-cut the entries when the pane's width changed (resized, or shown after being hidden)."""
        if self.hood is not None and self._prompt_width() != self._width:
            keep = self.highlighted
            self._render()
            if keep is not None and keep < self.option_count:
                self.highlighted = keep

    def show_message(self, text: str) -> None:
        self.hood = None
        self.entries = {}
        self.set_options([Option(Text(text, style="dim italic"), disabled=True)])

    def show(self, path: str, hood, sources=frozenset()) -> None:
        """Fill from a ``Neighborhood`` of ``path``; ``sources``: resolved paths linked from its ``## Sources``."""
        if path != self.path:
            pending = self._pending_hop2
            self.hop2 = pending[1] if pending is not None and pending[0] == path else None
        self._pending_hop2 = None
        self.path = path
        self.hood = hood
        self.sources = frozenset(sources)
        self._render()
        for idx, opt in enumerate(self.options):  # land on the first real entry so Enter works right away
            if not opt.disabled:
                self.highlighted = idx
                break

    def show_hop2(self, path: str, hop2: list[Hop2] | None) -> None:
        """Add (or with None, drop) the second hop of ``path`` (kept for :meth:`show` when ``path`` is not
        shown yet: the two answers may arrive in either order)."""
        if path != self.path:
            self._pending_hop2 = (path, hop2)
            return
        keep = self.highlighted
        self.hop2 = hop2
        self._render()
        if keep is not None and keep < self.option_count:
            self.highlighted = keep

    def _render(self) -> None:
        hood = self.hood
        if hood is None:
            return
        self.entries = {}
        self._width = width = self._prompt_width()
        options: list = []

        def header(text: str, style: str, oid: str | None = None) -> None:
            options.append(Option(Text(text, style=style, no_wrap=True, overflow="ellipsis"), id=oid, disabled=True))

        for title, items, total, key in (("Outlinks", hood.outlinks, hood.outlinks_total, "out"),
                                         ("Backlinks", hood.inlinks, hood.inlinks_total, "in")):
            more = f" ({len(items)} of {total})" if total > len(items) else f" ({total})"
            header(title + more, "bold underline", f"hdr-{key}")
            if not items:
                options.append(Option(Text("  none", style="dim italic"), disabled=True))
            groups = group_neighbours(items, self.sources if key == "out" else frozenset())
            i = 0
            for label, members in groups:
                style = "italic dim" if label == PLAIN_GROUP else "bold"
                if label == SOURCES_GROUP:
                    label = "Sources (daily notes)" if all(m.path.startswith("daily/") for m in members) else "Sources"
                header(f" {label}", style)
                for n in members:
                    oid = f"{key}-{i}"
                    i += 1
                    self.entries[oid] = n
                    options.append(Option(neighbour_prompt(n, width), id=oid))
        if self.depth == 2:
            if self.hop2 is None:
                header("Depth 2: loading…", "dim italic")
            else:
                header(f"Depth 2 ({len(self.hop2)})", "bold underline", "hdr-2")
                if not self.hop2:
                    options.append(Option(Text("  none", style="dim italic"), disabled=True))
                for i, n in enumerate(self.hop2):
                    oid = f"hop2-{i}"
                    self.entries[oid] = n
                    options.append(Option(neighbour_prompt(n, width, "⇢ "), id=oid))
        self.set_options(options)
        self.border_title = "Links · depth " + ("2 (x: 1)" if self.depth == 2 else "1 (x: 2)")
        self.border_subtitle = f"{hood.outlinks_total} out · {hood.inlinks_total} in"
        if self.depth == 2 and self.hop2 is not None:
            self.border_subtitle += f" · {len(self.hop2)} at 2"

    def action_toggle_depth(self) -> None:
        self.depth = 2 if self.depth == 1 else 1
        if self.depth == 1:
            self.hop2 = None
        self._render()
        self.post_message(NeighbourDepthChanged(self.depth))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        n = self.entries.get(event.option.id or "")
        if n is None:
            return
        if n.dangling:
            self.notify(f"{n.name or n.path} does not exist yet (a dangling link)", severity="warning")
            return
        line = n.line if getattr(n, "direction", "") == "in" and getattr(n, "line", 0) else None
        self.post_message(OpenNote(n.path, line))
