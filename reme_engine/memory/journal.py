"""The change journal: every file an LLM pipeline creates, changes or deletes, per run, revertible.

Stored in ``<state dir>/journal.sqlite`` (derived state, outside the vault). A run has an id, a kind
(``auto_dream``, ``auto_memory``, ``auto_resource``, ``proactive_refresh``…), parameters, start/end times, a
summary and the LLM tally. Each change records step, path, action (create/update/delete), before/after content
hashes and texts, and the sources (vault paths) it was derived from.

Writes go through :meth:`Run.write`: it reads the current file, refuses to clobber a change the user made after
the pipeline read it (``expected_sha``), writes atomically and journals the change. :meth:`ChangeJournal.revert`
restores a run's before-states, refusing files changed again since (their current hash is not the run's
after-hash).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..vault.io import WriteConflict, atomic_write, content_hash, file_hash
from ..vault.paths import resolve

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, kind TEXT NOT NULL, params TEXT NOT NULL, started_at REAL NOT NULL,
    finished_at REAL, status TEXT NOT NULL, summary TEXT, tally TEXT, reverted_at REAL
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
    """``restored``: paths put back to their before-state; ``refused``: ``{path, reason}`` left untouched."""

    run_id: str
    restored: list[str] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


class ChangeJournal:
    """Thread-safe journal over one SQLite file."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / "journal.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

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

    def runs(self, limit: int = 20, kind: str | None = None) -> list[dict]:
        """Recent runs, newest first, each with its change count."""
        q = ("SELECT r.run_id, r.kind, r.params, r.started_at, r.finished_at, r.status, r.summary, r.tally,"
             " r.reverted_at, (SELECT count(*) FROM changes c WHERE c.run_id = r.run_id) FROM runs r")
        args: list[Any] = []
        if kind:
            q += " WHERE r.kind = ?"
            args.append(kind)
        q += " ORDER BY r.started_at DESC, r.run_id DESC LIMIT ?"
        args.append(limit)
        out = []
        for r in self._exec(q, args).fetchall():
            out.append({"run_id": r[0], "kind": r[1], "params": json.loads(r[2]), "started_at": r[3],
                        "finished_at": r[4], "status": r[5], "summary": json.loads(r[6]) if r[6] else None,
                        "tally": json.loads(r[7]) if r[7] else None, "reverted_at": r[8], "changes": r[9]})
        return out

    def changes(self, run_id: str, with_text: bool = False) -> list[Change]:
        rows = self._exec(
            "SELECT run_id, step, path, action, before_sha, after_sha, sources, at, before_text, after_text"
            " FROM changes WHERE run_id=? ORDER BY id", (run_id,)).fetchall()
        return [Change(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), r[7],
                       r[8] if with_text else None, r[9] if with_text else None) for r in rows]

    def last_written_sha(self, path: str) -> str | None:
        """The after-hash of the app's latest journaled write of ``path`` (None if the app never wrote it)."""
        r = self._exec("SELECT after_sha FROM changes WHERE path=? ORDER BY id DESC LIMIT 1", (path,)).fetchone()
        return r[0] if r else None

    def revert(self, vault: Path, run_id: str) -> RevertResult:
        """Restore the before-state of every file the run changed (newest change first).

        A file whose current hash is not the run's last after-hash was changed again since: it is refused with a
        reason and left as it is. Raises KeyError for an unknown run.
        """
        if not self._exec("SELECT 1 FROM runs WHERE run_id=?", (run_id,)).fetchone():
            raise KeyError(f"unknown run {run_id!r}")
        res = RevertResult(run_id)
        changes = self.changes(run_id, with_text=True)
        first_before: dict[str, Change] = {}
        last_after: dict[str, Change] = {}
        for ch in changes:
            first_before.setdefault(ch.path, ch)
            last_after[ch.path] = ch
        for path in reversed(list(last_after)):
            vp = resolve(vault, path)
            current = file_hash(vp.abs)
            if current != last_after[path].after_sha:
                res.refused.append({"path": path, "reason": "changed since the run wrote it; left as it is"})
                continue
            before = first_before[path]
            try:
                if before.before_sha is None:
                    vp.abs.unlink(missing_ok=True)
                else:
                    atomic_write(vp.abs, before.before_text or "", expected_sha=current)
            except (WriteConflict, OSError) as exc:
                res.refused.append({"path": path, "reason": str(exc)})
                continue
            res.restored.append(path)
        self._exec("UPDATE runs SET reverted_at=? WHERE run_id=?", (time.time(), run_id))
        return res


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
        Raises WriteConflict when the file changed meanwhile (nothing written) and VaultPathError for bad paths.
        """
        vp = resolve(self.vault, rel)
        before_text, before_sha = self.read(vp.rel)
        if expected_sha is not False and before_sha != expected_sha:
            raise WriteConflict(f"{vp.rel} changed since it was read")
        after_sha = atomic_write(vp.abs, text, expected_sha=before_sha)
        ch = Change(self.run_id, step, vp.rel, "create" if before_sha is None else "update", before_sha, after_sha,
                    list(sources), time.time(), before_text, text)
        self.journal.record(ch)
        self.written.append(vp.rel)
        return ch

    def delete(self, rel: str, *, step: str, sources: Iterable[str] = (), expected_sha: str | bool = False) -> Change | None:
        """Delete ``rel`` (journaled, so revert recreates it). None when it did not exist."""
        vp = resolve(self.vault, rel)
        before_text, before_sha = self.read(vp.rel)
        if before_sha is None:
            return None
        if expected_sha is not False and before_sha != expected_sha:
            raise WriteConflict(f"{vp.rel} changed since it was read")
        vp.abs.unlink()
        ch = Change(self.run_id, step, vp.rel, "delete", before_sha, None, list(sources), time.time(), before_text,
                    None)
        self.journal.record(ch)
        self.written.append(vp.rel)
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
