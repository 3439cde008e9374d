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
from operator import add as _concat
from itertools import chain
from typing import Callable, Protocol

#: Bump when the rules below change: it is part of the fingerprint.
RULES_VERSION = 3

# CJK Unified Ideographs (+ Ext A, compatibility), Hiragana/Katakana, Hangul syllables.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_RUN_RE = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)
_CJK_RUN_RE = re.compile(rf"[{_CJK}]+")
_chain_lists = chain.from_iterable
#: Latin/digit runs of text without CJK (:data:`_RUN_RE`'s second half).
_LATIN_RUN_RE = re.compile(rf"[^\W_{_CJK}]+")
#: UTF-8 bytes → ASCII letters lower-cased, other ASCII non-alphanumerics → space, bytes ≥ 0x80 kept.
_ASCII_WORD_TABLE = bytes(
    (c | 0x20 if 65 <= c <= 90 else c) if (c >= 128 or chr(c).isalnum()) else 32 for c in range(256)
)
#: Runs (CJK or Latin) and pieces (:meth:`MixedTokenizer.tokenize`) whose tokens are remembered per tokenizer, in
#: two caches of at most this many entries (titles, headings and breadcrumbs recur in every chunk of a note; 55 % of
#: the CJK runs of both real vaults are repeats, and most Latin words). Cleared when full: bounded memory.
_CACHE_MAX = 100_000
#: Only runs and pieces up to this many characters are kept in the caches (a pathological 1 MB run must not be kept).
_CACHED_RUN_CHARS = 64

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
        #: run of :data:`_RUN_RE` -> its tokens (CJK: jieba words minus stop-words, then bigrams; Latin: the
        #: lower-cased word, or none for a stop-word or an over-long run)
        self._runs: dict[str, list[str]] = {}
        #: whitespace-free piece of a lower-cased text (see tokenize) -> its tokens
        self._pieces: dict[str, list[str]] = {}
        self.backend = backend or "custom"
        self.fingerprint = f"mixed-v{RULES_VERSION}-{self.backend}"

    def tokenize(self, text: str) -> list[str]:
        """Tokens of ``text`` (see class doc). Linear in ``len(text)``."""
        if text.isascii():  # NFKC-stable and no CJK: Latin words only
            stop, cap = EN_STOPWORDS, MAX_LATIN_LEN
            return [w for w in _latin_words(text) if len(w) <= cap and w not in stop]
        if not unicodedata.is_normalized("NFKC", text):  # 25x cheaper than normalize() on normalised text
            text = unicodedata.normalize("NFKC", text)
        # ASCII letters lower-cased and other ASCII non-alphanumerics made spaces in one C pass, then split at
        # whitespace: every boundary of a piece is one of _RUN_RE's runs, an ASCII piece is one Latin word and the
        # rest (Chinese clauses, "café") are cut into runs. Each distinct piece's tokens are worked out once per
        # tokenizer (pieces recur: identifiers, headings, breadcrumbs), so the per-piece work of a text is a set
        # difference and dict lookups in C; Python only sees pieces new to the cache (issue 12: 2.0 s -> 0.9 s of
        # the doocs corpus's tokenising).
        raw = text.encode("utf-8", "surrogatepass")
        low = raw.translate(_ASCII_WORD_TABLE).decode("utf-8", "surrogatepass")
        if len(raw) - len(text) > len(text) // 2:
            # mostly CJK (3 UTF-8 bytes a character: over a quarter of the text): its pieces are clauses, as
            # distinct as its runs, so the runs are found at once and only the run cache is used
            runs = _RUN_RE.findall(low)
            cache = self._runs
            if len(cache) >= _CACHE_MAX:
                cache.clear()
            fresh = set(runs).difference(cache)
            long_runs = self._add_runs(fresh) if fresh else ()
            out = list(_chain_lists(map(cache.__getitem__, runs)))
            for r in long_runs:  # a pathological 1 MB run must not be kept
                del cache[r]
            return out
        pieces = low.split()
        cache = self._pieces
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        fresh = set(pieces).difference(cache)
        if not fresh:
            return list(_chain_lists(map(cache.__getitem__, pieces)))
        long_pieces = self._add_pieces(fresh)
        out = list(_chain_lists(map(cache.__getitem__, pieces)))
        for p in long_pieces:  # a pathological 1 MB piece must not be kept
            del cache[p]
        return out

    def _add_pieces(self, pieces) -> list[str]:
        """Put the tokens of each of ``pieces`` (distinct whitespace-free pieces of a lower-cased text, not cached
        yet) into the piece cache; returns those longer than :data:`_CACHED_RUN_CHARS` (the caller removes them)."""
        cache, runs_cache = self._pieces, self._runs
        en_stop, cap = EN_STOPWORDS, MAX_LATIN_LEN
        long_pieces = []
        mixed = []
        for p in pieces:
            if len(p) > _CACHED_RUN_CHARS:
                long_pieces.append(p)
            if p.isascii():  # [a-z0-9]+: one Latin run, already lower-cased
                cache[p] = [] if len(p) > cap or p in en_stop else [p]
            else:
                mixed.append((p, _RUN_RE.findall(p)))
        if mixed:
            if len(runs_cache) >= _CACHE_MAX:
                runs_cache.clear()
            fresh = set(_chain_lists(r for _, r in mixed)).difference(runs_cache)
            long_runs = self._add_runs(fresh) if fresh else ()
            get = runs_cache.__getitem__
            for p, runs in mixed:
                cache[p] = list(_chain_lists(map(get, runs)))
            for r in long_runs:
                del runs_cache[r]
        return long_pieces

    def _add_runs(self, runs) -> list[str]:
        """Put the tokens of each of ``runs`` (distinct runs of :data:`_RUN_RE`, not cached yet) into the run cache;
        returns those longer than :data:`_CACHED_RUN_CHARS` (the caller removes them after use)."""
        cache = self._runs
        zh_stop, en_stop, cap = ZH_STOPWORDS, EN_STOPWORDS, MAX_LATIN_LEN
        is_cjk = _CJK_RUN_RE.match
        long_runs = []
        cjk = []
        for part in runs:
            n = len(part)
            if n > _CACHED_RUN_CHARS:
                long_runs.append(part)
            if not is_cjk(part):
                w = part.lower()  # a run of one script: lower-casing it whole is lower-casing each run (ASCII too)
                cache[part] = [] if len(w) > cap or w in en_stop else [w]
            elif n == 1:
                cache[part] = [part]
            else:
                cjk.append(part)
        if not cjk:
            return long_runs
        for part, words in zip(cjk, self._cut_runs(cjk)):
            ws = [w for w in words if len(w) > 1 and w not in zh_stop]
            bigrams = list(map(_concat, part, part[1:]))  # the n-1 character bigrams, made in C
            ws += bigrams if zh_stop.isdisjoint(bigrams) else [bg for bg in bigrams if bg not in zh_stop]
            cache[part] = ws
        return long_runs

    def _cut_runs(self, runs: list[str]) -> list[list[str]]:
        """The segmenter's words of each CJK run of ``runs``, in order. One call over the runs joined by newlines
        (a newline ends a block for jieba and jieba-rs and comes back as a word of its own: the same words as a
        call per run, checked on both real vaults; one call per run cost twice the time); per run when the
        words do not split back into as many runs (a segmenter that treats newlines otherwise)."""
        cut = self._cut
        if cut is None:
            cut = self._cut = _rjieba_cut()
        if len(runs) == 1:
            return [cut(runs[0])]
        segs = "\x00".join(cut("\n".join(runs))).split("\x00\n\x00")
        if len(segs) != len(runs):
            return [cut(r) for r in runs]
        return [s.split("\x00") for s in segs]

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
