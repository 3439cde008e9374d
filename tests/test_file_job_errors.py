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
