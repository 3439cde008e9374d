"""The terminal driver: Textual's Linux/macOS driver with a prompt Escape key.

A lone ``ESC`` byte is either the Escape key or the start of an escape sequence (an arrow key, Alt+letter), so
Textual's input parser waits ``ESCAPE_DELAY`` for a next byte before it reports Escape. Two things made closing
a dialog with Escape the slowest key of the app (143 ms median, ~200 ms p95 in ``bench/bench_firstrun.py``'s key
cycle, against ~20 ms of the app's own work, ``bench/RESULTS.md`` "Key press to paint, session 21"):

- the delay is 100 ms by default;
- Textual's input thread checks for that timeout only when its ``select`` returns, which is every 100 ms without
  input: the Escape then arrives 100–200 ms after the key.

:class:`PromptEscapeDriver` waits in ``select`` only until the parser's pending timeout, and the delay defaults
to :data:`ESCAPE_DELAY_MS` (terminal emulators and tmux write a key's whole sequence at once, so its bytes
arrive in one read; the delay only matters for a sequence split in transit, e.g. over a slow SSH link). The
``ESCDELAY`` environment variable (milliseconds, the name curses and Textual use) overrides it.

Only :meth:`run_input_thread` differs from Textual's ``LinuxDriver`` (Textual 8.x: the loop is copied from
there, with the ``select`` timeout as the one change); on another major version the stock loop runs.
"""

from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder
from pathlib import Path

import textual
from textual import constants
from textual._loop import loop_last
from textual._parser import ParseError
from textual._time import get_time
from textual._xterm_parser import XTermParser

try:
    from textual.drivers.linux_driver import LinuxDriver
except ImportError:  # pragma: no cover - Windows (no termios): Textual's own driver
    LinuxDriver = None

#: Default wait after a lone ESC byte before it counts as the Escape key, in ms (Textual's own default: 100).
ESCAPE_DELAY_MS = 25
#: The input thread's longest ``select`` wait when nothing is pending, s (Textual's value; it also bounds how
#: late the thread notices the app's exit).
IDLE_SELECT_S = 0.1


def escape_delay_s(environ=os.environ) -> float:
    """The Escape key's delay in seconds: ``ESCDELAY`` (ms, ≥ 1) when set to an integer, else
    :data:`ESCAPE_DELAY_MS`."""
    raw = environ.get("ESCDELAY", "")
    try:
        return max(1, int(raw)) / 1000.0
    except ValueError:
        return ESCAPE_DELAY_MS / 1000.0


def apply_escape_delay(environ=os.environ) -> float:
    """Set Textual's ``constants.ESCAPE_DELAY`` (read by its parser at each ESC) to :func:`escape_delay_s`;
    returns the value set."""
    constants.ESCAPE_DELAY = escape_delay_s(environ)
    return constants.ESCAPE_DELAY


def select_timeout(timeout_at: float | None, now: float) -> float:
    """How long the input thread may wait for input, s: until the parser's pending timeout ``timeout_at``
    (Textual's ``_time.get_time`` clock, s; None when nothing is pending), at most :data:`IDLE_SELECT_S`, never
    negative."""
    if timeout_at is None:
        return IDLE_SELECT_S
    return max(0.0, min(IDLE_SELECT_S, timeout_at - now))


def _textual_version() -> str:
    """Textual's installed version, e.g. ``"8.2.8"``: from the name of its ``textual-<version>.dist-info``
    folder beside the package (a directory listing), else ``textual.__version__``. That attribute goes through
    ``importlib.metadata``, whose import (email parsing) cost ~15 ms of the app's start before its first paint
    (``bench/RESULTS.md`` "First paint, session 21 (H)")."""
    try:
        site = Path(textual.__file__).resolve().parent.parent
        names = [p.name for p in site.glob("textual-*.dist-info")]
    except OSError:
        names = []
    if len(names) == 1:
        return names[0][len("textual-"):-len(".dist-info")]
    return textual.__version__  # none or several (a stale copy): ask the metadata


_STOCK_LOOP = not _textual_version().startswith("8.")


def driver_class():
    """The driver the app runs with: :class:`PromptEscapeDriver`, or None (Textual's choice) on Windows or when
    ``TEXTUAL_DRIVER`` names another one."""
    if LinuxDriver is None or os.environ.get("TEXTUAL_DRIVER"):
        return None
    return PromptEscapeDriver


class PromptEscapeDriver(LinuxDriver or object):
    """``LinuxDriver`` whose input thread reports a lone Escape as soon as its delay has passed."""

    def run_input_thread(self) -> None:
        """Wait for input and dispatch events (Textual 8's loop; ``select`` waits until the parser's timeout)."""
        if _STOCK_LOOP:  # pragma: no cover - another Textual major version
            return super().run_input_thread()
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        fileno = self.fileno
        event_read = selectors.EVENT_READ
        parser = XTermParser(self._debug)
        feed = parser.feed
        tick = parser.tick
        decode = getincrementaldecoder("utf-8")().decode
        read = os.read

        def process_selector_events(selector_events, final: bool = False) -> None:
            for last, (_selector_key, mask) in loop_last(selector_events):
                if mask & event_read:
                    unicode_data = decode(read(fileno, 1024 * 4), final=final and last)
                    if not unicode_data:  # stdin is piped
                        break
                    for event in feed(unicode_data):
                        self.process_message(event)
            for event in tick():
                self.process_message(event)

        def wait() -> float:
            # the parser's pending timeout (a lone ESC); Textual's parser keeps it in _timeout_time
            return select_timeout(getattr(parser, "_timeout_time", None), get_time())

        try:
            while not self.exit_event.is_set():
                process_selector_events(selector.select(wait()))
            selector.unregister(self.fileno)
            process_selector_events(selector.select(IDLE_SELECT_S), final=True)
        finally:
            selector.close()
            try:
                for _event in feed(""):
                    pass
            except (EOFError, ParseError):
                pass
