"""Messages exchanged inside the app.

Two kinds:

* **Requests** posted by widgets upward (they bubble to the screen that coordinates them), e.g. :class:`OpenNote`.
  Widgets never talk to the engine; they say what the user wants.
* **Results** posted by worker threads back to the screen that started them, e.g. :class:`NoteLoaded`. Workers
  only build these plain objects and call ``post_message`` (thread-safe); the handler runs on the UI thread and
  is the only place widgets are touched.

Every result that can go stale carries the ``seq`` of the request it answers, so a handler can drop it when a
newer request was made meanwhile (newest wins).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

# -- requests (widget → screen) ---------------------------------------------------------------------------


class OpenNote(Message):
    """Open ``path`` in the note view, optionally at file ``line`` (1-based) / ``end_line`` or heading ``anchor``.

    ``history``: record the visit in Back/Forward history (False when the visit *is* a Back/Forward step);
    ``focus``: move the keyboard focus to the note once shown (the user picked it: switcher, search, a link).
    """

    def __init__(self, path: str, line: int | None = None, *, end_line: int | None = None,
                 anchor: str | None = None, history: bool = True, focus: bool = False) -> None:
        super().__init__()
        self.focus = focus
        self.path = path
        self.line = line
        self.end_line = end_line
        self.anchor = anchor
        self.history = history


class ReloadNote(Message):
    """(Note view, to itself.) The file of the note ``path`` shown with hash ``shown_sha`` now holds other bytes,
    or is gone (``gone``: deleted or renamed by another program)."""

    def __init__(self, path: str, shown_sha: str, gone: bool = False) -> None:
        super().__init__()
        self.path = path
        self.shown_sha = shown_sha
        self.gone = gone


class FollowLink(Message):
    """A wikilink (or relative Markdown link) was clicked in the note ``source`` (vault-relative path)."""

    def __init__(self, target: str, anchor: str | None, source: str | None) -> None:
        super().__init__()
        self.target = target
        self.anchor = anchor
        self.source = source


class LoadChildren(Message):
    """The vault tree wants the children of tree node ``node_id`` (described by its ``entry``)."""

    def __init__(self, node_id: int, entry: "TreeEntry") -> None:
        super().__init__()
        self.node_id = node_id
        self.entry = entry


# -- plain data carried by results ----------------------------------------------------------------------


@dataclass
class TreeEntry:
    """One node of the vault tree.

    ``kind``: ``daily`` (the Daily group), ``day`` (one date), ``digest`` (the Digest group), ``dir`` (a folder,
    lazy), ``file`` (a note or other file). ``path`` is vault-relative (a date for ``day``).
    """

    kind: str
    path: str
    label: str
    expandable: bool = False
    dim: bool = False


@dataclass
class NoteDocument:
    """A note ready to show: ``body`` is what the view renders (wikilinks already rewritten for Markdown);
    ``body_start_line`` is the file line of the body's first line (after frontmatter); ``plain`` = show as text."""

    path: str
    body: str
    meta: dict = field(default_factory=dict)
    body_start_line: int = 1
    total_lines: int = 0
    size: int = 0
    plain: bool = False
    warning: str | None = None
    #: ``(shown text, target, anchor)`` of every wikilink in the note (frontmatter first), for the link picker.
    links: list = field(default_factory=list)
    #: Link targets written in the note's ``## Sources`` section (a digest node's way back to daily notes).
    sources: list = field(default_factory=list)
    #: File line of the first line of ``body`` in the plain view; a long file is shown as a window of lines.
    window_start: int = 1
    #: Who owns the note (``reme_engine.vault.provenance.note_ownership``): ``"user"`` or ``"app"``; ``owner_stamp``
    #: ``"current"``/``"stale"``/``"none"``; ``owner_reason`` one line for people.
    owner: str = "user"
    owner_stamp: str = "none"
    owner_reason: str = ""
    #: 1-based inclusive file-line ranges that are the app's (its intact blocks, or the whole app-owned note).
    app_ranges: list = field(default_factory=list)
    #: ``(begin, end, intact)`` 1-based file lines of every reme block / day-index section's two markers.
    app_blocks: list = field(default_factory=list)
    #: 0-based body line of each callout → its style group (``render.callouts_and_footnotes``).
    callouts: dict = field(default_factory=dict)
    #: Footnote label → file line of its definition.
    footnotes: dict = field(default_factory=dict)
    #: Link targets of this note that resolve to no file (marked in the link picker).
    missing: frozenset = frozenset()
    #: The engine's content hash of the file as read (``ReadResult.sha``; "" for a placeholder).
    sha: str = ""
    #: A page that does not exist yet (today's page on a vault the app did not lay out): ``body`` says so.
    unwritten: bool = False
    #: The file has no write permission for this user (``engine.stat``): shown in the note pane's title, and ``e``
    #: says why it does not open the editor.
    read_only: bool = False

    @property
    def windowed(self) -> bool:
        """Only part of a long file is in ``body`` (plain view)."""
        return self.plain and (self.window_start > 1 or self.body.count("\n") + 1 < self.total_lines)

    @property
    def window_end(self) -> int:
        return self.window_start + max(0, self.body.count("\n") - (1 if self.body.endswith("\n") else 0))


# -- results (worker → screen) ----------------------------------------------------------------------------


class TreeRootLoaded(Message):
    """Top level of the vault tree: ``entries`` in display order; ``groups`` maps group kind → child entries."""

    def __init__(self, entries: list[TreeEntry], groups: dict[str, list[TreeEntry]]) -> None:
        super().__init__()
        self.entries = entries
        self.groups = groups


class ChildrenLoaded(Message):
    """Children of tree node ``node_id`` (or ``error``)."""

    def __init__(self, node_id: int, entries: list[TreeEntry], error: str | None = None) -> None:
        super().__init__()
        self.node_id = node_id
        self.entries = entries
        self.error = error


class NoteLoaded(Message):
    """Answer to an :class:`OpenNote` request number ``seq``: a document, or ``error`` (user-facing)."""

    def __init__(self, seq: int, request: OpenNote, doc: NoteDocument | None, error: str | None = None) -> None:
        super().__init__()
        self.seq = seq
        self.request = request
        self.doc = doc
        self.error = error


class NoteShown(Message):
    """The note view now shows ``doc``, answering ``request`` (posted up by the note view: history and the
    Links pane follow)."""

    def __init__(self, request: OpenNote, doc: NoteDocument) -> None:
        super().__init__()
        self.request = request
        self.doc = doc


class ChatRestored(Message):
    """The transcript of the chat record ``session_id`` read at start (``messages``: ChatMessage list, oldest
    first), or nothing (``session_id`` None)."""

    def __init__(self, session_id: str | None, messages: list) -> None:
        super().__init__()
        self.session_id = session_id
        self.messages = messages


class NeighboursLoaded(Message):
    """Graph neighbourhood (``reme_engine.search.graph.Neighborhood``) of ``path``, or ``error``; ``sources``:
    resolved paths of the links in the note's ``## Sources`` section."""

    def __init__(self, path: str, neighborhood: Any, error: str | None = None,
                 sources: set[str] | None = None) -> None:
        super().__init__()
        self.path = path
        self.neighborhood = neighborhood
        self.error = error
        self.sources = sources or set()


class LinkResolved(Message):
    """A clicked link's ``target`` resolved to ``path`` (None: no such note; ``virtual`` names the missing node;
    ``error``: resolution itself failed)."""

    def __init__(self, target: str, anchor: str | None, path: str | None, virtual: str | None,
                 ambiguous: bool = False, error: str | None = None) -> None:
        super().__init__()
        self.error = error
        self.target = target
        self.anchor = anchor
        self.path = path
        self.virtual = virtual
        self.ambiguous = ambiguous


class IndexProgress(Message):
    """Progress of the running index work: engine ``stage`` (scan/index/links/embed), ``done`` of ``total``."""

    def __init__(self, stage: str, done: int, total: int, detail: str = "") -> None:
        super().__init__()
        self.stage = stage
        self.done = done
        self.total = total
        self.detail = detail


class IndexFinished(Message):
    """One pass of the index work ended. ``phase``: ``keyword`` (keyword + graph ready) or ``vectors``.

    ``report`` is the engine's ``IndexReport``; ``error`` is set when the pass failed; ``cancelled`` when it was
    stopped (app closing, a newer re-index).
    """

    def __init__(self, phase: str, report: Any = None, error: str | None = None, cancelled: bool = False) -> None:
        super().__init__()
        self.phase = phase
        self.report = report
        self.error = error
        self.cancelled = cancelled


class StatusLoaded(Message):
    """``engine.status()`` figures for the status line."""

    def __init__(self, status: dict) -> None:
        super().__init__()
        self.status = status


class StartNoteFound(Message):
    """The note to show first (README or first note), or None for an empty vault."""

    def __init__(self, path: str | None) -> None:
        super().__init__()
        self.path = path


class SearchDone(Message):
    """Answer to search request number ``seq``: the engine's ``SearchResult`` or an ``error``."""

    def __init__(self, seq: int, query: str, mode: str, result: Any = None, error: str | None = None) -> None:
        super().__init__()
        self.seq = seq
        self.query = query
        self.mode = mode
        self.result = result
        self.error = error


# -- daily pane ---------------------------------------------------------------------------------------------


@dataclass
class DayInfo:
    """One row of the Daily pane's date list: ``cards`` = Markdown cards in the day folder; ``page`` = the day
    page exists; ``today`` marks the app's today (listed first even before it exists)."""

    date: str
    cards: int = 0
    page: bool = False
    today: bool = False


class DayRequested(Message):
    """The Daily pane wants the cards of ``date`` (a date was highlighted)."""

    def __init__(self, date: str) -> None:
        super().__init__()
        self.date = date


class OpenDay(Message):
    """Open the day page of ``date`` in the note view; ``create``: make the day folder and page when missing."""

    def __init__(self, date: str, create: bool = False) -> None:
        super().__init__()
        self.date = date
        self.create = create


class DaysLoaded(Message):
    """The Daily pane's dates (today first, then newest first) with card counts, or ``error``."""

    def __init__(self, today: str, days: list[DayInfo], error: str | None = None) -> None:
        super().__init__()
        self.today = today
        self.days = days
        self.error = error


class DayLoaded(Message):
    """The cards (``reme_engine.vault.daily.DailyCard``) of ``date``; ``page``: the day page path when it exists."""

    def __init__(self, date: str, page: str | None, cards: list, error: str | None = None) -> None:
        super().__init__()
        self.date = date
        self.page = page
        self.cards = cards
        self.error = error


class DayOpened(Message):
    """Answer to :class:`OpenDay`: ``page`` to open (None when the day has no page and none was created);
    ``created`` names what this request created (``page``/``folder``); ``unwritten``: the path of a page that
    was not created because the vault is not laid out by the app (it is written when the user writes it)."""

    def __init__(self, date: str, page: str | None, created: list[str], error: str | None = None, *,
                 unwritten: str | None = None) -> None:
        super().__init__()
        self.unwritten = unwritten
        self.date = date
        self.page = page
        self.created = created
        self.error = error


# -- neighbours -----------------------------------------------------------------------------------------------


class NeighbourDepthChanged(Message):
    """The user toggled the neighbours pane between depth 1 and 2."""

    def __init__(self, depth: int) -> None:
        super().__init__()
        self.depth = depth


class TraverseLoaded(Message):
    """``engine.traverse(path, depth)`` (a ``TraverseResult``) for the neighbours pane, or ``error``."""

    def __init__(self, path: str, depth: int, result: Any, error: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.depth = depth
        self.result = result
        self.error = error


# -- agenda ---------------------------------------------------------------------------------------------------


class AgendaRequested(Message):
    """The agenda pane wants the proactive result of ``date`` ("" = today)."""

    def __init__(self, date: str = "") -> None:
        super().__init__()
        self.date = date


class AgendaLoaded(Message):
    """``engine.proactive_read`` of ``date`` (a ``ProactiveReadResult``), the next scheduled refresh (aware
    datetime or None) and ``error`` when the read itself raised. ``carried``: on a day without a refresh, the
    open topics carried forward from earlier days (a ``ProactiveReadResult`` over the truth source), or None."""

    def __init__(self, date: str, today: str, result: Any, next_refresh: Any = None,
                 error: str | None = None, carried: Any = None) -> None:
        super().__init__()
        self.carried = carried
        self.date = date
        self.today = today
        self.result = result
        self.next_refresh = next_refresh
        self.error = error


class RefreshFinished(Message):
    """``engine.proactive_refresh(date)`` ended: its ``result`` or ``error``."""

    def __init__(self, date: str, result: Any = None, error: str | None = None) -> None:
        super().__init__()
        self.date = date
        self.result = result
        self.error = error


# -- chat -----------------------------------------------------------------------------------------------------


class ChatSubmitted(Message):
    """The user sent ``text`` from the chat input."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class ChatSaved(Message):
    """Progress of saving chat message ``message_id``. ``stage`` ``session``: appended to ``session_path`` (the
    session record); ``capture``: without an LLM, also appended to today's capture card ``capture_path``.
    ``error`` when that stage failed; ``pending`` (the engine's one line) when the capture card was busy and the
    message waits to be appended (its words are safe in the session record and the pending queue); with
    ``capture_path`` too, the words are on that card and ``pending`` says what failed after (journal, index)."""

    def __init__(self, message_id: str, stage: str, session_path: str | None, capture_path: str | None = None,
                 error: str | None = None, pending: str | None = None) -> None:
        super().__init__()
        self.message_id = message_id
        self.stage = stage
        self.session_path = session_path
        self.capture_path = capture_path
        self.error = error
        self.pending = pending


# -- editing, new notes ---------------------------------------------------------------------------------------


class EditReady(Message):
    """The temp copy for ``e`` is ready (``session``: ``editor.EditSession``), or ``error`` (nothing to edit)."""

    def __init__(self, path: str, session: Any = None, error: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.session = session
        self.error = error


class EditFinished(Message):
    """The editor's text went back (``outcome``: ``editor.EditOutcome``: written, unchanged or a conflict copy)."""

    def __init__(self, outcome: Any) -> None:
        super().__init__()
        self.outcome = outcome


class NoteReindexed(Message):
    """``path`` was re-indexed after an edit (``report``: ``IndexReport``), or ``error``."""

    def __init__(self, path: str, report: Any = None, error: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.report = report
        self.error = error


class NoteCreated(Message):
    """A new note was written at ``path`` (or ``error``)."""

    def __init__(self, path: str | None, error: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.error = error


# -- background work (watcher, cron) and chat replies ------------------------------------------------------------


class VaultChanged(Message):
    """The watcher indexed ``paths`` changed outside the app; ``report`` is the engine's IndexReport."""

    def __init__(self, paths: list[str], report) -> None:
        super().__init__()
        self.paths = paths
        self.report = report


class CronEvent(Message):
    """A scheduler event: ``event`` is the engine's dict (``job``, ``event``, ``result``/``error``)."""

    def __init__(self, event: dict) -> None:
        super().__init__()
        self.event = event


class ChatReply(Message):
    """A piece of the assistant's streamed reply ``reply_id``: ``chunk`` text; ``done`` ends it with ``status``;
    ``error`` when the LLM failed."""

    def __init__(self, reply_id: str, chunk: str = "", done: bool = False, status: str = "",
                 error: str | None = None) -> None:
        super().__init__()
        self.reply_id = reply_id
        self.chunk = chunk
        self.done = done
        self.status = status
        self.error = error
