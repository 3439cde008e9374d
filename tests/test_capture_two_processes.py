"""Two app processes capturing into one vault's capture card at once (no LLM: verbatim capture), each sending its
messages one by one as fast as it can: every message lands exactly once, as one whole entry, each process's
messages in the order it sent them, and nothing is left pending once both are done.

Why it could fail: both processes share the state dir (the pending-captures file, the capture catalog) and the
card; a card the other process keeps appending to never settles for a read, so captures go pending, and the
pending file is read, extended and written back by both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

N = 12

CAPTURER = textwrap.dedent("""
    import json, sys, time
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine, EngineError
    from reme_engine.memory import capture as C

    vault, state, who, n, go = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    s = load_settings({"vault": vault, "state_dir": state, "embedder": {"kind": "none"},
                       "timezone": "Asia/Shanghai"}, env={})
    e = Engine.open(s)
    sid = f"proc{who}session"
    while not __import__("os").path.exists(go):  # both start appending together
        time.sleep(0.005)
    time.sleep(float(sys.argv[6]))
    pending = 0
    for i in range(n):
        m = e.chat_append(sid, "user", f"entry {who}-{i:02d} first line\\nsecond line of {who}-{i:02d}")
        try:
            e.chat_capture(sid, [m])
        except EngineError:  # kept pending (the card was busy): appended by the retry
            pending += 1
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and C.flush_pending(e, wait_s=1.0):
        time.sleep(0.2)
    left = len([x for x in C.load_pending(e) if x[0] == sid])
    e.close()
    print(json.dumps({"pending_on_the_way": pending, "left": left}))
""")


#: The other program: appends a line to the card every 5 ms for ``seconds``, so it never settles for a read.
APPENDER = textwrap.dedent("""
    import os, sys, time
    card, go, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    while not os.path.exists(go):
        time.sleep(0.005)
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        with open(card, "a", encoding="utf-8") as fh:
            fh.write(f"shell line {n}\\n")
        n += 1
        time.sleep(0.005)
    print(n)
""")


def _entries(text: str) -> list[str]:
    return [ln.split(" first line")[0].removeprefix("entry ") for ln in text.splitlines() if ln.startswith("entry ")]


import pytest


@pytest.mark.parametrize("busy", [False, True], ids=["free card", "card busy at first"])
def test_two_processes_capturing_at_once_keep_every_entry_whole_and_in_order(tmp_path, busy):
    from datetime import datetime
    from zoneinfo import ZoneInfo

    vault, state = tmp_path / "v", tmp_path / "state"
    vault.mkdir()
    go = tmp_path / "go"
    env = dict(os.environ, REME_NO_SERVER="1")
    shell = None
    if busy:  # another program keeps the card busy for 6 s: both processes' first captures go pending
        day = datetime.now(ZoneInfo("Asia/Shanghai")).date().isoformat()
        card = vault / "daily" / day / "capture.md"
        card.parent.mkdir(parents=True)
        card.write_text("# my capture card\n", encoding="utf-8")
        shell = subprocess.Popen([sys.executable, "-c", APPENDER, str(card), str(go), "6"], stdout=subprocess.PIPE,
                                 text=True)
    procs = [subprocess.Popen([sys.executable, "-c", CAPTURER, str(vault), str(state), who, str(N), str(go),
                               "0.3" if busy else "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for who in ("A", "B")]
    go.write_text("")
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert all(o["left"] == 0 for o in outs), outs
    cards = list(vault.rglob("capture.md"))
    assert len(cards) == 1, cards
    text = cards[0].read_text(encoding="utf-8")
    got = _entries(text)
    for who in ("A", "B"):
        mine = [g for g in got if g.startswith(who)]
        assert mine == [f"{who}-{i:02d}" for i in range(N)], (who, mine, outs)  # once each, in the order sent
    lines = text.splitlines()
    for i, ln in enumerate(lines):  # each entry whole: its second line right after its first
        if ln.startswith("entry "):
            tag = ln.split(" first line")[0].removeprefix("entry ")
            assert lines[i + 1] == f"second line of {tag}", lines[i - 2:i + 3]
    if shell is not None:
        n = int(shell.communicate(timeout=60)[0])
        assert [ln for ln in lines if ln.startswith("shell line")] == [f"shell line {i}" for i in range(n)]
    assert not (state / "capture-pending.json").exists()


def test_the_retry_thread_says_a_busy_capture_lock_in_one_line(tmp_path, make_engine, monkeypatch, caplog):
    """Another process holding the capture lock past the wait: the retry thread logs one warning line (no
    traceback on an MCP server's stderr) and the words stay pending, then land once the lock is free."""
    import logging
    import time

    from reme_engine.memory import capture as C

    monkeypatch.setattr(C, "CAPTURE_LOCK_WAIT_S", 0.2)
    monkeypatch.setattr(C, "PENDING_RETRY_S", 0.3)
    vault = tmp_path / "v"
    vault.mkdir()
    e = make_engine(vault, embed=False)
    state = e.settings.state_dir
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys\nfrom reme_engine.lock import shared_flock\n"
        f"with shared_flock({str(state / C.CAPTURE_LOCK_FILE)!r}).hold(5):\n    print('held', flush=True)\n"
        "    sys.stdin.readline()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        sid = "lockedsession"
        # words kept pending earlier (the card was busy), as the retry thread finds them
        C._save_pending(e, [(sid, e.chat_append(sid, "user", "words kept pending earlier"))])
        with caplog.at_level(logging.WARNING, logger="reme.capture"):
            C._start_retry(e)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not any("not appended yet" in r.message for r in caplog.records):
                time.sleep(0.05)
        lines = [r for r in caplog.records if "not appended yet" in r.message]
        assert lines and all(r.exc_info is None and "capture lock" in r.getMessage() for r in lines), lines
    finally:
        holder.communicate("\n", timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and C.load_pending(e):
        time.sleep(0.05)
    assert not C.load_pending(e)
    assert "words kept pending earlier" in next(vault.rglob("capture.md")).read_text(encoding="utf-8")
