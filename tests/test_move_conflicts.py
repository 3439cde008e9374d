"""`reme-tui job move` racing another program that appends to a note linking to the moved note: the move either
rewrites that link (read again and retried) or names the note in ``conflicts`` with exit 1; the other program's
lines are all kept, in order, either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from reme_engine.markdown.links import parse_links

#: The other program: a separate process appending a numbered line to a note, starting when the move's intent
#: record appears (the move has begun) and going on for ``seconds`` (0: until killed), then writing ``done``.
APPENDER = textwrap.dedent("""
    import os, sys, time
    note, intents, every, seconds, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    while not (os.path.isdir(intents) and any(n.endswith(".json") for n in os.listdir(intents))):
        time.sleep(0.002)
    end = time.monotonic() + seconds if seconds else None
    n = 0
    while end is None or time.monotonic() < end:
        with open(note, "a", encoding="utf-8") as fh:
            fh.write(f"shell line {n}\\n")
        n += 1
        with open(out + ".tmp", "w") as fh:
            fh.write(str(n))
        os.replace(out + ".tmp", out)
        time.sleep(every)
    with open(out + ".done", "w") as fh:
        fh.write(str(n))
""")


def _vault(root: Path) -> Path:
    v = root / "v"
    (v / "notes").mkdir(parents=True)
    (v / "notes" / "alpha.md").write_text("# Alpha\n\nthe moved note\n", encoding="utf-8")
    (v / "notes" / "busy.md").write_text("# Busy\n\nsee [[alpha]]\n", encoding="utf-8")
    (v / "notes" / "calm.md").write_text("# Calm\n\nalso [[alpha]]\n", encoding="utf-8")
    return v


def _cli(vault: Path, state: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, REME_STATE_DIR=str(state), REME_EMBEDDER="none", REME_NO_SERVER="1")
    return subprocess.run([sys.executable, "-m", "reme_tui.cli", "--vault", str(vault), "job", *args],
                          env=env, capture_output=True, text=True, timeout=180)


def _start_appender(tmp_path: Path, note: Path, state: Path, every: float, seconds: float):
    count = tmp_path / "appended"
    proc = subprocess.Popen([sys.executable, "-c", APPENDER, str(note), str(state / "intents"), str(every),
                             str(seconds), str(count)])
    return proc, count


def _shell_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("shell line")]


def _targets(p: Path) -> list[str]:
    return [lk.target for lk in parse_links(p.read_text(encoding="utf-8"))]


def test_a_move_racing_an_appender_that_never_stops_names_the_note_or_rewrites_it(tmp_path):
    v, state = _vault(tmp_path), tmp_path / "state"
    assert _cli(v, state, "reindex").returncode == 0
    busy = v / "notes" / "busy.md"
    proc, count = _start_appender(tmp_path, busy, state, every=0.005, seconds=0)  # never settles
    try:
        r = _cli(v, state, "move", "src=notes/alpha.md", "dst=notes/gamma.md")
    finally:
        proc.kill()
        proc.wait()
    out = json.loads(r.stdout)
    text = busy.read_text(encoding="utf-8")
    n = int(count.read_text())
    assert n > 0 and _shell_lines(text) == [f"shell line {i}" for i in range(n)], (n, text[-300:])
    if r.returncode == 0:  # the appender stalled long enough (a loaded machine) for a retry to land: rewritten
        assert out["success"] and out["conflicts"] == [] and _targets(busy) == ["gamma"], out
    else:  # the usual outcome: said, exit 1, the note left exactly as the appender made it
        assert r.returncode == 1, (r.returncode, out, r.stderr)
        assert out["success"] is False and out["conflicts"] == ["notes/busy.md"], out
        assert "notes/busy.md (another program kept changing it" in out["error"] and "not rewritten" in out["error"]
        assert out["conflict_reasons"] == {"notes/busy.md": "another program kept changing it while the move "
                                                            "rewrote it"}, out
        assert text.startswith("# Busy\n\nsee [[alpha]]\n"), text[:80]
    assert "notes/calm.md" in out["rewritten_files"] and _targets(v / "notes" / "calm.md") == ["gamma"]
    assert (v / "notes" / "gamma.md").exists() and not (v / "notes" / "alpha.md").exists()
    # the move is one revertible run that says which note kept its old link
    runs = json.loads(_cli(v, state, "dream_log", "limit=5").stdout)
    assert any(run.get("run_id") == out["run_id"] for run in runs.get("runs", [])), runs


def test_a_move_racing_a_burst_of_appends_rewrites_the_link_and_keeps_every_line(tmp_path):
    v, state = _vault(tmp_path), tmp_path / "state"
    assert _cli(v, state, "reindex").returncode == 0
    busy = v / "notes" / "busy.md"
    # 1.5 s of appends every 5 ms: longer than a read waits for quiet (1 s), shorter than the retries (3 s)
    proc, count = _start_appender(tmp_path, busy, state, every=0.005, seconds=1.5)
    try:
        r = _cli(v, state, "move", "src=notes/alpha.md", "dst=notes/gamma.md")
        proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["success"] is True and out["conflicts"] == [], (out, r.stderr)
    assert sorted(out["rewritten_files"]) == ["notes/busy.md", "notes/calm.md"], out
    n = int(Path(str(count) + ".done").read_text())
    text = busy.read_text(encoding="utf-8")
    assert n > 0 and _shell_lines(text) == [f"shell line {i}" for i in range(n)], (n, text[-300:])
    assert _targets(busy) == ["gamma"], text[:80]
