"""The no-LLM quick-capture journal: the user's chat messages appended verbatim to ``daily/<date>/capture.md``.

The app's capture card is stamped and appended to; once the user edits it (or if they made it), the captures
continue in reme's block at its end, on the same page and in time order, rather than in a second card.

A card another program keeps writing (a sync tool, a script appending to it) is waited for a few seconds
(:data:`CAPTURE_WAIT_S`); if it never settles the messages are kept pending in ``<state dir>/`` :data:`PENDING_FILE`
(written atomically; the words are in the chat record anyway) and appended, in time order, at the next capture or
by a retry thread every :data:`PENDING_RETRY_S` seconds. The capture catalog (ids already captured) makes every
retry idempotent: an entry is never appended twice, and the other program's lines are never written over (every
write is compare-and-swap against the bytes just read).

A card that cannot be written at all right now (a full disk, a file size limit, a read-only folder, no permission)
gets nothing written (the card's temp file is removed) and the messages are kept pending the same way and retried;
the caller gets :class:`CaptureFailed` (an EngineError, one line: the card, the OS's reason, where the words are).
When the pending file cannot be written either (the state dir is on the same full disk), the entries are kept in
the engine's memory and retried until the process ends (the words are in the chat record too).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Iterable

from ..markdown.frontmatter import render_frontmatter
from ..markdown.links import format_link
from ..vault import provenance as P
from ..errors import EngineError, WritePending, os_error_message
from ..vault.io import FileBusy, SkipFile, WriteConflict, atomic_write
from .cards import _day_folder, _read_card
from .journal import NotJournaled
from .merge import _checked_block_write
from .session import ChatMessage, session_rel, valid_session_id

CAPTURE_KIND = "capture"
#: Catalog of captured message ids: session path → JSON list of the last :data:`CAPTURE_IDS_KEPT` ids.
CAPTURE_CATALOG = "capture"
CAPTURE_IDS_KEPT = 2000
CAPTURE_STEM = "capture"
#: Seconds a capture waits for a busy card (one another program keeps writing) before keeping the words pending.
CAPTURE_WAIT_S = 3.0
#: Seconds between the retry thread's attempts at pending captures.
PENDING_RETRY_S = 5.0
#: Pending captures, in the state dir: ``{"entries": [{"session_id", "message": {id, role, content, created_at}}]}``.
PENDING_FILE = "capture-pending.json"
#: The capture lock, in the state dir: shared by every process on the vault (the app, ``--serve``, MCP servers), held
#: for one append attempt (catalog check, card write, catalog update) or one read-modify-write of the pending file,
#: so two processes never capture the same pending message twice nor drop each other's pending entries. Taken
#: before ``Engine.write_lock``.
CAPTURE_LOCK_FILE = "capture.lock"
#: Seconds a capture waits for another process's hold of the capture lock (held for milliseconds) before giving up
#: with a visible error (the words are in the chat record).
CAPTURE_LOCK_WAIT_S = 10.0

log = logging.getLogger("reme.capture")


@dataclass
class CaptureResult:
    """Outcome of :func:`append_user_messages_verbatim`: ``paths`` written (capture cards), ``created`` among them,
    ``appended`` messages, ``skipped`` messages (not from the user, empty, or captured before), ``run_id`` of the
    journal run (None when nothing was written), ``pending`` messages of this session kept for later (the card was
    busy; see the module doc), ``warnings``: what failed after the words were on the card (the change journal, the
    capture catalog or the index could not be written: a full disk) — the words are saved; these say what is not
    up to date."""

    session_id: str
    paths: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    appended: int = 0
    skipped: int = 0
    run_id: str | None = None
    pending: int = 0
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _as_message(m: ChatMessage | dict) -> ChatMessage:
    if isinstance(m, ChatMessage):
        m.validate()
        return m
    return ChatMessage.from_dict(m)


def _capture_head(date: str) -> str:
    meta = {"name": f"Capture {date}", "description": f"Chat messages captured verbatim on {date}"}
    return render_frontmatter(meta) + f"\n# Capture {date}\n"


def _capture_block(m: ChatMessage, tz, srel: str) -> str:
    return f"\n**{m.time(tz):%H:%M}** · {format_link(srel, alias='chat')}\n\n{m.content.rstrip()}\n"


class CardBusy(EngineError):
    """A capture card kept changing (another program writing it) while it was read or appended to; nothing was
    written. ``rel``: the card's vault path."""

    def __init__(self, rel: str, why: str) -> None:
        super().__init__(f"cannot append to {rel}: {why}")
        self.rel = rel


@contextmanager
def capture_lock(engine):
    """Hold the vault's cross-process capture lock (:data:`CAPTURE_LOCK_FILE`), then ``engine.write_lock``. Raises
    :class:`CardBusy` when another process held the capture lock for :data:`CAPTURE_LOCK_WAIT_S` seconds."""
    from ..lock import LockTimeout, shared_flock

    state = engine.settings.state_dir
    state.mkdir(parents=True, exist_ok=True)
    try:
        held = shared_flock(state / CAPTURE_LOCK_FILE).hold(CAPTURE_LOCK_WAIT_S)
        held.__enter__()
    except LockTimeout as exc:
        raise CardBusy("the capture card", f"another reme process kept the capture lock ({exc})") from None
    try:
        with engine.write_lock:
            yield
    finally:
        held.__exit__(None, None, None)


class CapturePending(WritePending):
    """Raised by :func:`append_user_messages_verbatim` when the card stayed busy: the messages were kept pending
    (nothing lost; they are in the chat record too) and will be appended when the card is free. ``result``: the
    :class:`CaptureResult` (``pending`` > 0; ``paths`` written meanwhile, e.g. older pending captures)."""

    def __init__(self, rel: str, result: CaptureResult) -> None:
        super().__init__(f"{rel} is busy (another program keeps writing it): kept in the chat record; added to "
                         f"the capture card when it is free")
        self.rel = rel
        self.result = result


class CaptureFailed(EngineError):
    """Raised by :func:`append_user_messages_verbatim` when a capture card cannot be written at all right now (a
    full disk, a file size limit, a read-only folder, no permission): nothing was written to the card, and the
    messages are kept pending and appended by the retry thread once the write works again.

    ``rel``: the card's vault path; ``reason``: the OS's reason in a few words (``no space left on the disk``);
    ``errno``: the cause's errno; ``kept``: where the words wait besides the chat record — ``"pending file"``
    (the state dir's :data:`PENDING_FILE`, survives a restart) or ``"memory"`` (the state dir could not be written
    either: retried until this process ends); ``result``: the :class:`CaptureResult` (``pending`` > 0)."""

    def __init__(self, rel: str, cause: OSError, result: CaptureResult, kept: str) -> None:
        line = os_error_message(cause, rel, "append to")
        where = "kept pending" if kept == "pending file" else "kept in memory until the app quits"
        super().__init__(f"{line} — the message is in the chat record and {where}; it is added to the capture "
                         f"card when the card can be written (retried every {PENDING_RETRY_S:g} s)")
        self.rel, self.reason, self.errno = rel, line.split(": ", 1)[-1], cause.errno
        self.kept, self.result = kept, result


class _CardUnwritable(EngineError):
    """A card write failed with an OSError (internal: :func:`_append_in_turn` turns it into CaptureFailed)."""

    def __init__(self, rel: str, cause: OSError) -> None:
        super().__init__(os_error_message(cause, rel, "append to"))
        self.rel, self.cause = rel, cause


def _append_block(engine, run, rel: str, head: str, block: str, srel: str) -> bool:
    """Append ``block`` (text starting with a newline) to card ``rel`` (created with ``head`` when absent, stamped
    as the app's); True when created.

    A card the app owns gets ``block`` appended and is re-stamped; a card the user owns keeps every byte and
    ``block`` goes at the end of reme's block (a new one when there is no intact block). Conflict-checked
    against the text just read and retried on a concurrent edit, so a user's edit made meanwhile is kept (and,
    having made the card theirs, is appended to in the block) rather than overwritten. Raises :class:`CardBusy`
    (an EngineError) when the card kept changing, EngineError when it cannot be read or appended to.
    """
    for _ in range(5):
        try:
            cur = _read_card(engine, rel)
        except FileBusy as exc:
            raise CardBusy(rel, exc.reason) from exc
        except SkipFile as exc:
            raise EngineError(f"cannot append to {rel}: {exc.reason}") from exc
        if cur is None:
            new, expected = P.stamp(head + block), None
        else:
            text, sha, enc = cur
            if P.note_ownership(text).app_owned:
                new = P.stamp(text + ("" if not text or text.endswith("\n") else "\n") + block)
            else:
                # The user edited (or wrote) this card: their lines stay as they are; the captures continue in
                # reme's block at the end, on the same page and in time order.
                inner = P.live_block(text)
                entry = block.strip("\r\n")
                try:
                    new = _checked_block_write(text, P.set_block(text, f"{inner}\n\n{entry}" if inner else entry),
                                               rel)
                except WriteConflict as exc:
                    raise EngineError(str(exc)) from exc
            expected = sha
        try:
            run.write(rel, new, step=CAPTURE_KIND, sources=[srel], expected_sha=expected)
        except WriteConflict:
            continue
        return cur is None
    raise CardBusy(rel, "it kept changing while appending")


class _LazyRun:
    """A journal run started at its first write, so an attempt that writes nothing (a busy card) leaves no run."""

    def __init__(self, engine, params: dict) -> None:
        self.engine, self.params, self.run = engine, params, None

    @property
    def run_id(self) -> str | None:
        return self.run.run_id if self.run is not None else None

    def write(self, *args, **kw):
        if self.run is None:
            self.run = self.engine.journal.start_run(self.engine.vault, CAPTURE_KIND, self.params)
        return self.run.write(*args, **kw)

    def record_done(self, *args, **kw):
        if self.run is None:
            self.run = self.engine.journal.start_run(self.engine.vault, CAPTURE_KIND, self.params)
        return self.run.record_done(*args, **kw)

    def finish(self, status: str, summary: dict) -> None:
        if self.run is not None:
            self.run.finish(status, summary)


def _capture_once(engine, sid: str, batch: list[ChatMessage], res: CaptureResult) -> None:
    """One attempt at appending ``batch`` (session ``sid``) under the write lock, adding to ``res``. Messages
    captured before (the catalog) are skipped, so a retry after a partial attempt appends only the rest. Raises
    :class:`CardBusy` (the cards written so far are in ``res``) or EngineError."""
    settings = engine.settings
    tz = settings.tzinfo()
    srel = session_rel(settings.layers, sid, engine.vault)
    with capture_lock(engine):  # another process's append of the same pending message cannot come in between
        raw = engine.store.catalog_get(CAPTURE_CATALOG).get(srel)
        try:
            done = list(json.loads(raw)) if raw else []
        except (ValueError, TypeError):
            done = []
        seen = set(done)
        by_date: dict[str, list[ChatMessage]] = {}
        for m in batch:
            if m.role != "user" or not m.content.strip() or m.id in seen:
                res.skipped += 1
                continue
            seen.add(m.id)
            by_date.setdefault(m.time(tz).date().isoformat(), []).append(m)
        if not by_date:
            return
        run = _LazyRun(engine, {"session_id": sid, "messages": sum(map(len, by_date.values()))})
        written: list[str] = []
        created: list[str] = []
        try:
            for date, ms in by_date.items():
                rel = f"{_day_folder(engine, date)}/{CAPTURE_STEM}.md"
                try:
                    is_new = _append_block(engine, run, rel, _capture_head(date),
                                           "".join(_capture_block(m, tz, srel) for m in ms), srel)
                except OSError as exc:  # nothing written to the card (atomic_write removed its temp file)
                    raise _CardUnwritable(rel, exc) from exc
                except NotJournaled as exc:  # the words are on the card; only its journal row is missing
                    is_new = exc.change.action == "create"
                    res.warnings.append(str(exc))
                    log.warning("%s", exc)
                written.append(rel)
                if is_new:
                    created.append(rel)
                res.appended += len(ms)
                done.extend(m.id for m in ms)
                try:
                    engine.store.catalog_set(CAPTURE_CATALOG, {srel: json.dumps(done[-CAPTURE_IDS_KEPT:])})
                except sqlite3.Error as exc:  # on the card already; not pending, so nothing appends them twice
                    res.warnings.append(f"{rel} was saved, but the capture catalog could not be updated ({exc})")
                    log.warning("capture catalog not updated for %s: %s", rel, exc)
        except BaseException:
            try:
                run.finish("failed", {"paths": written, "appended": res.appended})
            except sqlite3.Error as exc:
                log.warning("capture run not closed in the journal: %s", exc)
            raise
        finally:
            res.paths += [p for p in written if p not in res.paths]
            res.created += [p for p in created if p not in res.created]
            res.run_id = run.run_id or res.run_id
            from .day_index import reindex_day

            for rel in created:
                try:
                    busy_page = _page_busy(reindex_day(engine, run, rel.split("/")[-2]))
                except NotJournaled as exc:  # the day page was written; its journal row was not
                    res.warnings.append(str(exc))
                    busy_page = False
                except (EngineError, FileBusy, sqlite3.Error):
                    busy_page = True
                if busy_page:  # another program is writing the day page: the retry thread lists the card
                    _day_index_later(engine, rel.split("/")[-2])  # once the page is quiet
            if written:
                try:
                    engine.index_paths(written)
                except (sqlite3.Error, OSError) as exc:  # the watcher / next start indexes it
                    res.warnings.append(f"{', '.join(written)} saved, not indexed yet ({exc})")
                    log.warning("capture not indexed: %s", exc)
        try:
            run.finish("ok", {"paths": written, "appended": res.appended, "created": created})
        except sqlite3.Error as exc:
            res.warnings.append(f"the capture's journal run could not be closed ({exc})")
            log.warning("capture run not closed in the journal: %s", exc)


def _capture_waiting(engine, sid: str, batch: list[ChatMessage], res: CaptureResult, wait_s: float) -> None:
    """:func:`_capture_once`, retried while the card is busy for up to ``wait_s`` seconds (the write lock is let go
    between attempts, so other writes are not held up). Raises the last :class:`CardBusy` when it never settled."""
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while True:
        try:
            return _capture_once(engine, sid, batch, res)
        except CardBusy:
            if time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)  # the card's writer is between two writes; each read already waited for it to settle
        delay = min(delay * 2, 0.4)


# -- pending captures -------------------------------------------------------------------------------------------

_PENDING_LOCK = threading.Lock()  # guards the retry-thread bookkeeping below


class _Turns:
    """One engine's captures, one at a time in arrival order (a FIFO lock: a plain Lock wakes its waiters in no
    set order, and two messages sent while the card is busy would then land swapped)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0  # the next ticket handed out
        self._serving = 0  # the ticket whose turn it is

    @contextmanager
    def turn(self):
        with self._cond:
            ticket = self._next
            self._next += 1
            while self._serving != ticket:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._serving += 1
                self._cond.notify_all()


def _turns(engine) -> _Turns:
    with _PENDING_LOCK:
        t = getattr(engine, "_capture_turns", None)
        if t is None:
            t = engine._capture_turns = _Turns()
        return t


def _pending_path(engine):
    return engine.settings.state_dir / PENDING_FILE


def load_pending(engine) -> list[tuple[str, ChatMessage]]:
    """``(session_id, message)`` of the captures kept pending, oldest first; [] when none: the pending file's, then
    those kept in memory because the file could not be written (see :func:`_save_pending`). A damaged file or
    entry is logged and skipped (its words are still in the chat record)."""
    out = []
    try:
        data = json.loads(_pending_path(engine).read_text(encoding="utf-8"))
    except FileNotFoundError:
        data = {}
    except (OSError, ValueError) as exc:
        log.warning("pending captures unreadable (%s); the messages are in their chat records", exc)
        data = {}
    for e in data.get("entries", []) if isinstance(data, dict) else []:
        try:
            out.append((valid_session_id(e["session_id"]), ChatMessage.from_dict(e["message"])))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("pending capture skipped (%s)", exc)
    unsaved = engine.__dict__.get("_capture_unsaved") or []
    if unsaved:
        have = {(sid, m.id) for sid, m in out}
        out += [(sid, m) for sid, m in unsaved if (sid, m.id) not in have]
    return out


def _save_pending(engine, entries: list[tuple[str, ChatMessage]]) -> bool:
    """Replace the pending file with ``entries`` (atomic; removed when empty); True when written. Called under
    :func:`capture_lock` (the file is shared by every process on the vault).

    When the file cannot be written (the state dir's disk is full or read-only) the entries are kept in the
    engine's memory instead (merged by :func:`load_pending`, written at the next save that works) and False is
    returned: a capture that failed for lack of space never loses the queue for the same reason."""
    path = _pending_path(engine)
    try:
        if not entries:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            data = {"entries": [{"session_id": sid, "message": m.to_dict()} for sid, m in entries]}
            atomic_write(path, json.dumps(data, ensure_ascii=False, indent=1) + "\n")
    except OSError as exc:
        engine._capture_unsaved = list(entries)
        log.warning("pending captures kept in memory: %s", os_error_message(exc, str(path), "write"))
        return False
    engine._capture_unsaved = []
    return True


def _captured_ids(engine, sid: str) -> set[str]:
    srel = session_rel(engine.settings.layers, sid, engine.vault)
    raw = engine.store.catalog_get(CAPTURE_CATALOG).get(srel)
    try:
        return set(json.loads(raw)) if raw else set()
    except (ValueError, TypeError):
        return set()


def flush_pending(engine, *, wait_s: float = 0.0, results: dict[str, CaptureResult] | None = None,
                  busy: list[str] | None = None) -> int:
    """Append the pending captures, oldest first (each run of one session's entries in one attempt, waiting up to
    ``wait_s`` seconds for a busy card); stops at the first card still busy, its path added to ``busy`` (later
    entries wait behind it, keeping time order). Entries appended (or captured before) leave the file. Returns
    how many are still pending. ``results``: per session id, a :class:`CaptureResult` added to (created for
    sessions not in it). Raises EngineError for a card that cannot be written at all (entries stay pending)."""
    entries = load_pending(engine)
    if not entries:
        return 0
    results = {} if results is None else results
    runs: list[tuple[str, list[ChatMessage]]] = []
    for sid, m in entries:
        if runs and runs[-1][0] == sid:
            runs[-1][1].append(m)
        else:
            runs.append((sid, [m]))
    try:
        for sid, msgs in runs:
            _capture_waiting(engine, sid, msgs, results.setdefault(sid, CaptureResult(sid)), wait_s)
    except CardBusy as exc:
        if busy is not None:
            busy.append(exc.rel)
    finally:
        with capture_lock(engine):
            # re-read: another thread or process may have added entries meanwhile
            current = load_pending(engine)
            done = {sid: _captured_ids(engine, sid) for sid in {s for s, _ in current}}
            left = [(sid, m) for sid, m in current if m.id not in done[sid]]
            if len(left) != len(current) or engine.__dict__.get("_capture_unsaved"):
                _save_pending(engine, left)  # (entries kept in memory go to the file as soon as it can be written)
    return len(left)


#: Attempts of the retry thread at a busy day page's index before it gives up (one per PENDING_RETRY_S seconds);
#: ``job daily_reindex`` still regenerates it.
DAY_INDEX_ATTEMPTS = 60


def _page_busy(res) -> bool:
    """True when a day-index refresh wrote nothing because the page could not be read right now (another program
    keeps writing it), as opposed to a page the app leaves alone for good (no markers, the user's section)."""
    return bool(getattr(res, "skipped", None)) and str(res.skipped).startswith("day page not readable")


def _day_index_later(engine, date: str) -> None:
    """Remember that the day page of ``date`` still lacks its new capture card (the page was busy): the retry
    thread regenerates its index once the page is quiet (at most :data:`DAY_INDEX_ATTEMPTS` tries)."""
    with _PENDING_LOCK:
        engine.__dict__.setdefault("_capture_days", {})[date] = DAY_INDEX_ATTEMPTS
    _start_retry(engine)


def _retry_day_indexes(engine) -> int:
    """Regenerate the day indexes :func:`_day_index_later` put off, each as its own ``capture`` run (so it is
    revertible like the capture). Returns how many are still put off (the page is still busy)."""
    from .day_index import reindex_day

    with _PENDING_LOCK:
        days = engine.__dict__.get("_capture_days") or {}
        dates = sorted(days)
    left = 0
    for date in dates:
        run = _LazyRun(engine, {"day_index": date})
        try:
            busy_page = _page_busy(reindex_day(engine, run, date))
        except (EngineError, FileBusy):
            busy_page = True
        run.finish("failed" if busy_page else "ok", {"day_index": date})
        with _PENDING_LOCK:
            days[date] = days.get(date, 1) - 1
            if not busy_page or days[date] <= 0:
                days.pop(date, None)
            else:
                left += 1
    return left


def _retry_loop(engine) -> None:
    """The retry thread: every :data:`PENDING_RETRY_S` seconds, try the pending captures until none is left or
    the engine closes (checked four times a second, so closing is never held up)."""
    try:
        while not engine.closed:
            end = time.monotonic() + PENDING_RETRY_S
            while not engine.closed and time.monotonic() < end:
                time.sleep(min(0.25, max(0.0, end - time.monotonic())))
            if engine.closed:
                break
            try:
                with _turns(engine).turn():
                    left = flush_pending(engine, wait_s=1.0) + _retry_day_indexes(engine)
                if left == 0:
                    break
            except (CardBusy, _CardUnwritable) as exc:  # expected while the card is busy or the disk full: one line
                log.warning("pending captures not appended yet (retried in %g s): %s", PENDING_RETRY_S, exc)
            except Exception:  # noqa: BLE001 - e.g. a card that cannot be written now: keep the words, keep trying
                log.warning("pending captures not appended yet", exc_info=True)
    finally:
        with _PENDING_LOCK:
            engine._capture_retry_thread = None


def _start_retry(engine) -> None:
    """Start the retry thread for ``engine`` unless it runs already (a daemon: the pending file outlives it)."""
    with _PENDING_LOCK:
        if getattr(engine, "_capture_retry_thread", None) is not None or engine.closed:
            return
        t = threading.Thread(target=_retry_loop, args=(engine,), name="reme-capture-retry", daemon=True)
        engine._capture_retry_thread = t
        t.start()


def append_user_messages_verbatim(engine, session_id: str, messages: Iterable[ChatMessage | dict]) -> CaptureResult:
    """The no-LLM quick-capture journal: append the user's ``messages`` verbatim to ``daily/<date>/capture.md``.

    ``date`` is each message's day in the app timezone. A new capture card gets frontmatter ``name: Capture
    <date>`` and a description; each message is appended as a ``**HH:MM** · [[<session record>|chat]]`` line
    followed by its text unchanged (inside reme's block at the end once the user owns the card: see the module
    doc). Only ``role == "user"`` messages with text are captured, each id once (catalog
    ``capture``), so calling this again with the whole transcript is harmless. Writes are journaled (run kind
    ``capture``), atomic and conflict-checked (a concurrent edit of the card is kept). The day index is refreshed
    when a card is created, and written cards are re-indexed. Needs no writer lock: the append is optimistic and
    retried.

    Captures kept pending earlier go first (time order). A card that stays busy for :data:`CAPTURE_WAIT_S`
    seconds keeps the messages pending and raises :class:`CapturePending` (an EngineError whose text says where
    the words are); a retry thread appends them once the card is free. A card that cannot be written now (a full
    disk, a read-only folder) keeps them pending the same way and raises :class:`CaptureFailed` (an EngineError:
    the card, the OS's reason, where the words are). Raises EngineError (bad session id, unreadable card) and
    ValueError for malformed messages.
    """
    try:
        sid = valid_session_id(session_id)
    except ValueError as exc:
        raise EngineError(str(exc)) from exc
    batch = [_as_message(m) for m in messages]
    with _turns(engine).turn():  # a capture sent while an earlier one still waits for the card goes after it
        return _append_in_turn(engine, sid, batch)


def _append_in_turn(engine, sid: str, batch: list[ChatMessage]) -> CaptureResult:
    """The body of :func:`append_user_messages_verbatim`, run in this capture's turn."""
    wanted = [m for m in batch if m.role == "user" and m.content.strip()]
    results = {sid: CaptureResult(sid)}
    with capture_lock(engine):
        pending = load_pending(engine)
        if pending and wanted:
            # Older words are waiting: the new ones queue behind them so the card stays in time order.
            queued = {(s, m.id) for s, m in pending}
            _save_pending(engine, pending + [(sid, m) for m in wanted if (sid, m.id) not in queued])
    busy: list[str] = []
    failed: _CardUnwritable | None = None
    try:
        if pending:
            flush_pending(engine, wait_s=CAPTURE_WAIT_S, results=results, busy=busy)
        if not pending or not wanted:
            _capture_waiting(engine, sid, batch, results[sid], CAPTURE_WAIT_S)
    except (CardBusy, _CardUnwritable) as exc:  # (CardBusy only without pending entries: flush_pending keeps its own)
        if isinstance(exc, CardBusy):
            busy.append(exc.rel)
        else:
            failed = exc
        with capture_lock(engine):
            done = _captured_ids(engine, sid)
            current = load_pending(engine)
            queued = {(s, m.id) for s, m in current}
            _save_pending(engine, current + [(sid, m) for m in wanted
                                             if m.id not in done and (sid, m.id) not in queued])
    res = results[sid]
    for other in results.values():  # cards written for other sessions' pending captures: the caller reloads them
        res.paths += [p for p in other.paths if p not in res.paths]
    still = {m.id for s, m in load_pending(engine) if s == sid}
    res.pending = sum(1 for m in wanted if m.id in still)
    if still or load_pending(engine):
        _start_retry(engine)
    if failed is not None and res.pending:
        in_memory = {m.id for s, m in engine.__dict__.get("_capture_unsaved") or [] if s == sid}
        raise CaptureFailed(failed.rel, failed.cause, res,
                            "memory" if any(m.id in in_memory for m in wanted) else "pending file")
    if res.pending:
        raise CapturePending(busy[0] if busy else "the capture card", res)
    return res


def resume_pending(engine) -> bool:
    """Start the retry thread when captures were left pending by an earlier run (the app quit while the card was
    busy); True when there were some. Cheap otherwise (one missing-file check)."""
    if not _pending_path(engine).exists():
        return False
    _start_retry(engine)
    return True
