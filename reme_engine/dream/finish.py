"""Step 3 of auto_dream — finish (ARCHITECTURE §11.2.4).

Checkpoints into the dream catalog ONLY the inputs whose units all succeeded (plus inputs no unit used, and
trivial inputs): a path used by a failed or skipped unit, or deferred by the budget, keeps its old catalog entry
and is therefore "changed" again next run, until it integrates. Catalog entries of files that vanished from the
window are dropped. Written nodes are re-indexed, the journal run is closed with the summary counts, and the
:class:`~reme_engine.dream.models.DreamReport` is completed.
"""

from __future__ import annotations

from ..crashpoints import crash_point
from .extract import CATALOG, ExtractResult, ScanResult
from .models import DreamReport, UnitOutcome

_COUNTS = {"CREATE": "created", "CORROBORATE": "corroborated", "REFINE": "refined", "CORRECT": "corrected"}


def checkpoint_items(scan: ScanResult, ext: ExtractResult, outcomes: list[UnitOutcome]) -> dict[str, str]:
    """``{path: sha}`` safe to checkpoint: sent inputs minus those of failed/skipped/over-budget units, plus trivial."""
    withheld = {p for o in outcomes if o.status != "ok" for p in o.unit.paths}
    withheld |= {p for u in ext.overflow for p in u.paths}
    items = {i.path: i.sha for i in scan.changed if i.path not in withheld}
    items.update(scan.trivial)
    return items


def finish(engine, run, report: DreamReport, scan: ScanResult, ext: ExtractResult, outcomes: list[UnitOutcome],
           written: list[str], tally, progress=None) -> DreamReport:
    """Re-index, close the journal run, checkpoint, drop ``progress`` (the run's :class:`~.resume.Progress`);
    fill and return ``report``."""
    items = checkpoint_items(scan, ext, outcomes)
    report.checkpointed = sorted(items)
    if written:
        engine.index_paths(sorted(set(written)))  # idempotent: unchanged files are skipped by mtime/size
    report.written = list(dict.fromkeys(written))
    report.units = len(ext.units) + len(ext.overflow)
    for o in outcomes:
        if o.status == "ok":
            key = _COUNTS[o.action]
            setattr(report, key, getattr(report, key) + 1)
        elif o.status == "failed":
            report.failed += 1
        if o.error:
            report.errors.append(f"unit {o.unit.name!r}: {o.error}")
        report.dropped += [f"unit {o.unit.name!r}: dropped {d}" for d in o.dropped]
    for u in ext.overflow:
        report.errors.append(f"unit {u.name!r}: over the per-run unit budget; retried next run")
    report.outcomes = [o.to_dict() for o in outcomes]
    report.status = "partial" if (report.failed or ext.overflow or any(o.status == "skipped" for o in outcomes)) \
        else "ok"
    report.llm = tally.to_dict()
    # Order matters for a crash (see .resume): the journal run is closed first, then the inputs are checkpointed,
    # then the progress record goes; a crash between two steps ends in a resume that repeats this idempotent
    # finish, or in a record the next run drops.
    run.finish(report.status, summary(report), report.llm)
    crash_point("dream.after_run_closed")
    if items:
        engine.store.catalog_set(CATALOG, items)
    if scan.vanished:
        engine.store.catalog_delete(CATALOG, scan.vanished)
    crash_point("dream.after_checkpoint")
    if progress is not None:
        progress.clear()
    return report


def summary(report: DreamReport) -> dict:
    """The counts stored with the journal run (``reme-tui job dream_log``)."""
    return {k: getattr(report, k) for k in ("date", "units", "created", "corroborated", "refined", "corrected",
                                             "failed")} | {"changed_files": len(report.changed_files),
                                                           "written": len(report.written),
                                                           "errors": report.errors[:20]}
