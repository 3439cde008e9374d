"""One number for "chunks with a vector": `--refresh`'s vectors line, `job health_check` and the engine's status (the
app's status line) agree on a vault where some chunks get no vector by design (too little text), and the refresh
line says how many get none instead of counting them as having one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys


def _env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REME_", "ANTHROPIC_", "OPENAI_"))}
    env.update(REME_STATE_DIR=str(tmp_path / "st"), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CONFIG_HOME=str(tmp_path / "config"), REME_NO_SERVER="1", COLUMNS="160")
    if "REME_MODEL_CACHE" in os.environ:
        env["REME_MODEL_CACHE"] = os.environ["REME_MODEL_CACHE"]
    return env


def test_refresh_health_and_status_count_the_same_vectors(tmp_path, make_engine):
    v = tmp_path / "v"
    v.mkdir()
    for i in range(4):
        (v / f"note{i}.md").write_text(f"# Note {i}\n\nA paragraph about otters and river number {i} in spring.\n",
                                       encoding="utf-8")
    for i in range(3):  # nothing to embed: a lone dash under a heading
        (v / f"stub{i}.md").write_text("-\n", encoding="utf-8")
    env = _env(tmp_path)
    r = subprocess.run([sys.executable, "-m", "reme_tui.cli", "--refresh", "--vault", str(v)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("vectors "))
    m = re.match(r"vectors\s+(\d+) of (\d+) chunks have a vector, (\d+) get none", line)
    assert m, line
    have, total, none = map(int, m.groups())
    assert none == 3 and have + none == total, line
    h = subprocess.run([sys.executable, "-m", "reme_tui.cli", "--vault", str(v), "job", "health_check"], env=env,
                       capture_output=True, text=True, timeout=300)
    health = json.loads(h.stdout)
    assert health["index"]["chunks_with_vectors"] == have and health["index"]["chunks"] == total, health["index"]
    assert f"ok ({have} vectors" in health["checks"]["vectors"], health["checks"]
    e = make_engine(v, state_dir=str(tmp_path / "st"))
    st = e.status()
    assert st["vectors"] == st["chunks_with_vectors"] == have, st
