"""Bytes of the person's that a checked write, a checked delete or a move displaces are never simply unlinked: when
they cannot go back to the note (another save holds it now) they are kept beside it as a conflict copy
(``<stem> (conflict <time>)<suffix>``), never over an earlier copy, and the conflict names the copy.

The races are made to happen at the exact instant that matters by wrapping the primitive the real code calls (the
real rename exchange, the real displaced-bytes check, the real ``link``) so that another program's save lands
right there; everything else is the real code on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reme_engine.vault import io


def editor_save(path: Path, data: bytes) -> None:
    """An editor's atomic save: a temp file in the folder renamed over the note (a new inode at the name)."""
    tmp = path.with_name(f"{path.name}.editor~")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def test_a_displaced_save_is_kept_when_an_append_then_holds_the_note(tmp_path, monkeypatch):
    """The tester's case: our exchange displaced a save made after our read, and an ``echo >> note`` then appended
    to OUR bytes at the note. Undoing the swap would bury the append; dropping the displaced file lost the save."""
    note = tmp_path / "n.md"
    note.write_bytes(b"base\n")
    base = io.content_hash(b"base\n")
    real = io._rename_exchange
    calls = []

    def racing(a, b):
        calls.append((a, b))
        if len(calls) == 1:
            editor_save(note, b"the person's save after our read\n")
            real(a, b)
            with open(note, "ab") as fh:  # echo >> note, landing on our bytes an instant after the swap
                fh.write(b"echo line\n")
            return
        real(a, b)

    monkeypatch.setattr(io, "_rename_exchange", racing)
    with pytest.raises(io.WriteConflict) as ei:
        io.atomic_write(note, "ours\n", expected_sha=base)
    files = folder_bytes(tmp_path)
    assert b"the person's save after our read\n" in files.values(), files
    kept = getattr(ei.value, "kept", None)
    assert kept is not None and kept.read_bytes() == b"the person's save after our read\n"
    assert kept.name.startswith("n (conflict ") and kept.name.endswith(").md") and kept.name in str(ei.value)
    assert note.read_bytes() == b"ours\necho line\n"  # the newest save (the append) stays at the note
    assert sorted(files) == sorted(["n.md", kept.name])  # no hidden temp left behind


def test_a_save_that_replaced_ours_during_the_undo_is_not_dropped(tmp_path, monkeypatch):
    """Between the undo's hash of the note and its swap back, an editor saved over our bytes: both of the person's
    saves survive (the newer at the note, the other as a conflict copy)."""
    note = tmp_path / "n.md"
    note.write_bytes(b"base\n")
    base = io.content_hash(b"base\n")
    real = io._rename_exchange
    calls = []

    def racing(a, b):
        calls.append(1)
        if len(calls) == 1:
            editor_save(note, b"first save\n")
        elif len(calls) == 2:
            editor_save(note, b"second save\n")  # replaces our bytes after the undo hashed them
        real(a, b)

    monkeypatch.setattr(io, "_rename_exchange", racing)
    with pytest.raises(io.WriteConflict):
        io.atomic_write(note, "ours\n", expected_sha=base)
    files = folder_bytes(tmp_path)
    assert b"first save\n" in files.values() and b"second save\n" in files.values(), files
    assert note.read_bytes() == b"second save\n"
    assert b"ours\n" not in files.values() and len(files) == 2


def test_an_append_into_the_displaced_file_after_the_check_is_kept(tmp_path, monkeypatch):
    """A successful checked write: an appender that opened the note before the swap writes into the displaced file
    after it was checked. Those bytes are a save; they are kept as a conflict copy, not unlinked with the temp."""
    note = tmp_path / "n.md"
    note.write_bytes(b"base\n")
    base = io.content_hash(b"base\n")
    real = io._displaced_is

    def late_append(tmp, expected):
        ok = real(tmp, expected)
        with open(tmp, "ab") as fh:  # the appender's write lands now, in the file it opened before the swap
            fh.write(b"late append\n")
        return ok

    monkeypatch.setattr(io, "_displaced_is", late_append)
    io.atomic_write(note, "ours\n", expected_sha=base)
    assert note.read_bytes() == b"ours\n"
    files = folder_bytes(tmp_path)
    assert b"base\nlate append\n" in files.values(), files
    assert len(files) == 2


def test_a_checked_delete_never_replaces_an_earlier_conflict_copy(tmp_path, monkeypatch):
    """A checked delete finds the person's newer save, and a new file took the name meanwhile: the save is kept as
    a conflict copy — beside (never over) an earlier copy made in the same second."""
    monkeypatch.setattr(io.time, "strftime", lambda fmt, *a: "2026-12-02 141500")
    note = tmp_path / "n.md"
    note.write_bytes(b"the person's newer save\n")
    older = tmp_path / "n (conflict 2026-12-02 141500).md"
    older.write_bytes(b"an earlier conflict copy\n")
    real = io._displaced_is

    def name_taken(aside, expected):
        note.write_bytes(b"a sync tool's new file\n")  # another program creates the name while it is aside
        return real(aside, expected)

    monkeypatch.setattr(io, "_displaced_is", name_taken)
    with pytest.raises(io.WriteConflict) as ei:
        io.remove_if_unchanged(note, io.content_hash(b"base\n"))
    files = folder_bytes(tmp_path)
    assert sorted(files.values()) == sorted([b"the person's newer save\n", b"an earlier conflict copy\n",
                                             b"a sync tool's new file\n"]), files
    assert older.read_bytes() == b"an earlier conflict copy\n"
    assert getattr(ei.value, "kept", None) is not None and "2026-12-02 141500 2" in ei.value.kept.name


def test_a_delete_keeps_an_append_that_lands_after_the_check(tmp_path, monkeypatch):
    note = tmp_path / "n.md"
    note.write_bytes(b"base\n")
    real = io._displaced_is

    def late_append(aside, expected):
        ok = real(aside, expected)
        with open(aside, "ab") as fh:
            fh.write(b"appended while deleting\n")
        return ok

    monkeypatch.setattr(io, "_displaced_is", late_append)
    io.remove_if_unchanged(note, io.content_hash(b"base\n"))
    assert not note.exists()
    assert list(folder_bytes(tmp_path).values()) == [b"base\nappended while deleting\n"]


def test_a_move_never_unlinks_a_save_made_onto_the_old_name(open_engine, monkeypatch):
    """On a file system without renameat2 a move is link + unlink; an editor's atomic save onto the old name in
    between was unlinked with it. Now the old name is removed only while it is still the moved file."""
    e = open_engine()
    vault = e.settings.vault
    (vault / "a.md").write_text("moved bytes\n", encoding="utf-8")
    (vault / "b.md").write_text("see [[a]]\n", encoding="utf-8")
    e.index()
    monkeypatch.setattr(io, "_rename_noreplace_at", None)
    real_link = os.link

    def link_then_save(src, dst, *a, **kw):
        real_link(src, dst, *a, **kw)
        if Path(src).name == "a.md":
            editor_save(Path(src), b"saved onto the old name mid-move\n")

    monkeypatch.setattr(os, "link", link_then_save)
    e.move("a.md", "c.md")
    assert (vault / "c.md").read_bytes() == b"moved bytes\n"
    assert (vault / "a.md").read_bytes() == b"saved onto the old name mid-move\n"
    assert not [p for p in os.listdir(vault) if p.startswith(".") and "reme" in p]


def wait_for(pred, timeout: float = 15.0) -> bool:
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False


def test_late_writes_into_the_replaced_file_by_a_program_holding_it_open_are_kept(tmp_path, monkeypatch):
    """Streamed output (``cmd > note.md`` with pauses, ``tee -a``) holds the note's old file open; after the app's
    checked write replaced it, the program's next bytes go into a file no name reaches. They are kept."""
    import time

    monkeypatch.setattr(io, "DISPLACED_WATCH_S", 0.3)
    note = tmp_path / "n.md"
    note.write_bytes(b"base\n")
    past = time.time() - 5
    os.utime(note, (past, past))  # quiet: the write's check does not wait for it
    base = io.content_hash(b"base\n")
    with open(note, "ab", buffering=0) as streaming:  # opened before the app's write, as a running program is
        io.atomic_write(note, "ours\n", expected_sha=base)
        assert folder_bytes(tmp_path) == {"n.md": b"ours\n"}
        streaming.write(b"more output, 50 ms later\n")
    assert wait_for(lambda: b"base\nmore output, 50 ms later\n" in folder_bytes(tmp_path).values()), \
        folder_bytes(tmp_path)
    assert note.read_bytes() == b"ours\n"


def test_late_writes_into_a_deleted_note_bring_it_back(tmp_path, monkeypatch):
    import time

    monkeypatch.setattr(io, "DISPLACED_WATCH_S", 0.3)
    note = tmp_path / "n.md"
    note.write_bytes(b"base\n")
    past = time.time() - 5
    os.utime(note, (past, past))
    with open(note, "ab", buffering=0) as streaming:
        io.remove_if_unchanged(note, io.content_hash(b"base\n"))
        assert not note.exists()
        streaming.write(b"still writing\n")
    assert wait_for(lambda: note.exists())
    assert note.read_bytes() == b"base\nstill writing\n"


def test_a_watched_file_nobody_writes_to_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(io, "DISPLACED_WATCH_S", 0.05)
    note = tmp_path / "n.md"
    note.write_bytes(b"base\n")
    io.atomic_write(note, "ours\n", expected_sha=io.content_hash(b"base\n"))
    assert wait_for(lambda: not io._ORPHANS._items)
    assert folder_bytes(tmp_path) == {"n.md": b"ours\n"}
