"""A new note's name follows one rule for every writer (CLI/MCP write, move): a name no [[wikilink]] can reach
(``#``, ``^``, ``|``, ``[[``, ``]]``) is refused with the reason, and nothing is created."""

from __future__ import annotations

import pytest

from reme_engine.jobs import exit_code, run_job
from reme_engine.vault.paths import new_name_problem


@pytest.mark.parametrize("name", ["new/x#y.md", "new/x[[y.md", "new/p^q.md", "new note #1.md", "a]]b.md"])
def test_write_and_move_refuse_a_name_links_cannot_reach(open_engine, name):
    e = open_engine()
    res = run_job(e, "write", {"path": name, "content": "hello\n"})
    assert exit_code(res) != 0 and "link" in res["error"], res
    assert not (e.settings.vault / name).exists()
    assert exit_code(run_job(e, "write", {"path": "ok.md", "content": "hi\n"})) == 0
    moved = run_job(e, "move", {"src": "ok.md", "dst": name})
    assert exit_code(moved) != 0 and "link" in moved["error"], moved
    assert (e.settings.vault / "ok.md").read_text(encoding="utf-8") == "hi\n"


def test_only_what_a_link_cannot_spell_is_refused(tmp_path):
    (tmp_path / "C# notes.md").write_text("kept\n", encoding="utf-8")
    assert new_name_problem(tmp_path, "Book (2020) notes.md") is None
    assert "link" in (new_name_problem(tmp_path, "C# tips.md") or "")
