"""The main screen: the coordinator of the panes.

Panes load their own data (pure loaders of ``loaders.py`` in thread workers, results posted to themselves) and
talk up with messages: :class:`OpenNote`, :class:`FollowLink`, :class:`OpenDay`, :class:`NoteShown`, … This
screen routes them (open a note, follow a link, create a day), keeps the :class:`~reme_tui.history.History`, runs
the index passes and the refresh, and publishes the ``vault_changed`` signal the panes subscribe to when the index
saw files change. The chat session (``chat_session.py``), ``$EDITOR`` (``editor.py``), link following
(``link_follow.py``) and the status line (``widgets/status_line.py``) live in their own modules. Every engine call
runs in a thread worker (ARCHITECTURE §7.1); handlers here run on the UI thread. The layout rules and focus moves
are in ``screens/layout.py``, the dialogs and screens it opens (new note, Changes, status, search, quick switcher)
in ``screens/openers.py``.

Layout (``#panes``)::

    ┌ Daily / Vault ┐┌ note ──────────────┐┌ Links ─────┐
    │ dates         ││                    ││ neighbours │
    │ day + cards   │├ Chat ──────────────┤├ Agenda ────┤
    └───────────────┘└────────────────────┘└────────────┘
    status line · footer
"""

from __future__ import annotations

import time
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import Reactive
from textual.screen import Screen
from textual.signal import Signal
from textual.widgets import ContentSwitcher
from textual.worker import Worker, get_current_worker

from .. import editor, indexing, link_follow, loaders
from ..context import PaneContext, VaultChange
from ..history import History
from .modal import StyledOnce
from ..messages import (
    ChatReply,
    ChatSaved,
    CronEvent,
    DayLoaded,
    DayOpened,
    EditFinished,
    EditReady,
    FollowLink,
    IndexFinished,
    IndexProgress,
    LinkResolved,
    NoteShown,
    OpenDay,
    OpenNote,
    RefreshFinished,
    StartNoteFound,
    VaultChanged,
)
from ..widgets.agenda import AgendaPane
from ..widgets.chat import ChatPane
from ..widgets.daily import DailyPane
from ..widgets.footer import KeyFooter
from ..widgets.neighbours import NeighboursList
from ..widgets.note_view import NoteView
from ..widgets.status_line import StatusLine
from ..widgets.vault_tree import VaultTree
from .layout import PaneLayout
from .openers import ScreenOpeners

#: Status line text while the engine's embed thread adds vectors for notes saved elsewhere.
BACKGROUND_EMBED = "embedding new notes…"
#: Seconds after a vault change before the quick switcher's note list is read again (a burst of changes: once).
NOTE_INDEX_DELAY = 0.5
#: Seconds between two re-runs of an open search's short answer while the first keyword pass commits batches.
SEARCH_FOLLOW_S = 1.0


class NoteIndexReady(Message):
    """(Internal.) The quick switcher's note list read by a worker; ``generation``: the invalidations seen when
    it started (a list read before a later change is dropped)."""

    def __init__(self, index, generation: int) -> None:
        super().__init__()
        self.index, self.generation = index, generation


class MainScreen(StyledOnce, PaneLayout, ScreenOpeners, Screen):
    """Daily/Vault │ note (+ chat) │ links + agenda. ``engine``: the open ``reme_engine.engine.Engine``;
    ``settings``: its Settings; ``vault_changed``: the signal panes subscribe to (payload ``VaultChange``)."""

    BINDINGS = [
        Binding("slash", "search", "Search", id="search", tooltip="Search the vault as you type (filters: layer, dates)"),
        Binding("ctrl+o", "quick_switch", "Open", id="quick_switch", tooltip="Quick switcher: open a note by title, alias or path"),
        Binding("t", "today", "Today", id="today", tooltip="Today's day page and cards (created when needed)"),
        Binding("a", "agenda", "Agenda", id="agenda", tooltip="Today's proactive agenda and topics"),
        Binding("g", "neighbours", "Links", id="neighbours", tooltip="Links pane: the graph around the note"),
        Binding("c", "chat", "Chat", id="chat", tooltip="Chat input (a quick-capture journal without an LLM)"),
        Binding("e", "edit", "Edit", id="edit", tooltip="Edit the note in $EDITOR, then re-index it"),
        Binding("r", "refresh", "Refresh", id="refresh", tooltip="Run today's proactive refresh now"),
        Binding("R", "reindex", "Re-index", show=False, id="reindex", tooltip="Bring the index up to date now"),
        Binding("f", "follow_link", "Follow link", show=False, id="follow_link", tooltip="Pick one of the note's links to follow"),
        Binding("left_square_bracket", "step_day(1)", "Day before", show=False, id="previous_day"),
        Binding("right_square_bracket", "step_day(-1)", "Day after", show=False, id="next_day"),
        Binding("d", "daily", "Daily pane", show=False, id="daily"),
        Binding("ctrl+t", "focus_tree", "Vault tree", show=False, id="focus_tree"),
        Binding("ctrl+l", "focus_links", "Links pane", show=False, id="focus_links"),
        Binding("backspace,alt+left", "back", "Back", show=False, id="back"),
        Binding("alt+right", "forward", "Forward", show=False, id="forward"),
        Binding("f2", "toggle_left", "Left pane", show=False, id="toggle_left", tooltip="Collapse/restore the Daily/Vault column"),
        Binding("f3", "toggle_right", "Right pane", show=False, id="toggle_right", tooltip="Collapse/restore the Links/Agenda column"),
        Binding("f4", "toggle_chat", "Chat pane", show=False, id="toggle_chat", tooltip="Collapse/restore the chat"),
        # before focus_main: Escape cancels a streaming answer first (check_action hides it otherwise)
        Binding("escape", "cancel_reply", "Cancel reply", id="cancel_reply", tooltip="Cancel the chat answer being streamed (your message stays saved)"),
        Binding("escape", "focus_main", "Focus note", show=False, id="focus_main", tooltip="Back to the note from anywhere"),
    ]

    #: Textual repaints the whole screen on every focus change (``Screen.focused`` repaints); the widgets that
    #: gain or lose focus restyle and repaint themselves anyway, so a focus move (Ctrl+O's input, Tab between
    #: panes) repaints only them.
    focused: Reactive = Reactive(None, repaint=False)

    def __init__(self, engine, settings) -> None:
        super().__init__(id="main")
        self.engine = engine
        self.settings = settings
        self.vault_changed: Signal[VaultChange] = Signal(self, "vault_changed")
        self.ctx = ctx = PaneContext(engine, settings, self.vault_changed)
        self.history = History()
        self.index_worker: Worker | None = None
        self.index_running = False
        self.vectors_ready = False
        self.startup_opened = False  # the first note was opened (or the user opened something first)
        self._note_index = None  # the quick switcher's NoteIndex, kept until the vault changes
        self._note_index_gen = 0
        self._note_index_timer = None
        self.switcher = None  # the one quick switcher screen, installed on first use and reused
        self.search_screen = None  # the one search screen, likewise
        self._announce = False  # say what a re-index did (only when the user asked for it)
        #: ``(files done, files to do)`` of the first keyword pass while it runs (an open search says so), else None
        self.first_pass_progress: tuple[int, int] | None = None
        self._read_only_told: str | None = None
        self._today_pending: str | None = None  # ``t`` asked for this day; the Daily pane follows its answer  # the read-only note whose reason ``e`` gave already
        self._grew_at = 0.0  # when an open search last followed the first pass (see on_index_progress)
        self._init_layout()
        # Kept as attributes (not queried): handlers may run before nested children are mounted.
        self.daily = DailyPane(ctx, id="daily")
        self.vault_tree = VaultTree(ctx, id="tree")
        self.left_switch = ContentSwitcher(initial="daily", id="left-switch")
        self.left = Vertical(id="left")
        self.note = NoteView(ctx, id="note")
        self.chat = ChatPane(ctx, id="chat")
        self.center = Vertical(id="center")
        self.links = NeighboursList(ctx, id="links")
        self.agenda = AgendaPane(ctx, id="agenda")
        self.right = Vertical(id="right")
        self.status = StatusLine(engine, id="status")
        self.footer = KeyFooter(compact=True)

    @property
    def keyword_ready(self) -> bool:
        """The first keyword pass finished: search and links are complete."""
        return self.ctx.keyword_ready

    @property
    def refresh_running(self) -> bool:
        """Today's proactive refresh (``r``) is running."""
        return self.agenda.refresh_running

    @property
    def session_id(self) -> str | None:
        """The chat record of this run (None before the first message)."""
        return self.chat.session.session_id if self.chat.session else None

    def today(self) -> str:
        return self.settings.today()

    @property
    def daily_dir(self) -> str:
        return self.ctx.daily_dir

    # -- the quick switcher's note list ---------------------------------------------------------------------
    @property
    def note_index(self):
        """The quick switcher's (and the palette's) :class:`~reme_tui.switcher.NoteIndex`, or None while it is
        being read again. Setting None (the vault changed) reads it again in a worker shortly after."""
        return self._note_index

    @note_index.setter
    def note_index(self, index) -> None:
        self._note_index = index
        self._note_index_gen += 1
        if index is None and self.ctx.keyword_ready and self.is_attached:
            if self._note_index_timer is not None:
                self._note_index_timer.stop()
            self._note_index_timer = self.set_timer(NOTE_INDEX_DELAY, self._read_note_index)

    def _keep_note_index(self, index) -> None:
        if self._note_index is None:
            self.note_index = index

    def _read_note_index(self) -> None:
        self._note_index_timer = None
        if self._note_index is None:
            self.read_note_index(self._note_index_gen)

    @work(thread=True, exclusive=True, group="note-index", exit_on_error=False)
    def read_note_index(self, generation: int) -> None:
        """Read and fold the note list (``engine.note_titles()``, ~40 ms + ~10 ms per 1,000 notes) off the UI
        thread, so Ctrl+O never waits for it."""
        from ..switcher import NoteIndex

        try:
            index = NoteIndex(self.engine.note_titles())
        except Exception:  # a closed store: the switcher reads (and reports) it itself when opened
            return
        self.post_message(NoteIndexReady(index, generation))

    def on_note_index_ready(self, message: NoteIndexReady) -> None:
        if message.generation == self._note_index_gen and self._note_index is None:
            self.note_index = message.index

    # -- layout ---------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="panes"):
            with self.left:
                with self.left_switch:
                    yield self.daily
                    yield self.vault_tree
            with self.center:
                yield self.note
                yield self.chat
            with self.right:
                yield self.links
                yield self.agenda
        yield self.status
        yield self.footer

    def on_mount(self) -> None:
        self._left_title()
        self.app.theme_changed_signal.subscribe(self, self._relight_pane)
        self.links.show_message("Open a note to see its links.")
        self.chat.set_llm(bool(self.settings.llm.configured))
        self.status.vault = Path(self.engine.vault).name
        self.status.demo = bool(getattr(self.settings, "is_demo", False))
        self._apply_layout()
        self.daily.focus_dates()
        # After the first frame: the loaders are thread workers, and their Python work would otherwise share
        # the GIL with Textual's first layout and delay the first paint.
        self.call_after_refresh(self._load_everything)
        if getattr(self.app, "background", False) and indexing.child_pass_ahead(self.engine):
            # a first index runs in a child process: started now, its imports overlap the first layout (another
            # core), and the vault is searchable that much sooner
            self.start_index()

    def _load_everything(self) -> None:
        # The daily pane and the tree read the file system, not the index: they fill while indexing runs.
        self.daily.load_days()
        self.vault_tree.load_root()
        self.agenda.load("")
        self.status.load()
        if not self.index_running:
            self.start_index()
        self.warm_tokenizer()

    @work(thread=True, group="warm-up", exit_on_error=False)
    def warm_tokenizer(self) -> None:
        """Load the tokenizer's dictionary now, in a worker, while the panes fill: else the first search keystroke
        (or the first changed note) loads it, 0.2–1 s during which the app does not answer. (rjieba's load holds
        the GIL wherever it runs, so the UI thread still pauses once; at startup it is not waiting for keys.)"""
        tokenizer = getattr(self.engine, "tokenizer", None)
        if tokenizer is not None:
            tokenizer.tokenize("预热 warm-up")

    def on_day_loaded(self, message: DayLoaded) -> None:  # bubbled up from the Daily pane
        self._left_title()

    def load_agenda(self, date: str = "") -> None:
        """Show the agenda of ``date`` ("" = today)."""
        self.agenda.load(date)

    # -- days -----------------------------------------------------------------------------------------------
    def on_open_day(self, message: OpenDay) -> None:
        message.stop()
        self.open_day(message.date, message.create)

    @work(thread=True, group="open-day", exit_on_error=False)
    def open_day(self, date: str, create: bool) -> None:
        """The day page of ``date``; with ``create``, the page is made when missing."""
        try:
            page, created, unwritten = loaders.open_day(self.engine, self.daily_dir, date, create)
        except Exception as exc:
            self.post_message(DayOpened(date, None, [], loaders.error_text(exc)))
            return
        self.post_message(DayOpened(date, page, created, unwritten=unwritten))

    async def on_day_opened(self, message: DayOpened) -> None:
        if self._today_pending is not None and message.date == self._today_pending:
            self._today_pending = None
            self._select_today(message.date)  # painted with the page, in one frame
        if message.error:
            self.notify(message.error, title=f"Day {message.date}", severity="error")
            return
        if message.unwritten:  # not the app's layout: nothing is written until the user writes it
            self.startup_opened = True
            self.note.seq += 1  # a note still loading must not replace the placeholder
            await self.note.show(loaders.unwritten_page(message.unwritten))
            self.links.show_message("This page does not exist yet.")
            return
        if message.created:
            self.notify(f"Created {message.page}", title="New day", timeout=3)
            self.daily.load_days()
            if self.daily.date == message.date:
                self.daily.load_day(message.date)
        if message.page:
            self.post_message(OpenNote(message.page))

    def action_today(self) -> None:
        """Select today in the Daily pane and open its page (creating the day on first use).

        The page's worker starts first and the Daily pane moves when its answer is in (:meth:`_select_today`):
        moving the pane first painted the screen once for the pane (50–150 ms) before the worker even started,
        then again for the page."""
        today = self.today()
        self._today_pending = today
        self.open_day(today, True)

    def _select_today(self, today: str) -> None:
        """The Daily pane part of ``t``: the pane shown, today highlighted (its cards read), the dates focused."""
        self._show_left("daily")
        if self.daily.day_info(today) is None:
            self.daily.load_days()
        self.daily.request_day(today)
        self.daily.focus_dates()

    def action_step_day(self, delta: int) -> None:
        """``[``: the day before (older), ``]``: the day after; opens that day's page when it has one."""
        date = self.daily.step(delta)
        if date is None:
            self.notify("No earlier day" if delta > 0 else "No later day", timeout=2)
            return
        self.post_message(OpenDay(date, create=False))

    # -- notes, links, history ------------------------------------------------------------------------------
    def open_note(self, path: str, line: int | None = None, **kw) -> None:
        """Ask for ``path`` to be shown (same as posting :class:`OpenNote`)."""
        self.post_message(OpenNote(path, line, **kw))

    def on_open_note(self, message: OpenNote) -> None:
        message.stop()
        self.startup_opened = True
        self.note.load(message)

    def on_note_shown(self, message: NoteShown) -> None:
        message.stop()
        doc = message.doc
        if message.request.history:
            self.history.visit(doc.path, message.request.line)
        self.note.set_history(self.history.can_back, self.history.can_forward)
        self.links.load(doc.path, list(doc.sources))
        if message.request.focus:  # keys now scroll the note, not the list it was picked from
            self.note.focus_body()

    def on_follow_link(self, message: FollowLink) -> None:
        message.stop()
        self.resolve_link(message.target, message.anchor, message.source)

    @work(thread=True, exclusive=True, group="link", exit_on_error=False)
    def resolve_link(self, target: str, anchor: str | None, source: str | None) -> None:
        self.post_message(link_follow.resolve(self.engine, target, anchor, source))

    def on_link_resolved(self, message: LinkResolved) -> None:
        link_follow.on_resolved(self, message, self.keyword_ready)

    def action_follow_link(self) -> None:
        """Pick one of the open note's links (links to missing notes marked) or, with the chat's transcript
        focused, one of the last answer's citations."""
        doc = self.note.doc
        link_follow.pick_link(self, self.chat, doc, doc.missing if doc is not None else frozenset())

    def action_back(self) -> None:
        if (visit := self.history.back()) is None:
            self.notify("No earlier note", timeout=2)
            return
        self.post_message(OpenNote(visit[0], visit[1], history=False))

    def action_forward(self) -> None:
        if (visit := self.history.forward()) is None:
            self.notify("No later note", timeout=2)
            return
        self.post_message(OpenNote(visit[0], visit[1], history=False))

    # -- refresh --------------------------------------------------------------------------------------------
    def action_refresh(self) -> None:
        """Run the proactive refresh for today now (the Agenda pane runs it)."""
        if self.agenda.refresh_today():
            self.status.set_work("refreshing today's agenda…")

    def on_refresh_finished(self, message: RefreshFinished) -> None:  # bubbled up from the Agenda pane
        if not self.index_running:
            self.status.set_work("")
        if not message.error:
            self.app_wrote([])

    # -- background: watcher and cron ----------------------------------------------------------------------
    @work(thread=True, group="background", exit_on_error=False)
    def start_background(self) -> None:
        """Start the engine's watcher (external edits indexed within ~1 s) and cron thread; their callbacks run
        on background threads and only post messages."""
        try:
            self.engine.start_background(on_event=lambda ev: self.post_message(CronEvent(ev)),
                                         on_indexed=lambda paths, rep: self.post_message(VaultChanged(paths, rep)))
            self.engine.start_local_server()  # `reme-tui job search` … asks this app instead of loading the model
        except Exception as exc:  # the app stays usable without them
            self.post_message(CronEvent({"event": "watch_error", "error": f"{type(exc).__name__}: {exc}"}))

    def publish_change(self, change: VaultChange) -> None:
        """Tell every subscriber (panes, an open search) that the index saw ``change``."""
        self.note_index = None  # titles may have changed
        self.vault_changed.publish(change)
        self.status.load()

    def app_wrote(self, paths: list[str]) -> None:
        """The app itself wrote ``paths`` (and maybe files it cannot name, such as a day page's card index): the
        watcher does not report the app's own writes, so tell the panes here (the note pane re-reads the note
        shown when its bytes changed)."""
        self.publish_change(VaultChange(list(paths), None, app_write=True))

    def on_vault_changed(self, message: VaultChanged) -> None:
        if message.report is not None:  # a watcher batch: the index is up to date with the vault as of now
            self.status.indexed_now()
        self.publish_change(VaultChange(list(message.paths), message.report))

    def on_cron_event(self, message: CronEvent) -> None:
        ev = message.event
        kind = ev.get("event")
        if kind == "vectors_started":
            if not self.status.work:  # never over another job's progress
                self.status.set_work(BACKGROUND_EMBED)
        elif kind == "vectors":  # the embed thread finished a pass: the status line's vector count moved
            if self.status.work == BACKGROUND_EMBED:
                self.status.set_work("")
            if ev.get("error"):
                self.notify(str(ev["error"]), title="Embedding", severity="warning", timeout=8)
            self.status.load()
        elif kind == "watch_error":
            self.notify(str(ev.get("error")), title="Watcher", severity="warning", timeout=8)
        elif kind in ("finished", "failed", "skipped"):
            job = ev.get("job", "")
            detail = ev.get("error") or ev.get("result") or ""
            self.notify(f"{job}: {kind}" + (f" — {str(detail)[:160]}" if kind != "finished" else ""),
                        title="Scheduled job", severity="error" if kind == "failed" else "information", timeout=6)
            if job == "proactive_refresh":
                self.agenda.load(self.agenda.date or "")
            self.app_wrote([])

    # -- chat side effects (the Chat pane runs the session) -------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_reply":
            return self.chat.replying  # False: hidden, and Escape falls through to focus_main
        return True

    def action_cancel_reply(self) -> None:
        self.chat.cancel_reply()

    def on_chat_saved(self, message: ChatSaved) -> None:
        if message.error:
            self.status.set_work(f"⚠ chat message not saved ({message.stage}): kept in the chat input")
            return
        if self.status.work.startswith("⚠ chat message not saved"):
            self.status.set_work("")  # a later message was saved: the folder is writable again
        if message.stage != "capture":
            return
        # the card, and the day page whose card index links it
        self.app_wrote([p for p in (message.capture_path, f"{self.daily_dir}/{self.today()}.md") if p])

    def on_chat_reply(self, message: ChatReply) -> None:
        if message.done:
            self.app_wrote([])  # the answer may have written cards (auto-memory) and their day index

    # -- editing ------------------------------------------------------------------------------------------
    def action_edit(self) -> None:
        """Edit the note in ``$VISUAL``/``$EDITOR`` (the app suspends meanwhile) through a temp copy; the result is
        written back only if no other program saved the note meanwhile, else kept as a conflict copy."""
        path = self.note.path
        if not path:
            self.notify("Open a note first", timeout=2)
            return
        doc = self.note.doc
        if doc is not None and doc.path == path and doc.read_only:
            # known from the open: say why at once (the full reason once per note, then a short reminder)
            if self._read_only_told != path:
                self._read_only_told = path
                self.notify(f"{path} is read-only (no write permission), so it is not opened for editing; give it "
                            "write permission to edit it.", title="Read-only", severity="warning", timeout=6)
            else:
                self.notify("read-only: not opened for editing", title="Read-only", timeout=2)
            return
        self.prepare_edit(path, existed=doc is not None and doc.path == path and not doc.unwritten)

    @work(thread=True, exclusive=True, group="edit", exit_on_error=False)
    def prepare_edit(self, path: str, existed: bool = False) -> None:
        """(Worker.) The editor's temp copy of ``path``; ``existed``: the note shown was a file, so a file gone
        since is an error, not a new note (editing it would recreate the old name with only the editor's text)."""
        try:
            if existed and not (self.engine.vault / path).exists():
                self.post_message(EditReady(path, error=f"{path} was removed or renamed since it was opened; "
                                                        "nothing to edit (open it again from the tree)"))
                return
            session = editor.prepare_edit(self.engine, path)
        except Exception as exc:
            self.post_message(EditReady(path, error=loaders.error_text(exc)))
            return
        self.post_message(EditReady(path, session))

    def on_edit_ready(self, message: EditReady) -> None:
        if message.error or message.session is None:
            self.notify(message.error or "cannot edit this note", title="Editor", severity="error")
            return
        session = message.session
        ran, problem = editor.run_editor(self.app, session.copy)
        if not ran:
            editor.finish_edit_nothing(session)
            self.notify(problem or "the editor did not start", title="Editor", severity="error")
            return
        if problem:
            self.notify(problem, title="Editor", severity="warning", timeout=4)
        self.status.set_work(f"saving {session.path}…")
        self.finish_edit(session)

    @work(thread=True, group="edit-save", exit_on_error=False)
    def finish_edit(self, session) -> None:
        self.post_message(EditFinished(editor.finish_edit(self.engine, session)))

    def on_edit_finished(self, message: EditFinished) -> None:
        out = message.outcome
        if not self.index_running:
            self.status.set_work("")
        if out.error:
            self.notify(out.error, title="Editor: not saved", severity="error", timeout=30)
            return
        if out.conflict:
            self.notify(f"{out.path} changed while you were editing it (another program saved it). It was left "
                        f"as that program wrote it; your text is in {out.conflict}.", title="Edit conflict",
                        severity="warning", timeout=30)
            self.vault_tree.load_root()
            if self.note.path == out.path:  # what the other program saved
                self.post_message(OpenNote(out.path, history=False))
            return
        if out.unchanged:
            if self.note.doc is not None and self.note.doc.unwritten:
                self.notify(f"Nothing written: {out.path} still does not exist", title="Editor", timeout=4)
            return
        # the engine's write indexed the note: show the new text; the links pane and day list follow
        self.note_index = None
        if self.note.path == out.path:
            self.post_message(OpenNote(out.path, history=False))
        self.links.load(out.path)
        self.status.load()
        self.daily.load_days()
        if self.daily.date:
            self.daily.load_day(self.daily.date)

    # -- indexing -------------------------------------------------------------------------------------------
    def action_reindex(self) -> None:
        if self.index_running:
            self.notify("Indexing is already running", timeout=3)
            return
        self.start_index(announce=True)

    def start_index(self, announce: bool = False) -> Worker:
        self.index_running = True
        self._announce = announce
        self.status.set_work("indexing…")
        self.index_worker = self.run_index()
        return self.index_worker

    @work(thread=True, exclusive=True, group="index", exit_on_error=False)
    def run_index(self) -> None:
        """Keyword + graph pass, then the vector pass (``indexing.run_passes``)."""
        worker = get_current_worker()
        # the real app (background on) runs a first index in a child process: the UI keeps the GIL
        indexing.run_passes(self.engine, lambda: worker.is_cancelled, self.post_message,
                            child=bool(getattr(self.app, "background", False)))

    def on_index_progress(self, message: IndexProgress) -> None:
        self.status.show_progress(message.stage, message.done, message.total)
        if message.stage == "index" and not self.ctx.keyword_ready:
            self.first_pass_progress = (message.done, message.total)
        if message.stage == "index" and message.done and not self.ctx.keyword_ready:
            now = time.monotonic()
            if now - self._grew_at >= SEARCH_FOLLOW_S:  # the first pass committed more notes
                self._grew_at = now
                # the quick switcher's list read meanwhile is partial: its next opening reads the list again
                self.note_index = None
                if self.search_screen is not None:  # an open search follows the batches
                    self.search_screen.index_grew()

    def on_index_finished(self, message: IndexFinished) -> None:
        rep = message.report
        if message.error:
            self.notify(message.error, title=f"Indexing failed ({message.phase})", severity="error", timeout=10)
        self.status.load()
        if message.phase == "vectors":
            self.index_running = False
            self.vectors_ready = not message.error and not message.cancelled
            self.status.set_work("")
            if rep is not None and rep.embed_error:
                self.notify(f"vector search degraded to keyword: {rep.embed_error}", title="Embedder",
                            severity="warning", timeout=8)
            return
        if message.error or message.cancelled:
            self.index_running = False
            self.status.set_work("")
            return
        first_pass = not self.ctx.keyword_ready
        self.ctx.keyword_ready = True
        self.first_pass_progress = None
        if first_pass and getattr(self.app, "background", False):
            self.start_background()
        self.status.set_work("embedding…" if self.engine.vectors is not None else "")
        if not self.startup_opened:
            self.find_start_note()
        changed = [] if rep is None else list(rep.changed_paths) + list(rep.removed_paths)
        self.publish_change(VaultChange(changed, rep, first_pass=first_pass))
        if first_pass:  # the switcher's note list, read now (no delay) so the first Ctrl+O does not wait for it
            if self._note_index_timer is not None:
                self._note_index_timer.stop()
            self._read_note_index()
        if self._announce and rep is not None:
            self.notify(f"{rep.scanned} files: +{rep.added} ~{rep.modified} -{rep.removed} "
                        f"(renamed {rep.renamed}), {rep.chunks_total} chunks", title="Re-indexed", timeout=4)

    # -- the first note -------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="start", exit_on_error=False)
    def find_start_note(self) -> None:
        """Today's day page when it exists, else the README (or index, home, welcome), else the first note."""
        self.post_message(StartNoteFound(loaders.start_note_path(self.engine, self.daily_dir, self.today())))

    def on_start_note_found(self, message: StartNoteFound) -> None:
        if self.startup_opened:
            return
        if message.path is None:
            self.note.border_title = "No notes yet"
            return
        self.post_message(OpenNote(message.path))

    def action_open_start(self) -> None:
        """Open the README / first note now (command palette)."""
        self.startup_opened = False
        self.find_start_note()
