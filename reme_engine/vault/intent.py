"""Intent records: a multi-file change (a move and its link rewrites) that a crash must never leave half done.

Before the first file changes, the intent (what moves where, which notes link to it, the moved note's aliases)
is written atomically to ``<state dir>/intents/<id>.json`` and locked with ``flock`` for as long as the change
runs. A crash (even ``kill -9``) drops the lock with the process; the file stays. The next engine to open the
vault finds an unlocked intent and finishes it (:meth:`reme_engine.engine.Engine.recover_interrupted`): the
change is idempotent, so notes already rewritten are left as they are and the rest are rewritten. An intent is
deleted only when its change is complete. A locked intent belongs to a change running in another process and
is left alone.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .io import atomic_write, fsync_path

#: Folder of the intent records inside the state dir.
INTENTS_DIR = "intents"
#: Suffix of a record being written (never listed as interrupted; one a crash left there is removed after an hour).
PART_SUFFIX = ".part"


@dataclass
class MoveIntent:
    """A move of ``src`` to ``dst`` (vault-relative) whose inbound links from ``sources`` must follow it.

    Use :meth:`begin` (new move) or :meth:`interrupted` (left by a crash) and as a context manager, which holds the
    record's lock; :meth:`done` deletes the record when the move is complete.
    """

    src: str
    dst: str
    sources: list[str]
    aliases: list[str] = field(default_factory=list)
    path: Path | None = None
    _fd: int | None = None

    @classmethod
    def begin(cls, state_dir: Path, src: str, dst: str, sources: list[str], aliases: list[str]) -> "MoveIntent":
        """Write a new intent record (atomically, fsynced) and lock it. Raises OSError when it cannot be written.

        The record is written and locked under a ``.part`` name that :meth:`interrupted` never lists, and only
        then renamed to its ``.json`` name (the flock follows the file): another process opening the vault at that
        instant can never take a record whose move is just starting for one a crash left behind."""
        folder = Path(state_dir) / INTENTS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"move-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}.json"
        part = path.with_suffix(PART_SUFFIX)
        payload = {"kind": "move", "src": src, "dst": dst, "sources": list(sources), "aliases": list(aliases),
                   "pid": os.getpid(), "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        atomic_write(part, json.dumps(payload, ensure_ascii=False, indent=1) + "\n", expected_sha=None)
        intent = cls(src, dst, list(sources), list(aliases), part)
        if not intent._lock():  # nobody else knows the name yet; a failure here is a file system without flock
            intent._fd = None
        try:
            os.rename(part, path)
        except OSError:
            intent.release()
            part.unlink(missing_ok=True)
            raise
        intent.path = path
        fsync_path(folder)
        return intent

    @classmethod
    def interrupted(cls, state_dir: Path) -> list["MoveIntent"]:
        """Intent records no running process holds (left by a crash), oldest first, each already locked by the
        caller. Unreadable records are renamed ``*.bad`` so they never block a start."""
        folder = Path(state_dir) / INTENTS_DIR
        try:
            names = sorted(p for p in folder.iterdir() if p.suffix == ".json")
        except FileNotFoundError:
            return []
        for p in folder.iterdir():  # a crash between writing a record and naming it: nothing had moved yet
            try:
                if p.suffix == PART_SUFFIX and p.stat().st_mtime < time.time() - 3600:
                    p.unlink()
            except OSError:
                pass
        found = []
        for p in names:
            try:
                data = json.loads(p.read_text(encoding="utf-8"))
                intent = cls(str(data["src"]), str(data["dst"]), [str(x) for x in data.get("sources", [])],
                             [str(x) for x in data.get("aliases", [])], p)
            except (OSError, ValueError, KeyError, TypeError):
                try:
                    p.rename(p.with_suffix(".bad"))
                except OSError:
                    pass
                continue
            if intent._lock():
                found.append(intent)
        return found

    def _lock(self) -> bool:
        from ..lock import try_flock

        self._fd = try_flock(self.path)
        return self._fd is not None

    def done(self) -> None:
        """The change is complete: delete the record."""
        if self.path is not None:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def release(self) -> None:
        """Drop the lock (the record stays unless :meth:`done` was called)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "MoveIntent":
        return self

    def __exit__(self, *exc) -> None:
        self.release()
