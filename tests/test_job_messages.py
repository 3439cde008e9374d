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
