"""The search modal: an input, results that update as you type, and why each hit ranked.

Typing is debounced (~150 ms); each search runs in an exclusive thread worker and carries a sequence number, so
a stale answer (an older query finishing after a newer one) is dropped — the newest request wins.

Dismisses with the chosen ``reme_engine.search.hybrid.Hit`` (Enter) or ``None`` (Escape).
"""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from ..messages import SearchDone
from ..render import one_line, snippet, why_line

#: Milliseconds of quiet typing before a query is sent.
DEBOUNCE_S = 0.15
RESULT_LIMIT = 20
MODES = ("hybrid", "keyword")


def hit_prompt(hit) -> Text:
    """Three lines per hit: path and line range; one-line snippet; the why-line."""
    t = Text()
    t.append(hit.path, style="bold")
    t.append(f"  L{hit.start_line}-L{hit.end_line}", style="dim")
    if hit.headings:
        t.append("  " + " › ".join(one_line(h) for h in hit.headings[-2:]), style="italic dim")
    t.append("\n  " + (snippet(hit.text, 160) or "…"))
    t.append("\n  " + why_line(hit), style="dim")
    return t


class SearchResults(OptionList):
    """The result rows; posts ``OptionList.OptionSelected`` (handled by the screen)."""


class SearchScreen(ModalScreen):
    """Search the vault. ``initial``: text to start with; ``mode``: hybrid or keyword."""

    BINDINGS = [
        Binding("escape", "close", "Close", id="search.close"),
        Binding("ctrl+t", "toggle_mode", "Hybrid/keyword", id="search.mode"),
        Binding("down", "to_results", "Results", show=False, id="search.results"),
    ]

    def __init__(self, engine, *, initial: str = "", mode: str = "hybrid") -> None:
        super().__init__()
        self.engine = engine
        self.initial = initial
        self.mode = mode if mode in MODES else "hybrid"
        self.seq = 0  # number of the newest request
        self.shown_seq = 0  # number of the request whose results are on screen
        self.result = None  # the SearchResult on screen
        self._debounce: Timer | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="search-box"):
            with Horizontal(id="search-bar"):
                yield Input(self.initial, placeholder="Search notes (中文 / English)…", id="search-input")
                yield Static("", id="search-mode")
            yield Static("", id="search-info")
            yield SearchResults(id="search-results")

    def on_mount(self) -> None:
        self.query_one("#search-box").border_title = "Search"
        self._show_mode()
        self.query_one("#search-input", Input).focus()
        if self.initial.strip():
            self._schedule(0)
        else:
            self._info("Type to search. Enter opens, ↓ moves to results, Esc closes.")

    # -- helpers --------------------------------------------------------------------------------------------
    @property
    def results(self) -> SearchResults:
        return self.query_one(SearchResults)

    def _info(self, text: str) -> None:
        self.query_one("#search-info", Static).update(Text(text, style="dim", no_wrap=True, overflow="ellipsis"))

    def _show_mode(self) -> None:
        key = self.app.get_key_display(self.active_binding("search.mode")) if self.is_mounted else "ctrl+t"
        self.query_one("#search-mode", Static).update(Text(f" {self.mode} ({key})", style="bold"))

    def active_binding(self, binding_id: str):
        for active in self.app.active_bindings.values():
            if active.binding.id == binding_id:
                return active.binding
        return Binding("ctrl+t", "toggle_mode")

    def _schedule(self, delay: float = DEBOUNCE_S) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(delay, self._fire) if delay > 0 else None
        if delay <= 0:
            self._fire()

    def _fire(self) -> None:
        self._debounce = None
        query = self.query_one("#search-input", Input).value
        self.seq += 1
        if not query.strip():
            self.shown_seq = self.seq
            self.result = None
            self.results.clear_options()
            self._info("Type to search.")
            return
        self._info(f"searching {query!r}…")
        self.run_search(self.seq, query, self.mode)

    # -- the worker -----------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def run_search(self, seq: int, query: str, mode: str) -> None:
        """Engine search on a worker thread; the answer comes back as :class:`SearchDone`."""
        worker = get_current_worker()
        try:
            result = self.engine.search(query, limit=RESULT_LIMIT, mode=mode, neighbors=False)
        except Exception as exc:  # bad query syntax, closed store…: show it, never crash the modal
            if not worker.is_cancelled:
                self.post_message(SearchDone(seq, query, mode, error=str(exc) or type(exc).__name__))
            return
        if not worker.is_cancelled:
            self.post_message(SearchDone(seq, query, mode, result=result))

    def on_search_done(self, message: SearchDone) -> None:
        if message.seq < self.seq:  # a newer request is on its way: this answer is stale
            return
        self.shown_seq = message.seq
        if message.error:
            self.result = None
            self.results.clear_options()
            self._info(f"search failed: {message.error}")
            return
        res = message.result
        self.result = res
        self.results.set_options([Option(hit_prompt(h), id=str(i)) for i, h in enumerate(res.hits)])
        if res.hits:
            self.results.highlighted = 0
        note = f"{len(res.hits)} hits · {res.took_ms:.0f} ms · {res.mode}"
        if res.degraded:
            note += f" · {res.degraded}"
        self._info(note if res.hits else f"no hits for {message.query!r} ({res.mode})")

    # -- events ---------------------------------------------------------------------------------------------
    @on(Input.Changed, "#search-input")
    def _changed(self, event: Input.Changed) -> None:
        self._schedule()

    @on(Input.Submitted, "#search-input")
    def _submitted(self, event: Input.Submitted) -> None:
        if self._debounce is not None or self.shown_seq < self.seq:
            # results for what is typed are not in yet: search now, open the top hit when it arrives
            self._schedule(0)
            self._open_when_ready = True
            return
        self._open(self.results.highlighted or 0)

    _open_when_ready = False

    def on_search_done_after(self) -> None:  # pragma: no cover - placeholder for symmetry
        pass

    @on(OptionList.OptionSelected, "#search-results")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._open(event.option_index)

    def _open(self, index: int) -> None:
        if self.result is None or not self.result.hits:
            return
        index = max(0, min(index, len(self.result.hits) - 1))
        self.dismiss(self.result.hits[index])

    def action_close(self) -> None:
        self.dismiss(None)

    def action_toggle_mode(self) -> None:
        self.mode = MODES[(MODES.index(self.mode) + 1) % len(MODES)]
        self._show_mode()
        self._schedule(0)

    def action_to_results(self) -> None:
        if self.results.option_count:
            self.results.focus()
