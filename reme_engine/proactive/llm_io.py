"""LLM plumbing shared by the extract, plan and agenda steps: a per-call deadline, output-language wording and
lenient field coercion for the steps' pydantic reply models.

Errors: :func:`complete` raises :class:`~reme_engine.llm.client.LLMError` (the SDK's own failure after its retries,
or the deadline ``llm_timeout_seconds`` of ARCHITECTURE §11.1.1 passing first).
"""

from __future__ import annotations

import re
import threading
from typing import Any, Sequence

from reme_engine.llm.client import LLMError, LLMReply, Message, UsageTally


def complete(llm, messages: Sequence[Message], *, system: str, step: str, tally: UsageTally,
             timeout: float, max_tokens: int = 4096) -> LLMReply:
    """``llm.complete`` with a wall-clock deadline of ``timeout`` seconds.

    The SDK clients carry their own per-request timeout and retries; the reference's ``llm_timeout_seconds``
    (ARCHITECTURE §11.1.1) bounds the whole call including those retries. A call still running at the deadline is
    abandoned on a daemon thread (it cannot be cancelled from outside) and reported as an LLMError.
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["reply"] = llm.complete(list(messages), system=system, max_tokens=max_tokens, step=step, tally=tally)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc
        finally:
            done.set()

    t = threading.Thread(target=run, name=f"reme-proactive-{step}", daemon=True)
    t.start()
    if not done.wait(timeout if timeout and timeout > 0 else None):
        raise LLMError(f"{step}: no reply within llm_timeout_seconds={timeout:g}")
    if "error" in box:
        exc = box["error"]
        if isinstance(exc, LLMError):
            raise exc
        raise LLMError(f"{step}: {type(exc).__name__}: {exc}") from exc
    return box["reply"]


def language_rule(language: str) -> str:
    """How generated text should be worded, from ``settings.language`` ("en" / "zh")."""
    default = "Chinese (简体中文)" if str(language).lower().startswith("zh") else "English"
    return (f"Write titles, reasons, openers and actions in the language the evidence notes are written in; "
            f"when that is mixed or unclear, use {default}. Keep names and technical terms as the notes spell them.")


_TOKEN_RE = re.compile(r"[^a-z0-9_]+")


def token(value: Any, default: str, *, max_len: int = 40) -> str:
    """A lower-case snake_case token (``kind``, ``scenario_type``, ``delivery``); ``default`` when empty."""
    s = _TOKEN_RE.sub("_", str(value or "").strip().lower()).strip("_")[:max_len]
    return s or default


def text(value: Any, max_len: int = 600) -> str:
    """One line of plain text (whitespace collapsed, cut at ``max_len``)."""
    if value is None or isinstance(value, (dict, list)):
        return ""
    s = " ".join(str(value).split())
    return s[:max_len]


def confidence(value: Any, default: float = 0.5) -> float:
    """A number in [0, 1]; percentages (e.g. 85) are scaled; anything else gives ``default``."""
    try:
        c = float(str(value).strip().rstrip("%"))
    except (TypeError, ValueError):
        return default
    if c != c:  # NaN
        return default
    if 1.0 < c <= 100.0:
        c /= 100.0
    return min(1.0, max(0.0, c))


def str_list(value: Any, max_items: int = 20) -> list[str]:
    """A list of non-empty one-line strings (a scalar becomes a one-item list)."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out = [text(x, 300) for x in items if not isinstance(x, (dict, list))]
    return [x for x in out if x][:max_items]
