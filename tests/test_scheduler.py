"""The cron scheduler with an injected clock: DST in two zones, catch-up once, one run per due time, errors,
prompt stop, persisted markers, and writer-lock contention with a second real process."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from reme_engine import scheduler as sched_mod
from reme_engine.lock import WriterLock
from reme_engine.scheduler import (
    AUTO_DREAM_CRON,
    CRON_FILE,
    PROACTIVE_REFRESH_CRON,
    CronJob,
    Scheduler,
    next_fire,
    jobs_from_settings,
    resolve_wall_time,
)

BER = ZoneInfo("Europe/Berlin")
NY = ZoneInfo("America/New_York")


class Clock:
    """A settable clock; thread-safe."""

    def __init__(self, t: datetime) -> None:
        self.t = t
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self.t

    def set(self, t: datetime) -> None:
        with self._lock:
            self.t = t


class FakeTime(Clock):
    """Clock plus a ``sleep`` that advances simulated time instead of waiting, up to ``limit``."""

    def __init__(self, t: datetime, limit: datetime) -> None:
        super().__init__(t)
        self.limit = limit
        self.reached = threading.Event()

    def sleep(self, seconds: float) -> None:
        with self._lock:
            if self.t >= self.limit:
                self.reached.set()
            else:
                self.t = min(self.t + timedelta(seconds=max(seconds, 0.001)), self.limit)
                return
        time.sleep(0.02)  # parked at the limit: idle politely until the test stops the thread


class Recorder:
    def __init__(self, fail_times: int = 0) -> None:
        self.slots: list[datetime] = []
        self.fail_times = fail_times

    def __call__(self, slot: datetime) -> dict:
        self.slots.append(slot)
        if len(self.slots) <= self.fail_times:
            raise RuntimeError(f"boom {len(self.slots)}")
        return {"n": len(self.slots)}


def wait_for(pred, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def simulate(s: Scheduler, clock: Clock, until: datetime) -> None:
    """Jump the clock from one due time to the next (as the thread would wake) and run what is due."""
    for _ in range(10_000):
        upcoming = [d for d in s.next_runs().values() if d is not None]
        if not upcoming or min(upcoming) > until:
            return
        clock.set(min(upcoming))
        s.run_due()
    raise AssertionError("did not converge")


# -- DST ---------------------------------------------------------------------------------------------------
DST_CASES = [
    # zone, cron, start, expected slots (local ISO) until start + 5 days
    pytest.param(BER, "30 2 * * *", datetime(2026, 3, 27, 12),
                 ["2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00",  # 02:30 does not exist: at 03:00
                  "2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00", "2026-04-01T02:30:00+02:00"],
                 id="berlin-spring"),
    pytest.param(BER, "30 2 * * *", datetime(2026, 10, 23, 12),
                 ["2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00",  # 02:30 occurs twice: first only
                  "2026-10-26T02:30:00+01:00", "2026-10-27T02:30:00+01:00", "2026-10-28T02:30:00+01:00"],
                 id="berlin-autumn"),
    pytest.param(NY, "30 2 * * *", datetime(2026, 3, 6, 12),
                 ["2026-03-07T02:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00",
                  "2026-03-10T02:30:00-04:00", "2026-03-11T02:30:00-04:00"],
                 id="newyork-spring"),
    pytest.param(NY, "30 1 * * *", datetime(2026, 10, 30, 12),  # New York repeats 01:00-02:00
                 ["2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00",
                  "2026-11-03T01:30:00-05:00", "2026-11-04T01:30:00-05:00"],
                 id="newyork-autumn"),
    pytest.param(BER, PROACTIVE_REFRESH_CRON, datetime(2026, 10, 23, 12),
                 ["2026-10-23T18:00:00+02:00", "2026-10-24T18:00:00+02:00", "2026-10-25T18:00:00+01:00",
                  "2026-10-26T18:00:00+01:00", "2026-10-27T18:00:00+01:00", "2026-10-28T18:00:00+01:00"],
                 id="berlin-18h-across-autumn"),
]


@pytest.mark.parametrize("tz,cron,start,expected", DST_CASES)
def test_runs_across_dst(tmp_path, tz, cron, start, expected):
    clock = Clock(start.replace(tzinfo=tz))
    job = Recorder()
    s = Scheduler([CronJob("j", cron, job)], tmp_path, tz, clock=clock)
    simulate(s, clock, start.replace(tzinfo=tz) + timedelta(days=5, hours=7))
    assert [d.isoformat() for d in job.slots] == expected
    assert len({d.date() for d in job.slots}) == len(job.slots)  # once per local day


@pytest.mark.parametrize("tz,cron,start,expected", DST_CASES)
def test_next_fire_chain(tz, cron, start, expected):
    t = start.replace(tzinfo=tz)
    got = []
    for _ in expected:
        t = next_fire(cron, tz, t)
        got.append(t.isoformat())
    assert got == expected


def test_every_30_minutes_through_both_transitions():
    # autumn: each wall time fires once, so the repeated 02:00 and 02:30 (+01:00) do not fire again
    t, got = datetime(2026, 10, 25, 1, 0, tzinfo=BER), []
    for _ in range(5):
        t = next_fire("*/30 * * * *", BER, t)
        got.append(t.isoformat())
    assert got == ["2026-10-25T01:30:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00",
                   "2026-10-25T03:00:00+01:00", "2026-10-25T03:30:00+01:00"]
    # spring: 02:00 and 02:30 do not exist and collapse onto 03:00, which fires once
    t, got = datetime(2026, 3, 29, 1, 0, tzinfo=BER), []
    for _ in range(3):
        t = next_fire("*/30 * * * *", BER, t)
        got.append(t.isoformat())
    assert got == ["2026-03-29T01:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00"]


def test_resolve_wall_time():
    assert resolve_wall_time(datetime(2026, 3, 29, 2, 30), BER).isoformat() == "2026-03-29T03:00:00+02:00"
    assert resolve_wall_time(datetime(2026, 10, 25, 2, 30), BER).isoformat() == "2026-10-25T02:30:00+02:00"
    assert resolve_wall_time(datetime(2026, 7, 1, 12, 0), NY).isoformat() == "2026-07-01T12:00:00-04:00"
    # a 30-minute DST shift (Lord Howe Island) lands on its own transition
    lh = ZoneInfo("Australia/Lord_Howe")
    assert resolve_wall_time(datetime(2026, 10, 4, 2, 15), lh).isoformat() == "2026-10-04T02:30:00+11:00"


def test_thread_across_autumn_night_runs_once(tmp_path, monkeypatch):
    monkeypatch.setattr(sched_mod, "MAX_SLEEP_SECONDS", 10**9)  # jump straight to the next due time
    ft = FakeTime(datetime(2026, 10, 24, 12, tzinfo=BER), datetime(2026, 10, 26, 12, tzinfo=BER))
    dream, refresh = Recorder(), Recorder()
    s = Scheduler([CronJob("auto_dream", "30 2 * * *", dream), CronJob("proactive_refresh", PROACTIVE_REFRESH_CRON,
                                                                          refresh)],
                  tmp_path, BER, clock=ft, sleep=ft.sleep)
    s.start()
    try:
        assert ft.reached.wait(10)
    finally:
        assert s.stop(5)
    assert [d.isoformat() for d in dream.slots] == ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]
    assert [d.isoformat() for d in refresh.slots] == ["2026-10-24T18:00:00+02:00", "2026-10-25T18:00:00+01:00"]


# -- catch-up, first start, one run per due time ---------------------------------------------------------------
def test_first_start_does_not_catch_up(tmp_path):
    clock = Clock(datetime(2026, 6, 1, 19, 0, tzinfo=BER))
    s = Scheduler([CronJob("proactive_refresh", PROACTIVE_REFRESH_CRON, Recorder())], tmp_path, BER, clock=clock)
    assert s.due_now() == []
    assert s.next_runs()["proactive_refresh"].isoformat() == "2026-06-02T18:00:00+02:00"
    assert s.last_runs() == {"proactive_refresh": None}
    state = json.loads((tmp_path / CRON_FILE).read_text())
    assert state["jobs"]["proactive_refresh"]["since"] == "2026-06-01T19:00:00+02:00"


def test_catch_up_once_after_downtime(tmp_path):
    clock = Clock(datetime(2026, 6, 1, 10, 0, tzinfo=BER))
    first = Recorder()
    s1 = Scheduler([CronJob("proactive_refresh", PROACTIVE_REFRESH_CRON, first)], tmp_path, BER, clock=clock)
    clock.set(datetime(2026, 6, 1, 18, 0, 2, tzinfo=BER))
    assert s1.run_due()["proactive_refresh"]["status"] == "finished"
    assert len(first.slots) == 1
    # the app is closed for four days (four 18:00 runs missed), then started again
    clock.set(datetime(2026, 6, 5, 9, 0, tzinfo=BER))
    job = Recorder()
    events: list[dict] = []
    s2 = Scheduler([CronJob("proactive_refresh", PROACTIVE_REFRESH_CRON, job)], tmp_path, BER, clock=clock,
                   on_event=events.append)
    assert s2.last_runs()["proactive_refresh"]["status"] == "finished"
    assert s2.due_now() == ["proactive_refresh"]
    s2.start()
    try:
        assert wait_for(lambda: len(job.slots) == 1 and s2.running is None)
        time.sleep(0.2)
        assert len(job.slots) == 1  # once, not once per missed day
    finally:
        assert s2.stop(2)
    assert job.slots[0].isoformat() == "2026-06-04T18:00:00+02:00"  # the most recent missed time
    assert s2.due_now() == []
    assert s2.next_runs()["proactive_refresh"].isoformat() == "2026-06-05T18:00:00+02:00"
    assert [e["event"] for e in events] == ["started", "finished"]
    assert events[1]["result"] == {"n": 1} and events[1]["job"] == "proactive_refresh"
    # the marker is persisted: a third start the same morning has nothing to do
    s3 = Scheduler([CronJob("proactive_refresh", PROACTIVE_REFRESH_CRON, job)], tmp_path, BER, clock=clock)
    assert s3.due_now() == []


def test_one_run_per_due_time(tmp_path):
    clock = Clock(datetime(2026, 6, 1, 12, 0, tzinfo=BER))
    job = Recorder()
    s = Scheduler([CronJob("proactive_refresh", PROACTIVE_REFRESH_CRON, job)], tmp_path, BER, clock=clock)
    assert s.run_due() == {}
    for t in (datetime(2026, 6, 1, 18, 0), datetime(2026, 6, 1, 18, 0, 30), datetime(2026, 6, 1, 23, 59)):
        clock.set(t.replace(tzinfo=BER))
        s.run_due()
        s.run_due()
    assert len(job.slots) == 1
    clock.set(datetime(2026, 6, 2, 18, 0, tzinfo=BER))
    assert list(s.run_due()) == ["proactive_refresh"]
    assert s.run_due() == {}
    assert len(job.slots) == 2


def test_thread_runs_each_due_time_once(tmp_path, monkeypatch):
    monkeypatch.setattr(sched_mod, "MAX_SLEEP_SECONDS", 10**9)
    ft = FakeTime(datetime(2026, 6, 1, 12, tzinfo=BER), datetime(2026, 6, 4, 12, tzinfo=BER))
    dream, refresh = Recorder(), Recorder()
    s = Scheduler([CronJob("auto_dream", AUTO_DREAM_CRON, dream),
                   CronJob("proactive_refresh", PROACTIVE_REFRESH_CRON, refresh)], tmp_path, BER,
                  clock=ft, sleep=ft.sleep)
    s.start()
    try:
        assert ft.reached.wait(10)
    finally:
        assert s.stop(5)
    assert [d.day for d in dream.slots] == [2, 3, 4]
    assert [d.day for d in refresh.slots] == [1, 2, 3]
    assert all(d.hour == 3 and d.minute == 30 for d in dream.slots)


# -- errors, stop, events -----------------------------------------------------------------------------------
def test_exception_is_logged_and_thread_keeps_running(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(sched_mod, "MAX_SLEEP_SECONDS", 10**9)
    ft = FakeTime(datetime(2026, 6, 1, 12, tzinfo=BER), datetime(2026, 6, 3, 20, tzinfo=BER))
    job = Recorder(fail_times=2)
    events: list[dict] = []
    s = Scheduler([CronJob("proactive_refresh", PROACTIVE_REFRESH_CRON, job)], tmp_path, BER, clock=ft,
                  sleep=ft.sleep, on_event=events.append)
    with caplog.at_level(logging.ERROR, logger="reme.scheduler"):
        s.start()
        try:
            assert ft.reached.wait(10)
        finally:
            assert s.stop(5)
    assert len(job.slots) == 3
    assert [e["event"] for e in events] == ["started", "failed", "started", "failed", "started", "finished"]
    assert events[1]["error"] == "RuntimeError: boom 1"
    errors = [r for r in caplog.records if r.name == "reme.scheduler" and r.levelno == logging.ERROR]
    assert len(errors) == 2 and errors[0].exc_info is not None
    last = s.last_runs()["proactive_refresh"]
    assert last["status"] == "finished" and last["error"] is None and last["result"] == {"n": 3}


def test_failed_run_is_recorded(tmp_path):
    clock = Clock(datetime(2026, 6, 1, 12, tzinfo=BER))
    s = Scheduler([CronJob("j", PROACTIVE_REFRESH_CRON, Recorder(fail_times=1))], tmp_path, BER, clock=clock)
    clock.set(datetime(2026, 6, 1, 18, tzinfo=BER))
    rec = s.run_due()["j"]
    assert rec["status"] == "failed" and rec["error"] == "RuntimeError: boom 1" and rec["result"] is None
    assert set(rec) >= {"at", "result", "error"}


def test_stop_is_prompt(tmp_path):
    s = Scheduler([CronJob("j", "0 0 1 1 *", Recorder())], tmp_path, BER)  # real clock, real sleep
    s.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    assert s.stop(5) is True
    assert time.monotonic() - t0 < 0.5


def test_on_event_errors_do_not_break_runs(tmp_path):
    clock = Clock(datetime(2026, 6, 1, 12, tzinfo=BER))

    def bad_listener(ev):
        raise ValueError("listener bug")

    s = Scheduler([CronJob("j", PROACTIVE_REFRESH_CRON, lambda slot: {"ok": 1})], tmp_path, BER, clock=clock,
                  on_event=bad_listener)
    clock.set(datetime(2026, 6, 1, 18, tzinfo=BER))
    assert s.run_due()["j"]["result"] == {"ok": 1}


def test_run_now_does_not_move_the_schedule(tmp_path):
    clock = Clock(datetime(2026, 6, 1, 12, tzinfo=BER))
    job = Recorder()
    s = Scheduler([CronJob("auto_dream", AUTO_DREAM_CRON, job)], tmp_path, BER, clock=clock)
    before = s.next_runs()
    rec = s.run_now("auto_dream")
    assert rec["status"] == "finished" and rec["manual"] is True and job.slots == [clock()]
    assert s.next_runs() == before
    assert s.last_runs()["auto_dream"]["manual"] is True
    with pytest.raises(KeyError):
        s.run_now("nope")


def test_disabled_job_never_due_and_no_catch_up_when_enabled(tmp_path):
    clock = Clock(datetime(2026, 6, 1, 12, tzinfo=BER))
    job = Recorder()
    s = Scheduler([CronJob("j", PROACTIVE_REFRESH_CRON, job, enabled=False)], tmp_path, BER, clock=clock)
    assert s.next_runs() == {"j": None}
    clock.set(datetime(2026, 6, 9, 19, tzinfo=BER))
    assert s.run_due() == {} and job.slots == []
    s2 = Scheduler([CronJob("j", PROACTIVE_REFRESH_CRON, job, enabled=False)], tmp_path, BER, clock=clock)
    clock.set(datetime(2026, 6, 20, 19, tzinfo=BER))
    s3 = Scheduler([CronJob("j", PROACTIVE_REFRESH_CRON, job)], tmp_path, BER, clock=clock)  # enabled again
    assert s2.next_runs() == {"j": None}
    assert s3.due_now() == []
    assert s3.next_runs()["j"].isoformat() == "2026-06-21T18:00:00+02:00"


def test_interrupted_run_is_marked(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(10)
    (tmp_path / CRON_FILE).write_text(json.dumps({"version": 1, "jobs": {"j": {
        "served_through": "2026-06-01T18:00:00+02:00",
        "last": {"at": "2026-06-01T18:00:00+02:00", "status": "running", "pid": dead.pid, "result": None,
                 "error": None}}}}))
    s = Scheduler([CronJob("j", PROACTIVE_REFRESH_CRON, Recorder())], tmp_path, BER,
                  clock=lambda: datetime(2026, 6, 1, 20, tzinfo=BER))
    last = s.last_runs()["j"]
    assert last["status"] == "interrupted" and "interrupted" in last["error"]
    assert s.due_now() == []  # the interrupted slot is not retried in a loop


def test_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="job x: invalid cron"):
        CronJob("x", "every day", Recorder())
    with pytest.raises(ValueError, match="duplicate"):
        Scheduler([CronJob("a", "0 1 * * *", Recorder()), CronJob("a", "0 2 * * *", Recorder())], tmp_path, BER)
    (tmp_path / CRON_FILE).write_text("{not json")
    s = Scheduler([CronJob("a", "0 1 * * *", Recorder())], tmp_path, BER)  # corrupt state: start fresh
    assert s.next_runs()["a"] is not None
    never = Scheduler([CronJob("b", "0 0 31 2 *", Recorder())], tmp_path / "2", BER)
    assert never.next_runs() == {"b": None}


def test_non_dict_result_is_wrapped(tmp_path):
    s = Scheduler([CronJob("j", "0 1 * * *", lambda slot: 42)], tmp_path, BER,
                  clock=lambda: datetime(2026, 6, 1, 12, tzinfo=BER))
    assert s.run_now("j")["result"] == {"value": 42}


# -- writer lock across processes ---------------------------------------------------------------------------
CHILD = r"""
import json, sys
from datetime import datetime
from zoneinfo import ZoneInfo
from reme_engine.lock import WriterLock
from reme_engine.scheduler import CronJob, Scheduler
state, now = sys.argv[1], datetime.fromisoformat(sys.argv[2])

def run(slot):
    print("running", flush=True)
    sys.stdin.readline()
    return {"dreamt": True}

s = Scheduler([CronJob("auto_dream", "30 3 * * *", run)], state, ZoneInfo("Europe/Berlin"), clock=lambda: now,
              lock=WriterLock(state, "scheduler"))
print(json.dumps(s.run_due()), flush=True)
"""


def test_lock_contention_between_two_processes(tmp_path):
    clock = Clock(datetime(2026, 11, 28, 4, 0, tzinfo=BER))
    job = Recorder()
    events: list[dict] = []
    mine = Scheduler([CronJob("auto_dream", AUTO_DREAM_CRON, job)], tmp_path, BER, clock=clock,
                     lock=WriterLock(tmp_path, "scheduler"), on_event=events.append)
    now = datetime(2026, 11, 29, 3, 30, 5, tzinfo=BER)
    clock.set(now)
    # another instance (a second app, or --serve) runs the same due job and is still busy with it
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), now.isoformat()], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "running"
        rec = mine.run_due()["auto_dream"]
        assert job.slots == []  # not run here
        assert rec["status"] == "skipped"
        msg = rec["result"]["skipped"]
        assert msg.startswith(f"another run holds the lock: writer lock held by pid {child.pid} (cron:auto_dream)"), msg
        assert events == [{"job": "auto_dream", "event": "skipped", "at": events[0]["at"],
                           "slot": "2026-11-29T03:30:00+01:00", "result": {"skipped": msg}}]
        assert mine.due_now() == []  # retried at the next due time, not immediately
        assert mine.next_runs()["auto_dream"].isoformat() == "2026-11-30T03:30:00+01:00"
    finally:
        child.stdin.write("\n")
        child.stdin.close()
        out = child.stdout.read()
        child.wait(10)
    assert json.loads(out)["auto_dream"]["status"] == "finished"
    # the run that happened wins in the shared marker file
    again = Scheduler([CronJob("auto_dream", AUTO_DREAM_CRON, job)], tmp_path, BER, clock=clock)
    assert again.last_runs()["auto_dream"]["result"] == {"dreamt": True}
    # next night the lock is free and this instance runs it
    clock.set(datetime(2026, 11, 30, 3, 30, tzinfo=BER))
    assert mine.run_due()["auto_dream"]["status"] == "finished"
    assert len(job.slots) == 1


def test_second_instance_does_not_rerun_a_finished_slot(tmp_path):
    """Two instances wake for the same slot; the first finishes before the second checks: one run in total."""
    clock = Clock(datetime(2026, 6, 1, 12, tzinfo=BER))
    a_job, b_job = Recorder(), Recorder()
    a = Scheduler([CronJob("proactive_refresh", PROACTIVE_REFRESH_CRON, a_job)], tmp_path, BER, clock=clock,
                  lock=WriterLock(tmp_path, "a"))
    b = Scheduler([CronJob("proactive_refresh", PROACTIVE_REFRESH_CRON, b_job)], tmp_path, BER, clock=clock,
                  lock=WriterLock(tmp_path, "b"))
    clock.set(datetime(2026, 6, 1, 18, 0, 1, tzinfo=BER))
    assert a.run_due()["proactive_refresh"]["status"] == "finished"
    rec = b.run_due()["proactive_refresh"]
    assert rec["status"] == "skipped" and rec["result"]["skipped"].startswith("already run at 2026-06-01T18:00:01")
    assert len(a_job.slots) == 1 and b_job.slots == []
    assert b.last_runs()["proactive_refresh"]["status"] == "finished"  # adopted from the file
    clock.set(datetime(2026, 6, 2, 18, 0, tzinfo=BER))
    assert b.run_due()["proactive_refresh"]["status"] == "finished"  # next day: whoever comes first
    assert a.run_due()["proactive_refresh"]["status"] == "skipped"
    assert len(a_job.slots) == 1 and len(b_job.slots) == 1


def test_jobs_from_settings():
    class S:  # settings without the keys yet: defaults
        pass

    jobs = jobs_from_settings(S(), {"proactive_refresh": Recorder(), "auto_dream": Recorder()})
    assert [(j.name, j.cron, j.enabled) for j in jobs] == [("proactive_refresh", "0 18 * * *", True),
                                                         ("auto_dream", "30 3 * * *", True)]
    s = S()
    s.auto_dream_cron = "off"
    s.proactive_refresh_cron = "0 19 * * 1-5"
    jobs = jobs_from_settings(s, {"proactive_refresh": Recorder(), "auto_dream": Recorder()})
    assert [(j.cron, j.enabled) for j in jobs] == [("0 19 * * 1-5", True), ("30 3 * * *", False)]
    s.auto_dream_cron = "at night"
    with pytest.raises(ValueError, match="auto_dream"):
        jobs_from_settings(s, {"auto_dream": Recorder()})
