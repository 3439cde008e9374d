"""A writer killed (SIGKILL) while it holds bytes set aside never costs the person a save: the next start's temp sweep
settles them by the hashes their name carries — dropped when they are the base or the app's own bytes, put back at
the note when they are a save and the name is free, else kept as a conflict copy — and a killed delete never leaves
the note hidden. Each writer is a real subprocess running the real write primitive; the kill comes at the instant
that matters (inside the wrapped primitive), the restart is a real engine open + full sync."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

WRITER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from reme_engine.vault import io
    note, when = Path(sys.argv[1]), sys.argv[2]
    base = io.content_hash(b"base\\n")

    def editor_save(data):
        tmp = note.with_name(note.name + ".editor~")
        tmp.write_bytes(data)
        os.replace(tmp, note)

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    real_exchange, real_check = io._rename_exchange, io._displaced_is

    def exchange(a, b):
        if when == "before_swap":
            die()
        if when == "swap_after_save":
            editor_save(b"the person's save\\n")
        real_exchange(a, b)
        die()  # killed right after the swap: the displaced bytes are at the temp's name

    def check(aside, expected):
        die()  # killed with the note renamed aside, before it was checked

    io._rename_exchange, io._displaced_is = exchange, check
    if when.startswith("delete"):
        io.remove_if_unchanged(note, base)
    else:
        io.atomic_write(note, "ours\\n", expected_sha=base)
""")


def killed_writer(note: Path, when: str) -> None:
    proc = subprocess.run([sys.executable, "-c", WRITER, str(note), when], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    past = time.time() - 3600  # the restart comes later than the sweep's one-minute guard for writes in flight
    for p in note.parent.iterdir():
        os.utime(p, (past, past))


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


@pytest.fixture
def vault_note(tmp_path):
    vault = tmp_path / "vault"
    (vault / "notes").mkdir(parents=True)
    note = vault / "notes" / "n.md"
    return vault, note


def restart(open_engine, vault: Path):
    e = open_engine(vault)
    e.index()  # the first full sync sweeps what crashed writes left
    return e


def test_a_save_displaced_by_a_killed_write_survives_the_restart(open_engine, vault_note):
    vault, note = vault_note
    note.write_bytes(b"base\n")
    killed_writer(note, "swap_after_save")
    restart(open_engine, vault)
    got = files(note.parent)
    assert b"the person's save\n" in got.values(), got  # before: the sweep removed it with the temp file
    assert got["n.md"] == b"ours\n"
    copy = next(n for n, b in got.items() if b == b"the person's save\n")
    assert copy.startswith("n (conflict ") and not [n for n in got if n.startswith(".")]


def test_a_killed_write_whose_swap_displaced_only_the_base_leaves_nothing_behind(open_engine, vault_note):
    vault, note = vault_note
    note.write_bytes(b"base\n")
    killed_writer(note, "after_swap")
    restart(open_engine, vault)
    assert files(note.parent) == {"n.md": b"ours\n"}  # no conflict copy of the old version, no hidden file


def test_a_write_killed_before_its_swap_leaves_the_note_as_it_was(open_engine, vault_note):
    vault, note = vault_note
    note.write_bytes(b"base\n")
    killed_writer(note, "before_swap")
    restart(open_engine, vault)
    assert files(note.parent) == {"n.md": b"base\n"}


def test_a_killed_delete_of_a_note_saved_meanwhile_puts_the_save_back(open_engine, vault_note):
    vault, note = vault_note
    note.write_bytes(b"the person's newer save\n")  # the delete was asked with the hash of b"base\n"
    killed_writer(note, "delete_saved")
    restart(open_engine, vault)
    assert files(note.parent) == {"n.md": b"the person's newer save\n"}  # before: hidden as .n.md.….reme-deleting


def test_a_killed_delete_of_an_unchanged_note_is_completed(open_engine, vault_note):
    vault, note = vault_note
    note.write_bytes(b"base\n")
    killed_writer(note, "delete_unchanged")
    restart(open_engine, vault)
    assert files(note.parent) == {}  # the delete the person asked for, and no hidden leftover
