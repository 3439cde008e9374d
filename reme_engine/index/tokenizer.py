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
from functools import lru_cache
from typing import Callable, Protocol

#: Bump when the rules below change: it is part of the fingerprint.
RULES_VERSION = 3

# CJK Unified Ideographs (+ Ext A, compatibility), Hiragana/Katakana, Hangul syllables.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_RUN_RE = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)
_CJK_RUN_RE = re.compile(rf"[{_CJK}]+")
#: :data:`_RUN_RE` in two steps: CJK runs split the text, Latin runs are found in the stretches between them.
_CJK_SPLIT_RE = re.compile(rf"([{_CJK}]+)")
_LATIN_RUN_RE = re.compile(rf"[^\W_{_CJK}]+")
#: UTF-8 bytes → ASCII letters lower-cased, other ASCII non-alphanumerics → space, bytes ≥ 0x80 kept.
_ASCII_WORD_TABLE = bytes(
    (c | 0x20 if 65 <= c <= 90 else c) if (c >= 128 or chr(c).isalnum()) else 32 for c in range(256)
)
#: CJK runs whose jieba words are remembered per tokenizer (titles, headings and breadcrumbs recur in every chunk
#: of a note; 55 % of the runs of both real vaults are repeats). Cleared when full: bounded memory.
_WORDS_CACHE_MAX = 50_000
#: Only runs up to this many characters are cached (a pathological 1 MB run must not be kept).
_CACHED_RUN_CHARS = 64
#: Stretches between CJK runs up to this many characters are cached with their Latin tokens.
_CACHED_STRETCH_CHARS = 16

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


def _latin_words(part: str) -> list[str]:
    """Lower-cased Latin/digit runs (``[^\\W_]+``, each run lower-cased on its own) of text holding no CJK, in order.

    Every ASCII non-alphanumeric character ends a run, so one C-level pass (translate + split) over the UTF-8
    bytes finds them; only pieces holding non-ASCII characters (``café``, ``word。next``) go through the regex."""
    if part.isascii():
        return part.encode("ascii").translate(_ASCII_WORD_TABLE).decode("ascii").split()
    out: list[str] = []
    for piece in part.encode("utf-8", "surrogatepass").translate(_ASCII_WORD_TABLE).split():
        if piece.isascii():
            out.append(piece.decode("ascii"))
        else:
            out.extend(map(str.lower, _LATIN_RUN_RE.findall(piece.decode("utf-8", "surrogatepass"))))
    return out


@lru_cache(maxsize=_CACHED_RUN_CHARS + 1)
def _bigram_slices(n: int) -> tuple[slice, ...]:
    """The n-1 two-character slices of a run of n characters (runs are short: clauses between punctuation)."""
    return tuple(slice(i, i + 2) for i in range(n - 1))


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
        self._words: dict[str, list[str]] = {}  # CJK run -> its tokens: jieba words minus stop-words, bigrams
        self._latin: dict[str, list[str]] = {}  # short stretch between CJK runs ("，", "。\n\n") -> its tokens
        self.backend = backend or "custom"
        self.fingerprint = f"mixed-v{RULES_VERSION}-{self.backend}"

    def tokenize(self, text: str) -> list[str]:
        """Tokens of ``text`` (see class doc). Linear in ``len(text)``."""
        if text.isascii():  # NFKC-stable and no CJK: Latin words only
            stop, cap = EN_STOPWORDS, MAX_LATIN_LEN
            return [w for w in _latin_words(text) if len(w) <= cap and w not in stop]
        out: list[str] = []
        append, extend = out.append, out.extend
        cut = self._cut
        if cut is None:
            cut = self._cut = _rjieba_cut()
        words, latin = self._words, self._latin
        zh_stop, en_stop, cap = ZH_STOPWORDS, EN_STOPWORDS, MAX_LATIN_LEN
        if not unicodedata.is_normalized("NFKC", text):  # 25x cheaper than normalize() on normalised text
            text = unicodedata.normalize("NFKC", text)
        # split() alternates text without CJK (even items) and CJK runs (odd items), in text order: Latin runs
        # are found per stretch in C, only CJK runs are handled one by one.
        for k, part in enumerate(_CJK_SPLIT_RE.split(text)):
            if not k & 1:
                if not part:
                    continue
                # Chinese text alternates runs with punctuation ("，" is 35 % of these stretches in kg-zh):
                # short stretches are remembered with their tokens (usually none)
                ws = latin.get(part) if len(part) <= _CACHED_STRETCH_CHARS else None
                if ws is None:
                    ws = [w for w in _latin_words(part) if len(w) <= cap and w not in en_stop]
                    if len(part) <= _CACHED_STRETCH_CHARS:
                        if len(latin) >= _WORDS_CACHE_MAX:
                            latin.clear()
                        latin[part] = ws
                if ws:
                    extend(ws)
                continue
            n = len(part)
            if n == 1:
                append(part)
                continue
            ws = words.get(part)
            if ws is None:
                ws = [w for w in cut(part) if len(w) > 1 and w not in zh_stop]
                slices = _bigram_slices(n) if n <= _CACHED_RUN_CHARS else [slice(i, i + 2) for i in range(n - 1)]
                ws += [bg for bg in map(part.__getitem__, slices) if bg not in zh_stop]
                if n <= _CACHED_RUN_CHARS:
                    if len(words) >= _WORDS_CACHE_MAX:
                        words.clear()
                    words[part] = ws
            extend(ws)
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
