"""The engine façade: the one object the TUI and the CLI talk to.

``Engine.open(settings)`` wires the store, tokenizer, embedder, vector index, indexer and searcher of one vault.
Methods return typed dataclasses; :mod:`reme_engine.jobs` exposes them as named jobs with ``key=value``
parameters and JSON results (``reme-tui job NAME …``).

Threading: every method may be called from any thread (the TUI calls them from Textual thread workers).
Vault mutations and index writes are serialised by ``write_lock``; reads run concurrently (SQLite WAL).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .config import ConfigError, Settings, finalize_state_dir
from .index.indexer import Indexer, IndexReport, Progress
from .index.store import Store
from .crashpoints import crash_point
from .vault.io import SkipFile, WriteConflict, atomic_write, read_text
from .vault.paths import VaultPathError, resolve

log = logging.getLogger("reme.engine")


class EngineError(Exception):
    """A job failed for a reason the user can act on (bad path, conflict, missing file). Message is user-facing."""


#: Lines a single ``read`` returns at most.
MAX_READ_LINES = 5000
#: Files health_check and the refresh summary list per kind of problem (the counts are always complete).
HEALTH_FIRST_N = 20


@dataclass
class ReadResult:
    path: str
    start_line: int
    end_line: int
    total_lines: int
    text: str
    sha: str
    truncated: bool


@dataclass
class WriteResult:
    path: str
    created: bool
    sha: str
    bytes: int
    indexed: bool = True


@dataclass
class DeleteResult:
    path: str
    surviving_inlinks: list[dict]


@dataclass
class MoveResult:
    src: str
    dst: str
    rewritten_files: list[str]
    rewritten_links: int
    conflicts: list[str] = field(default_factory=list)


@dataclass
class StatResult:
    path: str
    exists: bool
    is_dir: bool
    size: int | None
    mtime: float | None
    indexed: bool
    chunks: int
    name: str | None = None
    description: str | None = None
    sha: str | None = None
    warning: str | None = None
    skipped_reason: str | None = None
    #: links of this note that several files match: ``{line, target, resolved, candidates}`` (chosen first)
    ambiguous_links: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class NoteTitle:
    """One indexed Markdown note as a quick switcher lists it: ``title`` is the frontmatter name/title or the
    file stem; ``aliases`` the frontmatter aliases; ``mtime`` seconds since the epoch."""

    path: str
    title: str
    aliases: tuple[str, ...]
    mtime: float


class Engine:
    """One open vault. Create with :meth:`open`; call :meth:`close` when done."""

    def __init__(self, settings: Settings, *, embedder=None) -> None:
        if settings.vault is None:
            raise ConfigError("no vault configured")
        self.settings = settings
        self.vault = Path(settings.vault).resolve()
        if not self.vault.is_dir():
            raise ConfigError(f"vault folder does not exist: {self.vault}")
        #: the daily folder found in an existing Obsidian vault (no ``daily/`` and none configured), or None
        self.detected_daily_dir: str | None = None
        if settings.layers.daily_dir.strip("/") == "daily" and not (self.vault / "daily").exists():
            from .vault.daily import detect_daily_dir

            found = detect_daily_dir(self.vault)
            if found and found not in (settings.layers.digest_dir, settings.layers.resource_dir,
                                        settings.layers.session_dir):
                settings.layers.daily_dir = self.detected_daily_dir = found
                log.info("daily notes found in %s (set layers.daily_dir to choose another folder)", found)
        self.state_dir = finalize_state_dir(settings)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.write_lock = threading.RLock()
        self._embed_lock = threading.Lock()  # one vector pass at a time
        self._embed_state = threading.Lock()  # guards _embed_more and the release of _embed_lock
        self._embed_more = False
        self._embed_wake: threading.Event | None = None
        self._embed_stop: threading.Event | None = None
        self._embed_thread: threading.Thread | None = None
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
        self._open_repairs: list[str] = self._check_index_at_open()
        self._searcher = None
        self._journal = None
        self.watcher = None
        self.scheduler = None
        self._closed = False
        self._swept = False
        #: one line per thing :meth:`recover_interrupted` finished at open (shown in the status and summaries)
        self.recovered: list[str] = self.recover_interrupted()

    @classmethod
    def open(cls, settings: Settings, *, embedder=None) -> "Engine":
        """Open the vault named by ``settings.vault`` (state dir created). Raises ConfigError.

        ``embedder``: an already-loaded :class:`Embedder` to share (tests, the app's workers); default: per settings.
        """
        return cls(settings, embedder=embedder)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.stop_background()
        # a vector pass running on another thread (the app's worker) stops after its batch; wait for it so it
        # never writes to a closed store
        waited = self._embed_lock.acquire(timeout=15)
        if waited:
            self._embed_lock.release()
        if self._searcher is not None:
            self._searcher.close()
        if self._journal is not None:
            self._journal.close()
        self.store.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- paths --------------------------------------------------------------------------------------------
    def _resolve(self, rel: str, *, allow_root: bool = False, for_write: bool = False):
        try:
            return resolve(self.vault, rel, allow_root=allow_root, for_write=for_write)
        except VaultPathError as exc:
            raise EngineError(str(exc)) from exc

    def _note(self, path: str, *, for_write: bool = False):
        """The existing file ``path`` names, written with or without ``.md`` (as Obsidian links omit it).

        A folder does not count (``foo`` finds ``foo.md`` beside a folder ``foo/``); a dangling symlink does (so
        it can be deleted). Raises EngineError ``no such note: X — did you mean Y?`` when nothing matches."""
        vp = self._resolve(path, for_write=for_write)

        def present(v) -> bool:
            return os.path.lexists(v.abs) and not v.abs.is_dir()

        if present(vp):
            return vp
        if vp.rel and not vp.rel.lower().endswith(".md"):
            alt = self._resolve(vp.rel + ".md", for_write=for_write)
            if present(alt):
                return alt
        raise EngineError(self._missing_note(vp.rel or path))

    def _missing_note(self, rel: str) -> str:
        """``no such note: X`` plus up to three suggestions: what a link ``[[X]]`` would open, else near names."""
        import difflib

        msg = f"no such note: {rel}"
        name = rel[:-3] if rel.lower().endswith(".md") else rel
        try:
            r = self.indexer.build_resolver().resolve(name, "")
            found = list(r.candidates or ([r.path] if r.path else []))
            if not found:
                rows = self.store.conn.execute("SELECT path FROM files").fetchall()
                by_key: dict[str, str] = {}
                for (p,) in rows:
                    stem = p[:-3] if p.lower().endswith(".md") else p
                    by_key.setdefault(stem.lower(), p)
                    by_key.setdefault(stem.rsplit("/", 1)[-1].lower(), p)
                for k in difflib.get_close_matches(name.lower(), list(by_key), n=3, cutoff=0.6):
                    if by_key[k] not in found:
                        found.append(by_key[k])
        except Exception:  # a damaged index must not hide the real error
            log.debug("no suggestions for %s", rel, exc_info=True)
            found = []
        if found:
            msg += " — did you mean " + " or ".join(found[:3]) + "?"
        return msg

    def _ambiguous_links(self, src: str | None = None, limit: int | None = None) -> tuple[int, list[dict]]:
        """(number of ambiguous links, the first ``limit`` as ``{source, line, target, resolved, candidates}``),
        of one note (``src``) or the whole vault; candidates in resolution order, the chosen one first."""
        q = ("SELECT f.path, l.line, l.target, l.resolved FROM links l JOIN files f ON f.id = l.src_id"
             " WHERE l.ambiguous = 1")
        args: tuple = ()
        if src is not None:
            q += " AND f.path = ?"
            args = (src,)
        rows = self.store.conn.execute(q + " ORDER BY f.path, l.line, l.id", args).fetchall()
        if not rows:
            return 0, []
        resolver = self.indexer.build_resolver()
        out = []
        for path, line, target, resolved in rows[: len(rows) if limit is None else limit]:
            cands = list(resolver.resolve(target, path).candidates) or [resolved]
            out.append({"source": path, "line": line, "target": target, "resolved": resolved, "candidates": cands})
        return len(rows), out

    def _protected(self, rel: str) -> bool:
        layers = self.settings.layers
        protected = set(layers.all()) | {f"{layers.digest_dir}/{b}" for b in ("personal", "procedure", "wiki")}
        protected.add(f"{layers.session_dir}/dialog")
        return rel.strip("/") in protected or rel.strip("/") == ""

    # -- indexing -----------------------------------------------------------------------------------------
    def index(self, progress: Progress | None = None, *, vectors: bool = True) -> IndexReport:
        """Full incremental sync (keyword + graph), then the vector pass when ``vectors`` and an embedder exist.

        The first full sync of an engine also sweeps the temp files crashed writes left (:meth:`sweep_temp_files`)."""
        with self.write_lock:
            if not self._swept:
                self._swept = True
                self.sweep_temp_files()
            report = self.indexer.sync(progress)
            with self.store.write():
                self.store.set_meta("last_sync", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        if vectors:
            self.embed_pending(progress, report)
        return report

    def embed_pending(self, progress: Progress | None = None, report: IndexReport | None = None,
                      should_stop: Callable[[], bool] | None = None, *, wait: bool = True) -> IndexReport:
        """The vector pass alone (see :meth:`Indexer.embed_pending`).

        One pass runs at a time, and the write lock is taken per committed batch only, so the app's writes and
        watcher syncs never queue behind minutes of embedding. With ``wait=False``, when a pass is already running
        this returns at once and that pass runs again before it ends, picking up the new chunks.
        """
        report = report or IndexReport()
        if self.vectors is None or self._closed:
            return report
        caller_stop = should_stop
        should_stop = lambda: self._closed or (caller_stop is not None and caller_stop())  # noqa: E731
        # Lock order: callers may hold write_lock (the app's writes); so wait=False never blocks on _embed_lock,
        # and a waiting caller polls ``should_stop`` so quitting never waits for someone else's pass.
        if wait:
            while not self._embed_lock.acquire(timeout=0.2):
                if should_stop is not None and should_stop():
                    return report
        else:
            with self._embed_state:
                if not self._embed_lock.acquire(blocking=False):
                    self._embed_more = True  # the running pass goes round once more
                    return report
        held = True
        try:
            while True:
                with self._embed_state:
                    self._embed_more = False  # requests made before the pass reads its rows are covered by it
                with self.write_lock:
                    self.vectors.open()
                    report.embed_cached += self.vectors.restored_from_cache
                    self.vectors.restored_from_cache = 0
                self.indexer.embed_pending(progress, report, should_stop, lock=self.write_lock)
                with self._embed_state:
                    stop = should_stop is not None and should_stop()
                    if not self._embed_more or report.embed_error or stop:
                        # released under _embed_state: a request either sees the lock free or sets the flag
                        # before this check
                        self._embed_lock.release()
                        held = False
                        return report
        finally:
            if held:
                self._embed_lock.release()

    def index_paths(self, paths: list[str], *, vectors: bool = True) -> IndexReport:
        """Re-index just ``paths`` (the app's own writes, watcher batches): keyword + graph under the write lock,
        then, with ``vectors``, the new chunks' vectors — at once when no vector pass is running, otherwise by
        the running pass (this call does not wait for it)."""
        with self.write_lock:
            report = self.indexer.sync(paths=paths)
        if vectors and self.vectors is not None and self.vectors.ready and report.chunks_added:
            self.embed_pending(report=report, wait=False)
        return report

    def _embed_soon(self) -> None:
        """Ask the background embed thread (started by :meth:`start_background`) for a vector pass."""
        if self._embed_wake is not None:
            self._embed_wake.set()

    def _embed_loop(self, wake: threading.Event, stop: threading.Event,
                    on_event: Callable[[dict], None] | None = None) -> None:
        while not stop.is_set():
            wake.wait()
            if stop.is_set():
                return
            wake.clear()
            try:
                if self.vectors is not None and self.vectors.ready:
                    if on_event is not None:
                        on_event({"event": "vectors_started"})
                    rep = self.embed_pending(should_stop=stop.is_set)
                    if on_event is not None:  # even for 0: another thread's pass may have done the work
                        on_event({"event": "vectors", "embedded": rep.embedded, "cached": rep.embed_cached,
                                  "error": rep.embed_error})
            except Exception:  # logged; the next batch retries
                log.exception("background vector pass failed")

    def reindex(self, progress: Progress | None = None, *, clear: bool = False, vectors: bool = True) -> IndexReport:
        """Re-sync the index; ``clear`` drops the index first (the embedding cache is kept, nothing re-embeds)."""
        if clear:
            with self.write_lock:
                self.indexer.clear()  # a corrupt database is moved aside instead
        return self.index(progress, vectors=vectors)

    # -- search -------------------------------------------------------------------------------------------
    @property
    def searcher(self):
        if self._searcher is None:
            from .search.hybrid import HybridSearcher, fusion_from_settings

            s = self.settings
            self._searcher = HybridSearcher(self.store, self.tokenizer, self.vectors,
                                            vector_weight=s.search_vector_weight,
                                            keyword_weight=s.search_keyword_weight, rrf_k=s.rrf_k,
                                            fusion=fusion_from_settings(s))
        return self._searcher

    def search(self, query: str, *, limit: int = 10, mode: str = "hybrid", filters=None, neighbors: bool = True):
        """Hybrid/keyword/vector search (:class:`reme_engine.search.hybrid.SearchResult`).

        In hybrid/vector mode the vector index is opened on first use (loading faiss and, lazily, the model).
        """
        if mode in ("hybrid", "vector") and self.vectors is not None and not self.vectors.ready:
            try:
                self.vectors.open()
            except Exception as exc:  # a corrupt index must not break keyword search
                self.vectors.error = str(exc)
        return self.searcher.search(query, limit=limit, mode=mode, filters=filters, neighbors=neighbors)

    def neighbors(self, path: str, limit_out: int | None = 10, limit_in: int | None = 10):
        from .search.graph import neighborhood

        return neighborhood(self.store, self._note(path).rel, limit_out, limit_in)

    def traverse(self, path: str, depth: int = 1, direction: str = "both", max_nodes: int = 200):
        from .search.graph import traverse

        try:
            return traverse(self.store, self._note(path).rel, depth, direction, max_nodes)
        except ValueError as exc:
            raise EngineError(str(exc)) from exc

    def note_titles(self) -> list[NoteTitle]:
        """(Read-only.) Every indexed Markdown note's path, title and aliases, newest first (by mtime); one SQL
        query on the index (about 10 ms for 3,000 notes). Empty before the first index pass."""
        import json

        rows = self.store.conn.execute(
            "SELECT path, name, aliases, mtime FROM files WHERE kind = 'markdown' ORDER BY mtime DESC").fetchall()
        out: list[NoteTitle] = []
        for path, name, aliases, mtime in rows:
            try:
                al = tuple(str(a) for a in json.loads(aliases) if a) if aliases else ()
            except (ValueError, TypeError):
                al = ()
            out.append(NoteTitle(path, name or path.rsplit("/", 1)[-1].removesuffix(".md"), al, float(mtime)))
        return out

    # -- what the TUI asks besides file jobs: link resolution, the next refresh, chat records ------------------
    def resolve_link(self, target: str, source: str = ""):
        """Resolve the wikilink ``target`` written in the note ``source`` (vault-relative; "" for none) the way
        the index does (ARCHITECTURE §4): a ``reme_engine.markdown.links.Resolution`` (``path`` or ``virtual``,
        ``ambiguous``). The resolver is kept until the vault's names or aliases change (one small query per call)
        instead of being rebuilt over every file per link."""
        key = (self.store.get_meta("names_gen"), repr(sorted(self.indexer._aliases_of().items())))
        cached = getattr(self, "_link_resolver", None)
        if cached is None or cached[0] != key:
            cached = self._link_resolver = (key, self.indexer.build_resolver())
        return cached[1].resolve(target, source)

    def next_run(self, job: str = "proactive_refresh"):
        """When the scheduled ``job`` (``proactive_refresh`` or ``auto_dream``) runs next: an aware datetime in the
        app timezone, from the running scheduler or else from the settings' cron expression; None when disabled."""
        from datetime import datetime

        from .scheduler import next_fire

        if self.scheduler is not None:
            try:
                return self.scheduler.next_runs().get(job)
            except Exception:  # a stopping scheduler: fall back to the settings
                pass
        expr = (getattr(self.settings, f"{job}_cron", "")
                or "").strip()
        if not expr:
            return None
        tz = self.settings.tzinfo()
        try:
            return next_fire(expr, tz, datetime.now(tz))
        except Exception:
            return None

    def chat_append(self, session_id: str, role: str, text: str):
        """Append one message (``role`` user/assistant, stamped now in the app timezone) to the chat record
        ``<session_dir>/dialog/<session_id>.jsonl``; returns it (``reme_engine.memory.session.ChatMessage``).
        EngineError for a bad session id or role; OSError when the record cannot be written."""
        from .memory.session import ChatMessage, append_messages

        try:
            msg = ChatMessage.create(role, text, tz=self.settings.tzinfo())
            append_messages(self.vault, self.settings.layers, session_id, [msg])
        except ValueError as exc:
            raise EngineError(str(exc)) from exc
        return msg

    def chat_history(self, session_id: str) -> list:
        """The messages of chat record ``session_id`` in file order (bad lines skipped); [] when there is none."""
        from .memory.session import read_session

        try:
            return list(read_session(self.vault, self.settings.layers, session_id))
        except ValueError as exc:
            raise EngineError(str(exc)) from exc

    def chat_latest_session(self) -> str | None:
        """The id of the chat record written last (by file mtime), or None when the vault has none."""
        folder = self.vault / self.settings.layers.session_dir.strip("/") / "dialog"
        try:
            recs = [(p.stat().st_mtime, p.stem) for p in folder.glob("*.jsonl") if p.is_file()]
        except OSError:
            return None
        return max(recs)[1] if recs else None

    def chat_capture(self, session_id: str, messages: list) -> list[str]:
        """The no-LLM quick capture: the user's ``messages`` appended verbatim to today's capture card; returns
        the cards written (vault-relative). EngineError when the card cannot be written."""
        from .memory.capture import append_user_messages_verbatim

        return list(append_user_messages_verbatim(self, session_id, messages).paths)

    def chat_answer(self, session_id: str, question_id: str, on_text: Callable[[str], None]):
        """Answer message ``question_id`` of session ``session_id`` from the vault (retrieval + citations), the
        earlier turns as history: each streamed piece of text goes to ``on_text`` (called on this thread); the
        answer is recorded in the session. Returns the ``reme_engine.chat.ChatTurn`` (answer, citations).
        Raises EngineError/LLM errors as the chat pipeline does."""
        from .chat import ChatAnswerer, ChatTurn
        from .llm.client import Message

        history = self.chat_history(session_id)
        question = next((m.content for m in history if m.id == question_id), "")
        past = [Message(m.role, m.content) for m in history
                if m.id != question_id and m.role in ("user", "assistant")]
        turn = ChatTurn(question)
        for d in ChatAnswerer(self, self.llm_client("chat")).stream(past, question, turn):
            if d.text:
                on_text(d.text)
        self.chat_append(session_id, "assistant", turn.answer)
        return turn

    # The Markdown rules a viewer needs, so a front end asks the engine instead of importing its modules.
    @staticmethod
    def parse_frontmatter(text: str):
        """``reme_engine.markdown.frontmatter.Frontmatter`` of a note's text (``meta``, ``warning``,
        ``body_offset``, ``body_start_line``); never raises (ARCHITECTURE §4)."""
        from .markdown.frontmatter import parse_frontmatter

        return parse_frontmatter(text)

    @staticmethod
    def note_ownership(text: str):
        """``reme_engine.vault.provenance.Ownership`` of a note's full text: owner, stamp, the app's line ranges
        and blocks (1-based file lines); never raises."""
        from .vault.provenance import note_ownership

        return note_ownership(text)

    @staticmethod
    def parse_links(text: str, *, start_line: int = 1, start_offset: int = 0) -> list:
        """Every link of ``text`` (``reme_engine.markdown.links.Link``: target, anchor, alias, line, start/end
        offsets, predicate, embed), skipping code and comments as the index does; linear, never raises."""
        from .markdown.links import parse_links

        return parse_links(text, start_line=start_line, start_offset=start_offset)

    # -- file jobs ----------------------------------------------------------------------------------------
    def read(self, path: str, start_line: int = 1, end_line: int | None = None) -> ReadResult:
        """Lines ``start_line``..``end_line`` (1-based, inclusive) of a text file; at most MAX_READ_LINES."""
        vp = self._note(path)
        if not vp.abs.is_file():
            raise EngineError(f"no such file: {vp.rel}")
        try:
            tf = read_text(vp.abs, self.settings.max_file_bytes)
        except SkipFile as exc:
            raise EngineError(f"cannot read {vp.rel}: {exc.reason}") from exc
        lines = tf.text.splitlines(keepends=True)
        total = len(lines)
        start = int(start_line)
        if start < 1:
            raise EngineError("start_line must be >= 1")
        if end_line is not None and int(end_line) < start:
            raise EngineError(f"end_line ({end_line}) is before start_line ({start})")
        end = total if end_line is None else min(total, int(end_line))
        truncated = False
        if end - start + 1 > MAX_READ_LINES:
            end = start + MAX_READ_LINES - 1
            truncated = True
        text = "".join(lines[start - 1 : end]) if start <= end else ""
        return ReadResult(vp.rel, start, max(end, start - 1), total, text, tf.sha, truncated)

    def write(self, path: str, content: str, *, overwrite: bool = True, expected_sha: str | None = None) -> WriteResult:
        """Create or replace a text file atomically and index it.

        ``overwrite=False`` refuses an existing file; ``expected_sha`` (from a read) refuses when the file changed
        since (EngineError, nothing written).
        """
        vp = self._resolve(path, for_write=True)
        if vp.abs.is_dir():
            raise EngineError(f"{vp.rel} is a folder")
        with self.write_lock:
            exists = vp.abs.exists()
            if exists and not overwrite:
                raise EngineError(f"{vp.rel} already exists (pass overwrite=true to replace it)")
            expect: Any = False
            if expected_sha:
                expect = expected_sha
            elif not exists:
                expect = None
            _check_encodable(content)
            try:
                sha = atomic_write(vp.abs, content, expected_sha=expect)
            except WriteConflict as exc:
                raise EngineError(f"not written: {exc}") from exc
            self._own_write(vp.rel, sha)
            self.index_paths([vp.rel])
        return WriteResult(vp.rel, not exists, sha, len(content.encode("utf-8")))

    def edit(self, path: str, old: str, new: str, *, count: int = 1) -> WriteResult:
        """Replace ``old`` with ``new`` in a file. ``count``: expected occurrences (0 = replace all).

        Raises EngineError when ``old`` is absent or occurs a different number of times than ``count``.
        """
        if not old:
            raise EngineError("old text must not be empty")
        vp = self._note(path, for_write=True)
        if not vp.abs.is_file():
            raise EngineError(f"no such file: {vp.rel}")
        try:
            tf = read_text(vp.abs, self.settings.max_file_bytes)
        except SkipFile as exc:  # FileBusy included: a save in progress is a refusal, never a crash
            raise EngineError(f"cannot edit {vp.rel}: {exc.reason}") from exc
        n = tf.text.count(old)
        if n == 0:
            raise EngineError(f"text to replace not found in {vp.rel}")
        if count and n != count:
            raise EngineError(f"text occurs {n} times in {vp.rel}, expected {count}; give more context or count=0")
        new_text = tf.text.replace(old, new)
        _check_encodable(new_text)
        if tf.encoding == "utf-8-sig":
            new_text = "\ufeff" + new_text  # keep the BOM the file had
        with self.write_lock:
            try:
                sha = atomic_write(vp.abs, new_text, expected_sha=tf.sha)
            except WriteConflict as exc:
                raise EngineError(f"not written: {exc}") from exc
            self._own_write(vp.rel, sha)
            self.index_paths([vp.rel])
        return WriteResult(vp.rel, False, sha, len(new_text.encode("utf-8")))

    def delete(self, path: str) -> DeleteResult:
        """Delete a file and report the links that still point to it (now dangling)."""
        vp = self._resolve(path, for_write=True)
        if self._protected(vp.rel):
            raise EngineError(f"refusing to delete the vault root or a layer folder: {vp.rel or '/'}")
        if vp.abs.is_dir():  # never falls back to foo.md: a delete must name exactly what goes
            raise EngineError(f"{vp.rel} is a folder; delete its files one by one")
        vp = self._note(path, for_write=True)
        if not vp.abs.exists() and not vp.abs.is_symlink():
            raise EngineError(f"no such file: {vp.rel}")
        from .search.graph import inlinks

        with self.write_lock:
            survivors, _ = inlinks(self.store, vp.rel, None)
            self._own_write(vp.rel, None)
            vp.abs.unlink()
            self.index_paths([vp.rel])
        return DeleteResult(vp.rel, [n.to_dict() for n in survivors])

    def move(self, src: str, dst: str) -> MoveResult:
        """Move/rename a file and rewrite the inbound links that would break (anchor, display text, embed kept;
        a bare-name link stays a bare name when that is unambiguous; links through an alias are untouched),
        atomically per file.

        Refuses to overwrite an existing ``dst``, to move the root or a layer folder, and folders.
        A linking file changed meanwhile is reported in ``conflicts`` and left untouched.
        """
        s = self._resolve(src, for_write=True)
        if not s.abs.is_dir():
            s = self._note(src, for_write=True)
        d = self._resolve(dst, for_write=True)
        if self._protected(s.rel) or self._protected(d.rel):
            raise EngineError("refusing to move the vault root or a layer folder")
        if s.abs.is_dir():
            raise EngineError(f"{s.rel} is a folder; moving folders is not supported")
        if not s.abs.is_file():
            raise EngineError(f"no such file: {s.rel}")
        if s.abs.is_symlink():
            raise EngineError(f"{s.rel} is a symlink; move its target instead")
        bad = [ch for ch in ("[[", "]]", "|", "#", "^") if ch in d.rel]
        if bad:
            raise EngineError(f"a note named with {' '.join(bad)} cannot be linked to; choose another name")
        if s.rel.lower().endswith(".md") and not d.rel.lower().endswith(".md"):
            raise EngineError("moving a note to a non-.md name would break the links to it; keep the .md")
        from .vault.intent import MoveIntent

        with self.write_lock:
            if d.abs.exists() and not (d.abs.samefile(s.abs) and d.rel != s.rel):
                raise EngineError(f"destination exists: {d.rel}")
            # a full incremental sync (a no-op check when the index is current): the inbound links come from the
            # index, so notes edited since the last sync must be in it or their links would be missed
            self.indexer.sync()
            resolver = self.indexer.build_resolver()
            moved_aliases = list(resolver._aliases.get(s.rel, ()))
            sources = [r[0] for r in self.store.conn.execute(
                "SELECT DISTINCT f.path FROM links l JOIN files f ON f.id = l.src_id WHERE l.resolved = ?",
                (s.rel,))]
            # The intent is on disk before the first byte moves: a crash anywhere below is finished by the next
            # start (see recover_interrupted), so inbound links are never left half rewritten.
            with MoveIntent.begin(self.state_dir, s.rel, d.rel, sources, moved_aliases) as intent:
                d.abs.parent.mkdir(parents=True, exist_ok=True)
                _rename_noreplace(s.abs, d.abs)
                crash_point("move.after_rename")
                rewritten, total, conflicts = self._rewrite_inbound(intent, resolver)
                intent.done()
        return MoveResult(s.rel, d.rel, rewritten, total, conflicts)

    def _rewrite_inbound(self, intent, resolver) -> tuple[list[str], int, list[str]]:
        """Point the links of ``intent.sources`` at ``intent.dst`` (the file is already there) and index the result.

        ``resolver``: the vault before the move (it must know ``intent.src``). Idempotent: a linking note already
        rewritten has no link left that resolves to ``src``, so running it again after a crash changes nothing
        twice. Returns ``(rewritten paths, links rewritten, conflicts)``; a note changed by the user meanwhile is
        a conflict and keeps its bytes.
        """
        from .markdown.links import rewrite_links
        from .vault.provenance import APP, note_ownership, stamp

        src, dst = intent.src, intent.dst
        after = self.indexer.build_resolver()  # the vault as it will be: links that still work stay as written
        after.remove(src)
        after.add(dst, intent.aliases)
        resolver.remove(dst)
        resolver.add(src, intent.aliases)
        rewritten, total, conflicts = [], 0, []
        for k, src_path in enumerate(intent.sources):
            # the moved note's own self-links live at its new path now
            cur_path = dst if src_path == src else src_path
            try:
                vp = resolve(self.vault, cur_path)
                tf = read_text(vp.abs, self.settings.max_file_bytes)
            except FileNotFoundError:
                continue  # deleted meanwhile: nothing left to point anywhere
            except (OSError, SkipFile, VaultPathError):
                conflicts.append(cur_path)
                continue
            new_text, n = rewrite_links(tf.text, src_path, resolver, src, dst, after, cur_path)
            if n == 0:
                continue
            if note_ownership(tf.text).owner == APP:
                new_text = stamp(new_text)  # the app's own link rewrite keeps an app-owned note the app's
            if tf.encoding == "utf-8-sig":
                new_text = "\ufeff" + new_text
            try:
                sha = atomic_write(vp.abs, new_text, expected_sha=tf.sha)
            except (WriteConflict, OSError) as exc:  # changed meanwhile, read-only folder, disk full: left as is
                log.warning("link in %s not rewritten: %s", cur_path, exc)
                conflicts.append(cur_path)
                continue
            self._own_write(cur_path, sha)
            rewritten.append(cur_path)
            total += n
            crash_point(f"move.after_rewrite_{k}")
        if self.watcher is not None:
            self.watcher.suppress([src, dst, *rewritten])
        # every linking note, not only the ones rewritten here: after a crash, the ones the killed process
        # rewrote are on disk but not yet in the index
        linking = [dst if p == src else p for p in intent.sources]
        self.index_paths(list(dict.fromkeys([src, dst, *linking])))
        return rewritten, total, conflicts

    def recover_interrupted(self) -> list[str]:
        """Finish what a crash interrupted: moves whose links were not all rewritten (completed — the file is
        already at its new path — or dropped when the file never moved), and the app's own temp files left in
        the vault by a crashed write. Returns one user-facing line per thing done (empty when nothing was).

        Called when the engine opens; cheap when there is nothing to do (one folder listing). A move another
        process is running right now is left alone (its intent file is locked).
        """
        from .vault.intent import MoveIntent

        lines: list[str] = []
        try:
            intents = MoveIntent.interrupted(self.state_dir)
        except OSError as exc:
            log.warning("interrupted moves not checked: %s", exc)
            return lines
        for intent in intents:
            try:
                lines.append(self._finish_move(intent))
            except Exception as exc:  # never let a stuck intent keep the vault from opening; it is retried next time
                line = f"could not finish an interrupted move {intent.src} → {intent.dst} (retried at the next start): {exc}"
                log.warning(line)
                lines.append(line)
            finally:
                intent.release()
        return lines

    def _finish_move(self, intent) -> str:
        """Complete (or drop, when the file never moved) one interrupted move; returns its user-facing line."""
        src_p, dst_p = self.vault / intent.src, self.vault / intent.dst
        if dst_p.exists() and src_p.exists() and _two_names_one_file(src_p, dst_p):
            os.unlink(src_p)  # the crash fell between the hard link and the unlink of the rename
        moved = dst_p.exists() and (not src_p.exists() or dst_p.samefile(src_p))
        if moved:
            with self.write_lock:
                rewritten, total, conflicts = self._rewrite_inbound(intent, self.indexer.build_resolver())
            line = (f"finished an interrupted move {intent.src} → {intent.dst}: "
                    f"{total} link(s) in {len(rewritten)} note(s) rewritten")
            if conflicts:
                line += f"; {len(conflicts)} note(s) left as they are (changed meanwhile or not writable): {', '.join(conflicts[:5])}"
        else:
            line = f"an interrupted move {intent.src} → {intent.dst} had not moved the file; nothing changed"
        intent.done()
        log.warning(line)
        return line

    def sweep_temp_files(self) -> int:
        """Remove the app's temp files older than a minute that crashed writes left in the vault; returns how many.

        Walks the vault's visible folders (~60 ms for 3,000 notes), so it runs with a full sync, not per job."""
        from .vault.io import sweep_temp_files

        removed = sweep_temp_files(self.vault)
        if removed:
            log.warning("removed %d temp file(s) left by an interrupted write", len(removed))
        return len(removed)

    def list(self, path: str = "", *, recursive: bool = False, limit: int = 2000) -> dict:
        """Entries of a folder: ``{path, entries: [{path, is_dir, size, mtime}], truncated}`` (hidden ones skipped).

        A symlink whose target leaves the vault (or cannot be resolved) is listed by name only:
        ``is_dir`` False, ``size``/``mtime`` None and ``outside_vault`` True — nothing about the target shows."""
        if limit < 1:
            raise EngineError("limit must be >= 1")
        vp = self._resolve(path, allow_root=True)
        if not vp.abs.is_dir():
            raise EngineError(f"not a folder: {vp.rel or '/'}")
        root = self.vault.resolve()
        entries = []
        truncated = False
        if recursive:
            it = (Path(dp) / n for dp, dns, fns in os.walk(vp.abs)
                  for n in (dns.__setitem__(slice(None), sorted(x for x in dns if not x.startswith("."))) or sorted(fns))
                  if not n.startswith("."))
        else:
            it = (p for p in sorted(vp.abs.iterdir()) if not p.name.startswith("."))
        for p in it:
            if len(entries) >= limit:
                truncated = True
                break
            rel = p.relative_to(self.vault).as_posix()
            try:
                if p.is_symlink():
                    try:
                        inside = p.resolve().is_relative_to(root)
                    except (OSError, RuntimeError):  # a loop
                        inside = False
                    if not inside:
                        entries.append({"path": rel, "is_dir": False, "size": None, "mtime": None,
                                        "outside_vault": True})
                        continue
                st = p.stat()
            except OSError:
                continue
            entries.append({"path": rel, "is_dir": p.is_dir(), "size": st.st_size, "mtime": st.st_mtime})
        return {"path": vp.rel, "entries": entries, "truncated": truncated}

    def stat(self, path: str) -> StatResult:
        """Metadata of ``path`` (``.md`` optional for a note). A missing file is ``exists=False``, not an error.

        ``warning``: the file's frontmatter problem with its true file line; ``ambiguous_links``: its links that
        several files match (see :meth:`_ambiguous_links`)."""
        vp = self._resolve(path, allow_root=True)
        if vp.rel and not vp.abs.exists():
            try:
                vp = self._note(vp.rel)
            except EngineError:
                pass
        exists = vp.abs.exists()
        st = vp.abs.stat() if exists else None
        info = self.store.file_info(vp.rel)
        chunks = 0
        if info:
            chunks = self.store.conn.execute("SELECT count(*) FROM chunks WHERE file_id=?", (info["id"],)).fetchone()[0]
        sk = self.store.conn.execute("SELECT reason FROM skipped WHERE path=?", (vp.rel,)).fetchone()
        return StatResult(vp.rel, exists, vp.abs.is_dir(), st.st_size if st else None, st.st_mtime if st else None,
                          info is not None, chunks, info["name"] if info else None,
                          info["description"] if info else None, info["sha"] if info else None,
                          info["warning"] if info else None, sk[0] if sk else None,
                          self._ambiguous_links(vp.rel)[1] if info else [])

    # -- frontmatter --------------------------------------------------------------------------------------
    def frontmatter_read(self, path: str) -> dict:
        """``{path, frontmatter, warning}`` parsed from the file on disk."""
        from .markdown.frontmatter import parse_frontmatter

        r = self.read(path)
        fm = parse_frontmatter(r.text)
        return {"path": r.path, "frontmatter": fm.meta, "warning": fm.warning, "has_block": fm.has_block}

    def frontmatter_update(self, path: str, updates: dict | None = None, delete: list[str] | None = None) -> dict:
        """Merge ``updates`` into / remove ``delete`` keys from the frontmatter, keeping order and unknown keys."""
        from .markdown.frontmatter import FrontmatterError, parse_frontmatter, update_frontmatter

        vp = self._note(path, for_write=True)
        if not vp.abs.is_file():
            raise EngineError(f"no such file: {vp.rel}")
        if updates is not None and not isinstance(updates, dict):
            raise EngineError("updates must be a JSON object of keys to set")
        with self.write_lock:
            try:
                tf = read_text(vp.abs, self.settings.max_file_bytes)
            except SkipFile as exc:
                raise EngineError(f"cannot edit {vp.rel}: {exc.reason}") from exc
            try:
                new_text = update_frontmatter(tf.text, updates or {}, delete or ())
                _check_encodable(new_text)
            except (FrontmatterError, RecursionError, TypeError, ValueError) as exc:
                raise EngineError(f"{vp.rel}: frontmatter not updated: {exc}") from exc
            if (after := parse_frontmatter(new_text)).warning and after.has_block:
                raise EngineError(f"{vp.rel}: frontmatter not updated: the result would not parse")
            if tf.encoding == "utf-8-sig" and not new_text.startswith("\ufeff"):
                new_text = "\ufeff" + new_text
            try:
                sha = atomic_write(vp.abs, new_text, expected_sha=tf.sha)
            except WriteConflict as exc:
                raise EngineError(f"not written: {exc}") from exc
            self._own_write(vp.rel, sha)
            self.index_paths([vp.rel])
        return {"path": vp.rel, "frontmatter": parse_frontmatter(new_text.lstrip("\ufeff")).meta}

    # -- daily --------------------------------------------------------------------------------------------
    def daily_create(self, date: str = ""):
        from .vault import daily

        date = self._date(date)
        with self.write_lock:
            res = daily.daily_create(self.vault, date, self.settings.layers)
            if res.page_created:
                self.index_paths([res.page])
        return res

    def daily_list(self, date: str = ""):
        from .vault import daily

        return daily.daily_list(self.vault, self._date(date), self.settings.layers)

    def list_days(self) -> list[str]:
        from .vault import daily

        return daily.list_days(self.vault, self.settings.layers)

    def daily_reindex(self, date: str = "", insert_markers: bool = False):
        from .vault import daily

        date = self._date(date)
        with self.write_lock:
            try:
                res = daily.daily_reindex(self.vault, date, self.settings.layers, insert_markers=insert_markers)
            except WriteConflict as exc:
                raise EngineError(f"day page changed while regenerating: {exc}") from exc
            if res.changed:
                self.index_paths([res.path])
        return res

    def refresh_day_indexes(self, paths: list[str]) -> list[str]:
        """Regenerate the card index of the existing day pages whose cards are among ``paths`` (added, edited,
        renamed or deleted elsewhere: the watcher calls this), so a page never lists a deleted card or misses a
        new one. Pages are never created here; pages without markers or edited meanwhile are left alone.
        Returns the pages rewritten."""
        from .vault import daily

        d = self.settings.layers.daily_dir.strip("/") or "daily"
        dates = set()
        for p in paths:
            parts = p[len(d) + 1:].split("/") if p.startswith(d + "/") else []
            if len(parts) >= 2 and p.lower().endswith(".md"):
                try:
                    dates.add(daily.valid_date(parts[0]))
                except ValueError:
                    pass
        written = []
        for date in sorted(dates):
            with self.write_lock:
                try:
                    res = daily.daily_reindex(self.vault, date, self.settings.layers, create_if_missing=False,
                                              max_bytes=self.settings.max_file_bytes)
                except (WriteConflict, OSError, ValueError, VaultPathError) as exc:
                    log.info("day index of %s not regenerated: %s", date, exc)
                    continue
                if res.changed:
                    self.index_paths([res.path])
                    written.append(res.path)
        return written

    def _date(self, date: str) -> str:
        from .vault.daily import valid_date

        if not date:
            return self.settings.today()
        try:
            return valid_date(date)
        except ValueError as exc:
            raise EngineError(str(exc)) from exc

    # -- proactive ----------------------------------------------------------------------------------------
    def proactive_read(self, date: str = "", include_content: bool = True, horizon_days: int = 1,
                       min_confidence: float = 0.4):
        from .proactive.read import proactive_read

        return proactive_read(self.vault, date=date, include_content=include_content, horizon_days=horizon_days,
                              min_confidence=min_confidence, today=self.settings.today(),
                              layers=self.settings.layers)

    # -- LLM pipelines ------------------------------------------------------------------------------------
    @property
    def journal(self):
        """The :class:`~reme_engine.memory.journal.ChangeJournal` of this vault (created on first use)."""
        if self._journal is None:
            from .memory.journal import ChangeJournal

            self._journal = ChangeJournal(self.state_dir)
        return self._journal

    def llm_client(self, feature: str):
        """The configured LLM client. Raises :class:`~reme_engine.llm.client.LLMNotConfigured` naming ``feature``."""
        from .llm.client import make_client

        return make_client(self.settings.llm, feature)

    def writer_lock(self, purpose: str):
        """The cross-process single-writer lock of this vault (a context manager; raises LockHeld when busy)."""
        from .lock import WriterLock

        return WriterLock(self.state_dir, purpose)

    def _pipeline(self, purpose: str, fn):
        from .lock import LockHeld

        lock = self.writer_lock(purpose)
        if not lock.acquire(blocking=False):
            raise EngineError(f"{purpose} not run: {LockHeld(lock.holder())}")
        try:
            return fn()
        finally:
            lock.release()

    def auto_dream(self, date: str = "", hint: str = "", llm=None, scan_days: int = 1):
        """Daily notes → digest nodes (ARCHITECTURE §11.2). Raises LLMNotConfigured before touching anything.

        The client is built only when something changed (importing the SDK costs ~1 s), via a factory.
        """
        from .dream.pipeline import run_auto_dream
        from .llm.client import LLMNotConfigured

        date = self._date(date)
        if llm is None:
            if not self.settings.llm.configured:
                raise LLMNotConfigured("auto_dream")
            llm = lambda: self.llm_client("auto_dream")  # noqa: E731 - a factory, see docstring
        if scan_days < 1:
            raise EngineError("scan_days must be >= 1")
        return self._pipeline("auto_dream", lambda: run_auto_dream(self, date=date, hint=hint, llm=llm,
                                                                   scan_days=scan_days))

    def auto_memory(self, session_id: str, llm=None):
        """A chat session's new messages → one daily card. Raises LLMNotConfigured before touching anything."""
        from .memory.auto_memory import run_auto_memory

        llm = llm or self.llm_client("auto_memory")
        return self._pipeline("auto_memory", lambda: run_auto_memory(self, session_id, llm=llm))

    def auto_resource(self, llm=None):
        """New/changed/removed files under resource/ → source-linked daily cards."""
        from .memory.auto_resource import run_auto_resource

        llm = llm or self.llm_client("auto_resource")
        return self._pipeline("auto_resource", lambda: run_auto_resource(self, llm=llm))

    def proactive_refresh(self, date: str = "", llm=None, use_llm: bool = True, carry_forward: bool = False):
        """Daily notes → ``daily/<date>/interests.yaml`` (ARCHITECTURE §11.1); without an LLM, the keyword fallback.
        ``carry_forward``: on a day without an interests file, write it from the open topics even when no daily
        note changed (see ``run_proactive_refresh``)."""
        from .llm.client import LLMNotConfigured
        from .proactive.refresh import run_proactive_refresh

        date = self._date(date)
        if llm is None and use_llm:
            try:
                llm = self.llm_client("proactive_refresh")
            except LLMNotConfigured:
                llm = None
        return self._pipeline("proactive_refresh", lambda: run_proactive_refresh(self, date=date, llm=llm,
                                                                                  carry_forward=carry_forward))

    def dream_log(self, limit: int = 20, run_id: str = "", with_text: bool = False) -> dict:
        """Recent pipeline runs, or one run's changes (``run_id``)."""
        if run_id:
            runs = [r for r in self.journal.runs(limit=100000) if r["run_id"] == run_id]
            if not runs:
                raise EngineError(f"unknown run {run_id!r}")
            return {"run": runs[0], "changes": [c.to_dict(with_text) for c in self.journal.changes(run_id, with_text)]}
        return {"runs": self.journal.runs(limit=limit)}

    def revert(self, run_id: str) -> dict:
        """Restore the before-state of a run's files, refusing those changed since; re-indexes what changed."""
        with self.write_lock:
            try:
                res = self.journal.revert(self.vault, run_id)
            except KeyError as exc:
                raise EngineError(str(exc.args[0])) from exc
            if res.restored:
                self.index_paths(res.restored)
        return res.to_dict()

    # -- background: watcher and cron ------------------------------------------------------------------------
    def _own_write(self, rel: str, sha: str | None) -> None:
        """Tell the watcher about a write the app indexes itself, so it is not reprocessed as an external edit."""
        if self.watcher is not None:
            self.watcher.expect_write(rel, sha)

    def _known_under(self, prefix: str) -> list[str]:
        if not prefix:
            return [r[0] for r in self.store.conn.execute("SELECT path FROM files")]
        pre = prefix.rstrip("/")
        return [r[0] for r in self.store.conn.execute(
            "SELECT path FROM files WHERE path >= ? AND path < ?", (pre + "/", pre + "0"))]

    def _cron_run(self, fn) -> dict:
        """Run a pipeline for the scheduler: a held writer lock or a missing LLM is a skip, not a failure."""
        from .llm.client import LLMNotConfigured

        try:
            return result_to_dict(fn())
        except LLMNotConfigured as exc:
            return {"skipped": str(exc)}
        except EngineError as exc:
            if "writer lock held" in str(exc):
                return {"skipped": str(exc)}
            raise

    def start_background(self, *, on_event: Callable[[dict], None] | None = None,
                         on_indexed: Callable[[list[str], IndexReport], None] | None = None,
                         watch: bool = True, schedule: bool = True) -> None:
        """Start the vault watcher (changed files indexed within ~1 s) and the cron worker thread.

        ``on_event`` receives scheduler events (see :class:`reme_engine.scheduler.Scheduler`), watcher errors
        as ``{"event": "watch_error", "error": …}`` and the embed thread's passes as ``{"event":
        "vectors_started"}`` then ``{"event": "vectors", "embedded", "cached", "error"}``; ``on_indexed(paths, report)`` follows each watcher batch.
        Both are called on background threads. Idempotent; :meth:`close` stops everything.
        """
        from datetime import timedelta

        if watch and self.watcher is None:
            from .index.watcher import VaultWatcher

            # Keyword + graph on the watcher thread (searchable in well under a second); the vectors of the
            # new chunks on the embed thread, so a burst's minutes of embedding never delay the next edit.
            self._embed_wake, self._embed_stop = threading.Event(), threading.Event()
            self._embed_thread = threading.Thread(target=self._embed_loop, args=(self._embed_wake, self._embed_stop, on_event),
                                                  name="reme-embed", daemon=True)
            self._embed_thread.start()

            def on_batch(paths: list[str]) -> None:
                report = self.index_paths(paths, vectors=False)
                if report.chunks_added:
                    self._embed_soon()
                pages = self.refresh_day_indexes(report.changed_paths + report.removed_paths)
                if on_indexed is not None:
                    on_indexed(sorted(set(paths) | set(pages)), report)

            def on_new_resources(paths: list[str]) -> None:
                if self.settings.llm.configured:
                    try:
                        self._cron_run(self.auto_resource)
                    except Exception as exc:  # reported, never fatal for the watcher thread
                        if on_event is not None:
                            on_event({"event": "failed", "job": "auto_resource", "error": str(exc)})

            def on_error(msg: str) -> None:
                if on_event is not None:
                    on_event({"event": "watch_error", "error": msg})

            layers = self.settings.layers
            daily_prefix = (layers.daily_dir.strip("/") or "daily") + "/"

            def watched(rel: str) -> bool:
                # notes, plus the day files proactive refresh writes (another process may write them: the app
                # shows them); the indexer skips what it does not index
                return self.indexer.is_indexable(rel) or (rel.startswith(daily_prefix)
                                                          and rel.endswith("/interests.yaml"))

            self.watcher = VaultWatcher(self.vault, watched, on_batch,
                                        on_new_resources=on_new_resources,
                                        resource_prefix=layers.resource_dir + "/", known_under=self._known_under,
                                        on_error=on_error)
            self.watcher.start()
            self._start_state_watch(on_event)
        if schedule and self.scheduler is None:
            from .scheduler import Scheduler, jobs_from_settings

            def dream(slot):
                # the night run consolidates the day that just ended
                return self._cron_run(lambda: self.auto_dream((slot.date() - timedelta(days=1)).isoformat()))

            def proactive(slot):
                return self._cron_run(lambda: self.proactive_refresh(slot.date().isoformat()))

            jobs = jobs_from_settings(self.settings, {"proactive_refresh": proactive, "auto_dream": dream})
            self.scheduler = Scheduler(jobs, self.state_dir, self.settings.tzinfo(), on_event=on_event)
            self.scheduler.start()

    def stop_background(self) -> None:
        """Stop the watcher and the scheduler (joins their threads)."""
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        if self._embed_thread is not None:
            self._embed_stop.set()
            self._embed_wake.set()
            self._embed_thread.join(timeout=30)
            self._embed_thread = self._embed_wake = self._embed_stop = None
        if self.scheduler is not None:
            self.scheduler.stop()
            self.scheduler = None
        if getattr(self, "_state_watch", None) is not None:
            self._state_watch[0].set()
            self._state_watch[1].join(timeout=10)
            self._state_watch = None

    # -- status -------------------------------------------------------------------------------------------
    def status(self) -> dict:
        """Index figures for the status line: counts, last sync time, embedder and LLM state."""
        counts = self.store.counts()
        return {
            "vault": str(self.vault),
            "state_dir": str(self.state_dir),
            **counts,
            "embedder": self.embedder.space if self.embedder else None,
            "vectors_loaded": bool(self.vectors and self.vectors.ready),
            "vectors": len(self.vectors.index) if self.vectors and self.vectors.index is not None else None,
            "llm_configured": self.settings.llm.configured,
            "tokenizer": self.tokenizer.fingerprint,
            "daily_dir": self.settings.layers.daily_dir,
            "daily_dir_detected": self.detected_daily_dir is not None,
            "last_indexed": self.store.get_meta("last_sync"),
            "repair_notice": self.repair_notice,
        }

    # -- index consistency ------------------------------------------------------------------------------------
    #: Seconds between checks that the state dir still exists while the background runs.
    STATE_WATCH_S = 2.0

    def _start_state_watch(self, on_event: Callable[[dict], None] | None) -> None:
        """A daemon thread noticing the state dir (the index database) deleted or replaced while the app runs:
        the index is then rebuilt from the vault at once (the next sync would otherwise write into an unlinked
        file nobody sees), and ``on_event`` gets ``{"event": "index_repaired", "notice": …}``."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(self.STATE_WATCH_S):
                if self._closed or not self.store.gone():
                    continue
                try:
                    report = self.index(vectors=False)
                    if report.chunks_added:
                        self._embed_soon()
                    if on_event is not None:
                        on_event({"event": "index_repaired", "notice": self.repair_notice})
                except Exception:  # logged; tried again at the next tick
                    log.exception("rebuilding the deleted index failed")

        t = threading.Thread(target=loop, name="reme-state-watch", daemon=True)
        t.start()
        self._state_watch = (stop, t)

    @property
    def repair_notice(self) -> str | None:
        """One user-facing line saying what was repaired in the index since this engine opened (a corrupt
        database moved aside, an interrupted sync finished, links re-resolved, a deleted state dir rebuilt),
        or None. For the status line and the ``--refresh`` summary."""
        lines = list(dict.fromkeys(self._open_repairs + self.indexer.repairs))
        return "index repaired: " + "; ".join(lines) if lines else None

    def _check_index_at_open(self) -> list[str]:
        """The cheap consistency check at open (milliseconds; never raises for a damaged index).

        - a corrupt database found by the store's open check was moved aside (rebuilt by the next index);
        - an interrupted sync (its marker set, no sync running) has its links re-resolved against the vault now;
        - links resolved to paths that are not in the path set (always), and after an unclean shutdown or a
          scheduled ``quick_check`` also 200 random links re-resolved: any disagreement re-resolves every link.
        """
        import sqlite3

        from .index.store import brief, is_corruption

        out = [f"{r.split(':', 1)[0]} was corrupt: moved aside, rebuilt from the vault" for r in self.store.recovered]
        try:
            line = self.indexer.repair_interrupted()
            if line:
                out.append(line)
            from .index.indexer import SYNC_MARKER

            # with the marker still set another process is syncing: its links land with its last commit
            syncing = self.store.get_meta(SYNC_MARKER) is not None
            deep = self.store.unclean or self.store.integrity != "skipped"
            chk = {"stale": 0, "mismatched": 0} if syncing else self.indexer.check_links(sample=200 if deep else 0)
            if chk["stale"] or chk["mismatched"]:
                n = self.indexer.repair_links()
                out.append(f"links out of step with the vault ({chk['stale']} stale, {chk['mismatched']} of "
                           f"{chk['checked']} sampled wrong): {n} re-resolved")
        except (sqlite3.DatabaseError, ValueError) as exc:  # ValueError: a damaged JSON value
            if isinstance(exc, sqlite3.DatabaseError) and not is_corruption(exc):
                raise
            self.store.recover_corrupt(exc)
            self.indexer._reset_derived()
            out.append(f"index was corrupt ({brief(exc)}): moved aside, rebuilt from the vault")
        for line in out:
            log.warning("%s", line)
        return out

    def health_check(self) -> dict:
        """Component health: store integrity, index consistency, vault readable, embedder state, skipped files.

        What it checks (each a key of ``checks``): ``store`` — ``PRAGMA quick_check`` of the index and the
        embedding cache (a corrupt file is moved aside and the index rebuilt from the vault: the value then says
        ``repaired: …``); ``sync`` — no interrupted sync left; ``links`` — links resolved to paths outside the
        vault's path set, and up to 500 random links re-resolved from scratch (disagreements are repaired);
        ``vectors`` — the loaded vector index holds exactly the chunks marked as embedded (orphans dropped).
        ``ok`` is False while something is wrong and could not be repaired. Never raises for a damaged index."""
        import sqlite3

        from .index.indexer import SYNC_MARKER
        from .index.store import brief, is_corruption

        checks: dict[str, Any] = {}
        ok = True
        repaired: list[str] = []
        try:
            problem = self.store.quick_check()
            if problem:
                raise sqlite3.DatabaseError(f"integrity check failed: {problem}")
            with self.write_lock, self.store.write() as c:  # the keyword index's own structure (~0.5 s per 4k notes)
                c.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES('integrity-check', 0)")
            checks["store"] = "ok (quick_check of index and embedding cache, keyword index integrity-check)"
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):
                checks["store"] = f"error: {exc}"
                ok = False
            else:
                with self.write_lock:
                    self.store.recover_corrupt(exc)
                    self.indexer._reset_derived()
                    self.index(vectors=False)
                checks["store"] = f"repaired: {brief(exc)} (moved aside, rebuilt from the vault)"
                repaired.append(checks["store"])
        try:
            if self.store.get_meta(SYNC_MARKER) is not None:
                line = self.indexer.repair_interrupted()
                checks["sync"] = f"repaired: {line}" if line else "a sync is running in another process"
            else:
                checks["sync"] = "ok (no interrupted sync)"
            chk = self.indexer.check_links(sample=500)
            if chk["stale"] or chk["mismatched"]:
                n = self.indexer.repair_links()
                checks["links"] = (f"repaired: {chk['stale']} stale, {chk['mismatched']} of {chk['checked']} sampled "
                                   f"wrong; {n} re-resolved")
            else:
                checks["links"] = f"ok ({chk['links']} links, {chk['checked']} re-resolved from scratch agree)"
            if self.vectors is not None and self.vectors.ready:
                with self.write_lock:
                    rec = self.vectors.reconcile()
                checks["vectors"] = (f"ok ({len(self.vectors.index)} vectors match the embedded chunks)"
                                     if not (rec["missing"] or rec["orphans"]) else
                                     f"repaired: {rec['orphans']} orphan vectors dropped, {rec['missing']} missing "
                                     "queued for the next vector pass")
            else:
                checks["vectors"] = "not loaded (checked when opened)"
        except sqlite3.DatabaseError as exc:
            checks["links"] = f"error: {exc}"
            ok = False
        checks["vault"] = "ok" if os.access(self.vault, os.R_OK | os.X_OK) else "error: not readable"
        ok = ok and checks["vault"] == "ok"
        if self.embedder is None:
            checks["embedder"] = "disabled (keyword search only)"
        else:
            checks["embedder"] = f"{self.embedder.space}" + (f" (error: {self.vectors.error})"
                                                               if self.vectors and self.vectors.error else "")
        checks["llm"] = "configured" if self.settings.llm.configured else "not configured (LLM features off)"
        checks["daily_dir"] = self.settings.layers.daily_dir + (" (found in the vault)" if self.detected_daily_dir
                                                                 else "")
        if self.repair_notice:
            checks["repair"] = self.repair_notice
        out = {"ok": ok, "version": __version__, "checks": checks, "index": self.store.counts(),
               "skipped": self.store.skipped()}
        out.update(self.file_problems())
        return out

    def file_problems(self, first: int = HEALTH_FIRST_N) -> dict:
        """Per-file problems the index knows of, each as ``{"count": n, "first": [...]}`` (the first ``first``,
        by path): ``file_warnings`` — ``{path, warning}`` (invalid or unclosed frontmatter, with true file
        lines); ``ambiguous_links`` — ``{source, line, target, resolved, candidates}``. Empty on a damaged
        index (health_check reports that)."""
        import sqlite3

        try:
            rows = self.store.conn.execute(
                "SELECT path, warning FROM files WHERE warning IS NOT NULL AND warning != '' ORDER BY path").fetchall()
            n_amb, amb = self._ambiguous_links(limit=first)
        except sqlite3.DatabaseError as exc:
            log.warning("file problems unavailable: %s", exc)
            rows, n_amb, amb = [], 0, []
        return {"file_warnings": {"count": len(rows), "first": [{"path": p, "warning": w} for p, w in rows[:first]]},
                "ambiguous_links": {"count": n_amb, "first": amb}}


def _check_encodable(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EngineError(f"not written: text has an invalid character at {exc.start} (not valid UTF-8)") from exc


def _two_names_one_file(a: Path, b: Path) -> bool:
    """Both names are listed in their folders and are one file (hard links), not one entry seen twice through
    a case-insensitive file system."""
    try:
        return (a != b and a.samefile(b) and a.name in os.listdir(a.parent)
                and b.name in os.listdir(b.parent))
    except OSError:
        return False


def _rename_noreplace(src: Path, dst: Path) -> None:
    """Rename without ever replacing an existing ``dst`` (a file the user saved meanwhile).

    Hard-link then unlink is atomic about the destination (``link`` fails if it exists). Case-only renames on
    case-insensitive file systems and file systems without hard links fall back to a checked ``rename``.
    """
    try:
        os.link(src, dst)
    except FileExistsError:
        if dst.samefile(src):  # same file under another case: a case-only rename
            os.rename(src, dst)
            return
        raise EngineError(f"destination exists: {dst.name}") from None
    except OSError:
        if dst.exists():
            raise EngineError(f"destination exists: {dst.name}") from None
        os.rename(src, dst)
        return
    os.unlink(src)


def result_to_dict(obj: Any) -> Any:
    """Dataclasses (and objects with ``to_dict``) to plain JSON-able structures."""
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    if isinstance(obj, list):
        return [result_to_dict(x) for x in obj]
    return obj

