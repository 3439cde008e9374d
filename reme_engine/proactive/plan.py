"""Step 3, plan (ARCHITECTURE §11.1.1 ``proactive_plan_step``): one LLM call, made only when push candidates remain,
that decides per candidate whether to raise it and how (scenario, opener, minimal next action, preconditions, delivery,
related long-term memory).

Input per candidate: the topic's fields plus up to three related digest notes found by the engine's search (the
only paths ``linked_memory`` may name — validated, others dropped). Reply (JSON or YAML, lenient)::

    {"items": [{"topic_id", "push", "skip_reason", "scenario_type", "opener", "next_action", "preconditions",
                "delivery", "linked_memory", "why_now"}]}

Unknown ``topic_id`` → item dropped; candidates the reply omits are simply not pushed (a warning says so);
``push: false`` or a push without an opener or next action → skipped with a reason (no opener is ever invented;
the day file lists skips in ``suppressed`` with ``status: skipped_today``). An unusable reply raises :class:`PlanUnusable`
(no retry: the refresh's budget is four calls); the refresh then writes no agenda and says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from reme_engine.llm.client import Message, UsageTally
from reme_engine.llm.structured import StructuredReplyError, parse_reply

from ..prompts import load_prompt
from . import llm_io
from .extract import validate_paths
from .model import ProactiveParams, Topic, normalize_title

STEP = "proactive_plan"
RELATED_LIMIT = 3


class PlanUnusable(Exception):
    """The plan reply held no usable data (message says why)."""


@dataclass
class Related:
    """A digest note related to a topic: vault ``path``, its ``name`` and ``description``."""

    path: str
    name: str
    description: str


@dataclass
class PlanItem:
    """A candidate the plan step decided to raise today."""

    topic: Topic
    scenario_type: str
    opener: str
    next_action: str
    preconditions: list[str] = field(default_factory=list)
    delivery: str = "in_conversation"
    linked_memory: list[str] = field(default_factory=list)
    why_now: str = ""


@dataclass
class PlanInput:
    """``candidates`` (push candidates, best first), ``related`` ({topic id: [Related]}), run ``date``,
    ``language`` and ``params``."""

    date: str
    candidates: list[Topic]
    related: dict[str, list[Related]]
    language: str
    params: ProactiveParams


@dataclass
class PlanOutput:
    """``pushed`` in reply order; ``skipped``: ``(topic, reason)`` for candidates explicitly held back today."""

    pushed: list[PlanItem]
    skipped: list[tuple[Topic, str]]
    warnings: list[str] = field(default_factory=list)


def related_memory(engine, topic: Topic, limit: int = RELATED_LIMIT) -> list[Related]:
    """Digest notes related to ``topic`` (the engine's search over the digest layer; [] when search fails)."""
    from reme_engine.search.hybrid import SearchFilters

    digest = engine.settings.layers.digest_dir.strip("/") or "digest"
    mode = "hybrid" if getattr(engine, "vectors", None) is not None else "keyword"
    try:
        res = engine.search(f"{topic.title}\n{topic.reason}", limit=limit * 3, mode=mode,
                            filters=SearchFilters(path_prefix=digest + "/"), neighbors=False)
    except Exception:  # noqa: BLE001 - related memory is optional context
        return []
    out: list[Related] = []
    for h in res.hits:
        if h.path not in {r.path for r in out}:
            out.append(Related(h.path, h.name, h.description))
        if len(out) >= limit:
            break
    return out


class _PlanEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    topic_id: Any = None
    id: Any = None
    title: Any = None
    push: Any = True
    skip_reason: Any = None
    scenario_type: Any = None
    opener: Any = None
    next_action: Any = None
    preconditions: Any = None
    delivery: Any = None
    linked_memory: Any = None
    why_now: Any = None


class PlanReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    items: list[_PlanEntry]

    @model_validator(mode="before")
    @classmethod
    def _wrap(cls, data: Any) -> Any:
        if isinstance(data, list):
            return {"items": data}
        if isinstance(data, dict) and "items" not in data:
            for key in ("plan", "candidates", "topics", "agenda"):
                if isinstance(data.get(key), list):
                    return {"items": data[key]}
        return data


#: The step's system prompt (``prompts/plan.en.md``).
SYSTEM = load_prompt(Path(__file__).with_name("prompts"), "plan", "en")


def build_prompt(inp: PlanInput) -> str:
    lines = [f"Today is {inp.date}.", llm_io.language_rule(inp.language), "", "Candidates:"]
    for t in inp.candidates:
        lines += [f"- topic_id: {t.id}", f"  title: {t.title}", f"  reason: {t.reason}", f"  kind: {t.kind}",
                  f"  confidence: {t.confidence:.2f}", f"  first_seen: {t.first_seen}",
                  f"  last_evidence_at: {t.last_evidence_at}", f"  notes: {', '.join(t.paths[:5])}"]
        rel = inp.related.get(t.id) or []
        if rel:
            lines.append("  related notes:")
            lines += [f"    - {r.path} — {r.name}" + (f": {r.description[:160]}" if r.description else "") for r in rel]
    return "\n".join(lines)


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    return str(v).strip().lower() in ("true", "yes", "1", "y", "on", "push")


def run_plan(llm, inp: PlanInput, tally: UsageTally) -> PlanOutput:
    """One LLM call. Raises LLMError (transport) or PlanUnusable (unusable reply)."""
    reply = llm_io.complete(llm, [Message("user", build_prompt(inp))], system=SYSTEM, step=STEP, tally=tally,
                            timeout=inp.params.llm_timeout_seconds)
    try:
        parsed = parse_reply(reply.text, PlanReply)
    except StructuredReplyError as exc:
        raise PlanUnusable(str(exc)) from exc
    by_id = {t.id: t for t in inp.candidates}
    by_title = {normalize_title(t.title): t for t in inp.candidates}
    pushed: list[PlanItem] = []
    skipped: list[tuple[Topic, str]] = []
    warnings: list[str] = []
    seen: set[str] = set()
    for e in parsed.items:
        tid = llm_io.text(e.topic_id or e.id, 40)
        topic = by_id.get(tid) or by_title.get(normalize_title(llm_io.text(e.title, 200)))
        if topic is None:
            warnings.append(f"plan named an unknown topic {tid!r}; ignored")
            continue
        if topic.id in seen:
            continue
        seen.add(topic.id)
        if not _bool(e.push):
            skipped.append((topic, llm_io.text(e.skip_reason, 300) or "not worth raising today"))
            continue
        opener, action = llm_io.text(e.opener, 400), llm_io.text(e.next_action, 400)
        if not opener or not action:
            skipped.append((topic, "no opener or next action planned"))
            warnings.append(f"plan gave {topic.id} no opener/next action; not pushed")
            continue
        allowed = {r.path for r in inp.related.get(topic.id) or []} | set(topic.paths)
        lm_raw = e.linked_memory if isinstance(e.linked_memory, list) else [e.linked_memory]
        linked = validate_paths([x for x in lm_raw if x], allowed)
        if len(linked) < len([x for x in lm_raw if x]):
            warnings.append(f"plan for {topic.id}: linked_memory outside the related notes dropped")
        pushed.append(PlanItem(
            topic=topic,
            scenario_type=llm_io.token(e.scenario_type, "follow_up"),
            opener=opener,
            next_action=action,
            preconditions=llm_io.str_list(e.preconditions),
            delivery=llm_io.token(e.delivery, "in_conversation"),
            linked_memory=linked,
            why_now=llm_io.text(e.why_now, 300),
        ))
    if not seen:
        raise PlanUnusable("the reply planned none of the candidates")
    unplanned = [t.id for t in inp.candidates if t.id not in seen]
    if unplanned:
        warnings.append(f"plan left out {', '.join(unplanned)}; not pushed today")
    return PlanOutput(pushed, skipped, warnings)
