"""Defects a new user hit: a one-line giant note, ``e`` racing another program's save, focus after opening a
note, and the open note after the app itself wrote it. Real app (``App.run_test``) on a temp copy of the demo vault."""

from __future__ import annotations

from textual.widgets import TextArea

from test_tui import open_and_wait, started, wait_for

from reme_tui.loaders import MAX_LINE_CHARS, bound_lines


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
