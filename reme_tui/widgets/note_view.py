"""The note view (centre pane): who owns the note (the title ends "· yours" or "· reme's"; a header line when reme
wrote it or has blocks in it, and reme's lines carry a dim left gutter — ARCHITECTURE §8 "Ownership"), the frontmatter
compactly (name — description · #tags on one line; the provenance keys ``session_id``/``source_conversation``/
``source_resource``/``derived_from`` as clickable links on a second) above the note rendered as Markdown, or as
plain read-only text for non-Markdown files and files too big for the Markdown widget. Obsidian callouts and
footnotes are rendered (``render.callouts_and_footnotes``); a click on a footnote's ``¹`` scrolls to its
definition.

Posts :class:`~reme_tui.messages.FollowLink` when a wikilink, a relative Markdown link or a provenance link is
clicked (web links are handed to the terminal's browser via ``App.open_url``). :meth:`NoteView.load` reads a note
in a thread worker (``loaders.note_document``; the newest request wins), shows it, and posts
:class:`~reme_tui.messages.NoteShown` up; :meth:`NoteView.show` renders a ready
:class:`~reme_tui.messages.NoteDocument`. The note shown is re-read when the index saw it change (the context's
``vault_changed`` signal).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.content import Content
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from ..messages import FollowLink, NoteDocument, NoteLoaded, NoteShown, OpenNote, ReloadNote
from ..render import (
    FOOTNOTE_SCHEME,
    frontmatter_summary,
    human_size,
    ownership_label,
    ownership_line,
    parse_href,
    provenance_links,
    truncate_cells,
)

if TYPE_CHECKING:
    from textual.widgets import Markdown

#: Seconds between two looks at the shown note's file while the engine's watcher is not running yet.
POLL_S = 1.0

#: Seconds after the pane's mount before the body widgets are made and mounted (after the first paint).
BODY_MOUNT_DELAY_S = 0.3

#: Above this many bytes a note is shown as plain text: the Markdown widget mounts one widget per block and
#: would hold the UI for a noticeable moment on a big file (a 100 KB note renders in well under a second).
MAX_MARKDOWN_BYTES = 100 * 1024


def __getattr__(name: str):
    # the body widgets moved to note_body (imported after the first frame); their old names still resolve
    if name in ("NoteMarkdown", "PlainNote", "ReMeMarker"):
        from . import note_body

        return getattr(note_body, name)
    raise AttributeError(name)


class NoteScroll(VerticalScroll, can_focus=True):
    """The scrolling container of the rendered note (focusable, so keys scroll it)."""

    def watch_has_focus(self, _has_focus: bool) -> None:
        # Textual restyles the whole subtree here (every block of a long note); no rule of the app styles the
        # blocks by this container's focus, so restyling the container itself is enough
        self.app.stylesheet.update_nodes([self], animate=True)


class NoteView(Vertical):
    """Shows one note. ``path`` is the vault-relative path of what is shown (None before the first note)."""

    def __init__(self, ctx=None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ctx = ctx  # PaneContext (None: a bare view filled by show)
        self.seq = 0  # number of the newest load request
        self.path: str | None = None
        self.doc: NoteDocument | None = None
        self.summary = ""  # the frontmatter line before cutting to the pane's width
        self.history_hint = ""
        self._gone_notified: str | None = None  # the note last said to be gone (said once)
        self.border_title = "Note"
        # Kept as attributes: a note may arrive before nested children are mounted.
        self.owner_line = Static("", id="note-owner", markup=False)
        self.owner_line.display = False
        self.owner_text = ""  # the owner header before cutting to the pane's width
        self.meta = Static("", id="note-meta", markup=False)
        self.prov = Static("", id="note-prov", markup=False)
        self.prov_links: list[tuple[str, str]] = []  # (label, link target) of the provenance line
        self.scroller = NoteScroll(id="note-scroll")
        # The body widgets (note_body: the Markdown widget and a TextArea) are made on first use and mounted
        # after the first frame: their imports alone are ~40 ms the first paint need not wait for
        self._markdown = None
        self._plain = None
        self._body_mounted: asyncio.Task | None = None
        #: ``(path, (mtime_ns, size))`` of the shown note at the last poll (see :meth:`_poll_shown_file`)
        self._seen_signature: tuple[str, tuple[int, int] | None] | None = None

    @property
    def markdown(self):
        """The rendered-Markdown widget (:class:`~reme_tui.widgets.note_body.NoteMarkdown`, id ``note-md``); made
        on first use, in the pane once :meth:`mount_body` ran."""
        if self._markdown is None:
            from .note_body import NoteMarkdown

            self._markdown = NoteMarkdown("", id="note-md", open_links=False)
        return self._markdown

    @property
    def plain(self):
        """The read-only plain-text widget (:class:`~reme_tui.widgets.note_body.PlainNote`, id ``note-plain``,
        hidden until a plain note is shown); made on first use, in the pane once :meth:`mount_body` ran."""
        if self._plain is None:
            from .note_body import PlainNote

            self._plain = PlainNote("", id="note-plain", read_only=True, soft_wrap=True, show_line_numbers=True)
            self._plain.cursor_blink = False  # read-only: a blinking cursor is noise (and unstable in snapshots)
            self._plain.display = False
        return self._plain

    async def mount_body(self) -> None:
        """Mount the body widgets (once; later calls wait for the first). :meth:`show` awaits it."""
        if self._body_mounted is None:
            self._body_mounted = asyncio.ensure_future(self._mount_body())
        await self._body_mounted

    async def _mount_body(self) -> None:
        await self.scroller.mount(self.markdown)
        await self.mount(self.plain, after=self.scroller)

    def compose(self) -> ComposeResult:
        yield self.owner_line
        yield self.meta
        yield self.prov
        yield self.scroller

    # -- loading (a thread worker → a message to itself) ----------------------------------------------------
    def on_mount(self) -> None:
        if self.ctx is not None:
            self.ctx.vault_changed.subscribe(self, self._vault_changed)
            self.set_interval(POLL_S, self._poll_shown_file, name="note-poll")
        # not call_after_refresh: that runs after the screen's first refresh, before its frame reaches the
        # terminal, and the body's imports and mount (60–90 ms) delayed the first paint (bench/RESULTS.md
        # "First paint, session 21 (H)"); show() mounts it on demand when a note comes sooner
        self.set_timer(BODY_MOUNT_DELAY_S, self.mount_body, name="note-body-mount")

    def _poll_shown_file(self) -> None:
        """(Timer.) Until the engine's watcher runs — it starts after the first index pass, which takes minutes on
        a big vault under load — an edit of the shown note made in another editor reaches the pane through this
        poll: one ``stat`` of that file every :data:`POLL_S` s, a re-read when it changed."""
        doc = self.doc
        if doc is None or self.ctx is None or getattr(self.ctx.engine, "watcher", None) is not None:
            self._seen_signature = None
            return
        self._check_shown_file(doc.path, doc.sha)

    @work(thread=True, exclusive=True, group="note-poll", exit_on_error=False)
    def _check_shown_file(self, path: str, shown_sha: str) -> None:
        from .. import loaders

        signature = loaders.file_signature(self.ctx.engine, path)
        before, self._seen_signature = self._seen_signature, (path, signature)
        if before is None or before[0] != path or before[1] == signature:
            return  # unchanged (or a note shown by show() alone: this look is the reference)
        sha = loaders.file_sha(self.ctx.engine, path)
        if sha != shown_sha:
            self.post_message(ReloadNote(path, shown_sha, gone=sha is None))

    def load(self, request: OpenNote) -> None:
        """Read and show ``request.path`` (a newer request makes an older answer stale)."""
        self.seq += 1
        self._load(self.seq, request)

    @work(thread=True, exclusive=True, group="note", exit_on_error=False)
    def _load(self, seq: int, request: OpenNote) -> None:
        from textual.worker import get_current_worker

        from .. import loaders

        worker = get_current_worker()
        # before the read: a save landing after this stat shows as a change at the next poll
        signature = loaders.file_signature(self.ctx.engine, request.path) if self.ctx is not None else None
        try:
            doc = loaders.note_document(self.ctx.engine, request, lambda: worker.is_cancelled,
                                        resolve_links=self.ctx.keyword_ready)
        except Exception as exc:  # EngineError: user-facing; anything else: report, keep the app alive
            self.post_message(NoteLoaded(seq, request, None, loaders.error_text(exc)))
            return
        if doc is not None:
            self._loaded_signature = (seq, doc.path, signature)
            self.post_message(NoteLoaded(seq, request, doc))

    _loaded_signature: tuple[int, str, tuple[int, int] | None] | None = None

    async def on_note_loaded(self, message: NoteLoaded) -> None:
        from ..render import line_anchor

        message.stop()
        if message.seq != self.seq:  # the user asked for another note meanwhile
            return
        req = message.request
        if message.error or message.doc is None:
            self.notify(message.error or "could not open the note", title="Open", severity="error")
            return
        doc = message.doc
        loaded = self._loaded_signature
        if loaded is not None and loaded[0] == message.seq and loaded[1] == doc.path:
            self._seen_signature = (doc.path, loaded[2])  # the file as read: the poll compares with it
        await self.show(doc)
        self.post_message(NoteShown(req, doc))
        line, end = req.line, req.end_line
        la = line_anchor(req.anchor)
        if la and line is None:
            line, end = la
        if line is not None:
            self.call_after_refresh(self.scroll_to_line, line, end)
            self.notify(f"{doc.path}  L{line}" + (f"–L{end}" if end and end != line else ""),
                        title="Opened at", timeout=4)
        elif req.anchor:
            anchor = req.anchor

            def _goto() -> None:
                if not self.scroll_to_heading(anchor.split("#")[-1]):
                    self.notify(f"No heading {anchor!r} in {doc.path}", severity="warning")

            self.call_after_refresh(_goto)

    def _vault_changed(self, change) -> None:
        rep, current = change.report, self.path
        if current and change.app_write:
            if self.doc is not None and self.doc.path == current:
                self._reload_if_changed(current, self.doc.sha)
            return
        if not current or change.first_pass or rep is None:
            return
        if current in rep.changed_paths:
            self.load(OpenNote(current, history=False))  # changed on disk: show the new text
        elif current in rep.removed_paths:
            why = next((sk.get("reason") for sk in rep.skipped if sk.get("path") == current), None)
            self.notify(f"{current} can no longer be read: {why}" if why else f"{current} was removed or renamed",
                        severity="warning")
        elif current in change.paths and self.doc is not None and self.doc.path == current:
            # another process (an agent over MCP, a CLI job) wrote and indexed it already, so this sync changed
            # nothing: compare the bytes shown with the file's
            self._reload_if_changed(current, self.doc.sha)

    @work(thread=True, group="note-check", exit_on_error=False)
    def _reload_if_changed(self, path: str, shown_sha: str) -> None:
        """(Worker.) The app wrote something: re-read the note shown when its file no longer has the bytes shown
        (a capture's card, the day page's card index)."""
        from .. import loaders

        sha = loaders.file_sha(self.ctx.engine, path)
        if sha != shown_sha:
            self.post_message(ReloadNote(path, shown_sha, gone=sha is None))

    def on_reload_note(self, message: ReloadNote) -> None:
        message.stop()
        if self.doc is None or self.doc.path != message.path or self.doc.sha != message.shown_sha:
            return  # another note, or already reloaded
        if message.gone:
            if self._gone_notified != message.path:
                self._gone_notified = message.path
                self.notify(f"{message.path} was removed or renamed", severity="warning")
            return
        self.load(OpenNote(message.path, history=False))  # still what was checked: show the new text

    async def show(self, doc: NoteDocument) -> None:
        """Render ``doc`` (awaits the Markdown widget's rebuild, so blocks exist when this returns)."""
        await self.mount_body()
        self.path = doc.path
        self.doc = doc
        md_note = doc.path.lower().endswith((".md", ".markdown")) and not doc.unwritten
        title = (f"{doc.path} · {ownership_label(doc.owner)}" if md_note
                 else f"{doc.path} · not written yet" if doc.unwritten else doc.path)
        # a file without write permission says so before ``e`` is pressed
        self.border_title = f"{title} · read-only" if doc.read_only else title
        intact = sum(1 for b in doc.app_blocks if b[2])
        self.owner_text = ownership_line(doc.owner, doc.owner_stamp, intact,
                                         len(doc.app_blocks) - intact) if md_note else ""
        self.owner_line.display = bool(self.owner_text)
        self.owner_line.tooltip = doc.owner_reason or None
        self._subtitle()
        summary = frontmatter_summary(doc.meta)
        if doc.warning:
            summary += ("  " if summary else "") + f"⚠ {doc.warning}"
        self.summary = summary
        self.meta.display = bool(summary)
        self.prov_links = provenance_links(doc.meta)
        self.prov.display = bool(self.prov_links)
        self._fit_meta()
        if doc.plain:
            self.scroller.display = False
            await self.markdown.update("")
            self.plain.line_number_start = doc.window_start
            self.plain.load_text(doc.body)
            self.plain.display = True
            self.plain.scroll_home(animate=False)
        else:
            self.plain.display = False
            self.plain.load_text("")
            self.scroller.display = True
            body = doc.body if doc.body.strip() else "*(empty note — press e to write in it)*"
            await self.markdown.update(body)
            self._mark_blocks(doc)
            self.scroller.scroll_home(animate=False)

    def _mark_blocks(self, doc: NoteDocument) -> None:
        """Class the rendered blocks: ``-app`` on those within reme's line ranges (a dim left gutter says they are
        reme's), ``callout -callout-<group>`` on callouts; word the marker labels (intact or edited)."""
        from .note_body import ReMeMarker

        ranges = doc.app_ranges
        begins = {b[0]: b[2] for b in doc.app_blocks}
        ends = {b[1]: b[2] for b in doc.app_blocks}
        for block in self.markdown.children:
            start, end = getattr(block, "source_range", (0, 0))
            first, last = start + doc.body_start_line, max(end, start + 1) - 1 + doc.body_start_line
            if any(a <= last and first <= b for a, b in ranges):
                block.add_class("-app")
            if isinstance(block, ReMeMarker):
                intact = (begins if block.kind.endswith("begin") else ends).get(first, True)
                block.set_label(intact)
            group = doc.callouts.get(start)
            if group is not None:
                block.add_class("callout", f"-callout-{group}")

    def set_history(self, back: bool, forward: bool) -> None:
        """Mark in the subtitle whether Back/Forward have somewhere to go."""
        self.history_hint = " ".join(t for t, ok in (("◂ back", back), ("forward ▸", forward)) if ok)
        self._subtitle()

    def _subtitle(self) -> None:
        doc = self.doc
        if doc is None:
            return
        if doc.windowed:
            text = (f"lines {doc.window_start}–{doc.window_end} of {doc.total_lines} · {human_size(doc.size)}"
                    " · alt+↓/↑ more")
        else:
            text = f"{doc.total_lines} lines · {human_size(doc.size)}" + (" · plain text" if doc.plain else "")
        self.border_subtitle = f"{text}  {self.history_hint}" if self.history_hint else text

    def _fit_meta(self) -> None:
        # cut with our cell-aware helper: Rich's ellipsis pads a wide character cut in half with a space
        width = self.meta.content_region.width or self.content_region.width - 2
        self.meta.update(Text(truncate_cells(self.summary, max(1, width)), no_wrap=True))
        if self.owner_text:
            self.owner_line.update(Text(truncate_cells(self.owner_text, max(1, width)), no_wrap=True))
        if self.prov_links:
            self.prov.update(self._prov_content(max(1, width)))

    def _prov_content(self, width: int) -> Content:
        """``↳ source_conversation: d29f6b31.jsonl · …`` with each target clickable (cut to ``width`` cells)."""
        parts: list[Content] = [Content("↳ ")]
        used = 2
        for i, (label, target) in enumerate(self.prov_links):
            shown = target.rsplit("/", 1)[-1]
            piece = f"{label}: "
            sep = " · " if i else ""
            need = len(sep) + Content(piece + shown).cell_length
            if used + need > width and i:
                parts.append(Content("…"))
                break
            if sep:
                parts.append(Content(sep))
            parts.append(Content.styled(piece, "dim"))
            parts.append(Content.from_markup(f"[@click=follow_provenance({i})]$shown[/]",
                                             shown=truncate_cells(shown, max(4, width - used - len(piece)))))
            used += need
        return Content("").join(parts)

    def on_resize(self) -> None:
        if self.summary or self.prov_links or self.owner_text:
            self.call_after_refresh(self._fit_meta)

    def action_follow_provenance(self, index: int) -> None:
        """Follow provenance link number ``index`` (a click on the provenance line)."""
        if 0 <= index < len(self.prov_links):
            target, _, anchor = self.prov_links[index][1].partition("#")
            self.post_message(FollowLink(target, anchor or None, self.path))

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
            row = max(0, min(line - doc.window_start, self.plain.document.line_count - 1))
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

    def follow_footnote(self, label: str) -> bool:
        """Scroll to the definition of footnote ``label`` (a click on its ``¹``); False when the note has none."""
        doc = self.doc
        line = doc.footnotes.get(label) if doc is not None else None
        if line is None:
            self.notify(f"No footnote {label!r} in this note", severity="warning")
            return False
        return self.scroll_to_line(line)

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
        if event.href.startswith(FOOTNOTE_SCHEME):
            self.follow_footnote(event.href[len(FOOTNOTE_SCHEME):])
            return
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
