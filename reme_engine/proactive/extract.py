"""Step 1, extract (ARCHITECTURE §11.1.1 ``proactive_extract_step``): find the daily Markdown that changed since the
last refresh and turn it into topic candidates with one LLM call (one retry on an unusable reply).

Inputs (the daily input set of ARCHITECTURE §11.2.1, per date of the window): ``<daily>/<d>.md`` and
``<daily>/<d>/**/*.md`` for the ``scan_days`` dates ending at ``date``. ``interests.yaml`` and ``_proactive.yaml`` are
not Markdown and never inputs, so earlier proactive output cannot feed back into extraction. Hidden files/folders are
ignored.

Change detection uses the refresh's own file catalog ``proactive`` (``{path: content sha}``, ARCHITECTURE §5): a file is
changed when its sha differs from the checkpoint. Files the keyword fallback consumed are checkpointed as
``keyword:<sha>`` so that a later run with an LLM still extracts them.

Budgets: each file is cut at ``max_chars_per_file``; files are taken newest day first until ``max_total_chars``;
files left over are not consumed (not checkpointed), so the next run picks them up. The first file is always
taken (cut to the budget) so every run makes progress.

LLM reply (JSON or YAML, parsed leniently)::

    {"topics": [{"title", "reason", "kind", "confidence", "evidence", "paths", "same_as", "status"}]}

Paths the LLM names are validated against the files it was shown (``.md`` may be omitted, ``[[…]]`` is
stripped); a topic left without a valid path is dropped. A reply is *unusable* when it holds no parseable data,
does not match the schema, or names topics none of which survives validation; then the step retries once with
the reason, and fails (``ExtractError``) when the retry is unusable too.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from reme_engine.llm.client import Message, UsageTally
from reme_engine.llm.structured import StructuredReplyError, parse_reply
from reme_engine.markdown.links import parse_links
from reme_engine.vault.daily import day_page_path, strip_day_index
from reme_engine.vault.io import SkipFile, read_text
from reme_engine.vault.paths import VaultPathError, is_hidden, resolve, to_rel

from ..prompts import load_prompt
from . import llm_io
from .model import (
    KEYWORD_KIND,
    KEYWORD_MARK,
    OPEN,
    RESOLVED,
    Candidate,
    DailyFile,
    ProactiveParams,
    Topic,
    window_days,
)

STEP = "proactive_extract"


class ExtractError(Exception):
    """The extract step produced no usable reply (after its one retry). Message names the reason."""


# --------------------------------------------------------------------------------------------------- scanning


@dataclass
class ScanResult:
    """Daily Markdown of the window (newest day first, then path) and files skipped with a reason."""

    files: list[DailyFile]
    skipped: list[dict] = field(default_factory=list)


def scan_window(vault: Path, daily_dir: str, date: str, scan_days: int, max_bytes: int,
                card_dir: str = "", layers=None) -> ScanResult:
    """Read every daily Markdown file of the ``scan_days`` dates ending at ``date``: the day page (named by the
    daily-note format of ``layers``, :func:`~reme_engine.vault.daily.day_page_path`; ``<daily_dir>/<date>.md``
    without them), the cards of ``<daily_dir>/<date>/`` and, when given, of ``<card_dir>/<date>/`` (the app
    folder's cards)."""
    daily_dir = daily_dir.strip("/") or "daily"
    card_dir = card_dir.strip("/")
    out: list[DailyFile] = []
    skipped: list[dict] = []
    for day in window_days(date, scan_days):
        rels: list[str] = []
        folders = []
        try:
            page_rel = day_page_path(layers, daily_dir, day)
            page = resolve(vault, page_rel) if page_rel else None
            if page is not None and page.abs.is_file():
                rels.append(page.rel)
            for d in dict.fromkeys(x for x in (daily_dir, card_dir) if x):
                folders.append(resolve(vault, f"{d}/{day}"))
        except VaultPathError as exc:
            skipped.append({"path": f"{daily_dir}/{day}", "reason": str(exc)})
            continue
        for folder in folders:
            if not folder.abs.is_dir():
                continue
            found = []
            for dp, dns, fns in os.walk(folder.abs):
                dns[:] = [d for d in dns if not d.startswith(".")]
                for n in fns:
                    if n.endswith(".md") and not n.startswith("."):
                        found.append(to_rel(vault, Path(dp) / n))
            rels.extend(sorted(found))
        for rel in rels:
            if is_hidden(rel):
                continue
            try:
                vp = resolve(vault, rel)  # refuses symlinks leaving the vault
                tf = read_text(vp.abs, max_bytes)
            except (VaultPathError, SkipFile) as exc:
                skipped.append({"path": rel, "reason": getattr(exc, "reason", None) or str(exc)})
                continue
            except OSError:
                continue  # vanished meanwhile
            out.append(DailyFile(rel, day, tf.sha, tf.text, is_page=page is not None and rel == page.rel))
    return ScanResult(out, skipped)


def changed_files(files: list[DailyFile], catalog: dict[str, str], *, keyword_mode: bool) -> list[DailyFile]:
    """Files whose sha differs from the checkpoint. An LLM run ignores keyword-only checkpoints."""
    out = []
    for f in files:
        seen = catalog.get(f.path)
        if seen is not None and keyword_mode and seen.startswith(KEYWORD_MARK):
            seen = seen[len(KEYWORD_MARK):]
        if seen != f.sha:
            out.append(f)
    return out


def note_text(f: DailyFile) -> str:
    """The text worth reading: the app's generated day index (links to the cards, which are inputs themselves)
    removed."""
    return strip_day_index(f.text)


def is_blank(f: DailyFile) -> bool:
    """True when the note says nothing (empty, or only frontmatter/whitespace/headings)."""
    body = note_text(f)
    lines = body.splitlines()
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() in ("---", "..."):
                lines = lines[i + 1:]
                break
    return not any(ln.strip() and not ln.lstrip().startswith("#") and ln.strip() != "---" for ln in lines)


@dataclass
class Budgeted:
    """Files to show the LLM (``text`` cut to the budgets) and files deferred to the next run."""

    shown: list[tuple[DailyFile, str]]
    deferred: list[DailyFile]


def apply_budget(files: list[DailyFile], max_chars_per_file: int, max_total_chars: int) -> Budgeted:
    shown: list[tuple[DailyFile, str]] = []
    deferred: list[DailyFile] = []
    used = 0
    for f in files:
        t = note_text(f)
        if len(t) > max_chars_per_file:
            t = t[:max_chars_per_file] + "\n[… cut at max_chars_per_file]"
        if used + len(t) > max_total_chars:
            if shown:
                deferred.append(f)
                continue
            t = t[: max(0, max_total_chars)] + "\n[… cut at max_total_chars]"
        shown.append((f, t))
        used += len(t)
    return Budgeted(shown, deferred)


# --------------------------------------------------------------------------------------------------- paths


def clean_path(raw: Any) -> str:
    """An LLM-named path in plain form: quotes and backticks removed, a whole-string link (``[[p|alias]]``,
    ``[t](p)``) reduced to its target by the one link parser, ``./`` dropped, NFC."""
    s = str(raw or "").strip().strip("`'\"").strip()
    links = parse_links(s)
    if len(links) == 1 and links[0].original == s and links[0].target:
        s = links[0].target
    s = s.replace("\\", "/").strip()
    while s.startswith("./"):
        s = s[2:]
    return unicodedata.normalize("NFC", s.lstrip("/"))


def validate_paths(raw: Any, allowed: set[str]) -> list[str]:
    """The paths of ``raw`` (a string or list) that name an allowed file (``.md`` optional), deduplicated."""
    items = raw if isinstance(raw, list) else [raw]
    out: list[str] = []
    for item in items:
        if isinstance(item, (dict, list)) or item is None:
            continue
        p = clean_path(item)
        for cand in (p, p + ".md"):
            if cand in allowed and cand not in out:
                out.append(cand)
                break
    return out


# --------------------------------------------------------------------------------------------------- LLM


class _ExtractTopic(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: Any = None
    reason: Any = None
    kind: Any = None
    confidence: Any = None
    evidence: Any = None
    paths: Any = None
    same_as: Any = None
    status: Any = None


class ExtractReply(BaseModel):
    """``{"topics": [...]}``; a bare list is read as the topic list."""

    model_config = ConfigDict(extra="ignore")

    topics: list[_ExtractTopic]

    @model_validator(mode="before")
    @classmethod
    def _wrap(cls, data: Any) -> Any:
        if isinstance(data, list):
            return {"topics": data}
        if isinstance(data, dict) and "topics" not in data:
            for key in ("interests", "candidates", "items"):
                if isinstance(data.get(key), list):
                    return {"topics": data[key]}
        return data


#: The step's system prompt (``prompts/extract.en.md``).
SYSTEM = load_prompt(Path(__file__).with_name("prompts"), "extract", "en")


@dataclass
class ExtractInput:
    """What the extract step reads: the run ``date``, the changed files (already budgeted), the known topics of the
    truth source (for ``same_as``), the output ``language`` and the parameters."""

    date: str
    files: list[tuple[DailyFile, str]]
    known: list[Topic]
    language: str
    params: ProactiveParams


@dataclass
class ExtractOutput:
    """Validated candidates, plus ``dropped`` (one line per topic discarded in validation) and the raw replies."""

    candidates: list[Candidate]
    dropped: list[str] = field(default_factory=list)
    attempts: int = 0


def build_prompt(inp: ExtractInput) -> str:
    days = sorted({f.day for f, _ in inp.files})
    parts = [f"Today is {inp.date}. Notes changed since the last refresh (dates {days[0]} … {days[-1]}).",
             llm_io.language_rule(inp.language), ""]
    if inp.known:
        parts.append("Known topics (id — title — last evidence — reason):")
        for t in inp.known:
            parts.append(f"- {t.id} — {t.title} — {t.last_evidence_at} — {t.reason[:200]}")
        parts.append("")
    parts.append("Notes:")
    for f, text in inp.files:
        parts.append(f"=== path: {f.path} (date {f.day})")
        parts.append(text.rstrip())
        parts.append(f"=== end of {f.path}")
    return "\n".join(parts)


def _validate(reply: ExtractReply, allowed: set[str], known_ids: set[str]) -> tuple[list[Candidate], list[str]]:
    out: list[Candidate] = []
    dropped: list[str] = []
    for raw in reply.topics:
        title = llm_io.text(raw.title, 200)
        if not title:
            dropped.append("topic without a title")
            continue
        paths = validate_paths(raw.paths, allowed)
        ev = validate_paths(raw.evidence, allowed)
        for p in ev:
            if p not in paths:
                paths.insert(0, p)
        if not paths:
            dropped.append(f"{title!r}: no path among the notes shown ({raw.paths!r})")
            continue
        kind = llm_io.token(raw.kind, "follow_up")
        if kind == KEYWORD_KIND:
            kind = "follow_up"  # reserved for the fallback
        same = llm_io.text(raw.same_as, 40) or None
        status = RESOLVED if llm_io.token(raw.status, OPEN) in ("resolved", "done", "closed") else OPEN
        out.append(Candidate(
            title=title,
            reason=llm_io.text(raw.reason, 600),
            kind=kind,
            confidence=llm_io.confidence(raw.confidence, 0.5),
            evidence=ev[0] if ev else paths[0],
            paths=paths,
            same_as=same if same in known_ids else None,
            status=status,
        ))
    return out, dropped


def run_extract(llm, inp: ExtractInput, tally: UsageTally) -> ExtractOutput:
    """One LLM call, one retry on an unusable reply. Raises LLMError (transport) or ExtractError (unusable twice)."""
    allowed = {f.path for f, _ in inp.files}
    known_ids = {t.id for t in inp.known}
    messages = [Message("user", build_prompt(inp))]
    last_error = ""
    for attempt in (1, 2):
        reply = llm_io.complete(llm, messages, system=SYSTEM, step=STEP, tally=tally,
                                timeout=inp.params.llm_timeout_seconds)
        try:
            parsed = parse_reply(reply.text, ExtractReply)
            cands, dropped = _validate(parsed, allowed, known_ids)
            if parsed.topics and not cands:
                raise StructuredReplyError("no topic names a path among the notes shown: " + "; ".join(dropped[:3]),
                                           reply.text)
            return ExtractOutput(cands, dropped, attempt)
        except StructuredReplyError as exc:
            last_error = str(exc)
            if attempt == 2:
                break
            messages = messages + [
                Message("assistant", reply.text.strip()[:4000] or "(empty reply)"),
                Message("user", f"That reply was unusable: {last_error}. Answer again with only the JSON object "
                                "described above; use note paths exactly as given."),
            ]
    raise ExtractError(f"extract reply unusable after one retry: {last_error}")
