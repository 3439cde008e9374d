"""CLI paper cuts: `job help` for people at a terminal (JSON when piped), "did you mean" for a misspelt
job or parameter, the README's `job move` example on the demo vault, and the `--refresh` summary's vector line
and LLM hint — through the real `reme-tui` entry point in a subprocess (keyword-only, temp state)."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
LLM_VARS = ("REME_LLM_PROVIDER", "REME_LLM_MODEL", "REME_LLM_BASE_URL", "REME_LLM_API_KEY", "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY")


@pytest.fixture
def cli_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in LLM_VARS}
    env.update(REME_STATE_DIR=str(tmp_path / "state"), REME_EMBEDDER="none", XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CONFIG_HOME=str(tmp_path / "config"), COLUMNS="100")
    return env


def cli(args, env, **kw):
    return subprocess.run([sys.executable, "-m", "reme_tui.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300, **kw)


def test_job_help_is_grouped_text_at_a_terminal_and_json_when_piped(cli_env):
    main_fd, sub_fd = pty.openpty()
    try:
        p = subprocess.run([sys.executable, "-m", "reme_tui.cli", "job", "help"], env=cli_env, stdout=sub_fd,
                           stderr=subprocess.PIPE, timeout=120)
        os.close(sub_fd)
        chunks = []
        while True:
            try:
                data = os.read(main_fd, 65536)
            except OSError:  # the other end closed
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(main_fd)
    text = b"".join(chunks).decode("utf-8").replace("\r\n", "\n")
    assert p.returncode == 0, p.stderr
    assert not text.lstrip().startswith("{")
    lines = text.splitlines()
    for heading in ("find and read:", "change notes:", "LLM pipelines:", "index and status:"):
        assert heading in lines
    assert any(re.match(r"^  search +Hybrid", ln, re.I) or re.match(r"^  search +\S", ln) for ln in lines)
    assert any(ln.strip().startswith("*query=<str>") for ln in lines)  # a required parameter, marked
    assert max(len(ln) for ln in lines) <= 100
    piped = cli(["job", "help"], cli_env)
    jobs = json.loads(piped.stdout)["jobs"]
    assert piped.returncode == 0 and {"name", "group", "params"} <= set(jobs[0])


def test_job_dash_dash_help_lists_the_jobs(cli_env, tmp_path):
    """`reme-tui job --help` is the grouped job list (argparse used to print the top-level usage, which names no
    job); `job NAME --help` is that job's entry; flags before `job` are skipped over; an unknown name is exit 2."""
    every = cli(["job", "--help"], cli_env)
    assert every.returncode == 0, every.stderr
    lines = every.stdout.splitlines()
    assert "usage: reme-tui" not in every.stdout
    for heading in ("find and read:", "change notes:", "daily notes:", "index and status:"):
        assert heading in lines
    from reme_engine.jobs import JOBS

    for name in JOBS:
        assert any(re.match(rf"^  {name} ", ln) for ln in lines), name
    one = cli(["--vault", str(tmp_path), "job", "search", "-h"], cli_env)
    assert one.returncode == 0, one.stderr
    assert one.stdout.startswith("reme-tui job search key=value")
    assert any(ln.strip().startswith("*query=<str>") for ln in one.stdout.splitlines())
    assert not re.search(r"^  (read|write|traverse) ", one.stdout, re.M)
    bad = cli(["job", "serach", "--help"], cli_env)
    assert bad.returncode == 2 and "did you mean search?" in bad.stderr and "find and read:" in bad.stdout


def test_job_write_says_why_a_note_was_not_indexed(cli_env, tmp_path):
    """A note over max_file_bytes is saved but left out of the index: `job write`/`edit` print `indexed: false`
    with `not_indexed` naming the index's reason (in the JSON and one line on stderr), as MCP's write_note does;
    a note that is indexed carries no `not_indexed`."""
    v = tmp_path / "v"
    v.mkdir()
    cfg = tmp_path / "config.yaml"
    cfg.write_text("max_file_bytes: 4000\n", encoding="utf-8")
    base = ["--vault", str(v), "--config", str(cfg), "--no-server", "job"]
    big = "# Big\n\n" + "zebrafish notes line\n" * 400  # 8,007 bytes
    r = cli([*base, "write", "path=big.md", f"content={big}"], cli_env)
    d = json.loads(r.stdout)
    assert r.returncode == 0 and d["success"] and (v / "big.md").read_text(encoding="utf-8") == big
    assert d["indexed"] is False and "too large" in d["not_indexed"] and "4,000" in d["not_indexed"], d
    assert "max_file_bytes" in d["not_indexed"]
    assert re.search(r"^reme-tui: big\.md is not indexed: too large", r.stderr, re.M), r.stderr
    ok = cli([*base, "write", "path=small.md", "content=# Small\n\nzebrafish\n"], cli_env)
    d = json.loads(ok.stdout)
    assert d["indexed"] is True and "not_indexed" not in d and "not indexed" not in ok.stderr, (d, ok.stderr)
    e = cli([*base, "edit", "path=small.md", "old=zebrafish", "new=" + "zebrafish\n" * 500], cli_env)
    d = json.loads(e.stdout)
    assert d["success"] and d["indexed"] is False and "too large" in d["not_indexed"], d
    assert "small.md is not indexed" in e.stderr


def test_misspelt_job_and_parameter_get_did_you_mean(cli_env, demo_vault):
    r = cli(["job", "serach", "query=x"], cli_env)
    d = json.loads(r.stdout)
    assert r.returncode == 2 and d["usage_error"] and d["did_you_mean"] == ["search"]
    assert "did you mean search?" in d["error"]
    r = cli(["--vault", str(demo_vault), "job", "search", "qurey=x"], cli_env)
    assert r.returncode == 2 and "did you mean query?" in json.loads(r.stdout)["error"]


def test_readme_move_example_works_on_the_demo_vault(cli_env, demo_vault):
    line = next(ln for ln in README.read_text(encoding="utf-8").splitlines() if ln.startswith("reme-tui job move "))
    args = line.split("#", 1)[0].split()[1:]
    src = next(a for a in args if a.startswith("src="))[4:]
    dst = next(a for a in args if a.startswith("dst="))[4:]
    linking = [p for p in demo_vault.rglob("*.md") if Path(src).stem in p.read_text(encoding="utf-8")
               and p.relative_to(demo_vault).as_posix() != src]
    assert (demo_vault / src).is_file() and linking  # the example moves a real note that others link to
    r = cli(["--vault", str(demo_vault), *args], cli_env)
    d = json.loads(r.stdout)
    assert r.returncode == 0 and d["success"], r.stdout + r.stderr
    assert (demo_vault / dst).is_file() and not (demo_vault / src).exists()
    assert any(Path(dst).stem in p.read_text(encoding="utf-8") for p in linking)


def test_refresh_summary_explains_vectors_and_says_the_llm_hint_once(cli_env, demo_vault):
    from reme_engine.llm.client import HOW_TO_CONFIGURE
    from reme_tui.cli import _vector_line

    r = cli(["--refresh", "--vault", str(demo_vault)], cli_env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(HOW_TO_CONFIGURE) == 1, r.stdout
    assert "skipped: no LLM configured" in r.stdout and "llm        not configured:" in r.stdout
    # 605 chunks, 526 embedded now, 79 from the cache: one line that says how the numbers add up
    report = SimpleNamespace(embedded=526, embed_cached=70, embed_error=None)
    line = _vector_line({"chunks": 605, "chunks_without_vectors": 0}, report)
    assert line.startswith("vectors    605 of 605 chunks have a vector")
    assert "embedded 526" in line and "from the embedding cache 70" in line and "9 had one already" in line
    line = _vector_line({"chunks": 605, "chunks_without_vectors": 79}, SimpleNamespace(
        embedded=526, embed_cached=0, embed_error=None))
    assert "526 of 605" in line and "pending 79: keyword search covers them meanwhile" in line


def test_serve_log_lines_name_what_happened():
    """`--serve` logs a repair with its notice (it printed an empty `cron index_repaired:` line) and cron runs by job."""
    from reme_tui.cli import _serve_event_line

    assert _serve_event_line({"event": "index_repaired", "notice": "rebuilt from the vault"}) == \
        "index index_repaired: rebuilt from the vault"
    assert _serve_event_line({"job": "auto_dream", "event": "skipped", "result": "lock held"}) == \
        "cron auto_dream skipped: lock held"
    assert _serve_event_line({"event": "vectors_started"}) == "serve vectors_started"


def test_theme_save_never_replaces_a_config_saved_meanwhile(tmp_path, monkeypatch):
    """The theme is kept through the app's compare-and-swap write: a config file the user saves at that moment
    wins, and the app says the theme was not saved."""
    import pytest

    from reme_engine.vault import io
    from reme_tui.config_file import ConfigWriteError, save_setting

    cfg = tmp_path / "config.yaml"
    cfg.write_text("vault: ~/Notes\n")
    real = io._rename_exchange
    if real is None:
        pytest.skip("no renameat2 exchange here")

    def user_saves_first(a, b):
        cfg.write_text("vault: ~/Other  # my edit\n")
        real(a, b)

    monkeypatch.setattr(io, "_rename_exchange", user_saves_first)
    with pytest.raises(ConfigWriteError, match="changed while"):
        save_setting(cfg, "theme", "nord")
    assert cfg.read_text() == "vault: ~/Other  # my edit\n"


def test_misspelt_command_suggests_the_command(cli_env):
    r = cli(["jb"], cli_env)
    assert r.returncode == 2 and "did you mean `reme-tui job`?" in r.stderr
    r = cli(["serach"], cli_env)  # a job name given without `job`
    assert r.returncode == 2 and "did you mean `reme-tui job search`?" in r.stderr


def test_job_help_describes_the_fusion_in_use_not_rrf(cli_env):
    jobs = json.loads(cli(["job", "help"], cli_env).stdout)["jobs"]
    assert "RRF" not in json.dumps(jobs)
    from reme_engine.jobs import format_jobs_help

    assert "RRF" not in format_jobs_help()


def test_refresh_progress_is_a_rich_bar_at_a_terminal_and_lines_in_a_log(capsys):
    from reme_tui.cli import _Bar

    bar = _Bar(tty=True)
    for done in range(0, 11):
        bar("index", done, 10, "")
    bar("links", 1, 1, "")
    bar.close()
    err = capsys.readouterr().err
    assert "index" in err and "10/10" in err and "links" not in err
    bar = _Bar(tty=False)
    bar("index", 0, 10, "")
    bar("index", 10, 10, "")
    bar.close()
    assert capsys.readouterr().err == "index: 10 to do\nindex: 10/10\n"


# -- the local job socket: one-shot jobs ask a running --serve ---------------------------------------------------
#: Fields of a search result that time the run itself (they differ between any two runs).
TIMINGS = ("took_ms", "keyword_ms", "vector_ms")
#: Runs `reme-tui` in-process and fails if the engine or numpy got imported: proof the socket answered.
CLIENT = ("import json, sys\nfrom reme_tui.cli import main\nrc = main(sys.argv[1:])\n"
          "heavy = sorted(m for m in ('reme_engine.engine', 'reme_engine.jobs', 'numpy') if m in sys.modules)\n"
          "print(json.dumps(heavy), file=sys.stderr)\nsys.exit(rc)\n")


def _client(args, env):
    """``(returncode, stdout JSON, heavy modules imported)`` of one ``reme-tui`` run."""
    r = subprocess.run([sys.executable, "-c", CLIENT, *args], env=env, capture_output=True, text=True, timeout=300)
    heavy = json.loads(r.stderr.strip().splitlines()[-1])
    return r.returncode, json.loads(r.stdout), heavy


def _untimed(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in TIMINGS}


def _scores_rounded(x):
    """``x`` with every float rounded to 12 significant digits: a one-shot keyword search scores through FTS5 in
    C, the app's in-memory scorer the same formula in numpy (equal up to the last bits; reme_tui.cli)."""
    if isinstance(x, float):
        return float(f"{x:.12g}")
    if isinstance(x, dict):
        return {k: _scores_rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_scores_rounded(v) for v in x]
    return x


class Serve:
    """A real ``reme-tui --serve`` subprocess; its stderr lines collected on a thread for :meth:`wait_line`."""

    def __init__(self, vault, env):
        import threading

        self.proc = subprocess.Popen([sys.executable, "-m", "reme_tui.cli", "--serve", "--vault", str(vault)],
                                     env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.lines: list[str] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stderr:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.lines.append("<exit>")
            self.cond.notify_all()

    def wait_line(self, needle: str, timeout: float = 300) -> str:
        with self.cond:
            ok = self.cond.wait_for(lambda: any(needle in ln or ln == "<exit>" for ln in self.lines), timeout)
            found = next((ln for ln in self.lines if needle in ln), None)
        assert ok and found, f"--serve never logged {needle!r}: {''.join(self.lines)[-3000:]}"
        return found

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


def test_job_search_through_a_running_serve_matches_in_process(tmp_path, demo_vault, cli_env):
    """A one-shot hybrid search while `--serve` runs is answered over its socket (the client imports neither the
    engine nor numpy) with the JSON and exit status of the same job run in-process; the stale socket a dead
    server left is ignored, then replaced by the new server's (mode 0600, state dir the user's only); a writing
    job never goes over the socket; garbage and a client hanging up mid-request leave the server answering."""
    import socket
    import stat

    from reme_engine.local_server import SOCKET_NAME, ask

    env = {k: v for k, v in cli_env.items() if k != "REME_EMBEDDER"}  # the offline model: real hybrid search
    state = Path(env["REME_STATE_DIR"])
    state.mkdir(parents=True)
    sock_path = state / SOCKET_NAME
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(sock_path))  # a server that died without removing its socket
    dead.close()
    with pytest.raises(ConnectionRefusedError):
        socket.socket(socket.AF_UNIX).connect(str(sock_path))
    query = ["job", "search", "query=光伏 产业链", "limit=5", "--vault", str(demo_vault)]
    code, first, heavy = _client([*query, "mode=keyword"], env)  # no server: in-process, stale socket ignored
    assert code == 0 and first["success"] and "reme_engine.engine" in heavy

    serve = Serve(demo_vault, env)
    try:
        serve.wait_line("answering one-shot jobs on")
        st = sock_path.lstat()
        with socket.socket(socket.AF_UNIX) as s:  # the stale file was replaced: something listens now
            s.connect(str(sock_path))
        assert stat.S_IMODE(st.st_mode) == 0o600 and stat.S_IMODE(state.stat().st_mode) == 0o700
        serve.wait_line("vectors up to date")  # the server's answers include every vector from here on
        serve.wait_line("title vectors ready")  # and rank with title vectors, as a one-shot search does

        code, served, heavy = _client(query, env)
        assert heavy == [], "the socket did not answer: the client loaded the engine"
        code_in, local, heavy_in = _client([*query, "--no-server"], env)
        assert "reme_engine.engine" in heavy_in
        assert (code, _untimed(served)) == (code_in, _untimed(local)) and code == 0
        assert any(h.get("vector_rank") for h in served["hits"]) and not served.get("degraded")
        for args, want in ((["job", "read", "path=no/such-note.md"], 1), (["job", "search", "qurey=x"], 2)):
            args = [*args, "--vault", str(demo_vault)]
            a, b = _client(args, env), _client(args, dict(env, REME_NO_SERVER="1"))
            assert a[2] == [] and "reme_engine.engine" in b[2]
            assert (a[0], a[1]) == (b[0], b[1]) and a[0] == want, (a, b)

        code, wrote, heavy = _client(["job", "write", "path=inbox/from-cli.md", "content=hello",
                                      "--vault", str(demo_vault)], env)
        assert code == 0 and wrote["success"] and "reme_engine.engine" in heavy  # written by the caller itself
        assert (demo_vault / "inbox" / "from-cli.md").read_text(encoding="utf-8") == "hello"

        def raw(data: bytes, read: bool = True) -> bytes:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(str(sock_path))
                s.sendall(data)
                if not read:
                    return b""
                s.settimeout(30)
                f = s.makefile("rb")
                assert json.loads(f.readline()) == {"reme_jobs": 1}  # the greeting comes first
                return f.readline()

        assert b"protocol_error" in raw(b"garbage\n")
        assert b"protocol_error" in raw(json.dumps({"v": 1, "job": "write", "params": {}}).encode() + b"\n")
        raw(b'{"v": 1, "job": "search", "par', read=False)  # hangs up mid-request
        with socket.socket(socket.AF_UNIX) as s:  # hangs up before the answer comes
            s.connect(str(sock_path))
            s.sendall(b'{"v": 1}\n')
        assert ask(state, "search", {"query": "x"}, "other settings") is None  # wrong settings: fall back
        code, again, heavy = _client(query, env)
        assert heavy == [] and code == 0 and again["hits"]  # still answering
    finally:
        serve.stop()
    assert not sock_path.exists()  # a server that stops removes its socket


def test_the_running_app_answers_one_shot_jobs_off_its_event_loop(make_engine, demo_vault):
    """The TUI started with its background work serves the socket; a job asked over it runs on a server
    thread, never the event loop's, and returns what the job returns in-process; quitting removes the socket."""
    import asyncio
    import threading

    from reme_engine.jobs import run_job
    from reme_engine.local_server import ask, settings_identity, socket_path
    from reme_tui.app import ReMeApp

    eng = make_engine(demo_vault, embed=False)
    ident = settings_identity(eng.settings)
    threads = []
    real_search = eng.search
    eng.search = lambda *a, **kw: (threads.append(threading.current_thread()), real_search(*a, **kw))[1]
    params = {"query": "光伏", "limit": "3", "mode": "keyword"}

    async def go():
        app = ReMeApp(eng.settings, eng, background=True)
        async with app.run_test() as pilot:
            deadline = asyncio.get_running_loop().time() + 60
            while not socket_path(eng.state_dir).exists():
                assert asyncio.get_running_loop().time() < deadline, "the app never opened its job socket"
                await pilot.pause(0.05)
            got = await asyncio.to_thread(ask, eng.state_dir, "search", params, ident)
            assert got is not None and got["success"] and got["hits"]
            want = json.loads(json.dumps(run_job(eng, "search", params), default=str))
            assert {k: v for k, v in got.items() if k not in TIMINGS} == \
                {k: v for k, v in want.items() if k not in TIMINGS}
            assert threads[0] is not threading.main_thread() and threads[0].name == "reme-local-job"

    asyncio.run(go())
    eng.close()
    assert not socket_path(eng.state_dir).exists()


@pytest.mark.skipif(not shutil.which("tmux"), reason="tmux is not installed")
def test_the_real_app_in_tmux_answers_job_search(tmp_path):
    """The real binary as a user starts it (tmux, keyword-only): once it is up, `reme-tui job search` in another
    terminal is answered by the app (the client never imports the engine) with what an in-process run prints;
    quitting the app removes its socket."""
    from reme_engine.demo import demo_vault_source
    from reme_engine.local_server import socket_path
    from test_e2e_tmux import BINARY, Tmux

    if not BINARY.exists():
        pytest.skip(f"no reme-tui binary next to {sys.executable}")
    vault = shutil.copytree(demo_vault_source(), tmp_path / "vault")
    home = tmp_path / "home"
    env = {"REME_VAULT": str(vault), "REME_STATE_DIR": str(tmp_path / "state"), "REME_EMBEDDER": "none",
           "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
           "XDG_CACHE_HOME": str(home / "cache"), "HOME": str(home), "TERM": "xterm-256color", "LANG": "C.UTF-8",
           "LC_ALL": "C.UTF-8", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    t = Tmux(tmp_path)
    try:
        t.start(env, tmp_path)
        sock = socket_path(tmp_path / "state")
        t.wait_files("the app's job socket", sock.exists, timeout=120)
        client_env = {**os.environ, **env}
        args = ["job", "search", "query=光伏 产业链", "mode=keyword", "limit=5"]
        code, served, heavy = _client(args, client_env)
        assert heavy == [] and code == 0 and served["hits"], (served, t.capture())
        code_in, local, _ = _client([*args, "--no-server"], client_env)
        assert (code_in, _scores_rounded(_untimed(local))) == (code, _scores_rounded(_untimed(served)))
        t.keys("q")
        t.wait_files("the app to exit", lambda: t.rc_file.exists() and t.rc_file.read_text().strip(), timeout=60)
        assert t.rc_file.read_text().strip() == "0" and not sock.exists()
    finally:
        t.kill()
