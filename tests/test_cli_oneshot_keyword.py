"""A one-shot ``reme-tui job search mode=keyword`` scores through SQLite FTS5 (no in-memory BM25 scorer to build):
the same hits in the same order as a long-running engine's in-memory scorer, scores within 1e-12 relative."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

QUERIES = ["光伏 产业链", "memory", "知识 管理 memory"]


def _one_shot(args: list[str], env: dict) -> tuple[int, dict]:
    r = subprocess.run([sys.executable, "-m", "reme_tui.cli", "job", *args], env=env, capture_output=True,
                       text=True, timeout=300)
    return r.returncode, json.loads(r.stdout)


def test_one_shot_keyword_search_ranks_as_the_in_memory_scorer(tmp_path, demo_vault, make_engine):
    from reme_engine.jobs import run_job

    env = {**os.environ, "REME_VAULT": str(demo_vault), "REME_STATE_DIR": str(tmp_path / "state"),
           "REME_EMBEDDER": "none"}
    code, _ = _one_shot(["reindex", "vectors=false"], env)
    assert code == 0
    eng = make_engine(demo_vault, embed=False)
    eng.index(vectors=False)
    assert eng.searcher.memory_bm25  # a long-running engine keeps the in-memory scorer
    compared = 0
    for q in QUERIES:
        code, got = _one_shot(["search", f"query={q}", "mode=keyword", "limit=20", "--no-server"], env)
        want = run_job(eng, "search", {"query": q, "mode": "keyword", "limit": "20"})
        assert code == 0 and got["success"] and want["success"]
        assert [h["path"] for h in got["hits"]] == [h["path"] for h in want["hits"]], q
        for a, b in zip(got["hits"], want["hits"]):
            assert (a["start_line"], a["keyword_rank"]) == (b["start_line"], b["keyword_rank"])
            assert a["score"] == pytest.approx(b["score"], rel=1e-12, abs=1e-15)
            assert a["keyword_score"] == pytest.approx(b["keyword_score"], rel=1e-12, abs=1e-15)
        compared += len(got["hits"])
    assert compared >= 10
    # nor does such a process import numpy (no in-memory scorer, no vector module): its start-up is the job's
    code = ("import sys; from reme_tui.cli import main; sys.argv[0] = 'reme-tui'; rc = main();"
            " print('numpy' in sys.modules, file=sys.stderr); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, "job", "search", "query=光伏 产业链", "mode=keyword",
                        "--no-server"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and json.loads(r.stdout)["hits"]
    assert r.stderr.strip().splitlines()[-1] == "False"


def test_one_shot_keyword_errors_and_exit_codes_stay(tmp_path, demo_vault):
    env = {**os.environ, "REME_VAULT": str(demo_vault), "REME_STATE_DIR": str(tmp_path / "state"),
           "REME_EMBEDDER": "none"}
    code, out = _one_shot(["search", "mode=keyword", "--no-server"], env)  # no query: a usage error
    assert code == 2 and out["success"] is False and out.get("usage_error") is True
    code, out = _one_shot(["search", "query=memory", "mode=keyword", "--no-server"], env)
    assert code == 0 and out["success"] and out["mode"] == "keyword"
