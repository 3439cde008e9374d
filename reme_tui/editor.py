"""Editing a note in ``$VISUAL``/``$EDITOR``: the app hands the terminal over and takes it back.

The editor never gets the note itself: it edits a copy outside the vault (same file name, so it highlights
Markdown), and the result goes back through the engine's compare-and-swap write against the hash taken before
the editor started. Lines another program (a sync client, Obsidian, the app's own pipelines) saved to the note
meanwhile are never overwritten: the editor's text then becomes a conflict copy next to the note.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from reme_engine.engine import EngineError


def editor_command() -> str:
    """The user's editor: ``$VISUAL``, else ``$EDITOR``, else ``vi``."""
    return os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"


@dataclass
class EditSession:
    """One ``e``: ``path`` (vault-relative) edited through ``copy`` (a temp file outside the vault); ``original``:
    the note's text when the editor started ("" for a note that does not exist yet, ``sha`` None then); ``sha``:
    the engine's content hash of the note then (``ReadResult.sha``)."""

    path: str
    copy: Path
    original: str
    sha: str | None

    @property
    def exists(self) -> bool:
        return self.sha is not None


@dataclass
class EditOutcome:
    """What an edit did: ``written`` (the note now holds the editor's text), ``conflict`` (vault-relative path of
    the conflict copy holding the editor's text, the note left as the other program saved it), ``unchanged``
    (the editor changed nothing: nothing written); ``error``: a one-line message when nothing could be saved."""

    path: str
    written: bool = False
    unchanged: bool = False
    conflict: str | None = None
    reason: str | None = None
    error: str | None = None


def prepare_edit(engine, path: str) -> EditSession:
    """(Worker thread.) Read ``path`` whole through the façade, remember its hash and put the text in a temp copy.
    A missing note gives an empty copy (the note is created on save). EngineError for a folder or unreadable
    file."""
    text, sha = "", None
    st = engine.stat(path)
    if st.read_only:  # the save would be refused: say so now, not after the user typed
        raise EngineError(f"{st.path} is read-only (no write permission): not opened for editing; "
                          "give it write permission to edit it")
    if st.exists:
        parts: list[str] = []
        start, total = 1, None
        while total is None or start <= total:
            r = engine.read(path, start, None, max_chars=None)
            if sha is None:
                sha = r.sha
            elif r.sha != sha:  # changed between two pages of the read: start over
                return prepare_edit(engine, path)
            parts.append(r.text)
            total, start = r.total_lines, r.end_line + 1
            if not r.truncated:
                break
        text = "".join(parts)
    folder = Path(tempfile.mkdtemp(prefix="reme-edit-"))
    copy = folder / (path.rsplit("/", 1)[-1] or "note.md")
    with open(copy, "w", encoding="utf-8", newline="") as fh:  # newline="": line ends as in the note
        fh.write(text)
    return EditSession(path, copy, text, sha)


def conflict_path(path: str, when: datetime) -> str:
    """``folder/name (conflict 2026-12-01 154500).md`` for ``folder/name.md`` (no colon: valid on every OS)."""
    folder, _, name = path.rpartition("/")
    stem, dot, suffix = name.rpartition(".")
    if not dot or not stem:
        stem, suffix = name, ""
    out = f"{stem} (conflict {when:%Y-%m-%d %H%M%S})" + (f".{suffix}" if suffix else "")
    return f"{folder}/{out}" if folder else out


def finish_edit(engine, session: EditSession, now: datetime | None = None) -> EditOutcome:
    """(Worker thread.) Write the editor's text back: nothing when unchanged; else the engine's compare-and-swap
    write with ``expected_sha`` = the hash before the editor started (create-only for a new note). When that is
    refused (the note changed meanwhile), the text goes to a conflict copy (create-only write) and the note is
    left alone. The temp copy is removed once its text is saved somewhere."""
    try:
        with open(session.copy, encoding="utf-8", newline="") as fh:
            new = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        return EditOutcome(session.path, error=f"cannot read the edited copy {session.copy}: {exc}")
    if new == session.original:
        _drop(session)
        return EditOutcome(session.path, unchanged=True)
    try:
        if session.exists:
            engine.write(session.path, new, expected_sha=session.sha)
        else:
            engine.write(session.path, new, overwrite=False)
    except Exception as exc:  # refused (changed meanwhile) or failed: the editor's text must still be kept
        reason = str(exc)
        when = now or datetime.now()
        for attempt in range(5):
            target = conflict_path(session.path, when)
            if attempt:
                target = target.replace(" (conflict ", f" (conflict {attempt + 1} ", 1)
            try:
                engine.write(target, new, overwrite=False)
            except Exception as exc2:
                if "already exists" in str(exc2):
                    continue
                return EditOutcome(session.path, reason=reason,
                                   error=f"not saved ({reason}; conflict copy failed: {exc2}); your text is in "
                                         f"{session.copy}")
            _drop(session)
            return EditOutcome(session.path, conflict=target, reason=reason)
        return EditOutcome(session.path, reason=reason, error=f"not saved ({reason}); your text is in {session.copy}")
    _drop(session)
    return EditOutcome(session.path, written=True)


def _drop(session: EditSession) -> None:
    shutil.rmtree(session.copy.parent, ignore_errors=True)


def run_editor(app, file: Path) -> tuple[bool, str | None]:
    """Open ``file`` (an absolute path: the temp copy) in the user's editor, the app suspended meanwhile
    (headless apps — tests — run it without a terminal). Returns ``(ran, problem)``: ``ran`` False when the
    editor could not start at all (nothing changed), ``problem`` a one-line message (including a non-zero exit
    status) or None."""
    from textual.app import SuspendNotSupported

    editor = editor_command()
    try:
        cmd = [*shlex.split(editor), str(file)]
    except ValueError:
        return False, f"cannot parse $EDITOR {editor!r}"
    try:
        if app.is_headless:  # tests: no terminal to hand over
            rc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True).returncode
        else:
            with app.suspend():
                rc = subprocess.run(cmd).returncode
    except SuspendNotSupported:
        return False, "This terminal cannot hand over to an editor"
    except OSError as exc:
        return False, f"cannot start {editor!r}: {exc}"
    return True, (f"{editor} exited with status {rc}" if rc else None)


def finish_edit_nothing(session: EditSession) -> None:
    """The editor never ran: remove the temp copy, write nothing."""
    _drop(session)
