"""App-owned files of an existing (Obsidian) vault live in one app folder (reme_engine.vault.app_folder).

Chat records and proactive state go to ``reme/`` in a vault the app did not lay out; nothing lands in the user's
daily-notes folder or daily notes unless they opt in; the old places stay readable; the demo vault keeps its
layout. Every test runs the real engine on a temp vault.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from reme_engine.memory.capture import append_user_messages_verbatim
from reme_engine.memory.session import ChatMessage, read_session
from reme_engine.vault.daily import SKIP_NOT_CREATED

DAYS = ("2026-11-26", "2026-11-27", "2026-11-28")


def _obsidian_vault(root: Path) -> Path:
    v = root / "ObsidianVault"
    (v / ".obsidian").mkdir(parents=True)
    (v / ".obsidian/daily-notes.json").write_text('{"folder": "Journal", "format": "YYYY-MM-DD"}')
    (v / "Journal").mkdir()
    for i, d in enumerate(DAYS):
        (v / "Journal" / f"{d}.md").write_text(
            f"# {d}\n\nKubernetes readiness probes failed during the rollout; retry plan {i}.\n"
            "Learning Rust ownership and borrowing every evening.\n", encoding="utf-8")
    (v / "Projects").mkdir()
    (v / "Projects/rollout.md").write_text("# Rollout\n\nProbes and canaries.\n", encoding="utf-8")
    return v


def _bytes_under(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_an_obsidian_vault_keeps_chat_records_and_proactive_state_in_one_app_folder(tmp_path, open_engine):
    v = _obsidian_vault(tmp_path)
    journal_before = _bytes_under(v / "Journal")
    e = open_engine(v)
    assert e.settings.layers.daily_dir == "Journal"
    assert e.settings.layers.app_dir == "reme" and e.settings.layers.session_dir == "reme/session"

    e.chat_append("s1", "user", "remember: probes need a longer initial delay")
    assert (v / "reme/session/dialog/s1.jsonl").is_file() and not (v / "session").exists()
    assert [m.content for m in e.chat_history("s1")] == ["remember: probes need a longer initial delay"]

    e.index()
    rep = e.proactive_refresh(DAYS[-1], use_llm=False)
    assert rep.status == "written", (rep.errors, rep.warnings)
    assert rep.path == f"reme/proactive/{DAYS[-1]}/interests.yaml"
    doc = yaml.safe_load((v / rep.path).read_text(encoding="utf-8"))
    assert doc["generator"] == "keyword-fallback" and doc["topics"]
    assert (v / "reme/proactive/_proactive.yaml").is_file()
    # the user's daily-notes folder: not one byte changed or added (no YAML, no markers, no new day page)
    assert _bytes_under(v / "Journal") == journal_before

    read = e.proactive_read(DAYS[-1])
    assert read.success and not read.skipped and read.path == rep.path and read.topics

    # the day index is not inserted into the user's daily notes, nor a day page created, unless asked
    assert e.daily_reindex(DAYS[-1]).skipped
    fresh = e.daily_reindex("2026-11-29")
    assert fresh.skipped == SKIP_NOT_CREATED and not (v / "Journal/2026-11-29.md").exists()
    assert _bytes_under(v / "Journal") == journal_before
    opted = e.daily_reindex("2026-11-29", insert_markers=True)
    assert opted.created and (v / "Journal/2026-11-29.md").is_file()

    # the decision is kept: reopening (even after a daily/ folder appears) uses the same app folder
    (v / "daily").mkdir()
    e2 = open_engine(v)
    assert e2.settings.layers.app_dir == "reme" and e2.settings.layers.session_dir == "reme/session"


def test_records_and_state_in_the_old_places_stay_readable(tmp_path, open_engine):
    v = _obsidian_vault(tmp_path)
    old = v / "session/dialog/old.jsonl"
    old.parent.mkdir(parents=True)
    msg = {"id": "m1", "role": "user", "content": "an older chat", "created_at": "2026-11-28T09:00:00+08:00"}
    old.write_text(json.dumps(msg) + "\n", encoding="utf-8")
    day = v / "Journal" / DAYS[-1] / "interests.yaml"  # written by an older version
    day.parent.mkdir()
    day.write_text("version: 2\ndate: '2026-11-28'\ntopics:\n- id: t1\n  title: Probe delays\n  confidence: 0.8\n",
                   encoding="utf-8")
    # auto: the records an older version wrote stay where cards link to them, and new chats join them
    e = open_engine(v)
    assert e.settings.layers.app_dir == "reme" and e.settings.layers.session_dir == "session"
    e.chat_append("old", "user", "a follow-up")
    assert [m.content for m in read_session(v, e.settings.layers, "old")] == ["an older chat", "a follow-up"]
    read = e.proactive_read(DAYS[-1])  # proactive state: the old file is read until the app folder has one
    assert read.success and not read.skipped and [t["title"] for t in read.topics] == ["Probe delays"]
    assert read.path == f"Journal/{DAYS[-1]}/interests.yaml"

    # an explicit app folder: new chats go there, an old session keeps growing in its own file
    e2 = open_engine(v, layers={"app_dir": "reme"})
    assert e2.settings.layers.session_dir == "reme/session"
    e2.chat_append("old", "user", "third")
    assert [m.content for m in read_session(v, e2.settings.layers, "old")] == ["an older chat", "a follow-up",
                                                                               "third"]
    assert not (v / "reme/session/dialog/old.jsonl").exists()
    cap = append_user_messages_verbatim(e2, "old", [ChatMessage("m3", "user", "captured",
                                                                "2026-11-28T10:00:00+08:00")])
    card = (v / cap.paths[0]).read_text(encoding="utf-8")
    assert cap.paths[0] == "reme/daily/2026-11-28/capture.md" and "[[session/dialog/old.jsonl|chat]]" in card
    e2.chat_append("new", "user", "hello")
    assert (v / "reme/session/dialog/new.jsonl").is_file()


def test_the_demo_vault_keeps_its_layout_and_the_setting_decides(tmp_path, demo_vault, open_engine):
    e = open_engine(demo_vault)
    assert e.settings.layers.app_dir == "" and e.settings.layers.session_dir == "session"
    e.chat_append("demo-s", "user", "hi")
    assert (demo_vault / "session/dialog/demo-s.jsonl").is_file() and not (demo_vault / "reme").exists()

    v = _obsidian_vault(tmp_path)
    off = open_engine(v, layers={"app_dir": ""})  # the classic layout, asked for
    assert off.settings.layers.app_dir == "" and off.settings.layers.session_dir == "session"
    forced = open_engine(demo_vault, layers={"app_dir": "App data"})
    assert forced.settings.layers.session_dir == "App data/session"


def test_an_app_folder_outside_the_vault_or_hidden_is_refused(tmp_path, open_engine):
    import pytest

    from reme_engine.config import ConfigError

    v = _obsidian_vault(tmp_path)
    for bad in ("../elsewhere", ".reme", "/tmp/x"):
        with pytest.raises(ConfigError, match="app_dir"):
            open_engine(v, layers={"app_dir": bad})
    assert not (tmp_path / "elsewhere").exists() and not (v / ".reme").exists()


def test_a_capture_a_chat_and_a_refresh_create_files_only_in_the_app_folder(tmp_path, open_engine):
    """The knowledge-garden layout (daily notes in a nested ``Calendar/Daily notes``): a quick capture, a chat
    record and a proactive refresh add files under ``reme/`` only; every reader of a day's cards sees the card."""
    from conftest import tree
    from reme_engine.dream.extract import scan_changed
    from reme_engine.proactive.extract import scan_window

    v = tmp_path / "garden"
    (v / ".obsidian").mkdir(parents=True)
    (v / ".obsidian/daily-notes.json").write_text('{"folder": "Calendar/Daily notes"}', encoding="utf-8")
    daily = v / "Calendar/Daily notes"
    daily.mkdir(parents=True)
    for d in DAYS:
        (daily / f"{d}.md").write_text(f"# {d}\n\nReading about Kubernetes probes.\n", encoding="utf-8")
    (daily / "2026-11-27").mkdir()  # a day folder of the user's, with a note of theirs
    (daily / "2026-11-27/mine.md").write_text("# Mine\n\nMy own card.\n", encoding="utf-8")
    before = tree(v)
    e = open_engine(v)
    assert e.settings.layers.daily_dir == "Calendar/Daily notes" and e.settings.layers.app_dir == "reme"

    msg = e.chat_append("s1", "user", "buy oat milk and check the probe delays")
    day = msg.time(e.settings.tzinfo()).date().isoformat()
    assert e.chat_capture("s1", [msg]) == [f"reme/daily/{day}/capture.md"]
    e.chat_append("s1", "assistant", "noted")
    old_msg = ChatMessage("m-old", "user", "an idea from the 27th", "2026-11-27T10:00:00+08:00")
    assert e.chat_capture("s1", [old_msg]) == ["reme/daily/2026-11-27/capture.md"]
    noted = e.remember("the user prefers short standups", agent="claude",
                       conversation=[{"role": "user", "content": "keep standups short"}])
    assert noted["path"] == f"reme/daily/{day}/capture.md" and noted["session_path"].startswith("reme/session/")
    e.index()
    rep = e.proactive_refresh(DAYS[-1], use_llm=False)
    assert rep.status == "written", (rep.errors, rep.warnings)

    after = tree(v)
    assert {p for p in after if p not in before} == {
        "reme/session/dialog/s1.jsonl", f"reme/daily/{day}/capture.md", "reme/daily/2026-11-27/capture.md",
        noted["session_path"], f"reme/proactive/{DAYS[-1]}/interests.yaml", "reme/proactive/_proactive.yaml"}
    assert {p: b for p, b in after.items() if p in before} == before  # no byte of the user's changed
    assert not any(p.is_dir() for p in daily.iterdir() if p.name != "2026-11-27")  # no new day folder

    # readers of a day's cards see the app's card beside the user's own
    assert [c.path for c in e.daily_list("2026-11-27")] == ["Calendar/Daily notes/2026-11-27/mine.md",
                                                            "reme/daily/2026-11-27/capture.md"]
    assert day in e.list_days() and "2026-11-27" in e.list_days()
    from reme_tui.loaders import day_infos  # the TUI's day list counts both places

    assert {i.date: i.cards for i in day_infos(e, e.settings.layers.daily_dir, day)}["2026-11-27"] == 2
    assert "reme/daily/2026-11-27/capture.md" in scan_changed(e, "2026-11-27").scanned
    scan = scan_window(v, "Calendar/Daily notes", "2026-11-27", 1, 1 << 20, "reme/daily")
    assert [f.path for f in scan.files] == ["Calendar/Daily notes/2026-11-27.md",
                                            "Calendar/Daily notes/2026-11-27/mine.md",
                                            "reme/daily/2026-11-27/capture.md"]


def test_the_proactive_state_file_is_never_a_search_hit(demo_vault, open_engine, monkeypatch):
    """``daily/_proactive.yaml`` is the app's internal state: not indexed (a search never returns it, an index made
    before drops it); a day's ``interests.yaml`` stays searchable."""
    import reme_engine.index.scan as scan

    e = open_engine(demo_vault)
    rep = e.proactive_refresh("2026-11-28", use_llm=False)
    assert rep.status == "written" and (demo_vault / "daily/_proactive.yaml").is_file()
    with monkeypatch.context() as m:  # an index an older version made, with the state file in it
        m.setattr(scan, "APP_STATE_NAMES", frozenset())
        e.index()
        assert e.store.file_info("daily/_proactive.yaml") is not None
    e.index()
    indexed = {r[0] for r in e.store.conn.execute("SELECT path FROM files")}
    assert "daily/_proactive.yaml" not in indexed and "daily/2026-11-28/interests.yaml" in indexed
    title = yaml.safe_load((demo_vault / "daily/_proactive.yaml").read_text(encoding="utf-8"))["topics"][0]["title"]
    hits = e.search(title, limit=50, mode="keyword").hits
    assert hits and not any(h.path.endswith("_proactive.yaml") for h in hits)
