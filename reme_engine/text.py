"""Small text rules the whole engine shares: the CJK table, slugs, and coercing loose values to text.

Pure functions, standard library only (importable from any layer without a cycle).
"""

from __future__ import annotations

import datetime as _dt
import re
import unicodedata
from typing import Any

# ------------------------------------------------------------------------------------------------ the CJK table
#: Regex character-class bodies (use inside ``[…]``). Han: CJK ideographs (unified, extension A, compatibility,
#: iteration marks 々〆〇 and Hangzhou numerals, extensions B–F and the supplement); kana: hiragana, katakana,
#: the phonetic extensions and half-width katakana; hangul: jamo and syllables; bopomofo.
HAN = "\u3005-\u3007\u3021-\u3029\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
KANA = "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f"
HANGUL = "\u1100-\u11ff\u3131-\u318e\uac00-\ud7af"
BOPOMOFO = "\u3105-\u312f"
#: Every CJK script: text in it has no spaces between words (each character counts as a word for quoting,
#: wrapping and bigram rules).
CJK = HAN + KANA + HANGUL + BOPOMOFO
CJK_RE = re.compile(f"[{CJK}]")
HAN_RE = re.compile(f"[{HAN}]")


def has_cjk(text: str) -> bool:
    """True when ``text`` holds a character of any CJK script (:data:`CJK`)."""
    return CJK_RE.search(text) is not None


# ------------------------------------------------------------------------------------------------ slugs
_SLUG_DROP = re.compile(r"[^\w-]+")
_DASHES = re.compile(r"-{2,}")


def slugify(text: Any, fallback: str = "note", max_chars: int = 60) -> str:
    """A file-name-safe stem: NFKC, lower-case, a trailing ``.md`` dropped, letters, digits and ``_`` of any
    script kept (Chinese names stay readable), every other run of characters one ``-``; no leading or trailing
    ``-``/``_``; at most ``max_chars`` characters; NFC. ``fallback`` when nothing is left."""
    s = unicodedata.normalize("NFKC", str(text or "")).strip().lower()
    if s.endswith(".md"):
        s = s[:-3]
    s = _DASHES.sub("-", _SLUG_DROP.sub("-", s)).strip("-_")
    s = s[:max_chars].strip("-_")
    return unicodedata.normalize("NFC", s) if s else fallback


# ------------------------------------------------------------------------------------------------ coercion
#: Keys a model uses for "the text" of an item it sent as an object (``{"text": …}``, ``{"event": …}``…).
LLM_TEXT_KEYS = ("text", "event", "note", "value", "content", "summary")


def llm_text(v: Any) -> str:
    """A value from an LLM's structured reply as text, leniently: None → ``""``; a list → its items' texts, one
    per line; an object → its first :data:`LLM_TEXT_KEYS` value, else its values joined by spaces; anything else
    ``str()``. Never raises; whitespace is kept (callers strip or collapse)."""
    if v is None:
        return ""
    if isinstance(v, (list, tuple)):
        return "\n".join(llm_text(x) for x in v if x is not None)
    if isinstance(v, dict):
        for key in LLM_TEXT_KEYS:
            if key in v:
                return llm_text(v[key])
        return " ".join(llm_text(x) for x in v.values())
    return str(v)


def yaml_text(v: Any) -> str:
    """A frontmatter (YAML) value as one line of display text: None → ``""``; dates ISO; booleans ``true`` /
    ``false`` (as YAML writes them); a list → items joined by ``", "``; a mapping → ``"k: v, …"``; whitespace
    collapsed. Never raises."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (_dt.date, _dt.datetime)):
        return v.isoformat()
    if isinstance(v, (list, tuple, set)):
        return ", ".join(t for t in (yaml_text(x) for x in v if x is not None) if t)
    if isinstance(v, dict):
        return ", ".join(f"{k}: {yaml_text(x)}" for k, x in v.items())
    return " ".join(str(v).split())
