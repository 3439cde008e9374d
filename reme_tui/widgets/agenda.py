"""The Agenda pane: a day's proactive result (``engine.proactive_read``) — the agenda items in order (opener,
next action, delivery, why), then the topics with their kind and confidence.

A date field at the top picks the day (Enter reads it; ``←``/``→`` on the list step one day). When the day has
no interests file the pane says so calmly, with the time of the next scheduled refresh.

It loads its own data (``loaders.agenda`` in a thread worker; another day picked posts
:class:`~reme_tui.messages.AgendaRequested` to itself) and re-reads the day shown when its interests file changes
(the context's ``vault_changed`` signal). Posts up:

* :class:`~reme_tui.messages.FollowLink` when an item or topic is chosen (its evidence note, resolved by the
  screen the way wikilinks are).
"""

from __future__ import annotations

import datetime as _dt

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option

from .. import loaders
from ..messages import AgendaLoaded, AgendaRequested, FollowLink, RefreshFinished
from ..render import fit_text, one_line, row_width

def _strip_link(value: str) -> str:
    v = one_line(value)
    if v.startswith("![["):
        v = v[1:]
    if v.startswith("[[") and v.endswith("]]"):
        v = v[2:-2].split("|", 1)[0]
    return v.strip()


def evidence_target(item: dict, topics_by_id: dict[str, dict]) -> str | None:
    """The note an agenda item or topic points at: the topic's ``evidence`` (when it names a note), else its
    first path, else the item's first ``linked_memory``."""
    topic = item if "topic_id" not in item else topics_by_id.get(str(item.get("topic_id")), {})
    cands: list = []
    for src in (topic, item):
        ev = src.get("evidence")
        if isinstance(ev, list):
            cands.extend(ev)
        elif ev:
            cands.append(ev)
        cands.extend(src.get("paths") or [])
        cands.extend(src.get("linked_memory") or [])
    for c in cands:
        if not isinstance(c, str):
            continue
        t = _strip_link(c)
        # evidence may be prose ("the user said …"); a note reference has no spaces around a path-ish shape
        if t and ("/" in t or t.lower().endswith(".md")) and "\n" not in t:
            return t
    return None


#: Lines an agenda field or topic reason may take before it is cut (at 80–100 columns one line cut the next
#: action in half; more than two would let one item fill the pane).
FIELD_LINES = 2
_WRAP_CONSOLE = None


def wrap_lines(t: Text, width: int, max_lines: int = FIELD_LINES, indent: int = 4) -> Text:
    """``t`` wrapped to ``width`` cells (CJK aware), continuation lines indented by ``indent``; the last line
    kept is cut with an ellipsis when more would follow."""
    global _WRAP_CONSOLE
    if t.cell_len <= width or max_lines <= 1:
        return fit_text(t, width)
    if _WRAP_CONSOLE is None:
        import io

        from rich.console import Console

        _WRAP_CONSOLE = Console(file=io.StringIO(), width=200)
    first, *rest = t.wrap(_WRAP_CONSOLE, width)
    lines = [first]
    if rest:
        tail = Text(" ").join(rest)  # re-wrap the rest at the indented width
        more = tail.wrap(_WRAP_CONSOLE, max(8, width - indent))
        for i, line in enumerate(more[: max_lines - 1]):
            line = Text(" " * indent) + line
            if i == max_lines - 2 and len(more) > max_lines - 1:
                line = fit_text(line + Text(" …"), width)
            lines.append(fit_text(line, width))
    return Text("\n").join(lines)


def _field(label: str, value, width: int, style: str = "") -> Text | None:
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, list):
        value = ", ".join(str(v) for v in value)
    t = Text("  ")
    t.append(f"{label} ", style="dim")
    t.append(one_line(str(value)), style=style)
    return wrap_lines(t, width)


def agenda_prompt(n: int, item: dict, width: int) -> Text:
    head = Text(f"{n}. ", style="bold")
    head.append(one_line(item.get("title") or "(untitled)"), style="bold")
    if item.get("scenario_type"):
        head.append(f"  {item['scenario_type']}", style="dim italic")
    lines = [fit_text(head, width)]
    for label, key, style in (("“", "opener", "italic"), ("→", "next_action", ""),
                              ("via", "delivery", "dim"), ("why", "order_reason", "dim")):
        f = _field(label, item.get(key), width, style)
        if f is not None:
            lines.append(f)
    return Text("\n").join(lines)


def topic_prompt(topic: dict, width: int) -> Text:
    """``• title`` on the first line; ``kind · confidence — reason`` dimmed on the second."""
    head = Text("• ")
    head.append(one_line(topic.get("title") or "(untitled)"), style="bold")
    meta = []
    if topic.get("kind"):
        meta.append(str(topic["kind"]))
    conf = topic.get("confidence")
    if isinstance(conf, (int, float)):
        meta.append(f"{conf:.2f}")
    second = Text("  ")
    second.append(" · ".join(meta), style="italic")
    if topic.get("reason"):
        second.append((" — " if meta else "") + one_line(topic["reason"]), style="dim")
    return Text("\n").join([fit_text(head, width), wrap_lines(second, width)])


def next_refresh_text(when, now: _dt.datetime | None = None) -> str:
    """``today 18:00 (in 3 h 10 min)`` / ``Mon 30 Nov 18:00`` for an aware datetime."""
    if when is None:
        return ""
    now = now or _dt.datetime.now(when.tzinfo)
    delta = when - now
    mins = max(0, int(delta.total_seconds() // 60))
    rel = f"in {mins // 60} h {mins % 60} min" if mins >= 60 else f"in {mins} min"
    if when.date() == now.date():
        day = "today"
    elif when.date() == now.date() + _dt.timedelta(days=1):
        day = "tomorrow"
    else:
        day = when.strftime("%a %d %b")
    return f"{day} {when.strftime('%H:%M')} ({rel})"


class AgendaList(OptionList):
    """Agenda items then topics. ``←``/``→`` step one day (handled by :class:`AgendaPane`)."""

    BINDINGS = [
        Binding("left", "step(-1)", "Day before", show=False, id="agenda.previous_day"),
        Binding("right", "step(1)", "Day after", show=False, id="agenda.next_day"),
    ]

    def action_step(self, delta: int) -> None:
        pane = next((a for a in self.ancestors if isinstance(a, AgendaPane)), None)
        if pane is not None:
            pane.step(delta)


class AgendaPane(Vertical):
    """``date``: the day shown (None until the first answer); ``result``: the ``ProactiveReadResult`` shown."""

    def __init__(self, ctx=None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ctx = ctx  # PaneContext (None: a bare view filled by show)
        self.refresh_running = False
        self.date: str | None = None
        self.today: str | None = None
        self.result = None
        self.next_refresh = None
        self.carried = None  # open topics carried forward, shown on a day without a refresh
        self.pending: str | None = None  # the day asked for by ←/→ whose answer is not in yet
        self.error: str | None = None
        self.items: dict[str, dict] = {}  # option id → agenda item / topic
        self.topics_by_id: dict[str, dict] = {}
        self._width = 0
        # Today's date from the first frame: the empty field's placeholder ("YYYY-MM-DD") flashed until the first
        # answer came in. ``ctx.today()`` is the settings' clock, the same day the first load asks for.
        first = self._today_or_none()
        self.date_input = Input(first or "", placeholder="YYYY-MM-DD", id="agenda-date", compact=True,
                                max_length=10)
        self.list = AgendaList(id="agenda-list")
        self._first_title = "Agenda · today" if first else "Agenda"

    def _today_or_none(self) -> str | None:
        try:
            return self.ctx.today() if self.ctx is not None else None
        except Exception:  # a clock that cannot say (bad timezone): the field stays empty until the answer
            return None

    def compose(self) -> ComposeResult:
        yield self.date_input
        yield self.list

    def on_mount(self) -> None:
        self.border_title = self._first_title
        self.show_message("Reading today's agenda…")
        if self.ctx is not None:
            self.ctx.vault_changed.subscribe(self, self._vault_changed)

    # -- loading (a thread worker → a message to itself) ----------------------------------------------------
    @work(thread=True, exclusive=True, group="agenda", exit_on_error=False)
    def load(self, date: str = "") -> None:
        """Read the agenda of ``date`` ("" = today)."""
        ctx = self.ctx
        today = ctx.today()
        try:
            res, nxt, carried = loaders.agenda(ctx.engine, ctx.settings, date, today)
        except Exception as exc:
            self.post_message(AgendaLoaded(date or today, today, None, error=loaders.error_text(exc)))
            return
        self.post_message(AgendaLoaded(date or today, today, res, nxt, carried=carried))

    def on_agenda_requested(self, message: AgendaRequested) -> None:
        if self.ctx is not None:
            message.stop()
            self.load(message.date)

    def on_agenda_loaded(self, message: AgendaLoaded) -> None:
        message.stop()
        self.show(message.date, message.today, message.result, message.next_refresh, message.error,
                  carried=message.carried)

    # -- refresh (r) ----------------------------------------------------------------------------------------
    def refresh_today(self) -> bool:
        """Run today's proactive refresh now (keyword fallback without an LLM); False when one is running."""
        if self.refresh_running:
            self.notify("A refresh is already running", timeout=3)
            return False
        self.refresh_running = True
        self._run_refresh(self.ctx.today())
        return True

    @work(thread=True, exclusive=True, group="refresh", exit_on_error=False)
    def _run_refresh(self, date: str) -> None:
        try:
            # carry_forward: a fresh day gets its file from the open topics even when no daily note changed
            res = self.ctx.engine.proactive_refresh(date, carry_forward=True)
        except Exception as exc:
            self.post_message(RefreshFinished(date, error=loaders.error_text(exc)))
            return
        self.post_message(RefreshFinished(date, res))

    def on_refresh_finished(self, message: RefreshFinished) -> None:  # bubbles on: the screen's status and days
        self.refresh_running = False
        if message.error:
            self.notify(message.error, title="Refresh failed", severity="error", timeout=8)
            return
        res = message.result
        status = getattr(res, "status", "done")
        errors = list(getattr(res, "errors", []) or [])
        topics = len(getattr(res, "topics", []) or [])
        items = len(getattr(res, "agenda_items", []) or [])
        how = "LLM" if getattr(res, "used_llm", False) else "keywords (no LLM)"
        where = self.written_text(res)
        if status == "failed" or errors:
            self.notify("; ".join(errors) or "the refresh failed", title="Refresh failed", severity="error",
                        timeout=8)
        elif status == "no_change":
            self.notify("Nothing new in the daily notes since the last refresh: the agenda shown is current.",
                        title="Refresh", timeout=4)
        elif not getattr(res, "changed", None):  # a fresh day: nothing new, the open topics re-evaluated
            if topics:
                self.notify(f"Nothing new in the daily notes: {topics} open topics carried forward · via {how}"
                            + where, title="Refreshed", timeout=8 if where else 5)
            else:
                self.notify("No recent daily notes and no open topics to carry forward: write in today's page "
                            "(t), then refresh again." + where, title="Refreshed", timeout=8 if where else 6)
        else:
            self.notify(f"{topics} topics · {items} agenda items · via {how}" + where, title="Refreshed",
                        timeout=8 if where else 5)
        self.load(message.date)  # the day just refreshed, even if another day was on screen

    def written_text(self, res) -> str:
        """``"\nwrote reme/proactive/<date>/interests.yaml, reme/proactive/_proactive.yaml …"``: what a refresh
        wrote into the vault (``res.written``, else ``res.path``), so no file there comes as a surprise; in an
        existing vault the app folder is named as the app's own. "" when nothing was written."""
        written = [str(p) for p in (getattr(res, "written", None) or [getattr(res, "path", None)]) if p]
        if not written:
            return ""
        text = "\nwrote " + ", ".join(written)
        app_dir = str(getattr(self.ctx.settings.layers, "app_dir", "") or "").strip("/") if self.ctx else ""
        if app_dir and app_dir.lower() != "auto" and all(p.startswith(f"{app_dir}/") for p in written):
            text += f" ({app_dir}/ is the app's own folder in this vault: your notes are not changed)"
        return text

    def _vault_changed(self, change) -> None:
        day = self.date or self.ctx.today()
        # the daily folder in a reme vault, the app folder (reme/proactive/) in an existing one
        if any(p.endswith(f"/{day}/interests.yaml") for p in change.paths):
            self.load(day)  # refreshed by another process (cron in --serve, --refresh)

    # -- requests -------------------------------------------------------------------------------------------
    def request(self, date: str = "") -> None:
        self.post_message(AgendaRequested(date))

    def step(self, delta: int) -> None:
        """Ask for the day ``delta`` days from the one asked for last: quick presses add up (three ← move three
        days) even before the first answer is on screen."""
        base = self.pending or self.date or self.today
        if not base:
            return
        try:
            d = _dt.date.fromisoformat(base) + _dt.timedelta(days=delta)
        except ValueError:
            return
        self.pending = d.isoformat()
        self.request(self.pending)

    @on(Input.Submitted, "#agenda-date")
    def _date_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        self.pending = None  # a typed date is the new base for ←/→
        if text.lower() in ("", "today"):
            self.request("")
            return
        try:
            _dt.date.fromisoformat(text)
        except ValueError:
            self.notify(f"{text!r} is not a date (YYYY-MM-DD)", severity="warning")
            return
        self.request(text)
        self.list.focus()

    # -- filling --------------------------------------------------------------------------------------------
    def _row_width(self) -> int:
        return row_width(self.list.scrollable_content_region.width, 10)

    def show_message(self, text: str) -> None:
        self.items = {}
        self.list.set_options([Option(Text(text, style="dim italic"), disabled=True)])

    def show(self, date: str, today: str, result, next_refresh=None, error: str | None = None,
             carried=None) -> None:
        """Show ``result`` (a ``ProactiveReadResult``) for ``date``; ``next_refresh``: when the next scheduled
        refresh runs (aware datetime), shown in the empty state; ``carried``: on a day without a refresh, the
        open topics carried forward (a ``ProactiveReadResult`` of the truth source), listed under the notice."""
        self.date, self.today, self.result, self.next_refresh, self.error = date, today, result, next_refresh, error
        self.carried = carried
        if self.pending == date:
            self.pending = None
        with self.date_input.prevent(Input.Changed):
            self.date_input.value = date
        self.border_title = "Agenda · today" if date == today else f"Agenda · {date}"
        self.items = {}
        self._width = width = self._row_width()
        opts: list[Option] = []

        def note(text: str, style: str = "dim italic") -> None:
            for line in text.split("\n"):
                opts.append(Option(Text(line, style=style), disabled=True))

        if error or result is None:
            note(f"⚠ could not read the agenda: {error or 'no result'}", "italic")
        elif not result.success:
            note(f"⚠ {result.error or 'the interests file could not be read'}", "italic")
            note(f"  {result.path}")
        elif result.skipped:
            when = "today" if date == today else f"for {date}"
            note(f"No proactive refresh yet {when}.", "italic")
            if date == today:
                nxt = next_refresh_text(next_refresh)
                note(f"Next scheduled refresh: {nxt}." if nxt else "No refresh is scheduled.")
                note("Press r to refresh (re-evaluates the open topics)." if carried is not None
                     else "Press r to refresh now.")
            else:
                note("←/→ steps days · type a date above.")
            topics = list(getattr(carried, "topics", None) or [])
            if topics:
                self.topics_by_id = {str(t.get("id")): t for t in topics if t.get("id") is not None}
                opts.append(Option(Text(f"Carried forward ({len(topics)})", style="bold underline"), disabled=True))
                for i, t in enumerate(topics):
                    oid = f"topic-{i}"
                    self.items[oid] = t
                    opts.append(Option(topic_prompt(t, width), id=oid))
        else:
            topics = result.topics or []
            self.topics_by_id = {str(t.get("id")): t for t in topics if t.get("id") is not None}
            agenda = result.agenda or []
            if agenda:
                opts.append(Option(Text(f"Agenda ({len(agenda)})", style="bold underline"), disabled=True))
                for i, item in enumerate(agenda):
                    oid = f"item-{i}"
                    self.items[oid] = item
                    opts.append(Option(agenda_prompt(i + 1, item, width), id=oid))
            elif result.agenda is not None:
                note("No agenda items.")
            opts.append(Option(Text(f"Topics ({len(topics)})", style="bold underline"), disabled=True))
            if not topics:
                note("  none above the confidence threshold")
            for i, t in enumerate(topics):
                oid = f"topic-{i}"
                self.items[oid] = t
                opts.append(Option(topic_prompt(t, width), id=oid))
        if opts:
            self.list.set_options(opts)
        if result is not None and result.success and not result.skipped:
            self.border_subtitle = f"{len(result.agenda or [])} items · {len(result.topics)} topics"
        elif carried is not None and getattr(carried, "topics", None):
            self.border_subtitle = f"{len(carried.topics)} carried · ←/→ days"
        else:
            self.border_subtitle = "←/→ days"
        for idx, opt in enumerate(self.list.options):
            if not opt.disabled:
                self.list.highlighted = idx
                break

    def on_resize(self) -> None:
        self.refit()

    def refit(self) -> None:
        """Re-cut the rows when the pane's width changed (resized, or shown after being hidden)."""
        if self.date is not None and self._row_width() != self._width:
            keep = self.list.highlighted
            self.show(self.date, self.today or "", self.result, self.next_refresh, self.error, self.carried)
            if keep is not None and keep < self.list.option_count:
                self.list.highlighted = keep

    # -- choosing -------------------------------------------------------------------------------------------
    @on(OptionList.OptionSelected, "#agenda-list")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        item = self.items.get(event.option.id or "")
        if item is None:
            return
        target = evidence_target(item, self.topics_by_id)
        if target is None:
            self.notify("This item names no evidence note.", severity="warning")
            return
        self.post_message(FollowLink(target, None, None))

    def focus_list(self) -> None:
        self.list.focus()
