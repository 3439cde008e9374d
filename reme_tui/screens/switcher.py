"""The quick switcher (Ctrl+O): open any note by typing part of its title, an alias or its path.

The note list comes from ``engine.note_titles()`` in a thread worker (one SQL query); filtering runs on the UI
thread with :class:`reme_tui.switcher.NoteMatcher` (a few ms per keystroke on 3,000 notes). An empty query lists
the notes opened lately, then the newest files. When no note is called what was typed, the last row offers to
create it.

Dismisses with ``("open", path)``, ``("create", path)`` or None (Escape).

One instance serves every opening: the main screen installs it, so closing keeps its widgets mounted, and
:meth:`QuickSwitcherScreen.reopen` resets it before the next push — building and laying out the dialog was most of
an opening's time. At most :data:`LIMIT` rows are rendered (typing narrows).
"""

from __future__ import annotations

import time

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from ..render import fit_text, one_line
from ..switcher import Match, NoteIndex, NoteMatcher
from .dialogs import note_path_for
from .modal import Dialog

#: Rows listed at most (the best ones; typing narrows).
LIMIT = 30


def match_prompt(m: Match, width: int) -> Text:
    """``title`` (matched characters underlined) then the dim path; ``= alias`` when an alias matched."""
    note = m.note
    t = Text()
    if m.field == "title" and m.positions:
        t.append(_marked(note.title, m.positions))
    else:
        t.append(one_line(note.title), style="bold")
    if m.field == "alias":
        t.append("  = ", style="dim")
        t.append(_marked(m.text, m.positions, ""))
    t.append("  ")
    if m.field == "path" and m.positions:
        t.append(_marked(m.text + ".md" if note.path.endswith(".md") else m.text, m.positions, "dim"))
    else:
        t.append(note.path, style="dim")
    return fit_text(t, width)


def _marked(text: str, positions: list[int], base: str = "bold") -> Text:
    out = Text(text.replace("\n", " "), style=base)  # same length: positions stay valid
    for p in positions:
        if p < len(out.plain):
            out.stylize("bold underline", p, p + 1)
    return out


class QuickSwitcherScreen(Dialog[tuple[str, str] | None]):
    """``engine``: the open Engine; ``recent``: vault paths opened lately (most recent first)."""

    BINDINGS = [
        Binding("escape", "close", "Close", id="switcher.close"),
        Binding("down", "move(1)", "Next", show=False, id="switcher.next"),
        Binding("up", "move(-1)", "Previous", show=False, id="switcher.previous"),
        Binding("pagedown", "move(10)", "Page down", show=False, id="switcher.page_down"),
        Binding("pageup", "move(-10)", "Page up", show=False, id="switcher.page_up"),
    ]

    class Loaded(Message):
        """(Internal.) The worker's note list (or error) and how long reading it took (ms)."""

        def __init__(self, index: NoteIndex | None, ms: float, error: str | None = None) -> None:
            super().__init__()
            self.index, self.ms, self.error = index, ms, error

    def __init__(self, engine, recent: list[str] | None = None, initial: str = "", *,
                 index: NoteIndex | None = None, keep_index=None) -> None:
        """``index``: a note index kept from an earlier opening (None: read it); ``keep_index(index)`` is called
        with one this dialog read, so the next opening is instant (the caller drops it when the vault changes)."""
        super().__init__()
        self.engine = engine
        self.cached_index = index
        self.keep_index = keep_index
        self.recent = list(recent or [])
        self.matcher: NoteMatcher | None = None
        self.matches: list[Match] = []
        self.create_path: str | None = None  # the "create" row's note, when offered
        self.file_path: str | None = None  # the "open" row of a file in the vault that the index left out
        self.filter_ms: list[float] = []  # per filtering (match + rows), for the benchmark and the curious
        self.load_ms = 0.0
        self.created_at = time.perf_counter()
        self.ready_at: float | None = None  # when the first rows were set (perf_counter seconds)
        self.painted_at: float | None = None  # when the screen had refreshed after that
        self.paint_ms: list[float] = []  # per filtering: from the keystroke's handler until the screen refreshed
        self._open_when_ready = False
        self._opened = False  # this push's opening has started (see on_screen_resume)
        self.input = Input(initial, placeholder="Open a note: title, alias or path (中文 / English)…",
                           id="switcher-input")
        self.info = Static("", id="switcher-info", markup=False)
        self.list = OptionList(id="switcher-list")

    def compose(self) -> ComposeResult:
        box = Vertical(id="switcher-box")
        box.border_title = "Open note"
        box.border_subtitle = "↑↓ choose · Enter opens · Esc closes"
        with box:
            yield self.input
            yield self.info
            yield self.list

    def reopen(self, recent: list[str] | None = None, initial: str = "", *, index: NoteIndex | None = None) -> None:
        """Make a closed switcher ready to be pushed again: the input holds ``initial``, notes opened lately are
        ``recent``, ``index`` is the note index to match against (None: read it again, the vault changed)."""
        self._dismissed = False
        self.recent = list(recent or [])
        self.cached_index = index
        self.created_at = time.perf_counter()
        self.ready_at = self.painted_at = None
        self._open_when_ready = False
        self._opened = False
        with self.input.prevent(Input.Changed):
            self.input.value = initial
            self.input.cursor_position = len(initial)

    def on_screen_resume(self) -> None:
        # each push (the first one included) starts an opening; a reopened screen is already mounted
        if not self.begin_opening(self.input):
            return
        if self.cached_index is not None:
            if self.matcher is not None and self.matcher.index is self.cached_index:
                self.matcher = NoteMatcher(self.cached_index, self.recent)  # same folded fields, new recency
                self._ready()
            else:
                self.on_quick_switcher_screen_loaded(self.Loaded(self.cached_index, 0.0))
            return
        self.matcher = None
        self.info.update(Text("reading the note list…", style="dim italic"))
        self.list.clear_options()
        self.load_titles()

    @work(thread=True, exclusive=True, group="switcher", exit_on_error=False)
    def load_titles(self) -> None:
        t0 = time.perf_counter()
        try:
            index = NoteIndex(self.engine.note_titles())  # folding the fields here keeps the UI thread free
        except Exception as exc:  # a closed store: say so, keep the dialog usable for "create"
            self.post_message(self.Loaded(None, 0.0, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(self.Loaded(index, (time.perf_counter() - t0) * 1000))

    def on_quick_switcher_screen_loaded(self, message: Loaded) -> None:
        self.load_ms = message.ms
        if message.error:
            self.info.update(Text(f"⚠ {message.error}", style="italic"))
            self.matcher = NoteMatcher([])
        else:
            self.matcher = NoteMatcher(message.index, self.recent)
            if self.keep_index is not None and message.index is not self.cached_index:
                self.keep_index(message.index)
            self.cached_index = message.index
        self._ready()

    def _ready(self) -> None:
        self.refilter()
        self.ready_at = time.perf_counter()
        if self._open_when_ready:
            self._open_when_ready = False
            self._choose(self.list.highlighted or 0)

    # -- filtering ------------------------------------------------------------------------------------------
    def _row_width(self) -> int:
        width = self.list.scrollable_content_region.width
        if width <= 1:  # before the first layout: cut to a wide guess, and again once it is known
            self.call_after_refresh(self._refit)
            return 100
        self._fitted_width = width
        return max(20, width - 1)

    def _refit(self) -> None:
        if self.matcher is not None and self.list.scrollable_content_region.width != self._fitted_width \
                and self.list.scrollable_content_region.width > 1:
            self.refilter()

    _fitted_width = 0

    def refilter(self) -> None:
        """Match the typed text and show the rows (plus the "create" row when no note has that name)."""
        if self.matcher is None:
            return
        t0 = time.perf_counter()
        query = self.input.value
        self.matches = self.matcher.match(query, LIMIT)
        width = self._row_width()
        # Textual's own Content renders without a Rich console pass per row (a fifth of an opening's CPU)
        opts = [Option(Content.from_rich_text(match_prompt(m, width)), id=f"m{i}")
                for i, m in enumerate(self.matches)]
        self.create_path = self.file_path = None
        if query.strip() and not self.matcher.exact(query):
            path = note_path_for(query)
            if path and self._on_disk(path):
                # a file the index left out (too large, binary, …): open it (the pane says why), never "create"
                self.file_path = path
                row = Text("↪ Open ", style="italic")
                row.append(path, style="bold")
                row.append(" (in the vault, not indexed)", style="dim")
                opts.append(Option(Content.from_rich_text(fit_text(row, width)), id="file"))
            elif path:
                self.create_path = path
                row = Text("+ Create ", style="italic")
                row.append(self.create_path, style="bold")
                opts.append(Option(Content.from_rich_text(fit_text(row, width)), id="create"))
        self.list.set_options(opts)
        if opts:
            self.list.highlighted = 0
        self.filter_ms.append((time.perf_counter() - t0) * 1000)
        self.call_after_refresh(self._painted, t0)
        n = len(self.matcher)
        # the info line is one row (app.tcss): new text never changes its size, no layout for it
        if not query.strip():
            self.info.update(Text(f"{n} notes · recent first", style="dim"), layout=False)
        elif self.matches:
            more = "+" if len(self.matches) == LIMIT else ""
            self.info.update(Text(f"{len(self.matches)}{more} of {n} notes", style="dim"), layout=False)
        else:
            self.info.update(Text(f"no note matches {query.strip()!r}", style="dim"), layout=False)

    def _on_disk(self, path: str) -> bool:
        """True when the vault holds a file at ``path`` (a stat: microseconds); False for a path that escapes."""
        try:
            vault = self.engine.vault.resolve()
            target = (vault / path).resolve()
            return target.is_relative_to(vault) and target.is_file()
        except (OSError, RuntimeError, ValueError, AttributeError):
            return False

    def _painted(self, t0: float) -> None:
        now = time.perf_counter()
        self.paint_ms.append((now - t0) * 1000)
        if self.painted_at is None and self.ready_at is not None:
            self.painted_at = now

    @on(Input.Changed, "#switcher-input")
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        # One filtering for a burst of keys (a fast typist, a paste, keys held by type-ahead): queued behind the
        # keys already waiting, it reads the input's value when it runs; each key filtered and laid out the list
        # before the next key's echo could paint.
        if not self._refilter_queued:
            self._refilter_queued = True
            self.call_later(self._queued_refilter)

    _refilter_queued = False

    def _queued_refilter(self) -> None:
        if self._refilter_queued:  # not flushed already
            self._refilter_queued = False
            self.refilter()

    def _flush_refilter(self) -> None:
        """Filter now when a filtering is queued: Enter or an arrow typed right after the text acts on its rows."""
        if self._refilter_queued:
            self._refilter_queued = False
            self.refilter()

    @on(Input.Submitted, "#switcher-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.matcher is None:  # the list is not in yet: open the best row when it arrives
            self._open_when_ready = True
            return
        self._flush_refilter()
        self._choose(self.list.highlighted or 0)

    @on(OptionList.OptionSelected, "#switcher-list")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._choose(event.option_index)

    def _choose(self, index: int) -> None:
        if not self.list.option_count:
            return
        index = max(0, min(index, self.list.option_count - 1))
        oid = self.list.get_option_at_index(index).id
        if oid == "create" and self.create_path:
            self.dismiss(("create", self.create_path))
        elif oid == "file" and self.file_path:
            self.dismiss(("open", self.file_path))
        elif oid and oid.startswith("m"):
            self.dismiss(("open", self.matches[int(oid[1:])].note.path))

    def action_move(self, step: int) -> None:
        self._flush_refilter()
        n = self.list.option_count
        if n:
            self.list.highlighted = max(0, min(n - 1, (self.list.highlighted or 0) + step))

    def action_close(self) -> None:
        self.dismiss(None)
