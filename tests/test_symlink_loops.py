"""A folder symlink loop in the vault (``a/loop -> ..``, ``a/up -> ../..``): the index skips it with a reason, a read
through it is refused with a message naming the loop (never a note under an endless second name), search finds the
note once under its own path, the watcher still sees edits, and MCP ``read_note`` refuses it; nothing hangs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from reme_engine.jobs import EXIT_FAILED, exit_code, run_job


def _loop_vault(root: Path) -> Path:
    v = root / "v"
    (v / "a").mkdir(parents=True)
    (v / "a" / "n.md").write_text("# N\n\nhello zebra\n", encoding="utf-8")
    os.symlink("..", v / "a" / "loop")  # the vault again
    os.symlink("../..", v / "a" / "up")  # the folder holding the vault (outside it)
    return v


def test_scan_read_list_and_search_with_a_loop(tmp_path, open_engine):
    e = open_engine(_loop_vault(tmp_path))
    rep = e.index()
    skipped = {s["path"]: s["reason"] for s in rep.skipped}
    assert "a/loop" in skipped and "not followed" in skipped["a/loop"], rep.skipped
    assert [r[0] for r in e.store.conn.execute("SELECT path FROM files")] == ["a/n.md"]
    for path in ("a/loop/a/n.md", "a/loop/a/loop/a/loop/a/n.md", "a/loop", "a/loop/a"):
        res = run_job(e, "read", {"path": path})
        assert exit_code(res) == EXIT_FAILED and "'a/loop' is a folder symlink" in res["error"] \
            and "loop" in res["error"], (path, res)
    res = run_job(e, "list", {"path": "a/loop"})
    assert not res["success"] and "a loop" in res["error"], res
    assert not run_job(e, "read", {"path": "a/up/v/a/n.md"})["success"]  # outside the vault, then back in
    assert run_job(e, "read", {"path": "a/n.md"})["text"] == "# N\n\nhello zebra\n"
    listed = run_job(e, "list", {"path": "", "recursive": "true"})
    assert listed["success"] and "a/n.md" in [x["path"] for x in listed["entries"]], listed
    hits = run_job(e, "search", {"query": "zebra", "mode": "keyword"})["hits"]
    assert [h["path"] for h in hits] == ["a/n.md"], hits
    # a write through the loop is refused too (a second name for the same note)
    assert not run_job(e, "write", {"path": "a/loop/a/new.md", "content": "x\n"})["success"]
    assert not (tmp_path / "v" / "a" / "new.md").exists()


def test_the_watcher_sees_edits_in_a_vault_with_a_loop(tmp_path, open_engine):
    v = _loop_vault(tmp_path)
    e = open_engine(v)
    e.index()
    seen: list[list[str]] = []
    e.start_background(on_indexed=lambda paths, rep: seen.append(list(paths)), schedule=False)
    (v / "a" / "fresh.md").write_text("# Fresh\n\nwombat\n", encoding="utf-8")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any("a/fresh.md" in b for b in seen):
        time.sleep(0.02)
    assert any("a/fresh.md" in b for b in seen), seen
    hits = run_job(e, "search", {"query": "wombat", "mode": "keyword"})["hits"]
    assert [h["path"] for h in hits] == ["a/fresh.md"], hits
    assert all(not p.startswith("a/loop/") and not p.startswith("a/up/") for b in seen for p in b), seen


@pytest.mark.anyio
async def test_mcp_read_note_refuses_a_path_through_the_loop(tmp_path):
    pytest.importorskip("mcp")
    from test_mcp import call, fail, stdio_session

    v = _loop_vault(tmp_path)
    async with stdio_session(v, tmp_path / "state") as s:
        msg = await fail(s, "read_note", path="a/loop/a/n.md")
        assert "a loop" in msg and "a/loop" in msg, msg
        assert "hello zebra" in (await call(s, "read_note", path="a/n.md"))["text"]
        hits = (await call(s, "search", query="zebra", mode="keyword"))["hits"]
        assert [h["path"] for h in hits] == ["a/n.md"], hits


def _two_link_loop_vault(root: Path) -> Path:
    """``odd/loop -> ../other`` and ``other/back -> ../odd``: neither link points at its own ancestry, but together
    they go round (``odd/loop/back/loop/back/…`` stays inside the vault for ever)."""
    v = root / "v"
    (v / "odd").mkdir(parents=True)
    (v / "other").mkdir()
    (v / "odd" / "n.md").write_text("# N\n\nhello zebra\n", encoding="utf-8")
    (v / "other" / "o.md").write_text("# O\n\nother note\n", encoding="utf-8")
    os.symlink("../other", v / "odd" / "loop")
    os.symlink("../odd", v / "other" / "back")
    return v


def test_a_loop_of_two_links_and_a_path_too_deep_are_refused(tmp_path, open_engine):
    from reme_engine.vault.paths import MAX_PATH_DEPTH

    v = _two_link_loop_vault(tmp_path)
    e = open_engine(v)
    e.index()
    for path in ("odd/loop/back/n.md", "odd/loop/back/loop/back/loop/back/n.md", "odd/loop/back"):
        res = run_job(e, "read", {"path": path})
        assert exit_code(res) == EXIT_FAILED and "'odd/loop/back' is a folder symlink back to 'odd'" in res["error"] \
            and "symlink loop" in res["error"], (path, res)
    assert "its own path: odd/n.md" in run_job(e, "read", {"path": "odd/loop/back/n.md"})["error"]
    assert not run_job(e, "list", {"path": "odd/loop/back/loop"})["success"]
    assert not run_job(e, "write", {"path": "odd/loop/back/new.md", "content": "x\n"})["success"]
    assert not (v / "odd" / "new.md").exists()
    # one link into the other folder is no loop: the note there reads through it
    assert run_job(e, "read", {"path": "odd/loop/o.md"})["text"] == "# O\n\nother note\n"
    assert run_job(e, "read", {"path": "odd/n.md"})["text"] == "# N\n\nhello zebra\n"
    # a path deeper than the limit is refused before the file system is asked (a real deep folder reads)
    deep = "/".join(["d"] * (MAX_PATH_DEPTH - 1))
    (v / deep).mkdir(parents=True)
    (v / deep / "deep.md").write_text("deep\n", encoding="utf-8")
    assert run_job(e, "read", {"path": f"{deep}/deep.md"})["text"] == "deep\n"
    res = run_job(e, "read", {"path": f"{deep}/d/deep.md"})
    assert not res["success"] and f"{MAX_PATH_DEPTH + 1} folders deep, over the limit of {MAX_PATH_DEPTH}" \
        in res["error"], res


@pytest.mark.anyio
async def test_mcp_read_note_refuses_a_loop_of_two_links(tmp_path):
    pytest.importorskip("mcp")
    from test_mcp import call, fail, stdio_session

    v = _two_link_loop_vault(tmp_path)
    async with stdio_session(v, tmp_path / "state") as s:
        msg = await fail(s, "read_note", path="odd/loop/back/loop/back/n.md")
        assert "symlink loop" in msg and "odd/loop/back" in msg and "odd/n.md" in msg, msg
        msg = await fail(s, "read_note", path="/".join(["odd", "loop", "back"] * 30) + "/n.md")
        assert "folders deep, over the limit" in msg, msg
        assert "hello zebra" in (await call(s, "read_note", path="odd/n.md"))["text"]
