"""A capture whose words reached the card but whose bookkeeping failed afterwards (the change journal or the
index could not be written: a full disk under SQLite) is reported as saved with a warning, never as "not
saved", so the person does not type the thought again and get it twice."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from reme_engine.errors import SavedWithWarning, WritePending
from reme_engine.memory.journal import ChangeJournal

sys.path.insert(0, str(Path(__file__).parent))
from test_capture_busy import setup  # noqa: E402,F401 - the fixture: (engine, session id, today's capture card)


def _disk_full(*_a, **_kw):
    raise sqlite3.OperationalError("disk I/O error")


def test_a_journal_that_cannot_record_leaves_the_words_saved_and_says_so(setup, monkeypatch):
    eng, sid, card = setup
    msg = eng.chat_append(sid, "user", "FULLDISK important thought")
    monkeypatch.setattr(ChangeJournal, "record", _disk_full)
    with pytest.raises(SavedWithWarning) as got:
        eng.chat_capture(sid, [msg])
    assert isinstance(got.value, WritePending)  # front ends show it as saved
    assert "was saved" in str(got.value) and "journal" in str(got.value)
    assert got.value.paths and card.read_text(encoding="utf-8").count("FULLDISK important thought") == 1
    monkeypatch.undo()
    # captured once: asking again (the person pressing Enter again on the same message) appends nothing
    assert eng.chat_capture(sid, [msg]) == [] or card.read_text(encoding="utf-8").count("FULLDISK") == 1
    assert card.read_text(encoding="utf-8").count("FULLDISK important thought") == 1


def test_an_index_that_cannot_be_written_leaves_the_words_saved_and_says_so(setup, monkeypatch):
    eng, sid, card = setup
    msg = eng.chat_append(sid, "user", "second thought under a full disk")
    monkeypatch.setattr(eng, "index_paths", _disk_full)
    with pytest.raises(SavedWithWarning, match="not indexed yet"):
        eng.chat_capture(sid, [msg])
    assert card.read_text(encoding="utf-8").count("second thought under a full disk") == 1


def test_a_capture_that_works_has_no_warning(setup):
    eng, sid, card = setup
    msg = eng.chat_append(sid, "user", "an ordinary thought")
    assert eng.chat_capture(sid, [msg])
    assert "an ordinary thought" in card.read_text(encoding="utf-8")
