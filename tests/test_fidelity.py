"""Obsidian fidelity and bad input, on real files in temp vaults: repeated note names, paths without ``.md``,
frontmatter warnings where the user looks, symlinked notes."""

from __future__ import annotations

import os

import pytest

from reme_engine.engine import EngineError


def _write(v, rel: str, text: str) -> None:
    p = v / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def _links_state(e) -> dict:
    return {r[0]: r[1:] for r in e.store.conn.execute("SELECT id, resolved, ambiguous, virtual FROM links")}


def _links_from_scratch(e) -> dict:
    """Every link resolved again by a freshly built resolver."""
    resolver = e.indexer.build_resolver()
    out = {}
    for lid, target, src in e.store.conn.execute(
            "SELECT l.id, l.target, f.path FROM links l JOIN files f ON f.id = l.src_id"):
        if not target:
            out[lid] = (src, 0, src)
        else:
            r = resolver.resolve(target, src)
            out[lid] = (r.path, int(r.ambiguous), r.path or r.virtual)
    return out


def _out(e, src: str, target: str) -> str | None:
    row = e.store.conn.execute("SELECT l.resolved FROM links l JOIN files f ON f.id = l.src_id"
                               " WHERE f.path = ? AND l.target = ?", (src, target)).fetchone()
    return row[0] if row else "no such link"


# -- 1. repeated names ---------------------------------------------------------------------------------------


def test_incremental_resolution_agrees_with_a_full_one_for_repeated_names_in_nested_folders(open_engine, tmp_path):
    """Nearest-folder resolution: a new note can take over a bare link in its folder subtree. After each change
    the links table (updated by watcher-sized syncs) equals a from-scratch resolution, and the link goes
    where Obsidian sends it."""
    v = tmp_path / "v"
    v.mkdir()
    src = "p/q/r/s.md"
    _write(v, src, "# S\n\n[[Note]] [[note]] [[index]] [[b/Note]] [[Todo]]\n")
    _write(v, "zzz/Note.md", "far away\n")
    _write(v, "w/index.md", "w\n")
    e = open_engine(v)
    e.index()
    assert _out(e, src, "Note") == "zzz/Note.md"
    steps = [
        ("a nearer one in an ancestor folder", lambda: _write(v, "p/Note.md", "p\n"), ["p/Note.md"], "p/Note.md"),
        ("a still nearer one", lambda: _write(v, "p/q/Note.md", "pq\n"), ["p/q/Note.md"], "p/q/Note.md"),
        ("one in a sibling subtree does not take over", lambda: _write(v, "p/x/Note.md", "px\n"),
         ["p/x/Note.md"], "p/q/Note.md"),
        ("one beside the source, other case", lambda: _write(v, "p/q/r/NOTE.md", "r\n"), ["p/q/r/NOTE.md"],
         "p/q/Note.md"),  # [[Note]]: the same case first
        ("the nearest goes away", lambda: (v / "p/q/Note.md").unlink(), ["p/q/Note.md"], "p/Note.md"),
        ("an exact vault path appears", lambda: _write(v, "Note.md", "root\n"), ["Note.md"], "Note.md"),
        ("it is renamed into the subtree", lambda: (v / "Note.md").rename(v / "p/q/r/Note.md"),
         ["Note.md", "p/q/r/Note.md"], "p/q/r/Note.md"),
        ("the linking note moves elsewhere", lambda: (v / src).rename(v / "zzz/s.md"),
         [src, "zzz/s.md"], None),
    ]
    for what, act, paths, want in steps:
        act()
        e.index_paths(paths)
        assert _links_state(e) == _links_from_scratch(e), what
        if want:
            assert _out(e, src, "Note") == want, what
    assert _out(e, "zzz/s.md", "Note") == "zzz/Note.md"  # beside it now
    # folders renamed wholesale (a full scan), per-folder index notes, a partial path
    (v / "zzz").rename(v / "p/q/zzz")
    _write(v, "p/q/index.md", "q\n")
    _write(v, "p/b/Note.md", "pb\n")
    e.index()
    assert _links_state(e) == _links_from_scratch(e)
    assert _out(e, "p/q/zzz/s.md", "index") == "p/q/index.md"
    assert _out(e, "p/q/zzz/s.md", "b/Note") == "p/b/Note.md"


def test_stat_and_health_check_report_ambiguous_links_with_candidates(open_engine, tmp_path):
    v = tmp_path / "v"
    for rel in ("work/Plan.md", "home/Plan.md", "home/deep/Plan.md"):
        _write(v, rel, f"# {rel}\n")
    _write(v, "home/deep/today.md", "# Today\n\nsee [[Plan]]\n\nand [[home/Plan]]\n")
    _write(v, "inbox.md", "line 1\n[[plan]]\n")
    e = open_engine(v)
    e.index()
    st = e.stat("home/deep/today.md")
    assert st.ambiguous_links == []  # [[Plan]] is beside it (same folder, same case): not ambiguous
    st = e.stat("inbox")  # ".md" optional
    assert st.path == "inbox.md"
    assert st.ambiguous_links == [{"source": "inbox.md", "line": 2, "target": "plan", "resolved": "home/Plan.md",
                                   "candidates": ["home/Plan.md", "work/Plan.md", "home/deep/Plan.md"]}]
    hc = e.health_check()
    assert hc["ambiguous_links"]["count"] == 1
    assert hc["ambiguous_links"]["first"][0]["candidates"][0] == "home/Plan.md"
    assert [n.path for n in e.neighbors("inbox").outlinks] == ["home/Plan.md"]


# -- 2. paths with or without .md ----------------------------------------------------------------------------


def test_every_path_job_accepts_a_note_without_md(open_engine, tmp_path):
    v = tmp_path / "v"
    _write(v, "notes/Alpha.md", "---\ntags: [a]\n---\n# Alpha\n\nsee [[Beta]]\n")
    _write(v, "notes/Beta.md", "# Beta\n")
    _write(v, "Gamma.md", "# Gamma\n")
    (v / "Gamma").mkdir()  # a folder beside the note of the same name (Obsidian "folder notes")
    e = open_engine(v)
    e.index()
    assert e.read("notes/Alpha").path == "notes/Alpha.md"
    assert e.read("Gamma").text == "# Gamma\n"
    assert e.stat("notes/Beta").exists and e.stat("notes/Beta").indexed
    assert e.frontmatter_read("notes/Alpha")["frontmatter"] == {"tags": ["a"]}
    assert e.frontmatter_update("notes/Alpha", {"x": 1})["path"] == "notes/Alpha.md"
    assert e.edit("notes/Alpha", "# Alpha", "# Alpha!").path == "notes/Alpha.md"
    assert "# Alpha!" in (v / "notes/Alpha.md").read_text()
    assert [n.path for n in e.neighbors("notes/Beta").inlinks] == ["notes/Alpha.md"]
    t = e.traverse("notes/Alpha", depth=1)
    assert t.start == "notes/Alpha.md" and {n["path"] for n in t.nodes} == {"notes/Alpha.md", "notes/Beta.md"}
    m = e.move("notes/Beta", "notes/Beta2.md")
    assert (m.src, m.rewritten_links) == ("notes/Beta.md", 1) and (v / "notes/Beta2.md").is_file()
    assert e.delete("notes/Beta2").path == "notes/Beta2.md" and not (v / "notes/Beta2.md").exists()
    with pytest.raises(EngineError, match="is a folder"):
        e.delete("Gamma")  # a delete never falls back from the folder to Gamma.md
    assert (v / "Gamma.md").is_file()


def test_a_missing_note_is_an_error_with_a_suggestion(open_engine, tmp_path):
    v = tmp_path / "v"
    _write(v, "projects/Roadmap 2026.md", "# Roadmap\n")
    _write(v, "a/Plan.md", "x\n")
    _write(v, "b/Plan.md", "y\n")
    e = open_engine(v)
    e.index()
    # a read takes the name a link would use, when one note has it; a write never guesses: it names the note
    assert e.read("Roadmap 2026").path == "projects/Roadmap 2026.md"
    with pytest.raises(EngineError) as exc:
        e.edit("Roadmap 2026", "a", "b")
    assert str(exc.value) == "no such note: Roadmap 2026 — did you mean projects/Roadmap 2026.md?"
    with pytest.raises(EngineError, match=r"no such note: projects/Roadmap 2062 — did you mean projects/Roadmap 2026\.md\?"):
        e.edit("projects/Roadmap 2062", "a", "b")
    with pytest.raises(EngineError, match=r"did you mean a/Plan\.md or b/Plan\.md\?"):
        e.traverse("plan")
    for call in (lambda: e.traverse("nowhere/at all"), lambda: e.neighbors("nothing"),
                 lambda: e.frontmatter_read("zzz"), lambda: e.delete("nope.md"), lambda: e.move("nope", "x.md")):
        with pytest.raises(EngineError, match="no such note"):
            call()
    assert not e.stat("nothing").exists  # stat answers "does it exist", it does not raise


# -- 3. frontmatter problems where the user looks ------------------------------------------------------------

BAD_YAML = "---\ntitle: ok\ntags: [one, two\nstatus: draft\n---\n# Broken\n\nbody words\n"
UNCLOSED = "---\ntitle: forgot the end\n\n# Unclosed\n\nmore words\n"


def test_frontmatter_warnings_with_true_lines_in_stat_and_health_check(open_engine, tmp_path):
    v = tmp_path / "v"
    _write(v, "bad.md", BAD_YAML)
    _write(v, "sub/unclosed.md", UNCLOSED)
    _write(v, "good.md", "---\ntitle: fine\n---\nok\n")
    e = open_engine(v)
    e.index()
    w = e.stat("bad").warning
    assert w.startswith("invalid YAML at line 4, column 7:") and "(line 3)" in w  # `[one, two` opened on line 3
    assert e.stat("sub/unclosed.md").warning.startswith("frontmatter not closed")
    assert e.stat("good").warning is None
    assert e.search("words", mode="keyword").hits  # both bodies still searchable
    hc = e.health_check()
    assert hc["file_warnings"]["count"] == 2
    assert [f["path"] for f in hc["file_warnings"]["first"]] == ["bad.md", "sub/unclosed.md"]
    _write(v, "bad.md", BAD_YAML.replace("two\n", "two]\n"))  # fixed: the warning goes away
    e.index_paths(["bad.md"])
    assert e.stat("bad.md").warning is None and e.health_check()["file_warnings"]["count"] == 1


def test_refresh_summary_lists_frontmatter_warnings_and_ambiguous_links(tmp_path, capsys, monkeypatch):
    from reme_tui.cli import main

    v = tmp_path / "v"
    _write(v, "bad.md", BAD_YAML)
    for i in range(20):
        _write(v, f"more/n{i:02d}.md", UNCLOSED)
    _write(v, "x/Dup.md", "x\n")
    _write(v, "y/Dup.md", "y\n")
    _write(v, "q/links.md", "[[Dup]]\n")
    monkeypatch.setenv("REME_TIMEZONE", "UTC")
    rc = main(["--refresh", "--vault", str(v), "--state-dir", str(tmp_path / "st"), "--embedder", "none",
               "--no-vectors"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "problems   21 file(s) with a frontmatter warning  1 ambiguous link(s)" in out
    assert "  bad.md: invalid YAML at line 4, column 7:" in out
    assert "  more/n00.md: frontmatter not closed" in out and "more/n14.md" not in out  # the first 15 files
    assert "… and 6 more" in out
    assert "  q/links.md:1 [[Dup]] → x/Dup.md, y/Dup.md" in out


# -- 6. symlinks ---------------------------------------------------------------------------------------------


def test_a_symlinked_folder_is_reported_not_silently_ignored(open_engine, tmp_path):
    """A folder symlink (outside or inside the vault) is not entered — no loops, nothing from outside — and the
    skip says so where the user looks (health_check), once, stable across syncs."""
    v = tmp_path / "v"
    _write(v, "notes/real.md", "# Real\n\nzebrafish habitat\n")
    elsewhere = tmp_path / "elsewhere"
    _write(elsewhere, "far.md", "# Far\n\nnarwhal tusk\n")
    os.symlink(elsewhere, v / "linked")
    os.symlink("../notes", v / "notes" / "loop")
    e = open_engine(v)
    e.index()
    assert not e.search("narwhal", mode="keyword").hits
    skipped = {s["path"]: s["reason"] for s in e.health_check()["skipped"]}
    assert skipped == {"linked": "folder symlink: not followed, its notes are not indexed",
                       "notes/loop": "folder symlink: not followed, its notes are not indexed"}
    assert e.index().added == 0
    assert len(e.health_check()["skipped"]) == 2


def test_a_symlinked_note_is_indexed_once_and_nothing_outside_the_vault_shows(open_engine, tmp_path):
    v = tmp_path / "v"
    _write(v, "notes/real.md", "# Real\n\nzebrafish habitat\n")
    os.symlink("real.md", v / "notes/link.md")  # a second name for a note the scan indexes: skipped
    _write(v, ".hidden/h.md", "# Hidden\n\nquokka burrow\n")
    os.symlink(".hidden/h.md", v / "visible.md")  # the only way to a hidden file: indexed under the link
    outside = tmp_path / "outside.md"
    outside.write_text("# Outside\n\n" + "secret " * 500, encoding="utf-8")
    os.symlink(outside, v / "out.md")
    e = open_engine(v)
    e.index()
    hits = e.search("zebrafish", mode="keyword").hits
    assert [h.path for h in hits] == ["notes/real.md"]
    assert [h.path for h in e.search("quokka", mode="keyword").hits] == ["visible.md"]
    assert not e.search("secret", mode="keyword").hits
    st = e.stat("notes/link.md")
    assert not st.indexed and st.skipped_reason == "symlink to notes/real.md: indexed there"
    skipped = {s["path"]: s["reason"] for s in e.health_check()["skipped"]}
    assert skipped == {"notes/link.md": "symlink to notes/real.md: indexed there",
                       "out.md": "symlink leaves the vault"}
    assert e.index().added == 0  # stable: a second scan changes nothing
    # the watcher's path-by-path sync follows the same rule
    os.symlink("real.md", v / "notes/link2.md")
    r = e.index_paths(["notes/link2.md"])
    assert r.added == 0 and {"path": "notes/link2.md", "reason": "symlink to notes/real.md: indexed there"} in r.skipped
    assert e.store.file_info("notes/link2.md") is None
    # list shows the outside link by name only: no size, no time, not even whether it is a folder
    for recursive in (False, True):
        entries = {x["path"]: x for x in e.list("", recursive=recursive)["entries"]}
        assert entries["out.md"] == {"path": "out.md", "is_dir": False, "size": None, "mtime": None,
                                     "outside_vault": True}
        assert entries["visible.md"]["size"] == len("# Hidden\n\nquokka burrow\n")
    with pytest.raises(EngineError, match="leaves the vault"):
        e.stat("out.md")
