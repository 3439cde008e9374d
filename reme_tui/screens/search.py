"""The search modal: an input, results that update as you type, and why each hit ranked.

Typing is debounced (~150 ms); each search runs in an exclusive thread worker and carries a sequence number, so
a stale answer (an older query finishing after a newer one) is dropped — the newest request wins.

Filters: a layer (daily / digest / resource / session, i.e. a path prefix) and a date range (inclusive
``YYYY-MM-DD`` bounds, matched against the date in ``daily/<date>`` / ``resource/<date>`` paths); Tab reaches them,
a change searches again.

Dismisses with the chosen ``reme_engine.search.results.Hit`` (Enter) or ``None`` (Escape).

One instance serves every opening (the main screen installs it; :meth:`SearchScreen.reopen` resets it before the
next push): composing and styling its ~25 widgets was most of the time ``/`` took to paint.
"""

from __future__ import annotations

import datetime as _dt

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from .modal import Dialog
from textual.timer import Timer
from textual.widgets import Input, OptionList, Select, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from ..messages import SearchDone
from ..widgets.footer import KeyFooter
from ..render import fit_text, one_line, snippet, why_line

#: Seconds of quiet typing before a query is sent.
DEBOUNCE_S = 0.15
RESULT_LIMIT = 20
MODES = ("hybrid", "keyword")


def hit_prompt(hit, width: int = 100, query: str = "") -> Text:
    """Three lines per hit, each cut to ``width`` cells: path, line range and headings; a one-line snippet
    around the first query term; the why-line."""
    head = Text()
    head.append(hit.path, style="bold")
    head.append(f"  L{hit.start_line}-L{hit.end_line}", style="dim")
    if hit.headings:
        head.append("  " + " › ".join(one_line(h) for h in hit.headings[-2:]), style="italic dim")
    body = Text("  " + (snippet(hit.text, max(8, width - 2), query) or "…"))
    why = Text("  " + why_line(hit), style="dim")
    return Text("\n").join([fit_text(head, width), body, fit_text(why, width)])


def plural(n: int, word: str) -> str:
    """``1 hit``, ``2 hits``, ``0 hits``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


#: Candidates the engine's vector leg fetches for :data:`RESULT_LIMIT` hits (``min(200, 5·limit)``, see
#: ``reme_engine.search.hybrid``): a hidden count near it is that leg's whole tail, not weaker matches.
VECTOR_CANDIDATES = min(200, 5 * RESULT_LIMIT)


def hidden_text(hidden: int) -> str:
    """What the engine's relative floor hid, for the info line: ``" · 3 weaker hits hidden"``; when the count
    is most of the vector leg's candidates (nearest notes by meaning, ranked whatever their distance), a count
    would say nothing: ``" · weaker semantic matches hidden"``. ``""`` when nothing was hidden."""
    if hidden <= 0:
        return ""
    if hidden >= VECTOR_CANDIDATES // 2:
        return " · weaker semantic matches hidden"
    return f" · {plural(hidden, 'weaker hit')} hidden"


def time_range_text(time_range: dict | None) -> str:
    """The date range the engine read from the query's time words, for the info line:
    ``" · dates 2026-11-23..2026-11-29 (last week)"``, ``listing`` adding that hits are what is dated then,
    newest first. ``""`` without one."""
    if not time_range:
        return ""
    lo, hi = time_range.get("date_from") or "…", time_range.get("date_to") or "…"
    span = lo if lo == hi else f"{lo}..{hi}"
    phrase = one_line(str(time_range.get("phrase") or "")).strip()
    out = f" · dates {span}" + (f" ({phrase!r})" if phrase else "")
    if time_range.get("listing"):
        out += ": what is dated then, newest first"
    return out


#: What the info line says while the vector model loads (the hits are the keyword leg's).
MODEL_LOADING = "vector model loading: keyword results for now"


def model_loading(engine) -> bool:
    """True while ``engine``'s embedder still has its model to load (a hybrid search would wait for it); False
    without an embedder or for one with nothing to load (a remote endpoint)."""
    emb = getattr(engine, "embedder", None)
    return emb is not None and getattr(engine, "vectors", None) is not None and not getattr(emb, "loaded", True)


class ModelLoaded(Message):
    """(Internal.) The embedder's model is loaded: a keyword answer given meanwhile can be searched again."""


class SearchResults(OptionList):
    """The result rows; posts ``OptionList.OptionSelected`` (handled by the screen)."""


class SearchScreen(Dialog):
    """Search the vault. ``initial``: text to start with; ``mode``: hybrid or keyword."""

    BINDINGS = [
        Binding("escape", "close", "Close", id="search.close"),
        Binding("ctrl+t", "toggle_mode", "Hybrid/keyword", id="search.mode"),
        # arrows move through the results while typing goes on in the input (as in the command palette)
        Binding("down", "move(1)", "Next", show=False, id="search.next"),
        Binding("up", "move(-1)", "Previous", show=False, id="search.previous"),
        Binding("pagedown", "move(5)", "Page down", show=False, id="search.page_down"),
        Binding("pageup", "move(-5)", "Page up", show=False, id="search.page_up"),
        Binding("ctrl+f", "focus_filters", "Filters", id="search.filters"),
    ]

    def __init__(self, engine, *, initial: str = "", mode: str = "hybrid", layers=None, vault_changed=None,
                 folders: list[str] | None = None) -> None:
        """``layers``: the layer settings; ``folders``: the vault's top-level folders (the layer filter offers
        those, layers first, instead of layers the vault does not have; None: the layer folders);
        ``vault_changed``: the main screen's signal, so results on screen follow the index."""
        super().__init__()
        self.engine = engine
        self.layer_settings = layers
        self.folders = folders
        self.vault_changed = vault_changed
        self.initial = initial
        self.mode = self._start_mode = mode if mode in MODES else "hybrid"
        self._opened = False  # this push's opening has started (see on_screen_resume)
        self.seq = 0  # number of the newest request
        self.shown_seq = 0  # number of the request whose results are on screen
        self.result = None  # the SearchResult on screen
        self._debounce: Timer | None = None
        self._open_when_ready = False  # Enter came before the results for the typed text
        self._keep_highlight: int | None = None  # a re-run after an index change keeps the row
        self._width = 0  # cells per result row when the rows were built
        self._model_loading = False  # load_model is loading the embedder's model

    def compose(self) -> ComposeResult:
        # Widgets are kept as attributes: nested children may not be mounted yet when on_mount runs.
        self.input = Input(self.initial, placeholder="Search notes (中文 / English)…", id="search-input")
        self.mode_label = Static(self._mode_text(), id="search-mode")
        self.info = Static(self._info_text("Type to search · ↑↓ choose · Enter opens · Esc closes"),
                           id="search-info")
        self.results = SearchResults(id="search-results")
        layer_opts = [(f"in {name}/", name) for name in self._layer_dirs()]
        self.layer_select = Select(layer_opts, prompt="all layers", allow_blank=True, id="search-layer", compact=True)
        self.date_from = Input(placeholder="from YYYY-MM-DD", id="search-from", compact=True, max_length=10)
        self.date_to = Input(placeholder="to YYYY-MM-DD", id="search-to", compact=True, max_length=10)
        box = Vertical(id="search-box")
        box.border_title = "Search"
        with box:
            with Horizontal(id="search-bar"):
                yield self.input
                yield self.mode_label
            with Horizontal(id="search-filters"):
                yield self.layer_select
                yield self.date_from
                yield self.date_to
            yield self.info
            yield self.results
        yield KeyFooter()

    def on_mount(self) -> None:
        if self.vault_changed is not None:
            self.vault_changed.subscribe(self, self._vault_changed)

    def _vault_changed(self, _change) -> None:
        if self.app.screen is self:  # closed (kept for the next opening): nothing on screen to follow
            self.refresh_results()

    def on_screen_resume(self) -> None:
        # each push (the first one included) starts an opening; a reopened screen is already mounted
        if not self.begin_opening(self.input):
            return
        if self.mode == "hybrid" and model_loading(self.engine):
            self.load_model()  # while the query is typed
        if self.initial.strip():
            self.call_after_refresh(self._schedule, 0)

    def on_screen_suspend(self) -> None:
        if self.app.screen is not self and self not in self.app.screen_stack and self._debounce is not None:
            self._debounce.stop()  # closed: a query typed just before must not run while it is kept
            self._debounce = None

    def reopen(self, initial: str = "", folders: list[str] | None = None) -> None:
        """Make a closed search ready to be pushed again, as a new one would be: the input holds ``initial``, no
        results, no filters, the first mode; ``folders``: the vault's top-level folders now (the layer filter)."""
        self._dismissed = False
        self._opened = False
        self.initial = initial
        if self._debounce is not None:
            self._debounce.stop()
            self._debounce = None
        self.seq += 1  # an answer still on its way for the last opening is stale
        self.shown_seq = self.seq
        self.result = None
        self._open_when_ready = False
        self._keep_highlight = None
        self._width = 0
        self.mode = self._start_mode
        self._show_mode()
        self._info("Type to search · ↑↓ choose · Enter opens · Esc closes")
        self.results.clear_options()
        with self.input.prevent(Input.Changed):
            self.input.value = initial
            self.input.cursor_position = len(initial)
        for field in (self.date_from, self.date_to):
            with field.prevent(Input.Changed):
                field.value = ""
        if folders != self.folders:
            self.folders = folders
            with self.layer_select.prevent(Select.Changed):
                self.layer_select.set_options([(f"in {name}/", name) for name in self._layer_dirs()])
        with self.layer_select.prevent(Select.Changed):
            self.layer_select.clear()

    # -- filters --------------------------------------------------------------------------------------------
    def _layer_dirs(self) -> list[str]:
        lay = self.layer_settings
        if lay is None:
            layers = ["daily", "digest", "resource", "session"]
        else:
            dirs = [lay.daily_dir, lay.digest_dir, lay.resource_dir, lay.session_dir]
            layers = [d.strip("/") for d in dirs if d and d.strip("/")]
        if self.folders is None:
            return layers
        # an Obsidian vault has its own folders: offer those that exist (layers first), never a missing layer
        have = [f for f in self.folders if "/" not in f]
        return [d for d in layers if d in have] + sorted((f for f in have if f not in layers), key=str.casefold)

    def filters(self):
        """The ``SearchFilters`` the filter row describes (None when no filter is set). Raises ValueError for a
        malformed date."""
        from reme_engine.search.results import SearchFilters  # a result-types module (plain data)

        layer = self.layer_select.value if isinstance(self.layer_select.value, str) else None
        bounds = []
        for field in (self.date_from, self.date_to):
            v = field.value.strip()
            if v:
                try:
                    _dt.date.fromisoformat(v)
                except ValueError:
                    raise ValueError(f"{v!r} is not a date (YYYY-MM-DD)") from None
            bounds.append(v or None)
        if not layer and not bounds[0] and not bounds[1]:
            return None
        return SearchFilters(path_prefix=f"{layer}/" if layer else None, date_from=bounds[0], date_to=bounds[1])

    def _filter_text(self) -> str:
        f = None
        try:
            f = self.filters()
        except ValueError:
            return ""
        if f is None:
            return ""
        bits = []
        if f.path_prefix:
            bits.append(f.path_prefix)
        if f.date_from or f.date_to:
            bits.append(f"{f.date_from or '…'}..{f.date_to or '…'}")
        return " · filter " + " ".join(bits)

    @on(Select.Changed, "#search-layer")
    def _layer_changed(self, event: Select.Changed) -> None:
        event.stop()
        if self.is_mounted:
            self._schedule(0)

    @on(Input.Changed, "#search-from, #search-to")
    def _dates_changed(self, event: Input.Changed) -> None:
        event.stop()
        v = event.value.strip()
        if not v or len(v) == 10:
            self._schedule()

    @on(Input.Submitted, "#search-from, #search-to")
    def _dates_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._schedule(0)
        self.input.focus()

    # -- helpers --------------------------------------------------------------------------------------------
    @staticmethod
    def _info_text(text: str) -> Text:
        return Text(text, style="dim", no_wrap=True, overflow="ellipsis")

    def _info(self, text: str) -> None:
        self.info.update(self._info_text(text), layout=False)  # one row (app.tcss): its size never changes

    def _mode_text(self) -> Text:
        return Text(f" {self.mode} ", style="bold reverse")

    def _show_mode(self) -> None:
        self.mode_label.update(self._mode_text())

    def _schedule(self, delay: float = DEBOUNCE_S) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(delay, self._fire) if delay > 0 else None
        if delay <= 0:
            self._fire()

    def _fire(self) -> None:
        self._debounce = None
        query = self.input.value
        self.seq += 1
        if not query.strip():
            self.shown_seq = self.seq
            self.result = None
            self.results.clear_options()
            self._info("Type to search.")
            return
        try:
            filters = self.filters()
        except ValueError as exc:
            self.shown_seq = self.seq
            self._info(str(exc))
            return
        self._info(f"searching {query!r}…")
        self.run_search(self.seq, query, self.mode, filters)

    def refresh_results(self) -> None:
        """Run the shown query again (the index changed under it: a note saved elsewhere, a watcher batch),
        keeping the highlighted row."""
        if self.input.value.strip() and self._debounce is None:
            self._keep_highlight = self.results.highlighted
            self._fire()

    # -- the worker -----------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def run_search(self, seq: int, query: str, mode: str, filters=None) -> None:
        """Engine search on a worker thread; the answer comes back as :class:`SearchDone`."""
        worker = get_current_worker()
        # (``loaded`` turns True as the model object is made, before its weights are read: our own load counts)
        waiting_model = mode == "hybrid" and (self._model_loading or model_loading(self.engine))
        try:
            # Loading the vector model takes 1–4 s (more while a first index runs): answer from keywords at once,
            # load it on its own worker and search again when it is in (see on_model_loaded).
            result = self.engine.search(query, limit=RESULT_LIMIT, mode="keyword" if waiting_model else mode,
                                        filters=filters, neighbors=False)
            if waiting_model:
                result.degraded = MODEL_LOADING
                self.app.call_from_thread(self.load_model)
        except Exception as exc:  # bad query syntax, closed store…: show it, never crash the modal
            if not worker.is_cancelled:
                self.post_message(SearchDone(seq, query, mode, error=str(exc) or type(exc).__name__))
            return
        if not worker.is_cancelled:
            self.post_message(SearchDone(seq, query, mode, result=result))

    @work(thread=True, exclusive=True, group="search-model", exit_on_error=False)
    def load_model(self) -> None:
        """Load the embedder's model (a no-op once loaded), then search again: the keyword answer on screen
        becomes the hybrid one."""
        emb = getattr(self.engine, "embedder", None)
        if emb is None or getattr(emb, "loaded", True) or self._model_loading:
            return
        self._model_loading = True  # set on this worker's thread before the load: a search meanwhile sees it
        try:
            emb.load()
        except Exception:  # the hybrid search reports the embedder's failure itself
            pass
        finally:
            self._model_loading = False
        self.post_message(ModelLoaded())

    def _first_pass(self) -> tuple[int, int] | None:
        """``(files done, files to do)`` while the app's first keyword pass runs, else None."""
        main = getattr(self.app, "main_screen", None)
        return getattr(main, "first_pass_progress", None)

    def index_grew(self) -> None:
        """The first keyword pass committed another batch: a shown answer short of :data:`RESULT_LIMIT` hits (none
        yet, a few) is searched again, so what was typed before the notes were in finds them."""
        if (self.app.screen is self and self.result is not None and len(self.result.hits) < RESULT_LIMIT
                and self.shown_seq == self.seq):
            self.refresh_results()

    def on_model_loaded(self, message: ModelLoaded) -> None:
        if self.app.screen is self and self.result is not None and self.result.degraded == MODEL_LOADING:
            self.refresh_results()

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
        keep, self._keep_highlight = self._keep_highlight, None
        self._fill(res, keep or 0)
        note = f"{plural(len(res.hits), 'hit')} · {res.took_ms:.0f} ms · {res.mode}"
        weaker = hidden_text(int(getattr(res, "hidden", 0) or 0))
        if res.degraded:
            note += f" · {res.degraded}"
        ftext = self._filter_text() + time_range_text(getattr(res, "time_range", None))
        if res.hits:
            self._info(note + weaker + ftext)
        elif (growing := self._first_pass()) is not None:
            # not a dead end: the first index is still coming in, and this search runs again as it grows
            done, total = growing
            self._info(f"nothing yet for {message.query!r}: indexing, {done} of {total} files in — searching "
                       f"again as notes come in{ftext}")
        else:
            self._info(f"no hits for {message.query!r} ({res.mode}){weaker}{ftext}")
        if self._open_when_ready and message.seq == self.seq:
            self._open_when_ready = False
            self._open(0)

    def _row_width(self) -> int:
        return max(20, self.results.scrollable_content_region.width - 1)

    def _fill(self, res, highlight: int | None) -> None:
        self._width = width = self._row_width()
        self.results.set_options([Option(hit_prompt(h, width, res.query), id=str(i)) for i, h in enumerate(res.hits)])
        if res.hits and highlight is not None:
            self.results.highlighted = min(highlight, len(res.hits) - 1)

    def on_resize(self) -> None:
        if self.result is not None and self._row_width() != self._width:
            self._fill(self.result, self.results.highlighted)

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

    def action_focus_filters(self) -> None:
        self.layer_select.focus()

    def action_toggle_mode(self) -> None:
        self.mode = MODES[(MODES.index(self.mode) + 1) % len(MODES)]
        self._show_mode()
        self._schedule(0)

    def action_move(self, step: int) -> None:
        n = self.results.option_count
        if n:
            cur = self.results.highlighted or 0
            self.results.highlighted = max(0, min(n - 1, cur + step))
