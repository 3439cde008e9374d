"""Obsidian's Daily notes format (moment.js tokens, nested folders) decides where a day's page is: the engine's
path for a date is exactly the one Obsidian creates, listing and reading days work in nested folders, and a format
reme cannot follow (a time-of-day token) is a clear warning, never a wrong path.

The expected names come from moment.js 2.29.4 itself (the version Obsidian ships): ``moment(date,
'YYYY-MM-DD').format(fmt)`` run once under Node and pasted below, so this test needs neither Node nor the network.
"""

from __future__ import annotations

import json

import pytest

from reme_engine.config import ConfigError
from reme_engine.engine import EngineError
from reme_engine.vault.daily import DayFormatError, check_day_format, format_day, parse_day

#: (format, date, what moment.js 2.29.4 writes)
MOMENT = [
    ('YYYY/MM/DD', '2026-12-02', '2026/12/02'),
    ('YYYY/MM/DD', '2027-01-01', '2027/01/01'),
    ('YYYY/MM/DD', '2021-01-03', '2021/01/03'),
    ('YYYY/MM/DD', '2020-12-31', '2020/12/31'),
    ('YYYY/MM/DD', '2024-02-29', '2024/02/29'),
    ('YYYY/MM/DD', '2026-12-27', '2026/12/27'),
    ('YYYY/MM-MMM/YYYY-MM-DD-ddd', '2026-12-02', '2026/12-Dec/2026-12-02-Wed'),
    ('YYYY/MM-MMM/YYYY-MM-DD-ddd', '2027-01-01', '2027/01-Jan/2027-01-01-Fri'),
    ('YYYY/MM-MMM/YYYY-MM-DD-ddd', '2021-01-03', '2021/01-Jan/2021-01-03-Sun'),
    ('YYYY/MM-MMM/YYYY-MM-DD-ddd', '2020-12-31', '2020/12-Dec/2020-12-31-Thu'),
    ('YYYY/MM-MMM/YYYY-MM-DD-ddd', '2024-02-29', '2024/02-Feb/2024-02-29-Thu'),
    ('YYYY/MM-MMM/YYYY-MM-DD-ddd', '2026-12-27', '2026/12-Dec/2026-12-27-Sun'),
    ('YYYY/MMMM/YYYY-MM-DD dddd', '2026-12-02', '2026/December/2026-12-02 Wednesday'),
    ('YYYY/MMMM/YYYY-MM-DD dddd', '2027-01-01', '2027/January/2027-01-01 Friday'),
    ('YYYY/MMMM/YYYY-MM-DD dddd', '2021-01-03', '2021/January/2021-01-03 Sunday'),
    ('YYYY/MMMM/YYYY-MM-DD dddd', '2020-12-31', '2020/December/2020-12-31 Thursday'),
    ('YYYY/MMMM/YYYY-MM-DD dddd', '2024-02-29', '2024/February/2024-02-29 Thursday'),
    ('YYYY/MMMM/YYYY-MM-DD dddd', '2026-12-27', '2026/December/2026-12-27 Sunday'),
    ('DD.MM.YYYY', '2026-12-02', '02.12.2026'),
    ('DD.MM.YYYY', '2027-01-01', '01.01.2027'),
    ('DD.MM.YYYY', '2021-01-03', '03.01.2021'),
    ('DD.MM.YYYY', '2020-12-31', '31.12.2020'),
    ('DD.MM.YYYY', '2024-02-29', '29.02.2024'),
    ('DD.MM.YYYY', '2026-12-27', '27.12.2026'),
    ('YY-M-D', '2026-12-02', '26-12-2'),
    ('YY-M-D', '2027-01-01', '27-1-1'),
    ('YY-M-D', '2021-01-03', '21-1-3'),
    ('YY-M-D', '2020-12-31', '20-12-31'),
    ('YY-M-D', '2024-02-29', '24-2-29'),
    ('YY-M-D', '2026-12-27', '26-12-27'),
    ('dddd, MMMM Do YYYY', '2026-12-02', 'Wednesday, December 2nd 2026'),
    ('dddd, MMMM Do YYYY', '2027-01-01', 'Friday, January 1st 2027'),
    ('dddd, MMMM Do YYYY', '2021-01-03', 'Sunday, January 3rd 2021'),
    ('dddd, MMMM Do YYYY', '2020-12-31', 'Thursday, December 31st 2020'),
    ('dddd, MMMM Do YYYY', '2024-02-29', 'Thursday, February 29th 2024'),
    ('dddd, MMMM Do YYYY', '2026-12-27', 'Sunday, December 27th 2026'),
    ('L', '2026-12-02', '12/02/2026'),
    ('L', '2027-01-01', '01/01/2027'),
    ('L', '2021-01-03', '01/03/2021'),
    ('L', '2020-12-31', '12/31/2020'),
    ('L', '2024-02-29', '02/29/2024'),
    ('L', '2026-12-27', '12/27/2026'),
    ('ll', '2026-12-02', 'Dec 2, 2026'),
    ('ll', '2027-01-01', 'Jan 1, 2027'),
    ('ll', '2021-01-03', 'Jan 3, 2021'),
    ('ll', '2020-12-31', 'Dec 31, 2020'),
    ('ll', '2024-02-29', 'Feb 29, 2024'),
    ('ll', '2026-12-27', 'Dec 27, 2026'),
    ('GGGG-[W]WW-E', '2026-12-02', '2026-W49-3'),
    ('GGGG-[W]WW-E', '2027-01-01', '2026-W53-5'),
    ('GGGG-[W]WW-E', '2021-01-03', '2020-W53-7'),
    ('GGGG-[W]WW-E', '2020-12-31', '2020-W53-4'),
    ('GGGG-[W]WW-E', '2024-02-29', '2024-W09-4'),
    ('GGGG-[W]WW-E', '2026-12-27', '2026-W52-7'),
    ('gggg-[w]ww-e', '2026-12-02', '2026-w49-3'),
    ('gggg-[w]ww-e', '2027-01-01', '2027-w01-5'),
    ('gggg-[w]ww-e', '2021-01-03', '2021-w02-0'),
    ('gggg-[w]ww-e', '2020-12-31', '2021-w01-4'),
    ('gggg-[w]ww-e', '2024-02-29', '2024-w09-4'),
    ('gggg-[w]ww-e', '2026-12-27', '2027-w01-0'),
    ('DDDo [day of] YYYY', '2026-12-02', '336th day of 2026'),
    ('DDDo [day of] YYYY', '2027-01-01', '1st day of 2027'),
    ('DDDo [day of] YYYY', '2021-01-03', '3rd day of 2021'),
    ('DDDo [day of] YYYY', '2020-12-31', '366th day of 2020'),
    ('DDDo [day of] YYYY', '2024-02-29', '60th day of 2024'),
    ('DDDo [day of] YYYY', '2026-12-27', '361st day of 2026'),
    ('YYYY/[Q]Q/MM/DD', '2026-12-02', '2026/Q4/12/02'),
    ('YYYY/[Q]Q/MM/DD', '2027-01-01', '2027/Q1/01/01'),
    ('YYYY/[Q]Q/MM/DD', '2021-01-03', '2021/Q1/01/03'),
    ('YYYY/[Q]Q/MM/DD', '2020-12-31', '2020/Q4/12/31'),
    ('YYYY/[Q]Q/MM/DD', '2024-02-29', '2024/Q1/02/29'),
    ('YYYY/[Q]Q/MM/DD', '2026-12-27', '2026/Q4/12/27'),
    ('\\YYYY YYYY-MM-DD', '2026-12-02', 'YYYY 2026-12-02'),
    ('\\YYYY YYYY-MM-DD', '2027-01-01', 'YYYY 2027-01-01'),
    ('\\YYYY YYYY-MM-DD', '2021-01-03', 'YYYY 2021-01-03'),
    ('\\YYYY YYYY-MM-DD', '2020-12-31', 'YYYY 2020-12-31'),
    ('\\YYYY YYYY-MM-DD', '2024-02-29', 'YYYY 2024-02-29'),
    ('\\YYYY YYYY-MM-DD', '2026-12-27', 'YYYY 2026-12-27'),
    ('[[]YYYY[]]-MM-DD dd do', '2026-12-02', '[2026]-12-02 We 3rd'),
    ('[[]YYYY[]]-MM-DD dd do', '2027-01-01', '[2027]-01-01 Fr 5th'),
    ('[[]YYYY[]]-MM-DD dd do', '2021-01-03', '[2021]-01-03 Su 0th'),
    ('[[]YYYY[]]-MM-DD dd do', '2020-12-31', '[2020]-12-31 Th 4th'),
    ('[[]YYYY[]]-MM-DD dd do', '2024-02-29', '[2024]-02-29 Th 4th'),
    ('[[]YYYY[]]-MM-DD dd do', '2026-12-27', '[2026]-12-27 Su 0th'),
]


@pytest.mark.parametrize("fmt, date, want", MOMENT)
def test_names_are_what_moment_writes_and_read_back(fmt, date, want):
    assert format_day(fmt, date) == want
    if fmt.startswith("gggg"):  # locale week-year + week + weekday: named, not read back (rare for daily notes)
        return
    assert parse_day(fmt, want) == date


@pytest.mark.parametrize("fmt, why", [
    ("YYYY-MM-DD HHmm", "'HH' is a time-of-day"),
    ("YYYY-MM-DD-A", "'A' is a time-of-day"),
    ("LLL", "includes a time of day"),
    ("[Week] ww gggg", "the same name to different days"),
    ("YYYY/../MM-DD", "not a note inside the daily folder"),
    ("YYYY/[.hidden]/MM-DD", "not a note inside the daily folder"),
    ("/YYYY-MM-DD", "not a note inside the daily folder"),
    ("", "empty"),
])
def test_a_format_reme_cannot_follow_is_refused_with_a_reason(fmt, why):
    with pytest.raises(DayFormatError, match=why.replace("(", r"\(")):
        check_day_format(fmt)


def _vault(tmp_path, fmt: str, folder: str = "Journal"):
    v = tmp_path / "Vault"
    (v / ".obsidian").mkdir(parents=True)
    (v / ".obsidian/daily-notes.json").write_text(json.dumps({"folder": folder, "format": fmt}), encoding="utf-8")
    return v


def test_a_nested_format_resolves_lists_and_reads_the_notes_obsidian_made(tmp_path, open_engine):
    fmt = "YYYY/MM-MMM/YYYY-MM-DD-ddd"
    v = _vault(tmp_path, fmt)
    made = {"2026-11-30": "Journal/2026/11-Nov/2026-11-30-Mon.md", "2026-12-01": "Journal/2026/12-Dec/2026-12-01-Tue.md",
            "2026-12-02": "Journal/2026/12-Dec/2026-12-02-Wed.md"}
    for date, rel in made.items():  # as Obsidian's "Open today's daily note" creates them
        (v / rel).parent.mkdir(parents=True, exist_ok=True)
        (v / rel).write_text(f"# {date}\n\nquokka sighting on {date}\n", encoding="utf-8")
    (v / "Journal/2026/12-Dec/meeting notes.md").write_text("not a day\n", encoding="utf-8")
    (v / "Journal/2026/12-Dec/2026-12-02.md").write_text("another format's name\n", encoding="utf-8")
    e = open_engine(v)
    assert e.settings.layers.daily_dir == "Journal" and e.settings.layers.daily_format == fmt
    assert e.daily_format_warning is None
    for date, rel in made.items():
        assert e.day_page(date) == rel
    assert e.day_page("2027-01-01") == "Journal/2027/01-Jan/2027-01-01-Fri.md"  # not there yet: still its path
    assert e.list_days() == sorted(made, reverse=True)
    assert e.read(e.day_page("2026-12-01")).text.startswith("# 2026-12-01")
    # the day index goes into the note of that day, nowhere else (opt-in in an existing vault)
    before = (v / made["2026-12-02"]).read_bytes()
    res = e.daily_reindex("2026-12-02", insert_markers=True)
    assert res.path == made["2026-12-02"] and res.changed
    assert (v / made["2026-12-02"]).read_bytes().startswith(before)
    assert not (v / "Journal/2026-12-02.md").exists()
    # a new day page, when asked for, lands where Obsidian would have put it
    res = e.daily_reindex("2027-01-01", insert_markers=True)
    assert res.created and res.path == "Journal/2027/01-Jan/2027-01-01-Fri.md"
    assert (v / res.path).is_file() and "2027-01-01" in e.list_days()


def test_a_format_with_a_time_of_day_warns_and_names_no_page(tmp_path, open_engine):
    v = _vault(tmp_path, "YYYY-MM-DD HHmm")
    (v / "Journal").mkdir()
    (v / "Journal/2026-12-02 0915.md").write_text("# morning\n", encoding="utf-8")
    before = sorted(p.relative_to(v).as_posix() for p in v.rglob("*"))
    e = open_engine(v)
    assert "'HH' is a time-of-day" in e.daily_format_warning and ".obsidian/daily-notes.json" in \
        e.daily_format_warning and "layers.daily_format" in e.daily_format_warning
    with pytest.raises(EngineError, match="'HH' is a time-of-day"):
        e.day_page("2026-12-02")
    for call in (lambda: e.daily_create("2026-12-02"), lambda: e.daily_reindex("2026-12-02", True)):
        with pytest.raises(EngineError, match="time-of-day"):
            call()
    assert e.list_days() == []  # no guess at a day from a clock-named file
    assert sorted(p.relative_to(v).as_posix() for p in v.rglob("*")) == before  # nothing written
    # the user's own setting wins over Obsidian's, and a bad one is a config error naming it
    e2 = open_engine(v, layers={"daily_format": "YYYY-MM-DD [0915]"})
    assert e2.daily_format_warning is None and e2.day_page("2026-12-02") == "Journal/2026-12-02 0915.md"
    assert e2.list_days() == ["2026-12-02"]
    with pytest.raises(ConfigError, match="layers.daily_format: daily note format 'YYYY HH'"):
        open_engine(v, layers={"daily_format": "YYYY HH"})


def test_the_format_of_another_folder_does_not_apply(tmp_path, open_engine):
    v = _vault(tmp_path, "YYYY/MM/DD", folder="Elsewhere")
    (v / "daily").mkdir()
    e = open_engine(v)
    assert e.settings.layers.daily_dir == "daily"
    assert e.day_page("2026-12-02") == "daily/2026-12-02.md"


def test_periodic_notes_format_is_read_too(tmp_path, open_engine):
    v = tmp_path / "V"
    (v / ".obsidian/plugins/periodic-notes").mkdir(parents=True)
    (v / ".obsidian/plugins/periodic-notes/data.json").write_text(json.dumps(
        {"daily": {"enabled": True, "folder": "Days/", "format": "YYYY/YYYY-MM-DD"}}), encoding="utf-8")
    e = open_engine(v)
    assert e.day_page("2026-12-02") == "Days/2026/2026-12-02.md"


async def test_mcp_today_finds_the_nested_daily_note(tmp_path):
    pytest.importorskip("mcp")
    from test_mcp import call, stdio_session

    v = _vault(tmp_path, "YYYY/MM/DD")
    (v / "Journal/2026/12").mkdir(parents=True)
    (v / "Journal/2026/12/02.md").write_text("# Wed\n\nquokka\n", encoding="utf-8")
    async with stdio_session(v, tmp_path / "state") as s:
        t = await call(s, "today", date="2026-12-02")
        assert t["page"] == "Journal/2026/12/02.md" and "warning" not in t, t
        assert (await call(s, "read_note", path=t["page"]))["text"].startswith("# Wed")
        t3 = await call(s, "today", date="2026-12-03")
        assert t3["page"] is None and t3["page_path"] == "Journal/2026/12/03.md", t3
    (v / ".obsidian/daily-notes.json").write_text(json.dumps({"folder": "Journal", "format": "YYYY/MM/DD HH"}))
    async with stdio_session(v, tmp_path / "state2") as s:
        t = await call(s, "today", date="2026-12-02")
        assert t["page"] is None and t["page_path"] is None and "'HH' is a time-of-day" in t["warning"], t
        from test_mcp import status

        assert "'HH' is a time-of-day" in (await status(s))["warnings"][0]


def test_obsidian_daily_notes_in_a_folder_called_daily_stay_obsidians(tmp_path, open_engine):
    """A folder named like reme's own, but with Obsidian's nested format: the daily notes are the person's, so the
    app keeps its cards in the app folder and creates no day page there unless asked."""
    v = _vault(tmp_path, "YYYY/MM/DD", folder="daily")
    (v / "daily/2026/12").mkdir(parents=True)
    (v / "daily/2026/12/01.md").write_text("# Tue\n", encoding="utf-8")
    e = open_engine(v)
    assert e.settings.layers.daily_dir == "daily" and e.settings.layers.app_dir == "reme"
    assert e.day_page("2026-12-02") == "daily/2026/12/02.md"
    res = e.daily_reindex("2026-12-02")
    assert not res.changed and not (v / "daily/2026/12/02.md").exists()
    assert e.list_days() == ["2026-12-01"]
    # the same vault with Obsidian's default format keeps reme's own layout, as before
    w = tmp_path / "W"
    (w / ".obsidian").mkdir(parents=True)
    (w / ".obsidian/daily-notes.json").write_text(json.dumps({"folder": "daily"}), encoding="utf-8")
    (w / "daily").mkdir()
    assert open_engine(w).settings.layers.app_dir == ""
