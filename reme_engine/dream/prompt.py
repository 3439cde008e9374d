"""Prompt files of the dream steps: ``prompts/<step>.<language>.md`` beside the steps (English and Chinese).

A file holds the system prompt, a line ``<!-- user -->``, then the user-message template. Templates use
``$name`` placeholders (:class:`string.Template`), so JSON braces in the prompts need no escaping. The language
comes from ``settings.language``; an unknown language falls back to English.
"""

from __future__ import annotations

import string
from functools import lru_cache
from pathlib import Path

PROMPT_DIR = Path(__file__).with_name("prompts")
USER_MARK = "<!-- user -->"
LANGUAGES = ("en", "zh")


@lru_cache(maxsize=16)
def load_prompt(step: str, language: str = "en") -> tuple[str, str]:
    """``(system, user_template)`` of ``step`` in ``language``. Raises FileNotFoundError for an unknown step."""
    lang = language if language in LANGUAGES else "en"
    text = (PROMPT_DIR / f"{step}.{lang}.md").read_text(encoding="utf-8")
    system, _, user = text.partition(USER_MARK)
    return system.strip(), user.strip()


def render(step: str, language: str, **values: object) -> tuple[str, str]:
    """``(system, user message)`` with ``values`` substituted into both (missing names are left as written)."""
    system, user = load_prompt(step, language)
    vals = {k: str(v) for k, v in values.items()}
    return string.Template(system).safe_substitute(vals), string.Template(user).safe_substitute(vals)
