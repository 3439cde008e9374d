"""Python's full garbage collections, moved to moments the user is not typing (issue 12).

Measured in the app on knowledge-garden-zh (3,176 notes, index and vectors loaded): the heap holds ~150,000
objects after startup and ~250,000 after a minute of use (Textual's widgets and styles, rows, Markdown blocks);
every full (generation 2) collection walks all of them, **60–400 ms of CPU holding the GIL**, and one came every
few seconds of key presses — a key that lands on one waits for it (the ~1 s "up"/"down" outliers of the idle
phase). Young collections (generations 0 and 1) stay cheap (≤ 10 ms).

:class:`IdleCollector` stops automatic full collections (a generation-2 threshold no counter reaches) and runs them
itself on the UI thread when no key or click came for :attr:`idle_s` seconds. After each it freezes the survivors
(``gc.freeze``: the long-lived heap is left out of later collections), so each idle collection walks only what was
made since the last one (a few ms to tens of ms). Garbage cycles among frozen objects (a widget alive at a freeze,
removed later) wait for a *deep* collection — unfreeze, collect everything, freeze — run at most every
:attr:`deep_every_s` seconds and only after :attr:`deep_idle_s` seconds without input. When the user never pauses,
a collection runs anyway after :attr:`force_after_s` seconds, so memory stays bounded. :meth:`stop` restores the
interpreter's settings.
"""

from __future__ import annotations

import gc
import time
from typing import Callable

#: A generation-2 threshold no counter reaches: CPython then never starts a full collection by itself.
NEVER = 1 << 30


class IdleCollector:
    """Runs the cyclic garbage collector when the user is idle. ``clock``: seconds (monotonic); the owner calls
    :meth:`input_seen` on every key/mouse press and :meth:`tick` every ~:attr:`check_s` seconds on the UI thread.

    ``collections``: ``(kind, milliseconds of CPU)`` of each collection run, kind ``"idle"``/``"deep"``/``"forced"``
    (the last 50)."""

    idle_s = 1.0  # seconds without input before an idle collection
    check_s = 1.0  # how often the owner calls tick
    min_young = 5  # generation-1 collections since the last full one before an idle collection is worth it
    deep_every_s = 600.0
    deep_idle_s = 5.0
    force_after_s = 120.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.running = False
        self.collections: list[tuple[str, float]] = []
        self._saved: tuple[int, int, int] | None = None
        now = clock()
        self.last_input = now
        self.last_collect = now
        self.last_deep = now

    def start(self) -> None:
        """Take over full collections (idempotent)."""
        if self.running:
            return
        self.running = True
        self._saved = gc.get_threshold()
        gc.set_threshold(self._saved[0], self._saved[1], NEVER)

    def stop(self) -> None:
        """Give full collections back to the interpreter: unfreeze, restore the thresholds (idempotent)."""
        if not self.running:
            return
        self.running = False
        gc.unfreeze()
        if self._saved is not None:
            gc.set_threshold(*self._saved)

    def input_seen(self) -> None:
        """A key or click arrived: no collection for the next :attr:`idle_s` seconds (unless one is overdue)."""
        self.last_input = self.clock()

    def tick(self) -> str | None:
        """Collect if the user is idle (or a collection is overdue); returns the kind run, or None."""
        if not self.running:
            return None
        now = self.clock()
        idle = now - self.last_input
        overdue = now - self.last_collect >= self.force_after_s
        if idle < self.idle_s and not overdue:
            return None
        deep = idle >= self.deep_idle_s and now - self.last_deep >= self.deep_every_s
        if not deep and not overdue and gc.get_count()[2] < self.min_young:
            return None  # little was made since the last collection
        kind = "deep" if deep else "idle" if idle >= self.idle_s else "forced"
        t = time.thread_time()
        if deep:
            gc.unfreeze()
            self.last_deep = now
        gc.collect()
        gc.freeze()
        self.collections = [*self.collections[-49:], (kind, (time.thread_time() - t) * 1000)]
        self.last_collect = self.clock()
        return kind
