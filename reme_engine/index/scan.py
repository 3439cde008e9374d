"""Scan step of a sync: walk the vault, list indexable files and every file name (for link resolution); the
date rule of vault paths and the cross-process index lock.

A mixin of :class:`reme_engine.index.indexer.Indexer` (``self.vault``, ``self._text_roots`` and
``self._dialog_root`` are set there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import os
import re
import stat as stat_mod
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from ..vault.paths import is_valid_name

if TYPE_CHECKING:
    from .indexer import IndexReport

MARKDOWN_EXTS = (".md", ".markdown")
TEXT_EXTS = (".txt", ".json", ".jsonl", ".csv", ".yaml", ".yml", ".html", ".htm")
#: The app's internal state files (the proactive truth source, reme_engine.proactive.model.TRUTH_NAME): never
#: indexed, so never a search hit; a day's ``interests.yaml`` (its topics, readable) stays indexed.
APP_STATE_NAMES = frozenset({"_proactive.yaml"})
#: Files inside the layers' folders with these extensions are indexed; elsewhere only Markdown is.
_DATE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_YEAR_RE = re.compile(r"\d{4}$")
_TWO_DIGITS_RE = re.compile(r"(\d{2})(?!\d)")


@dataclass
class ScanEntry:
    rel: str
    abs: Path
    mtime: float
    size: int



class _index_file_lock:
    """Cross-process exclusion for index syncs (two ``--refresh`` on one vault): ``flock`` on
    ``<state dir>/index.lock``, blocking. Vector passes and searches do not take it."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / "index.lock"
        self.fd: int | None = None
        self.depth = 0  # re-entry by the thread already holding the Indexer's RLock

    def __enter__(self):
        self.depth += 1
        if self.depth > 1:
            return self
        try:
            import fcntl

            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except (ImportError, OSError):
            self.fd = None  # no flock here: single-process use only
        return self

    def try_enter(self) -> bool:
        """:meth:`__enter__` without waiting: False (and not entered) when another process holds the lock."""
        if self.depth > 0:
            self.depth += 1
            return True
        from ..lock import try_flock

        if not os.access(self.path.parent, os.W_OK):
            self.depth += 1  # no lock file possible here: single-process use only
            return True
        fd = try_flock(self.path, create=True)
        if fd is None:
            return False
        self.fd, self.depth = fd, 1
        return True

    def __exit__(self, *exc) -> None:
        self.depth -= 1
        if self.depth == 0 and self.fd is not None:
            os.close(self.fd)  # releases the flock
            self.fd = None


def path_date(rel: str) -> str | None:
    """The first ``YYYY-MM-DD`` path component (folder or file stem) of ``rel``, if it is a real date; else the
    date of nested day folders as Obsidian's Daily notes formats make them (``YYYY/MM/DD``,
    ``YYYY/MM-MMM/YYYY-MM-DD-ddd``: a year folder, a month folder starting with its two digits, then a name
    starting with the day's two digits or with the whole date)."""
    from datetime import date

    parts = [p.rsplit(".", 1)[0] if "." in p else p for p in rel.split("/")]
    for stem in parts:
        m = _DATE_RE.match(stem)
        if m:
            try:
                return date(int(m[1]), int(m[2]), int(m[3])).isoformat()
            except ValueError:
                continue
    for i in range(len(parts) - 2):
        y, mo = _YEAR_RE.match(parts[i]), _TWO_DIGITS_RE.match(parts[i + 1])
        if not (y and mo):
            continue
        d = re.match(rf"(?:{y[0]}-{mo[1]}-)?(\d{{2}})(?!\d)", parts[i + 2])
        if d:
            try:
                return date(int(y[0]), int(mo[1]), int(d[1])).isoformat()
            except ValueError:
                continue
    return None



class ScanStep:
    """Which files a sync looks at."""

    def is_indexable(self, rel: str) -> bool:
        low = rel.lower()
        if low.rsplit("/", 1)[-1] in APP_STATE_NAMES:
            return False
        if low.endswith(MARKDOWN_EXTS):
            return True
        if low.endswith(".jsonl") and rel.startswith(self._dialog_root):
            return True
        return low.endswith(TEXT_EXTS) and rel.startswith(self._text_roots)

    def scan(self, report: IndexReport | None = None) -> tuple[dict[str, ScanEntry], list[str]]:
        """Walk the vault. Returns ``({rel: entry} of indexable files, all file paths for link resolution)``.

        Hidden files/folders are ignored. Directory symlinks are not followed (no loops); a file symlink is
        used only when its target is inside the vault, and a note is indexed once: a symlink to a file this scan
        indexes itself is skipped ("symlink to X: indexed there"; its name is no file for link resolution
        either), a symlink to anything else inside the vault (a hidden file, a file outside the indexed kinds) is
        indexed under the link. Skips are appended to ``report.skipped``.
        """
        root = self.vault.resolve()
        entries: dict[str, ScanEntry] = {}
        all_paths: list[str] = []
        skips = report.skipped if report is not None else []

        def onerror(err: OSError) -> None:
            name = str(getattr(err, "filename", "") or "?")
            try:
                name = os.path.relpath(name, root)
            except ValueError:
                pass
            skips.append({"path": name.encode("utf-8", "backslashreplace").decode("utf-8"),
                          "reason": f"unreadable folder: {err.strerror}"})

        for dirpath, dirnames, filenames in os.walk(root, onerror=onerror, followlinks=False):
            rel_dir = os.path.relpath(dirpath, root)
            rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for d in dirnames:  # listed by os.walk but never entered: say so (Obsidian users link folders in)
                if os.path.islink(os.path.join(dirpath, d)):
                    skips.append({"path": unicodedata.normalize("NFC", f"{rel_dir}/{d}" if rel_dir else d),
                                  "reason": "folder symlink: not followed, its notes are not indexed"})
            for fn in filenames:
                if fn.startswith(".") or fn.endswith("~"):
                    continue
                rel = unicodedata.normalize("NFC", f"{rel_dir}/{fn}" if rel_dir else fn)
                abs_p = Path(dirpath) / fn
                if not is_valid_name(rel):
                    shown = rel.encode("utf-8", "backslashreplace").decode("ascii", "replace")
                    skips.append({"path": shown, "reason": "file name is not valid UTF-8 (or has a line break)"})
                    continue
                try:
                    st = os.lstat(abs_p)
                    if stat_mod.S_ISLNK(st.st_mode):
                        real = abs_p.resolve()
                        if not real.is_relative_to(root):
                            if self.is_indexable(rel):
                                skips.append({"path": rel, "reason": "symlink leaves the vault"})
                            continue
                        if not os.path.lexists(real):  # dangling: its target does not exist
                            if self.is_indexable(rel):
                                skips.append({"path": rel, "reason": "symlink to a missing file"})
                            continue
                        twin = self._indexed_target(real, root)
                        if twin is not None and twin != rel:
                            if self.is_indexable(rel):
                                skips.append({"path": rel, "reason": f"symlink to {twin}: indexed there"})
                            continue
                        st = os.stat(abs_p)
                    if not stat_mod.S_ISREG(st.st_mode):
                        continue
                except (OSError, RuntimeError) as exc:  # broken link, symlink loop, vanished
                    if self.is_indexable(rel):
                        skips.append({"path": rel, "reason": f"unreadable: {getattr(exc, 'strerror', None) or exc}"})
                    continue
                all_paths.append(rel)
                if self.is_indexable(rel):
                    if rel in entries:  # NFC/NFD twins: both names normalise to one path
                        # The NFC-spelled file is the one indexed (a path given in NFC names it); the other is
                        # listed under its own spelling, so health_check shows it beside the indexed one.
                        twin = entries[rel]
                        keep, other = (ScanEntry(rel, abs_p, st.st_mtime, st.st_size), twin) \
                            if fn == unicodedata.normalize("NFC", fn) else (twin, None)
                        other_name = (twin.abs if other is not None else abs_p).relative_to(root).as_posix()
                        entries[rel] = keep
                        skips.append({"path": other_name,
                                      "reason": f"same name as {rel} in another Unicode form (NFC/NFD): not "
                                                "indexed; rename one of the two"})
                        continue
                    entries[rel] = ScanEntry(rel, abs_p, st.st_mtime, st.st_size)
        return entries, all_paths

    def _indexed_target(self, real: Path, root: Path) -> str | None:
        """The vault path of a symlink's (fully resolved) target when a scan indexes that file under its own
        name (visible, an indexable kind), else None: then the link is just a second name for it."""
        if not real.is_relative_to(root):
            return None
        rel = unicodedata.normalize("NFC", real.relative_to(root).as_posix())
        if any(part.startswith(".") for part in rel.split("/")) or rel.endswith("~") or not self.is_indexable(rel):
            return None
        return rel
