"""Editing a note in ``$VISUAL``/``$EDITOR``: the app hands the terminal over and takes it back."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path


def editor_command() -> str:
    """The user's editor: ``$VISUAL``, else ``$EDITOR``, else ``vi``."""
    return os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"


def run_editor(app, vault: Path, path: str) -> tuple[bool, str | None]:
    """Open ``path`` (vault-relative) in the user's editor, the app suspended meanwhile (headless apps — tests —
    run it without a terminal). Returns ``(ran, problem)``: ``ran`` False when the editor could not start at all
    (nothing changed), ``problem`` a one-line message (including a non-zero exit status) or None."""
    from textual.app import SuspendNotSupported

    editor = editor_command()
    try:
        cmd = [*shlex.split(editor), str(Path(vault) / path)]
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
