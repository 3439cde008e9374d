"""The pipelines that read a window of days (proactive refresh, auto-dream's scan) find the day page where
Obsidian's Daily notes format puts it (nested folders), and read it as the day's page, not as a card."""

from __future__ import annotations

import json


def _nested_vault(tmp_path):
    v = tmp_path / "Vault"
    (v / ".obsidian").mkdir(parents=True)
    (v / ".obsidian/daily-notes.json").write_text(json.dumps({"folder": "Journal", "format": "YYYY/MM/YYYY-MM-DD"}),
                                                  encoding="utf-8")
    page = v / "Journal/2026/12/2026-12-02.md"
    page.parent.mkdir(parents=True)
    page.write_text("# 2026-12-02\n\n- quokka census planning with the rangers\n- quokka census budget\n",
                    encoding="utf-8")
    return v, "Journal/2026/12/2026-12-02.md"


def test_proactive_window_reads_the_nested_day_page_as_the_page(tmp_path, open_engine):
    from reme_engine.proactive.extract import scan_window

    v, rel = _nested_vault(tmp_path)
    e = open_engine(v)
    layers = e.settings.layers
    scan = scan_window(e.vault, layers.daily_dir, "2026-12-02", 1, e.settings.max_file_bytes, "", layers)
    assert [(f.path, f.is_page) for f in scan.files] == [(rel, True)]
    assert scan.skipped == []
    # the old flat name is not where this vault keeps its days
    assert not (v / "Journal/2026-12-02.md").exists()


def test_keyword_refresh_takes_topics_from_the_nested_day_page(tmp_path, open_engine):
    v, rel = _nested_vault(tmp_path)
    e = open_engine(v)
    e.index()
    rep = e.proactive_refresh("2026-12-02", use_llm=False)
    assert rep.status != "no_change", rep
    assert any("quokka census" in t["title"] for t in rep.topics), rep.topics


def test_dream_scan_lists_the_nested_day_page(tmp_path, open_engine):
    from reme_engine.dream.extract import scan_changed

    v, rel = _nested_vault(tmp_path)
    e = open_engine(v)
    res = scan_changed(e, "2026-12-02", 1)
    assert rel in res.scanned


def test_a_format_reme_cannot_follow_names_no_page_for_the_pipelines(tmp_path, open_engine):
    from reme_engine.proactive.extract import scan_window

    v = tmp_path / "Vault"
    (v / ".obsidian").mkdir(parents=True)
    (v / ".obsidian/daily-notes.json").write_text(json.dumps({"folder": "Journal", "format": "YYYY-MM-DD HHmm"}))
    (v / "Journal/2026-12-02").mkdir(parents=True)
    (v / "Journal/2026-12-02/card.md").write_text("# card\n\nquokka\n", encoding="utf-8")
    e = open_engine(v)
    assert e.daily_format_warning
    layers = e.settings.layers
    scan = scan_window(e.vault, layers.daily_dir, "2026-12-02", 1, e.settings.max_file_bytes, "", layers)
    assert [(f.path, f.is_page) for f in scan.files] == [("Journal/2026-12-02/card.md", False)]


def test_daily_create_makes_no_empty_folder_among_the_persons_daily_notes(tmp_path, open_engine):
    v, rel = _nested_vault(tmp_path)
    e = open_engine(v)
    res = e.daily_create("2026-12-03")
    assert res.page == "Journal/2026/12/2026-12-03.md" and (v / res.page).is_file()
    assert not (v / "Journal/2026-12-03").exists()  # the cards' folder lives in the app folder, not here
    assert not res.folder.startswith("Journal/")


def test_a_date_filter_finds_the_nested_day_pages(tmp_path, open_engine):
    from reme_engine.search.results import SearchFilters

    v, rel = _nested_vault(tmp_path)
    other = v / "Journal/2026/11-Nov/2026-11-30-Mon.md"
    other.parent.mkdir(parents=True)
    other.write_text("# 2026-11-30\n\nquokka sighting\n", encoding="utf-8")
    e = open_engine(v)
    e.index()
    got = e.search("quokka", mode="keyword", filters=SearchFilters(date_from="2026-12-01", date_to="2026-12-31"))
    assert [h.path for h in got.hits] == [rel]
    got = e.search("quokka", mode="keyword", filters=SearchFilters(date_from="2026-11-30", date_to="2026-11-30"))
    assert [h.path for h in got.hits] == ["Journal/2026/11-Nov/2026-11-30-Mon.md"]
