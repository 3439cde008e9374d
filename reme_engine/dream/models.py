"""Typed data passed between the auto_dream steps (ARCHITECTURE §11.2: extract → integrate → finish).

- :class:`DreamInput`: one changed daily file as the LLM sees it (text packed once, possibly truncated).
- :class:`Unit`: a memory unit from extract, ``{name, bucket, summary, paths}`` (ARCHITECTURE §11.3.2), paths already
  validated against the changed-input set.
- :class:`ExtractReply` / :class:`IntegrateReply`: the LLM's structured replies (pydantic, lenient on shapes).
- :class:`Candidate`: an existing digest node offered to integrate.
- :class:`UnitOutcome`: what integrate did with one unit.
- :class:`DreamReport`: the run's result (``to_dict()`` for the JSON job output).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel, field_validator

from ..text import llm_text

BUCKETS = ("personal", "procedure", "wiki")
ACTIONS = ("CREATE", "CORROBORATE", "REFINE", "CORRECT")


@dataclass
class DreamInput:
    """A changed daily Markdown file. ``sha``: content hash of the bytes read (what finish checkpoints);
    ``text``: what the LLM is shown (generated day-index section removed, capped); ``truncated``: it was capped."""

    path: str
    sha: str
    text: str
    truncated: bool = False


@dataclass
class Unit:
    """A long-term memory unit. ``bucket`` ∈ :data:`BUCKETS`; ``paths`` ⊆ the run's changed inputs (non-empty)."""

    name: str
    bucket: str
    summary: str
    paths: list[str]


def _as_list(v: Any) -> Any:
    """Models send one string where a list is asked for, or a comma-separated string; accept both."""
    if v is None:
        return []
    if isinstance(v, str):
        return [s.strip() for s in v.replace("\n", ",").split(",") if s.strip()]
    return v


def _as_text(v: Any) -> str:
    return llm_text(v)


class UnitReply(BaseModel):
    name: str = ""
    bucket: str = ""
    summary: str = ""
    paths: list[str] = []

    _lists = field_validator("paths", mode="before")(_as_list)
    _texts = field_validator("name", "bucket", "summary", mode="before")(_as_text)


class ExtractReply(BaseModel):
    """``{"units": [...]}``; a bare list of units is accepted too (see :func:`extract.parse_extract_reply`)."""

    units: list[UnitReply] = []

    @field_validator("units", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return [] if v is None else v


class IntegrateReply(BaseModel):
    """One integrate decision. ``action`` ∈ :data:`ACTIONS` (case-insensitive); ``target``: a candidate path for
    updates, ``digest/<bucket>/<slug>.md`` for CREATE; ``body``: full Markdown body (CREATE, and REFINE/CORRECT of
    an editable node); ``update``: only the new/corrected material (appended to nodes the user owns);
    ``evidence``: one line for the evidence log; ``related``: digest paths; ``sources``: daily paths."""

    action: str
    target: str = ""
    name: str = ""
    description: str = ""
    tags: list[str] = []
    body: str = ""
    update: str = ""
    evidence: str = ""
    related: list[str] = []
    sources: list[str] = []

    _lists = field_validator("tags", "related", "sources", mode="before")(_as_list)
    _texts = field_validator("target", "name", "description", "body", "update", "evidence", mode="before")(_as_text)

    @field_validator("action", mode="before")
    @classmethod
    def _action(cls, v: Any) -> str:
        a = str(v or "").strip().upper()
        if a not in ACTIONS:
            raise ValueError(f"action must be one of {', '.join(ACTIONS)}, got {v!r}")
        return a

    @field_validator("tags", "related", "sources", mode="after")
    @classmethod
    def _strings(cls, v: list) -> list[str]:
        return [str(x).strip() for x in v if str(x).strip()]


@dataclass
class Candidate:
    """An existing digest node. ``text``/``sha``: the file as read (the sha is the write's ``expected_sha``);
    ``app_owned``: the note's own provenance stamp says the app wrote it and nobody edited it since
    (:mod:`reme_engine.vault.provenance`), so its body may be rewritten; otherwise the user owns it and the app
    writes only inside its marked block. ``bom``: the file
    starts with a UTF-8 BOM (kept on write)."""

    path: str
    name: str
    description: str
    excerpt: str
    text: str
    sha: str
    app_owned: bool
    bom: bool = False


@dataclass
class UnitOutcome:
    """Result of integrating one unit. ``status``: ``ok`` | ``failed`` | ``skipped``; ``action``: what was done
    (a CREATE for an existing name is reported as the REFINE it became); ``merge``: how an update was applied
    (``rewrite`` | ``append`` | ``additive``) or ``""``; ``note``: why the action differs from the reply's."""

    unit: Unit
    status: str
    action: str = ""
    target: str = ""
    merge: str = ""
    error: str = ""
    sources: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["unit"] = asdict(self.unit)
        return d


@dataclass
class DreamReport:
    """Result of one auto_dream run.

    ``status``: ``ok`` | ``partial`` (some units failed) | ``nothing changed`` | ``failed`` (extract failed:
    nothing written, nothing checkpointed). ``changed_files``: changed inputs found; ``units``: units integrated
    (after validation); counts per action; ``failed``: units that failed; ``llm``: the run's
    :class:`~reme_engine.llm.client.UsageTally` as a dict; ``written``: vault paths written; ``errors``:
    one-line reasons; ``checkpointed``: inputs recorded in the dream catalog; ``deferred``: changed inputs left
    for the next run (total input budget); ``outcomes``: per-unit details; ``resumed``: this run continued one a
    crash interrupted (:mod:`reme_engine.dream.resume`; units written before the crash are reported, not redone).
    """

    date: str
    run_id: str = ""
    status: str = "ok"
    message: str = ""
    changed_files: list[str] = field(default_factory=list)
    units: int = 0
    created: int = 0
    corroborated: int = 0
    refined: int = 0
    corrected: int = 0
    failed: int = 0
    llm: dict = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    checkpointed: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    outcomes: list[dict] = field(default_factory=list)
    wall_ms: float = 0.0
    resumed: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


