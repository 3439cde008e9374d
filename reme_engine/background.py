"""Background wiring of an open vault: the watcher, the embed thread, the cron scheduler and the state watch.

:class:`Background` is what :meth:`reme_engine.engine.Engine.start_background` / ``stop_background`` delegate
to. Threads (ARCHITECTURE §7): the watcher thread syncs keyword + graph for each batch of changed files (searchable
in well under a second) and refreshes the day pages listing them; the embed thread fills in the new chunks'
vectors, so a burst's minutes of embedding never delay the next edit; the scheduler thread runs the cron jobs;
the state-watch thread rebuilds the index when the state dir is deleted under a running app. Callbacks run on
those threads.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from .errors import EngineError
from .results import result_to_dict

if TYPE_CHECKING:  # the façade owns this object; the name is for annotations only
    from .engine import Engine
    from .index.indexer import IndexReport

log = logging.getLogger("reme.engine")
#: Seconds between tries of a vector pass skipped because another process holds the embed lock: its pass read its
#: rows when it began, so the chunks this process indexed since are left for this one.
EMBED_BUSY_RETRY = 2.0

Event = Callable[[dict], None]


def cron_run(fn: Callable[[], Any]) -> dict:
    """Run a pipeline for the scheduler: a held writer lock or a missing LLM is a skip (``{"skipped": why}``),
    not a failure; otherwise the pipeline's result as a dict. Other errors propagate."""
    from .llm.client import LLMNotConfigured

    try:
        return result_to_dict(fn())
    except LLMNotConfigured as exc:
        return {"skipped": str(exc)}
    except EngineError as exc:
        if "writer lock held" in str(exc):
            return {"skipped": str(exc)}
        raise


class Background:
    """The background threads of one engine (none until :meth:`start`); sets ``engine.watcher`` and
    ``engine.scheduler`` while they run."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # the watcher starts after the first index pass (the app: once it is searchable); a note edited after that
        # pass read it is caught up from here (2 s of slack for coarse file-system timestamps)
        self._opened_at = time.time() - 2.0
        self._reopen_vectors = False  # the state dir was rebuilt: the embed thread opens the vector index itself
        self._embed_wake: threading.Event | None = None
        self._embed_stop: threading.Event | None = None
        self._embed_thread: threading.Thread | None = None
        self._state_watch: tuple[threading.Event, threading.Thread] | None = None

    # -- the embed thread -----------------------------------------------------------------------------------
    def embed_soon(self) -> None:
        """Ask the embed thread (started with the watcher) for a vector pass; a no-op when it is not running."""
        if self._embed_wake is not None:
            self._embed_wake.set()

    def _embed_loop(self, wake: threading.Event, stop: threading.Event, on_event: Event | None) -> None:
        eng = self.engine
        while not stop.is_set():
            wake.wait()
            if stop.is_set():
                return
            wake.clear()
            try:
                if eng.vectors is not None and not eng.vectors.ready and self._reopen_vectors:
                    # after a rebuild of a deleted state dir nobody else opens it again: every chunk needs a vector
                    self._reopen_vectors = False
                    eng.vectors.open()
                if eng.vectors is not None and eng.vectors.ready:
                    if on_event is not None:
                        on_event({"event": "vectors_started"})
                    rep = eng.embed_pending(should_stop=stop.is_set)
                    while rep.embed_busy and not stop.wait(EMBED_BUSY_RETRY):
                        rep = eng.embed_pending(should_stop=stop.is_set)
                    if on_event is not None:  # even for 0: another thread's pass may have done the work
                        on_event({"event": "vectors", "embedded": rep.embedded, "cached": rep.embed_cached,
                                  "error": rep.embed_error})
                    tv = eng.searcher.titles()
                    if tv is not None:  # built now, not on the first query (which would rank without them)
                        tv.refresh()
            except Exception:  # logged; the next batch retries
                log.exception("background vector pass failed")

    # -- start / stop ---------------------------------------------------------------------------------------
    def start(self, *, on_event: Event | None = None,
              on_indexed: Callable[[list[str], IndexReport], None] | None = None,
              watch: bool = True, schedule: bool = True) -> None:
        """See :meth:`reme_engine.engine.Engine.start_background`. Idempotent."""
        eng = self.engine
        if eng.vectors is not None:
            eng.vectors.live = True  # a long-running process: every vector pass encodes in the embedder's child
        if watch and eng.watcher is None:
            self._start_watcher(on_event, on_indexed)
            self._start_state_watch(on_event)
        if schedule and eng.scheduler is None:
            self._start_scheduler(on_event)

    def _start_watcher(self, on_event: Event | None,
                       on_indexed: Callable[[list[str], IndexReport], None] | None) -> None:
        from .index.watcher import VaultWatcher

        eng = self.engine
        self._embed_wake, self._embed_stop = threading.Event(), threading.Event()
        self._embed_thread = threading.Thread(target=self._embed_loop,
                                              args=(self._embed_wake, self._embed_stop, on_event),
                                              name="reme-embed", daemon=True)
        self._embed_thread.start()

        def on_batch(paths: list[str]) -> None:
            report = eng.index_paths(paths, vectors=False)
            if report.repaired and eng.vectors is not None and not eng.vectors.ready:
                # this batch found the state dir deleted and rebuilt the index (before the state watch looked):
                # the vector index went with it, so the embed thread opens it again and embeds every chunk
                self._reopen_vectors = True
                if on_event is not None:
                    on_event({"event": "index_repaired", "notice": report.repaired})
            if report.chunks_added:
                self.embed_soon()
            pages = eng.refresh_day_indexes(report.changed_paths + report.removed_paths)
            if on_indexed is not None:
                on_indexed(sorted(set(paths) | set(pages)), report)

        def on_new_resources(paths: list[str]) -> None:
            if eng.settings.llm.configured:
                try:
                    cron_run(eng.auto_resource)
                except Exception as exc:  # reported, never fatal for the watcher thread
                    if on_event is not None:
                        on_event({"event": "failed", "job": "auto_resource", "error": str(exc)})

        def on_error(msg: str) -> None:
            if on_event is not None:
                on_event({"event": "watch_error", "error": msg})

        layers = eng.settings.layers
        daily_prefix = (layers.daily_dir.strip("/") or "daily") + "/"

        def watched(rel: str) -> bool:
            # notes, plus the day files proactive refresh writes (another process may write them: the app
            # shows them); the indexer skips what it does not index
            return eng.indexer.is_indexable(rel) or (rel.startswith(daily_prefix)
                                                     and rel.endswith("/interests.yaml"))

        eng.watcher = VaultWatcher(eng.vault, watched, on_batch, on_new_resources=on_new_resources,
                                   resource_prefix=layers.resource_dir + "/", known_under=self._known_under,
                                   on_error=on_error, since=self._opened_at)
        eng.watcher.start()

    def _known_under(self, prefix: str) -> list[str]:
        """Indexed paths under folder ``prefix`` ("" = all): what a folder moved out of the vault took along."""
        conn = self.engine.store.conn
        if not prefix:
            return [r[0] for r in conn.execute("SELECT path FROM files")]
        pre = prefix.rstrip("/")
        return [r[0] for r in conn.execute("SELECT path FROM files WHERE path >= ? AND path < ?",
                                           (pre + "/", pre + "0"))]

    def _start_scheduler(self, on_event: Event | None) -> None:
        from datetime import timedelta

        from .scheduler import Scheduler, jobs_from_settings

        eng = self.engine

        def dream(slot):
            # the night run consolidates the day that just ended
            return cron_run(lambda: eng.auto_dream((slot.date() - timedelta(days=1)).isoformat()))

        def proactive(slot):
            return cron_run(lambda: eng.proactive_refresh(slot.date().isoformat()))

        jobs = jobs_from_settings(eng.settings, {"proactive_refresh": proactive, "auto_dream": dream})
        eng.scheduler = Scheduler(jobs, eng.state_dir, eng.settings.tzinfo(), on_event=on_event)
        eng.scheduler.start()

    def _start_state_watch(self, on_event: Event | None) -> None:
        """A daemon thread noticing the state dir (the index database) deleted or replaced while the app runs:
        the index is then rebuilt from the vault at once (the next sync would otherwise write into an unlinked
        file nobody sees), and ``on_event`` gets ``{"event": "index_repaired", "notice": …}``. Checks every
        ``Engine.STATE_WATCH_S`` seconds."""
        eng = self.engine
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(eng.STATE_WATCH_S):
                if eng.closed or not eng.store.gone():
                    continue
                try:
                    report = eng.index(vectors=False)
                    if eng.vectors is not None:  # the vector index went with the state dir: embed the rebuild
                        self._reopen_vectors = True
                        self.embed_soon()
                    if on_event is not None:
                        on_event({"event": "index_repaired", "notice": eng.repair_notice})
                except Exception:  # logged; tried again at the next tick
                    log.exception("rebuilding the deleted index failed")

        t = threading.Thread(target=loop, name="reme-state-watch", daemon=True)
        t.start()
        self._state_watch = (stop, t)

    def stop(self) -> None:
        """Stop the watcher, the embed thread, the scheduler and the state watch (joins their threads)."""
        eng = self.engine
        if eng.watcher is not None:
            eng.watcher.stop()
            eng.watcher = None
        if self._embed_thread is not None:
            self._embed_stop.set()
            self._embed_wake.set()
            self._embed_thread.join(timeout=30)
            self._embed_thread = self._embed_wake = self._embed_stop = None
        if eng.scheduler is not None:
            eng.scheduler.stop()
            eng.scheduler = None
        if self._state_watch is not None:
            self._state_watch[0].set()
            self._state_watch[1].join(timeout=10)
            self._state_watch = None
