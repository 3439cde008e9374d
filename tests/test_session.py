"""The chat session record: id validation, deduplicating appends, tolerant reads."""

import json
import threading
from datetime import datetime, timezone

import pytest

from reme_engine.config import LayerSettings
from reme_engine.memory.session import (ChatMessage, append_messages, new_session_id, read_session, session_link,
                                        session_rel, valid_session_id)

LAYERS = LayerSettings()


def msg(i, role="user", content=None, at="2026-11-28T09:00:00+08:00"):
    return ChatMessage(f"m{i}", role, content if content is not None else f"message {i}", at)


@pytest.mark.parametrize("sid", ["d29f6b31", new_session_id(), "a1f3c9e2-0001-4b8a-9c3e-1234567890ab", "x_y-1"])
def test_valid_session_ids(sid):
    assert valid_session_id(sid) == sid


@pytest.mark.parametrize("sid", ["", "../x", "a/b", ".hidden", "-lead", "a b", "x" * 129, "a\x00b", "名字", None, 12])
def test_invalid_session_ids(sid):
    with pytest.raises(ValueError):
        valid_session_id(sid)


def test_new_session_id_is_uuid4_hex():
    a, b = new_session_id(), new_session_id()
    assert a != b and len(a) == 32 and int(a, 16) >= 0


def test_paths_and_link_follow_the_layer_setting():
    layers = LayerSettings(session_dir="chats")
    assert session_rel(layers, "abc") == "chats/dialog/abc.jsonl"
    assert session_link(LAYERS, "abc") == "[[session/dialog/abc.jsonl]]"


def test_append_dedups_by_id_and_round_trips(tmp_path):
    assert append_messages(tmp_path, LAYERS, "s1", [msg(1), msg(2, "assistant", "答复 ✓")]) == 2
    assert append_messages(tmp_path, LAYERS, "s1", [msg(2, "assistant"), msg(3), msg(3)]) == 1
    assert append_messages(tmp_path, LAYERS, "s1", [msg(1).to_dict()]) == 0
    got = read_session(tmp_path, LAYERS, "s1")
    assert [m.id for m in got] == ["m1", "m2", "m3"]
    assert got[1].content == "答复 ✓" and got[1].role == "assistant"
    raw = (tmp_path / "session/dialog/s1.jsonl").read_text(encoding="utf-8")
    assert raw.count("\n") == 3 and "答复" in raw  # one JSON object per line, UTF-8 kept readable


def test_append_validates_everything_before_writing(tmp_path):
    with pytest.raises(ValueError):
        bad = {"id": "x", "role": "robot", "content": "", "created_at": "2026-11-28"}
        append_messages(tmp_path, LAYERS, "s1", [msg(1), bad])
    with pytest.raises(ValueError):
        append_messages(tmp_path, LAYERS, "s1", [ChatMessage("m1", "user", "x", "yesterday")])
    with pytest.raises(ValueError):
        append_messages(tmp_path, LAYERS, "../escape", [msg(1)])
    assert not (tmp_path / "session").exists()


def test_read_tolerates_bad_and_truncated_lines_and_append_starts_a_fresh_line(tmp_path):
    p = tmp_path / "session/dialog/s1.jsonl"
    p.parent.mkdir(parents=True)
    good = json.dumps(msg(1).to_dict())
    p.write_text(good + "\nnot json\n" + json.dumps({"id": "m9", "role": "user"}) + "\n"
                 + json.dumps([1, 2]) + "\n" + good + "\n" + '{"id": "m2", "role": "us', encoding="utf-8")
    got = read_session(tmp_path, LAYERS, "s1")
    assert [m.id for m in got] == ["m1"]
    assert got.skipped == 4 and got.duplicates == 1
    assert append_messages(tmp_path, LAYERS, "s1", [msg(2)]) == 1
    got = read_session(tmp_path, LAYERS, "s1")
    assert [m.id for m in got] == ["m1", "m2"] and got.skipped == 4  # the new line was not glued to the broken one


def test_missing_record_reads_empty(tmp_path):
    got = read_session(tmp_path, LAYERS, "nothing")
    assert got == [] and got.skipped == 0


def test_concurrent_appends_never_interleave(tmp_path):
    def worker(k):
        for i in range(25):
            append_messages(tmp_path, LAYERS, "s1", [msg(f"{k}-{i}", content="x" * 3000)])

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = read_session(tmp_path, LAYERS, "s1")
    assert len(got) == 100 and got.skipped == 0


def test_create_stamps_time_with_offset():
    m = ChatMessage.create("user", "hi", tz=timezone.utc)
    assert m.role == "user" and len(m.id) == 32
    assert datetime.fromisoformat(m.created_at).utcoffset() is not None
    with pytest.raises(ValueError):
        ChatMessage.create("robot", "hi")
