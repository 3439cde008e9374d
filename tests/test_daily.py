"""Tests for reme_engine.vault.daily (day pages, card listing, generated index section)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import re

import pytest
import yaml

from reme_engine.config import LayerSettings
from reme_engine.vault import daily as daily_mod
from reme_engine.vault.daily import (
    INDEX_END,
    INDEX_START,
    SKIP_NO_MARKERS,
    DailyCard,
    daily_create,
    daily_list,
    daily_reindex,
    list_days,
    render_day_index,
    valid_date,
)
from reme_engine.vault.io import WriteConflict
from reme_engine.vault.paths import VaultPathError

DATE = "2026-11-28"


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_bytes(text.encode("utf-8"))
    return path


def card(vault: Path, name: str, fm: str | None, body: str = "body\n", date: str = DATE) -> Path:
    text = (f"---\n{fm}\n---\n" if fm is not None else "") + body
    return write(vault / "daily" / date / name, text)


def section(text: str) -> str:
    """The lines between the day-index markers (the start marker carries a hash of them)."""
    s = text.index("<!-- reme:day-index:start")
    s = text.index("-->", s) + 3
    return text[s : text.index(INDEX_END, s)]


def start_marker(inner: str) -> str:
    from reme_engine.vault.provenance import block_digest

    return f"<!-- reme:day-index:start {block_digest(inner)} -->"


# --------------------------------------------------------------------------------------------- valid_date


@pytest.mark.parametrize("good", ["2026-11-28", "2024-02-29", "2000-01-01", " 2026-01-31 "])
def test_valid_date_accepts_calendar_dates(good):
    assert valid_date(good) == good.strip()


@pytest.mark.parametrize(
    "bad",
    ["", "2026-2-1", "2026/11/28", "20261128", "2026-13-01", "2026-02-30", "2025-02-29", "2026-11-28x",
     "../2026-11-28", "2026-11-28T10:00:00", "abcd-ef-gh", None, 20261128],
)
def test_valid_date_rejects(bad):
    with pytest.raises(ValueError):
        valid_date(bad)


def test_valid_date_accepts_date_objects():
    import datetime

    assert valid_date(datetime.date(2026, 11, 28)) == "2026-11-28"


# --------------------------------------------------------------------------------------------- daily_create


def test_daily_create_is_idempotent(tmp_path):
    r1 = daily_create(tmp_path, DATE, LayerSettings())
    assert r1.page_created and r1.folder_created
    assert r1.page == "daily/2026-11-28.md" and r1.folder == "daily/2026-11-28"
    page = tmp_path / "daily" / "2026-11-28.md"
    text = page.read_text(encoding="utf-8")
    assert "<!-- reme:day-index:start " in text and INDEX_END in text
    meta = yaml.safe_load(text.split("---\n")[1])
    assert str(meta["name"]) == DATE and str(meta["date"]) == DATE
    assert (tmp_path / "daily" / DATE).is_dir()

    page.write_text(text + "\nmy own words\n", encoding="utf-8")
    before = page.read_bytes()
    r2 = daily_create(tmp_path, DATE, LayerSettings())
    assert not r2.page_created and not r2.folder_created
    assert page.read_bytes() == before
    json.dumps(dataclasses.asdict(r2))


def test_daily_create_lists_existing_cards(tmp_path):
    card(tmp_path, "a.md", "name: Alpha\ndescription: first")
    r = daily_create(tmp_path, DATE)
    assert r.page_created and not r.folder_created
    text = (tmp_path / "daily" / f"{DATE}.md").read_text(encoding="utf-8")
    assert f"[[daily/{DATE}/a|Alpha]] — first" in text


def test_daily_create_respects_layer_folder(tmp_path):
    layers = LayerSettings(daily_dir="Journal/Daily")
    r = daily_create(tmp_path, DATE, layers)
    assert r.page == f"Journal/Daily/{DATE}.md"
    assert (tmp_path / "Journal" / "Daily" / DATE).is_dir()
    assert not (tmp_path / "daily").exists()


def test_daily_create_rejects_invalid_date_and_escaping_layer(tmp_path):
    with pytest.raises(ValueError):
        daily_create(tmp_path, "2026-02-30")
    with pytest.raises(VaultPathError):
        daily_create(tmp_path, DATE, LayerSettings(daily_dir="../outside"))
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------- daily_list


def test_daily_list_reads_frontmatter_and_sorts(tmp_path):
    card(tmp_path, "b-topic.md", "name: Topic B\ndescription: about B\ntags: [x]")
    card(tmp_path, "a.md", None, "# no frontmatter\n")
    card(tmp_path, "session_abc.md", 'name: Chat\nsession_id: abc\nsource_conversation: "[[session/dialog/abc.jsonl]]"')
    card(tmp_path, "res.md", 'name: Clip\nsource_resource: "[[resource/2026-11-28/x.md]]"')
    card(tmp_path, "broken.md", "name: [unclosed\ndescription: x")
    card(tmp_path, "dated.md", "name: 2026-11-28\ndescription: 12")
    card(tmp_path, "sub/nested.md", "name: Nested")
    write(tmp_path / "daily" / DATE / "interests.yaml", "version: 2\n")
    write(tmp_path / "daily" / DATE / ".hidden.md", "---\nname: hidden\n---\n")
    write(tmp_path / "daily" / DATE / ".obsidian" / "x.md", "x")
    write(tmp_path / "daily" / DATE / "notes.txt", "x")

    cards = daily_list(tmp_path, DATE, LayerSettings())
    paths = [c.path for c in cards]
    assert paths == sorted(paths)
    assert paths == [
        f"daily/{DATE}/a.md",
        f"daily/{DATE}/b-topic.md",
        f"daily/{DATE}/broken.md",
        f"daily/{DATE}/dated.md",
        f"daily/{DATE}/res.md",
        f"daily/{DATE}/session_abc.md",
        f"daily/{DATE}/sub/nested.md",
    ]
    by = {c.stem: c for c in cards}
    assert by["b-topic"].name == "Topic B" and by["b-topic"].description == "about B"
    assert by["a"].name == "a" and by["a"].description == ""
    assert by["broken"].name == "broken"  # invalid YAML: fall back to the stem
    assert by["dated"].name == "2026-11-28" and by["dated"].description == "12"
    assert by["session_abc"].kind == "session"
    assert by["res"].kind == "resource"
    assert by["b-topic"].kind == "note"
    assert by["a"].size == len("# no frontmatter\n".encode())
    assert by["a"].mtime > 0
    for c in cards:
        json.dumps(dataclasses.asdict(c))


def test_daily_list_missing_folder_and_unreadable_card(tmp_path):
    assert daily_list(tmp_path, DATE) == []
    write(tmp_path / "daily" / DATE / "bin.md", b"\x00\x01binary")
    (c,) = daily_list(tmp_path, DATE)
    assert c.name == "bin" and c.warning and "binary" in c.warning


def test_daily_list_falls_back_when_frontmatter_module_breaks(tmp_path, monkeypatch):
    import sys
    import types

    fake = types.ModuleType("reme_engine.markdown.frontmatter")

    def boom(text):
        raise RuntimeError("broken sibling module")

    fake.parse_frontmatter = boom
    monkeypatch.setitem(sys.modules, "reme_engine.markdown.frontmatter", fake)
    card(tmp_path, "x.md", "name: Still works")
    assert daily_list(tmp_path, DATE)[0].name == "Still works"


# --------------------------------------------------------------------------------------------- list_days


def test_list_days_newest_first(tmp_path):
    write(tmp_path / "daily" / "2026-11-25.md", "x")
    (tmp_path / "daily" / "2026-11-27").mkdir(parents=True)
    write(tmp_path / "daily" / "2026-11-26" / "a.md", "x")
    write(tmp_path / "daily" / "2026-11-26.md", "x")
    write(tmp_path / "daily" / "_proactive.yaml", "topics: []\n")
    write(tmp_path / "daily" / "notes.md", "x")
    write(tmp_path / "daily" / "2026-02-30.md", "x")
    (tmp_path / "daily" / "archive").mkdir()
    assert list_days(tmp_path, LayerSettings()) == ["2026-11-27", "2026-11-26", "2026-11-25"]
    assert list_days(tmp_path / "nowhere") == []


# --------------------------------------------------------------------------------------------- render


def test_render_day_index_format():
    cards = [
        DailyCard(f"daily/{DATE}/a.md", "a", "Alpha", "first card", "note", 1, 0.0),
        DailyCard(f"daily/{DATE}/b.md", "b", "B|[x]", "", "note", 1, 0.0),
        DailyCard(f"daily/{DATE}/c.md", "c", "C", "multi\nline  text", "note", 1, 0.0),
    ]
    assert render_day_index(DATE, cards) == (
        f"- [[daily/{DATE}/a|Alpha]] — first card\n"
        f"- [[daily/{DATE}/b|B/(x)]]\n"
        f"- [[daily/{DATE}/c|C]] — multi line text\n"
    )
    assert render_day_index(DATE, []) == ""
    with pytest.raises(ValueError):
        render_day_index("2026-13-01", [])


# --------------------------------------------------------------------------------------------- reindex


def test_reindex_creates_missing_page_or_skips(tmp_path):
    card(tmp_path, "a.md", "name: Alpha")
    r = daily_reindex(tmp_path, DATE, LayerSettings(), create_if_missing=False)
    assert r.skipped and not r.changed and not (tmp_path / "daily" / f"{DATE}.md").exists()
    r = daily_reindex(tmp_path, DATE, LayerSettings())
    assert r.changed and r.created and r.cards == 1 and r.sha
    assert f"[[daily/{DATE}/a|Alpha]]" in (tmp_path / "daily" / f"{DATE}.md").read_text(encoding="utf-8")
    json.dumps(dataclasses.asdict(r))


def test_reindex_regenerates_section_and_keeps_user_text(tmp_path):
    daily_create(tmp_path, DATE)
    page = tmp_path / "daily" / f"{DATE}.md"
    text = page.read_text(encoding="utf-8")
    before_user, after_user = "Morning thoughts 早上的想法\n\n", "\n\n## Notes\n- keep me  \n- 保留我\n"
    s, e = text.index("<!-- reme:day-index:start"), text.index(INDEX_END) + len(INDEX_END)
    page.write_text(text[:s] + before_user + text[s:e] + after_user, encoding="utf-8")
    prefix = page.read_text(encoding="utf-8")[: s + len(before_user)]

    card(tmp_path, "a.md", "name: Alpha\ndescription: one")
    card(tmp_path, "b.md", "name: Beta")
    r = daily_reindex(tmp_path, DATE)
    assert r.changed and not r.created and r.cards == 2
    new = page.read_text(encoding="utf-8")
    assert new.startswith(prefix)
    assert new.endswith(INDEX_END + after_user)
    assert section(new) == f"\n- [[daily/{DATE}/a|Alpha]] — one\n- [[daily/{DATE}/b|Beta]]\n"

    # Idempotent: nothing to do, file untouched.
    mtime = page.stat().st_mtime_ns
    r2 = daily_reindex(tmp_path, DATE)
    assert not r2.changed and r2.skipped is None and r2.sha == r.sha
    assert page.stat().st_mtime_ns == mtime

    # A removed card disappears from the index.
    (tmp_path / "daily" / DATE / "b.md").unlink()
    assert daily_reindex(tmp_path, DATE).changed
    assert "Beta" not in page.read_text(encoding="utf-8")
    assert page.read_text(encoding="utf-8").endswith(INDEX_END + after_user)


def test_reindex_keeps_crlf_and_bom_byte_for_byte(tmp_path):
    page = tmp_path / "daily" / f"{DATE}.md"
    head = "\ufeff---\r\nname: day\r\n---\r\n\r\nUser line with trailing spaces   \r\n".encode("utf-8")
    tail = "\r\nAfter the index\r\nlast line without newline".encode("utf-8")
    write(page, head + f"{INDEX_START}\r\n- [[daily/{DATE}/gone|Gone]]\r\n{INDEX_END}".encode() + tail)
    card(tmp_path, "a.md", "name: Alpha")
    r = daily_reindex(tmp_path, DATE)
    assert r.changed
    data = page.read_bytes()
    assert data.startswith(head)
    assert data.endswith(tail)
    middle = data[len(head) : len(data) - len(tail)].decode("utf-8")
    inner = f"- [[daily/{DATE}/a|Alpha]]"
    assert middle == f"{start_marker(inner)}\r\n{inner}\r\n{INDEX_END}"
    assert b"\n" not in data.replace(b"\r\n", b"")
    assert not daily_reindex(tmp_path, DATE).changed


def test_reindex_never_inserts_into_foreign_page_unless_enabled(tmp_path):
    page = write(tmp_path / "daily" / f"{DATE}.md", "# My own daily note\n\nNo markers here.")
    card(tmp_path, "a.md", "name: Alpha")
    before = page.read_bytes()
    r = daily_reindex(tmp_path, DATE)
    assert r.skipped == SKIP_NO_MARKERS == "page has no reme index markers"
    assert not r.changed and page.read_bytes() == before

    r = daily_reindex(tmp_path, DATE, insert_markers=True)
    assert r.changed and r.skipped is None
    text = page.read_text(encoding="utf-8")
    assert text.startswith(before.decode())
    inner = f"- [[daily/{DATE}/a|Alpha]]"
    assert text.endswith(f"{start_marker(inner)}\n{inner}\n{INDEX_END}\n")
    # Once inserted, later runs regenerate in place.
    assert not daily_reindex(tmp_path, DATE).changed


@pytest.mark.parametrize(
    "body",
    [f"{INDEX_START}\nno end\n", f"{INDEX_END}\n{INDEX_START}\n", f"text\n{INDEX_END}\n"],
)
def test_reindex_skips_malformed_markers(tmp_path, body):
    page = write(tmp_path / "daily" / f"{DATE}.md", body)
    r = daily_reindex(tmp_path, DATE, insert_markers=True)
    assert r.skipped and "malformed" in r.skipped
    assert page.read_text(encoding="utf-8") == body


def test_reindex_retries_once_after_concurrent_edit(tmp_path, monkeypatch):
    daily_create(tmp_path, DATE)
    card(tmp_path, "a.md", "name: Alpha")
    page = tmp_path / "daily" / f"{DATE}.md"
    real = daily_mod.atomic_write
    calls = []

    def racing_write(path, text, *, expected_sha=False):
        calls.append(expected_sha)
        if len(calls) == 1:  # the user saves the page between our read and our write
            with open(path, "ab") as fh:
                fh.write("user edit during reindex\n".encode())
        return real(path, text, expected_sha=expected_sha)

    monkeypatch.setattr(daily_mod, "atomic_write", racing_write)
    r = daily_reindex(tmp_path, DATE)
    assert r.changed and len(calls) == 2
    assert all(isinstance(c, str) for c in calls)  # hash-checked writes
    text = page.read_text(encoding="utf-8")
    assert "user edit during reindex" in text
    assert f"[[daily/{DATE}/a|Alpha]]" in text


def test_reindex_raises_write_conflict_when_user_keeps_editing(tmp_path, monkeypatch):
    daily_create(tmp_path, DATE)
    card(tmp_path, "a.md", "name: Alpha")
    page = tmp_path / "daily" / f"{DATE}.md"
    real = daily_mod.atomic_write
    n = {"edits": 0}

    def always_racing(path, text, *, expected_sha=False):
        n["edits"] += 1
        with open(path, "ab") as fh:
            fh.write(f"edit {n['edits']}\n".encode())
        return real(path, text, expected_sha=expected_sha)

    monkeypatch.setattr(daily_mod, "atomic_write", always_racing)
    with pytest.raises(WriteConflict):
        daily_reindex(tmp_path, DATE)
    text = page.read_text(encoding="utf-8")
    assert "edit 1\n" in text and "edit 2\n" in text
    assert "Alpha" not in text  # never clobbered the user's version


def test_reindex_custom_layer_and_invalid_date(tmp_path):
    layers = LayerSettings(daily_dir="journal")
    write(tmp_path / "journal" / DATE / "x.md", "---\nname: X\n---\n")
    r = daily_reindex(tmp_path, DATE, layers)
    assert r.path == f"journal/{DATE}.md" and r.created
    assert f"[[journal/{DATE}/x|X]]" in (tmp_path / "journal" / f"{DATE}.md").read_text(encoding="utf-8")
    with pytest.raises(ValueError):
        daily_reindex(tmp_path, "2026-11-31")


def test_reindex_skips_oversized_page(tmp_path):
    page = write(tmp_path / "daily" / f"{DATE}.md", f"{INDEX_START}\n{INDEX_END}\n" + "x" * 500)
    r = daily_reindex(tmp_path, DATE, max_bytes=100)
    assert r.skipped and "too large" in r.skipped and not r.changed
    assert os.path.getsize(page) > 100


def test_quoted_marker_is_user_text(tmp_path):
    """A marker quoted inline before the real section must not widen what gets replaced."""
    from reme_engine.vault.daily import INDEX_END, INDEX_START, daily_reindex

    page = tmp_path / "daily" / "2026-11-28.md"
    page.parent.mkdir(parents=True)
    (tmp_path / "daily" / "2026-11-28").mkdir()
    (tmp_path / "daily" / "2026-11-28" / "card.md").write_text("---\nname: Card\n---\nx\n")
    page.write_text(f"Notes about `{INDEX_START}` markers.\nMY IMPORTANT JOURNAL TEXT\n\n{INDEX_START}\n"
                    f"- [[daily/2026-11-28/stale|Stale]]\n{INDEX_END}\n")
    daily_reindex(tmp_path, "2026-11-28", None)
    text = page.read_text()
    assert "MY IMPORTANT JOURNAL TEXT" in text and "Stale" not in text and "Card" in text


@pytest.mark.parametrize("legacy", [False, True], ids=["hashed", "bare-marker"])
def test_a_line_the_user_types_inside_the_index_is_never_replaced(tmp_path, legacy):
    """The generated section is the app's only while it is as generated (its start marker's hash; for pages from
    before the hash: only card bullets). A line the user adds inside makes it theirs: reindex leaves the page
    byte for byte and says why; removing that line hands it back."""
    from reme_engine.vault.daily import SKIP_USER_EDITED
    from reme_engine.vault.provenance import note_ownership

    card(tmp_path, "a.md", "name: Alpha")
    daily_create(tmp_path, DATE)
    page = tmp_path / "daily" / f"{DATE}.md"
    text = page.read_text(encoding="utf-8")
    if legacy:
        text = re.sub(r"<!-- reme:day-index:start [0-9a-f]{16} -->", INDEX_START, text)
        page.write_text(text, encoding="utf-8")
    own = note_ownership(text)
    assert own.owner == "user" and [b.intact for b in own.blocks] == [True]  # the page is yours, the index reme's
    edited = text.replace(f"|Alpha]]\n", f"|Alpha]]\nmy note about Alpha — keep\n")
    page.write_text(edited, encoding="utf-8")
    card(tmp_path, "b.md", "name: Beta")
    r = daily_reindex(tmp_path, DATE)
    assert r.skipped == SKIP_USER_EDITED and not r.changed
    assert page.read_text(encoding="utf-8") == edited
    assert [b.intact for b in note_ownership(edited).blocks] == [False]
    page.write_text(text, encoding="utf-8")  # the user takes their line out again
    r = daily_reindex(tmp_path, DATE)
    assert r.changed and "Beta" in page.read_text(encoding="utf-8")


def test_daily_folder_of_an_existing_obsidian_vault_is_found(tmp_path, make_engine):
    from reme_engine.vault.daily import detect_daily_dir

    v = tmp_path / "v"
    for d in ("2023-04-12", "2023-04-13", "2023-04-20"):
        p = v / "Calendar" / "Daily notes" / f"{d}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# {d}\n")
    (v / "Archive").mkdir()
    (v / "Archive/2020-01-01.md").write_text("old\n")
    assert detect_daily_dir(v) == "Calendar/Daily notes"
    # an archive below the daily folder holding more days does not win over it
    for d in ("2022-01-01", "2022-01-02", "2022-01-03", "2022-01-04", "2022-01-05"):
        p = v / "Calendar" / "Daily notes" / "归档" / f"{d}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# {d}\n")
    assert detect_daily_dir(v) == "Calendar/Daily notes"
    # the core plugin's setting wins over the heuristic
    (v / ".obsidian").mkdir()
    (v / ".obsidian/daily-notes.json").write_text('{"folder": "Archive", "format": "YYYY-MM-DD"}')
    assert detect_daily_dir(v) == "Archive"
    (v / ".obsidian/daily-notes.json").write_text('{"folder": "../outside"}')
    assert detect_daily_dir(v) == "Calendar/Daily notes"
    e = make_engine(v, embed=False)
    assert e.settings.layers.daily_dir == "Calendar/Daily notes" and e.status()["daily_dir_detected"]
    e.index()
    assert "2023-04-20" in e.list_days()
    # a configured daily_dir, or an existing daily/ folder, is never overridden
    (v / "daily").mkdir()
    assert make_engine(v, embed=False).settings.layers.daily_dir == "daily"
    assert detect_daily_dir(tmp_path / "empty-not-there") is None


def test_older_sections_keep_every_line_the_app_did_not_write(tmp_path):
    """A section from before the hash is the app's only while each line is what it writes for a card of the day
    (or a bullet for a card that is gone): a bullet of the user's own, or a description the user changed, make it
    the user's — left byte for byte."""
    from reme_engine.vault.daily import SKIP_USER_EDITED

    card(tmp_path, "a.md", "name: Alpha\ndescription: one")
    page = tmp_path / "daily" / f"{DATE}.md"
    generated = f"- [[daily/{DATE}/a|Alpha]] — one\n"
    for inner in (generated + "- [[digest/wiki/x|my own reminder]] — call Priya\n",
                  f"- [[daily/{DATE}/a|Alpha]] — one, MY NOTE: call Priya\n"):
        write(page, f"# d\n\n{INDEX_START}\n{inner}{INDEX_END}\n")
        before = page.read_bytes()
        r = daily_reindex(tmp_path, DATE)
        assert r.skipped == SKIP_USER_EDITED and page.read_bytes() == before
    # the app's own lines, one for a card deleted since: regenerated
    write(page, f"# d\n\n{INDEX_START}\n{generated}- [[daily/{DATE}/gone|Gone]] — was here\n{INDEX_END}\n")
    r = daily_reindex(tmp_path, DATE)
    assert r.changed and "Gone" not in page.read_text(encoding="utf-8")


def test_markers_in_code_or_unpaired_are_the_users_text(tmp_path):
    """Markers inside fenced code are an example, not a section; a start with no end before the next start is not
    a section either: the user's text between them survives."""
    card(tmp_path, "a.md", "name: Alpha")
    page = tmp_path / "daily" / f"{DATE}.md"
    fenced = f"# d\n\n```md\n{INDEX_START}\n- [[daily/{DATE}/example|ex]] — example I typed\n{INDEX_END}\n```\n"
    write(page, fenced)
    r = daily_reindex(tmp_path, DATE)
    assert page.read_text(encoding="utf-8") == fenced and not r.changed and r.skipped
    write(page, f"# d\n\n{INDEX_START}\nmy own paragraph\n{INDEX_START}\n{INDEX_END}\n")
    daily_reindex(tmp_path, DATE)
    text = page.read_text(encoding="utf-8")
    assert "my own paragraph" in text and "Alpha" in text
