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

    ``history``: record the visit in Back/Forward history (False when the visit *is* a Back/Forward step).
    """

    def __init__(self, path: str, line: int | None = None, *, end_line: int | None = None,
                 anchor: str | None = None, history: bool = True) -> None:
        super().__init__()
        self.path = path
        self.line = line
        self.end_line = end_line
        self.anchor = anchor
        self.history = history


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


class NeighboursLoaded(Message):
    """Graph neighbourhood (``reme_engine.search.graph.Neighborhood``) of ``path``, or ``error``."""

    def __init__(self, path: str, neighborhood: Any, error: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.neighborhood = neighborhood
        self.error = error


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
