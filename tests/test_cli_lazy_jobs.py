"""``Engine.start_local_server`` needs no caller to import the job table: the server starts without it (so the
app's first paint never pays for it) and the first request over the socket imports it and answers like
``run_job``. A real engine on a temp vault, in a fresh interpreter so nothing imported the table before."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_local_server_imports_the_job_table_itself_at_the_first_request(tmp_path):
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "a.md").write_text("# Apples\n\napples and pears\n", encoding="utf-8")
    code = textwrap.dedent(f"""
        import json, sys
        from reme_engine.config import load_settings
        from reme_engine.engine import Engine
        from reme_engine.local_server import ask, settings_identity
        s = load_settings({{"vault": {str(vault)!r}, "state_dir": {str(tmp_path / "state")!r},
                           "embedder": {{"kind": "none"}}}}, env={{}})
        with Engine.open(s) as eng:
            eng.index(vectors=False)
            srv = eng.start_local_server()
            assert srv is not None and srv.running, srv
            assert "reme_engine.jobs" not in sys.modules, "imported before the first request"
            got = ask(eng.state_dir, "read", {{"path": "a.md"}}, settings_identity(s))
            assert "reme_engine.jobs" in sys.modules
            from reme_engine.jobs import run_job
            assert got == json.loads(json.dumps(run_job(eng, "read", {{"path": "a.md"}}))), got
            # a search too (the table's runner, registered by its import, answers from now on)
            hits = ask(eng.state_dir, "search", {{"query": "pears", "mode": "keyword"}}, settings_identity(s))
            assert hits["success"] and [h["path"] for h in hits["hits"]] == ["a.md"], hits
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_the_cli_entry_point_does_not_import_the_job_table_for_the_app():
    """`reme-tui` (the app) reaches the table only through the socket's first request: importing the CLI module
    loads neither it nor the engine."""
    code = ("import sys\nfrom reme_tui import cli\n"
            "assert 'reme_engine.jobs' not in sys.modules and 'reme_engine.engine' not in sys.modules\nprint('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
