"""The cron worker thread (ARCHITECTURE §7): runs the engine's periodic jobs in the app's timezone.

Default jobs (cron syntax, app timezone; source: ARCHITECTURE §7):

- ``proactive_refresh`` — :data:`PROACTIVE_REFRESH_CRON` (every evening, so the agenda is ready the next morning)
- ``auto_dream`` — :data:`AUTO_DREAM_CRON` (every night)

Scheduling semantics
--------------------
*Markers.* ``<state dir>/cron.json`` keeps, per job, ``served_through`` — the instant up to which every scheduled
time counts as served — plus the last run's record. A job's next due time is the first cron time after
``served_through``. A job seen for the first time gets ``since = now`` instead: **no catch-up for a job that never
ran** (a fresh install must not start dreaming at once); its first run is its first scheduled time after the app
first saw it. Likewise a job that was disabled at the last start owes nothing: re-enabling it schedules from now.

*Catch-up once.* When the app starts after being closed across one or more scheduled times, the job runs once
(with the most recent missed time as its slot), not once per missed time: before running, ``served_through`` is
set to the current time, which covers every missed slot. The marker is persisted *before* the job runs, so a run
that crashes the process is not retried in a loop at every start; on the next start its record reads
``interrupted``.

*DST.* Cron fields are matched against local wall-clock time (croniter on naive datetimes), then each wall time
is mapped to one instant: a time in the spring-forward gap (e.g. 02:30 on a night that jumps 02:00→03:00) maps to
the first valid instant after the gap (03:00 local), and an ambiguous time in the autumn repeated hour maps to its
first occurrence. Each wall-clock time therefore fires at most once per day (so a sub-daily schedule such as
``*/30`` does not fire again during the repeated hour). (croniter 7.0.0 with an aware
Europe/Berlin datetime yields ``30 2 * * *`` twice on the autumn night — 02:30+02:00 and 02:30+01:00 — which is
why we do not iterate in aware time.)

*Lock.* With a :class:`~reme_engine.lock.WriterLock`, a job runs only if the lock can be taken without waiting;
otherwise it is skipped with result ``{"skipped": "another run holds the lock: writer lock held by pid N (purpose)
since …"}`` and tried again at
its next scheduled time (the skipped slot counts as served). Once it has the lock, a scheduled run re-reads
``cron.json`` and is skipped (``{"skipped": "already run at …"}``) when another instance — or a manual run — has
already run the job for this slot or later, so two instances run a due job once even when the first finishes
before the second wakes.

A job that returns exactly ``{"skipped": reason}`` (the engine's runners do when the pipeline's own writer lock is
held or no LLM is configured) is recorded and reported as ``skipped`` too, not ``finished``.

*Errors.* An exception in a job is logged (logger ``reme.scheduler``) and recorded as the run's ``error``; the
thread keeps running. Events go to ``on_event`` (called on the running thread; exceptions there are logged).

Time values are timezone-aware ``datetime`` objects; the state file stores them as ISO 8601 with offset. ``tz``
must be a real zone (``zoneinfo.ZoneInfo``) for DST to be followed; a fixed-offset ``tzinfo`` keeps its offset.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any, Callable, Iterable

from croniter import CroniterError, croniter

from .config import CRON_OFF
from .lock import WriterLock, describe_holder, pid_alive
from .vault.io import atomic_write

log = logging.getLogger("reme.scheduler")

#: Default schedule of the proactive refresh (ARCHITECTURE §7; settings key ``proactive_refresh_cron``).
PROACTIVE_REFRESH_CRON = "0 18 * * *"
#: Default schedule of auto dream (ARCHITECTURE §7; settings key ``auto_dream_cron``).
AUTO_DREAM_CRON = "30 3 * * *"
#: How a run skipped because another run holds the vault's writer lock starts its ``skipped`` reason.
LOCK_SKIP = "another run holds the lock"
#: Marker file in the vault's state dir.
CRON_FILE = "cron.json"
#: The thread re-checks the clock at least this often (seconds), so suspend/resume or a clock change is noticed.
MAX_SLEEP_SECONDS = 60.0
#: Upper bound of cron candidates examined per computation (normally 1–3 are needed).
_MAX_CANDIDATES = 1000
_STATE_VERSION = 1
_UTC = timezone.utc

JobResult = dict
Event = dict


# -- wall-clock cron arithmetic ---------------------------------------------------------------------------
def resolve_wall_time(naive: datetime, tz: tzinfo) -> datetime:
    """The single instant a local wall-clock time ``naive`` stands for in ``tz`` (aware, in ``tz``).

    Existing times map to themselves; an ambiguous time (autumn repeated hour) to its first occurrence
    (``fold=0``); a non-existent time (spring gap) to the first valid instant after the gap, i.e. the transition.
    """
    first = naive.replace(tzinfo=tz, fold=0)
    u0 = first.astimezone(_UTC)
    u1 = naive.replace(tzinfo=tz, fold=1).astimezone(_UTC)
    if u0 == u1 or u0.astimezone(tz).replace(tzinfo=None) == naive:
        return first
    # In a gap, fold=0 uses the offset before the transition and fold=1 the one after, so the transition
    # instant lies between the two readings. Binary search it on whole seconds (zone transitions are).
    lo, hi = int(min(u0, u1).timestamp()), int(max(u0, u1).timestamp())
    off_lo = datetime.fromtimestamp(lo, tz).utcoffset()
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, tz).utcoffset() == off_lo:
            lo = mid
        else:
            hi = mid
    return datetime.fromtimestamp(hi, tz)


def next_fire(expr: str, tz: tzinfo, after: datetime) -> datetime | None:
    """First scheduled instant of cron ``expr`` strictly after ``after`` (aware), as an aware datetime in ``tz``.

    None when the expression never matches (e.g. ``0 0 31 2 *``).
    """
    base = after.astimezone(tz).replace(tzinfo=None)
    try:
        it = croniter(expr, base)
        for _ in range(_MAX_CANDIDATES):
            inst = resolve_wall_time(it.get_next(datetime), tz)
            # Skips a wall time whose first occurrence is already past (``after`` inside a repeated hour) and
            # gap times that collapse onto an instant already served.
            if inst > after:
                return inst
    except CroniterError as exc:
        log.warning("cron %r has no next time: %s", expr, exc)
    return None


def prev_fire(expr: str, tz: tzinfo, at_or_before: datetime) -> datetime | None:
    """Latest scheduled instant of ``expr`` that is ``<= at_or_before`` (aware), or None."""
    base = at_or_before.astimezone(tz).replace(tzinfo=None) + timedelta(microseconds=1)
    try:
        it = croniter(expr, base)
        for _ in range(_MAX_CANDIDATES):
            inst = resolve_wall_time(it.get_prev(datetime), tz)
            if inst <= at_or_before:
                return inst
    except CroniterError:
        pass
    return None


# -- jobs --------------------------------------------------------------------------------------------------
@dataclass
class CronJob:
    """A periodic job. ``run(slot)`` gets the scheduled instant being served (aware, app tz; on a catch-up the
    most recent missed time; for :meth:`Scheduler.run_now` the current time) and returns a JSON-able dict.

    Raises ``ValueError`` for an invalid cron expression (message names the job).
    """

    name: str
    cron: str
    run: Callable[[datetime], JobResult]
    enabled: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.cron, str) or not croniter.is_valid(self.cron):
            raise ValueError(f"job {self.name}: invalid cron expression {self.cron!r}")


#: Settings attribute holding each default job's cron expression, and its default (ARCHITECTURE §7).
SETTINGS_KEYS = {"proactive_refresh": ("proactive_refresh_cron", PROACTIVE_REFRESH_CRON),
                 "auto_dream": ("auto_dream_cron", AUTO_DREAM_CRON)}
_OFF = CRON_OFF  # one list: config checks the same values at load


def jobs_from_settings(settings: Any, runners: dict[str, Callable[[datetime], JobResult]]) -> list[CronJob]:
    """:class:`CronJob` s for ``runners`` (``{"proactive_refresh": fn, "auto_dream": fn}``) with schedules read
    from ``settings.<name>_cron`` (see :data:`SETTINGS_KEYS`; the defaults apply when the attribute is absent).
    A value of ``""``/``off``/``none``/``disabled`` (or ``None``/``False``) disables the job.
    Raises ``ValueError`` for an invalid expression (message names the job).
    """
    jobs = []
    for name, run in runners.items():
        key, default = SETTINGS_KEYS.get(name, (f"{name}_cron", None))
        expr = getattr(settings, key, default)
        if expr is None or expr is False or (isinstance(expr, str) and expr.strip().lower() in _OFF):
            jobs.append(CronJob(name, default or "0 0 * * *", run, enabled=False))
        else:
            jobs.append(CronJob(name, str(expr).strip(), run))
    return jobs


def _iso(dt: datetime | None) -> str | None:
    return dt.isoformat() if dt is not None else None


def _parse(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    return dt if dt.tzinfo is not None else None


def _newer(a: dict, b: Any) -> bool:
    """True when record ``a`` was written after record ``b`` (by their ``updated`` stamps)."""
    if not isinstance(b, dict):
        return True
    ta, tb = _parse(a.get("updated")), _parse(b.get("updated"))
    return ta is not None and (tb is None or ta > tb)


class Scheduler:
    """Runs :class:`CronJob` s on their schedule in a worker thread (or synchronously via :meth:`run_due`).

    ``jobs``: unique names. ``state_dir``: where ``cron.json`` lives (created on first save). ``tz``: the app
    timezone (``Settings.tzinfo()``). ``clock``: returns the current aware time (naive values are taken as
    ``tz``); ``sleep(seconds)``: how the thread waits — the default waits on an internal event that
    :meth:`stop` sets, so stopping is immediate; an injected ``sleep`` should return promptly. ``lock``: the
    vault's writer lock, taken (non-blocking) around each run. ``on_event``: receives
    ``{"job", "event": "started"|"finished"|"failed"|"skipped", "at", "slot", "result"|"error"}``.

    Thread-safety: all public methods may be called from any thread. Jobs of one scheduler never overlap.
    """

    def __init__(
        self,
        jobs: Iterable[CronJob],
        state_dir: str | os.PathLike[str],
        tz: tzinfo,
        *,
        clock: Callable[[], datetime] | None = None,
        sleep: Callable[[float], None] | None = None,
        lock: WriterLock | None = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> None:
        self._jobs: dict[str, CronJob] = {}
        for job in jobs:
            if job.name in self._jobs:
                raise ValueError(f"duplicate job name {job.name!r}")
            self._jobs[job.name] = job
        self.path = Path(state_dir) / CRON_FILE
        self.tz = tz
        self._clock = clock or (lambda: datetime.now(tz))
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._sleep = sleep or self._wait
        self._lock = lock
        self._on_event = on_event
        self._state_guard = threading.RLock()
        self._run_guard = threading.Lock()
        self._running: str | None = None
        self._thread: threading.Thread | None = None
        self._state: dict[str, dict] = self._read_file()
        self._init_markers()

    # -- public API -------------------------------------------------------------------------------------
    @property
    def jobs(self) -> dict[str, CronJob]:
        return dict(self._jobs)

    @property
    def running(self) -> str | None:
        """Name of the job running right now, if any."""
        return self._running

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called; long jobs may poll it to finish early."""
        return self._stop.is_set()

    def start(self) -> None:
        """Start the worker thread (daemon, named ``reme-scheduler``); missed runs are caught up first."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._wake.clear()
        self._thread = threading.Thread(target=self._loop, name="reme-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 5.0) -> bool:
        """Stop the thread and join it; True when it has ended within ``timeout`` seconds.

        The wait between runs is interrupted at once; a job already running is not interrupted (it finishes,
        see :attr:`stopping`), so with a long job this may return False and the daemon thread ends later.
        """
        self._stop.set()
        self._wake.set()
        t = self._thread
        if t is None:
            return True
        t.join(timeout)
        return not t.is_alive()

    def wake(self) -> None:
        """Make the thread re-evaluate due times now (e.g. after the clock or configuration changed)."""
        self._wake.set()

    def next_runs(self) -> dict[str, datetime | None]:
        """``{name: next scheduled instant}`` (aware, app tz); None for a disabled job or one that never fires.

        A time in the past means the job is due now (it runs at the thread's next check or :meth:`run_due`).
        """
        with self._state_guard:
            return {name: self._next_due(name) for name in self._jobs}

    def last_runs(self) -> dict[str, dict | None]:
        """``{name: record or None}``; a record is ``{at, finished_at, slot, status, result, error, manual, pid}``.

        ``status``: ``running`` | ``finished`` | ``failed`` | ``skipped`` | ``interrupted``; times are ISO strings.
        """
        with self._state_guard:
            return {name: (dict(self._state.get(name, {}).get("last") or {}) or None) for name in self._jobs}

    def due_now(self) -> list[str]:
        """Names of enabled jobs whose next scheduled time has come, earliest first."""
        now = self._now()
        with self._state_guard:
            due = [(d, n) for n in self._jobs if (d := self._next_due(n)) is not None and d <= now]
        return [n for _, n in sorted(due)]

    def run_due(self) -> dict[str, dict]:
        """Run every due job once, synchronously, in this thread (``reme-tui --refresh``); ``{name: record}``."""
        out: dict[str, dict] = {}
        for name in self.due_now():
            out[name] = self._run_scheduled(name)
        return out

    def run_now(self, name: str) -> dict:
        """Run job ``name`` now, synchronously (palette "run now"); returns its record.

        Does not move the schedule: the next scheduled run still happens. Waits for another job of this
        scheduler to finish first; if ``name`` itself is running, returns a ``skipped`` record at once.
        Raises ``KeyError`` for an unknown job.
        """
        if name not in self._jobs:
            raise KeyError(f"unknown job {name!r} (known: {', '.join(sorted(self._jobs))})")
        now = self._now()
        if self._running == name:
            rec = self._record(now, now, now, "skipped", {"skipped": f"{name} is already running"}, None, True)
            self._emit(name, "skipped", now, now, result=rec["result"])
            return rec
        return self._execute(self._jobs[name], now, manual=True)

    # -- thread ----------------------------------------------------------------------------------------
    def _wait(self, seconds: float) -> None:
        self._wake.wait(seconds)
        self._wake.clear()

    def _loop(self) -> None:
        log.debug("scheduler started")
        while not self._stop.is_set():
            try:
                for name in self.due_now():
                    if self._stop.is_set():
                        break
                    self._run_scheduled(name)
            except Exception:  # never let the thread die; the next check retries
                log.exception("scheduler check failed")
            if self._stop.is_set():
                break
            self._sleep(self._seconds_to_next())
        log.debug("scheduler stopped")

    def _seconds_to_next(self) -> float:
        now = self._now()
        upcoming = [d for d in self.next_runs().values() if d is not None]
        if not upcoming:
            return MAX_SLEEP_SECONDS
        return min(MAX_SLEEP_SECONDS, max(0.0, (min(upcoming) - now).total_seconds()))

    # -- running ---------------------------------------------------------------------------------------
    def _now(self) -> datetime:
        now = self._clock()
        return now.replace(tzinfo=self.tz) if now.tzinfo is None else now

    def _next_due(self, name: str) -> datetime | None:
        job = self._jobs[name]
        if not job.enabled:
            return None
        st = self._state.get(name, {})
        anchor = _parse(st.get("served_through")) or _parse(st.get("since"))
        if anchor is None:  # unreachable after _init_markers; defensive
            anchor = self._now()
        return next_fire(job.cron, self.tz, anchor)

    def _run_scheduled(self, name: str) -> dict:
        """Serve every slot of ``name`` up to now with one run (catch-up once), then run it."""
        job = self._jobs[name]
        now = self._now()
        with self._state_guard:
            due = self._next_due(name)
            if due is None or due > now:
                return dict(self._state.get(name, {}).get("last") or {})
            slot = prev_fire(job.cron, self.tz, now) or due
            slot = max(slot, due)
            st = self._state.setdefault(name, {})
            st["served_through"] = _iso(now.astimezone(self.tz))
        return self._execute(job, slot.astimezone(self.tz), manual=False)

    def _execute(self, job: CronJob, slot: datetime, *, manual: bool) -> dict:
        with self._run_guard:
            self._running = job.name
            try:
                return self._execute_locked(job, slot, manual)
            finally:
                self._running = None

    def _execute_locked(self, job: CronJob, slot: datetime, manual: bool) -> dict:
        started = self._now().astimezone(self.tz)
        if self._lock is not None and not self._lock.acquire(blocking=False, purpose=f"cron:{job.name}"):
            msg = f"{LOCK_SKIP}: {describe_holder(self._lock.holder(wait=True))}"
            log.info("%s skipped: %s", job.name, msg)
            rec = self._record(started, self._now(), slot, "skipped", {"skipped": msg}, None, manual)
            self._save_record(job.name, rec)
            self._emit(job.name, "skipped", started, slot, result=rec["result"])
            return rec
        try:
            if not manual:
                done_by = self._served_elsewhere(job.name, slot)
                if done_by is not None:  # another instance ran this slot while we were deciding
                    rec = self._record(started, self._now(), slot, "skipped",
                                       {"skipped": f"already run at {done_by}"}, None, manual)
                    self._emit(job.name, "skipped", started, slot, result=rec["result"])
                    return rec
            running = self._record(started, None, slot, "running", None, None, manual)
            self._save_record(job.name, running)
            self._emit(job.name, "started", started, slot)
            try:
                result = job.run(slot)
            except Exception as exc:
                log.exception("job %s failed", job.name)
                error = f"{type(exc).__name__}: {exc}"
                rec = self._record(started, self._now(), slot, "failed", None, error, manual)
                self._save_record(job.name, rec)
            else:
                if result is None:
                    result = {}
                elif not isinstance(result, dict):
                    result = {"value": result}
                status = "finished"
                if set(result) == {"skipped"}:
                    # the job declined to run (its own writer lock was held, no LLM configured): not a run
                    status = "skipped"
                    text = str(result["skipped"])
                    if "writer lock held" in text and not text.startswith(LOCK_SKIP):
                        result = {"skipped": f"{LOCK_SKIP}: {text}"}
                rec = self._record(started, self._now(), slot, status, result, None, manual)
                self._save_record(job.name, rec)  # before the lock goes, so the next holder sees it
        finally:
            if self._lock is not None:
                self._lock.release()
        if rec["status"] == "failed":
            self._emit(job.name, "failed", self._now(), slot, error=rec["error"])
        elif rec["status"] == "skipped":
            self._emit(job.name, "skipped", self._now(), slot, result=rec["result"])
        else:
            self._emit(job.name, "finished", self._now(), slot, result=rec["result"])
        return rec

    def _served_elsewhere(self, name: str, slot: datetime) -> str | None:
        """When ``cron.json`` on disk shows a run of ``name`` (not a skip) for ``slot`` or later — another
        instance got there first, or a manual run happened since — the time that run started; else None."""
        last = (self._read_file().get(name) or {}).get("last")
        if not isinstance(last, dict) or last.get("status") == "skipped":
            return None
        ran_for = _parse(last.get("slot"))
        if ran_for is None or ran_for < slot:
            return None
        with self._state_guard:
            self._state.setdefault(name, {})["last"] = last
        return str(last.get("at"))

    def _record(self, at: datetime, finished: datetime | None, slot: datetime | None, status: str,
                result: dict | None, error: str | None, manual: bool) -> dict:
        return {
            "at": _iso(at.astimezone(self.tz)),
            "finished_at": _iso(finished.astimezone(self.tz)) if finished is not None else None,
            "slot": _iso(slot.astimezone(self.tz)) if slot is not None else None,
            "status": status,
            "result": result,
            "error": error,
            "manual": manual,
            "pid": os.getpid(),
        }

    def _emit(self, name: str, event: str, at: datetime, slot: datetime | None, **extra: Any) -> None:
        if self._on_event is None:
            return
        ev = {"job": name, "event": event, "at": _iso(at.astimezone(self.tz)), "slot": _iso(slot), **extra}
        try:
            self._on_event(ev)
        except Exception:
            log.exception("on_event callback failed for %s", ev)

    # -- persistence -----------------------------------------------------------------------------------
    def _read_file(self) -> dict[str, dict]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            log.warning("ignoring unreadable %s (%s); schedules restart from now", self.path, exc)
            return {}
        jobs = data.get("jobs") if isinstance(data, dict) else None
        if not isinstance(jobs, dict):
            return {}
        return {str(k): v for k, v in jobs.items() if isinstance(v, dict)}

    def _init_markers(self) -> None:
        now = _iso(self._now().astimezone(self.tz))
        with self._state_guard:
            for name, job in self._jobs.items():
                st = self._state.setdefault(name, {})
                if not _parse(st.get("since")) and not _parse(st.get("served_through")):
                    st["since"] = now  # first sight: no catch-up for a job that never ran
                if not job.enabled or st.get("enabled") is False:
                    st["served_through"] = now  # nothing is owed for the time a job was disabled
                st["enabled"] = job.enabled
                st["cron"] = job.cron
                last = st.get("last")
                dead = isinstance(last, dict) and not pid_alive(int(last.get("pid") or 0))
                if dead and last.get("status") == "running":
                    last.update(status="interrupted", error="interrupted: the app stopped during the run")
            self._save()

    def _save_record(self, name: str, rec: dict) -> None:
        with self._state_guard:
            st = self._state.setdefault(name, {})
            st["last"] = dict(rec, updated=_iso(datetime.now(_UTC)))
            self._save()

    def _save(self) -> None:
        """Merge with the file (another instance may have written it) and write atomically. Never raises."""
        try:
            disk = self._read_file()
            for name, theirs in disk.items():
                mine = self._state.setdefault(name, {})
                if name not in self._jobs:
                    self._state[name] = theirs  # keep other jobs' markers untouched
                    continue
                a, b = _parse(mine.get("served_through")), _parse(theirs.get("served_through"))
                if b is not None and (a is None or b > a):
                    mine["served_through"] = theirs["served_through"]
                tl, ml = theirs.get("last"), mine.get("last")
                if isinstance(tl, dict) and _newer(tl, ml):
                    mine["last"] = tl
            payload = json.dumps({"version": _STATE_VERSION, "jobs": self._state}, ensure_ascii=False, indent=1,
                                 default=str)
            atomic_write(self.path, payload + "\n")
        except Exception:
            log.exception("could not save %s", self.path)
