"""Small modals: new note, follow a link of the open note, index status.

* :class:`NewNoteScreen` dismisses with the vault-relative path typed (``.md`` added) or None.
* :class:`LinkPickerScreen` dismisses with ``(target, anchor)`` of the chosen link or None.
* :class:`IndexStatusScreen` shows ``engine.status()``/``health_check()`` and the scheduler's next runs, read
  by its own thread worker; dismisses with None.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from .modal import Dialog
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from ..render import fit_text, one_line


def note_path_for(text: str, folder: str = "") -> str | None:
    """``"Idea"`` → ``folder/Idea.md``; a text with ``/`` is taken as a vault path. None when unusable."""
    raw = one_line(text).strip().strip("/")
    if not raw or raw.startswith(".") or ".." in raw.split("/"):
        return None
    if "/" not in raw and folder:
        raw = f"{folder.strip('/')}/{raw}"
    if not raw.lower().endswith(".md"):
        raw += ".md"
    return raw


class NewNoteScreen(Dialog[str | None]):
    """Ask for a new note's title or path. ``folder``: where a bare title goes."""

    BINDINGS = [Binding("escape", "close", "Cancel", id="new_note.close")]

    def __init__(self, folder: str = "", initial: str = "", reason: str = "") -> None:
        super().__init__()
        self.folder = folder
        self.initial = initial  # prefilled title or path (a dangling link's target)
        self.reason = reason  # a line above the prompt saying why the dialog opened
        # an attribute, not a query: keys may arrive before the nested input is mounted
        self.input = Input(value=initial, placeholder="Title or path", id="new-note-input")

    def compose(self) -> ComposeResult:
        box = Vertical(id="dialog-box")
        box.border_title = "New note"
        where = f"in {self.folder}/" if self.folder else "at the vault root"
        box.border_subtitle = "Enter creates · Esc cancels"
        with box:
            if self.reason:
                yield Static(self.reason, classes="dialog-help", markup=False)
            yield Static(f"Title (a bare title goes {where}; or type a path like digest/wiki/Name):",
                         classes="dialog-help", markup=False)
            yield self.input

    def on_mount(self) -> None:
        self.input.focus()

    @on(Input.Submitted, "#new-note-input")
    def _submitted(self, event: Input.Submitted) -> None:
        path = note_path_for(event.value, self.folder)
        if path is None:
            self.notify("Type a title or a path inside the vault", severity="warning")
            return
        self.dismiss(path)

    def action_close(self) -> None:
        self.dismiss(None)


class LinkPickerScreen(Dialog[tuple[str, str | None] | None]):
    """Choose one of ``links`` — ``(shown text, target, anchor)`` — to follow. Typing filters the list (the quick
    switcher's matching: substrings and in-order characters, CJK included); ↑↓ choose, Enter follows. Targets in
    ``missing`` (links to notes that do not exist) are marked "(missing)"; following one offers to create it."""

    BINDINGS = [
        Binding("escape", "close", "Close", id="links_picker.close"),
        Binding("down", "move(1)", "Next", show=False, id="links_picker.next"),
        Binding("up", "move(-1)", "Previous", show=False, id="links_picker.previous"),
    ]

    def __init__(self, links: list[tuple[str, str, str | None]], title: str = "Follow a link", *,
                 missing: set[str] | frozenset = frozenset()) -> None:
        super().__init__()
        self.links = links
        self.missing = frozenset(missing)
        self.title_text = title
        self.filter = Input(placeholder="type to filter the links", id="link-filter", compact=True)
        self.options = OptionList(*self._options(""), id="link-picker")

    def _options(self, query: str) -> list[Option]:
        from ..switcher import fold, score_text

        q = " ".join(fold(query).split())
        opts = []
        for i, (shown, target, anchor) in enumerate(self.links):
            dest = target + (f"#{anchor}" if anchor else "")
            if q and not all(score_text(term, fold(f"{shown} {dest}")) for term in q.split(" ")):
                continue
            gone = target in self.missing
            t = Text(one_line(shown), style="bold strike" if gone else "bold")
            if dest != shown:
                t.append(f"  {dest}", style="dim")
            if gone:
                t.append("  (missing)", style="italic red")
            opts.append(Option(fit_text(t, 100), id=str(i)))
        if not opts:
            msg = "This note has no links." if not self.links else f"No link matches {query.strip()!r}."
            opts.append(Option(Text(msg, style="dim italic"), disabled=True))
        return opts

    def compose(self) -> ComposeResult:
        box = Vertical(id="dialog-box", classes="-tall")
        box.border_title = self.title_text
        box.border_subtitle = "type to filter · ↑↓ · Enter follows · Esc closes"
        with box:
            yield self.filter
            yield self.options

    def on_mount(self) -> None:
        self.filter.focus()
        self.options.highlighted = 0 if self.links else None

    @on(Input.Changed, "#link-filter")
    def _filtered(self, event: Input.Changed) -> None:
        event.stop()
        self.options.set_options(self._options(event.value))
        if self.options.option_count and not self.options.get_option_at_index(0).disabled:
            self.options.highlighted = 0

    @on(Input.Submitted, "#link-filter")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        i = self.options.highlighted
        if i is not None and self.options.option_count:
            opt = self.options.get_option_at_index(i)
            if not opt.disabled:
                self._follow(opt.id)

    @on(OptionList.OptionSelected, "#link-picker")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._follow(event.option.id)

    def _follow(self, oid: str | None) -> None:
        _shown, target, anchor = self.links[int(oid or 0)]
        self.dismiss((target, anchor))

    def action_move(self, step: int) -> None:
        n = self.options.option_count
        if n:
            self.options.highlighted = max(0, min(n - 1, (self.options.highlighted or 0) + step))

    def action_close(self) -> None:
        self.dismiss(None)


class StatusRead(Message):
    """(Internal to :class:`IndexStatusScreen`.) What its worker read."""

    def __init__(self, status: dict, health: dict | None, schedule: list[tuple[str, str, str]],
                 error: str | None = None) -> None:
        super().__init__()
        self.status = status
        self.health = health
        self.schedule = schedule
        self.error = error


class IndexStatusScreen(Dialog[None]):
    """Index figures, embedder and LLM state, skipped files, scheduled jobs. ``schedule_fn`` (worker thread) →
    ``[(job, next run, last run)]``."""

    BINDINGS = [Binding("escape,q", "close", "Close", id="index_status.close")]

    def __init__(self, engine, schedule_fn=None) -> None:
        super().__init__()
        self.engine = engine
        self.schedule_fn = schedule_fn
        self.body = Static(Text("reading…", style="dim italic"), id="status-body")
        self.rows: list[tuple[str, str]] = []  # (what, value) as shown

    def compose(self) -> ComposeResult:
        box = VerticalScroll(id="dialog-box", classes="-tall")
        box.border_title = "Index status"
        box.border_subtitle = "Esc closes"
        with box:
            yield self.body

    def on_mount(self) -> None:
        self.read_status()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def read_status(self) -> None:
        try:
            status = self.engine.status()
            health = self.engine.health_check()
            schedule = self.schedule_fn() if self.schedule_fn else []
        except Exception as exc:
            self.post_message(StatusRead({}, None, [], f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(StatusRead(status, health, schedule))

    def on_status_read(self, message: StatusRead) -> None:
        if message.error:
            self.body.update(Text(f"⚠ {message.error}", style="italic"))
            return
        st, health = message.status, message.health or {}
        table = Table(box=None, show_header=False, expand=True, pad_edge=False)
        table.add_column("what", style="bold", no_wrap=True)
        table.add_column("value")
        rows = [
            ("vault", st.get("vault", "")),
            ("state dir", st.get("state_dir", "")),
            ("files", str(st.get("files", "?"))),
            ("chunks", str(st.get("chunks", "?"))),
            ("links", str(st.get("links", "?"))),
            ("vectors", str(st.get("vectors") if st.get("vectors") is not None else "—")),
            ("chunks without vectors", str(st.get("chunks_without_vectors", "—"))),
            ("last indexed", st.get("last_indexed") or "never"),
            ("embedder", st.get("embedder") or "off (keyword search only)"),
            ("LLM", "configured" if st.get("llm_configured") else "not configured"),
            ("tokenizer", st.get("tokenizer", "")),
        ]
        for name, nxt, last in message.schedule:
            rows.append((f"job {name}", f"next {nxt}" + (f" · last {last}" if last else "")))
        for name, v in (health.get("checks") or {}).items():
            rows.append((f"check {name}", str(v)))
        skipped = health.get("skipped") or []
        if skipped:
            rows.append(("skipped files", str(len(skipped))))
            for s in skipped[:20]:
                path = s.get("path") if isinstance(s, dict) else str(s)
                reason = s.get("reason", "") if isinstance(s, dict) else ""
                rows.append(("", f"{path}: {reason}"))
        self.rows = [(k, str(v)) for k, v in rows]
        for k, v in self.rows:
            table.add_row(k, Text(v))
        self.body.update(table)

    def action_close(self) -> None:
        self.dismiss(None)
