"""Frontmatter filters match the note's parsed YAML value whatever its type (booleans, numbers, lists, dates), from
`run_job`, the command line (``fm.KEY=VALUE`` text) and JSON (``frontmatter={...}`` typed values)."""

import json
from pathlib import Path

import pytest

from reme_engine.jobs import run_job

NOTES = {
    "a.md": "---\npublish: true\nrating: 5\ntags: [alpha, beta]\ndate created: 2023-08-13\n---\nzebrafish one\n",
    "b.md": "---\npublish: false\nrating: \"5\"\ntags: beta\n---\nzebrafish two\n",
    "c.md": "---\npublish: yes\nrating: 4.5\nflag: True\nnothing: null\n---\nzebrafish three\n",
    "d.md": "zebrafish four, no frontmatter\n",
}


@pytest.fixture
def eng(make_engine, tmp_path):
    vault = tmp_path / "v"
    vault.mkdir()
    for name, text in NOTES.items():
        (vault / name).write_text(text, encoding="utf-8")
    e = make_engine(vault, embed=False)
    e.index()
    return e


def _paths(eng, **args) -> list[str]:
    r = run_job(eng, "search", {"query": "zebrafish", "mode": "keyword", **args})
    assert r["success"], r
    return sorted({h["path"] for h in r["hits"]})


@pytest.mark.parametrize("args, expected", [
    ({}, ["a.md", "b.md", "c.md", "d.md"]),
    # booleans: text from the command line, any case, or a JSON boolean or string
    ({"fm.publish": "true"}, ["a.md"]),
    ({"fm.publish": "True"}, ["a.md"]),
    ({"frontmatter": {"publish": True}}, ["a.md"]),
    ({"frontmatter": {"publish": "true"}}, ["a.md"]),
    ({"fm.publish": "false"}, ["b.md"]),
    ({"frontmatter": {"publish": False}}, ["b.md"]),
    ({"fm.flag": "true"}, ["c.md"]),  # YAML `True` is a boolean too
    # YAML 1.2 (Obsidian's): `yes` stays the word, so it matches as text and not as true
    ({"fm.publish": "yes"}, ["c.md"]),
    # numbers match numbers and their text, and the other way round
    ({"fm.rating": "5"}, ["a.md", "b.md"]),
    ({"frontmatter": {"rating": 5}}, ["a.md", "b.md"]),
    ({"fm.rating": "5.0"}, ["a.md"]),
    ({"fm.rating": "4.5"}, ["c.md"]),
    ({"frontmatter": {"rating": 4.5}}, ["c.md"]),
    # lists match when an element equals the value; a scalar matches itself
    ({"fm.tags": "alpha"}, ["a.md"]),
    ({"fm.tags": "beta"}, ["a.md", "b.md"]),
    ({"fm.tags": "gamma"}, []),
    # dates are ISO text; keys with spaces work
    ({"fm.date created": "2023-08-13"}, ["a.md"]),
    ({"frontmatter": {"nothing": None}}, ["c.md"]),
    # several keys: all must match
    ({"fm.publish": "true", "fm.rating": "5"}, ["a.md"]),
    ({"fm.publish": "false", "fm.tags": "alpha"}, []),
])
def test_frontmatter_filter_matches_typed_values(eng, args, expected):
    assert _paths(eng, **args) == expected


def test_frontmatter_filter_from_the_command_line(eng, capsys, monkeypatch):
    from reme_engine.index import indexer
    from reme_tui.cli import main

    monkeypatch.setattr(indexer, "PARALLEL_ENABLED", indexer.PARALLEL_ENABLED)  # main() switches it on
    vault: Path = eng.settings.vault
    state = eng.settings.state_dir
    eng.close()
    for filt in ("fm.publish=true", 'frontmatter={"publish": true}', "fm.rating=5"):
        rc = main(["--vault", str(vault), "--state-dir", str(state), "--embedder", "none",
                   "job", "search", "query=zebrafish", "mode=keyword", filt])
        out = capsys.readouterr().out
        res = json.loads(out.strip().splitlines()[-1])
        assert rc == 0, res
        paths = sorted({h["path"] for h in res["hits"]})
        assert paths == (["a.md", "b.md"] if filt == "fm.rating=5" else ["a.md"]), (filt, res)
