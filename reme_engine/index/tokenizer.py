"""The keyword tokenizer: jieba search-mode words + CJK character bigrams for Chinese, lower-cased Latin words.

Shared by indexing and querying so both see the same tokens (bm25s-style pluggable tokenizer: anything with
``tokenize(text) -> list[str]`` and a ``fingerprint`` works). The fingerprint names the backend, its version and
the rules; when it changes the keyword index is rebuilt.

Segmentation backend: ``rjieba`` (Rust port of jieba, same dictionary family, ~13 M chars/s and no 0.7 s
dictionary load) when importable, else ``jieba`` 0.42 (~0.3–0.5 M chars/s). Latin text never goes through jieba
(ARCHITECTURE §10.2: a user dictionary with short Latin words splits longer English words).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from typing import Callable, Protocol

#: Bump when the rules below change: it is part of the fingerprint.
RULES_VERSION = 3

# CJK Unified Ideographs (+ Ext A, compatibility), Hiragana/Katakana, Hangul syllables.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_RUN_RE = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)
_CJK_RUN_RE = re.compile(rf"[{_CJK}]+")

#: A small English stop-word list (the frequent function words; from the classic SMART/Lucene lists).
EN_STOPWORDS = frozenset(
    """a an and are as at be but by for if in into is it its no not of on or such that the their then there
    these they this to was will with we you your i me my our he she his her them which who whom what when where
    why how all any both each few more most other some than too very can just should now do does did been being
    have has had having from up down out off over under again further once here s t""".split()
)

#: Chinese function words dropped from jieba output (single characters are also dropped: bigrams cover them).
ZH_STOPWORDS = frozenset("的 了 和 是 在 也 就 都 而 及 与 或 一个 没有 我们 你们 他们 这个 那个 以及 因为 所以 但是 如果".split())

#: Longest Latin token kept; longer runs (hashes, base64) are noise for BM25.
MAX_LATIN_LEN = 40


class Tokenizer(Protocol):
    """What the keyword index needs from a tokenizer."""

    fingerprint: str

    def tokenize(self, text: str) -> list[str]: ...


def _rjieba_backend() -> str | None:
    """``rjieba-<version>`` when rjieba is installed, found without importing it (its import loads the
    dictionary: ~80 ms a process start need not pay before the first tokenisation); None otherwise."""
    import importlib.util
    from pathlib import Path

    try:
        spec = importlib.util.find_spec("rjieba")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    # Version from the dist-info folder name: importlib.metadata costs ~30 ms of start-up.
    infos = sorted(Path(spec.origin).resolve().parent.parent.glob("rjieba-*.dist-info"))
    ver = infos[-1].name[len("rjieba-") : -len(".dist-info")] if infos else "?"
    return f"rjieba-{ver}"


def _rjieba_cut() -> Callable[[str], list[str]]:
    import rjieba  # type: ignore[import-not-found]

    return rjieba.cut_for_search


def _load_segmenter() -> tuple[Callable[[str], list[str]] | None, str]:
    """``(segmenter or None = load rjieba on first use, backend name)``; jieba when rjieba is missing."""
    backend = _rjieba_backend()
    if backend is not None:
        return None, backend
    import jieba

    jieba.setLogLevel(logging.WARNING)  # its startup lines would corrupt a Textual screen
    return (lambda s: list(jieba.cut_for_search(s))), f"jieba-{jieba.__version__}"


class MixedTokenizer:
    """jieba (search mode) + CJK bigrams + Latin words.

    ``tokenize(text)`` returns tokens in text order (duplicates kept: term frequency matters for BM25).
    For a CJK run of n ≥ 2 characters it emits jieba's search-mode words (minus stop-words and single
    characters) followed by its n-1 character bigrams — the recall net for words jieba does not know; a lone
    CJK character is emitted as itself. Latin/digit runs are NFKC-normalised, lower-cased, stop-words dropped.
    """

    def __init__(self, segmenter: Callable[[str], list[str]] | None = None, backend: str | None = None) -> None:
        if segmenter is None:
            segmenter, backend = _load_segmenter()
        self._cut = segmenter  # None: rjieba, imported by the first tokenize()
        self.backend = backend or "custom"
        self.fingerprint = f"mixed-v{RULES_VERSION}-{self.backend}"

    def tokenize(self, text: str) -> list[str]:
        """Tokens of ``text`` (see class doc). Linear in ``len(text)``."""
        out: list[str] = []
        append = out.append
        cut = self._cut
        if cut is None:
            cut = self._cut = _rjieba_cut()
        text = unicodedata.normalize("NFKC", text)
        for m in _RUN_RE.finditer(text):
            run = m.group()
            first = run[0]
            if _CJK_RUN_RE.match(first):
                if len(run) == 1:
                    append(run)
                    continue
                for w in cut(run):
                    if len(w) > 1 and w not in ZH_STOPWORDS:
                        append(w)
                for i in range(len(run) - 1):
                    bg = run[i : i + 2]
                    if bg not in ZH_STOPWORDS:
                        append(bg)
            else:
                w = run.lower()
                if len(w) <= MAX_LATIN_LEN and w not in EN_STOPWORDS:
                    append(w)
        return out

    def query_tokens(self, query: str) -> list[str]:
        """Distinct tokens of a query, in order (BM25 scores each query term once)."""
        seen: dict[str, None] = {}
        for t in self.tokenize(query):
            seen.setdefault(t, None)
        return list(seen)


_DEFAULT: MixedTokenizer | None = None


def default_tokenizer() -> MixedTokenizer:
    """The process-wide default tokenizer (created on first use)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = MixedTokenizer()
    return _DEFAULT
