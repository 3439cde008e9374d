"""proactive_read: read the day's proactive topics and agenda (ARCHITECTURE §11.1, §6). Never writes anything.

Parameters, result fields and failure modes follow ARCHITECTURE §11.1.5:

=============================  ========================================================================
interests file missing         ``success=True, skipped=True, topics=[]``,
                               answer ``Skipped: interests file not found at daily/<date>/interests.yaml``
unreadable / unparseable YAML  ``success=False``, ``error`` set, answer ``Error: …``
valid file, no valid topics    ``success=True, topics=[]``
=============================  ========================================================================

File formats. v2 (``version: 2``): ``date``, ``generated_at``, ``push``, ``topics`` (``id``, ``title``, ``reason``,
``kind``, ``confidence``, ``first_seen``, ``last_evidence_at``, ``evidence``, ``paths``), ``agenda`` (``topic_id``,
``title``, ``scenario_type``, ``opener``, ``next_action``, ``preconditions``, ``delivery``, ``linked_memory``,
``order_reason``) and ``suppressed``. v1 (no ``version``): ``topics`` with ``title``, ``reason``, ``evidence``,
``keywords``, ``paths`` — read with ``confidence`` 0.5.

Reading rules (decisions where §11.1.5 is silent are marked *):

- YAML is loaded without YAML 1.1 implicit typing (only ``null`` is recognised), so ids such as ``012345670123``
  and titles such as ``NO`` stay the text the file holds; ``confidence`` is parsed as a number, ``version`` as an
  int, booleans (``resolved``, ``push``) from true/yes/on/1, date fields normalised to ISO ``YYYY-MM-DD``
  (timestamps to ISO 8601). Everything in the result is JSON-serialisable.
- Nothing the file holds is dropped silently: every coercion and every entry that cannot be read adds a line
  to ``warnings`` (``[]`` when the file is clean), beside §11.1.5's ``skipped`` and ``error``.
- A topic is a mapping with a non-empty ``title`` (*a plain string entry is read as a topic with that title,
  with a warning; other entries are skipped with a warning). *A ``confidence`` that is present but not a number
  in [0, 1] is coerced with a warning, never dropped: ``"85%"`` and numbers from 2 to 100 read as percentages,
  other out-of-range numbers are clamped to [0, 1], ``high``/``medium``/``low`` read as 0.8/0.5/0.2, anything
  else as 0.5.
- Dropped: topics below ``min_confidence``; topics with ``resolved: true`` or ``status`` ``resolved`` /
  ``suppressed``; topics whose id (or, for entries without id, title) is listed in the file's ``suppressed``.
- Agenda items are kept, in file order, only when their ``topic_id`` names a kept topic (so items of resolved,
  suppressed, low-confidence or unknown topics, and items without ``topic_id``, are filtered out). ``agenda`` is
  None (absent from :meth:`ProactiveReadResult.to_dict`) when the file has no ``agenda`` key.
- Topic/agenda dicts hold the known keys in canonical order, then any other keys of the file (as text).
  *v1 topics get no synthesised ``id``.
- *A top-level list is the older plain-list form (the list of topics): read as v1, with a warning. Any other
  non-mapping top level (a scalar) is an error; an empty file is a valid file with no topics.
- Agenda items that are not mappings, lack a ``topic_id`` or name a topic the file does not hold are left out
  with a warning (items of filtered topics are left out without one: that is the filter).
- ``horizon_days > 1`` *: topics come from the truth source ``daily/_proactive.yaml`` (a mapping with ``topics``,
  same fields), keeping those whose ``last_evidence_at`` (else ``first_seen``) lies in the ``horizon_days`` days
  ending at ``date`` (inclusive; later dates excluded; topics with neither date left out, with a warning); the
  same filters apply.
  The agenda then comes from the day file when it exists and parses (filtered against the kept topics).
  ``path``/``content``/``summary`` name the truth source. When the truth source does not exist, the day file is
  read exactly as with ``horizon_days=1``; an unparseable truth source is an error (no silent fallback).
- The answer of a successful read is the JSON text of ``{"summary", "topics", ["agenda"], ["content"]}``
  (``ensure_ascii=False``, indent 2), as in §11.1.5.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from reme_engine.config import LayerSettings
from reme_engine.vault.daily import valid_date
from reme_engine.vault.io import SkipFile, read_text
from reme_engine.vault.app_folder import proactive_dir
from reme_engine.vault.paths import VaultPathError, resolve

LEGACY_CONFIDENCE = 0.5
TRUTH_SOURCE_NAME = "_proactive.yaml"

TOPIC_KEYS = ("id", "title", "reason", "kind", "confidence", "first_seen", "last_evidence_at", "evidence", "paths")
AGENDA_KEYS = (
    "topic_id",
    "title",
    "scenario_type",
    "opener",
    "next_action",
    "preconditions",
    "delivery",
    "linked_memory",
    "order_reason",
)
_DATE_KEYS = {"first_seen", "last_evidence_at", "date", "resolved_at", "generated_at", "updated_at"}
_LIST_KEYS = {"paths", "keywords", "preconditions", "linked_memory"}
_BOOL_KEYS = {"resolved", "push"}
_RESOLVED_STATUSES = {"resolved", "suppressed", "done", "closed"}


@dataclass
class ProactiveReadResult:
    """Result of :func:`proactive_read` (field meanings as in ARCHITECTURE §11.1.5).

    ``path`` is the vault-relative file actually read (``daily/<date>/interests.yaml``, or the truth source for a
    horizon read); ``version`` is the file's format version (1 for legacy files without ``version``).
    """

    success: bool
    skipped: bool
    date: str
    path: str
    topics: list[dict] = field(default_factory=list)
    summary: str = ""
    answer: str = ""
    agenda: list[dict] | None = None
    content: str | None = None
    error: str | None = None
    version: int | None = None
    #: what was coerced or could not be read, one line each (never a silent drop); [] for a clean file
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Plain dict; ``agenda``, ``content`` and ``error`` are omitted when None; ``warnings`` is always there."""
        out: dict[str, Any] = {
            "success": self.success,
            "skipped": self.skipped,
            "date": self.date,
            "path": self.path,
            "topics": self.topics,
            "summary": self.summary,
            "answer": self.answer,
        }
        if self.agenda is not None:
            out["agenda"] = self.agenda
        if self.content is not None:
            out["content"] = self.content
        if self.error is not None:
            out["error"] = self.error
        out["version"] = self.version
        out["warnings"] = self.warnings
        return out


# --------------------------------------------------------------------------------------------------- YAML


class _PlainLoader(yaml.SafeLoader):
    """SafeLoader without YAML 1.1 implicit typing: plain scalars stay strings, except ``null``/``~``/empty."""


_PlainLoader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag in ("tag:yaml.org,2002:null", "tag:yaml.org,2002:merge")]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class _InvalidFile(Exception):
    pass


def _load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_PlainLoader)  # noqa: S506 - SafeLoader subclass


def _yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return str(problem)


# --------------------------------------------------------------------------------------------------- values


def _scalar_text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (_dt.date, _dt.datetime)):
        return v.isoformat()
    if isinstance(v, (dict, list)):
        return None
    return str(v)


def _plain(v: Any) -> Any:
    """Generic JSON-safe copy (strings, lists, dicts, None)."""
    if isinstance(v, dict):
        return {str(_scalar_text(k)): _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return _scalar_text(v)


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    return str(v).strip().lower() in ("true", "yes", "on", "1", "y")


_LOOSE_DATE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$")


def _iso(v: Any) -> str | None:
    """ISO text of a date or timestamp; the original text when it is neither."""
    s = _scalar_text(v)
    if s is None:
        return None
    s = s.strip()
    m = _LOOSE_DATE.match(s)
    if m:
        try:
            return _dt.date(int(m[1]), int(m[2]), int(m[3])).isoformat()
        except ValueError:
            return s
    try:
        return _dt.datetime.fromisoformat(s.replace(" ", "T", 1) if " " in s and "T" not in s else s).isoformat()
    except ValueError:
        return s


def _date_of(v: Any) -> _dt.date | None:
    s = _iso(v)
    if not s:
        return None
    try:
        return _dt.date.fromisoformat(s[:10])
    except ValueError:
        return None


def _str_list(v: Any) -> list:
    if v is None:
        return []
    if isinstance(v, list):
        return [_plain(x) for x in v if x is not None]
    return [_plain(v)]


def _value(key: str, v: Any) -> Any:
    if key in _DATE_KEYS:
        return _iso(v)
    if key in _LIST_KEYS:
        return _str_list(v)
    if key in _BOOL_KEYS:
        return _bool(v)
    return _plain(v)


_CONFIDENCE_WORDS = {"high": 0.8, "medium": 0.5, "med": 0.5, "mid": 0.5, "low": 0.2}


def _confidence(v: Any) -> float | None:
    """Confidence in [0, 1] coerced as :func:`_confidence_how` does; None when absent (``None``)."""
    return None if v is None else _confidence_how(v)[0]


def _confidence_how(v: Any) -> tuple[float, str | None]:
    """(confidence in [0, 1], how it was coerced or None when it already was one); see the module docstring."""
    if v is None or isinstance(v, (bool, dict, list)):
        shown = type(v).__name__ if isinstance(v, (dict, list)) else _scalar_text(v)
        return LEGACY_CONFIDENCE, f"not a number ({shown}), read as {LEGACY_CONFIDENCE}"
    text = str(v).strip()
    word = _CONFIDENCE_WORDS.get(text.casefold())
    if word is not None:
        return word, f"{text!r} read as {word}"
    percent = text.endswith("%")
    try:
        c = float(text[:-1].strip() if percent else text)
    except ValueError:
        return LEGACY_CONFIDENCE, f"{text!r} is not a number, read as {LEGACY_CONFIDENCE}"
    if math.isnan(c):
        return LEGACY_CONFIDENCE, f"{text!r} is not a number, read as {LEGACY_CONFIDENCE}"
    if percent or 2 <= c <= 100:
        c2 = min(1.0, max(0.0, c / 100))
        return c2, f"{text!r} read as a percentage: {c2:g}"
    if 0 <= c <= 1:
        return c, None
    c2 = min(1.0, max(0.0, c))
    return c2, f"{text!r} is outside [0, 1], read as {c2:g}"


def _ordered(raw: dict, keys: tuple[str, ...], fixed: dict[str, Any]) -> dict:
    out: dict[str, Any] = {}
    for k in keys:
        if k in fixed:
            out[k] = fixed[k]
        elif k in raw:
            out[k] = _value(k, raw[k])
    for k, v in raw.items():
        ks = _scalar_text(k)
        if ks is None or ks in out:
            continue
        out[ks] = _value(ks, v)
    return out


# --------------------------------------------------------------------------------------------------- topics


def _suppressed_keys(data: dict) -> tuple[set[str], set[str]]:
    ids: set[str] = set()
    titles: set[str] = set()
    sup = data.get("suppressed")
    for item in sup if isinstance(sup, list) else []:
        if isinstance(item, dict):
            tid = _scalar_text(item.get("id", item.get("topic_id")))
            if tid and tid.strip():
                ids.add(tid.strip())
            else:
                title = _scalar_text(item.get("title"))
                if title and title.strip():
                    titles.add(" ".join(title.split()).casefold())
        else:
            tid = _scalar_text(item)
            if tid and tid.strip():
                ids.add(tid.strip())
    return ids, titles


def _topic_name(i: int, raw: Any) -> str:
    tid = _scalar_text(raw.get("id")) if isinstance(raw, dict) else None
    return f"topic {i + 1}" + (f" ({tid.strip()})" if tid and tid.strip() else "")


def _topics(data: dict, *, min_confidence: float, warnings: list[str] | None = None) -> list[dict]:
    warn = warnings if warnings is not None else []
    sup_ids, sup_titles = _suppressed_keys(data)
    raw_topics = data.get("topics")
    out: list[dict] = []
    if raw_topics is not None and not isinstance(raw_topics, list):
        warn.append(f"topics is not a list ({type(raw_topics).__name__}): no topics read")
    for i, raw in enumerate(raw_topics if isinstance(raw_topics, list) else []):
        if isinstance(raw, str) and raw.strip():
            warn.append(f"{_topic_name(i, raw)} is plain text: read as a topic titled {str(raw).strip()!r}")
            raw = {"title": str(raw).strip()}
        if not isinstance(raw, dict):
            warn.append(f"{_topic_name(i, raw)} is not a mapping ({type(raw).__name__}): skipped")
            continue
        title = _scalar_text(raw.get("title"))
        if not title or not title.strip():
            warn.append(f"{_topic_name(i, raw)} has no title: skipped")
            continue
        fixed: dict[str, Any] = {"title": title.strip()}
        if "confidence" in raw and raw["confidence"] is not None:
            conf, how = _confidence_how(raw["confidence"])
            if how:
                warn.append(f"{_topic_name(i, raw)} {title.strip()!r}: confidence {how}")
        else:
            conf = LEGACY_CONFIDENCE  # v1 topics (and v2 topics missing it) read as 0.5
        fixed["confidence"] = conf
        tid = _scalar_text(raw.get("id"))
        if tid is not None and tid.strip():
            fixed["id"] = tid.strip()
        topic = _ordered(raw, TOPIC_KEYS, fixed)
        if "id" in topic and "id" not in fixed:
            del topic["id"]  # empty id
        if conf < min_confidence:
            continue
        if "resolved" in raw and _bool(raw["resolved"]):
            continue
        status = (_scalar_text(raw.get("status")) or "").strip().casefold()
        if status in _RESOLVED_STATUSES:
            continue
        if fixed.get("id") in sup_ids or (not fixed.get("id") and " ".join(title.split()).casefold() in sup_titles):
            continue
        out.append(topic)
    return out


def _topic_ids(data: dict) -> set[str]:
    raw = data.get("topics")
    return {(_scalar_text(t.get("id")) or "").strip() for t in (raw if isinstance(raw, list) else [])
            if isinstance(t, dict)}


def _agenda(data: dict, topics: list[dict], warnings: list[str] | None = None,
            known: set[str] = frozenset()) -> list[dict] | None:
    """Agenda items of ``data`` for the kept ``topics``; ``known``: other topic ids that exist (an item naming
    one of them is filtered quietly; an item naming no topic at all gets a warning)."""
    if "agenda" not in data or data["agenda"] is None:
        return None
    warn = warnings if warnings is not None else []
    kept = {t["id"] for t in topics if "id" in t}
    known = kept | set(known) | _topic_ids(data)
    out: list[dict] = []
    items = data["agenda"]
    if not isinstance(items, list):
        warn.append(f"agenda is not a list ({type(items).__name__}): no agenda items read")
    for i, raw in enumerate(items if isinstance(items, list) else []):
        if not isinstance(raw, dict):
            warn.append(f"agenda item {i + 1} is not a mapping ({type(raw).__name__}): skipped")
            continue
        tid = (_scalar_text(raw.get("topic_id")) or "").strip()
        if not tid:
            warn.append(f"agenda item {i + 1} has no topic_id: skipped")
            continue
        if tid not in known:
            warn.append(f"agenda item {i + 1} names topic {tid!r}, which the file does not hold: skipped")
            continue
        if tid not in kept:
            continue
        status = (_scalar_text(raw.get("status")) or "").strip().casefold()
        if status in _RESOLVED_STATUSES or ("resolved" in raw and _bool(raw["resolved"])):
            continue
        out.append(_ordered(raw, AGENDA_KEYS, {"topic_id": tid}))
    return out


def _version(data: dict, warnings: list[str] | None = None) -> int | None:
    if "version" not in data or data["version"] is None:
        return 1
    try:
        return int(str(data["version"]).strip())
    except ValueError:
        if warnings is not None:
            warnings.append(f"version {_scalar_text(data['version'])!r} is not a number: read as the newest format")
        return None


# --------------------------------------------------------------------------------------------------- reading


@dataclass
class _Loaded:
    text: str
    data: dict
    warnings: list[str] = field(default_factory=list)


def _read_yaml(abs_path: Path, rel: str, max_bytes: int) -> _Loaded:
    """Read and parse; raises FileNotFoundError (missing) or _InvalidFile (message for ``error``)."""
    if not abs_path.exists():
        raise FileNotFoundError(rel)
    try:
        tf = read_text(abs_path, max_bytes)
    except SkipFile as exc:
        raise _InvalidFile(f"cannot read {rel}: {exc.reason}") from exc
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _InvalidFile(f"cannot read {rel}: {exc.strerror or exc}") from exc
    try:
        data = _load_yaml(tf.text)
    except yaml.YAMLError as exc:
        err = _InvalidFile(f"invalid YAML in {rel}: {_yaml_error(exc)}")
        err.text = tf.text  # type: ignore[attr-defined]
        raise err from exc
    if data is None:
        data = {}
    if isinstance(data, list):  # the older plain-list form: the file is the list of topics
        return _Loaded(tf.text, {"topics": data},
                       [f"{rel} is in the older plain-list form: read its {len(data)} entries as topics"])
    if not isinstance(data, dict):
        err = _InvalidFile(f"invalid interests file {rel}: top level must be a mapping, got {type(data).__name__}")
        err.text = tf.text  # type: ignore[attr-defined]
        raise err
    return _Loaded(tf.text, data)


def _answer(summary: str, topics: list[dict], agenda: list[dict] | None, content: str | None) -> str:
    body: dict[str, Any] = {"summary": summary, "topics": topics}
    if agenda is not None:
        body["agenda"] = agenda
    if content is not None:
        body["content"] = content
    return json.dumps(body, ensure_ascii=False, indent=2)


def _error(date: str, path: str, message: str, content: str | None = None) -> ProactiveReadResult:
    return ProactiveReadResult(
        success=False,
        skipped=False,
        date=date,
        path=path,
        topics=[],
        summary=message,
        answer=f"Error: {message}",
        content=content,
        error=message,
    )


def _coerce_bool(v: Any, name: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "yes", "on", "1", "false", "no", "off", "0"):
        return v.strip().lower() in ("true", "yes", "on", "1")
    if isinstance(v, int):
        return bool(v)
    raise ValueError(f"{name} must be a boolean, got {v!r}")


def proactive_read(
    vault: Path,
    *,
    date: str = "",
    include_content: bool = True,
    horizon_days: int = 1,
    min_confidence: float = 0.4,
    today: str,
    layers: LayerSettings | None = None,
    max_bytes: int = 2_000_000,
) -> ProactiveReadResult:
    """Read ``<daily_dir>/<date>/interests.yaml`` (or the truth source for ``horizon_days > 1``).

    ``date`` "" means ``today`` (the caller passes today's date in the app's timezone). Invalid parameters
    (a date that is not a real ``YYYY-MM-DD``, ``horizon_days`` < 1, ``min_confidence`` not a number) give
    ``success=False`` with ``error`` set — this function does not raise for bad input or bad files; see the
    module docstring for all rules.
    """
    requested = date if date not in (None, "") else today
    shown = requested if isinstance(requested, str) else str(requested)
    try:
        date = valid_date(requested)
    except ValueError as exc:
        return _error(shown, "", str(exc))
    try:
        include_content = _coerce_bool(include_content, "include_content")
        if isinstance(horizon_days, bool):
            raise ValueError("horizon_days must be an integer")
        horizon = int(str(horizon_days).strip()) if not isinstance(horizon_days, int) else horizon_days
        if horizon < 1:
            raise ValueError(f"horizon_days must be at least 1, got {horizon_days!r}")
        if isinstance(min_confidence, bool):
            raise ValueError("min_confidence must be a number")
        min_conf = float(min_confidence)
        if math.isnan(min_conf):
            raise ValueError("min_confidence must be a number")
    except (TypeError, ValueError) as exc:
        msg = str(exc)
        if "horizon_days" not in msg and "min_confidence" not in msg and "include_content" not in msg:
            msg = f"invalid parameter: {msg}"
        return _error(date, "", msg)

    layers = layers if layers is not None else LayerSettings()
    daily = layers.daily_dir.strip("/") or "daily"
    state = proactive_dir(layers)  # the app folder in an existing vault; files from before it are still read
    vault = Path(vault)
    try:
        day = resolve(vault, f"{state}/{date}/interests.yaml")
        truth = resolve(vault, f"{state}/{TRUTH_SOURCE_NAME}")
        if state != daily:
            old_day = resolve(vault, f"{daily}/{date}/interests.yaml")
            old_truth = resolve(vault, f"{daily}/{TRUTH_SOURCE_NAME}")
            day = day if day.abs.exists() or not old_day.abs.exists() else old_day
            truth = truth if truth.abs.exists() or not old_truth.abs.exists() else old_truth
    except VaultPathError as exc:
        return _error(date, "", f"invalid daily folder: {exc}")

    if horizon > 1 and truth.abs.exists():
        return _read_truth(day, truth, date, horizon, min_conf, include_content, max_bytes)
    return _read_day(day, date, min_conf, include_content, max_bytes)


def _read_day(day, date: str, min_conf: float, include_content: bool, max_bytes: int) -> ProactiveReadResult:
    rel = day.rel
    try:
        loaded = _read_yaml(day.abs, rel, max_bytes)
    except FileNotFoundError:
        msg = f"interests file not found at {rel}"
        return ProactiveReadResult(
            success=True, skipped=True, date=date, path=rel, topics=[], summary=msg, answer=f"Skipped: {msg}"
        )
    except _InvalidFile as exc:
        return _error(date, rel, str(exc), getattr(exc, "text", None) if include_content else None)
    warnings = loaded.warnings
    version = _version(loaded.data, warnings)
    topics = _topics(loaded.data, min_confidence=min_conf, warnings=warnings)
    agenda = _agenda(loaded.data, topics, warnings)
    content = loaded.text if include_content else None
    summary = f"Read {len(topics)} proactive topic(s) from {rel}"
    return ProactiveReadResult(
        success=True,
        skipped=False,
        date=date,
        path=rel,
        topics=topics,
        summary=summary,
        answer=_answer(summary, topics, agenda, content),
        agenda=agenda,
        content=content,
        version=version,
        warnings=warnings,
    )


def _read_truth(day, truth, date: str, horizon: int, min_conf: float, include_content: bool, max_bytes: int):
    rel = truth.rel
    try:
        loaded = _read_yaml(truth.abs, rel, max_bytes)
    except FileNotFoundError:  # vanished since the exists() check
        return _read_day(day, date, min_conf, include_content, max_bytes)
    except _InvalidFile as exc:
        return _error(date, rel, str(exc), getattr(exc, "text", None) if include_content else None)
    end = _dt.date.fromisoformat(date)
    start = end - _dt.timedelta(days=horizon - 1)
    warnings = loaded.warnings
    version = _version(loaded.data, warnings)
    topics = []
    undated = []
    for t in _topics(loaded.data, min_confidence=min_conf, warnings=warnings):
        when = _date_of(t.get("last_evidence_at")) or _date_of(t.get("first_seen"))
        if when is None:
            undated.append(t["title"])
        elif start <= when <= end:
            topics.append(t)
    if undated:
        warnings.append(f"{len(undated)} topic(s) of {rel} have no readable first_seen/last_evidence_at, so no "
                        f"horizon can hold them: {', '.join(repr(x) for x in undated[:5])}")
    agenda = None
    try:
        day_loaded = _read_yaml(day.abs, day.rel, max_bytes)
        warnings.extend(day_loaded.warnings)
        agenda = _agenda(day_loaded.data, topics, warnings, known=_topic_ids(loaded.data))
    except FileNotFoundError:
        agenda = None
    except _InvalidFile as exc:
        warnings.append(f"agenda not read: {exc}")
        agenda = None
    content = loaded.text if include_content else None
    summary = f"Read {len(topics)} proactive topic(s) from {rel} ({horizon}-day horizon ending {date})"
    return ProactiveReadResult(
        success=True,
        skipped=False,
        date=date,
        path=rel,
        topics=topics,
        summary=summary,
        answer=_answer(summary, topics, agenda, content),
        agenda=agenda,
        content=content,
        version=version,
        warnings=warnings,
    )
