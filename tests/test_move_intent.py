"""A move killed at any point ends complete after the next start: no linking note is left half rewritten."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reme_engine.markdown.links import parse_links

N_LINKERS = 12


def _vault(root: Path) -> Path:
    v = root / "v"
    (v / "notes").mkdir(parents=True)
    (v / "notes" / "alpha.md").write_text("---\naliases: [Alpha Note]\n---\n# Alpha\nsee [[alpha#Alpha]]\n")
    for i in range(N_LINKERS):
        (v / "notes" / f"l{i:02d}.md").write_text(
            f"# Linker {i}\n\n- plain [[alpha]]\n- anchored [[notes/alpha#Alpha|the alpha]]\n- alias [[Alpha Note]]\n")
    return v


def _job(vault: Path, state: Path, *args: str, crash_at: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, REME_STATE_DIR=str(state), REME_EMBEDDER="none")
    env.pop("REME_CRASH_AT", None)
    if crash_at:
        env["REME_CRASH_AT"] = crash_at
    return subprocess.run([sys.executable, "-m", "reme_tui.cli", "--vault", str(vault), "job", *args],
                          env=env, capture_output=True, text=True, timeout=120)


def _targets(vault: Path) -> dict[str, list[str]]:
    out = {}
    for p in sorted((vault / "notes").glob("*.md")):
        out[p.name] = [lk.target for lk in parse_links(p.read_text())]
    return out


@pytest.fixture(scope="module")
def clean_move(tmp_path_factory):
    root = tmp_path_factory.mktemp("clean")
    v = _vault(root)
    r = _job(v, root / "state", "move", "src=notes/alpha.md", "dst=notes/gamma.md")
    assert r.returncode == 0, r.stderr
    return _targets(v)


@pytest.mark.parametrize("point", ["move.after_rename", "move.after_rewrite_0", "move.after_rewrite_5"])
def test_move_killed_midway_is_finished_by_the_next_start(tmp_path, clean_move, point):
    v = _vault(tmp_path)
    state = tmp_path / "state"
    assert _job(v, state, "reindex").returncode == 0
    r = _job(v, state, "move", "src=notes/alpha.md", "dst=notes/gamma.md", crash_at=point)
    assert r.returncode == -9, (r.returncode, r.stdout, r.stderr)
    assert (v / "notes" / "gamma.md").exists() and not (v / "notes" / "alpha.md").exists()
    assert list((state / "intents").glob("*.json")), "the intent record must survive the crash"
    # the next start finishes the move and says so
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine

    with Engine.open(load_settings({"vault": str(v), "state_dir": str(state), "embedder": {"kind": "none"}},
                                   env={})) as eng:
        assert len(eng.recovered) == 1 and "finished an interrupted move" in eng.recovered[0], eng.recovered
        inbound = {n["path"] for n in eng.traverse("notes/gamma.md", 1, "in").nodes} - {"notes/gamma.md"}
    assert not list((state / "intents").glob("*.json"))
    assert _targets(v) == clean_move
    assert inbound == {f"notes/l{i:02d}.md" for i in range(N_LINKERS)}


def test_move_killed_before_the_rename_changes_nothing(tmp_path, monkeypatch):
    """An intent whose file never moved is dropped at the next start and nothing is rewritten."""
    from reme_engine.vault.intent import MoveIntent

    v = _vault(tmp_path)
    state = tmp_path / "state"
    assert _job(v, state, "reindex").returncode == 0
    before = _targets(v)
    intent = MoveIntent.begin(state, "notes/alpha.md", "notes/gamma.md", ["notes/l00.md"], [])
    intent.release()  # as a killed process would
    assert _job(v, state, "health_check").returncode == 0
    assert _targets(v) == before and (v / "notes" / "alpha.md").exists()
    assert not list((state / "intents").glob("*.json"))


def test_a_running_move_is_left_alone(tmp_path, make_engine):
    """An intent still locked by a live process is not 'recovered' by a second engine opening the vault."""
    from reme_engine.vault.intent import MoveIntent

    v = _vault(tmp_path)
    eng = make_engine(v, embed=False)
    held = MoveIntent.begin(eng.state_dir, "notes/alpha.md", "notes/gamma.md", [], [])
    try:
        assert MoveIntent.interrupted(eng.state_dir) == []
    finally:
        held.release()
    found = MoveIntent.interrupted(eng.state_dir)
    assert [i.src for i in found] == ["notes/alpha.md"]
    for i in found:
        i.release()


def test_link_rewrites_keep_an_app_note_the_apps_and_a_user_note_the_users(tmp_path, make_engine):
    """A move rewrites links inside an app-created digest node and inside a user's note; the first stays the
    app's (re-stamped), the second stays the user's (never stamped)."""
    from reme_engine.vault.provenance import note_ownership, stamp

    v = _vault(tmp_path)
    (v / "notes" / "node.md").write_text(stamp("---\nname: node\n---\n# Node\n\nsee [[alpha]]\n"))
    assert note_ownership((v / "notes" / "node.md").read_text()).owner == "app"
    eng = make_engine(v, embed=False)
    eng.index(vectors=False)
    res = eng.move("notes/alpha.md", "notes/gamma.md")
    assert "notes/node.md" in res.rewritten_files and "notes/l00.md" in res.rewritten_files
    node = (v / "notes" / "node.md").read_text()
    assert "[[gamma]]" in node and note_ownership(node).owner == "app"
    linker = (v / "notes" / "l00.md").read_text()
    assert "[[gamma]]" in linker and note_ownership(linker).owner == "user" and "reme_provenance" not in linker


def test_a_starting_move_is_never_taken_for_an_interrupted_one(tmp_path, monkeypatch):
    """Another process opening the vault at the instant a move writes its intent (before it locks it) must not see
    an unlocked record: it would "finish" a move that is just starting (and delete its record, so a crash of the
    real move would be left half done). The record becomes visible only once it is locked."""
    from reme_engine.vault import intent as I

    state = tmp_path / "state"
    seen: list[list] = []
    real = I.atomic_write

    def write_then_look(path, text, **kw):
        sha = real(path, text, **kw)
        found = I.MoveIntent.interrupted(state)  # what a second process's recovery sees right now
        seen.append([f.path.name for f in found])
        for f in found:
            f.release()
        return sha

    monkeypatch.setattr(I, "atomic_write", write_then_look)
    with I.MoveIntent.begin(state, "a.md", "b.md", ["l.md"], []) as intent:
        assert seen == [[]], seen
        assert intent.path.suffix == ".json" and intent.path.exists()
        assert I.MoveIntent.interrupted(state) == []  # locked: a running move is left alone
        intent.done()
    assert list((state / I.INTENTS_DIR).iterdir()) == []
