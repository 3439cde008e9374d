"""The change journal: every file an LLM pipeline creates, changes or deletes, per run, revertible.

Stored in ``<state dir>/journal.sqlite`` (derived state, outside the vault). A run has an id, a kind
(``auto_dream``, ``auto_memory``, ``auto_resource``, ``proactive_refresh``…), parameters, start/end times, a
summary and the LLM tally. Each change records step, path, action (create/update/delete), before/after content
hashes and texts, and the sources (vault paths) it was derived from.

Writes go through :meth:`Run.write`: it reads the current file, refuses to clobber a change the user made after
the pipeline read it (``expected_sha``), writes atomically and journals the change. :meth:`ChangeJournal.revert`
restores a run's before-states, refusing files changed again since (their current hash is not the run's
after-hash). A move in a run (its note's delete + create) is undone as one rename back, never replacing a file at
the old name and never deleting the note while the old name is taken. A revert that restores nothing while
refusing something fails and leaves the run as it was; one that
restores some files and refuses others is *partial*: the run is marked partly reverted (``partly_reverted_at``,
``revert_state`` "partial"), not reverted, so the refused files can be reverted later once the person decides.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sqlite3
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..crashpoints import crash_point
from ..vault.io import WriteConflict, atomic_write, content_hash, file_hash, remove_if_unchanged, rename_noreplace
from ..vault.paths import VaultPathError, resolve

log = logging.getLogger("reme.journal")
#: Run kinds of an agent's writes through MCP (``mcp:write_note``…): journaled, but not the app's own writes.
AGENT_KIND_PREFIX = "mcp:"
#: Run kinds that are the person's writes, not the app's: an agent's over MCP, and the file jobs of the CLI
#: (``cli:write``…).
PERSON_KIND_PREFIXES = (AGENT_KIND_PREFIX, "cli:")
#: Warnings about damaged rows kept on the journal (newest last) for callers that did not pass a list.
MAX_READ_WARNINGS = 100

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, kind TEXT NOT NULL, params TEXT NOT NULL, started_at REAL NOT NULL,
    finished_at REAL, status TEXT NOT NULL, summary TEXT, tally TEXT, reverted_at REAL, partly_reverted_at REAL
);
CREATE TABLE IF NOT EXISTS changes (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(run_id), step TEXT NOT NULL, path TEXT NOT NULL,
    action TEXT NOT NULL, before_sha TEXT, after_sha TEXT, before_text TEXT, after_text TEXT,
    sources TEXT NOT NULL, at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS changes_run ON changes(run_id);
CREATE INDEX IF NOT EXISTS changes_path ON changes(path);
"""


@dataclass
class Change:
    run_id: str
    step: str
    path: str
    action: str
    before_sha: str | None
    after_sha: str | None
    sources: list[str]
    at: float
    before_text: str | None = None
    after_text: str | None = None

    def to_dict(self, with_text: bool = False) -> dict:
        d = asdict(self)
        if not with_text:
            d.pop("before_text")
            d.pop("after_text")
        return d


@dataclass
class RevertResult:
    """``restored``: paths put back to their before-state; ``refused``: ``{path, reason}`` left untouched (a file
    already as it was before the run is listed too, its reason ending "nothing to do"); ``warnings``: damaged
    journal rows met (those changes are refused, never guessed).

    ``outcome``: "reverted" (nothing left to restore), "partial" (some restored, some refused: the run is marked
    partly reverted and stays revertible), "refused" (nothing restored, something refused: the run is left as it
    was) or "nothing to do" (no files). ``success`` is False only for "refused", with ``error`` one line naming the
    refused files and why."""

    run_id: str
    restored: list[str] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    outcome: str = "reverted"
    partial: bool = False
    success: bool = True
    error: str | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        if d["error"] is None:
            d.pop("error")
        return d


#: The end of a refusal's reason when the file is already as it was before the run (not a real refusal).
NOTHING_TO_DO = "nothing to do"


def _refusal_line(refused: list[dict], limit: int = 3) -> str:
    """``a.md (changed since the run wrote it), b.md (…) and 2 more``: the refused files and why, one line."""
    parts = [f"{r.get('path', '?')} ({str(r.get('reason', 'refused')).split(';')[0]})" for r in refused[:limit]]
    more = f" and {len(refused) - limit} more" if len(refused) > limit else ""
    return ", ".join(parts) + more


def _text(v: Any) -> str | None:
    """A TEXT column as str: bytes decoded (a BLOB written by something else), other types → None."""
    if isinstance(v, str):
        return v
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def _num(v: Any, name: str, bad: list[str]) -> float | None:
    if v is None:
        return None
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    bad.append(name)
    return None


def _json_field(v: Any, name: str, bad: list[str], default: Any = None) -> Any:
    """A JSON column decoded; None/empty → ``default``; undecodable → ``default`` and ``name`` noted in ``bad``."""
    if v is None or v == "":
        return default
    t = _text(v)
    try:
        return json.loads(t) if t is not None else _raise()
    except ValueError:
        bad.append(name)
        return default


def _raise() -> Any:
    raise ValueError("not text")


def _text_matches(text: str | None, sha: str) -> bool:
    """True when ``text`` (as journaled: BOM dropped) is the content whose hash is ``sha`` (with or without BOM)."""
    if text is None:
        return False
    data = text.encode("utf-8")
    return content_hash(data) == sha or content_hash(b"\xef\xbb\xbf" + data) == sha


#: Journal steps of a move run (:func:`reme_engine.agent_capture.journaled_move`): the note's delete + create, and
#: each linking note rewritten (``sources`` = [the new path]).
MOVE_STEP, MOVE_REWRITE_STEP = "move", "rewrite links"


def _move_pairs(changes: list[Change], first_before: dict[str, Change]) -> dict[str, str]:
    """``{dst: src}`` of the moves in a run's changes: a ``create`` of step :data:`MOVE_STEP` whose one source is
    a path the run deleted in that step. Reverted as one rename back, never as a delete plus a create."""
    out = {}
    for ch in changes:
        if ch.step == MOVE_STEP and ch.action == "create" and len(ch.sources) == 1:
            src = ch.sources[0]
            b = first_before.get(src)
            if b is not None and b.step == MOVE_STEP and b.action == "delete" and src != ch.path:
                out[ch.path] = src
    return out


def _preview(v: Any) -> str:
    return repr(v)[:60]


class ChangeJournal:
    """Thread-safe journal over one SQLite file. ``read_warnings``: the latest damaged-row warnings (newest last)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / "journal.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)
        cols = {r[1] for r in self._db.execute("PRAGMA table_info(runs)")}
        if "partly_reverted_at" not in cols:  # a journal made before partial reverts were told apart
            try:
                self._db.execute("ALTER TABLE runs ADD COLUMN partly_reverted_at REAL")
            except sqlite3.OperationalError as exc:  # another process added it first
                if "duplicate column" not in str(exc):
                    raise
        self.read_warnings: list[str] = []

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _warn(self, warnings: list[str] | None, msg: str) -> None:
        """One damaged-row warning: logged, kept in :attr:`read_warnings` and added to the caller's list."""
        log.warning("journal: %s", msg)
        self.read_warnings = (getattr(self, "read_warnings", []) + [msg])[-MAX_READ_WARNINGS:]
        if warnings is not None:
            warnings.append(msg)

    def _exec(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, tuple(params))

    def start_run(self, vault: Path, kind: str, params: dict | None = None) -> "Run":
        """Open a run; its id is ``<UTC yyyymmddTHHMMSS>-<6 hex>`` (sortable, unique)."""
        run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
        self._exec("INSERT INTO runs(run_id, kind, params, started_at, status) VALUES (?,?,?,?,?)",
                   (run_id, kind, json.dumps(params or {}, ensure_ascii=False, default=str), time.time(), "running"))
        return Run(self, Path(vault), run_id, kind)

    def record(self, ch: Change) -> None:
        self._exec(
            "INSERT INTO changes(run_id, step, path, action, before_sha, after_sha, before_text, after_text, sources,"
            " at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (ch.run_id, ch.step, ch.path, ch.action, ch.before_sha, ch.after_sha, ch.before_text, ch.after_text,
             json.dumps(ch.sources, ensure_ascii=False), ch.at))

    def finish_run(self, run_id: str, status: str, summary: dict | None, tally: dict | None) -> None:
        self._exec("UPDATE runs SET finished_at=?, status=?, summary=?, tally=? WHERE run_id=?",
                   (time.time(), status, json.dumps(summary or {}, ensure_ascii=False, default=str),
                    json.dumps(tally or {}), run_id))

    def runs(self, limit: int = 20, kind: str | None = None, warnings: list[str] | None = None) -> list[dict]:
        """Recent runs, newest first, each with its change count, ``reverted_at``/``partly_reverted_at`` (epoch
        seconds or None) and ``revert_state`` ("reverted", "partial" or None).

        A damaged row (hand-edited, written by a broken build, a disk error) never fails the read: a row without a
        usable run id is skipped, a field that does not decode is read as None (``params`` as ``{}``); each such
        row gives one line in ``warnings`` (when given), in :attr:`read_warnings` and in the log."""
        q = ("SELECT r.run_id, r.kind, r.params, r.started_at, r.finished_at, r.status, r.summary, r.tally,"
             " r.reverted_at, (SELECT count(*) FROM changes c WHERE c.run_id = r.run_id), r.partly_reverted_at"
             " FROM runs r")
        args: list[Any] = []
        if kind:
            q += " WHERE r.kind = ?"
            args.append(kind)
        q += " ORDER BY r.started_at DESC, r.run_id DESC LIMIT ?"
        args.append(limit)
        out = []
        for r in self._exec(q, args).fetchall():
            run_id = _text(r[0])
            if not run_id:
                self._warn(warnings, f"run row without a usable id skipped ({_preview(r[0])})")
                continue
            bad: list[str] = []
            params = _json_field(r[2], "params", bad, default={})
            row = {"run_id": run_id, "kind": _text(r[1]) or "unknown", "params": params if params is not None else {},
                   "started_at": _num(r[3], "started_at", bad), "finished_at": _num(r[4], "finished_at", bad),
                   "status": _text(r[5]) or "unknown", "summary": _json_field(r[6], "summary", bad),
                   "tally": _json_field(r[7], "tally", bad), "reverted_at": _num(r[8], "reverted_at", bad),
                   "changes": r[9], "partly_reverted_at": _num(r[10], "partly_reverted_at", bad)}
            row["revert_state"] = ("reverted" if row["reverted_at"] is not None
                                   else "partial" if row["partly_reverted_at"] is not None else None)
            if _text(r[1]) is None or _text(r[5]) is None:
                bad.append("kind/status")
            if bad:
                self._warn(warnings, f"run {run_id}: damaged field(s) {', '.join(bad)} read as empty")
            out.append(row)
        return out

    def changes(self, run_id: str, with_text: bool = False, warnings: list[str] | None = None) -> list[Change]:
        """The run's changes in order. A damaged row is skipped when its path or action is unusable (a revert then
        reports it, see :meth:`revert`), else read with the damaged fields as None (``sources`` as ``[]``); one
        warning per row, as in :meth:`runs`."""
        rows = self._exec(
            "SELECT run_id, step, path, action, before_sha, after_sha, sources, at, before_text, after_text, id"
            " FROM changes WHERE run_id=? ORDER BY id", (run_id,)).fetchall()
        out = []
        for r in rows:
            path, action = _text(r[2]), _text(r[3])
            if not path or action not in ("create", "update", "delete"):
                self._warn(warnings, f"run {run_id}: change #{r[10]} skipped (damaged path or action: "
                                     f"{_preview(r[2])}, {_preview(r[3])})")
                continue
            bad: list[str] = []
            sources = _json_field(r[6], "sources", bad, default=[])
            if not isinstance(sources, list) or not all(isinstance(x, str) for x in sources):
                bad.append("sources")
                sources = [x for x in sources if isinstance(x, str)] if isinstance(sources, list) else []
            before_sha, after_sha = _text(r[4]), _text(r[5])
            if (r[4] is not None and before_sha is None) or (r[5] is not None and after_sha is None):
                bad.append("hashes")
            texts = [_text(r[8]), _text(r[9])] if with_text else [None, None]
            if with_text and ((r[8] is not None and texts[0] is None) or (r[9] is not None and texts[1] is None)):
                bad.append("texts")
            if bad:
                self._warn(warnings, f"run {run_id}: change #{r[10]} ({path}): damaged field(s) "
                                     f"{', '.join(dict.fromkeys(bad))} read as empty")
            out.append(Change(run_id, _text(r[1]) or "", path, action, before_sha, after_sha, sources,
                              _num(r[7], "at", bad) or 0.0, texts[0], texts[1]))
        return out

    def last_written_sha(self, path: str) -> str | None:
        """The after-hash of the app's latest journaled write of ``path`` (None if the app never wrote it).

        An agent's write through MCP (run kinds ``mcp:*``) or a CLI file job (``cli:*``) is journaled too but is
        not the app's: it counts as an edit by the person (pipelines never take such a note for their own, and a
        mark it sets is read)."""
        person = "".join(f" AND coalesce(r.kind, '') NOT LIKE '{p}%'" for p in PERSON_KIND_PREFIXES)
        r = self._exec(f"SELECT c.after_sha FROM changes c LEFT JOIN runs r ON r.run_id = c.run_id WHERE c.path=?"
                       f"{person} ORDER BY c.id DESC LIMIT 1", (path,)).fetchone()
        return r[0] if r else None

    def revert(self, vault: Path, run_id: str) -> RevertResult:
        """Restore the before-state of every file the run changed (newest change first).

        A file whose current hash is not the run's last after-hash was changed again since: it is refused with a
        reason and left as it is. A damaged journal row is never guessed at: a change whose row cannot be read,
        or whose before-text does not match its before-hash, is refused (``path`` "?" when unreadable) and
        named in ``warnings``. A move (:func:`_move_pairs`) goes back by one rename to its old name, never onto a
        file there (then the move, and the link rewrites pointing at its new name, are refused: both files kept);
        a note edited at its new name goes back with the edit (a warning says so). The outcome (see
        :class:`RevertResult`) decides the run's mark: "reverted" sets
        ``reverted_at``, "partial" sets ``partly_reverted_at`` (the run stays revertible), "refused" changes
        nothing. Raises KeyError for an unknown run.
        """
        row = self._exec("SELECT reverted_at, partly_reverted_at FROM runs WHERE run_id=?", (run_id,)).fetchone()
        if not row:
            raise KeyError(f"unknown run {run_id!r}")
        reverted_at = _num(row[0], "reverted_at", []) or _num(row[1], "partly_reverted_at", [])
        res = RevertResult(run_id)
        changes = self.changes(run_id, with_text=True, warnings=res.warnings)
        for w in res.warnings:
            if "skipped" in w:
                res.refused.append({"path": "?", "reason": f"damaged journal row: {w}"})
        first_before: dict[str, Change] = {}
        last_after: dict[str, Change] = {}
        for ch in changes:
            first_before.setdefault(ch.path, ch)
            last_after[ch.path] = ch
        moves = _move_pairs(changes, first_before)
        undo_moves: dict[str, str] = {}  # dst → src, for moves that can be undone
        for dst, src in moves.items():
            refusal = self._move_refusal(vault, src, dst, first_before, last_after, reverted_at)
            if refusal is None:
                undo_moves[dst] = src
                continue
            res.refused.append({"path": src, "reason": refusal})
            res.refused.append({"path": dst, "reason": refusal})
            if not refusal.endswith(NOTHING_TO_DO):
                for ch in changes:  # the links it rewrote keep pointing at where the note is
                    if ch.step == MOVE_REWRITE_STEP and ch.sources == [dst] and ch.path not in moves:
                        res.refused.append({"path": ch.path, "reason": f"links to {dst}, which stays where it is "
                                                                      f"(its move is not undone); left as it is"})
        held = {r["path"] for r in res.refused}
        paired = set(moves) | set(moves.values())
        for path in reversed(list(last_after)):
            if path in held:
                continue
            if path in paired:
                if path in undo_moves:
                    self._undo_move(vault, undo_moves[path], path, first_before, last_after, res)
                continue
            try:
                vp = resolve(vault, path)
            except VaultPathError as exc:
                res.refused.append({"path": path, "reason": f"damaged journal row: {exc}"})
                continue
            current = file_hash(vp.abs)
            before = first_before[path]
            if current != last_after[path].after_sha:
                if current == before.before_sha:  # None == None: a file the run created is gone again
                    when = time.strftime(" at %H:%M", time.localtime(reverted_at)) if reverted_at else ""
                    why = f"already reverted{when}" if reverted_at else "already as it was before the run"
                    res.refused.append({"path": path, "reason": f"{why}; {NOTHING_TO_DO}"})
                else:
                    res.refused.append({"path": path, "reason": "changed since the run wrote it; left as it is"})
                continue
            if before.before_sha is not None and not _text_matches(before.before_text, before.before_sha):
                msg = f"{path}: the journal's before-text does not match its hash (damaged row); not restored"
                self._warn(res.warnings, msg)
                res.refused.append({"path": path, "reason": msg})
                continue
            try:
                if before.before_sha is None:
                    remove_if_unchanged(vp.abs, current)  # a save since the hash above is kept, not deleted
                    _prune_day_folder(vault, vp.abs.parent)
                else:
                    atomic_write(vp.abs, before.before_text or "", expected_sha=current)
            except (WriteConflict, OSError) as exc:
                res.refused.append({"path": path, "reason": str(exc)})
                continue
            res.restored.append(path)
        blocked = [r for r in res.refused if not str(r.get("reason", "")).endswith(NOTHING_TO_DO)]
        if blocked and not res.restored:
            # Nothing was undone: a failure, and the run keeps its mark so it can be retried once the person decides.
            res.outcome, res.success = "refused", False
            res.error = f"revert restored nothing: {_refusal_line(blocked)}; the run is left revertible"
        elif blocked:
            res.outcome, res.partial = "partial", True
            self._exec("UPDATE runs SET partly_reverted_at=? WHERE run_id=?", (time.time(), run_id))
        else:
            res.outcome = "reverted" if res.restored or reverted_at else NOTHING_TO_DO
            self._exec("UPDATE runs SET reverted_at=coalesce(reverted_at, ?), partly_reverted_at=NULL"
                       " WHERE run_id=?", (time.time(), run_id))
        return res


    def _move_refusal(self, vault: Path, src: str, dst: str, first_before: dict[str, "Change"],
                      last_after: dict[str, "Change"], reverted_at: float | None) -> str | None:
        """Why the move ``src`` → ``dst`` of a run cannot be undone now (None: it can). The note must be at
        ``dst`` and nothing at ``src``: a file there since (a new note, a program appending to the old path) is
        never replaced, and the moved note is never deleted while its old name is taken, so both are kept."""
        try:
            s_vp, d_vp = resolve(vault, src), resolve(vault, dst)
        except VaultPathError as exc:
            return f"damaged journal row: {exc}"
        cur_src, cur_dst = file_hash(s_vp.abs), file_hash(d_vp.abs)
        if cur_src is not None:
            if cur_dst is None and cur_src in (first_before[src].before_sha, last_after[dst].after_sha):
                when = time.strftime(" at %H:%M", time.localtime(reverted_at)) if reverted_at else ""
                return (f"already reverted{when}" if reverted_at else "already as it was before the run") + \
                    f"; {NOTHING_TO_DO}"
            return (f"{src} exists again since the move (another file took the old name); the move is not undone "
                    f"and both files are kept")
        if cur_dst is None:
            return f"{dst} is gone since the move (deleted or moved again); nothing to move back"
        return None

    def _undo_move(self, vault: Path, src: str, dst: str, first_before: dict[str, "Change"],
                   last_after: dict[str, "Change"], res: RevertResult) -> None:
        """Move the note at ``dst`` back to ``src`` (never replacing a file there), then put back the text the
        run gave it (its self-links) only while the note is still exactly what the run left: a note edited at its
        new name goes back with the edit (a warning says so), so no byte anyone wrote is lost and the note
        exists under one name."""
        s_vp, d_vp = resolve(vault, src), resolve(vault, dst)
        cur = file_hash(d_vp.abs)
        try:
            s_vp.abs.parent.mkdir(parents=True, exist_ok=True)
            rename_noreplace(d_vp.abs, s_vp.abs)
        except FileExistsError:
            reason = f"{src} exists again since the move; the move is not undone and both files are kept"
            res.refused += [{"path": src, "reason": reason}, {"path": dst, "reason": reason}]
            return
        except OSError as exc:
            res.refused += [{"path": src, "reason": str(exc)}, {"path": dst, "reason": str(exc)}]
            return
        res.restored += [dst, src]
        before = first_before[src]
        if cur != last_after[dst].after_sha:
            self._warn(res.warnings, f"{dst} was changed since the move: moved back to {src} with those changes")
        elif cur != before.before_sha:
            if not _text_matches(before.before_text, before.before_sha):
                self._warn(res.warnings, f"{src}: the journal's before-text does not match its hash (damaged "
                                         "row); moved back as it was at the new name")
                return
            try:
                atomic_write(s_vp.abs, before.before_text or "", expected_sha=cur)
            except (WriteConflict, OSError) as exc:
                self._warn(res.warnings, f"{src}: moved back, but its own links not restored: {exc}")


_DAY_FOLDER = re.compile(r"\d{4}-\d{2}-\d{2}")


def _prune_day_folder(vault: Path, folder: Path) -> None:
    """Remove a day folder (``YYYY-MM-DD``, not the vault root) that a reverted create left empty: the run made it
    for its card. A folder with anything left in it stays (``rmdir`` refuses)."""
    if folder == vault or not _DAY_FOLDER.fullmatch(folder.name):
        return
    try:
        folder.rmdir()
    except OSError:
        pass


class NotJournaled(Exception):
    """Raised by :meth:`Run.write` when the file WAS written but the change journal could not record it (an
    SQLite error: a full disk, a file size limit). ``rel``: the vault path written; ``change``: the
    :class:`Change` that is not in the journal (revert will not list it); ``cause``: the ``sqlite3.Error``.
    The caller treats the write as done (the words are on disk) and reports the journal's failure as a warning."""

    def __init__(self, rel: str, change: "Change", cause: Exception) -> None:
        super().__init__(f"{rel} was saved, but the change journal could not record it ({cause}); "
                         f"it cannot be reverted from the journal")
        self.rel, self.change, self.cause = rel, change, cause


class Run:
    """One pipeline run: journaled, conflict-checked writes into the vault."""

    def __init__(self, journal: ChangeJournal, vault: Path, run_id: str, kind: str) -> None:
        self.journal = journal
        self.vault = vault
        self.run_id = run_id
        self.kind = kind
        self.written: list[str] = []

    def read(self, rel: str) -> tuple[str | None, str | None]:
        """``(text, sha)`` of a vault file, ``(None, None)`` when absent."""
        vp = resolve(self.vault, rel)
        try:
            data = vp.abs.read_bytes()
        except FileNotFoundError:
            return None, None
        return data.decode("utf-8", errors="replace").lstrip("\ufeff"), content_hash(data)

    def write(self, rel: str, text: str, *, step: str, sources: Iterable[str] = (),
              expected_sha: str | None | bool = False) -> Change:
        """Create or replace ``rel`` with ``text`` and journal it.

        ``expected_sha``: the hash the pipeline read (None = it must not exist; False = no check).
        Raises WriteConflict when the file changed meanwhile (nothing written), VaultPathError for bad paths, and
        :class:`NotJournaled` when the file was written but its journal row was not.
        """
        vp = resolve(self.vault, rel)
        before_text, before_sha = self.read(vp.rel)
        if expected_sha is not False and before_sha != expected_sha:
            raise WriteConflict(f"{vp.rel} changed since it was read")
        after_sha = atomic_write(vp.abs, text, expected_sha=before_sha)
        crash_point("journal.after_publish")  # published, not journaled yet: dream.resume settles it
        ch = Change(self.run_id, step, vp.rel, "create" if before_sha is None else "update", before_sha, after_sha,
                    list(sources), time.time(), before_text, text)
        self.written.append(vp.rel)
        try:
            self.journal.record(ch)
        except sqlite3.Error as exc:  # the bytes are published: say so, never "not saved"
            raise NotJournaled(vp.rel, ch, exc) from exc
        return ch

    def delete(self, rel: str, *, step: str, sources: Iterable[str] = (), expected_sha: str | bool = False) -> Change | None:
        """Delete ``rel`` (journaled, so revert recreates it). None when it did not exist."""
        vp = resolve(self.vault, rel)
        before_text, before_sha = self.read(vp.rel)
        if before_sha is None:
            return None
        if expected_sha is not False and before_sha != expected_sha:
            raise WriteConflict(f"{vp.rel} changed since it was read")
        remove_if_unchanged(vp.abs, before_sha)  # a save since the read above is kept, not deleted
        ch = Change(self.run_id, step, vp.rel, "delete", before_sha, None, list(sources), time.time(), before_text,
                    None)
        self.journal.record(ch)
        self.written.append(vp.rel)
        return ch

    def record_done(self, rel: str, action: str, before: tuple[str | None, str | None],
                    after: tuple[str | None, str | None], *, step: str, sources: Iterable[str] = ()) -> Change:
        """Journal a change another write path already made (conflict-checked there): ``before``/``after`` are
        ``(text, sha)`` pairs, ``(None, None)`` for an absent file; ``action`` create | update | delete. The
        caller guarantees ``before`` is exactly what that write replaced (its compare-and-swap hash), so
        :meth:`ChangeJournal.revert` can restore it."""
        ch = Change(self.run_id, step, rel, action, before[1], after[1], list(sources), time.time(), before[0],
                    after[0])
        self.journal.record(ch)
        self.written.append(rel)
        return ch

    def user_edited_since_app_wrote(self, rel: str) -> bool:
        """True when the app wrote ``rel`` before and its content differs from that write (the user edited it)."""
        last = self.journal.last_written_sha(rel)
        if last is None:
            return False
        _, sha = self.read(rel)
        return sha is not None and sha != last

    def finish(self, status: str = "ok", summary: dict | None = None, tally: dict | None = None) -> None:
        self.journal.finish_run(self.run_id, status, summary, tally)
