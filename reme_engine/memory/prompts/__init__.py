"""Prompt files of the memory pipelines, one per step and language: ``<name>.<lang>.md`` (``lang`` = en | zh).

Kept as files beside the steps so they can be read and reviewed as prose; :func:`load_prompt` picks the variant
for the ``language`` setting and falls back to English.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

PROMPT_DIR = Path(__file__).resolve().parent


def prompt_language(language: str | None) -> str:
    """``"zh"`` for any Chinese setting (``zh``, ``zh-CN``, ``zh_Hans``…), else ``"en"``."""
    return "zh" if str(language or "").lower().startswith("zh") else "en"


@lru_cache(maxsize=32)
def load_prompt(name: str, language: str | None = "en") -> str:
    """The text of prompt ``name`` for ``language`` (English when no variant exists). FileNotFoundError if neither."""
    lang = prompt_language(language)
    path = PROMPT_DIR / f"{name}.{lang}.md"
    if not path.is_file():
        path = PROMPT_DIR / f"{name}.en.md"
    return path.read_text(encoding="utf-8").strip()
