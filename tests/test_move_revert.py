"""Reverting a move (a `job move` / MCP `move_note` run) puts the note back under exactly one name and never deletes
bytes written into either name since: a note edited at its new name goes back with the edit; a new file at the old
name keeps the move from being undone (both kept, said); a partial move (a linking note left as it was) reverts
to one copy too."""

from __future__ import annotations

from reme_engine.jobs import EXIT_FAILED, exit_code, run_job
from reme_engine.markdown.links import parse_links


def _vault(e):
    (e.vault / "notes").mkdir()
    (e.vault / "notes" / "alpha.md").write_text("# Alpha\n\nthe moved note, see [[alpha]]\n", encoding="utf-8")
    (e.vault / "notes" / "l1.md").write_text("# L1\n\nsee [[alpha]]\n", encoding="utf-8")
    (e.vault / "notes" / "l2.md").write_text("# L2\n\nsee [[notes/alpha|it]]\n", encoding="utf-8")
    e.index()


def _move(e) -> dict:
    res = run_job(e, "move", {"src": "notes/alpha.md", "dst": "notes/gamma.md"})
    assert res["success"] and sorted(res["rewritten_files"]) == ["notes/gamma.md", "notes/l1.md", "notes/l2.md"], res
    return res


def _notes(e) -> list[str]:
    return sorted(p.name for p in (e.vault / "notes").iterdir())


def _targets(e, name: str) -> list[str]:
    return [lk.target for lk in parse_links((e.vault / "notes" / name).read_text(encoding="utf-8"))]


def test_reverting_a_clean_move_restores_one_copy_and_the_links(open_engine):
    e = open_engine()
    _vault(e)
    res = _move(e)
    rev = run_job(e, "revert", {"run_id": res["run_id"]})
    assert rev["success"] and rev["outcome"] == "reverted", rev
    assert _notes(e) == ["alpha.md", "l1.md", "l2.md"]
    assert (e.vault / "notes" / "alpha.md").read_text(encoding="utf-8") == "# Alpha\n\nthe moved note, see [[alpha]]\n"
    assert _targets(e, "l1.md") == ["alpha"] and _targets(e, "l2.md") == ["notes/alpha"]


def test_a_note_edited_at_its_new_name_goes_back_with_the_edit(open_engine):
    e = open_engine()
    _vault(e)
    res = _move(e)
    gamma = e.vault / "notes" / "gamma.md"
    with open(gamma, "a", encoding="utf-8") as fh:
        fh.write("my words after the move\n")
    rev = run_job(e, "revert", {"run_id": res["run_id"]})
    assert rev["success"], rev
    assert _notes(e) == ["alpha.md", "l1.md", "l2.md"], rev  # one copy, not both names
    text = (e.vault / "notes" / "alpha.md").read_text(encoding="utf-8")
    assert text.endswith("my words after the move\n"), text
    assert any("changed since the move" in w for w in rev["warnings"]), rev
    assert _targets(e, "l1.md") == ["alpha"] and _targets(e, "l2.md") == ["notes/alpha"]
    # the index follows: the note is found under its old name, not the new one
    assert run_job(e, "stat", {"path": "notes/alpha.md"})["indexed"] is True
    assert run_job(e, "stat", {"path": "notes/gamma.md"})["exists"] is False


def test_a_new_file_at_the_old_name_keeps_the_move_and_both_files(open_engine):
    e = open_engine()
    _vault(e)
    res = _move(e)
    gamma = e.vault / "notes" / "gamma.md"
    moved_bytes = gamma.read_bytes()
    alpha = e.vault / "notes" / "alpha.md"
    with open(alpha, "a", encoding="utf-8") as fh:  # a program still appending to the old path re-creates it
        fh.write("shell line 0\n")
    rev = run_job(e, "revert", {"run_id": res["run_id"]})
    assert not rev["success"] and exit_code(rev) == EXIT_FAILED, rev
    assert "notes/alpha.md" in rev["error"], rev
    assert gamma.read_bytes() == moved_bytes and alpha.read_text(encoding="utf-8") == "shell line 0\n"
    # the links keep pointing where the note is
    assert _targets(e, "l1.md") == ["gamma"] and _targets(e, "l2.md") == ["notes/gamma"]


def test_reverting_a_partial_move_restores_one_copy(open_engine):
    e = open_engine()
    _vault(e)
    l2 = e.vault / "notes" / "l2.md"
    l2.chmod(0o444)  # a linking note the move cannot rewrite: a partial move
    try:
        res = run_job(e, "move", {"src": "notes/alpha.md", "dst": "notes/gamma.md"})
        assert not res["success"] and res["conflicts"] == ["notes/l2.md"], res
        assert "notes/l2.md (l2.md is read-only" in res["error"], res  # the reason, not a guess
        rev = run_job(e, "revert", {"run_id": res["run_id"]})
    finally:
        l2.chmod(0o644)
    assert rev["success"] and rev["outcome"] == "reverted", rev
    assert _notes(e) == ["alpha.md", "l1.md", "l2.md"]
    assert _targets(e, "l1.md") == ["alpha"] and _targets(e, "l2.md") == ["notes/alpha"]


def test_a_move_whose_rename_fails_leaves_no_interrupted_move(open_engine):
    """The rename fails (the destination's folder cannot be made: a file has its name): the move fails with the
    reason, and no intent record is left for the next start to report as "an interrupted move"."""
    e = open_engine()
    _vault(e)
    (e.vault / "taken").write_text("a file, not a folder\n", encoding="utf-8")
    res = run_job(e, "move", {"src": "notes/alpha.md", "dst": "taken/gamma.md"})
    assert not res["success"] and "taken" in res["error"], res
    assert not list((e.settings.state_dir / "intents").glob("*.json"))
    assert _notes(e) == ["alpha.md", "l1.md", "l2.md"]
