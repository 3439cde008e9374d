"""Prompt files of the memory pipelines, one per step and language: ``<name>.<lang>.md`` (``lang`` = en | zh).

Kept as files beside the steps so they can be read and reviewed as prose; :func:`load_prompt` picks the variant
for the ``language`` setting and falls back to English.
"""

from __future__ import annotations

from pathlib import Path

from ...prompts import load_prompt as _load
from ...prompts import prompt_language  # noqa: F401  (re-exported: callers pick labels with it)

PROMPT_DIR = Path(__file__).resolve().parent


def load_prompt(name: str, language: str | None = "en") -> str:
    """The text of prompt ``name`` for ``language`` (English when no variant exists). FileNotFoundError if neither."""
    return _load(PROMPT_DIR, name, language)
