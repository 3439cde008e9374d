"""Compare-and-swap writes: the user's bytes are never replaced by an app write based on older bytes.

Each race is staged deterministically by wrapping the step that publishes the app's temp file, so the user's
save lands exactly in the window between the app's check and its publish.
"""

import os
import stat
import threading
import time

import pytest

from reme_engine.vault import io
from reme_engine.vault.io import FileBusy, WriteConflict, atomic_write, content_hash, read_text, sweep_temp_files


def _user_atomic_save(path, text):
    tmp = path.with_name(path.name + ".editor-swp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _user_in_place_save(path, text):
    with open(path, "w") as fh:
        fh.write(text)


def _no_temp_left(folder):
    return [p.name for p in folder.iterdir() if io.is_app_temp(p.name)] == []


@pytest.mark.parametrize("saver", [_user_atomic_save, _user_in_place_save], ids=["atomic", "in-place"])
@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "checked-replace"])
def test_save_in_the_publish_window_wins(tmp_path, monkeypatch, saver, exchange):
    note = tmp_path / "n.md"
    note.write_text("base\n")
    base = content_hash(b"base\n")
    if exchange and io._rename_exchange is None:
        pytest.skip("no renameat2 exchange here")
    real_exchange = io._rename_exchange
    real_replace = os.replace

    def exchange_after_save(a, b):
        saver(note, "user save\n")
        real_exchange(a, b)

    def replace_after_check(a, b):
        real_replace(a, b)

    if exchange:
        monkeypatch.setattr(io, "_rename_exchange", exchange_after_save)
    else:
        monkeypatch.setattr(io, "_rename_exchange", None)
        real_file_hash = io.file_hash
        calls = {"n": 0}

        def hash_then_save(p):
            # the pre-check is the first hash; the user saves right after it, before the final check
            h = real_file_hash(p)
            calls["n"] += 1
            if calls["n"] == 1:
                saver(note, "user save\n")
            return h

        monkeypatch.setattr(io, "file_hash", hash_then_save)
    with pytest.raises(WriteConflict):
        atomic_write(note, "app edit\n", expected_sha=base)
    assert note.read_text() == "user save\n"
    assert _no_temp_left(tmp_path)


def test_create_never_replaces_a_file_created_meanwhile(tmp_path, monkeypatch):
    note = tmp_path / "new.md"
    real_link = os.link

    def link_after_user(a, b):
        note.write_text("the user's\n")
        real_link(a, b)

    monkeypatch.setattr(io.os, "link", link_after_user)
    with pytest.raises(WriteConflict, match="already exists"):
        atomic_write(note, "app\n", expected_sha=None)
    assert note.read_text() == "the user's\n"
    assert _no_temp_left(tmp_path)


def test_a_second_save_after_the_swap_is_kept(tmp_path, monkeypatch):
    """User saves A before the swap (so the app must undo) and B right after it: B is the newest, B stays."""
    if io._rename_exchange is None:
        pytest.skip("no renameat2 exchange here")
    note = tmp_path / "n.md"
    note.write_text("base\n")
    real_exchange = io._rename_exchange
    state = {"n": 0}

    def racing(a, b):
        state["n"] += 1
        if state["n"] == 1:
            _user_atomic_save(note, "A\n")
            real_exchange(a, b)
            _user_atomic_save(note, "B\n")
        else:
            real_exchange(a, b)

    monkeypatch.setattr(io, "_rename_exchange", racing)
    with pytest.raises(WriteConflict):
        atomic_write(note, "app\n", expected_sha=content_hash(b"base\n"))
    assert note.read_text() == "B\n"


def test_write_through_symlink_keeps_the_link(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "t.md"
    target.write_text("one\n")
    link = tmp_path / "alias.md"
    link.symlink_to("real/t.md")
    atomic_write(link, "two\n", expected_sha=content_hash(b"one\n"))
    assert link.is_symlink() and target.read_text() == "two\n"


def test_new_files_honour_the_umask_and_replaced_files_keep_their_mode(tmp_path):
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "new.md", "x", expected_sha=None)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new.md").st_mode) == 0o640
    kept = tmp_path / "kept.md"
    kept.write_text("a")
    os.chmod(kept, 0o604)
    atomic_write(kept, "b", expected_sha=content_hash(b"a"))
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o604


_SAVER = r"""
import sys
path, n = sys.argv[1], int(sys.argv[2])
versions = [("v%03d " % i) * 4000 + "END\n" for i in range(200)]
for k in range(n):
    with open(path, "w") as fh:  # truncate, then write in two halves: a slow in-place save
        v = versions[k % len(versions)]
        fh.write(v[: len(v) // 2])
        fh.flush()
        fh.write(v[len(v) // 2 :])
"""


def test_stable_read_never_returns_a_half_written_save(tmp_path):
    import subprocess
    import sys

    note = tmp_path / "n.md"
    versions = [("v%03d " % i) * 4000 + "END\n" for i in range(200)]
    note.write_text(versions[0])
    proc = subprocess.Popen([sys.executable, "-c", _SAVER, str(note), "800"])
    seen = busy = 0
    try:
        while proc.poll() is None:
            try:
                tf = read_text(note, 10_000_000)
            except FileBusy:
                busy += 1
                continue
            assert tf.text in versions, f"a partial save was returned ({len(tf.text)} chars)"
            seen += 1
    finally:
        proc.kill()
        proc.wait()
    assert seen + busy > 0
    assert read_text(note, 10_000_000).text in versions


def test_sweep_removes_only_the_apps_old_temp_files(tmp_path):
    (tmp_path / "daily").mkdir()
    old_tmp = tmp_path / "daily" / ".n.md.abcd_123.reme-tmp"
    legacy_tmp = tmp_path / ".x.md.k2j4h5g6.tmp"
    fresh_tmp = tmp_path / ".y.md.zzzzzzzz.reme-tmp"
    users = [tmp_path / "notes.tmp", tmp_path / ".hidden-note.md", tmp_path / "daily" / "a.md.reme-tmp"]
    for p in [old_tmp, legacy_tmp, fresh_tmp, *users]:
        p.write_text("x")
    past = time.time() - 3600
    for p in [old_tmp, legacy_tmp, *users]:
        os.utime(p, (past, past))
    (tmp_path / ".obsidian").mkdir()
    inside_hidden = tmp_path / ".obsidian" / ".w.json.abcdefgh.reme-tmp"
    inside_hidden.write_text("x")
    os.utime(inside_hidden, (past, past))
    removed = sweep_temp_files(tmp_path)
    assert sorted(removed) == sorted([old_tmp, legacy_tmp])
    assert fresh_tmp.exists() and inside_hidden.exists() and all(p.exists() for p in users)


def test_racing_saves_against_app_edits_lose_nothing():
    """A small run of ``bench/bench_race.py``: a user process saving (atomic and in-place, mixed) while another
    process edits the same note through the engine. No user save is lost, no note is left truncated, and the
    app's edits did land in between (the race was real)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("bench_race", Path(__file__).parents[1] / "bench" / "bench_race.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    r = bench.run_kind("mixed", 120, False, 11, 0.06)
    assert r["lost"] == 0 and r["truncated"] == 0, r
    assert r["edits_applied"] > 0, r


def test_an_edit_of_a_note_being_saved_is_refused_with_a_message(tmp_path, make_engine):
    """A note that keeps changing while the engine reads it (another program appending every few ms) makes
    ``edit`` refuse with an EngineError naming the note; it never escapes as a FileBusy traceback."""
    from reme_engine.engine import EngineError

    (tmp_path / "v").mkdir()
    note = tmp_path / "v" / "busy.md"
    note.write_text("engine: 0\n")
    eng = make_engine(tmp_path / "v", embed=False)
    stop = threading.Event()

    def append():
        while not stop.is_set():
            with open(note, "a") as fh:
                fh.write("user line\n")
            stop.wait(0.005)

    t = threading.Thread(target=append)
    t.start()
    outcomes = []
    try:
        # Under heavy load the appender can stall long enough for one read to settle; then the edit is refused
        # by the compare-and-swap ("changed on disk") or lands. Either is fine; a FileBusy escaping is not.
        for _ in range(10):
            k = int(note.read_text().split("\n", 1)[0].removeprefix("engine: "))
            try:
                eng.edit("busy.md", f"engine: {k}", f"engine: {k + 1}")
                outcomes.append("applied")
            except EngineError as exc:
                outcomes.append(str(exc))
                if "being written" in str(exc):
                    break
    finally:
        stop.set()
        t.join()
    assert any(o == "cannot edit busy.md: note is being written (it kept changing while read); try again"
               for o in outcomes), outcomes
    assert note.read_text().count("user line") > 0


def test_odd_targets_are_refused_not_hung_or_replaced(tmp_path):
    """A FIFO is refused before anything opens it (no hang); a note without write permission bits is refused;
    nothing was written."""
    fifo = tmp_path / "x.md"
    os.mkfifo(fifo)
    with pytest.raises(WriteConflict, match="not a regular file"):
        atomic_write(fifo, "hello", expected_sha="0" * 32)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    ro = tmp_path / "ro.md"
    ro.write_text("mine\n")
    os.chmod(ro, 0o444)
    with pytest.raises(WriteConflict, match="read-only"):
        atomic_write(ro, "app\n", expected_sha=content_hash(b"mine\n"))
    assert ro.read_text() == "mine\n" and _no_temp_left(tmp_path)


def test_symlinks_never_lead_a_write_into_a_dot_folder(tmp_path, make_engine):
    from reme_engine.engine import EngineError

    (tmp_path / "v" / ".obsidian").mkdir(parents=True)
    (tmp_path / "v" / ".obsidian" / "app.json").write_text("{}")
    (tmp_path / "v" / "notes").mkdir()
    (tmp_path / "v" / "notes" / "l.md").symlink_to("../.obsidian/app.json")
    eng = make_engine(tmp_path / "v", embed=False)
    with pytest.raises(EngineError, match="not writable"):
        eng.write("notes/l.md", "PWNED")
    assert (tmp_path / "v" / ".obsidian" / "app.json").read_text() == "{}"


def test_a_move_finishes_when_a_linking_note_cannot_be_written(tmp_path, make_engine):
    """A linking note that cannot be rewritten (here: read-only) is reported as a conflict; the move completes and
    leaves no intent behind, so later starts are not blocked."""
    v = tmp_path / "v"
    (v / "notes").mkdir(parents=True)
    (v / "archive").mkdir()
    (v / "notes" / "target.md").write_text("# t\n")
    (v / "archive" / "old.md").write_text("see [[target]]\n")
    (v / "notes" / "other.md").write_text("see [[target]]\n")
    os.chmod(v / "archive" / "old.md", 0o444)
    eng = make_engine(v, embed=False)
    eng.index(vectors=False)
    res = eng.move("notes/target.md", "notes/target2.md")
    assert res.conflicts == ["archive/old.md"] and res.rewritten_files == ["notes/other.md"]
    assert (v / "archive" / "old.md").read_text() == "see [[target]]\n"
    assert not list((eng.state_dir / "intents").glob("*.json"))
