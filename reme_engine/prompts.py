"""The one prompt loader: prompts are files ``<folder>/<name>.<lang>.md`` beside the step that uses them.

``lang`` is ``en`` or ``zh`` (:func:`prompt_language` of the ``language`` setting); a missing variant falls back to
English. A file may hold the system prompt, a line ``<!-- user -->``, then a user-message template
(:func:`split_user`). Files are read once per process (cached).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

USER_MARK = "<!-- user -->"


def prompt_language(language: str | None) -> str:
    """``"zh"`` for any Chinese setting (``zh``, ``zh-CN``, ``zh_Hans``…), else ``"en"``."""
    return "zh" if str(language or "").lower().startswith("zh") else "en"


@lru_cache(maxsize=64)
def load_prompt(folder: Path, name: str, language: str | None = "en") -> str:
    """The text of prompt ``name`` in ``folder`` for ``language`` (English when no variant exists), stripped.
    Raises FileNotFoundError when neither file exists."""
    path = Path(folder) / f"{name}.{prompt_language(language)}.md"
    if not path.is_file():
        path = Path(folder) / f"{name}.en.md"
    return path.read_text(encoding="utf-8").strip()


def split_user(text: str) -> tuple[str, str]:
    """``(system, user template)`` of a prompt text: the parts before and after the :data:`USER_MARK` line
    (the template is "" when there is none)."""
    system, _, user = text.partition(USER_MARK)
    return system.strip(), user.strip()
