"""Engine jobs through `run_job` and the real `reme-tui job` / `--refresh` binary."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reme_engine.jobs import exit_code, run_job


@pytest.fixture
def eng(make_engine, demo_vault):
    e = make_engine(demo_vault, embed=False)
    e.index()
    return e


def test_help_lists_every_job_with_params():
    res = run_job(None, "help", {})
    names = {j["name"] for j in res["jobs"]}
    for n in ("search", "traverse", "read", "write", "edit", "delete", "move", "list", "stat", "frontmatter_read",
              "frontmatter_update", "frontmatter_delete", "daily_create", "daily_list", "daily_reindex", "reindex",
              "proactive_read", "health_check", "version"):
        assert n in names
    search = next(j for j in res["jobs"] if j["name"] == "search")
    assert {"query", "limit", "mode", "path_prefix"} <= {p["name"] for p in search["params"]}


def test_unknown_job_and_bad_params(eng):
    assert run_job(eng, "nope", {})["success"] is False
    r = run_job(eng, "search", {"query": "x", "limit": "many"})
    assert not r["success"] and "limit" in r["error"]
    r = run_job(eng, "search", {"qurey": "x"})
    assert not r["success"] and "unknown parameter" in r["error"]
    r = run_job(eng, "read", {})
    assert not r["success"] and "missing parameter path" in r["error"]


def test_search_job_shape(eng):
    r = run_job(eng, "search", {"query": "光伏", "limit": "3", "mode": "keyword", "render": "true"})
    assert r["success"] and 0 < len(r["hits"]) <= 3
    h = r["hits"][0]
    for key in ("path", "start_line", "end_line", "score", "keyword_rank", "keyword_score", "vector_rank",
                "vector_score"):
        assert key in h
    assert "==========" in r["text"]


def test_read_write_edit_roundtrip(eng):
    r = run_job(eng, "write", {"path": "digest/wiki/new-note.md", "content": "# 新笔记\n\nfirst line\nsecond\n"})
    assert r["success"] and r["created"]
    assert run_job(eng, "search", {"query": "新笔记", "mode": "keyword"})["hits"][0]["path"] == "digest/wiki/new-note.md"
    r = run_job(eng, "read", {"path": "digest/wiki/new-note.md", "start_line": "3", "end_line": "4"})
    assert r["text"] == "first line\nsecond\n" and r["total_lines"] == 4
    r = run_job(eng, "edit", {"path": "digest/wiki/new-note.md", "old": "second", "new": "zweite"})
    assert r["success"]
    assert "zweite" in (eng.vault / "digest/wiki/new-note.md").read_text()
    r = run_job(eng, "edit", {"path": "digest/wiki/new-note.md", "old": "absent", "new": "x"})
    assert not r["success"] and "not found" in r["error"]
    r = run_job(eng, "write", {"path": "digest/wiki/new-note.md", "content": "x", "overwrite": "false"})
    assert not r["success"] and "exists" in r["error"]
    sha = run_job(eng, "read", {"path": "digest/wiki/new-note.md"})["sha"]
    (eng.vault / "digest/wiki/new-note.md").write_text("user changed it")
    r = run_job(eng, "write", {"path": "digest/wiki/new-note.md", "content": "app text", "expected_sha": sha})
    assert not r["success"] and "changed on disk" in r["error"]
    assert (eng.vault / "digest/wiki/new-note.md").read_text() == "user changed it"


@pytest.mark.parametrize("job, params", [
    ("write", {"path": "../escape.md", "content": "x"}),
    ("write", {"path": "/etc/x.md", "content": "x"}),
    ("delete", {"path": "daily"}),
    ("delete", {"path": "digest/wiki"}),
    ("move", {"src": "digest", "dst": "elsewhere"}),
    ("read", {"path": "a/../../b.md"}),
])
def test_mutations_refuse_escapes_and_layers(eng, job, params):
    r = run_job(eng, job, params)
    assert not r["success"] and r["error"]
    assert not (eng.vault.parent / "escape.md").exists()
    assert (eng.vault / "daily").is_dir() and (eng.vault / "digest/wiki").is_dir()


def _notes_linking_to(eng, path):
    return {n.path for n in eng.neighbors(path, None, None).inlinks}


def test_move_rewrites_inbound_links(eng):
    # pick a digest note with inbound links
    target = None
    for p in sorted((eng.vault / "digest").rglob("*.md")):
        rel = p.relative_to(eng.vault).as_posix()
        if _notes_linking_to(eng, rel):
            target = rel
            break
    assert target
    linkers = _notes_linking_to(eng, target)
    new = target.replace(".md", "-moved.md")
    r = run_job(eng, "move", {"src": target, "dst": new})
    assert r["success"], r
    assert r["rewritten_links"] >= 1 and not r["conflicts"]
    assert not (eng.vault / target).exists() and (eng.vault / new).exists()
    assert _notes_linking_to(eng, new) == linkers
    r = run_job(eng, "traverse", {"path": target, "direction": "in"})  # the old name is gone: an error, no node
    assert not r["success"] and r["error"].startswith(f"no such note: {target} — did you mean {new}")
    assert eng.store.conn.execute("SELECT count(*) FROM links WHERE resolved = ?", (target,)).fetchone()[0] == 0
    r = run_job(eng, "move", {"src": new, "dst": "daily/2026-11-28.md"})
    assert not r["success"] and "exists" in r["error"]


def test_delete_reports_surviving_inlinks(eng):
    target = next(p.relative_to(eng.vault).as_posix() for p in sorted((eng.vault / "digest").rglob("*.md"))
                  if _notes_linking_to(eng, p.relative_to(eng.vault).as_posix()))
    linkers = _notes_linking_to(eng, target)
    r = run_job(eng, "delete", {"path": target})
    assert r["success"] and {n["path"] for n in r["surviving_inlinks"]} == linkers
    assert not (eng.vault / target).exists()
    assert eng.store.file_info(target) is None


def test_frontmatter_jobs_keep_order_and_unknown_keys(eng):
    p = eng.vault / "digest/wiki/fm.md"
    p.write_text("---\nname: FM\nzeta: 1\ncustom: {a: 1}\n---\nbody\n")
    r = run_job(eng, "frontmatter_update", {"path": "digest/wiki/fm.md", "set.description": "desc", "set.name": "N"})
    assert r["success"], r
    text = p.read_text()
    assert text.index("name:") < text.index("zeta:") < text.index("custom:") < text.index("description:")
    assert text.endswith("---\nbody\n")
    r = run_job(eng, "frontmatter_delete", {"path": "digest/wiki/fm.md", "keys": "zeta,custom"})
    assert r["success"]
    fm = run_job(eng, "frontmatter_read", {"path": "digest/wiki/fm.md"})["frontmatter"]
    assert fm == {"name": "N", "description": "desc"}
    assert eng.store.file_info("digest/wiki/fm.md")["description"] == "desc"


def test_traverse_list_stat_daily_proactive_health(eng):
    r = run_job(eng, "traverse", {"path": "README.md", "depth": "2", "direction": "out"})
    assert r["success"] and r["nodes"][0]["path"] == "README.md"
    assert run_job(eng, "traverse", {"path": "README.md", "direction": "sideways"})["success"] is False
    r = run_job(eng, "list", {"path": "digest"})
    assert {e["path"] for e in r["entries"]} >= {"digest/wiki", "digest/personal", "digest/procedure"}
    r = run_job(eng, "stat", {"path": "README.md"})
    assert r["exists"] and r["indexed"] and r["chunks"] >= 1
    r = run_job(eng, "daily_create", {"date": "2026-12-01"})
    assert r["success"] and (eng.vault / "daily/2026-12-01.md").exists()
    assert run_job(eng, "daily_create", {"date": "2026-12-01"})["page_created"] is False
    assert run_job(eng, "daily_create", {"date": "2026-02-30"})["success"] is False
    r = run_job(eng, "daily_list", {"date": "2026-11-28"})
    assert r["success"] and r["result"]
    r = run_job(eng, "proactive_read", {"date": "2026-11-28", "include_content": "false"})
    assert r["success"] and r["topics"] and "content" not in r
    r = run_job(eng, "proactive_read", {"date": "2020-01-01"})
    assert r["success"] and r["skipped"] and r["topics"] == []
    h = run_job(eng, "health_check", {})
    assert h["ok"] and h["checks"]["store"].startswith("ok")
    assert h["file_warnings"] == {"count": 0, "first": []} and h["ambiguous_links"]["count"] >= 0


def _cli(args, env, cwd=None):
    return subprocess.run([sys.executable, "-m", "reme_tui.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300, cwd=cwd)


@pytest.fixture
def cli_env(tmp_path):
    env = dict(os.environ)
    env["REME_STATE_DIR"] = str(tmp_path / "state")
    env["REME_EMBEDDER"] = "none"
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    return env


def test_cli_refresh_and_job(demo_vault, cli_env):
    r = _cli(["--refresh", "--vault", str(demo_vault)], cli_env)
    assert r.returncode == 0, r.stderr
    assert "files      scanned" in r.stdout and "chunks" in r.stdout and "time" in r.stdout
    r = _cli(["--vault", str(demo_vault), "job", "search", "query=光伏", "mode=keyword", "limit=2"], cli_env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["success"] and len(d["hits"]) == 2
    r = _cli(["--vault", str(demo_vault), "job", "read", "path=../x"], cli_env)
    assert r.returncode == 1 and json.loads(r.stdout)["success"] is False
    r = _cli(["job", "version"], cli_env)
    assert r.returncode == 0 and json.loads(r.stdout)["version"]


def test_cli_refresh_fails_cleanly(tmp_path, cli_env):
    r = _cli(["--refresh", "--vault", str(tmp_path / "missing")], cli_env)
    assert r.returncode != 0 and "does not exist" in r.stderr


def test_cli_opens_demo_vault_when_none_configured(cli_env):
    r = _cli(["job", "stat", "path=README.md"], cli_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["exists"]
    assert (Path(cli_env["XDG_DATA_HOME"]) / "reme-tui" / "demo-vault" / "README.md").exists()


def test_cli_accepts_flags_after_the_job_and_survives_a_closed_pipe(demo_vault, cli_env):
    r = _cli(["job", "search", "query=光伏", "mode=keyword", "--vault", str(demo_vault)], cli_env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["hits"]
    p = subprocess.run(f"{sys.executable} -m reme_tui.cli --vault '{demo_vault}' job help | head -c 10",
                       shell=True, env=cli_env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr


def test_read_rejects_reversed_ranges(eng):
    r = run_job(eng, "read", {"path": "README.md", "start_line": "30", "end_line": "10"})
    assert not r["success"] and "before start_line" in r["error"]
    # an out-of-range value is bad usage (exit 2), like a malformed one, not a failed job (exit 1)
    assert r["usage_error"] and exit_code(r) == 2
    for bad in ({"start_line": "0"}, {"max_chars": "0"}, {"start_line": "100000"}):
        r = run_job(eng, "read", {"path": "README.md", **bad})
        assert not r["success"] and exit_code(r) == 2, r
    assert "past the end" in r["error"]
    for bad in ({"direction": "sideways"}, {"depth": "-1"}):
        r = run_job(eng, "traverse", {"path": "README.md", **bad})
        assert not r["success"] and exit_code(r) == 2, r


def test_notes_too_large_to_index_can_still_be_read_and_nul_is_never_written(eng):
    big = eng.vault / "resource" / "huge-log.md"
    line = "log line with enough words to be long, the pump was checked again\n"
    big.write_text("# Huge log\n" + line * (eng.settings.max_file_bytes // len(line) + 10))
    r = run_job(eng, "read", {"path": "resource/huge-log.md", "end_line": "2"})
    assert r["success"], r
    assert r["text"].startswith("# Huge log\nlog line") and r["end_line"] == 2
    for job, args in (("write", {"path": "digest/wiki/zero-byte.md", "content": "a\x00b"}),
                      ("edit", {"path": "README.md", "old": "# ", "new": "#\x00 ", "count": "0"})):
        r = run_job(eng, job, args)
        assert not r["success"] and "NUL" in r["error"], r
    assert not (eng.vault / "digest/wiki/zero-byte.md").exists()
    assert b"\x00" not in (eng.vault / "README.md").read_bytes()


@pytest.mark.parametrize("dst, needle", [
    ("digest/wiki/x]]y|z.md", "cannot be linked"),
    ("digest/wiki/a#b.md", "cannot be linked"),
    ("digest/wiki/a.txt", "non-.md"),
])
def test_move_refuses_names_links_cannot_express(eng, dst, needle):
    src = next(p.relative_to(eng.vault).as_posix() for p in sorted((eng.vault / "digest/wiki").glob("*.md")))
    r = run_job(eng, "move", {"src": src, "dst": dst})
    assert not r["success"] and needle in r["error"]
    assert (eng.vault / src).exists()


def test_two_moves_in_a_row_keep_links(eng):
    (eng.vault / "notes").mkdir()
    (eng.vault / "notes/a.md").write_text("# A\n")
    (eng.vault / "notes/b.md").write_text("see [[a]] and [[notes/a|alias]]\n")
    eng.index()
    assert run_job(eng, "move", {"src": "notes/a.md", "dst": "notes/c.md"})["rewritten_links"] == 2
    r = run_job(eng, "move", {"src": "notes/c.md", "dst": "notes/d.md"})
    assert r["rewritten_links"] == 2
    text = (eng.vault / "notes/b.md").read_text()
    assert "notes/d" in text and "|alias]]" in text and "notes/c" not in text
    assert {n.path for n in eng.neighbors("notes/d.md").inlinks} == {"notes/b.md"}


def test_move_never_replaces_a_destination(eng, monkeypatch):
    from reme_engine.vault import move as engmod

    (eng.vault / "notes").mkdir()
    (eng.vault / "notes/a.md").write_text("# A\n")
    eng.index()
    real = engmod._rename_noreplace

    def racing(src, dst):
        dst.write_text("user saved this meanwhile")
        return real(src, dst)

    monkeypatch.setattr(engmod, "_rename_noreplace", racing)
    r = run_job(eng, "move", {"src": "notes/a.md", "dst": "notes/z.md"})
    assert not r["success"] and "exists" in r["error"]
    assert (eng.vault / "notes/z.md").read_text() == "user saved this meanwhile"
    assert (eng.vault / "notes/a.md").exists()


def test_move_keeps_link_style_and_alias_links_as_obsidian_does(eng):
    (eng.vault / "notes").mkdir()
    (eng.vault / "notes/alpha.md").write_text("---\naliases: [Alpha Note]\n---\n# Alpha\n\n## Part one\n\ntext\n")
    (eng.vault / "beta.md").write_text(
        "See [[alpha]], [[alpha#Part one|the first part]], ![[alpha]], [[Alpha Note]] and up:: [[alpha]].\n"
        "Full: [[notes/alpha]] and [md](notes/alpha.md).\n")
    eng.index()
    r = run_job(eng, "move", {"src": "notes/alpha.md", "dst": "notes/gamma.md"})
    assert r["success"], r
    assert (eng.vault / "beta.md").read_text() == (
        "See [[gamma]], [[gamma#Part one|the first part]], ![[gamma]], [[Alpha Note]] and up:: [[gamma]].\n"
        "Full: [[notes/gamma]] and [md](notes/gamma.md).\n")
    assert r["rewritten_links"] == 6  # the alias link still resolves: untouched
    assert {n.path for n in eng.neighbors("notes/gamma.md").inlinks} == {"beta.md"}
    # a bare name that would be ambiguous after the move gets the full path
    (eng.vault / "other").mkdir()
    (eng.vault / "other/delta.md").write_text("# another delta\n")
    eng.index()
    r = run_job(eng, "move", {"src": "notes/gamma.md", "dst": "notes/delta.md"})
    text = (eng.vault / "beta.md").read_text()
    assert "[[notes/delta]]" in text and "[[notes/delta#Part one|the first part]]" in text and "[[delta]]" not in text
    assert "[[Alpha Note]]" in text


def test_job_json_is_indented_at_a_terminal_and_one_line_in_a_pipe(demo_vault, cli_env):
    import pty
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "reme_tui.cli", "job", "version", "--vault", str(demo_vault)]
    piped = subprocess.run(cmd, env=cli_env, capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0 and len(piped.stdout.strip().splitlines()) == 1
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, env=cli_env, stdout=slave, stderr=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    p.wait(60)
    os.close(master)
    text = out.decode().replace("\r\n", "\n").strip()
    assert json.loads(text) == json.loads(piped.stdout) and "\n  " in text


# -- one exit-code rule: 0 success, 1 the job failed, 2 bad usage; one JSON object on stdout, never a traceback --


def _main(argv, capsys, monkeypatch):
    """``reme-tui`` in-process: (exit status, the one JSON object on stdout, stderr)."""
    from reme_engine.index import indexer
    from reme_tui.cli import main

    monkeypatch.setattr(indexer, "PARALLEL_ENABLED", indexer.PARALLEL_ENABLED)  # main() switches it on
    rc = main(argv)
    out, err = capsys.readouterr()
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1, out  # exactly one JSON object, on one line (stdout is not a terminal here)
    assert "Traceback" not in out + err
    return rc, json.loads(lines[0]), err


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["stat", "path=README"], 0, None),
    (["read", "path=nope"], 1, "no such note: nope"),
    (["read", "path=../x"], 1, "not allowed"),
    (["search", "query=x", "limit=many"], 2, "parameter limit"),
    (["search", "qurey=x"], 2, "unknown parameter"),
    (["read"], 2, "missing parameter path"),
    (["no_such_job"], 2, "unknown job"),
    (["read", "README.md"], 2, "expected key=value"),
    (["search", "query=x", "--bogus"], 2, "unknown option"),
    ([], 2, "needs a name"),
])
def test_exit_code_rule(demo_vault, tmp_path, capsys, monkeypatch, args, code, needle):
    base = ["--vault", str(demo_vault), "--state-dir", str(tmp_path / "st"), "--embedder", "none", "job"]
    rc, res, _err = _main(base + args, capsys, monkeypatch)
    assert rc == code, res
    assert res["success"] is (code == 0)
    assert needle is None or needle in res["error"]
    assert res.get("usage_error", False) is (code == 2)


def test_an_unexpected_exception_is_one_json_line_and_a_traceback_in_the_log(demo_vault, tmp_path, capsys,
                                                                            monkeypatch):
    from reme_engine.engine import Engine

    def boom(self, *a, **kw):
        raise KeyError("a bug")

    monkeypatch.setattr(Engine, "list", boom)
    state = tmp_path / "st"
    rc, res, err = _main(["--vault", str(demo_vault), "--state-dir", str(state), "--embedder", "none",
                          "job", "list"], capsys, monkeypatch)
    assert rc == 1 and res == {"success": False, "job": "list",
                               "error": "internal error: KeyError: 'a bug' (the traceback is in the log)"}
    assert err.strip() == "reme-tui: job list failed unexpectedly"
    log = next(state.rglob("job.log")).read_text(encoding="utf-8")
    assert "Traceback" in log and "KeyError: 'a bug'" in log


def _llm_config(tmp_path, srv) -> str:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"llm:\n  provider: openai\n  model: m\n  base_url: {srv.base_url}\n  api_key: k\n"
                   "  max_retries: 0\n", encoding="utf-8")
    return str(cfg)


@pytest.mark.parametrize("job", ["auto_dream", "proactive_refresh"])
def test_a_failed_llm_run_is_a_failed_job(demo_vault, tmp_path, capsys, monkeypatch, job):
    """The server answers every request with a 500: the run fails, so the job says so and exits 1."""
    from wire.server import ScriptedServer

    err = (500, {"error": {"message": "upstream down", "type": "server_error"}})
    with ScriptedServer(default=lambda p, b: err) as srv:
        rc, res, _ = _main(["--vault", str(demo_vault), "--state-dir", str(tmp_path / "st"), "--embedder", "none",
                            "--config", _llm_config(tmp_path, srv), "job", job, "date=2026-11-28"],
                           capsys, monkeypatch)
        assert srv.requests  # the LLM was really called
    assert (rc, res["success"], res["status"]) == (1, False, "failed"), res
    assert "upstream down" in res["error"] or "500" in res["error"], res["error"]


def test_job_parameters_are_the_facade_signatures():
    """One declaration of a job's inputs: the façade method's signature (names, order, defaults, types)."""
    import inspect

    from reme_engine.engine import Engine
    from reme_engine.jobs import JOBS

    kinds = {"str": str, "int": int, "float": float, "bool": bool}
    for name in ("read", "write", "edit", "move", "traverse", "list", "daily_reindex", "proactive_read",
                 "dream_log", "revert"):
        sig = [p for p in inspect.signature(getattr(Engine, name)).parameters.values() if p.name != "self"]
        params = JOBS[name].params
        assert [p.name for p in params] == [p.name for p in sig], name
        for p, s in zip(params, sig):
            assert p.required == (s.default is s.empty), (name, p.name)
            if not p.required:
                assert p.default == s.default and isinstance(p.default, (kinds[p.type], type(None))), (name, p)


def test_the_engine_is_the_context_pipelines_are_typed_against(eng):
    from reme_engine.context import VaultContext

    assert isinstance(eng, VaultContext)


def test_job_and_refresh_never_import_textual(demo_vault, cli_env):
    """The headless entry points stay headless: no Textual (nor the MCP SDK) in `-X importtime`'s list."""
    for args in (["job", "stat", "path=README.md"], ["--refresh", "--no-vectors"]):
        p = subprocess.run([sys.executable, "-X", "importtime", "-m", "reme_tui.cli", "--vault", str(demo_vault),
                            *args], env=cli_env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        imported = {ln.rsplit("|", 1)[-1].strip() for ln in p.stderr.splitlines() if ln.startswith("import time:")}
        assert imported and not {m for m in imported if m.split(".")[0] in ("textual", "mcp")}, args


# -- the local job socket (reme_engine.local_server) --------------------------------------------------------------
def test_only_read_only_jobs_go_over_the_socket():
    from reme_engine.jobs import JOBS
    from reme_engine.local_server import READ_ONLY_JOBS

    assert READ_ONLY_JOBS <= {n for n, j in JOBS.items() if not j.writes and j.needs_engine}
    assert {"search", "read", "list", "traverse", "stat", "proactive_read", "dream_log"} <= READ_ONLY_JOBS
    assert "health_check" not in READ_ONLY_JOBS  # it repairs a damaged index


def test_engine_socket_answers_like_run_job_and_closes_with_the_engine(eng):
    import stat

    from reme_engine.local_server import ask, settings_identity, socket_path

    srv = eng.start_local_server()
    assert srv is not None and srv.running and eng.start_local_server() is srv  # idempotent
    path = socket_path(eng.state_dir)
    assert stat.S_IMODE(path.lstat().st_mode) == 0o600
    ident = settings_identity(eng.settings)
    got = ask(eng.state_dir, "read", {"path": "README.md", "end_line": "3"}, ident)
    assert got == json.loads(json.dumps(run_job(eng, "read", {"path": "README.md", "end_line": "3"})))
    assert ask(eng.state_dir, "write", {"path": "x.md", "content": "x"}, ident) is None  # never over the socket
    assert not (eng.vault / "x.md").exists()
    eng.close()
    assert not path.exists() and ask(eng.state_dir, "read", {"path": "README.md"}, ident) is None


def test_concurrent_clients_each_get_their_own_answer(eng):
    from concurrent.futures import ThreadPoolExecutor

    from reme_engine.local_server import ask, settings_identity

    eng.start_local_server()
    ident = settings_identity(eng.settings)
    queries = ["光伏", "retrieval", "marathon", "产业链", "recipe", "1-on-1"] * 2
    want = {q: json.loads(json.dumps(run_job(eng, "search", {"query": q, "mode": "keyword"}), default=str))
            for q in set(queries)}
    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda q: ask(eng.state_dir, "search", {"query": q, "mode": "keyword"}, ident), queries))
    untimed = lambda d: {k: v for k, v in d.items() if k not in ("took_ms", "keyword_ms", "vector_ms")}  # noqa: E731
    assert [untimed(g) for g in got] == [untimed(want[q]) for q in queries]


def test_socket_refusals_fall_back(tmp_path):
    """A slow job times out, a full server says busy, a socket others may open is not used, and a second server
    on the same state dir does not replace the first: the client gets None (runs the job itself) each time."""
    import threading

    from reme_engine.local_server import LocalServer, ask

    release = threading.Event()
    srv = LocalServer(tmp_path, lambda job, raw: (release.wait(10), {"success": True, "job": job})[1], "id",
                      job_timeout=0.3, max_concurrent=1)
    assert srv.start()
    try:
        assert ask(tmp_path, "read", {"path": "a"}, "id") is None  # timed out (its job still holds the slot)
        assert srv.refused == 1
        assert ask(tmp_path, "read", {"path": "a"}, "id") is None and srv.refused == 2  # busy
        release.set()
        other = LocalServer(tmp_path, lambda job, raw: {}, "id")
        assert not other.start()  # a live server answers here already
        deadline = time.monotonic() + 10
        while ask(tmp_path, "read", {"path": "a"}, "id") is None:  # the slot frees once the slow job ends
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.chmod(srv.path, 0o666)
        assert ask(tmp_path, "read", {"path": "a"}, "id") is None  # not the user's alone: not trusted
    finally:
        srv.close()


def test_a_second_server_stands_by_and_takes_over(tmp_path, monkeypatch):
    """Two long-running processes on one vault (the app and --serve): the second waits and answers once the
    first stops; a server whose socket file another process replaced stands by in turn and takes over later."""
    from reme_engine import local_server
    from reme_engine.local_server import LocalServer, ask

    monkeypatch.setattr(local_server, "STANDBY_S", 0.1)
    a = LocalServer(tmp_path, lambda job, raw: {"success": True, "job": job, "by": "a"}, "id")
    b = LocalServer(tmp_path, lambda job, raw: {"success": True, "job": job, "by": "b"}, "id")

    def answered_by(who: str) -> None:
        deadline = time.monotonic() + 15
        while (ask(tmp_path, "read", {}, "id") or {}).get("by") != who:
            assert time.monotonic() < deadline, f"{who} never answered"
            time.sleep(0.02)

    try:
        assert a.start(standby=True) and a.running
        assert not b.start(standby=True) and b.standing_by
        answered_by("a")
        a.close()
        answered_by("b")
        assert b.running and not a.running
        os.unlink(b.path)  # as if another process had found it stale
        assert a.start(standby=True)
        answered_by("a")
        deadline = time.monotonic() + 15
        while not b.standing_by:  # b notices its file is gone and waits for its turn again
            assert time.monotonic() < deadline
            time.sleep(0.02)
        a.close()
        answered_by("b")
    finally:
        a.close()
        b.close()
    assert not b.path.exists()


def test_a_server_that_accepts_but_never_answers_costs_the_greeting_timeout(tmp_path):
    """A stopped app (Ctrl-Z) still completes connections in the kernel's backlog: the client gives up once
    the greeting is late instead of waiting for the job timeout."""
    import socket

    from reme_engine.local_server import ask, socket_path

    with socket.socket(socket.AF_UNIX) as wedged:
        wedged.bind(str(socket_path(tmp_path)))
        os.chmod(socket_path(tmp_path), 0o600)
        wedged.listen(4)  # never accepts
        t = time.monotonic()
        assert ask(tmp_path, "search", {"query": "x"}, "id", hello_timeout=0.3) is None
        assert time.monotonic() - t < 5


def test_every_job_parameter_says_what_it_takes():
    """`job help` and the MCP schemas read these texts: none may be empty."""
    from reme_engine.jobs import JOBS

    empty = [f"{name}.{p.name}" for name, job in JOBS.items() for p in job.params if not p.help.strip()]
    assert not empty, empty


def test_an_explicit_null_parameter_is_a_parameter_not_given(eng):
    """A JSON client sending `"paths": null` gets the default (no path filter), not a filter on the path "None"."""
    a = run_job(eng, "search", {"query": "memory", "mode": "keyword", "paths": None, "limit": None})
    b = run_job(eng, "search", {"query": "memory", "mode": "keyword"})
    assert a["success"] and [h["path"] for h in a["hits"]] == [h["path"] for h in b["hits"]] and a["hits"]
    missing = run_job(eng, "read", {"path": None})
    assert missing["success"] is False and "missing parameter path" in missing["error"]


def test_a_bare_note_name_reads_as_its_wikilink_opens(eng):
    """`read path=新能源` and `traverse path=新能源` open digest/wiki/新能源.md, as [[新能源]] does; a write never
    guesses (it needs the path), and a name no note has is still an error with suggestions."""
    r = run_job(eng, "read", {"path": "新能源", "end_line": "1"})
    assert r["success"] and r["path"] == "digest/wiki/新能源.md", r
    t = run_job(eng, "traverse", {"path": "新能源", "depth": "1"})
    assert t["success"] and t["start"] == "digest/wiki/新能源.md" and len(t["nodes"]) > 1, t
    w = run_job(eng, "edit", {"path": "新能源", "old": "新能源", "new": "x"})
    assert not w["success"] and "no such note" in w["error"]
    m = run_job(eng, "read", {"path": "新能源X"})
    assert not m["success"] and "no such note" in m["error"]


@pytest.mark.parametrize("name, needle", [
    ("digest/wiki/a:b?.md", "does not allow"),
    ("digest/wiki/CON.md", "reserves for a device"),
    ("digest/wiki/trailing space .md", "a space at the end"), ("digest/wiki/dot./x.md", "ends with a space or a dot"),
    ("digest/wiki/新能源.MD", "another case"),
    ("digest/wiki/Hybrid-Retrieval.md", "another case"),
])
def test_new_notes_get_names_obsidian_and_other_systems_accept(eng, name, needle):
    r = run_job(eng, "write", {"path": name, "content": "# x\n"})
    assert not r["success"] and needle in r["error"], r
    assert not (eng.vault / name).exists()
    src = "digest/wiki/通威股份.md"
    m = run_job(eng, "move", {"src": src, "dst": name})
    assert not m["success"] and needle in m["error"], m
    assert (eng.vault / src).exists()


def test_existing_odd_names_stay_usable_and_case_only_renames_work(eng):
    odd = eng.vault / "digest/wiki/old: name?.md"
    odd.write_text("# Old\n")
    assert run_job(eng, "write", {"path": "digest/wiki/old: name?.md", "content": "# Old\n\nmore\n",
                                  "expected_sha": run_job(eng, "read", {"path": "digest/wiki/old: name?.md"})["sha"]})["success"]
    m = run_job(eng, "move", {"src": "digest/wiki/hybrid-retrieval.md", "dst": "digest/wiki/Hybrid-Retrieval.md"})
    assert m["success"], m
