"""Paper cuts a fresh user hit, each with the behaviour that fixes it: the search says when weak hits are
hidden, the link picker marks missing notes, the chat transcript comes back after a restart, the status line fits
80 columns, the owner header says what reme keeps in a note, the layer filter offers the vault's own folders, and
``t`` on an existing (Obsidian) vault writes nothing the user did not write."""

from __future__ import annotations

import json

from reme_tui.app import create_app
from reme_tui.history import History
from reme_tui.render import ownership_line, why_line
from reme_tui.screens.dialogs import LinkPickerScreen
from reme_tui.screens.search import VECTOR_CANDIDATES, SearchScreen, hidden_text, plural

from test_tui import main, open_and_wait, option_texts, settle, started, wait_for

DEMO_DAY = "2026-11-28"


def test_history_is_a_browser_history():
    h = History()
    assert h.back() is None and h.forward() is None and not h.can_back
    h.visit("a.md")
    h.visit("b.md", 3)
    h.visit("b.md", 7)  # the same note again: its line moves, no second entry
    assert list(h) == [("a.md", None), ("b.md", 7)] and h.can_back and not h.can_forward
    assert h.back() == ("a.md", None) and h.forward() == ("b.md", 7)
    h.back()
    h.visit("c.md")  # a new visit drops the forward part
    assert [p for p, _ in h] == ["a.md", "c.md"] and h.recent() == ["c.md", "a.md"]


def test_owner_header_says_what_reme_keeps():
    assert ownership_line("user", "none", 1, 0) == "✎ yours: reme maintains 1 section here (marked ▎)"
    assert ownership_line("user", "none", 0, 2) == "✎ yours: you edited 2 reme sections"
    assert ownership_line("user", "none", 0, 0) == ""


async def test_search_says_when_weaker_hits_are_hidden(app_for):
    """A query whose tail the engine's relative floor cuts: the info line counts what was hidden."""
    app = app_for()
    async with app.run_test(size=(120, 30)) as pilot:
        await started(pilot)
        await pilot.press("slash", *"多晶硅 价格")
        s = pilot.app.screen
        assert isinstance(s, SearchScreen)
        await wait_for(pilot, lambda: s.result is not None and s.result.query == "多晶硅 价格" and s.shown_seq == s.seq,
                       what="results")
        hidden = s.result.hidden
        assert hidden > 0, "the demo query no longer has a weak tail; pick another"
        info = str(s.info.render())
        assert plural(len(s.result.hits), "hit") in info and hidden_text(hidden) in info


def test_hit_counts_read_as_english_and_the_vector_tail_is_not_counted():
    """"1 hit", not "1 hits"; a few hidden candidates are counted; most of the vector leg's candidates (the
    nearest notes by meaning, however far) are not "100 weaker hits"."""
    assert plural(1, "hit") == "1 hit" and plural(0, "hit") == "0 hits" and plural(3, "hit") == "3 hits"
    assert hidden_text(0) == ""
    assert hidden_text(1) == " · 1 weaker hit hidden" and hidden_text(7) == " · 7 weaker hits hidden"
    assert hidden_text(VECTOR_CANDIDATES) == hidden_text(VECTOR_CANDIDATES - 1) == " · weaker semantic matches hidden"


def test_why_line_says_when_the_title_vector_matched():
    from reme_engine.search.results import Hit

    def hit(**kw):
        return Hit("a.md", 1, 3, 0.5, "text", [], "a", "", 1, keyword_rank=None, vector_rank=2, vector_score=0.612,
                   **kw)

    assert why_line(hit(vector_title=True)) == "kw — · vec #2 (0.612 title) · fused 0.5"
    assert why_line(hit()) == "kw — · vec #2 (0.612) · fused 0.5"


async def test_search_shows_the_date_range_read_from_time_words(app_for):
    """"昨天聊了什么" (what did I talk about yesterday): the engine reads a one-day range and lists what is dated
    then; the info line says which dates and why the hits are what they are."""
    app = app_for(today=DEMO_DAY)
    async with app.run_test(size=(140, 30)) as pilot:
        await started(pilot)
        await pilot.press("slash", *"昨天聊了什么")
        s = pilot.app.screen
        assert isinstance(s, SearchScreen)
        await wait_for(pilot, lambda: s.result is not None and s.shown_seq == s.seq and s.result.query == "昨天聊了什么",
                       what="results")
        tr = s.result.time_range
        assert tr and tr["date_from"] == tr["date_to"] and tr["listing"] and tr["phrase"] == "昨天"
        info = str(s.info.render())
        assert f"dates {tr['date_from']} ('昨天'): what is dated then, newest first" in info, info
        # a query without time words has no such line
        s.input.value = "光伏"
        await wait_for(pilot, lambda: s.result is not None and s.result.query == "光伏" and s.shown_seq == s.seq,
                       what="results 2")
        assert s.result.time_range is None and "dates " not in str(s.info.render())


async def test_link_picker_marks_links_to_missing_notes(app_for, demo_vault):
    note = "digest/wiki/待写.md"
    (demo_vault / note).write_text("# 待写\n\nSee [[光伏产业链]] and [[还没写的笔记]].\n", encoding="utf-8")
    app = app_for()
    async with app.run_test(size=(120, 30)) as pilot:
        m = await started(pilot)
        await open_and_wait(pilot, note)
        assert m.note.doc.missing == frozenset({"还没写的笔记"})
        m.note.focus_body()
        await pilot.press("f")
        picker = pilot.app.screen
        assert isinstance(picker, LinkPickerScreen)
        rows = option_texts(picker.options)
        assert any("还没写的笔记" in r and "(missing)" in r for r in rows)
        assert any("光伏产业链" in r and "(missing)" not in r for r in rows)


async def test_chat_transcript_comes_back_after_a_restart(app_for, demo_vault, make_engine):
    """A message captured in one run is on screen again in the next one (read from the chat record), under an
    "earlier" divider; the new run writes its own record."""
    app = app_for(today=DEMO_DAY)
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        await wait_for(pilot, lambda: m.chat.restored is not None, what="restore")
        await pilot.press("c", *"跟踪表第一版", "enter")
        await wait_for(pilot, lambda: any(b.status.startswith("saved →") for b in m.chat.bubbles.values()),
                       what="captured")
        first = m.session_id
    eng = make_engine(demo_vault, embed=False)
    app2 = create_app(eng.settings, eng)
    async with app2.run_test(size=(160, 48)) as pilot:
        m2 = await started(pilot)
        await wait_for(pilot, lambda: m2.chat.restored is not None, what="restore")
        assert m2.chat.restored == first
        assert [b.text for b in m2.chat.bubbles.values()] == ["跟踪表第一版"]
        assert m2.session_id is None  # nothing written until the user writes
        await pilot.press("c", *"第二次", "enter")
        await wait_for(pilot, lambda: m2.session_id is not None, what="new session")
        assert m2.session_id != first
        record = demo_vault / "session" / "dialog" / f"{first}.jsonl"
        assert [json.loads(x)["content"] for x in record.read_text(encoding="utf-8").splitlines()] == ["跟踪表第一版"]


async def test_status_line_fits_80_columns(app_for):
    """At 80 columns the running work and the LLM state stay readable (shorter figures instead of an ellipsis)."""
    app = app_for()
    async with app.run_test(size=(80, 24)) as pilot:
        m = await started(pilot)
        m.status.set_work("indexing 5/20 (25%)")
        await pilot.pause()
        text = m.status.render_text()
        assert text.cell_len <= m.status.size.width
        assert "indexing 5/20 (25%)" in text.plain and text.plain.rstrip().endswith("no LLM")
    app = app_for()
    async with app.run_test(size=(160, 24)) as pilot:
        m = await started(pilot)
        assert "LLM: not configured" in m.status.render_text().plain and "embedder: off" in m.status.render_text().plain


async def test_status_figures_follow_a_running_pass(app_for, demo_vault):
    """While a pass reports progress, the status line re-reads the index figures (the first sync commits in
    batches), so its file count moves before the pass ends instead of staying at the opening figure."""
    app = app_for()
    async with app.run_test(size=(160, 24)) as pilot:
        m = await started(pilot)
        await wait_for(pilot, lambda: "files" in (m.status.status or {}))
        before = m.status.status["files"]
        (demo_vault / "new-note.md").write_text("# New\n\nfresh words\n", encoding="utf-8")
        await settle(pilot)
        m.engine.index_paths(["new-note.md"])  # committed by a pass the status line was not told about
        m.status.FIGURES_EVERY = 0.0  # every progress report re-reads
        m.status.show_progress("indexing", 1, 2)
        await wait_for(pilot, lambda: m.status.status.get("files") == before + 1)
        assert f"{before + 1} files" in m.status.render_text().plain


def _obsidian_vault(tmp_path):
    vault = tmp_path / "obs"
    (vault / "Journal").mkdir(parents=True)
    (vault / ".obsidian").mkdir()
    (vault / ".obsidian" / "daily-notes.json").write_text('{"folder": "Journal"}', encoding="utf-8")
    for d in ("2026-11-26", "2026-11-27"):
        (vault / "Journal" / f"{d}.md").write_text(f"# {d}\n\nwrote something\n", encoding="utf-8")
    (vault / "Projects").mkdir()
    (vault / "Projects" / "plan.md").write_text("# Plan\n", encoding="utf-8")
    return vault


async def test_today_on_an_obsidian_vault_writes_nothing_until_the_user_does(tmp_path, make_engine, monkeypatch):
    """``t`` shows today's page as not written yet: no day folder, no page, no day-index section; ``e`` lets the
    user write it (here an "editor" that appends a line), and only then the file exists, with exactly that."""
    vault = _obsidian_vault(tmp_path)
    before = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*"))
    eng = make_engine(vault, embed=False, layers={"daily_dir": "Journal"})
    eng.settings.today = lambda: "2026-11-28"
    app = create_app(eng.settings, eng)
    async with app.run_test(size=(120, 30)) as pilot:
        m = await started(pilot)
        m.note.focus_body()
        await pilot.press("t")
        page = "Journal/2026-11-28.md"
        await wait_for(pilot, lambda: m.note.path == page, what="today's placeholder")
        await settle(pilot)
        assert m.note.doc.unwritten and m.note.border_title == f"{page} · not written yet"
        assert sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*")) == before
        editor = tmp_path / "editor.sh"
        editor.write_text('#!/bin/sh\nprintf "my first line\\n" >> "$1"\n', encoding="utf-8")
        editor.chmod(0o755)
        monkeypatch.setenv("VISUAL", str(editor))
        await pilot.press("e")
        await wait_for(pilot, lambda: m.note.doc is not None and not m.note.doc.unwritten, what="written page shown")
        assert (vault / page).read_text(encoding="utf-8") == "my first line\n"
        assert not (vault / "Journal" / "2026-11-28").exists()


async def test_layer_filter_offers_the_vaults_own_folders(tmp_path, make_engine):
    vault = _obsidian_vault(tmp_path)
    eng = make_engine(vault, embed=False, layers={"daily_dir": "Journal"})
    app = create_app(eng.settings, eng)
    async with app.run_test(size=(120, 30)) as pilot:
        m = await started(pilot)
        await wait_for(pilot, lambda: m.vault_tree.top_dirs is not None, what="tree")
        await pilot.press("slash")
        s = pilot.app.screen
        assert isinstance(s, SearchScreen)
        values = [v for _label, v in s.layer_select._options if isinstance(v, str)]
        assert values == ["Journal", "Projects"]  # the daily layer first, no digest/resource/session offered
        assert main(pilot.app) is m


def test_agenda_fields_wrap_instead_of_being_cut():
    """At the Agenda pane's narrow widths (80–100 columns) the next action takes a second line before it is cut."""
    from rich.cells import cell_len

    from reme_tui.widgets.agenda import agenda_prompt

    item = {"title": "检索评测自动化", "next_action": "Add the recall@10 gate (max drop 0.02) to CI and run it on "
            "every pull request touching search"}
    lines = agenda_prompt(1, item, 36).plain.splitlines()
    assert lines[1].startswith("  → Add the recall@10 gate") and lines[2].startswith("    0.02) to CI")
    assert lines[2].endswith("…") and all(cell_len(x) <= 36 for x in lines)
    short = agenda_prompt(1, {"title": "t", "next_action": "Read it"}, 36).plain.splitlines()
    assert short == ["1. t", "  → Read it"]


async def test_the_tokenizer_dictionary_loads_in_a_worker_at_startup(app_for, monkeypatch):
    """The first tokenisation loads the dictionary (0.2–1 s): the app does it at startup on a worker thread, so
    the first search keystroke does not pay for it on the UI thread — also when the index is already up to date
    (no note to tokenise at startup)."""
    import threading

    import pytest

    from reme_engine.index import tokenizer as tk

    app = app_for()
    app.engine.index(vectors=False)  # up to date: the app's own index pass will not tokenise anything
    tok = app.engine.tokenizer
    if tok.backend.startswith("rjieba"):
        loads: list[bool] = []
        real = tk._rjieba_cut

        def recording_cut():
            loads.append(threading.current_thread() is threading.main_thread())
            return real()

        monkeypatch.setattr(tk, "_rjieba_cut", recording_cut)
        monkeypatch.setattr(tok, "_cut", None)  # as in a fresh process: not loaded yet
    else:
        pytest.skip(f"the {tok.backend} backend loads its dictionary inside jieba")
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot)
        await settle(pilot)
        assert loads == [False], "the dictionary was loaded on the UI thread or not at all"
        assert tok._cut is not None
