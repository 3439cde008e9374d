"""The proactive refresh (ARCHITECTURE §11.1.2, §6): daily notes →
``<daily>/<date>/interests.yaml`` (v2) and the truth source ``<daily>/_proactive.yaml``.

Steps (each its own module with typed input/output): :mod:`.extract` → :mod:`.topics` → :mod:`.plan` →
:mod:`.agenda` → :mod:`.finish`. Entry point: :func:`run_proactive_refresh` (``Engine.proactive_refresh`` calls it
under the vault's writer lock; ``reme-tui job proactive_refresh date=…``).

Cost contract:

- No daily Markdown of the ``scan_days`` window changed since the last run (catalog ``proactive``) → return
  ``no_change`` before any LLM call, no file written. Changed files that are blank are checkpointed the same way.
- Extract: one call, one retry on an unusable reply. Plan: one call when push candidates remain. Agenda: one call
  when the plan keeps more than one item. At most four calls.
- ``llm=None``: the keyword fallback (:mod:`.keywords`) — no call at all, file marked ``generator:
  keyword-fallback``, ``kind: keyword`` topics, ``push: false``, ``agenda: []``.

Failures: an LLM error (transport, deadline) or an extract reply unusable twice → ``status: failed``, nothing
written, catalog not advanced (the next run retries). A concurrent edit of either output file → ``failed`` with
the conflict in ``errors``, nothing overwritten. An unusable plan/agenda reply degrades (no agenda / plan order)
with a warning. Auto dream's files (digest, day pages, cards) are only read, never written.
"""

from __future__ import annotations

import datetime as _dt
import logging
from dataclasses import dataclass, field

from reme_engine.llm.client import LLMError, UsageTally
from reme_engine.vault.app_folder import cards_dir, proactive_dir
from reme_engine.vault.daily import valid_date
from reme_engine.vault.io import WriteConflict

from .agenda import AgendaInput, run_agenda
from .extract import ExtractError, ExtractInput, apply_budget, changed_files, is_blank, run_extract, scan_window
from .finish import FinishInput, run_finish
from .keywords import KeywordInput, run_keywords
from .model import CATALOG, KEYWORD_MARK, OPEN, ProactiveParams, day_of_path, window_days
from .plan import PlanInput, PlanUnusable, related_memory, run_plan
from .topics import TopicsInput, interests_path, load_truth, run_topics

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..context import VaultContext

log = logging.getLogger(__name__)

NO_CHANGE, WRITTEN, FAILED = "no_change", "written", "failed"


@dataclass
class ProactiveRefreshReport:
    """Outcome of one refresh.

    ``status``: ``no_change`` | ``written`` | ``failed``; ``path``: the day file written (None otherwise);
    ``llm_calls``: calls made (failed ones included); ``tally``: :class:`UsageTally` as a dict (calls, tokens, per
    step); ``topics``: the day file's topics as ``{id, title, kind, confidence, state}`` (state ``new`` |
    ``updated`` | ``carried``); ``agenda_items``: ``{topic_id, title}`` in agenda order; ``used_llm``: an LLM was
    given (False = keyword fallback); ``errors``: why it failed; ``warnings``: degraded but written;
    ``changed``: input paths consumed; ``deferred``: changed paths left for the next run (budget);
    ``push``: the file's ``push``; ``run_id``: the change-journal run (``reme-tui job revert run_id=…``);
    ``similarities``: best known-topic cosine per candidate (diagnostics for ``known_threshold``);
    ``known_threshold``: the threshold used.
    """

    date: str
    status: str = NO_CHANGE
    path: str | None = None
    llm_calls: int = 0
    tally: dict = field(default_factory=dict)
    topics: list[dict] = field(default_factory=list)
    agenda_items: list[dict] = field(default_factory=list)
    used_llm: bool = False
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)
    push: bool = False
    run_id: str | None = None
    similarities: list[dict] = field(default_factory=list)
    known_threshold: float | None = None
    #: vault-relative paths this run wrote (the day file, then the truth source); [] when nothing was written
    written: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "date": self.date, "status": self.status, "path": self.path, "llm_calls": self.llm_calls,
            "tally": self.tally, "topics": self.topics, "agenda_items": self.agenda_items,
            "used_llm": self.used_llm, "errors": self.errors, "warnings": self.warnings, "changed": self.changed,
            "deferred": self.deferred, "push": self.push, "run_id": self.run_id,
            "similarities": self.similarities, "known_threshold": self.known_threshold,
        }


def run_proactive_refresh(engine: VaultContext, *, date: str, llm=None, params: ProactiveParams | None = None,
                          now: _dt.datetime | None = None, carry_forward: bool = False) -> ProactiveRefreshReport:
    """Refresh the proactive topics of ``date`` (YYYY-MM-DD) from the vault's daily notes.

    ``llm``: an :class:`~reme_engine.llm.client.LLMClient`, or None for the keyword fallback. ``params``: from
    ``engine.settings.proactive`` when None. ``now``: the ``generated_at`` instant (default: now in the app's timezone; a naive value is
    taken as app-local). Raises ValueError for an invalid ``date`` or ``params``. LLM failures, unusable replies and
    write conflicts are reported in the result (``status: failed``); unexpected exceptions propagate after the
    journal run is marked failed.

    ``carry_forward``: when no daily note changed but ``date`` has no interests file yet (a fresh day), write it
    anyway from the truth source's open topics (the carry-forward rule re-evaluates them; no extract call) instead
    of answering ``no_change`` — what "refresh now" in the app asks for.
    """
    if params is None:
        space = engine.embedder.space if getattr(engine, "embedder", None) is not None else ""
        params = ProactiveParams.from_settings(engine.settings.proactive, space)
    date = valid_date(date)
    tz = engine.settings.tzinfo()
    generated_at = (now or _dt.datetime.now(tz))
    generated_at = (generated_at.replace(tzinfo=tz) if generated_at.tzinfo is None else generated_at.astimezone(tz))
    generated_at = generated_at.replace(microsecond=0)
    daily_dir = engine.settings.layers.daily_dir.strip("/") or "daily"
    state_dir = proactive_dir(engine.settings.layers)  # the app folder in an existing vault, else daily_dir
    keyword_mode = llm is None
    tally = UsageTally.for_settings(engine.settings)
    rep = ProactiveRefreshReport(date=date, used_llm=not keyword_mode, known_threshold=params.known_threshold)

    def close(status: str) -> ProactiveRefreshReport:
        rep.status = status
        rep.tally = tally.to_dict()
        rep.llm_calls = tally.calls
        return rep

    card_dir = cards_dir(engine.settings.layers)  # the app's cards (app folder in an existing vault)
    scan = scan_window(engine.vault, daily_dir, date, params.scan_days, engine.settings.max_file_bytes, card_dir,
                       engine.settings.layers)
    rep.warnings += [f"skipped {s['path']}: {s['reason']}" for s in scan.skipped]
    catalog = engine.store.catalog_get(CATALOG)
    changed = changed_files(scan.files, catalog, keyword_mode=keyword_mode)
    mark = (lambda sha: KEYWORD_MARK + sha) if keyword_mode else (lambda sha: sha)
    carry = carry_forward and not any((engine.vault / interests_path(d, date)).exists()
                                      for d in {state_dir, daily_dir})
    if not changed and not carry:
        return close(NO_CHANGE)
    blank = [f for f in changed if is_blank(f)]
    material = [f for f in changed if not is_blank(f)]
    if not material and not carry:
        # nothing to read: checkpoint so the next run does not look again; no LLM call, no file (ARCHITECTURE §11.1.2)
        with engine.write_lock:
            engine.store.catalog_set(CATALOG, {f.path: mark(f.sha) for f in blank})
        rep.changed = [f.path for f in blank]
        return close(NO_CHANGE)

    window = {f.path for f in scan.files}
    days = set(window_days(date, params.scan_days))
    gone = [p for p in catalog if p not in window
            and (day_of_path(p, daily_dir) or day_of_path(p, card_dir)) in days]
    journal = engine.journal
    truth = load_truth(engine.vault, daily_dir, date, params, max_bytes=engine.settings.max_file_bytes,
                       app_written_sha=journal.last_written_sha, state_dir=state_dir)
    rep.warnings += truth.warnings
    budget = apply_budget(material, params.max_chars_per_file, params.max_total_chars)
    rep.deferred = [f.path for f in budget.deferred]
    consumed_files = [f for f, _ in budget.shown] + blank
    rep.changed = [f.path for f in consumed_files]
    run = journal.start_run(engine.vault, "proactive_refresh",
                            {"date": date, "llm": not keyword_mode, "changed": rep.changed})
    rep.run_id = run.run_id
    try:
        if keyword_mode:
            kw = run_keywords(KeywordInput([f for f, _ in budget.shown], daily_dir, engine.store, engine.embedder,
                                           engine.state_dir, params.max_topics))
            rep.warnings += kw.warnings
            candidates = kw.candidates
        elif not budget.shown:
            candidates = []  # carry-forward only: nothing new to extract from
        else:
            known = sorted((t for t in truth.topics if t.status == OPEN),
                           key=lambda t: t.last_evidence_at or t.first_seen, reverse=True)
            ex = run_extract(llm, ExtractInput(date, budget.shown, known[: params.max_carry_forward_topics],
                                               engine.settings.language, params), tally)
            rep.warnings += [f"extract: dropped {d}" for d in ex.dropped]
            candidates = ex.candidates
        top = run_topics(TopicsInput(date, candidates, truth.topics, params, engine.embedder, daily_dir))
        rep.warnings += top.warnings
        rep.similarities = [{"candidate": c, "known_id": k, "cosine": round(s, 4)} for c, k, s in top.similarities]
        agenda, skipped = [], []
        if not keyword_mode and top.push_candidates:
            cands = top.push_candidates[: params.max_topics]
            related = {t.id: related_memory(engine, t) for t in cands}
            try:
                plan = run_plan(llm, PlanInput(date, cands, related, engine.settings.language, params), tally)
            except PlanUnusable as exc:
                rep.warnings.append(f"plan reply unusable ({exc}); no agenda today")
                plan = None
            if plan is not None:
                rep.warnings += plan.warnings
                skipped = plan.skipped
                if plan.pushed:
                    ag = run_agenda(llm, AgendaInput(date, plan.pushed, engine.settings.language, params), tally)
                    rep.warnings += ag.warnings
                    agenda = ag.agenda
        fin = run_finish(engine, run, FinishInput(
            date=date, generated_at=generated_at, daily_dir=daily_dir, topics=top, agenda=agenda, skipped=skipped,
            keyword_fallback=keyword_mode, truth_sha=truth.sha, day_sha=truth.day_sha,
            consumed={f.path: mark(f.sha) for f in consumed_files}, gone=gone, sources=rep.changed,
            state_dir=state_dir))
        rep.warnings += fin.warnings
        rep.written = list(fin.written)
    except (LLMError, ExtractError, WriteConflict) as exc:
        rep.errors.append(str(exc))
        log.warning("proactive refresh %s failed: %s", date, exc)
        close(FAILED)
        run.finish("failed", {"errors": rep.errors}, rep.tally)
        return rep
    except BaseException as exc:
        run.finish("failed", {"errors": [f"{type(exc).__name__}: {exc}"]}, tally.to_dict())
        raise
    rep.path = interests_path(state_dir, date)
    rep.push = bool(agenda)
    rep.topics = [{"id": t.id, "title": t.title, "kind": t.kind, "confidence": round(t.confidence, 2),
                   "state": top.touched.get(t.id, "carried")} for t in top.day_topics]
    rep.agenda_items = [{"topic_id": a.topic_id, "title": a.title} for a in agenda]
    close(WRITTEN)
    run.finish("ok", {"path": rep.path, "topics": len(rep.topics), "agenda_items": len(rep.agenda_items),
                      "used_llm": rep.used_llm, "warnings": rep.warnings[:20]}, rep.tally)
    return rep
