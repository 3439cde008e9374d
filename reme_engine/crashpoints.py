"""Named points where a test can kill the process, to prove that a crash there loses nothing.

``REME_CRASH_AT=<name>`` in the environment makes :func:`crash_point` with that name send the process SIGKILL,
exactly as ``kill -9`` from outside would (no ``finally`` blocks, no atexit, no flush). Unset, a crash point
costs one dictionary lookup. The chaos tests and ``bench/bench_chaos.py`` use it to hit windows too short to
reach with a timed kill.
"""

from __future__ import annotations

import os
import signal

#: Environment variable naming the crash point to die at.
ENV = "REME_CRASH_AT"


def crash_point(name: str) -> None:
    """Die with SIGKILL here when ``$REME_CRASH_AT`` equals ``name``; otherwise do nothing."""
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
