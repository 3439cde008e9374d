"""Step 5, finish (ARCHITECTURE §11.1.1 ``proactive_finish_step``): render and write ``<daily>/<date>/interests.yaml``
and the truth source ``<daily>/_proactive.yaml``, then checkpoint the ``proactive`` catalog and re-index.

Order and guarantees (ARCHITECTURE §8):

1. Both files' current hashes are checked against the hashes read at the start of the run; if either changed
   (a concurrent edit by the user or another tool) :class:`~reme_engine.vault.io.WriteConflict` is raised and
   nothing is written.
2. Writes go through the change journal (:meth:`Run.write` with ``expected_sha``: atomic, conflict-checked again,
   revertible with ``reme-tui job revert``): first the day file, then the truth source.
3. Only after both are written is the catalog advanced (consumed files → sha; vanished window files dropped), so a
   failure before that leaves the inputs "changed" for the next run.
4. The written paths are re-indexed (a failing re-index is a warning, not a failure: the watcher/next sync heals it).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

from reme_engine.vault.io import WriteConflict, file_hash
from reme_engine.vault.paths import resolve

from .model import (
    CATALOG,
    KEYWORD_GENERATOR,
    SKIPPED_TODAY,
    AgendaItem,
    Topic,
    as_date,
    dump_yaml,
)
from .topics import TopicsOutput, interests_path, truth_path

STEP = "proactive_finish"

TRUTH_HEADER = (
    "# Proactive truth source (rebuildable): written by reme-tui's proactive refresh from daily notes.\n"
    "# Close a topic by setting `status: resolved` (or `suppressed`); the next refresh keeps that state.\n"
)


@dataclass
class FinishInput:
    """Everything finish needs: the run ``date`` and ``generated_at`` (aware datetime, app timezone), the
    ``daily_dir``, the topics step's output, today's ``agenda`` and the plan's explicit ``skipped`` topics,
    whether this is the ``keyword_fallback``, the hashes read at the start (``truth_sha``/``day_sha``, None =
    absent), the catalog entries to checkpoint (``consumed``: path → catalog value), window paths that vanished
    (``gone``) and the journal ``sources``."""

    date: str
    generated_at: _dt.datetime
    daily_dir: str
    topics: TopicsOutput
    agenda: list[AgendaItem]
    skipped: list[tuple[Topic, str]]
    keyword_fallback: bool
    truth_sha: str | None
    day_sha: str | None
    consumed: dict[str, str]
    gone: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    #: where ``interests.yaml`` and ``_proactive.yaml`` go (app folder or daily folder); "" = ``daily_dir``
    state_dir: str = ""


@dataclass
class FinishOutput:
    """Vault paths written (day file first), the day file's document and text."""

    written: list[str]
    day_path: str
    truth_path: str
    day_doc: dict
    day_text: str
    warnings: list[str] = field(default_factory=list)


def _held_reason(t: Topic) -> str:
    return t.status_reason or t.reason


def build_day_doc(inp: FinishInput) -> dict:
    """The v2 document of ``interests.yaml`` (in §11.1.3's field order; ``generator`` only for the fallback)."""
    doc: dict = {"version": 2, "date": as_date(inp.date), "generated_at": inp.generated_at}
    if inp.keyword_fallback:
        doc["generator"] = KEYWORD_GENERATOR
    doc["push"] = bool(inp.agenda)
    doc["topics"] = [t.day_dict() for t in inp.topics.day_topics]
    doc["agenda"] = [a.to_dict() for a in inp.agenda]
    suppressed = [{"id": t.id, "title": t.title, "reason": _held_reason(t), "status": t.status}
                  for t in inp.topics.held]
    listed = {s["id"] for s in suppressed}
    suppressed += [{"id": t.id, "title": t.title, "reason": why, "status": SKIPPED_TODAY}
                   for t, why in inp.skipped if t.id not in listed]
    doc["suppressed"] = suppressed
    return doc


def build_truth_doc(inp: FinishInput) -> dict:
    return {"version": 2, "updated_at": inp.generated_at, "topics": [t.truth_dict() for t in inp.topics.truth]}


def run_finish(engine, run, inp: FinishInput) -> FinishOutput:
    """Write both files, checkpoint, re-index. Raises WriteConflict (nothing written) when a file changed."""
    day_rel = interests_path(inp.state_dir or inp.daily_dir, inp.date)
    truth_rel = truth_path(inp.state_dir or inp.daily_dir)
    day_doc = build_day_doc(inp)
    day_text = dump_yaml(day_doc)
    truth_text = TRUTH_HEADER + dump_yaml(build_truth_doc(inp))
    warnings: list[str] = []
    with engine.write_lock:
        for rel, expected in ((day_rel, inp.day_sha), (truth_rel, inp.truth_sha)):
            if file_hash(resolve(engine.vault, rel).abs) != expected:
                raise WriteConflict(f"{rel} changed while the refresh ran; not overwritten (run it again)")
        run.write(day_rel, day_text, step=STEP, sources=inp.sources, expected_sha=inp.day_sha)
        run.write(truth_rel, truth_text, step=STEP, sources=inp.sources, expected_sha=inp.truth_sha)
        # checkpoint only now: a failure above leaves the inputs "changed" for the next run
        engine.store.catalog_set(CATALOG, inp.consumed)
        if inp.gone:
            engine.store.catalog_delete(CATALOG, inp.gone)
        written = [day_rel, truth_rel]
        try:
            engine.index_paths(written)
        except Exception as exc:  # noqa: BLE001 - the files are written; the next sync indexes them
            warnings.append(f"re-index of {', '.join(written)} failed: {exc}")
    return FinishOutput(written, day_rel, truth_rel, day_doc, day_text, warnings)
