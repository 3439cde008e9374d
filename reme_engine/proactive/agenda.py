"""Step 4, agenda (ARCHITECTURE §11.1.1 ``proactive_agenda_step``): order the planned items into today's agenda.

With more than one planned item, one LLM call orders them and gives each an ``order_reason`` (it may also polish
an ``opener``/``next_action`` so the items do not repeat each other). With exactly one, no call is made: the item's
``why_now`` (or a stock phrase) becomes its ``order_reason``. Reply (JSON or YAML, lenient)::

    {"agenda": [{"topic_id", "order_reason", "opener", "next_action"}]}

Unknown ids are ignored, planned items the reply omits are appended in plan order. An unusable reply keeps the
plan order (highest confidence first) and says so in ``warnings`` — no retry (the four-call budget).
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
from .model import AgendaItem, ProactiveParams
from .plan import PlanItem

STEP = "proactive_agenda"

_STOCK = {
    "en": {"only": "The only topic worth raising today.",
           "kept": "Kept in planning order (highest confidence first).",
           "fallback": "Ordered by confidence (the agenda reply was unusable)."},
    "zh": {"only": "今天唯一值得主动提起的话题。",
           "kept": "按规划顺序保留（置信度高者在前）。",
           "fallback": "按置信度排序（议程回复不可用）。"},
}


def stock(language: str, key: str) -> str:
    return _STOCK["zh" if str(language).lower().startswith("zh") else "en"][key]


@dataclass
class AgendaInput:
    """Planned items (at least one), run ``date``, ``language`` and ``params``."""

    date: str
    items: list[PlanItem]
    language: str
    params: ProactiveParams


@dataclass
class AgendaOutput:
    """The ordered agenda and any warnings; ``called`` tells whether an LLM call was made."""

    agenda: list[AgendaItem]
    called: bool
    warnings: list[str] = field(default_factory=list)


class _Entry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    topic_id: Any = None
    id: Any = None
    order_reason: Any = None
    opener: Any = None
    next_action: Any = None


class AgendaReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    agenda: list[_Entry]

    @model_validator(mode="before")
    @classmethod
    def _wrap(cls, data: Any) -> Any:
        if isinstance(data, list):
            return {"agenda": data}
        if isinstance(data, dict) and "agenda" not in data:
            for key in ("items", "order"):
                if isinstance(data.get(key), list):
                    return {"agenda": data[key]}
        return data


#: The step's system prompt (``prompts/agenda.en.md``).
SYSTEM = load_prompt(Path(__file__).with_name("prompts"), "agenda", "en")


def _item(p: PlanItem, order_reason: str, opener: str = "", action: str = "") -> AgendaItem:
    return AgendaItem(
        topic_id=p.topic.id, title=p.topic.title, scenario_type=p.scenario_type, opener=opener or p.opener,
        next_action=action or p.next_action, preconditions=list(p.preconditions), delivery=p.delivery,
        linked_memory=list(p.linked_memory), order_reason=order_reason,
    )


def build_prompt(inp: AgendaInput) -> str:
    lines = [f"Today is {inp.date}.", llm_io.language_rule(inp.language), "", "Planned items:"]
    for p in inp.items:
        t = p.topic
        lines += [f"- topic_id: {t.id}", f"  title: {t.title}", f"  reason: {t.reason}",
                  f"  confidence: {t.confidence:.2f}", f"  last_evidence_at: {t.last_evidence_at}",
                  f"  scenario_type: {p.scenario_type}", f"  opener: {p.opener}", f"  next_action: {p.next_action}"]
        if p.preconditions:
            lines.append(f"  preconditions: {'; '.join(p.preconditions)}")
        if p.why_now:
            lines.append(f"  why_now: {p.why_now}")
    return "\n".join(lines)


def single(item: PlanItem, language: str) -> AgendaOutput:
    """The agenda of exactly one planned item (no LLM call)."""
    return AgendaOutput([_item(item, item.why_now or stock(language, "only"))], called=False)


def run_agenda(llm, inp: AgendaInput, tally: UsageTally) -> AgendaOutput:
    """Order ``inp.items`` (one call when there are two or more). Raises LLMError (transport) only."""
    if len(inp.items) == 1:
        return single(inp.items[0], inp.language)
    by_conf = sorted(inp.items, key=lambda p: -p.topic.confidence)
    reply = llm_io.complete(llm, [Message("user", build_prompt(inp))], system=SYSTEM, step=STEP, tally=tally,
                            timeout=inp.params.llm_timeout_seconds)
    try:
        parsed = parse_reply(reply.text, AgendaReply)
    except StructuredReplyError as exc:
        fb = stock(inp.language, "fallback")
        return AgendaOutput([_item(p, fb) for p in by_conf], called=True,
                            warnings=[f"agenda reply unusable ({exc}); plan order kept"])
    by_id = {p.topic.id: p for p in inp.items}
    out: list[AgendaItem] = []
    warnings: list[str] = []
    for e in parsed.agenda:
        tid = llm_io.text(e.topic_id or e.id, 40)
        p = by_id.pop(tid, None)
        if p is None:
            if tid and tid not in {a.topic_id for a in out}:
                warnings.append(f"agenda named an unknown topic {tid!r}; ignored")
            continue
        out.append(_item(p, llm_io.text(e.order_reason, 300) or p.why_now or stock(inp.language, "kept"),
                         llm_io.text(e.opener, 400), llm_io.text(e.next_action, 400)))
    if not out:
        fb = stock(inp.language, "fallback")
        return AgendaOutput([_item(p, fb) for p in by_conf], called=True,
                            warnings=warnings + ["agenda reply ordered none of the items; plan order kept"])
    for p in by_conf:
        if p.topic.id in by_id:
            out.append(_item(p, p.why_now or stock(inp.language, "kept")))
    return AgendaOutput(out, called=True, warnings=warnings)
