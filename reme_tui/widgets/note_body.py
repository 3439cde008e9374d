"""The note pane's two body widgets: the rendered Markdown (:class:`NoteMarkdown`, with reme's marker lines as
:class:`ReMeMarker` labels) and the read-only plain text (:class:`PlainNote`).

They live apart from :mod:`reme_tui.widgets.note_view` so that the app's first frame does not wait for them:
Textual's Markdown widget and TextArea cost ~40 ms of imports (measured with ``bench/bench_app.py``), and the
note pane is empty until the first note arrives. :class:`~reme_tui.widgets.note_view.NoteView` imports this
module and mounts both right after its first paint (or when a note comes first).
"""

from __future__ import annotations

from textual.binding import Binding
from textual.content import Content
from textual.widgets import Markdown, TextArea
from textual.widgets.markdown import MarkdownBlock

from ..messages import OpenNote


class PlainNote(TextArea):
    """The read-only text view. Its editing keys are switched off, so keys such as Backspace (Back) reach the
    screen's bindings instead of being swallowed. For a long file it holds a window of lines; ``alt+↓``/``alt+↑``
    post :class:`~reme_tui.messages.OpenNote` for the next/previous window."""

    BINDINGS = [
        Binding("alt+down", "window(1)", "Next lines", show=False, id="note.next_window"),
        Binding("alt+up", "window(-1)", "Previous lines", show=False, id="note.previous_window"),
    ]

    def action_window(self, direction: int) -> None:
        from .note_view import NoteView

        view = next((a for a in self.ancestors if isinstance(a, NoteView)), None)
        doc = view.doc if view is not None else None
        if doc is None or not doc.windowed:
            return
        if direction > 0 and doc.window_end < doc.total_lines:
            self.post_message(OpenNote(doc.path, doc.window_end + 1, history=False))
        elif direction < 0 and doc.window_start > 1:
            self.post_message(OpenNote(doc.path, max(1, doc.window_start - 1), history=False))

    EDIT_ACTIONS = frozenset({"delete_left", "delete_right", "delete_word_left", "delete_word_right",
                              "delete_line", "delete_to_start_of_line", "delete_to_end_of_line", "cut", "paste",
                              "undo", "redo"})

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.read_only and action in self.EDIT_ACTIONS:
            return False
        return super().check_action(action, parameters)


#: The reme marker lines (HTML comments, invisible in Obsidian's reading view) → their kind.
_MARKERS = (("<!-- reme:begin ", "begin"), ("<!-- reme:end -->", "end"),
            ("<!-- reme:day-index:start", "day-begin"), ("<!-- reme:day-index:end -->", "day-end"))


class ReMeMarker(MarkdownBlock):
    """One reme marker line (``<!-- reme:begin … -->`` etc.), shown as a short dim label instead of nothing, so
    the reader sees where reme's block starts and ends. ``kind``: begin/end/day-begin/day-end."""

    DEFAULT_CSS = """
    ReMeMarker {
        height: 1;
        color: $text-muted;
        text-style: italic;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, markdown: Markdown, token, kind: str) -> None:
        super().__init__(markdown, token)
        self.kind = kind
        self.set_label(True)

    def set_label(self, intact: bool) -> None:
        """Word the label for an intact block (reme's) or one the user edited inside (theirs now)."""
        if self.kind == "begin":
            text = "┄ reme proposes (edit it in to keep it, delete the block to dismiss)" if intact else \
                "┄ reme block you edited: yours now"
        elif self.kind == "day-begin":
            text = "┄ day index by reme" if intact else "┄ day index you edited: yours now"
        else:
            text = "┄ end of reme's block" if self.kind == "end" else "┄ end of the day index"
        self.set_content(Content(text))


class NoteMarkdown(Markdown):
    """The Markdown widget of the note pane: reme's marker comments become :class:`ReMeMarker` labels (other HTML
    is dropped, as the stock widget does)."""

    def unhandled_token(self, token):
        if token.type == "html_block":
            text = token.content.strip()
            for prefix, kind in _MARKERS:
                if text.startswith(prefix) and "\n" not in text:
                    return ReMeMarker(self, token, kind)
        return None
