"""One-line errors that say what is wrong with what the person typed: a colon in a name is Obsidian's refusal (not
"an absolute path"), a name ending in ".md " is not given a second ".md", and an OS error of a job that names no
file has no empty name in its line."""

from __future__ import annotations

from reme_engine.jobs import EXIT_FAILED, exit_code, run_job


def test_path_and_os_error_messages(open_engine):
    e = open_engine()
    res = run_job(e, "write", {"path": "a:b.md", "content": "x\n"})
    assert res["error"] == "not created: 'a:b.md' has :, which Obsidian does not allow in a file name", res
    res = run_job(e, "write", {"path": "odd/trail.md ", "content": "x\n"})
    assert "'trail.md ' ends with a space or a dot" in res["error"] and ".md .md" not in res["error"], res
    for p in ("C:/x.md", "C:\\x.md", "/etc/x.md"):
        assert "absolute paths are not allowed" in run_job(e, "write", {"path": p, "content": "x\n"})["error"]
    assert not list(e.vault.rglob("*.md"))
    (e.vault / "daily").write_text("a file where the daily folder goes\n", encoding="utf-8")
    res = run_job(e, "daily_create", {})
    assert exit_code(res) == EXIT_FAILED and res["error"].startswith("cannot daily_create: "), res


def test_a_note_moved_meanwhile_is_not_suggested_as_itself(open_engine):
    """Two moves of one note at once: the loser's error must not say "did you mean <the path that failed>?" (the
    index still had the old row); it says the note was there a moment ago."""
    import os

    e = open_engine()
    (e.vault / "notes").mkdir()
    (e.vault / "notes" / "alpha.md").write_text("# Alpha\n", encoding="utf-8")
    e.index()
    os.rename(e.vault / "notes" / "alpha.md", e.vault / "notes" / "beta.md")  # the winner, not indexed yet
    res = run_job(e, "move", {"src": "notes/alpha.md", "dst": "notes/gamma.md"})
    assert not res["success"], res
    assert "did you mean notes/alpha.md" not in res["error"] and "moved or deleted meanwhile" in res["error"], res
