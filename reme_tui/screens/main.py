"""The main screen: the one coordinator between the widgets and the engine.

Widgets post requests (:class:`OpenNote`, :class:`FollowLink`, :class:`OpenDay`, :class:`ChatSubmitted`, …); this
screen runs the engine calls in Textual thread workers, which post result messages back (:class:`NoteLoaded`,
:class:`DayLoaded`, :class:`AgendaLoaded`, :class:`ChatSaved`, …); the handlers here — on the UI thread — update
the widgets. Workers never touch a widget.

Layout (``#panes``)::

    ┌ Daily / Vault ┐┌ note ──────────────┐┌ Links ─────┐
    │ dates         ││                    ││ neighbours │
    │ day + cards   │├ Chat ──────────────┤├ Agenda ────┤
    └───────────────┘└────────────────────┘└────────────┘
    status line · footer

At 110 columns and more all three columns show (the chat when there are 32 rows or more); below that the note
shares the screen with one side column — the Daily/Vault pane or the Links/Agenda pane, whichever was asked for
last. ``F2``/``F3``/``F4`` collapse and restore the left column, the right column and the chat.
"""

from __future__ import annotations

import datetime as _dt
import os
import shlex
import subprocess
import time
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer
from textual.worker import Worker, get_current_worker

from ..messages import (
    AgendaLoaded,
    AgendaRequested,
    ChatSaved,
    ChatReply,
    ChatSubmitted,
    CronEvent,
    VaultChanged,
    ChildrenLoaded,
    DayInfo,
    DayLoaded,
    DayOpened,
    DayRequested,
    DaysLoaded,
    FollowLink,
    IndexFinished,
    IndexProgress,
    LinkResolved,
    LoadChildren,
    NeighbourDepthChanged,
    NeighboursLoaded,
    NoteCreated,
    NoteDocument,
    NoteLoaded,
    NoteReindexed,
    OpenDay,
    OpenNote,
    RefreshFinished,
    StartNoteFound,
    StatusLoaded,
    TraverseLoaded,
    TreeEntry,
    TreeRootLoaded,
)
from ..render import (
    callouts_and_footnotes,
    line_anchor,
    note_links,
    sources_targets,
    wikilinks_to_markdown,
)
from ..widgets.agenda import AgendaPane
from ..widgets.chat import ChatPane
from ..widgets.daily import DailyPane
from ..widgets.neighbours import NeighboursList, hop2_from_traverse
from ..widgets.note_view import MAX_MARKDOWN_BYTES, NoteView
from ..widgets.status_line import StatusLine
from ..widgets.vault_tree import VaultTree

MARKDOWN_EXTS = (".md", ".markdown")
#: Seconds between two progress messages from the index worker (a fast scan would flood the UI otherwise).
PROGRESS_INTERVAL = 0.1
#: Entries of one folder shown in the tree (a huge attachments folder must not freeze it).
MAX_FOLDER_ENTRIES = 2000
STAGE_NAMES = {"scan": "scanning", "index": "indexing", "links": "linking", "embed": "embedding"}
DIGEST_BUCKETS = ("personal", "procedure", "wiki")
#: Outlinks / backlinks listed per note (the pane scrolls; the engine's hop-2 default of 10 is for prompts).
NEIGHBOUR_LIMIT = 200
#: A plain-text view holds at most this many lines of a long file at once (a window that moves with alt+↓/↑ or
#: an "open at line" request): loading a whole 1 MB file into the text view would hold the UI for most of a second.
PLAIN_WINDOW_LINES = 1500
#: Above this many Markdown blocks a note is shown as plain text: every block is a widget, and each frame lays
#: them all out (about 110 ms a frame at 1,700 blocks on the test machines).
MAX_MARKDOWN_BLOCKS = 600
#: Columns from which the three columns (left │ note │ right) show side by side.
WIDE_MIN = 110
#: Rows from which the chat shows below the note without being asked for (in the wide layout).
CHAT_AUTO_ROWS = 32


class _Stop(Exception):
    """Raised inside the engine's progress callback to abandon a cancelled index pass (each batch the engine
    already committed stays valid; the next pass picks up the rest)."""


def _leaf_label(name: str) -> str:
    return name[:-3] if name.lower().endswith(".md") else name


def _is_texty(name: str) -> bool:
    low = name.lower()
    return low.endswith(MARKDOWN_EXTS + (".txt", ".json", ".jsonl", ".csv", ".yaml", ".yml", ".html", ".htm"))


def markdown_blocks(body: str) -> int:
    """How many block widgets the Markdown view would mount for ``body`` (container and leaf blocks)."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("gfm-like").parse(body)
    return sum(1 for t in tokens if t.nesting == 1 or t.type in ("fence", "code_block", "hr", "html_block"))


def _err(exc: BaseException) -> str:
    from reme_engine.engine import EngineError

    return str(exc) if isinstance(exc, EngineError) else f"{type(exc).__name__}: {exc}"


#: Status line text while the engine's embed thread adds vectors for notes saved elsewhere.
BACKGROUND_EMBED = "embedding new notes…"


class MainScreen(Screen):
    """Daily/Vault │ note (+ chat) │ links + agenda. ``engine``: the open ``reme_engine.engine.Engine``;
    ``settings``: its Settings."""

    BINDINGS = [
        Binding("slash", "search", "Search", id="search", tooltip="Search the vault as you type (filters: layer, dates)"),
        Binding("ctrl+o", "quick_switch", "Open", id="quick_switch", tooltip="Quick switcher: open a note by title, alias or path"),
        Binding("t", "today", "Today", id="today", tooltip="Today's day page and cards (created on first use)"),
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
        Binding("escape", "focus_main", "Focus note", show=False, id="focus_main", tooltip="Back to the note from anywhere"),
    ]

    def __init__(self, engine, settings) -> None:
        super().__init__(id="main")
        self.engine = engine
        self.settings = settings
        self.note_seq = 0  # number of the newest OpenNote request
        self.history: list[tuple[str, int | None]] = []
        self.history_pos = -1
        self.index_worker: Worker | None = None
        self.index_running = False
        self.keyword_ready = False  # the first keyword pass finished: search and links are complete
        self.vectors_ready = False
        self.startup_opened = False  # the first note was opened (or the user opened something first)
        self.refresh_running = False
        self.neighbour_depth = 1
        self.note_index = None  # the quick switcher's NoteIndex, kept until the vault changes
        self.switcher = None  # the one quick switcher screen, installed on first use and reused
        self.session_id: str | None = None  # the chat session of this run (created with the first message)
        self._announce = False  # say what a re-index did (only when the user asked for it)
        self._tree_loaded = False
        # layout: what the user asked to see (see _apply_layout)
        self.show_left = True
        self.show_right = True
        self.show_chat: bool | None = None  # None: automatic (wide and tall enough)
        self.narrow_side = "left"  # the side column shown when the screen is narrow
        self.right_pane = "links"  # which of links/agenda the narrow layout shows
        # Kept as attributes (not queried): handlers may run before nested children are mounted.
        self.daily = DailyPane(id="daily")
        self.vault_tree = VaultTree(id="tree")
        self.left_switch = ContentSwitcher(initial="daily", id="left-switch")
        self.left = Vertical(id="left")
        self.note = NoteView(id="note")
        self.chat = ChatPane(id="chat")
        self.center = Vertical(id="center")
        self.links = NeighboursList(id="links")
        self.agenda = AgendaPane(id="agenda")
        self.right = Vertical(id="right")
        self.status = StatusLine(id="status")
        self.footer = Footer(compact=True)

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
        self.links.show_message("Open a note to see its links.")
        llm = bool(self.settings.llm.configured)
        self.chat.set_llm(llm)
        status = self.status
        status.vault = Path(self.engine.vault).name
        status.demo = bool(getattr(self.settings, "is_demo", False))
        self._apply_layout()
        self.daily.focus_dates()
        # After the first frame: the loaders are thread workers, and their Python work would otherwise share
        # the GIL with Textual's first layout and delay the first paint.
        self.call_after_refresh(self._load_everything)

    def _load_everything(self) -> None:
        # The daily pane and the tree read the file system, not the index: they fill while indexing runs.
        self.load_days()
        self.load_tree_root()
        self.load_agenda("")
        self.load_status()
        self.start_index()

    def on_resize(self) -> None:
        self._apply_layout()

    @property
    def wide(self) -> bool:
        return self.size.width >= WIDE_MIN

    def _apply_layout(self) -> None:
        """Show/hide the columns for the screen size and what the user asked for."""
        wide = self.wide
        self.set_class(not wide, "-narrow")
        if wide:
            self.left.display = self.show_left
            self.right.display = self.show_right
            self.links.display = True
            self.agenda.display = True
        else:
            side = self.narrow_side
            self.left.display = self.show_left and side == "left"
            self.right.display = self.show_right and side == "right"
            self.links.display = self.right_pane == "links"
            self.agenda.display = self.right_pane == "agenda"
        chat = self.show_chat if self.show_chat is not None else (wide and self.size.height >= CHAT_AUTO_ROWS)
        self.chat.display = chat
        self.footer.show_command_palette = wide
        self.call_after_refresh(self._refit)
        focused = self.app.focused if self.is_attached else None
        if focused is not None and not focused.display or (focused is not None and any(
                not a.display for a in focused.ancestors if hasattr(a, "display"))):
            self.note.focus_body()

    def _refit(self) -> None:
        """Panes cut their rows to their width; one shown after being hidden must re-cut them."""
        for pane in (self.daily, self.links, self.agenda):
            if pane.display and pane.is_mounted:
                pane.refit()

    def _reveal(self, pane: str) -> None:
        """Make ``pane`` (left/links/agenda/chat) visible (the narrow layout swaps the side column)."""
        if pane == "left":
            self.show_left = True
            self.narrow_side = "left"
        elif pane in ("links", "agenda"):
            self.show_right = True
            self.narrow_side = "right"
            self.right_pane = pane
        elif pane == "chat":
            self.show_chat = True
        self._apply_layout()

    def _left_title(self) -> None:
        daily = self.left_switch.current == "daily"
        self.left.border_title = "Daily" if daily else (Path(self.engine.vault).name or "Vault")
        if daily:
            self.left.border_subtitle = self.daily.summary()
        else:
            self.left.border_subtitle = "d: back to Daily"

    def action_toggle_left(self) -> None:
        if self.wide or self.narrow_side == "left":
            self.show_left = not self.show_left
        else:
            self.show_left, self.narrow_side = True, "left"
        self._apply_layout()

    def action_toggle_right(self) -> None:
        if self.wide or self.narrow_side == "right":
            self.show_right = not self.show_right
        else:
            self.show_right, self.narrow_side = True, "right"
        self._apply_layout()

    def action_toggle_chat(self) -> None:
        self.show_chat = not self.chat.display
        self._apply_layout()

    # -- focus ----------------------------------------------------------------------------------------------
    def action_focus_main(self) -> None:
        self.note.focus_body()

    def action_daily(self) -> None:
        self.left_switch.current = "daily"
        self._left_title()
        self._reveal("left")
        self.daily.focus_dates()

    def action_focus_tree(self) -> None:
        self.left_switch.current = "tree"
        self._left_title()
        self._reveal("left")
        self.vault_tree.focus()

    def action_focus_links(self) -> None:
        self.action_neighbours()

    def action_neighbours(self) -> None:
        self._reveal("links")
        self.links.focus()

    def action_agenda(self) -> None:
        """Show and focus today's agenda."""
        self._reveal("agenda")
        self.agenda.focus_list()
        self.agenda.pending = None
        self.load_agenda("")  # today's, always (other days: the date field); today may have changed

    def action_chat(self) -> None:
        self._reveal("chat")
        self.chat.focus_input()

    # -- tree -----------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="tree-root", exit_on_error=False)
    def load_tree_root(self) -> None:
        """Daily (days newest first), Digest (buckets), then the vault's other top-level entries."""
        eng = self.engine
        layers = self.settings.layers
        daily_dir, digest_dir = layers.daily_dir.strip("/"), layers.digest_dir.strip("/")
        entries: list[TreeEntry] = []
        groups: dict[str, list[TreeEntry]] = {}
        try:
            top = eng.list("", limit=MAX_FOLDER_ENTRIES)["entries"]
        except Exception as exc:
            self.post_message(TreeRootLoaded([TreeEntry("info", "", f"⚠ {exc}", dim=True)], {}))
            return
        top_dirs = {e["path"] for e in top if e["is_dir"]}
        try:
            days = eng.list_days() if daily_dir in top_dirs else []
        except Exception:
            days = []
        if days:
            entries.append(TreeEntry("daily", daily_dir, "Daily", True))
            groups["daily"] = [TreeEntry("day", d, d, True) for d in days]
        if digest_dir in top_dirs:
            try:
                kids = eng.list(digest_dir, limit=MAX_FOLDER_ENTRIES)["entries"]
            except Exception:
                kids = []
            order = {b: i for i, b in enumerate(DIGEST_BUCKETS)}
            kids.sort(key=lambda e: (not e["is_dir"], order.get(e["path"].rsplit("/", 1)[-1], 99), e["path"]))
            entries.append(TreeEntry("digest", digest_dir, "Digest", True))
            groups["digest"] = [self._entry(e) for e in kids]
        shown_groups = {daily_dir} if days else set()
        if digest_dir in top_dirs:
            shown_groups.add(digest_dir)
        rest = [e for e in top if e["path"] not in shown_groups]
        rest.sort(key=lambda e: (not e["is_dir"], e["path"].casefold()))
        entries.extend(self._entry(e) for e in rest)
        self.post_message(TreeRootLoaded(entries, groups))

    @staticmethod
    def _entry(e: dict) -> TreeEntry:
        name = e["path"].rsplit("/", 1)[-1]
        if e["is_dir"]:
            return TreeEntry("dir", e["path"], name, True)
        return TreeEntry("file", e["path"], _leaf_label(name), dim=not _is_texty(name))

    def on_tree_root_loaded(self, message: TreeRootLoaded) -> None:
        self.vault_tree.set_root(message.entries, message.groups, keep_expanded=self._tree_loaded)
        self._tree_loaded = True

    def on_load_children(self, message: LoadChildren) -> None:
        message.stop()
        self.load_children(message.node_id, message.entry)

    @work(thread=True, group="tree", exit_on_error=False)
    def load_children(self, node_id: int, entry: TreeEntry) -> None:
        """Children of a day (day page + cards + other files) or of a folder."""
        eng = self.engine
        try:
            if entry.kind == "day":
                date = entry.path
                daily_dir = self.settings.layers.daily_dir.strip("/")
                kids: list[TreeEntry] = []
                page = f"{daily_dir}/{date}.md"
                if eng.stat(page).exists:
                    kids.append(TreeEntry("file", page, f"{date} (day page)"))
                cards = eng.daily_list(date)
                card_paths = {c.path for c in cards}
                kids.extend(TreeEntry("file", c.path, c.name or c.stem) for c in cards)
                folder = f"{daily_dir}/{date}"
                if eng.stat(folder).is_dir:
                    for e in eng.list(folder, limit=MAX_FOLDER_ENTRIES)["entries"]:
                        if not e["is_dir"] and e["path"] not in card_paths:
                            kids.append(self._entry(e))
            else:
                listing = eng.list(entry.path, limit=MAX_FOLDER_ENTRIES)
                rows = sorted(listing["entries"], key=lambda e: (not e["is_dir"], e["path"].casefold()))
                kids = [self._entry(e) for e in rows]
                if listing["truncated"]:
                    kids.append(TreeEntry("info", "", f"… more than {MAX_FOLDER_ENTRIES} entries", dim=True))
        except Exception as exc:
            self.post_message(ChildrenLoaded(node_id, [], str(exc)))
            return
        self.post_message(ChildrenLoaded(node_id, kids))

    def on_children_loaded(self, message: ChildrenLoaded) -> None:
        self.vault_tree.set_children(message.node_id, message.entries, message.error)

    # -- daily ----------------------------------------------------------------------------------------------
    def today(self) -> str:
        return self.settings.today()

    @property
    def daily_dir(self) -> str:
        return self.settings.layers.daily_dir.strip("/") or "daily"

    @work(thread=True, exclusive=True, group="days", exit_on_error=False)
    def load_days(self) -> None:
        """Today first, then the days with a page or folder (newest first), each with its card count."""
        eng = self.engine
        today = self.today()
        try:
            days = eng.list_days()
        except Exception as exc:
            self.post_message(DaysLoaded(today, [DayInfo(today, today=True)], _err(exc)))
            return
        pages: set[str] = set()
        folders: set[str] = set()
        try:
            for e in eng.list(self.daily_dir, limit=100000)["entries"]:
                name = e["path"].rsplit("/", 1)[-1]
                (folders if e["is_dir"] else pages).add(name if e["is_dir"] else name[:-3])
        except Exception:
            pass  # no daily folder yet
        infos: list[DayInfo] = []
        for d in [today] + [d for d in days if d != today]:
            cards = 0
            if d in folders:
                try:
                    cards = sum(1 for e in eng.list(f"{self.daily_dir}/{d}", recursive=True, limit=5000)["entries"]
                                if not e["is_dir"] and e["path"].lower().endswith(".md"))
                except Exception:
                    cards = 0
            infos.append(DayInfo(d, cards, d in pages, d == today))
        self.post_message(DaysLoaded(today, infos))

    def on_days_loaded(self, message: DaysLoaded) -> None:
        self.daily.set_days(message.today, message.days)
        if message.error:
            self.notify(f"daily notes: {message.error}", severity="warning")

    def on_day_requested(self, message: DayRequested) -> None:
        message.stop()
        self.load_day(message.date)

    @work(thread=True, exclusive=True, group="day", exit_on_error=False)
    def load_day(self, date: str) -> None:
        eng = self.engine
        page = f"{self.daily_dir}/{date}.md"
        try:
            exists = eng.stat(page).exists
            cards = eng.daily_list(date)
        except Exception as exc:
            self.post_message(DayLoaded(date, None, [], _err(exc)))
            return
        self.post_message(DayLoaded(date, page if exists else None, cards))

    def on_day_loaded(self, message: DayLoaded) -> None:
        self.daily.set_day(message.date, message.page, message.cards, message.error)
        self._left_title()

    def on_open_day(self, message: OpenDay) -> None:
        message.stop()
        self.open_day(message.date, message.create)

    @work(thread=True, group="open-day", exit_on_error=False)
    def open_day(self, date: str, create: bool) -> None:
        """The day page of ``date``; with ``create``, the day folder and page are made when missing."""
        eng = self.engine
        page = f"{self.daily_dir}/{date}.md"
        try:
            if eng.stat(page).exists:
                self.post_message(DayOpened(date, page, []))
                return
            if not create:
                self.post_message(DayOpened(date, None, []))
                return
            res = eng.daily_create(date)
        except Exception as exc:
            self.post_message(DayOpened(date, None, [], _err(exc)))
            return
        created = [what for what, flag in (("folder", res.folder_created), ("page", res.page_created)) if flag]
        self.post_message(DayOpened(date, res.page, created))

    def on_day_opened(self, message: DayOpened) -> None:
        if message.error:
            self.notify(message.error, title=f"Day {message.date}", severity="error")
            return
        if message.created:
            self.notify(f"Created {message.page}", title="New day", timeout=3)
            self.load_days()
            if self.daily.date == message.date:
                self.load_day(message.date)
        if message.page:
            self.post_message(OpenNote(message.page))

    def action_today(self) -> None:
        """Select today in the Daily pane and open its page (creating the day on first use)."""
        today = self.today()
        self.left_switch.current = "daily"
        self._left_title()
        self._reveal("left")
        if self.daily.day_info(today) is None:
            self.load_days()
        self.daily.request_day(today)
        self.daily.focus_dates()
        self.post_message(OpenDay(today, create=True))

    def action_step_day(self, delta: int) -> None:
        """``[``: the day before (older), ``]``: the day after; opens that day's page when it has one."""
        date = self.daily.step(delta)
        if date is None:
            self.notify("No earlier day" if delta > 0 else "No later day", timeout=2)
            return
        self.post_message(OpenDay(date, create=False))

    # -- opening notes --------------------------------------------------------------------------------------
    def open_note(self, path: str, line: int | None = None, **kw) -> None:
        """Ask for ``path`` to be shown (same as posting :class:`OpenNote`)."""
        self.post_message(OpenNote(path, line, **kw))

    def on_open_note(self, message: OpenNote) -> None:
        message.stop()
        self.startup_opened = True
        self.note_seq += 1
        self.load_note(self.note_seq, message)

    @work(thread=True, exclusive=True, group="note", exit_on_error=False)
    def load_note(self, seq: int, request: OpenNote) -> None:
        """Read the whole file, split off the frontmatter and rewrite wikilinks for the Markdown widget."""
        from reme_engine.engine import EngineError
        from reme_engine.markdown.frontmatter import parse_frontmatter
        from reme_engine.vault.provenance import note_ownership

        eng = self.engine
        worker = get_current_worker()
        try:
            st = eng.stat(request.path)
            if not st.exists:
                raise EngineError(f"no such file: {request.path}")
            if st.is_dir:
                raise EngineError(f"{request.path} is a folder")
            parts: list[str] = []
            start, total = 1, None
            while total is None or start <= total:
                r = eng.read(request.path, start, None)
                parts.append(r.text)
                total = r.total_lines
                start = r.end_line + 1
                if not r.truncated or worker.is_cancelled:
                    break
            if worker.is_cancelled:
                return
            text = "".join(parts).lstrip("\ufeff")
            path = r.path
            size = st.size or len(text.encode("utf-8"))
            is_md = path.lower().endswith(MARKDOWN_EXTS)
            plain = not is_md or size > MAX_MARKDOWN_BYTES
            meta, warning, body, body_line = {}, None, text, 1
            links: list = []
            sources: list = []
            callouts: dict = {}
            footnotes: dict = {}
            own = None
            if is_md:
                fm = parse_frontmatter(text)
                # The index's wording (engine.stat) when this read still has a problem; never a stale one after
                # the user fixed the frontmatter and the re-index has not run yet.
                meta, warning = fm.meta, ((st.warning or fm.warning) if fm.warning else None)
                raw_body = text[fm.body_offset :]
                links = note_links(meta, raw_body)
                sources = sources_targets(raw_body)
                own = note_ownership(text)  # pure and linear in the text: cheap beside the read
                if not plain:
                    body, callouts, notes = callouts_and_footnotes(wikilinks_to_markdown(raw_body))
                    body_line = fm.body_start_line
                    footnotes = {label: i + body_line for label, i in notes.items()}
                    blocks = markdown_blocks(body)
                    if blocks > MAX_MARKDOWN_BLOCKS:
                        plain, body, body_line, callouts, footnotes = True, text, 1, {}, {}
                        warning = (warning + "; " if warning else "") + f"long note ({blocks} blocks): shown as plain text"
            if plain and size > MAX_MARKDOWN_BYTES and is_md:
                warning = (warning + "; " if warning else "") + "large file: shown as plain text"
            window_start = 1
            if plain:
                lines = body.splitlines(keepends=True)
                if len(lines) > PLAIN_WINDOW_LINES:
                    want = request.line or 1
                    window_start = max(1, min(want - PLAIN_WINDOW_LINES // 4, len(lines) - PLAIN_WINDOW_LINES + 1))
                    body = "".join(lines[window_start - 1 : window_start - 1 + PLAIN_WINDOW_LINES])
            doc = NoteDocument(path, body, meta, body_line, total or 0, size, plain, warning, links, sources,
                               window_start, callouts=callouts, footnotes=footnotes)
            if own is not None:
                doc.owner, doc.owner_stamp, doc.owner_reason = own.owner, own.stamp, own.reason
                doc.app_ranges = own.app_ranges
                doc.app_blocks = [(b.start, b.end, b.intact) for b in own.blocks]
        except Exception as exc:  # EngineError: user-facing; anything else: report, keep the app alive
            self.post_message(NoteLoaded(seq, request, None, _err(exc)))
            return
        self.post_message(NoteLoaded(seq, request, doc))

    async def on_note_loaded(self, message: NoteLoaded) -> None:
        if message.seq != self.note_seq:  # the user asked for another note meanwhile
            return
        req = message.request
        if message.error or message.doc is None:
            self.notify(message.error or "could not open the note", title="Open", severity="error")
            return
        doc = message.doc
        await self.note.show(doc)
        if req.history:
            del self.history[self.history_pos + 1 :]
            if not self.history or self.history[-1][0] != doc.path:
                self.history.append((doc.path, req.line))
            else:
                self.history[-1] = (doc.path, req.line)
            self.history_pos = len(self.history) - 1
        self._history_hint()
        line, end = req.line, req.end_line
        la = line_anchor(req.anchor)
        if la and line is None:
            line, end = la
        if line is not None:
            self.call_after_refresh(self.note.scroll_to_line, line, end)
            self.notify(f"{doc.path}  L{line}" + (f"–L{end}" if end and end != line else ""),
                        title="Opened at", timeout=4)
        elif req.anchor:
            anchor = req.anchor

            def _goto() -> None:
                if not self.note.scroll_to_heading(anchor.split("#")[-1]):
                    self.notify(f"No heading {anchor!r} in {doc.path}", severity="warning")

            self.call_after_refresh(_goto)
        self.load_neighbours(doc.path, list(doc.sources))
        if self.neighbour_depth == 2:
            self.load_traverse(doc.path)

    def _history_hint(self) -> None:
        self.note.set_history(self.history_pos > 0, self.history_pos < len(self.history) - 1)

    # -- neighbours -----------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="neighbours", exit_on_error=False)
    def load_neighbours(self, path: str, sources: list[str] | None = None) -> None:
        eng = self.engine
        try:
            hood = eng.neighbors(path, NEIGHBOUR_LIMIT, NEIGHBOUR_LIMIT)
            resolved: set[str] = set()
            if sources:
                resolver = eng.indexer.build_resolver()
                for target in sources:
                    res = resolver.resolve(target, path)
                    resolved.add(res.path or res.virtual or target)
        except Exception as exc:
            self.post_message(NeighboursLoaded(path, None, _err(exc)))
            return
        self.post_message(NeighboursLoaded(path, hood, sources=resolved))

    def on_neighbours_loaded(self, message: NeighboursLoaded) -> None:
        if message.path != self.note.path:
            return
        if message.error:
            self.links.show_message(f"links unavailable: {message.error}")
        elif not self.keyword_ready and not (message.neighborhood.outlinks or message.neighborhood.inlinks):
            self.links.show_message("Links appear when indexing finishes…")
        else:
            self.links.depth = self.neighbour_depth
            self.links.show(message.path, message.neighborhood, message.sources)

    def on_neighbour_depth_changed(self, message: NeighbourDepthChanged) -> None:
        message.stop()
        self.neighbour_depth = message.depth
        if message.depth == 2 and self.note.path:
            self.load_traverse(self.note.path)

    @work(thread=True, exclusive=True, group="traverse", exit_on_error=False)
    def load_traverse(self, path: str) -> None:
        try:
            res = self.engine.traverse(path, depth=2)
        except Exception as exc:
            self.post_message(TraverseLoaded(path, 2, None, _err(exc)))
            return
        self.post_message(TraverseLoaded(path, 2, res))

    def on_traverse_loaded(self, message: TraverseLoaded) -> None:
        if message.path != self.note.path or self.neighbour_depth != 2:
            return
        if message.error:
            self.notify(f"depth 2 unavailable: {message.error}", severity="warning")
            self.links.show_hop2(message.path, [])
            return
        self.links.show_hop2(message.path, hop2_from_traverse(message.result, message.path))

    # -- links ----------------------------------------------------------------------------------------------
    def on_follow_link(self, message: FollowLink) -> None:
        message.stop()
        self.resolve_link(message.target, message.anchor, message.source)

    @work(thread=True, exclusive=True, group="link", exit_on_error=False)
    def resolve_link(self, target: str, anchor: str | None, source: str | None) -> None:
        """Resolve a clicked link the way the index does (Obsidian rules)."""
        try:
            res = self.engine.indexer.build_resolver().resolve(target, source or "")
        except Exception as exc:
            self.post_message(LinkResolved(target, anchor, None, None, error=str(exc)))
            return
        self.post_message(LinkResolved(target, anchor, res.path, res.virtual or None, bool(res.ambiguous)))

    def on_link_resolved(self, message: LinkResolved) -> None:
        if message.error:
            self.notify(f"cannot resolve {message.target!r}: {message.error}", severity="error")
            return
        if message.path is None:
            if not self.keyword_ready:
                name = message.virtual or message.target
                self.notify(f"{name} does not exist yet (index still building)", title="Dangling link",
                            severity="warning")
                return
            # as in Obsidian, following a link to a missing note offers to create it (at the link's path)
            from .dialogs import NewNoteScreen

            def chosen(path: str | None) -> None:
                if path:
                    self.create_note(path)

            self.app.push_screen(NewNoteScreen(initial=message.target.strip(),
                                               reason=f"[[{message.target}]] points to a note that does not exist "
                                                      "yet. Create it?"), chosen)
            return
        if message.ambiguous:
            self.notify(f"{message.target!r} matches several notes; opened {message.path}", severity="warning")
        self.post_message(OpenNote(message.path, anchor=message.anchor))

    def action_follow_link(self) -> None:
        """Pick one of the open note's links from a list (the keyboard way to follow a link); with the chat's
        transcript focused, one of the last answer's citations."""
        from .dialogs import LinkPickerScreen

        if self.chat.log_view.has_focus and (cites := self.chat.last_citations()):
            def cited(choice) -> None:
                if choice is not None:
                    self.post_message(FollowLink(choice[0], choice[1], None))

            self.app.push_screen(LinkPickerScreen(cites, "Citations of the answer"), cited)
            return
        doc = self.note.doc
        if doc is None:
            self.notify("Open a note first", timeout=2)
            return

        def chosen(choice) -> None:
            if choice is not None:
                target, anchor = choice
                self.post_message(FollowLink(target, anchor, doc.path))

        self.app.push_screen(LinkPickerScreen(list(doc.links), f"Links of {doc.path}"), chosen)

    # -- history --------------------------------------------------------------------------------------------
    def action_back(self) -> None:
        if self.history_pos <= 0:
            self.notify("No earlier note", timeout=2)
            return
        self.history_pos -= 1
        path, line = self.history[self.history_pos]
        self.post_message(OpenNote(path, line, history=False))

    def action_forward(self) -> None:
        if self.history_pos >= len(self.history) - 1:
            self.notify("No later note", timeout=2)
            return
        self.history_pos += 1
        path, line = self.history[self.history_pos]
        self.post_message(OpenNote(path, line, history=False))

    # -- agenda ---------------------------------------------------------------------------------------------
    def on_agenda_requested(self, message: AgendaRequested) -> None:
        message.stop()
        self.load_agenda(message.date)

    def next_refresh_time(self):
        """(Worker thread.) When the next proactive refresh runs: from the scheduler when the app has one, else
        computed from ``settings.proactive_refresh_cron`` in the app timezone (None when disabled)."""
        sched = getattr(self.app, "scheduler", None) or getattr(self.engine, "scheduler", None)
        if sched is not None and hasattr(sched, "next_runs"):
            try:
                return sched.next_runs().get("proactive_refresh")
            except Exception:
                pass
        expr = (getattr(self.settings, "proactive_refresh_cron", "") or "").strip()
        if not expr:
            return None
        tz = self.settings.tzinfo()
        now = _dt.datetime.now(tz)
        try:
            from reme_engine.scheduler import next_fire

            return next_fire(expr, tz, now)
        except ImportError:
            pass
        except Exception:
            return None
        try:
            from croniter import croniter

            nxt = croniter(expr, now.replace(tzinfo=None)).get_next(_dt.datetime)
            return nxt.replace(tzinfo=tz)
        except Exception:
            return None

    @work(thread=True, exclusive=True, group="agenda", exit_on_error=False)
    def load_agenda(self, date: str = "") -> None:
        today = self.today()
        day = date or today
        try:
            res = self.engine.proactive_read(day, include_content=False)
        except Exception as exc:
            self.post_message(AgendaLoaded(day, today, None, error=_err(exc)))
            return
        nxt = self.next_refresh_time() if res.skipped and day == today else None
        carried = None
        if res.skipped:
            # no refresh that day: the open topics of the carry-forward window are still worth seeing
            try:
                days = int(getattr(self.settings.proactive, "carry_forward_days", 14)) + 1
                carried = self.engine.proactive_read(day, include_content=False, horizon_days=days)
                if not carried.success or carried.skipped or not carried.topics:
                    carried = None
            except Exception:
                carried = None
        self.post_message(AgendaLoaded(day, today, res, nxt, carried=carried))

    def on_agenda_loaded(self, message: AgendaLoaded) -> None:
        self.agenda.show(message.date, message.today, message.result, message.next_refresh, message.error,
                         carried=message.carried)

    def action_refresh(self) -> None:
        """Run the proactive refresh for today now (keyword fallback without an LLM)."""
        if self.refresh_running:
            self.notify("A refresh is already running", timeout=3)
            return
        self.refresh_running = True
        self.status.set_work("refreshing today's agenda…")
        self.run_refresh(self.today())

    @work(thread=True, exclusive=True, group="refresh", exit_on_error=False)
    def run_refresh(self, date: str) -> None:
        try:
            # carry_forward: a fresh day gets its file from the open topics even when no daily note changed
            res = self.engine.proactive_refresh(date, carry_forward=True)
        except Exception as exc:
            self.post_message(RefreshFinished(date, error=_err(exc)))
            return
        self.post_message(RefreshFinished(date, res))

    def on_refresh_finished(self, message: RefreshFinished) -> None:
        self.refresh_running = False
        if not self.index_running:
            self.status.set_work("")
        if message.error:
            self.notify(message.error, title="Refresh failed", severity="error", timeout=8)
            return
        res = message.result
        status = getattr(res, "status", "done")
        errors = list(getattr(res, "errors", []) or [])
        topics = len(getattr(res, "topics", []) or [])
        items = len(getattr(res, "agenda_items", []) or [])
        how = "LLM" if getattr(res, "used_llm", False) else "keywords (no LLM)"
        if status == "failed" or errors:
            self.notify("; ".join(errors) or "the refresh failed", title="Refresh failed", severity="error",
                        timeout=8)
        elif status == "no_change":
            self.notify("Nothing new in the daily notes since the last refresh: the agenda shown is current.",
                        title="Refresh", timeout=4)
        elif not getattr(res, "changed", None):  # a fresh day: nothing new, the open topics re-evaluated
            if topics:
                self.notify(f"Nothing new in the daily notes: {topics} open topics carried forward · via {how}",
                            title="Refreshed", timeout=5)
            else:
                self.notify("No recent daily notes and no open topics to carry forward: write in today's page "
                            "(t), then refresh again.", title="Refreshed", timeout=6)
        else:
            self.notify(f"{topics} topics · {items} agenda items · via {how}", title="Refreshed", timeout=5)
        self.load_agenda(message.date)  # the day just refreshed, even if another day was on screen
        self.load_days()

    # -- background: watcher and cron ----------------------------------------------------------------------
    @work(thread=True, group="background", exit_on_error=False)
    def start_background(self) -> None:
        """Start the engine's watcher (external edits indexed within ~1 s) and cron thread; their callbacks run
        on background threads and only post messages."""
        try:
            self.engine.start_background(on_event=lambda ev: self.post_message(CronEvent(ev)),
                                         on_indexed=lambda paths, rep: self.post_message(VaultChanged(paths, rep)))
        except Exception as exc:  # the app stays usable without them
            self.post_message(CronEvent({"event": "watch_error", "error": f"{type(exc).__name__}: {exc}"}))

    def on_vault_changed(self, message: VaultChanged) -> None:
        rep = message.report
        self.note_index = None
        if rep.added or rep.removed or rep.renamed:
            self.load_tree_root()
        self.load_days()
        from .search import SearchScreen

        if isinstance(self.app.screen, SearchScreen):
            self.app.screen.refresh_results()  # results on screen follow the index
        agenda_day = self.agenda.date or self.today()
        if f"{self.daily_dir}/{agenda_day}/interests.yaml" in message.paths:
            self.load_agenda(agenda_day)  # refreshed by another process (cron in --serve, --refresh)
        shown = self.daily.date
        if shown:
            page, folder = f"{self.daily_dir}/{shown}.md", f"{self.daily_dir}/{shown}/"
            if any(p == page or p.startswith(folder) for p in message.paths):
                self.load_day(shown)  # a card of the day on screen was added, edited or removed elsewhere
        current = self.note.path
        if current and current in rep.changed_paths:
            self.post_message(OpenNote(current, history=False))
        elif current and current in rep.removed_paths:
            why = next((sk.get("reason") for sk in rep.skipped if sk.get("path") == current), None)
            self.notify(f"{current} can no longer be read: {why}" if why else f"{current} was removed or renamed",
                        severity="warning")
        elif current:
            self.load_neighbours(current)
        self.load_status()

    def on_cron_event(self, message: CronEvent) -> None:
        ev = message.event
        kind = ev.get("event")
        if kind == "vectors_started":
            if not self.status.work:  # never over another job's progress
                self.status.set_work(BACKGROUND_EMBED)
            return
        if kind == "vectors":  # the embed thread finished a pass: the status line's vector count moved
            if self.status.work == BACKGROUND_EMBED:
                self.status.set_work("")
            if ev.get("error"):
                self.notify(str(ev["error"]), title="Embedding", severity="warning", timeout=8)
            self.load_status()
            return
        if kind == "watch_error":
            self.notify(str(ev.get("error")), title="Watcher", severity="warning", timeout=8)
        elif kind in ("finished", "failed", "skipped"):
            job = ev.get("job", "")
            detail = ev.get("error") or ev.get("result") or ""
            self.notify(f"{job}: {kind}" + (f" — {str(detail)[:160]}" if kind != "finished" else ""),
                        title="Scheduled job", severity="error" if kind == "failed" else "information", timeout=6)
            if job == "proactive_refresh":
                self.load_agenda(self.agenda.date or "")
            self.load_days()
            self.load_status()

    # -- chat -----------------------------------------------------------------------------------------------
    def on_chat_submitted(self, message: ChatSubmitted) -> None:
        message.stop()
        from reme_engine.memory.session import ChatMessage, new_session_id

        if self.session_id is None:
            self.session_id = new_session_id()
        msg = ChatMessage.create("user", message.text, tz=self.settings.tzinfo())
        self.chat.add_message("user", message.text, msg.id, status="saving…")
        self.save_chat(self.session_id, msg, not self.settings.llm.configured)

    @work(thread=True, group="chat", exit_on_error=False)
    def save_chat(self, session_id: str, msg, capture: bool) -> None:
        """Append ``msg`` to the session record at once; without an LLM also to today's capture card."""
        from reme_engine.memory.session import append_messages, session_rel

        eng = self.engine
        layers = self.settings.layers
        try:
            append_messages(eng.vault, layers, session_id, [msg])
            srel = session_rel(layers, session_id)
        except Exception as exc:
            self.post_message(ChatSaved(msg.id, "session", None, error=_err(exc)))
            return
        self.post_message(ChatSaved(msg.id, "session", srel))
        if not capture:
            return
        try:
            from reme_engine.memory.auto_memory import append_user_messages_verbatim

            res = append_user_messages_verbatim(eng, session_id, [msg])
            path = res.paths[0] if res.paths else None
        except Exception as exc:
            self.post_message(ChatSaved(msg.id, "capture", srel, error=_err(exc)))
            return
        self.post_message(ChatSaved(msg.id, "capture", srel, path))

    def on_chat_saved(self, message: ChatSaved) -> None:
        if message.error:
            what = "session record" if message.stage == "session" else "capture card"
            self.chat.mark_failed(message.message_id, f"{what}: {message.error}")
            self.notify(message.error, title=f"Chat not saved to the {what}", severity="error", timeout=8)
            return
        if message.stage == "session":
            self.chat.mark_saved(message.message_id, "saved" if self.settings.llm.configured else "saved · capturing…")
            if self.settings.llm.configured and self.session_id:
                reply_id = self.chat.begin_stream("assistant")
                self.answer_chat(self.session_id, message.message_id, reply_id)
            return
        cap = message.capture_path or ""
        self.chat.mark_saved(message.message_id, f"saved → {cap.rsplit('/', 1)[-1]}" if cap else "saved")
        today = self.today()
        self.load_days()
        if self.daily.date == today:
            self.load_day(today)
        if cap and self.note.path == cap:
            self.post_message(OpenNote(cap, history=False))

    @work(thread=True, group="chat-answer", exit_on_error=False)
    def answer_chat(self, session_id: str, question_id: str, reply_id: str) -> None:
        """Stream a grounded answer (retrieval + citations) into bubble ``reply_id``, record it in the session,
        then run auto-memory for the session (the user's statements become a daily card)."""
        from reme_engine.chat import ChatAnswerer, ChatTurn
        from reme_engine.llm.client import Message as LLMMessage
        from reme_engine.memory.session import ChatMessage, append_messages, read_session

        eng = self.engine
        layers = self.settings.layers
        try:
            history = read_session(eng.vault, layers, session_id)
            question = next((m.content for m in history if m.id == question_id), "")
            past = [LLMMessage(m.role, m.content) for m in history if m.id != question_id
                    and m.role in ("user", "assistant")]
            turn = ChatTurn(question)
            for d in ChatAnswerer(eng, eng.llm_client("chat")).stream(past, question, turn):
                if d.text:
                    self.post_message(ChatReply(reply_id, d.text))
            reply = ChatMessage.create("assistant", turn.answer, tz=self.settings.tzinfo())
            append_messages(eng.vault, layers, session_id, [reply])
            cites = len(turn.citations)
            status = f"{cites} note(s) retrieved" + (" · nothing relevant found" if turn.nothing_found else "")
            if turn.unknown_citations:
                status += f" · ⚠ cites unknown {', '.join(turn.unknown_citations[:3])}"
            self.post_message(ChatReply(reply_id, done=True, status=status))
        except Exception as exc:
            self.post_message(ChatReply(reply_id, done=True, error=_err(exc)))
            return
        try:
            res = eng.auto_memory(session_id)
            card = (res.to_dict() if hasattr(res, "to_dict") else {}) or {}
            written = card.get("created") or card.get("updated")
            if written:
                self.post_message(ChatReply(reply_id, done=True, status=status + " · remembered"))
        except Exception as exc:  # memory failing must not lose the answer
            self.post_message(ChatReply(reply_id, done=True, status=status + f" · memory: {_err(exc)}"))

    def on_chat_reply(self, message: ChatReply) -> None:
        if message.error:
            self.chat.end_stream(message.reply_id, f"⚠ {message.error}")
            return
        if message.chunk:
            self.chat.append_chunk(message.reply_id, message.chunk)
        if message.done:
            self.chat.end_stream(message.reply_id, message.status)
            self.load_days()

    # -- editing --------------------------------------------------------------------------------------------
    def action_edit(self) -> None:
        """Open the note in ``$VISUAL``/``$EDITOR`` (the app suspends meanwhile), then re-index it."""
        from textual.app import SuspendNotSupported

        path = self.note.path
        if not path:
            self.notify("Open a note first", timeout=2)
            return
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        try:
            cmd = [*shlex.split(editor), str(Path(self.engine.vault) / path)]
        except ValueError:
            self.notify(f"cannot parse $EDITOR {editor!r}", severity="error")
            return
        try:
            if self.app.is_headless:  # tests: no terminal to hand over
                rc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True).returncode
            else:
                with self.app.suspend():
                    rc = subprocess.run(cmd).returncode
        except SuspendNotSupported:
            self.notify("This terminal cannot hand over to an editor", severity="error")
            return
        except OSError as exc:
            self.notify(f"cannot start {editor!r}: {exc}", title="Editor", severity="error")
            return
        if rc:
            self.notify(f"{editor} exited with status {rc}", title="Editor", severity="warning", timeout=4)
        # the new text at once, read from the file; the index (and with it the links pane) follows
        self.post_message(OpenNote(path, history=False))
        self.status.set_work(f"re-indexing {path}…")
        self.reindex_note(path)

    @work(thread=True, group="reindex-note", exit_on_error=False)
    def reindex_note(self, path: str) -> None:
        try:
            rep = self.engine.index_paths([path])
        except Exception as exc:
            self.post_message(NoteReindexed(path, error=_err(exc)))
            return
        self.post_message(NoteReindexed(path, rep))

    def on_note_reindexed(self, message: NoteReindexed) -> None:
        self.note_index = None
        if not self.index_running:
            self.status.set_work("")
        if message.error:
            self.notify(message.error, title="Re-index after edit failed", severity="error")
            return
        if self.note.path == message.path:
            self.load_neighbours(message.path, list(self.note.doc.sources) if self.note.doc else None)
        self.load_status()
        self.load_days()
        if self.daily.date:
            self.load_day(self.daily.date)

    # -- new note -------------------------------------------------------------------------------------------
    def action_new_note(self) -> None:
        from .dialogs import NewNoteScreen

        def chosen(path: str | None) -> None:
            if path:
                self.create_note(path)

        self.app.push_screen(NewNoteScreen(), chosen)

    @work(thread=True, group="new-note", exit_on_error=False)
    def create_note(self, path: str) -> None:
        title = path.rsplit("/", 1)[-1][:-3]
        text = f"---\nname: {_yaml_str(title)}\n---\n\n# {title}\n\n"
        try:
            res = self.engine.write(path, text, overwrite=False)
        except Exception as exc:
            self.post_message(NoteCreated(None, _err(exc)))
            return
        self.post_message(NoteCreated(res.path))

    def on_note_created(self, message: NoteCreated) -> None:
        self.note_index = None
        if message.error or not message.path:
            self.notify(message.error or "not created", title="New note", severity="error")
            return
        self.notify(f"{message.path} — press e to write in it", title="Created", timeout=4)
        self.post_message(OpenNote(message.path))
        self.load_tree_root()
        self.load_days()

    # -- status ---------------------------------------------------------------------------------------------
    def action_changes(self) -> None:
        """Open the Changes view; after a revert, reload what the screen shows."""
        from .changes import ChangesScreen

        def done(reverted: list | None) -> None:
            if reverted:
                self.load_days()
                if self.note.path in reverted:
                    self.post_message(OpenNote(self.note.path, history=False))
                self.load_agenda(self.agenda.date or "")

        self.app.push_screen(ChangesScreen(self.engine), done)

    def action_show_status(self) -> None:
        from .dialogs import IndexStatusScreen

        self.app.push_screen(IndexStatusScreen(self.engine, self.schedule_rows))

    def schedule_rows(self) -> list[tuple[str, str, str]]:
        """(Worker thread.) ``(job, next run, last run)`` rows for the status modal."""
        rows = []
        nxt = self.next_refresh_time()
        if nxt is not None:
            rows.append(("proactive_refresh", nxt.strftime("%Y-%m-%d %H:%M %Z"), ""))
        else:
            rows.append(("proactive_refresh", "disabled", ""))
        return rows

    # -- search ---------------------------------------------------------------------------------------------
    def action_search(self, initial: str = "") -> None:
        from .search import SearchScreen

        def done(hit) -> None:
            if hit is not None:
                self.post_message(OpenNote(hit.path, hit.start_line, end_line=hit.end_line))

        self.app.push_screen(SearchScreen(self.engine, initial=initial, layers=self.settings.layers), done)

    # -- quick switcher -------------------------------------------------------------------------------------
    def recent_paths(self) -> list[str]:
        """Notes opened in this session, most recent first (the switcher lists them first)."""
        seen = [p for p, _line in reversed(self.history)]
        if self.note.path:
            seen.insert(0, self.note.path)
        return list(dict.fromkeys(seen))

    def action_quick_switch(self, initial: str = "") -> None:
        """Open a note by name (Ctrl+O); a name no note has can be created from there."""
        from .switcher import QuickSwitcherScreen

        def done(choice) -> None:
            if choice is None:
                return
            kind, path = choice
            if kind == "create":
                self.create_note(path)
            else:
                self.post_message(OpenNote(path))

        def keep(index) -> None:
            self.note_index = index

        s = self.switcher
        if isinstance(self.app.screen, QuickSwitcherScreen) or (s is not None and s in self.app.screen_stack):
            return  # already open (the one instance cannot be pushed twice)
        if s is None:
            s = self.switcher = QuickSwitcherScreen(self.engine, keep_index=keep)
            # installed: closing keeps it mounted, so later openings skip building and laying out the dialog
            self.app.install_screen(s, name=f"quick-switcher-{id(self)}")
        s.reopen(self.recent_paths(), initial, index=self.note_index)
        self.app.push_screen(s, done)

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
        """Keyword + graph pass, then the vector pass; progress is posted (throttled), each pass reports."""
        worker = get_current_worker()
        eng = self.engine
        last = {"t": 0.0, "stage": ""}

        def progress(stage: str, done: int, total: int, detail: str) -> None:
            if worker.is_cancelled:
                raise _Stop()
            now = time.monotonic()
            if stage == last["stage"] and done < total and now - last["t"] < PROGRESS_INTERVAL:
                return
            last["t"], last["stage"] = now, stage
            self.post_message(IndexProgress(stage, done, total, detail))

        try:
            report = eng.index(progress, vectors=False)
        except _Stop:
            self.post_message(IndexFinished("keyword", cancelled=True))
            return
        except Exception as exc:
            self.post_message(IndexFinished("keyword", error=f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(IndexFinished("keyword", report))
        self._post_status()
        if eng.vectors is None:
            self.post_message(IndexFinished("vectors", report))
            return
        try:
            report = eng.embed_pending(progress, report, should_stop=lambda: worker.is_cancelled)
        except _Stop:
            self.post_message(IndexFinished("vectors", report, cancelled=True))
            return
        except Exception as exc:
            self.post_message(IndexFinished("vectors", report, error=f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(IndexFinished("vectors", report, cancelled=worker.is_cancelled))
        self._post_status()

    def on_index_progress(self, message: IndexProgress) -> None:
        name = STAGE_NAMES.get(message.stage, message.stage)
        if message.stage == "embed" and message.done == 0 and message.total:
            # the first batch includes loading the model (seconds), which reports no progress of its own
            self.status.set_work(f"{name} 0/{message.total} (loading model…)")
        elif message.total > 1:
            pct = 100 * message.done // max(1, message.total)
            self.status.set_work(f"{name} {message.done}/{message.total} ({pct}%)")
        else:
            self.status.set_work(f"{name}…")

    def on_index_finished(self, message: IndexFinished) -> None:
        rep = message.report
        self.note_index = None  # titles may have changed
        if message.error:
            self.notify(message.error, title=f"Indexing failed ({message.phase})", severity="error", timeout=10)
        if message.phase == "keyword":
            if message.error or message.cancelled:
                self.index_running = False
                self.status.set_work("")
                return
            first_pass = not self.keyword_ready
            self.keyword_ready = True
            if first_pass and getattr(self.app, "background", False):
                self.start_background()
            self.status.set_work("embedding…" if self.engine.vectors is not None else "")
            if rep is not None and not first_pass and (rep.added or rep.removed or rep.renamed):
                self.load_tree_root()  # files came or went: reload the tree, keeping what was open
                self.load_days()
            current = self.note.path
            if not self.startup_opened:
                self.find_start_note()
            elif current and not first_pass and rep is not None and current in rep.removed_paths:
                self.notify(f"{current} was removed or renamed", severity="warning")
            elif current and not first_pass and rep is not None and current in rep.changed_paths:
                self.post_message(OpenNote(current, history=False))  # changed on disk: show the new text
            elif current:
                self.load_neighbours(current)  # links may have resolved meanwhile
            if self._announce and rep is not None:
                self.notify(f"{rep.scanned} files: +{rep.added} ~{rep.modified} -{rep.removed} "
                            f"(renamed {rep.renamed}), {rep.chunks_total} chunks", title="Re-indexed", timeout=4)
            return
        self.index_running = False
        self.vectors_ready = not message.error and not message.cancelled
        self.status.set_work("")
        if rep is not None and rep.embed_error:
            self.notify(f"vector search degraded to keyword: {rep.embed_error}", title="Embedder",
                        severity="warning", timeout=8)

    def _post_status(self) -> None:
        try:
            self.post_message(StatusLoaded(self.engine.status()))
        except Exception:  # a closed store during shutdown: nothing to show anyway
            pass

    @work(thread=True, exclusive=True, group="status", exit_on_error=False)
    def load_status(self) -> None:
        self._post_status()

    def on_status_loaded(self, message: StatusLoaded) -> None:
        self.status.set_status(message.status)

    # -- the first note -------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="start", exit_on_error=False)
    def find_start_note(self) -> None:
        """See :meth:`start_note_path`."""
        self.post_message(StartNoteFound(self.start_note_path()))

    def start_note_path(self) -> str | None:
        """(Worker thread.) The note to open first: today's day page when it exists, else the README (or index,
        home, welcome) at the vault root, else the first Markdown file."""
        eng = self.engine
        today_page = f"{self.daily_dir}/{self.today()}.md"
        try:
            if eng.stat(today_page).exists:
                return today_page
        except Exception:
            pass
        try:
            top = eng.list("")["entries"]
        except Exception:
            return None
        files = {e["path"].casefold(): e["path"] for e in top if not e["is_dir"]}
        for name in ("readme.md", "index.md", "home.md", "welcome.md"):
            if name in files:
                return files[name]
        try:
            for e in eng.list("", recursive=True, limit=5000)["entries"]:
                if not e["is_dir"] and e["path"].lower().endswith(MARKDOWN_EXTS):
                    return e["path"]
        except Exception:
            return None
        return None

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


def _yaml_str(text: str) -> str:
    """``text`` as a YAML scalar (quoted when it would not read back as the same string)."""
    import json

    return json.dumps(text, ensure_ascii=False)
