"""Defects a new user hit: a one-line giant note, ``e`` racing another program's save, focus after opening a
note, and the open note after the app itself wrote it. Real app (``App.run_test``) on a temp copy of the demo vault."""

from __future__ import annotations

from textual.widgets import TextArea

from test_tui import GUANGFU, XINNENGYUAN, open_and_wait, settle, started, wait_for

from reme_tui.loaders import MAX_LINE_CHARS, bound_lines
from reme_tui.messages import FollowLink


def test_bound_lines_keeps_lines_and_says_how_much_is_hidden():
    text, cut = bound_lines("a" * 10 + "\n" + "bbb\r\n" + "é" * 12 + "\r\nend", 5)
    lines = text.split("\n")
    assert cut == 2 and len(lines) == 4 and lines[1] == "bbb\r" and lines[3] == "end"
    assert lines[0].startswith("aaaaa … 5 B more on this line") and "$EDITOR" in lines[0]
    assert lines[2].startswith("ééééé … 14 B more") and lines[2].endswith("\r")
    assert bound_lines("short\nlines", 5) == ("short\nlines", 0)


async def test_a_one_line_megabyte_note_is_shown_cut_with_a_marker(app_for, demo_vault):
    # ~1.2 MB on one line, half of it links: the renderer must never get the whole line
    (demo_vault / "oneline.md").write_text("# One line\n\n" + "word [[README]] " * 80_000 + "\n", encoding="utf-8")
    (demo_vault / "mid.md").write_text("# Mid\n\n" + "x" * 60_000 + "\n\nafter\n", encoding="utf-8")
    app = app_for()
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        m = await open_and_wait(pilot, "oneline.md")
        plain = m.note.query_one("#note-plain", TextArea)
        assert plain.display  # large file: plain text, and its line bounded too
        longest = max(len(plain.document.get_line(i)) for i in range(plain.document.line_count))
        assert longest < MAX_LINE_CHARS + 100
        assert plain.document.line_count == 4  # lines kept: file lines still map to view lines
        assert "MB more on this line; press e to open it in $EDITOR" in plain.document.get_line(2)
        assert "long line cut" in m.note.summary
        # a Markdown-sized note with one long line is cut the same way before rendering
        m = await open_and_wait(pilot, "mid.md")
        assert m.note.scroller.display and not m.note.doc.plain
        assert max(len(line) for line in m.note.doc.body.split("\n")) < MAX_LINE_CHARS + 100
        assert "KB more on this line" in m.note.doc.body and "after" in m.note.doc.body


# -- 2. e ($EDITOR) never overwrites what another program saved meanwhile ------------------------------------------


def _editor(tmp_path, monkeypatch, body: str):
    import stat

    script = tmp_path / "stand-in-editor.sh"
    script.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("EDITOR", str(script))
    monkeypatch.delenv("VISUAL", raising=False)


async def test_edit_while_another_program_appends_keeps_both_texts(app_for, demo_vault, tmp_path, monkeypatch):
    note = demo_vault / GUANGFU
    before = note.read_bytes()
    # the "other program" appends 60 lines to the real note while the editor is open; then the editor saves
    # its copy with one line added
    other = "".join(f"synced line {i}\n" for i in range(60))
    _editor(tmp_path, monkeypatch, f"printf '{other}' >> '{note}'\nprintf 'my edit zebracorn\\n' >> \"$1\"\n")
    app = app_for()
    async with app.run_test(size=(120, 36)) as pilot:
        await started(pilot)
        m = await open_and_wait(pilot, GUANGFU)
        await pilot.press("e")
        copies = lambda: sorted(note.parent.glob("光伏产业链 (conflict *).md"))  # noqa: E731
        await wait_for(pilot, lambda: copies() and any("Edit conflict" == n.title for n in app._notifications),
                       what="conflict copy and warning")
        assert note.read_bytes() == before + other.encode()  # the other program's 60 lines are all there
        [copy] = copies()
        assert copy.read_bytes() == before + b"my edit zebracorn\n"  # and so is the user's edit
        warning = next(n for n in app._notifications if n.title == "Edit conflict")
        assert GUANGFU in warning.message and copy.relative_to(demo_vault).as_posix() in warning.message
        await wait_for(pilot, lambda: "synced line 59" in m.note.markdown.source, what="note shows the saved file")


async def test_edit_without_conflict_writes_back_and_no_change_writes_nothing(app_for, demo_vault, tmp_path,
                                                                              monkeypatch):
    note = demo_vault / GUANGFU
    before = note.read_bytes()
    _editor(tmp_path, monkeypatch, 'case "$1" in *reme-edit-*) ;; *) exit 3;; esac\n'  # a copy, never the note
            "printf 'my edit zebracorn\\n' >> \"$1\"\n")
    app = app_for()
    async with app.run_test(size=(120, 36)) as pilot:
        await started(pilot)
        m = await open_and_wait(pilot, GUANGFU)
        await pilot.press("e")
        await wait_for(pilot, lambda: "zebracorn" in m.note.markdown.source, what="edited text shown")
        assert note.read_bytes() == before + b"my edit zebracorn\n"
        assert [h.path for h in app.engine.search("zebracorn", mode="keyword", neighbors=False).hits] == [GUANGFU]
        assert not list(note.parent.glob("* (conflict *)*"))
        # an editor that changes nothing: the file is not touched at all
        _editor(tmp_path, monkeypatch, "true\n")
        stamp = note.stat().st_mtime_ns
        await pilot.press("e")
        await settle(pilot)
        assert note.stat().st_mtime_ns == stamp and note.read_bytes() == before + b"my edit zebracorn\n"


# -- 3. the note pane has the keys after opening a note ------------------------------------------------------------


async def test_opening_from_switcher_search_or_link_focuses_the_note(app_for):
    from reme_tui.screens.search import SearchScreen
    from reme_tui.screens.switcher import QuickSwitcherScreen

    def on_note(m) -> bool:
        return app.focused is not None and m.note in app.focused.ancestors_with_self

    app = app_for()
    async with app.run_test(size=(120, 36)) as pilot:
        m = await started(pilot)
        m.daily.focus_dates()
        await pilot.pause()
        assert not on_note(m)
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, QuickSwitcherScreen), what="switcher")
        s = app.screen
        await wait_for(pilot, lambda: s.matcher is not None and s.list.option_count > 0, what="note list")
        await pilot.press(*"光链")
        await wait_for(pilot, lambda: s.matches and s.matches[0].note.path == GUANGFU, what="match")
        await pilot.press("enter")
        await wait_for(pilot, lambda: m.note.path == GUANGFU and on_note(m), what="note focused after Ctrl+O")
        await settle(pilot)
        assert on_note(m)  # the switcher's closing did not hand focus back to the Daily list
        # a search result
        m.daily.focus_dates()
        await pilot.press("slash")
        await wait_for(pilot, lambda: isinstance(app.screen, SearchScreen), what="search")
        app.screen.dismiss(app.engine.search("新能源", mode="keyword", neighbors=False).hits[0])
        await wait_for(pilot, lambda: app.screen is m and on_note(m), what="note focused after search")
        # a followed link
        m.daily.focus_dates()
        await pilot.pause()
        m.post_message(FollowLink("新能源", None, GUANGFU))
        await wait_for(pilot, lambda: m.note.path == XINNENGYUAN and on_note(m), what="note focused after link")


# -- 4. the open note follows the app's own writes ---------------------------------------------------------------


async def test_day_page_shown_is_redrawn_after_a_quick_capture(app_for, demo_vault):
    app = app_for()
    async with app.run_test(size=(160, 48)) as pilot:
        m = await started(pilot)
        await pilot.press("t")
        page = f"{m.daily_dir}/{m.today()}.md"
        await wait_for(pilot, lambda: m.note.path == page, what="today's page")
        await settle(pilot)
        assert "capture" not in m.note.markdown.source
        await pilot.press("c")
        await pilot.press(*"zebracorn idea")
        await pilot.press("enter")
        card = demo_vault / m.daily_dir / m.today() / "capture.md"
        await wait_for(pilot, lambda: card.exists() and "capture" in (demo_vault / page).read_text(encoding="utf-8"),
                       what="card and day index written")
        # the pane shows the new link without any key pressed (the app's own write, not the watcher's)
        await wait_for(pilot, lambda: "capture" in m.note.markdown.source, what="day page redrawn")
        assert m.note.doc.sha and m.note.path == page
