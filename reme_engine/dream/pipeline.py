"""auto_dream: changed daily notes → digest nodes (ARCHITECTURE §11.2; §11.3.2 auto-dream + auto-link; §6).

``run_auto_dream(engine, date=…, hint=…, llm=…, scan_days=1)`` runs extract → integrate → finish:

- no changed daily Markdown in the window → ``status "nothing changed"``, no LLM call, no journal run;
- extract fails (LLMError, or an unusable reply twice) → ``status "failed"``: nothing written, nothing
  checkpointed, the journal run is closed as failed;
- otherwise every unit is integrated on its own; finish checkpoints only inputs whose units all succeeded.

A run killed midway (``kill -9``, power loss) is resumed by the next run of the same day over the same inputs:
the same journal run continues, extract is not asked again, units already written are not written again
(:mod:`.resume`); so a crash loses no work and applies none twice.

It never reads or writes ``interests.yaml`` or ``_proactive.yaml`` (proactive refresh owns them) and writes only
under the digest folder, every write journaled (``reme-tui job dream_log`` / ``revert run_id=…``).
:meth:`Engine.auto_dream` calls this under the vault's writer lock; callers that call it directly must hold it.
"""

from __future__ import annotations

import time

from ..llm.client import UsageTally
from ..vault.daily import valid_date
from .extract import Budget, ExtractFailed, ExtractResult, extract_units, scan_changed
from .finish import finish
from .integrate import IntegrateContext, digest_files, integrate_all
from .models import DreamReport
from .resume import Progress

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..context import VaultContext

KIND = "auto_dream"


def run_auto_dream(engine: VaultContext, *, date: str, hint: str = "", llm, scan_days: int = 1,
                   budget: Budget | None = None) -> DreamReport:
    """Run auto_dream for the ``scan_days`` days ending at ``date`` (YYYY-MM-DD; ValueError when invalid).

    ``llm``: an :class:`~reme_engine.llm.client.LLMClient`, or a zero-argument callable returning one — called
    only when there is something to extract, so a no-change run never builds a client (importing the
    ``anthropic`` SDK alone takes ~1.3 s). ``budget``: cost bounds (:class:`Budget`).
    Returns a :class:`DreamReport`; failures of single units are reported in it, not raised.
    """
    t0 = time.perf_counter()
    date = valid_date(date)
    budget = budget or Budget()
    report = DreamReport(date=date)
    scan = scan_changed(engine, date, scan_days, budget)
    params = {"date": date, "hint": hint, "scan_days": scan_days}
    inputs = {i.path: i.sha for i in scan.changed}
    progress = Progress.load(engine.state_dir, KIND)
    if progress is not None and not (scan.changed and progress.matches(params, inputs)):
        _close_stale(engine, progress)
        progress = None
    report.changed_files = [i.path for i in scan.changed]
    report.deferred = list(scan.deferred)
    report.errors += [f"{s['path']}: skipped ({s['reason']})" for s in scan.skipped]
    if not scan.changed:
        # Day pages that are only the generated index carry nothing to learn: consume them without a call.
        if scan.trivial:
            engine.store.catalog_set("dream", scan.trivial)
        if scan.vanished:
            engine.store.catalog_delete("dream", scan.vanished)
        report.checkpointed = sorted(scan.trivial)
        report.status = "nothing changed"
        report.message = (f"nothing changed in {len(scan.scanned)} daily file(s) of "
                          f"{scan.dates[0]}…{scan.dates[-1]}" if len(scan.dates) > 1 else
                          f"nothing changed in {len(scan.scanned)} daily file(s) of {date}")
        report.wall_ms = round((time.perf_counter() - t0) * 1000, 1)
        return report

    if callable(llm) and not hasattr(llm, "complete"):
        llm = llm()
    tally = UsageTally.for_settings(engine.settings)
    language = engine.settings.language
    if progress is not None:  # the same run, killed midway: it continues (see .resume)
        from ..memory.journal import Run

        run = Run(engine.journal, engine.vault, progress.run_id, KIND)
        report.resumed = True
    else:
        run = engine.journal.start_run(engine.vault, KIND, params)
        progress = Progress.begin(engine.state_dir, KIND, run.run_id, params, inputs)
    report.run_id = run.run_id
    closed = False
    try:
        units = progress.units
        if units is not None:
            ext = ExtractResult(units=units, overflow=progress.overflow, dropped=progress.dropped)
        else:
            try:
                ext: ExtractResult = extract_units(llm, scan, date=date, hint=hint, language=language,
                                                   budget=budget, tally=tally)
            except ExtractFailed as exc:
                report.status = "failed"
                report.message = str(exc)
                report.errors.append(str(exc))
                report.llm = tally.to_dict()
                run.finish("failed", {"date": date, "changed_files": len(scan.changed), "error": str(exc)},
                           report.llm)
                progress.clear()
                closed = True
                return report
            progress.set_units(ext.units, ext.overflow, ext.dropped)
        report.dropped += ext.dropped
        # Recall searches the index: make sure digest nodes and today's inputs are in it (stat-only when fresh).
        if ext.units:
            digest_dir = engine.settings.layers.digest_dir.strip("/") or "digest"
            engine.index_paths(digest_files(engine.vault, digest_dir) + report.changed_files)
        ctx = IntegrateContext(engine, run, llm, date, hint, language, budget, tally,
                               {i.path: i for i in scan.changed}, progress=progress)
        outcomes = integrate_all(ctx, ext.units)
        finish(engine, run, report, scan, ext, outcomes, ctx.written, tally, progress)
        closed = True
        report.message = (f"{report.units} unit(s): {report.created} created, {report.corroborated} corroborated, "
                          f"{report.refined} refined, {report.corrected} corrected, {report.failed} failed")
    except BaseException as exc:
        # Unexpected: close the journal run so the Changes view does not show it running forever. The progress
        # record stays: the next run of the same inputs resumes (and closes the run again, as it ends).
        if not closed:
            run.finish("failed", {"date": date, "error": f"{type(exc).__name__}: {exc}"}, tally.to_dict())
        raise
    finally:
        report.wall_ms = round((time.perf_counter() - t0) * 1000, 1)
    return report


def _close_stale(engine: VaultContext, progress: Progress) -> None:
    """A progress record the next run cannot resume (its inputs changed or were checkpointed since): close its
    journal run if the crash left it ``running``, then drop the record."""
    try:
        status = next((r["status"] for r in engine.journal.runs(limit=200, kind=KIND)
                       if r["run_id"] == progress.run_id), None)
        if status == "running":
            engine.journal.finish_run(progress.run_id, "interrupted",
                                      {"error": "interrupted: the process ended before the run finished; the "
                                                "units it had not written are done by a later run"}, {})
    finally:
        progress.clear()
