"""Step 2, topics (ARCHITECTURE §11.1.1 ``proactive_topics_step``): merge the candidates into the truth source
``<daily>/_proactive.yaml``, carry topics forward, and choose the day's topics and push candidates.

Identity — a candidate is the *same* topic as a known one (and updates it instead of adding a duplicate) when,
in this order: the LLM named the known id in ``same_as``; the normalised titles are equal; the cosine similarity
of the embedder's ``title + "\\n" + reason`` vectors is ≥ ``known_threshold`` (best match wins); for
keyword-fallback candidates (whose boilerplate reason embeds poorly), a known keyword topic with overlapping
keywords (Jaccard ≥ 0.5 or the same lead keyword), else a known LLM topic sharing an evidence path whose title or
reason mentions one of the keywords. Candidates of one run are first merged with each other by the first three
rules (plus keyword overlap). Without an embedder the similarity rule is skipped.

Measured meaning of ``known_threshold`` with the offline USE-multilingual model (the reference value 0.85 of
ARCHITECTURE §11.1.1 was calibrated for text-embedding-v4): only near-verbatim restatements reach 0.85 (same title,
reworded reason: 0.84–0.86); the same concern reworded day to day scores 0.36–0.78 (cross-lingual zh/en up to 0.80),
distinct concerns of one domain up to 0.59. So the default for that space is 0.62
(:data:`~reme_engine.proactive.model.KNOWN_THRESHOLDS`, from ``tests/data/topic_pairs.yaml``), and the LLM's ``same_as``
and the exact-title rule still carry most of the identity work.

Updates keep ``id``, ``title`` and ``first_seen`` (stable for the user); the newest ``reason``, ``kind`` and
``confidence`` win, except that a keyword-fallback candidate never overwrites an LLM topic's wording (it only adds
evidence) while an LLM candidate upgrades a keyword topic (title included). ``paths`` are merged newest first
(at most 10), ``last_evidence_at`` is the newest evidence date, ``first_seen`` the oldest.

State: ``status`` ``open`` | ``resolved`` | ``suppressed``. A topic becomes resolved when the extract step says so,
when the user sets ``status`` in the truth source, or when the user marks it in a day file of the carry-forward
window (``resolved: true`` / ``status: resolved|done|closed|suppressed`` on a topic, or its id/title listed in
``suppressed`` without ``status: skipped_today``; an unknown id+title listed there is remembered as a held topic).
Day files are read for marks only when they differ from the app's last journaled write, so an old app-written file never
re-applies a state the user has since changed in the truth source. *Resolved and suppressed topics stay so when new
evidence arrives (decision: ARCHITECTURE §11.1.4, ours; the reference is silent; the evidence is still recorded; reopen
a topic by setting ``status: open`` in ``_proactive.yaml``).

Rebuild: when ``_proactive.yaml`` is missing or unreadable, it is rebuilt from the v2 day files of the
carry-forward window (oldest first, later wording wins, dates widen) before this run's candidates are merged.

Carry forward: topics not touched by this run stay while ``date - last_evidence_at ≤ carry_forward_days``, at
most ``max_carry_forward_topics`` of them (newest evidence first). Day topics: touched open topics (highest
confidence first), then carried open topics (newest first), at most ``max_topics``. Push candidates: touched open
non-keyword day topics with ``confidence ≥ min_push_confidence``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reme_engine.vault.io import SkipFile, read_text
from reme_engine.vault.paths import VaultPathError, resolve

from .model import (
    INTERESTS_NAME,
    KEYWORD_KIND,
    OPEN,
    RESOLVED,
    SKIPPED_TODAY,
    SUPPRESSED,
    TRUTH_NAME,
    Candidate,
    ProactiveParams,
    Topic,
    day_of_path,
    days_between,
    normalize_title,
    topic_id,
    window_days,
)
from .read import _bool, _confidence, _iso, _load_yaml, _scalar_text

MAX_PATHS = 10
_RESOLVED_WORDS = {"resolved", "done", "closed"}


# --------------------------------------------------------------------------------------------------- parsing


def _s(v: Any) -> str:
    return (_scalar_text(v) or "").strip()


def topic_from_dict(raw: Any) -> Topic | None:
    """A Topic from a truth-source or v2 day-file mapping; None without ``id``/``title``."""
    if not isinstance(raw, dict):
        return None
    tid, title = _s(raw.get("id")), _s(raw.get("title"))
    if not tid or not title:
        return None
    conf = _confidence(raw.get("confidence"))
    paths_raw = raw.get("paths")
    paths = [_s(p) for p in (paths_raw if isinstance(paths_raw, list) else [paths_raw]) if _s(p)]
    status = _s(raw.get("status")).casefold()
    if status in _RESOLVED_WORDS or ("resolved" in raw and _bool(raw["resolved"])):
        status = RESOLVED
    elif status != SUPPRESSED:
        status = OPEN
    kw = raw.get("keywords")
    return Topic(
        id=tid, title=title, reason=_s(raw.get("reason")), kind=_s(raw.get("kind")) or "follow_up",
        confidence=0.5 if conf is None else conf,
        first_seen=(_iso(raw.get("first_seen")) or "")[:10], last_evidence_at=(_iso(raw.get("last_evidence_at")) or "")[:10],
        evidence=_s(raw.get("evidence")) or (paths[0] if paths else ""), paths=paths, status=status,
        status_at=(_iso(raw.get("status_at")) or "")[:10], status_reason=_s(raw.get("status_reason")),
        keywords=[_s(k) for k in kw if _s(k)] if isinstance(kw, list) else [],
        updated_on=(_iso(raw.get("updated_on")) or "")[:10],
    )


@dataclass
class _YamlFile:
    rel: str
    sha: str | None
    data: dict | None
    error: str | None = None


def _read_yaml_file(vault: Path, rel: str, max_bytes: int) -> _YamlFile:
    try:
        vp = resolve(vault, rel)
    except VaultPathError as exc:
        return _YamlFile(rel, None, None, str(exc))
    if not vp.abs.is_file():
        return _YamlFile(vp.rel, None, None)
    try:
        tf = read_text(vp.abs, max_bytes)
    except (SkipFile, OSError) as exc:
        return _YamlFile(vp.rel, None, None, getattr(exc, "reason", None) or str(exc))
    try:
        data = _load_yaml(tf.text)
    except Exception as exc:  # noqa: BLE001 - any YAML error: the caller decides
        return _YamlFile(vp.rel, tf.sha, None, f"invalid YAML: {str(exc).splitlines()[0]}")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return _YamlFile(vp.rel, tf.sha, None, "top level is not a mapping")
    return _YamlFile(vp.rel, tf.sha, data)


def _read_state_file(vault: Path, rel: str, old_rel: str | None, max_bytes: int) -> tuple[_YamlFile, str | None]:
    """``(file whose data to use, sha of ``rel`` for the conflict check)``: ``rel`` when it exists, else the old
    location ``old_rel`` (proactive state from before the app folder) — whose sha is not ``rel``'s, so the write
    to ``rel`` still expects no file there."""
    f = _read_yaml_file(vault, rel, max_bytes)
    if f.sha is not None or f.error or not old_rel or old_rel == rel:
        return f, f.sha
    old = _read_yaml_file(vault, old_rel, max_bytes)
    return (old if old.sha is not None else f), None


# --------------------------------------------------------------------------------------------------- truth source


@dataclass
class TruthState:
    """The truth source as read: its ``topics``; ``sha`` of the file (None when absent, for the conflict check);
    ``rebuilt`` when it was missing or unreadable and was rebuilt from the day files; ``day_sha`` of today's
    ``interests.yaml`` as read (None when absent); ``warnings``."""

    topics: list[Topic]
    sha: str | None
    rebuilt: bool
    day_sha: str | None
    warnings: list[str] = field(default_factory=list)


def truth_path(daily_dir: str) -> str:
    return f"{daily_dir.strip('/') or 'daily'}/{TRUTH_NAME}"


def interests_path(daily_dir: str, date: str) -> str:
    return f"{daily_dir.strip('/') or 'daily'}/{date}/{INTERESTS_NAME}"


def _upsert(by_id: dict[str, Topic], t: Topic) -> None:
    old = by_id.get(t.id)
    if old is None:
        by_id[t.id] = t
        return
    # later day file wins for the wording; dates widen
    if old.first_seen and (not t.first_seen or old.first_seen < t.first_seen):
        t.first_seen = old.first_seen
    if old.last_evidence_at > t.last_evidence_at:
        t.last_evidence_at = old.last_evidence_at
    if old.status != OPEN and t.status == OPEN:
        t.status, t.status_at, t.status_reason = old.status, old.status_at, old.status_reason
    by_id[t.id] = t


def load_truth(vault: Path, daily_dir: str, date: str, params: ProactiveParams, *, max_bytes: int,
               app_written_sha=None, state_dir: str | None = None) -> TruthState:
    """Read ``_proactive.yaml`` (rebuilding it from the day files when missing or unreadable) and apply the user's
    resolved/suppressed marks found in day files of the carry-forward window.

    ``app_written_sha(rel) -> sha | None``: the app's last journaled write of a path (None: never written);
    day files equal to it carry no user marks and are skipped for marks.

    ``state_dir``: where the state files live (:func:`reme_engine.vault.app_folder.proactive_dir`; default the
    daily folder); files still in the daily folder from before the app folder are read when the new ones are
    absent.
    """
    warnings: list[str] = []
    state = (state_dir or daily_dir).strip("/") or "daily"
    old = daily_dir if state != (daily_dir.strip("/") or "daily") else None
    tf, truth_sha = _read_state_file(vault, truth_path(state), old and truth_path(old), max_bytes)
    day, day_sha = _read_state_file(vault, interests_path(state, date), old and interests_path(old, date), max_bytes)
    rebuilt = False
    by_id: dict[str, Topic] = {}
    if tf.data is not None:
        raw = tf.data.get("topics")
        for item in raw if isinstance(raw, list) else []:
            t = topic_from_dict(item)
            if t is not None:
                _upsert(by_id, t)
    else:
        rebuilt = True
        if tf.error:
            warnings.append(f"{tf.rel}: {tf.error}; rebuilt from the day files")
    days = sorted(window_days(date, params.carry_forward_days + 1))
    day_files = [_read_state_file(vault, interests_path(state, d), old and interests_path(old, d), max_bytes)[0]
                 for d in days]
    if rebuilt:
        for f in day_files:
            items = (f.data or {}).get("topics")
            for item in items if isinstance(items, list) else []:
                t = topic_from_dict(item)
                if t is not None:
                    if not t.last_evidence_at:
                        t.last_evidence_at = day_of_path(f.rel, state) or day_of_path(f.rel, daily_dir) or ""
                    _upsert(by_id, t)
    for f in day_files:
        if f.data is None or f.sha is None:
            continue
        if not rebuilt and app_written_sha is not None and app_written_sha(f.rel) == f.sha:
            continue
        _absorb_marks(f.data, by_id, f.rel, state if day_of_path(f.rel, state) else daily_dir)
    return TruthState(list(by_id.values()), truth_sha, rebuilt, day_sha, warnings)


def _absorb_marks(data: dict, by_id: dict[str, Topic], rel: str, daily_dir: str) -> None:
    """Apply a day file's resolved/suppressed marks to the truth topics (by id, else by normalised title)."""
    by_title = {normalize_title(t.title): t for t in by_id.values()}
    when = day_of_path(rel, daily_dir) or ""

    def find(tid: str, title: str) -> Topic | None:
        return by_id.get(tid) if tid else by_title.get(normalize_title(title)) if title else None

    def mark(t: Topic | None, status: str, reason: str) -> None:
        if t is not None and t.status == OPEN:
            t.status, t.status_at, t.status_reason = status, when, reason

    topics = data.get("topics")
    for raw in topics if isinstance(topics, list) else []:
        if not isinstance(raw, dict):
            continue
        st = _s(raw.get("status")).casefold()
        if ("resolved" in raw and _bool(raw["resolved"])) or st in _RESOLVED_WORDS:
            mark(find(_s(raw.get("id")), _s(raw.get("title"))), RESOLVED, _s(raw.get("reason")))
        elif st == SUPPRESSED:
            mark(find(_s(raw.get("id")), _s(raw.get("title"))), SUPPRESSED, _s(raw.get("reason")))
    sup = data.get("suppressed")
    for item in sup if isinstance(sup, list) else []:
        if isinstance(item, dict):
            st = _s(item.get("status")).casefold()
            if st == SKIPPED_TODAY:
                continue  # the plan step's decision for that day only
            status = RESOLVED if st in _RESOLVED_WORDS else SUPPRESSED
            tid, title = _s(item.get("id", item.get("topic_id"))), _s(item.get("title"))
            t = find(tid, title)
            if t is None and tid and title:
                # a held topic the truth source does not know (yet): remember it so it is not raised again
                t = Topic(id=tid, title=title, reason=_s(item.get("reason")), first_seen=when, last_evidence_at=when)
                by_id[tid] = t
                by_title[normalize_title(title)] = t
            mark(t, status, _s(item.get("reason")))
        else:
            mark(find(_s(item), ""), SUPPRESSED, "")


# --------------------------------------------------------------------------------------------------- matching


def _vectors(embedder, texts: list[str], warnings: list[str]):
    if embedder is None or not texts:
        return None
    try:
        return embedder.embed(texts)
    except Exception as exc:  # noqa: BLE001 - a failing remote embedder must not fail the refresh
        warnings.append(f"embedder failed ({exc}); known topics matched by title only")
        return None


def _kw_overlap(a: list[str], b: list[str]) -> bool:
    if not a or not b:
        return False
    sa, sb = {k.casefold() for k in a}, {k.casefold() for k in b}
    return a[0].casefold() == b[0].casefold() or len(sa & sb) / len(sa | sb) >= 0.5


def _mentions(kw: str, text: str, words: list[str]) -> bool:
    """CJK keywords by substring; Latin ones when each of their words starts a word of the text
    ("left knee sore" is mentioned by "left knee got sore", "knee" by "Knee soreness")."""
    if not kw.isascii():
        return kw in text
    parts = re.findall(r"[a-z0-9]+", kw)
    return bool(parts) and all(any(w.startswith(p) for w in words) for p in parts)


def _mentioned_in(members: list[Candidate], truth: list[Topic]) -> Topic | None:
    """For keyword candidates (whose boilerplate reason embeds poorly): the known topic that shares an evidence
    path and whose title/reason mentions the most of the candidate's keywords (at least one)."""
    paths = {p for c in members for p in c.paths}
    kws = [k.casefold() for c in members for k in c.keywords]
    best, hits = None, 0
    for t in truth:
        if not paths & set(t.paths):
            continue
        text = f"{t.title}\n{t.reason}".casefold()
        words = re.findall(r"[a-z0-9]+", text)
        n = sum(1 for k in kws if _mentions(k, text, words))
        if n > hits:
            best, hits = t, n
    return best


def embed_text(title: str, reason: str) -> str:
    """The text a topic is embedded as for the known-topic check."""
    return f"{title}\n{reason}".strip()


@dataclass
class TopicsInput:
    """``candidates`` of this run, the ``truth`` topics as loaded, the run ``date``, ``params``, the ``embedder``
    (``engine.embedder``; None = no similarity rule) and the ``daily_dir`` (to date evidence paths)."""

    date: str
    candidates: list[Candidate]
    truth: list[Topic]
    params: ProactiveParams
    embedder: Any
    daily_dir: str


@dataclass
class TopicsOutput:
    """``truth``: the new truth-source topics (touched first, then carried); ``day_topics``: open topics for the
    day file; ``push_candidates``; ``held``: resolved/suppressed topics (listed in the day file's ``suppressed``);
    ``touched``: ``{id: "new" | "updated"}``; ``similarities``: ``(candidate title, known id, cosine)`` of each
    embedding comparison's best match (diagnostics); ``warnings``."""

    truth: list[Topic]
    day_topics: list[Topic]
    push_candidates: list[Topic]
    held: list[Topic]
    touched: dict[str, str]
    similarities: list[tuple[str, str, float]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _evidence_day(rel: str, daily_dir: str) -> str | None:
    """The day of an evidence path: evidence comes from the scan window only, so a card of the app folder
    (``<app>/daily/<date>/…``) is dated by its day folder just as one of the daily folder is."""
    day = day_of_path(rel, daily_dir)
    parts = rel.split("/")
    for i in range(1, len(parts) - 1):
        day = day or day_of_path(rel, "/".join(parts[:i]))
    return day


def _evidence_days(paths: list[str], daily_dir: str, fallback: str) -> list[str]:
    days = [d for d in (_evidence_day(p, daily_dir) for p in paths) if d]
    return sorted(days) or [fallback]


def _merge_candidates(cands: list[Candidate], vecs, threshold: float) -> list[list[int]]:
    """Groups of candidate indexes describing the same topic (first member leads)."""
    groups: list[list[int]] = []
    for i, c in enumerate(cands):
        home = None
        for g in groups:
            lead = cands[g[0]]
            if (c.same_as and c.same_as == lead.same_as) or normalize_title(c.title) == normalize_title(lead.title):
                home = g
            elif vecs is not None and float(vecs[i] @ vecs[g[0]]) >= threshold:
                home = g
            elif c.kind == KEYWORD_KIND and lead.kind == KEYWORD_KIND and _kw_overlap(c.keywords, lead.keywords):
                home = g
            if home is not None:
                break
        if home is None:
            groups.append([i])
        else:
            home.append(i)
    return groups


def _apply(t: Topic, group: list[Candidate], date: str, daily_dir: str) -> None:
    lead = group[0]
    llm_cand = lead.kind != KEYWORD_KIND
    if llm_cand:
        if t.kind == KEYWORD_KIND:  # an LLM reading upgrades a keyword guess
            t.title = lead.title
            t.keywords = []
        if lead.reason:
            t.reason = lead.reason
        t.kind = lead.kind
        t.confidence = max(c.confidence for c in group)
    elif t.kind == KEYWORD_KIND:
        t.reason = lead.reason or t.reason
        t.confidence = max(c.confidence for c in group)
        merged = list(dict.fromkeys(lead.keywords + t.keywords))
        t.keywords = merged[:8]
    new_paths = [p for c in group for p in c.paths]
    t.paths = list(dict.fromkeys(new_paths + t.paths))[:MAX_PATHS]
    t.evidence = lead.evidence
    days = _evidence_days(new_paths, daily_dir, date)
    t.last_evidence_at = max(t.last_evidence_at or days[-1], days[-1])
    t.first_seen = min(t.first_seen or days[0], days[0])
    if any(c.status == RESOLVED for c in group) and t.status == OPEN:
        t.status, t.status_at = RESOLVED, date
        t.status_reason = next((c.reason for c in group if c.status == RESOLVED), "")
    t.updated_on = date


def _new_topic(group: list[Candidate], date: str, daily_dir: str, taken: set[str]) -> Topic:
    lead = group[0]
    paths = list(dict.fromkeys(p for c in group for p in c.paths))[:MAX_PATHS]
    days = _evidence_days(paths, daily_dir, date)
    t = Topic(
        id=topic_id(lead.title, taken), title=lead.title, reason=lead.reason, kind=lead.kind,
        confidence=max(c.confidence for c in group), first_seen=days[0], last_evidence_at=days[-1],
        evidence=lead.evidence, paths=paths, keywords=list(lead.keywords), updated_on=date,
    )
    if any(c.status == RESOLVED for c in group):
        t.status, t.status_at = RESOLVED, date
        t.status_reason = next((c.reason for c in group if c.status == RESOLVED), "")
    return t


def run_topics(inp: TopicsInput) -> TopicsOutput:
    """Merge, carry forward and select (see module doc). Pure apart from the embedder call."""
    p = inp.params
    warnings: list[str] = []
    cands = inp.candidates
    truth = [Topic(**vars(t)) for t in inp.truth]  # copies: the input stays as read
    cvecs = _vectors(inp.embedder, [embed_text(c.title, c.reason) for c in cands], warnings)
    tvecs = _vectors(inp.embedder, [embed_text(t.title, t.reason) for t in truth], warnings) if cvecs is not None else None
    groups = _merge_candidates(cands, cvecs, p.known_threshold)
    known = list(truth)
    by_id = {t.id: t for t in truth}
    by_title = {normalize_title(t.title): t for t in truth}
    touched: dict[str, str] = {}
    sims: list[tuple[str, str, float]] = []
    order: list[str] = []
    for g in groups:
        members = [cands[i] for i in g]
        lead = members[0]
        match = next((by_id[c.same_as] for c in members if c.same_as and c.same_as in by_id), None)
        if match is None:
            match = next((by_title[normalize_title(c.title)] for c in members
                          if normalize_title(c.title) in by_title), None)
        if match is None and tvecs is not None and len(known):
            scores = tvecs @ cvecs[g[0]]  # rows of tvecs are the known topics, in order
            best = int(scores.argmax())
            sims.append((lead.title, known[best].id, float(scores[best])))
            if float(scores[best]) >= p.known_threshold:
                match = known[best]
        if match is None and lead.kind == KEYWORD_KIND:
            # only topics known before this run: this run's own candidates were already merged above
            match = next((t for t in known if t.kind == KEYWORD_KIND and _kw_overlap(lead.keywords, t.keywords)),
                         None) or _mentioned_in(members, [t for t in known if t.kind != KEYWORD_KIND])
        if match is not None:
            _apply(match, members, inp.date, inp.daily_dir)
            touched.setdefault(match.id, "updated")
        else:
            match = _new_topic(members, inp.date, inp.daily_dir, set(by_id))
            truth.append(match)
            by_id[match.id] = match
            by_title.setdefault(normalize_title(match.title), match)
            touched[match.id] = "new"
        if match.id not in order:
            order.append(match.id)

    def recency(t: Topic):
        return (t.last_evidence_at or t.first_seen or "", t.confidence)

    carried = []
    for t in truth:
        if t.id in touched:
            continue
        when = t.last_evidence_at or t.first_seen
        if not when:
            continue
        try:
            age = days_between(when, inp.date)
        except ValueError:
            continue
        if age <= p.carry_forward_days:
            carried.append(t)
    carried.sort(key=recency, reverse=True)
    carried = carried[: p.max_carry_forward_topics]
    touched_topics = sorted((by_id[i] for i in order), key=lambda t: -t.confidence)
    new_truth = touched_topics + carried
    day_topics = ([t for t in touched_topics if t.active] + [t for t in carried if t.active])[: p.max_topics]
    push = [t for t in day_topics if t.id in touched and t.kind != KEYWORD_KIND
            and t.confidence >= p.min_push_confidence]
    held = [t for t in new_truth if not t.active][: p.max_topics]
    return TopicsOutput(new_truth, day_topics, push, held, touched, sims, warnings)

