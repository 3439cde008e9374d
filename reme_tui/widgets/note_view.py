"""The note view (centre pane): a one-line frontmatter summary above the note rendered as Markdown, or as plain
read-only text for non-Markdown files and files too big for the Markdown widget.

Posts :class:`~reme_tui.messages.FollowLink` when a wikilink or a relative Markdown link is clicked (web links are
handed to the terminal's browser via ``App.open_url``). It never loads files: the screen gives it a
:class:`~reme_tui.messages.NoteDocument` through :meth:`NoteView.show`.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Markdown, Static, TextArea

from ..messages import FollowLink, NoteDocument
from ..render import frontmatter_summary, human_size, parse_href, truncate_cells

#: Above this many bytes a note is shown as plain text: the Markdown widget mounts one widget per block and
#: would freeze the UI for seconds on a big file.
MAX_MARKDOWN_BYTES = 200 * 1024


class NoteScroll(VerticalScroll, can_focus=True):
    """The scrolling container of the rendered note (focusable, so keys scroll it)."""


class NoteView(Vertical):
    """Shows one note. ``path`` is the vault-relative path of what is shown (None before the first note)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.path: str | None = None
        self.doc: NoteDocument | None = None
        self.summary = ""  # the frontmatter line before cutting to the pane's width
        self.border_title = "Note"
        # Kept as attributes: a note may arrive before nested children are mounted.
        self.meta = Static("", id="note-meta", markup=False)
        self.scroller = NoteScroll(id="note-scroll")
        self.markdown = Markdown("", id="note-md", open_links=False)
        self.plain = TextArea("", id="note-plain", read_only=True, soft_wrap=True, show_line_numbers=True)
        self.plain.cursor_blink = False  # read-only: a blinking cursor is noise (and unstable in snapshots)
        self.plain.display = False

    def compose(self) -> ComposeResult:
        yield self.meta
        with self.scroller:
            yield self.markdown
        yield self.plain

    async def show(self, doc: NoteDocument) -> None:
        """Render ``doc`` (awaits the Markdown widget's rebuild, so blocks exist when this returns)."""
        self.path = doc.path
        self.doc = doc
        self.border_title = doc.path
        self.border_subtitle = f"{doc.total_lines} lines · {human_size(doc.size)}" + (" · plain text" if doc.plain else "")
        summary = frontmatter_summary(doc.meta)
        if doc.warning:
            summary += ("  " if summary else "") + f"⚠ {doc.warning}"
        self.summary = summary
        self.meta.display = bool(summary)
        self._fit_meta()
        if doc.plain:
            self.scroller.display = False
            await self.markdown.update("")
            self.plain.load_text(doc.body)
            self.plain.display = True
            self.plain.scroll_home(animate=False)
        else:
            self.plain.display = False
            self.plain.load_text("")
            self.scroller.display = True
            await self.markdown.update(doc.body)
            self.scroller.scroll_home(animate=False)

    def _fit_meta(self) -> None:
        # cut with our cell-aware helper: Rich's ellipsis pads a wide character cut in half with a space
        width = self.meta.content_region.width or self.content_region.width - 2
        self.meta.update(Text(truncate_cells(self.summary, max(1, width)), no_wrap=True))

    def on_resize(self) -> None:
        if self.summary:
            self.call_after_refresh(self._fit_meta)

    def focus_body(self) -> None:
        (self.plain if self.plain.display else self.scroller).focus()

    # -- positioning ----------------------------------------------------------------------------------------
    def scroll_to_line(self, line: int, end_line: int | None = None) -> bool:
        """Bring file line ``line`` into view (top). Exact for plain text; for Markdown the top-level block whose
        source range holds the line is scrolled to the top and marked, else the view scrolls proportionally.
        Returns True when a block/line was found exactly."""
        doc = self.doc
        if doc is None:
            return False
        if doc.plain:
            row = max(0, line - 1)
            self.plain.move_cursor((row, 0))
            self.plain.scroll_to(y=row, animate=False)
            return True
        body_line = line - doc.body_start_line  # 0-based line within the rendered body
        for block in self.markdown.query(".hit-block"):
            block.remove_class("hit-block")
        target = None
        for block in self.markdown.children:
            start, end = getattr(block, "source_range", (0, 0))
            if start <= body_line < max(end, start + 1):
                target = block
                break
            if start > body_line:  # the line is in a gap (blank lines): take the next block
                target = block
                break
        if target is not None:
            target.add_class("hit-block")
            self.scroller.scroll_to_widget(target, top=True, animate=False)
            return True
        total = max(1, doc.total_lines - doc.body_start_line + 1)
        frac = min(1.0, max(0.0, body_line / total))
        self.scroller.scroll_to(y=frac * self.scroller.max_scroll_y, animate=False)
        return False

    def scroll_to_heading(self, anchor: str) -> bool:
        """Scroll to the first heading whose text matches ``anchor`` (case-insensitive); False when none does."""
        want = " ".join(anchor.casefold().split())
        for _level, label, block_id in self.markdown.table_of_contents:
            if " ".join(label.casefold().split()) == want and block_id:
                try:
                    block = self.markdown.query_one(f"#{block_id}")
                except Exception:
                    return False
                self.scroller.scroll_to_widget(block, top=True, animate=False)
                return True
        return False

    # -- links ----------------------------------------------------------------------------------------------
    def on_markdown_link_clicked(self, event: Markdown.LinkClicked) -> None:
        event.stop()
        parsed = parse_href(event.href)
        if parsed is None:
            self.app.open_url(event.href)
            return
        target, anchor = parsed
        if not target and anchor:
            # same-note heading link
            if not self.scroll_to_heading(anchor):
                self.notify(f"No heading {anchor!r} in this note", severity="warning")
            return
        self.post_message(FollowLink(target, anchor, self.path))
