"""The single-writer lock across real processes: contention, kill -9 recovery, holder info, stale files."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime

import pytest

from reme_engine.lock import LOCK_FILE, LockHeld, WriterLock, describe_holder

# A child process that takes the lock, prints "locked", then holds it until its stdin closes or says "release".
HOLDER = r"""
import sys
from reme_engine.lock import WriterLock
lock = WriterLock(sys.argv[1], sys.argv[2])
if not lock.acquire(blocking=True, timeout=10):
    print("busy", flush=True)
    sys.exit(3)
print("locked", flush=True)
sys.stdin.readline()
lock.release()
print("released", flush=True)
sys.stdin.readline()
"""


def spawn_holder(state_dir, purpose="palette:dream") -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(state_dir), purpose], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().strip()
    assert line == "locked", line
    return p


def finish(p: subprocess.Popen) -> None:
    try:
        p.stdin.close()
    except OSError:
        pass
    p.wait(10)


def test_two_processes_contend(tmp_path):
    child = spawn_holder(tmp_path, "palette:dream")
    try:
        mine = WriterLock(tmp_path, "cron:auto_dream")
        assert mine.acquire() is False
        assert not mine.held
        h = mine.holder()
        assert h["pid"] == child.pid and h["purpose"] == "palette:dream"
        with pytest.raises(LockHeld) as ei:
            with mine:
                pass
        msg = str(ei.value)
        assert f"pid {child.pid}" in msg and "palette:dream" in msg and "since" in msg
        assert ei.value.holder["pid"] == child.pid
        # a blocking acquire waits for the release
        threading.Timer(0.3, lambda: (child.stdin.write("release\n"), child.stdin.flush())).start()
        t0 = time.monotonic()
        assert mine.acquire(blocking=True, timeout=10) is True
        assert 0.2 < time.monotonic() - t0 < 9
        assert child.stdout.readline().strip() == "released"
        assert mine.holder()["pid"] == os.getpid()
        mine.release()
        assert mine.holder() is None
    finally:
        finish(child)


def test_blocking_acquire_times_out(tmp_path):
    child = spawn_holder(tmp_path)
    try:
        t0 = time.monotonic()
        assert WriterLock(tmp_path, "x").acquire(blocking=True, timeout=0.3) is False
        assert 0.25 < time.monotonic() - t0 < 3
    finally:
        finish(child)


def test_child_waits_for_parent(tmp_path):
    """The other direction: this process holds, a child cannot take it until we release."""
    lock = WriterLock(tmp_path, "refresh")
    assert lock.acquire()
    code = ("import sys; from reme_engine.lock import WriterLock; l = WriterLock(sys.argv[1], 'other');"
            "print(l.acquire(), l.holder()['pid'])")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert out.stdout.split() == ["False", str(os.getpid())]
    lock.release()
    out = subprocess.run([sys.executable, "-c", code.replace("l.holder()['pid']", "l.held"), str(tmp_path)],
                         capture_output=True, text=True, timeout=30)
    assert out.stdout.split() == ["True", "True"]


def test_kill_9_holder_then_recovery(tmp_path):
    child = spawn_holder(tmp_path, "cron:auto_dream")
    mine = WriterLock(tmp_path, "refresh")
    assert mine.acquire() is False
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    # the kernel released the flock; the file still names the dead holder
    info = json.loads((tmp_path / LOCK_FILE).read_text())
    assert info["pid"] == child.pid
    assert mine.holder() is None  # stale info from a dead pid is not a holder
    assert mine.acquire() is True
    assert mine.holder()["purpose"] == "refresh"
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    mine.release()


def test_leftover_file_with_dead_pid(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(10)
    (tmp_path / LOCK_FILE).write_text(json.dumps({"pid": dead.pid, "hostname": socket.gethostname(),
                                                  "started_at": "2026-01-01T00:00:00+00:00", "purpose": "old"}))
    lock = WriterLock(tmp_path, "new")
    assert lock.holder() is None
    assert lock.acquire() is True
    lock.release()


def test_holder_info_fields(tmp_path):
    with WriterLock(tmp_path / "state", "cron:proactive_refresh") as lock:  # creates the state dir
        h = lock.holder()
        assert set(h) == {"pid", "hostname", "started_at", "purpose"}
        assert h["pid"] == os.getpid() and h["hostname"] == socket.gethostname()
        assert h["purpose"] == "cron:proactive_refresh"
        started = datetime.fromisoformat(h["started_at"])
        assert started.tzinfo is not None and abs((datetime.now().astimezone() - started).total_seconds()) < 60
        # another instance (same process) reads the same info from the file
        other = WriterLock(tmp_path / "state", "other")
        assert other.holder() == h
    assert (tmp_path / "state" / LOCK_FILE).exists()  # never deleted (see module docstring)
    assert (tmp_path / "state" / LOCK_FILE).read_text() == ""


def test_purpose_override_and_describe(tmp_path):
    lock = WriterLock(tmp_path, "default")
    assert lock.acquire(purpose="cron:auto_dream")
    assert lock.holder()["purpose"] == "cron:auto_dream"
    lock.release()
    assert describe_holder(None) == "writer lock held by another process"
    text = describe_holder({"pid": 7, "purpose": "p", "started_at": "T", "hostname": "elsewhere"})
    assert text == "writer lock held by pid 7 (p) since T on host elsewhere"


def test_two_instances_in_one_process_exclude_each_other(tmp_path):
    a, b = WriterLock(tmp_path, "a"), WriterLock(tmp_path, "b")
    assert a.acquire()
    assert not b.acquire()
    assert b.holder()["purpose"] == "a"
    a.release()
    assert b.acquire()
    b.release()


def test_not_reentrant_same_thread_raises(tmp_path):
    lock = WriterLock(tmp_path, "x")
    assert lock.acquire()
    with pytest.raises(RuntimeError):
        lock.acquire()
    # another thread using the same instance waits / fails instead
    got = []
    t = threading.Thread(target=lambda: got.append(lock.acquire(blocking=True, timeout=0.2)))
    t.start()
    t.join(5)
    assert got == [False]
    lock.release()
    lock.release()  # idempotent
    assert not lock.held


def test_subprocess_does_not_inherit_lock(tmp_path):
    lock = WriterLock(tmp_path, "parent")
    assert lock.acquire()
    # a long-lived program started while we hold the lock must not keep it after we release
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], close_fds=False)
    try:
        lock.release()
        other = WriterLock(tmp_path, "other")
        assert other.acquire()
        other.release()
    finally:
        p.kill()
        p.wait()


def test_shared_flock_is_reentrant_here_and_excludes_another_process(tmp_path):
    """The capture lock's primitive: nested holds in one thread, a timeout while another process holds it, and
    free again as soon as that process ends (the kernel drops its flock)."""
    import subprocess
    import sys

    from reme_engine.lock import LockTimeout, shared_flock

    path = tmp_path / "capture.lock"
    lock = shared_flock(path)
    with lock.hold(1.0):
        with lock.hold(1.0):  # the same thread again: no self-deadlock
            pass
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom reme_engine.lock import shared_flock\n"
        f"with shared_flock({str(path)!r}).hold(5):\n    print('held', flush=True)\n    sys.stdin.readline()\n")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LockTimeout, match="another process"):
            with lock.hold(0.3):
                pass
    finally:
        holder.communicate("\n", timeout=30)
    with lock.hold(5.0):
        pass
