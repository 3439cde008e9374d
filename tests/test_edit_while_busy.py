"""An edit or write the caller gave no expected_sha for succeeds while another program appends to the note (read
again and retried), keeping every line the other program wrote; a malformed expected_sha is a usage error, and a
stale one is refused naming the note's vault path."""

from __future__ import annotations

from test_capture_busy import Appender, shell_lines

from reme_engine.jobs import EXIT_USAGE, exit_code, run_job


def test_edit_without_expected_sha_retries_while_another_program_appends(open_engine):
    e = open_engine()
    (e.vault / "race").mkdir()
    note = e.vault / "race" / "m1.md"
    note.write_text("# m1\n\nquokka here\n", encoding="utf-8")
    e.index()
    writer = Appender(note, every=0.1)
    writer.start()
    try:
        for i in range(3):
            res = run_job(e, "edit", {"path": "race/m1.md", "old": "quokka" if i == 0 else f"wombat{i - 1}",
                                      "new": f"wombat{i}"})
            assert res["success"], res
    finally:
        writer.stop()
    text = note.read_text(encoding="utf-8")
    assert "wombat2 here" in text
    assert shell_lines(text) == writer.lines()


def test_expected_sha_errors_say_what_is_wrong(open_engine):
    e = open_engine()
    note = e.vault / "n.md"
    note.write_text("alpha\n", encoding="utf-8")
    bad = run_job(e, "edit", {"path": "n.md", "old": "alpha", "new": "beta", "expected_sha": "zzz"})
    assert exit_code(bad) == EXIT_USAGE and "not a sha a read returned" in bad["error"], bad
    sha = run_job(e, "read", {"path": "n.md"})["sha"]
    (e.vault / "sub").mkdir()
    moved = e.vault / "sub" / "n.md"
    moved.write_text("alpha\n", encoding="utf-8")
    note.write_text("alpha\nmine\n", encoding="utf-8")
    stale = run_job(e, "write", {"path": "n.md", "content": "x\n", "expected_sha": sha, "overwrite": "true"})
    assert not stale["success"] and "n.md changed on disk since the read" in stale["error"], stale
    stale = run_job(e, "edit", {"path": "sub/n.md", "old": "alpha", "new": "b", "expected_sha": "0" * 32})
    assert "sub/n.md changed on disk" in stale["error"], stale
    assert note.read_text(encoding="utf-8") == "alpha\nmine\n" and moved.read_text(encoding="utf-8") == "alpha\n"
