"""`job frontmatter_update` from the command line: set.KEY=VALUE keeps numbers and booleans typed, and an
``updates`` that is not a JSON object is a usage error (exit 2), not an internal one."""

from __future__ import annotations

import yaml

from reme_engine.jobs import EXIT_USAGE, exit_code, run_job


def _fm(path):
    text = path.read_text(encoding="utf-8")
    return yaml.safe_load(text.split("---")[1])


def test_set_values_keep_their_type(open_engine):
    e = open_engine()
    note = e.settings.vault / "n.md"
    note.write_text("---\ncount: 3\ntitle: x\n---\nbody\n", encoding="utf-8")
    res = run_job(e, "frontmatter_update", {"path": "n.md", "set.count": "12", "set.done": "true",
                                            "set.title": "hello world", "set.tags": '["a", "b"]'})
    assert res["success"], res
    assert _fm(note) == {"count": 12, "title": "hello world", "done": True, "tags": ["a", "b"]}
    assert note.read_text(encoding="utf-8").endswith("---\nbody\n")


def test_updates_that_are_not_an_object_are_a_usage_error(open_engine):
    e = open_engine()
    note = e.settings.vault / "n.md"
    note.write_text("---\ncount: 3\n---\nbody\n", encoding="utf-8")
    res = run_job(e, "frontmatter_update", {"path": "n.md", "updates": "[1, 2]"})
    assert exit_code(res) == EXIT_USAGE and "JSON object" in res["error"], res
    assert note.read_text(encoding="utf-8") == "---\ncount: 3\n---\nbody\n"


def test_frontmatter_delete_without_keys_is_a_usage_error(open_engine):
    e = open_engine()
    (e.vault / "n.md").write_text("---\ncount: 3\n---\nbody\n", encoding="utf-8")
    res = run_job(e, "frontmatter_delete", {"path": "n.md", "keys": ""})
    assert exit_code(res) == EXIT_USAGE and "nothing to delete" in res["error"], res
    assert not [r for r in e.journal.runs(limit=10) if r["kind"].startswith("cli:")]


def test_a_date_range_that_cannot_match_is_a_usage_error(open_engine):
    e = open_engine()
    (e.vault / "n.md").write_text("walrus\n", encoding="utf-8")
    e.index()
    res = run_job(e, "search", {"query": "walrus", "mode": "keyword", "date_from": "2026-12-05",
                                "date_to": "2026-12-01"})
    assert exit_code(res) == EXIT_USAGE and "is after date_to" in res["error"], res
