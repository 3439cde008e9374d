"""The Daily pane (left): the dates (today first, then newest first, each with its number of cards) above the
chosen day — its day page and its cards.

It loads its own data (``loaders.day_infos`` / ``loaders.day`` in thread workers, results posted to itself) and
reloads when the vault changes (the context's ``vault_changed`` signal). It posts up:

* :class:`~reme_tui.messages.OpenDay` when a date is chosen (Enter/click) or the "create day page" row is chosen —
  ``create=True`` for today and for the create row;
* :class:`~reme_tui.messages.OpenNote` when a card (or the day page) is chosen.
"""

from __future__ import annotations

import datetime as _dt

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from .. import loaders
from ..messages import DayInfo, DayLoaded, DayRequested, DaysLoaded, OpenDay, OpenNote
from ..render import fit_text, one_line, row_width, truncate_cells

KIND_ICONS = {"session": "💬", "resource": "📎", "note": "📝"}
#: Rows shown before a "… more" row. Textual's OptionList measures every option on each change (about 0.5 ms a
#: card here), so an imported day of 2,000 cards or ten years of dates would stall the UI for a second or more.
DATES_PAGE = 120
CARDS_PAGE = 100
MORE_DATES, MORE_CARDS = "more-dates", "more-cards"
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def weekday(date: str) -> str:
    try:
        return WEEKDAYS[_dt.date.fromisoformat(date).weekday()]
    except ValueError:
        return ""


def day_prompt(day: DayInfo, width: int) -> Text:
    """``2026-11-28 Sat        2`` — the count right-aligned; today marked."""
    left = Text(f"{day.date} {weekday(day.date)}", style="bold" if day.today else "")
    if day.today:
        left.append(" today", style="italic")
    if day.cards:
        right = Text(f"{day.cards} card" + ("s" if day.cards != 1 else ""), style="dim")
    elif day.today and not day.page:
        right = Text("new", style="dim italic")
    else:
        right = Text("–", style="dim")
    gap = width - left.cell_len - right.cell_len
    if gap < 1:
        right = Text(str(day.cards) if day.cards else "", style="dim")
        gap = width - left.cell_len - right.cell_len
    if gap < 1:
        return fit_text(left, width)
    return left + Text(" " * gap) + right


def card_prompt(card, width: int) -> Text:
    """A card: kind icon and name; the description dimmed on a second line (both cut to ``width`` cells)."""
    head = Text(f"{KIND_ICONS.get(card.kind, '📝')} ")
    head.append(one_line(card.name or card.stem), style="bold")
    if card.warning:
        head.append(f" ⚠ {card.warning}", style="dim italic")
    head = fit_text(head, width)
    desc = one_line(card.description or "")
    if desc:
        return head + Text("\n  " + truncate_cells(desc, max(1, width - 2)), style="dim")
    return head


class DateList(OptionList):
    """The dates. Posts ``OptionList`` events (handled by :class:`DailyPane`)."""


class DayCards(OptionList):
    """The chosen day's page and cards. Posts ``OptionList`` events (handled by :class:`DailyPane`)."""


class DailyPane(Vertical):
    """Dates above the chosen day's cards. ``days``: the :class:`DayInfo` rows shown; ``date``: the chosen day."""

    def __init__(self, ctx=None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ctx = ctx  # PaneContext (None: a bare view filled by set_days/set_day)
        self.days: list[DayInfo] = []
        self.date: str | None = None  # the day whose cards are shown (or requested)
        self.today: str | None = None
        self.page: str | None = None
        self.cards: list = []
        self._card_width = 0
        self._date_width = 0
        self._dates_limit = DATES_PAGE  # dates shown before the "older days" row
        self._cards_limit = CARDS_PAGE  # cards shown before the "more cards" row
        self._cards_date: str | None = None
        self._card_error: str | None = None
        self.dates = DateList(id="daily-dates")
        self.day_cards = DayCards(id="daily-cards")

    def compose(self) -> ComposeResult:
        yield self.dates
        yield self.day_cards

    # -- loading (thread workers → messages to itself) ------------------------------------------------------
    def on_mount(self) -> None:
        if self.ctx is not None:
            self.ctx.vault_changed.subscribe(self, self._vault_changed)

    @work(thread=True, exclusive=True, group="days", exit_on_error=False)
    def load_days(self) -> None:
        """Re-read the dates (today first) with their card counts."""
        ctx = self.ctx
        today = ctx.today()
        try:
            infos = loaders.day_infos(ctx.engine, ctx.daily_dir, today)
        except Exception as exc:
            self.post_message(DaysLoaded(today, [DayInfo(today, today=True)], loaders.error_text(exc)))
            return
        self.post_message(DaysLoaded(today, infos))

    def on_days_loaded(self, message: DaysLoaded) -> None:
        self.set_days(message.today, message.days)
        if message.error:
            self.notify(f"daily notes: {message.error}", severity="warning")

    def on_day_requested(self, message: DayRequested) -> None:
        if self.ctx is not None:
            message.stop()
            self.load_day(message.date)

    @work(thread=True, exclusive=True, group="day", exit_on_error=False)
    def load_day(self, date: str) -> None:
        """Re-read the page and cards of ``date``."""
        try:
            page, cards = loaders.day(self.ctx.engine, self.ctx.daily_dir, date)
        except Exception as exc:
            self.post_message(DayLoaded(date, None, [], loaders.error_text(exc)))
            return
        self.post_message(DayLoaded(date, page, cards))

    def on_day_loaded(self, message: DayLoaded) -> None:
        self.set_day(message.date, message.page, message.cards, message.error)  # bubbles on: the title follows

    def _vault_changed(self, change) -> None:
        if change.first_pass:
            return  # read the file system, not the index: nothing new after the first pass
        self.load_days()
        if shown := self.date:
            d = self.ctx.daily_dir
            page, folder = f"{d}/{shown}.md", f"{d}/{shown}/"
            if any(p == page or p.startswith(folder) for p in change.paths):
                self.load_day(shown)  # a card of the day on screen was added, edited or removed elsewhere

    # -- filling (called by the screen) ---------------------------------------------------------------------
    def _width(self, widget) -> int:
        return row_width(widget.scrollable_content_region.width, 10)

    def set_days(self, today: str, days: list[DayInfo], keep: str | None = None) -> None:
        """Show ``days``; highlight ``keep`` (default: the day shown before, else today)."""
        want = keep or self.date or today
        idx = next((i for i, d in enumerate(days) if d.date == want), 0 if days else None)
        if idx is not None and idx >= self._dates_limit:
            self._dates_limit = idx + DATES_PAGE
        width = self._width(self.dates)
        if days != self.days or today != self.today or width != self._date_width:  # unchanged: no re-layout
            self.today = today
            self.days = days
            self._date_width = width
            self._fill_dates()
        if idx is not None:
            with self.prevent(OptionList.OptionHighlighted):
                self.dates.highlighted = idx
            if self.days[idx].date != self.date:
                self.request_day(self.days[idx].date)

    def _fill_dates(self) -> None:
        width = self._date_width
        shown = self.days[: self._dates_limit]
        opts = [Option(day_prompt(d, width), id=d.date) for d in shown]
        rest = len(self.days) - len(shown)
        if rest > 0:
            more = min(rest, DATES_PAGE)
            opts.append(Option(fit_text(Text(f"… {rest:,} older days — Enter shows {more} more", style="dim italic"),
                                        width), id=MORE_DATES))
        self.dates.set_options(opts)

    def _more_dates(self) -> None:
        keep = self.dates.highlighted
        self._dates_limit += DATES_PAGE
        self._fill_dates()
        if keep is not None:
            self.dates.highlighted = min(keep, self.dates.option_count - 1)

    def day_info(self, date: str) -> DayInfo | None:
        return next((d for d in self.days if d.date == date), None)

    def request_day(self, date: str) -> None:
        """Ask the screen for ``date``'s cards (and highlight the date)."""
        self.date = date
        for i, d in enumerate(self.days):
            if d.date == date and self.dates.highlighted != i:
                with self.prevent(OptionList.OptionHighlighted):
                    self.dates.highlighted = i
        self.post_message(DayRequested(date))

    def set_day(self, date: str, page: str | None, cards: list, error: str | None = None) -> None:
        """Show the page and cards of ``date`` (ignored unless ``date`` is the chosen day)."""
        if date != self.date:
            return
        width = self._width(self.day_cards)
        if (page, list(cards), error, width) == (self.page, self.cards, self._card_error, self._card_width) \
                and self.day_cards.option_count:
            return  # the same day again (a watcher batch elsewhere): no re-layout
        self._card_error = error
        if self._cards_date != date:
            self._cards_limit = CARDS_PAGE
            self._cards_date = date
        self.page = page
        self.cards = list(cards)
        self._card_width = width
        opts: list[Option] = []
        if page:
            opts.append(Option(fit_text(Text(f"📅 {date} — day page", style="bold"), width), id="page"))
        else:
            opts.append(Option(fit_text(Text(f"＋ create the {date} page", style="italic"), width), id="create"))
        if error:
            opts.append(Option(Text(f"⚠ {error}", style="dim italic"), disabled=True))
        elif not cards:
            opts.append(Option(Text("  no cards yet", style="dim italic"), disabled=True))
        shown = self.cards[: self._cards_limit]
        for i, c in enumerate(shown):
            opts.append(Option(card_prompt(c, width), id=f"card-{i}"))
        rest = len(self.cards) - len(shown)
        if rest > 0:
            more = min(rest, CARDS_PAGE)
            opts.append(Option(fit_text(Text(f"… {rest:,} more cards — Enter shows {more} more", style="dim italic"),
                                        width), id=MORE_CARDS))
        self.day_cards.set_options(opts)

    def summary(self) -> str:
        """``Sat 28 · 2 cards`` for the chosen day ('' before one is loaded)."""
        if not self.date:
            return ""
        n = len(self.cards)
        return f"{weekday(self.date)} {self.date[8:]} · {n} card" + ("s" if n != 1 else "")

    # -- stepping -------------------------------------------------------------------------------------------
    def step(self, delta: int) -> str | None:
        """Move ``delta`` days in the list (+1 = older, -1 = newer); returns the new date (None at an end)."""
        if not self.days:
            return None
        cur = next((i for i, d in enumerate(self.days) if d.date == self.date), 0)
        nxt = cur + delta
        if not 0 <= nxt < len(self.days):
            return None
        if nxt >= self._dates_limit:
            self._more_dates()
        self.request_day(self.days[nxt].date)
        return self.days[nxt].date

    # -- events ---------------------------------------------------------------------------------------------
    @on(OptionList.OptionHighlighted, "#daily-dates")
    def _date_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        date = event.option.id
        if date and date != MORE_DATES and date != self.date:
            self.request_day(date)

    @on(OptionList.OptionSelected, "#daily-dates")
    def _date_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        date = event.option.id
        if date == MORE_DATES:
            self._more_dates()
            return
        if not date:
            return
        if date != self.date:
            self.request_day(date)
        self.post_message(OpenDay(date, create=date == self.today))

    @on(OptionList.OptionSelected, "#daily-cards")
    def _card_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        oid = event.option.id or ""
        if oid == "page" and self.page:
            self.post_message(OpenNote(self.page))
        elif oid == "create" and self.date:
            self.post_message(OpenDay(self.date, create=True))
        elif oid.startswith("card-"):
            card = self.cards[int(oid[5:])]
            self.post_message(OpenNote(card.path))
        elif oid == MORE_CARDS and self.date:
            keep = self.day_cards.highlighted
            self._cards_limit += CARDS_PAGE
            self._card_width = -1  # force the refill
            self.set_day(self.date, self.page, self.cards)
            if keep is not None:
                self.day_cards.highlighted = min(keep, self.day_cards.option_count - 1)

    @on(OptionList.OptionHighlighted, "#daily-cards")
    def _card_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()

    def on_resize(self) -> None:
        self.refit()

    def refit(self) -> None:
        """Re-cut the rows when the pane's width changed (resized, or shown after being hidden)."""
        if self.days and self._width(self.dates) != self._date_width:
            keep = self.dates.highlighted
            self._date_width = self._width(self.dates)
            self._fill_dates()
            if keep is not None:
                with self.prevent(OptionList.OptionHighlighted):
                    self.dates.highlighted = keep
        if self.date and self._width(self.day_cards) != self._card_width:
            keep = self.day_cards.highlighted
            self.set_day(self.date, self.page, self.cards)
            if keep is not None and keep < self.day_cards.option_count:
                self.day_cards.highlighted = keep

    def focus_dates(self) -> None:
        self.dates.focus()
