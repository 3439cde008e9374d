"""The CLI's file jobs (`reme-tui job write|edit|move|delete`) are journal runs: the Changes view lists them as
`cli:*`, revert undoes each exactly, and they count as the person's writes, never the app's (real engine, real
files in a temp vault)."""

from __future__ import annotations

import subprocess
import sys

from reme_engine.jobs import run_job


def _runs(e) -> list[dict]:
    r = run_job(e, "dream_log", {})
    assert r["success"], r
    return r["runs"]


def test_each_file_job_is_a_revertible_cli_run(open_engine):
    e = open_engine()
    v = e.vault
    w = run_job(e, "write", {"path": "digest/wiki/kept.md", "content": "first words\n"})
    assert w["success"] and w["run_id"], w
    ed = run_job(e, "edit", {"path": "digest/wiki/kept.md", "old": "first", "new": "second"})
    assert ed["success"] and (v / "digest/wiki/kept.md").read_text(encoding="utf-8") == "second words\n"
    mv = run_job(e, "move", {"src": "digest/wiki/kept.md", "dst": "digest/wiki/moved.md"})
    assert mv["success"] and (v / "digest/wiki/moved.md").exists()
    de = run_job(e, "delete", {"path": "digest/wiki/moved.md"})
    assert de["success"] and not (v / "digest/wiki/moved.md").exists()
    kinds = [r["kind"] for r in _runs(e)][:4]
    assert kinds == ["cli:delete", "cli:move", "cli:edit", "cli:write"], kinds

    # newest first, each revert restores exactly the bytes before it
    assert run_job(e, "revert", {"run_id": de["run_id"]})["success"]
    assert (v / "digest/wiki/moved.md").read_text(encoding="utf-8") == "second words\n"
    assert run_job(e, "revert", {"run_id": mv["run_id"]})["success"]
    assert (v / "digest/wiki/kept.md").read_text(encoding="utf-8") == "second words\n"
    assert not (v / "digest/wiki/moved.md").exists()
    assert run_job(e, "revert", {"run_id": ed["run_id"]})["success"]
    assert (v / "digest/wiki/kept.md").read_text(encoding="utf-8") == "first words\n"
    assert run_job(e, "revert", {"run_id": w["run_id"]})["success"]
    assert not (v / "digest/wiki/kept.md").exists()


def test_a_cli_write_is_the_persons_not_the_apps(open_engine):
    e = open_engine()
    assert run_job(e, "write", {"path": "daily/notes.md", "content": "mine\n"})["success"]
    # pipelines take a note for their own only when the journal says the app wrote it last
    assert e.journal.last_written_sha("daily/notes.md") is None


def test_delete_refuses_and_keeps_bytes_written_since_the_given_read(open_engine):
    e = open_engine()
    v = e.vault
    sha = run_job(e, "write", {"path": "resource/a.md", "content": "old\n"})["sha"]
    (v / "resource/a.md").write_text("the person's newer words\n", encoding="utf-8")
    r = run_job(e, "delete", {"path": "resource/a.md", "expected_sha": sha})
    assert not r["success"] and "changed on disk" in r["error"], r
    assert (v / "resource/a.md").read_text(encoding="utf-8") == "the person's newer words\n"
    # folders and missing files keep their own one-line errors
    assert "layer folder" in run_job(e, "delete", {"path": "resource"})["error"]
    (v / "resource/sub").mkdir()
    assert "is a folder" in run_job(e, "delete", {"path": "resource/sub"})["error"]
    assert "no such note: resource/none.md" in run_job(e, "delete", {"path": "resource/none.md"})["error"]


def test_the_binary_journals_a_write(tmp_path, open_engine):
    e = open_engine()
    vault, state = e.vault, e.state_dir
    e.close()
    cmd = [sys.executable, "-m", "reme_tui.cli", "--vault", str(vault), "--state-dir", str(state), "job"]
    p = subprocess.run([*cmd, "write", "path=resource/cli.md", "content=from the shell"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([*cmd, "dream_log"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and '"cli:write"' in p.stdout, p.stdout + p.stderr


def test_frontmatter_jobs_are_revertible(open_engine):
    e = open_engine()
    v = e.vault
    original = "---\ntitle: T\ntags: [a]\n---\nbody words\n"
    (v / "digest/wiki").mkdir(parents=True, exist_ok=True)
    (v / "digest/wiki/fm.md").write_text(original, encoding="utf-8")
    up = run_job(e, "frontmatter_update", {"path": "digest/wiki/fm.md", "set.status": "done"})
    assert up["success"] and up["frontmatter"]["status"] == "done", up
    rm = run_job(e, "frontmatter_delete", {"path": "digest/wiki/fm.md", "keys": "tags"})
    assert rm["success"] and "tags" not in rm["frontmatter"], rm
    assert [r["kind"] for r in _runs(e)][:2] == ["cli:frontmatter", "cli:frontmatter"]
    assert run_job(e, "revert", {"run_id": rm["run_id"]})["success"]
    assert run_job(e, "revert", {"run_id": up["run_id"]})["success"]
    assert (v / "digest/wiki/fm.md").read_text(encoding="utf-8") == original
