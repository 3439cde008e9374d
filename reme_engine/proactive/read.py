"""proactive_read: read the day's proactive topics and agenda (seeds 000/001, DESIGN §6). Never writes anything.

Parameters, result fields and failure modes follow the seed:

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

Reading rules (decisions where the seed is silent are marked *):

- YAML is loaded without YAML 1.1 implicit typing (only ``null`` is recognised), so ids such as ``012345670123``
  and titles such as ``NO`` stay the text the file holds; ``confidence`` is parsed as a number, ``version`` as an
  int, booleans (``resolved``, ``push``) from true/yes/on/1, date fields normalised to ISO ``YYYY-MM-DD``
  (timestamps to ISO 8601). Everything in the result is JSON-serialisable.
- A topic is valid when it is a mapping with a non-empty ``title``. *A ``confidence`` that is present but not a
  number in [0, 1] makes the topic invalid (dropped).
- Dropped: topics below ``min_confidence``; topics with ``resolved: true`` or ``status`` ``resolved`` /
  ``suppressed``; topics whose id (or, for entries without id, title) is listed in the file's ``suppressed``.
- Agenda items are kept, in file order, only when their ``topic_id`` names a kept topic (so items of resolved,
  suppressed, low-confidence or unknown topics, and items without ``topic_id``, are filtered out). ``agenda`` is
  None (absent from :meth:`ProactiveReadResult.to_dict`) when the file has no ``agenda`` key.
- Topic/agenda dicts hold the known keys in canonical order, then any other keys of the file (as text).
  *v1 topics get no synthesised ``id``.
- *A non-mapping top level (e.g. a bare list or a scalar) is an error; an empty file is a valid file with no topics.
- ``horizon_days > 1`` *: topics come from the truth source ``daily/_proactive.yaml`` (a mapping with ``topics``,
  same fields), keeping those whose ``last_evidence_at`` (else ``first_seen``) lies in the ``horizon_days`` days
  ending at ``date`` (inclusive; later dates excluded; topics with neither date dropped); the same filters apply.
  The agenda then comes from the day file when it exists and parses (filtered against the kept topics).
  ``path``/``content``/``summary`` name the truth source. When the truth source does not exist, the day file is
  read exactly as with ``horizon_days=1``; an unparseable truth source is an error (no silent fallback).
- The answer of a successful read is the JSON text of ``{"summary", "topics", ["agenda"], ["content"]}``
  (``ensure_ascii=False``, indent 2), as in the seed's example.
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
    """Result of :func:`proactive_read` (field meanings as in seed 001 "Return Value").

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

    def to_dict(self) -> dict:
        """Plain dict; ``agenda``, ``content`` and ``error`` are omitted when None."""
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


def _confidence(v: Any) -> float | None:
    """Parsed confidence, or None when invalid."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        c = float(str(v).strip())
    except ValueError:
        return None
    if math.isnan(c) or c < 0 or c > 1:
        return None
    return c


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


def _topics(data: dict, *, min_confidence: float) -> list[dict]:
    sup_ids, sup_titles = _suppressed_keys(data)
    raw_topics = data.get("topics")
    out: list[dict] = []
    for raw in raw_topics if isinstance(raw_topics, list) else []:
        if not isinstance(raw, dict):
            continue
        title = _scalar_text(raw.get("title"))
        if not title or not title.strip():
            continue
        fixed: dict[str, Any] = {"title": title.strip()}
        if "confidence" in raw and raw["confidence"] is not None:
            conf = _confidence(raw["confidence"])
            if conf is None:
                continue
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


def _agenda(data: dict, topics: list[dict]) -> list[dict] | None:
    if "agenda" not in data or data["agenda"] is None:
        return None
    kept = {t["id"] for t in topics if "id" in t}
    out: list[dict] = []
    items = data["agenda"]
    for raw in items if isinstance(items, list) else []:
        if not isinstance(raw, dict):
            continue
        tid = (_scalar_text(raw.get("topic_id")) or "").strip()
        if not tid or tid not in kept:
            continue
        status = (_scalar_text(raw.get("status")) or "").strip().casefold()
        if status in _RESOLVED_STATUSES or ("resolved" in raw and _bool(raw["resolved"])):
            continue
        out.append(_ordered(raw, AGENDA_KEYS, {"topic_id": tid}))
    return out


def _version(data: dict) -> int | None:
    if "version" not in data or data["version"] is None:
        return 1
    try:
        return int(str(data["version"]).strip())
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------------- reading


@dataclass
class _Loaded:
    text: str
    data: dict


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
    vault = Path(vault)
    try:
        day = resolve(vault, f"{daily}/{date}/interests.yaml")
        truth = resolve(vault, f"{daily}/{TRUTH_SOURCE_NAME}")
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
    version = _version(loaded.data)
    topics = _topics(loaded.data, min_confidence=min_conf)
    agenda = _agenda(loaded.data, topics)
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
    version = _version(loaded.data)
    topics = []
    for t in _topics(loaded.data, min_confidence=min_conf):
        when = _date_of(t.get("last_evidence_at")) or _date_of(t.get("first_seen"))
        if when is not None and start <= when <= end:
            topics.append(t)
    agenda = None
    try:
        day_loaded = _read_yaml(day.abs, day.rel, max_bytes)
        agenda = _agenda(day_loaded.data, topics)
    except (FileNotFoundError, _InvalidFile):
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
    )
