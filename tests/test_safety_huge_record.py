"""A chat record with a line of many megabytes (a damaged or foreign file) is read without holding that line: the
line is skipped and counted, the messages around it are read, and appending still works."""

from __future__ import annotations

import tracemalloc

from reme_engine.config import LayerSettings
from reme_engine.memory import session as S


def test_an_overlong_line_is_skipped_without_being_held(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "MAX_LINE_BYTES", 256 * 1024)  # the same code path as the 16 MiB default, 64x smaller
    layers = LayerSettings(app_dir="")
    S.append_messages(tmp_path, layers, "s1", [S.ChatMessage.create("user", "before the junk")])
    rec = tmp_path / "session" / "dialog" / "s1.jsonl"
    with open(rec, "ab") as fh:
        fh.write(b'{"id": "junk", "content": "' + b"x" * (8 * 1024 * 1024) + b'"}\n')
    S.append_messages(tmp_path, layers, "s1", [S.ChatMessage.create("user", "after the junk")])
    tracemalloc.start()
    msgs = S.read_session(tmp_path, layers, "s1")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [m.content for m in msgs] == ["before the junk", "after the junk"] and msgs.skipped == 1
    assert peak < 4 * 1024 * 1024, peak  # the 8 MiB line was never held whole
