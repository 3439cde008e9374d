"""The real ``reme-tui`` binary under tmux: start on a temp copy of the demo vault, open today, search a Chinese
word, open a hit, follow a link, open the agenda, send a chat message, quit — checking the captured screens
(``tmux capture-pane -p``) and the files on disk. Skipped when tmux is missing.

Every wait polls the screen against a deadline (the test machines are loaded); nothing sleeps a fixed time.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

BINARY = Path(sys.executable).with_name("reme-tui")
WIDTH, HEIGHT = 120, 36


class Tmux:
    """One tmux server (own socket) running one session with the app."""

    def __init__(self, tmp: Path) -> None:
        self.socket = f"reme-e2e-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.session = "reme"
        self.screens: list[tuple[str, str]] = []  # (label, captured text) for the failure report
        self.rc_file = tmp / "exit-code"

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=check,
                              timeout=30)

    def start(self, env: dict[str, str], cwd: Path) -> None:
        envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # a fresh tmux server may resize the window just after starting the command: wait for the final size
        # first, so the app's first frame is drawn at WIDTH×HEIGHT
        wait = f'n=0; until [ "$(stty size)" = "{HEIGHT} {WIDTH}" ] || [ $n -ge 100 ]; do sleep 0.05; n=$((n+1)); done'
        cmd = (f"{wait}; cd {shlex.quote(str(cwd))} && env -i {envs} {shlex.quote(str(BINARY))}; "
               f"echo $? > {self.rc_file}")
        self.run("new-session", "-d", "-s", self.session, "-x", str(WIDTH), "-y", str(HEIGHT), cmd)

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.session, *keys)

    def text(self, literal: str) -> None:
        self.run("send-keys", "-t", self.session, "-l", literal)

    def capture(self) -> str:
        res = self.run("capture-pane", "-t", self.session, "-p", check=False)
        return res.stdout

    def alive(self) -> bool:
        return self.run("has-session", "-t", self.session, check=False).returncode == 0

    def wait_for(self, what: str, pred, timeout: float = 60.0) -> str:
        """Poll the screen until ``pred(screen)`` holds; returns that screen (kept for the report)."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.capture()
            if pred(screen):
                self.screens.append((what, screen))
                return screen
            time.sleep(0.1)
        self.screens.append((f"TIMEOUT {what}", screen))
        raise AssertionError(f"timed out waiting for {what}; screen:\n{screen}")

    def wait_text(self, what: str, needle: str | re.Pattern, timeout: float = 60.0) -> str:
        if isinstance(needle, re.Pattern):
            return self.wait_for(what, lambda s: needle.search(s) is not None, timeout)
        return self.wait_for(what, lambda s: needle in s, timeout)

    def wait_files(self, what: str, pred, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; screen:\n{self.capture()}")

    def kill(self) -> None:
        self.run("kill-server", check=False)


def _today_candidates() -> set[str]:
    now = _dt.datetime.now().astimezone()
    return {now.date().isoformat(), (now + _dt.timedelta(minutes=5)).date().isoformat()}


@pytest.fixture
def tmux_app(tmp_path):
    from reme_engine.demo import demo_vault_source

    if not BINARY.exists():
        pytest.skip(f"no reme-tui binary next to {sys.executable}")
    vault = tmp_path / "vault"
    shutil.copytree(demo_vault_source(), vault)
    home = tmp_path / "home"
    env = {
        "REME_VAULT": str(vault),
        "REME_STATE_DIR": str(tmp_path / "state"),
        "REME_EMBEDDER": "none",
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "HOME": str(home),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    if os.environ.get("TZ"):
        env["TZ"] = os.environ["TZ"]
    t = Tmux(tmp_path)
    yield t, vault, env
    t.kill()
    report = tmp_path / "screens.txt"
    report.write_text("\n\n".join(f"==== {label}\n{screen}" for label, screen in t.screens), encoding="utf-8")


def test_real_binary_in_tmux(tmux_app, tmp_path):
    t, vault, env = tmux_app
    t.start(env, tmp_path)

    # start: the Daily pane, the README, the index counts in the status line
    screen = t.wait_for("startup", lambda s: re.search(r"[1-9]\d* files · \d+ chunks", s) is not None
                        and "─ README.md" in s and "indexing" not in s)
    assert "─ Daily ─" in screen and " today " in screen and "Welcome to reme-tui" in screen

    # open today: the day page is created on disk and shown
    t.keys("t")
    screen = t.wait_text("today opened", re.compile(r"daily/\d{4}-\d\d-\d\d\.md"))
    today = re.search(r"daily/(\d{4}-\d\d-\d\d)\.md", screen)[1]
    assert today in _today_candidates()
    assert (vault / "daily" / f"{today}.md").is_file() and (vault / "daily" / today).is_dir()

    # search a Chinese word, open the top hit
    t.keys("/")
    t.wait_text("search open", "Search notes")
    t.text("光伏")
    screen = t.wait_text("hits", "digest/wiki/光伏产业链.md  L")
    assert "kw #1" in screen
    t.keys("Enter")
    t.wait_for("hit opened", lambda s: "─ digest/wiki/光伏产业链.md ·" in s and "Search notes" not in s)

    # follow a link (keyboard: `f` lists the note's links; the first is 新能源)
    t.keys("f")
    t.wait_text("link picker", "Links of digest/wiki/光伏产业链.md")
    t.keys("Enter")
    screen = t.wait_text("link followed", "─ digest/wiki/新能源.md ·")
    assert "新能源行业总览" in screen

    # the agenda: no refresh for today yet, with the next scheduled time
    t.keys("a")
    screen = t.wait_text("agenda", "No proactive refresh yet")  # (the pane may wrap the sentence)
    assert "Next scheduled refresh:" in screen and "Agenda · today" in screen

    # a chat message: saved to the session record and today's capture card
    t.keys("c")
    t.wait_text("chat input focused", "Enter saves · Esc back")
    t.text("e2e 随手记 光伏跟踪表")
    t.keys("Enter")
    screen = t.wait_text("chat saved", "saved → capture.md")
    assert "you e2e 随手记 光伏跟踪表" in screen
    dialog = vault / "session" / "dialog"
    new = [p for p in dialog.glob("*.jsonl") if p.stem not in ("a1f3c9e2", "b7d402fe", "d29f6b31")]
    assert len(new) == 1
    lines = [json.loads(x) for x in new[0].read_text(encoding="utf-8").splitlines()]
    assert [(x["role"], x["content"]) for x in lines] == [("user", "e2e 随手记 光伏跟踪表")]
    capture_day = _dt.datetime.fromisoformat(lines[0]["created_at"]).date().isoformat()
    card = vault / "daily" / capture_day / "capture.md"
    t.wait_files("capture card", lambda: card.is_file() and "e2e 随手记 光伏跟踪表" in card.read_text("utf-8"))
    assert f"[[session/dialog/{new[0].name}|chat]]" in card.read_text(encoding="utf-8")

    # quit: Escape leaves the input, q quits, the process exits 0
    t.keys("Escape")
    t.wait_text("focus back on the note", "journal · no LLM")
    t.keys("q")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (t.rc_file.exists() and t.rc_file.read_text().strip()):
        time.sleep(0.1)
    assert t.rc_file.exists(), f"the app did not exit; screen:\n{t.capture()}"
    assert t.rc_file.read_text().strip() == "0"
