"""A pipeline's day-page refresh, journaled: the run that added a card also records the day page it created or
changed, so reverting the run takes both back (a capture's revert left a day page linking to nothing)."""

from __future__ import annotations

from typing import Any


def reindex_day(engine: Any, run: Any, date: str) -> Any:
    """Regenerate the card index of the day page of ``date`` (YYYY-MM-DD, already valid) and record the page's
    change in ``run`` (a :class:`~reme_engine.memory.journal.Run` or anything with its ``record_done``; None
    records nothing), step "day index", with exactly the text the write replaced. Returns the
    :class:`~reme_engine.vault.daily.DailyReindexResult`; raises EngineError as
    :func:`reme_engine.vault.files.daily_reindex` (the page changed meanwhile: nothing written)."""
    from ..vault.files import daily_reindex

    def on_write(rel: str, before_text, before_sha, after_text: str, after_sha: str) -> None:
        if run is not None:
            run.record_done(rel, "create" if before_sha is None else "update", (before_text, before_sha),
                            (after_text, after_sha), step="day index")

    return daily_reindex(engine, date, on_write=on_write)
