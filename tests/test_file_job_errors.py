"""File jobs (`reme-tui job write|edit|move|delete`): a path without a suffix names a note, and OS failures of a
write are one line (real engine, real files in a temp vault)."""

from __future__ import annotations

import errno

import pytest

from reme_engine.errors import os_error_message
from reme_engine.jobs import run_job


def test_a_path_without_a_suffix_is_a_note_in_every_file_job(tmp_path, open_engine):
    e = open_engine()
    v = e.vault
    r = run_job(e, "write", {"path": "adv/newnote", "content": "hi"})
    assert r["success"] and r["path"] == "adv/newnote.md"
    assert (v / "adv/newnote.md").read_text(encoding="utf-8") == "hi" and not (v / "adv/newnote").exists()
    assert run_job(e, "read", {"path": "adv/newnote"})["text"] == "hi"
    assert run_job(e, "write", {"path": "adv/newnote", "content": "again"})["path"] == "adv/newnote.md"
    assert run_job(e, "edit", {"path": "adv/newnote", "old": "again", "new": "edited"})["path"] == "adv/newnote.md"
    r = run_job(e, "move", {"src": "adv/newnote", "dst": "adv/renamed"})
    assert r["success"] and r["dst"] == "adv/renamed.md" and (v / "adv/renamed.md").read_text() == "edited"
    # a name with a suffix keeps it; a file of that exact name (no suffix) is the one written
    assert run_job(e, "write", {"path": "adv/list.txt", "content": "x"})["path"] == "adv/list.txt"
    (v / "Makefile").write_text("all:\n", encoding="utf-8")
    assert run_job(e, "write", {"path": "Makefile", "content": "all: x\n"})["path"] == "Makefile"
    assert run_job(e, "delete", {"path": "adv/renamed"})["success"] and not (v / "adv/renamed.md").exists()


def test_a_name_too_long_is_a_one_line_error(open_engine):
    e = open_engine()
    long = "n" * 300 + ".md"
    for job, args in (("write", {"path": f"adv/{long}", "content": "hi"}),
                      ("move", {"src": "seed", "dst": f"adv/{long}"})):
        if job == "move":
            assert run_job(e, "write", {"path": "seed", "content": "s"})["success"]
        r = run_job(e, job, args)
        assert r["success"] is False and "file name too long" in r["error"], r
        assert "internal error" not in r["error"] and "\n" not in r["error"] and len(r["error"]) < 200
    assert (e.vault / "seed.md").is_file()  # the failed move left the note where it was


@pytest.mark.parametrize("code, reason", [(errno.ENOSPC, "no space left"), (errno.EACCES, "permission denied"),
                                          (errno.EROFS, "read-only file system")])
def test_os_errors_of_a_write_are_one_line(open_engine, monkeypatch, code, reason):
    import reme_engine.vault.files as files

    e = open_engine()
    assert run_job(e, "write", {"path": "kept", "content": "mine"})["success"]

    def failing(path, *a, **k):  # what the OS answers on a full disk, a folder without permission, a read-only mount
        raise OSError(code, "os text", str(path))

    monkeypatch.setattr(files, "atomic_write", failing)
    for job, args in (("write", {"path": "kept", "content": "theirs"}),
                      ("edit", {"path": "kept", "old": "mine", "new": "x"})):
        r = run_job(e, job, args)
        assert r["success"] is False and r["error"].startswith("cannot write kept.md: ") and reason in r["error"]
        assert "internal error" not in r["error"] and "\n" not in r["error"]
    assert (e.vault / "kept.md").read_text(encoding="utf-8") == "mine"


def test_os_error_message_names_the_reason_and_shortens_the_path():
    msg = os_error_message(OSError(errno.ENAMETOOLONG, "File name too long"), "a/" + "b" * 300 + ".md")
    assert msg.startswith("cannot write a/bbb") and msg.endswith("file name too long (at most 255 bytes per "
                                                                  "folder or file name)") and len(msg) < 170
    assert os_error_message(OSError(errno.EMLINK, "Too many links"), "x.md") == "cannot write x.md: too many links"


def test_a_read_is_bounded_in_characters_and_says_where_it_stopped(open_engine):
    """A 1 MB one-line note and a note of many long lines give at most MAX_READ_CHARS characters per read, marked
    truncated; reading on from end_line + 1 continues where the last one stopped."""
    from reme_engine.results import MAX_READ_CHARS

    e = open_engine()
    v = e.vault
    (v / "adv").mkdir(exist_ok=True)
    (v / "adv/oneline.md").write_text("x" * 1_000_000, encoding="utf-8")
    r = run_job(e, "read", {"path": "adv/oneline"})
    assert r["success"] and r["truncated"] and r["line_cut"], {k: r[k] for k in r if k != "text"}
    assert len(r["text"]) == MAX_READ_CHARS and r["start_line"] == r["end_line"] == 1

    line = "y" * 999 + "\n"
    n = 3 * MAX_READ_CHARS // len(line)
    (v / "adv/many.md").write_text(line * n, encoding="utf-8")
    got, start = [], 1
    while start <= n:
        r = run_job(e, "read", {"path": "adv/many", "start_line": start})
        assert r["success"] and not r["line_cut"] and len(r["text"]) <= MAX_READ_CHARS
        assert r["text"] == line * (r["end_line"] - start + 1)
        got.append(r["end_line"] - start + 1)
        start = r["end_line"] + 1
    assert sum(got) == n and len(got) >= 3
    small = run_job(e, "read", {"path": "adv/many", "start_line": 1, "end_line": 3})
    assert small["text"] == line * 3 and not small["truncated"]


def test_the_apps_editor_and_note_pane_read_a_huge_line_whole(open_engine):
    """The character budget is for jobs and agents: the $EDITOR copy must hold every byte (it is written back)."""
    from reme_tui.editor import prepare_edit

    e = open_engine()
    (e.vault / "adv").mkdir(exist_ok=True)
    body = "z" * 700_000 + "\nend\n"
    (e.vault / "adv/huge.md").write_text(body, encoding="utf-8")
    s = prepare_edit(e, "adv/huge.md")
    try:
        assert s.copy.read_text(encoding="utf-8") == body
    finally:
        import shutil

        shutil.rmtree(s.copy.parent, ignore_errors=True)


def test_a_read_only_note_is_refused_before_the_editor_opens(open_engine):
    """No false "edit conflict": a note without write permission is not opened for editing at all, and stat says
    why; nothing is written beside it."""
    import os

    import pytest

    from reme_engine.errors import EngineError
    from reme_tui.editor import prepare_edit

    e = open_engine()
    note = e.vault / "adv/ro.md"
    note.parent.mkdir(exist_ok=True)
    note.write_text("keep\n", encoding="utf-8")
    os.chmod(note, 0o444)
    try:
        assert run_job(e, "stat", {"path": "adv/ro"})["read_only"] is True
        with pytest.raises(EngineError, match="read-only"):
            prepare_edit(e, "adv/ro.md")
        assert sorted(p.name for p in note.parent.iterdir()) == ["ro.md"] and note.read_text() == "keep\n"
        assert run_job(e, "stat", {"path": "adv/newnote"})["read_only"] is False
    finally:
        os.chmod(note, 0o644)
