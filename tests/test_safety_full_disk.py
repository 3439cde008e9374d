"""A write that fails for lack of space (or a file size limit, or a read-only folder) loses nothing and leaves
nothing half written: the chat record is exactly as it was (no 0-byte record, no partial line), the capture card
gets nothing, the message waits in the pending queue (the state dir's file, or memory when that disk is full too)
and is captured once space is back; the caller gets one clear line.

A full disk is simulated without root or a tmpfs: the writing process runs under ``RLIMIT_FSIZE`` with SIGXFSZ
ignored, so a write past the limit fails with EFBIG exactly where ENOSPC would (mid-``write``, after a partial
write), through the real code. Each scenario runs in its own subprocess so the limit never touches pytest."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PRELUDE = textwrap.dedent("""
    import json, os, resource, signal, sys, time
    from pathlib import Path
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE then fails with EFBIG
    SOFT, HARD = resource.getrlimit(resource.RLIMIT_FSIZE)

    def limit(n):
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, HARD))

    def unlimit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (SOFT, HARD))

    def wait_until(pred, timeout=30.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred():
                return True
            time.sleep(0.02)
        return False

    def listing(root):
        return sorted(str(p.relative_to(root)) + ("/" if p.is_dir() else f" {p.stat().st_size}")
                      for p in Path(root).rglob("*"))

    out = {}
""")


def run(script: str, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(script), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


SESSION = """
    from reme_engine.config import LayerSettings
    from reme_engine.errors import EngineError
    from reme_engine.memory.session import ChatMessage, RecordWriteError, append_messages, read_session
    vault = Path(sys.argv[1])
    layers = LayerSettings(app_dir="")
    big = ChatMessage.create("user", "okapi " * 20000)  # ~120 KB: past the limit below
    # a new record that cannot be written: nothing appears (before: a 0-byte session/dialog/<id>.jsonl)
    limit(4096)
    try:
        append_messages(vault, layers, "fresh", [big])
        out["fresh"] = "written"
    except RecordWriteError as exc:
        out["fresh"] = [str(exc), exc.errno, isinstance(exc, OSError), isinstance(exc, EngineError),
                        [m.id for m in exc.messages] == [big.id]]
    except OSError as exc:
        out["fresh"] = ["bare OSError", str(exc)]
    out["fresh_listing"] = listing(vault)
    unlimit()
    append_messages(vault, layers, "s1", [ChatMessage.create("user", "first words")])
    rec = vault / "session" / "dialog" / "s1.jsonl"
    before = rec.read_bytes()
    # an append that fails midway (the first write goes through partly, the next fails): cut back
    limit(len(before) + 100)
    try:
        append_messages(vault, layers, "s1", [big])
        out["append"] = "written"
    except OSError as exc:
        out["append"] = [type(exc).__name__, str(exc)]
    out["unchanged"] = rec.read_bytes() == before
    unlimit()
    append_messages(vault, layers, "s1", [big])  # space is back: the same message goes in whole, once
    msgs = read_session(vault, layers, "s1")
    out["after"] = [[m.content[:11] for m in msgs], msgs.skipped, msgs.duplicates]
    print(json.dumps(out))
"""


def test_a_chat_record_that_cannot_be_written_is_left_exactly_as_it_was(tmp_path):
    vault = tmp_path / "v"
    vault.mkdir()
    out = run(SESSION, str(vault))
    text, err, is_os, is_engine, carries = out["fresh"]
    assert text.startswith("cannot save the chat message to session/dialog/fresh.jsonl: file too large"), text
    assert text.endswith("nothing was written") and err == 27 and is_os and is_engine and carries  # 27: EFBIG
    assert out["fresh_listing"] == [], out["fresh_listing"]  # no empty record, no temp, no empty folders
    assert out["append"][0] == "RecordWriteError", out["append"]
    assert out["unchanged"], "a failed append must be cut back to the record's previous length"
    assert out["after"] == [["first words", "okapi okapi"], 0, 0]


CAPTURE = """
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine
    from reme_engine.memory import capture as C
    vault, state, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    C.PENDING_RETRY_S = 0.2
    eng = Engine.open(load_settings({"vault": str(vault), "state_dir": str(state), "embedder": {"kind": "none"},
                                     "timezone": "UTC"}, env={}))
    eng.index()
    sid = "fulldisk1"
    day = eng.settings.today()
    card = vault / "daily" / day / "capture.md"
    LIMIT = 2 * 1024 * 1024  # above every state file the engine writes here (its index is ~110 KB)
    if mode == "memory":  # the message is bigger than the limit: the card and the pending file both fail
        words = "zebra " * (LIMIT // 6 + 50000)
    else:  # the user's own card is near the limit: the card fails, the small pending file is written
        card.parent.mkdir(parents=True, exist_ok=True)
        card.write_text("# my capture page\\n\\n" + "my own line\\n" * (LIMIT // 12 - 4), encoding="utf-8")
        # (not indexed first: its 2 MB in the index would put the index itself past the limit)
        words = "zebra words while the disk is full"
    user_card = card.read_bytes() if card.exists() else None
    msg = eng.chat_append(sid, "user", words)
    limit(LIMIT)
    try:
        eng.chat_capture(sid, [msg])
        out["capture"] = "written"
    except C.CaptureFailed as exc:
        out["capture"] = [str(exc), exc.rel, exc.reason, exc.kept, exc.result.pending, exc.errno]
    except Exception as exc:
        import traceback

        out["capture"] = [type(exc).__name__, str(exc), traceback.format_exc()[-2500:]]  # shown by the assert
    out["card_untouched"] = (card.read_bytes() if card.exists() else None) == user_card
    out["temps"] = [p for p in listing(vault) if "reme-tmp" in p]
    out["pending_file"] = (state / C.PENDING_FILE).exists()
    out["pending"] = [m.id == msg.id for s, m in C.load_pending(eng)]
    if mode == "memory":
        unlimit()  # space is back: the retry thread appends the words
        out["appended"] = wait_until(lambda: card.exists() and words.strip() in card.read_text(encoding="utf-8"))
        out["count"] = card.read_text(encoding="utf-8").count("zebra zebra zebra") > 0
        out["left"] = wait_until(lambda: not C.load_pending(eng)) and not (state / C.PENDING_FILE).exists()
    eng.close()
    print(json.dumps(out))
"""

RESUME = """
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine
    from reme_engine.memory import capture as C
    vault, state = Path(sys.argv[1]), Path(sys.argv[2])
    eng = Engine.open(load_settings({"vault": str(vault), "state_dir": str(state), "embedder": {"kind": "none"},
                                     "timezone": "UTC"}, env={}))
    out["left"] = C.flush_pending(eng)
    card = vault / "daily" / eng.settings.today() / "capture.md"
    text = card.read_text(encoding="utf-8")
    out["count"] = text.count("zebra words while the disk is full")
    out["user_lines"] = text.count("my own line\\n")
    out["pending_file"] = (state / C.PENDING_FILE).exists()
    eng.close()
    print(json.dumps(out))
"""


def test_a_capture_on_a_full_disk_keeps_the_words_pending_and_says_why(tmp_path):
    vault, state = tmp_path / "v", tmp_path / "state"
    vault.mkdir()
    out = run(CAPTURE, str(vault), str(state), "file")
    assert len(out["capture"]) == 6, out["capture"]
    text, rel, reason, kept, pending, err = out["capture"]
    assert rel.endswith("/capture.md") and reason.startswith("file too large") and err == 27, out["capture"]
    assert text.startswith(f"cannot append to {rel}: {reason} — the message is in the chat record"), text
    assert kept == "pending file" and pending == 1
    assert out["card_untouched"] and out["temps"] == []
    assert out["pending_file"] and out["pending"] == [True]
    # the app quits; the next run (space is back) captures the words once, the user's lines kept
    again = run(RESUME, str(vault), str(state))
    assert again == {"left": 0, "count": 1, "user_lines": 2 * 1024 * 1024 // 12 - 4, "pending_file": False}


def test_when_the_pending_file_cannot_be_written_either_the_words_wait_in_memory(tmp_path):
    vault, state = tmp_path / "v", tmp_path / "state"
    vault.mkdir()
    out = run(CAPTURE, str(vault), str(state), "memory")
    assert len(out["capture"]) == 6, out["capture"]
    text, rel, reason, kept, pending, err = out["capture"]
    assert kept == "memory" and pending == 1 and "kept in memory until the app quits" in text, out["capture"]
    assert out["card_untouched"] and out["temps"] == [] and not out["pending_file"]
    assert out["pending"] == [True]
    assert out["appended"] and out["count"] and out["left"]
