"""The app's start registers a job runner for its local socket without importing the job table before the first
paint; the first request over the socket imports it and answers like ``run_job``."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_app_socket_runner_imports_the_job_table_on_first_request(tmp_path):
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "a.md").write_text("# Apples\n\napples and pears\n", encoding="utf-8")
    code = textwrap.dedent(f"""
        import json, sys
        from reme_tui import cli
        cli._register_lazy_job_runner()
        from reme_engine.config import load_settings
        from reme_engine.engine import Engine
        from reme_engine.local_server import ask, settings_identity
        assert "reme_engine.jobs" not in sys.modules, "imported before the first request"
        s = load_settings({{"vault": {str(vault)!r}, "state_dir": {str(tmp_path / "state")!r},
                           "embedder": {{"kind": "none"}}}}, env={{}})
        with Engine.open(s) as eng:
            eng.index(vectors=False)
            srv = eng.start_local_server()
            assert srv is not None and srv.running
            got = ask(eng.state_dir, "read", {{"path": "a.md"}}, settings_identity(s))
            assert "reme_engine.jobs" in sys.modules
            from reme_engine.jobs import run_job
            assert got == json.loads(json.dumps(run_job(eng, "read", {{"path": "a.md"}})))
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
