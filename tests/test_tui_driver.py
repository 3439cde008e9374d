"""The terminal driver's input thread (``reme_tui/driver.py``) over a real pseudo-terminal: a lone ESC byte is the
Escape key, reported once its delay has passed rather than at the input thread's next 100 ms wake-up; a whole
escape sequence (an arrow key) is still one key; ``ESCDELAY`` overrides the delay."""

from __future__ import annotations

import os
import selectors
import threading
import time
import tty

import pytest
from textual import constants, events

from reme_tui import driver as drv


class _Recorder(selectors.SelectSelector):
    """SelectSelector that keeps every ``select`` timeout (what the input thread waited for)."""

    timeouts: list[float | None] = []

    def select(self, timeout=None):
        type(self).timeouts.append(timeout)
        return super().select(timeout)


class _Thread:
    """Runs ``PromptEscapeDriver.run_input_thread`` on the slave side of a pty; keys written to the master."""

    def __init__(self, monkeypatch) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)  # as the app puts the terminal: bytes arrive as typed, not per line
        self.events: list = []
        d = object.__new__(drv.PromptEscapeDriver)  # no app: only the input loop is under test
        d.fileno = self.slave
        d._debug = False
        d.exit_event = threading.Event()
        d.process_message = self.events.append
        self.driver = d
        _Recorder.timeouts = []
        monkeypatch.setattr(drv.selectors, "SelectSelector", _Recorder)
        self.thread = threading.Thread(target=d.run_input_thread, daemon=True)
        self.thread.start()

    def keys(self) -> list[str]:
        return [e.key for e in self.events if isinstance(e, events.Key)]

    def wait_keys(self, n: int, limit_s: float = 10.0) -> list[str]:
        end = time.monotonic() + limit_s
        while len(self.keys()) < n and time.monotonic() < end:
            time.sleep(0.005)
        return self.keys()

    def close(self) -> None:
        self.driver.exit_event.set()
        self.thread.join(5)
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def loop(monkeypatch):
    monkeypatch.setattr(constants, "ESCAPE_DELAY", 0.025)
    t = _Thread(monkeypatch)
    yield t
    t.close()


def test_a_lone_escape_is_reported_once_its_delay_passed_not_at_the_next_idle_wakeup(loop):
    os.write(loop.master, b"\x1b")
    assert loop.wait_keys(1) == ["escape"]
    # while the ESC was pending the thread waited at most the delay, not its idle 0.1 s
    pending = [t for t in _Recorder.timeouts if t is not None and t < drv.IDLE_SELECT_S]
    assert pending and max(pending) <= 0.025 + 1e-9


def test_an_arrow_key_written_whole_is_one_key_and_letters_follow(loop):
    os.write(loop.master, b"\x1b[Ax")
    assert loop.wait_keys(2) == ["up", "x"]
    os.write(loop.master, b"\x1b")
    assert loop.wait_keys(3) == ["up", "x", "escape"]


def test_select_timeout_waits_until_the_pending_escape_at_most_the_idle_wait():
    assert drv.select_timeout(None, 5.0) == drv.IDLE_SELECT_S
    assert drv.select_timeout(5.02, 5.0) == pytest.approx(0.02)
    assert drv.select_timeout(4.9, 5.0) == 0.0  # overdue: poll, then the parser's tick reports it
    assert drv.select_timeout(9.0, 5.0) == drv.IDLE_SELECT_S


def test_escdelay_overrides_the_default_delay(monkeypatch):
    assert drv.escape_delay_s({}) == drv.ESCAPE_DELAY_MS / 1000
    assert drv.escape_delay_s({"ESCDELAY": "80"}) == 0.08
    assert drv.escape_delay_s({"ESCDELAY": "0"}) == 0.001  # at least 1 ms, as Textual's own reading
    assert drv.escape_delay_s({"ESCDELAY": "soon"}) == drv.ESCAPE_DELAY_MS / 1000  # not a number: the default
    monkeypatch.setattr(constants, "ESCAPE_DELAY", 0.1)
    assert drv.apply_escape_delay({"ESCDELAY": "40"}) == 0.04 and constants.ESCAPE_DELAY == 0.04


def test_the_app_runs_with_the_prompt_escape_driver(monkeypatch):
    from reme_tui.app import ReMeApp

    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    monkeypatch.delenv("ESCDELAY", raising=False)
    monkeypatch.setattr(constants, "ESCAPE_DELAY", 0.1)
    app = ReMeApp(None, None)  # settings and engine are only kept by the constructor
    assert app.driver_class is drv.PromptEscapeDriver
    assert constants.ESCAPE_DELAY == drv.ESCAPE_DELAY_MS / 1000
    assert drv.driver_class() is drv.PromptEscapeDriver
    monkeypatch.setenv("TEXTUAL_DRIVER", "textual.drivers.linux_driver:LinuxDriver")
    assert drv.driver_class() is None  # the user's choice stands
