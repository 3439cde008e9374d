"""A dream run killed midway resumes where it stopped (ARCHITECTURE §8 "Crash consistency", issue 9).

Without this, a run killed after some units were written had checkpointed nothing (finish checkpoints at the
end), so the next run extracted the same inputs again and re-applied every unit: a second evidence line, a second
update entry in the app's notes, a new node's material appended to itself. Its journal run stayed ``running``.

The progress file ``<state dir>/dream/<kind>.progress.json`` (written atomically, fsynced) records, for the run
in flight: its journal run id, the run's parameters, the changed inputs it read (path → sha), the units extract
returned, and per unit either ``done`` (its outcome) or ``pending`` (the write about to be published: target,
base sha, the text). The next run of the same kind reads it:

- same parameters and the very same changed inputs → **resume**: the same journal run continues, the units are
  not extracted again (no LLM call), units already done are not done again, and a ``pending`` write is settled
  from the target's bytes: the written text is there → done (its journal row is added if the crash came between
  publishing and journaling); the base is there → the unit runs again; anything else (the user saved
  meanwhile) → the unit runs again against the user's bytes, through the usual compare-and-swap write. The
  result is byte for byte what an unkilled run writes (``bench/bench_chaos.py --only dream`` checks it);
- otherwise (the inputs changed since, or were checkpointed already) the record is **stale**: a journal run
  still ``running`` is closed as ``interrupted`` and the file removed; the run starts afresh.

finish closes the journal run, then checkpoints the inputs, then removes the file, so a crash between any two
of these ends, at the next run, in a resume that only repeats the idempotent finish, or in a stale record whose
journal run is already closed. A deleted state dir deletes the record too: the next run starts afresh (the
inputs were not checkpointed either, so nothing is skipped). Writes happen under the vault's writer lock, so
one process at a time owns the file.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict
from pathlib import Path

from ..crashpoints import crash_point
from ..vault.io import content_hash, fsync_path
from .models import Unit, UnitOutcome

log = logging.getLogger("reme.dream")
VERSION = 1
_BOM = b"\xef\xbb\xbf"


def progress_path(state_dir: Path, kind: str) -> Path:
    """Where the progress record of ``kind`` (``auto_dream``) lives."""
    return Path(state_dir) / "dream" / f"{kind}.progress.json"


def _write_json(path: Path, data: dict) -> None:
    """Atomic and durable: temp file fsynced, renamed over, folder fsynced (a crash leaves the old or the new)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    raw = json.dumps(data, ensure_ascii=False).encode("utf-8")
    with open(tmp, "wb") as f:
        f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_path(path.parent)


def _matches(text: str | None, sha: str | None) -> bool:
    """True when ``sha`` is the hash of ``text`` as the atomic write stores it (with or without a kept BOM)."""
    if text is None or sha is None:
        return False
    data = text.encode("utf-8")
    return sha in (content_hash(data), content_hash(_BOM + data))


class Progress:
    """The progress record of one run (module doc). ``units``: extract's units (None until extract returned);
    ``done``: ``{unit index: outcome dict}``; ``pending``: the write in flight or None."""

    def __init__(self, path: Path, data: dict) -> None:
        self.path = path
        self.data = data

    # -- reading ---------------------------------------------------------------------------------------------
    @classmethod
    def load(cls, state_dir: Path, kind: str) -> "Progress | None":
        """The record left by an earlier run, or None. An unreadable record is dropped (logged): it cannot be
        trusted, and the run then simply starts afresh (nothing was checkpointed, so nothing is skipped)."""
        path = progress_path(state_dir, kind)
        for tmp in path.parent.glob(f".{path.name}.*.tmp") if path.parent.is_dir() else ():
            tmp.unlink(missing_ok=True)  # a save killed before its rename (we hold the writer lock: none in flight)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("version") != VERSION or not data.get("run_id"):
                raise ValueError("not a progress record")
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("dream progress record %s unusable (%s): starting afresh", path, exc)
            path.unlink(missing_ok=True)
            return None
        return cls(path, data)

    @property
    def run_id(self) -> str:
        return self.data["run_id"]

    def matches(self, params: dict, inputs: dict[str, str]) -> bool:
        """True when this record is of a run with ``params`` over exactly ``inputs`` (path → sha)."""
        return self.data.get("params") == params and self.data.get("inputs") == inputs

    @property
    def units(self) -> list[Unit] | None:
        raw = self.data.get("units")
        return None if raw is None else [Unit(**u) for u in raw]

    @property
    def overflow(self) -> list[Unit]:
        return [Unit(**u) for u in self.data.get("overflow") or []]

    @property
    def dropped(self) -> list[str]:
        return list(self.data.get("dropped") or [])

    def done_outcome(self, i: int) -> UnitOutcome | None:
        """Unit ``i``'s outcome when it was done before the crash, else None."""
        d = (self.data.get("done") or {}).get(str(i))
        if d is None:
            return None
        d = dict(d)
        return UnitOutcome(unit=Unit(**d.pop("unit")), **d)

    # -- writing ---------------------------------------------------------------------------------------------
    @classmethod
    def begin(cls, state_dir: Path, kind: str, run_id: str, params: dict, inputs: dict[str, str]) -> "Progress":
        """A new record for journal run ``run_id`` (saved at once, before the first LLM call)."""
        p = cls(progress_path(state_dir, kind), {"version": VERSION, "run_id": run_id, "params": params,
                                                 "inputs": inputs, "units": None, "overflow": [], "dropped": [],
                                                 "done": {}, "pending": None})
        p.save()
        return p

    def save(self) -> None:
        _write_json(self.path, self.data)

    def set_units(self, units: list[Unit], overflow: list[Unit], dropped: list[str]) -> None:
        self.data.update(units=[asdict(u) for u in units], overflow=[asdict(u) for u in overflow],
                         dropped=list(dropped))
        self.save()
        crash_point("dream.after_extract")

    def set_pending(self, i: int, outcome: UnitOutcome, *, before_sha: str | None, before_text: str | None,
                    text: str, step: str) -> None:
        """Unit ``i`` is about to publish ``text`` over ``outcome.target`` (whose bytes have ``before_sha``, text
        ``before_text``); ``outcome``: what the unit reports once the write is done."""
        self.data["pending"] = {"unit": i, "outcome": outcome.to_dict(), "target": outcome.target,
                                "before_sha": before_sha, "before_text": before_text, "text": text,
                                "sources": list(outcome.sources), "step": step}
        self.save()
        crash_point(f"dream.before_write_{i}")

    def set_done(self, i: int, outcome: UnitOutcome) -> None:
        crash_point(f"dream.after_write_{i}")
        self.data.setdefault("done", {})[str(i)] = outcome.to_dict()
        self.data["pending"] = None
        self.save()

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    # -- settling what a crash interrupted -------------------------------------------------------------------
    def settle_pending(self, vault: Path, run) -> int | None:
        """Decide the write a crash interrupted (module doc). Returns the unit index it proves done (now in
        ``done``, saved), else None (the unit runs again). Adds the journal row a crash between publishing and
        journaling left out."""
        from ..memory.journal import Change
        from ..vault.paths import VaultPathError, resolve

        pend = self.data.get("pending")
        if not pend:
            return None
        self.data["pending"] = None
        try:
            _, sha = run.read(pend["target"])
            rel = resolve(vault, pend["target"]).rel
        except (VaultPathError, OSError, ValueError):
            return None
        if sha is None or sha == pend["before_sha"] or not _matches(pend["text"], sha):
            return None  # not published (or the user saved since): the unit runs again, against the bytes there
        journaled = any(ch.path == rel and ch.after_sha == sha for ch in run.journal.changes(run.run_id))
        if not journaled:
            import time

            run.journal.record(Change(run.run_id, pend["step"], rel,
                                      "create" if pend["before_sha"] is None else "update", pend["before_sha"], sha,
                                      pend["sources"], time.time(), pend["before_text"], pend["text"]))
        i = int(pend["unit"])
        self.data.setdefault("done", {})[str(i)] = pend["outcome"]
        self.save()
        return i
