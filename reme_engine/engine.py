"""The engine façade: the one object the TUI and the CLI talk to.

``Engine.open(settings)`` wires the store, tokenizer, embedder, vector index, indexer and searcher of one vault.
Methods return typed results (:mod:`reme_engine.results`); :mod:`reme_engine.jobs` exposes them as named jobs
with ``key=value`` parameters and JSON results (``reme-tui job …``). The façade only delegates, to one module per
job:

- file jobs (paths, read/write/edit/delete, list, stat, frontmatter, day pages): :mod:`reme_engine.vault.files`
- move and crash recovery of moves: :mod:`reme_engine.vault.move`
- the embed-lock protocol (one vector pass at a time): :mod:`reme_engine.embed_pass`
- watcher, embed thread, scheduler, state watch: :mod:`reme_engine.background`
- index consistency and health: :mod:`reme_engine.health`
- LLM pipelines under the writer lock: :mod:`reme_engine.pipelines`
- errors and result types: :mod:`reme_engine.errors`, :mod:`reme_engine.results` (re-exported here)

Threading: every method may be called from any thread (the TUI calls them from Textual thread workers).
Vault mutations and index writes are serialised by ``write_lock``; reads run concurrently (SQLite WAL).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .background import Background
from .config import ConfigError, Settings, finalize_state_dir
from .embed_pass import EmbedCoordinator
from .errors import BadArgument, EngineError
from .index.indexer import Indexer, IndexReport, Progress
from .index.store import Store
from .llm.client import CancelToken, LLMCancelled  # the chat answer's cancel hook (no SDK import)
from .results import (HEALTH_FIRST_N, MAX_READ_CHARS, MAX_READ_LINES, DeleteResult, DreamLog, EngineStatus, FileProblems,
                      FrontmatterRead, FrontmatterUpdate, HealthReport, ListResult, MoveResult, NoteTitle,
                      ReadResult, StatResult, WriteResult, result_to_dict)
from . import pipelines
from .vault import files, move as _move
from . import frontend

if TYPE_CHECKING:
    from datetime import datetime

    from .index.embedder import Embedder

    from .markdown.frontmatter import Frontmatter
    from .markdown.links import Link
    from .vault.provenance import Ownership

    from .agent_capture import RememberResult

    from .chat import ChatTurn
    from .markdown.links import Resolution
    from .memory.session import ChatMessage
    from .dream.models import DreamReport
    from .llm.client import LLMClient
    from .local_server import LocalServer
    from .lock import WriterLock
    from .memory.auto_memory import AutoMemoryReport
    from .memory.auto_resource import AutoResourceReport
    from .memory.journal import ChangeJournal
    from .proactive.read import ProactiveReadResult
    from .proactive.refresh import ProactiveRefreshReport
    from .search.graph import Neighborhood, TraverseResult
    from .search.hybrid import HybridSearcher, SearchFilters, SearchResult
    from .vault.daily import DailyCard, DailyCreateResult, DailyReindexResult

# Callers import these from here (``from reme_engine.engine import Engine, EngineError, result_to_dict``).
__all__ = ["Engine", "EngineError", "ReadResult", "WriteResult", "DeleteResult", "MoveResult", "StatResult",
           "NoteTitle", "result_to_dict", "MAX_READ_LINES", "HEALTH_FIRST_N", "CancelToken", "LLMCancelled"]

log = logging.getLogger("reme.engine")


class Engine:
    """One open vault. Create with :meth:`open`; call :meth:`close` when done.

    Public attributes: ``settings``, ``vault`` (resolved root), ``state_dir``, ``store``, ``tokenizer``,
    ``embedder`` and ``vectors`` (None without an embedder), ``indexer``, ``write_lock`` (re-entrant),
    ``watcher`` and ``scheduler`` (None until :meth:`start_background`), ``recovered`` (lines of what the open
    finished), ``detected_daily_dir``.
    """

    #: Seconds between checks that the state dir still exists while the background runs.
    STATE_WATCH_S = 2.0
    _local_server_guard = threading.Lock()  # see start_local_server

    def __init__(self, settings: Settings, *, embedder: Embedder | None = None) -> None:
        if settings.vault is None:
            raise ConfigError("no vault configured")
        self.settings = settings
        self.vault = Path(settings.vault).resolve()
        if not self.vault.is_dir():
            raise ConfigError(f"vault is a file, not a folder: {self.vault}" if self.vault.exists()
                              else f"vault folder does not exist: {self.vault}")
        #: the daily folder found in an existing Obsidian vault (no ``daily/`` and none configured), or None
        self.detected_daily_dir: str | None = None
        if settings.layers.daily_dir.strip("/") == "daily" and not (self.vault / "daily").exists():
            from .vault.daily import detect_daily_dir

            found = detect_daily_dir(self.vault)
            if found and found not in (settings.layers.digest_dir, settings.layers.resource_dir,
                                        settings.layers.session_dir):
                settings.layers.daily_dir = self.detected_daily_dir = found
                log.info("daily notes found in %s (set layers.daily_dir to choose another folder)", found)
        from .vault.daily import DayFormatError, resolve_day_format

        try:
            #: one line when the daily-note format from Obsidian cannot be followed (no day page is found), else None
            self.daily_format_warning: str | None = resolve_day_format(self.vault, settings.layers)
        except DayFormatError as exc:  # the user's own layers.daily_format
            raise ConfigError(f"layers.daily_format: {exc}") from exc
        if self.daily_format_warning:
            log.warning("%s", self.daily_format_warning)
        from .vault.app_folder import apply_app_folder

        # an existing vault keeps chat records and proactive state in one app folder (layers.app_dir)
        apply_app_folder(self.vault, settings)
        self.state_dir = finalize_state_dir(settings)
        if self.state_dir.exists() and not self.state_dir.is_dir():
            raise ConfigError(f"state dir is a file, not a folder: {self.state_dir} (pass --state-dir a folder)")
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"state dir {self.state_dir} cannot be created: {exc.strerror or exc}") from exc
        self.write_lock = threading.RLock()
        self.store = Store(self.state_dir / "index.sqlite", self.state_dir / "embeddings.sqlite")
        from .index.tokenizer import default_tokenizer

        self.tokenizer = default_tokenizer()
        self.vectors = None
        from .index.embedder import make_embedder

        self.embedder = embedder if embedder is not None else make_embedder(settings)
        if self.embedder is not None:
            from .index.vectors import VectorState

            self.vectors = VectorState(self.store, self.embedder, self.state_dir, settings.ann_threshold)
        self.indexer = Indexer(self.vault, settings, self.store, self.tokenizer, self.vectors)
        self._embed = EmbedCoordinator(self.vectors, self.indexer, self.write_lock, lambda: self._closed)
        self._background = Background(self)
        from .health import check_index_at_open

        self._open_repairs: list[str] = check_index_at_open(self)
        self._searcher = None
        self._journal = None
        self.watcher = None
        self.scheduler = None
        self._closed = False
        self._swept = False
        #: one line per thing :meth:`recover_interrupted` finished at open (shown in the status and summaries)
        self.recovered: list[str] = self.recover_interrupted()

    @classmethod
    def open(cls, settings: Settings, *, embedder: Embedder | None = None) -> Engine:
        """Open the vault named by ``settings.vault`` (state dir created). Raises ConfigError.

        ``embedder``: an already-loaded :class:`Embedder` to share (tests, the app's workers); default: per settings.
        """
        return cls(settings, embedder=embedder)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run (background threads and running passes stop)."""
        return self._closed

    def close(self) -> None:
        """Stop the background threads, wait (≤ 15 s) for a running vector pass's batch, close the databases."""
        if self._closed:
            return
        self._closed = True
        if getattr(self, "_local_server", None) is not None:  # no new job requests while closing
            self._local_server.close()
        self.stop_background()
        # a vector pass running on another thread (the app's worker) stops after its batch; wait for it so it
        # never writes to a closed store
        self._embed.wait_idle(15)
        # the capture retry thread may be mid-append (it indexes the card it wrote): closing the store under it
        # crashed the process (sqlite used after close), so let that append finish first
        retry = getattr(self, "_capture_retry_thread", None)
        if retry is not None and retry is not threading.current_thread():
            retry.join(15)
        if self._searcher is not None:
            self._searcher.close()
        if self._journal is not None:
            self._journal.close()
        self.store.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def _embed_lock(self) -> threading.Lock:
        """The lock the running vector pass holds (tests look at it)."""
        return self._embed.lock

    # -- indexing -----------------------------------------------------------------------------------------
    def index(self, progress: Progress | None = None, *, vectors: bool = True, child: bool = False,
              cancelled: Callable[[], bool] | None = None, child_log: str | None = None) -> IndexReport:
        """Full incremental sync (keyword + graph), then the vector pass when ``vectors`` and an embedder exist.

        The first full sync of an engine also sweeps the temp files crashed writes left (:meth:`sweep_temp_files`).
        With ``child``, a big sync (:meth:`child_index_ahead`) runs in a separate, niced process writing the same
        database (:mod:`reme_engine.index.sync_process`; its output appended to ``child_log``), so this process's
        threads keep the GIL; ``cancelled`` is polled meanwhile. A child that fails falls back to this process.
        Exceptions ``progress`` raises propagate (the child is stopped first)."""
        report = None
        if child:
            from .index.sync_process import index_in_child

            report = index_in_child(self, progress, cancelled, log_path=child_log)
        with self.write_lock:
            if report is None:
                if not self._swept:
                    self._swept = True
                    self.sweep_temp_files()
                report = self.indexer.sync(progress)
            with self.store.write():
                self.store.set_meta("last_sync", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        if vectors:
            self.embed_pending(progress, report)
        return report

    def child_index_ahead(self) -> bool:
        """True when :meth:`index` with ``child`` would sync in a child process (a first index, an interrupted sync
        or many files to re-read): one SQL count and a walk of a few hundred directory entries. False on a closed
        or broken store (the pass itself reports it)."""
        from .index.sync_process import wants_child

        try:
            return wants_child(self.store, self.vault)
        except Exception:  # noqa: BLE001
            return False

    def embed_pending(self, progress: Progress | None = None, report: IndexReport | None = None,
                      should_stop: Callable[[], bool] | None = None, *, wait: bool = True) -> IndexReport:
        """The vector pass alone, one at a time (see :class:`reme_engine.embed_pass.EmbedCoordinator`). With
        ``wait=False``, when a pass is already running this returns at once and that pass runs once more."""
        return self._embed.run(progress, report, should_stop, wait=wait)

    def index_paths(self, paths: list[str], *, vectors: bool = True) -> IndexReport:
        """Re-index just ``paths`` (the app's own writes, watcher batches): keyword + graph under the write lock,
        then, with ``vectors``, the new chunks' vectors — at once when no vector pass is running, otherwise by
        the running pass (this call does not wait for it)."""
        with self.write_lock:
            report = self.indexer.sync(paths=paths)
        if vectors and self.vectors is not None and self.vectors.ready and report.chunks_added:
            self.embed_pending(report=report, wait=False)
        return report

    def reindex(self, progress: Progress | None = None, *, clear: bool = False, vectors: bool = True) -> IndexReport:
        """Re-sync the index; ``clear`` drops the index first (the embedding cache is kept, nothing re-embeds)."""
        if clear:
            with self.write_lock:
                self.indexer.clear()  # a corrupt database is moved aside instead
        return self.index(progress, vectors=vectors)

    # -- search -------------------------------------------------------------------------------------------
    @property
    def searcher(self) -> HybridSearcher:
        """The vault's :class:`~reme_engine.search.hybrid.HybridSearcher` (built on first use)."""
        if self._searcher is None:
            from datetime import datetime as _datetime

            from .search.hybrid import HybridSearcher, fusion_from_settings

            s = self.settings
            self._searcher = HybridSearcher(self.store, self.tokenizer, self.vectors,
                                            vector_weight=s.search_vector_weight,
                                            keyword_weight=s.search_keyword_weight, rrf_k=s.rrf_k,
                                            fusion=fusion_from_settings(s))
            self._searcher.title_vectors = s.search.title_vectors
            self._searcher.line_dirs = (s.layers.daily_dir, s.layers.session_dir)  # where turn vectors are (linevec)
            # time words ("yesterday", "上周") count in the configured timezone, not the machine's; the zone is
            # resolved once (resolving it per search was 0.6 ms of each)
            tz = s.tzinfo()
            self._searcher.today = lambda: _datetime.now(tz).date()
        return self._searcher

    def search(self, query: str, *, limit: int = 10, mode: str = "hybrid", filters: SearchFilters | None = None,
               neighbors: bool = True) -> SearchResult:
        """Hybrid/keyword/vector search (:class:`reme_engine.search.hybrid.SearchResult`).

        In hybrid/vector mode the vector index is opened on first use (loading faiss and, lazily, the model).
        ``neighbors``: the result carries the hits' hop-2 directory, built when ``result.neighbors`` (or
        ``to_dict()``, the rendered text) is first read, so a caller showing only hits does not pay for it.
        Raises ValueError for an unknown ``mode``.
        """
        if mode in ("hybrid", "vector") and self.vectors is not None and not self.vectors.ready:
            try:
                self.vectors.open()
            except Exception as exc:  # a corrupt index must not break keyword search
                self.vectors.error = str(exc)
        return self.searcher.search(query, limit=limit, mode=mode, filters=filters, neighbors=neighbors)

    def neighbors(self, path: str, limit_out: int | None = 10, limit_in: int | None = 10) -> Neighborhood:
        """The hop-2 directory of one note: at most ``limit_out`` outlinks and ``limit_in`` inlinks."""
        from .search.graph import neighborhood

        return neighborhood(self.store, files.find_note(self, path).rel, limit_out, limit_in)

    def traverse(self, path: str, depth: int = 1, direction: str = "both", max_nodes: int = 200) -> TraverseResult:
        """Breadth-first walk over links from ``path`` (``direction``: out | in | both); EngineError when invalid."""
        from .search.graph import traverse

        try:
            return traverse(self.store, files.find_note(self, path).rel, depth, direction, max_nodes)
        except ValueError as exc:  # a bad direction or depth: bad usage (exit 2)
            raise BadArgument(str(exc)) from exc

    def note_titles(self) -> list[NoteTitle]:
        """(Read-only.) Every indexed Markdown note's path, title and aliases, newest first (by mtime); one SQL
        query on the index (about 10 ms for 3,000 notes). Empty before the first index pass."""
        return files.note_titles(self)

    # -- what a front end asks besides file jobs (reme_engine.frontend) ----------------------------------------
    def resolve_link(self, target: str, source: str = "") -> Resolution:
        """Resolve wikilink ``target`` written in note ``source`` ("" for none) as the index does: ``path`` or
        ``virtual``, ``ambiguous``. The resolver is kept until names or aliases change."""
        return frontend.resolve_link(self, target, source)

    def resolve_links(self, targets: list[str], source: str = "") -> list[Resolution]:
        """:meth:`resolve_link` for several targets written in one note (one freshness check)."""
        return frontend.resolve_links(self, targets, source)

    def card_dirs(self) -> list[str]:
        """Vault-relative folders whose ``<folder>/<date>/`` holds day cards, app folder first in an existing
        vault (``reme/daily``), then the daily folder. Pure (settings only)."""
        from .vault.app_folder import card_dirs

        return card_dirs(self.settings.layers)

    def next_run(self, job: str = "proactive_refresh") -> datetime | None:
        """When ``job`` (proactive_refresh/auto_dream) runs next (aware, app timezone); None when disabled."""
        return frontend.next_run(self, job)

    def chat_append(self, session_id: str, role: str, text: str, *, message_id: str | None = None) -> ChatMessage:
        """Append one message (role user/assistant, stamped now; ``message_id`` or a new uuid4 hex) to the chat
        record ``<session_dir>/dialog/<session_id>.jsonl``. EngineError for a bad id or role; OSError."""
        return frontend.chat_append(self, session_id, role, text, message_id)

    def chat_history(self, session_id: str) -> list[ChatMessage]:
        """The messages of chat record ``session_id`` in file order (bad lines skipped); [] when none."""
        return frontend.chat_history(self, session_id)

    def chat_latest_session(self) -> str | None:
        """The id of the chat record written last (file mtime), None when the vault has none."""
        return frontend.chat_latest_session(self)

    def chat_capture(self, session_id: str, messages: list[ChatMessage]) -> list[str]:
        """No-LLM quick capture: the user's ``messages`` appended verbatim to their day's capture card; returns
        the cards written. EngineError when a card cannot be written; SavedWithWarning (a WritePending) when the
        words are on the card but the journal, catalog or index could not be updated."""
        return frontend.chat_capture(self, session_id, messages)

    def chat_answer(self, session_id: str, question_id: str, on_text: Callable[[str], Any],
                    cancel: CancelToken | None = None) -> ChatTurn:
        """Answer message ``question_id`` of the session from the vault (citations), streaming text to
        ``on_text`` on this thread, and record the answer. ``cancel`` (set from any thread, e.g. the UI's
        Escape) stops the answer within milliseconds even while the endpoint has sent nothing: its connection is
        shut down and :class:`LLMCancelled` raised; a cancelled answer is not recorded. Raises what the chat
        pipeline raises (LLMError and its kinds)."""
        return frontend.chat_answer(self, session_id, question_id, on_text, cancel)

    @staticmethod
    def replace_file(path: Path, text: str, before: bytes | None) -> None:
        """Write ``text`` to ``path`` (any file, e.g. the user's config) with the app's compare-and-swap write:
        only while the file still holds ``before`` (None: it must not exist). EngineError when it changed
        meanwhile (theirs wins, nothing written); OSError otherwise."""
        from .vault.io import WriteConflict, atomic_write, content_hash

        try:
            atomic_write(path, text, expected_sha=content_hash(before) if before is not None else None)
        except WriteConflict as exc:
            raise EngineError(f"{path} changed while being saved; not saved ({exc})") from exc

    @staticmethod
    def parse_frontmatter(text: str) -> Frontmatter:
        """The frontmatter of a note's text (meta, warning, body_offset, body_start_line); never raises."""
        from .markdown.frontmatter import parse_frontmatter  # lazy: `job` start-up never pays for it

        return parse_frontmatter(text)

    @staticmethod
    def hide_comments(text: str) -> str:
        """A note body as a reading view shows it: ``%% comments %%`` blanked, line numbers kept (see
        :func:`reme_engine.markdown.links.hide_comments`); never raises."""
        from .markdown.links import hide_comments

        return hide_comments(text)

    @staticmethod
    def note_ownership(text: str) -> Ownership:
        """Who owns a note's full text and which (1-based file) lines are the app's; never raises."""
        from .vault.provenance import note_ownership  # lazy: it loads markdown-it (~30 ms)

        return note_ownership(text)

    @staticmethod
    def parse_links(text: str, *, start_line: int = 1, start_offset: int = 0) -> list[Link]:
        """Every link of ``text``, skipping code and comments as the index does; linear, never raises."""
        from .markdown.links import parse_links

        return parse_links(text, start_line=start_line, start_offset=start_offset)

    # -- file jobs (reme_engine.vault.files) -----------------------------------------------------------------
    def read(self, path: str, start_line: int = 1, end_line: int | None = None,
             max_chars: int | None = MAX_READ_CHARS) -> ReadResult:
        """Lines ``start_line``..``end_line`` (1-based, inclusive) of a text file: at most MAX_READ_LINES lines and
        ``max_chars`` characters (None: unbounded, for a front end that pages a whole note; ``truncated``;
        ``line_cut`` when one line was longer). Raises EngineError."""
        return files.read(self, path, start_line, end_line, max_chars)

    def write(self, path: str, content: str, *, overwrite: bool = True, expected_sha: str | None = None) -> WriteResult:
        """Create or replace a text file atomically and index it. ``overwrite=False`` refuses an existing file;
        ``expected_sha`` (from a read) refuses when the file changed since (EngineError, nothing written).
        ``indexed`` is False when the index left the file out (over ``max_file_bytes``, binary …): it is written
        as the app's editor writes it, and ``not_indexed`` (:meth:`index_skip_reason`) says why search leaves it
        out."""
        return self._index_truth(files.write(self, path, content, overwrite=overwrite, expected_sha=expected_sha))

    def edit(self, path: str, old: str, new: str, *, count: int = 1, expected_sha: str | None = None) -> WriteResult:
        """Replace ``old`` with ``new`` in a file. ``count``: expected occurrences (0 = replace all).

        ``expected_sha`` (from a read) refuses when the file changed since. Raises EngineError when ``old`` is
        absent or occurs a different number of times than ``count``.
        """
        return self._index_truth(files.edit(self, path, old, new, count=count, expected_sha=expected_sha))

    def index_skip_reason(self, path: str) -> str | None:
        """Why the index leaves vault-relative ``path`` out (the indexer's one line, e.g. ``too large (9,000 bytes
        > limit 8,000)``, ``binary file (NUL bytes)``), or None when it is indexed or unknown to the index."""
        row = self.store.conn.execute("SELECT reason FROM skipped WHERE path=?", (path,)).fetchone()
        return row[0] if row else None

    def _index_truth(self, res: WriteResult) -> WriteResult:
        """``res`` with ``indexed=False`` and the reason as ``not_indexed`` when the write's own index pass skipped
        the file (the write functions index at once and cannot see the outcome)."""
        why = self.index_skip_reason(res.path)
        if why is None:
            return res
        from dataclasses import replace

        return replace(res, indexed=False, not_indexed=why)

    def delete(self, path: str, expected_sha: str | None = None) -> DeleteResult:
        """Delete a file and report the links that still point to it (now dangling); with ``expected_sha``, only
        if it still holds those bytes (see :func:`reme_engine.vault.files.delete`)."""
        return files.delete(self, path, expected_sha)

    def move(self, src: str, dst: str) -> MoveResult:
        """Move/rename a file and rewrite the inbound links that would break, atomically per file (see
        :func:`reme_engine.vault.move.move`). EngineError for an existing ``dst``, a layer folder or a folder;
        linking notes changed meanwhile are reported in ``conflicts`` and left untouched."""
        return _move.move(self, src, dst)

    def recover_interrupted(self) -> list[str]:
        """Finish the moves a crash interrupted (see :func:`reme_engine.vault.move.recover_interrupted`); one
        user-facing line per thing done. Called when the engine opens; cheap when there is nothing to do."""
        return _move.recover_interrupted(self)

    def sweep_temp_files(self) -> int:
        """Remove the app's temp files older than a minute that crashed writes left in the vault; returns how many.

        Walks the vault's visible folders (~60 ms for 3,000 notes), so it runs with a full sync, not per job."""
        from .vault.io import sweep_temp_files

        removed = sweep_temp_files(self.vault)
        if removed:
            log.warning("removed %d temp file(s) left by an interrupted write", len(removed))
        return len(removed)

    def list(self, path: str = "", *, recursive: bool = False, limit: int = 2000) -> ListResult:
        """Entries of a folder: ``{path, entries: [{path, is_dir, size, mtime}], truncated}`` (hidden ones skipped;
        a symlink leaving the vault by name only, ``outside_vault`` True)."""
        return files.list_folder(self, path, recursive=recursive, limit=limit)

    def stat(self, path: str) -> StatResult:
        """Metadata of ``path`` (``.md`` optional for a note). A missing file is ``exists=False``, not an error.

        ``warning``: the file's frontmatter problem with its true file line; ``ambiguous_links``: its links that
        several files match."""
        return files.stat(self, path)

    # -- frontmatter --------------------------------------------------------------------------------------
    def frontmatter_read(self, path: str) -> FrontmatterRead:
        """``{path, frontmatter, warning, has_block}`` parsed from the file on disk."""
        return files.frontmatter_read(self, path)

    def frontmatter_update(self, path: str, updates: dict | None = None,
                           delete: list[str] | None = None) -> FrontmatterUpdate:
        """Merge ``updates`` into / remove ``delete`` keys from the frontmatter, keeping order and unknown keys."""
        return files.frontmatter_update(self, path, updates, delete)

    # -- daily --------------------------------------------------------------------------------------------
    def day(self, date: str = "") -> str:
        """``date`` checked as YYYY-MM-DD, or today in the app's timezone when empty. EngineError when invalid."""
        return files.valid_day(self, date)

    def daily_create(self, date: str = "") -> DailyCreateResult:
        """Create the day folder and day page of ``date`` (default today; the page at :meth:`day_page`);
        idempotent. EngineError for a daily format reme cannot follow."""
        self.day_page(date)  # a format reme cannot follow is refused here, before any folder is made
        return files.daily_create(self, self.day(date))

    def day_page(self, date: str = "") -> str:
        """Vault-relative path of the day page of ``date`` (default today), whether or not it exists: the path
        Obsidian's Daily notes would create (``layers.daily_format``, e.g. ``Journal/2026/12/2026-12-02-Wed.md``).
        EngineError for an invalid date or a daily format reme cannot follow (:attr:`daily_format_warning`)."""
        from .vault.daily import DayFormatError, day_page_rel

        try:
            return day_page_rel(self.settings.layers, self.day(date))
        except DayFormatError as exc:
            raise EngineError(str(exc)) from exc

    def daily_list(self, date: str = "") -> list[DailyCard]:
        """The cards of a day (``<daily_dir>/<date>/*.md``)."""
        from .vault import daily

        return daily.daily_list(self.vault, self.day(date), self.settings.layers)

    def list_days(self) -> list[str]:
        """Dates (YYYY-MM-DD) with a day page or a day folder, newest first."""
        from .vault import daily

        return daily.list_days(self.vault, self.settings.layers)

    def daily_reindex(self, date: str = "", insert_markers: bool = False) -> DailyReindexResult:
        """Regenerate the day page's index section between its markers (``insert_markers`` adds them).
        EngineError for a daily format reme cannot follow."""
        self.day_page(date)  # refuses a format reme cannot follow, in one line
        return files.daily_reindex(self, self.day(date), insert_markers)

    def refresh_day_indexes(self, paths: list[str]) -> list[str]:
        """Regenerate the card index of the existing day pages whose cards are among ``paths`` (the watcher calls
        this); returns the pages rewritten (see :func:`reme_engine.vault.files.refresh_day_indexes`)."""
        return files.refresh_day_indexes(self, paths)

    # -- proactive ----------------------------------------------------------------------------------------
    def proactive_read(self, date: str = "", include_content: bool = True, horizon_days: int = 1,
                       min_confidence: float = 0.4) -> ProactiveReadResult:
        """The day's proactive topics and agenda from ``daily/<date>/interests.yaml``."""
        from .proactive.read import proactive_read

        return proactive_read(self.vault, date=date, include_content=include_content, horizon_days=horizon_days,
                              min_confidence=min_confidence, today=self.settings.today(),
                              layers=self.settings.layers)

    # -- LLM pipelines ------------------------------------------------------------------------------------
    @property
    def journal(self) -> ChangeJournal:
        """The :class:`~reme_engine.memory.journal.ChangeJournal` of this vault (created on first use)."""
        if self._journal is None:
            from .memory.journal import ChangeJournal

            self._journal = ChangeJournal(self.state_dir)
        return self._journal

    def llm_client(self, feature: str) -> LLMClient:
        """The configured LLM client. Raises :class:`~reme_engine.llm.client.LLMNotConfigured` naming ``feature``."""
        from .llm.client import make_client

        return make_client(self.settings.llm, feature)

    def writer_lock(self, purpose: str) -> WriterLock:
        """The cross-process single-writer lock of this vault (a context manager; raises LockHeld when busy)."""
        from .lock import WriterLock

        return WriterLock(self.state_dir, purpose)

    def auto_dream(self, date: str = "", hint: str = "", llm: LLMClient | Callable[[], LLMClient] | None = None,
                   scan_days: int = 1) -> DreamReport:
        """Daily notes → digest nodes (ARCHITECTURE §11.2). Raises LLMNotConfigured before touching anything.

        The client is built only when something changed (importing the SDK costs ~1 s), via a factory.
        """
        return pipelines.auto_dream(self, self.day(date), hint, llm, scan_days)

    def auto_memory(self, session_id: str, llm: LLMClient | None = None) -> AutoMemoryReport:
        """A chat session's new messages → one daily card. Raises LLMNotConfigured before touching anything."""
        return pipelines.auto_memory(self, session_id, llm)

    def auto_resource(self, llm: LLMClient | None = None) -> AutoResourceReport:
        """New/changed/removed files under resource/ → source-linked daily cards."""
        return pipelines.auto_resource(self, llm)

    def proactive_refresh(self, date: str = "", llm: LLMClient | None = None, use_llm: bool = True,
                          carry_forward: bool = False) -> ProactiveRefreshReport:
        """Daily notes → ``daily/<date>/interests.yaml`` (ARCHITECTURE §11.1); without an LLM, the keyword fallback.
        ``carry_forward``: on a day without an interests file, write it from the open topics even when no daily
        note changed (see ``run_proactive_refresh``)."""
        return pipelines.proactive_refresh(self, self.day(date), llm, use_llm, carry_forward)

    def dream_log(self, limit: int = 20, run_id: str = "", with_text: bool = False) -> DreamLog:
        """Recent pipeline runs, or one run's changes (``run_id``)."""
        if run_id:
            runs = [r for r in self.journal.runs(limit=100000) if r["run_id"] == run_id]
            if not runs:
                raise EngineError(f"unknown run {run_id!r}")
            return {"run": runs[0], "changes": [c.to_dict(with_text) for c in self.journal.changes(run_id, with_text)]}
        return {"runs": self.journal.runs(limit=limit)}

    def revert(self, run_id: str) -> dict[str, Any]:
        """Restore the before-state of a run's files, refusing those changed since; re-indexes what changed.
        Returns the :class:`~reme_engine.memory.journal.RevertResult` as a dict."""
        with self.write_lock:
            try:
                res = self.journal.revert(self.vault, run_id)
            except KeyError as exc:
                raise EngineError(str(exc.args[0])) from exc
            if res.restored:
                self.index_paths(res.restored)
        return res.to_dict()

    def remember(self, text: str, *, agent: str = "", conversation: list[dict] | None = None) -> RememberResult:
        """Append what an agent was told to today's capture card, marked as noted by ``agent`` (journaled,
        indexed); ``conversation`` (``[{role, content}]``) is kept as a chat record too. See
        :func:`reme_engine.agent_capture.remember`; ValueError for malformed messages, EngineError otherwise
        (also for a NUL character or a lone surrogate in ``text``, before anything is written: it would turn the
        day's capture card, the person's own captures included, into a binary file the index skips)."""
        from .agent_capture import remember

        try:
            files.check_encodable(text)
        except EngineError as exc:
            raise EngineError(str(exc).replace("not written:", "not remembered:", 1)
                              .replace("the note would", "the capture card would")) from exc
        self._check_card_room(text)
        return remember(self, text, agent=agent, conversation=conversation)

    #: bytes of a capture entry besides its text (time, agent, link to the conversation), with room to spare
    CAPTURE_ENTRY_OVERHEAD = 512

    def _check_card_room(self, text: str) -> None:
        """EngineError (nothing written) when appending ``text`` would take today's capture card past
        ``max_file_bytes``: the index would then leave the whole card out of search, the person's earlier
        captures of the day included."""
        from .memory.capture import CAPTURE_STEM
        from .vault.app_folder import cards_dir

        rel = f"{cards_dir(self.settings.layers)}/{self.settings.today()}/{CAPTURE_STEM}.md"
        try:
            size = (self.vault / rel).stat().st_size
        except OSError:
            size = 0  # no card yet (or unreadable: the append says why)
        limit = self.settings.max_file_bytes
        after = size + len(text.encode("utf-8")) + self.CAPTURE_ENTRY_OVERHEAD
        if size and after > limit:
            raise EngineError(f"not remembered: today's capture card {rel} is {size:,} bytes and this entry would "
                              f"take it past max_file_bytes ({limit:,}), beyond which search leaves the whole card "
                              "out (the day's earlier captures too); ask the person to split or archive it, or to "
                              "raise max_file_bytes")

    # -- background: watcher and cron (reme_engine.background) -------------------------------------------------
    def start_background(self, *, on_event: Callable[[dict], None] | None = None,
                         on_indexed: Callable[[list[str], IndexReport], None] | None = None,
                         watch: bool = True, schedule: bool = True) -> None:
        """Start the vault watcher (changed files indexed within ~1 s) and the cron worker thread.

        ``on_event`` receives scheduler events (see :class:`reme_engine.scheduler.Scheduler`), watcher errors
        as ``{"event": "watch_error", "error": …}`` and the embed thread's passes as ``{"event":
        "vectors_started"}`` then ``{"event": "vectors", "embedded", "cached", "error"}``; ``on_indexed(paths,
        report)`` follows each watcher batch. Both are called on background threads. Idempotent; :meth:`close`
        stops everything.
        """
        self._background.start(on_event=on_event, on_indexed=on_indexed, watch=watch, schedule=schedule)
        from .memory.capture import resume_pending

        resume_pending(self)  # chat messages an earlier run left waiting for a busy capture card

    def start_local_server(self) -> LocalServer | None:
        """Answer read-only one-shot jobs (``reme-tui job search`` …) over ``<state dir>/jobs.sock``, mode 0600,
        from this open engine, so they skip opening the index and loading the model (see
        :mod:`reme_engine.local_server`). Idempotent; :meth:`close` stops it. Callers need not import the job
        table: the server imports it at its first request. Returns the server (``running``, or ``standing_by``
        while another process serves this state dir), or None when the socket cannot be bound or the state dir is
        another user's (logged)."""
        from .local_server import start_server

        with Engine._local_server_guard:  # two front-end threads starting it at once bind one socket
            if getattr(self, "_local_server", None) is None and not self._closed:
                self._local_server = start_server(self)
            return self._local_server

    def stop_background(self) -> None:
        """Stop the watcher and the scheduler (joins their threads)."""
        self._background.stop()

    # -- status -------------------------------------------------------------------------------------------
    def status(self) -> EngineStatus:
        """Index figures for the status line: counts, last sync time, embedder and LLM state."""
        from .health import status

        return status(self)

    # -- index consistency (reme_engine.health) ----------------------------------------------------------------
    @property
    def repair_notice(self) -> str | None:
        """One user-facing line saying what was repaired in the index since this engine opened (a corrupt
        database moved aside, an interrupted sync finished, links re-resolved, a deleted state dir rebuilt),
        or None. For the status line and the ``--refresh`` summary."""
        lines = list(dict.fromkeys(self._open_repairs + self.indexer.repairs))
        return "index repaired: " + "; ".join(lines) if lines else None

    def health_check(self) -> HealthReport:
        """Component health: store integrity, index consistency, vault readable, embedder state, skipped files
        (see :func:`reme_engine.health.health_check`). Never raises for a damaged index."""
        from .health import health_check

        return health_check(self)

    def file_problems(self, first: int = HEALTH_FIRST_N) -> FileProblems:
        """Per-file problems the index knows of, each as ``{"count": n, "first": [...]}`` (the first ``first``,
        by path): ``file_warnings`` and ``ambiguous_links``. Empty on a damaged index."""
        from .health import file_problems

        return file_problems(self, first)
