"""The quote guard: card text that quotes assistant-only text verbatim is dropped (ARCHITECTURE §6).

Only what the user said is evidence; an assistant reply repeated word for word is not.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Iterable

from ..text import CJK
from .reply import CardReply

#: Verbatim-quote guard: a run of this many tokens shared with assistant text …
QUOTE_NGRAM = 6
#: … of which at least this many tokens never occur in the user's messages or the existing card.
QUOTE_NOVEL_TOKENS = 2

_CJK = CJK
_TOKEN_RE = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; each CJK character is one token (so Chinese quotes are caught too)."""
    return _TOKEN_RE.findall(unicodedata.normalize("NFKC", text).lower())


def _ngrams(toks: list[str], n: int) -> Iterable[tuple[str, ...]]:
    return (tuple(toks[i : i + n]) for i in range(len(toks) - n + 1))


class QuoteGuard:
    """Detects card text that quotes assistant-only text verbatim.

    A text "quotes" when it shares a run of :data:`QUOTE_NGRAM` consecutive tokens with a context (assistant/system)
    message, that run does not occur in the allowed texts (the user's messages, the existing card), and at least
    :data:`QUOTE_NOVEL_TOKENS` of its tokens occur nowhere in the allowed texts. The second condition keeps the guard
    from firing on an assistant's paraphrase of what the user said.
    """

    def __init__(self, context_texts: Iterable[str], allowed_texts: Iterable[str]) -> None:
        vocab: set[str] = set()
        allowed: set[tuple[str, ...]] = set()
        for t in allowed_texts:
            toks = tokens(t)
            vocab.update(toks)
            allowed.update(_ngrams(toks, QUOTE_NGRAM))
        self.forbidden: set[tuple[str, ...]] = set()
        for t in context_texts:
            for ng in _ngrams(tokens(t), QUOTE_NGRAM):
                if ng not in allowed and sum(tok not in vocab for tok in ng) >= QUOTE_NOVEL_TOKENS:
                    self.forbidden.add(ng)

    def quotes(self, text: str) -> bool:
        return bool(self.forbidden) and any(ng in self.forbidden for ng in _ngrams(tokens(text), QUOTE_NGRAM))


_SENTENCE_RE = re.compile(r"[^.!?。！？\n]*(?:[.!?。！？]+[^\S\n]*|(?=\n)|$)|\n")


def _guard_reply(reply: CardReply, guard: QuoteGuard, dropped: list[str]) -> CardReply:
    """A copy of ``reply`` without items (timeline/notes) and sentences (current state, description) that quote."""

    def keep(item: str) -> bool:
        if guard.quotes(item):
            dropped.append(item[:200])
            return False
        return True

    current = "".join(s for s in _SENTENCE_RE.findall(reply.current_state) if s == "\n" or keep(s))
    current = re.sub(r"\n{3,}", "\n\n", current).strip()
    return CardReply(
        name=reply.name if keep(reply.name) else "",
        description=reply.description if keep(reply.description) else "",
        slug=reply.slug,
        timeline=[x for x in reply.timeline if keep(x)],
        current_state=current,
        notes=[x for x in reply.notes if keep(x)],
    )
