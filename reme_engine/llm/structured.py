"""Lenient parsing of structured LLM replies (JSON or YAML, fenced or bare) validated against typed schemas.

Models wrap data in prose and code fences, emit trailing commas, or answer in YAML. ``extract_data`` tries, in
order: every fenced block (```json / ```yaml / ``` …), the whole reply, then the outermost ``{…}``/``[…]`` span
found by a linear bracket scan; each candidate is parsed as JSON, then as JSON with trailing commas removed, then
as YAML (safe loader). The first candidate that parses to a mapping or list wins. ``parse_reply`` then validates it
with a pydantic model, so a step receives typed data or a :class:`StructuredReplyError` saying what was wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)```", re.S)
_TRAILING_COMMA_RE = re.compile(r",(\s*[}\]])")

T = TypeVar("T")


class StructuredReplyError(ValueError):
    """The reply held no parseable data or it did not match the schema; ``reply`` keeps the raw text."""

    def __init__(self, message: str, reply: str = "") -> None:
        super().__init__(message)
        self.reply = reply


def _outer_span(text: str) -> str | None:
    """The first balanced {...} or [...] span (string-aware, linear)."""
    start = -1
    depth = 0
    in_str = False
    esc = False
    for i, ch in enumerate(text):
        if start < 0:
            if ch in "{[":
                start, depth = i, 1
            continue
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


def _try_parse(candidate: str) -> Any:
    candidate = candidate.strip()
    if not candidate:
        return None
    for attempt in (candidate, _TRAILING_COMMA_RE.sub(r"\1", candidate)):
        try:
            return json.loads(attempt)
        except ValueError:
            pass
    try:
        import yaml

        data = yaml.safe_load(candidate)
    except Exception:
        return None
    return data if isinstance(data, (dict, list)) else None


def extract_data(reply: str) -> Any:
    """The first mapping/list found in ``reply`` (see module doc). Raises StructuredReplyError."""
    candidates = [m.group(2) for m in _FENCE_RE.finditer(reply)]
    candidates.append(reply)
    span = _outer_span(reply)
    if span:
        candidates.append(span)
    for c in candidates:
        data = _try_parse(c)
        if isinstance(data, (dict, list)):
            return data
    raise StructuredReplyError("reply contains no JSON or YAML object", reply)


def parse_reply(reply: str, model: type[T]) -> T:
    """Extract data from ``reply`` and validate it as pydantic ``model``. Raises StructuredReplyError."""
    import pydantic

    data = extract_data(reply)
    try:
        return model.model_validate(data)  # type: ignore[attr-defined]
    except pydantic.ValidationError as exc:
        errs = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()[:5])
        raise StructuredReplyError(f"reply does not match {model.__name__}: {errs}", reply) from exc
