"""The quick switcher (Ctrl+O): open any note by typing part of its title, an alias or its path.

An overlay widget of the main screen (its own CSS layer, hidden between openings), not a screen: pushing a
screen made Textual restyle and repaint the whole terminal (~700 strips at 120×40) on every opening; showing a
box on a layer repaints the box only. The note list is a :class:`~reme_tui.switcher.NoteIndex` the main screen
prepares in a thread worker after the index opens and after the vault changes (``MainScreen.note_index``), so
the first Ctrl+O is as quick as later ones; when none is ready the switcher reads it in its own worker.
Filtering runs on the UI thread with :class:`reme_tui.switcher.NoteMatcher` (a few ms per keystroke on 3,000
notes). An empty query lists the notes opened lately, then the newest files. When no note is called what was
typed, the last row offers to create it.

:meth:`QuickSwitcher.open` shows it; it closes on Escape, on Enter (calling ``done(("open", path))`` or
``done(("create", path))``, ``done(None)`` for Escape) or when the focus leaves it (a click elsewhere:
``done(None)``). Closing twice is a no-op, so two quick Enter presses act once. At most :data:`LIMIT` rows are
rendered (typing narrows).
"""

from __future__ import annotations

import time
from typing import Callable

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

#: Rows listed at most (the best ones; typing narrows).
LIMIT = 30


def match_prompt(m: Match, width: int) -> Text:
    """``title`` (matched characters underlined) then the dim path; ``= alias`` when an alias matched. ``width``:
    cells; the row is cut to it."""
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





class QuickSwitcher(Vertical):
    """The switcher box. ``engine``: the open Engine (its ``note_titles()`` is read in a worker when no index is
    handed over); ``keep_index(index)`` is called with a :class:`NoteIndex` it had to read itself, so the owner
    can hand it back next time (the owner drops it when the vault changes)."""

    BINDINGS = [
        Binding("escape", "close", "Close", id="switcher.close"),
        Binding("down", "move(1)", "Next", show=False, id="switcher.next"),
        Binding("up", "move(-1)", "Previous", show=False, id="switcher.previous"),
        Binding("pagedown", "move(10)", "Page down", show=False, id="switcher.page_down"),
        Binding("pageup", "move(-10)", "Page up", show=False, id="switcher.page_up"),
    ]

    class Loaded(Message):
        """(Internal.) The worker's note index (or error) and how long reading it took (ms)."""

        def __init__(self, index: NoteIndex | None, ms: float, error: str | None = None) -> None:
            super().__init__()
            self.index, self.ms, self.error = index, ms, error

    def __init__(self, engine, *, keep_index: Callable[[NoteIndex], None] | None = None, id: str = "switcher") -> None:
        super().__init__(id=id)
        self.engine = engine
        self.keep_index = keep_index
        self.cached_index: NoteIndex | None = None
        self.recent: list[str] = []
        self.done: Callable[[object], None] | None = None
        self.matcher: NoteMatcher | None = None
        self.matches: list[Match] = []
        self.create_path: str | None = None  # the "create" row's note, when offered
        self.filter_ms: list[float] = []  # per filtering (match + rows), for the benchmark and the curious
        self.paint_ms: list[float] = []  # per filtering: from the keystroke's handler until the screen refreshed
        self.load_ms = 0.0
        self.opened_at = 0.0  # perf_counter seconds of the last open()
        self.ready_at: float | None = None  # when this opening's first rows were set
        self.painted_at: float | None = None  # when the screen had refreshed after that
        self.is_open = False
        self._open_when_ready = False
        self._return_focus = None  # the widget focused before opening (Escape gives it back)
        self._fitted_width = 0
        self.display = False
        self.border_title = "Open note"
        self.border_subtitle = "↑↓ choose · Enter opens · Esc closes"
        self.input = Input("", placeholder="Open a note: title, alias or path (中文 / English)…", id="switcher-input")
        self.info = Static("", id="switcher-info", markup=False)
        self.list = OptionList(id="switcher-list")
        self.list.can_focus = False  # the keys stay in the input (↑↓ move the highlight from there)
        self.input.can_focus = False  # while closed: not the screen's first focus, not in the Tab order

    def compose(self) -> ComposeResult:
        yield self.input
        yield self.info
        yield self.list

    # -- opening and closing --------------------------------------------------------------------------------
    def open(self, recent: list[str] | None = None, initial: str = "", *, index: NoteIndex | None = None,
             done: Callable[[object], None] | None = None) -> None:
        """Show the switcher with ``initial`` typed; ``recent``: vault paths opened lately (most recent first);
        ``index``: the note index to match (None: read it in a worker); ``done(choice)`` is called once on
        closing. Ignored while already open."""
        if self.is_open:
            return
        self.is_open = True
        self.done = done
        self.recent = list(recent or [])
        self.opened_at = time.perf_counter()
        self.ready_at = self.painted_at = None
        self._open_when_ready = False
        focused = self.app.focused
        self._return_focus = focused if focused is not None and self not in focused.ancestors_with_self else None
        with self.input.prevent(Input.Changed):
            self.input.value = initial
            self.input.cursor_position = len(initial)
        self.display = True
        self.input.can_focus = True
        self.input.focus()
        if index is not None:
            if self.matcher is not None and self.matcher.index is index:
                self.matcher = NoteMatcher(index, self.recent)  # same folded fields, new recency
                self._ready()
            else:
                self.on_quick_switcher_loaded(self.Loaded(index, 0.0))
            return
        self.matcher = None
        self.info.update(Text("reading the note list…", style="dim italic"))
        self.list.clear_options()
        self.load_titles()

    def close(self, choice=None, *, focus: str = "back") -> None:
        """Hide the switcher and hand ``choice`` to ``done``; a no-op when already closed (a second Enter).
        ``focus``: ``"back"`` gives it to what had it before opening (Escape), ``"note"`` to the note pane (the
        caller opens a note), ``"keep"`` leaves it where the user moved it."""
        if not self.is_open:
            return
        self.is_open = False
        self._open_when_ready = False
        done, self.done = self.done, None
        back, self._return_focus = self._return_focus, None
        if focus != "keep":  # before hiding: a hidden focused input would leave the keys nowhere
            screen = self.screen
            if focus == "back" and back is not None and back.is_attached and back.focusable:
                back.focus()
            elif hasattr(screen, "note"):
                screen.note.focus_body()
            else:
                screen.set_focus(None)
        self.display = False
        self.input.can_focus = False
        if done is not None:
            done(choice)

    @on(Input.Blurred, "#switcher-input")
    def _blurred(self, event: Input.Blurred) -> None:
        if self.is_open:
            self.call_after_refresh(self._close_if_left)

    def _close_if_left(self) -> None:
        focused = self.app.focused
        if self.is_open and self.screen.is_current and (focused is None or self not in focused.ancestors_with_self):
            self.close(None, focus="keep")  # the user clicked or tabbed elsewhere: that keeps the focus

    @work(thread=True, exclusive=True, group="switcher", exit_on_error=False)
    def load_titles(self) -> None:
        t0 = time.perf_counter()
        try:
            index = NoteIndex(self.engine.note_titles())  # folding the fields here keeps the UI thread free
        except Exception as exc:  # a closed store: say so, keep the switcher usable for "create"
            self.post_message(self.Loaded(None, 0.0, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(self.Loaded(index, (time.perf_counter() - t0) * 1000))

    def on_quick_switcher_loaded(self, message: Loaded) -> None:
        message.stop()
        if not self.is_open:
            if message.index is not None and self.keep_index is not None:
                self.keep_index(message.index)
            return
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
        if width <= 1 and self._fitted_width > 1:
            # shown again, not laid out yet: last opening's width (a resize meanwhile re-cuts the rows on Resize)
            self.call_after_refresh(self._refit)
            return max(20, self._fitted_width - 1)
        if width <= 1:  # before the first layout: cut to a wide guess, and again once it is known
            self.call_after_refresh(self._refit)
            return 100
        self._fitted_width = width
        return max(20, width - 1)

    def _refit(self) -> None:
        w = self.list.scrollable_content_region.width
        if self.matcher is not None and self.is_open and w != self._fitted_width and w > 1:
            self.refilter()

    def on_resize(self) -> None:
        if self.is_open:
            self.call_after_refresh(self._refit)

    def refilter(self) -> None:
        """Match the typed text and show the rows (plus the "create" row when no note has that name)."""
        if self.matcher is None:
            return
        t0 = time.perf_counter()
        query = self.input.value
        self.matches = self.matcher.match(query, LIMIT)
        width = self._row_width()
        # Textual's own Content renders without a Rich console pass per row
        opts = [Option(Content.from_rich_text(match_prompt(m, width)), id=f"m{i}")
                for i, m in enumerate(self.matches)]
        self.create_path = None
        if query.strip() and not self.matcher.exact(query):
            self.create_path = note_path_for(query)
            if self.create_path:
                row = Text("+ Create ", style="italic")
                row.append(self.create_path, style="bold")
                opts.append(Option(Content.from_rich_text(fit_text(row, width)), id="create"))
        self.list.set_options(opts)
        if opts:
            self.list.highlighted = 0
        self.filter_ms.append((time.perf_counter() - t0) * 1000)
        self.call_after_refresh(self._painted, t0)
        n = len(self.matcher)
        if not query.strip():
            self.info.update(Text(f"{n} notes · recent first", style="dim"))
        elif self.matches:
            more = "+" if len(self.matches) == LIMIT else ""
            self.info.update(Text(f"{len(self.matches)}{more} of {n} notes", style="dim"))
        else:
            self.info.update(Text(f"no note matches {query.strip()!r}", style="dim"))

    def _painted(self, t0: float) -> None:
        now = time.perf_counter()
        self.paint_ms.append((now - t0) * 1000)
        if self.painted_at is None and self.ready_at is not None:
            self.painted_at = now

    @on(Input.Changed, "#switcher-input")
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        if self.is_open:
            self.refilter()

    @on(Input.Submitted, "#switcher-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not self.is_open:  # a second Enter queued behind the first
            return
        if self.matcher is None:  # the list is not in yet: open the best row when it arrives
            self._open_when_ready = True
            return
        self._choose(self.list.highlighted or 0)

    @on(OptionList.OptionSelected, "#switcher-list")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if self.is_open:
            self._choose(event.option_index)

    def _choose(self, index: int) -> None:
        if not self.list.option_count:
            return
        index = max(0, min(index, self.list.option_count - 1))
        oid = self.list.get_option_at_index(index).id
        if oid == "create" and self.create_path:
            self.close(("create", self.create_path), focus="note")
        elif oid and oid.startswith("m"):
            self.close(("open", self.matches[int(oid[1:])].note.path), focus="note")

    def action_move(self, step: int) -> None:
        n = self.list.option_count
        if n:
            self.list.highlighted = max(0, min(n - 1, (self.list.highlighted or 0) + step))

    def action_close(self) -> None:
        self.close(None)
