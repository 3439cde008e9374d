"""The main screen: the one coordinator between the widgets and the engine.

Widgets post requests (:class:`OpenNote`, :class:`FollowLink`, :class:`LoadChildren`); this screen runs the
engine calls in Textual thread workers, which post result messages back (:class:`NoteLoaded`,
:class:`NeighboursLoaded`, …); the handlers here — on the UI thread — update the widgets. Workers never touch a
widget.

Layout: vault tree │ note │ links, then the status line and the footer. Panes live in ``#panes`` so later
panes (agenda, chat) are added there without changing the rest.
"""

from __future__ import annotations

import time
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import Worker, get_current_worker

from ..messages import (
    ChildrenLoaded,
    FollowLink,
    IndexFinished,
    IndexProgress,
    LinkResolved,
    LoadChildren,
    NeighboursLoaded,
    NoteDocument,
    NoteLoaded,
    OpenNote,
    StartNoteFound,
    StatusLoaded,
    TreeEntry,
    TreeRootLoaded,
)
from ..render import line_anchor, wikilinks_to_markdown
from ..widgets.neighbours import NeighboursList
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


class _Stop(Exception):
    """Raised inside the engine's progress callback to abandon a cancelled index pass (each batch the engine
    already committed stays valid; the next pass picks up the rest)."""


def _leaf_label(name: str) -> str:
    return name[:-3] if name.lower().endswith(".md") else name


def _is_texty(name: str) -> bool:
    low = name.lower()
    return low.endswith(MARKDOWN_EXTS + (".txt", ".json", ".jsonl", ".csv", ".yaml", ".yml", ".html", ".htm"))


class MainScreen(Screen):
    """Tree │ note │ links. ``engine``: the open ``reme_engine.engine.Engine``; ``settings``: its Settings."""

    BINDINGS = [
        Binding("slash", "search", "Search", id="search"),
        Binding("r", "reindex", "Re-index", id="reindex"),
        Binding("backspace,alt+left", "back", "Back", id="back"),
        Binding("alt+right", "forward", "Forward", id="forward"),
        Binding("escape", "focus_main", "Focus note", show=False, id="focus_main"),
        Binding("ctrl+t", "focus_tree", "Tree", show=False, id="focus_tree"),
        Binding("ctrl+l", "focus_links", "Links", show=False, id="focus_links"),
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
        self.startup_opened = False  # the README/first note was opened (or the user opened something first)
        self._announce = False  # say what a re-index did (only when the user asked for it)
        self._tree_loaded = False
        # Kept as attributes (not queried): handlers may run before nested children are mounted.
        self.vault_tree = VaultTree(id="tree")
        self.note = NoteView(id="note")
        self.links = NeighboursList(id="links")
        self.status = StatusLine(id="status")

    # -- layout ---------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="panes"):
            yield self.vault_tree
            yield self.note
            yield self.links
        yield self.status
        yield Footer()

    def on_mount(self) -> None:
        self.vault_tree.border_title = Path(self.engine.vault).name or "vault"
        self.links.show_message("Open a note to see its links.")
        status = self.status
        status.vault = Path(self.engine.vault).name
        status.demo = bool(getattr(self.settings, "is_demo", False))
        self.vault_tree.focus()
        # The tree reads the file system, not the index: it fills while the index is still being built.
        self.load_tree_root()
        self.load_status()
        self.start_index()

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
            if is_md:
                fm = parse_frontmatter(text)
                meta, warning = fm.meta, fm.warning
                if not plain:
                    body, body_line = text[fm.body_offset :], fm.body_start_line
                    body = wikilinks_to_markdown(body)
            if plain and size > MAX_MARKDOWN_BYTES and is_md:
                warning = (warning + "; " if warning else "") + "large file: shown as plain text"
            doc = NoteDocument(path, body, meta, body_line, total or 0, size, plain, warning)
        except EngineError as exc:
            self.post_message(NoteLoaded(seq, request, None, str(exc)))
            return
        except Exception as exc:  # unexpected: report, keep the app alive
            self.post_message(NoteLoaded(seq, request, None, f"{type(exc).__name__}: {exc}"))
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
        self.load_neighbours(doc.path)

    # -- neighbours -----------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="neighbours", exit_on_error=False)
    def load_neighbours(self, path: str) -> None:
        try:
            hood = self.engine.neighbors(path, NEIGHBOUR_LIMIT, NEIGHBOUR_LIMIT)
        except Exception as exc:
            self.post_message(NeighboursLoaded(path, None, str(exc)))
            return
        self.post_message(NeighboursLoaded(path, hood))

    def on_neighbours_loaded(self, message: NeighboursLoaded) -> None:
        if message.path != self.note.path:
            return
        if message.error:
            self.links.show_message(f"links unavailable: {message.error}")
        elif not self.keyword_ready and not (message.neighborhood.outlinks or message.neighborhood.inlinks):
            self.links.show_message("Links appear when indexing finishes…")
        else:
            self.links.show(message.path, message.neighborhood)

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
            name = message.virtual or message.target
            hint = "" if self.keyword_ready else " (index still building)"
            self.notify(f"{name} does not exist yet{hint}", title="Dangling link", severity="warning")
            return
        if message.ambiguous:
            self.notify(f"{message.target!r} matches several notes; opened {message.path}", severity="warning")
        self.post_message(OpenNote(message.path, anchor=message.anchor))

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

    # -- focus ----------------------------------------------------------------------------------------------
    def action_focus_main(self) -> None:
        self.note.focus_body()

    def action_focus_tree(self) -> None:
        self.vault_tree.focus()

    def action_focus_links(self) -> None:
        self.links.focus()

    # -- search ---------------------------------------------------------------------------------------------
    def action_search(self, initial: str = "") -> None:
        from .search import SearchScreen

        def done(hit) -> None:
            if hit is not None:
                self.post_message(OpenNote(hit.path, hit.start_line, end_line=hit.end_line))

        self.app.push_screen(SearchScreen(self.engine, initial=initial), done)

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
        if message.error:
            self.notify(message.error, title=f"Indexing failed ({message.phase})", severity="error", timeout=10)
        if message.phase == "keyword":
            if message.error or message.cancelled:
                self.index_running = False
                self.status.set_work("")
                return
            first_pass = not self.keyword_ready
            self.keyword_ready = True
            self.status.set_work("embedding…" if self.engine.vectors is not None else "")
            if rep is not None and not first_pass and (rep.added or rep.removed or rep.renamed):
                self.load_tree_root()  # files came or went: reload the tree, keeping what was open
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
        """README (or index) at the vault root, else the first Markdown file."""
        self.post_message(StartNoteFound(self.start_note_path()))

    def start_note_path(self) -> str | None:
        """(Worker thread.) The note to open first."""
        eng = self.engine
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
