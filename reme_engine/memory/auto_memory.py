"""auto-memory: a chat session's new messages → one daily card per session and day (ARCHITECTURE §6).

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
4. Code, not the model, merges the reply into the card. Who owns the card is read from the card itself
   (:mod:`reme_engine.vault.provenance`): every card the app creates carries a ``reme_provenance: app <hash>``
   frontmatter stamp, re-stamped on each app write.

   - **The app's card** (stamp current: nobody edited it since): :func:`merge_card` — ``## Timeline`` appends new
     items (``- HH:MM text``), ``## Current state`` is rewritten, ``## Notes`` appends items not already in the
     card, ``description`` is updated; any other section, the preamble and unknown frontmatter keys are kept.
   - **The user's card** (they wrote it, or edited any byte after the app wrote it — theirs forever): none of its
     bytes change, frontmatter included. :func:`merge_into_block` proposes the update in reme's marked block at
     the end (``<!-- reme:begin … -->`` … ``<!-- reme:end -->``, rewritten in place while the user leaves it
     alone): a new description, the newest current state, the timeline items and notes no line of the card says
     yet, and the session record as source. The write is refused unless every user line is kept
     (:func:`~reme_engine.vault.provenance.keeps_user_lines`).

   Before merging, every item that quotes assistant-only text verbatim is dropped (:class:`QuoteGuard`), so
   assistant replies never become card facts.
5. The card ``daily/<date>/<slug>.md`` has frontmatter ``name``, ``description``, ``session_id`` and
   ``source_conversation: "[[session/dialog/<id>.jsonl]]"``. A later batch finds the card again by its
   ``session_id``; a new card whose slug is taken (another session, a user note) gets ``-2``, ``-3``… so two
   sessions never overwrite each other.
6. Each write is journaled (run kind ``auto_memory``) and conflict-checked; the checkpoint advances only after the
   batch's card is written. On an LLM or parse failure nothing of that batch is written or checkpointed and the run
   stops: the next run retries the same messages. Afterwards the day index pages are refreshed and the written
   cards re-indexed.

Without an LLM, :func:`append_user_messages_verbatim` is the quick-capture journal: the user's messages are appended
verbatim to ``daily/<date>/capture.md`` (journaled as run kind ``capture``). The app's capture card is stamped and
appended to; once the user edits it (or if they made it), the captures continue in reme's block at its end, on the
same page and in time order, rather than in a second card: a day's captures stay in one place, and an edit never
scatters them over ``capture-2.md``, ``capture-3.md``… A block the user edits becomes theirs; the next capture opens
a new block after it.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, field_validator

from ..llm.client import LLMError, Message, UsageTally
from ..llm.structured import StructuredReplyError, parse_reply
from ..markdown.frontmatter import FrontmatterError, parse_frontmatter, render_frontmatter, update_frontmatter
from ..vault import provenance as P
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


def text_items(v: Any) -> list[str]:
    """An LLM's list field as clean one-line strings: a string is split into lines, a scalar wrapped, bullets
    stripped, whitespace collapsed, empties dropped."""
    if v is None:
        return []
    if isinstance(v, str):
        v = v.splitlines()
    if not isinstance(v, (list, tuple)):
        v = [v]
    out = [_BULLET_RE.sub("", " ".join(_as_text(x).split())) for x in v]
    return [x for x in out if x]


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


_BULLET_RE = re.compile(r"^(?:[-*+•]|\d+[.)])\s+")


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
        return text_items(v)

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


_SENTENCE_RE = re.compile(r"[^.!?。！？\n]*(?:[.!?。！？]+[^\S\n]*|(?=\n)|$)|\n")


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
    order and comments kept). CRLF cards stay CRLF. Raises FrontmatterError when the frontmatter block is invalid.
    Only for a card the app owns (it rewrites the current state and the description); the caller re-stamps the
    result. A card the user owns goes through :func:`merge_into_block`.
    """
    crlf = "\r\n" in text
    if crlf:  # work on LF lines (headings must match) and give the card its CRLF style back at the end
        text = text.replace("\r\n", "\n")
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
    out = head + "\n".join(lines).rstrip("\n") + "\n"
    return out.replace("\n", "\r\n") if crlf else out


# --------------------------------------------------------------------------------------------------- user's cards

#: Title and hint of the app's block in a card the user owns (the title is auto_dream's, so one look for both).
BLOCK_TEXT = {
    "en": ("Updates proposed by reme",
           "*Proposed by reme, not part of your card yet. To accept, edit it into your text; to dismiss, delete "
           "this section.*"),
    "zh": ("reme 建议的更新", "*reme 提出，尚未并入你的卡片。接受：把它改写进你的正文；不要：删除这一节。*"),
}
SOURCES_LABEL = {"en": "Sources", "zh": "来源"}
DESCRIPTION_LABEL = {"en": "Description", "zh": "描述"}
_H3_RE = re.compile(r"^###[ \t]+(.+?)[ \t]*#*[ \t]*$")
_DESC_LINE_RE = re.compile(r"^\*\*(?:Description|描述):\*\*[ \t]*(.*)$")


def block_parts(inner: str | None) -> dict:
    """The app block of a card (:func:`render_block_parts`'s output, as :func:`~reme_engine.vault.provenance.
    live_block` returns it) read back: ``{description: str, current: [lines], timeline: [lines], notes: [lines],
    sources: [lines]}``, section lines without surrounding blank lines. None or "" gives empty parts."""
    parts: dict = {"description": "", "current": [], "timeline": [], "notes": [], "sources": []}
    kind = None
    for line in (inner or "").split("\n"):
        h = _H3_RE.match(line)
        if h:
            t = " ".join(h.group(1).casefold().split())
            kind = _section_kind(t) or ("sources" if t in ("sources", "来源") else "other")
            continue
        if kind is None:
            d = _DESC_LINE_RE.match(line)
            if d:
                parts["description"] = d.group(1).strip()
        elif kind in parts:
            parts[kind].append(line)
    for k in ("current", "timeline", "notes", "sources"):
        ls = parts[k]
        while ls and not ls[0].strip():
            ls.pop(0)
        while ls and not ls[-1].strip():
            ls.pop()
    return parts


def render_block_parts(parts: dict, language: str = "en") -> str:
    """The inner text of the app's block (LF lines): title, hint, the proposed description, then ``### Current
    state`` / ``### Timeline`` / ``### Notes`` / ``### Sources`` for the non-empty parts (headings in
    ``language``)."""
    lang = prompt_language(language)
    title, hint = BLOCK_TEXT.get(lang, BLOCK_TEXT["en"])
    labels = SECTION_LABELS[lang]
    out = [f"## {title}", "", hint, ""]
    if parts.get("description"):
        out += [f"**{DESCRIPTION_LABEL[lang]}:** {parts['description']}", ""]
    for kind, label in (("current", labels["current"]), ("timeline", labels["timeline"]),
                        ("notes", labels["notes"]), ("sources", SOURCES_LABEL[lang])):
        if parts.get(kind):
            out += [f"### {label}", "", *parts[kind], ""]
    return "\n".join(out).rstrip("\n")


def merge_into_block(text: str, reply: CardReply, *, time_label: str, language: str = "en",
                     sources: Iterable[str] = ()) -> str:
    """Merge ``reply`` into the app's block of a card the **user** owns and return the new text (``text``
    unchanged when there is nothing new to propose).

    Only the block changes (:func:`~reme_engine.vault.provenance.set_block`: the last intact reme block is
    rewritten in place, else a new one is appended at the end): a description different from the card's own is
    proposed; ``reply.current_state`` replaces the block's current state (unless the card already says exactly
    that); timeline items (``- <time_label> <item>``) and notes are appended unless a line of the card (the
    user's or the block's) already says the same (:func:`normalize_item`); ``sources`` (vault paths, e.g. the
    session record) are listed as links, old ones kept. Every other byte of ``text`` is kept, CRLF and BOM
    included (an invalid frontmatter block too: it is never touched). Never raises.
    """
    lf = text.replace("\r\n", "\n")
    parts = block_parts(P.live_block(text))
    before = render_block_parts(parts, language)
    seen = {normalize_item(x) for x in lf.split("\n") if x.strip()}
    desc = _one_line(reply.description)
    if desc and desc != _one_line(str(parse_frontmatter(lf).meta.get("description") or "")):
        parts["description"] = desc
    current = _safe_block(reply.current_state) if reply.current_state else ""
    # A new current state replaces the block's, unless the card (the user's text or the block) says it already.
    if current and not all(normalize_item(ln) in seen for ln in current.split("\n") if ln.strip()):
        parts["current"] = current.split("\n")
    for kind, items in (("timeline", reply.timeline), ("notes", reply.notes)):
        for item in items:
            item = _one_line(item)
            key = normalize_item(item)
            if not key or key in seen:
                continue
            seen.add(key)
            if kind == "timeline" and not _TIME_PREFIX_RE.match(item):
                item = f"{time_label} {item}"
            parts[kind].append(f"- {item}")
    for rel in sources:
        link = f"- [[{rel}]]"
        if link not in parts["sources"]:
            parts["sources"].append(link)
    inner = render_block_parts(parts, language)
    has_news = any(parts[k] for k in ("description", "current", "timeline", "notes"))
    if inner == before or not has_news:
        return text
    return P.set_block(text, inner)


def _checked_block_write(old: str, new: str, rel: str) -> str:
    """``new`` if writing it over ``old`` keeps every user line and leaves the note the user's; else raises
    WriteConflict (nothing is written: the pipeline reports the card and retries next run)."""
    if not P.keeps_user_lines(old, new) or P.note_ownership(new).app_owned:
        raise WriteConflict(f"{rel}: the update would change your lines; not written")
    return new


# --------------------------------------------------------------------------------------------------- cards on disk


def _day_folder(engine, date: str) -> str:
    return f"{engine.settings.layers.daily_dir.strip('/')}/{date}"


def _read_card(engine, rel: str) -> tuple[str, str, str] | None:
    """``(text without BOM, sha of the raw bytes, encoding)`` or None when absent. Raises SkipFile (binary…)."""
    vp = resolve(engine.vault, rel)
    try:
        tf = read_text(vp.abs, engine.settings.max_file_bytes)
    except FileNotFoundError:
        return None
    return tf.text, tf.sha, tf.encoding


def find_session_card(engine, date: str, session_id: str) -> str | None:
    """The card of ``date`` whose frontmatter ``session_id`` is ``session_id`` (first by name), else None.

    Only the day folder's top level is searched; unreadable files are ignored.
    """
    folder = resolve(engine.vault, _day_folder(engine, date))
    if not folder.abs.is_dir():
        return None
    for p in sorted(folder.abs.iterdir()):
        name = unicodedata.normalize("NFC", p.name)
        if name.startswith(".") or not name.lower().endswith(".md") or not p.is_file():
            continue
        try:
            tf = read_text(p, engine.settings.max_file_bytes)
        except (OSError, SkipFile):
            continue
        value = parse_frontmatter(tf.text).meta.get("session_id")
        if value is not None and str(value) == session_id:
            return f"{folder.rel}/{name}"
    return None


def slugify(text: str, fallback: str) -> str:
    """A file-name-safe slug: letters/digits (any script) and ``-``, lower-case, at most 60 chars; else ``fallback``."""
    s = unicodedata.normalize("NFKC", text or "").strip().lower()
    s = re.sub(r"[^\w-]+", "-", s)
    s = re.sub(r"-{2,}", "-", s).strip("-_")
    s = s[:MAX_SLUG_CHARS].strip("-_")
    return s or fallback


def free_card_path(engine, date: str, slug: str) -> str:
    """``daily/<date>/<slug>.md``, or ``<slug>-2.md``, ``-3``… when the name is taken (case-insensitively) or
    reserved (:data:`RESERVED_STEMS`)."""
    folder = resolve(engine.vault, _day_folder(engine, date))
    taken = set()
    if folder.abs.is_dir():
        taken = {unicodedata.normalize("NFC", n).casefold() for n in (p.name for p in folder.abs.iterdir())}
    i = 1
    while True:
        stem = slug if i == 1 else f"{slug}-{i}"
        if stem.casefold() not in RESERVED_STEMS and f"{stem}.md".casefold() not in taken:
            return f"{folder.rel}/{stem}.md"
        i += 1


def _new_card_head(meta: dict, link_key: str, link: str) -> str:
    """Frontmatter of a new card; the provenance link is written double-quoted, as Obsidian writes links."""
    block = render_frontmatter(meta)
    return block[: -len("---\n")] + f"{link_key}: {json.dumps(link, ensure_ascii=False)}\n---\n"


# --------------------------------------------------------------------------------------------------- batches


@dataclass
class _Batch:
    date: str
    items: list[tuple[int, ChatMessage]] = field(default_factory=list)  # (1-based position in session, message)
    chars: int = 0

    @property
    def user(self) -> list[tuple[int, ChatMessage]]:
        return [(p, m) for p, m in self.items if m.role == "user"]

    @property
    def context(self) -> list[tuple[int, ChatMessage]]:
        return [(p, m) for p, m in self.items if m.role != "user"]


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\n[… truncated …]"


def _batches(new: list[tuple[int, ChatMessage]], tz) -> list[_Batch]:
    """Consecutive messages of one local day, split when a batch would exceed :data:`MAX_BATCH_CHARS`."""
    out: list[_Batch] = []
    for pos, m in new:
        date = m.time(tz).date().isoformat()
        size = min(len(m.content), MAX_USER_CHARS if m.role == "user" else MAX_CONTEXT_CHARS)
        if not out or out[-1].date != date or (out[-1].items and out[-1].chars + size > MAX_BATCH_CHARS):
            out.append(_Batch(date))
        out[-1].items.append((pos, m))
        out[-1].chars += size
    return out


_TAG_RE = re.compile(r"<(/?)(evidence|context_not_evidence|existing_card)", re.I)


def _defuse(text: str) -> str:
    """Message text cannot open or close the request's tags (it is data, not structure)."""
    return _TAG_RE.sub(lambda m: "‹" + m.group(1) + m.group(2), text)


def build_request(session_id: str, date: str, card_rel: str | None, card_text: str | None, batch: _Batch,
                  tz) -> str:
    """The user-turn text of one auto-memory call (shape in the module docstring)."""
    ev = [f"[#{p} user {m.time(tz):%H:%M}]\n{_defuse(_cap(m.content, MAX_USER_CHARS))}" for p, m in batch.user]
    ctx = [f"[#{p} {m.role} {m.time(tz):%H:%M}]\n{_defuse(_cap(m.content, MAX_CONTEXT_CHARS))}"
           for p, m in batch.context]
    if card_text is None:
        card = "<existing_card>\n(none)\n</existing_card>"
    else:
        card = f'<existing_card path="{card_rel}">\n{_defuse(_cap(card_text, MAX_CARD_CHARS))}\n</existing_card>'
    return "\n\n".join([
        f"Session: {session_id}\nDate: {date}",
        card,
        "<evidence>\n" + "\n\n".join(ev) + "\n</evidence>",
        "<context_not_evidence>\n" + ("\n\n".join(ctx) or "(none)") + "\n</context_not_evidence>",
        "Reply with the JSON object described in the instructions.",
    ])


# --------------------------------------------------------------------------------------------------- the run


def _consumed_upto(engine, srel: str, msgs: list[ChatMessage]) -> int:
    """How many leading messages of ``msgs`` the catalog says were consumed."""
    raw = engine.store.catalog_get(CATALOG).get(srel)
    if not raw:
        return 0
    try:
        ptr = json.loads(raw)
    except ValueError:
        return 0
    last = ptr.get("last_id") if isinstance(ptr, dict) else None
    for i, m in enumerate(msgs):
        if m.id == last:
            return i + 1
    try:  # the message vanished from the record (hand edit): fall back to the count
        return min(int(ptr.get("count") or 0), len(msgs))
    except (TypeError, ValueError, AttributeError):
        return 0


def _checkpoint(engine, srel: str, pos: int, msg: ChatMessage) -> None:
    engine.store.catalog_set(CATALOG, {srel: json.dumps({"last_id": msg.id, "count": pos})})


def run_auto_memory(engine, session_id: str, *, llm) -> AutoMemoryReport:
    """Create or merge the daily card(s) of ``session_id`` from its unconsumed messages (see module doc).

    ``llm``: an :class:`~reme_engine.llm.client.LLMClient`. Returns an :class:`AutoMemoryReport`; LLM, parse and
    write-conflict failures are reported (``status="failed"``), not raised. Raises EngineError for an invalid
    session id or a session with no record.
    """
    from ..engine import EngineError

    t0 = time.perf_counter()
    try:
        sid = valid_session_id(session_id)
    except ValueError as exc:
        raise EngineError(str(exc)) from exc
    settings = engine.settings
    layers, tz, lang = settings.layers, settings.tzinfo(), settings.language
    srel = session_rel(layers, sid)
    report = AutoMemoryReport(sid)
    msgs = read_session(engine.vault, layers, sid)
    report.skipped_lines = msgs.skipped
    if not msgs and not resolve(engine.vault, srel).abs.exists():
        raise EngineError(f"no session record {srel}")
    new = list(enumerate(msgs, 1))[_consumed_upto(engine, srel, msgs):]
    report.new_messages = len(new)
    if not new:
        report.status = "nothing_new"
        report.wall_s = round(time.perf_counter() - t0, 3)
        return report

    tally = UsageTally.for_settings(engine.settings)
    system = load_prompt("auto_memory", lang)
    user_texts = [m.content for m in msgs if m.role == "user"]
    batches = _batches(new, tz)
    run = None
    dates: set[str] = set()
    for i, batch in enumerate(batches):
        if batch.user:
            if run is None:
                run = engine.journal.start_run(engine.vault, KIND, {"session_id": sid, "session": srel})
                report.run_id = run.run_id
            try:
                path, created = _process_batch(engine, run, sid, srel, batch, system, llm, tally, user_texts,
                                               report.filtered)
            except (LLMError, StructuredReplyError, WriteConflict, FrontmatterError, SkipFile, OSError) as exc:
                report.status = "failed"
                report.error = f"{batch.date}: {exc}"
                report.pending = sum(len(b.items) for b in batches[i:])
                break
            except BaseException as exc:  # a bug or an interrupt: close the journal run before propagating
                run.finish("failed", {"error": f"{type(exc).__name__}: {exc}"}, tally.to_dict())
                raise
            if path:
                dates.add(batch.date)
                (report.created if created else report.updated).append(path)
        pos, last = batch.items[-1]
        _checkpoint(engine, srel, pos, last)
        report.consumed += len(batch.items)

    for date in sorted(dates):
        try:
            engine.daily_reindex(date)
        except EngineError as exc:
            report.warnings.append(f"day index {date} not refreshed: {exc}")
    if run is not None and run.written:
        engine.index_paths(sorted(set(run.written)))
    report.updated = [p for p in dict.fromkeys(report.updated) if p not in report.created]
    report.created = list(dict.fromkeys(report.created))
    report.tally = tally.to_dict()
    report.wall_s = round(time.perf_counter() - t0, 3)
    if run is not None:
        run.finish(report.status, {"created": report.created, "updated": report.updated,
                                   "consumed": report.consumed, "pending": report.pending,
                                   "filtered": len(report.filtered), "error": report.error}, report.tally)
    return report


def _process_batch(engine, run, sid: str, srel: str, batch: _Batch, system: str, llm, tally: UsageTally,
                   user_texts: list[str], dropped: list[str]) -> tuple[str | None, bool]:
    """One LLM call and the card write for ``batch`` (merged in place into the app's card, proposed in reme's
    block of the user's card, or a new stamped card). Returns ``(card path or None, created)``."""
    settings = engine.settings
    tz, lang = settings.tzinfo(), settings.language
    card_rel = find_session_card(engine, batch.date, sid)
    card = _read_card(engine, card_rel) if card_rel else None
    content = build_request(sid, batch.date, card_rel, card[0] if card else None, batch, tz)
    reply = llm.complete([Message("user", content)], system=system, max_tokens=REPLY_MAX_TOKENS, step=KIND,
                         tally=tally)
    data = parse_reply(reply.text, CardReply)

    link = session_link(settings.layers, sid)
    time_label = f"{batch.user[0][1].time(tz):%H:%M}"
    with engine.write_lock:
        # Read again: the user (or another app window) may have edited or created the card while the model
        # was thinking; the merge is done in code, so it applies to the newest text.
        card_rel = find_session_card(engine, batch.date, sid)
        card = _read_card(engine, card_rel) if card_rel else None
        allowed = user_texts + ([card[0]] if card else [])
        data = _guard_reply(data, QuoteGuard([m.content for _, m in batch.context], allowed), dropped)
        if card is not None and not P.note_ownership(card[0]).app_owned:
            # The user's card (they wrote it, or edited it after the app did): its lines and frontmatter are
            # never changed; what the batch adds is proposed in reme's block at its end.
            assert card_rel is not None
            text, sha, enc = card
            new_text = merge_into_block(text, data, time_label=time_label, language=lang, sources=[srel])
            if new_text == text:
                return None, False
            new_text = _checked_block_write(text, new_text, card_rel)
            if enc == "utf-8-sig":
                new_text = "\ufeff" + new_text
            run.write(card_rel, new_text, step=KIND, sources=[srel], expected_sha=sha)
            return card_rel, False
        if card is not None:
            assert card_rel is not None
            text, sha, enc = card
            meta = parse_frontmatter(text).meta
            wanted = {"session_id": sid, "source_conversation": link}
            if data.description:
                wanted["description"] = _one_line(data.description)
            if not meta.get("name"):
                wanted["name"] = _one_line(data.name) or _default_name(batch.date, lang)
            updates = {k: v for k, v in wanted.items() if str(meta.get(k)) != v}
            new_text = merge_card(text, data, time_label=time_label, language=lang, frontmatter=updates)
            if new_text == text:
                return None, False
            new_text = P.stamp(new_text)  # still the app's card: re-stamped with the hash of this write
            if enc == "utf-8-sig":
                new_text = "\ufeff" + new_text
            run.write(card_rel, new_text, step=KIND, sources=[srel], expected_sha=sha)
            return card_rel, False
        if data.is_empty():
            return None, False  # nothing worth a card (small talk); the messages still count as consumed
        name = _one_line(data.name) or _default_name(batch.date, lang)
        head = _new_card_head({"name": name, "description": _one_line(data.description), "session_id": sid},
                              "source_conversation", link)
        new_text = P.stamp(merge_card(f"{head}\n# {name}\n", data, time_label=time_label, language=lang))
        slug = slugify(data.slug or data.name, f"session_{sid}"[:MAX_SLUG_CHARS])
        for _ in range(5):
            rel = free_card_path(engine, batch.date, slug)
            try:
                run.write(rel, new_text, step=KIND, sources=[srel], expected_sha=None)
            except WriteConflict:
                continue  # the name was taken a moment ago: the next free one
            return rel, True
        raise WriteConflict(f"could not find a free card name for {slug!r}")




def _default_name(date: str, language: str) -> str:
    return f"对话 {date}" if prompt_language(language) == "zh" else f"Chat {date}"


# --------------------------------------------------------------------------------------------------- capture


def _as_message(m: ChatMessage | dict) -> ChatMessage:
    if isinstance(m, ChatMessage):
        m.validate()
        return m
    return ChatMessage.from_dict(m)


def _capture_head(date: str) -> str:
    meta = {"name": f"Capture {date}", "description": f"Chat messages captured verbatim on {date}"}
    return render_frontmatter(meta) + f"\n# Capture {date}\n"


def _capture_block(m: ChatMessage, tz, srel: str) -> str:
    return f"\n**{m.time(tz):%H:%M}** · [[{srel}|chat]]\n\n{m.content.rstrip()}\n"


def _append_block(engine, run, rel: str, head: str, block: str, srel: str) -> bool:
    """Append ``block`` (text starting with a newline) to card ``rel`` (created with ``head`` when absent, stamped
    as the app's); True when created.

    A card the app owns gets ``block`` appended and is re-stamped; a card the user owns keeps every byte and
    ``block`` goes at the end of reme's block (a new one when there is no intact block). Conflict-checked
    against the text just read and retried on a concurrent edit, so a user's edit made meanwhile is kept (and,
    having made the card theirs, is appended to in the block) rather than overwritten. Raises EngineError.
    """
    from ..engine import EngineError

    for _ in range(5):
        try:
            cur = _read_card(engine, rel)
        except SkipFile as exc:
            raise EngineError(f"cannot append to {rel}: {exc.reason}") from exc
        if cur is None:
            new, expected = P.stamp(head + block), None
        else:
            text, sha, enc = cur
            if P.note_ownership(text).app_owned:
                new = P.stamp(text + ("" if not text or text.endswith("\n") else "\n") + block)
            else:
                # The user edited (or wrote) this card: their lines stay as they are; the captures continue in
                # reme's block at the end, on the same page and in time order.
                inner = P.live_block(text)
                entry = block.strip("\r\n")
                try:
                    new = _checked_block_write(text, P.set_block(text, f"{inner}\n\n{entry}" if inner else entry),
                                               rel)
                except WriteConflict as exc:
                    raise EngineError(str(exc)) from exc
            if enc == "utf-8-sig":
                new = "\ufeff" + new
            expected = sha
        try:
            run.write(rel, new, step=CAPTURE_KIND, sources=[srel], expected_sha=expected)
        except WriteConflict:
            continue
        return cur is None
    raise EngineError(f"{rel} kept changing while appending; try again")


def append_user_messages_verbatim(engine, session_id: str, messages: Iterable[ChatMessage | dict]) -> CaptureResult:
    """The no-LLM quick-capture journal: append the user's ``messages`` verbatim to ``daily/<date>/capture.md``.

    ``date`` is each message's day in the app timezone. A new capture card gets frontmatter ``name: Capture
    <date>`` and a description; each message is appended as a ``**HH:MM** · [[<session record>|chat]]`` line
    followed by its text unchanged (inside reme's block at the end once the user owns the card: see the module
    doc). Only ``role == "user"`` messages with text are captured, each id once (catalog
    ``capture``), so calling this again with the whole transcript is harmless. Writes are journaled (run kind
    ``capture``), atomic and conflict-checked (a concurrent edit of the card is kept). The day index is refreshed
    when a card is created, and written cards are re-indexed. Raises EngineError (bad session id, unreadable card)
    and ValueError for malformed messages. Needs no writer lock: the append is optimistic and retried.
    """
    from ..engine import EngineError

    try:
        sid = valid_session_id(session_id)
    except ValueError as exc:
        raise EngineError(str(exc)) from exc
    settings = engine.settings
    tz = settings.tzinfo()
    srel = session_rel(settings.layers, sid)
    res = CaptureResult(sid)
    batch = [_as_message(m) for m in messages]
    with engine.write_lock:
        raw = engine.store.catalog_get(CAPTURE_CATALOG).get(srel)
        try:
            done = list(json.loads(raw)) if raw else []
        except (ValueError, TypeError):
            done = []
        seen = set(done)
        by_date: dict[str, list[ChatMessage]] = {}
        for m in batch:
            if m.role != "user" or not m.content.strip() or m.id in seen:
                res.skipped += 1
                continue
            seen.add(m.id)
            by_date.setdefault(m.time(tz).date().isoformat(), []).append(m)
        if not by_date:
            return res
        run = engine.journal.start_run(engine.vault, CAPTURE_KIND,
                                       {"session_id": sid, "messages": sum(map(len, by_date.values()))})
        res.run_id = run.run_id
        try:
            for date, ms in by_date.items():
                rel = f"{_day_folder(engine, date)}/{CAPTURE_STEM}.md"
                created = _append_block(engine, run, rel, _capture_head(date),
                                        "".join(_capture_block(m, tz, srel) for m in ms), srel)
                res.paths.append(rel)
                if created:
                    res.created.append(rel)
                res.appended += len(ms)
                done.extend(m.id for m in ms)
                engine.store.catalog_set(CAPTURE_CATALOG, {srel: json.dumps(done[-CAPTURE_IDS_KEPT:])})
        except BaseException:
            run.finish("failed", {"paths": res.paths, "appended": res.appended})
            raise
        run.finish("ok", {"paths": res.paths, "appended": res.appended, "created": res.created})
        for rel in res.created:
            try:
                engine.daily_reindex(rel.split("/")[-2])
            except EngineError:
                pass  # the day page is the user's to fix; the capture itself is saved
        engine.index_paths(res.paths)
    return res
