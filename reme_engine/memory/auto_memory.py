"""auto-memory: a chat session's new messages → one daily card per session and day (DESIGN §6, issue 4 item 3).

Flow of :func:`run_auto_memory` (called by ``Engine.auto_memory`` under the vault's writer lock):

1. Read the session record (:mod:`.session`) and take the messages after the checkpoint of catalog ``memory``
   (key: the session file's vault path; value: JSON ``{"last_id": …, "count": …}``).
2. Cut them into batches: consecutive messages of one day in the app timezone (the card's date), split further
   when a batch would be too large for one request. A batch without user messages is checkpointed with no LLM call.
3. Per batch, one LLM call. The request separates the parts (prompt files ``prompts/auto_memory.<lang>.md``)::

       <existing_card path="daily/…">…</existing_card>      (or "(none)")
       <evidence>[#3 user 09:12] …</evidence>              the user's messages: the only evidence
       <context_not_evidence>[#4 assistant 09:13] …</context_not_evidence>

   The reply is a :class:`CardReply` ``{name, description, slug, timeline: [str], current_state, notes: [str]}``.
4. Code, not the model, merges the reply into the card (:func:`merge_card`): ``## Timeline`` appends new items
   (``- HH:MM text``), ``## Current state`` is rewritten, ``## Notes`` appends items not already in the card;
   any other section, the preamble and unknown frontmatter keys are kept. Before merging, every item that quotes
   assistant-only text verbatim is dropped (:class:`QuoteGuard`), so assistant replies never become card facts.
5. The card ``daily/<date>/<slug>.md`` has frontmatter ``name``, ``description``, ``session_id`` and
   ``source_conversation: "[[session/dialog/<id>.jsonl]]"``. A later batch finds the card again by its
   ``session_id``; a new card whose slug is taken (another session, a user note) gets ``-2``, ``-3``… so two
   sessions never overwrite each other.
6. Each write is journaled (run kind ``auto_memory``) and conflict-checked; the checkpoint advances only after the
   batch's card is written. On an LLM or parse failure nothing of that batch is written or checkpointed and the run
   stops: the next run retries the same messages. Afterwards the day index pages are refreshed and the written
   cards re-indexed.

Without an LLM, :func:`append_user_messages_verbatim` is the quick-capture journal: the user's messages are appended
verbatim to ``daily/<date>/capture.md`` (journaled as run kind ``capture``).
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, field_validator

from ..llm.client import LLMError, Message, UsageTally
from ..llm.structured import StructuredReplyError, parse_reply
from ..markdown.frontmatter import FrontmatterError, parse_frontmatter, render_frontmatter, update_frontmatter
from ..vault.io import SkipFile, WriteConflict, read_text
from ..vault.paths import resolve
from .prompts import load_prompt, prompt_language
from .session import ChatMessage, read_session, session_link, session_rel, valid_session_id

KIND = "auto_memory"
CAPTURE_KIND = "capture"
#: Catalog of consumed messages: session path → ``{"last_id", "count"}`` (JSON).
CATALOG = "memory"
#: Catalog of captured message ids: session path → JSON list of the last :data:`CAPTURE_IDS_KEPT` ids.
CAPTURE_CATALOG = "capture"
CAPTURE_IDS_KEPT = 2000
CAPTURE_STEM = "capture"
#: Card stems the app uses for other things; a session slug never takes them.
RESERVED_STEMS = frozenset({"capture", "interests", "index"})

#: Per-message caps in a request (characters); longer messages are cut with a marker.
MAX_USER_CHARS = 8000
MAX_CONTEXT_CHARS = 2000
#: Existing card text shown to the model (characters).
MAX_CARD_CHARS = 8000
#: A batch is split when its messages exceed this many characters (after the per-message caps).
MAX_BATCH_CHARS = 40000
MAX_SLUG_CHARS = 60
REPLY_MAX_TOKENS = 2048

#: Verbatim-quote guard: a run of this many tokens shared with assistant text …
QUOTE_NGRAM = 6
#: … of which at least this many tokens never occur in the user's messages or the existing card.
QUOTE_NOVEL_TOKENS = 2

SECTION_ALIASES = {
    "current": ("current state", "当前状态"),
    "timeline": ("timeline", "时间线"),
    "notes": ("notes", "要点", "笔记"),
}
SECTION_LABELS = {
    "en": {"current": "Current state", "timeline": "Timeline", "notes": "Notes"},
    "zh": {"current": "当前状态", "timeline": "时间线", "notes": "要点"},
}
_SECTION_ORDER = ("current", "timeline", "notes")


# --------------------------------------------------------------------------------------------------- results


@dataclass
class AutoMemoryReport:
    """Outcome of :func:`run_auto_memory`.

    ``status``: ``ok`` (all new messages consumed), ``nothing_new`` (no unconsumed messages; no LLM call, no run),
    ``failed`` (``error`` says why; the failed batch and later ones stay unconsumed for the next run).
    ``created``/``updated``: card paths; ``consumed``: messages checkpointed by this run; ``pending``: new messages
    left for a later run; ``filtered``: card items dropped because they quoted assistant-only text;
    ``skipped_lines``: unreadable lines in the session record; ``tally``: LLM calls and tokens.
    """

    session_id: str
    status: str = "ok"
    run_id: str | None = None
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    new_messages: int = 0
    consumed: int = 0
    pending: int = 0
    filtered: list[str] = field(default_factory=list)
    skipped_lines: int = 0
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    tally: dict = field(default_factory=dict)
    wall_s: float = 0.0

    @property
    def cards(self) -> list[str]:
        return self.created + [p for p in self.updated if p not in self.created]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["success"] = self.status != "failed"
        return d


@dataclass
class CaptureResult:
    """Outcome of :func:`append_user_messages_verbatim`: ``paths`` written (capture cards), ``created`` among them,
    ``appended`` messages, ``skipped`` messages (not from the user, empty, or captured before), ``run_id`` of the
    journal run (None when nothing was written)."""

    session_id: str
    paths: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    appended: int = 0
    skipped: int = 0
    run_id: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------------------------------- LLM reply


def _as_text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (list, tuple)):
        return "\n".join(_as_text(x) for x in v if x is not None)
    if isinstance(v, dict):
        for key in ("text", "event", "note", "value", "content", "summary"):
            if key in v:
                return _as_text(v[key])
        return " ".join(_as_text(x) for x in v.values())
    return str(v)


class CardReply(BaseModel):
    """The model's structured reply (lenient: missing keys are empty, items may be strings or ``{text: …}``)."""

    model_config = ConfigDict(extra="ignore")

    name: str = ""
    description: str = ""
    slug: str = ""
    timeline: list[str] = []
    current_state: str = ""
    notes: list[str] = []

    @field_validator("name", "description", "slug", "current_state", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        return _as_text(v).strip()

    @field_validator("timeline", "notes", mode="before")
    @classmethod
    def _items(cls, v: Any) -> list[str]:
        if v is None:
            return []
        if isinstance(v, str):
            v = v.splitlines()
        if not isinstance(v, (list, tuple)):
            v = [v]
        out = [" ".join(_as_text(x).split()) for x in v]
        return [x for x in out if x]

    def is_empty(self) -> bool:
        return not (self.timeline or self.notes or self.current_state)


# --------------------------------------------------------------------------------------------------- quote guard

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN_RE = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; each CJK character is one token (so Chinese quotes are caught too)."""
    return _TOKEN_RE.findall(unicodedata.normalize("NFKC", text).lower())


def _ngrams(toks: list[str], n: int) -> Iterable[tuple[str, ...]]:
    return (tuple(toks[i : i + n]) for i in range(len(toks) - n + 1))


class QuoteGuard:
    """Detects card text that quotes assistant-only text verbatim.

    A text "quotes" when it shares a run of :data:`QUOTE_NGRAM` consecutive tokens with a context (assistant/system)
    message, that run does not occur in the allowed texts (the user's messages, the existing card), and at least
    :data:`QUOTE_NOVEL_TOKENS` of its tokens occur nowhere in the allowed texts. The second condition keeps the guard
    from firing on an assistant's paraphrase of what the user said.
    """

    def __init__(self, context_texts: Iterable[str], allowed_texts: Iterable[str]) -> None:
        vocab: set[str] = set()
        allowed: set[tuple[str, ...]] = set()
        for t in allowed_texts:
            toks = tokens(t)
            vocab.update(toks)
            allowed.update(_ngrams(toks, QUOTE_NGRAM))
        self.forbidden: set[tuple[str, ...]] = set()
        for t in context_texts:
            for ng in _ngrams(tokens(t), QUOTE_NGRAM):
                if ng not in allowed and sum(tok not in vocab for tok in ng) >= QUOTE_NOVEL_TOKENS:
                    self.forbidden.add(ng)

    def quotes(self, text: str) -> bool:
        return bool(self.forbidden) and any(ng in self.forbidden for ng in _ngrams(tokens(text), QUOTE_NGRAM))


_SENTENCE_RE = re.compile(r"[^.!?。！？\n]+[.!?。！？]*\s*|\n")


def _guard_reply(reply: CardReply, guard: QuoteGuard, dropped: list[str]) -> CardReply:
    """A copy of ``reply`` without items (timeline/notes) and sentences (current state, description) that quote."""

    def keep(item: str) -> bool:
        if guard.quotes(item):
            dropped.append(item[:200])
            return False
        return True

    current = "".join(s for s in _SENTENCE_RE.findall(reply.current_state) if s == "\n" or keep(s))
    current = re.sub(r"\n{3,}", "\n\n", current).strip()
    return CardReply(
        name=reply.name if keep(reply.name) else "",
        description=reply.description if keep(reply.description) else "",
        slug=reply.slug,
        timeline=[x for x in reply.timeline if keep(x)],
        current_state=current,
        notes=[x for x in reply.notes if keep(x)],
    )


# --------------------------------------------------------------------------------------------------- card merge

_HEADING2_RE = re.compile(r"^##[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE_RE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_TIME_PREFIX_RE = re.compile(r"^(\*\*)?\d{1,2}:\d{2}(\*\*)?(\s*[—–-]\s*|\s+)")


def _section_kind(title: str) -> str | None:
    t = " ".join(title.strip().casefold().split())
    for kind, aliases in SECTION_ALIASES.items():
        if t in aliases:
            return kind
    return None


def _split_sections(body: str) -> tuple[list[str], list[dict]]:
    """``(preamble lines, [{heading, kind, lines}])`` split at level-2 headings outside fenced code."""
    pre: list[str] = []
    sections: list[dict] = []
    fence: str | None = None
    for line in body.split("\n"):
        m = _FENCE_RE.match(line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark[0] * len(mark)
            elif mark[0] == fence[0] and len(mark) >= len(fence):
                fence = None
        elif fence is None:
            h = _HEADING2_RE.match(line)
            if h:
                sections.append({"heading": line, "kind": _section_kind(h.group(1)), "lines": []})
                continue
        (sections[-1]["lines"] if sections else pre).append(line)
    return pre, sections


def normalize_item(line: str) -> str:
    """A line reduced for duplicate detection: no bullet, checkbox or leading time, case-folded, single-spaced."""
    s = line.strip()
    s = re.sub(r"^([-*+]|\d+[.)])\s+", "", s)
    s = re.sub(r"^\[[ xX]\]\s+", "", s)
    s = _TIME_PREFIX_RE.sub("", s)
    s = " ".join(s.casefold().split())
    return s.rstrip(" .。!！;；,，")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _safe_block(text: str) -> str:
    """Model text placed in a section: headings demoted to bold so they cannot split the card's sections."""
    out = []
    for line in text.split("\n"):
        m = re.match(r"^\s{0,3}#{1,6}\s+(.*)$", line)
        out.append(f"**{m.group(1).strip()}**" if m else line.rstrip())
    return "\n".join(out).strip()


def _append_items(lines: list[str], new: list[str]) -> list[str]:
    """Section lines with ``new`` bullet lines inserted after the last non-blank line."""
    end = len(lines)
    while end > 0 and not lines[end - 1].strip():
        end -= 1
    head = lines[:end]
    if not head:
        head = [""]
    return head + new + [""]


def merge_card(text: str, reply: CardReply, *, time_label: str, language: str = "en",
               frontmatter: dict | None = None) -> str:
    """Merge ``reply`` into card ``text`` (BOM-less) and return the new text.

    Rules: ``## Timeline`` gets the reply's timeline items appended as ``- <time_label> <item>`` (items already
    in the section are skipped); ``## Current state`` is replaced by ``reply.current_state`` when that is non-empty;
    ``## Notes`` gets reply notes that do not already occur anywhere in the card. Missing sections are appended in
    the order current state, timeline, notes (headings in ``language``). Other sections and the preamble are kept
    line for line. ``frontmatter`` keys are merged into the block with :func:`update_frontmatter` (other keys, their
    order and comments kept). Raises FrontmatterError when the card's frontmatter block is invalid YAML.
    """
    fm = parse_frontmatter(text)
    head, body = text[: fm.body_offset], text[fm.body_offset :]
    if frontmatter:
        head = update_frontmatter(head, frontmatter)
        if not head.endswith("\n"):
            head += "\n"
    pre, sections = _split_sections(body)
    labels = SECTION_LABELS[prompt_language(language)]
    existing_norm = {normalize_item(x) for x in body.split("\n") if x.strip()}
    by_kind: dict[str, dict] = {}
    for s in sections:
        if s["kind"] and s["kind"] not in by_kind:
            by_kind[s["kind"]] = s

    def section(kind: str) -> dict:
        if kind not in by_kind:
            s = {"heading": f"## {labels[kind]}", "kind": kind, "lines": [""], "new": True}
            by_kind[kind] = s
            sections.append(s)
        return by_kind[kind]

    if reply.current_state:
        section("current")["lines"] = ["", *_safe_block(reply.current_state).split("\n"), ""]
    timeline_new: list[str] = []
    seen = {normalize_item(x) for x in by_kind["timeline"]["lines"]} if "timeline" in by_kind else set()
    for item in reply.timeline:
        item = _one_line(item)
        key = normalize_item(item)
        if not key or key in seen:
            continue
        seen.add(key)
        timeline_new.append(f"- {item}" if _TIME_PREFIX_RE.match(item) else f"- {time_label} {item}")
    if timeline_new:
        s = section("timeline")
        s["lines"] = _append_items(s["lines"], timeline_new)
    notes_new: list[str] = []
    for item in reply.notes:
        item = _one_line(item)
        key = normalize_item(item)
        if not key or key in existing_norm:
            continue
        existing_norm.add(key)
        notes_new.append(f"- {item}")
    if notes_new:
        s = section("notes")
        s["lines"] = _append_items(s["lines"], notes_new)
    lines = list(pre)
    for s in sections:
        if s.get("new") and lines and lines[-1].strip():
            lines.append("")  # a blank line before a heading we add; existing layout stays as the user wrote it
        lines.append(s["heading"])
        lines.extend(s["lines"])
    out = "\n".join(lines).rstrip("\n") + "\n"
    return head + out
