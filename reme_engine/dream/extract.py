"""Step 1 of auto_dream — extract (ARCHITECTURE §11.2.2, §11.3.2 "Phase 1").

:func:`scan_changed` finds the daily Markdown files of a ``scan_days`` window ending at ``date``
(``daily/<d>.md`` and ``daily/<d>/**/*.md``; never ``interests.yaml`` / ``_proactive.yaml``, which are not
Markdown and belong to proactive refresh) whose content hash differs from the dream catalog
(``store.catalog_get("dream")``: path → sha of what dream last consumed). It packs each changed file once, capped
per file and in total (:class:`Budget`); files beyond the total budget are deferred to the next run.

:func:`extract_units` makes ONE LLM call over the packed files and returns validated :class:`Unit` s: bucket routed
(unknown → ``wiki``, as ARCHITECTURE §11.2.2 says), every path checked against the changed-input set (unknown paths
dropped, a unit left without a path dropped). An unusable reply is retried once with the parse error; an
:class:`~reme_engine.llm.client.LLMError` or a second unusable reply raises :class:`ExtractFailed`.
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..llm.client import LLMError, Message, UsageTally
from ..llm.structured import StructuredReplyError, extract_data
from ..markdown.frontmatter import parse_frontmatter
from ..vault.daily import day_page_path, strip_day_index, valid_date
from ..vault.app_folder import cards_dir
from ..vault.io import SkipFile, read_text
from ..vault.paths import VaultPathError, is_hidden, resolve, to_rel
from .models import BUCKETS, DreamInput, ExtractReply, Unit
from .prompt import render
from .safety import clean_llm_path, link_key

CATALOG = "dream"
#: Never inputs: proactive refresh owns these (ARCHITECTURE §6 Decision).
EXCLUDED_NAMES = {"interests.yaml", "_proactive.yaml"}
#: Below this many characters of remaining budget a long file is deferred instead of cut to a stub.
MIN_SLICE = 500

_BUCKET_ALIASES = {
    "personal": {"person", "personal", "profile", "user", "preference", "preferences", "me", "self", "people",
                 "个人", "用户", "偏好", "画像"},
    "procedure": {"procedure", "procedures", "procedural", "method", "methods", "howto", "how-to", "how to",
                  "runbook", "runbooks", "playbook", "steps", "process", "方法", "流程", "步骤", "方法论"},
    "wiki": {"wiki", "knowledge", "concept", "concepts", "general", "fact", "facts", "知识", "通用", "概念"},
}


class ExtractFailed(Exception):
    """Extract could not produce units (LLM error or unusable reply twice). Nothing may be written or checkpointed."""


@dataclass
class Budget:
    """Cost bounds of one run. Characters, not tokens: cheap to count, and ~4 chars/token (en) / ~1.5 (zh)."""

    max_chars_per_file: int = 8_000
    max_total_chars: int = 60_000
    max_units: int = 20
    #: Characters of a unit's own inputs sent to its integrate call.
    max_unit_chars: int = 16_000
    #: Digest nodes offered to integrate per unit, and characters of each node's excerpt.
    max_candidates: int = 5
    #: Extra candidates from the wikilink graph: digest nodes one hop from the top ``graph_seeds`` search hits
    #: that search did not rank (ARCHITECTURE §11.3.2 "search + traverse"): a node the best match links to is often the
    #: one to refine, with no words in common with the unit.
    max_graph_candidates: int = 2
    graph_seeds: int = 2
    excerpt_chars: int = 1_200
    #: A reply that does not parse is asked for again this many times (extract and each integrate).
    structured_retries: int = 1
    #: After this many LLM errors in a row the remaining units are skipped (the endpoint is down).
    max_consecutive_llm_errors: int = 3


@dataclass
class ScanResult:
    """Changed inputs of the window. ``changed``: packed for the LLM; ``trivial``: changed but empty (a day page
    that is only the generated index) — checkpointed without an LLM call; ``deferred``: over the total budget;
    ``vanished``: catalog entries of the window whose file is gone; ``skipped``: ``{path, reason}`` unreadable."""

    dates: list[str]
    scanned: list[str] = field(default_factory=list)
    changed: list[DreamInput] = field(default_factory=list)
    trivial: dict[str, str] = field(default_factory=dict)
    deferred: list[str] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)


@dataclass
class ExtractResult:
    """``units``: validated units within the unit budget; ``overflow``: valid units over it (their inputs are
    not checkpointed); ``dropped``: one line per dropped unit or path; ``reply_attempts``: LLM calls made."""

    units: list[Unit]
    overflow: list[Unit] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    reply_attempts: int = 0


# -- scan ------------------------------------------------------------------------------------------------------
def window(date: str, scan_days: int) -> list[str]:
    """The ``scan_days`` dates ending at ``date``, oldest first (``scan_days`` clamped to 1…366)."""
    end = _dt.date.fromisoformat(valid_date(date))
    n = max(1, min(366, int(scan_days or 1)))
    return [(end - _dt.timedelta(days=i)).isoformat() for i in range(n - 1, -1, -1)]


def daily_files(vault: Path, daily_dir: str, dates: list[str], card_dir: str = "", layers=None) -> list[str]:
    """Vault paths of the day page (named by the daily-note format of ``layers``,
    :func:`~reme_engine.vault.daily.day_page_path`; ``<daily>/<d>.md`` without them) and ``<daily>/<d>/**/*.md``
    for each date (hidden entries skipped, symlinks leaving the vault skipped), day page first, then cards sorted."""
    root = Path(vault).resolve()
    out: list[str] = []
    for d in dates:
        try:
            page_rel = day_page_path(layers, daily_dir, d)
            page = resolve(root, page_rel) if page_rel else None
            if page is not None and page.abs.is_file():
                out.append(page.rel)
            folders = [resolve(root, f"{x}/{d}") for x in dict.fromkeys(y for y in (daily_dir, card_dir) if y)]
        except VaultPathError:
            continue
        cards = []
        for dp, dns, fns in (w for f in folders if f.abs.is_dir() for w in os.walk(f.abs)):
            dns[:] = [x for x in dns if not x.startswith(".")]
            for fn in fns:
                if fn.startswith(".") or fn in EXCLUDED_NAMES or not fn.lower().endswith(".md"):
                    continue
                try:
                    rel = to_rel(root, Path(dp) / fn)
                    vp = resolve(root, rel)  # refuses symlinks out of the vault
                except (ValueError, VaultPathError):
                    continue
                if vp.abs.is_file() and not is_hidden(rel):
                    cards.append(rel)
        out.extend(sorted(cards))
    return out




def _is_trivial(text: str) -> bool:
    """No content besides frontmatter, headings and blank lines."""
    body = text[parse_frontmatter(text).body_offset:]
    return not any(ln.strip() and not ln.lstrip().startswith("#") for ln in body.splitlines())


def _cut(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters at a line end when one is near, with a visible marker."""
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", int(limit * 0.8), limit)
    cut = cut if cut > 0 else limit
    return text[:cut].rstrip() + f"\n[truncated: {cut:,} of {len(text):,} characters shown]\n"


def scan_changed(engine, date: str, scan_days: int = 1, budget: Budget | None = None) -> ScanResult:
    """Changed daily inputs of the window, compared with the dream catalog (no LLM, no writes)."""
    budget = budget or Budget()
    dates = window(date, scan_days)
    layers = engine.settings.layers
    daily_dir = layers.daily_dir.strip("/") or "daily"
    res = ScanResult(dates)
    catalog = engine.store.catalog_get(CATALOG)
    card_dir = cards_dir(layers)  # the app's cards: the app folder in an existing vault
    res.scanned = daily_files(engine.vault, daily_dir, dates, card_dir, layers)
    present = set(res.scanned)
    day_pages = {p for p in (day_page_path(layers, daily_dir, d) for d in dates) if p}
    folders = tuple(f"{x}/{d}/" for x in {daily_dir, card_dir} for d in dates)
    res.vanished = sorted(p for p in catalog if (p in day_pages or p.startswith(folders)) and p not in present)
    remaining = budget.max_total_chars
    for rel in res.scanned:
        try:
            tf = read_text(engine.vault / rel, engine.settings.max_file_bytes)
        except SkipFile as exc:
            res.skipped.append({"path": rel, "reason": exc.reason})
            continue
        except OSError as exc:
            res.skipped.append({"path": rel, "reason": f"unreadable: {exc.strerror or exc}"})
            continue
        if catalog.get(rel) == tf.sha:
            continue
        text = strip_day_index(tf.text) if rel in day_pages else tf.text
        if _is_trivial(text):
            res.trivial[rel] = tf.sha
            continue
        per_file = min(len(text), budget.max_chars_per_file)
        if per_file > remaining and remaining < MIN_SLICE:
            res.deferred.append(rel)
            continue
        shown = _cut(text, min(budget.max_chars_per_file, remaining))
        remaining -= min(len(shown), remaining)
        res.changed.append(DreamInput(rel, tf.sha, shown, truncated=len(shown) != len(text)))
    return res


# -- units -----------------------------------------------------------------------------------------------------
def normalize_bucket(raw: str) -> str:
    """Route a model's bucket label to personal / procedure / wiki (unknown → wiki, ARCHITECTURE §11.2.2)."""
    k = " ".join(str(raw or "").strip().lower().replace("_", " ").split())
    k = k.removeprefix("digest/").strip("/")
    if k in BUCKETS:
        return k
    for bucket, names in _BUCKET_ALIASES.items():
        if k in names or k.rstrip("s") in names:
            return bucket
    return "wiki"


def format_inputs(inputs: list[DreamInput]) -> str:
    # The header holds the bare path only: models copy it verbatim into "paths" (truncation is marked in the text).
    return "\n\n".join(f"=== FILE: {i.path} ===\n{i.text.strip()}\n=== END FILE ===" for i in inputs)


def parse_extract_reply(text: str) -> ExtractReply:
    """The reply as :class:`ExtractReply` (``{"units": […]}``, a bare list, or one unit object).
    Raises StructuredReplyError."""
    import pydantic

    data = extract_data(text)
    if isinstance(data, list):
        data = {"units": data}
    elif isinstance(data, dict) and "units" not in data and "name" in data:
        data = {"units": [data]}
    if not isinstance(data, dict) or "units" not in data:
        raise StructuredReplyError("reply has no 'units' list", text)
    try:
        return ExtractReply.model_validate(data)
    except pydantic.ValidationError as exc:
        raise StructuredReplyError(f"reply does not match the unit schema: {exc.errors()[0]['msg']}", text) from exc


def validate_units(reply: ExtractReply, inputs: list[DreamInput], max_units: int) -> ExtractResult:
    """Code-side checks of the model's units (see module doc). Duplicate units (same bucket and name) merge."""
    by_key = {link_key(i.path): i.path for i in inputs}
    res = ExtractResult(units=[])
    merged: dict[tuple[str, str], Unit] = {}
    for u in reply.units:
        name = " ".join(u.name.split())
        if not name:
            res.dropped.append("a unit without a name")
            continue
        paths: list[str] = []
        for raw in u.paths:
            p = clean_llm_path(raw)
            real = by_key.get(link_key(p)) if p else None
            if real is None:
                res.dropped.append(f"unit {name!r}: path {str(raw)[:120]!r} is not a changed input")
            elif real not in paths:
                paths.append(real)
        if not paths:
            res.dropped.append(f"unit {name!r}: no valid input path, dropped")
            continue
        bucket = normalize_bucket(u.bucket)
        key = (bucket, name.casefold())
        if key in merged:
            merged[key].paths.extend(p for p in paths if p not in merged[key].paths)
            continue
        merged[key] = Unit(name=name, bucket=bucket, summary=u.summary.strip(), paths=paths)
    units = list(merged.values())
    res.units, res.overflow = units[:max_units], units[max_units:]
    return res


def extract_units(llm, scan: ScanResult, *, date: str, hint: str, language: str, budget: Budget,
                  tally: UsageTally) -> ExtractResult:
    """ONE LLM call (plus at most ``budget.structured_retries`` re-asks) over ``scan.changed``. Raises ExtractFailed."""
    system, user = render("extract", language, date=date, hint=hint.strip() or "(none)",
                          count=len(scan.changed), inputs=format_inputs(scan.changed))
    messages = [Message("user", user)]
    attempts = 0
    while True:
        attempts += 1
        try:
            reply = llm.complete(messages, system=system, max_tokens=3000, step="extract", tally=tally)
        except LLMError as exc:
            raise ExtractFailed(f"extract: {exc}") from exc
        try:
            parsed = parse_extract_reply(reply.text)
        except StructuredReplyError as exc:
            if attempts > budget.structured_retries:
                raise ExtractFailed(f"extract: unusable reply after {attempts} attempts: {exc}") from exc
            messages = messages + [Message("assistant", reply.text or "(empty)"),
                                   Message("user", f"That reply could not be used ({exc}). Reply again with only "
                                                   'the JSON object {"units": [...]} described above.')]
            continue
        res = validate_units(parsed, scan.changed, budget.max_units)
        res.reply_attempts = attempts
        return res
