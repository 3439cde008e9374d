"""Line breaking for Chinese/Japanese/Korean text.

Rich and Textual wrap at whitespace only, so a run of CJK text with no spaces is one "word": mixed with Latin it
jumps to the next line whole and leaves a ragged half-empty line (``扩产周期 12–18`` / ``个月，供需错配…``). CJK
text may break between any two characters, except that closing punctuation (，。）」…) must not start a line and
opening punctuation (（「“…) must not end one.

:func:`enable_cjk_line_breaking` swaps the word patterns of Rich's wrapper (used by Textual's ``Content``, hence
the Markdown widget, Static, OptionList) and of Textual's document wrapper (TextArea soft wrap) for ones that make
each CJK character (with its trailing closing / leading opening punctuation) a word of its own. Latin text is
chunked exactly as before. Both are module-level patterns read at call time, so replacing them is enough; the
swap is skipped when a future version renames them.
"""

from __future__ import annotations

import re

_CJK = (
    "\u3005-\u3007\u3021-\u3029\u3040-\u30ff\u3105-\u312f\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
)
_OPEN = "（［｛「『【〈《〔〖〘〚“‘"
_CLOSE = "、。，．：；！？）］｝」』】〉》〕〗〙〛”’…‥・ー％〜"
#: One CJK "word": optional opening punctuation, one character, its closing punctuation.
_CJK_WORD = rf"[{_OPEN}]*[{_CJK}][{_CLOSE}]*"
#: A non-CJK word: non-space characters up to (not including) where a CJK word starts.
_OTHER_WORD = rf"(?:(?![{_OPEN}]*[{_CJK}])\S)+"

#: Replacement for ``rich._wrap.re_word`` (``\s*\S+\s*``).
RICH_WORD = re.compile(rf"\s*(?:{_CJK_WORD}|{_OTHER_WORD})\s*")
#: Replacement for ``textual._wrap.re_chunk`` (``\S+\s*|\s+``).
TEXTUAL_CHUNK = re.compile(rf"(?:{_CJK_WORD}|{_OTHER_WORD})\s*|\s+")


def enable_cjk_line_breaking() -> bool:
    """Let wrapped text break between CJK characters (idempotent). Returns True when both patterns were set."""
    done = 0
    try:
        import rich._wrap as rich_wrap

        if isinstance(getattr(rich_wrap, "re_word", None), re.Pattern):
            rich_wrap.re_word = RICH_WORD
            done += 1
    except ImportError:  # pragma: no cover
        pass
    try:
        import textual._wrap as textual_wrap

        if isinstance(getattr(textual_wrap, "re_chunk", None), re.Pattern):
            textual_wrap.re_chunk = TEXTUAL_CHUNK
            done += 1
    except ImportError:  # pragma: no cover
        pass
    return done == 2
