"""The app's index passes: keyword + graph first (search and links complete), then vectors, with throttled
progress. Runs inside a thread worker of the main screen; reports with messages."""

from __future__ import annotations

import time
from typing import Callable

from .messages import IndexFinished, IndexProgress

#: Seconds between two progress messages (a fast scan would flood the UI otherwise).
PROGRESS_INTERVAL = 0.1


class _Stop(Exception):
    """Raised inside the engine's progress callback to abandon a cancelled index pass (each batch the engine
    already committed stays valid; the next pass picks up the rest)."""


def run_passes(engine, cancelled: Callable[[], bool], post: Callable[[object], object]) -> None:
    """(Worker thread.) ``Engine.index(vectors=False)`` then ``Engine.embed_pending``; posts
    :class:`IndexProgress` (throttled to :data:`PROGRESS_INTERVAL`) and one :class:`IndexFinished` per phase
    (``keyword``, ``vectors``; with ``error`` or ``cancelled`` the passes stop there)."""
    last = {"t": 0.0, "stage": ""}

    def progress(stage: str, done: int, total: int, detail: str) -> None:
        if cancelled():
            raise _Stop()
        now = time.monotonic()
        if stage == last["stage"] and done < total and now - last["t"] < PROGRESS_INTERVAL:
            return
        last["t"], last["stage"] = now, stage
        post(IndexProgress(stage, done, total, detail))

    report = None
    for phase in ("keyword", "vectors"):
        try:
            if phase == "keyword":
                report = engine.index(progress, vectors=False)
            elif engine.vectors is not None:
                report = engine.embed_pending(progress, report, should_stop=cancelled)
        except _Stop:
            post(IndexFinished(phase, report, cancelled=True))
            return
        except Exception as exc:
            post(IndexFinished(phase, report, error=f"{type(exc).__name__}: {exc}"))
            return
        post(IndexFinished(phase, report, cancelled=phase == "vectors" and cancelled()))
