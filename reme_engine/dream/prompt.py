"""Prompt files of the dream steps: ``prompts/<step>.<language>.md`` beside the steps (English and Chinese).

A file holds the system prompt, a line ``<!-- user -->``, then the user-message template. Templates use
``$name`` placeholders (:class:`string.Template`), so JSON braces in the prompts need no escaping. The language
comes from ``settings.language``; an unknown language falls back to English.
"""

from __future__ import annotations

import string
from pathlib import Path

from ..prompts import USER_MARK, split_user  # noqa: F401
from ..prompts import load_prompt as _load

PROMPT_DIR = Path(__file__).with_name("prompts")
LANGUAGES = ("en", "zh")


def load_prompt(step: str, language: str = "en") -> tuple[str, str]:
    """``(system, user_template)`` of ``step`` in ``language``. Raises FileNotFoundError for an unknown step."""
    return split_user(_load(PROMPT_DIR, step, language))


def render(step: str, language: str, **values: object) -> tuple[str, str]:
    """``(system, user message)`` with ``values`` substituted into both (missing names are left as written)."""
    system, user = load_prompt(step, language)
    vals = {k: str(v) for k, v in values.items()}
    return string.Template(system).safe_substitute(vals), string.Template(user).safe_substitute(vals)
