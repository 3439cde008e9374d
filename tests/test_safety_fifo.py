"""A FIFO (or device) put where a note was is never opened for reading by the write-safety checks: opening a FIFO
blocks until someone writes to it, which would hang a delete or a save (and the write lock with it). The checks
see "not a regular file" at once and refuse; the FIFO is put back untouched."""

from __future__ import annotations

import os
import threading

import pytest

from reme_engine.vault import io


def within(seconds: float, fn, *args):
    """Run ``fn(*args)`` in a daemon thread; its result or exception, or a failure if it is still blocked."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{fn.__name__} blocked on a FIFO"
    if "error" in box:
        raise box["error"]
    return box.get("value")


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "n.md"
    os.mkfifo(p)
    return p


def test_hashing_a_fifo_never_blocks(fifo):
    assert within(5, io.file_hash, fifo) == io.NOT_REGULAR


def test_a_checked_delete_of_a_note_replaced_by_a_fifo_is_refused_and_puts_it_back(fifo):
    with pytest.raises(io.WriteConflict):
        within(5, io.remove_if_unchanged, fifo, io.content_hash(b"base\n"))
    assert fifo.is_fifo() and [p.name for p in fifo.parent.iterdir()] == ["n.md"]


def test_reading_a_fifo_is_refused_at_once(fifo):
    with pytest.raises(io.SkipFile, match="not a regular file"):
        within(5, io.read_text, fifo, 1000)


def test_a_fifo_at_a_chat_records_name_is_refused_not_waited_on(tmp_path):
    from reme_engine.config import LayerSettings
    from reme_engine.memory import session as S

    layers = LayerSettings(app_dir="")
    rec = tmp_path / "session" / "dialog" / "s1.jsonl"
    rec.parent.mkdir(parents=True)
    os.mkfifo(rec)
    with pytest.raises(OSError):
        within(5, S.read_session, tmp_path, layers, "s1")
    with pytest.raises(S.RecordWriteError):
        within(5, S.append_messages, tmp_path, layers, "s1", [S.ChatMessage.create("user", "hello")])
    assert rec.is_fifo()
