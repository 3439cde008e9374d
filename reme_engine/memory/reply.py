"""The auto-memory model reply (:class:`CardReply`) and the lenient coercion of its LLM values."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from ..text import llm_text


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


#: The engine's one lenient coercion of LLM values (kept under its old name for callers of this module).
_as_text = llm_text


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
