"""The app's index passes: keyword + graph first (search and links complete), then vectors, with throttled
progress. Runs inside a thread worker of the main screen; reports with messages."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable

from .messages import IndexFinished, IndexProgress

#: Seconds between two progress messages (a fast scan would flood the UI otherwise).
PROGRESS_INTERVAL = 0.1


class _Stop(Exception):
    """Raised inside the engine's progress callback to abandon a cancelled index pass (each batch the engine
    already committed stays valid; the next pass picks up the rest)."""


log = logging.getLogger("reme.tui")


def child_pass_ahead(engine) -> bool:
    """True when the startup keyword pass will run in a child process (:func:`keyword_pass` with ``child``; see
    ``Engine.child_index_ahead``): cheap enough for the UI thread."""
    return engine.child_index_ahead()


def keyword_pass(engine, progress, cancelled: Callable[[], bool], child: bool = False):
    """The keyword + graph pass (``Engine.index(vectors=False)``); with ``child`` and a big sync ahead (a first
    index) it runs in a separate process, so this process's event loop keeps the GIL and a search meanwhile
    answers at full speed (the child's output goes to ``tui.log`` in the state dir). Falls back to this process
    when the child fails. Returns the IndexReport; raises :class:`_Stop` when cancelled."""
    report = engine.index(progress, vectors=False, child=child, cancelled=cancelled,
                          child_log=str(Path(engine.state_dir) / "tui.log") if child else None)
    if child and cancelled():
        raise _Stop()
    return report


def run_passes(engine, cancelled: Callable[[], bool], post: Callable[[object], object], *,
               child: bool = False) -> None:
    """(Worker thread.) The keyword pass (:func:`keyword_pass`; ``child``: a big one in a separate process) then
    ``Engine.embed_pending``; posts :class:`IndexProgress` (throttled to :data:`PROGRESS_INTERVAL`) and one
    :class:`IndexFinished` per phase (``keyword``, ``vectors``; with ``error`` or ``cancelled`` the passes stop
    there)."""
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
                report = keyword_pass(engine, progress, cancelled, child)
            elif engine.vectors is not None:
                report = engine.embed_pending(progress, report, should_stop=cancelled)
        except _Stop:
            post(IndexFinished(phase, report, cancelled=True))
            return
        except Exception as exc:
            post(IndexFinished(phase, report, error=f"{type(exc).__name__}: {exc}"))
            return
        post(IndexFinished(phase, report, cancelled=phase == "vectors" and cancelled()))
