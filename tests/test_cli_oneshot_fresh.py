"""A one-shot ``job search`` with no app or ``--serve`` running finds a note saved since the last index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _job(vault: Path, state: Path, *args: str) -> dict:
    env = {**os.environ, "REME_VAULT": str(vault), "REME_STATE_DIR": str(state), "REME_EMBEDDER": "none"}
    p = subprocess.run([sys.executable, "-m", "reme_tui.cli", "job", *args, "--no-server"], capture_output=True,
                       text=True, env=env, cwd=REPO, timeout=120)
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_note_saved_after_the_last_index_is_found_by_a_one_shot_search(tmp_path):
    vault, state = tmp_path / "v", tmp_path / "state"
    (vault / "digest/wiki").mkdir(parents=True)
    (vault / "digest/wiki/a.md").write_text("# A\n\nplain words\n", encoding="utf-8")
    first = _job(vault, state, "search", "query=plain", "mode=keyword")
    assert first["success"] and first["hits"]
    (vault / "digest/wiki/new.md").write_text("# New\n\nzebrafishalpha arrived later\n", encoding="utf-8")
    got = _job(vault, state, "search", "query=zebrafishalpha", "mode=keyword")
    assert got["success"] and [h["path"] for h in got["hits"]] == ["digest/wiki/new.md"]
