"""Chat without an LLM: when the words reach the capture card but the journal cannot record it (SQLite on a full
disk), the bubble says saved, with a warning, and the input is not refilled (sending again would duplicate)."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_tui import wait_for  # noqa: E402
from test_tui_panes import started  # noqa: E402


async def test_words_on_the_card_with_a_journal_failure_show_as_saved_with_a_warning(app_for, demo_vault,
                                                                                    monkeypatch):
    from reme_engine.memory.journal import ChangeJournal

    def disk_full(*_a, **_kw):
        raise sqlite3.OperationalError("disk I/O error")

    app = app_for()
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        monkeypatch.setattr(ChangeJournal, "record", disk_full)
        await pilot.press("c", *"FULLDISK important thought", "enter")
        await wait_for(pilot, lambda: any("see the warning" in b.status for b in m.chat.bubbles.values()),
                       what="saved with a warning", timeout=20)
        assert not any(b.status.startswith("⚠ not saved") for b in m.chat.bubbles.values())
        assert m.chat.input.value == ""
        assert any(n.title == "Chat saved, with a warning" and "journal" in n.message
                   for n in pilot.app._notifications)
    cards = list(demo_vault.glob("daily/*/capture.md"))
    assert sum(c.read_text(encoding="utf-8").count("FULLDISK important thought") for c in cards) == 1
