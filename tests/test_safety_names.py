"""A new note or folder name with a control character (BEL, ESC, NUL, DEL, C1, bidi overrides) is refused by the one
name check (``vault/paths.py``), with a message that shows the name escaped, for every writer: write (CLI/MCP/TUI
all go through it), move; nothing is created, and existing files with such names are left alone."""

from __future__ import annotations

import pytest

from reme_engine.jobs import exit_code, run_job
from reme_engine.vault.paths import control_chars, new_name_problem, shown_name

BAD = [
    ("bell\x07.md", "U+0007 BEL"),
    ("esc\x1b[2Jclear.md", "U+001B ESC"),
    ("del\x7f.md", "U+007F DEL"),
    ("c1\x85next.md", "U+0085"),
    ("csi\x9b31m.md", "U+009B"),
    ("tab\there.md", "U+0009 TAB"),
    ("invoice\u202egpj.md", "U+202E"),
    ("look\u200balike.md", "U+200B"),
    ("line\u2028break.md", "U+2028"),
    ("folder\x1b/inside.md", "U+001B ESC"),
]


@pytest.mark.parametrize("name,label", BAD)
def test_write_and_move_refuse_a_name_with_a_control_character(open_engine, name, label):
    e = open_engine()
    vault = e.settings.vault
    res = run_job(e, "write", {"path": name, "content": "hello\n"})
    assert exit_code(res) != 0, res
    err = res["error"]
    assert "control character" in err and label in err, err
    assert not control_chars(err), err  # the name is shown escaped
    assert shown_name(name.split("/")[0]) in err or shown_name(name.split("/")[-1]) in err
    assert sorted(p.name for p in vault.iterdir()) == []  # no file, no folder
    assert exit_code(run_job(e, "write", {"path": "ok.md", "content": "hi\n"})) == 0
    moved = run_job(e, "move", {"src": "ok.md", "dst": name})
    assert exit_code(moved) != 0 and "control character" in moved["error"], moved
    assert (vault / "ok.md").read_text(encoding="utf-8") == "hi\n"
    assert sorted(p.name for p in vault.iterdir()) == ["ok.md"]


def test_nul_in_a_path_is_refused_before_anything(open_engine):
    e = open_engine()
    res = run_job(e, "write", {"path": "nul\x00.md", "content": "x\n"})
    assert exit_code(res) != 0 and "NUL" in res["error"], res
    assert list(e.settings.vault.iterdir()) == []


def test_ordinary_names_pass_and_existing_odd_names_are_kept(open_engine):
    e = open_engine()
    vault = e.settings.vault
    for ok in ("日本語 ノート.md", "emoji 👩‍💻 zwj.md", "Straße.md", "עברית.md"):
        assert new_name_problem(vault, ok) is None, ok
        assert exit_code(run_job(e, "write", {"path": ok, "content": "x\n"})) == 0
    # a file that already has such a name (made by another program) can still be read and edited
    (vault / "old\x07.md").write_text("bell note\n", encoding="utf-8")
    e.index()
    res = run_job(e, "edit", {"path": "old\x07.md", "old": "bell", "new": "ring"})
    assert exit_code(res) == 0, res
    assert (vault / "old\x07.md").read_text(encoding="utf-8") == "ring note\n"


def test_control_chars_lists_each_once():
    assert control_chars("a\x1bb\x1bc\x07") == ["U+001B ESC", "U+0007 BEL"]
    assert control_chars("plain") == []
    assert shown_name("a\x1b[2J\u202e") == "a\\x1b[2J\\u202e"
