"""The Changes view: recent LLM pipeline runs, each change as a unified diff, and revert.

Reads ``engine.dream_log()`` and ``engine.dream_log(run_id=…, with_text=True)`` in thread workers; ``u`` asks the
engine to revert the highlighted run (files changed since are refused and listed). Posts nothing upward; it
dismisses with the list of reverted paths (possibly empty) so the main screen can reload what it shows.
"""

from __future__ import annotations

import difflib
import time

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from .modal import Dialog
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option


def change_diff(change: dict, context: int = 2) -> str:
    """Unified diff of one journaled change (before → after text); a delete shows the removed text."""
    before = (change.get("before_text") or "").splitlines(keepends=True)
    after = (change.get("after_text") or "").splitlines(keepends=True)
    path = change.get("path", "")
    lines = difflib.unified_diff(before, after, fromfile=f"a/{path}", tofile=f"b/{path}", n=context)
    return "".join(lines) or "(no textual change)"


class ChangesScreen(Dialog[list]):
    """Runs on the left (newest first), the selected run's diffs on the right."""

    BINDINGS = [
        Binding("escape", "close", "Close", id="changes.close"),
        Binding("u", "revert", "Revert run", id="changes.revert"),
    ]

    class Loaded(Message):
        def __init__(self, runs: list | None = None, detail: dict | None = None, reverted: dict | None = None,
                     error: str | None = None) -> None:
            super().__init__()
            self.runs, self.detail, self.reverted, self.error = runs, detail, reverted, error

    def __init__(self, engine) -> None:
        super().__init__()
        self.engine = engine
        self.runs: list[dict] = []
        self.reverted_paths: list[str] = []
        self.confirm_run: str | None = None  # the run a first `u` asked about
        # attributes, not queries: a result may arrive after the dialog was closed (its children removed)
        self.runs_list = OptionList(id="changes-runs")
        self.diff_view = Static("Select a run to see its changes.", id="changes-diff", markup=False)

    def compose(self) -> ComposeResult:
        box = Vertical(id="changes-box")
        box.border_title = "Changes made by reme and by agents"
        box.border_subtitle = "u revert run · Esc close"
        with box:
            with Horizontal():
                yield self.runs_list
                with VerticalScroll(id="changes-diff-scroll"):
                    yield self.diff_view

    def on_mount(self) -> None:
        self.runs_list.focus()
        self.runs_list.set_options([Option(Text("reading the change journal…", style="dim italic"), disabled=True)])
        self.diff_view.update("")
        self.load_runs()

    @work(thread=True, group="changes", exit_on_error=False)
    def load_runs(self) -> None:
        try:
            self.post_message(self.Loaded(runs=self.engine.dream_log(limit=50)["runs"]))
        except Exception as exc:
            self.post_message(self.Loaded(error=f"{type(exc).__name__}: {exc}"))

    @work(thread=True, exclusive=True, group="changes-detail", exit_on_error=False)
    def load_detail(self, run_id: str) -> None:
        try:
            self.post_message(self.Loaded(detail=self.engine.dream_log(run_id=run_id, with_text=True)))
        except Exception as exc:
            self.post_message(self.Loaded(error=f"{type(exc).__name__}: {exc}"))

    @work(thread=True, group="changes", exit_on_error=False)
    def do_revert(self, run_id: str) -> None:
        try:
            self.post_message(self.Loaded(reverted=self.engine.revert(run_id)))
        except Exception as exc:
            self.post_message(self.Loaded(error=f"{type(exc).__name__}: {exc}"))

    def on_changes_screen_loaded(self, message: Loaded) -> None:
        diff_view = self.diff_view
        if message.error:
            self.notify(message.error, title="Changes", severity="error")
            return
        if message.runs is not None:
            ol = self.runs_list
            # keep the highlight on the run it was on (a revert adds a run at the top: the highlight must not slide
            # onto another run, where a second `u u` would revert the wrong one)
            prev = (self.runs[ol.highlighted]["run_id"]
                    if self.runs and ol.highlighted is not None and ol.highlighted < len(self.runs) else None)
            self.runs = message.runs
            self.confirm_run = None
            ol.clear_options()
            if not self.runs:
                ol.add_option(Option(Text("No runs yet.", style="dim italic"), disabled=True))
                diff_view.update("No pipeline has changed the vault yet. Auto-memory (chat), auto-resource, "
                                 "auto-dream and the proactive refresh list their changes here, each one "
                                 "revertible with u.")
                return
            for r in self.runs:
                when = time.strftime("%m-%d %H:%M", time.localtime(r["started_at"]))
                mark = (" (reverted)" if r.get("reverted_at") else
                        " (partly reverted)" if r.get("revert_state") == "partial" else "")
                ol.add_option(Option(f"{when} {r['kind']} · {r['changes']} change(s) · {r['status']}{mark}",
                                     id=r["run_id"]))
            ids = [r["run_id"] for r in self.runs]
            ol.highlighted = ids.index(prev) if prev in ids else 0
        if message.detail is not None:
            out = Text()
            for ch in message.detail["changes"]:
                out.append(f"{ch['action']} {ch['path']}  ({ch['step']})\n", style="bold")
                for line in change_diff(ch).splitlines():
                    style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
                    out.append(line + "\n", style=style)
                out.append("\n")
            diff_view.update(out if out.plain else "This run changed no files.")
        if message.reverted is not None:
            rv = message.reverted
            self.reverted_paths += rv.get("restored", [])
            refused = rv.get("refused", [])
            if not rv.get("restored") and refused:
                text = "Nothing restored: every file changed since the run (the run stays revertible): "
                text += ", ".join(x["path"] for x in refused)
            else:
                text = f"Restored {len(rv.get('restored', []))} file(s)"
                if refused:
                    text += "; left as they are (changed since): " + ", ".join(x["path"] for x in refused)
            self.notify(text, title="Revert", severity="warning" if refused else "information", timeout=8)
            self.load_runs()

    @on(OptionList.OptionHighlighted, "#changes-runs")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id:
            self._ask(None)  # a confirmation is for the run it was asked about only
            self.diff_view.update(Text("reading the run…", style="dim italic"))
            self.load_detail(event.option.id)

    def _ask(self, run_id: str | None) -> None:
        self.confirm_run = run_id
        box = self.query_one("#changes-box")
        box.border_subtitle = ("Revert this run? u again reverts it · Esc cancels" if run_id
                               else "u revert run · Esc close")

    def action_revert(self) -> None:
        """First ``u``: ask; a second ``u`` on the same run reverts it."""
        ol = self.runs_list
        if ol.highlighted is None or not self.runs or ol.highlighted >= len(self.runs):
            return
        run = self.runs[ol.highlighted]
        if run.get("reverted_at"):
            self.notify("This run was already reverted.", title="Revert", timeout=3)
            return
        if self.confirm_run != run["run_id"]:
            self._ask(run["run_id"])
            self.notify(f"Revert {run['kind']} ({run['changes']} change(s))? Press u again to confirm.",
                        title="Revert", timeout=4)
            return
        self._ask(None)
        self.do_revert(run["run_id"])

    def action_close(self) -> None:
        if self.confirm_run is not None:  # Esc first cancels a pending revert question
            self._ask(None)
            return
        self.dismiss(self.reverted_paths)
