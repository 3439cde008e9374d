"""The vault watcher (ARCHITECTURE §7): external edits reach the index within about a second.

A :class:`VaultWatcher` runs ``watchfiles.watch`` in its own thread and calls ``on_batch(paths)`` with sorted,
vault-relative, NFC, POSIX paths of files that changed — created, modified, deleted, or either side of a rename.
It reports *paths*, not event kinds: the indexer looks at what exists now (``Indexer.sync(paths=…)``).

What it handles, and why (watchfiles 1.3.0 on Linux, measured here — ARCHITECTURE §10.5):

- **Bursts.** Events are coalesced per path (a set) and delivered once the vault has been quiet for
  ``debounce_ms``, or at the latest ``max_delay_ms`` after the first pending change, so a burst of thousands of
  files arrives as one call (or a few) and a continuous stream still flushes every ``max_delay_ms``.
- **Editor atomic saves** (write a temp file, rename it over the note) arrive as "added" for the target plus events
  for the temp file; the temp file is ignored and the target reported like any change.
- **Swap/temp files** are ignored: dot-files and anything under a dot-folder (``.obsidian``, ``.git``, ``.trash``,
  ``.#lock``, ``.~lock…``), ``*.swp``/``*.swx``/``*.swo``, ``*~``, vim's ``4913`` probe, ``*.tmp``, ``#autosave#``.
- **New folders.** Files created right after their folder are not reported (seen 5/5), so an added folder is
  scanned at once and again ``RESCAN_DELAY_S`` later; every indexable file found joins the batch.
- **Deleted or moved-away folders** are reported as one event for the folder only; with ``known_under`` (e.g. the
  index's paths under a prefix) their files are added to the batch so the index drops them.
- **A folder deleted and recreated** keeps being watched (the backend re-adds it; the folder scan covers the race).
- **The vault root disappearing** (unmounted drive, moved folder): pending changes are dropped (nothing is purged
  from the index), ``on_error`` is told, and the watcher retries every ``ROOT_RETRY_S``; when the root is back it
  reports every indexable file found plus ``known_under("")`` so the indexer reconciles.
- **Symlinks** leading out of the vault (watchfiles follows them) are ignored. An event under a folder symlink
  that leads back into the vault (a loop such as ``a/loop -> ..``) is reported under the file's own path.
- **Changes made before the watch was in place** (while the vault's first index pass ran, after it had read the
  file): with ``since``, the files modified since then are reported once the watch is established.
- **The app's own writes** are indexed by the engine directly; :meth:`expect_write` / :meth:`suppress` register
  the expected content hash of a path and events whose file content still has that hash are dropped for
  ``suppress_window_s`` seconds.

Callbacks run on the watcher thread; an exception in one is logged (logger ``reme.watcher``) and watching goes on.
A batch whose ``on_batch`` raised (a full disk under the index) is kept and delivered again, after
``BATCH_RETRY_S`` doubling up to ``BATCH_RETRY_MAX_S``, until it succeeds; ``on_error`` is told.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import unicodedata
from pathlib import Path
from typing import Callable, Iterable

from ..vault.io import file_hash

log = logging.getLogger("reme.watcher")

#: Delay of the second scan of a newly added folder (seconds): catches files created after the first scan but
#: before the backend's watch on the new folder was in place.
RESCAN_DELAY_S = 0.2
#: Seconds between checks for a vanished vault root.
ROOT_RETRY_S = 1.0
#: An identical error is reported to ``on_error`` at most once in this many seconds.
REPORT_REPEAT_S = 600.0
#: First and longest wait (seconds) before a batch whose ``on_batch`` failed (a full disk under the index, a locked
#: database) is delivered again; it doubles in between. The paths are kept until a delivery succeeds.
BATCH_RETRY_S, BATCH_RETRY_MAX_S = 2.0, 30.0
#: watchfiles' internal polling step (ms): how long the backend waits for more changes before yielding a group,
#: and how often it checks the stop event — so it bounds stop() latency.
STEP_MS = 50
#: File name suffixes of editor swap/backup/partial files (lower-cased comparison).
TEMP_SUFFIXES = (".swp", ".swx", ".swo", ".tmp", ".temp", ".part", ".crdownload", "~")
#: Exact file names editors use as probes.
TEMP_NAMES = frozenset({"4913"})


def is_temp_or_hidden(rel: str) -> bool:
    """True for paths the watcher never reports: hidden components, editor swap/temp/backup names."""
    parts = rel.split("/")
    if any(p.startswith(".") for p in parts):
        return True
    name = parts[-1]
    low = name.lower()
    return name in TEMP_NAMES or low.endswith(TEMP_SUFFIXES) or (len(name) > 1 and name[0] == "#" and name[-1] == "#")


class VaultWatcher:
    """Watch ``vault`` and feed changed indexable files to ``on_batch``.

    Parameters:
        vault: the vault root (resolved; symlinked roots are followed once, here).
        is_indexable: ``rel -> bool`` (``Indexer.is_indexable``); only such files go to ``on_batch``.
        on_batch: called with a sorted list of vault-relative paths (at least one).
        debounce_ms: quiet time after the last change before a batch is delivered (ms).
        ignore: extra ``rel -> bool`` filter (True = ignore), applied to files and folders.
        on_new_resources: called after ``on_batch`` with files under ``resource_prefix`` that were added (or
            atomically saved — watchfiles cannot tell those apart; consumers dedupe by content) and still exist.
            Not limited by ``is_indexable``.
        resource_prefix: vault-relative prefix of the resource layer, with trailing slash.
        known_under: ``prefix -> iterable of rel paths`` the index holds under folder ``prefix`` ("" = all); used
            to expand a deleted/moved-away folder into its files. Called once per deleted top-most path whose
            name is not indexable (it may have been a folder), so it should be an indexed prefix query. Without
            it those files wait for the next full sync.
        on_error: receives user-facing messages (vault root gone, watcher failure).
        max_delay_ms: upper bound on how long a change waits while others keep arriving (ms).
        suppress_window_s: how long :meth:`expect_write` / :meth:`suppress` registrations live (seconds).
        since: wall-clock time (epoch seconds) from which changes must not be missed although the watcher was not
            running yet, e.g. when the vault's first index pass started: once the watch is in place, every
            indexable file modified since then is reported (a catch-up scan: ``stat`` of each file, ~10 µs each),
            so a note edited while that pass ran — after the pass had read it — reaches the index now instead of
            at the next start. None: no catch-up.
        force_polling: passed to watchfiles (None = its default: inotify/FSEvents, polling on WSL). When the OS
            watch limit is reached the watcher falls back to polling by itself.
    """

    def __init__(
        self,
        vault: str | os.PathLike[str],
        is_indexable: Callable[[str], bool],
        on_batch: Callable[[list[str]], None],
        *,
        debounce_ms: int = 300,
        ignore: Callable[[str], bool] | None = None,
        on_new_resources: Callable[[list[str]], None] | None = None,
        resource_prefix: str = "resource/",
        known_under: Callable[[str], Iterable[str]] | None = None,
        on_error: Callable[[str], None] | None = None,
        max_delay_ms: int = 1000,
        suppress_window_s: float = 5.0,
        since: float | None = None,
        force_polling: bool | None = None,
    ) -> None:
        self.root = Path(vault).resolve()
        self._root_str = str(self.root)
        self.is_indexable = is_indexable
        self.on_batch = on_batch
        self.debounce_s = max(0, debounce_ms) / 1000
        self.max_delay_s = max(debounce_ms, max_delay_ms) / 1000
        self.ignore = ignore
        self.on_new_resources = on_new_resources
        self.resource_prefix = resource_prefix if resource_prefix.endswith("/") else resource_prefix + "/"
        self.known_under = known_under
        self.on_error = on_error
        self.suppress_window_s = suppress_window_s
        self.force_polling = force_polling
        self._since = since
        # Rust yields at least this often (ms) even without changes, so flush deadlines are checked.
        self._tick_ms = max(STEP_MS, min(200, debounce_ms // 3 or STEP_MS))

        self._stop = threading.Event()
        self._ready = threading.Event()
        self._settled = threading.Event()  # ready, or the root was found missing: start() need not wait longer
        self._thread: threading.Thread | None = None
        self._expect: dict[str, tuple[str | None, float]] = {}  # rel -> (expected hash or None=absent, deadline)
        self._expect_guard = threading.Lock()
        # Owned by the watcher thread:
        self._pending: set[str] = set()
        self._new_res: set[str] = set()
        self._gone_dirs: set[str] = set()  # deleted non-indexable paths: maybe folders, expanded at flush
        self._rescans: dict[str, float] = {}  # rel folder -> monotonic due time
        self._failed: set[str] = set()  # paths of batches on_batch raised for: delivered again at _retry_at
        self._retry_at = 0.0
        self._retry_wait = BATCH_RETRY_S
        self._first_t = 0.0
        self._last_t = 0.0
        self._root_lost = False
        self._reported: dict[str, float] = {}  # error message -> when it was last reported
        #: Counters for tests and the bench: batches delivered, paths delivered, events seen, suppressed events.
        self.stats = {"batches": 0, "paths": 0, "events": 0, "suppressed": 0, "restarts": 0}

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self, wait: float | None = 10.0) -> bool:
        """Start the thread; wait up to ``wait`` seconds until the OS watch is in place (None = don't wait).

        Returns True when watching is established; False on timeout (a huge tree) or at once when the vault
        root is missing (``on_error`` is told; the thread keeps trying and watches once it appears).
        """
        if self._thread is not None and self._thread.is_alive():
            return self._ready.is_set()
        self._stop.clear()
        self._ready.clear()
        self._settled.clear()
        self._thread = threading.Thread(target=self._run, name="reme-watcher", daemon=True)
        self._thread.start()
        if wait is None:
            return False
        self._settled.wait(wait)
        return self._ready.is_set()

    def stop(self, timeout: float | None = 5.0) -> bool:
        """Stop watching and join the thread; True when it ended within ``timeout`` seconds.

        Prompt (≈ ``STEP_MS``) unless a callback is running, which is not interrupted. Changes not yet
        delivered are dropped: the next full sync (``Engine.index()`` at start) picks them up.
        """
        self._stop.set()
        t = self._thread
        if t is None:
            return True
        if t is not threading.current_thread():
            t.join(timeout)
        return not t.is_alive()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- own writes --------------------------------------------------------------------------------------
    def expect_write(self, path: str, sha: str | None) -> None:
        """Declare that the app wrote ``path`` (vault-relative) with content hash ``sha``
        (:func:`reme_engine.vault.io.content_hash`; ``None`` = the app deleted it).

        Events for ``path`` are dropped while the file still has that content (or is still absent), for
        ``suppress_window_s`` seconds. May be called before or after the write.
        """
        rel = self._norm(path)
        now = time.monotonic()
        with self._expect_guard:
            if len(self._expect) > 256:  # drop expired registrations now and then
                self._expect = {k: v for k, v in self._expect.items() if v[1] >= now}
            self._expect[rel] = (sha, now + self.suppress_window_s)

    def suppress(self, paths: Iterable[str]) -> None:
        """Declare ``paths`` as just written/moved/deleted by the app: their *current* state (content hash, or
        absence) is expected, so only a later, different change is reported. Call after the operation."""
        for p in paths:
            rel = self._norm(p)
            if not rel:
                continue
            try:
                self.expect_write(rel, file_hash(self.root / rel))
            except OSError:  # a folder or unreadable: nothing to compare later
                pass

    def _is_expected(self, rel: str, now: float) -> bool:
        with self._expect_guard:
            exp = self._expect.get(rel)
            if exp is None:
                return False
            if exp[1] < now:
                del self._expect[rel]
                return False
        try:
            current = file_hash(self.root / rel)
        except OSError:  # a folder, unreadable: not ours to judge
            return False
        return current == exp[0]

    # -- thread ----------------------------------------------------------------------------------------
    def _run(self) -> None:
        import watchfiles

        polling = self.force_polling
        reconcile = False
        while not self._stop.is_set():
            if not self.root.is_dir():
                self._lose_root()
                self._stop.wait(ROOT_RETRY_S)
                continue
            if self._root_lost:
                log.info("vault folder is back: %s", self.root)
                self._root_lost = False
                reconcile = True
            try:
                gen = watchfiles.watch(
                    self.root, watch_filter=None, debounce=max(STEP_MS, int(self.debounce_s * 1000)), step=STEP_MS,
                    stop_event=self._stop, rust_timeout=self._tick_ms, yield_on_timeout=True, raise_interrupt=False,
                    force_polling=polling, ignore_permission_denied=True,
                )
                try:
                    next_root_check = time.monotonic() + ROOT_RETRY_S
                    for changes in gen:
                        if self._since is not None:  # the watch is in place: what changed before it is reported now
                            since, self._since = self._since, None
                            self._catch_up(since)
                        self._ready.set()
                        self._settled.set()
                        if reconcile:  # after the root came back: everything may have changed
                            reconcile = False
                            self._reconcile_all()
                        now = time.monotonic()
                        if changes and self._ingest(changes, now):
                            break  # root deleted: the backend watches nothing any more
                        if now >= next_root_check:  # a root moved away does not always send an event
                            next_root_check = now + ROOT_RETRY_S
                            if not self.root.is_dir():
                                self._lose_root()
                                break
                        self._run_rescans(now)
                        self._maybe_flush(now)
                        self._maybe_retry(now)
                    else:
                        return  # stop event
                finally:
                    gen.close()  # leaves watchfiles' ``with RustNotify`` block: releases the OS watches
                self.stats["restarts"] += 1
            except FileNotFoundError:
                continue  # root vanished while the backend was starting; handled at the loop top
            except OSError as exc:
                if not polling and "limit" in str(exc).lower():
                    log.warning("OS file watch limit reached (%s); falling back to polling", exc)
                    self._report("file watch limit reached; watching the vault by polling instead")
                    polling = True
                    continue
                log.exception("vault watcher failed")
                self._report(f"vault watcher error: {exc}; retrying")
                reconcile = True  # changes during the gap were not seen
                self._stop.wait(ROOT_RETRY_S)
            except Exception as exc:  # never die silently; retry after a pause
                log.exception("vault watcher failed")
                self._report(f"vault watcher error: {exc}; retrying")
                reconcile = True
                self._stop.wait(ROOT_RETRY_S)

    def _lose_root(self) -> None:
        if not self._root_lost:
            self._root_lost = True
            self._pending.clear()
            self._new_res.clear()
            self._gone_dirs.clear()
            self._rescans.clear()
            log.warning("vault folder disappeared: %s; watching resumes when it is back", self.root)
            self._report(f"vault folder disappeared: {self.root}; watching resumes when it is back")
        self._settled.set()

    def _report(self, message: str) -> None:
        # the same error again within REPORT_REPEAT_S (e.g. an undecodable file name failing every restart) is
        # logged but not reported again: the user was told once
        now = time.monotonic()
        if now - self._reported.get(message, -REPORT_REPEAT_S) < REPORT_REPEAT_S:
            return
        self._reported[message] = now
        if self.on_error is not None:
            try:
                self.on_error(message)
            except Exception:
                log.exception("on_error callback failed")

    # -- event handling ---------------------------------------------------------------------------------
    def _norm(self, path: str) -> str:
        return unicodedata.normalize("NFC", str(path).replace("\\", "/")).strip("/")

    def _rel(self, abs_path: str) -> str | None:
        """Vault-relative NFC POSIX path of an event path; "" for the root; None when outside."""
        if abs_path == self._root_str:
            return ""
        if not abs_path.startswith(self._root_str + os.sep):
            return None
        return self._norm(abs_path[len(self._root_str) + 1 :].replace(os.sep, "/"))

    def _ignored(self, rel: str) -> bool:
        if is_temp_or_hidden(rel):
            return True
        if self.ignore is not None:
            try:
                return bool(self.ignore(rel))
            except Exception:
                log.exception("ignore callback failed for %s", rel)
        return False

    def _inside(self, abs_path: str, cache: dict[str, str | None]) -> bool:
        """False when the path goes through a folder symlink (watchfiles follows them; ``Indexer.scan`` does
        not) or is a file symlink whose target is outside the vault."""
        parent = os.path.dirname(abs_path)
        if parent not in cache:
            cache[parent] = os.path.realpath(parent)
        if cache[parent] != parent:
            return False
        if os.path.islink(abs_path):
            real = os.path.realpath(abs_path)
            return real.startswith(self._root_str + os.sep)
        return True

    def _real(self, abs_path: str, cache: dict[str, str]) -> str | None:
        """The event path with its folder's symlinks resolved, or None when that folder is outside the vault.

        watchfiles follows folder symlinks, and inotify keeps one watch per folder: a folder reached through a
        symlink (``a/loop -> ..``, ``a/up -> ../..``) has its events reported under the *last* path it was
        watched by, the looped one. Resolving the folder gives back the file's own vault path, so a loop never
        hides a change nor reports one twice; a folder outside the vault is dropped."""
        parent = os.path.dirname(abs_path)
        real = cache.get(parent)
        if real is None:
            real = cache[parent] = os.path.realpath(parent)
        if real == parent:
            return abs_path
        if real != self._root_str and not real.startswith(self._root_str + os.sep):
            return None
        return os.path.join(real, os.path.basename(abs_path))

    def _ingest(self, changes: set, now: float) -> bool:
        """Fold a group of raw changes into the pending set. Returns True when the root itself was deleted."""
        from watchfiles import Change

        dir_cache: dict[str, str | None] = {}
        touched = False
        real_dirs: dict[str, str] = {}
        for change, abs_path in changes:
            self.stats["events"] += 1
            abs_path = self._real(abs_path, real_dirs)
            if abs_path is None:
                continue
            rel = self._rel(abs_path)
            if rel is None:
                continue
            if rel == "":
                if change == Change.deleted or not self.root.is_dir():
                    self._lose_root()
                    return True
                continue
            if self._ignored(rel) or not self._inside(abs_path, dir_cache):
                continue
            if change == Change.deleted:
                self._rescans.pop(rel, None)
                if self.is_indexable(rel):
                    touched |= self._add(rel, now)
                elif self.known_under is not None:  # maybe a folder: its files are gone too
                    self._mark(now)
                    self._gone_dirs.add(rel)
                    touched = True
                continue
            if os.path.isdir(abs_path):
                if change == Change.added and not os.path.islink(abs_path):
                    touched |= self._scan_dir(rel, now)
                    self._rescans[rel] = now + RESCAN_DELAY_S
                continue
            if self.is_indexable(rel):
                touched |= self._add(rel, now)
            if change == Change.added and rel.startswith(self.resource_prefix):
                touched |= self._add_resource(rel, now)
        if touched:
            self._last_t = now
        return False

    def _mark(self, now: float) -> None:
        """Note when the first of the pending changes arrived (for ``max_delay_ms``)."""
        if not self._pending and not self._new_res and not self._gone_dirs:
            self._first_t = now

    def _add(self, rel: str, now: float) -> bool:
        if self._is_expected(rel, now):
            self.stats["suppressed"] += 1
            return False
        self._mark(now)
        self._pending.add(rel)
        return True

    def _add_resource(self, rel: str, now: float) -> bool:
        self._mark(now)
        self._new_res.add(rel)
        return True

    def _expand_gone_dirs(self, now: float) -> None:
        """Ask ``known_under`` once per deleted top-most path (a removed tree needs one call, not one per file)."""
        gone = sorted(self._gone_dirs, key=lambda r: r.count("/"))  # ancestors first
        self._gone_dirs = set()
        kept: set[str] = set()
        for rel in gone:
            parts = rel.split("/")
            if not any("/".join(parts[:i]) in kept for i in range(1, len(parts))):
                kept.add(rel)
        for rel in sorted(kept):
            self._add_known_under(rel, now)

    def _add_known_under(self, rel: str, now: float) -> bool:
        try:
            known = list(self.known_under(rel))  # type: ignore[misc]
        except Exception:
            log.exception("known_under callback failed for %s", rel)
            return False
        prefix = rel + "/" if rel else ""
        added = False
        for p in known:
            p = self._norm(p)
            if p.startswith(prefix) and not (self.root / p).exists():
                added |= self._add(p, now)
        return added

    def _scan_dir(self, rel_dir: str, now: float, *, resources: bool = True) -> bool:
        """Add every indexable (and, with ``resources``, resource) file under folder ``rel_dir`` ("" = root).

        Folder symlinks are not followed (as in ``Indexer.scan``). True when something was added.
        """
        added = False
        for rel, full in self._walk_files(rel_dir):
            if os.path.islink(full) and not self._inside(full, {}):
                continue
            if self.is_indexable(rel):
                added |= self._add(rel, now)
            if resources and rel.startswith(self.resource_prefix):
                added |= self._add_resource(rel, now)
        return added

    def _walk_files(self, rel_dir: str = ""):
        """Yield ``(vault-relative path, absolute path)`` of every file under folder ``rel_dir`` ("" = root) that
        is not ignored; folder symlinks are not followed (as in ``Indexer.scan``)."""
        for dirpath, dirnames, filenames in os.walk(self.root / rel_dir if rel_dir else self.root, followlinks=False):
            rd = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            rd = "" if rd == "." else rd + "/"
            dirnames[:] = [d for d in dirnames if not self._ignored(f"{rd}{d}")]
            for fn in filenames:
                rel = self._norm(rd + fn)
                if not self._ignored(rel):
                    yield rel, os.path.join(dirpath, fn)

    def _catch_up(self, since: float) -> None:
        """Report every indexable (and resource) file modified at or after ``since`` (epoch seconds), as if the
        watcher had seen it change. Folder symlinks are not followed (as in ``Indexer.scan``)."""
        now = time.monotonic()
        added = False
        for rel, full in self._walk_files():
            try:
                if os.stat(full).st_mtime < since or (os.path.islink(full) and not self._inside(full, {})):
                    continue
            except OSError:
                continue
            if self.is_indexable(rel):
                added |= self._add(rel, now)
            if rel.startswith(self.resource_prefix):
                added |= self._add_resource(rel, now)
        if added:
            self._last_t = now
            log.info("catch-up: %d file(s) changed before the watch was in place", len(self._pending))

    def _run_rescans(self, now: float) -> None:
        due = [d for d, t in self._rescans.items() if t <= now]
        for rel in due:
            del self._rescans[rel]
            if (self.root / rel).is_dir() and self._scan_dir(rel, now):
                self._last_t = now

    def _reconcile_all(self) -> None:
        """After the root came back: report every indexable file, plus every indexed path (deleted meanwhile)."""
        now = time.monotonic()
        self._scan_dir("", now, resources=False)
        if self.known_under is not None:
            self._add_known_under("", now)
        self._last_t = now

    def _maybe_flush(self, now: float) -> None:
        if not self._pending and not self._new_res and not self._gone_dirs:
            return
        if self._rescans:  # a new folder's second scan is due within RESCAN_DELAY_S: wait for it
            if now - self._first_t < self.max_delay_s:
                return
        quiet = now - self._last_t >= self.debounce_s
        overdue = now - self._first_t >= self.max_delay_s
        if quiet or overdue:
            self._flush(now)

    def _flush(self, now: float) -> None:
        if self._gone_dirs:
            self._expand_gone_dirs(now)
        paths = sorted(p for p in self._pending if not self._is_expected(p, now))
        self.stats["suppressed"] += len(self._pending) - len(paths)
        new_res = sorted(p for p in self._new_res if (self.root / p).is_file() and not self._is_expected(p, now))
        self._pending = set()
        self._new_res = set()
        if paths:
            self._deliver(paths)
        if new_res and self.on_new_resources is not None:
            try:
                self.on_new_resources(new_res)
            except Exception:
                log.exception("on_new_resources failed for %d paths", len(new_res))

    def _deliver(self, paths: list[str]) -> bool:
        """``on_batch(paths)``; when it raises, the paths are kept and delivered again later (never dropped: a
        change the index missed would stay missing until the next start) and ``on_error`` is told once."""
        self.stats["batches"] += 1
        self.stats["paths"] += len(paths)
        try:
            self.on_batch(paths)
        except Exception as exc:
            log.exception("on_batch failed for %d paths; retried in %.0f s", len(paths), self._retry_wait)
            self._report(f"index not updated for {len(paths)} changed file(s): {exc}; retrying")
            self._failed.update(paths)
            self._retry_at = time.monotonic() + self._retry_wait
            self._retry_wait = min(self._retry_wait * 2, BATCH_RETRY_MAX_S)
            return False
        self._failed.difference_update(paths)
        self._retry_wait = BATCH_RETRY_S
        return True

    def _maybe_retry(self, now: float) -> None:
        if not self._failed or now < self._retry_at:
            return
        paths = sorted(self._failed)
        self._failed = set()
        if self._deliver(paths):
            log.info("index updated for %d file(s) after an earlier failure", len(paths))
